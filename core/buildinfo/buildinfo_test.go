package buildinfo

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend/cpu"
)

func TestInfoSaysWhichKernelsRun(t *testing.T) {
	i := Get()
	require.Equal(t, cpu.SIMDCompiled(), i.SIMD)
	switch {
	case cpu.SIMDEnabled():
		require.Equal(t, "simd (AVX2)", i.Kernels)
		require.Equal(t, []string{"AVX2"}, i.CPUFeatures)
	case cpu.SIMDCompiled():
		require.Equal(t, "simd compiled, portable in use (no AVX2)", i.Kernels)
		require.Empty(t, i.CPUFeatures)
	default:
		require.Equal(t, "portable", i.Kernels)
		require.Empty(t, i.CPUFeatures)
	}
	require.Equal(t, cpu.Default.Threads(), i.Threads)
	s := i.String()
	require.True(t, strings.HasPrefix(s, "go: "+i.GoVersion+"\nkernels: "+i.Kernels+"\n"), s)
	require.Contains(t, s, "threads: ")
}
