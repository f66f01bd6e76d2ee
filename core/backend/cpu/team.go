package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Parallel work runs on a team: persistent helper goroutines that keep
// polling for the next job for spinFor after each one, so back-to-back calls
// on cache-sized tensors get a second core within a fraction of a
// microsecond. Waking a parked goroutine instead costs the caller ~10 us
// (a futex wake-up, and on a 2-core machine often a preemption of the caller
// by the woken thread), more than a 64K-element minimum takes on one core.
// Hence the rule (Backend.split): work of MinParallel elements or more is
// split while a helper is awake or was wanted within spinFor (a burst of
// calls), and a sleeping helper is woken unprompted only from WakeParallel
// elements, where the wake-up pays for itself.
//
// A job's blocks are claimed from the front by the caller and from the back
// by helpers: in back-to-back calls over the same tensors each core keeps
// touching the same part (which stays in its own L2 cache), and a helper that
// arrives late takes only what is left. The caller never waits for a helper
// to arrive: it closes the job once no block is left and waits only for
// helpers already inside one. One job runs on the team at a time; a
// concurrent caller gets fresh goroutines (large work) or runs alone.

// spinFor is how long an idle helper polls for the next job before parking.
const spinFor = 50 * time.Microsecond

// yieldAfter is how long the caller waits for helpers inside a block before
// it starts yielding its CPU (a slow block, such as a strided cast, takes
// tens of microseconds).
const yieldAfter = 100 * time.Microsecond

// maxHelpers bounds the team.
const maxHelpers = 63

// closedBit marks a job closed to new helpers; the bits below count the
// helpers inside it.
const closedBit = int64(1) << 62

type job struct {
	fn       func(i int)
	claims   atomic.Uint64              // next front block (low 32 bits), end of the unclaimed back (high 32 bits)
	inside   atomic.Int64               // helpers working on the job, | closedBit once closed
	helpers  int                        // team members allowed to join: index < helpers
	panicked atomic.Pointer[panicValue] // the first panic of any worker
}

// panicValue boxes a recovered value (any dynamic type; an atomic.Value
// would itself panic on a second value of another type).
type panicValue struct{ v any }

func newJob(n, helpers int, fn func(i int)) *job {
	j := &job{fn: fn, helpers: helpers}
	j.claims.Store(uint64(n) << 32)
	return j
}

// claim takes the next block from the front or the back, or returns -1 once
// the two ends have met.
func (j *job) claim(back bool) int {
	for {
		v := j.claims.Load()
		lo, hi := uint32(v), uint32(v>>32)
		if lo >= hi {
			return -1
		}
		next, i := uint64(hi)<<32|uint64(lo+1), lo
		if back {
			next, i = uint64(hi-1)<<32|uint64(lo), hi-1
		}
		if j.claims.CompareAndSwap(v, next) {
			return int(i)
		}
	}
}

// run claims and runs blocks until none are left. A panic is recorded (the
// first one only) for the caller to re-raise — a helper must survive it —
// and stops this worker.
func (j *job) run(back bool) {
	defer func() {
		if r := recover(); r != nil {
			j.panicked.CompareAndSwap(nil, &panicValue{r})
		}
	}()
	for i := j.claim(back); i >= 0 && j.panicked.Load() == nil; i = j.claim(back) {
		j.fn(i)
	}
}

// join enters the job unless the caller has closed it.
func (j *job) join() bool {
	for {
		v := j.inside.Load()
		if v&closedBit != 0 {
			return false
		}
		if j.inside.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// help is a helper's whole part in a job. The count is deferred so that even
// runtime.Goexit inside a block leaves it right.
func (j *job) help() {
	if j.join() {
		defer j.inside.Add(-1)
		j.run(true)
	}
}

// lead is the caller's part: its blocks from the front, then the close and
// the wait for helpers inside a block, deferred so that no way of unwinding
// (runtime.Goexit included) leaves a helper running fn over the caller's
// memory. It re-raises the first panic of any worker.
func (j *job) lead() {
	defer j.finish()
	j.run(false)
}

// finish closes the job to late helpers, waits for those inside it, and
// re-raises the first panic.
func (j *job) finish() {
	j.inside.Or(closedBit)
	// No runtime.Gosched in this wait at first: on a locked M (every call
	// from C is one) it hands the P to another thread and sleeps, two futex
	// wake-ups that cost more than a block (about a microsecond for 8192
	// float32s). Only a helper descheduled inside a block, perhaps on this
	// very CPU, makes the wait long; past yieldAfter, yield the CPU to it.
	var since time.Time
	for k := 0; j.inside.Load()&^closedBit != 0; k++ {
		if k&1023 == 1023 {
			if since.IsZero() {
				since = time.Now()
			} else if time.Since(since) > yieldAfter {
				runtime.Gosched()
			}
		}
	}
	if p := j.panicked.Load(); p != nil {
		panic(p.v) // on the caller's goroutine, where it can be recovered
	}
}

type team struct {
	busy     sync.Mutex // held by the caller whose job runs on the team
	grow     sync.Mutex // serialises starting helpers
	cur      atomic.Pointer[job]
	seq      atomic.Uint64 // bumped per job
	width    atomic.Int32  // helpers the latest job allows
	size     atomic.Int32  // helpers started
	_        [64]byte      // lastWant, swapped per call, off the line helpers poll
	lastWant atomic.Int64  // when work last asked to be split (nanotime)
	helpers  [maxHelpers]helper
}

type helper struct {
	sleeping atomic.Bool
	polls    atomic.Int64 // polling phases entered (for tests)
	wake     chan struct{}
}

var (
	theTeam team
	epoch   = time.Now()
)

// nanotime is the team's clock: nanoseconds since epoch, from 1.
func nanotime() int64 { return int64(time.Since(epoch)) + 1 }

// want records, at time now (nanotime), a request to split work and reports
// whether a helper is awake or splitting was wanted within spinFor before
// (so that a burst of calls wakes one, and then keeps it awake).
func (t *team) want(now int64) bool {
	prev := t.lastWant.Swap(now)
	return t.awake() || (prev != 0 && now-prev < int64(spinFor))
}

// awake reports whether the first helper exists and is not parked.
func (t *team) awake() bool { return t.size.Load() > 0 && !t.helpers[0].sleeping.Load() }

// start makes sure helpers [0, n) exist. Called before the job's seq bump:
// a new helper starts from the seq it was created at, so it sees that job.
func (t *team) start(n int) {
	if int(t.size.Load()) >= n {
		return
	}
	t.grow.Lock()
	defer t.grow.Unlock()
	for i := int(t.size.Load()); i < n; i++ {
		t.helpers[i].wake = make(chan struct{}, 1)
		go t.loop(i, t.seq.Load())
		t.size.Store(int32(i + 1))
	}
}

// loop is helper i: wait for a job after seen, help with it if allowed,
// repeat. A helper the latest job left out (a narrower backend) goes back to
// parking at once rather than polling on behalf of jobs it cannot join.
func (t *team) loop(i int, seen uint64) {
	// Blocks' panics are recovered in run, so only runtime.Goexit in a block
	// ends this loop: then a fresh goroutine takes the helper's place.
	defer func() { go t.loop(i, t.seq.Load()) }()
	poll := true
	for {
		seen = t.await(i, seen, poll)
		if j := t.cur.Load(); j != nil && i < j.helpers {
			j.help()
		}
		// Poll for the next job if the latest one wanted this helper, even
		// if it was over before the helper looked.
		poll = i < int(t.width.Load())
	}
}

// await returns t.seq once it has moved past seen: polling for spinFor
// (when poll), then parked. Helpers beyond the available cores park at once
// (polling there would take the caller's core).
func (t *team) await(i int, seen uint64, poll bool) uint64 {
	h := &t.helpers[i]
	if poll && i < runtime.GOMAXPROCS(0)-1 {
		h.polls.Add(1)
		deadline := time.Now().Add(spinFor)
		for k := 0; ; k++ {
			if s := t.seq.Load(); s != seen {
				return s
			}
			if k&255 == 255 && time.Now().After(deadline) {
				break
			}
		}
	}
	for {
		h.sleeping.Store(true)
		if s := t.seq.Load(); s != seen { // published before we slept
			h.sleeping.Store(false)
			return s
		}
		<-h.wake
		if s := t.seq.Load(); s != seen {
			return s
		}
	}
}

// tryRun runs job j with up to j.helpers team members, waking sleeping ones,
// and reports false (running nothing) when the team is busy.
func (t *team) tryRun(j *job) bool {
	if !t.busy.TryLock() {
		return false
	}
	defer t.busy.Unlock()
	defer t.cur.Store(nil)
	t.start(j.helpers)
	t.cur.Store(j)
	t.width.Store(int32(j.helpers))
	t.seq.Add(1)
	for i := range min(j.helpers, int(t.size.Load())) {
		if h := &t.helpers[i]; h.sleeping.CompareAndSwap(true, false) {
			select {
			case h.wake <- struct{}{}:
			default: // a wake-up is already pending
			}
		}
	}
	j.lead()
	return true
}
