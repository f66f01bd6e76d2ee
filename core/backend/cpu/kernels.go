package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

type native interface {
	~uint8 | ~int8 | ~int16 | ~int32 | ~int64 | ~float32 | ~float64
}

type rawBits interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

// ---- selection: minimum/maximum forward, Route and Select, by rule ----

// maskFunc writes, for n elements of a (operand ia) and b (operand ib),
// whether a wins.
type maskFunc func(m []bool, s seg, ia, ib int)

// maskNative is the maskFunc of rule R for a native element type.
func maskNative[R rule, T native](m []bool, s seg, ia, ib int) {
	sz := int(unsafe.Sizeof(*new(T)))
	if s.s[ia] == sz && s.s[ib] == sz {
		a, b := unsafe.Slice((*T)(s.p[ia]), s.n), unsafe.Slice((*T)(s.p[ib]), s.n)
		m = m[:s.n]
		for i := range m {
			m[i] = wins[R](a[i], b[i])
		}
		return
	}
	for i := 0; i < s.n; i++ {
		m[i] = wins[R](*(*T)(s.at(ia, i)), *(*T)(s.at(ib, i)))
	}
}

// maskHalf compares float16 (bf16 false) or bfloat16 values by widening
// them to float32 (exact); maskF16 and maskBF16 are its maskFuncs.
func maskHalf[R rule](m []bool, s seg, ia, ib int, bf16 bool) {
	for i := 0; i < s.n; i++ {
		m[i] = wins[R](widenHalf(*(*uint16)(s.at(ia, i)), bf16), widenHalf(*(*uint16)(s.at(ib, i)), bf16))
	}
}

func maskF16[R rule](m []bool, s seg, ia, ib int)  { maskHalf[R](m, s, ia, ib, false) }
func maskBF16[R rule](m []bool, s seg, ia, ib int) { maskHalf[R](m, s, ia, ib, true) }

// widenHalf converts float16 (bf16 false) or bfloat16 bits to float32
// exactly.
func widenHalf(h uint16, bf16 bool) float32 {
	if bf16 {
		return dtype.BFloat16ToFloat32(h)
	}
	return dtype.Float16ToFloat32(h)
}

func mask[R rule](dt dtype.Dtype) maskFunc {
	switch dt {
	case dtype.Bool, dtype.Uint8:
		return maskNative[R, uint8]
	case dtype.Int8:
		return maskNative[R, int8]
	case dtype.Int16:
		return maskNative[R, int16]
	case dtype.Int32:
		return maskNative[R, int32]
	case dtype.Int64:
		return maskNative[R, int64]
	case dtype.Float32:
		return maskNative[R, float32]
	case dtype.Float64:
		return maskNative[R, float64]
	case dtype.Float16:
		return maskF16[R]
	case dtype.BFloat16:
		return maskBF16[R]
	}
	return nil
}

// selectBits writes out[i] = m[i] ? x[i] : y[i] as raw bits (operands io, ix, iy).
func selectBits[B rawBits](m []bool, s seg, io, ix, iy int) {
	sz := int(unsafe.Sizeof(*new(B)))
	if s.s[io] == sz && s.s[ix] == sz && s.s[iy] == sz {
		o := unsafe.Slice((*B)(s.p[io]), s.n)
		x, y := unsafe.Slice((*B)(s.p[ix]), s.n), unsafe.Slice((*B)(s.p[iy]), s.n)
		for i := range o {
			if m[i] {
				o[i] = x[i]
			} else {
				o[i] = y[i]
			}
		}
		return
	}
	for i := 0; i < s.n; i++ {
		src := iy
		if m[i] {
			src = ix
		}
		*(*B)(s.at(io, i)) = *(*B)(s.at(src, i))
	}
}

// routeBits writes ga[i] = m[i] ? g[i] : 0 and gb[i] = m[i] ? 0 : g[i]
// (operands ga=0, gb=1, g=4).
func routeBits[B rawBits](m []bool, s seg) {
	for i := 0; i < s.n; i++ {
		g := *(*B)(s.at(4, i))
		if m[i] {
			*(*B)(s.at(0, i)), *(*B)(s.at(1, i)) = g, 0
		} else {
			*(*B)(s.at(0, i)), *(*B)(s.at(1, i)) = 0, g
		}
	}
}

type bitsFuncs struct {
	sel   func(m []bool, s seg, io, ix, iy int)
	route func(m []bool, s seg)
}

func bitsFor(dt dtype.Dtype) bitsFuncs {
	switch dt.Size() {
	case 1:
		return bitsFuncs{selectBits[uint8], routeBits[uint8]}
	case 2:
		return bitsFuncs{selectBits[uint16], routeBits[uint16]}
	case 4:
		return bitsFuncs{selectBits[uint32], routeBits[uint32]}
	}
	return bitsFuncs{selectBits[uint64], routeBits[uint64]}
}

// scratchKernel builds the per-segment function of a kernel that needs a
// scratch buffer per segment (a mask, a choice) over nops operands: fast,
// if not nil, may handle a prefix of each segment first (a SIMD path, which
// finishes the segment when it handles its layout) and returns how many
// elements it did; the rest gets a buffer from pool (of *[maxSeg]E) that
// fill writes and k applies.
func scratchKernel[E bool | uint8](pool *sync.Pool, nops int, fast func(seg) int, fill, k func(buf []E, s seg)) segFunc {
	return func(s seg) {
		if fast != nil {
			done := fast(s)
			if done == s.n {
				return
			}
			if done > 0 {
				s = s.advance(done, nops)
			}
		}
		buf := pool.Get().(*[maxSeg]E)
		inChunks(s, nops, func(s seg) {
			fill(buf[:s.n], s)
			k(buf[:s.n], s)
		})
		pool.Put(buf)
	}
}

// maskedKernel is a selection kernel: the scratch is the mask of a (operand
// ia) winning over b (ib) by mf.
func maskedKernel(nops int, mf maskFunc, ia, ib int, fast func(seg) int, k func(m []bool, s seg)) segFunc {
	return scratchKernel(&maskBufs, nops, fast, func(m []bool, s seg) { mf(m, s, ia, ib) }, k)
}

// Selection kernels are built once per (rule, compared dtype, value dtype)
// at init, so an op call allocates no closures.
var (
	selectKernels [backend.NumRules][16]segFunc     // [rule][dtype]: minimum/maximum forward
	routeKernels  [backend.NumRules][16][16]segFunc // [rule][compared dtype][gradient dtype]
	whereKernels  [backend.NumRules][16][16]segFunc // [rule][compared dtype][value dtype]: Select
	arithKernels  [backend.Div + 1][16]segFunc      // [op][dtype]: add, sub, mul, div
	negKernels    [16]segFunc                       // [dtype]
	castKernels   [16][16]segFunc                   // [out dtype][in dtype]
)

func init() {
	buildSelection[ruleMin]()
	buildSelection[ruleMax]()
	buildSelection[ruleFMin]()
	buildSelection[ruleFMax]()
	for _, dt := range dtype.All() {
		for op := backend.Add; op <= backend.Div; op++ {
			arithKernels[op][dt] = buildArith(op, dt)
		}
		negKernels[dt] = buildNeg(dt)
		for _, id := range dtype.All() {
			castKernels[dt][id] = castKernel(dt, id)
		}
	}
}

// buildSelection fills rule R's rows of the selection tables.
func buildSelection[R rule]() {
	r := ruleOf[R]()
	for _, cd := range dtype.All() {
		selectKernels[r][cd] = buildSelect[R](cd)
		for _, gd := range dtype.All() {
			routeKernels[r][cd][gd] = buildRoute[R](cd, gd)
			whereKernels[r][cd][gd] = buildWhere[R](cd, gd)
		}
	}
}

func buildSelect[R rule](dt dtype.Dtype) segFunc {
	mf := mask[R](dt)
	if mf == nil {
		return nil
	}
	sel := bitsFor(dt).sel
	var fast func(seg) int
	if sz := simdSize(dt); sz != 0 {
		fast = func(s seg) int { return simdSelect[R](&s, sz, 0, 1, 2) }
	} else if isHalf(dt) {
		fast = func(s seg) int { return simdSelectHalf[R](&s, dt, 0, 1, 2) }
	}
	return maskedKernel(3, mf, 1, 2, fast, func(m []bool, s seg) { sel(m, s, 0, 1, 2) })
}

func buildRoute[R rule](cd, gd dtype.Dtype) segFunc {
	mf := mask[R](cd)
	if mf == nil {
		return nil
	}
	var fast func(seg) int
	if sz := simdSize(gd); sz != 0 && cd == gd {
		fast = func(s seg) int { return simdRoute[R](&s, sz) }
	} else if isHalf(gd) && cd == gd {
		fast = func(s seg) int { return simdRouteHalf[R](&s, gd) }
	}
	return maskedKernel(5, mf, 2, 3, fast, bitsFor(gd).route)
}

// buildWhere is Select's kernel: out (0) gets x (3) where a (1) wins over
// b (2), y (4) elsewhere.
func buildWhere[R rule](cd, vd dtype.Dtype) segFunc {
	mf := mask[R](cd)
	if mf == nil {
		return nil
	}
	sel := bitsFor(vd).sel
	return maskedKernel(5, mf, 1, 2, nil, func(m []bool, s seg) { sel(m, s, 0, 3, 4) })
}

// maskBufs recycles mask scratch: it escapes to the heap (it is passed to
// function values), and allocating it per segment would cost more than the
// work on a small tensor.
var maskBufs = sync.Pool{New: func() any { return new([maxSeg]bool) }}

// isHalf reports whether dt is float16 or bfloat16.
func isHalf(dt dtype.Dtype) bool { return dt == dtype.Float16 || dt == dtype.BFloat16 }

// halfNaNLimit is the largest magnitude bit pattern (bits & 0x7fff) that is
// not NaN, for the half-precision SIMD paths (0: not a half dtype).
func halfNaNLimit(dt dtype.Dtype) int16 {
	switch dt {
	case dtype.Float16:
		return 0x7c00
	case dtype.BFloat16:
		return 0x7f80
	}
	return 0
}

// simdSize is the element size the SIMD paths handle for dt (0: none).
func simdSize(dt dtype.Dtype) int {
	switch dt {
	case dtype.Float32:
		return 4
	case dtype.Float64:
		return 8
	}
	return 0
}

// Route implements backend.IBackend.
func (b *Backend) Route(r backend.Rule, ga, gb, a, bb, g *tensor.Tensor) error {
	k, err := selection(&routeKernels, r, a, bb, g, ga, gb)
	if err != nil {
		return err
	}
	b.elementwise(k, ga, gb, a, bb, g)
	return nil
}

// Select implements backend.IBackend.
func (b *Backend) Select(r backend.Rule, out, a, bb, x, y *tensor.Tensor) error {
	k, err := selection(&whereKernels, r, a, bb, out, x, y)
	if err != nil {
		return err
	}
	b.elementwise(k, out, a, bb, x, y)
	return nil
}

// selection checks what Route and Select share — one shape for all; the
// compared operands a, bb of one dtype; the value operands vs of one dtype;
// a valid rule — and returns the kernel from table for it.
func selection(table *[backend.NumRules][16][16]segFunc, r backend.Rule, a, bb *tensor.Tensor, vs ...*tensor.Tensor) (segFunc, error) {
	if err := backend.CheckSameShape(vs[0], a, bb); err != nil {
		return nil, err
	}
	if err := backend.CheckSameShape(vs[0], vs[1:]...); err != nil {
		return nil, err
	}
	if err := backend.CheckSameDtype(a, bb); err != nil {
		return nil, err
	}
	if err := backend.CheckSameDtype(vs...); err != nil {
		return nil, err
	}
	if err := backend.CheckRule(r); err != nil {
		return nil, err
	}
	var k segFunc
	if a.Dtype().Valid() && vs[0].Dtype().Valid() {
		k = table[r][a.Dtype()][vs[0].Dtype()]
	}
	if k == nil {
		return nil, fmt.Errorf("unsupported dtype %v", a.Dtype())
	}
	return k, nil
}

// ---- arithmetic ----

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
			var v T
			switch op {
			case backend.Add:
				v = x + y
			case backend.Sub:
				v = x - y
			case backend.Mul:
				v = x * y
			case backend.Div:
				v = x / y
			}
			*(*T)(s.at(0, i)) = v
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
	if op == backend.Div && !dt.IsFloat() {
		return nil
	}
	switch dt {
	case dtype.Bool:
		return normaliseBool(arith[uint8](op))
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
	if err := backend.CheckSameShape(out, a, bb); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(out, a, bb); err != nil {
		return err
	}
	var k segFunc
	r, selects := op.Rule()
	switch dt := out.Dtype(); {
	case !dt.Valid():
	case selects:
		k = selectKernels[r][dt]
	case op <= backend.Div:
		if op == backend.Div && !out.Dtype().IsFloat() {
			return fmt.Errorf("div kernel needs a floating dtype, got %v", out.Dtype())
		}
		k = arithKernels[op][out.Dtype()]
	default:
		return fmt.Errorf("unknown binary op %v", op)
	}
	if k == nil {
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
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
	if err := backend.CheckSameShape(out, a); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(out, a); err != nil {
		return err
	}
	if op != backend.Neg {
		return fmt.Errorf("unknown unary op %v", op)
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

// ---- sum ----

type accum interface{ ~float32 | ~float64 | ~int64 }

// addLanes adds elements [i, s.n) of operand 0 (of type T) to the lanes,
// the first to lane k mod SumLanes, and returns k advanced past them.
func addLanes[T native, A accum](lanes *[backend.SumLanes]A, k int, s *seg, i int) int {
	for ; i < s.n; i++ {
		lanes[k%backend.SumLanes] += A(*(*T)(s.at(0, i)))
		k++
	}
	return k
}

// addHalf is addLanes for float16/bfloat16, widened exactly to float32.
func addHalf[A accum](lanes *[backend.SumLanes]A, k int, s *seg, i int, widen func(uint16) float32) int {
	for ; i < s.n; i++ {
		lanes[k%backend.SumLanes] += A(widen(*(*uint16)(s.at(0, i))))
		k++
	}
	return k
}

// addSeg adds the elements of segment s (operand 0, of dtype dt) to the
// summation lanes in the canonical order, element k of the block going to
// lane k mod SumLanes, and returns k advanced past them. A is dt's
// accumulation type (float32 for float32 and the half types, float64 for
// float64, int64 for the integers and bool).
func addSeg[A accum](lanes *[backend.SumLanes]A, k int, dt dtype.Dtype, s *seg) int {
	i := 0
	if s.s[0] == dt.Size() && k%backend.SumLanes == 0 { // contiguous, lanes aligned: SIMD
		switch dt {
		case dtype.Float32:
			i = simdLanes32((*[backend.SumLanes]float32)(unsafe.Pointer(lanes)), s.p[0], s.n)
		case dtype.Float64:
			i = simdLanes64((*[backend.SumLanes]float64)(unsafe.Pointer(lanes)), s.p[0], s.n)
		case dtype.Float16:
			i = simdLanesF16((*[backend.SumLanes]float32)(unsafe.Pointer(lanes)), s.p[0], s.n)
		case dtype.BFloat16:
			i = simdLanesBF16((*[backend.SumLanes]float32)(unsafe.Pointer(lanes)), s.p[0], s.n)
		}
		k += i
	}
	switch dt {
	case dtype.Float32:
		return addLanes[float32](lanes, k, s, i)
	case dtype.Float64:
		return addLanes[float64](lanes, k, s, i)
	case dtype.Float16:
		return addHalf(lanes, k, s, i, dtype.Float16ToFloat32)
	case dtype.BFloat16:
		return addHalf(lanes, k, s, i, dtype.BFloat16ToFloat32)
	case dtype.Bool, dtype.Uint8:
		return addLanes[uint8](lanes, k, s, i)
	case dtype.Int8:
		return addLanes[int8](lanes, k, s, i)
	case dtype.Int16:
		return addLanes[int16](lanes, k, s, i)
	case dtype.Int32:
		return addLanes[int32](lanes, k, s, i)
	}
	return addLanes[int64](lanes, k, s, i)
}

// blockSum sums flat indices [start, end) of it (one operand, of dtype dt)
// in the canonical lane order.
func blockSum[A accum](it *tensor.Iter, ops *operands, dt dtype.Dtype, start, end int, nz A) A {
	var lanes [backend.SumLanes]A
	for j := range lanes {
		lanes[j] = nz
	}
	k := 0
	segments(it, ops, start, end, func(s seg) { k = addSeg(&lanes, k, dt, &s) })
	return combineLanes(&lanes)
}

// combineLanes adds the lanes in the canonical tree order.
func combineLanes[A accum](l *[backend.SumLanes]A) A {
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

func storeF32(dt dtype.Dtype, p unsafe.Pointer, v float32) { tensor.StoreFloat64(dt, p, float64(v)) }
func storeF64(dt dtype.Dtype, p unsafe.Pointer, v float64) { tensor.StoreFloat64(dt, p, v) }
func storeI64(dt dtype.Dtype, p unsafe.Pointer, v int64)   { tensor.StoreInt64(dt, p, v) }

// pollBlocks is how many blocks of backend.SumBlock elements a sequential
// sum adds between two looks at its done channel (a quarter of a million
// elements: well under a millisecond).
const pollBlocks = 256

// sumAll writes the canonical sums of a into out; with a non-nil done it
// looks at done between pieces of work and returns false, leaving out partly
// written, once it is closed (backend.Interruptible).
func sumAll[A accum](b *Backend, out, a *tensor.Tensor, nz A, store func(dtype.Dtype, unsafe.Pointer, A), done <-chan struct{}) bool {
	nOut := out.Numel()
	if nOut == 0 {
		return true
	}
	n := a.Numel()
	r := 0
	if n > 0 {
		r = n / nOut
	}
	par := b.split(n)
	if !par && a.IsContiguous() && reducedLast(out, a) {
		return sumFlat(out, a, r, nz, store, done)
	}
	// Visit a's dims kept first, reduced last (Sum reduces the dims where out
	// is 1 and a is not), so each output's elements are one contiguous range
	// of the iteration in row-major order.
	var permBuf [tensor.MaxDims]int
	perm := permBuf[:0]
	for d := 0; d < a.Ndim(); d++ {
		if out.Dim(d) != 1 || a.Dim(d) == 1 {
			perm = append(perm, d)
		}
	}
	for d := 0; d < a.Ndim(); d++ {
		if out.Dim(d) == 1 && a.Dim(d) != 1 {
			perm = append(perm, d)
		}
	}
	var it tensor.Iter
	ops := plan(&it, perm, a)
	dt := a.Dtype()
	nb := (r + backend.SumBlock - 1) / backend.SumBlock
	// out is contiguous and fresh: write its elements in row-major order,
	// each the blocks' values added left to right.
	odt, osz, dst := out.Dtype(), out.Dtype().Size(), out.DataPointer()
	finished := true
	if par && nb > 0 {
		finished = sumParallel(b, it, ops, dt, nOut, nb, r, nz, done,
			func(o int, total A) { store(odt, unsafe.Add(dst, o*osz), total) })
	} else {
		polled := 0 // blocks added since done was last looked at
	outputs:
		for o := 0; o < nOut; o++ {
			total := nz
			if r == 0 {
				total = 0
			}
			for blk := 0; blk < nb; blk++ {
				if done != nil {
					if polled--; polled <= 0 {
						if backend.Stopped(done) {
							finished = false
							break outputs
						}
						polled = pollBlocks
					}
				}
				start := o*r + blk*backend.SumBlock
				total += blockSum(&it, &ops, dt, start, min(start+backend.SumBlock, (o+1)*r), nz)
			}
			store(odt, unsafe.Add(dst, o*osz), total)
		}
	}
	runtime.KeepAlive(a) // read through raw pointers above (see elementwise)
	runtime.KeepAlive(out)
	return finished
}

// reducedLast reports whether every reduced dim of a (out is 1, a is not)
// comes after every kept dim of size above 1.
func reducedLast(out, a *tensor.Tensor) bool {
	seen := false
	for d := 0; d < a.Ndim(); d++ {
		switch {
		case out.Dim(d) == 1 && a.Dim(d) != 1:
			seen = true
		case seen && a.Dim(d) != 1:
			return false
		}
	}
	return true
}

// sumFlat is sumAll for a contiguous a whose reduced dims come last: output
// o's r elements are the contiguous range [o*r, (o+1)*r) of a's memory.
func sumFlat[A accum](out, a *tensor.Tensor, r int, nz A, store func(dtype.Dtype, unsafe.Pointer, A), done <-chan struct{}) bool {
	dt, sz, src := a.Dtype(), a.Dtype().Size(), a.DataPointer()
	odt, osz, dst := out.Dtype(), out.Dtype().Size(), out.DataPointer()
	polled := 0 // blocks added since done was last looked at
	for o := 0; o < out.Numel(); o++ {
		total := nz
		if r == 0 {
			total = 0
		}
		for start := o * r; start < (o+1)*r; start += backend.SumBlock {
			if done != nil {
				if polled--; polled <= 0 {
					if backend.Stopped(done) {
						return false
					}
					polled = pollBlocks
				}
			}
			var lanes [backend.SumLanes]A
			for j := range lanes {
				lanes[j] = nz
			}
			var s seg
			s.p[0], s.s[0], s.n = unsafe.Add(src, start*sz), sz, min(backend.SumBlock, (o+1)*r-start)
			addSeg(&lanes, 0, dt, &s)
			total += combineLanes(&lanes)
		}
		store(odt, unsafe.Add(dst, o*osz), total)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(out)
	return true
}

// sumWindow is the most block values sumParallel holds at once: its scratch
// is bounded (at most 512 KB) whatever the number of elements reduced, which
// only follows from the input (a broadcast view of 2**44 elements needs no
// memory of its own). A variable only so that tests can make it small.
var sumWindow = 1 << 16

// sumParallel computes the block values (output o's block blk is unit
// o*nb+blk, of nOut*nb) on the backend's goroutines, in tasks of fixed size,
// one window of sumWindow units at a time, and adds each output's values
// left to right (nb > 0), handing every total to store in output order.
// With a non-nil done, every task first looks at done and skips its work
// once it is closed; then sumParallel returns false before using the window.
func sumParallel[A accum](b *Backend, it tensor.Iter, ops operands, dt dtype.Dtype, nOut, nb, r int, nz A,
	done <-chan struct{}, store func(o int, total A)) bool {
	units := nOut * nb // at most the element count: every block holds one
	partial := make([]A, min(units, sumWindow))
	const unitsPerTask = 32
	total := nz
	var w, wn int // the window: units [w, w+wn)
	task := func(t int) {
		if done != nil && backend.Stopped(done) {
			return
		}
		for u := w + t*unitsPerTask; u < min(w+wn, w+(t+1)*unitsPerTask); u++ {
			o, blk := u/nb, u%nb
			start := o*r + blk*backend.SumBlock
			partial[u-w] = blockSum(&it, &ops, dt, start, min(start+backend.SumBlock, (o+1)*r), nz)
		}
	}
	for ; w < units; w += len(partial) {
		wn = min(len(partial), units-w)
		b.parallel(min(wn*backend.SumBlock, wn*r), (wn+unitsPerTask-1)/unitsPerTask, task)
		if done != nil && backend.Stopped(done) { // closed for good: some tasks may have skipped
			return false
		}
		for u := w; u < w+wn; u++ {
			total += partial[u-w]
			if u%nb == nb-1 {
				store(u/nb, total)
				total = nz
			}
		}
	}
	return true
}

// Sum implements backend.IBackend.
func (b *Backend) Sum(out, a *tensor.Tensor) error { return b.SumUntil(out, a, nil) }

// SumUntil implements backend.Interruptible: the sequential paths look at
// done every pollBlocks blocks, the parallel one in every task (32 blocks).
func (b *Backend) SumUntil(out, a *tensor.Tensor, done <-chan struct{}) error {
	if err := backend.CheckSumShape(out, a); err != nil {
		return err
	}
	if !out.IsContiguous() {
		return fmt.Errorf("sum output must be contiguous")
	}
	nz32, nz64 := float32(math.Copysign(0, -1)), math.Copysign(0, -1)
	var finished bool
	switch dt := a.Dtype(); dt {
	case dtype.Float32, dtype.Float16, dtype.BFloat16:
		finished = sumAll(b, out, a, nz32, storeF32, done)
	case dtype.Float64:
		finished = sumAll(b, out, a, nz64, storeF64, done)
	case dtype.Bool, dtype.Uint8, dtype.Int8, dtype.Int16, dtype.Int32, dtype.Int64:
		finished = sumAll(b, out, a, int64(0), storeI64, done)
	default:
		return fmt.Errorf("unsupported dtype %v", dt)
	}
	if !finished {
		return backend.ErrInterrupted
	}
	return nil
}
