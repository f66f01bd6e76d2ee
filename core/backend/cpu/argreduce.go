package cpu

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// The min/max family's kernels: ArgReduce (amin, amax, argmin, argmax),
// Scatter and Gather (their gradients), and the clamp kernels. Every
// comparison goes through the selection rule's predicates (rule.go: wins;
// simd_amd64.go: wins32, wins64, takesHalf).
//
// ArgReduce folds each slice with the running winner w kept against x_k iff
// wins(w, x_k). The fold keeps the first element that is best in the rule's
// order (NaN best under min/max, worst under fmin/fmax; -0 and +0 equal), so
// it may be cut into pieces: each piece's winner (its first best element),
// folded in position order, gives the fold of the whole. Pieces are fixed
// blocks of argBlock positions, and SIMD lanes (each lane folds the
// elements at its own positions, then the lanes combine: of equal values
// the smaller position), so results never depend on the thread count.

// argBlock is the most positions of one slice one work unit folds: a slice
// longer than that is cut into blocks folded in parallel, whose winners are
// then folded in order.
const argBlock = 1 << 16

// colBlock is the most columns one unit of ArgReduce's column mode keeps
// running winners for: a whole row of a (4096, 4096) float32 tensor, so
// that a unit reads its rows' memory in one sequential stream.
const colBlock = 4096

// colWork is about the number of elements one unit of column mode folds
// (a block of rows of a block of columns).
const colWork = 1 << 20

// colScratchBytes bounds the partial winners column mode holds at once (a
// variable only so that tests can make it small).
var colScratchBytes = 8 << 20

// colMin is the least length of a kept, contiguous last dim for which
// ArgReduce runs in column mode.
const colMin = 16

// winner is a fold's running winner: its element (nil: none yet) and its
// position in the slice.
type winner struct {
	p   unsafe.Pointer
	pos int
}

// argFuncs are the typed pieces of ArgReduce for one rule and dtype.
type argFuncs struct {
	// run folds the n elements at p (byte stride st), at positions pos0,
	// pos0+1, …, into w.
	run func(w *winner, p unsafe.Pointer, st, n, pos0 int)
	// takes reports whether the element at q takes the place of the
	// running winner at wp (that is, wp does not win over q).
	takes func(wp, q unsafe.Pointer) bool
	// vals folds the n contiguous elements at p for the winner's value
	// only and writes its bits to out; it reports false, writing nothing,
	// where that takes the positions (run then settles it). nil: no such
	// path.
	vals func(p unsafe.Pointer, n int, out unsafe.Pointer) bool
	// valsRows is vals over rows consecutive slices of r contiguous
	// elements each from p, their values to out, out+sz, …; it stops at the
	// first slice vals cannot settle and returns how many it settled. (One
	// call for a work unit's slices: going through runs and vals slice by
	// slice cost a tenth of amax(dim=-1) of a (4096, 4096) float32 tensor.)
	valsRows func(p unsafe.Pointer, rows, r int, out unsafe.Pointer) int
	// col folds row k of a column block (n contiguous elements at p) into
	// the running values wv and positions wpos (int64 for 8-byte dtypes,
	// int32 else; nil: values only); with first it initialises them
	// instead.
	col func(wv, wpos, p unsafe.Pointer, n, k int, first bool)
	// col2 is col for values only, folding two rows (p0, then p1) in one
	// pass over the running values (half the accumulator traffic).
	col2 func(wv, p0, p1 unsafe.Pointer, n int)
	// wide reports whether col's positions are int64.
	wide bool
}

var argKernels [backend.NumRules][16]argFuncs

func init() {
	buildArg[ruleMin]()
	buildArg[ruleMax]()
	buildArg[ruleFMin]()
	buildArg[ruleFMax]()
}

func buildArg[R rule]() {
	r := ruleOf[R]()
	for _, dt := range dtype.All() {
		var f argFuncs
		switch dt {
		case dtype.Bool, dtype.Uint8:
			f = argNative[R, uint8, int32]()
		case dtype.Int8:
			f = argNative[R, int8, int32]()
		case dtype.Int16:
			f = argNative[R, int16, int32]()
		case dtype.Int32:
			f = argNative[R, int32, int32]()
		case dtype.Int64:
			f = argNative[R, int64, int64]()
		case dtype.Float32:
			f = argNative[R, float32, int32]()
		case dtype.Float64:
			f = argNative[R, float64, int64]()
		case dtype.Float16, dtype.BFloat16:
			f = argHalf[R](dt == dtype.BFloat16)
		}
		argKernels[r][dt] = f
	}
}

func argNative[R rule, T native, P int32 | int64]() argFuncs {
	return argFuncs{
		run:      argRun[R, T],
		vals:     argVals[R, T],
		valsRows: argValsRows[R, T],
		takes:    func(wp, q unsafe.Pointer) bool { return !wins[R](*(*T)(wp), *(*T)(q)) },
		col:      argCol[R, T, P],
		col2:     argCol2[R, T],
		wide:     unsafe.Sizeof(P(0)) == 8,
	}
}

// laneTakes is how lane winners combine, lanes holding elements of one
// slice in no particular order: lane winner v at position vp takes the
// place of the best so far, b at bpos, iff b does not win over v, or v wins
// over b (so they are equal) from a smaller position. It gives the fold's
// winner: the first best element.
func laneTakes[R rule, T native](b, v T, bpos, vp int) bool {
	return !wins[R](b, v) || (wins[R](v, b) && vp < bpos)
}

// argRun is argFuncs.run for a native type: SIMD on a contiguous run where
// there is a path (the winner of a prefix, then the scalar fold). The
// prefix's best value alone (simdVals), where it settles the winner's bits,
// and then the first element equal to it, is cheaper than folding values
// and positions together (simdArgRun), which the other prefixes take.
func argRun[R rule, T native](w *winner, p unsafe.Pointer, st, n, pos0 int) {
	i := 0
	if sz := int(unsafe.Sizeof(*new(T))); st == sz && n >= 64 {
		done, bp := 0, 0
		if d, best, ok := simdVals[R, T](p, n); ok {
			done, bp = d, simdFind(p, d, best)
		} else {
			done, bp = simdArgRun[R, T](p, n)
		}
		if done > 0 {
			q := unsafe.Add(p, bp*sz)
			if w.p == nil || !wins[R](*(*T)(w.p), *(*T)(q)) {
				w.p, w.pos = q, pos0+bp
			}
			i = done
		}
	}
	if i < n && w.p == nil {
		w.p, w.pos = unsafe.Add(p, i*st), pos0+i
		i++
	}
	if i >= n {
		return
	}
	wv, wp, wpos := *(*T)(w.p), w.p, w.pos
	for ; i < n; i++ {
		q := unsafe.Add(p, i*st)
		if x := *(*T)(q); !wins[R](wv, x) {
			wv, wp, wpos = x, q, pos0+i
		}
	}
	w.p, w.pos = wp, wpos
}

// argVals is argFuncs.vals for a native type: the SIMD prefix where it
// settles the winner's bits (simdVals), then the fold without positions,
// which is exact (the running value is the running winner's bits).
func argVals[R rule, T native](p unsafe.Pointer, n int, out unsafe.Pointer) bool {
	x := unsafe.Slice((*T)(p), n)
	w, i := x[0], 1
	if done, best, ok := simdVals[R, T](p, n); done > 0 {
		if !ok {
			return false
		}
		w, i = best, done
	}
	for ; i < n; i++ {
		if !wins[R](w, x[i]) {
			w = x[i]
		}
	}
	*(*T)(out) = w
	return true
}

// argValsRows is argFuncs.valsRows for a native type.
func argValsRows[R rule, T native](p unsafe.Pointer, rows, r int, out unsafe.Pointer) int {
	sz := int(unsafe.Sizeof(*new(T)))
	for k := 0; k < rows; k++ {
		if !argVals[R, T](unsafe.Add(p, k*r*sz), r, unsafe.Add(out, k*sz)) {
			return k
		}
	}
	return rows
}

// argCol is argFuncs.col for a native type.
func argCol[R rule, T native, P int32 | int64](wv, wpos, p unsafe.Pointer, n, k int, first bool) {
	v, x := unsafe.Slice((*T)(wv), n), unsafe.Slice((*T)(p), n)
	var pos []P
	if wpos != nil {
		pos = unsafe.Slice((*P)(wpos), n)
	}
	if first {
		copy(v, x)
		for c := range pos {
			pos[c] = P(k)
		}
		return
	}
	c := simdArgCol[R, T](wv, wpos, p, n, k)
	if pos == nil {
		for ; c < n; c++ {
			if !wins[R](v[c], x[c]) {
				v[c] = x[c]
			}
		}
		return
	}
	for ; c < n; c++ {
		if !wins[R](v[c], x[c]) {
			v[c], pos[c] = x[c], P(k)
		}
	}
}

// argCol2 is argFuncs.col2 for a native type.
func argCol2[R rule, T native](wv, p0, p1 unsafe.Pointer, n int) {
	v, x0, x1 := unsafe.Slice((*T)(wv), n), unsafe.Slice((*T)(p0), n), unsafe.Slice((*T)(p1), n)
	for c := simdArgCol2[R, T](wv, p0, p1, n); c < n; c++ {
		w := v[c]
		if !wins[R](w, x0[c]) {
			w = x0[c]
		}
		if !wins[R](w, x1[c]) {
			w = x1[c]
		}
		v[c] = w
	}
}

// argHalf is argFuncs for float16 (bf false) or bfloat16: the rule on
// values widened exactly to float32, the bits copied.
func argHalf[R rule](bf bool) argFuncs {
	lim := halfNaNLimit(dtype.Float16)
	if bf {
		lim = halfNaNLimit(dtype.BFloat16)
	}
	return argFuncs{
		run: func(w *winner, p unsafe.Pointer, st, n, pos0 int) {
			i := 0
			if st == 2 && n >= 64 {
				if done, bp := simdArgRunHalf[R](p, n, lim, bf); done > 0 {
					q := unsafe.Add(p, 2*bp)
					if w.p == nil || !wins[R](widenHalf(*(*uint16)(w.p), bf), widenHalf(*(*uint16)(q), bf)) {
						w.p, w.pos = q, pos0+bp
					}
					i = done
					if i == n {
						return
					}
				}
			}
			if w.p == nil {
				w.p, w.pos = p, pos0
				i = 1
			}
			wv := widenHalf(*(*uint16)(w.p), bf)
			for ; i < n; i++ {
				q := unsafe.Add(p, i*st)
				if x := widenHalf(*(*uint16)(q), bf); !wins[R](wv, x) {
					wv, w.p, w.pos = x, q, pos0+i
				}
			}
		},
		takes: func(wp, q unsafe.Pointer) bool {
			return !wins[R](widenHalf(*(*uint16)(wp), bf), widenHalf(*(*uint16)(q), bf))
		},
		col: func(wv, wpos, p unsafe.Pointer, n, k int, first bool) {
			v, x := unsafe.Slice((*uint16)(wv), n), unsafe.Slice((*uint16)(p), n)
			var pos []int32
			if wpos != nil {
				pos = unsafe.Slice((*int32)(wpos), n)
			}
			if first {
				copy(v, x)
				for c := range pos {
					pos[c] = int32(k)
				}
				return
			}
			for c := range x {
				if !wins[R](widenHalf(v[c], bf), widenHalf(x[c], bf)) {
					v[c] = x[c]
					if pos != nil {
						pos[c] = int32(k)
					}
				}
			}
		},
	}
}

// runs calls fn for the runs of it (operand 0) covering flat indices
// [start, end): each run's first element, byte stride, length and flat
// index. Unlike segments, a run is a whole row (or its part in range).
func runs(it *tensor.Iter, ops *operands, start, end int, fn func(p unsafe.Pointer, st, n, flat int)) {
	inner := it.Inner()
	if start >= end || inner == 0 {
		return
	}
	sz := ops.sizes[0]
	st := it.InnerStride(0) * sz
	rs, re := start/inner, (end-1)/inner+1
	var cur tensor.RowCursor
	cur.Seek(it, rs)
	for row := rs; row < re; row++ {
		c0, c1 := rowSpan(row, rs, re, inner, start, end)
		fn(unsafe.Add(ops.base[0], cur.Offs[0]*sz+c0*st), st, c1-c0, row*inner+c0)
		if row+1 < re {
			cur.Next(it)
		}
	}
}

// iterOffset returns operand op's element offset at flat index flat of it.
func iterOffset(it *tensor.Iter, flat, op int) int {
	inner := it.Inner()
	var cur tensor.RowCursor
	cur.Seek(it, flat/inner)
	return cur.Offs[op] + (flat%inner)*it.InnerStride(op)
}

// keptFirst returns the permutation of a's dims that visits the dims kept
// in keep first and the reduced ones last (Sum's order): each slice is then
// one contiguous range of the iteration, in position order.
func keptFirst(buf *[tensor.MaxDims]int, keep, a *tensor.Tensor) []int {
	perm := buf[:0]
	for d := 0; d < a.Ndim(); d++ {
		if keep.Dim(d) != 1 || a.Dim(d) == 1 {
			perm = append(perm, d)
		}
	}
	for d := 0; d < a.Ndim(); d++ {
		if keep.Dim(d) == 1 && a.Dim(d) != 1 {
			perm = append(perm, d)
		}
	}
	return perm
}

// contig returns t if it is contiguous, else a contiguous copy.
func contig(t *tensor.Tensor) (*tensor.Tensor, error) {
	if t.IsContiguous() {
		return t, nil
	}
	return t.Clone()
}

// outputFor returns t if it is contiguous, else a fresh contiguous tensor
// for a kernel to write and finish to copy into t.
func outputFor(t *tensor.Tensor) (*tensor.Tensor, error) {
	if t == nil || t.IsContiguous() {
		return t, nil
	}
	return tensor.Empty(t.Dtype(), t.Shape())
}

// finish copies a temporary output w into t (nothing when w is t).
func (b *Backend) finish(t, w *tensor.Tensor) error {
	if t == nil || t == w {
		return nil
	}
	return b.Cast(t, w)
}

// run runs task(i) for i in [0, n) tasks of work elements in all, in
// parallel where the work is worth splitting.
func (b *Backend) run(work, n int, task func(i int)) {
	if n > 1 && b.split(work) {
		b.parallel(work, n, task)
	} else {
		sequential(n, task)
	}
}

// runUntil is run whose tasks do nothing once done is closed (nil: never).
func (b *Backend) runUntil(done <-chan struct{}, work, n int, task func(i int)) {
	if done == nil {
		b.run(work, n, task)
		return
	}
	b.run(work, n, func(i int) {
		if !backend.Stopped(done) {
			task(i)
		}
	})
}

// checkArgReduce checks ArgReduce's operands.
func checkArgReduce(r backend.Rule, vals, idx, a *tensor.Tensor) error {
	if err := backend.CheckArgReduce(r, vals, idx, a); err != nil {
		return err
	}
	if !a.Dtype().Valid() || argKernels[r][a.Dtype()].run == nil {
		return fmt.Errorf("unsupported dtype %v", a.Dtype())
	}
	return nil
}

// ArgReduce implements backend.IBackend.
func (b *Backend) ArgReduce(r backend.Rule, vals, idx, a *tensor.Tensor) error {
	return b.ArgReduceUntil(r, vals, idx, a, nil)
}

// ArgReduceUntil implements backend.InterruptibleArgReduce: every work unit
// (at most argBlock elements, or colWork in column mode) first looks at
// done, and once it is closed the units left do nothing.
func (b *Backend) ArgReduceUntil(r backend.Rule, vals, idx, a *tensor.Tensor, done <-chan struct{}) error {
	if err := checkArgReduce(r, vals, idx, a); err != nil {
		return err
	}
	keep := idx // the keepdim shape
	if keep == nil {
		keep = vals
	}
	nOut := keep.Numel()
	if nOut == 0 {
		return nil
	}
	iw, err := outputFor(idx)
	if err != nil {
		return err
	}
	vw, err := outputFor(vals)
	if err != nil {
		return err
	}
	f := &argKernels[r][a.Dtype()]
	dst := argDst{sz: a.Dtype().Size()}
	if iw != nil {
		dst.idx = unsafe.Slice((*int64)(iw.DataPointer()), nOut)
	}
	if vw != nil {
		dst.vals = vw.DataPointer()
	}
	switch {
	case a.Numel() == nOut: // nothing reduced: each slice is its one element
		clear(dst.idx)
		if vw != nil {
			if err := b.Cast(vw, a); err != nil {
				return err
			}
		}
	case !b.argColumns(f, dst, keep, a, done):
		b.argRows(f, dst, keep, a, done)
	}
	if backend.Stopped(done) {
		return backend.ErrInterrupted
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(iw)
	runtime.KeepAlive(vw)
	if err := b.finish(idx, iw); err != nil {
		return err
	}
	return b.finish(vals, vw)
}

// argDst is where ArgReduce writes: positions (unless nil: values only),
// and values (unless nil) of sz bytes each, both contiguous.
type argDst struct {
	idx  []int64
	vals unsafe.Pointer
	sz   int
}

func (d argDst) store(o int, w winner) {
	if d.idx != nil {
		d.idx[o] = int64(w.pos)
	}
	if d.vals != nil {
		copy(unsafe.Slice((*byte)(d.valAt(o)), d.sz), unsafe.Slice((*byte)(w.p), d.sz))
	}
}

func (d argDst) valAt(o int) unsafe.Pointer { return unsafe.Add(d.vals, o*d.sz) }

// valuesOnly reports whether only values are asked for and f has a path
// that finds them without positions.
func (d argDst) valuesOnly(f *argFuncs) bool { return d.idx == nil && f.vals != nil }

// argWindow bounds the block winners argRows holds at once (see sumWindow;
// a variable only so that tests can make it small).
var argWindow = 1 << 16

// argRows is ArgReduce over the kept-first iteration of a: output o's slice
// is the range [o*r, (o+1)*r). Short slices go whole to a work unit (groups
// of them); long ones are cut into blocks of argBlock positions. For values
// only, a piece that is one contiguous run is folded by f.vals where it
// can settle it.
func (b *Backend) argRows(f *argFuncs, dst argDst, keep, a *tensor.Tensor, done <-chan struct{}) {
	nOut := keep.Numel()
	r := a.Numel() / nOut
	var permBuf [tensor.MaxDims]int
	var it tensor.Iter
	ops := plan(&it, keptFirst(&permBuf, keep, a), a)
	valsOnly := dst.valuesOnly(f)
	if r <= argBlock {
		group := max(1, argBlock/r)
		b.runUntil(done, a.Numel(), (nOut+group-1)/group, func(t int) {
			w := new(winner)
			var out unsafe.Pointer // values only: where the slice's value goes
			fold := func(p unsafe.Pointer, st, n, flat int) {
				if out != nil && n == r && st == dst.sz && f.vals(p, n, out) {
					*w = winner{p: out}
					return
				}
				f.run(w, p, st, n, flat%r)
			}
			o0, o1 := t*group, min(nOut, (t+1)*group)
			if valsOnly && f.valsRows != nil {
				// Whole slices in one contiguous run: one call settles them
				// (up to the first it cannot); the loop below does the rest.
				stop := false
				runs(&it, &ops, o0*r, o1*r, func(p unsafe.Pointer, st, n, flat int) {
					if stop || st != dst.sz || flat != o0*r || n%r != 0 {
						stop = true
						return
					}
					k := f.valsRows(p, n/r, r, dst.valAt(o0))
					o0 += k
					stop = k < n/r
				})
			}
			for o := o0; o < o1; o++ {
				*w = winner{}
				if valsOnly {
					out = dst.valAt(o)
				}
				runs(&it, &ops, o*r, (o+1)*r, fold)
				if w.p != out || out == nil {
					dst.store(o, *w)
				}
			}
		})
		return
	}
	nb := (r + argBlock - 1) / argBlock
	units := nOut * nb
	partial := make([]winner, min(units, argWindow))
	var vbuf []uint64 // values only: the blocks' values (8 bytes hold any dtype's)
	if valsOnly {
		vbuf = make([]uint64, len(partial))
	}
	var cur winner
	curVal := new(uint64) // cur's value, kept across windows
	for w := 0; w < units && !backend.Stopped(done); w += len(partial) {
		wn := min(len(partial), units-w)
		b.runUntil(done, wn*argBlock, wn, func(t int) {
			u := w + t
			o, blk := u/nb, u%nb
			start, end := o*r+blk*argBlock, min((blk+1)*argBlock, r)+o*r
			pw := &partial[t]
			*pw = winner{}
			runs(&it, &ops, start, end, func(p unsafe.Pointer, st, n, flat int) {
				if vbuf != nil && n == end-start && st == dst.sz && f.vals(p, n, unsafe.Pointer(&vbuf[t])) {
					*pw = winner{p: unsafe.Pointer(&vbuf[t])}
					return
				}
				f.run(pw, p, st, n, flat-o*r)
			})
		})
		for u := w; u < w+wn; u++ {
			c := partial[u-w]
			if u%nb == 0 || f.takes(cur.p, c.p) {
				cur = c
				if vbuf != nil { // c.p may point into vbuf, which the next window reuses
					copy(unsafe.Slice((*byte)(unsafe.Pointer(curVal)), dst.sz), unsafe.Slice((*byte)(c.p), dst.sz))
					cur.p = unsafe.Pointer(curVal)
				}
			}
			if u%nb == nb-1 {
				dst.store(u/nb, cur)
			}
		}
	}
}

// argColumns is ArgReduce in column mode, when a kept dim of a (the last
// such) has unit stride and is at least colMin long, and some dim is
// reduced (a's last dim kept, or a transposed view reduced over its last
// dim): a work
// unit folds a block of rows (positions) of a block of columns of one
// output row into running winners, vectorised across the columns, reading
// each row's columns in one stream; the units' winners are then folded in
// position order. It reports false, doing nothing, for other layouts.
func (b *Backend) argColumns(f *argFuncs, dst argDst, keep, a *tensor.Tensor, done <-chan struct{}) bool {
	nd := a.Ndim()
	if nd < 2 || f.col == nil {
		return false
	}
	// L: the last kept dim of unit stride, at least colMin long
	st := a.StridesRef()
	L := -1
	for d := nd - 1; d >= 0 && L < 0; d-- {
		if keep.Dim(d) == a.Dim(d) && a.Dim(d) >= colMin && st[d] == 1 {
			L = d
		}
	}
	if L < 0 {
		return false
	}
	C := a.Dim(L)
	// keep's (contiguous) strides: where a unit's outputs go
	var ostr [tensor.MaxDims]int
	for d, acc := nd-1, 1; d >= 0; d-- {
		ostr[d] = acc
		acc *= keep.Dim(d)
	}
	var kShape, kStr, kIStr, rShape, rStr [tensor.MaxDims]int
	nk, nr := 0, 0
	for d := 0; d < nd; d++ {
		switch {
		case d == L:
		case keep.Dim(d) == 1 && a.Dim(d) != 1:
			rShape[nr], rStr[nr] = a.Dim(d), st[d]
			nr++
		default:
			kShape[nk], kStr[nk], kIStr[nk] = a.Dim(d), st[d], ostr[d]
			nk++
		}
	}
	nOut := keep.Numel()
	r := a.Numel() / nOut
	if nr == 0 || r > math.MaxInt32 {
		return false
	}
	ostep := ostr[L] // between the outputs of neighbouring columns
	// kIt walks the output rows (the kept dims but L): operand 0 is a, 1 the outputs
	var kIt, rIt tensor.Iter
	kIt.Reset(kShape[:nk], nil, []int{a.Offset(), 0}, kStr[:nk], kIStr[:nk])
	rIt.Reset(rShape[:nr], nil, []int{0}, rStr[:nr])
	sz, psz := a.Dtype().Size(), 4
	if f.wide {
		psz = 8
	}
	base := a.Storage().Pointer()
	width := min(C, colBlock)              // columns per unit (the last block may be narrower)
	ncb := (C + width - 1) / width         // column blocks per output row
	rb := max(1, colWork/width)            // rows (positions) per unit
	nrb := (r + rb - 1) / rb               // row blocks per slice
	nK := nOut / C                         // output rows
	units := nK * ncb * nrb                // in order: output row, column block, row block
	posOff := (width*sz + 7) &^ 7          // a unit's positions follow its values, aligned
	unitBytes := posOff + (width*psz+7)&^7 // one unit's partial winners
	window := max(1, min(units, colScratchBytes/unitBytes))
	part := make([]byte, window*unitBytes)
	acc := make([]byte, unitBytes) // the running winners of the current column block
	inner, ist := rIt.Inner(), rIt.InnerStride(0)
	for w0 := 0; w0 < units && !backend.Stopped(done); w0 += window {
		wn := min(window, units-w0)
		b.runUntil(done, wn*width*min(rb, r), wn, func(t int) {
			u := w0 + t
			K, cb, rblk := u/(ncb*nrb), (u/nrb)%ncb, u%nrb
			c0 := cb * width
			n := min(width, C-c0)
			wv := unsafe.Pointer(&part[t*unitBytes])
			var wpos unsafe.Pointer // nil: values only
			if dst.idx != nil {
				wpos = unsafe.Add(wv, posOff)
			}
			off := iterOffset(&kIt, K, 0) + c0
			k0, k1 := rblk*rb, min(r, (rblk+1)*rb)
			var cur tensor.RowCursor
			cur.Seek(&rIt, k0/inner)
			j := k0 % inner
			next := func() unsafe.Pointer { // row k's first column, then on to row k+1
				p := unsafe.Add(base, (off+cur.Offs[0]+j*ist)*sz)
				if j++; j == inner {
					j = 0
					cur.Next(&rIt)
				}
				return p
			}
			f.col(wv, wpos, next(), n, k0, true)
			k := k0 + 1
			if wpos == nil && f.col2 != nil {
				for ; k+1 < k1; k += 2 {
					p0 := next()
					f.col2(wv, p0, next(), n)
				}
			}
			for ; k < k1; k++ {
				f.col(wv, wpos, next(), n, k, false)
			}
		})
		for u := w0; u < w0+wn; u++ {
			K, cb, rblk := u/(ncb*nrb), (u/nrb)%ncb, u%nrb
			c0 := cb * width
			n := min(width, C-c0)
			pv := part[(u-w0)*unitBytes:]
			if rblk == 0 {
				copy(acc, pv[:unitBytes])
			} else {
				for c := 0; c < n; c++ {
					if f.takes(unsafe.Pointer(&acc[c*sz]), unsafe.Pointer(&pv[c*sz])) {
						copy(acc[c*sz:(c+1)*sz], pv[c*sz:(c+1)*sz])
						if dst.idx != nil {
							copy(acc[posOff+c*psz:posOff+(c+1)*psz], pv[posOff+c*psz:posOff+(c+1)*psz])
						}
					}
				}
			}
			if rblk < nrb-1 {
				continue
			}
			o := iterOffset(&kIt, K, 1) + c0*ostep // output of the block's first column
			switch {
			case dst.idx == nil:
			case f.wide:
				for c, p := range unsafe.Slice((*int64)(unsafe.Pointer(&acc[posOff])), n) {
					dst.idx[o+c*ostep] = p
				}
			default:
				for c, p := range unsafe.Slice((*int32)(unsafe.Pointer(&acc[posOff])), n) {
					dst.idx[o+c*ostep] = int64(p)
				}
			}
			if dst.vals != nil {
				for c := 0; c < n; c++ {
					copy(unsafe.Slice((*byte)(unsafe.Add(dst.vals, (o+c*ostep)*sz)), sz), acc[c*sz:(c+1)*sz])
				}
			}
		}
	}
	return true
}
