package tests_go

import (
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/tensor"
)

// blockAllocator is a tensor.BlockAllocator over Go memory that records what
// it hands out and what comes back; blocks of at most goBytes are "Go heap"
// memory, as the C ABI's allocator does for tiny tensors.
type blockAllocator struct {
	mu      sync.Mutex
	live    map[unsafe.Pointer]int // block -> length
	freed   int
	goBytes int
}

func (a *blockAllocator) Alloc(n int, zeroed bool) ([]byte, func(), error) {
	panic("Alloc called on a BlockAllocator")
}

func (a *blockAllocator) AllocBlock(n int, _ bool) ([]byte, bool, error) {
	b := make([]byte, n)
	if n <= a.goBytes {
		return b, true, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.live[unsafe.Pointer(unsafe.SliceData(b))] = n
	return b, false, nil
}

func (a *blockAllocator) FreeBlock(b []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := unsafe.Pointer(unsafe.SliceData(b))
	if n, ok := a.live[p]; !ok || n != len(b) {
		panic("FreeBlock of a block not handed out, or with another length")
	}
	delete(a.live, p)
	a.freed++
}

func (a *blockAllocator) counts() (live, freed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.live), a.freed
}

// An allocator with the BlockAllocator capability gets each block back exactly
// once through FreeBlock, with the slice it returned: at the last handle's
// release, or from the collector for a dropped storage. Go heap blocks never
// come back.
func TestBlockAllocatorGetsEachBlockBackOnce(t *testing.T) {
	a := &blockAllocator{live: map[unsafe.Pointer]int{}, goBytes: 64}
	tensor.SetAllocator(a)
	t.Cleanup(func() { tensor.SetAllocator(poisonAllocator{}) })

	s, err := tensor.NewStorage(4000)
	require.NoError(t, err)
	s.AddHandle()
	s.ReleaseHandle() // the last hold: freed now
	live, freed := a.counts()
	require.Equal(t, 0, live)
	require.Equal(t, 1, freed)

	tiny, err := tensor.NewStorage(16) // Go heap: nothing to free
	require.NoError(t, err)
	tiny.AddHandle()
	tiny.ReleaseHandle()
	_, freed = a.counts()
	require.Equal(t, 1, freed)

	for i := 0; i < 5; i++ { // dropped without a handle: the collector frees them
		_, err := tensor.NewStorage(100000)
		require.NoError(t, err)
	}
	tensor.FlushYoung()
	for k := 0; k < 500; k++ {
		if live, _ := a.counts(); live == 0 {
			break
		}
		runtime.GC()
		time.Sleep(2 * time.Millisecond)
	}
	live, freed = a.counts()
	require.Equal(t, 0, live, "dropped storages not freed")
	require.Equal(t, 6, freed)
}
