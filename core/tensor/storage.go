package tensor

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/pylucid/pylucid/core/errs"
)

// Storage is a flat block of bytes that one or more tensors view.
//
// It either owns its memory (allocated by the package Allocator) or borrows
// memory that belongs to someone else (a NumPy buffer, a DLPack producer).
// Either way, the release hook given at creation runs exactly once, at the
// latest after the last Go reference to the Storage is gone
// (runtime.AddCleanup), so the owner of borrowed memory learns when Go no
// longer needs it.
//
// The memory can also go back early: a host that hands tensors out by
// handle (the C ABI) reports each handle with AddHandle/ReleaseHandle, and so
// does a tensor's gradient slot; when the last hold on a storage that
// nothing else in Go ever shared goes, owned memory is freed (and borrowed
// memory released) at once — while still in cache — instead of at the next
// garbage collection. Anything else that lets the storage outlive those
// holds (a view, a saved tensor) marks it shared first, which rules early
// freeing out for good.
type Storage struct {
	// Fields ordered by size: the struct fits in the 64 bytes that
	// inlineStorage leaves it.
	data  []byte
	owned *ownedMemory // nil for Go heap memory and memory borrowed without a release hook
	// holds counts the holds on the storage (AddHandle) in its low 32 bits
	// and, in its high 32 bits, those of them that are handles given to
	// foreign code (AddHostHandle), the only holders of an exported
	// address: one word, so a host handle costs one atomic update each way.
	// The halves stay apart because every release matches an earlier add
	// (the low half is never below the high one, nor negative); an
	// unmatched release would borrow from the host count.
	holds    atomic.Int64
	readOnly bool
	// goMemory: the bytes are Go heap memory (an Allocator that returned no
	// free function), which foreign code may only keep once pinned.
	goMemory bool
	// inline: the bytes share the storage's own allocation (inlineStorage),
	// which is why a pin on them is given back with the last host handle,
	// not by a cleanup (see PinnedPointer).
	inline bool
	shared atomic.Bool
	pinned atomic.Bool
	// version counts the in-place writes into the storage through the
	// library (Tensor.BumpVersion): autograd nodes record it with each
	// tensor they save and refuse to run on one written since (PyTorch's
	// version counter, shared by every view of the storage).
	version atomic.Uint32
}

// ownedMemory frees allocator memory exactly once: early (ReleaseHandle) or
// from the storage's cleanup, whichever comes first.
type ownedMemory struct {
	done     atomic.Bool
	free     func()                   // from Allocator.Alloc or BorrowStorage, or nil with:
	returned func(token int64, n int) // LendStorage's (token, bytes), or nil with:
	block    BlockAllocator           // FreeBlock(data) for memory from AllocBlock
	data     []byte
	token    int64
}

func (m *ownedMemory) release() {
	if m.done.CompareAndSwap(false, true) {
		switch {
		case m.free != nil:
			m.free()
		case m.returned != nil:
			m.returned(m.token, len(m.data))
		default:
			m.block.FreeBlock(m.data)
		}
		m.data = nil
	}
}

// MarkShared records that something besides a single host handle may use the
// storage, so it is only ever freed by the garbage collector.
func (s *Storage) MarkShared() { s.shared.Store(true) }

// Held reports whether anything holds the storage (a host handle, a gradient
// slot, a backward run).
func (s *Storage) Held() bool { return int32(s.holds.Load()) > 0 }

// AddHandle records a hold on the storage: a host handle to a tensor on it,
// or a tensor's gradient slot (Tensor.SetGrad).
func (s *Storage) AddHandle() { s.holds.Add(1) }

// ReleaseHandle records that a hold is gone. If it was the last one and the
// storage was never shared, owned memory is freed now. The caller
// guarantees nothing is still using the tensor through that hold.
func (s *Storage) ReleaseHandle() {
	if int32(s.holds.Add(-1)) != 0 {
		return
	}
	s.lastHoldGone()
}

// lastHoldGone frees owned memory now if the storage was never shared.
func (s *Storage) lastHoldGone() {
	if !s.shared.Load() && s.owned != nil {
		s.owned.release()
		s.data = nil
	}
}

// AddHostHandle is AddHandle for a handle given to foreign code (the C
// ABI's handle table): only such a handle's holder is ever given the
// storage's address (PinnedPointer).
func (s *Storage) AddHostHandle() {
	s.holds.Add(hostHold)
}

// hostHold is a host handle's count in holds: one hold, one host hold.
const hostHold = 1 | 1<<32

// ReleaseHostHandle is ReleaseHandle for a handle from AddHostHandle. With
// the last host handle, a pinned inline storage is unpinned, even while a
// gradient slot still holds it: no foreign code has its address any more
// (and a slot of a collected tensor never lets go of its hold). It reports
// whether this was the last hold of any kind (see Recycle).
func (s *Storage) ReleaseHostHandle() (last bool) {
	v := s.holds.Add(-hostHold)
	if v>>32 == 0 && s.inline && s.pinned.Load() {
		s.unpinInline()
	}
	if int32(v) == 0 {
		s.lastHoldGone()
		return true
	}
	return false
}

// Allocator provides memory for new storages. A host embedding the core (the
// C ABI) installs one that allocates C memory, so the bytes can be handed out
// to foreign code without breaking cgo's pointer rules.
type Allocator interface {
	// Alloc returns nbytes of memory, zero-filled when zeroed is set, and a
	// function that frees it. A nil free function means Go heap memory, left
	// to the garbage collector (and pinned before its address leaves Go).
	// A request that cannot be satisfied is an error of kind errs.Memory;
	// Go-heap memory is checked with CheckHeap first, since Go cannot
	// recover from failing to allocate it.
	Alloc(nbytes int, zeroed bool) (data []byte, free func(), err error)
}

// BlockAllocator is an optional capability of an Allocator: memory that
// FreeBlock takes back, instead of a free function made per allocation (a
// closure: one more heap allocation on every op).
type BlockAllocator interface {
	Allocator
	// AllocBlock returns nbytes of memory, zero-filled when zeroed is set;
	// goHeap reports Go heap memory, left to the garbage collector as with
	// a nil free function from Alloc.
	AllocBlock(nbytes int, zeroed bool) (data []byte, goHeap bool, err error)
	// FreeBlock frees memory from AllocBlock, given exactly as returned.
	FreeBlock(data []byte)
}

// InlineAllocator is an optional capability of a BlockAllocator whose
// allocations of up to InlineBytes() bytes are Go heap memory: the storage
// then holds bytes of at most that size (and at most inlineBytes) in its
// own allocation, which saves one heap allocation per small op result.
type InlineAllocator interface {
	BlockAllocator
	InlineBytes() int
}

// inlineBytes is the largest storage kept in one allocation with its bytes.
const inlineBytes = 64

// inlineStorage is a storage and its bytes in one object of 128 bytes (a size
// class that is a multiple of 64, so buf is 64-byte aligned).
type inlineStorage struct {
	buf [inlineBytes]byte
	s   Storage
	_   [128 - inlineBytes - unsafe.Sizeof(Storage{})]byte
}

type goAllocator struct{}

func (goAllocator) Alloc(n int, _ bool) (data []byte, free func(), err error) {
	if err := CheckHeap(n, 1, "a tensor"); err != nil {
		return nil, nil, err // Go cannot recover from failing to map it
	}
	defer func() {
		if recover() != nil { // makeslice: len out of range (more than the address space)
			data, err = nil, ErrTooLarge
		}
	}()
	return make([]byte, n), nil, nil
}

var allocator atomic.Value // of allocatorBox

type allocatorBox struct{ a Allocator }

func init() { allocator.Store(allocatorBox{goAllocator{}}) }

// SetAllocator installs the allocator for new storages. Hosts call it once at
// start-up, before any tensor is created; nil restores Go's allocator.
func SetAllocator(a Allocator) {
	if a == nil {
		a = goAllocator{}
	}
	allocator.Store(allocatorBox{a})
}

// ErrTooLarge is returned for allocations whose size does not fit; its kind
// is errs.Memory.
var ErrTooLarge error = &errs.Error{Kind: errs.Memory, Err: errors.New("tensor: allocation size overflows")}

// NewStorage allocates nbytes of zeroed memory with the installed Allocator.
func NewStorage(nbytes int) (*Storage, error) { return newStorage(nbytes, true) }

// NewStorageUninit allocates nbytes whose contents are undefined, for
// outputs that a kernel overwrites entirely.
func NewStorageUninit(nbytes int) (*Storage, error) { return newStorage(nbytes, false) }

func newStorage(nbytes int, zeroed bool) (*Storage, error) {
	if nbytes < 0 {
		return nil, ErrTooLarge
	}
	var data []byte
	var owned *ownedMemory // nil: Go heap memory
	var err error
	switch a := allocator.Load().(allocatorBox).a.(type) {
	case InlineAllocator:
		if nbytes > 0 && nbytes <= inlineBytes && nbytes <= a.InlineBytes() {
			// One allocation for the storage and its bytes (Go memory,
			// zeroed, 64-byte aligned: the object is in a size class that
			// is a multiple of 64 and starts with the bytes).
			p := newInlineStorage()
			p.s.data, p.s.goMemory, p.s.inline = p.buf[:nbytes:nbytes], true, true
			return &p.s, nil
		}
		var goHeap bool
		if data, goHeap, err = a.AllocBlock(nbytes, zeroed); err == nil && !goHeap {
			owned = &ownedMemory{block: a, data: data}
		}
	case BlockAllocator:
		var goHeap bool
		if data, goHeap, err = a.AllocBlock(nbytes, zeroed); err == nil && !goHeap {
			owned = &ownedMemory{block: a, data: data}
		}
	default:
		var free func()
		if data, free, err = a.Alloc(nbytes, zeroed); err == nil && free != nil {
			owned = &ownedMemory{free: free}
		}
	}
	if err != nil {
		return nil, err
	}
	if owned == nil {
		return &Storage{data: data, goMemory: true}, nil
	}
	p := new(paddedStorage)
	s := &p.s
	s.data, s.owned = data, owned
	if nbytes <= youngBytes {
		young.add(s)
	} else {
		addCleanup(s)
	}
	return s, nil
}

func addCleanup(s *Storage) {
	cleanupsAdded.Add(1)
	runtime.AddCleanup(s, func(m *ownedMemory) { m.release() }, s.owned)
}

// cleanupsAdded counts addCleanup's registrations (for tests).
var cleanupsAdded atomic.Int64

// young holds small storages (owned, or borrowed with a release hook) whose
// cleanup is not registered yet.
// Most op results are freed early (their handle goes, or the gradient slot
// lets go) within a few calls, and then never need a cleanup: registering
// one costs more than an op on a small tensor. So registration waits until
// a storage is youngKeep storages old, and happens only for those still
// holding memory. Registering the newest ones too would register nearly all
// of them: a host may batch its handle releases (the Python extension
// sends 64 at a time), so the storages made just before registration are
// still held then even when they die at once. The list keeps its storages
// reachable meanwhile, which is why only small ones (youngBytes) wait;
// FlushYoung ends the wait (hosts call it before collecting garbage on
// purpose).
var young youngList

const (
	youngMax   = 256 // storages the list holds at most
	youngKeep  = 128 // the newest, kept waiting when the list is full
	youngBytes = 64 << 10
)

type youngList struct {
	mu   sync.Mutex
	list []*Storage
}

func (y *youngList) add(s *Storage) {
	y.mu.Lock()
	if y.list == nil {
		y.list = make([]*Storage, 0, youngMax)
	}
	y.list = append(y.list, s)
	var batch []*Storage
	if len(y.list) == youngMax {
		// the oldest go to registration, the newest keep waiting
		old := youngMax - youngKeep
		batch = y.list[:old:old]
		y.list = append(make([]*Storage, 0, youngMax), y.list[old:]...)
	}
	y.mu.Unlock()
	register(batch)
}

// register gives every storage of batch that still holds memory its cleanup.
func register(batch []*Storage) {
	for _, s := range batch {
		if !s.owned.done.Load() {
			addCleanup(s)
		}
	}
}

// FlushYoung registers the cleanups that are still waiting (see young), so
// that the next garbage collection frees every unreachable storage.
func FlushYoung() {
	young.mu.Lock()
	batch := young.list
	young.list = nil
	young.mu.Unlock()
	register(batch)
}

// paddedStorage puts a storage with a cleanup in a larger size class. The
// runtime keeps a span's cleanups in a list that every AddCleanup walks, so
// fewer objects per span (32 instead of 170) make registering one cheap.
type paddedStorage struct {
	s Storage
	_ [192]byte
}

// BorrowStorage wraps memory owned elsewhere, without copying. release, if not
// nil, runs once: when the last host handle goes from a storage that was
// never shared (as owned memory is freed early, see ReleaseHandle), or else
// when no Go object refers to the storage any more. A read-only storage is
// never written by any kernel: results always go to new storage.
//
// A small borrowed storage waits in the young list for its cleanup, as
// small owned ones do: most are lent for one call (a NumPy gradient given
// to backward, a from_numpy result dropped at once) and released early, and
// registering a cleanup cost more than the rest of the borrow.
func BorrowStorage(data []byte, readOnly bool, release func()) *Storage {
	if release == nil {
		return &Storage{data: data, readOnly: readOnly}
	}
	return lent(data, readOnly, &ownedMemory{free: release})
}

// LendStorage is BorrowStorage for a host that tracks its loans by token:
// returned(token, len(data)) runs once, when BorrowStorage's release would.
// returned should be a plain function, not a closure: then a loan allocates
// no release function (a NumPy operand is lent for every call that takes
// one).
func LendStorage(data []byte, readOnly bool, token int64, returned func(token int64, n int)) *Storage {
	if returned == nil {
		return &Storage{data: data, readOnly: readOnly}
	}
	return lent(data, readOnly, &ownedMemory{returned: returned, token: token, data: data})
}

func lent(data []byte, readOnly bool, m *ownedMemory) *Storage {
	s := &Storage{data: data, readOnly: readOnly, owned: m}
	if len(data) <= youngBytes {
		young.add(s)
	} else {
		addCleanup(s)
	}
	return s
}

var (
	pinMu sync.Mutex
	// inlinePins holds the Pinner of every pinned inline storage, until its
	// last host handle goes (unpinInline).
	inlinePins = map[*Storage]*runtime.Pinner{}
)

// PinnedPointer is Pointer for an address that leaves Go: Go heap memory
// (small storages, see Allocator) is pinned first, so foreign code may keep
// the address as long as it keeps a host handle (AddHostHandle) on the
// storage; the caller holds one. Other memory is returned as it is.
//
// Bytes in their own allocation stay pinned until the storage is collected
// (a cleanup on the storage unpins them). Inline bytes (InlineAllocator)
// cannot be unpinned that way: the Pinner refers to the storage's own
// allocation, so a cleanup on the storage would keep it reachable forever
// (every exported 1-element result leaked), and the runtime has been seen
// to corrupt its heap with such self-referencing cleanups on interior
// pointers (docs/architecture.md). They stay pinned until the storage's
// last host handle goes instead (ReleaseHostHandle), which is when the
// foreign code that was given the address has let it go too.
func (s *Storage) PinnedPointer() unsafe.Pointer {
	p := s.Pointer()
	if p == nil || !s.goMemory || (!s.inline && s.pinned.Load()) {
		return p
	}
	pinMu.Lock()
	defer pinMu.Unlock()
	if !s.pinned.Load() {
		pn := new(runtime.Pinner)
		pn.Pin(p)
		if s.inline {
			inlinePins[s] = pn
		} else {
			runtime.AddCleanup(s, func(pn *runtime.Pinner) { pn.Unpin() }, pn)
		}
		s.pinned.Store(true)
	}
	return p
}

// unpinInline gives back the pin of an inline storage whose last host
// handle went, unless a new one came meanwhile (it re-pins on its next
// export).
func (s *Storage) unpinInline() {
	pinMu.Lock()
	defer pinMu.Unlock()
	if s.holds.Load()>>32 != 0 || !s.pinned.Load() {
		return
	}
	inlinePins[s].Unpin()
	delete(inlinePins, s)
	s.pinned.Store(false)
}

// PinnedInline reports how many inline storages are pinned (a leak check).
func PinnedInline() int {
	pinMu.Lock()
	defer pinMu.Unlock()
	return len(inlinePins)
}

// Bytes returns the storage's memory.
func (s *Storage) Bytes() []byte { return s.data }

// Len returns the storage size in bytes.
func (s *Storage) Len() int { return len(s.data) }

// ReadOnly reports whether the storage was borrowed read-only.
func (s *Storage) ReadOnly() bool { return s.readOnly }

// Pointer returns the address of the first byte (nil for an empty storage).
func (s *Storage) Pointer() unsafe.Pointer {
	if len(s.data) == 0 {
		return nil
	}
	return unsafe.Pointer(&s.data[0])
}
