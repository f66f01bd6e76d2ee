package main

import (
	"sync"
	"sync/atomic"
	"time"
)

// A test hook that shows, without timing anything, that calls run in
// parallel: while a gate is set (lucid_debug_gate), every op or backward call
// waits on entry until `want` calls have arrived, or until its own bounded
// wait runs out. A test that sees `want` calls meet with none timing out has
// seen that many threads inside the library at once. Unset, it costs one
// atomic load per call.
type gate struct {
	want     int
	wait     time.Duration
	mu       sync.Mutex
	arrived  int
	met      int64
	timedOut int64
	done     chan struct{}
}

var testGate atomic.Pointer[gate]

// gateEnter is called on entry by the calls the gate holds.
func gateEnter() {
	if g := testGate.Load(); g != nil {
		g.arrive()
	}
}

func (g *gate) arrive() {
	g.mu.Lock()
	g.arrived++
	if g.arrived == g.want {
		close(g.done)
	}
	g.mu.Unlock()
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case <-g.done:
		g.mu.Lock()
		g.met++
		g.mu.Unlock()
	case <-t.C:
		g.mu.Lock()
		g.timedOut++
		g.mu.Unlock()
	}
}

// setGate installs a fresh gate for want callers (none when want <= 0) and
// returns the previous one.
func setGate(want int, wait time.Duration) *gate {
	var g *gate
	if want > 0 {
		g = &gate{want: want, wait: wait, done: make(chan struct{})}
	}
	return testGate.Swap(g)
}

// counts reports how many callers met the others and how many gave up.
func (g *gate) counts() (met, timedOut int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.met, g.timedOut
}
