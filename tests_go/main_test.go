package tests_go

import (
	"os"
	"testing"

	"github.com/pylucid/pylucid/core/tensor"
)

// poisonAllocator fills memory that is allowed to be uninitialised with a
// NaN-ish byte pattern, so a kernel that leaves an output element unwritten
// shows up in every comparison.
type poisonAllocator struct{}

func (poisonAllocator) Alloc(n int, zeroed bool) (b []byte, free func(), err error) {
	if err := tensor.CheckHeap(n, 1, "a tensor"); err != nil {
		return nil, nil, err // as goAllocator: Go cannot recover from failing to map it
	}
	defer func() {
		if recover() != nil { // larger than the address space, as goAllocator reports it
			b, err = nil, tensor.ErrTooLarge
		}
	}()
	b = make([]byte, n)
	if !zeroed {
		for i := range b {
			b[i] = 0xA5
		}
	}
	return b, nil, nil
}

func TestMain(m *testing.M) {
	tensor.SetAllocator(poisonAllocator{})
	os.Exit(m.Run())
}
