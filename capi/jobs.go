package main

/*
#define LUCID_NO_PROTOTYPES
#include "lucid.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// Long calls run as jobs (LUCID_MODE_INTERRUPTIBLE in lucid.h). The library
// installs no signal handlers and never calls the host, so Ctrl-C can only
// be honoured by the host's own thread, between calls: a caller that opts in
// gets a reduction over many elements back at once as a job running on its
// own goroutine, waits for it in short slices (lucid_job_wait) and looks for
// signals in between, and stops it with lucid_job_cancel, which closes the
// job's done channel (ops.Context.Done: the kernels look at it every fraction
// of a millisecond of work) and waits for the work to end. Calls below the
// threshold, and callers that do not opt in, run as before: no goroutine, no
// extra call.

const statusPending = 64 // LUCID_PENDING

// longWork is the input element count from which an interruptible reduction
// runs as a job: about ten milliseconds of work and more (2^26 float32
// elements take 10-40 ms, reading memory on two cores or one). A job costs
// two thread hand-offs, each 0.05-0.4 ms on a virtual machine whose idle
// CPU the hypervisor has parked (the job starting on another thread, and the
// caller waking when it ends): measured on amax(dim=-1) of a (4096, 4096)
// float32 tensor, 3-5 ms of work, that was a tenth of the call, which
// 2^24 (the threshold before) made every such call pay. A variable only so
// that tests can make it small.
var longWork = 1 << 26

// jobsRunning counts jobs whose work has not ended (LUCID_STAT_JOBS).
var jobsRunning atomic.Int64

type job struct {
	stop     chan struct{}    // closed by cancel: the work's ops.Context.Done
	ended    chan struct{}    // closed once the work has ended
	result   []*tensor.Tensor // one per output
	given    []*tensor.Tensor // out= tensors (fillMetas gives them no handle)
	err      error
	panicked any // a panic of the work, reported as LUCID_EPANIC
}

var jobs = struct {
	sync.Mutex
	m    map[int64]*job
	next int64
}{m: map[int64]*job{}}

// startJob runs work under a copy of c whose Done is the job's stop channel
// on a goroutine of its own, and returns the job's id.
func startJob(c *ops.Context, given []*tensor.Tensor, work func(c *ops.Context) ([]*tensor.Tensor, error)) int64 {
	j := &job{stop: make(chan struct{}), ended: make(chan struct{}), given: given}
	jc := *c
	jc.Done = j.stop
	jobsRunning.Add(1)
	jobs.Lock()
	jobs.next++
	id := jobs.next
	jobs.m[id] = j
	jobs.Unlock()
	go j.run(&jc, work)
	return id
}

func (j *job) run(c *ops.Context, work func(c *ops.Context) ([]*tensor.Tensor, error)) {
	defer func() {
		// No panic may end the process: it goes to whoever waits.
		if r := recover(); r != nil {
			j.result, j.panicked = nil, r
		}
		jobsRunning.Add(-1)
		close(j.ended)
	}()
	j.result, j.err = work(c)
}

// lookupJob returns job id, removing it from the table when take (so that
// of two callers only one can end a job).
func lookupJob(id C.int64_t, take bool) (*job, error) {
	jobs.Lock()
	defer jobs.Unlock()
	j, ok := jobs.m[int64(id)]
	if !ok {
		return nil, errs.Valuef("unknown job %d (already finished or cancelled)", int64(id))
	}
	if take {
		delete(jobs.m, int64(id))
	}
	return j, nil
}

//export lucid_job_wait
func lucid_job_wait(id C.int64_t, ms C.int32_t, meta *C.int64_t) (rc C.int) {
	defer recoverPanic(&rc)
	j, err := lookupJob(id, false)
	if err != nil {
		return status(err)
	}
	if ms > 0 {
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-j.ended:
		case <-t.C:
			return statusPending
		}
	} else {
		select {
		case <-j.ended:
		default:
			return statusPending
		}
	}
	if _, err := lookupJob(id, true); err != nil {
		return status(err)
	}
	if j.panicked != nil {
		return fail(statusPanic, fmt.Sprintf("internal error in pylucid's native library (Go panic): %v", j.panicked))
	}
	if j.err != nil {
		return status(j.err)
	}
	return status(fillMetas(meta, j.result, j.given))
}

//export lucid_job_cancel
func lucid_job_cancel(id C.int64_t) (rc C.int) {
	defer recoverPanic(&rc)
	j, err := lookupJob(id, true)
	if err != nil {
		return status(err)
	}
	close(j.stop) // only here, once: the job has left the table
	<-j.ended
	// The result, if the work ended before it saw stop, has no handle:
	// the collector frees it.
	j.result = nil
	return statusOK
}
