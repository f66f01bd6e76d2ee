package tensor

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// inlineAllocator serves storages of up to inlineBytes from the storage's own
// allocation, as the C ABI's allocator does.
type inlineAllocator struct{ blockCounter }

func (inlineAllocator) InlineBytes() int { return inlineBytes }

var inlineSink *inlineStorage

// An inline storage is one 128-byte object (a size class that is a multiple
// of 64, so its bytes at the start are 64-byte aligned): a field added to
// Storage must not grow it.
func TestInlineStorageIs128Bytes(t *testing.T) {
	if got := unsafe.Sizeof(inlineStorage{}); got != 128 {
		t.Fatalf("inlineStorage is %d bytes", got)
	}
	for i := 0; i < 64; i++ {
		inlineSink = new(inlineStorage) // on the heap, as newStorage's
		if p := uintptr(unsafe.Pointer(&inlineSink.buf[0])); p%64 != 0 {
			t.Fatalf("inline bytes at %#x", p)
		}
	}
}

// An exported inline storage (a 1-element result whose address went to NumPy)
// is pinned while a host handle holds it, and collected once the last hold
// is gone.
// Before, its pin was given back by a cleanup on the storage, which the pin
// itself kept reachable: every exported small result leaked.
func TestExportedInlineStorageUnpinnedWithItsLastHold(t *testing.T) {
	SetAllocator(inlineAllocator{blockCounter{new(atomic.Int64)}})
	t.Cleanup(func() { SetAllocator(nil) })
	const n = 200
	var collected atomic.Int64
	for i := 0; i < n; i++ {
		s, err := NewStorage(4)
		if err != nil {
			t.Fatal(err)
		}
		if !s.inline || uintptr(unsafe.Pointer(s))-uintptr(s.Pointer()) != inlineBytes {
			t.Fatal("a 4-byte storage is not inline")
		}
		s.AddHostHandle()
		s.AddHostHandle()
		if p := s.PinnedPointer(); p != s.Pointer() {
			t.Fatal("PinnedPointer moved the bytes")
		}
		_ = s.PinnedPointer() // pinned once
		s.ReleaseHostHandle()
		if !s.pinned.Load() {
			t.Fatal("unpinned while a host handle remains")
		}
		s.ReleaseHostHandle()
		if s.pinned.Load() {
			t.Fatal("still pinned after the last hold went")
		}
		runtime.AddCleanup(s, func(*atomic.Int64) { collected.Add(1) }, &collected)
	}
	checkUnpinnedAndCollected(t, &collected, n)
}

// A hold that comes after the pin went re-pins on the next export.
func TestInlineStorageRepinnedOnItsNextExport(t *testing.T) {
	SetAllocator(inlineAllocator{blockCounter{new(atomic.Int64)}})
	t.Cleanup(func() { SetAllocator(nil) })
	s, err := NewStorage(8)
	if err != nil {
		t.Fatal(err)
	}
	s.AddHostHandle()
	s.PinnedPointer()
	s.ReleaseHostHandle()
	s.AddHostHandle()
	if s.pinned.Load() {
		t.Fatal("pinned before its export")
	}
	s.PinnedPointer()
	if !s.pinned.Load() || PinnedInline() != 1 {
		t.Fatal("not pinned again")
	}
	s.ReleaseHostHandle()
	if PinnedInline() != 0 {
		t.Fatal("the second pin was not given back")
	}
}

// A gradient slot's hold (AddHandle) keeps no pin: a leaf's .grad read from
// Python is pinned while Python holds it, and once Python let go, the
// storage is collected with the leaf even though the slot of a collected
// tensor never gives its hold back.
func TestGradSlotHoldKeepsNoPin(t *testing.T) {
	SetAllocator(inlineAllocator{blockCounter{new(atomic.Int64)}})
	t.Cleanup(func() { SetAllocator(nil) })
	const n = 100
	var collected atomic.Int64
	for i := 0; i < n; i++ {
		s, err := NewStorage(4)
		if err != nil {
			t.Fatal(err)
		}
		s.AddHandle()     // the slot
		s.AddHostHandle() // Python reads .grad
		s.PinnedPointer() // and its address (numpy())
		s.ReleaseHostHandle()
		if s.pinned.Load() || !s.Held() {
			t.Fatal("pinned after its last host handle, or the slot's hold lost")
		}
		runtime.AddCleanup(s, func(*atomic.Int64) { collected.Add(1) }, &collected)
	}
	checkUnpinnedAndCollected(t, &collected, n)
}

// checkUnpinnedAndCollected checks that no inline storage is pinned and that
// the n storages whose cleanups count into collected are collected (a
// bounded wait: a leak fails, never hangs).
func checkUnpinnedAndCollected(t *testing.T, collected *atomic.Int64, n int64) {
	t.Helper()
	if got := PinnedInline(); got != 0 {
		t.Fatalf("%d inline storages still pinned", got)
	}
	for i := 0; i < 100 && collected.Load() < n; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := collected.Load(); got != n {
		t.Fatalf("%d of %d storages collected", got, n)
	}
}
