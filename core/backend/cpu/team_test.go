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

// waitFor polls cond for up to 5 s (yielding, so it works with GOMAXPROCS=1).
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
	return true
}

// The caller's block panics while a helper is inside one: parallel must not
// unwind before the helper is done (it may be writing the caller's memory).
// Found by review.
func TestParallelCallerPanicWaitsForHelper(t *testing.T) {
	b := New(2)
	var inside, finished atomic.Bool
	func() {
		defer func() {
			if r := recover(); r != "caller" {
				t.Fatalf("recovered %v, want the caller's panic", r)
			}
		}()
		b.parallel(16*Chunk, 16, func(i int) {
			switch i {
			case 0:
				if !waitFor(inside.Load) {
					panic("no helper joined")
				}
				panic("caller")
			case 15:
				inside.Store(true)
				time.Sleep(20 * time.Millisecond)
				finished.Store(true)
			}
		})
	}()
	if !finished.Load() {
		t.Fatal("parallel unwound while a helper was still inside a block")
	}
}

// Panics of different types on the caller and a helper, in both orders: one
// of them reaches the caller, the process survives, and no block starts after
// parallel has returned. Found by review (an atomic.Value panicked on the
// second store).
func TestParallelPanicsOfDifferentTypes(t *testing.T) {
	for _, callerFirst := range []bool{true, false} {
		b := New(2)
		var first atomic.Bool
		var returned atomic.Bool
		var late atomic.Int32
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Fatal("no panic reached the caller")
				}
			}()
			b.parallel(64*Chunk, 64, func(i int) {
				if returned.Load() {
					late.Add(1)
				}
				switch i {
				case 0: // the caller's first block
					if callerFirst {
						first.Store(true)
						panic("caller")
					}
					waitFor(first.Load)
					panic(fmt.Errorf("caller"))
				case 63: // the helper's first block
					if !callerFirst {
						first.Store(true)
						panic(fmt.Errorf("helper"))
					}
					waitFor(first.Load)
					time.Sleep(5 * time.Millisecond)
					panic("helper")
				}
			})
		}()
		returned.Store(true)
		time.Sleep(20 * time.Millisecond)
		if n := late.Load(); n != 0 {
			t.Fatalf("callerFirst=%v: %d blocks started after parallel returned", callerFirst, n)
		}
		countRuns(t, b, 16)
	}
}

// runtime.Goexit in a block (t.FailNow in a closure, say) on a helper: the
// caller still returns, and a fresh helper takes the lost one's place.
// Found by review (the caller waited forever).
func TestParallelGoexitInAHelperBlock(t *testing.T) {
	b := New(2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var helper atomic.Bool
		b.parallel(16*Chunk, 16, func(i int) {
			if i == 0 {
				waitFor(helper.Load)
			}
			if i == 15 {
				helper.Store(true)
				runtime.Goexit()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("parallel did not return after a helper's block called runtime.Goexit")
	}
	TestParallelHelperTakesBlocks(t)
}

// Helpers a job leaves out (a narrower backend after a wider one) park
// instead of polling through every job. Found by review.
func TestHelpersLeftOutOfJobsPark(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	polls := func() int64 { return theTeam.helpers[1].polls.Load() + theTeam.helpers[2].polls.Load() }
	start := polls()
	// A wide job slow enough for every helper to join; after it, helpers 1
	// and 2 poll for the next one.
	New(4).parallel(64*Chunk, 64, func(int) { time.Sleep(200 * time.Microsecond) })
	if !waitFor(func() bool { return polls() >= start+2 }) {
		t.Fatal("helpers 1 and 2 did not poll after a job they joined")
	}
	narrow := New(2)
	before := polls()
	for range 100 {
		narrow.parallel(8*Chunk, 8, func(int) {})
	}
	// Each may finish the polling phase it was in; none may start another.
	if got := polls() - before; got > 0 {
		t.Fatalf("helpers 1 and 2 started %d polling phases during 100 jobs they could not join", got)
	}
}
