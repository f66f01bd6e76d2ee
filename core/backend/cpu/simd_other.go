//go:build !(goexperiment.simd && amd64)

package cpu

import "unsafe"

// Without GOEXPERIMENT=simd on amd64 the fast paths are absent: every
// function reports that it handled nothing and the generic kernels run.

// SIMDEnabled reports whether the SIMD fast paths are compiled in and usable.
func SIMDEnabled() bool { return false }

func simdSelect(*seg, int, bool, int, int, int) int    { return 0 }
func simdRoute(*seg, int, bool) int                    { return 0 }
func simdLanes32(*[8]float32, unsafe.Pointer, int) int { return 0 }
func simdLanes64(*[8]float64, unsafe.Pointer, int) int { return 0 }

func simdSelectHalf(*seg, int16, bool, int, int, int) int { return 0 }
func simdRouteHalf(*seg, int16, bool) int                 { return 0 }
func simdLanesF16(*[8]float32, unsafe.Pointer, int) int   { return 0 }
func simdLanesBF16(*[8]float32, unsafe.Pointer, int) int  { return 0 }
