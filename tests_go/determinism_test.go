package tests_go

// docs/semantics.md and docs/interop.md: results and gradients do not depend on the number of
// threads. Sizes cross the cpu backend's parallel thresholds (cpu.Chunk
// elements per elementwise work unit; backend.SumBlock elements per sum
// block), data span many magnitudes so that any change in the order of
// float additions would show, and every result is also compared with the
// ref backend, which follows the canonical order one element at a time.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// wideBits returns n values of dt spread over many orders of magnitude, with
// some exact ties (for minimum/maximum) and no NaN.
func wideBits(r *rand.Rand, dt dtype.Dtype, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		v := r.NormFloat64() * math.Exp(r.NormFloat64()*2.5)
		if r.IntN(8) == 0 {
			v = float64(r.IntN(5) - 2)
		}
		if dt == dtype.Float16 {
			v = math.Max(-6e4, math.Min(6e4, v))
		}
		out[i] = bitsOfFloat(dt, v)
	}
	return out
}

// detCase computes some tensors on one backend from fixed inputs.
type detCase struct {
	name string
	run  func(t *testing.T, c *ops.Context) []*tensor.Tensor
}

func determinismCases(t *testing.T, dt dtype.Dtype) []detCase {
	r := newRand(seedOf("determinism", dt.String()))
	gen := func(n int) []uint64 { return wideBits(r, dt, n) }

	// minimum/maximum with broadcasting both ways: a (1100,1,32), b (2,32);
	// y has 70400 elements (3 elementwise chunks, the last one partial);
	// grad_b sums 1100 rows (two sum blocks per output), grad_a sums 2.
	// (Sizes are kept modest: the ref backend and -race are slow.)
	sa, sb := []int{1100, 1, 32}, []int{2, 32}
	so, _ := npBroadcast(sa, sb)
	a := makeTensor(t, dt, sa, negStep, gen)
	b := makeTensor(t, dt, sb, permuted, gen)
	g := makeTensor(t, dt, so, contiguous, gen)
	require.Greater(t, numel(so), 2*cpu.Chunk)
	require.Greater(t, sa[0], backend.SumBlock)

	// Reductions: 70000 elements (69 blocks) in all; per-dim sums with long
	// (3 blocks) and short rows; reversed and permuted inputs.
	x := makeTensor(t, dt, []int{100, 700}, contiguous, gen)
	x2 := makeTensor(t, dt, []int{2100, 12}, permuted, gen)
	x3 := makeTensor(t, dt, []int{20, 30, 60}, negStep, gen)
	require.Greater(t, x.Numel(), 2*cpu.Chunk)
	require.Greater(t, x2.Dim(0), 2*backend.SumBlock)
	require.Greater(t, x3.Dim(0)*x3.Dim(2), backend.SumBlock)

	minmax := func(f func(*ops.Context, *tensor.Tensor, *tensor.Tensor) (*tensor.Tensor, error)) func(t *testing.T, c *ops.Context) []*tensor.Tensor {
		return func(t *testing.T, c *ops.Context) []*tensor.Tensor {
			la, lb := leaf(t, a.Detach()), leaf(t, b.Detach())
			y := must(t)(f(c, la, lb))
			require.NoError(t, ops.Backward(c, ts(y), ts(g), false, false))
			return ts(y, la.Grad(), lb.Grad())
		}
	}
	reduce := func(mean bool, in *tensor.Tensor, dims []int, keep bool) func(t *testing.T, c *ops.Context) []*tensor.Tensor {
		return func(t *testing.T, c *ops.Context) []*tensor.Tensor {
			l := leaf(t, in.Detach())
			var y *tensor.Tensor
			if mean {
				y = must(t)(ops.Mean(c, l, dims, keep))
			} else {
				y = must(t)(ops.Sum(c, l, dims, keep))
			}
			// A non-uniform upstream gradient through a broadcast multiply,
			// so the backward's expand and the product are checked too.
			w := makeTensor(t, dt, y.Shape(), contiguous, func(n int) []uint64 { return wideBits(newRand(uint64(n)), dt, n) })
			require.NoError(t, ops.Backward(c, ts(y), ts(w), false, false))
			return ts(y, l.Grad())
		}
	}
	return []detCase{
		{"minimum_broadcast", minmax(ops.Minimum)},
		{"maximum_broadcast", minmax(ops.Maximum)},
		{"sum_all", reduce(false, x, nil, false)},
		{"sum_dim0_long_rows", reduce(false, x2, []int{0}, false)},
		{"sum_dim1_keepdim", reduce(false, x2, []int{1}, true)},
		{"sum_dims_0_2", reduce(false, x3, []int{0, 2}, false)},
		{"sum_dim_mid_keepdim", reduce(false, x3, []int{1}, true)},
		{"mean_all", reduce(true, x, nil, false)},
		{"mean_dim0", reduce(true, x2, []int{0}, true)},
		{"mean_dims_2_0", reduce(true, x3, []int{2, 0}, false)},
		{"sum_to_shape", func(t *testing.T, c *ops.Context) []*tensor.Tensor {
			return ts(must(t)(ops.SumToShape(c, g, []int{2, 1})), must(t)(ops.SumToShape(c, g, []int{1100, 1, 32})))
		}},
	}
}

func TestDeterminismAcrossThreads(t *testing.T) {
	threads := []int{1, 2, 8}
	for _, dt := range floatDtypes {
		for _, dc := range determinismCases(t, dt) {
			t.Run(fmt.Sprintf("%v/%s", dt, dc.name), func(t *testing.T) {
				want := dc.run(t, ctxFor(refBackend))
				for _, want1 := range want {
					require.NotNil(t, want1)
				}
				for _, n := range threads {
					be := splitting(n)
					require.Equal(t, n, be.Threads())
					got := dc.run(t, ctxFor(be))
					require.Len(t, got, len(want))
					for k := range want {
						// Minimum/maximum results and gradients, and sums of
						// NaN-free data: bit for bit.
						requireBitsEqual(t, want[k], got[k], false, "%s: output %d with %d threads vs ref", dc.name, k, n)
					}
				}
			})
		}
	}
}

// TestDeterminismSumOrderMatters guards the test above: with these data a
// different summation order really gives different float32 bits, so equal
// bits across thread counts mean the order is fixed, not that rounding
// hides it.
func TestDeterminismSumOrderMatters(t *testing.T) {
	r := newRand(99)
	bits := wideBits(r, dtype.Float32, 300000)
	x := must(t)(tensor.FromBits(dtype.Float32, []int{300000}, bits))
	s := must(t)(ops.Sum(ctxFor(splitting(8)), x, nil, false))
	var seq float32
	for _, b := range bits {
		seq += math.Float32frombits(uint32(b))
	}
	var rev float32
	for i := len(bits) - 1; i >= 0; i-- {
		rev += math.Float32frombits(uint32(bits[i]))
	}
	got := float32(s.Float64s()[0])
	require.NotEqual(t, seq, rev, "the data must be order-sensitive")
	require.False(t, got == seq && got == rev)
	// The canonical order is close to the exact sum.
	exact := 0.0
	for _, b := range bits {
		exact += float64(math.Float32frombits(uint32(b)))
	}
	require.InDelta(t, exact, float64(got), 1e-3*math.Abs(exact)+1)
}

// Above cpu.MinParallel the cpu backend really splits work across goroutines:
// forward, backward (with a broadcast reduction), sums and means must still
// be bit-identical for 1, 2 and 8 threads, and equal to ref for float32.
func TestDeterminismAboveParallelThreshold(t *testing.T) {
	for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float16, dtype.Float64} {
		r := newRand(seedOf("parallel", dt.String()))
		gen := func(n int) []uint64 { return wideBits(r, dt, n) }
		sa, sb := []int{cpu.MinParallel/64 + 77, 1, 64}, []int{3, 64}
		so, _ := npBroadcast(sa, sb)
		require.Greater(t, numel(so), 2*cpu.MinParallel)
		a := makeTensor(t, dt, sa, contiguous, gen)
		b := makeTensor(t, dt, sb, contiguous, gen)
		g := makeTensor(t, dt, so, contiguous, gen)
		run := func(c *ops.Context) [][]uint64 {
			la, lb := leaf(t, a.Detach()), leaf(t, b.Detach())
			y := must(t)(ops.Minimum(c, la, lb))
			require.NoError(t, ops.Backward(c, ts(y), ts(g), false, false))
			s := must(t)(ops.Sum(c.NoGrad(), y, nil, false))
			sd := must(t)(ops.Sum(c.NoGrad(), y, []int{0}, true))
			m := must(t)(ops.Mean(c.NoGrad(), y, []int{2}, false))
			return [][]uint64{y.Bits(), la.Grad().Bits(), lb.Grad().Bits(), s.Bits(), sd.Bits(), m.Bits()}
		}
		want := run(&ops.Context{Backend: cpu.New(1), GradEnabled: true})
		for _, n := range []int{2, 8} {
			require.Equal(t, want, run(&ops.Context{Backend: splitting(n), GradEnabled: true}), "%v with %d threads", dt, n)
		}
		if dt == dtype.Float32 && !testing.Short() {
			require.Equal(t, want, run(&ops.Context{Backend: ref.Backend{}, GradEnabled: true}), "%v: cpu vs ref", dt)
		}
	}
}
