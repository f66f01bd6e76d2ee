// Package cpu is the fast CPU backend: typed kernels over coalesced strided
// layouts, a contiguous fast path inside each kernel, and goroutine
// parallelism over fixed blocks of elements.
//
// Conventions: results are bit-identical to package ref for every dtype,
// layout and thread count (NaN payloads of arithmetic ops aside). Work is cut
// into fixed blocks (Chunk elements; Sum uses backend.SumBlock) that do not
// depend on the number of threads, so reductions combine partial results in
// one fixed order. Errors as in package backend.
package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/tensor"
)

// Chunk is the number of elements of one parallel work unit of an
// elementwise kernel.
const Chunk = 1 << 15

// maxSeg bounds one kernel call so per-call scratch buffers stay in L1/L2.
const maxSeg = 2048

// Backend is the CPU backend. Use New or Default.
type Backend struct {
	threads atomic.Int32
}

// New returns a CPU backend using n worker goroutines (n < 1 means GOMAXPROCS).
func New(n int) *Backend {
	b := &Backend{}
	b.SetThreads(n)
	return b
}

// Default is the registered "cpu" backend.
var Default = New(0)

func init() { backend.Register(Default) }

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

// parallel runs fn(i) for i in [0, n), on up to Threads goroutines. Which
// goroutine runs which i does not affect results: every i writes its own
// outputs.
func (b *Backend) parallel(n int, fn func(i int)) {
	workers := min(b.Threads(), n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var panicked atomic.Value
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					panicked.Store(r)
				}
			}()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
	if r := panicked.Load(); r != nil {
		panic(r) // re-raised on the caller's goroutine, where it can be recovered
	}
}

// sequential runs fn(i) for i in [0, n) on the calling goroutine.
func sequential(n int, fn func(i int)) {
	for i := 0; i < n; i++ {
		fn(i)
	}
}

// seg is one run of elements: for each operand a pointer to the first element
// and a stride in bytes, and the run length.
type seg struct {
	p [6]unsafe.Pointer
	s [6]int
	n int
}

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

// operands holds the layout of several tensors iterated together.
type operands struct {
	plan  tensor.Plan
	base  []unsafe.Pointer
	sizes []int
}

func newOperands(ts ...*tensor.Tensor) operands {
	shape := ts[0].ShapeRef()
	offs := make([]int, len(ts))
	strides := make([][]int, len(ts))
	base := make([]unsafe.Pointer, len(ts))
	sizes := make([]int, len(ts))
	for i, t := range ts {
		offs[i], strides[i] = t.Offset(), t.StridesRef()
		base[i], sizes[i] = t.Storage().Pointer(), t.Dtype().Size()
	}
	return operands{plan: tensor.NewPlan(shape, offs, strides...), base: base, sizes: sizes}
}

// segments calls k for the runs covering flat indices [start, end) of the plan,
// each at most maxSeg long.
func (ops *operands) segments(start, end int, k func(*seg)) {
	inner := ops.plan.Inner()
	if start >= end || inner == 0 {
		return
	}
	rs, re := start/inner, (end-1)/inner+1
	row := rs
	var s seg
	ops.plan.ForRows(rs, re, func(offs []int) {
		c0, c1 := 0, inner
		if row == rs {
			c0 = start - rs*inner
		}
		if row == re-1 {
			c1 = end - row*inner
		}
		for c := c0; c < c1; c += maxSeg {
			for o := range offs {
				st := ops.plan.InnerStride(o)
				s.p[o] = unsafe.Add(ops.base[o], (offs[o]+c*st)*ops.sizes[o])
				s.s[o] = st * ops.sizes[o]
			}
			s.n = min(maxSeg, c1-c)
			k(&s)
		}
		row++
	})
}

// MinParallel is the least work (elements) worth waking another goroutine
// for: below it, the wake-up costs more than it saves. Elementwise results do
// not depend on how the work is split.
const MinParallel = 1 << 18

// flatSegs runs k over n elements of operands that are each contiguous or a
// single broadcast element: no iteration plan is needed.
func flatSegs(ts []*tensor.Tensor, start, end int, k func(*seg)) {
	var s seg
	for o, t := range ts {
		if isBroadcastScalar(t) {
			s.s[o] = 0
		} else {
			s.s[o] = t.Dtype().Size()
		}
		s.p[o] = t.DataPointer()
	}
	base := s.p
	for c := start; c < end; c += maxSeg {
		for o := range ts {
			s.p[o] = unsafe.Add(base[o], c*s.s[o])
		}
		s.n = min(maxSeg, end-c)
		k(&s)
	}
}

// isFlat reports whether every operand is contiguous with ts[0]'s element
// count or is one element seen everywhere (a 0-d value broadcast).
func isFlat(n int, ts []*tensor.Tensor) bool {
	for _, t := range ts {
		if !isBroadcastScalar(t) && (t.Numel() != n || !t.IsContiguous()) {
			return false
		}
	}
	return true
}

// isBroadcastScalar reports whether every element of t is the same memory
// (all strides zero, or a single element).
func isBroadcastScalar(t *tensor.Tensor) bool {
	for i, st := range t.StridesRef() {
		if st != 0 && t.ShapeRef()[i] != 1 {
			return false
		}
	}
	return true
}

// elementwise runs k over every element of ts[0]'s shape in parallel blocks.
func (b *Backend) elementwise(k func(*seg), ts ...*tensor.Tensor) {
	n := ts[0].Numel()
	if n == 0 {
		return
	}
	if isFlat(n, ts) {
		if n < MinParallel {
			flatSegs(ts, 0, n, k)
			runtime.KeepAlive(ts)
			return
		}
		b.parallel((n+Chunk-1)/Chunk, func(c int) { flatSegs(ts, c*Chunk, min(n, (c+1)*Chunk), k) })
		runtime.KeepAlive(ts)
		return
	}
	ops := newOperands(ts...)
	if n < MinParallel {
		ops.segments(0, n, k)
	} else {
		b.parallel((n+Chunk-1)/Chunk, func(c int) {
			ops.segments(c*Chunk, min(n, (c+1)*Chunk), k)
		})
	}
	// The kernels read memory through raw pointers: keep the tensors (and so
	// their storages, whose cleanup frees the memory) reachable until done.
	runtime.KeepAlive(ts)
}
