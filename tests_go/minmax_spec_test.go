package tests_go

// docs/semantics.md pinned case by case: the selection rule of minimum and maximum
// ("a wins at i iff a_i <= b_i (>= for maximum) or a_i is NaN"), which
// decides both the value (the winner's bits) and the gradient (all of it to
// the winner), for every floating dtype and both backends. Then the partition
// property on random data full of ties and NaNs, integer/bool forward-only
// behaviour, and type promotion with tensors and weak Python-like scalars.

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// val is one operand value of a pinned case.
type val struct {
	f   float64
	nan int  // 0: not NaN; ±k: a quiet NaN with payload k, negative sign if < 0
	sub int8 // ±1: the smallest positive/negative subnormal
}

func (v val) bits(dt dtype.Dtype) uint64 {
	switch {
	case v.nan != 0:
		p := v.nan
		if p < 0 {
			p = -p
		}
		return nanBits(dt, uint64(p), v.nan < 0)
	case v.sub != 0:
		b := uint64(1)
		if v.sub < 0 {
			b |= 1 << (8*dt.Size() - 1)
		}
		return b
	}
	return bitsOfFloat(dt, v.f)
}

func (v val) String() string {
	switch {
	case v.nan != 0:
		return fmt.Sprintf("NaN(%d)", v.nan)
	case v.sub != 0:
		return fmt.Sprintf("sub(%d)", v.sub)
	case v.f == 0 && math.Signbit(v.f):
		return "-0"
	}
	return fmt.Sprint(v.f)
}

func num(f float64) val { return val{f: f} }

var (
	posZero = num(0)
	negZero = num(math.Copysign(0, -1))
	posInf  = num(math.Inf(1))
	negInf  = num(math.Inf(-1))
)

// minmaxCase is one pinned case: which operand wins under minimum and
// under maximum.
type minmaxCase struct {
	name       string
	a, b       val
	minW, maxW byte // 'a' or 'b'
}

var minmaxCases = []minmaxCase{
	{"a<b", num(1), num(2), 'a', 'b'},
	{"a>b", num(3), num(-1), 'b', 'a'},
	{"negative a<b", num(-2.5), num(-0.5), 'a', 'b'},
	{"tie", num(2), num(2), 'a', 'a'},
	{"tie negative", num(-0.5), num(-0.5), 'a', 'a'},
	{"+0 vs -0", posZero, negZero, 'a', 'a'},
	{"-0 vs +0", negZero, posZero, 'a', 'a'},
	{"+0 vs +0", posZero, posZero, 'a', 'a'},
	{"-0 vs -0", negZero, negZero, 'a', 'a'},
	{"NaN in a", val{nan: 1}, num(1), 'a', 'a'},
	{"NaN in b", num(1), val{nan: 2}, 'b', 'b'},
	{"NaN in both", val{nan: 1}, val{nan: 2}, 'a', 'a'},
	{"-NaN in both", val{nan: -3}, val{nan: 4}, 'a', 'a'},
	{"NaN vs -NaN", val{nan: 5}, val{nan: -1}, 'a', 'a'},
	{"NaN vs +Inf", val{nan: 1}, posInf, 'a', 'a'},
	{"NaN vs -Inf", val{nan: -2}, negInf, 'a', 'a'},
	{"-Inf vs NaN", negInf, val{nan: 3}, 'b', 'b'},
	{"+0 vs NaN", posZero, val{nan: 6}, 'b', 'b'},
	{"-Inf vs 1", negInf, num(1), 'a', 'b'},
	{"+Inf vs 1", posInf, num(1), 'b', 'a'},
	{"+Inf vs +Inf", posInf, posInf, 'a', 'a'},
	{"-Inf vs -Inf", negInf, negInf, 'a', 'a'},
	{"-Inf vs +Inf", negInf, posInf, 'a', 'b'},
	{"+Inf vs -Inf", posInf, negInf, 'b', 'a'},
	{"0 vs -Inf", posZero, negInf, 'b', 'a'},
	{"subnormal vs +0", val{sub: 1}, posZero, 'b', 'a'},
	{"-0 vs -subnormal", negZero, val{sub: -1}, 'b', 'a'},
	{"-subnormal vs +subnormal", val{sub: -1}, val{sub: 1}, 'a', 'b'},
}

type minmaxOp struct {
	name    string
	node    string
	maximum bool
	call    func(*ops.Context, *tensor.Tensor, *tensor.Tensor) (*tensor.Tensor, error)
}

var minmaxOps = []minmaxOp{
	{"minimum", "MinimumBackward", false, ops.Minimum},
	{"maximum", "MaximumBackward", true, ops.Maximum},
}

func (c minmaxCase) winner(op minmaxOp) byte {
	if op.maximum {
		return c.maxW
	}
	return c.minW
}

var specBackends = []kernels{cpuBackend, refBackend}

// TestMinMaxSpecCases checks every pinned case one at a time (0-d tensors),
// through Backward and through Grad, on both backends.
func TestMinMaxSpecCases(t *testing.T) {
	for _, op := range minmaxOps {
		for _, dt := range floatDtypes {
			for _, be := range specBackends {
				for _, tc := range minmaxCases {
					name := fmt.Sprintf("%s/%v/%s/%s", op.name, dt, be.Name(), tc.name)
					t.Run(name, func(t *testing.T) {
						c := ctxFor(be)
						ab, bb := tc.a.bits(dt), tc.b.bits(dt)
						a := leaf(t, must(t)(tensor.FromBits(dt, nil, []uint64{ab})))
						b := leaf(t, must(t)(tensor.FromBits(dt, nil, []uint64{bb})))
						y := must(t)(op.call(c, a, b))
						require.Equal(t, dt, y.Dtype())
						require.Equal(t, 0, y.Ndim())
						win := tc.winner(op)
						wantY := bb
						if win == 'a' {
							wantY = ab
						}
						require.Equalf(t, wantY, y.Bits()[0], "%s(%v, %v) must be %c's bits", op.name, tc.a, tc.b, win)
						fn, _ := y.GradFn()
						require.NotNil(t, fn)
						require.Equal(t, op.node, fn.Name())

						// A non-uniform upstream gradient: 3.
						g := fromVals(t, dt, nil, 3)
						grads, err := ops.Grad(c, ts(y), ts(a, b), ts(g), nil, false, false)
						require.NoError(t, err)
						require.Len(t, grads, 2)
						wantGA, wantGB := uint64(0), bitsOfFloat(dt, 3)
						if win == 'a' {
							wantGA, wantGB = wantGB, wantGA
						}
						assert.Equal(t, wantGA, grads[0].Bits()[0], "grad_a")
						assert.Equal(t, wantGB, grads[1].Bits()[0], "grad_b")
						assert.Equal(t, dt, grads[0].Dtype())
						assert.Equal(t, dt, grads[1].Dtype())
						assert.Nil(t, a.Grad(), "Grad must not touch .grad")
						assert.Nil(t, b.Grad(), "Grad must not touch .grad")

						// The same through Backward into .grad (a fresh graph).
						y2 := must(t)(op.call(c, a, b))
						require.NoError(t, ops.Backward(c, ts(y2), ts(g), false, false))
						require.NotNil(t, a.Grad())
						require.NotNil(t, b.Grad())
						assert.Equal(t, wantGA, a.Grad().Bits()[0], "a.grad")
						assert.Equal(t, wantGB, b.Grad().Bits()[0], "b.grad")
					})
				}
			}
		}
	}
}

// TestMinMaxSpecBatched puts every pinned case in one vector with a distinct
// upstream gradient per element, in several layouts, and also checks that
// the two gradients partition the upstream gradient.
func TestMinMaxSpecBatched(t *testing.T) {
	n := len(minmaxCases)
	for _, op := range minmaxOps {
		for _, dt := range floatDtypes {
			for _, be := range specBackends {
				for _, lay := range []layout{contiguous, permuted, negStep} {
					t.Run(fmt.Sprintf("%s/%v/%s/%v", op.name, dt, be.Name(), lay), func(t *testing.T) {
						c := ctxFor(be)
						ab, bb := make([]uint64, n), make([]uint64, n)
						gv := make([]float64, n)
						for i, tc := range minmaxCases {
							ab[i], bb[i] = tc.a.bits(dt), tc.b.bits(dt)
							gv[i] = float64(i + 1)
						}
						a := leaf(t, makeTensor(t, dt, []int{n}, lay, func(int) []uint64 { return ab }))
						b := leaf(t, makeTensor(t, dt, []int{n}, contiguous, func(int) []uint64 { return bb }))
						y := must(t)(op.call(c, a, b))
						g := fromVals(t, dt, []int{n}, gv...)
						require.NoError(t, ops.Backward(c, ts(y), ts(g), false, false))
						yb, ga, gb := y.Bits(), a.Grad().Bits(), b.Grad().Bits()
						gbits := g.Bits()
						for i, tc := range minmaxCases {
							win := tc.winner(op)
							if win == 'a' {
								assert.Equalf(t, ab[i], yb[i], "%s: y", tc.name)
								assert.Equalf(t, gbits[i], ga[i], "%s: grad_a", tc.name)
								assert.Equalf(t, uint64(0), gb[i], "%s: grad_b", tc.name)
							} else {
								assert.Equalf(t, bb[i], yb[i], "%s: y", tc.name)
								assert.Equalf(t, uint64(0), ga[i], "%s: grad_a", tc.name)
								assert.Equalf(t, gbits[i], gb[i], "%s: grad_b", tc.name)
							}
						}
						gaf, gbf := a.Grad().Float64s(), b.Grad().Float64s()
						for i := range gv {
							assert.Equalf(t, gv[i], gaf[i]+gbf[i], "partition at %d (%s)", i, minmaxCases[i].name)
						}
					})
				}
			}
		}
	}
}

// TestMinMaxSpecBroadcastScalar: ties and NaNs against a broadcast 0-d
// operand; the scalar's gradient is the sum of the upstream gradient where
// it wins, and the gradients still partition the total.
func TestMinMaxSpecBroadcastScalar(t *testing.T) {
	nan := math.NaN()
	av := []float64{1, 2, 2, nan, 3, math.Copysign(0, -1), math.Inf(1), math.Inf(-1)}
	gv := []float64{1, 2, 4, 8, 16, 32, 64, 128}
	// b = 2: minimum: a wins at 1, 2, 2, NaN, -0, -Inf; b wins at 3, +Inf.
	//        maximum: a wins at 2, 2, NaN, 3, +Inf; b wins at 1, -0, -Inf.
	wantGA := map[string][]float64{
		"minimum": {1, 2, 4, 8, 0, 32, 0, 128},
		"maximum": {0, 2, 4, 8, 16, 0, 64, 0},
	}
	wantGB := map[string]float64{"minimum": 16 + 64, "maximum": 1 + 32 + 128}
	for _, op := range minmaxOps {
		for _, dt := range floatDtypes {
			for _, be := range specBackends {
				t.Run(fmt.Sprintf("%s/%v/%s", op.name, dt, be.Name()), func(t *testing.T) {
					c := ctxFor(be)
					a := leaf(t, fromVals(t, dt, []int{len(av)}, av...))
					b := leaf(t, fromVals(t, dt, nil, 2))
					g := fromVals(t, dt, []int{len(gv)}, gv...)
					y := must(t)(op.call(c, a, b))
					requireShape(t, []int{len(av)}, y.Shape())
					yv := y.Float64s()
					for i := range av {
						if math.IsNaN(av[i]) {
							assert.True(t, math.IsNaN(yv[i]))
						} else if wantGA[op.name][i] != 0 { // a wins
							assert.Equal(t, math.Float64bits(av[i]), math.Float64bits(yv[i]), "element %d", i)
						} else {
							assert.Equal(t, 2.0, yv[i], "element %d", i)
						}
					}
					grads, err := ops.Grad(c, ts(y), ts(a, b), ts(g), nil, false, false)
					require.NoError(t, err)
					assert.Equal(t, wantGA[op.name], grads[0].Float64s())
					requireShape(t, nil, grads[1].Shape())
					assert.Equal(t, dt, grads[1].Dtype())
					assert.Equal(t, []float64{wantGB[op.name]}, grads[1].Float64s())
					total := 0.0
					for _, v := range grads[0].Float64s() {
						total += v
					}
					assert.Equal(t, 255.0, total+grads[1].Float64s()[0], "partition of the total")
				})
			}
		}
	}
}

// TestMinMaxPartitionRandom: random data full of ties, ±0, NaN and ±Inf.
// Same-shape operands: at every index exactly one gradient carries the
// upstream gradient (bit for bit) and the other is +0, as the rule says.
// Broadcast operands: each reduced gradient equals the sum of the upstream
// gradient over the positions its operand wins (exact: small integers).
func TestMinMaxPartitionRandom(t *testing.T) {
	for _, op := range minmaxOps {
		for _, dt := range floatDtypes {
			for _, be := range specBackends {
				t.Run(fmt.Sprintf("%s/%v/%s", op.name, dt, be.Name()), func(t *testing.T) {
					r := newRand(seedOf("partition", op.name, dt.String(), be.Name()))
					c := ctxFor(be)
					pool := []val{num(1), num(-1), posZero, negZero, val{nan: 1}, val{nan: -2}, posInf, negInf, num(0.5)}
					pick := func(n int) []uint64 {
						out := make([]uint64, n)
						for i := range out {
							out[i] = pool[r.IntN(len(pool))].bits(dt)
						}
						return out
					}
					smallInts := func(n int) []float64 {
						out := make([]float64, n)
						for i := range out {
							out[i] = float64(1 + r.IntN(8))
						}
						return out
					}

					// Same shape.
					shape := []int{17, 23}
					n := numel(shape)
					a := leaf(t, must(t)(tensor.FromBits(dt, shape, pick(n))))
					b := leaf(t, must(t)(tensor.FromBits(dt, shape, pick(n))))
					g := fromVals(t, dt, shape, smallInts(n)...)
					y := must(t)(op.call(c, a, b))
					grads, err := ops.Grad(c, ts(y), ts(a, b), ts(g), nil, false, false)
					require.NoError(t, err)
					av, bv := a.Float64s(), b.Float64s()
					ab, bb, yb := a.Bits(), b.Bits(), y.Bits()
					gab, gbb, gbits := grads[0].Bits(), grads[1].Bits(), g.Bits()
					nanCount, tieCount := 0, 0
					for i := 0; i < n; i++ {
						aw := math.IsNaN(av[i]) || (!op.maximum && av[i] <= bv[i]) || (op.maximum && av[i] >= bv[i])
						if math.IsNaN(av[i]) || math.IsNaN(bv[i]) {
							nanCount++
						}
						if av[i] == bv[i] {
							tieCount++
						}
						if aw {
							require.Equal(t, ab[i], yb[i], "y at %d", i)
							require.Equal(t, gbits[i], gab[i], "grad_a at %d", i)
							require.Equal(t, uint64(0), gbb[i], "grad_b at %d", i)
						} else {
							require.Equal(t, bb[i], yb[i], "y at %d", i)
							require.Equal(t, uint64(0), gab[i], "grad_a at %d", i)
							require.Equal(t, gbits[i], gbb[i], "grad_b at %d", i)
						}
					}
					require.Greater(t, nanCount, n/10, "data must have NaNs")
					require.Greater(t, tieCount, n/20, "data must have ties")

					// Broadcast: a (5,1,7), b (3,7) -> y (5,3,7).
					sa, sb := []int{5, 1, 7}, []int{3, 7}
					so, _ := npBroadcast(sa, sb)
					a = leaf(t, makeTensor(t, dt, sa, negStep, pick))
					b = leaf(t, makeTensor(t, dt, sb, permuted, pick))
					gAll := smallInts(numel(so))
					g = fromVals(t, dt, so, gAll...)
					y = must(t)(op.call(c, a, b))
					requireShape(t, so, y.Shape())
					require.NoError(t, ops.Backward(c, ts(y), ts(g), false, false))
					av, bv = a.Float64s(), b.Float64s()
					wantA, wantB := make([]float64, numel(sa)), make([]float64, numel(sb))
					for i := 0; i < numel(so); i++ {
						ia, ib := srcIndex(so, sa, i), srcIndex(so, sb, i)
						x, z := av[ia], bv[ib]
						if math.IsNaN(x) || (!op.maximum && x <= z) || (op.maximum && x >= z) {
							wantA[ia] += gAll[i]
						} else {
							wantB[ib] += gAll[i]
						}
					}
					requireShape(t, sa, a.Grad().Shape())
					requireShape(t, sb, b.Grad().Shape())
					assert.Equal(t, wantA, a.Grad().Float64s(), "grad_a")
					assert.Equal(t, wantB, b.Grad().Float64s(), "grad_b")
					total := 0.0
					for _, v := range gAll {
						total += v
					}
					sum := 0.0
					for _, v := range append(a.Grad().Float64s(), b.Grad().Float64s()...) {
						sum += v
					}
					assert.Equal(t, total, sum, "the two gradients partition the upstream gradient")
				})
			}
		}
	}
}

// TestMinMaxIntegerForwardOnly: integer and bool minimum/maximum are exact
// and forward only; such tensors cannot require grad.
func TestMinMaxIntegerForwardOnly(t *testing.T) {
	type intCase struct {
		dt       dtype.Dtype
		a, b     []int64
		min, max []int64
	}
	cases := []intCase{
		{dtype.Bool, []int64{0, 0, 1, 1}, []int64{0, 1, 0, 1}, []int64{0, 0, 0, 1}, []int64{0, 1, 1, 1}},
		{dtype.Uint8, []int64{0, 255, 7, 128}, []int64{255, 0, 7, 127}, []int64{0, 0, 7, 127}, []int64{255, 255, 7, 128}},
		{dtype.Int8, []int64{-128, 127, 5, -1}, []int64{127, -128, 5, 0}, []int64{-128, -128, 5, -1}, []int64{127, 127, 5, 0}},
		{dtype.Int16, []int64{-32768, 32767, -3, 4}, []int64{32767, -32768, -3, -4}, []int64{-32768, -32768, -3, -4}, []int64{32767, 32767, -3, 4}},
		{dtype.Int32, []int64{math.MinInt32, math.MaxInt32, 0, 9}, []int64{math.MaxInt32, math.MinInt32, 0, -9},
			[]int64{math.MinInt32, math.MinInt32, 0, -9}, []int64{math.MaxInt32, math.MaxInt32, 0, 9}},
		// int64 values that float64 cannot tell apart: the comparison is exact.
		{dtype.Int64, []int64{math.MinInt64, math.MaxInt64, 1<<53 + 1, -(1<<53 + 1)}, []int64{math.MaxInt64, math.MaxInt64 - 1, 1 << 53, -(1 << 53)},
			[]int64{math.MinInt64, math.MaxInt64 - 1, 1 << 53, -(1<<53 + 1)}, []int64{math.MaxInt64, math.MaxInt64, 1<<53 + 1, -(1 << 53)}},
	}
	for _, tc := range cases {
		for _, be := range specBackends {
			t.Run(fmt.Sprintf("%v/%s", tc.dt, be.Name()), func(t *testing.T) {
				c := ctxFor(be)
				a := must(t)(tensor.FromInt64s(tc.dt, []int{4}, tc.a))
				b := must(t)(tensor.FromInt64s(tc.dt, []int{4}, tc.b))
				err := a.SetRequiresGrad(true)
				require.Error(t, err, "an integer/bool tensor cannot require grad")
				assert.Equal(t, errs.Type, errs.KindOf(err))
				assert.False(t, a.RequiresGrad())
				require.NoError(t, a.SetRequiresGrad(false))

				mn := must(t)(ops.Minimum(c, a, b))
				mx := must(t)(ops.Maximum(c, a, b))
				assert.Equal(t, tc.dt, mn.Dtype())
				assert.Equal(t, tc.dt, mx.Dtype())
				assert.Equal(t, tc.min, mn.Int64s())
				assert.Equal(t, tc.max, mx.Int64s())
				for _, y := range []*tensor.Tensor{mn, mx} {
					fn, _ := y.GradFn()
					assert.Nil(t, fn)
					assert.False(t, y.RequiresGrad())
					err := y.SetRequiresGrad(true)
					assert.Error(t, err)
				}
				// Backward from an integer result is an error, not a crash.
				s := must(t)(ops.Sum(c, mn, nil, false))
				assert.Error(t, ops.Backward(c, ts(s), nil, false, false))
			})
		}
	}
}

// TestMinMaxIntWithFloatGrad: an integer operand promotes to the float one;
// only the float operand gets a gradient, and ties still go to a (the int).
func TestMinMaxIntWithFloatGrad(t *testing.T) {
	for _, op := range minmaxOps {
		for _, be := range specBackends {
			c := ctxFor(be)
			a := must(t)(tensor.FromInt64s(dtype.Int32, []int{4}, []int64{1, 2, 3, 4}))
			b := leaf(t, fromVals(t, dtype.Float32, []int{4}, 2, 2, 2.5, math.NaN()))
			y := must(t)(op.call(c, a, b))
			assert.Equal(t, dtype.Float32, y.Dtype())
			require.NoError(t, ops.Backward(c, ts(y), ts(fromVals(t, dtype.Float32, []int{4}, 1, 2, 3, 4)), false, false))
			require.NotNil(t, b.Grad())
			assert.Equal(t, dtype.Float32, b.Grad().Dtype())
			yv := y.Float64s()
			if op.maximum {
				assert.Equal(t, []float64{2, 2, 3}, yv[:3], op.name)
				assert.True(t, math.IsNaN(yv[3]))
				// a wins at 2 (tie), 3 (3 >= 2.5); b at 1 and NaN.
				assert.Equal(t, []float64{1, 0, 0, 4}, b.Grad().Float64s(), op.name)
			} else {
				assert.Equal(t, []float64{1, 2, 2.5}, yv[:3], op.name)
				assert.True(t, math.IsNaN(yv[3]))
				// a wins at 1, 2 (tie); b at 2.5 and NaN.
				assert.Equal(t, []float64{0, 0, 3, 4}, b.Grad().Float64s(), op.name)
			}
		}
	}
}

// TestMinMaxPromotion: docs/dtypes.md with tensors and weak (wrapped) scalars.
func TestMinMaxPromotion(t *testing.T) {
	f16 := fromVals(t, dtype.Float16, []int{3}, 1, 2.5, 3)
	bf16 := fromVals(t, dtype.BFloat16, []int{3}, 2, 2, 2)
	f32 := fromVals(t, dtype.Float32, []int{3}, 0.5, 4, 3)
	f64s := fromVals(t, dtype.Float64, nil, 2) // a 0-d tensor, not wrapped: not weak
	i32 := must(t)(tensor.FromInt64s(dtype.Int32, []int{2}, []int64{1, 3}))
	i8 := must(t)(tensor.FromInt64s(dtype.Int8, []int{2}, []int64{-1, 3}))
	u8 := must(t)(tensor.FromInt64s(dtype.Uint8, []int{2}, []int64{200, 3}))
	bl := must(t)(tensor.FromInt64s(dtype.Bool, []int{2}, []int64{0, 1}))
	w2 := must(t)(tensor.WrappedScalar(dtype.Float64, 2.0))
	w25 := must(t)(tensor.WrappedScalar(dtype.Float64, 2.5))
	wi := must(t)(tensor.WrappedScalar(dtype.Int64, 2))
	require.True(t, w2.IsWrappedNumber())
	require.False(t, f64s.IsWrappedNumber())

	cases := []struct {
		name   string
		a, b   *tensor.Tensor
		dt     dtype.Dtype
		minVal []float64
	}{
		{"f16,f32", f16, f32, dtype.Float32, []float64{0.5, 2.5, 3}},
		{"f32,f16", f32, f16, dtype.Float32, []float64{0.5, 2.5, 3}},
		{"f16,bf16", f16, bf16, dtype.Float32, []float64{1, 2, 2}},
		{"bf16,f32", bf16, f32, dtype.Float32, []float64{0.5, 2, 2}},
		{"f16,wrapped 2.0", f16, w2, dtype.Float16, []float64{1, 2, 2}},
		{"wrapped 2.0,f16", w2, f16, dtype.Float16, []float64{1, 2, 2}},
		{"bf16,wrapped 2.5", bf16, w25, dtype.BFloat16, []float64{2, 2, 2}},
		// Only wrapped numbers are weak: a 0-d tensor promotes like any
		// tensor (NumPy 2 / NEP 50 behaviour for 0-d arrays).
		{"f16,0-d float64 tensor", f16, f64s, dtype.Float64, []float64{1, 2, 2}},
		{"i32,wrapped 2.5", i32, w25, dtype.Float32, []float64{1, 2.5}},
		{"wrapped 2.5,i32", w25, i32, dtype.Float32, []float64{1, 2.5}},
		{"i8,wrapped 2.5", i8, w25, dtype.Float32, []float64{-1, 2.5}},
		{"i32,wrapped int 2", i32, wi, dtype.Int32, []float64{1, 2}},
		{"i8,wrapped int 2", i8, wi, dtype.Int8, []float64{-1, 2}},
		{"bool,wrapped int 2", bl, wi, dtype.Int64, []float64{0, 1}},
		{"u8,i8", u8, i8, dtype.Int16, []float64{-1, 3}},
		{"i8,i32", i8, i32, dtype.Int32, []float64{-1, 3}},
		{"bool,i8", bl, i8, dtype.Int8, []float64{-1, 1}},
		{"i32,f16", i32, fromVals(t, dtype.Float16, []int{2}, 0.5, 8), dtype.Float16, []float64{0.5, 3}},
	}
	for _, tc := range cases {
		for _, be := range specBackends {
			y, err := ops.Minimum(ctxFor(be), tc.a, tc.b)
			require.NoError(t, err, tc.name)
			assert.Equal(t, tc.dt, y.Dtype(), "%s on %s", tc.name, be.Name())
			assert.Equal(t, tc.minVal, y.Float64s(), "%s on %s", tc.name, be.Name())
			y, err = ops.Maximum(ctxFor(be), tc.a, tc.b)
			require.NoError(t, err, tc.name)
			assert.Equal(t, tc.dt, y.Dtype(), "maximum %s on %s", tc.name, be.Name())
		}
	}

	// Gradients through a weak scalar come back in the tensor's own dtype.
	a := leaf(t, fromVals(t, dtype.Float16, []int{3}, 1, 2, 3))
	y := must(t)(ops.Minimum(nil, a, w2))
	assert.Equal(t, dtype.Float16, y.Dtype())
	require.NoError(t, ops.Backward(nil, ts(must(t)(ops.Sum(nil, y, nil, false))), nil, false, false))
	assert.Equal(t, dtype.Float16, a.Grad().Dtype())
	assert.Equal(t, []float64{1, 1, 0}, a.Grad().Float64s()) // tie at 2 goes to a

	// Mixed float16/float32 leaves: each gradient in its own dtype.
	a = leaf(t, fromVals(t, dtype.Float16, []int{3}, 1, 2.5, 3))
	b := leaf(t, fromVals(t, dtype.Float32, []int{3}, 0.5, 4, 3))
	y = must(t)(ops.Maximum(nil, a, b))
	assert.Equal(t, dtype.Float32, y.Dtype())
	require.NoError(t, ops.Backward(nil, ts(y), ts(fromVals(t, dtype.Float32, []int{3}, 1.5, 2.5, 0.1)), false, false))
	assert.Equal(t, dtype.Float16, a.Grad().Dtype())
	assert.Equal(t, dtype.Float32, b.Grad().Dtype())
	// 0.1 rounds to float16 for a (tie at 3 goes to a).
	assert.Equal(t, []float64{1.5, 0, dtype.Float16ToFloat64(dtype.Float32ToFloat16(0.1))}, a.Grad().Float64s())
	assert.Equal(t, []float64{0, 2.5, 0}, b.Grad().Float64s())

	// Shapes that do not broadcast: a Value error naming both shapes.
	_, err := ops.Minimum(nil, fromVals(t, dtype.Float32, []int{2, 3}, 1, 2, 3, 4, 5, 6), fromVals(t, dtype.Float32, []int{4}, 1, 2, 3, 4))
	require.Error(t, err)
	assert.Equal(t, errs.Value, errs.KindOf(err))
	assert.Contains(t, err.Error(), "(2, 3)")
	assert.Contains(t, err.Error(), "(4,)")
}
