package tests_go

// docs/autograd.md through the Go API: accumulation into .grad, retain_graph and the
// freed-graph error, root-gradient validation, Grad (no .grad side effects,
// allow_unused, intermediate inputs), higher-order gradients (create_graph)
// checked analytically and against finite differences of first
// derivatives, diamond graphs, and external (host-run) nodes driven through
// the engine's Start/Next/Resume protocol.

import (
	"errors"
	"math"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

func TestAccumulationAcrossBackwardCalls(t *testing.T) {
	a := leaf(t, fromVals(t, dtype.Float32, []int{3}, 1, -2, 3))
	three := fromVals(t, dtype.Float32, nil, 3)

	l1 := sumT(t, nil, must(t)(ops.Mul(nil, a, a)))
	require.NoError(t, ops.Backward(nil, ts(l1), nil, false, false))
	assert.Equal(t, []float64{2, -4, 6}, a.Grad().Float64s())
	first := a.Grad()

	l2 := sumT(t, nil, must(t)(ops.Mul(nil, a, three)))
	require.NoError(t, ops.Backward(nil, ts(l2), nil, false, false))
	assert.Equal(t, []float64{5, -1, 9}, a.Grad().Float64s(), "second backward accumulates")
	assert.Equal(t, []float64{2, -4, 6}, first.Float64s(), "accumulation must not write into an earlier grad tensor")
	assert.Equal(t, dtype.Float32, a.Grad().Dtype())

	// Several roots in one call, with explicit root gradients.
	a.SetGrad(nil)
	y1 := must(t)(ops.Mul(nil, a, three))                  // dy1/da = 3
	y2 := must(t)(ops.Neg(nil, a))                         // dy2/da = -1
	g1 := fromVals(t, dtype.Float32, []int{3}, 1, 2, 3)    // weights for y1
	g2 := fromVals(t, dtype.Float32, []int{3}, 10, 20, 30) // weights for y2
	require.NoError(t, ops.Backward(nil, ts(y1, y2), ts(g1, g2), false, false))
	assert.Equal(t, []float64{3 - 10, 6 - 20, 9 - 30}, a.Grad().Float64s())

	// Zeroing .grad starts afresh.
	a.SetGrad(nil)
	require.NoError(t, ops.Backward(nil, ts(sumT(t, nil, a)), nil, false, false))
	assert.Equal(t, []float64{1, 1, 1}, a.Grad().Float64s())
}

func TestRetainGraph(t *testing.T) {
	a := leaf(t, fromVals(t, dtype.Float64, []int{4}, 1, 2, 3, math.NaN()))
	b := leaf(t, fromVals(t, dtype.Float64, []int{4}, 2, 2, 1, 0))
	loss := sumT(t, nil, must(t)(ops.Mul(nil, must(t)(ops.Minimum(nil, a, b)), b)))

	require.NoError(t, ops.Backward(nil, ts(loss), nil, true, false))
	assert.Equal(t, []float64{2, 2, 0, 0}, a.Grad().Float64s())
	require.NoError(t, ops.Backward(nil, ts(loss), nil, false, false), "the graph was retained")
	assert.Equal(t, []float64{4, 4, 0, 0}, a.Grad().Float64s(), "second pass accumulates")
	// d/db of min(a,b)*b: a wins at 0,1,3 (tie at 1, NaN at 3) -> min = a -> a; b wins at 2 -> 2b.
	// So per pass [1, 2, 2, NaN]; two passes double it.
	bg := b.Grad().Float64s()
	assert.Equal(t, []float64{2, 4, 4}, bg[:3])
	assert.True(t, math.IsNaN(bg[3]))

	err := ops.Backward(nil, ts(loss), nil, false, false)
	require.Error(t, err, "the graph was freed by the previous call")
	assert.Contains(t, err.Error(), "retain_graph=True")
	assert.True(t, errors.Is(err, autograd.ErrGraphFreed), "%v", err)
	assert.Equal(t, errs.Runtime, errs.KindOf(err))
	assert.Equal(t, []float64{4, 4, 0, 0}, a.Grad().Float64s(), "a failed backward leaves .grad alone")

	// Grad frees the graph too unless asked to retain it.
	loss = sumT(t, nil, must(t)(ops.Minimum(nil, a, b)))
	retain := true
	_, err = ops.Grad(nil, ts(loss), ts(a), nil, &retain, false, false)
	require.NoError(t, err)
	_, err = ops.Grad(nil, ts(loss), ts(a), nil, nil, false, false)
	require.NoError(t, err)
	_, err = ops.Grad(nil, ts(loss), ts(a), nil, nil, false, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "retain_graph=True")
}

func TestBackwardRootGradientErrors(t *testing.T) {
	a := leaf(t, fromVals(t, dtype.Float32, []int{2, 3}, 1, 2, 3, 4, 5, 6))
	y := must(t)(ops.Mul(nil, a, a))

	err := ops.Backward(nil, ts(y), nil, false, false)
	require.Error(t, err, "non-scalar output without a gradient")
	assert.Contains(t, err.Error(), "scalar")
	assert.Equal(t, errs.Runtime, errs.KindOf(err))
	assert.Nil(t, a.Grad())

	for _, bad := range [][]int{{3, 2}, {6}, {2, 3, 1}, {}} {
		g, err := tensor.Full(dtype.Float32, bad, 1)
		require.NoError(t, err)
		err = ops.Backward(nil, ts(y), ts(g), true, false)
		require.Error(t, err, "gradient of shape %v for output (2, 3)", bad)
		assert.Contains(t, err.Error(), "shape")
		assert.Equal(t, errs.Runtime, errs.KindOf(err))
	}
	assert.Nil(t, a.Grad())

	// Wrong number of gradients.
	g, _ := tensor.Full(dtype.Float32, []int{2, 3}, 1)
	require.Error(t, ops.Backward(nil, ts(y), ts(g, g), true, false))

	// A root that does not require grad.
	c := fromVals(t, dtype.Float32, nil, 1)
	require.Error(t, ops.Backward(nil, ts(c), nil, false, false))

	// One-element non-0-d root: implicit gradient allowed.
	s := must(t)(ops.Sum(nil, y, nil, true))
	requireShape(t, []int{1, 1}, s.Shape())
	require.NoError(t, ops.Backward(nil, ts(s), nil, false, false))
	assert.Equal(t, []float64{2, 4, 6, 8, 10, 12}, a.Grad().Float64s())
}

func TestGradFunction(t *testing.T) {
	a := leaf(t, fromVals(t, dtype.Float64, []int{3}, 1, 5, 2))
	b := leaf(t, fromVals(t, dtype.Float64, []int{3}, 3, 4, 2))
	unused := leaf(t, fromVals(t, dtype.Float64, []int{2}, 7, 8))
	m := must(t)(ops.Minimum(nil, a, b))
	w := fromVals(t, dtype.Float64, []int{3}, 10, 20, 30)
	loss := sumT(t, nil, must(t)(ops.Mul(nil, m, w)))

	retain := true
	gs, err := ops.Grad(nil, ts(loss), ts(a, b), nil, &retain, false, false)
	require.NoError(t, err)
	require.Len(t, gs, 2)
	assert.Equal(t, []float64{10, 0, 30}, gs[0].Float64s())
	assert.Equal(t, []float64{0, 20, 0}, gs[1].Float64s())
	assert.Nil(t, a.Grad(), "Grad must not touch .grad")
	assert.Nil(t, b.Grad(), "Grad must not touch .grad")
	fn, _ := gs[0].GradFn()
	assert.Nil(t, fn, "without create_graph the result is not recorded")

	// Gradient with respect to an intermediate result.
	gs, err = ops.Grad(nil, ts(loss), ts(m), nil, &retain, false, false)
	require.NoError(t, err)
	assert.Equal(t, []float64{10, 20, 30}, gs[0].Float64s())

	// Unused input: an error unless allow_unused, then nil.
	_, err = ops.Grad(nil, ts(loss), ts(a, unused), nil, &retain, false, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "allow_unused=True")
	gs, err = ops.Grad(nil, ts(loss), ts(a, unused), nil, &retain, false, true)
	require.NoError(t, err)
	require.Len(t, gs, 2)
	assert.Equal(t, []float64{10, 0, 30}, gs[0].Float64s())
	assert.Nil(t, gs[1])

	// An input that does not require grad.
	_, err = ops.Grad(nil, ts(loss), ts(w), nil, &retain, false, true)
	require.Error(t, err)

	// grad_outputs weight a non-scalar output.
	gs, err = ops.Grad(nil, ts(m), ts(a, b), ts(fromVals(t, dtype.Float64, []int{3}, 1, 2, 3)), &retain, false, false)
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 0, 3}, gs[0].Float64s())
	assert.Equal(t, []float64{0, 2, 0}, gs[1].Float64s())
	assert.Nil(t, a.Grad())

	// The same leaf listed twice gets the same gradient in both places.
	gs, err = ops.Grad(nil, ts(loss), ts(a, a), nil, &retain, false, false)
	require.NoError(t, err)
	assert.Equal(t, gs[0].Float64s(), gs[1].Float64s())
}

// TestGradLeafUsedTwice: a leaf used by several ops (and twice by one op)
// gets the sum of all paths from Grad, the same as Backward puts in .grad.
func TestGradLeafUsedTwice(t *testing.T) {
	for _, be := range specBackends {
		c := ctxFor(be)
		build := func() (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
			a := leaf(t, f64(t, []int{3}, 1, 2, -3))
			b := leaf(t, f64(t, []int{3}, 5, 7, 11))
			// L = sum(a*b) + sum(a*a) + sum(minimum(a, a))
			l := must(t)(ops.Add(c, sumT(t, c, must(t)(ops.Mul(c, a, b))), sumT(t, c, must(t)(ops.Mul(c, a, a)))))
			l = must(t)(ops.Add(c, l, sumT(t, c, must(t)(ops.Minimum(c, a, a)))))
			return l, a, b
		}
		want := []float64{5 + 2 + 1, 7 + 4 + 1, 11 - 6 + 1}
		l, a, b := build()
		gs, err := ops.Grad(c, ts(l), ts(a, b), nil, nil, false, false)
		require.NoError(t, err)
		assert.Equal(t, want, gs[0].Float64s(), be.Name())
		assert.Equal(t, []float64{1, 2, -3}, gs[1].Float64s(), be.Name())
		l, a, _ = build()
		gs, err = ops.Grad(c, ts(l), ts(a), nil, nil, true, false)
		require.NoError(t, err)
		assert.Equal(t, want, gs[0].Float64s(), be.Name()+" create_graph")
		l, a, _ = build()
		require.NoError(t, ops.Backward(c, ts(l), nil, false, false))
		assert.Equal(t, want, a.Grad().Float64s(), be.Name()+" backward")
	}
}

// TestHigherOrderMinimum: ga = dL/da for L = sum(minimum(a, b) * w) is
// sum_j [a_i wins_ij] w_ij; with create_graph, d/dw of sum(ga²) is
// 2 ga_i [a_i wins_ij]. The masks are constants of the second pass.
func TestHigherOrderMinimum(t *testing.T) {
	for _, be := range specBackends {
		c := ctxFor(be)
		av := []float64{1, 2, math.NaN()}
		bv := []float64{0, 1, 2, 3}
		wv := []float64{0.5, -1, 2, 3, 1.5, 4, -2, 0.25, 1, -3, 5, 7}
		a := leaf(t, f64(t, []int{3, 1}, av...))
		b := leaf(t, f64(t, []int{4}, bv...))
		w := leaf(t, f64(t, []int{3, 4}, wv...))
		loss := sumT(t, c, must(t)(ops.Mul(c, must(t)(ops.Minimum(c, a, b)), w)))
		gs, err := ops.Grad(c, ts(loss), ts(a), nil, nil, true, false)
		require.NoError(t, err)
		ga := gs[0]
		requireShape(t, []int{3, 1}, ga.Shape())
		require.True(t, ga.RequiresGrad(), "create_graph records the backward")

		win := func(i, j int) float64 {
			if math.IsNaN(av[i]) || av[i] <= bv[j] {
				return 1
			}
			return 0
		}
		wantGA := make([]float64, 3)
		for i := 0; i < 3; i++ {
			for j := 0; j < 4; j++ {
				wantGA[i] += win(i, j) * wv[i*4+j]
			}
		}
		assert.Equal(t, wantGA, ga.Float64s(), be.Name())

		q := sumT(t, c, must(t)(ops.Mul(c, ga, ga)))
		gs, err = ops.Grad(c, ts(q), ts(w, a), nil, nil, false, true)
		require.NoError(t, err)
		gw := gs[0]
		requireShape(t, []int{3, 4}, gw.Shape())
		want := make([]float64, 12)
		for i := 0; i < 3; i++ {
			for j := 0; j < 4; j++ {
				want[i*4+j] = 2 * wantGA[i] * win(i, j)
			}
		}
		assert.Equal(t, want, gw.Float64s(), be.Name())
		// The masks are constants: sum(ga²) does not depend on a.
		if gs[1] != nil {
			for _, v := range gs[1].Float64s() {
				assert.Zero(t, v)
			}
		}
	}
}

// secondOrderCase is a scalar function of (a, b) built from ops.
type secondOrderCase struct {
	name   string
	sa, sb []int
	genB   genKind
	loss   func(t *testing.T, c *ops.Context, a, b *tensor.Tensor) *tensor.Tensor
}

// TestSecondOrderFiniteDifferences checks Hessian-vector products from
// create_graph against central differences of first derivatives (float64),
// for mul and div with broadcasting.
func TestSecondOrderFiniteDifferences(t *testing.T) {
	const eps = 1e-6
	cases := []secondOrderCase{
		{"mul", []int{3, 1}, []int{4}, genSmooth, func(t *testing.T, c *ops.Context, a, b *tensor.Tensor) *tensor.Tensor {
			// sum(w * a*a*b) + sum(a*b*b)
			w := f64(t, []int{3, 4}, 0.5, -1, 2, 3, 1.5, 4, -2, 0.25, 1, -3, 5, 7)
			aa := must(t)(ops.Mul(c, a, a))
			p := must(t)(ops.Mul(c, must(t)(ops.Mul(c, aa, b)), w))
			q := must(t)(ops.Mul(c, must(t)(ops.Mul(c, a, b)), b))
			return must(t)(ops.Add(c, sumT(t, c, p), sumT(t, c, q)))
		}},
		{"div", []int{2, 3}, []int{3}, genAwayFromZero, func(t *testing.T, c *ops.Context, a, b *tensor.Tensor) *tensor.Tensor {
			// sum(w * a*a/b) + sum(b / a)   (a kept away from 0 below)
			w := f64(t, []int{2, 3}, 1, -2, 0.5, 3, 0.25, -1)
			p := must(t)(ops.Mul(c, must(t)(ops.Div(c, must(t)(ops.Mul(c, a, a)), b)), w))
			q := must(t)(ops.Div(c, b, a))
			return must(t)(ops.Add(c, sumT(t, c, p), sumT(t, c, q)))
		}},
		{"mul_sub_neg_mean", []int{4}, []int{2, 4}, genSmooth, func(t *testing.T, c *ops.Context, a, b *tensor.Tensor) *tensor.Tensor {
			// mean((a - b)^2) * -1 + sum(a*a*a)
			d := must(t)(ops.Sub(c, a, b))
			m := must(t)(ops.Mean(c, must(t)(ops.Mul(c, d, d)), nil, false))
			cube := sumT(t, c, must(t)(ops.Mul(c, must(t)(ops.Mul(c, a, a)), a)))
			return must(t)(ops.Add(c, must(t)(ops.Neg(c, m)), cube))
		}},
	}
	for _, tc := range cases {
		for _, be := range specBackends {
			t.Run(tc.name+"/"+be.Name(), func(t *testing.T) {
				r := newRand(seedOf("second", tc.name))
				c := ctxFor(be)
				vals := func(n int, k genKind) []float64 {
					out := make([]float64, n)
					for i, b := range genBits(r, dtype.Float64, n, k) {
						out[i] = math.Float64frombits(b)
					}
					return out
				}
				av := vals(numel(tc.sa), genAwayFromZero)
				bv := vals(numel(tc.sb), tc.genB)
				v1 := vals(numel(tc.sa), genSmooth)
				v2 := vals(numel(tc.sb), genSmooth)

				// First derivatives at (x, y), as plain float64 slices.
				first := func(x, y []float64, create bool) (ga, gb *tensor.Tensor, a, b *tensor.Tensor) {
					a = leaf(t, f64(t, tc.sa, x...))
					b = leaf(t, f64(t, tc.sb, y...))
					gs, err := ops.Grad(c, ts(tc.loss(t, c, a, b)), ts(a, b), nil, nil, create, false)
					require.NoError(t, err)
					requireShape(t, tc.sa, gs[0].Shape())
					requireShape(t, tc.sb, gs[1].Shape())
					return gs[0], gs[1], a, b
				}
				// s = <ga, v1> + <gb, v2>
				sOf := func(xs [][]float64) float64 {
					ga, gb, _, _ := first(xs[0], xs[1], false)
					return dot(ga.Float64s(), v1) + dot(gb.Float64s(), v2)
				}
				numeric := centralDiff([][]float64{append([]float64(nil), av...), append([]float64(nil), bv...)}, eps, sOf)

				ga, gb, a, b := first(av, bv, true)
				require.True(t, ga.RequiresGrad())
				s := must(t)(ops.Add(c,
					sumT(t, c, must(t)(ops.Mul(c, ga, f64(t, tc.sa, v1...)))),
					sumT(t, c, must(t)(ops.Mul(c, gb, f64(t, tc.sb, v2...))))))
				hv, err := ops.Grad(c, ts(s), ts(a, b), nil, nil, false, false)
				require.NoError(t, err)
				requireClose(t, numeric[0], hv[0].Float64s(), 1e-5, 1e-4, "d/da")
				requireClose(t, numeric[1], hv[1].Float64s(), 1e-5, 1e-4, "d/db")
			})
		}
	}
}

// TestBackwardCreateGraphThenBackward: with create_graph, .grad is itself
// differentiable; a second backward from it accumulates into .grad.
func TestBackwardCreateGraphThenBackward(t *testing.T) {
	a := leaf(t, f64(t, []int{3}, 1, 2, -3))
	cube := sumT(t, nil, must(t)(ops.Mul(nil, must(t)(ops.Mul(nil, a, a)), a)))
	require.NoError(t, ops.Backward(nil, ts(cube), nil, false, true))
	g := a.Grad()
	assert.Equal(t, []float64{3, 12, 27}, g.Float64s())
	require.True(t, g.RequiresGrad(), "create_graph keeps .grad in the graph")
	require.NoError(t, ops.Backward(nil, ts(sumT(t, nil, g)), nil, false, false))
	// d/da sum(3a²) = 6a, accumulated onto 3a².
	assert.Equal(t, []float64{3 + 6, 12 + 12, 27 - 18}, a.Grad().Float64s())
}

// TestDiamondGraph: a tensor used twice (directly and through a shared
// intermediate) accumulates both paths.
func TestDiamondGraph(t *testing.T) {
	for _, be := range specBackends {
		c := ctxFor(be)
		a := leaf(t, f64(t, []int{2, 2}, 1, 2, 3, -1))
		b := leaf(t, f64(t, []int{2}, 5, -2))
		x := must(t)(ops.Mul(c, a, b)) // x = a*b
		y := must(t)(ops.Add(c, x, x)) // y = 2x, x used twice
		z := must(t)(ops.Mul(c, y, x)) // z = 2x², x used again
		loss := sumT(t, c, must(t)(ops.Add(c, z, a)))
		require.NoError(t, ops.Backward(c, ts(loss), nil, false, false))
		// dL/dx = 4x; dL/da = 4x*b + 1; dL/db = sum_rows 4x*a.
		av, bv := a.Float64s(), b.Float64s()
		wantA := make([]float64, 4)
		wantB := make([]float64, 2)
		for i := 0; i < 2; i++ {
			for j := 0; j < 2; j++ {
				xv := av[i*2+j] * bv[j]
				wantA[i*2+j] = 4*xv*bv[j] + 1
				wantB[j] += 4 * xv * av[i*2+j]
			}
		}
		assert.Equal(t, wantA, a.Grad().Float64s(), be.Name())
		assert.Equal(t, wantB, b.Grad().Float64s(), be.Name())

		// The same leaf as both operands of minimum: ties everywhere, all to a.
		p := leaf(t, f64(t, []int{3}, 1, -0.0, math.NaN()))
		m := must(t)(ops.Minimum(c, p, p))
		require.NoError(t, ops.Backward(c, ts(m), ts(f64(t, []int{3}, 1, 2, 3)), false, false))
		assert.Equal(t, []float64{1, 2, 3}, p.Grad().Float64s(), be.Name())
	}
}

// externalSquare records v = u*u computed by a "host", with an external node
// whose backward the test itself runs.
func externalSquare(t *testing.T, u *tensor.Tensor, id int64) (*tensor.Tensor, *autograd.ExternalNode) {
	v := must(t)(ops.Mul(ops.Default().NoGrad(), u, u))
	ext := autograd.NewExternal("SquareBackward", id,
		[]autograd.Edge{autograd.EdgeOf(u)},
		[]autograd.InputMeta{{Shape: u.Shape(), Dtype: u.Dtype()}}, 1)
	v.SetGradFn(ext, 0)
	return v, ext
}

// TestExternalNodeInChain: a -> mul (native) -> external square -> mul
// (native) -> sum. The engine stops once at the external node with dL/dv,
// the test supplies dL/du = 2u·dL/dv, and the leaf gets 8ak.
func TestExternalNodeInChain(t *testing.T) {
	a := leaf(t, f64(t, []int{3}, 1, -2, 0.5))
	two := f64(t, nil, 2)
	k := f64(t, []int{3}, 3, 5, 7)
	u := must(t)(ops.Mul(nil, a, two))
	v, ext := externalSquare(t, u, 42)
	fn, _ := v.GradFn()
	require.Equal(t, "SquareBackward", fn.Name())
	loss := sumT(t, nil, must(t)(ops.Mul(nil, v, k)))

	run, err := autograd.Start(ts(loss), nil, autograd.Options{Math: ops.EngineMath(nil)})
	require.NoError(t, err)
	p, err := run.Next()
	require.NoError(t, err)
	require.NotNil(t, p, "the engine must stop at the external node")
	assert.Same(t, ext, p.Node)
	assert.Equal(t, int64(42), p.Node.ID)
	assert.True(t, p.Release, "without retain_graph the host should free its state")
	require.Len(t, p.Grads, 1)
	assert.Equal(t, k.Float64s(), p.Grads[0].Float64s(), "dL/dv")
	assert.Nil(t, a.Grad(), "nothing reaches the leaf before the host answers")

	// Next before Resume is refused.
	_, err = run.Next()
	require.Error(t, err)

	gu := must(t)(ops.Mul(ops.Default().NoGrad(), must(t)(ops.Mul(ops.Default().NoGrad(), u, two)), p.Grads[0]))
	require.NoError(t, run.Resume(ts(gu)))
	p, err = run.Next()
	require.NoError(t, err)
	require.Nil(t, p, "the pass is finished")
	av, kv := a.Float64s(), k.Float64s()
	want := make([]float64, 3)
	for i := range want {
		want[i] = 8 * av[i] * kv[i]
	}
	assert.Equal(t, want, a.Grad().Float64s())

	// The external node was released: its saved state is gone.
	_, err = ext.Tensors()
	assert.ErrorIs(t, err, autograd.ErrGraphFreed)
	// Resume with nothing pending is an error.
	require.Error(t, run.Resume(ts(gu)))

	// ops.Backward cannot run host nodes: a clear error, not a hang.
	u2 := must(t)(ops.Mul(nil, a, two))
	v2, _ := externalSquare(t, u2, 43)
	err = ops.Backward(nil, ts(sumT(t, nil, v2)), nil, false, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SquareBackward")
}

// TestExternalNodeReachedTwice: the external node's output feeds two native
// branches; the engine stops at it once, with the accumulated gradient.
func TestExternalNodeReachedTwice(t *testing.T) {
	a := leaf(t, f64(t, []int{2, 2}, 1, 2, 3, 4))
	u := must(t)(ops.Neg(nil, a))
	v, ext := externalSquare(t, u, 7)
	k1 := f64(t, []int{2, 2}, 1, 10, 100, 1000)
	k2 := f64(t, []int{2}, 0.5, 0.25) // broadcast
	l1 := sumT(t, nil, must(t)(ops.Mul(nil, v, k1)))
	l2 := sumT(t, nil, must(t)(ops.Mul(nil, k2, v)))
	loss := must(t)(ops.Add(nil, l1, l2))

	stops := 0
	res, err := autograd.Backward(ts(loss), nil, autograd.Options{Math: ops.EngineMath(nil), RetainGraph: true},
		func(p *autograd.Pending) ([]*tensor.Tensor, error) {
			stops++
			assert.Same(t, ext, p.Node)
			assert.False(t, p.Release, "retain_graph keeps the host's state")
			assert.Equal(t, []float64{1.5, 10.25, 100.5, 1000.25}, p.Grads[0].Float64s(), "both branches, summed")
			// dL/du = 2u * g
			return ts(must(t)(ops.Mul(ops.Default().NoGrad(), must(t)(ops.Add(ops.Default().NoGrad(), u, u)), p.Grads[0]))), nil
		})
	require.NoError(t, err)
	assert.Nil(t, res)
	assert.Equal(t, 1, stops, "one stop with the accumulated gradient")
	// L = sum(u² (k1 + k2)), u = -a: dL/da = 2a (k1 + k2).
	assert.Equal(t, []float64{2 * 1 * 1.5, 2 * 2 * 10.25, 2 * 3 * 100.5, 2 * 4 * 1000.25}, a.Grad().Float64s())

	// A host error stops the pass and is returned.
	_, err = autograd.Backward(ts(loss), nil, autograd.Options{Math: ops.EngineMath(nil)},
		func(p *autograd.Pending) ([]*tensor.Tensor, error) { return nil, errors.New("host failed") })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "host failed")
}

// TestExternalNodeGradientAdapted: the engine reduces a host gradient of a
// broadcast shape to the input's shape and casts it to the input's dtype;
// a wrong gradient count or an incompatible shape is an error.
func TestExternalNodeGradientAdapted(t *testing.T) {
	a := leaf(t, fromVals(t, dtype.Float32, []int{3, 1}, 1, 2, 3))
	mk := func() (*tensor.Tensor, *autograd.ExternalNode) {
		v := must(t)(tensor.Full(dtype.Float32, []int{3, 4}, 1))
		ext := autograd.NewExternal("ExpandBackward2", 1, []autograd.Edge{autograd.EdgeOf(a)},
			[]autograd.InputMeta{{Shape: a.Shape(), Dtype: a.Dtype()}}, 1)
		v.SetGradFn(ext, 0)
		k := fromVals(t, dtype.Float32, []int{3, 4}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
		return sumT(t, nil, must(t)(ops.Mul(nil, v, k))), ext
	}
	loss, _ := mk()
	_, err := autograd.Backward(ts(loss), nil, autograd.Options{Math: ops.EngineMath(nil)},
		func(p *autograd.Pending) ([]*tensor.Tensor, error) {
			// Return the (3,4) gradient as float64: the engine adapts it.
			return ts(must(t)(ops.Cast(ops.Default().NoGrad(), p.Grads[0], dtype.Float64))), nil
		})
	require.NoError(t, err)
	require.NotNil(t, a.Grad())
	assert.Equal(t, dtype.Float32, a.Grad().Dtype())
	requireShape(t, []int{3, 1}, a.Grad().Shape())
	assert.Equal(t, []float64{10, 26, 42}, a.Grad().Float64s())

	loss, _ = mk()
	_, err = autograd.Backward(ts(loss), nil, autograd.Options{Math: ops.EngineMath(nil)},
		func(p *autograd.Pending) ([]*tensor.Tensor, error) { return ts(p.Grads[0], p.Grads[0]), nil })
	require.Error(t, err, "two gradients for one input")

	loss, _ = mk()
	_, err = autograd.Backward(ts(loss), nil, autograd.Options{Math: ops.EngineMath(nil)},
		func(p *autograd.Pending) ([]*tensor.Tensor, error) {
			return ts(must(t)(tensor.Full(dtype.Float32, []int{5}, 1))), nil
		})
	require.Error(t, err, "a gradient that does not reduce to (3, 1)")
	assert.Contains(t, err.Error(), "ExpandBackward2")
}

// gatedNode is a node with saved state whose first Apply waits at a gate
// once it has read its saved tensors: the window in which another thread's
// backward over the same graph used to run it too.
type gatedNode struct {
	autograd.Saved
	edge    autograd.Edge
	meta    autograd.InputMeta
	entered chan struct{}
	gate    chan struct{}
	calls   atomic.Int32
}

func (n *gatedNode) Name() string                 { return "GatedBackward" }
func (n *gatedNode) Next() []autograd.Edge        { return []autograd.Edge{n.edge} }
func (n *gatedNode) NumOutputs() int              { return 1 }
func (n *gatedNode) Inputs() []autograd.InputMeta { return []autograd.InputMeta{n.meta} }
func (n *gatedNode) Apply(grads []*tensor.Tensor, _ bool) ([]*tensor.Tensor, error) {
	if _, err := n.Tensors(); err != nil {
		return nil, err
	}
	if n.calls.Add(1) == 1 {
		close(n.entered)
		<-n.gate
	}
	return grads, nil
}

// TestConcurrentBackwardRunsNodeOnce: two backward calls over one graph
// without retain_graph; the first holds its node open (the gate), the
// second must fail with ErrGraphFreed instead of adding the gradient again
// (docs/autograd.md: exactly one succeeds). Deterministic: the gate, not timing.
func TestConcurrentBackwardRunsNodeOnce(t *testing.T) {
	a := leaf(t, f64(t, []int{3}, 1, 2, 3))
	n := &gatedNode{edge: autograd.EdgeOf(a), meta: autograd.InputMeta{Shape: a.Shape(), Dtype: a.Dtype()},
		entered: make(chan struct{}), gate: make(chan struct{})}
	n.Save(a)
	y := must(t)(tensor.Full(dtype.Float64, []int{3}, 0))
	y.SetGradFn(n, 0)
	require.NoError(t, autograd.RetainGrad(y)) // the losing run must not add to y.grad either
	g := f64(t, []int{3}, 1, 10, 100)

	first := make(chan error, 1)
	go func() { first <- ops.Backward(nil, ts(y), ts(g), false, false) }()
	<-n.entered
	err := ops.Backward(nil, ts(y), ts(g), false, false)
	require.ErrorIs(t, err, autograd.ErrGraphFreed, "the second backward while the first runs the node")
	close(n.gate)
	require.NoError(t, <-first)
	assert.Equal(t, []float64{1, 10, 100}, a.Grad().Float64s(), "one backward's gradient, not two")
	assert.Equal(t, []float64{1, 10, 100}, y.Grad().Float64s(), "the retained non-leaf's too")
	assert.Equal(t, int32(1), n.calls.Load())
	require.ErrorIs(t, ops.Backward(nil, ts(y), ts(g), false, false), autograd.ErrGraphFreed, "and after it")
}

// TestConcurrentBackwardExternalNode: a run paused at a host node holds that
// node; another run without retain_graph is refused, one that retains the
// graph is not, and a run abandoned before Resume gives its claim back.
func TestConcurrentBackwardExternalNode(t *testing.T) {
	a := leaf(t, f64(t, []int{3}, 1, -2, 0.5))
	v, ext := externalSquare(t, a, 9)
	g := f64(t, []int{3}, 1, 1, 1)
	opts := autograd.Options{Math: ops.EngineMath(nil)}

	first, err := autograd.Start(ts(v), ts(g), opts)
	require.NoError(t, err)
	p, err := first.Next()
	require.NoError(t, err)
	require.NotNil(t, p)
	assert.Same(t, ext, p.Node)

	second, err := autograd.Start(ts(v), ts(g), opts)
	if err == nil {
		_, err = second.Next()
	}
	require.ErrorIs(t, err, autograd.ErrGraphFreed, "the node is being run by the first run")

	retaining := opts
	retaining.RetainGraph = true
	third, err := autograd.Start(ts(v), ts(g), retaining)
	require.NoError(t, err)
	p3, err := third.Next()
	require.NoError(t, err, "retain_graph reads the state without taking it")
	require.NotNil(t, p3)
	third.Close()

	first.Close() // abandoned: the claim goes back
	again, err := autograd.Start(ts(v), ts(g), opts)
	require.NoError(t, err)
	p, err = again.Next()
	require.NoError(t, err, "an abandoned run leaves the node runnable")
	require.NotNil(t, p)
	require.NoError(t, again.Resume(ts(must(t)(ops.Add(ops.Default().NoGrad(), a, a)))))
	p, err = again.Next()
	require.NoError(t, err)
	require.Nil(t, p)
	assert.Equal(t, []float64{2, -4, 1}, a.Grad().Float64s())
	_, err = ext.Tensors()
	assert.ErrorIs(t, err, autograd.ErrGraphFreed)
}

// TestFailedNodeKeepsItsState: a node that fails (a saved tensor written in
// place) gives its claim back, so the next backward reports the same error.
func TestFailedNodeKeepsItsState(t *testing.T) {
	a := leaf(t, f64(t, []int{3}, 1, 2, 3))
	b := f64(t, []int{3}, 2, 2, 2)
	y := must(t)(ops.Minimum(nil, a, b))
	b.BumpVersion()
	for range 2 {
		err := ops.Backward(nil, ts(y), ts(b), false, false)
		var m *autograd.ModifiedError
		require.ErrorAs(t, err, &m, "the same error each time, not a freed graph")
	}
}

// panickyNode panics in its first Apply, then works.
type panickyNode struct {
	gatedNode
	panicked bool
}

func (n *panickyNode) Apply(grads []*tensor.Tensor, _ bool) ([]*tensor.Tensor, error) {
	if !n.panicked {
		n.panicked = true
		panic("a kernel bug")
	}
	return grads, nil
}

// TestPanickingNodeGivesItsClaimBack: a node that panics (a host boundary
// recovers the panic) stays runnable instead of looking freed.
func TestPanickingNodeGivesItsClaimBack(t *testing.T) {
	a := leaf(t, f64(t, []int{2}, 1, 2))
	n := &panickyNode{gatedNode: gatedNode{edge: autograd.EdgeOf(a), meta: autograd.InputMeta{Shape: a.Shape(), Dtype: a.Dtype()}}}
	n.Save(a)
	y := must(t)(tensor.Full(dtype.Float64, []int{2}, 0))
	y.SetGradFn(n, 0)
	g := f64(t, []int{2}, 3, 4)
	func() {
		defer func() { require.NotNil(t, recover()) }()
		_ = ops.Backward(nil, ts(y), ts(g), false, false)
	}()
	require.NoError(t, ops.Backward(nil, ts(y), ts(g), false, false), "runnable after the panic")
	assert.Equal(t, []float64{3, 4}, a.Grad().Float64s())
}
