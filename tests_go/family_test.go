package tests_go

// The min/max family beyond the op table (docs/semantics.md): gradients
// that partition exactly at ties and NaN, clamp equal to its composition,
// forward mode against finite differences and against the backward
// (<J v, u> == <v, Jᵀ u>), out= and the family's errors.

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// familyBackends are the backends every family test runs on.
func opBackends() map[string]kernels {
	return map[string]kernels{"cpu": splitting(3), "ref": ref.Backend{}}
}

// tieData returns n float64 values drawn from a few levels, with NaNs and
// both zeros: many ties in every slice.
func tieData(seed uint64, n int) []float64 {
	r := newRand(seed)
	levels := []float64{-2, -0.0, 0, 1, 1, 3, math.NaN(), math.Inf(1)}
	out := make([]float64, n)
	for i := range out {
		out[i] = levels[r.IntN(len(levels))]
		if out[i] == 0 && r.IntN(2) == 0 {
			out[i] = math.Copysign(0, -1)
		}
	}
	return out
}

// firstWinner is the oracle of the fold: the position of the first NaN, or
// of the first best element, in vals.
func firstWinner(vals []float64, greater bool) int {
	w := 0
	for k := 1; k < len(vals); k++ {
		a, b := vals[w], vals[k]
		if a != a {
			break
		}
		if b != b || (greater && b > a) || (!greater && b < a) {
			w = k
		}
	}
	return w
}

func TestFamilyReductionsPickTheFirstWinnerAndRouteTheWholeGradient(t *testing.T) {
	for name, be := range opBackends() {
		for _, greater := range []bool{false, true} {
			for seed := uint64(1); seed <= 20; seed++ {
				rows, cols := 7, 9
				vals := tieData(seed, rows*cols)
				x := leaf(t, f64(t, []int{rows, cols}, vals...))
				c := ctxFor(be)
				var y, idx *tensor.Tensor
				var err error
				if greater {
					y, idx, err = ops.MaxDim(c, x, 1, false)
				} else {
					y, idx, err = ops.MinDim(c, x, 1, false)
				}
				require.NoError(t, err)
				g := f64(t, []int{rows}, 1, 2, 3, 4, 5, 6, 7)
				require.NoError(t, ops.Backward(c, ts(y), ts(g), false, false))
				grad := x.Grad().Float64s()
				for i := 0; i < rows; i++ {
					row := vals[i*cols : (i+1)*cols]
					w := firstWinner(row, greater)
					assert.Equal(t, int64(w), idx.Int64s()[i], "%s seed %d row %d", name, seed, i)
					assert.Equal(t, math.Float64bits(row[w]), math.Float64bits(y.Float64s()[i]), "%s value bits", name)
					var sum float64
					for k := 0; k < cols; k++ {
						want := 0.0
						if k == w {
							want = float64(i + 1)
						}
						assert.Equal(t, want, grad[i*cols+k], "%s seed %d row %d col %d", name, seed, i, k)
						sum += grad[i*cols+k]
					}
					assert.Equal(t, float64(i+1), sum, "a slice's gradient sums to its output's")
				}
			}
		}
	}
}

func TestFamilyReductionOverSeveralDimsAndAll(t *testing.T) {
	vals := tieData(99, 2*3*4)
	x := leaf(t, f64(t, []int{2, 3, 4}, vals...))
	// dims (0, 2): the slice of output j is x[:, j, :] in row-major order.
	y := must(t)(ops.Amin(nil, x, []int{0, 2}, true))
	requireShape(t, []int{1, 3, 1}, y.ShapeRef())
	require.NoError(t, ops.Backward(nil, ts(y), ts(f64(t, []int{1, 3, 1}, 1, 1, 1)), false, false))
	for j := 0; j < 3; j++ {
		var slice []float64
		var pos []int
		for i := 0; i < 2; i++ {
			for k := 0; k < 4; k++ {
				slice = append(slice, vals[i*12+j*4+k])
				pos = append(pos, i*12+j*4+k)
			}
		}
		w := firstWinner(slice, false)
		assert.Equal(t, math.Float64bits(slice[w]), math.Float64bits(y.Float64s()[j]))
		for n, p := range pos {
			want := 0.0
			if n == w {
				want = 1
			}
			assert.Equal(t, want, x.Grad().Float64s()[p])
		}
	}
	// dim nil: the flat index; keepdim gives (1, 1, 1).
	i := must(t)(ops.Argmax(nil, x, nil, true))
	requireShape(t, []int{1, 1, 1}, i.ShapeRef())
	assert.Equal(t, int64(firstWinner(vals, true)), i.Int64s()[0])
	// dims () reduces nothing: the values themselves, gradient passes.
	same := must(t)(ops.Amax(nil, x, []int{}, false))
	requireShape(t, []int{2, 3, 4}, same.ShapeRef())
	requireBitsEqual(t, contiguousCopy(t, x.Detach()), same, false)
}

func TestFamilyReductionErrors(t *testing.T) {
	empty := must(t)(tensor.New(dtype.Float32, []int{3, 0}))
	_, err := ops.Amax(nil, empty, []int{1}, false)
	assert.Equal(t, errs.Value, errs.KindOf(err), "zero-size slice: %v", err)
	_, err = ops.Argmin(nil, empty, nil, false)
	assert.Equal(t, errs.Value, errs.KindOf(err))
	// A zero-size dim that is not reduced is fine.
	y, err := ops.Amax(nil, empty, []int{0}, false)
	require.NoError(t, err)
	requireShape(t, []int{0}, y.ShapeRef())

	x := must(t)(tensor.New(dtype.Float32, []int{2, 3}))
	for _, dims := range [][]int{{2}, {-3}, {0, 0}, {1, -1}} {
		_, err = ops.Amin(nil, x, dims, false)
		assert.Equal(t, errs.Value, errs.KindOf(err), "dims %v: %v", dims, err)
	}
	_, _, err = ops.MinDim(nil, x, 5, false)
	assert.Equal(t, errs.Value, errs.KindOf(err))
	_, err = ops.Clamp(nil, x, nil, nil)
	assert.Equal(t, errs.Value, errs.KindOf(err))
}

// clampComposed is minimum(maximum(x, lo), hi), skipping nil bounds.
func clampComposed(c *ops.Context, x, lo, hi *tensor.Tensor) (*tensor.Tensor, error) {
	y := x
	var err error
	if lo != nil {
		if y, err = ops.Maximum(c, y, lo); err != nil {
			return nil, err
		}
	}
	if hi != nil {
		y, err = ops.Minimum(c, y, hi)
	}
	return y, err
}

func TestClampEqualsItsCompositionBitForBit(t *testing.T) {
	shapes := [][3][]int{
		{{4, 5}, {4, 5}, {4, 5}},
		{{4, 5}, {5}, {4, 1}},
		{{4, 5}, {}, {}},
		{{5}, {4, 5}, {}}, // a bound broadcasts x up
	}
	for name, be := range opBackends() {
		for _, dt := range allDtypes {
			for si, sh := range shapes {
				for _, which := range []int{3, 1, 2} { // both bounds, lo only, hi only
					r := newRand(seedOf(name, dt.String(), string(rune('a'+si)), string(rune('0'+which))))
					mk := func(shape []int) *tensor.Tensor {
						x := makeTensor(t, dt, shape, contiguous, func(n int) []uint64 { return genBits(r, dt, n, genSpecial) })
						if dt.IsFloat() {
							require.NoError(t, x.SetRequiresGrad(true))
						}
						return x
					}
					x := mk(sh[0])
					var lo, hi *tensor.Tensor
					if which&1 != 0 {
						lo = mk(sh[1])
					}
					if which&2 != 0 {
						hi = mk(sh[2])
					}
					c := ctxFor(be)
					got, err := ops.Clamp(c, x, lo, hi)
					require.NoError(t, err)
					want, err := clampComposed(c, x, lo, hi)
					require.NoError(t, err)
					msg := []any{"%s %v shapes %v bounds %d", name, dt, sh, which}
					requireBitsEqual(t, want, got, false, msg...)
					if !dt.IsFloat() {
						continue
					}
					fn, _ := got.GradFn()
					assert.Equal(t, "ClampBackward", fn.Name())
					g := makeTensor(t, dt, got.ShapeRef(), contiguous, func(n int) []uint64 { return genBits(r, dt, n, genSmooth) })
					inputs := []*tensor.Tensor{x}
					for _, b := range []*tensor.Tensor{lo, hi} {
						if b != nil {
							inputs = append(inputs, b)
						}
					}
					gotG, err := ops.Grad(c, ts(got), inputs, ts(g), nil, false, false)
					require.NoError(t, err)
					wantG, err := ops.Grad(c, ts(want), inputs, ts(g), nil, false, false)
					require.NoError(t, err)
					for k := range inputs {
						requireBitsEqual(t, wantG[k], gotG[k], false, msg...)
					}
				}
			}
		}
	}
}

func TestClampEdgeCases(t *testing.T) {
	x := f64(t, []int{5}, -1, 0.5, 2, math.NaN(), 1)
	// min > max: every non-NaN element is max; NaN stays NaN.
	y := must(t)(ops.Clamp(nil, x, f64(t, nil, 1.5), f64(t, nil, 1)))
	got := y.Float64s()
	assert.Equal(t, []float64{1, 1, 1}, []float64{got[0], got[1], got[2]})
	assert.True(t, math.IsNaN(got[3]))
	assert.Equal(t, 1.0, got[4])
	// At x == bound the gradient goes to x.
	xl := leaf(t, f64(t, []int{2}, 0, 1))
	lo := leaf(t, f64(t, []int{2}, 0, 0))
	hi := leaf(t, f64(t, []int{2}, 1, 1))
	y = must(t)(ops.Clamp(nil, xl, lo, hi))
	require.NoError(t, ops.Backward(nil, ts(sumT(t, nil, y)), nil, false, false))
	assert.Equal(t, []float64{1, 1}, xl.Grad().Float64s())
	assert.Equal(t, []float64{0, 0}, lo.Grad().Float64s())
	assert.Equal(t, []float64{0, 0}, hi.Grad().Float64s())
	// Integer bounds on a float tensor and a float bound on an int tensor
	// promote as the composition does.
	xi := must(t)(tensor.FromInt64s(dtype.Int32, []int{3}, []int64{-5, 3, 9}))
	yi := must(t)(ops.Clamp(nil, xi, nil, must(t)(tensor.WrappedScalar(dtype.Float64, 2.5))))
	assert.Equal(t, dtype.Float32, yi.Dtype())
	assert.Equal(t, []float64{-5, 2.5, 2.5}, yi.Float64s())
}

// smallInts returns n float64 values that are small integers (sums of
// products stay exact), with ties.
func smallInts(seed uint64, n int) []float64 {
	r := newRand(seed)
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(r.IntN(7) - 3)
	}
	return out
}

// familyCall is one family op as a function of its float64 inputs.
type familyCall struct {
	name   string
	shapes [][]int
	call   func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error)
}

var familyCalls = []familyCall{
	{"minimum", [][]int{{3, 4}, {4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return ops.Minimum(c, in[0], in[1]) }},
	{"maximum", [][]int{{3, 1}, {3, 4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return ops.Maximum(c, in[0], in[1]) }},
	{"fmin", [][]int{{3, 4}, {3, 4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return ops.Fmin(c, in[0], in[1]) }},
	{"fmax", [][]int{{4}, {3, 4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return ops.Fmax(c, in[0], in[1]) }},
	{"clamp", [][]int{{3, 4}, {4}, {3, 1}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) {
		return ops.Clamp(c, in[0], in[1], in[2])
	}},
	{"amin", [][]int{{3, 4, 2}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) {
		return ops.Amin(c, in[0], []int{0, 2}, false)
	}},
	{"amax", [][]int{{3, 4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) {
		return ops.Amax(c, in[0], nil, false)
	}},
	{"min", [][]int{{3, 4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) {
		v, _, err := ops.MinDim(c, in[0], 1, true)
		return v, err
	}},
	{"max", [][]int{{3, 4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) {
		v, _, err := ops.MaxDim(c, in[0], 0, false)
		return v, err
	}},
}

// jvpOf runs op name through CallJvp with attrs matching call.
func jvpOf(t *testing.T, c *ops.Context, fc familyCall, in, tangents []*tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
	t.Helper()
	s, ok := ops.Lookup(fc.name)
	require.True(t, ok)
	var attrs []int64
	switch fc.name {
	case "amin":
		attrs = []int64{0, 2, 0, 2}
	case "amax":
		attrs = []int64{0, -1}
	case "min":
		attrs = []int64{1, 1, 1}
	case "max":
		attrs = []int64{0, 1, 0}
	}
	outs, touts, err := ops.CallJvp(c, s.ID, in, tangents, attrs)
	require.NoError(t, err)
	return outs[0], touts[0]
}

func TestFamilyJvpIsTheExactTransposeOfTheVjp(t *testing.T) {
	for name, be := range opBackends() {
		for _, fc := range familyCalls {
			for seed := uint64(1); seed <= 5; seed++ {
				c := ctxFor(be)
				var in, vs []*tensor.Tensor
				for k, sh := range fc.shapes {
					in = append(in, leaf(t, f64(t, sh, smallInts(seed*10+uint64(k), numel(sh))...)))
					vs = append(vs, f64(t, sh, smallInts(seed*100+uint64(k), numel(sh))...))
				}
				y, jv := jvpOf(t, c, fc, in, vs)
				want := must(t)(fc.call(c, in))
				requireBitsEqual(t, want.Detach(), y.Detach(), false, "%s %s: jvp's primal output", name, fc.name)
				u := f64(t, y.ShapeRef(), smallInts(seed*1000, y.Numel())...)
				jtu, err := ops.Grad(c, ts(want), in, ts(u), nil, false, false)
				require.NoError(t, err)
				lhs := dot(jv.Float64s(), u.Float64s())
				rhs := 0.0
				for k := range in {
					rhs += dot(vs[k].Float64s(), jtu[k].Float64s())
				}
				assert.Equal(t, lhs, rhs, "%s %s seed %d: <J v, u> == <v, Jᵀ u>", name, fc.name, seed)
				// The tangent of each output is its winner's tangent: on the
				// family, J v with v = the inputs themselves is the output.
				_, self := jvpOf(t, c, fc, in, in)
				requireBitsEqual(t, want.Detach(), self, false, "%s %s: J x is the winners", name, fc.name)
			}
		}
	}
}

// Every callable op's jvp against central finite differences (float64).
func TestJvpMatchesFiniteDifferences(t *testing.T) {
	calls := append([]familyCall{
		{"add", [][]int{{3, 4}, {4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return ops.Add(c, in[0], in[1]) }},
		{"sub", [][]int{{3, 1}, {4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return ops.Sub(c, in[0], in[1]) }},
		{"mul", [][]int{{3, 4}, {3, 4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return ops.Mul(c, in[0], in[1]) }},
		{"div", [][]int{{3, 4}, {4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return ops.Div(c, in[0], in[1]) }},
		{"neg", [][]int{{3, 4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return ops.Neg(c, in[0]) }},
		{"sum", [][]int{{3, 4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) {
			return ops.Sum(c, in[0], nil, false)
		}},
		{"mean", [][]int{{3, 4}}, func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) {
			return ops.Mean(c, in[0], nil, false)
		}},
	}, familyCalls...)
	for _, fc := range calls {
		r := newRand(seedOf("jvp-fd", fc.name))
		var in, vs []*tensor.Tensor
		var raw [][]float64
		for _, sh := range fc.shapes {
			vals := make([]float64, numel(sh))
			for i := range vals {
				vals[i] = float64(i)*0.37 + r.Float64() // distinct: no ties within eps
				if fc.name == "div" {
					vals[i] += 1
				}
			}
			raw = append(raw, vals)
			in = append(in, f64(t, sh, vals...))
			tv := make([]float64, len(vals))
			for i := range tv {
				tv[i] = r.Float64()*2 - 1
			}
			vs = append(vs, f64(t, sh, tv...))
		}
		attrsName := fc
		switch fc.name {
		case "sum", "mean":
			attrsName.name = fc.name
		}
		var jv *tensor.Tensor
		if fc.name == "sum" || fc.name == "mean" {
			s, _ := ops.Lookup(fc.name)
			_, touts, err := ops.CallJvp(nil, s.ID, in, vs, []int64{0, -1})
			require.NoError(t, err)
			jv = touts[0]
		} else if s, ok := ops.Lookup(fc.name); ok && s.Kind == ops.Elementwise && s.Arity != 3 {
			_, touts, err := ops.CallJvp(nil, s.ID, in, vs, nil)
			require.NoError(t, err)
			jv = touts[0]
		} else {
			_, jv = jvpOf(t, nil, fc, in, vs)
		}
		const eps = 1e-6
		eval := func(step float64) []float64 {
			var xs []*tensor.Tensor
			for k := range in {
				v := make([]float64, len(raw[k]))
				for i := range v {
					v[i] = raw[k][i] + step*vs[k].Float64s()[i]
				}
				xs = append(xs, f64(t, fc.shapes[k], v...))
			}
			return must(t)(fc.call(nil, xs)).Float64s()
		}
		plus, minus := eval(eps), eval(-eps)
		fd := make([]float64, len(plus))
		for i := range fd {
			fd[i] = (plus[i] - minus[i]) / (2 * eps)
		}
		requireClose(t, fd, jv.Float64s(), 1e-6, 1e-5, fc.name)
	}
}

// argmin/argmax have a forward-mode rule too (docs/autograd.md: every
// built-in op has one): their int64 positions get no tangent, and a jvp
// through them does not fail.
func TestArgJvpHasNoTangent(t *testing.T) {
	x := f64(t, []int{2, 3}, 3, 1, 2, 0, 5, 5)
	v := f64(t, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	for _, name := range []string{"argmin", "argmax"} {
		s, ok := ops.Lookup(name)
		require.True(t, ok)
		for _, attrs := range [][]int64{{0, -1}, {1, 1, 1}} {
			outs, touts, err := ops.CallJvp(nil, s.ID, ts(x), ts(v), attrs)
			require.NoError(t, err, name)
			require.Len(t, outs, 1)
			require.Len(t, touts, 1)
			assert.Nil(t, touts[0], name)
			want, err := ops.CallN(nil, s.ID, ts(x), attrs, nil)
			require.NoError(t, err)
			assert.Equal(t, want[0].Int64s(), outs[0].Int64s(), name)
		}
	}
}

func TestOutArgument(t *testing.T) {
	minID := func(name string) int { s, _ := ops.Lookup(name); return s.ID }
	a := f64(t, []int{2, 3}, 1, 5, 3, -1, 0, 7)
	b := f64(t, []int{3}, 2, 2, 2)
	c := ops.Default().NoGrad()

	out := must(t)(tensor.New(dtype.Float64, []int{2, 3}))
	res, err := ops.CallN(c, minID("minimum"), ts(a, b), nil, ts(out))
	require.NoError(t, err)
	assert.Same(t, out, res[0])
	assert.Equal(t, []float64{1, 2, 2, -1, 0, 2}, out.Float64s())

	// In place: out is an input.
	acopy := contiguousCopy(t, a)
	_, err = ops.CallN(c, minID("maximum"), ts(acopy, b), nil, ts(acopy))
	require.NoError(t, err)
	assert.Equal(t, []float64{2, 5, 3, 2, 2, 7}, acopy.Float64s())

	// A partial overlap (a transposed view of an input) is refused and out
	// is untouched.
	sq := f64(t, []int{2, 2}, 1, 2, 3, 4)
	tr := must(t)(sq.Transpose(0, 1))
	_, err = ops.CallN(c, minID("minimum"), ts(sq, f64(t, nil, 2.5)), nil, ts(tr))
	assert.Equal(t, errs.Value, errs.KindOf(err), "%v", err)
	assert.Equal(t, []float64{1, 2, 3, 4}, sq.Float64s())

	// Wrong shape, wrong dtype: errors, out untouched.
	for _, bad := range []*tensor.Tensor{
		f64(t, []int{3}, 9, 9, 9),
		must(t)(tensor.FromFloat64s(dtype.Float32, []int{2, 3}, []float64{9, 9, 9, 9, 9, 9})),
	} {
		before := bad.Float64s()
		for _, name := range []string{"minimum", "clamp"} {
			in := ts(a, b)
			if name == "clamp" {
				in = ts(a, b, nil)
			}
			_, err = ops.CallN(c, minID(name), in, nil, ts(bad))
			require.Error(t, err)
			assert.Contains(t, []errs.Kind{errs.Value, errs.Type}, errs.KindOf(err))
			assert.Equal(t, before, bad.Float64s())
		}
	}

	// Reductions and two-output ops.
	vals := must(t)(tensor.New(dtype.Float64, []int{2}))
	idx := must(t)(tensor.New(dtype.Int64, []int{2}))
	res, err = ops.CallN(c, minID("max"), ts(a), []int64{0, 1, 1}, ts(vals, idx))
	require.NoError(t, err)
	assert.Same(t, vals, res[0])
	assert.Equal(t, []float64{5, 7}, vals.Float64s())
	assert.Equal(t, []int64{1, 2}, idx.Int64s())

	// A call that would record a graph is refused.
	la := leaf(t, contiguousCopy(t, a))
	_, err = ops.CallN(ops.Default(), minID("minimum"), ts(la, b), nil, ts(out))
	require.Error(t, err)
	assert.Equal(t, errs.Runtime, errs.KindOf(err))
	// argmin never records: allowed in grad mode.
	ai := must(t)(tensor.New(dtype.Int64, []int{2}))
	_, err = ops.CallN(ops.Default(), minID("argmin"), ts(la), []int64{0, 1, 1}, ts(ai))
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, ai.Int64s())
}
