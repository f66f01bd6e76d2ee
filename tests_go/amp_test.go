package tests_go

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

var ampFloats = []dtype.Dtype{dtype.Float16, dtype.BFloat16, dtype.Float32, dtype.Float64}

// The autocast policies of docs/semantics.md, input by input.
func TestAmpCastDtype(t *testing.T) {
	for _, ac := range []dtype.Dtype{dtype.Float16, dtype.BFloat16} {
		st, err := amp.NewState(ac)
		require.NoError(t, err)
		for _, a := range ampFloats {
			for _, b := range ampFloats {
				floats := []dtype.Dtype{a, b}
				// Promote: the widest floating dtype among the inputs.
				require.Equal(t, dtype.Promote(a, b), st.CastDtype(amp.Promote, a, floats), "%v %v", a, b)
				// LowerPrecision: the autocast dtype, float64 left alone.
				want := ac
				if a == dtype.Float64 {
					want = a
				}
				require.Equal(t, want, st.CastDtype(amp.LowerPrecision, a, floats), "%v", a)
				// FP32: float32, float64 left alone.
				want = dtype.Float32
				if a == dtype.Float64 {
					want = a
				}
				require.Equal(t, want, st.CastDtype(amp.FP32, a, floats), "%v", a)
			}
		}
		// Non-floating inputs are never cast.
		for _, d := range []dtype.Dtype{dtype.Bool, dtype.Int32, dtype.Int64} {
			for _, p := range []amp.Policy{amp.Promote, amp.LowerPrecision, amp.FP32} {
				require.Equal(t, d, st.CastDtype(p, d, []dtype.Dtype{dtype.Float32}))
			}
		}
	}
	// Promote never produces float64 from narrower inputs.
	st, _ := amp.NewState(dtype.BFloat16)
	require.Equal(t, dtype.Float32, st.CastDtype(amp.Promote, dtype.Float16, []dtype.Dtype{dtype.Float16, dtype.BFloat16}))
	// A disabled state changes nothing.
	for _, p := range []amp.Policy{amp.Promote, amp.LowerPrecision, amp.FP32} {
		require.Equal(t, dtype.Float32, amp.State{}.CastDtype(p, dtype.Float32, []dtype.Dtype{dtype.Float64}))
	}
}

func TestAmpNewStateAndNames(t *testing.T) {
	for _, d := range []dtype.Dtype{dtype.Float32, dtype.Float64, dtype.Int32, dtype.Bool} {
		_, err := amp.NewState(d)
		require.Error(t, err, "%v", d)
	}
	require.Equal(t, "Promote", amp.Promote.String())
	require.Equal(t, "LowerPrecision", amp.LowerPrecision.String())
	require.Equal(t, "FP32", amp.FP32.String())
	for _, name := range []string{"minimum", "maximum"} {
		s, ok := ops.Lookup(name)
		require.True(t, ok)
		require.Equal(t, amp.Promote, s.AmpPolicy)
	}
}

// minimum/maximum under autocast: the result dtype is the promoted one, the
// values equal those computed without autocast bit for bit, and each
// gradient comes back in its input's dtype.
func TestAmpMinMaxPromote(t *testing.T) {
	av := []float64{1, -2.5, 3, 0.5, 7, -1}
	bv := []float64{2, -3, 3, 0.25, -8, 4}
	for _, ac := range []dtype.Dtype{dtype.Float16, dtype.BFloat16} {
		st, err := amp.NewState(ac)
		require.NoError(t, err)
		c := &ops.Context{GradEnabled: true, Autocast: st}
		for _, op := range []func(*ops.Context, *tensor.Tensor, *tensor.Tensor) (*tensor.Tensor, error){ops.Minimum, ops.Maximum} {
			for _, da := range ampFloats {
				for _, db := range ampFloats {
					a := leaf(t, fromVals(t, da, []int{6}, av...))
					b := leaf(t, fromVals(t, db, []int{2, 6}, append(append([]float64{}, bv...), av...)...))
					y, err := op(c, a, b)
					require.NoError(t, err)
					require.Equal(t, dtype.Promote(da, db), y.Dtype(), "%v %v under %v", da, db, ac)
					plain, err := op(ops.Default().NoGrad(), a, b)
					require.NoError(t, err)
					requireBitsEqual(t, plain, y, false, "%v %v under %v", da, db, ac)
					s, err := ops.Sum(c, y, nil, false)
					require.NoError(t, err)
					require.NoError(t, ops.Backward(c, []*tensor.Tensor{s}, nil, false, false))
					require.Equal(t, da, a.Grad().Dtype())
					require.Equal(t, db, b.Grad().Dtype())
					// the masks partition: the two gradients add up to the
					// number of times each position was used
					ga, gb := a.Grad().Float64s(), b.Grad().Float64s()
					total := 0.0
					for _, v := range ga {
						total += v
					}
					for _, v := range gb {
						total += v
					}
					require.Equal(t, 12.0, total)
				}
			}
		}
	}
}
