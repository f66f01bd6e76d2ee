//go:build goexperiment.simd && amd64

package cpu

import (
	"simd/archsimd"
	"testing"
)

// withSIMD switches the SIMD fast paths on (where the CPU has them) or off
// for one test, so one build runs both the SIMD and the scalar paths.
// Tests that use it must not run in parallel.
func withSIMD(t *testing.T, on bool) {
	old := haveAVX2
	haveAVX2 = on && archsimd.X86.AVX2()
	t.Cleanup(func() { haveAVX2 = old })
}
