package cpu

import (
	"fmt"
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
)

// buildSelectionTables fills the selection tables, every rule's rows (at
// init, arith.go: the binary table takes the selections' kernels).
func buildSelectionTables() {
	buildSelection[ruleMin]()
	buildSelection[ruleMax]()
	buildSelection[ruleFMin]()
	buildSelection[ruleFMax]()
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
	if cd == dtype.Bool && ruleOf[R]() == backend.RuleMin {
		fast = routeByMaskFor(gd)
	} else if sz := simdSize(gd); sz != 0 && cd == gd {
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
	var fast func(seg) int
	if vd == dtype.Bool {
		sz := simdSize(cd)
		fast = func(s seg) int { return maskInto[R](mf, s, sz) }
	}
	return maskedKernel(5, mf, 1, 2, fast, func(m []bool, s seg) { sel(m, s, 0, 3, 4) })
}

// maskInto is Select's fast path for a winner mask (ops.Winners): with x
// the constant true and y the constant false, a contiguous bool out is the
// mask itself, written by the comparison directly. Elements done: s.n, or
// 0 where the operands are not of that form. Compared dtypes of size sz
// (float32, float64; 0: none) take the SIMD path first.
func maskInto[R rule](mf maskFunc, s seg, sz int) int {
	if s.s[0] != 1 || s.s[3] != 0 || s.s[4] != 0 || *(*uint8)(s.p[3]) != 1 || *(*uint8)(s.p[4]) != 0 {
		return 0
	}
	done := 0
	if sz != 0 {
		if done = simdMaskInto[R](&s, sz); done == s.n {
			return done
		}
		if done > 0 {
			s = s.advance(done, 5)
		}
	}
	mf(unsafe.Slice((*bool)(s.p[0]), s.n), s, 1, 2)
	return done + s.n
}

// routeByMaskFor is Route's fast path when the compared operands are a bool
// mask a and the constant false b under RuleMin (ops.WinnersVJP: a wins
// exactly where the mask is false): out 0 gets g where the mask is false,
// out 1 where it is true, +0 elsewhere, by g's bits.
func routeByMaskFor(gd dtype.Dtype) func(seg) int {
	switch gd.Size() {
	case 2:
		return routeByMask[uint16]
	case 4:
		return routeByMask[uint32]
	case 8:
		return routeByMask[uint64]
	}
	return nil
}

func routeByMask[B uint16 | uint32 | uint64](s seg) int {
	sz := int(unsafe.Sizeof(B(0)))
	if s.s[0] != sz || s.s[1] != sz || s.s[2] != 1 || s.s[3] != 0 || *(*uint8)(s.p[3]) != 0 ||
		(s.s[4] != sz && s.s[4] != 0) {
		return 0
	}
	o0, o1 := unsafe.Slice((*B)(s.p[0]), s.n), unsafe.Slice((*B)(s.p[1]), s.n)
	m := unsafe.Slice((*uint8)(s.p[2]), s.n)
	if s.s[4] == 0 { // a broadcast g (the ones of sum().backward())
		gv := *(*B)(s.p[4])
		for i := range o0 {
			k := B(0) - B(m[i]&1) // all ones where the mask is set
			o0[i], o1[i] = gv&^k, gv&k
		}
		return s.n
	}
	g := unsafe.Slice((*B)(s.p[4]), s.n)
	for i := range o0 {
		k := B(0) - B(m[i]&1)
		o0[i], o1[i] = g[i]&^k, g[i]&k
	}
	return s.n
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
