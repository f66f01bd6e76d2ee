package tests_go

// Allocations the machine cannot satisfy are errors of kind errs.Memory
// (Python's MemoryError), never Go's fatal "out of memory", which no recover
// can catch; and kernels keep their own scratch bounded whatever the input
// size. The cases that ended the process before the fix run in a child
// process (isolated), so that a regression fails one test instead of the
// whole binary.

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// huge is an element count whose float32 storage (2**46 bytes) exceeds any
// machine's memory but not Go's address-space limit: before the fix, asking
// Go's heap for it was fatal.
const huge = 1 << 44

// isolated runs body in a child process (this test binary, running only the
// calling test), and fails if the child does not pass.
func isolated(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	if os.Getenv("LUCID_ISOLATED") == t.Name() {
		body(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LUCID_ISOLATED="+t.Name())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child process failed:\n%s", out)
	require.Contains(t, string(out), "--- PASS: "+t.Name(), "child process output:\n%s", out)
}

// broadcastOne returns a one-element tensor of dt seen with shape.
func broadcastOne(t *testing.T, dt dtype.Dtype, shape []int) *tensor.Tensor {
	t.Helper()
	s, err := tensor.Scalar(dt, 1)
	require.NoError(t, err)
	v, err := s.BroadcastTo(shape)
	require.NoError(t, err)
	return v
}

func requireMemoryError(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	require.Equal(t, errs.Memory, errs.KindOf(err), "%s: %v", what, err)
	require.Contains(t, err.Error(), "out of memory", what)
}

// stillWorks checks that the library gives right answers after a failure.
func stillWorks(t *testing.T) {
	t.Helper()
	a, err := tensor.FromFloat64s(dtype.Float32, []int{3}, []float64{1, 5, -2})
	require.NoError(t, err)
	y, err := ops.Minimum(nil, a, broadcastOne(t, dtype.Float32, []int{3}))
	require.NoError(t, err)
	require.Equal(t, []float64{1, 1, -2}, y.Float64s())
}

func TestHugeTensorIsAMemoryError(t *testing.T) {
	isolated(t, func(t *testing.T) {
		check := func() {
			for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float64, dtype.Uint8} {
				_, err := tensor.New(dt, []int{huge})
				requireMemoryError(t, err, "New "+dt.String())
				_, err = tensor.Empty(dt, []int{huge / 4, 4})
				requireMemoryError(t, err, "Empty "+dt.String())
			}
			stillWorks(t)
		}
		check() // with this package's allocator (see main_test.go)
		tensor.SetAllocator(nil)
		check() // with Go's own
	})
}

func TestHugeResultsAreMemoryErrors(t *testing.T) {
	isolated(t, func(t *testing.T) {
		tensor.SetAllocator(nil) // Go's own allocator: the one a plain Go program uses
		big := broadcastOne(t, dtype.Float32, []int{huge})
		_, err := ops.Minimum(nil, big, broadcastOne(t, dtype.Float32, nil))
		requireMemoryError(t, err, "minimum")
		_, err = ops.Maximum(nil, broadcastOne(t, dtype.Float32, []int{1 << 22, 1}), broadcastOne(t, dtype.Float32, []int{1, 1 << 22}))
		requireMemoryError(t, err, "maximum")
		_, err = ops.Cast(nil, big, dtype.Float64)
		requireMemoryError(t, err, "cast")
		_, err = ops.Neg(nil, big)
		requireMemoryError(t, err, "neg")
		wide := broadcastOne(t, dtype.Float16, []int{huge, 2})
		_, err = ops.Sum(nil, wide, []int{1}, false)
		requireMemoryError(t, err, "sum over dim 1")
		_, err = ops.Mean(nil, wide, []int{1}, true)
		requireMemoryError(t, err, "mean over dim 1")
		stillWorks(t)
	})
}

func TestHugeGradientIsAMemoryError(t *testing.T) {
	isolated(t, func(t *testing.T) {
		tensor.SetAllocator(nil)
		// A leaf that is a huge view (no memory of its own), given a huge
		// gradient: accumulating it into the leaf's Grad needs memory.
		x := broadcastOne(t, dtype.Float32, []int{huge})
		require.NoError(t, x.SetRequiresGrad(true))
		g := broadcastOne(t, dtype.Float32, []int{huge})
		requireMemoryError(t, ops.Backward(nil, []*tensor.Tensor{x}, []*tensor.Tensor{g}, false, false), "backward")
		_, err := ops.Grad(nil, []*tensor.Tensor{x}, []*tensor.Tensor{x}, []*tensor.Tensor{g}, nil, false, false)
		requireMemoryError(t, err, "grad")
		stillWorks(t)
	})
}

// The reference backend keeps one running sum per output in Go's heap: an
// output too large for it is refused before anything is allocated.
func TestRefSumStateIsChecked(t *testing.T) {
	isolated(t, func(t *testing.T) {
		out := broadcastOne(t, dtype.Float32, []int{huge, 1})
		a := broadcastOne(t, dtype.Float32, []int{huge, 2})
		requireMemoryError(t, ref.Backend{}.Sum(out, a), "ref sum")
		stillWorks(t)
	})
}

// Copies into Go slices are for small tensors: a huge view panics with a
// Memory error, which (unlike Go's fatal out of memory) can be recovered.
func TestHugeCopyPanicsWithAMemoryError(t *testing.T) {
	isolated(t, func(t *testing.T) {
		big := broadcastOne(t, dtype.Float32, []int{huge})
		for name, f := range map[string]func(){
			"Float64s": func() { big.Float64s() },
			"Int64s":   func() { big.Int64s() },
			"Bits":     func() { big.Bits() },
		} {
			func() {
				defer func() {
					r := recover()
					err, ok := r.(error)
					require.True(t, ok, "%s: recovered %v, want an error", name, r)
					requireMemoryError(t, err, name)
				}()
				f()
			}()
		}
		stillWorks(t)
	})
}

func TestHeapLimit(t *testing.T) {
	limit := tensor.HeapLimit()
	require.Greater(t, limit, 1<<20)
	require.NoError(t, tensor.CheckHeap(limit, 1, "x"))
	requireMemoryError(t, tensor.CheckHeap(limit+1, 1, "x"), "one byte over")
	requireMemoryError(t, tensor.CheckHeap(limit/8+1, 8, "x"), "one element over")
	requireMemoryError(t, tensor.CheckHeap(math.MaxInt, math.MaxInt, "x"), "overflowing product")
	requireMemoryError(t, tensor.CheckHeap(-1, 1, "x"), "negative count")
}

// A parallel sum's scratch (its block values) does not grow with the number
// of elements reduced: before, it held one value per 1024-element block, and
// a sum over a broadcast view of 2**44 elements asked Go for 64 GB.
func TestParallelSumScratchIsBounded(t *testing.T) {
	if raceEnabled {
		t.Skip("minutes under the race detector; core/backend/cpu's TestSumWindows and TestSumScratchIsBounded check the same with a small window")
	}
	be := cpu.New(4)
	be.SetAlwaysSplit(true)
	c := &ops.Context{Backend: be}
	allocated := func(n int) uint64 {
		a := broadcastOne(t, dtype.Float64, []int{n})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := ops.Sum(c, a, nil, false)
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		require.Equal(t, []float64{float64(n)}, s.Float64s())
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := allocated(1<<26), allocated(1<<28)
	// Before: 512 KB and 2 MB of block values.
	require.Less(t, large, small+64<<10, "bytes allocated for 2**26 and 2**28 elements: %d, %d", small, large)
}

// The bounded parallel sum adds the same block values in the same order as a
// sequential one: bit-identical results for any thread count, also where
// the blocks span several windows (more than 2**16 blocks in one call).
func TestParallelSumWindowsAreDeterministic(t *testing.T) {
	if raceEnabled {
		t.Skip("minutes under the race detector; core/backend/cpu's TestSumWindows and TestSumScratchIsBounded check the same with a small window")
	}
	r := rand.New(rand.NewPCG(7, 11))
	row := make([]float64, 1000)
	for i := range row {
		row[i] = r.NormFloat64() * math.Exp(r.NormFloat64()*3)
	}
	for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float64} {
		base, err := tensor.FromFloat64s(dt, []int{1, 1000}, row)
		require.NoError(t, err)
		// 67.2M elements: 65,625 blocks over all, 66,000 with dim 0 (66
		// per column), 67,200 with dim 1 (one per row).
		a, err := base.BroadcastTo([]int{67200, 1000})
		require.NoError(t, err)
		for _, dims := range [][]int{nil, {0}, {1}} {
			var want []uint64
			for _, threads := range []int{1, 3} {
				be := cpu.New(threads)
				be.SetAlwaysSplit(true)
				s, err := ops.Sum(&ops.Context{Backend: be}, a, dims, false)
				require.NoError(t, err)
				got := s.Bits()
				if want == nil {
					want = got
					continue
				}
				require.Equal(t, want, got, "%v dims=%v threads=%d", dt, dims, threads)
			}
		}
	}
}
