package tests_go

// ops.Winners: where each output of a min/max family op came from (the
// data the PyTorch and JAX bridges differentiate with), against the
// selection rule restated in the test (winsF) on data with ties, NaN and
// signed zeros, with broadcasting; and into given out= tensors.

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

var winnerVals = []float64{1, 2, math.NaN(), 0, math.Copysign(0, -1), 2, math.Inf(-1), 5}

func TestWinnersBinary(t *testing.T) {
	nan := math.NaN()
	a := fromVals(t, dtype.Float64, []int{2, 4}, winnerVals...)
	b := fromVals(t, dtype.Float32, []int{4}, 1, nan, nan, math.Copysign(0, -1))
	for _, tc := range []struct {
		name string
		rule selRule
	}{{"minimum", selMin}, {"maximum", selMax}, {"fmin", selFMin}, {"fmax", selFMax}} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := ops.Winners(nil, opID(tc.name), ts(a, b), nil, nil)
			require.NoError(t, err)
			require.Len(t, res, 2)
			want, err := ops.Call(nil, opID(tc.name), ts(a, b), nil)
			require.NoError(t, err)
			requireBitsEqual(t, want, res[0], false)
			mask := res[1]
			require.Equal(t, dtype.Bool, mask.Dtype())
			requireShape(t, []int{2, 4}, mask.Shape())
			bv := b.Float64s()
			for i, m := range mask.Int64s() {
				require.Equal(t, winsF(tc.rule, winnerVals[i], bv[i%4]), m == 1, "element %d", i)
			}
		})
	}
}

func TestWinnersClamp(t *testing.T) {
	x := fromVals(t, dtype.Float32, []int{8}, winnerVals...)
	lo := fromVals(t, dtype.Float32, []int{}, 0)
	hi := fromVals(t, dtype.Float32, []int{8}, 1, 1, 1, 1, 1, 3, 1, 0)
	res, err := ops.Winners(nil, opID("clamp"), ts(x, lo, hi), nil, nil)
	require.NoError(t, err)
	require.Equal(t, dtype.Int8, res[1].Dtype())
	hv := hi.Float64s()
	for i, code := range res[1].Int64s() {
		// clamp is maximum(x, lo), then minimum with hi: the winner of the last.
		want := int64(0)
		if !winsF(selMax, winnerVals[i], 0) {
			want = 1
		}
		inner := math.Max(winnerVals[i], 0)
		if want == 0 {
			inner = winnerVals[i]
		}
		if !winsF(selMin, inner, hv[i]) {
			want = 2
		}
		require.Equal(t, want, code, "element %d", i)
	}
	// Only an upper bound: nothing ever wins as the missing lower one.
	res, err = ops.Winners(nil, opID("clamp"), ts(x, nil, hi), nil, nil)
	require.NoError(t, err)
	for i, code := range res[1].Int64s() {
		require.NotEqual(t, int64(1), code, "element %d", i)
	}
}

// Into a bool out, clamp's winners say where x won: exactly where the
// int8 code is 0, on the same data (ties, NaN in x and in a bound, signed
// zeros), with either bound absent.
func TestWinnersClampBoolForm(t *testing.T) {
	x := fromVals(t, dtype.Float32, []int{8}, winnerVals...)
	for _, bounds := range [][2]*tensor.Tensor{
		{fromVals(t, dtype.Float32, []int{}, 0), fromVals(t, dtype.Float32, []int{8}, 1, 1, 1, 1, 1, 3, 1, 0)},
		{fromVals(t, dtype.Float32, []int{}, math.Copysign(0, -1)), nil},
		{nil, fromVals(t, dtype.Float32, []int{}, math.NaN())},
	} {
		codes, err := ops.Winners(nil, opID("clamp"), ts(x, bounds[0], bounds[1]), nil, nil)
		require.NoError(t, err)
		y := must(t)(tensor.Empty(dtype.Float32, []int{8}))
		mask := must(t)(tensor.Empty(dtype.Bool, []int{8}))
		res, err := ops.Winners(nil, opID("clamp"), ts(x, bounds[0], bounds[1]), nil, ts(y, mask))
		require.NoError(t, err)
		require.Same(t, mask, res[1])
		requireBitsEqual(t, codes[0], y, false)
		for i, code := range codes[1].Int64s() {
			require.Equal(t, code == 0, mask.Int64s()[i] == 1, "element %d", i)
		}
	}
}

// clamp's winners (the int8 code and the bool form), which run as passes
// of the binary Select kernels, against clamp's rule restated (RuleMax
// between x and lo, then RuleMin between that winner and hi), on random
// data drawn from ties, NaN and signed zeros, with broadcasting, either bound
// absent, floating and integer dtypes.
func TestWinnersClampRandomAgainstTheRule(t *testing.T) {
	pool := []float64{math.NaN(), math.Copysign(0, -1), 0, 1, -1, 0.5, 2, -2}
	rng := rand.New(rand.NewPCG(7, 9))
	draw := func(dt dtype.Dtype, shape []int) (*tensor.Tensor, []float64) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = pool[rng.IntN(len(pool))]
			if !dt.IsFloat() && (math.IsNaN(v[i]) || v[i] != math.Trunc(v[i])) {
				v[i] = 3
			}
		}
		return fromVals(t, dt, shape, v...), v
	}
	for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float64, dtype.Float16, dtype.Int32} {
		for trial := 0; trial < 20; trial++ {
			x, xv := draw(dt, []int{3, 4})
			lo, lov := draw(dt, []int{4})
			hi, hiv := draw(dt, []int{3, 1})
			hasLo, hasHi := trial%3 != 1, trial%3 != 2
			in := ts(x, nil, nil)
			if hasLo {
				in[1] = lo
			}
			if hasHi {
				in[2] = hi
			}
			codes, err := ops.Winners(nil, opID("clamp"), in, nil, nil)
			require.NoError(t, err)
			mask := must(t)(tensor.Empty(dtype.Bool, []int{3, 4}))
			y := must(t)(tensor.Empty(dt, []int{3, 4}))
			_, err = ops.Winners(nil, opID("clamp"), in, nil, ts(y, mask))
			require.NoError(t, err)
			for i, code := range codes[1].Int64s() {
				r, c := i/4, i%4
				w, want := xv[i], int64(0)
				if hasLo && !winsF(selMax, w, lov[c]) {
					w, want = lov[c], 1
				}
				if hasHi && !winsF(selMin, w, hiv[r]) {
					want = 2
				}
				require.Equal(t, want, code, "%v trial %d element %d", dt, trial, i)
				require.Equal(t, want == 0, mask.Int64s()[i] == 1, "%v trial %d element %d (bool form)", dt, trial, i)
			}
		}
	}
}

func TestWinnersReductions(t *testing.T) {
	x := fromVals(t, dtype.Float64, []int{2, 4}, winnerVals...)
	for _, tc := range []struct {
		name string
		rule selRule
	}{{"amin", selMin}, {"amax", selMax}, {"nanmin", selFMin}, {"nanmax", selFMax}} {
		t.Run(tc.name, func(t *testing.T) {
			// over dim 1, keepdim false: attrs keepdim, ndims, dims...
			res, err := ops.Winners(nil, opID(tc.name), ts(x), []int64{0, 1, 1}, nil)
			require.NoError(t, err)
			requireShape(t, []int{2}, res[0].Shape())
			requireShape(t, []int{2, 1}, res[1].Shape()) // positions: the keepdim shape
			for row, pos := range res[1].Int64s() {
				w := 0
				for k := 1; k < 4; k++ {
					if !winsF(tc.rule, winnerVals[row*4+w], winnerVals[row*4+k]) {
						w = k
					}
				}
				require.Equal(t, int64(w), pos, "row %d", row)
			}
			// every dim: one position among all 8 elements, row-major
			res, err = ops.Winners(nil, opID(tc.name), ts(x), []int64{1, 2, 0, 1}, nil)
			require.NoError(t, err)
			requireShape(t, []int{1, 1}, res[0].Shape())
			w := 0
			for k := 1; k < 8; k++ {
				if !winsF(tc.rule, winnerVals[w], winnerVals[k]) {
					w = k
				}
			}
			require.Equal(t, []int64{int64(w)}, res[1].Int64s())
		})
	}
}

func TestWinnersIntoOuts(t *testing.T) {
	a := fromVals(t, dtype.Float32, []int{4}, 1, 2, 3, 4)
	b := fromVals(t, dtype.Float32, []int{4}, 2, 2, 2, 2)
	y := must(t)(tensor.Empty(dtype.Float32, []int{4}))
	m := must(t)(tensor.Empty(dtype.Bool, []int{4}))
	res, err := ops.Winners(nil, opID("minimum"), ts(a, b), nil, ts(y, m))
	require.NoError(t, err)
	require.Same(t, y, res[0])
	require.Same(t, m, res[1])
	require.Equal(t, []float64{1, 2, 2, 2}, y.Float64s())
	require.Equal(t, []int64{1, 1, 0, 0}, m.Int64s())

	bad := must(t)(tensor.Empty(dtype.Int8, []int{4}))
	_, err = ops.Winners(nil, opID("minimum"), ts(a, b), nil, ts(y, bad))
	require.Error(t, err)
	_, err = ops.Winners(nil, opID("add"), ts(a, b), nil, nil)
	require.ErrorContains(t, err, "no winners")
}

func TestWinnersVJP(t *testing.T) {
	nan := math.NaN()
	a := fromVals(t, dtype.Float64, []int{4}, 1, nan, 3, 0)
	b := fromVals(t, dtype.Float64, []int{4}, 1, 2, nan, math.Copysign(0, -1))
	g := fromVals(t, dtype.Float32, []int{4}, 10, 20, 30, 40)
	for _, name := range []string{"minimum", "fmax"} {
		res, err := ops.Winners(nil, opID(name), ts(a, b), nil, nil)
		require.NoError(t, err)
		grads, err := ops.WinnersVJP(nil, opID(name), res[1], g, nil)
		require.NoError(t, err)
		// the same as pylucid's own backward of sum(op(a, b) * g)
		la, lb := leaf(t, contiguousCopy(t, a)), leaf(t, contiguousCopy(t, b))
		y := must(t)(ops.Call(nil, opID(name), ts(la, lb), nil))
		gw := must(t)(ops.Cast(nil, g, dtype.Float64))
		require.NoError(t, ops.Backward(nil, ts(y), ts(gw), false, false))
		requireBitsEqual(t, must(t)(ops.Cast(nil, la.Grad(), dtype.Float32)), grads[0], false, name)
		requireBitsEqual(t, must(t)(ops.Cast(nil, lb.Grad(), dtype.Float32)), grads[1], false, name)
	}
	// a broadcast g (one value for every element): the same routing
	res, err := ops.Winners(nil, opID("minimum"), ts(a, b), nil, nil)
	require.NoError(t, err)
	one := fromVals(t, dtype.Float32, []int{}, 5)
	grads, err := ops.WinnersVJP(nil, opID("minimum"), res[1], one, nil)
	require.NoError(t, err)
	for i, m := range res[1].Int64s() {
		want := []float64{0, 5}
		if m == 1 {
			want = []float64{5, 0}
		}
		require.Equal(t, want, []float64{grads[0].Float64s()[i], grads[1].Float64s()[i]}, "element %d", i)
	}
	// a reduction: g scattered to each slice's winner, in the input's shape
	x := fromVals(t, dtype.Float64, []int{2, 4}, winnerVals...)
	res, err = ops.Winners(nil, opID("amax"), ts(x), []int64{0, 1, 1}, nil)
	require.NoError(t, err)
	gk := fromVals(t, dtype.Float64, []int{2, 1}, 7, 9)
	gx := must(t)(tensor.Empty(dtype.Float64, []int{2, 4}))
	_, err = ops.WinnersVJP(nil, opID("amax"), res[1], gk, ts(gx))
	require.NoError(t, err)
	want := make([]float64, 8)
	for row, p := range res[1].Int64s() {
		want[row*4+int(p)] = []float64{7, 9}[row]
	}
	require.Equal(t, want, gx.Float64s())
	_, err = ops.WinnersVJP(nil, opID("amax"), res[1], gk, nil)
	require.ErrorContains(t, err, "out=")
}

// WinnersOnly gives Winners' last tensor, bit for bit, for every kind of
// member (mixed dtypes and broadcasting included), and writes into out.
// One operand's part is, bit for bit, that part of WinnersVJP (NaN and
// signed zeros in g included); bad arguments are errors.
func TestWinnersVJPPart(t *testing.T) {
	nan := math.NaN()
	a := fromVals(t, dtype.Float64, []int{2, 3}, 1, nan, 3, 0, 2, -1)
	b := fromVals(t, dtype.Float64, []int{3}, 1, 2, nan)
	g := fromVals(t, dtype.Float32, []int{2, 3}, nan, math.Copysign(0, -1), 30, math.Inf(1), -5, 6)
	for _, name := range []string{"minimum", "maximum", "fmin", "fmax"} {
		res, err := ops.Winners(nil, opID(name), ts(a, b), nil, nil)
		require.NoError(t, err)
		both, err := ops.WinnersVJP(nil, opID(name), res[1], g, nil)
		require.NoError(t, err)
		for part := 0; part < 2; part++ {
			got, err := ops.WinnersVJPPart(nil, opID(name), res[1], g, part, nil)
			require.NoError(t, err)
			requireBitsEqual(t, both[part], got, false, name)
			out := must(t)(tensor.Empty(dtype.Float32, []int{2, 3}))
			got, err = ops.WinnersVJPPart(nil, opID(name), res[1], g, part, out)
			require.NoError(t, err)
			require.Same(t, out, got)
			requireBitsEqual(t, both[part], out, false, name)
		}
	}
	res, err := ops.Winners(nil, opID("minimum"), ts(a, b), nil, nil)
	require.NoError(t, err)
	_, err = ops.WinnersVJPPart(nil, opID("minimum"), res[1], g, 2, nil)
	require.ErrorContains(t, err, "part")
	_, err = ops.WinnersVJPPart(nil, opID("amin"), res[1], g, 0, nil)
	require.Error(t, err)
	_, err = ops.WinnersVJPPart(nil, opID("minimum"), g, g, 0, nil)
	require.ErrorContains(t, err, "bool")
}

func TestWinnersOnlyMatchesWinners(t *testing.T) {
	nan := math.NaN()
	a := fromVals(t, dtype.Float64, []int{2, 4}, winnerVals...)
	b := fromVals(t, dtype.Float32, []int{4}, 1, nan, nan, math.Copysign(0, -1))
	lo := fromVals(t, dtype.Float32, []int{4}, 0, 0, nan, 1)
	for _, tc := range []struct {
		name  string
		in    []*tensor.Tensor
		attrs []int64
	}{
		{"minimum", ts(a, b), nil}, {"maximum", ts(b, a), nil}, {"fmin", ts(a, b), nil}, {"fmax", ts(a, b), nil},
		{"clamp", ts(a, lo, b), nil}, {"clamp", ts(a, nil, b), nil}, {"clamp", ts(a, lo, nil), nil},
		{"amin", ts(a), []int64{0, 1, 1}}, {"nanmax", ts(a), []int64{1, 1, 0}}, {"min", ts(a), []int64{0, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, err := ops.Winners(nil, opID(tc.name), tc.in, tc.attrs, nil)
			require.NoError(t, err)
			want := full[len(full)-1]
			got, err := ops.WinnersOnly(nil, opID(tc.name), tc.in, tc.attrs, nil)
			require.NoError(t, err)
			require.Equal(t, want.Dtype(), got.Dtype())
			require.Equal(t, want.Shape(), got.Shape())
			require.Equal(t, want.Int64s(), got.Int64s())
			out := must(t)(tensor.Empty(want.Dtype(), want.Shape()))
			res, err := ops.WinnersOnly(nil, opID(tc.name), tc.in, tc.attrs, out)
			require.NoError(t, err)
			require.Same(t, out, res)
			require.Equal(t, want.Int64s(), out.Int64s())
		})
	}
	wrong := must(t)(tensor.Empty(dtype.Float32, []int{2, 4}))
	_, err := ops.WinnersOnly(nil, opID("minimum"), ts(a, b), nil, wrong)
	require.Error(t, err)
	_, err = ops.WinnersOnly(nil, opID("add"), ts(a, b), nil, nil)
	require.ErrorContains(t, err, "no winners")
}

// A bool clamp's winners written into one of its own operands (out=x, lo
// or hi, as lucid_op_lent may be given) are those written into fresh
// memory: the two-bound mask's passes read each operand before they write
// the element.
func TestWinnersClampIntoAnOperand(t *testing.T) {
	r := newRand(seedOf("clamp winners alias"))
	n := 1000
	gen := func() *tensor.Tensor {
		bits := make([]uint64, n)
		for i := range bits {
			bits[i] = uint64(r.IntN(2))
		}
		return must(t)(tensor.FromBits(dtype.Bool, []int{n}, bits))
	}
	for trial := 0; trial < 3; trial++ {
		x, lo, hi := gen(), gen(), gen()
		fresh := must(t)(tensor.Empty(dtype.Bool, []int{n}))
		_, err := ops.WinnersOnly(nil, opID("clamp"), ts(x, lo, hi), nil, fresh)
		require.NoError(t, err)
		for which := 0; which < 3; which++ {
			in := []*tensor.Tensor{x, lo, hi}
			for i := range in {
				in[i] = must(t)(tensor.FromBits(dtype.Bool, []int{n}, in[i].Bits())) // private copies
			}
			_, err := ops.WinnersOnly(nil, opID("clamp"), in, nil, in[which])
			require.NoError(t, err)
			requireBitsEqual(t, fresh, in[which], false, "winners into operand %d", which)
		}
	}
}
