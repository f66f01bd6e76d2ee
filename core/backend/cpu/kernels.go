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

// ---- selection: the SPEC §1 rule, shared by minimum/maximum, Route, Select ----

// maskFunc writes, for n elements of a (operand ia) and b (operand ib),
// whether a wins.
type maskFunc func(m []bool, s *seg, ia, ib int)

func maskNative[T native](maximum bool) maskFunc {
	return func(m []bool, s *seg, ia, ib int) {
		sz := int(unsafe.Sizeof(*new(T)))
		if s.s[ia] == sz && s.s[ib] == sz {
			a, b := unsafe.Slice((*T)(s.p[ia]), s.n), unsafe.Slice((*T)(s.p[ib]), s.n)
			m = m[:s.n]
			if maximum {
				for i := range m {
					m[i] = a[i] >= b[i] || a[i] != a[i]
				}
			} else {
				for i := range m {
					m[i] = a[i] <= b[i] || a[i] != a[i]
				}
			}
			return
		}
		for i := 0; i < s.n; i++ {
			x, y := *(*T)(s.at(ia, i)), *(*T)(s.at(ib, i))
			if maximum {
				m[i] = x >= y || x != x
			} else {
				m[i] = x <= y || x != x
			}
		}
	}
}

// maskHalf compares float16/bfloat16 by widening to float32 (exact).
func maskHalf(widen func(uint16) float32, maximum bool) maskFunc {
	return func(m []bool, s *seg, ia, ib int) {
		for i := 0; i < s.n; i++ {
			x, y := widen(*(*uint16)(s.at(ia, i))), widen(*(*uint16)(s.at(ib, i)))
			if maximum {
				m[i] = x >= y || x != x
			} else {
				m[i] = x <= y || x != x
			}
		}
	}
}

func mask(dt dtype.Dtype, op backend.BinaryOp) (maskFunc, error) {
	mx := op == backend.Maximum
	if !op.IsMinMax() {
		return nil, fmt.Errorf("selection needs minimum or maximum, got %v", op)
	}
	switch dt {
	case dtype.Bool, dtype.Uint8:
		return maskNative[uint8](mx), nil
	case dtype.Int8:
		return maskNative[int8](mx), nil
	case dtype.Int16:
		return maskNative[int16](mx), nil
	case dtype.Int32:
		return maskNative[int32](mx), nil
	case dtype.Int64:
		return maskNative[int64](mx), nil
	case dtype.Float32:
		return maskNative[float32](mx), nil
	case dtype.Float64:
		return maskNative[float64](mx), nil
	case dtype.Float16:
		return maskHalf(dtype.Float16ToFloat32, mx), nil
	case dtype.BFloat16:
		return maskHalf(dtype.BFloat16ToFloat32, mx), nil
	}
	return nil, fmt.Errorf("unsupported dtype %v", dt)
}

// selectBits writes out[i] = m[i] ? x[i] : y[i] as raw bits (operands io, ix, iy).
func selectBits[B rawBits](m []bool, s *seg, io, ix, iy int) {
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
func routeBits[B rawBits](m []bool, s *seg) {
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
	sel   func(m []bool, s *seg, io, ix, iy int)
	route func(m []bool, s *seg)
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

// maskedKernel builds the per-segment function of a selection kernel over
// nops operands: fast, if not nil, may handle a prefix of each segment first
// (a SIMD path) and returns how many elements it did; the rest gets a scratch
// mask from mf (a at operand ia, b at ib) and k applies it.
func maskedKernel(nops int, mf maskFunc, ia, ib int, fast func(*seg) int, k func(m []bool, s *seg)) func(*seg) {
	return func(s *seg) {
		if fast != nil {
			done := fast(s)
			if done == s.n {
				return
			}
			if done > 0 {
				rest := s.advance(done, nops)
				s = &rest
			}
		}
		buf := maskBufs.Get().(*[maxSeg]bool)
		mf(buf[:s.n], s, ia, ib)
		k(buf[:s.n], s)
		maskBufs.Put(buf)
	}
}

// Selection kernels are built once per (op, compared dtype, value dtype) at
// init, so an op call allocates no closures.
var (
	selectKernels [2][16]func(*seg)     // [maximum][dtype]: minimum/maximum forward
	routeKernels  [2][16][16]func(*seg) // [maximum][compared dtype][gradient dtype]
)

func init() {
	for mxi, op := range []backend.BinaryOp{backend.Minimum, backend.Maximum} {
		for _, cd := range dtype.All() {
			selectKernels[mxi][cd] = buildSelect(op, cd)
			for _, gd := range dtype.All() {
				routeKernels[mxi][cd][gd] = buildRoute(op, cd, gd)
			}
		}
	}
}

func buildSelect(op backend.BinaryOp, dt dtype.Dtype) func(*seg) {
	mf, err := mask(dt, op)
	if err != nil {
		return nil
	}
	sel := bitsFor(dt).sel
	var fast func(*seg) int
	mx := op == backend.Maximum
	if sz := simdSize(dt); sz != 0 {
		fast = func(s *seg) int { return simdSelect(s, sz, mx, 0, 1, 2) }
	} else if lim := halfNaNLimit(dt); lim != 0 {
		fast = func(s *seg) int { return simdSelectHalf(s, lim, mx, 0, 1, 2) }
	}
	return maskedKernel(3, mf, 1, 2, fast, func(m []bool, s *seg) { sel(m, s, 0, 1, 2) })
}

func buildRoute(op backend.BinaryOp, cd, gd dtype.Dtype) func(*seg) {
	mf, err := mask(cd, op)
	if err != nil {
		return nil
	}
	var fast func(*seg) int
	mx := op == backend.Maximum
	if sz := simdSize(gd); sz != 0 && cd == gd {
		fast = func(s *seg) int { return simdRoute(s, sz, mx) }
	} else if lim := halfNaNLimit(gd); lim != 0 && cd == gd {
		fast = func(s *seg) int { return simdRouteHalf(s, lim, mx) }
	}
	return maskedKernel(5, mf, 2, 3, fast, bitsFor(gd).route)
}

func mxIndex(op backend.BinaryOp) int {
	if op == backend.Maximum {
		return 1
	}
	return 0
}

// maskBufs recycles mask scratch: it escapes to the heap (it is passed to
// function values), and allocating it per segment would cost more than the
// work on a small tensor.
var maskBufs = sync.Pool{New: func() any { return new([maxSeg]bool) }}

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
func (b *Backend) Route(op backend.BinaryOp, ga, gb, a, bb, g *tensor.Tensor) error {
	if err := backend.CheckSameShape(g, ga, gb, a, bb); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(a, bb); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(g, ga, gb); err != nil {
		return err
	}
	if !op.IsMinMax() {
		return fmt.Errorf("selection needs minimum or maximum, got %v", op)
	}
	k := routeKernels[mxIndex(op)][a.Dtype()][g.Dtype()]
	if k == nil {
		return fmt.Errorf("unsupported dtype %v", a.Dtype())
	}
	b.elementwise(k, ga, gb, a, bb, g)
	return nil
}

// Select implements backend.IBackend.
func (b *Backend) Select(op backend.BinaryOp, out, a, bb, x, y *tensor.Tensor) error {
	if err := backend.CheckSameShape(out, a, bb, x, y); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(a, bb); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(out, x, y); err != nil {
		return err
	}
	mf, err := mask(a.Dtype(), op)
	if err != nil {
		return err
	}
	sel := bitsFor(out.Dtype()).sel
	b.elementwise(maskedKernel(5, mf, 1, 2, nil, func(m []bool, s *seg) { sel(m, s, 0, 3, 4) }), out, a, bb, x, y)
	return nil
}

// ---- arithmetic ----

func arith[T native](op backend.BinaryOp) func(*seg) {
	return func(s *seg) {
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

// viaFloat32 runs a float32 kernel over float16/bfloat16 operands (operand 0
// is the output, 1..nin the inputs) by widening into scratch buffers.
func viaFloat32(c halfCodec, nin int, k func(*seg)) func(*seg) {
	return func(s *seg) {
		var bufs [3][maxSeg]float32
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
		k(&t)
		for i := 0; i < s.n; i++ {
			*(*uint16)(s.at(0, i)) = c.narrow(bufs[0][i])
		}
	}
}

// arithFor returns the arithmetic kernel for dt (bool results normalised to 0/1).
func arithFor(op backend.BinaryOp, dt dtype.Dtype) (func(*seg), error) {
	if op == backend.Div && !dt.IsFloat() {
		return nil, fmt.Errorf("div kernel needs a floating dtype, got %v", dt)
	}
	switch dt {
	case dtype.Bool:
		return normaliseBool(arith[uint8](op)), nil
	case dtype.Uint8:
		return arith[uint8](op), nil
	case dtype.Int8:
		return arith[int8](op), nil
	case dtype.Int16:
		return arith[int16](op), nil
	case dtype.Int32:
		return arith[int32](op), nil
	case dtype.Int64:
		return arith[int64](op), nil
	case dtype.Float32:
		return arith[float32](op), nil
	case dtype.Float64:
		return arith[float64](op), nil
	}
	if c, ok := codecFor(dt); ok {
		return viaFloat32(c, 2, arith[float32](op)), nil
	}
	return nil, fmt.Errorf("unsupported dtype %v", dt)
}

func normaliseBool(k func(*seg)) func(*seg) {
	return func(s *seg) {
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
	if op.IsMinMax() {
		k := selectKernels[mxIndex(op)][a.Dtype()]
		if k == nil {
			return fmt.Errorf("unsupported dtype %v", a.Dtype())
		}
		b.elementwise(k, out, a, bb)
		return nil
	}
	if op > backend.Div {
		return fmt.Errorf("unknown binary op %v", op)
	}
	k, err := arithFor(op, out.Dtype())
	if err != nil {
		return err
	}
	b.elementwise(k, out, a, bb)
	return nil
}

func neg[T native](s *seg) {
	for i := 0; i < s.n; i++ {
		*(*T)(s.at(0, i)) = -*(*T)(s.at(1, i))
	}
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
	var k func(*seg)
	switch out.Dtype() {
	case dtype.Bool:
		k = normaliseBool(neg[uint8])
	case dtype.Uint8:
		k = neg[uint8]
	case dtype.Int8:
		k = neg[int8]
	case dtype.Int16:
		k = neg[int16]
	case dtype.Int32:
		k = neg[int32]
	case dtype.Int64:
		k = neg[int64]
	case dtype.Float32:
		k = neg[float32]
	case dtype.Float64:
		k = neg[float64]
	default:
		c, ok := codecFor(out.Dtype())
		if !ok {
			return fmt.Errorf("unsupported dtype %v", out.Dtype())
		}
		k = viaFloat32(c, 1, neg[float32])
	}
	b.elementwise(k, out, a)
	return nil
}

// ---- casts ----

func castNative[S, D native](s *seg) {
	for i := 0; i < s.n; i++ {
		*(*D)(s.at(0, i)) = D(*(*S)(s.at(1, i)))
	}
}

// castElem converts one element by the shared definition in package tensor.
func castElem(od, id dtype.Dtype) func(*seg) {
	return func(s *seg) {
		for i := 0; i < s.n; i++ {
			if id.IsFloat() {
				tensor.StoreFloat64(od, s.at(0, i), tensor.LoadFloat64(id, s.at(1, i)))
			} else {
				tensor.StoreInt64(od, s.at(0, i), tensor.LoadInt64(id, s.at(1, i)))
			}
		}
	}
}

func castKernel(od, id dtype.Dtype) func(*seg) {
	switch {
	case od == id:
		return bitsCopy(od)
	case od == dtype.Float32 && id == dtype.Float64:
		return castNative[float64, float32]
	case od == dtype.Float64 && id == dtype.Float32:
		return castNative[float32, float64]
	case od == dtype.Float32:
		if c, ok := codecFor(id); ok {
			return func(s *seg) {
				for i := 0; i < s.n; i++ {
					*(*float32)(s.at(0, i)) = c.widen(*(*uint16)(s.at(1, i)))
				}
			}
		}
	case id == dtype.Float32:
		if c, ok := codecFor(od); ok {
			return func(s *seg) {
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

func copyBits[B rawBits](s *seg) {
	for i := 0; i < s.n; i++ {
		*(*B)(s.at(0, i)) = *(*B)(s.at(1, i))
	}
}

func bitsCopy(dt dtype.Dtype) func(*seg) {
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
	b.elementwise(castKernel(out.Dtype(), a.Dtype()), out, a)
	return nil
}

// ---- sum ----

type accum interface{ ~float32 | ~float64 | ~int64 }

// blockSum sums flat indices [start, end) of ops (one operand) in the
// canonical lane order.
func blockSum[A accum](ops *operands, start, end int, load func(unsafe.Pointer) A, nz A,
	fast func(*[backend.SumLanes]A, unsafe.Pointer, int) int) A {
	var lanes [backend.SumLanes]A
	for j := range lanes {
		lanes[j] = nz
	}
	k := 0
	sz := ops.sizes[0]
	ops.segments(start, end, func(s *seg) {
		i := 0
		if fast != nil && s.s[0] == sz && k%backend.SumLanes == 0 {
			i = fast(&lanes, s.p[0], s.n)
			k += i
		}
		for ; i < s.n; i++ {
			lanes[k%backend.SumLanes] += load(s.at(0, i))
			k++
		}
	})
	return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
}

func loadAs[T native, A accum](p unsafe.Pointer) A { return A(*(*T)(p)) }

func sumAll[A accum](b *Backend, out, a *tensor.Tensor, load func(unsafe.Pointer) A, nz A, store func(unsafe.Pointer, A),
	fast func(*[backend.SumLanes]A, unsafe.Pointer, int) int) {
	// Reorder a's dims: kept dims first, reduced dims last, so each output's
	// elements are one contiguous range of the plan in row-major order.
	red := backend.ReducedDims(out, a)
	var perm []int
	for d, r := range red {
		if !r {
			perm = append(perm, d)
		}
	}
	for d, r := range red {
		if r {
			perm = append(perm, d)
		}
	}
	pa, _ := a.Permute(perm...)
	nOut := out.Numel()
	if nOut == 0 {
		return
	}
	r := a.Numel() / nOut
	if a.Numel() == 0 {
		r = 0
	}
	ops := newOperands(pa)
	nb := (r + backend.SumBlock - 1) / backend.SumBlock
	partial := make([]A, nOut*nb)
	const unitsPerTask = 32
	tasks := (len(partial) + unitsPerTask - 1) / unitsPerTask
	run := b.parallel
	if a.Numel() < MinParallel {
		run = sequential
	}
	run(tasks, func(t int) {
		for u := t * unitsPerTask; u < min(len(partial), (t+1)*unitsPerTask); u++ {
			o, blk := u/max(nb, 1), u%max(nb, 1)
			start := o*r + blk*backend.SumBlock
			partial[u] = blockSum(&ops, start, min(start+backend.SumBlock, (o+1)*r), load, nz, fast)
		}
	})
	// out is contiguous and fresh: write its elements in row-major order.
	osz := out.Dtype().Size()
	for o := 0; o < nOut; o++ {
		total := nz
		if r == 0 {
			total = 0
		}
		for blk := 0; blk < nb; blk++ {
			total += partial[o*nb+blk]
		}
		store(unsafe.Add(out.DataPointer(), o*osz), total)
	}
	runtime.KeepAlive(a) // read through raw pointers above (see elementwise)
	runtime.KeepAlive(pa)
	runtime.KeepAlive(out)
}

// Sum implements backend.IBackend.
func (b *Backend) Sum(out, a *tensor.Tensor) error {
	if err := backend.CheckSumShape(out, a); err != nil {
		return err
	}
	if !out.IsContiguous() {
		return fmt.Errorf("sum output must be contiguous")
	}
	dt, odt := a.Dtype(), out.Dtype()
	storeF32 := func(p unsafe.Pointer, v float32) { tensor.StoreFloat64(odt, p, float64(v)) }
	storeF64 := func(p unsafe.Pointer, v float64) { tensor.StoreFloat64(odt, p, v) }
	storeI64 := func(p unsafe.Pointer, v int64) { tensor.StoreInt64(odt, p, v) }
	nz32, nz64 := float32(math.Copysign(0, -1)), math.Copysign(0, -1)
	switch dt {
	case dtype.Float32:
		sumAll(b, out, a, loadAs[float32, float32], nz32, storeF32, simdLanes32)
	case dtype.Float16, dtype.BFloat16:
		c, _ := codecFor(dt)
		fast := simdLanesF16
		if dt == dtype.BFloat16 {
			fast = simdLanesBF16
		}
		sumAll(b, out, a, func(p unsafe.Pointer) float32 { return c.widen(*(*uint16)(p)) }, nz32, storeF32, fast)
	case dtype.Float64:
		sumAll(b, out, a, loadAs[float64, float64], nz64, storeF64, simdLanes64)
	case dtype.Bool, dtype.Uint8:
		sumAll(b, out, a, loadAs[uint8, int64], 0, storeI64, nil)
	case dtype.Int8:
		sumAll(b, out, a, loadAs[int8, int64], 0, storeI64, nil)
	case dtype.Int16:
		sumAll(b, out, a, loadAs[int16, int64], 0, storeI64, nil)
	case dtype.Int32:
		sumAll(b, out, a, loadAs[int32, int64], 0, storeI64, nil)
	case dtype.Int64:
		sumAll(b, out, a, loadAs[int64, int64], 0, storeI64, nil)
	default:
		return fmt.Errorf("unsupported dtype %v", dt)
	}
	return nil
}
