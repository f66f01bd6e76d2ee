package tests_go

// The gradient slot holds its storage like a host handle: replacing or
// clearing .grad frees an unshared gradient at once. These tests run that
// with an allocator whose free poisons memory, so any use after free shows.

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// freePoisonAllocator hands out Go memory with a free function that fills
// it with 0xA5 bytes (a float32 of about -2.9e-16) and counts frees.
type freePoisonAllocator struct{ frees *atomic.Int64 }

func (a freePoisonAllocator) Alloc(n int, zeroed bool) ([]byte, func(), error) {
	b := make([]byte, n)
	return b, func() {
		for i := range b {
			b[i] = 0xA5
		}
		a.frees.Add(1)
	}, nil
}

func withFreePoison(t *testing.T) *atomic.Int64 {
	frees := new(atomic.Int64)
	tensor.SetAllocator(freePoisonAllocator{frees})
	t.Cleanup(func() { tensor.SetAllocator(poisonAllocator{}) })
	return frees
}

func TestClearingGradFreesItAtOnce(t *testing.T) {
	frees := withFreePoison(t)
	x := leaf(t, fromVals(t, dtype.Float32, []int{64}, make([]float64, 64)...))
	c := fromVals(t, dtype.Float32, []int{64}, make([]float64, 64)...)
	y, err := ops.Minimum(nil, x, c)
	require.NoError(t, err)
	s, err := ops.Sum(nil, y, nil, false)
	require.NoError(t, err)
	require.NoError(t, ops.Backward(nil, []*tensor.Tensor{s}, nil, false, false))
	g := x.Grad()
	require.NotNil(t, g)
	before := frees.Load()
	x.SetGrad(nil)
	require.Greater(t, frees.Load(), before, "the gradient's memory went back when the slot let go")

	// A gradient something else holds stays.
	y, _ = ops.Minimum(nil, x, c)
	s, _ = ops.Sum(nil, y, nil, false)
	require.NoError(t, ops.Backward(nil, []*tensor.Tensor{s}, nil, false, false))
	held := x.HoldGrad()
	x.SetGrad(nil)
	for _, v := range held.Float64s() {
		require.Equal(t, 1.0, v)
	}
	held.Storage().ReleaseHandle()
}

// Backward accumulating into x while another goroutine reads and clears
// x.grad: every gradient read is whole (a count of backward passes), never
// poisoned memory.
func TestGradSlotUnderConcurrentAccumulateAndClear(t *testing.T) {
	withFreePoison(t)
	const n, passes = 1 << 15, 300
	x := leaf(t, fromVals(t, dtype.Float32, []int{n}, make([]float64, n)...))
	c := fromVals(t, dtype.Float32, []int{n}, make([]float64, n)...)
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < passes; i++ {
			y, err := ops.Minimum(nil, x, c)
			if err == nil {
				var s *tensor.Tensor
				if s, err = ops.Sum(nil, y, nil, false); err == nil {
					err = ops.Backward(nil, []*tensor.Tensor{s}, nil, false, false)
				}
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	var bad atomic.Int64
	go func() {
		defer wg.Done()
		for i := 0; i < passes; i++ {
			if g := x.HoldGrad(); g != nil {
				for _, v := range g.Float64s() {
					if v < 1 || v > passes || v != math.Trunc(v) {
						bad.Add(1)
					}
				}
				g.Storage().ReleaseHandle()
			}
			if i%3 == 0 {
				x.SetGrad(nil)
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	require.Zero(t, bad.Load(), "gradient values read from freed memory")
}

// Small owned storages get their cleanup in batches (tensor.FlushYoung ends
// the wait): dropped ones are all freed after a flush and collections.
func TestDroppedSmallStoragesAreFreedAfterFlush(t *testing.T) {
	frees := withFreePoison(t)
	tensor.FlushYoung()
	for i := 0; i < 10; i++ {
		_, err := tensor.NewStorage(1024)
		require.NoError(t, err)
	}
	freed := func() bool {
		for k := 0; k < 500 && frees.Load() < 10; k++ {
			runtime.GC()
			time.Sleep(2 * time.Millisecond)
		}
		return frees.Load() >= 10
	}
	tensor.FlushYoung()
	require.True(t, freed(), "dropped storages freed after FlushYoung: %d of 10", frees.Load())
	// Past a batch's worth, registration needs no flush.
	frees.Store(0)
	for i := 0; i < 400; i++ {
		_, err := tensor.NewStorage(1024)
		require.NoError(t, err)
	}
	for k := 0; k < 500 && frees.Load() < 256; k++ {
		runtime.GC()
		time.Sleep(2 * time.Millisecond)
	}
	require.GreaterOrEqual(t, frees.Load(), int64(256))
}

// A gradient stored in a .grad slot may still sit in other nodes' input
// buffers (add hands one tensor to both inputs); a later accumulation into
// the same leaf replaces it in the slot, and the run's own hold must keep
// it alive until the run ends (found by review: it was freed under the
// engine).
func TestGradientReplacedInItsSlotDuringTheRunStaysAlive(t *testing.T) {
	withFreePoison(t)
	const n = 1000
	ones := make([]float64, n)
	for i := range ones {
		ones[i] = 1
	}
	x := leaf(t, fromVals(t, dtype.Float32, []int{n}, ones...))
	num := func(v float64) *tensor.Tensor {
		s, err := tensor.WrappedScalar(dtype.Float64, v)
		require.NoError(t, err)
		return s
	}
	must := func(y *tensor.Tensor, err error) *tensor.Tensor {
		t.Helper()
		require.NoError(t, err)
		return y
	}
	w := must(ops.Mul(nil, x, num(2)))
	s := must(ops.Add(nil, w, x))
	u := must(ops.Mul(nil, w, num(3)))
	v := must(ops.Mul(nil, x, num(5)))
	y := must(ops.Add(nil, must(ops.Add(nil, u, v)), s))
	loss := must(ops.Sum(nil, must(ops.Mul(nil, y, num(1))), nil, false))
	require.NoError(t, ops.Backward(nil, []*tensor.Tensor{loss}, nil, false, false))
	for i, g := range x.Grad().Float64s() {
		require.Equal(t, 14.0, g, "element %d", i) // 2*3 + 5 + 2 + 1
	}
}

// A borrowed buffer's release hook runs when the last handle to its sole
// tensor goes (tensor.NewSoleView), unless something shared the storage (a
// view): then only the collector runs it. Small and large buffers alike.
func TestBorrowedBufferReleasedWithItsLastHandle(t *testing.T) {
	for _, n := range []int{4, 1 << 20} {
		var released atomic.Int32
		st := tensor.BorrowStorage(make([]byte, 4*n), false, func() { released.Add(1) })
		x, err := tensor.NewSoleView(st, dtype.Float32, []int{n}, []int{1}, 0)
		require.NoError(t, err)
		x.Storage().AddHandle()
		x.Storage().AddHandle() // a second hold (the gradient slot, say)
		x.Storage().ReleaseHandle()
		require.Zero(t, released.Load(), "n=%d: released while a hold remains", n)
		x.Storage().ReleaseHandle()
		require.Equal(t, int32(1), released.Load(), "n=%d: released at the last hold", n)
		runtime.KeepAlive(x)

		// Shared (a view of it exists): the last handle does not release it.
		var released2 atomic.Int32
		st2 := tensor.BorrowStorage(make([]byte, 4*n), false, func() { released2.Add(1) })
		y, err := tensor.NewSoleView(st2, dtype.Float32, []int{n}, []int{1}, 0)
		require.NoError(t, err)
		y.Storage().AddHandle()
		v, err := y.Reshape([]int{1, n})
		require.NoError(t, err)
		y.Storage().ReleaseHandle()
		require.Zero(t, released2.Load(), "n=%d: released under a view", n)
		runtime.KeepAlive(v)
	}
}
