//go:build goexperiment.simd && amd64

package cpu

import (
	"math/bits"
	"simd/archsimd"
	"unsafe"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
)

// SIMD paths of the min/max family (see argreduce.go, scatter.go, clamp.go) for float32 and
// float64: the rule is wins32/wins64 (simd_amd64.go), the scalar rule wins
// (rule.go) where lanes combine. Each path clears the vector registers'
// upper halves before it returns, as in simd_amd64.go.

// simdArgRun folds a prefix of the n contiguous elements at p (T float32 or
// float64; other types: none) and returns its length (0: no SIMD path) and
// its winner's position: the first best element of the prefix.
func simdArgRun[R rule, T native](p unsafe.Pointer, n int) (done, pos int) {
	var z T
	switch any(z).(type) {
	case float32:
		return argRun32[R](p, n)
	case float64:
		return argRun64[R](p, n)
	}
	return 0, 0
}

// argRun32 is simdArgRun for float32: two accumulators of 8 lanes, lane l
// of accumulator j folding the elements at positions 16i+8j+l in order,
// with the iteration i of its winner (few enough live vectors to stay in
// registers); then the lanes combine: the better value, and of equal
// values the smaller position.
func argRun32[R rule](p unsafe.Pointer, n int) (done, pos int) {
	if !haveAVX2 || n < 64 || n > 1<<31 {
		return 0, 0
	}
	m := n &^ 15
	v0 := archsimd.LoadFloat32x8((*[8]float32)(p))
	v1 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p, 32)))
	var i0, i1 archsimd.Int32x8
	for i := 16; i < m; i += 16 {
		iv := archsimd.BroadcastInt32x8(int32(i))
		x0 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p, 4*i)))
		x1 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p, 4*i+32)))
		k0, k1 := wins32[R](v0, x0), wins32[R](v1, x1)
		v0, v1 = v0.Merge(x0, k0), v1.Merge(x1, k1)
		i0, i1 = i0.Merge(iv, k0), i1.Merge(iv, k1)
	}
	// Full positions but for the lane: accumulator j's lane holds 16i+8j.
	i1 = i1.Add(archsimd.BroadcastInt32x8(8))
	v0, i0 = combine32[R](v0, i0, v1, i1)
	var vals [8]float32
	var its [8]int32
	v0.Store(&vals)
	i0.Store(&its)
	best, bpos := vals[0], int(its[0])
	for l := 1; l < 8; l++ {
		v, vp := vals[l], int(its[l])+l
		if laneTakes[R](best, v, bpos, vp) {
			best, bpos = v, vp
		}
	}
	archsimd.ClearAVXUpperBits()
	return m, bpos
}

// combine32 combines two vectors of lane winners (values and positions):
// lane by lane, the one that wins by rule R, and of equal values (each
// wins over the other) the one at the smaller position.
func combine32[R rule](va archsimd.Float32x8, pa archsimd.Int32x8, vb archsimd.Float32x8, pb archsimd.Int32x8) (archsimd.Float32x8, archsimd.Int32x8) {
	aw := wins32[R](va, vb)
	earlier := wins32[R](vb, va).And(pb.Less(pa))
	v, p := va.Merge(vb, aw), pa.Merge(pb, aw)
	return vb.Merge(v, earlier), pb.Merge(p, earlier)
}

// argRun64 is argRun32 for float64: four accumulators of 4 lanes.
func argRun64[R rule](p unsafe.Pointer, n int) (done, pos int) {
	if !haveAVX2 || n < 32 {
		return 0, 0
	}
	m := n &^ 15
	ld := func(i int) archsimd.Float64x4 { return archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(p, 8*i))) }
	v0, v1, v2, v3 := ld(0), ld(4), ld(8), ld(12)
	var i0, i1, i2, i3 archsimd.Int64x4
	for i := 16; i < m; i += 16 {
		iv := archsimd.BroadcastInt64x4(int64(i))
		x0, x1, x2, x3 := ld(i), ld(i+4), ld(i+8), ld(i+12)
		k0, k1, k2, k3 := wins64[R](v0, x0), wins64[R](v1, x1), wins64[R](v2, x2), wins64[R](v3, x3)
		v0, v1, v2, v3 = v0.Merge(x0, k0), v1.Merge(x1, k1), v2.Merge(x2, k2), v3.Merge(x3, k3)
		i0, i1, i2, i3 = i0.Merge(iv, k0), i1.Merge(iv, k1), i2.Merge(iv, k2), i3.Merge(iv, k3)
	}
	var vals [16]float64
	var its [16]int64
	v0.Store((*[4]float64)(vals[0:4]))
	v1.Store((*[4]float64)(vals[4:8]))
	v2.Store((*[4]float64)(vals[8:12]))
	v3.Store((*[4]float64)(vals[12:16]))
	i0.Store((*[4]int64)(its[0:4]))
	i1.Store((*[4]int64)(its[4:8]))
	i2.Store((*[4]int64)(its[8:12]))
	i3.Store((*[4]int64)(its[12:16]))
	best, bpos := vals[0], int(its[0])
	for l := 1; l < 16; l++ {
		v, vp := vals[l], int(its[l])+l
		if laneTakes[R](best, v, bpos, vp) {
			best, bpos = v, vp
		}
	}
	archsimd.ClearAVXUpperBits()
	return m, bpos
}

// simdVals folds a prefix of the n contiguous elements at p for its best
// value only, under RuleMin or RuleMax (T float32 or float64; other rules
// and types: none). done is the prefix's length (0: no SIMD path); ok
// reports that best has the bits of the prefix's winner, which holds when
// no element is NaN and best is not zero: equal values then have equal
// bits, so the lanes need no positions. Otherwise (ok false) only
// positions tell which NaN or which zero came first, and the caller folds
// with them (argRun).
func simdVals[R rule, T native](p unsafe.Pointer, n int) (done int, best T, ok bool) {
	var k R
	if r := backend.Rule(len(k)); r.IgnoresNaN() {
		return 0, best, false
	}
	var z T
	switch any(z).(type) {
	case float32:
		d, b, ok := vals32[R](p, n)
		return d, *(*T)(unsafe.Pointer(&b)), ok
	case float64:
		d, b, ok := vals64[R](p, n)
		return d, *(*T)(unsafe.Pointer(&b)), ok
	}
	return 0, best, false
}

// vals32 is simdVals for float32: 64 elements per step, folded as a tree
// into one accumulator of 8 lanes (VMINPS or VMAXPS, whose NaN and zero
// cases are left to the caller), and one NaN mask (x.IsNaN().Or(y.IsNaN())
// is one VCMPPS). Loads address from a moving pointer, so they need no
// LEA each; with the tree, a (256, 4096) row-wise amax in L3 cache ran 9%
// faster than with four accumulators of 32 elements per step.
func vals32[R rule](p unsafe.Pointer, n int) (done int, best float32, ok bool) {
	if !haveAVX2 || n < 64 {
		return 0, 0, false
	}
	var k R
	greater := backend.Rule(len(k)).Greater()
	m := n &^ 63
	ld := func(q unsafe.Pointer, off uintptr) archsimd.Float32x8 {
		return archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(q, off)))
	}
	nanOf := func(q unsafe.Pointer) archsimd.Mask32x8 {
		return ld(q, 0).IsNaN().Or(ld(q, 32).IsNaN()).Or(ld(q, 64).IsNaN().Or(ld(q, 96).IsNaN())).
			Or(ld(q, 128).IsNaN().Or(ld(q, 160).IsNaN()).Or(ld(q, 192).IsNaN().Or(ld(q, 224).IsNaN())))
	}
	q := p
	nan := nanOf(q)
	var acc archsimd.Float32x8
	if greater {
		acc = ld(q, 0).Max(ld(q, 32)).Max(ld(q, 64).Max(ld(q, 96))).Max(ld(q, 128).Max(ld(q, 160)).Max(ld(q, 192).Max(ld(q, 224))))
		for i := 64; i < m; i += 64 {
			q = unsafe.Add(q, 256)
			x0, x1, x2, x3 := ld(q, 0), ld(q, 32), ld(q, 64), ld(q, 96)
			x4, x5, x6, x7 := ld(q, 128), ld(q, 160), ld(q, 192), ld(q, 224)
			nan = nan.Or(x0.IsNaN().Or(x1.IsNaN()).Or(x2.IsNaN().Or(x3.IsNaN()))).Or(x4.IsNaN().Or(x5.IsNaN()).Or(x6.IsNaN().Or(x7.IsNaN())))
			acc = acc.Max(x0.Max(x1).Max(x2.Max(x3)).Max(x4.Max(x5).Max(x6.Max(x7))))
		}
	} else {
		acc = ld(q, 0).Min(ld(q, 32)).Min(ld(q, 64).Min(ld(q, 96))).Min(ld(q, 128).Min(ld(q, 160)).Min(ld(q, 192).Min(ld(q, 224))))
		for i := 64; i < m; i += 64 {
			q = unsafe.Add(q, 256)
			x0, x1, x2, x3 := ld(q, 0), ld(q, 32), ld(q, 64), ld(q, 96)
			x4, x5, x6, x7 := ld(q, 128), ld(q, 160), ld(q, 192), ld(q, 224)
			nan = nan.Or(x0.IsNaN().Or(x1.IsNaN()).Or(x2.IsNaN().Or(x3.IsNaN()))).Or(x4.IsNaN().Or(x5.IsNaN()).Or(x6.IsNaN().Or(x7.IsNaN())))
			acc = acc.Min(x0.Min(x1).Min(x2.Min(x3)).Min(x4.Min(x5).Min(x6.Min(x7))))
		}
	}
	if nan.ToBits() != 0 {
		archsimd.ClearAVXUpperBits()
		return m, 0, false
	}
	var lanes [8]float32
	acc.Store(&lanes)
	best = lanes[0]
	for _, v := range lanes[1:] {
		if greater && v > best || !greater && v < best {
			best = v
		}
	}
	archsimd.ClearAVXUpperBits()
	return m, best, best != 0
}

// vals64 is vals32 for float64: four accumulators of 4 lanes.
func vals64[R rule](p unsafe.Pointer, n int) (done int, best float64, ok bool) {
	if !haveAVX2 || n < 32 {
		return 0, 0, false
	}
	var k R
	greater := backend.Rule(len(k)).Greater()
	m := n &^ 15
	ld := func(i int) archsimd.Float64x4 { return archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(p, 8*i))) }
	v0, v1, v2, v3 := ld(0), ld(4), ld(8), ld(12)
	nan := v0.IsNaN().Or(v1.IsNaN()).Or(v2.IsNaN().Or(v3.IsNaN()))
	if greater {
		for i := 16; i < m; i += 16 {
			x0, x1, x2, x3 := ld(i), ld(i+4), ld(i+8), ld(i+12)
			nan = nan.Or(x0.IsNaN().Or(x1.IsNaN())).Or(x2.IsNaN().Or(x3.IsNaN()))
			v0, v1, v2, v3 = v0.Max(x0), v1.Max(x1), v2.Max(x2), v3.Max(x3)
		}
		v0 = v0.Max(v1).Max(v2.Max(v3))
	} else {
		for i := 16; i < m; i += 16 {
			x0, x1, x2, x3 := ld(i), ld(i+4), ld(i+8), ld(i+12)
			nan = nan.Or(x0.IsNaN().Or(x1.IsNaN())).Or(x2.IsNaN().Or(x3.IsNaN()))
			v0, v1, v2, v3 = v0.Min(x0), v1.Min(x1), v2.Min(x2), v3.Min(x3)
		}
		v0 = v0.Min(v1).Min(v2.Min(v3))
	}
	if nan.ToBits() != 0 {
		archsimd.ClearAVXUpperBits()
		return m, 0, false
	}
	var lanes [4]float64
	v0.Store(&lanes)
	best = lanes[0]
	for _, v := range lanes[1:] {
		if greater && v > best || !greater && v < best {
			best = v
		}
	}
	archsimd.ClearAVXUpperBits()
	return m, best, best != 0
}

// simdFind returns the position of the first of the n contiguous elements
// at p that equals v (T float32 or float64, n a multiple of 8 or 4 and v
// among them: simdVals' prefix and best).
func simdFind[T native](p unsafe.Pointer, n int, v T) int {
	var z T
	switch any(z).(type) {
	case float32:
		b := archsimd.BroadcastFloat32x8(*(*float32)(unsafe.Pointer(&v)))
		for i := 0; i < n; i += 8 {
			if m := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p, 4*i))).Equal(b).ToBits(); m != 0 {
				archsimd.ClearAVXUpperBits()
				return i + bits.TrailingZeros8(m)
			}
		}
	case float64:
		b := archsimd.BroadcastFloat64x4(*(*float64)(unsafe.Pointer(&v)))
		for i := 0; i < n; i += 4 {
			if m := archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(p, 8*i))).Equal(b).ToBits(); m != 0 {
				archsimd.ClearAVXUpperBits()
				return i + bits.TrailingZeros8(m)
			}
		}
	}
	panic("simdFind: value not found")
}

// simdArgCol folds row k (n contiguous elements at p) into the running
// values wv and positions wpos (nil: values only) of a column block, 8
// (float32, int32 positions) or 4 (float64, int64 positions) columns at a
// time, and returns how many columns it did (k > 0).
func simdArgCol[R rule, T native](wv, wpos, p unsafe.Pointer, n, k int) int {
	if !haveAVX2 {
		return 0
	}
	var z T
	switch any(z).(type) {
	case float32:
		c := 0
		if wpos == nil { // values only
			for ; c+8 <= n; c += 8 {
				pw := (*[8]float32)(unsafe.Add(wv, 4*c))
				w, x := archsimd.LoadFloat32x8(pw), archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p, 4*c)))
				w.Merge(x, wins32[R](w, x)).Store(pw)
			}
			archsimd.ClearAVXUpperBits()
			return c
		}
		kv := archsimd.BroadcastInt32x8(int32(k))
		for ; c+8 <= n; c += 8 {
			pw := (*[8]float32)(unsafe.Add(wv, 4*c))
			pp := (*[8]int32)(unsafe.Add(wpos, 4*c))
			w, x := archsimd.LoadFloat32x8(pw), archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p, 4*c)))
			keep := wins32[R](w, x)
			w.Merge(x, keep).Store(pw)
			archsimd.LoadInt32x8(pp).Merge(kv, keep).Store(pp)
		}
		archsimd.ClearAVXUpperBits()
		return c
	case float64:
		c := 0
		if wpos == nil {
			for ; c+4 <= n; c += 4 {
				pw := (*[4]float64)(unsafe.Add(wv, 8*c))
				w, x := archsimd.LoadFloat64x4(pw), archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(p, 8*c)))
				w.Merge(x, wins64[R](w, x)).Store(pw)
			}
			archsimd.ClearAVXUpperBits()
			return c
		}
		kv := archsimd.BroadcastInt64x4(int64(k))
		for ; c+4 <= n; c += 4 {
			pw := (*[4]float64)(unsafe.Add(wv, 8*c))
			pp := (*[4]int64)(unsafe.Add(wpos, 8*c))
			w, x := archsimd.LoadFloat64x4(pw), archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(p, 8*c)))
			keep := wins64[R](w, x)
			w.Merge(x, keep).Store(pw)
			archsimd.LoadInt64x4(pp).Merge(kv, keep).Store(pp)
		}
		archsimd.ClearAVXUpperBits()
		return c
	}
	return 0
}

// simdArgCol2 is simdArgCol for values only, folding rows p0 then p1 in
// one pass; it returns how many columns it did.
func simdArgCol2[R rule, T native](wv, p0, p1 unsafe.Pointer, n int) int {
	if !haveAVX2 {
		return 0
	}
	var z T
	c := 0
	switch any(z).(type) {
	case float32:
		for ; c+8 <= n; c += 8 {
			pw := (*[8]float32)(unsafe.Add(wv, 4*c))
			w := archsimd.LoadFloat32x8(pw)
			x0 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p0, 4*c)))
			x1 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p1, 4*c)))
			w = w.Merge(x0, wins32[R](w, x0))
			w.Merge(x1, wins32[R](w, x1)).Store(pw)
		}
	case float64:
		for ; c+4 <= n; c += 4 {
			pw := (*[4]float64)(unsafe.Add(wv, 8*c))
			w := archsimd.LoadFloat64x4(pw)
			x0 := archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(p0, 8*c)))
			x1 := archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(p1, 8*c)))
			w = w.Merge(x0, wins64[R](w, x0))
			w.Merge(x1, wins64[R](w, x1)).Store(pw)
		}
	}
	archsimd.ClearAVXUpperBits()
	return c
}

// ld32 loads 8 float32s at element i of p, or broadcasts p's one element
// (u == 0).
func ld32(p unsafe.Pointer, u, i int) archsimd.Float32x8 {
	if u == 0 {
		return archsimd.BroadcastFloat32x8(*(*float32)(p))
	}
	return archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p, 4*i)))
}

// ld64 is ld32 for 4 float64s.
func ld64(p unsafe.Pointer, u, i int) archsimd.Float64x4 {
	if u == 0 {
		return archsimd.BroadcastFloat64x4(*(*float64)(p))
	}
	return archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(p, 8*i)))
}

// clampUnits checks a clamp segment's layout for the SIMD paths: outputs
// 0..nout-1 contiguous, the other operands 0..nops-1 contiguous or
// broadcast; it returns their units (see unit), ok false otherwise.
func clampUnits(s *seg, sz, nout, nops int) (u [maxOps]int, ok bool) {
	if !haveAVX2 {
		return u, false
	}
	for o := 0; o < nops; o++ {
		u[o] = unit(s.s[o], sz)
		if u[o] < 0 || (o < nout && u[o] != 1) {
			return u, false
		}
	}
	return u, true
}

// simdClamp is Clamp's SIMD path (out=0, x=1, lo=2, hi=3) for float32 (sz
// 4) and float64: RuleMax between x and lo, then RuleMin between the
// winner and hi. It does whole vectors and leaves the tail. Bounds that are
// one value each (clip by scalars) are broadcast once, outside the loop.
func simdClamp(s *seg, sz int) int {
	u, ok := clampUnits(s, sz, 1, 4)
	if !ok {
		return 0
	}
	n, po, px, plo, phi := s.n, s.p[0], s.p[1], s.p[2], s.p[3]
	ux, ulo, uhi := u[1], u[2], u[3]
	i := 0
	if sz == 4 {
		if ux == 1 && ulo == 0 && uhi == 0 {
			lo, hi := archsimd.BroadcastFloat32x8(*(*float32)(plo)), archsimd.BroadcastFloat32x8(*(*float32)(phi))
			for ; i+8 <= n; i += 8 {
				x := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(px, 4*i)))
				w := x.Merge(lo, wins32[ruleMax](x, lo))
				w.Merge(hi, wins32[ruleMin](w, hi)).Store((*[8]float32)(unsafe.Add(po, 4*i)))
			}
			archsimd.ClearAVXUpperBits()
			return i
		}
		for ; i+8 <= n; i += 8 {
			x, lo, hi := ld32(px, ux, i), ld32(plo, ulo, i), ld32(phi, uhi, i)
			w := x.Merge(lo, wins32[ruleMax](x, lo))
			w.Merge(hi, wins32[ruleMin](w, hi)).Store((*[8]float32)(unsafe.Add(po, 4*i)))
		}
		archsimd.ClearAVXUpperBits()
		return i
	}
	if ux == 1 && ulo == 0 && uhi == 0 {
		lo, hi := archsimd.BroadcastFloat64x4(*(*float64)(plo)), archsimd.BroadcastFloat64x4(*(*float64)(phi))
		for ; i+4 <= n; i += 4 {
			x := archsimd.LoadFloat64x4((*[4]float64)(unsafe.Add(px, 8*i)))
			w := x.Merge(lo, wins64[ruleMax](x, lo))
			w.Merge(hi, wins64[ruleMin](w, hi)).Store((*[4]float64)(unsafe.Add(po, 8*i)))
		}
		archsimd.ClearAVXUpperBits()
		return i
	}
	for ; i+4 <= n; i += 4 {
		x, lo, hi := ld64(px, ux, i), ld64(plo, ulo, i), ld64(phi, uhi, i)
		w := x.Merge(lo, wins64[ruleMax](x, lo))
		w.Merge(hi, wins64[ruleMin](w, hi)).Store((*[4]float64)(unsafe.Add(po, 8*i)))
	}
	archsimd.ClearAVXUpperBits()
	return i
}

// simdClampRoute is ClampRoute's SIMD path (gx=0, glo=1, ghi=2, x=3, lo=4,
// hi=5, g=6), all of one dtype: g goes to the winner's gradient, +0 to the
// other two.
func simdClampRoute(s *seg, sz int) int {
	u, ok := clampUnits(s, sz, 3, 7)
	if !ok {
		return 0
	}
	n, pgx, pglo, pghi, px, plo, phi, pg := s.n, s.p[0], s.p[1], s.p[2], s.p[3], s.p[4], s.p[5], s.p[6]
	ux, ulo, uhi, ug := u[3], u[4], u[5], u[6]
	scalarBounds := ux == 1 && ulo == 0 && uhi == 0 && ug == 1
	i := 0
	if sz == 4 {
		var zero archsimd.Float32x8
		if scalarBounds {
			lo, hi := archsimd.BroadcastFloat32x8(*(*float32)(plo)), archsimd.BroadcastFloat32x8(*(*float32)(phi))
			for ; i+8 <= n; i += 8 {
				x := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(px, 4*i)))
				g := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pg, 4*i)))
				m1 := wins32[ruleMax](x, lo)
				m2 := wins32[ruleMin](x.Merge(lo, m1), hi)
				g.Masked(m1.And(m2)).Store((*[8]float32)(unsafe.Add(pgx, 4*i)))
				zero.Merge(g.Masked(m2), m1).Store((*[8]float32)(unsafe.Add(pglo, 4*i)))
				zero.Merge(g, m2).Store((*[8]float32)(unsafe.Add(pghi, 4*i)))
			}
			archsimd.ClearAVXUpperBits()
			return i
		}
		for ; i+8 <= n; i += 8 {
			x, lo, hi, g := ld32(px, ux, i), ld32(plo, ulo, i), ld32(phi, uhi, i), ld32(pg, ug, i)
			m1 := wins32[ruleMax](x, lo)
			m2 := wins32[ruleMin](x.Merge(lo, m1), hi)
			g.Masked(m1.And(m2)).Store((*[8]float32)(unsafe.Add(pgx, 4*i)))
			zero.Merge(g.Masked(m2), m1).Store((*[8]float32)(unsafe.Add(pglo, 4*i)))
			zero.Merge(g, m2).Store((*[8]float32)(unsafe.Add(pghi, 4*i)))
		}
		archsimd.ClearAVXUpperBits()
		return i
	}
	var zero archsimd.Float64x4
	for ; i+4 <= n; i += 4 {
		x, lo, hi, g := ld64(px, ux, i), ld64(plo, ulo, i), ld64(phi, uhi, i), ld64(pg, ug, i)
		m1 := wins64[ruleMax](x, lo)
		m2 := wins64[ruleMin](x.Merge(lo, m1), hi)
		g.Masked(m1.And(m2)).Store((*[4]float64)(unsafe.Add(pgx, 8*i)))
		zero.Merge(g.Masked(m2), m1).Store((*[4]float64)(unsafe.Add(pglo, 8*i)))
		zero.Merge(g, m2).Store((*[4]float64)(unsafe.Add(pghi, 8*i)))
	}
	archsimd.ClearAVXUpperBits()
	return i
}

// simdClampSelect is ClampSelect's SIMD path (out=0, x=1, lo=2, hi=3, dx=4,
// dlo=5, dhi=6), all of one dtype.
func simdClampSelect(s *seg, sz int) int {
	u, ok := clampUnits(s, sz, 1, 7)
	if !ok {
		return 0
	}
	n := s.n
	if sz == 4 {
		i := 0
		for ; i+8 <= n; i += 8 {
			x, lo, hi := ld32(s.p[1], u[1], i), ld32(s.p[2], u[2], i), ld32(s.p[3], u[3], i)
			m1 := wins32[ruleMax](x, lo)
			m2 := wins32[ruleMin](x.Merge(lo, m1), hi)
			d := ld32(s.p[4], u[4], i).Merge(ld32(s.p[5], u[5], i), m1)
			d.Merge(ld32(s.p[6], u[6], i), m2).Store((*[8]float32)(unsafe.Add(s.p[0], 4*i)))
		}
		archsimd.ClearAVXUpperBits()
		return i
	}
	i := 0
	for ; i+4 <= n; i += 4 {
		x, lo, hi := ld64(s.p[1], u[1], i), ld64(s.p[2], u[2], i), ld64(s.p[3], u[3], i)
		m1 := wins64[ruleMax](x, lo)
		m2 := wins64[ruleMin](x.Merge(lo, m1), hi)
		d := ld64(s.p[4], u[4], i).Merge(ld64(s.p[5], u[5], i), m1)
		d.Merge(ld64(s.p[6], u[6], i), m2).Store((*[4]float64)(unsafe.Add(s.p[0], 8*i)))
	}
	archsimd.ClearAVXUpperBits()
	return i
}

// ---- float16 and bfloat16 (the int16 keys of simd_amd64.go) ----

// simdArgRunHalf is simdArgRun for float16/bfloat16 (dt): two accumulators
// of 16 lanes, lane l of accumulator j folding positions 32i+16j+l with
// takesHalf, keeping the iteration i (n is at most a few argBlocks, so i
// fits in an int16).
func simdArgRunHalf[R rule](p unsafe.Pointer, n int, lim int16, bf bool) (done, pos int) {
	if !haveAVX2 || n < 64 || n > 1<<19 {
		return 0, 0
	}
	m := n &^ 31
	l := archsimd.BroadcastInt16x16(lim)
	ld := func(i int) archsimd.Int16x16 { return archsimd.LoadInt16x16((*[16]int16)(unsafe.Add(p, 2*i))) }
	v0, v1 := ld(0), ld(16)
	var i0, i1 archsimd.Int16x16
	for i := 32; i < m; i += 32 {
		iv := archsimd.BroadcastInt16x16(int16(i / 32))
		x0, x1 := ld(i), ld(i+16)
		t0, t1 := takesHalf[R](v0, x0, l), takesHalf[R](v1, x1, l)
		v0, v1 = x0.Merge(v0, t0), x1.Merge(v1, t1)
		i0, i1 = iv.Merge(i0, t0), iv.Merge(i1, t1)
	}
	var vals, its [32]int16
	v0.Store((*[16]int16)(vals[0:16]))
	v1.Store((*[16]int16)(vals[16:32]))
	i0.Store((*[16]int16)(its[0:16]))
	i1.Store((*[16]int16)(its[16:32]))
	best, bpos := widenHalf(uint16(vals[0]), bf), int(its[0])*32
	for k := 1; k < 32; k++ {
		v, vp := widenHalf(uint16(vals[k]), bf), int(its[k])*32+k
		if laneTakes[R](best, v, bpos, vp) {
			best, bpos = v, vp
		}
	}
	archsimd.ClearAVXUpperBits()
	return m, bpos
}

// ld16 loads 16 half values at element i of p, or broadcasts p's one
// element (u == 0).
func ld16(p unsafe.Pointer, u, i int) archsimd.Int16x16 {
	if u == 0 {
		return archsimd.BroadcastInt16x16(*(*int16)(p))
	}
	return archsimd.LoadInt16x16((*[16]int16)(unsafe.Add(p, 2*i)))
}

// clampTakes returns clamp's two decisions on 16 half values: t1, lo takes
// x's place (RuleMax); t2, hi takes the place of that winner (RuleMin).
func clampTakes(x, lo, hi, l archsimd.Int16x16) (t1, t2 archsimd.Mask16x16) {
	t1 = takesHalf[ruleMax](x, lo, l)
	t2 = takesHalf[ruleMin](lo.Merge(x, t1), hi, l)
	return t1, t2
}

// simdClampHalf is simdClamp for float16/bfloat16 (dt).
func simdClampHalf(s *seg, dt dtype.Dtype) int {
	u, ok := clampUnits(s, 2, 1, 4)
	if !ok {
		return 0
	}
	l := archsimd.BroadcastInt16x16(halfNaNLimit(dt))
	i := 0
	for ; i+16 <= s.n; i += 16 {
		x, lo, hi := ld16(s.p[1], u[1], i), ld16(s.p[2], u[2], i), ld16(s.p[3], u[3], i)
		t1, t2 := clampTakes(x, lo, hi, l)
		hi.Merge(lo.Merge(x, t1), t2).Store((*[16]int16)(unsafe.Add(s.p[0], 2*i)))
	}
	archsimd.ClearAVXUpperBits()
	return i
}

// simdClampRouteHalf is simdClampRoute for float16/bfloat16 (dt).
func simdClampRouteHalf(s *seg, dt dtype.Dtype) int {
	u, ok := clampUnits(s, 2, 3, 7)
	if !ok {
		return 0
	}
	l := archsimd.BroadcastInt16x16(halfNaNLimit(dt))
	var zero archsimd.Int16x16
	i := 0
	for ; i+16 <= s.n; i += 16 {
		x, lo, hi, g := ld16(s.p[3], u[3], i), ld16(s.p[4], u[4], i), ld16(s.p[5], u[5], i), ld16(s.p[6], u[6], i)
		t1, t2 := clampTakes(x, lo, hi, l)
		zero.Merge(zero.Merge(g, t1), t2).Store((*[16]int16)(unsafe.Add(s.p[0], 2*i)))
		zero.Merge(g.Merge(zero, t1), t2).Store((*[16]int16)(unsafe.Add(s.p[1], 2*i)))
		g.Merge(zero, t2).Store((*[16]int16)(unsafe.Add(s.p[2], 2*i)))
	}
	archsimd.ClearAVXUpperBits()
	return i
}

// simdClampSelectHalf is simdClampSelect for float16/bfloat16 (dt).
func simdClampSelectHalf(s *seg, dt dtype.Dtype) int {
	u, ok := clampUnits(s, 2, 1, 7)
	if !ok {
		return 0
	}
	l := archsimd.BroadcastInt16x16(halfNaNLimit(dt))
	i := 0
	for ; i+16 <= s.n; i += 16 {
		x, lo, hi := ld16(s.p[1], u[1], i), ld16(s.p[2], u[2], i), ld16(s.p[3], u[3], i)
		t1, t2 := clampTakes(x, lo, hi, l)
		d := ld16(s.p[5], u[5], i).Merge(ld16(s.p[4], u[4], i), t1)
		ld16(s.p[6], u[6], i).Merge(d, t2).Store((*[16]int16)(unsafe.Add(s.p[0], 2*i)))
	}
	archsimd.ClearAVXUpperBits()
	return i
}
