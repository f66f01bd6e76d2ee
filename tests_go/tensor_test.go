package tests_go

// Black-box tests of core/tensor views: Slice with Python semantics,
// Permute/Transpose, BroadcastTo, Reshape, IsContiguous, Clone, Numel and the
// coalescing iteration Iter, each checked against an index computation
// written here.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// tvArange returns an int64 tensor of the given shape holding 0, 1, 2, ...
func tvArange(t testing.TB, shape ...int) *tensor.Tensor {
	t.Helper()
	n := 1
	for _, d := range shape {
		n *= d
	}
	vals := make([]int64, n)
	for i := range vals {
		vals[i] = int64(i)
	}
	x, err := tensor.FromInt64s(dtype.Int64, shape, vals)
	require.NoError(t, err)
	return x
}

// tvNone stands for Python's None in a slice bound: the API takes ±MaxInt,
// which clamps to the right end for the step's direction.
const tvNone = math.MinInt + 12345

func tvBound(v, step int, isStart bool) int {
	if v != tvNone {
		return v
	}
	if (step > 0) == isStart {
		return math.MinInt
	}
	return math.MaxInt
}

// tvPySlice is an independent statement of Python's slice.indices followed by
// range(): the indices list(range(n))[start:stop:step] selects.
func tvPySlice(n, start, stop, step int) []int {
	clamp := func(i int) int {
		if i < 0 {
			i += n // no overflow: n >= 0
			if i < 0 {
				if step < 0 {
					return -1
				}
				return 0
			}
		}
		if i >= n {
			if step < 0 {
				return n - 1
			}
			return n
		}
		return i
	}
	start, stop = clamp(start), clamp(stop)
	out := []int{}
	if step > 0 {
		for i := start; i < stop; {
			out = append(out, i)
			if step >= stop-i {
				break
			}
			i += step
		}
	} else {
		for i := start; i > stop; {
			out = append(out, i)
			if step <= stop-i {
				break
			}
			i += step
		}
	}
	return out
}

// Expected results computed by CPython: list(range(n))[start:stop:step].
func TestTensorSlicePythonTable(t *testing.T) {
	N := tvNone
	cases := []struct {
		n, start, stop, step int
		want                 []int
	}{
		{5, N, N, 1, []int{0, 1, 2, 3, 4}},
		{5, N, N, -1, []int{4, 3, 2, 1, 0}},
		{5, -2, N, 1, []int{3, 4}},
		{5, N, -2, 1, []int{0, 1, 2}},
		{5, 1, 4, 2, []int{1, 3}},
		{5, -10, 3, 1, []int{0, 1, 2}},
		{5, 3, -10, -1, []int{3, 2, 1, 0}},
		{5, 10, N, -2, []int{4, 2, 0}},
		{5, N, N, -2, []int{4, 2, 0}},
		{5, 4, 0, -3, []int{4, 1}},
		{5, 0, 5, 3, []int{0, 3}},
		{5, 2, 2, 1, []int{}},
		{5, 3, 1, 1, []int{}},
		{5, 1, 3, -1, []int{}},
		{0, N, N, 1, []int{}},
		{0, N, N, -1, []int{}},
		{1, -1, N, -1, []int{0}},
		{5, -1, -6, -1, []int{4, 3, 2, 1, 0}},
		{5, -1, -5, -1, []int{4, 3, 2, 1}},
		{5, -6, N, 2, []int{0, 2, 4}},
		{7, 6, -8, -2, []int{6, 4, 2, 0}},
		{7, -100, 100, 3, []int{0, 3, 6}},
		{7, 100, -100, -3, []int{6, 3, 0}},
		{3, N, N, 9, []int{0}},
		{3, N, N, -9, []int{2}},
		{4, 2, N, -1, []int{2, 1, 0}},
		// huge steps (x[::sys.maxsize]) must not overflow the length computation
		{5, N, N, math.MaxInt, []int{0}},
		{5, 1, N, math.MaxInt, []int{1}},
		{5, N, N, -math.MaxInt, []int{4}},
		{5, N, N, math.MinInt, []int{4}},
		{5, 3, 0, math.MinInt, []int{3}},
		{5, math.MaxInt, math.MinInt, -1, []int{4, 3, 2, 1, 0}},
		{5, math.MinInt, math.MaxInt, 2, []int{0, 2, 4}},
	}
	for _, c := range cases {
		name := fmt.Sprintf("n=%d[%d:%d:%d]", c.n, c.start, c.stop, c.step)
		start, stop := tvBound(c.start, c.step, true), tvBound(c.stop, c.step, false)
		assert.Equal(t, c.want, tvPySlice(c.n, start, stop, c.step), "model %s", name)
		x := tvArange(t, c.n)
		var v *tensor.Tensor
		require.NotPanics(t, func() {
			var err error
			v, err = x.Slice(0, start, stop, c.step)
			require.NoError(t, err, name)
		}, name)
		require.Equal(t, []int{len(c.want)}, v.Shape(), name)
		got := v.Int64s()
		for i, w := range c.want {
			assert.Equal(t, int64(w), got[i], "%s element %d", name, i)
		}
	}
}

func TestTensorSliceExhaustiveSmall(t *testing.T) {
	bounds := []int{math.MinInt, -9, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 9, math.MaxInt}
	steps := []int{math.MinInt, -math.MaxInt, -7, -4, -3, -2, -1, 1, 2, 3, 4, 7, math.MaxInt}
	for n := 0; n <= 6; n++ {
		// slice the last dim of a (2, n) tensor so offsets and strides matter
		x := tvArange(t, 2, n)
		for _, start := range bounds {
			for _, stop := range bounds {
				for _, step := range steps {
					want := tvPySlice(n, start, stop, step)
					for _, dim := range []int{1, -1} {
						var v *tensor.Tensor
						var err error
						require.NotPanics(t, func() { v, err = x.Slice(dim, start, stop, step) })
						require.NoError(t, err)
						require.Equal(t, []int{2, len(want)}, v.Shape(), "n=%d [%d:%d:%d]", n, start, stop, step)
						got := v.Int64s()
						for r := 0; r < 2; r++ {
							for i, w := range want {
								require.Equal(t, int64(r*n+w), got[r*len(want)+i], "n=%d [%d:%d:%d] row %d", n, start, stop, step, r)
							}
						}
					}
				}
			}
		}
	}
}

// tvDim tracks, for one dim of a view, which base dim it walks (-1: a
// broadcast dim) and which base indices it visits.
type tvDim struct {
	base int
	idx  []int
}

// tvModel is the expected content of a view of an arange base tensor.
type tvModel struct {
	baseStrides []int // contiguous strides of the base
	dims        []tvDim
}

func (m tvModel) shape() []int {
	var s []int // nil for 0-d, as Tensor.Shape returns
	for _, d := range m.dims {
		s = append(s, len(d.idx))
	}
	return s
}

func (m tvModel) values() []int64 {
	shape := m.shape()
	n := 1
	for _, d := range shape {
		n *= d
	}
	out := make([]int64, 0, n)
	pos := make([]int, len(shape))
	for k := 0; k < n; k++ {
		v := 0
		for i, d := range m.dims {
			if d.base >= 0 {
				v += d.idx[pos[i]] * m.baseStrides[d.base]
			}
		}
		out = append(out, int64(v))
		for i := len(pos) - 1; i >= 0; i-- {
			pos[i]++
			if pos[i] < shape[i] {
				break
			}
			pos[i] = 0
		}
	}
	return out
}

// Random chains of Slice / Permute / Transpose / BroadcastTo against the
// index model; the view must read the modelled elements, Clone them into a
// contiguous tensor, and report IsContiguous only when element i really is
// at Offset()+i.
func TestTensorRandomViewChains(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	iters := 3000
	if testing.Short() {
		iters = 500
	}
	for it := 0; it < iters; it++ {
		nd := rng.IntN(4)
		shape := make([]int, nd)
		for i := range shape {
			shape[i] = rng.IntN(5)
		}
		x := tvArange(t, shape...)
		m := tvModel{baseStrides: tensor.ContiguousStrides(shape)}
		for i, d := range shape {
			idx := make([]int, d)
			for j := range idx {
				idx[j] = j
			}
			m.dims = append(m.dims, tvDim{base: i, idx: idx})
		}
		v := x
		var trace []string
		for step := 0; step < 1+rng.IntN(4); step++ {
			nd := v.Ndim()
			var err error
			switch op := rng.IntN(4); {
			case op == 0 && nd > 0: // slice
				d := rng.IntN(nd)
				n := len(m.dims[d].idx)
				st := []int{-3, -2, -1, 1, 2, 3}[rng.IntN(6)]
				a, b := rng.IntN(2*n+5)-n-2, rng.IntN(2*n+5)-n-2
				trace = append(trace, fmt.Sprintf("Slice(%d,%d,%d,%d)", d, a, b, st))
				v, err = v.Slice(d, a, b, st)
				require.NoError(t, err, "%v", trace)
				sel := tvPySlice(n, a, b, st)
				nidx := make([]int, len(sel))
				for j, s := range sel {
					nidx[j] = m.dims[d].idx[s]
				}
				m.dims[d].idx = nidx
			case op == 1: // permute
				p := rng.Perm(nd)
				args := append([]int(nil), p...)
				for i := range args {
					if rng.IntN(3) == 0 {
						args[i] -= nd // negative dims are accepted
					}
				}
				trace = append(trace, fmt.Sprintf("Permute%v", args))
				v, err = v.Permute(args...)
				require.NoError(t, err, "%v", trace)
				nd := make([]tvDim, len(p))
				for i, q := range p {
					nd[i] = m.dims[q]
				}
				m.dims = nd
			case op == 2 && nd > 0: // transpose
				i, j := rng.IntN(nd), rng.IntN(nd)
				trace = append(trace, fmt.Sprintf("Transpose(%d,%d)", i, j-nd))
				v, err = v.Transpose(i, j-nd)
				require.NoError(t, err, "%v", trace)
				m.dims[i], m.dims[j] = m.dims[j], m.dims[i]
			default: // broadcast: stretch size-1 dims, maybe add a leading dim
				out := m.shape()
				var lead []tvDim
				if rng.IntN(2) == 0 && len(out) < 5 {
					k := rng.IntN(3)
					lead = append(lead, tvDim{base: -1, idx: make([]int, k)})
					out = append([]int{k}, out...)
				}
				for i := range m.dims {
					if len(m.dims[i].idx) == 1 && rng.IntN(2) == 0 {
						k := rng.IntN(4)
						out[len(lead)+i] = k
						rep := make([]int, k)
						for j := range rep {
							rep[j] = m.dims[i].idx[0]
						}
						m.dims[i].idx = rep
					}
				}
				trace = append(trace, fmt.Sprintf("BroadcastTo%v", out))
				v, err = v.BroadcastTo(out)
				require.NoError(t, err, "%v", trace)
				m.dims = append(lead, m.dims...)
			}
		}
		msg := fmt.Sprintf("base %v, %v", shape, trace)
		require.Equal(t, m.shape(), v.Shape(), msg)
		want := m.values()
		require.Equal(t, want, v.Int64s(), msg)
		require.Same(t, x.Storage(), v.Storage(), "views share storage: "+msg)

		c, err := v.Clone()
		require.NoError(t, err)
		require.True(t, c.IsContiguous())
		require.Equal(t, want, c.Int64s(), msg)
		require.True(t, tensor.SameShape(tensor.ContiguousStrides(v.Shape()), c.Strides()), "clone strides %v: %s", c.Strides(), msg)
		if v.Numel() > 0 {
			require.NotSame(t, x.Storage(), c.Storage(), msg)
		}

		if v.IsContiguous() {
			for i := 0; i < v.Numel(); i++ {
				require.Equal(t, v.Offset()+i, v.ElementOffset(i), "IsContiguous but element %d is elsewhere: %s", i, msg)
			}
		} else {
			dense := v.Numel() > 0
			for i := 0; i < v.Numel() && dense; i++ {
				dense = v.ElementOffset(i) == v.Offset()+i
			}
			require.False(t, dense, "a dense row-major view not reported contiguous: %s strides %v", msg, v.Strides())
		}

		// Reshape to 1-d: a view when contiguous, else a view or a Value error.
		r, err := v.Reshape([]int{v.Numel()})
		if v.IsContiguous() {
			require.NoError(t, err, msg)
			require.Same(t, x.Storage(), r.Storage())
		}
		if err != nil {
			require.Equal(t, errs.Value, errs.KindOf(err), msg)
		} else {
			require.Equal(t, want, r.Int64s(), msg)
		}
	}
}

func TestTensorPermuteTranspose(t *testing.T) {
	x := tvArange(t, 2, 3, 4)
	require.Equal(t, []int{12, 4, 1}, x.Strides())
	perms := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, p := range perms {
		v, err := x.Permute(p...)
		require.NoError(t, err)
		wantShape := []int{x.Dim(p[0]), x.Dim(p[1]), x.Dim(p[2])}
		require.Equal(t, wantShape, v.Shape(), "%v", p)
		require.Equal(t, []int{x.Strides()[p[0]], x.Strides()[p[1]], x.Strides()[p[2]]}, v.Strides())
		got := v.Int64s()
		k := 0
		for i := 0; i < wantShape[0]; i++ {
			for j := 0; j < wantShape[1]; j++ {
				for l := 0; l < wantShape[2]; l++ {
					var src [3]int
					src[p[0]], src[p[1]], src[p[2]] = i, j, l
					assert.Equal(t, int64(src[0]*12+src[1]*4+src[2]), got[k], "perm %v at (%d,%d,%d)", p, i, j, l)
					k++
				}
			}
		}
		assert.Equal(t, p[0] == 0 && p[1] == 1 && p[2] == 2, v.IsContiguous())
	}
	// negative dims in Permute and Transpose
	a, err := x.Permute(-1, 0, -2)
	require.NoError(t, err)
	assert.Equal(t, []int{4, 2, 3}, a.Shape())
	b, err := x.Transpose(0, -1)
	require.NoError(t, err)
	assert.Equal(t, []int{4, 3, 2}, b.Shape())
	assert.Equal(t, []int{1, 4, 12}, b.Strides())
	c, err := x.Transpose(1, 1)
	require.NoError(t, err)
	assert.Equal(t, x.Int64s(), c.Int64s())
	// transposing twice restores the tensor
	bb, err := b.Transpose(-1, 0)
	require.NoError(t, err)
	assert.Equal(t, x.Shape(), bb.Shape())
	assert.Equal(t, x.Strides(), bb.Strides())
	assert.True(t, bb.IsContiguous())

	// A 0-d tensor: PyTorch accepts dim 0 / -1 there, NumPy refuses. Either
	// is fine here (NormDim currently refuses), but never a panic, and a
	// refusal is a Value error.
	s, err := tensor.Scalar(dtype.Float32, 3)
	require.NoError(t, err)
	for _, d := range [][2]int{{0, 0}, {-1, 0}, {-1, -1}, {1, 0}} {
		var v *tensor.Tensor
		require.NotPanics(t, func() { v, err = s.Transpose(d[0], d[1]) }, "Transpose%v of a 0-d tensor", d)
		if err != nil {
			assert.Equal(t, errs.Value, errs.KindOf(err))
			assert.Contains(t, err.Error(), "out of range")
			continue
		}
		require.NotEqual(t, 1, d[0], "dim 1 of a 0-d tensor must be refused")
		assert.Equal(t, 0, v.Ndim())
		assert.Equal(t, []float64{3}, v.Float64s())
	}
	v, err := s.Permute()
	require.NoError(t, err)
	assert.Equal(t, []float64{3}, v.Float64s())
}

func TestTensorBroadcastTo(t *testing.T) {
	x := tvArange(t, 3, 1)
	v, err := x.BroadcastTo([]int{2, 3, 4})
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3, 4}, v.Shape())
	assert.Equal(t, []int{0, 1, 0}, v.Strides())
	assert.False(t, v.IsContiguous())
	want := make([]int64, 0, 24)
	for i := 0; i < 2; i++ {
		for j := 0; j < 3; j++ {
			for k := 0; k < 4; k++ {
				want = append(want, int64(j))
			}
		}
	}
	assert.Equal(t, want, v.Int64s())
	assert.Same(t, x.Storage(), v.Storage())

	s, err := tensor.Scalar(dtype.Float64, 2.5)
	require.NoError(t, err)
	w, err := s.BroadcastTo([]int{2, 2})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 0}, w.Strides())
	assert.Equal(t, []float64{2.5, 2.5, 2.5, 2.5}, w.Float64s())

	// to a size-0 dim
	z, err := x.BroadcastTo([]int{3, 0})
	require.NoError(t, err)
	assert.Equal(t, 0, z.Numel())
	assert.Empty(t, z.Int64s())

	for _, bad := range [][]int{{2, 2}, {4, 1}, {1}, {2, 4, 1}} {
		_, err := x.BroadcastTo(bad)
		require.Error(t, err, "%v", bad)
		assert.Equal(t, errs.Value, errs.KindOf(err))
		assert.Contains(t, err.Error(), "(3, 1)")
		assert.Contains(t, err.Error(), tensor.FormatShape(bad))
	}
}

func TestTensorReshape(t *testing.T) {
	x := tvArange(t, 2, 3, 4)
	// contiguous: always a view sharing storage, same row-major order
	for _, shape := range [][]int{{24}, {4, 6}, {2, 12}, {1, 24, 1}, {2, 3, 2, 2}} {
		v, err := x.Reshape(shape)
		require.NoError(t, err, "%v", shape)
		assert.Equal(t, shape, v.Shape())
		assert.Same(t, x.Storage(), v.Storage())
		assert.True(t, v.IsContiguous())
		assert.Equal(t, x.Int64s(), v.Int64s())
	}
	// a contiguous slice with an offset keeps its offset
	sl, err := x.Slice(0, 1, 2, 1)
	require.NoError(t, err)
	require.True(t, sl.IsContiguous())
	v, err := sl.Reshape([]int{3, 4})
	require.NoError(t, err)
	assert.Equal(t, 12, v.Offset())
	assert.Equal(t, sl.Int64s(), v.Int64s())

	// wrong element count: a Value error naming both shapes
	for _, shape := range [][]int{{25}, {5, 5}, {}, {0}} {
		_, err := x.Reshape(shape)
		require.Error(t, err, "%v", shape)
		assert.Equal(t, errs.Value, errs.KindOf(err))
		assert.Contains(t, err.Error(), "(2, 3, 4)")
		assert.Contains(t, err.Error(), tensor.FormatShape(shape))
	}
	_, err = x.Reshape([]int{-24})
	require.Error(t, err)
	assert.Equal(t, errs.Value, errs.KindOf(err))

	// non-contiguous: inserting / dropping size-1 dims is a view ...
	tr, err := x.Transpose(0, 2) // (4, 3, 2)
	require.NoError(t, err)
	for _, shape := range [][]int{{4, 3, 2}, {1, 4, 3, 2}, {4, 1, 3, 2, 1}} {
		v, err := tr.Reshape(shape)
		require.NoError(t, err, "%v", shape)
		assert.Same(t, x.Storage(), v.Storage())
		assert.Equal(t, tr.Int64s(), v.Int64s())
	}
	// ... anything else needs a copy and is refused
	for _, shape := range [][]int{{24}, {12, 2}, {4, 6}} {
		_, err := tr.Reshape(shape)
		require.Error(t, err, "%v", shape)
		assert.Equal(t, errs.Value, errs.KindOf(err))
		assert.Contains(t, err.Error(), "(4, 3, 2)")
	}
	// zero-size tensors reshape freely
	z := tvArange(t, 0, 3)
	zt, err := z.Transpose(0, 1)
	require.NoError(t, err)
	for _, shape := range [][]int{{0}, {3, 0, 5}, {0, 0}} {
		v, err := zt.Reshape(shape)
		require.NoError(t, err, "%v", shape)
		assert.Equal(t, 0, v.Numel())
	}
}

func TestTensorIsContiguous(t *testing.T) {
	st := tensor.BorrowStorage(make([]byte, 8*64), false, nil)
	cases := []struct {
		shape, strides []int
		offset         int
		want           bool
	}{
		{nil, nil, 0, true},
		{[]int{5}, []int{1}, 3, true},
		{[]int{5}, []int{2}, 0, false},
		{[]int{5}, []int{-1}, 4, false},
		{[]int{5}, []int{0}, 0, false},
		{[]int{1}, []int{0}, 0, true},
		{[]int{1}, []int{-7}, 9, true}, // size-1 dims may have any stride
		{[]int{2, 1, 3}, []int{3, 99, 1}, 0, true},
		{[]int{2, 3}, []int{1, 2}, 0, false},
		{[]int{2, 3}, []int{3, 1}, 0, true},
		{[]int{2, 3}, []int{4, 1}, 0, false}, // row padding
		{[]int{0, 3}, []int{5, 9}, 0, true},  // empty
		{[]int{3, 0}, []int{-1, 7}, 5, true},
		{[]int{4, 1, 1}, []int{1, 0, 0}, 0, true},
	}
	for _, c := range cases {
		v, err := tensor.NewView(st, dtype.Float64, c.shape, c.strides, c.offset)
		require.NoError(t, err, "%v %v", c.shape, c.strides)
		assert.Equal(t, c.want, v.IsContiguous(), "shape %v strides %v", c.shape, c.strides)
	}
}

func TestTensorCloneNonContiguous(t *testing.T) {
	x := tvArange(t, 3, 4)
	rev, err := x.Slice(1, -1, tvBound(tvNone, -1, false), -1)
	require.NoError(t, err)
	tr, err := rev.Transpose(0, 1)
	require.NoError(t, err)
	col, err := x.Slice(1, 1, 2, 1)
	require.NoError(t, err)
	bc, err := col.BroadcastTo([]int{2, 3, 5})
	require.NoError(t, err)
	zero, err := x.Slice(0, 2, 2, 1)
	require.NoError(t, err)
	one, err := x.Slice(1, 3, 4, 1) // (3, 1)
	require.NoError(t, err)
	elem, err := one.Slice(0, 2, 3, 1)
	require.NoError(t, err)
	scalar, err := elem.Reshape(nil)
	require.NoError(t, err)
	for name, v := range map[string]*tensor.Tensor{"reversed": rev, "transposed": tr, "broadcast": bc, "empty": zero, "0-d at offset": scalar} {
		c, err := v.Clone()
		require.NoError(t, err, name)
		assert.True(t, c.IsContiguous(), name)
		assert.Equal(t, 0, c.Offset(), name)
		assert.Equal(t, v.Shape(), c.Shape(), name)
		assert.Equal(t, v.Int64s(), c.Int64s(), name)
		assert.Equal(t, v.Numel()*8, c.Storage().Len(), name)
		if v.Numel() > 0 {
			assert.NotSame(t, v.Storage(), c.Storage(), name)
		}
	}
	assert.Equal(t, []int64{11}, scalar.Int64s())
	assert.Equal(t, []int64{3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8}, rev.Int64s())
}

func TestTensorNumel(t *testing.T) {
	big := 1 << 62
	cases := []struct {
		shape []int
		want  int
		err   bool
	}{
		{nil, 1, false},
		{[]int{}, 1, false},
		{[]int{0}, 0, false},
		{[]int{2, 3, 4}, 24, false},
		{[]int{math.MaxInt}, math.MaxInt, false},
		{[]int{math.MaxInt, 1, 1}, math.MaxInt, false},
		{[]int{1 << 31, 1 << 31}, 1 << 62, false},
		{[]int{big, 2}, 0, true}, // exactly 2^63
		{[]int{2, big}, 0, true},
		{[]int{1 << 21, 1 << 21, 1 << 21}, 0, true},
		{[]int{1 << 32, 1 << 32}, 0, true}, // 2^64 wraps to 0 in uint64
		{[]int{1 << 32, 1 << 32, 3}, 0, true},
		{[]int{math.MaxInt, 2}, 0, true},
		{[]int{3, math.MaxInt / 2}, 0, true},
		{[]int{big, 2, 0}, 0, false}, // a zero dim makes the count 0 whatever the rest
		{[]int{0, math.MaxInt, math.MaxInt}, 0, false},
		{[]int{-1}, 0, true},
		{[]int{2, -3}, 0, true},
		{[]int{0, -1}, 0, true},
		{[]int{math.MinInt}, 0, true},
		{make([]int, 65), 0, true}, // more than MaxDims
	}
	for _, c := range cases {
		n, err := tensor.Numel(c.shape)
		if c.err {
			require.Error(t, err, "%v", c.shape)
			assert.Equal(t, errs.Value, errs.KindOf(err), "%v", c.shape)
			continue
		}
		require.NoError(t, err, "%v", c.shape)
		assert.Equal(t, c.want, n, "%v", c.shape)
	}
	ones := make([]int, tensor.MaxDims)
	for i := range ones {
		ones[i] = 1
	}
	n, err := tensor.Numel(ones)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

// tvNaiveOffsets lists the element offsets of a strided layout in row-major order.
func tvNaiveOffsets(shape []int, off int, strides []int) []int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	out := make([]int, 0, n)
	pos := make([]int, len(shape))
	for k := 0; k < n; k++ {
		o := off
		for i := range shape {
			o += pos[i] * strides[i]
		}
		out = append(out, o)
		for i := len(pos) - 1; i >= 0; i-- {
			pos[i]++
			if pos[i] < shape[i] {
				break
			}
			pos[i] = 0
		}
	}
	return out
}

// tvIterOffsets walks rows [start, end) of an Iter with a RowCursor and
// lists each operand's offsets.
func tvIterOffsets(it *tensor.Iter, start, end int) [][]int {
	out := make([][]int, it.NumOperands())
	if start >= end {
		return out
	}
	var cur tensor.RowCursor
	cur.Seek(it, start)
	for r := start; r < end; r++ {
		for o := range out {
			for k := 0; k < it.Inner(); k++ {
				out[o] = append(out[o], cur.Offs[o]+k*it.InnerStride(o))
			}
		}
		cur.Next(it)
	}
	return out
}

// tvIterShape lists an Iter's coalesced dims, and per operand its strides.
func tvIterShape(it *tensor.Iter) ([]int, [][]int) {
	shape := make([]int, it.Ndim())
	strides := make([][]int, it.NumOperands())
	for i := range shape {
		shape[i] = it.Dim(i)
		for o := range strides {
			strides[o] = append(strides[o], it.Stride(o, i))
		}
	}
	return shape, strides
}

func TestTensorIterCoalescing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	iters := 4000
	if testing.Short() {
		iters = 500
	}
	for it := 0; it < iters; it++ {
		nd := rng.IntN(6)
		shape := make([]int, nd)
		for i := range shape {
			shape[i] = []int{0, 1, 1, 2, 3, 4, 5}[rng.IntN(7)]
			if it%50 == 0 {
				shape[i] = rng.IntN(2)
			}
		}
		nops := 1 + rng.IntN(3)
		offs := make([]int, nops)
		strides := make([][]int, nops)
		for o := range strides {
			offs[o] = rng.IntN(100)
			strides[o] = make([]int, nd)
			switch rng.IntN(3) {
			case 0: // contiguous, maybe with some dims zeroed (broadcast)
				copy(strides[o], tensor.ContiguousStrides(shape))
				for i := range strides[o] {
					if rng.IntN(4) == 0 {
						strides[o][i] = 0
					}
				}
			case 1: // a permuted contiguous layout
				perm := rng.Perm(nd)
				ps := make([]int, nd)
				for i, q := range perm {
					ps[i] = shape[q]
				}
				cs := tensor.ContiguousStrides(ps)
				for i, q := range perm {
					strides[o][q] = cs[i]
				}
			default: // arbitrary
				for i := range strides[o] {
					strides[o][i] = rng.IntN(21) - 10
				}
			}
		}
		var p tensor.Iter
		p.Reset(shape, nil, offs, strides...)
		numel := 1
		for _, d := range shape {
			numel *= d
		}
		ps, pst := tvIterShape(&p)
		msg := fmt.Sprintf("shape %v offs %v strides %v -> loop %v %v", shape, offs, strides, ps, pst)
		require.NotEmpty(t, ps, msg)
		require.Equal(t, numel, p.Numel(), msg)
		require.Equal(t, nops, p.NumOperands())
		nonOne := 0
		for _, d := range shape {
			if d != 1 {
				nonOne++
			}
		}
		require.LessOrEqual(t, len(ps), max(nonOne, 1), msg)
		if numel == 0 {
			continue
		}
		got := tvIterOffsets(&p, 0, p.Rows())
		for o := 0; o < nops; o++ {
			require.Equal(t, tvNaiveOffsets(shape, offs[o], strides[o]), got[o], "operand %d: %s", o, msg)
		}
		// any sub-range of rows gives the matching slice of the sequence
		a := rng.IntN(p.Rows() + 1)
		b := a + rng.IntN(p.Rows()-a+1)
		sub := tvIterOffsets(&p, a, b)
		for o := 0; o < nops; o++ {
			want := got[o][a*p.Inner() : b*p.Inner()]
			if len(want) == 0 {
				require.Empty(t, sub[o], msg)
			} else {
				require.Equal(t, want, sub[o], "rows [%d,%d) operand %d: %s", a, b, o, msg)
			}
		}
	}
}

// Layouts whose dims chain for every operand coalesce into one loop.
func TestTensorIterCoalescesContiguous(t *testing.T) {
	var p tensor.Iter
	shape := []int{2, 1, 3, 4}
	cs := tensor.ContiguousStrides(shape)
	p.Reset(shape, nil, []int{0, 5}, cs, cs)
	ps, pst := tvIterShape(&p)
	assert.Equal(t, []int{24}, ps)
	assert.Equal(t, [][]int{{1}, {1}}, pst)
	assert.Equal(t, 1, p.Rows())

	// a broadcast operand (zero strides on the leading dims) breaks the chain
	// only where it must
	bs := []int{0, 0, 4, 1}
	p.Reset(shape, nil, []int{0, 0}, cs, bs)
	ps, pst = tvIterShape(&p)
	assert.Equal(t, []int{2, 12}, ps)
	assert.Equal(t, [][]int{{12, 1}, {0, 1}}, pst)

	// 0-d and all-ones shapes give a single one-element loop
	p.Reset(nil, nil, []int{7}, []int{})
	ps, _ = tvIterShape(&p)
	assert.Equal(t, []int{1}, ps)
	assert.Equal(t, 1, p.Numel())
	assert.Equal(t, [][]int{{7}}, tvIterOffsets(&p, 0, 1))
	p.Reset([]int{1, 1}, nil, []int{2}, []int{5, -3})
	assert.Equal(t, [][]int{{2}}, tvIterOffsets(&p, 0, 1))

	// reversed dims chain too (stride -1 under stride -4 over a 4-dim)
	p.Reset([]int{3, 4}, nil, []int{11}, []int{-4, -1})
	ps, _ = tvIterShape(&p)
	assert.Equal(t, []int{12}, ps)
	assert.Equal(t, -1, p.InnerStride(0))
}

// Views built with NewView over a borrowed storage: negative and zero
// strides within bounds are accepted and read the right bytes.
func TestTensorNewViewStrided(t *testing.T) {
	base := tvArange(t, 10)
	v, err := tensor.NewView(base.Storage(), dtype.Int64, []int{2, 3}, []int{-3, 2}, 5)
	require.NoError(t, err)
	assert.Equal(t, []int64{5, 7, 9, 2, 4, 6}, v.Int64s())
	w, err := tensor.NewView(base.Storage(), dtype.Int64, []int{3, 2}, []int{0, -9}, 9)
	require.NoError(t, err)
	assert.Equal(t, []int64{9, 0, 9, 0, 9, 0}, w.Int64s())
	// reinterpreting the bytes as int32 doubles the element count
	h, err := tensor.NewView(base.Storage(), dtype.Int32, []int{20}, []int{1}, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(3), h.Int64s()[6])
	// an empty view may sit anywhere
	e, err := tensor.NewView(base.Storage(), dtype.Int64, []int{0, 4}, []int{1000, 1000}, 1<<40)
	require.NoError(t, err)
	assert.Equal(t, 0, e.Numel())
}

// Storages of Go memory pin on export: the address is the storage's own,
// stable, and dropping a pinned storage unpins it (a leaked pin would make
// the collector panic).
func TestStoragePinnedPointer(t *testing.T) {
	for i := 0; i < 200; i++ {
		s, err := tensor.NewStorage(64)
		require.NoError(t, err)
		p := s.PinnedPointer()
		require.Equal(t, s.Pointer(), p)
		require.Equal(t, p, s.PinnedPointer(), "pinning twice returns the same address")
	}
	empty, err := tensor.NewStorage(0)
	require.NoError(t, err)
	assert.Nil(t, empty.PinnedPointer())
	runtime.GC()
	runtime.GC()
	time.Sleep(10 * time.Millisecond) // cleanups run on their own goroutine
	runtime.GC()
}
