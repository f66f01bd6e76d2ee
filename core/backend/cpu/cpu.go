// Package cpu is the fast CPU backend: typed kernels over coalesced strided
// layouts, a contiguous fast path inside each kernel, and goroutine
// parallelism over fixed blocks of elements, run by a team of helper
// goroutines that poll briefly between jobs (team.go).
//
// Conventions: results are bit-identical to package ref for every dtype,
// layout and thread count (NaN payloads of arithmetic ops aside). Work is cut
// into fixed blocks (Chunk elements; Sum uses backend.SumBlock) that do not
// depend on the number of threads, so reductions combine partial results in
// one fixed order. Errors as in package backend.
package cpu

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/tensor"
)

// Chunk is the number of elements of one parallel work unit of an
// elementwise kernel: small enough that a 64K-element call splits into
// eight, for the caller and a late helper to balance.
const Chunk = 1 << 13

// maxSeg bounds one kernel call so per-call scratch buffers stay in L1/L2.
const maxSeg = 2048

// Backend is the CPU backend. Use New or Default.
type Backend struct {
	threads     atomic.Int32
	alwaysSplit atomic.Bool
}

// New returns a CPU backend using n worker goroutines (n < 1 means GOMAXPROCS).
func New(n int) *Backend {
	b := &Backend{}
	b.SetThreads(n)
	return b
}

// Default is the registered "cpu" backend, and the default backend
// (backend.Default) of every program that links this package.
var Default = New(0)

func init() { backend.SetDefault(Default) }

var (
	_ backend.IBackend = (*Backend)(nil)
	_ backend.Threaded = (*Backend)(nil)
)

// Name returns "cpu".
func (*Backend) Name() string { return "cpu" }

// SetThreads sets the number of worker goroutines (n < 1 means GOMAXPROCS).
func (b *Backend) SetThreads(n int) {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	b.threads.Store(int32(min(n, 1024)))
}

// Threads returns the number of worker goroutines.
func (b *Backend) Threads() int { return int(b.threads.Load()) }

// SetAlwaysSplit makes the backend split all work of MinParallel elements or
// more, waking helpers when needed, instead of only while one is awake (see
// team.go). The default suits interactive use: an occasional mid-size call
// does not pay a wake-up that costs more than it saves.
func (b *Backend) SetAlwaysSplit(on bool) { b.alwaysSplit.Store(on) }

// split reports whether n elements of work should be split across
// goroutines (see the team's rule in team.go). Splitting never changes
// results.
func (b *Backend) split(n int) bool {
	if n < MinParallel || b.Threads() < 2 {
		return false
	}
	return theTeam.want(nanotime()) || n >= WakeParallel || b.alwaysSplit.Load()
}

// parallel runs fn(i) for i in [0, n) blocks of work elements in all, on up
// to Threads goroutines: the caller and the team, or fresh goroutines when
// the team is busy and the work is large enough to pay for them. Which
// goroutine runs which i does not affect results: every i writes its own
// outputs.
func (b *Backend) parallel(work, n int, fn func(i int)) {
	workers := min(b.Threads(), n)
	if workers <= 1 {
		sequential(n, fn)
		return
	}
	j := newJob(n, min(workers-1, maxHelpers), fn)
	if theTeam.tryRun(j) {
		return
	}
	if work < WakeParallel && !b.alwaysSplit.Load() {
		sequential(n, fn)
		return
	}
	for range workers - 1 {
		go j.help()
	}
	j.lead()
}

// sequential runs fn(i) for i in [0, n) on the calling goroutine.
func sequential(n int, fn func(i int)) {
	for i := 0; i < n; i++ {
		fn(i)
	}
}

// maxOps is the most operands a kernel iterates together (a seg's capacity).
const maxOps = tensor.IterOperands

// seg is one run of elements: for each operand a pointer to the first element
// and a stride in bytes, and the run length. Kernels take it by value: a
// pointer handed to a function value escapes, and would cost an allocation
// per call.
type seg struct {
	p [maxOps]unsafe.Pointer
	s [maxOps]int
	n int
}

// segFunc is an elementwise kernel: it processes one segment.
type segFunc func(seg)

func (s *seg) at(o, i int) unsafe.Pointer { return unsafe.Add(s.p[o], i*s.s[o]) }

// advance returns the segment without its first k elements (k < s.n), for
// the first nops operands.
func (s *seg) advance(k, nops int) seg {
	r := *s
	for o := 0; o < nops; o++ {
		r.p[o] = s.at(o, k)
	}
	r.n -= k
	return r
}

// contiguous reports whether the first k operands are unit-stride for element size sz.
func (s *seg) contiguous(k, sz int) bool {
	for o := 0; o < k; o++ {
		if s.s[o] != sz {
			return false
		}
	}
	return true
}

// operands holds, for a strided iteration, each operand's storage base
// pointer and element size (the offsets and strides are in the Iter).
type operands struct {
	nops  int
	base  [maxOps]unsafe.Pointer
	sizes [maxOps]int
}

// plan builds the iteration over ts (all of ts[0]'s shape; with perm, dims
// visited in that order) into it and returns the operands' pointers and sizes.
// Nothing escapes: it and the result can live on the caller's stack.
func plan(it *tensor.Iter, perm []int, ts ...*tensor.Tensor) operands {
	var ops operands
	var offs [maxOps]int
	var strides [maxOps][]int
	ops.nops = len(ts)
	for o, t := range ts {
		offs[o], strides[o] = t.Offset(), t.StridesRef()
		ops.base[o], ops.sizes[o] = t.Storage().Pointer(), t.Dtype().Size()
	}
	it.Reset(ts[0].ShapeRef(), perm, offs[:len(ts)], strides[:len(ts)]...)
	return ops
}

// segments calls k for the runs covering flat indices [start, end) of it,
// each at most maxSeg long (the strided path: its runs are rows).
func segments(it *tensor.Iter, ops *operands, start, end int, k segFunc) {
	inner := it.Inner()
	if start >= end || inner == 0 {
		return
	}
	rs, re := start/inner, (end-1)/inner+1
	var cur tensor.RowCursor
	cur.Seek(it, rs)
	var s seg
	for o := 0; o < ops.nops; o++ {
		s.s[o] = it.InnerStride(o) * ops.sizes[o]
	}
	for row := rs; row < re; row++ {
		c0, c1 := rowSpan(row, rs, re, inner, start, end)
		for c := c0; c < c1; c += maxSeg {
			for o := 0; o < ops.nops; o++ {
				s.p[o] = unsafe.Add(ops.base[o], cur.Offs[o]*ops.sizes[o]+c*s.s[o])
			}
			s.n = min(maxSeg, c1-c)
			k(s)
		}
		if row+1 < re {
			cur.Next(it)
		}
	}
}

// MinParallel is the least work (elements) split across goroutines, and
// then only while a helper is awake; WakeParallel is the least work worth
// waking a sleeping one for (see team.go). Results do not depend on how the
// work is split.
const (
	MinParallel  = 1 << 15
	WakeParallel = 1 << 20
)

// flatSeg fills s with the segment template of n-element operands and
// reports whether they are flat: each contiguous with n elements, or one
// element seen everywhere (a 0-d value broadcast); then no iteration plan is
// needed. A contiguous operand gets its element stride even when n is 1, so
// the fast paths (which want a unit-stride output) take it. One pass over
// each operand's dims (Tensor.FlatLayout): this runs for every elementwise
// op.
func flatSeg(s *seg, n int, ts []*tensor.Tensor) bool {
	for o, t := range ts {
		p, stride, ok := t.FlatLayout(n)
		if !ok {
			return false
		}
		s.p[o], s.s[o] = p, stride
	}
	return true
}

// flatSegs runs k over elements [start, end) of the flat operands of
// template base (nops of them), as one segment: a kernel with per-segment
// scratch cuts it into maxSeg pieces itself (inChunks), after its SIMD path
// has taken what it can in one go. Cutting every flat run into maxSeg
// pieces cost a 65,536-element float32 minimum 5-10% (35 ns a piece).
func flatSegs(base *seg, nops, start, end int, k segFunc) {
	s := *base
	for o := 0; o < nops; o++ {
		s.p[o] = unsafe.Add(base.p[o], start*base.s[o])
	}
	s.n = end - start
	k(s)
}

// inChunks runs k over s in pieces of at most maxSeg elements (nops
// operands): the kernels with a scratch buffer of maxSeg elements take
// their segments through it.
func inChunks(s seg, nops int, k func(seg)) {
	for s.n > maxSeg {
		part := s
		part.n = maxSeg
		k(part)
		s = s.advance(maxSeg, nops)
	}
	k(s)
}

// elementwise runs k over every element of ts[0]'s shape (at most maxOps
// operands), in parallel blocks above MinParallel. Below it nothing is
// allocated: ts, the segment and the iteration stay on the stack (ts must not
// leak, so the parallel paths take copies).
func (b *Backend) elementwise(k segFunc, ts ...*tensor.Tensor) {
	n := ts[0].Numel()
	if n == 0 {
		return
	}
	var base seg
	if flatSeg(&base, n, ts) {
		if !b.split(n) {
			flatSegs(&base, len(ts), 0, n, k)
		} else {
			b.flatParallel(k, base, len(ts), n)
		}
	} else {
		var it tensor.Iter
		ops := plan(&it, nil, ts...)
		if !b.split(n) {
			segments(&it, &ops, 0, n, k)
		} else {
			b.planParallel(k, it, ops, n)
		}
	}
	// The kernels read memory through raw pointers: keep the tensors (and so
	// their storages, whose cleanup frees the memory) reachable until done.
	for _, t := range ts {
		runtime.KeepAlive(t)
	}
}

// flatParallel is elementwise's flat path over Chunk-element blocks.
func (b *Backend) flatParallel(k segFunc, base seg, nops, n int) {
	b.parallel(n, (n+Chunk-1)/Chunk, func(c int) {
		s := base // each block its own copy: flatSegs sets its length
		flatSegs(&s, nops, c*Chunk, min(n, (c+1)*Chunk), k)
	})
}

// planParallel is elementwise's strided path over Chunk-element blocks (it
// takes the Iter by value: the goroutines share a heap copy).
func (b *Backend) planParallel(k segFunc, it tensor.Iter, ops operands, n int) {
	b.parallel(n, (n+Chunk-1)/Chunk, func(c int) { segments(&it, &ops, c*Chunk, min(n, (c+1)*Chunk), k) })
}

// rowSpan is the part [c0, c1) of row (of inner elements, one of the rows
// rs..re-1 a block [start, end) of flat positions covers) inside the block.
func rowSpan(row, rs, re, inner, start, end int) (c0, c1 int) {
	c0, c1 = 0, inner
	if row == rs {
		c0 = start - rs*inner
	}
	if row == re-1 {
		c1 = end - row*inner
	}
	return c0, c1
}
