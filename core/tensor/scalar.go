package tensor

import (
	"math"
	"math/bits"
	"runtime"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
)

// WrappedInt returns a 0-d wrapped number (weak in type promotion, as
// WrappedScalar) for a host-language integer whose value is m·2**exp. exp is
// 0 for an integer that fits int64; a larger one passes its top bits in m,
// with the lowest bit of m set when any dropped bit is set (a "sticky" bit),
// and the number of dropped bits in exp. With at least 55 significant bits in
// m, that is all WrappedIntTo needs to round the exact integer once.
func WrappedInt(m int64, exp int) (*Tensor, error) {
	if exp < 0 || exp > math.MaxInt32-64 {
		return nil, errs.Valuef("wrapped integer exponent %d out of range", exp)
	}
	t, err := FromInt64s(dtype.Int64, nil, []int64{m})
	if err != nil {
		return nil, err
	}
	t.wrapped = true
	t.wrapExp = int32(exp)
	return t, nil
}

// WrappedIntTo converts the wrapped integer t (made by WrappedInt) to a 0-d
// tensor of dtype dt (t itself for int64) exactly, as Python and NumPy 2 convert a Python int:
// an integer dtype that cannot hold the value is an Overflow error (never a
// wrap-around); a float dtype gets the value rounded once to nearest even,
// ±Inf past the float16/bfloat16/float32 range and an Overflow error past
// float64's (as Python's float()).
func (t *Tensor) WrappedIntTo(dt dtype.Dtype) (*Tensor, error) {
	if !t.wrapped || t.dtype != dtype.Int64 || len(t.shape) != 0 {
		return nil, errs.Valuef("WrappedIntTo needs a wrapped integer")
	}
	m := LoadInt64(dtype.Int64, t.ElementPointer(0))
	exp := int(t.wrapExp)
	if exp == 0 && dt == dtype.Int64 {
		return t, nil
	}
	out, err := New(dt, nil)
	if err != nil {
		return nil, err
	}
	p := out.ElementPointer(0)
	switch {
	case exp == 0 && dt != dtype.Bool && !dt.IsFloat():
		if lo, hi := intRange(dt); m < lo || m > hi {
			return nil, errs.Overflowf("Python integer %d out of bounds for %s", m, dt)
		}
		StoreInt64(dt, p, m)
	case exp == 0 || dt == dtype.Bool:
		// Exact for bool (m != 0 exactly when the value is); a single
		// rounding for the float dtypes (StoreInt64 rounds once).
		StoreInt64(dt, p, m)
	case !dt.IsFloat():
		return nil, errs.Overflowf("Python integer of %d bits out of bounds for %s", magnitudeBits(m, exp), dt)
	case dt == dtype.Float64:
		// float64(m) rounds once (the sticky bit lies below the rounding
		// position); scaling by a power of two is exact up to overflow.
		v := math.Ldexp(float64(m), exp)
		if math.IsInf(v, 0) {
			return nil, errs.Overflowf("Python integer of %d bits too large to convert to float64", magnitudeBits(m, exp))
		}
		StoreFloat64(dt, p, v)
	default:
		// Round to odd at 53 bits, then once to the narrower format: no
		// double rounding; past float64's range the value is ±Inf, which
		// is the right answer for these formats too.
		StoreFloat64(dt, p, math.Ldexp(roundToOdd(m), exp))
	}
	return out, nil
}

// intRange returns the smallest and largest value of an integer dtype.
func intRange(dt dtype.Dtype) (lo, hi int64) {
	switch dt {
	case dtype.Uint8:
		return 0, math.MaxUint8
	case dtype.Int8:
		return math.MinInt8, math.MaxInt8
	case dtype.Int16:
		return math.MinInt16, math.MaxInt16
	case dtype.Int32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// magnitudeBits is the bit length of |m·2**exp|.
func magnitudeBits(m int64, exp int) int {
	u := uint64(m)
	if m < 0 {
		u = -u
	}
	return bits.Len64(u) + exp
}

// FloatScalarTo converts the 0-d floating tensor t to a new 0-d tensor of
// floating dtype dt, rounding as a cast kernel does (CastFloat): what an op
// does to a Python float operand before its kernel, without a kernel call.
func (t *Tensor) FloatScalarTo(dt dtype.Dtype) (*Tensor, error) {
	if len(t.shape) != 0 || !t.dtype.IsFloat() || !dt.IsFloat() {
		return nil, errs.Valuef("FloatScalarTo needs a 0-d floating tensor and a floating dtype, got %v to %v", t.dtype, dt)
	}
	out, err := New(dt, nil)
	if err != nil {
		return nil, err
	}
	CastFloat(dt, t.dtype, out.ElementPointer(0), t.ElementPointer(0))
	runtime.KeepAlive(t) // read through a raw pointer: t's storage must live until here
	return out, nil
}
