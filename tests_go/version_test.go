package tests_go

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// The version counter (docs/autograd.md): every out= write bumps the
// written storage's version, shared by its views; a node refuses to run on
// a saved tensor written since it saved it, naming itself and the tensor.

func opID(name string) int { s, _ := ops.Lookup(name); return s.ID }

func TestOutBumpsTheVersionOfItsStorage(t *testing.T) {
	c := ops.Default().NoGrad()
	a := f64(t, []int{2, 3}, 1, 5, 3, -1, 0, 7)
	view := must(t)(a.Transpose(0, 1))
	det := a.Detach()
	require.Equal(t, uint32(0), a.Version())
	for k := uint32(1); k <= 3; k++ {
		_, err := ops.CallN(c, opID("minimum"), ts(a, f64(t, nil, 2)), nil, ts(a))
		require.NoError(t, err)
		for _, v := range []*tensor.Tensor{a, view, det} {
			assert.Equal(t, k, v.Version(), "views and detached copies share the count")
		}
	}
	// A refused write (a partial overlap) and a write into another tensor
	// leave the count as it is.
	_, err := ops.CallN(c, opID("minimum"), ts(a, f64(t, nil, 2)), nil, ts(must(t)(a.Transpose(0, 1))))
	assert.Equal(t, errs.Value, errs.KindOf(err), "%v", err)
	other := must(t)(tensor.New(dtype.Float64, []int{2, 3}))
	_, err = ops.CallN(c, opID("maximum"), ts(a, f64(t, nil, 0)), nil, ts(other))
	require.NoError(t, err)
	assert.Equal(t, uint32(3), a.Version())
	assert.Equal(t, uint32(1), other.Version())
	// Ops with several outputs and reductions bump each out they write.
	vals := must(t)(tensor.New(dtype.Float64, []int{2}))
	idx := must(t)(tensor.New(dtype.Int64, []int{2}))
	_, err = ops.CallN(c, opID("min"), ts(a), []int64{0, 1, 1}, ts(vals, idx))
	require.NoError(t, err)
	assert.Equal(t, []uint32{1, 1}, []uint32{vals.Version(), idx.Version()})
}

func TestBackwardRefusesASavedInputWrittenInPlace(t *testing.T) {
	cases := []struct {
		name  string
		write func(c *ops.Context, h *tensor.Tensor) error // under no_grad, into h (saved by the node)
		node  string
	}{
		{"clamp in place", func(c *ops.Context, h *tensor.Tensor) error {
			_, err := ops.CallN(c, opID("clamp"), ts(h, f64(t, nil, 0), f64(t, nil, 0.5)), nil, ts(h))
			return err
		}, "MinimumBackward"},
		{"out= of another op", func(c *ops.Context, h *tensor.Tensor) error {
			_, err := ops.CallN(c, opID("add"), ts(f64(t, []int{2}, 9, 9), f64(t, nil, 1)), nil, ts(h))
			return err
		}, "MinimumBackward"},
		{"through a view", func(c *ops.Context, h *tensor.Tensor) error {
			v := h.Detach()
			_, err := ops.CallN(c, opID("neg"), ts(v), nil, ts(v))
			return err
		}, "MinimumBackward"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ops.Default()
			h := leaf(t, f64(t, []int{2}, 1, 5))
			y := must(t)(ops.Minimum(c, h, f64(t, nil, 3)))
			require.NoError(t, tc.write(c.NoGrad(), h))
			err := ops.Backward(c, ts(sumT(t, c, y)), nil, false, false)
			require.Error(t, err)
			var m *autograd.ModifiedError
			require.True(t, errors.As(err, &m), "%T %v", err, err)
			assert.Equal(t, tc.node, m.Node)
			assert.Equal(t, uint32(0), m.Expected)
			assert.Equal(t, uint32(1), m.Version)
			assert.Contains(t, err.Error(), "modified by an inplace operation")
			assert.Contains(t, err.Error(), "float64 tensor of shape (2,) that "+tc.node+" saved")
			assert.Nil(t, h.Grad(), "nothing was accumulated")
		})
	}
}

func TestBackwardRunsWhenTheWrittenTensorWasNotSaved(t *testing.T) {
	// The node saved a converted copy (float32 promoted to float64): writing
	// the original later does not change what the gradient is computed from.
	c := ops.Default()
	h := leaf(t, fromVals(t, dtype.Float32, []int{2}, 1, 5))
	y := must(t)(ops.Minimum(c, h, f64(t, nil, 3)))
	_, err := ops.CallN(c.NoGrad(), opID("clamp"), ts(h, fromVals(t, dtype.Float32, nil, 0),
		fromVals(t, dtype.Float32, nil, 0.5)), nil, ts(h))
	require.NoError(t, err)
	require.NoError(t, ops.Backward(c, ts(sumT(t, c, y)), nil, false, false))
	assert.Equal(t, []float64{1, 0}, h.Grad().Float64s())

	// A write before the op ran is no write after it saved.
	g := leaf(t, f64(t, []int{2}, 1, 5))
	_, err = ops.CallN(c.NoGrad(), opID("neg"), ts(g), nil, ts(g))
	require.NoError(t, err)
	z := must(t)(ops.Minimum(c, g, f64(t, nil, -3)))
	require.NoError(t, ops.Backward(c, ts(sumT(t, c, z)), nil, false, false))
	assert.Equal(t, []float64{0, 1}, g.Grad().Float64s())
}
