package main

/*
#cgo CFLAGS: -O2
#define LUCID_NO_PROTOTYPES
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "lucid.h"
void *lucid_c_alloc(size_t size, size_t align, int huge);
*/
import "C"

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// ---- status codes and per-thread error messages ----

const (
	statusOK       = 0
	statusValue    = 1
	statusType     = 2
	statusRuntime  = 3
	statusPanic    = 4
	statusOverflow = 5
	statusMemory   = 6
)

var (
	errMu   sync.Mutex
	errMsgs = map[C.pthread_t]string{}
)

func fail(code C.int, msg string) C.int {
	errMu.Lock()
	errMsgs[C.pthread_self()] = msg
	errMu.Unlock()
	return code
}

// call runs f, mapping its error to a status code and a Go panic to
// statusPanic, so that no panic ever crosses into C.
func call(f func() error) (rc C.int) {
	defer recoverPanic(&rc)
	return status(f())
}

// recoverPanic, deferred by every export, turns a Go panic into statusPanic.
func recoverPanic(rc *C.int) {
	if r := recover(); r != nil {
		*rc = fail(statusPanic, fmt.Sprintf("internal error in pylucid's native library (Go panic): %v", r))
	}
}

// status maps an error to its status code, recording the message.
func status(err error) C.int {
	if err == nil {
		return statusOK
	}
	switch errs.KindOf(err) {
	case errs.Value:
		return fail(statusValue, err.Error())
	case errs.Type:
		return fail(statusType, err.Error())
	case errs.Overflow:
		return fail(statusOverflow, err.Error())
	case errs.Memory:
		return fail(statusMemory, err.Error())
	}
	return fail(statusRuntime, err.Error())
}

// ---- handles ----

// handleTable maps handles to Go objects. A handle is a slot index plus
// one in its low 32 bits and the slot's generation in the high bits, so a
// stale handle (used after release, or released twice) is an error even
// after its slot is reused.
type handleTable struct {
	mu    sync.Mutex
	slots []handleSlot
	free  []uint32
	live  int
	nodes map[any]int64 // node → handle, so one node keeps one handle
}

type handleSlot struct {
	obj  any
	gen  uint32
	refs int32 // references to a shared (node) handle; 0 for others
}

var handles = handleTable{nodes: map[any]int64{}}

// add stores obj in a free slot; the caller holds h.mu.
func (h *handleTable) add(obj any, refs int32) int64 {
	var i uint32
	if n := len(h.free); n > 0 {
		i = h.free[n-1]
		h.free = h.free[:n-1]
	} else {
		h.slots = append(h.slots, handleSlot{gen: 1})
		i = uint32(len(h.slots) - 1)
	}
	sl := &h.slots[i]
	sl.obj, sl.refs = obj, refs
	h.live++
	return int64(sl.gen)<<32 | int64(i+1)
}

// slot returns the live slot of id, or nil; the caller holds h.mu.
func (h *handleTable) slot(id int64) *handleSlot {
	i := uint32(id) - 1
	if id <= 0 || int(i) >= len(h.slots) {
		return nil
	}
	sl := &h.slots[i]
	if sl.obj == nil || sl.gen != uint32(id>>32) {
		return nil
	}
	return sl
}

func (h *handleTable) put(obj any) int64 {
	if t, ok := obj.(*tensor.Tensor); ok {
		t.Storage().AddHostHandle()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.add(obj, 0)
}

// putShared returns obj's existing handle (adding a reference) or a new one.
func (h *handleTable) putShared(obj any) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id, ok := h.nodes[obj]; ok {
		h.slot(id).refs++
		return id
	}
	id := h.add(obj, 1)
	h.nodes[obj] = id
	return id
}

func (h *handleTable) get(id int64) (any, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sl := h.slot(id); sl != nil {
		return sl.obj, true
	}
	return nil, false
}

func (h *handleTable) release(id int64) error {
	h.mu.Lock()
	sl := h.slot(id)
	if sl == nil {
		h.mu.Unlock()
		return fmt.Errorf("invalid or released handle %d", id)
	}
	obj := sl.obj
	if sl.refs > 0 {
		if sl.refs--; sl.refs > 0 {
			h.mu.Unlock()
			return nil
		}
		delete(h.nodes, obj)
	}
	sl.obj = nil
	// Generations stay within 31 bits, so handles stay positive.
	if sl.gen++; sl.gen >= 1<<31 {
		sl.gen = 1
	}
	h.free = append(h.free, uint32(id)-1)
	h.live--
	h.mu.Unlock()
	switch o := obj.(type) {
	case *tensor.Tensor:
		// Frees the memory now if this was the storage's only handle and
		// nothing else ever shared it (the handle's user is done with it).
		if o.Storage().ReleaseHostHandle() {
			// The last hold: o is reused if nothing else refers to it
			// (see getTensor). Of two handles released at once, only the
			// one that took the last hold gets here.
			tensor.Recycle(o)
		}
	case *backwardRun:
		o.run.Close() // an abandoned paused run gives back its holds
	}
	return nil
}

func (h *handleTable) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live
}

func getTensor(id C.int64_t) (*tensor.Tensor, error) {
	o, ok := handles.get(int64(id))
	if !ok {
		return nil, fmt.Errorf("invalid or released tensor handle %d", int64(id))
	}
	t, ok := o.(*tensor.Tensor)
	if !ok {
		return nil, fmt.Errorf("handle %d is not a tensor", int64(id))
	}
	// The caller may keep t beyond the handle (a .grad slot, a DLPack
	// export, a job): its object is never reused (tensor.Recycle). Only
	// an op's inputs (tensorsInto) are looked up without this: ops keep
	// nothing of their inputs but through the graph, which marks them.
	t.MarkKept()
	return t, nil
}

// tensorsInto looks up the tensors behind ids into out (as long as ids)
// under one lock: an op's inputs cost one lock, not one each. With absent,
// a 0 handle is a nil tensor.
func (h *handleTable) tensorsInto(ids []C.int64_t, out []*tensor.Tensor, absent bool) error {
	h.mu.Lock()
	for i, id := range ids {
		if id == 0 && absent {
			out[i] = nil
			continue
		}
		sl := h.slot(int64(id))
		if sl == nil {
			h.mu.Unlock()
			return fmt.Errorf("invalid or released tensor handle %d", int64(id))
		}
		t, ok := sl.obj.(*tensor.Tensor)
		if !ok {
			h.mu.Unlock()
			return fmt.Errorf("handle %d is not a tensor", int64(id))
		}
		out[i] = t
	}
	h.mu.Unlock()
	return nil
}

func getTensors(p *C.int64_t, n int, allowZero bool) ([]*tensor.Tensor, error) {
	if n < 0 || (n > 0 && p == nil) {
		return nil, errs.Valuef("invalid handle array (n=%d)", n)
	}
	ids := unsafe.Slice(p, n)
	out := make([]*tensor.Tensor, n)
	for i, id := range ids {
		if id == 0 && allowZero {
			continue
		}
		t, err := getTensor(id)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// ---- queues of things handed back to the host ----

type queue struct {
	mu    sync.Mutex
	items []int64
}

func (q *queue) push(v int64) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	pendingItems.Add(1)
}

func (q *queue) pop(max int) []int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(max, len(q.items))
	out := append([]int64(nil), q.items[:n]...)
	if n == len(q.items) {
		q.items = q.items[:0] // reuse the array: a queue drained as it fills never grows
	} else {
		q.items = q.items[n:]
	}
	pendingItems.Add(-int64(n))
	return out
}

var (
	bufferQueue   queue // tokens of borrowed buffers the library no longer uses
	functionQueue queue // ids of host functions whose graph node is gone
	pendingItems  atomic.Int64
)

// ---- memory: C allocations, borrowed buffers and collection ----

var (
	cBytes        atomic.Int64
	cBlocks       atomic.Int64
	borrowedCount atomic.Int64
	borrowedBytes atomic.Int64
	baseline      atomic.Int64 // outstanding bytes right after the last collection, lowered as memory is freed
	gcMu          sync.Mutex
)

// collectEvery is how far outstanding memory may grow past its low-water mark
// before the library runs Go's collector itself: Go's GC sees only small
// headers, never the C memory behind them.
const collectEvery = 64 << 20

func outstanding() int64 { return cBytes.Load() + borrowedBytes.Load() }

func noteFreed() {
	for {
		o, b := outstanding(), baseline.Load()
		if o >= b || baseline.CompareAndSwap(b, o) {
			return
		}
	}
}

func maybeCollect(incoming int64) {
	if outstanding()+incoming <= baseline.Load()+collectEvery {
		return
	}
	if !gcMu.TryLock() {
		return
	}
	defer gcMu.Unlock()
	tensor.FlushYoung()
	runtime.GC()
	baseline.Store(outstanding())
}

// Freed blocks are kept for reuse instead of being returned to the system:
// a fresh 64 MB result would cost 16k page faults (as it does NumPy), more
// than the kernel that fills it, and every small one a cgo call to malloc
// and another to free. The pool holds at most poolCap bytes, and at most
// smallClassBytes in each small size class: enough to take back the blocks
// one collection frees at once (a training step on small tensors frees
// thousands between two collections), so the next steps reuse them instead
// of calling malloc.
const (
	smallMax        = 64 << 10 // below this, sizes round up to a power of two
	hugeMin         = 4 << 20  // from this size, 2 MB aligned with transparent huge pages
	hugeAlign       = 2 << 20
	poolCap         = 384 << 20
	poolMaxBlock    = 128 << 20
	smallAlign      = 64
	smallClassBytes = 32 << 20
)

type blockPool struct {
	mu    sync.Mutex
	small [bits.UintSize][]unsafe.Pointer // power-of-two sizes below smallMax, by log2: no map hashing per call
	free  map[int][]unsafe.Pointer        // larger sizes, by rounded size
	bytes int
}

var pool = blockPool{free: map[int][]unsafe.Pointer{}}

// list returns the free list of a size class.
func (p *blockPool) list(size int) *[]unsafe.Pointer {
	if size < smallMax {
		return &p.small[bits.Len(uint(size))]
	}
	l := p.free[size]
	return &l
}

func (p *blockPool) get(size int) unsafe.Pointer {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.list(size)
	if len(*l) == 0 {
		return nil
	}
	b := (*l)[len(*l)-1]
	*l = (*l)[:len(*l)-1]
	if size >= smallMax {
		p.free[size] = *l
	}
	p.bytes -= size
	return b
}

func (p *blockPool) put(b unsafe.Pointer, size int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.list(size)
	if size > poolMaxBlock || p.bytes+size > poolCap || (size < smallMax && (len(*l)+1)*size > smallClassBytes) {
		return false
	}
	*l = append(*l, b)
	if size >= smallMax {
		p.free[size] = *l
	}
	p.bytes += size
	return true
}

// roundSize is the size class of an n-byte request.
func roundSize(n int) int {
	switch {
	case n >= hugeMin:
		return (n + hugeAlign - 1) &^ (hugeAlign - 1)
	case n >= smallMax:
		return (n + 4095) &^ 4095
	case n <= smallAlign:
		return smallAlign
	}
	return 1 << bits.Len(uint(n-1))
}

// poisonFreed (environment LUCID_DEBUG_POISON=1) overwrites freed blocks, so
// that a test run turns any use of freed memory into wrong numbers.
var poisonFreed = os.Getenv("LUCID_DEBUG_POISON") == "1"

// goMax is the largest request served from Go's heap instead of C memory.
// C memory needs a cleanup registered per storage to be freed, and that
// costs more than a whole op on a small tensor; Go memory is simply
// collected, and pinned before its address is handed out
// (tensor.Storage.PinnedPointer). Sizes rounded up to 64 bytes fall into Go
// size classes that are multiples of 64, so blocks stay 64-byte aligned;
// anything else falls back to C memory.
const goMax = 256

type cAllocator struct{}

func (a cAllocator) Alloc(n int, zeroed bool) ([]byte, func(), error) {
	data, goHeap, err := a.AllocBlock(n, zeroed)
	if err != nil || goHeap {
		return data, nil, err
	}
	return data, func() { a.FreeBlock(data) }, nil
}

// InlineBytes implements tensor.InlineAllocator: blocks of up to goMax bytes
// are Go heap memory.
func (cAllocator) InlineBytes() int { return goMax }

// AllocBlock implements tensor.BlockAllocator: the storage frees the block
// through FreeBlock, with no closure made per allocation.
func (cAllocator) AllocBlock(n int, zeroed bool) ([]byte, bool, error) {
	if n == 0 {
		return nil, true, nil
	}
	if n <= goMax {
		b := make([]byte, (n+smallAlign-1)&^(smallAlign-1))
		if uintptr(unsafe.Pointer(&b[0]))%smallAlign == 0 {
			return b[:n:n], true, nil
		}
	}
	if n > math.MaxInt-hugeAlign { // roundSize would overflow (found by review)
		return nil, false, errs.Memoryf("out of memory allocating %d bytes", n)
	}
	maybeCollect(int64(n))
	size := roundSize(n)
	p := pool.get(size)
	if p == nil {
		align, huge := smallAlign, 0
		if size >= hugeMin {
			align, huge = hugeAlign, 1
		}
		p = C.lucid_c_alloc(C.size_t(size), C.size_t(align), C.int(huge))
		if p == nil {
			return nil, false, errs.Memoryf("out of memory allocating %d bytes", n)
		}
	}
	if zeroed {
		C.memset(p, 0, C.size_t(n))
	}
	cBytes.Add(int64(n))
	cBlocks.Add(1)
	return unsafe.Slice((*byte)(p), n), false, nil
}

// FreeBlock implements tensor.BlockAllocator: the block goes back to the
// pool (its size class follows from the length) or to C.
func (cAllocator) FreeBlock(data []byte) {
	n := len(data)
	p, size := unsafe.Pointer(unsafe.SliceData(data)), roundSize(n)
	if poisonFreed {
		C.memset(p, 0xA5, C.size_t(size)) // LUCID_DEBUG_POISON: make use-after-free visible
	}
	if !pool.put(p, size) {
		C.free(p)
	}
	cBytes.Add(-int64(n))
	cBlocks.Add(-1)
	noteFreed()
}

// goGCPercent is the collector's target when GOGC is not set: the Go heap
// holds only headers, graph nodes and tensors of at most goMax bytes (C
// memory is collected for by maybeCollect), and a small-op loop allocates a
// few hundred bytes per call (docs/architecture.md).
const goGCPercent = 400

func init() {
	tensor.SetAllocator(cAllocator{})
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(goGCPercent)
	}
}
