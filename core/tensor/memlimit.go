package tensor

import (
	"math"
	"sync"

	"github.com/pylucid/pylucid/core/errs"
)

// Go's runtime cannot recover from running out of memory: an allocation it
// cannot map ends the process ("fatal error: runtime: out of memory"). So
// every Go-heap allocation whose size follows from user input (a shape, an
// element count) is checked against HeapLimit first, and one above it is a
// Memory error (Python's MemoryError) instead. The limit is the machine's
// physical memory plus swap (on Linux; see heapLimit): with the kernel's
// default overcommit policy a single mapping larger than that is always
// refused, which is exactly the case that would otherwise be fatal. Smaller
// requests are left to the system, like any C allocation.
//
// Memory for tensors in a host that installs a C allocator (the Python
// library) never comes from Go's heap; there a failed allocation is a plain
// out-of-memory error. Kernels keep their own Go-heap scratch bounded,
// whatever the input size.

// HeapLimit returns the largest Go-heap allocation, in bytes, whose size
// follows from user input that the library attempts.
func HeapLimit() int { return heapLimitOnce() }

var heapLimitOnce = sync.OnceValue(func() int {
	if n := heapLimit(); n > 0 {
		return n
	}
	return math.MaxInt
})

// CheckHeap returns a Memory error unless n elements of size bytes each fit
// in HeapLimit; what is the allocation for, for the message.
func CheckHeap(n, size int, what string) error {
	if n < 0 || size < 0 || (size > 0 && n > HeapLimit()/size) {
		return errs.Memoryf("out of memory: %s needs %d elements of %d bytes, more than this machine's %d bytes of memory",
			what, n, size, HeapLimit())
	}
	return nil
}
