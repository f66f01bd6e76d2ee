package tensor

import (
	"sync"
	"unsafe"
)

// Reusing op results' objects.
//
// A host that hands tensors out by handle drops most small op results
// within a few calls of making them, and every result cost two heap
// allocations (the tensor with its dims, and a small storage with its
// bytes) plus their share of garbage collection: measured from Python, a
// third of a 1-element minimum's native time. Recycle takes back the
// objects of a result whose last host handle went, when nothing else can
// refer to them, and alloc reuses them.
//
// Nothing else refers to a tensor object when it came from alloc (or is
// the sole view of a storage just made, NewSoleView: a lent NumPy buffer)
// and was never marked kept (MarkKept): the autograd graph refers to a
// tensor only through its gradFn (an output) or an AccumulateGrad node (a
// leaf that requires grad), both of which mark it kept, and a host marks
// kept every tensor whose pointer it hands to code that may keep it.
// Nothing else refers to its storage object when no hold is left (host
// handles, gradient slots, backward runs) and it was never shared (views,
// saved tensors and detached tensors mark it shared). Recycle checks
// those, and reuses the storage object only when its bytes live inside it
// (an inline storage), so that nothing else needs to be given back.

var (
	freshTensors   sync.Pool // of *freshTensor, cleared
	inlineStorages sync.Pool // of *inlineStorage, cleared
)

func newFreshTensor() *freshTensor {
	if v, ok := freshTensors.Get().(*freshTensor); ok {
		return v
	}
	return new(freshTensor)
}

func newInlineStorage() *inlineStorage {
	if v, ok := inlineStorages.Get().(*inlineStorage); ok {
		return v
	}
	return new(inlineStorage)
}

// MarkKept records that a pointer to t may be kept beyond its host handles
// (a host calls it before giving t to code that may keep it), so that
// Recycle never reuses t.
func (t *Tensor) MarkKept() {
	if t.flags.Load()&flagKept == 0 {
		t.flags.Or(flagKept)
	}
}

// Recycle is called by a host when it let go of its last reference to t:
// the handle whose release took the storage's last hold
// (Storage.ReleaseHostHandle reported it), so that of two handles to t
// released at once only one calls it (two calls would hand t to two later
// results). If nothing else can refer to t (see above), its objects are
// cleared and reused by a later result. The caller must not use t
// afterwards.
func Recycle(t *Tensor) {
	s := t.storage
	if !t.fresh || t.flags.Load() != 0 || s == nil || s.holds.Load() != 0 || s.shared.Load() {
		return
	}
	if s.inline && !s.pinned.Load() {
		p := (*inlineStorage)(unsafe.Add(unsafe.Pointer(s), -int(unsafe.Offsetof(inlineStorage{}.s))))
		*p = inlineStorage{}
		inlineStorages.Put(p)
	}
	f := (*freshTensor)(unsafe.Pointer(t)) // t is f.t, its first field (soleView)
	*f = freshTensor{}
	freshTensors.Put(f)
}
