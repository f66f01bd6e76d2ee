//go:build !(goexperiment.simd && amd64)

package cpu

import (
	"unsafe"

	"github.com/pylucid/pylucid/core/dtype"
)

// Without GOEXPERIMENT=simd on amd64 the fast paths are absent: every
// function reports that it handled nothing and the generic kernels run.

// SIMDEnabled reports whether the SIMD fast paths are compiled in and usable.
func SIMDEnabled() bool { return false }

// SIMDCompiled reports whether the SIMD fast paths are compiled in: not in
// this build (Go before 1.26, GOEXPERIMENT=simd unset, or not amd64).
func SIMDCompiled() bool { return false }

func simdSelect[R rule](*seg, int, int, int, int) int  { return 0 }
func simdRoute[R rule](*seg, int) int                  { return 0 }
func simdMaskInto[R rule](*seg, int) int               { return 0 }
func simdLanes32(*[8]float32, unsafe.Pointer, int) int { return 0 }
func simdLanes64(*[8]float64, unsafe.Pointer, int) int { return 0 }

func simdSelectHalf[R rule](*seg, dtype.Dtype, int, int, int) int { return 0 }
func simdRouteHalf[R rule](*seg, dtype.Dtype) int                 { return 0 }
func simdLanesF16(*[8]float32, unsafe.Pointer, int) int           { return 0 }
func simdLanesBF16(*[8]float32, unsafe.Pointer, int) int          { return 0 }

func simdArgRun[R rule, T native](unsafe.Pointer, int) (int, int) { return 0, 0 }
func simdFind[T native](unsafe.Pointer, int, T) int               { panic("simdFind without SIMD") }
func simdVals[R rule, T native](unsafe.Pointer, int) (done int, best T, ok bool) {
	return 0, best, false
}
func simdArgCol[R rule, T native](unsafe.Pointer, unsafe.Pointer, unsafe.Pointer, int, int) int {
	return 0
}
func simdArgCol2[R rule, T native](unsafe.Pointer, unsafe.Pointer, unsafe.Pointer, int) int {
	return 0
}
func simdClamp(*seg, int) int       { return 0 }
func simdClampRoute(*seg, int) int  { return 0 }
func simdClampSelect(*seg, int) int { return 0 }

func simdArgRunHalf[R rule](unsafe.Pointer, int, int16, bool) (int, int) { return 0, 0 }
func simdClampHalf(*seg, dtype.Dtype) int                                { return 0 }
func simdClampRouteHalf(*seg, dtype.Dtype) int                           { return 0 }
func simdClampSelectHalf(*seg, dtype.Dtype) int                          { return 0 }
