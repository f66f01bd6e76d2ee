// The arithmetic kernels (the binaryKernels table), Unary and Cast.

package cpu

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// The arithmetic, negation and cast kernels are built once per op and
// dtype at init, so an op call allocates no closures.
var (
	negKernels  [16]segFunc     // [dtype]
	castKernels [16][16]segFunc // [out dtype][in dtype]
	// binaryKernels is every binary op's kernel by op and dtype (nil: none
	// for that dtype): a selection's from selectKernels, arithmetic's from
	// buildArith. Dispatch indexes it; nothing depends on the order of the
	// op constants.
	binaryKernels [backend.NumBinaryOps][16]segFunc
)

func init() {
	buildSelectionTables()
	for _, dt := range dtype.All() {
		for op := range backend.NumBinaryOps {
			if r, selects := op.Rule(); selects {
				binaryKernels[op][dt] = selectKernels[r][dt]
			} else {
				binaryKernels[op][dt] = buildArith(op, dt)
			}
		}
		negKernels[dt] = buildNeg(dt)
		for _, id := range dtype.All() {
			castKernels[dt][id] = castKernel(dt, id)
		}
	}
}

func arith[T native](op backend.BinaryOp) segFunc {
	return func(s seg) {
		sz := int(unsafe.Sizeof(*new(T)))
		if s.contiguous(3, sz) {
			o := unsafe.Slice((*T)(s.p[0]), s.n)
			a, b := unsafe.Slice((*T)(s.p[1]), s.n), unsafe.Slice((*T)(s.p[2]), s.n)
			switch op {
			case backend.Add:
				for i := range o {
					o[i] = a[i] + b[i]
				}
			case backend.Sub:
				for i := range o {
					o[i] = a[i] - b[i]
				}
			case backend.Mul:
				for i := range o {
					o[i] = a[i] * b[i]
				}
			case backend.Div:
				for i := range o {
					o[i] = a[i] / b[i]
				}
			}
			return
		}
		for i := 0; i < s.n; i++ {
			x, y := *(*T)(s.at(1, i)), *(*T)(s.at(2, i))
			*(*T)(s.at(0, i)) = backend.Arith(op, x, y)
		}
	}
}

// halfCodec converts float16/bfloat16 bits to and from float32.
type halfCodec struct {
	widen  func(uint16) float32
	narrow func(float32) uint16
}

func codecFor(dt dtype.Dtype) (halfCodec, bool) {
	switch dt {
	case dtype.Float16:
		return halfCodec{dtype.Float16ToFloat32, dtype.Float32ToFloat16}, true
	case dtype.BFloat16:
		return halfCodec{dtype.BFloat16ToFloat32, dtype.Float32ToBFloat16}, true
	}
	return halfCodec{}, false
}

// f32Bufs recycles viaFloat32's scratch (it escapes through the kernel call,
// and is too large to allocate per segment).
var f32Bufs = sync.Pool{New: func() any { return new([3][maxSeg]float32) }}

// viaFloat32 runs a float32 kernel over float16/bfloat16 operands (operand 0
// is the output, 1..nin the inputs) by widening into scratch buffers.
func viaFloat32(c halfCodec, nin int, k segFunc) segFunc {
	return func(s seg) {
		bufs := f32Bufs.Get().(*[3][maxSeg]float32)
		inChunks(s, nin+1, func(s seg) {
			var t seg
			t.n = s.n
			for o := 0; o <= nin; o++ {
				t.p[o], t.s[o] = unsafe.Pointer(&bufs[o][0]), 4
			}
			for o := 1; o <= nin; o++ {
				for i := 0; i < s.n; i++ {
					bufs[o][i] = c.widen(*(*uint16)(s.at(o, i)))
				}
			}
			k(t)
			for i := 0; i < s.n; i++ {
				*(*uint16)(s.at(0, i)) = c.narrow(bufs[0][i])
			}
		})
		f32Bufs.Put(bufs)
	}
}

// buildArith returns the arithmetic kernel for dt (bool results normalised
// to 0/1), nil where there is none.
func buildArith(op backend.BinaryOp, dt dtype.Dtype) segFunc {
	if op.FloatOnly() && !dt.IsFloat() {
		return nil
	}
	switch dt {
	case dtype.Bool:
		return boolArith(op)
	case dtype.Uint8:
		return arith[uint8](op)
	case dtype.Int8:
		return arith[int8](op)
	case dtype.Int16:
		return arith[int16](op)
	case dtype.Int32:
		return arith[int32](op)
	case dtype.Int64:
		return arith[int64](op)
	case dtype.Float32:
		return arith[float32](op)
	case dtype.Float64:
		return arith[float64](op)
	}
	if c, ok := codecFor(dt); ok {
		return viaFloat32(c, 2, arith[float32](op))
	}
	return nil
}

// boolArith is op on bools: whether the integer op on the bytes is not
// zero, as the ref backend computes it, so Add is OR, Mul is AND and Sub
// is "the bytes differ" (XOR on 0/1 bytes), each result 0/1. Contiguous
// operands go eight bytes a word (a winner mask's AND at 2^22 elements: one
// pass, not a per-byte multiply and normalise).
func boolArith(op backend.BinaryOp) segFunc {
	return func(s seg) {
		i := 0
		if s.contiguous(3, 1) {
			// Byte slices read as little-endian words (one load each on amd64):
			// no conversion to *uint64, which a short or unaligned segment
			// would make invalid (checkptr).
			o := unsafe.Slice((*uint8)(s.p[0]), s.n)
			a, b := unsafe.Slice((*uint8)(s.p[1]), s.n), unsafe.Slice((*uint8)(s.p[2]), s.n)
			le := binary.LittleEndian
			for ; i+8 <= s.n; i += 8 {
				le.PutUint64(o[i:], boolLogic(op, le.Uint64(a[i:]), le.Uint64(b[i:])))
			}
		}
		for ; i < s.n; i++ {
			x, y := uint64(*(*uint8)(s.at(1, i))), uint64(*(*uint8)(s.at(2, i)))
			*(*uint8)(s.at(0, i)) = uint8(boolLogic(op, x, y))
		}
	}
}

// boolLogic is boolArith's op on the bytes of x and y, each result byte 0
// or 1 (small enough to inline into both loops).
func boolLogic(op backend.BinaryOp, x, y uint64) uint64 {
	switch op {
	case backend.Add:
		return nonzeroBytes(x | y)
	case backend.Mul:
		return nonzeroBytes(x) & nonzeroBytes(y)
	}
	return nonzeroBytes(x ^ y)
}

// nonzeroBytes maps each byte of w to 1 when it is not zero, else 0.
func nonzeroBytes(w uint64) uint64 {
	const low7, ones = 0x7f7f7f7f7f7f7f7f, 0x0101010101010101
	return (((w & low7) + low7) | w) >> 7 & ones
}

func normaliseBool(k segFunc) segFunc {
	return func(s seg) {
		k(s)
		for i := 0; i < s.n; i++ {
			p := (*uint8)(s.at(0, i))
			if *p != 0 {
				*p = 1
			}
		}
	}
}

// Binary implements backend.IBackend.
func (b *Backend) Binary(op backend.BinaryOp, out, a, bb *tensor.Tensor) error {
	if err := backend.CheckBinary(op, out, a, bb); err != nil {
		return err
	}
	dt := out.Dtype()
	var k segFunc
	if dt.Valid() {
		k = binaryKernels[op][dt]
	}
	if k == nil {
		return fmt.Errorf("unsupported dtype %v", dt)
	}
	b.elementwise(k, out, a, bb)
	return nil
}

func neg[T native](s seg) {
	for i := 0; i < s.n; i++ {
		*(*T)(s.at(0, i)) = -*(*T)(s.at(1, i))
	}
}

func buildNeg(dt dtype.Dtype) segFunc {
	switch dt {
	case dtype.Bool:
		return normaliseBool(neg[uint8])
	case dtype.Uint8:
		return neg[uint8]
	case dtype.Int8:
		return neg[int8]
	case dtype.Int16:
		return neg[int16]
	case dtype.Int32:
		return neg[int32]
	case dtype.Int64:
		return neg[int64]
	case dtype.Float32:
		return neg[float32]
	case dtype.Float64:
		return neg[float64]
	}
	if c, ok := codecFor(dt); ok {
		return viaFloat32(c, 1, neg[float32])
	}
	return nil
}

// Unary implements backend.IBackend.
func (b *Backend) Unary(op backend.UnaryOp, out, a *tensor.Tensor) error {
	if err := backend.CheckUnary(op, out, a); err != nil {
		return err
	}
	var k segFunc
	if dt := out.Dtype(); dt.Valid() {
		k = negKernels[dt]
	}
	if k == nil {
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	b.elementwise(k, out, a)
	return nil
}

// ---- casts ----

func castNative[S, D native](s seg) {
	for i := 0; i < s.n; i++ {
		*(*D)(s.at(0, i)) = D(*(*S)(s.at(1, i)))
	}
}

// castElem converts one element by the shared definition in package tensor.
func castElem(od, id dtype.Dtype) segFunc {
	return func(s seg) {
		for i := 0; i < s.n; i++ {
			switch {
			case id.IsFloat() && od.IsFloat():
				tensor.CastFloat(od, id, s.at(0, i), s.at(1, i))
			case id.IsFloat():
				tensor.StoreFloat64(od, s.at(0, i), tensor.LoadFloat64(id, s.at(1, i)))
			default:
				tensor.StoreInt64(od, s.at(0, i), tensor.LoadInt64(id, s.at(1, i)))
			}
		}
	}
}

func castKernel(od, id dtype.Dtype) segFunc {
	switch {
	case od == id:
		return bitsCopy(od)
	case od == dtype.Float32 && id == dtype.Float64:
		return castNative[float64, float32]
	case od == dtype.Float64 && id == dtype.Float32:
		return castNative[float32, float64]
	case od == dtype.Float32:
		if c, ok := codecFor(id); ok {
			return func(s seg) {
				for i := 0; i < s.n; i++ {
					*(*float32)(s.at(0, i)) = c.widen(*(*uint16)(s.at(1, i)))
				}
			}
		}
	case id == dtype.Float32:
		if c, ok := codecFor(od); ok {
			return func(s seg) {
				for i := 0; i < s.n; i++ {
					*(*uint16)(s.at(0, i)) = c.narrow(*(*float32)(s.at(1, i)))
				}
			}
		}
	case od == dtype.Uint8 && id == dtype.Bool:
		return bitsCopy(od)
	}
	return castElem(od, id)
}

func copyBits[B rawBits](s seg) {
	if sz := int(unsafe.Sizeof(*new(B))); s.contiguous(2, sz) {
		copy(unsafe.Slice((*byte)(s.p[0]), s.n*sz), unsafe.Slice((*byte)(s.p[1]), s.n*sz))
		return
	}
	for i := 0; i < s.n; i++ {
		*(*B)(s.at(0, i)) = *(*B)(s.at(1, i))
	}
}

func bitsCopy(dt dtype.Dtype) segFunc {
	switch dt.Size() {
	case 1:
		return copyBits[uint8]
	case 2:
		return copyBits[uint16]
	case 4:
		return copyBits[uint32]
	}
	return copyBits[uint64]
}

// Cast implements backend.IBackend.
func (b *Backend) Cast(out, a *tensor.Tensor) error {
	if err := backend.CheckSameShape(out, a); err != nil {
		return err
	}
	od, id := out.Dtype(), a.Dtype()
	if !od.Valid() || !id.Valid() {
		return fmt.Errorf("unsupported cast %v to %v", id, od)
	}
	b.elementwise(castKernels[od][id], out, a)
	return nil
}
