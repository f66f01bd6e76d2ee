//go:build goexperiment.simd && amd64

package cpu

import "unsafe"

func simdArgRun[R rule, T native](unsafe.Pointer, int) (int, int) { return 0, 0 }
func simdArgCol[R rule, T native](unsafe.Pointer, unsafe.Pointer, unsafe.Pointer, int, int) int {
	return 0
}
func simdClamp(*seg, int) int       { return 0 }
func simdClampRoute(*seg, int) int  { return 0 }
func simdClampSelect(*seg, int) int { return 0 }
