package cpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Internal tests of the team (team.go): every block runs exactly once,
// helpers really take blocks, panics reach the caller and leave the team
// usable, concurrent callers fall back, and the split rule.

func countRuns(t *testing.T, b *Backend, n int) {
	t.Helper()
	runs := make([]atomic.Int32, n)
	b.parallel(n*Chunk, n, func(i int) { runs[i].Add(1) })
	for i := range runs {
		if got := runs[i].Load(); got != 1 {
			t.Fatalf("n=%d threads=%d: block %d ran %d times", n, b.Threads(), i, got)
		}
	}
}

func TestParallelRunsEveryBlockOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		b := New(threads)
		for _, n := range []int{1, 2, 3, 7, 64, 1000} {
			countRuns(t, b, n)
		}
	}
}

// Many goroutines at once: one gets the team, the others fresh goroutines or
// their own loop; all blocks of all jobs still run exactly once.
func TestParallelConcurrentCallers(t *testing.T) {
	b := New(4)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				countRuns(t, b, 1+(g*7+k)%40)
			}
		}()
	}
	wg.Wait()
}

// A helper joins: the caller's first block (the front) waits until another
// goroutine has run a block from the back.
func TestParallelHelperTakesBlocks(t *testing.T) {
	b := New(2)
	var others atomic.Int32
	deadline := time.Now().Add(10 * time.Second)
	b.parallel(16*Chunk, 16, func(i int) {
		if i == 0 {
			for others.Load() == 0 {
				if time.Now().After(deadline) {
					panic("no helper took a block within 10 s")
				}
				runtime.Gosched()
			}
			return
		}
		if i == 15 {
			others.Add(1) // the last block: a helper's first claim
		}
	})
	if others.Load() == 0 {
		t.Fatal("no helper ran a block")
	}
}

// A panic in any block reaches the caller as a panic; the team runs the next
// job normally.
func TestParallelPanicReachesCaller(t *testing.T) {
	b := New(2)
	for _, bad := range []int{0, 5, 15} {
		func() {
			defer func() {
				if r := recover(); r != fmt.Sprint("block ", bad) {
					t.Fatalf("recovered %v, want the panic of block %d", r, bad)
				}
			}()
			b.parallel(16*Chunk, 16, func(i int) {
				if i == bad {
					panic(fmt.Sprint("block ", i))
				}
			})
			t.Fatalf("no panic from block %d", bad)
		}()
		countRuns(t, b, 16)
	}
}

// The split rule: mid-size work is split while a helper is awake or within
// spinFor of the previous request; large work and SetAlwaysSplit always.
func TestSplitRule(t *testing.T) {
	var tm team
	if tm.want(1) {
		t.Fatal("first request with no helper: want = true")
	}
	if !tm.want(1 + int64(spinFor)/2) {
		t.Fatal("request within spinFor of the last: want = false")
	}
	if tm.want(1 + 3*int64(spinFor)) {
		t.Fatal("request long after the last, no helper: want = true")
	}
	tm.start(1) // a fresh helper is awake until it parks
	for !tm.helpers[0].sleeping.Load() {
		time.Sleep(time.Millisecond) // parks spinFor after its start
	}
	if tm.want(1 + 10*int64(spinFor)) {
		t.Fatal("helper parked, last request long ago: want = true")
	}

	b := New(2)
	if b.split(MinParallel - 1) {
		t.Fatal("split below MinParallel")
	}
	if !b.split(WakeParallel) {
		t.Fatal("no split at WakeParallel")
	}
	if New(1).split(WakeParallel) {
		t.Fatal("split with one thread")
	}
	b.SetAlwaysSplit(true)
	time.Sleep(3 * spinFor)
	if !b.split(MinParallel) {
		t.Fatal("SetAlwaysSplit(true): no split at MinParallel")
	}
}
