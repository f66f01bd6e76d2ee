package tensor

import (
	"sync/atomic"
	"testing"
)

// blockCounter is a BlockAllocator of memory the storage owns (not Go heap,
// as far as the storage knows), counting frees.
type blockCounter struct{ frees *atomic.Int64 }

func (a blockCounter) AllocBlock(n int, _ bool) ([]byte, bool, error) {
	return make([]byte, n), false, nil
}
func (a blockCounter) FreeBlock([]byte) { a.frees.Add(1) }

func (a blockCounter) Alloc(n int, _ bool) ([]byte, func(), error) {
	return make([]byte, n), func() { a.frees.Add(1) }, nil
}

// A host that releases handles in batches (the Python extension sends up to
// 64 at a time) must not get a cleanup registered for results it dropped at
// once: registration waits until a storage is youngKeep storages old, past
// any such batch. (Registering the newest ones too registered nearly every
// small op result, and the runtime's cleanup records were a tenth of a
// small op's time.)
func TestYoungStoragesReleasedInBatchesGetNoCleanup(t *testing.T) {
	frees := new(atomic.Int64)
	SetAllocator(blockCounter{frees})
	t.Cleanup(func() { SetAllocator(nil) })
	FlushYoung()
	const batch, total = 64, 4 * youngMax
	before := cleanupsAdded.Load()
	var held []*Storage
	for i := 0; i < total; i++ {
		s, err := NewStorageUninit(4000)
		if err != nil {
			t.Fatal(err)
		}
		s.AddHandle()
		held = append(held, s)
		if len(held) == batch {
			for _, h := range held {
				h.ReleaseHandle()
			}
			held = held[:0]
		}
	}
	if got := cleanupsAdded.Load() - before; got != 0 {
		t.Fatalf("%d cleanups registered for %d storages released in batches of %d", got, total, batch)
	}
	if got := frees.Load(); got != total {
		t.Fatalf("%d of %d storages freed at their release", got, total)
	}

	// Storages still held when they come of age do get one.
	before = cleanupsAdded.Load()
	for i := 0; i < youngMax; i++ {
		s, err := NewStorageUninit(4000)
		if err != nil {
			t.Fatal(err)
		}
		s.AddHandle()
		held = append(held, s)
	}
	if got := cleanupsAdded.Load() - before; got != youngMax-youngKeep {
		t.Fatalf("%d cleanups for %d held storages of %d, want %d", got, youngMax, youngMax, youngMax-youngKeep)
	}
	FlushYoung()
	if got := cleanupsAdded.Load() - before; got != youngMax {
		t.Fatalf("after FlushYoung: %d cleanups, want %d", got, youngMax)
	}
	for _, h := range held {
		h.ReleaseHandle()
	}
}
