//go:build goexperiment.simd && amd64

package cpu

import (
	"math"
	"simd/archsimd"
	"unsafe"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
)

// SIMD fast paths (Go's simd/archsimd, AVX2) for float32 and float64, and
// the selection paths for float16 and bfloat16. Each returns how many
// elements it handled: the selection paths do a whole segment (scalar tail
// included, by the scalar rule wins) when they handle its layout and 0 when
// not, and the caller falls back to the generic kernels for the rest. Raw
// VMINPS is not the selection rule of docs/semantics.md (it returns the
// second operand on NaN and on ±0 ties), so selection is built from
// comparisons, one predicate per vector type: wins32, wins64 and takesHalf,
// generic over the rule type R like the scalar wins (rule.go).
//
// Every path that touched a 256-bit register clears the upper halves
// (archsimd.ClearAVXUpperBits, VZEROUPPER) before it returns, and the
// selection paths before their scalar tails: the Go code
// after it copies structs with legacy SSE moves, and each of those waits on
// the dirty upper halves. Measured on the 65,536-element float32 minimum cut
// into 32 segments, it took 16.2 us without and 10.4 us with (the kernel
// alone over the whole range: 10.3 us). Hot loops call only intrinsics or
// put an inlined call on the line of an intrinsic: an inlined call with no
// instruction on its own line leaves a NOP behind, and sixteen NOPs a round
// doubled the in-L1 time of the four-vector loop in a C copy of it.

var haveAVX2 = archsimd.X86.AVX2()

// SIMDEnabled reports whether the SIMD fast paths are compiled in and usable.
func SIMDEnabled() bool { return haveAVX2 }

// SIMDCompiled reports whether the SIMD fast paths are compiled in (they
// run where SIMDEnabled says the CPU has AVX2).
func SIMDCompiled() bool { return true }

// unit reports how an operand of element size sz advances: 1 contiguous,
// 0 broadcast, -1 anything else.
func unit(stride, sz int) int {
	switch stride {
	case sz:
		return 1
	case 0:
		return 0
	}
	return -1
}

// elems views an operand's n elements (one when it is broadcast, u == 0).
func elems[T any](p unsafe.Pointer, n, u int) []T {
	if u == 0 {
		n = 1
	}
	return unsafe.Slice((*T)(p), n)
}

func load32(s []float32, i, u int) archsimd.Float32x8 {
	if u == 0 {
		return archsimd.BroadcastFloat32x8(s[0])
	}
	return archsimd.LoadFloat32x8Slice(s[i:])
}

func load64(s []float64, i, u int) archsimd.Float64x4 {
	if u == 0 {
		return archsimd.BroadcastFloat64x4(s[0])
	}
	return archsimd.LoadFloat64x4Slice(s[i:])
}

// wins32 is the rule R on 8 float32 pairs: the mask of a winning (a <= b,
// or >= for a maximum; or a NaN, or for fmin/fmax b NaN). Two compares and
// an or: a NaN fails the ordered compare and wins, or loses, by the second.
func wins32[R rule](x, y archsimd.Float32x8) archsimd.Mask32x8 {
	var k R // the rule is the length of its type: a constant (rule.go)
	r := backend.Rule(len(k))
	var better archsimd.Mask32x8
	if r.Greater() {
		better = x.GreaterEqual(y)
	} else {
		better = x.LessEqual(y)
	}
	if r.IgnoresNaN() {
		return better.Or(y.IsNaN())
	}
	return better.Or(x.IsNaN())
}

// wins64 is wins32 on 4 float64 pairs.
func wins64[R rule](x, y archsimd.Float64x4) archsimd.Mask64x4 {
	var k R // the rule is the length of its type: a constant (rule.go)
	r := backend.Rule(len(k))
	var better archsimd.Mask64x4
	if r.Greater() {
		better = x.GreaterEqual(y)
	} else {
		better = x.LessEqual(y)
	}
	if r.IgnoresNaN() {
		return better.Or(y.IsNaN())
	}
	return better.Or(x.IsNaN())
}

// simdSelect handles the forward selection of rule R over segment operands
// (out=io, a=ia, b=ib) of dtype float32 (sz 4) or float64 (sz 8), with a
// contiguous output and contiguous or broadcast inputs, tail included (so
// such a segment needs no mask scratch); other layouts return 0.
func simdSelect[R rule](s *seg, sz int, io, ia, ib int) (done int) {
	if !haveAVX2 || s.s[io] != sz {
		return 0
	}
	ua, ub := unit(s.s[ia], sz), unit(s.s[ib], sz)
	if ua < 0 || ub < 0 {
		return 0
	}
	n := s.n
	if n*sz < 32 { // less than one vector: the scalar tail alone (the 1-element ops)
		if sz == 4 {
			selectTail[R, float32, uint32](s, 0, io, ia, ib)
		} else {
			selectTail[R, float64, uint64](s, 0, io, ia, ib)
		}
		return n
	}
	if sz == 4 {
		o, a, b := elems[float32](s.p[io], n, 1), elems[float32](s.p[ia], n, ua), elems[float32](s.p[ib], n, ub)
		i := 0
		if ua == 1 && ub == 1 { // the common case, with direct loads
			// Moving pointers instead of slicing: no bounds checks, and no
			// address arithmetic per load (i+32 <= n and all three hold n
			// elements, so each pointer stays inside its operand).
			pa, pb, po := s.p[ia], s.p[ib], s.p[io]
			// Four vectors a round, all loaded before any is stored: an
			// output lying just past its inputs modulo 4 KiB (NumPy's
			// arrays often do) stalls loads behind stores they seem to
			// alias less so, 8-15% faster than two vectors at every
			// alignment measured (the loads are of elements not yet
			// written, so an output that is an input, the one overlap
			// allowed, reads what it would anyway).
			for ; i+32 <= n; i += 32 {
				x0, y0 := archsimd.LoadFloat32x8((*[8]float32)(pa)), archsimd.LoadFloat32x8((*[8]float32)(pb))
				x1, y1 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 32))), archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pb, 32)))
				x2, y2 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 64))), archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pb, 64)))
				x3, y3 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 96))), archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pb, 96)))
				x0.Merge(y0, wins32[R](x0, y0)).Store((*[8]float32)(po))
				x1.Merge(y1, wins32[R](x1, y1)).Store((*[8]float32)(unsafe.Add(po, 32)))
				x2.Merge(y2, wins32[R](x2, y2)).Store((*[8]float32)(unsafe.Add(po, 64)))
				x3.Merge(y3, wins32[R](x3, y3)).Store((*[8]float32)(unsafe.Add(po, 96)))
				if i+64 <= n {
					pa, pb, po = unsafe.Add(pa, 128), unsafe.Add(pb, 128), unsafe.Add(po, 128)
				}
			}
			for ; i+8 <= n; i += 8 {
				x := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(s.p[ia], 4*i)))
				y := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(s.p[ib], 4*i)))
				x.Merge(y, wins32[R](x, y)).Store((*[8]float32)(unsafe.Add(s.p[io], 4*i)))
			}
		} else {
			for ; i+8 <= n; i += 8 {
				x, y := load32(a, i, ua), load32(b, i, ub)
				x.Merge(y, wins32[R](x, y)).StoreSlice(o[i:])
			}
		}
		archsimd.ClearAVXUpperBits()
		selectTail[R, float32, uint32](s, n&^7, io, ia, ib) // i == n&^7: the loops stop at the last whole vector
		return n
	}
	o, a, b := elems[float64](s.p[io], n, 1), elems[float64](s.p[ia], n, ua), elems[float64](s.p[ib], n, ub)
	i := 0
	if ua == 1 && ub == 1 { // as for float32 above
		pa, pb, po := s.p[ia], s.p[ib], s.p[io]
		for ; i+16 <= n; i += 16 { // four vectors a round, as for float32
			x0, y0 := archsimd.LoadFloat64x4((*[4]float64)(pa)), archsimd.LoadFloat64x4((*[4]float64)(pb))
			x1, y1 := archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(pa, 32))), archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(pb, 32)))
			x2, y2 := archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(pa, 64))), archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(pb, 64)))
			x3, y3 := archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(pa, 96))), archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(pb, 96)))
			x0.Merge(y0, wins64[R](x0, y0)).Store((*[4]float64)(po))
			x1.Merge(y1, wins64[R](x1, y1)).Store((*[4]float64)(unsafe.Add(po, 32)))
			x2.Merge(y2, wins64[R](x2, y2)).Store((*[4]float64)(unsafe.Add(po, 64)))
			x3.Merge(y3, wins64[R](x3, y3)).Store((*[4]float64)(unsafe.Add(po, 96)))
			if i+32 <= n {
				pa, pb, po = unsafe.Add(pa, 128), unsafe.Add(pb, 128), unsafe.Add(po, 128)
			}
		}
		for ; i+4 <= n; i += 4 {
			x := archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(s.p[ia], 8*i)))
			y := archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(s.p[ib], 8*i)))
			x.Merge(y, wins64[R](x, y)).Store((*[4]float64)(unsafe.Add(s.p[io], 8*i)))
		}
	} else {
		for ; i+4 <= n; i += 4 {
			x, y := load64(a, i, ua), load64(b, i, ub)
			x.Merge(y, wins64[R](x, y)).StoreSlice(o[i:])
		}
	}
	archsimd.ClearAVXUpperBits()
	selectTail[R, float64, uint64](s, n&^3, io, ia, ib)
	return n
}

// selectTail finishes a SIMD selection from element i: the winner's bits
// (B, the same size as T) go to the output.
func selectTail[R rule, T float32 | float64, B uint32 | uint64](s *seg, i int, io, ia, ib int) {
	for ; i < s.n; i++ {
		src := s.at(ia, i)
		if p := s.at(ib, i); !wins[R](*(*T)(src), *(*T)(p)) {
			src = p
		}
		*(*B)(s.at(io, i)) = *(*B)(src)
	}
}

// routeTail finishes a SIMD route from element i (operands ga=0, gb=1, a=2,
// b=3, g=4; B the same size as T).
func routeTail[R rule, T float32 | float64, B uint32 | uint64](s *seg, i int) {
	for ; i < s.n; i++ {
		g := *(*B)(s.at(4, i))
		if wins[R](*(*T)(s.at(2, i)), *(*T)(s.at(3, i))) {
			*(*B)(s.at(0, i)), *(*B)(s.at(1, i)) = g, 0
		} else {
			*(*B)(s.at(0, i)), *(*B)(s.at(1, i)) = 0, g
		}
	}
}

// simdRoute handles the fused backward of a selection by rule R: ga
// (operand 0) gets g (operand 4) where a (2) wins, gb (1) the rest; a, b and
// g share the dtype. Contiguous ga and gb and contiguous or broadcast a, b,
// g: the whole segment, tail included; other layouts return 0.
func simdRoute[R rule](s *seg, sz int) (done int) {
	if !haveAVX2 || s.s[0] != sz || s.s[1] != sz {
		return 0
	}
	ua, ub, ug := unit(s.s[2], sz), unit(s.s[3], sz), unit(s.s[4], sz)
	if ua < 0 || ub < 0 || ug < 0 {
		return 0
	}
	n := s.n
	if sz == 4 {
		ga, gb := elems[float32](s.p[0], n, 1), elems[float32](s.p[1], n, 1)
		a, b, g := elems[float32](s.p[2], n, ua), elems[float32](s.p[3], n, ub), elems[float32](s.p[4], n, ug)
		var zero archsimd.Float32x8
		i := 0
		if ua == 1 && ub == 1 { // upstream contiguous, or one value for all (sum's backward)
			// Pointer steps: no bounds checks in the loop (see simdSelect).
			pa, pb, pg, pga, pgb := s.p[2], s.p[3], s.p[4], s.p[0], s.p[1]
			gstep := 4 * ug
			for ; i+8 <= n; i += 8 {
				x := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 4*i)))
				y := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pb, 4*i)))
				var gv archsimd.Float32x8
				if ug == 0 {
					gv = archsimd.BroadcastFloat32x8(*(*float32)(pg))
				} else {
					gv = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pg, gstep*i)))
				}
				aw := wins32[R](x, y)
				gv.Masked(aw).Store((*[8]float32)(unsafe.Add(pga, 4*i)))
				zero.Merge(gv, aw).Store((*[8]float32)(unsafe.Add(pgb, 4*i)))
			}
		} else {
			for ; i+8 <= n; i += 8 {
				x, y, gv := load32(a, i, ua), load32(b, i, ub), load32(g, i, ug)
				aw := wins32[R](x, y)
				gv.Masked(aw).StoreSlice(ga[i:])
				zero.Merge(gv, aw).StoreSlice(gb[i:])
			}
		}
		archsimd.ClearAVXUpperBits()
		routeTail[R, float32, uint32](s, n&^7) // i == n&^7 (see simdSelect)
		return n
	}
	ga, gb := elems[float64](s.p[0], n, 1), elems[float64](s.p[1], n, 1)
	a, b, g := elems[float64](s.p[2], n, ua), elems[float64](s.p[3], n, ub), elems[float64](s.p[4], n, ug)
	var zero archsimd.Float64x4
	i := 0
	if ua == 1 && ub == 1 {
		pa, pb, pg, pga, pgb := s.p[2], s.p[3], s.p[4], s.p[0], s.p[1]
		gstep := 8 * ug
		for ; i+4 <= n; i += 4 {
			x := archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(pa, 8*i)))
			y := archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(pb, 8*i)))
			var gv archsimd.Float64x4
			if ug == 0 {
				gv = archsimd.BroadcastFloat64x4(*(*float64)(pg))
			} else {
				gv = archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(pg, gstep*i)))
			}
			aw := wins64[R](x, y)
			gv.Masked(aw).Store((*[4]float64)(unsafe.Add(pga, 8*i)))
			zero.Merge(gv, aw).Store((*[4]float64)(unsafe.Add(pgb, 8*i)))
		}
	} else {
		for ; i+4 <= n; i += 4 {
			x, y, gv := load64(a, i, ua), load64(b, i, ub), load64(g, i, ug)
			aw := wins64[R](x, y)
			gv.Masked(aw).StoreSlice(ga[i:])
			zero.Merge(gv, aw).StoreSlice(gb[i:])
		}
	}
	archsimd.ClearAVXUpperBits()
	routeTail[R, float64, uint64](s, n&^3)
	return n
}

// simdLanes32 adds n contiguous float32s at p to the 8 summation lanes,
// element k going to lane k mod 8 — exactly the canonical order, since a
// vector accumulator's lane j sees elements j, j+8, j+16, ….
func simdLanes32(lanes *[8]float32, p unsafe.Pointer, n int) (done int) {
	if !haveAVX2 {
		return 0
	}
	x := unsafe.Slice((*float32)(p), n)
	acc := archsimd.LoadFloat32x8(lanes)
	i := 0
	for ; i+8 <= n; i += 8 {
		acc = acc.Add(archsimd.LoadFloat32x8Slice(x[i:]))
	}
	acc.Store(lanes)
	archsimd.ClearAVXUpperBits()
	return i
}

// simdLanes64 is simdLanes32 for float64: lanes 0–3 and 4–7 in two vectors.
func simdLanes64(lanes *[8]float64, p unsafe.Pointer, n int) (done int) {
	if !haveAVX2 {
		return 0
	}
	x := unsafe.Slice((*float64)(p), n)
	lo := archsimd.LoadFloat64x4((*[4]float64)(lanes[0:4]))
	hi := archsimd.LoadFloat64x4((*[4]float64)(lanes[4:8]))
	i := 0
	for ; i+8 <= n; i += 8 {
		lo = lo.Add(archsimd.LoadFloat64x4Slice(x[i:]))
		hi = hi.Add(archsimd.LoadFloat64x4Slice(x[i+4:]))
	}
	lo.Store((*[4]float64)(lanes[0:4]))
	hi.Store((*[4]float64)(lanes[4:8]))
	archsimd.ClearAVXUpperBits()
	return i
}

// ---- float16 and bfloat16 ----
//
// Selection needs no conversion: with m = bits & 0x7fff, the int16 key
// (sign ? -m : m) orders half values like the numbers they encode, with
// -0 and +0 equal; m > lim (0x7c00 for float16, 0x7f80 for bfloat16) is NaN.

func halfKeys(x archsimd.Int16x16) (key, mag archsimd.Int16x16) {
	mag = x.And(archsimd.BroadcastInt16x16(0x7fff))
	s := x.ShiftAllRight(15) // 0 or -1
	return mag.Xor(s).Sub(s), mag
}

// takesHalf is the rule R on 16 half-precision pairs, as the complement of
// wins (AVX2 compares integers only with >, and masks have no not): the
// mask of b taking a's place. Under min/max that is: a is not NaN, and b is
// strictly better or NaN; under fmin/fmax: b is not NaN, and b is strictly
// better or a is NaN. The keys of NaNs order arbitrarily, but never decide.
func takesHalf[R rule](xa, xb, lim archsimd.Int16x16) archsimd.Mask16x16 {
	var k R // the rule is the length of its type: a constant (rule.go)
	r := backend.Rule(len(k))
	ka, ma := halfKeys(xa)
	kb, mb := halfKeys(xb)
	strict := ka.Greater(kb)
	if r.Greater() {
		strict = kb.Greater(ka)
	}
	nanWins, other := ma, mb // the operand whose NaN wins, and the other
	if r.IgnoresNaN() {
		nanWins, other = mb, ma
	}
	notNaN := lim.Add(archsimd.BroadcastInt16x16(1)).Greater(nanWins)
	return notNaN.And(strict.Or(other.Greater(lim)))
}

func load16(s []int16, i, u int) archsimd.Int16x16 {
	if u == 0 {
		return archsimd.BroadcastInt16x16(s[0])
	}
	return archsimd.LoadInt16x16Slice(s[i:])
}

// simdSelectHalf is simdSelect for float16/bfloat16 (dt).
func simdSelectHalf[R rule](s *seg, dt dtype.Dtype, io, ia, ib int) (done int) {
	if !haveAVX2 || s.s[io] != 2 {
		return 0
	}
	ua, ub := unit(s.s[ia], 2), unit(s.s[ib], 2)
	if ua < 0 || ub < 0 {
		return 0
	}
	n := s.n
	o, a, b := elems[int16](s.p[io], n, 1), elems[int16](s.p[ia], n, ua), elems[int16](s.p[ib], n, ub)
	l := archsimd.BroadcastInt16x16(halfNaNLimit(dt))
	i := 0
	if ua == 1 && ub == 1 {
		for ; i+16 <= n; i += 16 {
			x, y := archsimd.LoadInt16x16(vec16(a, i)), archsimd.LoadInt16x16(vec16(b, i))
			y.Merge(x, takesHalf[R](x, y, l)).Store(vec16(o, i))
		}
	} else {
		for ; i+16 <= n; i += 16 {
			x, y := load16(a, i, ua), load16(b, i, ub)
			y.Merge(x, takesHalf[R](x, y, l)).StoreSlice(o[i:])
		}
	}
	bf := dt == dtype.BFloat16
	for ; i < n; i++ { // the tail, one element at a time
		src := s.at(ia, i)
		if p := s.at(ib, i); !wins[R](widenHalf(*(*uint16)(src), bf), widenHalf(*(*uint16)(p), bf)) {
			src = p
		}
		*(*int16)(s.at(io, i)) = *(*int16)(src)
	}
	archsimd.ClearAVXUpperBits()
	return n
}

func vec16(s []int16, i int) *[16]int16 { return (*[16]int16)(s[i : i+16]) }

// simdRouteHalf is simdRoute for float16/bfloat16 (dt).
func simdRouteHalf[R rule](s *seg, dt dtype.Dtype) (done int) {
	if !haveAVX2 || s.s[0] != 2 || s.s[1] != 2 {
		return 0
	}
	ua, ub, ug := unit(s.s[2], 2), unit(s.s[3], 2), unit(s.s[4], 2)
	if ua < 0 || ub < 0 || ug < 0 {
		return 0
	}
	n := s.n
	ga, gb := elems[int16](s.p[0], n, 1), elems[int16](s.p[1], n, 1)
	a, b, g := elems[int16](s.p[2], n, ua), elems[int16](s.p[3], n, ub), elems[int16](s.p[4], n, ug)
	l := archsimd.BroadcastInt16x16(halfNaNLimit(dt))
	var zero archsimd.Int16x16
	i := 0
	if ua == 1 && ub == 1 {
		for ; i+16 <= n; i += 16 {
			x, y, gv := archsimd.LoadInt16x16(vec16(a, i)), archsimd.LoadInt16x16(vec16(b, i)), load16(g, i, ug)
			bw := takesHalf[R](x, y, l)
			zero.Merge(gv, bw).Store(vec16(ga, i))
			gv.Merge(zero, bw).Store(vec16(gb, i))
		}
	} else {
		for ; i+16 <= n; i += 16 {
			x, y, gv := load16(a, i, ua), load16(b, i, ub), load16(g, i, ug)
			bw := takesHalf[R](x, y, l)
			zero.Merge(gv, bw).StoreSlice(ga[i:])
			gv.Merge(zero, bw).StoreSlice(gb[i:])
		}
	}
	bf := dt == dtype.BFloat16
	for ; i < n; i++ { // the tail, one element at a time
		gv := *(*int16)(s.at(4, i))
		if wins[R](widenHalf(*(*uint16)(s.at(2, i)), bf), widenHalf(*(*uint16)(s.at(3, i)), bf)) {
			*(*int16)(s.at(0, i)), *(*int16)(s.at(1, i)) = gv, 0
		} else {
			*(*int16)(s.at(0, i)), *(*int16)(s.at(1, i)) = 0, gv
		}
	}
	archsimd.ClearAVXUpperBits()
	return n
}

var (
	two112    = archsimd.BroadcastFloat32x8(math.Float32frombits((127 + 112) << 23))
	u32x7fff  = archsimd.BroadcastUint32x8(0x7fff)
	u32x8000  = archsimd.BroadcastUint32x8(0x8000)
	u32x7bff  = archsimd.BroadcastUint32x8(0x7bff)
	u32expAll = archsimd.BroadcastUint32x8(0x7f800000)
)

// widenF16 converts 8 float16 bit patterns to float32 exactly, as
// dtype.Float16ToFloat32 does (a NaN keeps its sign and payload).
func widenF16(h archsimd.Uint32x8) archsimd.Float32x8 {
	em := h.And(u32x7fff)
	sign := h.And(u32x8000).ShiftAllLeft(16)
	finite := em.ShiftAllLeft(13).AsFloat32x8().Mul(two112).AsUint32x8() // normals and subnormals
	special := em.ShiftAllLeft(13).Or(u32expAll)
	return special.Merge(finite, em.Greater(u32x7bff)).Or(sign).AsFloat32x8()
}

// widenBF16 converts 8 bfloat16 bit patterns to float32, as
// dtype.BFloat16ToFloat32 does (the bits shifted up).
func widenBF16(h archsimd.Uint32x8) archsimd.Float32x8 {
	return h.ShiftAllLeft(16).AsFloat32x8()
}

func simdLanesHalf(lanes *[8]float32, p unsafe.Pointer, n int, widen func(archsimd.Uint32x8) archsimd.Float32x8) (done int) {
	if !haveAVX2 {
		return 0
	}
	x := unsafe.Slice((*uint16)(p), n)
	acc := archsimd.LoadFloat32x8(lanes)
	i := 0
	for ; i+8 <= n; i += 8 {
		acc = acc.Add(widen(archsimd.LoadUint16x8Slice(x[i:]).ExtendToUint32()))
	}
	acc.Store(lanes)
	archsimd.ClearAVXUpperBits()
	return i
}

// simdLanesF16 adds n contiguous float16s to the summation lanes (see simdLanes32).
func simdLanesF16(lanes *[8]float32, p unsafe.Pointer, n int) int {
	return simdLanesHalf(lanes, p, n, widenF16)
}

// simdLanesBF16 adds n contiguous bfloat16s to the summation lanes.
func simdLanesBF16(lanes *[8]float32, p unsafe.Pointer, n int) int {
	return simdLanesHalf(lanes, p, n, widenBF16)
}

// bytesOf8 expands 8 mask bits into 8 bools, bit i into byte i (little
// endian): a compare's movmsk becomes one 8-byte store.
var bytesOf8 = func() (t [256]uint64) {
	for m := range t {
		for i := 0; i < 8; i++ {
			if m>>i&1 != 0 {
				t[m] |= 1 << (8 * i)
			}
		}
	}
	return t
}()

// simdMaskInto is maskInto's vector path: the mask of a (operand 1)
// winning over b (2) by R, into the contiguous bool out 0, 8 elements a
// round (compare, movmsk, one table load and store). a and b are unit-stride
// or broadcast. Elements done: a multiple of 8 (the caller's kernel does the
// rest), or 0.
func simdMaskInto[R rule](s *seg, sz int) int {
	ua, ub := unit(s.s[1], sz), unit(s.s[2], sz)
	if !haveAVX2 || s.s[0] != 1 || ua < 0 || ub < 0 || s.n < 8 {
		return 0
	}
	n := s.n &^ 7
	po := s.p[0]
	if sz == 4 {
		a, b := elems[float32](s.p[1], s.n, ua), elems[float32](s.p[2], s.n, ub)
		for i := 0; i < n; i += 8 {
			m := wins32[R](load32(a, i, ua), load32(b, i, ub)).ToBits()
			*(*uint64)(unsafe.Add(po, i)) = bytesOf8[m]
		}
	} else {
		a, b := elems[float64](s.p[1], s.n, ua), elems[float64](s.p[2], s.n, ub)
		for i := 0; i < n; i += 8 {
			lo := wins64[R](load64(a, i, ua), load64(b, i, ub)).ToBits()
			hi := wins64[R](load64(a, i+4, ua), load64(b, i+4, ub)).ToBits()
			*(*uint64)(unsafe.Add(po, i)) = bytesOf8[lo|hi<<4]
		}
	}
	archsimd.ClearAVXUpperBits()
	return n
}
