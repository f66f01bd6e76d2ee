package tests_go

import (
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// The view and indexing ops (permute, slice, view, take and their gradient
// ops) are linear maps, so their gradients are checked exactly by the
// adjoint identity <w, op(x)> == <grad, x> (what finite differences
// approximate), their double backward by d<grad, v>/dw == op(v), and their
// values against row-major positions computed here.

type viewCase struct {
	name  string
	shape []int
	op    func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error)
	want  []float64 // op of x = 0, 1, 2, ... row-major
	node  string
	views bool // the result shares x's memory
}

func TestViewOps(t *testing.T) {
	idx, err := tensor.FromInt64s(dtype.Int64, []int{2, 2}, []int64{5, 0, 5, 3})
	require.NoError(t, err)
	cases := []viewCase{
		{"permute", []int{2, 3}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) { return ops.Permute(c, x, []int{1, 0}) },
			[]float64{0, 3, 1, 4, 2, 5}, "PermuteBackward", true},
		{"permute_negative", []int{1, 2, 3}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
			return ops.Permute(c, x, []int{-1, 0, 1})
		}, []float64{0, 3, 1, 4, 2, 5}, "PermuteBackward", true},
		{"slice_step", []int{2, 3}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) { return ops.Slice(c, x, 1, 0, 3, 2) },
			[]float64{0, 2, 3, 5}, "SliceBackward", true},
		{"slice_reversed", []int{2, 3}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
			return ops.Slice(c, x, -1, -1, -100, -1)
		}, []float64{2, 1, 0, 5, 4, 3}, "SliceBackward", true},
		{"slice_empty", []int{2, 3}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) { return ops.Slice(c, x, 0, 2, 1, 1) },
			nil, "SliceBackward", true},
		{"view", []int{2, 3}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) { return ops.ViewAs(c, x, []int{3, 2}) },
			[]float64{0, 1, 2, 3, 4, 5}, "ViewBackward", true},
		{"take_repeated", []int{2, 3}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) { return ops.Take(c, x, idx) },
			[]float64{5, 0, 5, 3}, "TakeBackward", false},
		{"take_of_transposed", []int{2, 3}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
			xt, err := ops.Permute(c, x, []int{1, 0}) // not contiguous: positions are row-major in the view
			if err != nil {
				return nil, err
			}
			return ops.Take(c, xt, idx)
		}, []float64{5, 0, 5, 4}, "TakeBackward", false},
	}
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			n := numel(k.shape)
			vals := make([]float64, n)
			for i := range vals {
				vals[i] = float64(i)
			}
			x := leaf(t, f64(t, k.shape, vals...))
			y := must(t)(k.op(nil, x))
			if k.want == nil {
				require.Zero(t, y.Numel())
			} else {
				require.Equal(t, k.want, y.Float64s())
			}
			fn, _ := y.GradFn()
			require.NotNil(t, fn)
			require.Equal(t, k.node, fn.(interface{ Name() string }).Name())
			require.Equal(t, k.views, y.Storage() == x.Storage(), "shares memory")

			// <w, op(x)> == <op^T(w), x>, and d<op^T(w), v>/dw == op(v).
			r := newRand(7)
			wv := make([]float64, y.Numel())
			for i := range wv {
				wv[i] = r.Float64()*2 - 1
			}
			w := leaf(t, f64(t, y.Shape(), wv...))
			l := sumT(t, nil, must(t)(ops.Mul(nil, y, w)))
			g, err := ops.Grad(nil, ts(l), ts(x), nil, nil, true, false)
			require.NoError(t, err)
			require.Equal(t, k.shape, g[0].Shape())
			require.InDelta(t, dot(wv, y.Float64s()), dot(g[0].Float64s(), vals), 1e-12)
			vv := make([]float64, n)
			for i := range vv {
				vv[i] = r.Float64()*2 - 1
			}
			v := f64(t, k.shape, vv...)
			l2 := sumT(t, nil, must(t)(ops.Mul(nil, g[0], v)))
			gw, err := ops.Grad(nil, ts(l2), ts(w), nil, nil, false, false)
			require.NoError(t, err)
			opv := must(t)(k.op(ctxFor(nil).NoGrad(), v))
			requireClose(t, opv.Float64s(), gw[0].Float64s(), 1e-12, 0, "double backward")
		})
	}
}

func TestViewOpsRefuse(t *testing.T) {
	x := f64(t, []int{2, 3}, 0, 1, 2, 3, 4, 5)
	xt, err := x.Transpose(0, 1)
	require.NoError(t, err)
	_, err = ops.ViewAs(nil, xt, []int{6})
	require.ErrorContains(t, err, "view size is not compatible")
	r := must(t)(ops.Reshape(nil, xt, []int{6})) // reshape copies instead
	require.Equal(t, []float64{0, 3, 1, 4, 2, 5}, r.Float64s())
	_, err = ops.Permute(nil, x, []int{0, 0})
	require.ErrorContains(t, err, "invalid permutation")
	_, err = ops.Slice(nil, x, 0, 0, 1, 0)
	require.ErrorContains(t, err, "step cannot be zero")
	bad, err := tensor.FromInt64s(dtype.Int64, []int{1}, []int64{6})
	require.NoError(t, err)
	_, err = ops.Take(nil, x, bad)
	require.ErrorContains(t, err, "position 6 is out of range for 6 elements")
	_, err = ops.Take(nil, x, x)
	require.ErrorContains(t, err, "the index must be int64")
}

func TestRetainGrad(t *testing.T) {
	x := leaf(t, f64(t, []int{2}, 1, -2))
	y := must(t)(ops.Mul(nil, x, x))
	require.NoError(t, autograd.RetainGrad(y))
	require.True(t, y.RetainsGrad())
	require.NoError(t, autograd.RetainGrad(x)) // a leaf: nothing to do
	require.False(t, x.RetainsGrad())
	other := must(t)(ops.Neg(nil, x)) // not retained: no grad
	require.NoError(t, ops.Backward(nil, ts(sumT(t, nil, must(t)(ops.Mul(nil, y, y)))), nil, false, false))
	require.Equal(t, []float64{2, 8}, y.Grad().Float64s())   // d(y^2)/dy = 2y
	require.Equal(t, []float64{4, -32}, x.Grad().Float64s()) // 4x^3
	require.Nil(t, other.Grad())
	require.Error(t, autograd.RetainGrad(f64(t, []int{1}, 1)))
}

// Every float16 and bfloat16 value prints as a decimal that reads back as
// that very value (String's shortest digits), checked over all 65,536 bit
// patterns of each, in chunks below String's summary threshold.
func TestHalfValuesPrintAsDecimalsThatReadBack(t *testing.T) {
	for _, dt := range []dtype.Dtype{dtype.Float16, dtype.BFloat16} {
		round := dtype.Float64ToFloat16
		if dt == dtype.BFloat16 {
			round = dtype.Float64ToBFloat16
		}
		for start := 0; start < 1<<16; start += 1000 {
			n := min(1000, 1<<16-start)
			bits := make([]uint64, n)
			for i := range bits {
				bits[i] = uint64(start + i)
			}
			x := must(t)(tensor.FromBits(dt, []int{n}, bits))
			s := x.String()
			body := s[len("tensor(["):strings.LastIndex(s, "]")]
			fields := strings.Split(body, ", ")
			require.Len(t, fields, n)
			for i, f := range fields {
				v, err := strconv.ParseFloat(strings.TrimSuffix(f, "."), 64)
				require.NoError(t, err, "%v %q", dt, f)
				want := uint16(bits[i])
				if math.IsNaN(v) {
					require.True(t, (dt == dtype.Float16 && want&0x7fff > 0x7c00) || (dt == dtype.BFloat16 && want&0x7fff > 0x7f80),
						"%v %#04x printed %q", dt, want, f)
					continue
				}
				require.Equal(t, want, round(v), "%v %#04x printed %q", dt, want, f)
			}
		}
	}
}

// TestTakeReadsByStrides: take reads each position where the view's strides
// put it (expanded, reversed, transposed, offset views), equal to take of
// a contiguous copy, and allocates only its result: an expanded view of any
// size is never copied (docs/tensor.md).
func TestTakeReadsByStrides(t *testing.T) {
	x := f64(t, []int{3, 4}, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	col := must(t)(ops.Slice(nil, x, 1, 1, 2, 1)) // (3, 1), offset 1, strides (4, 1)
	views := map[string]*tensor.Tensor{
		"expanded":   must(t)(ops.Expand(nil, col, []int{3, 5})),
		"reversed":   must(t)(ops.Slice(nil, must(t)(ops.Slice(nil, x, 1, -1, -100, -2)), 0, -1, -100, -1)),
		"transposed": must(t)(ops.Permute(nil, x, []int{1, 0})),
		"row":        must(t)(ops.Slice(nil, x, 0, 2, 3, 1)),
	}
	for name, v := range views {
		n := v.Numel()
		pos := make([]int64, 0, 2*n)
		for p := n - 1; p >= 0; p-- {
			pos = append(pos, int64(p), int64((p*7)%n))
		}
		idx, err := tensor.FromInt64s(dtype.Int64, []int{len(pos)}, pos)
		require.NoError(t, err)
		dense := must(t)(ops.Reshape(nil, must(t)(ops.Add(nil, v, f64(t, nil, 0))), v.Shape()))
		require.True(t, dense.IsContiguous())
		require.Equal(t, must(t)(ops.Take(nil, dense, idx)).Float64s(), must(t)(ops.Take(nil, v, idx)).Float64s(), name)
	}

	one := fromVals(t, dtype.Float32, []int{1, 2}, 1, 2)
	huge := must(t)(ops.Expand(nil, one, []int{1 << 26, 2})) // a contiguous copy would be 512 MiB
	idx, err := tensor.FromInt64s(dtype.Int64, []int{2}, []int64{1<<27 - 1, 2})
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := must(t)(ops.Take(nil, huge, idx))
	runtime.ReadMemStats(&after)
	require.Equal(t, []float64{2, 1}, got.Float64s())
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "take allocated more than its result")
}
