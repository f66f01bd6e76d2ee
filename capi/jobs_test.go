package main

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// Long reductions as jobs (LUCID_MODE_INTERRUPTIBLE): the protocol of
// lucid.h, with a small longWork so that ordinary tensors take the long path.

func withLongWork(t *testing.T, n int) {
	old := longWork
	longWork = n
	t.Cleanup(func() { longWork = old })
}

func withThreads(t *testing.T, n int, split bool) {
	old := cpu.Default.Threads()
	cpu.Default.SetThreads(n)
	cpu.Default.SetAlwaysSplit(split)
	t.Cleanup(func() { cpu.Default.SetThreads(old); cpu.Default.SetAlwaysSplit(false) })
}

func put(t *testing.T, x *tensor.Tensor) int64 {
	t.Helper()
	h := handles.put(x)
	t.Cleanup(func() { _ = handles.release(h) })
	return h
}

// resultBits takes over the handle a call left in meta: the result's bits.
func resultBits(t *testing.T, meta metaArray) []uint64 {
	t.Helper()
	y, err := tensorOf(meta[0])
	if err != nil {
		t.Fatal(err)
	}
	bits := y.Bits()
	if err := handles.release(meta[0]); err != nil {
		t.Fatal(err)
	}
	return bits
}

func noJobsLeft(t *testing.T) {
	t.Helper()
	if n := jobsRunning.Load(); n != 0 {
		t.Fatalf("%d jobs still running", n)
	}
	jobs.Lock()
	defer jobs.Unlock()
	if len(jobs.m) != 0 {
		t.Fatalf("%d jobs left in the table", len(jobs.m))
	}
}

// A reduction on the long path gives the bits of the ordinary path, for
// every reduction, layout and thread count; below longWork, or without the
// flag, nothing changes (no job).
func TestJobResultsAreBitIdentical(t *testing.T) {
	withLongWork(t, 1000)
	r := rand.New(rand.NewPCG(7, 8))
	vals := make([]float64, 37*3000)
	for i := range vals {
		vals[i] = r.NormFloat64() * float64(1+i%5)
	}
	for _, threads := range []int{1, 3} {
		withThreads(t, threads, true)
		for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float16, dtype.Float64} {
			a, err := tensor.FromFloat64s(dt, []int{37, 3000}, vals)
			if err != nil {
				t.Fatal(err)
			}
			at, err := a.Transpose(0, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range []*tensor.Tensor{a, at} {
				h := put(t, x)
				for _, c := range []struct {
					op   int32
					dims []int64
				}{{0, nil}, {1, nil}, {0, []int64{0}}, {0, []int64{1}}, {1, []int64{-1}}} {
					rc, meta := reduceMeta(c.op, h, c.dims, false, 0)
					if rc != statusOK {
						t.Fatalf("plain call: status %d", rc)
					}
					want := resultBits(t, meta)
					rc, meta = reduceMeta(c.op, h, c.dims, false, modeInterruptible)
					if rc != statusPending {
						t.Fatalf("%v op %d dims %v: status %d, want LUCID_PENDING", dt, c.op, c.dims, rc)
					}
					job := meta[0]
					for rc == statusPending {
						rc, meta = jobWait(job, 5)
					}
					if rc != statusOK {
						t.Fatalf("job: status %d", rc)
					}
					if got := resultBits(t, meta); !slices.Equal(got, want) {
						t.Fatalf("%v op %d dims %v threads %d: the job's bits differ", dt, c.op, c.dims, threads)
					}
					if rc, _ := jobWait(job, 0); rc != statusValue {
						t.Fatalf("a finished job waited on again: status %d, want LUCID_EVALUE", rc)
					}
				}
			}
		}
	}
	// Below the threshold the flag changes nothing.
	small, _ := tensor.FromFloat64s(dtype.Float32, []int{999}, vals[:999])
	h := put(t, small)
	if rc, meta := reduceMeta(0, h, nil, false, modeInterruptible); rc != statusOK {
		t.Fatalf("short call: status %d", rc)
	} else {
		resultBits(t, meta)
	}
	noJobsLeft(t)
}

// A job over 2**44 broadcast elements (hours of work) stops when cancelled,
// on the sequential and the parallel path; afterwards nothing of it runs.
func TestJobCancelStopsLongSum(t *testing.T) {
	for _, threads := range []int{1, 4} {
		withThreads(t, threads, true)
		one, _ := tensor.Scalar(dtype.Float32, 1)
		for _, shape := range [][]int{{1 << 44}, {1 << 22, 1 << 22}} {
			x, err := one.BroadcastTo(shape)
			if err != nil {
				t.Fatal(err)
			}
			h := put(t, x)
			// Warm the team up to its size for this thread count, then count.
			if _, err := ops.Sum(nil, hugeWarm(t), nil, false); err != nil {
				t.Fatal(err)
			}
			base := runtime.NumGoroutine()
			for _, c := range []struct {
				op   int32
				dims []int64
			}{{0, nil}, {1, nil}, {0, []int64{1}}} {
				if len(shape) == 1 && c.dims != nil {
					continue
				}
				rc, meta := reduceMeta(c.op, h, c.dims, false, modeInterruptible|modeGrad)
				if rc != statusPending {
					t.Fatalf("status %d, want LUCID_PENDING", rc)
				}
				job := meta[0]
				if rc, _ := jobWait(job, 20); rc != statusPending {
					t.Fatalf("a job of hours ended: status %d", rc)
				}
				if jobsRunning.Load() != 1 {
					t.Fatalf("%d jobs running, want 1", jobsRunning.Load())
				}
				if rc := jobCancel(job); rc != statusOK {
					t.Fatalf("cancel: status %d", rc)
				}
				noJobsLeft(t)
				if rc := jobCancel(job); rc != statusValue {
					t.Fatalf("second cancel: status %d, want LUCID_EVALUE", rc)
				}
				if rc, _ := jobWait(job, 0); rc != statusValue {
					t.Fatalf("wait after cancel: status %d, want LUCID_EVALUE", rc)
				}
			}
			// The job's goroutine and any helper it started have stopped
			// (helpers are parked members of the team, counted in base).
			for i := 0; runtime.NumGoroutine() > base; i++ {
				if i == 500 {
					t.Fatalf("%d goroutines, %d before the jobs", runtime.NumGoroutine(), base)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// hugeWarm is a broadcast view large enough for the parallel path.
func hugeWarm(t *testing.T) *tensor.Tensor {
	one, _ := tensor.Scalar(dtype.Float32, 1)
	x, err := one.BroadcastTo([]int{1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// A panic inside a job comes back as LUCID_EPANIC from the wait, and an
// error as its own status: never a crash.
func TestJobPanicsAndErrorsComeBack(t *testing.T) {
	job := startJob(ops.Default(), nil, func(*ops.Context) ([]*tensor.Tensor, error) { panic("boom") })
	rc, _ := jobWait(job, 10000)
	if rc != statusPanic {
		t.Fatalf("status %d, want LUCID_EPANIC", rc)
	}
	withLongWork(t, 10)
	ints, _ := tensor.FromFloat64s(dtype.Int32, []int{100}, make([]float64, 100))
	h := put(t, ints)
	rc, meta := reduceMeta(1, h, nil, false, modeInterruptible) // mean of integers: TypeError
	if rc == statusPending {
		rc, _ = jobWait(meta[0], 10000)
	}
	if rc != statusType {
		t.Fatalf("status %d, want LUCID_ETYPE", rc)
	}
	noJobsLeft(t)
}

// Only reductions run as jobs: the other ops that lucid_op runs ignore
// LUCID_MODE_INTERRUPTIBLE and return their result, however long the work.
func TestInterruptibleFlagIsIgnoredByOtherOps(t *testing.T) {
	withLongWork(t, 10)
	x, _ := tensor.FromFloat64s(dtype.Float32, []int{100}, make([]float64, 100))
	h := put(t, x)
	for _, c := range []struct {
		name string
		hs   []int64
	}{{"minimum", []int64{h, h}}, {"add", []int64{h, h}}, {"neg", []int64{h}}, {"copy", []int64{h}}} {
		rc, meta := opMeta(c.name, c.hs, modeInterruptible)
		if rc != statusOK {
			t.Fatalf("%s: status %d, want LUCID_OK", c.name, rc)
		}
		if bits := resultBits(t, meta); len(bits) != 100 {
			t.Fatalf("%s: %d elements, want 100", c.name, len(bits))
		}
	}
	noJobsLeft(t)
}
