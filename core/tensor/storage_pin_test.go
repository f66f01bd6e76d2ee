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

// An exported inline storage (a 1-element result whose address went to NumPy)
// is pinned while a host holds it, and collected once the last hold is gone.
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
		s.AddHandle()
		s.AddHandle()
		if p := s.PinnedPointer(); p != s.Pointer() {
			t.Fatal("PinnedPointer moved the bytes")
		}
		_ = s.PinnedPointer() // pinned once
		s.ReleaseHandle()
		if !s.pinned.Load() {
			t.Fatal("unpinned while a hold remains")
		}
		s.ReleaseHandle()
		if s.pinned.Load() {
			t.Fatal("still pinned after the last hold went")
		}
		runtime.AddCleanup(s, func(*atomic.Int64) { collected.Add(1) }, &collected)
	}
	if got := PinnedInline(); got != 0 {
		t.Fatalf("%d inline storages still pinned", got)
	}
	for i := 0; i < 100 && collected.Load() < n; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := collected.Load(); got != n {
		t.Fatalf("%d of %d exported inline storages collected", got, n)
	}
}

// A hold that comes after the pin went re-pins on the next export.
func TestInlineStorageRepinnedOnItsNextExport(t *testing.T) {
	SetAllocator(inlineAllocator{blockCounter{new(atomic.Int64)}})
	t.Cleanup(func() { SetAllocator(nil) })
	s, err := NewStorage(8)
	if err != nil {
		t.Fatal(err)
	}
	s.AddHandle()
	s.PinnedPointer()
	s.ReleaseHandle()
	s.AddHandle()
	if s.pinned.Load() {
		t.Fatal("pinned before its export")
	}
	s.PinnedPointer()
	if !s.pinned.Load() || PinnedInline() != 1 {
		t.Fatal("not pinned again")
	}
	s.ReleaseHandle()
	if PinnedInline() != 0 {
		t.Fatal("the second pin was not given back")
	}
}
