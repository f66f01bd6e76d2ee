package tests_go

// A backend need only have IBackend's five kernels: the min/max family's
// are optional capabilities (backend.Selector, Reducer, Clamper), and
// core/ops runs every op without them (clamp composed of the selections,
// the rest on the reference kernels), with the same bits as the cpu
// backend's own kernels: values, gradients, second gradients and tangents.

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// coreOnly hides every optional capability of the backend it wraps.
type coreOnly struct{ backend.IBackend }

func TestABackendWithoutTheFamilysCapabilitiesRunsEveryOp(t *testing.T) {
	_, isSel := backend.IBackend(coreOnly{cpuBackend}).(backend.Selector)
	_, isRed := backend.IBackend(coreOnly{cpuBackend}).(backend.Reducer)
	_, isCl := backend.IBackend(coreOnly{cpuBackend}).(backend.Clamper)
	require.False(t, isSel || isRed || isCl, "the wrapper must hide the capabilities")

	r := newRand(11)
	gen := func(n int) []uint64 { return genBits(r, dtype.Float32, n, genSpecial) }
	x := makeTensor(t, dtype.Float32, []int{3, 4}, permuted, gen)
	y := makeTensor(t, dtype.Float32, []int{4}, contiguous, gen)
	lo := makeTensor(t, dtype.Float32, []int{3, 1}, contiguous, gen)

	type result struct{ outs, grads, grads2, tangents []*tensor.Tensor }
	run := func(be backend.IBackend, name string, f func(c *ops.Context, x, y, lo *tensor.Tensor) (*tensor.Tensor, error)) result {
		c := ctxFor(be)
		xs := []*tensor.Tensor{leaf(t, contiguousCopy(t, x)), leaf(t, contiguousCopy(t, y)), leaf(t, contiguousCopy(t, lo))}
		out, err := f(c, xs[0], xs[1], xs[2])
		require.NoError(t, err, name)
		gr := newRand(12) // the same upstream gradient for both backends
		g := leaf(t, makeTensor(t, dtype.Float32, out.Shape(), contiguous, func(n int) []uint64 {
			return genBits(gr, dtype.Float32, n, genNormal)
		}))
		retain := true
		gs, err := ops.Grad(c, ts(out), xs, ts(g), &retain, true, true)
		require.NoError(t, err, name)
		var res result
		res.outs = ts(out.Detach())
		var total *tensor.Tensor
		for _, gi := range gs {
			if gi == nil {
				continue
			}
			res.grads = append(res.grads, gi.Detach())
			s := sumT(t, c, gi)
			if total == nil {
				total = s
			} else {
				total = must(t)(ops.Add(c, total, s))
			}
		}
		require.True(t, total.RequiresGrad(), name) // the gradients' own graph (through g)
		{                                           // second order: the Select kernels (route's transpose)
			gs2, err := ops.Grad(c, ts(total), append(xs, g), nil, nil, false, true)
			require.NoError(t, err, name)
			for _, gi := range gs2 {
				if gi != nil {
					res.grads2 = append(res.grads2, gi)
				}
			}
			require.NotEmpty(t, res.grads2, name)
		}
		return res
	}
	cases := map[string]func(c *ops.Context, x, y, lo *tensor.Tensor) (*tensor.Tensor, error){
		"minimum": func(c *ops.Context, x, y, _ *tensor.Tensor) (*tensor.Tensor, error) { return ops.Minimum(c, x, y) },
		"fmax":    func(c *ops.Context, x, y, _ *tensor.Tensor) (*tensor.Tensor, error) { return ops.Fmax(c, x, y) },
		"clamp":   func(c *ops.Context, x, y, lo *tensor.Tensor) (*tensor.Tensor, error) { return ops.Clamp(c, x, lo, y) },
		"clamp lo": func(c *ops.Context, x, _, lo *tensor.Tensor) (*tensor.Tensor, error) {
			return ops.Clamp(c, x, lo, nil)
		},
		"amax": func(c *ops.Context, x, _, _ *tensor.Tensor) (*tensor.Tensor, error) {
			return ops.Amax(c, x, []int{1}, false)
		},
		"amin all": func(c *ops.Context, x, _, _ *tensor.Tensor) (*tensor.Tensor, error) {
			return ops.Amin(c, x, nil, true)
		},
		"max dim": func(c *ops.Context, x, _, _ *tensor.Tensor) (*tensor.Tensor, error) {
			v, _, err := ops.MaxDim(c, x, 0, false)
			return v, err
		},
	}
	for name, f := range cases {
		want, got := run(cpuBackend, name, f), run(coreOnly{cpuBackend}, name, f)
		for _, pair := range [][2][]*tensor.Tensor{{want.outs, got.outs}, {want.grads, got.grads}, {want.grads2, got.grads2}} {
			require.Equal(t, len(pair[0]), len(pair[1]), name)
			for i := range pair[0] {
				requireBitsEqual(t, pair[0][i], pair[1][i], false, "%s %d", name, i)
			}
		}
	}

	// Forward mode, and the index-only reductions.
	argmin, _ := ops.Lookup("argmin")
	clampID, _ := ops.Lookup("clamp")
	for _, id := range []int{argmin.ID, clampID.ID} {
		var outs [2][]*tensor.Tensor
		for k, be := range []backend.IBackend{cpuBackend, coreOnly{cpuBackend}} {
			c := ctxFor(be)
			in := ts(contiguousCopy(t, x))
			tangents := ts(contiguousCopy(t, x))
			var attrs []int64
			if id == clampID.ID {
				in, tangents = append(in, lo, y), append(tangents, lo, y)
			} else {
				attrs = []int64{0, 1, 1}
			}
			o, to, err := ops.CallJvp(c, id, in, tangents, attrs)
			require.NoError(t, err)
			outs[k] = append(o, to...)
		}
		for i := range outs[0] {
			if outs[0][i] == nil {
				require.Nil(t, outs[1][i])
				continue
			}
			requireBitsEqual(t, outs[0][i], outs[1][i], false, "jvp of op %d, output %d", id, i)
		}
	}
}
