package tensor

import (
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/pylucid/pylucid/core/dtype"
)

// hostResult makes a 1-element float32 result as the C ABI does (inline
// storage, one host handle), with value v.
func hostResult(t *testing.T, v float32) *Tensor {
	t.Helper()
	r, err := Empty(dtype.Float32, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	f32(r)[0] = v
	r.storage.AddHostHandle()
	return r
}

// f32 is r's float32 elements (r contiguous, offset 0).
func f32(r *Tensor) []float32 {
	return unsafe.Slice((*float32)(r.storage.Pointer()), r.Numel())
}

// dropHandle is the C ABI's release of a tensor's handle.
func dropHandle(r *Tensor) {
	if r.storage.ReleaseHostHandle() {
		Recycle(r)
	}
}

// recycled reports whether Recycle took r (it clears what it takes).
func recycled(r *Tensor) bool { return r.storage == nil }

type otherNode struct{}

func (otherNode) Name() string { return "other" }

// A result whose last handle goes is reused unless something else may still
// refer to it: each case does one such thing before the release, and a
// reused object would have been cleared (and handed to a later result)
// under it.
func TestRecycleOnlyWhatNothingElseRefersTo(t *testing.T) {
	SetAllocator(inlineAllocator{blockCounter{new(atomic.Int64)}})
	t.Cleanup(func() { SetAllocator(nil) })
	cases := []struct {
		name  string
		do    func(t *testing.T, r *Tensor) (undo func())
		reuse bool
	}{
		{"nothing", func(*testing.T, *Tensor) func() { return nil }, true},
		{"a second host handle", func(t *testing.T, r *Tensor) func() {
			r.storage.AddHostHandle()
			return func() {
				if !r.storage.ReleaseHostHandle() {
					t.Fatal("the second of two handles was not the last hold")
				}
			}
		}, false},
		{"a gradient slot holds it", func(t *testing.T, r *Tensor) func() {
			leaf := hostResult(t, 0)
			leaf.SetGrad(r)
			return nil
		}, false},
		{"it has a gradient", func(t *testing.T, r *Tensor) func() {
			r.SetGrad(hostResult(t, 2))
			return nil
		}, false},
		{"requires grad, then not", func(t *testing.T, r *Tensor) func() {
			if err := r.SetRequiresGrad(true); err != nil {
				t.Fatal(err)
			}
			if err := r.SetRequiresGrad(false); err != nil {
				t.Fatal(err)
			}
			return nil
		}, false},
		{"an op's output", func(_ *testing.T, r *Tensor) func() {
			r.SetGradFn(otherNode{}, 0)
			return nil
		}, false},
		{"a view of it", func(t *testing.T, r *Tensor) func() {
			if _, err := r.Reshape([]int{}); err != nil {
				t.Fatal(err)
			}
			return nil
		}, false},
		{"detached", func(_ *testing.T, r *Tensor) func() { r.Detach(); return nil }, false},
		{"marked kept", func(_ *testing.T, r *Tensor) func() { r.MarkKept(); return nil }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// sync.Pool drops some items under the race detector: try
			// several times for a reuse.
			reused := false
			for try := 0; try < 32 && !reused; try++ {
				r := hostResult(t, 1)
				s := r.storage
				undo := c.do(t, r)
				dropHandle(r)
				if got := recycled(r); got != c.reuse {
					t.Fatalf("recycled = %v", got)
				}
				if undo != nil {
					undo()
				}
				if !c.reuse {
					if f32(r)[0] != 1 || r.storage != s || len(r.shape) != 1 {
						t.Fatal("a tensor that was not recycled changed")
					}
					return
				}
				n := hostResult(t, 3)
				reused = n == r && n.storage == s
				if got := f32(n)[0]; got != 3 || n.Numel() != 1 || n.RequiresGrad() || n.Grad() != nil {
					t.Fatalf("new result: %v, requires grad %v", got, n.RequiresGrad())
				}
				dropHandle(n)
			}
			if !reused {
				t.Fatal("never reused")
			}
		})
	}
}

// A reused object comes back as new: zero-filled for New, with none of the
// old tensor's state.
func TestRecycledResultsStartClean(t *testing.T) {
	SetAllocator(inlineAllocator{blockCounter{new(atomic.Int64)}})
	t.Cleanup(func() { SetAllocator(nil) })
	for i := 0; i < 64; i++ {
		r := hostResult(t, 7)
		r.wrapped, r.offset = true, 3 // state a reuse must not carry over
		dropHandle(r)
		z, err := New(dtype.Float32, []int{2, 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range f32(z) {
			if v != 0 {
				t.Fatalf("New gave %v", f32(z))
			}
		}
		if z.IsWrappedNumber() || z.RequiresGrad() || z.Offset() != 0 || z.storage.Held() || z.storage.shared.Load() {
			t.Fatal("a reused tensor kept old state")
		}
	}
}

// A lent buffer's tensor (NewSoleView) is reused too, once its loan is
// returned; its storage, which is not inline, is not.
func TestRecycleSoleViews(t *testing.T) {
	returned := 0
	for i := 0; i < 8; i++ {
		s := LendStorage(make([]byte, 400), false, int64(i), func(int64, int) { returned++ })
		v, err := NewSoleView(s, dtype.Float32, []int{10, 10}, []int{10, 1}, 0)
		if err != nil {
			t.Fatal(err)
		}
		s.AddHostHandle()
		dropHandle(v)
		if !recycled(v) || s.data != nil || s.owned == nil {
			t.Fatalf("view recycled %v, storage %d bytes", recycled(v), len(s.data))
		}
	}
	if returned != 8 {
		t.Fatalf("%d of 8 loans returned", returned)
	}
	s := LendStorage(make([]byte, 400), false, 0, func(int64, int) {})
	v, err := NewView(s, dtype.Float32, []int{100}, []int{1}, 0) // shared: a view a host made
	if err != nil {
		t.Fatal(err)
	}
	s.AddHostHandle()
	dropHandle(v)
	if recycled(v) {
		t.Fatal("a view of a shared storage was recycled")
	}
}
