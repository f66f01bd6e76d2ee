package tests_go

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// Integer → float casts round once, correctly (no double rounding through
// float64), on both backends: checked against math/big.
func TestCastInt64ToFloatRoundsOnce(t *testing.T) {
	vals := []int64{
		1<<60 + 1<<36 + 1, // ties through float64 would round down; correct is up
		-(1<<60 + 1<<36 + 1),
		1<<53 + 1, 1<<62 - 1, math.MaxInt64, math.MinInt64, 123456789, -7, 0,
		1<<40 + 1<<16 + 1, // bfloat16: above the half-ulp only by the lost bit
	}
	src, err := tensor.FromInt64s(dtype.Int64, []int{len(vals)}, vals)
	require.NoError(t, err)
	for _, be := range []*ops.Context{{Backend: ref.Backend{}}, {Backend: cpu.New(2)}} {
		f32, err := ops.Cast(be, src, dtype.Float32)
		require.NoError(t, err)
		bf, err := ops.Cast(be, src, dtype.BFloat16)
		require.NoError(t, err)
		got32, gotBF := f32.Float64s(), bf.Float64s()
		for i, v := range vals {
			want32, _ := new(big.Float).SetInt64(v).Float32()
			require.Equal(t, float64(want32), got32[i], "float32(%d) on %s", v, be.Backend.Name())
			// bfloat16: round the exact value to 8 significant bits, ties to even.
			wantBF, _ := new(big.Float).SetPrec(8).SetMode(big.ToNearestEven).SetInt64(v).Float64()
			require.Equal(t, wantBF, gotBF[i], "bfloat16(%d) on %s", v, be.Backend.Name())
		}
	}
}
