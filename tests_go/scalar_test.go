package tests_go

// Wrapped integers (Python ints) convert to the op's result dtype exactly:
// an integer dtype that cannot hold the value is an Overflow error (never a
// wrap-around), a float dtype gets it rounded once to nearest even (±Inf past
// float16/bfloat16/float32, an Overflow error past float64). Two wrapped
// operands give the default dtype of the higher category.

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// wrappedBig encodes x as lucid_scalar_int does: the top 62 bits of |x| with
// a sticky lowest bit, and the number of dropped bits.
func wrappedBig(t *testing.T, x *big.Int) *tensor.Tensor {
	n := new(big.Int).Abs(x)
	exp := 0
	if n.BitLen() > 63 {
		exp = n.BitLen() - 62
	}
	m := new(big.Int).Rsh(n, uint(exp))
	if new(big.Int).Lsh(m, uint(exp)).Cmp(n) != 0 {
		m.SetBit(m, 0, 1)
	}
	v := m.Int64()
	if x.Sign() < 0 {
		v = -v
	}
	w, err := tensor.WrappedInt(v, exp)
	require.NoError(t, err)
	return w
}

func bigPow2(k uint) *big.Int { return new(big.Int).Lsh(big.NewInt(1), k) }

func bigSum(xs ...*big.Int) *big.Int {
	s := new(big.Int)
	for _, x := range xs {
		s.Add(s, x)
	}
	return s
}

func TestWrappedIntOutOfRangeIsOverflow(t *testing.T) {
	cases := []struct {
		dt    dtype.Dtype
		value int64
		ok    bool
	}{
		{dtype.Int8, 1000, false}, {dtype.Int8, 127, true}, {dtype.Int8, -128, true}, {dtype.Int8, -129, false},
		{dtype.Uint8, -1, false}, {dtype.Uint8, 255, true}, {dtype.Uint8, 256, false},
		{dtype.Int16, 32768, false}, {dtype.Int32, 1 << 40, false}, {dtype.Int32, math.MinInt32, true},
		{dtype.Int64, math.MaxInt64, true}, {dtype.Int64, math.MinInt64, true},
	}
	for _, c := range cases {
		x, err := tensor.FromInt64s(c.dt, []int{3}, []int64{1, 2, 3})
		require.NoError(t, err)
		w, err := tensor.WrappedInt(c.value, 0)
		require.NoError(t, err)
		for _, args := range [][2]*tensor.Tensor{{x, w}, {w, x}} {
			y, err := ops.Minimum(nil, args[0], args[1])
			if c.ok {
				require.NoError(t, err, "%v %d", c.dt, c.value)
				assert.Equal(t, c.dt, y.Dtype())
				continue
			}
			require.Error(t, err, "%v %d", c.dt, c.value)
			assert.Equal(t, errs.Overflow, errs.KindOf(err))
			assert.Equal(t, "OverflowError", errs.KindOf(err).String())
			assert.Contains(t, err.Error(), "out of bounds for "+c.dt.String())
		}
	}
}

func TestWrappedIntRoundsOnceToFloats(t *testing.T) {
	cases := []struct {
		dt   dtype.Dtype
		x    *big.Int
		want float64
	}{
		// through float64 first, each would round twice and miss by one ulp
		{dtype.Float32, bigSum(bigPow2(60), bigPow2(36), big.NewInt(1)), math.Ldexp(1, 60) + math.Ldexp(1, 37)},
		{dtype.BFloat16, bigSum(bigPow2(62), bigPow2(54), big.NewInt(1)), math.Ldexp(1, 62) + math.Ldexp(1, 55)},
		{dtype.Float32, bigSum(bigPow2(90), bigPow2(66), big.NewInt(1)), math.Ldexp(1, 90) + math.Ldexp(1, 67)},
		{dtype.Float32, bigSum(bigPow2(90), bigPow2(66)), math.Ldexp(1, 90)}, // a tie: to even
		{dtype.Float64, bigSum(bigPow2(100), bigPow2(47), big.NewInt(1)), math.Ldexp(1, 100) + math.Ldexp(1, 48)},
		{dtype.Float16, big.NewInt(65519), 65504},
		{dtype.Float16, big.NewInt(65520), math.Inf(1)},
		{dtype.Float16, bigPow2(70), math.Inf(1)},
		{dtype.Float32, new(big.Int).Neg(bigPow2(1024)), math.Inf(-1)},
		{dtype.BFloat16, bigPow2(5000), math.Inf(1)},
	}
	for _, c := range cases {
		x, err := tensor.FromFloat64s(c.dt, []int{1}, []float64{0})
		require.NoError(t, err)
		y, err := ops.Add(nil, x, wrappedBig(t, c.x))
		require.NoError(t, err, "%v %v", c.dt, c.x)
		assert.Equal(t, c.dt, y.Dtype())
		assert.Equal(t, c.want, y.Float64s()[0], "%v %v", c.dt, c.x)
	}
}

func TestWrappedIntPastInt64OrFloat64IsOverflow(t *testing.T) {
	i64, err := tensor.FromInt64s(dtype.Int64, []int{1}, []int64{1})
	require.NoError(t, err)
	_, err = ops.Minimum(nil, i64, wrappedBig(t, bigPow2(63)))
	require.Error(t, err)
	assert.Equal(t, errs.Overflow, errs.KindOf(err))
	assert.Contains(t, err.Error(), "64 bits out of bounds for int64")

	f64, err := tensor.FromFloat64s(dtype.Float64, []int{1}, []float64{1})
	require.NoError(t, err)
	_, err = ops.Mul(nil, f64, wrappedBig(t, bigPow2(1024)))
	require.Error(t, err)
	assert.Equal(t, errs.Overflow, errs.KindOf(err))
	assert.Contains(t, err.Error(), "too large to convert to float64")

	_, err = tensor.WrappedInt(1, -1)
	assert.Equal(t, errs.Value, errs.KindOf(err))
}

func TestTwoWrappedOperandsGiveTheCategoryDefault(t *testing.T) {
	wi, err := tensor.WrappedInt(1, 0)
	require.NoError(t, err)
	wf, err := tensor.WrappedScalar(dtype.Float64, 2)
	require.NoError(t, err)
	wb, err := tensor.WrappedScalar(dtype.Bool, 1)
	require.NoError(t, err)
	cases := []struct {
		a, b *tensor.Tensor
		want dtype.Dtype
	}{
		{wi, wf, dtype.Float32}, {wf, wi, dtype.Float32}, {wf, wf, dtype.Float32},
		{wi, wi, dtype.Int64}, {wb, wi, dtype.Int64}, {wb, wb, dtype.Bool},
	}
	for _, c := range cases {
		y, err := ops.Minimum(nil, c.a, c.b)
		require.NoError(t, err)
		assert.Equal(t, c.want, y.Dtype())
	}
}

// A Python float operand is converted to the op's float dtype without a
// kernel call (Tensor.FloatScalarTo, in the ops' input casts): its bits equal
// the cast kernels' (cpu and ref) for every float pair, NaN payloads, signed
// zeros, subnormals and values halfway between float16/bfloat16 neighbours
// included.
func TestFloatScalarToMatchesTheCastKernels(t *testing.T) {
	values := []float64{0, math.Copysign(0, -1), 1, -2.5, 1.0 / 3, 65504, 65520, 1e-8, 6e-8, -3e-39,
		math.Inf(1), math.Inf(-1), math.NaN(), math.Float64frombits(0x7ff0000000000123),
		math.Float64frombits(0xfff8000000000456), 1 + 1.0/2048, 1 + 3.0/2048, 1 + 1.0/256, 3.4028235677973366e38, 1e300}
	floats := []dtype.Dtype{dtype.Float64, dtype.Float32, dtype.Float16, dtype.BFloat16}
	for _, from := range floats {
		for _, to := range floats {
			for _, v := range values {
				src := must(t)(tensor.Scalar(from, v))
				got := must(t)(src.FloatScalarTo(to))
				require.Equal(t, to, got.Dtype())
				require.Equal(t, 0, got.Ndim())
				for _, be := range []kernels{cpuBackend, refBackend} {
					want := must(t)(tensor.New(to, nil))
					require.NoError(t, be.Cast(want, src))
					assert.Equal(t, want.Bits(), got.Bits(), "%v -> %v of %v on %s", from, to, v, be.Name())
				}
			}
		}
	}
	_, err := must(t)(tensor.Scalar(dtype.Float32, 1)).FloatScalarTo(dtype.Int32)
	assert.Error(t, err)
	_, err = must(t)(tensor.New(dtype.Float32, []int{2})).FloatScalarTo(dtype.Float64)
	assert.Error(t, err)
}
