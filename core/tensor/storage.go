package tensor

import (
	"errors"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Storage is a flat block of bytes that one or more tensors view.
//
// It either owns its memory (allocated by the package Allocator) or borrows
// memory that belongs to someone else (a NumPy buffer, a DLPack producer).
// Either way, the release hook given at creation runs exactly once, after the
// last Go reference to the Storage is gone (runtime.AddCleanup), so the
// owner of borrowed memory learns when Go no longer needs it.
type Storage struct {
	data     []byte
	readOnly bool
}

// Allocator provides memory for new storages. A host embedding the core (the
// C ABI) installs one that allocates C memory, so the bytes can be handed out
// to foreign code without breaking cgo's pointer rules.
type Allocator interface {
	// Alloc returns nbytes of memory, zero-filled when zeroed is set, and a
	// function that frees it.
	Alloc(nbytes int, zeroed bool) (data []byte, free func(), err error)
}

type goAllocator struct{}

func (goAllocator) Alloc(n int, _ bool) (data []byte, free func(), err error) {
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

// ErrTooLarge is returned for allocations whose size does not fit.
var ErrTooLarge = errors.New("tensor: allocation size overflows")

// NewStorage allocates nbytes of zeroed memory with the installed Allocator.
func NewStorage(nbytes int) (*Storage, error) { return newStorage(nbytes, true) }

// NewStorageUninit allocates nbytes whose contents are undefined, for
// outputs that a kernel overwrites entirely.
func NewStorageUninit(nbytes int) (*Storage, error) { return newStorage(nbytes, false) }

func newStorage(nbytes int, zeroed bool) (*Storage, error) {
	if nbytes < 0 {
		return nil, ErrTooLarge
	}
	data, free, err := allocator.Load().(allocatorBox).a.Alloc(nbytes, zeroed)
	if err != nil {
		return nil, err
	}
	s := &Storage{data: data}
	if free != nil {
		runtime.AddCleanup(s, func(f func()) { f() }, free)
	}
	return s, nil
}

// BorrowStorage wraps memory owned elsewhere, without copying. release, if not
// nil, runs once when no Go object refers to the storage any more. A read-only
// storage is never written by any kernel: results always go to new storage.
func BorrowStorage(data []byte, readOnly bool, release func()) *Storage {
	s := &Storage{data: data, readOnly: readOnly}
	if release != nil {
		runtime.AddCleanup(s, func(f func()) { f() }, release)
	}
	return s
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
