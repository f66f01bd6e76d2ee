package tensor

import (
	"math"
	"math/bits"
	"unsafe"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
)

// LoadFloat64 reads the element of dtype dt at p, widened to float64 (integers
// beyond 2^53 round).
func LoadFloat64(dt dtype.Dtype, p unsafe.Pointer) float64 {
	switch dt {
	case dtype.Float64:
		return *(*float64)(p)
	case dtype.Float32:
		return float64(*(*float32)(p))
	case dtype.Float16:
		return dtype.Float16ToFloat64(*(*uint16)(p))
	case dtype.BFloat16:
		return dtype.BFloat16ToFloat64(*(*uint16)(p))
	}
	return float64(LoadInt64(dt, p))
}

// CastFloat converts the float element at src (dtype id) to dtype od at dst:
// exact when widening, rounded once to nearest even when narrowing, NaN bits
// as NumPy and ml_dtypes give them (see dtype's half.go and docs/dtypes.md).
// Both backends cast floats through it.
func CastFloat(od, id dtype.Dtype, dst, src unsafe.Pointer) {
	switch {
	case od == id:
		copy(unsafe.Slice((*byte)(dst), od.Size()), unsafe.Slice((*byte)(src), id.Size()))
	case id == dtype.Float32 && od == dtype.Float16:
		*(*uint16)(dst) = dtype.Float32ToFloat16(*(*float32)(src))
	case id == dtype.Float32 && od == dtype.BFloat16:
		*(*uint16)(dst) = dtype.Float32ToBFloat16(*(*float32)(src))
	case id == dtype.Float16 && od == dtype.Float32:
		*(*float32)(dst) = dtype.Float16ToFloat32(*(*uint16)(src))
	case id == dtype.BFloat16 && od == dtype.Float32:
		*(*float32)(dst) = dtype.BFloat16ToFloat32(*(*uint16)(src))
	case id == dtype.Float16 && od == dtype.BFloat16:
		*(*uint16)(dst) = dtype.Float16ToBFloat16(*(*uint16)(src))
	case id == dtype.BFloat16 && od == dtype.Float16:
		*(*uint16)(dst) = dtype.BFloat16ToFloat16(*(*uint16)(src))
	default: // float64 on one side (or float32 to float64): through float64 is exact there
		StoreFloat64(od, dst, LoadFloat64(id, src))
	}
}

// LoadInt64 reads an integer or bool element at p (floats truncate toward zero).
func LoadInt64(dt dtype.Dtype, p unsafe.Pointer) int64 {
	switch dt {
	case dtype.Bool, dtype.Uint8:
		return int64(*(*uint8)(p))
	case dtype.Int8:
		return int64(*(*int8)(p))
	case dtype.Int16:
		return int64(*(*int16)(p))
	case dtype.Int32:
		return int64(*(*int32)(p))
	case dtype.Int64:
		return *(*int64)(p)
	}
	return int64(LoadFloat64(dt, p))
}

// StoreFloat64 writes v rounded to dtype dt at p (to nearest even for floats;
// for integers, truncation toward zero then wrap-around, for bool v != 0).
func StoreFloat64(dt dtype.Dtype, p unsafe.Pointer, v float64) {
	switch dt {
	case dtype.Float64:
		*(*float64)(p) = v
	case dtype.Float32:
		*(*float32)(p) = float32(v)
	case dtype.Float16:
		*(*uint16)(p) = dtype.Float64ToFloat16(v)
	case dtype.BFloat16:
		*(*uint16)(p) = dtype.Float64ToBFloat16(v)
	case dtype.Bool:
		if v != 0 {
			*(*uint8)(p) = 1
		} else {
			*(*uint8)(p) = 0
		}
	default:
		var i int64
		if !math.IsNaN(v) && v > -9.3e18 && v < 9.3e18 {
			i = int64(v)
		}
		StoreInt64(dt, p, i)
	}
}

// StoreInt64 writes v to an element of dtype dt at p (wrapping for narrow
// integers, v != 0 for bool, rounded for floats).
func StoreInt64(dt dtype.Dtype, p unsafe.Pointer, v int64) {
	switch dt {
	case dtype.Bool:
		if v != 0 {
			*(*uint8)(p) = 1
		} else {
			*(*uint8)(p) = 0
		}
	case dtype.Uint8:
		*(*uint8)(p) = uint8(v)
	case dtype.Int8:
		*(*int8)(p) = int8(v)
	case dtype.Int16:
		*(*int16)(p) = int16(v)
	case dtype.Int32:
		*(*int32)(p) = int32(v)
	case dtype.Int64:
		*(*int64)(p) = v
	case dtype.Float64:
		*(*float64)(p) = float64(v)
	default:
		StoreFloat64(dt, p, roundToOdd(v))
	}
}

// roundToOdd converts v to float64 rounding toward zero and setting the last
// mantissa bit when bits were lost ("round to odd"). Rounding that value again
// to a format with at most 51 significand bits (float32, float16, bfloat16)
// gives the correctly rounded result: no double-rounding error.
func roundToOdd(v int64) float64 {
	u := uint64(v)
	if v < 0 {
		u = -u
	}
	n := bits.Len64(u)
	if n <= 53 {
		return float64(v)
	}
	shift := n - 53
	m := u >> shift
	if u&(1<<shift-1) != 0 {
		m |= 1
	}
	f := math.Ldexp(float64(m), shift)
	if v < 0 {
		f = -f
	}
	return f
}

// LoadBits reads the raw bit pattern of the element at p.
func LoadBits(dt dtype.Dtype, p unsafe.Pointer) uint64 {
	switch dt.Size() {
	case 1:
		return uint64(*(*uint8)(p))
	case 2:
		return uint64(*(*uint16)(p))
	case 4:
		return uint64(*(*uint32)(p))
	}
	return *(*uint64)(p)
}

// ElementOffset returns the storage offset (in elements) of the element with
// row-major index flat.
func (t *Tensor) ElementOffset(flat int) int {
	off := t.offset
	for i := len(t.shape) - 1; i >= 0; i-- {
		d := t.shape[i]
		off += (flat % d) * t.strides[i]
		flat /= d
	}
	return off
}

// ElementPointer returns the address of the element with row-major index flat.
func (t *Tensor) ElementPointer(flat int) unsafe.Pointer {
	return unsafe.Add(t.storage.Pointer(), t.ElementOffset(flat)*t.dtype.Size())
}

// Float64s returns the elements in row-major order, widened to float64. It
// is meant for small tensors: one whose copy could never fit in memory (a
// huge broadcast view) panics with a Memory error instead of ending the
// process (see CheckHeap).
func (t *Tensor) Float64s() []float64 {
	out := heapCopy[float64](t)
	for i := range out {
		out[i] = LoadFloat64(t.dtype, t.ElementPointer(i))
	}
	return out
}

// Int64s returns the elements in row-major order as int64 (small tensors, as
// Float64s).
func (t *Tensor) Int64s() []int64 {
	out := heapCopy[int64](t)
	for i := range out {
		out[i] = LoadInt64(t.dtype, t.ElementPointer(i))
	}
	return out
}

// Bits returns the raw bit pattern of every element in row-major order
// (small tensors, as Float64s).
func (t *Tensor) Bits() []uint64 {
	out := heapCopy[uint64](t)
	for i := range out {
		out[i] = LoadBits(t.dtype, t.ElementPointer(i))
	}
	return out
}

// heapCopy makes a slice for a copy of t's elements, or panics with the
// Memory error of CheckHeap.
func heapCopy[T any](t *Tensor) []T {
	var z T
	if err := CheckHeap(t.Numel(), int(unsafe.Sizeof(z)), "a copy of "+t.String()); err != nil {
		panic(err)
	}
	return make([]T, t.Numel())
}

// Item returns the single element of a one-element tensor as float64.
func (t *Tensor) Item() (float64, error) {
	if t.Numel() != 1 {
		return 0, errs.Valuef("item() needs a tensor with one element, got shape %v", fmtShape(t.shape))
	}
	return LoadFloat64(t.dtype, t.ElementPointer(0)), nil
}

// FromFloat64s returns a new contiguous tensor holding vals rounded to dt.
func FromFloat64s(dt dtype.Dtype, shape []int, vals []float64) (*Tensor, error) {
	return fromValues(dt, shape, vals, StoreFloat64)
}

// FromInt64s returns a new contiguous tensor holding vals converted to dt.
func FromInt64s(dt dtype.Dtype, shape []int, vals []int64) (*Tensor, error) {
	return fromValues(dt, shape, vals, StoreInt64)
}

// FromBits returns a new contiguous tensor whose elements have the given raw
// bit patterns (truncated to the dtype's size).
func FromBits(dt dtype.Dtype, shape []int, bits []uint64) (*Tensor, error) {
	return fromValues(dt, shape, bits, storeBits)
}

// fromValues is the one body of the From* constructors: a new contiguous
// tensor of dt and shape, element i stored from vals[i] by store.
func fromValues[V any](dt dtype.Dtype, shape []int, vals []V, store func(dtype.Dtype, unsafe.Pointer, V)) (*Tensor, error) {
	t, err := New(dt, shape)
	if err != nil {
		return nil, err
	}
	if len(vals) != t.Numel() {
		return nil, errs.Valuef("%d values do not fill shape %v", len(vals), fmtShape(shape))
	}
	for i, v := range vals {
		store(dt, t.ElementPointer(i), v)
	}
	return t, nil
}

// storeBits writes the low dt.Size() bytes of b at p.
func storeBits(dt dtype.Dtype, p unsafe.Pointer, b uint64) {
	switch dt.Size() {
	case 1:
		*(*uint8)(p) = uint8(b)
	case 2:
		*(*uint16)(p) = uint16(b)
	case 4:
		*(*uint32)(p) = uint32(b)
	default:
		*(*uint64)(p) = b
	}
}

// Scalar returns a 0-d tensor holding v rounded to dt.
func Scalar(dt dtype.Dtype, v float64) (*Tensor, error) {
	return FromFloat64s(dt, nil, []float64{v})
}

// Full returns a contiguous tensor of the given shape filled with v.
func Full(dt dtype.Dtype, shape []int, v float64) (*Tensor, error) {
	t, err := Empty(dt, shape)
	if err != nil {
		return nil, err
	}
	n, sz := t.Numel(), dt.Size()
	if n == 0 {
		return t, nil
	}
	StoreFloat64(dt, t.storage.Pointer(), v)
	first := t.storage.data[:sz]
	for off := sz; off < n*sz; off += sz { // replicate the first element's bytes
		copy(t.storage.data[off:off+sz], first)
	}
	return t, nil
}

// Clone returns a contiguous copy of t (autograd fields are not copied).
func (t *Tensor) Clone() (*Tensor, error) {
	out, err := New(t.dtype, t.shape)
	if err != nil {
		return nil, err
	}
	n, sz := t.Numel(), t.dtype.Size()
	if n == 0 {
		return out, nil
	}
	dst := out.storage.data
	if t.IsContiguous() {
		copy(dst, t.storage.data[t.offset*sz:(t.offset+n)*sz])
		return out, nil
	}
	for i := 0; i < n; i++ {
		o := t.ElementOffset(i) * sz
		copy(dst[i*sz:(i+1)*sz], t.storage.data[o:o+sz])
	}
	return out, nil
}
