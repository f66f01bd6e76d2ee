package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// Internal tests of the bounded parallel sum (sumParallel): with a tiny
// window, so that windows end inside an output's blocks and between
// outputs, results are bit-identical to the sequential path and to the ref
// backend, and the scratch does not grow with the input.

func withSumWindow(t *testing.T, n int) {
	old := sumWindow
	sumWindow = n
	t.Cleanup(func() { sumWindow = old })
}

func sumBits(t *testing.T, b interface {
	Sum(out, a *tensor.Tensor) error
}, a *tensor.Tensor, keep []int) []uint64 {
	t.Helper()
	out, err := tensor.Empty(dtype.Float32, keep)
	if a.Dtype() == dtype.Float64 {
		out, err = tensor.Empty(dtype.Float64, keep)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Sum(out, a); err != nil {
		t.Fatal(err)
	}
	return out.Bits()
}

// untilDone is a backend's SumUntil with a fixed done channel, as a Sum.
type untilDone struct {
	b    *Backend
	done chan struct{}
}

func (u untilDone) Sum(out, a *tensor.Tensor) error { return u.b.SumUntil(out, a, u.done) }

// Every path of the sum (contiguous flat, strided sequential, parallel
// windows) stops at once for a closed done.
func TestSumUntilClosedDone(t *testing.T) {
	withSumWindow(t, 5)
	closed := make(chan struct{})
	close(closed)
	a, err := tensor.FromFloat64s(dtype.Float32, []int{37, 3000}, make([]float64, 37*3000))
	if err != nil {
		t.Fatal(err)
	}
	at, _ := a.Transpose(0, 1)
	for _, threads := range []int{1, 4} {
		b := New(threads)
		b.SetAlwaysSplit(true)
		for _, x := range []*tensor.Tensor{a, at} {
			out, _ := tensor.Empty(dtype.Float32, []int{1, 1})
			if err := b.SumUntil(out, x, closed); err != backend.ErrInterrupted {
				t.Fatalf("threads %d: %v, want ErrInterrupted", threads, err)
			}
		}
	}
}

func TestSumWindows(t *testing.T) {
	withSumWindow(t, 5)
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float64, dtype.BFloat16} {
		vals := make([]float64, 37*3000)
		for i := range vals {
			vals[i] = r.NormFloat64() * math.Exp(r.NormFloat64()*3)
		}
		a, err := tensor.FromFloat64s(dt, []int{37, 3000}, vals)
		if err != nil {
			t.Fatal(err)
		}
		at, err := a.Transpose(0, 1) // a strided layout: the planned path
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []*tensor.Tensor{a, at} {
			sh := x.Shape()
			for _, keep := range [][]int{{1, 1}, {1, sh[1]}, {sh[0], 1}} {
				want := sumBits(t, ref.Backend{}, x, keep)
				for _, threads := range []int{1, 2, 3, 8} {
					b := New(threads)
					b.SetAlwaysSplit(true)
					if got := sumBits(t, b, x, keep); !slices.Equal(got, want) {
						t.Fatalf("%v shape %v keep %v threads %d: differs from ref", dt, sh, keep, threads)
					}
					open := make(chan struct{}) // SumUntil, never interrupted: the same bits
					if got := sumBits(t, untilDone{b, open}, x, keep); !slices.Equal(got, want) {
						t.Fatalf("%v shape %v keep %v threads %d: SumUntil differs from ref", dt, sh, keep, threads)
					}
				}
			}
		}
	}
}

func TestSumScratchIsBounded(t *testing.T) {
	withSumWindow(t, 1024)
	b := New(4)
	b.SetAlwaysSplit(true)
	allocated := func(n int) uint64 {
		s, err := tensor.Scalar(dtype.Float64, 1)
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.BroadcastTo([]int{n})
		if err != nil {
			t.Fatal(err)
		}
		out, err := tensor.Empty(dtype.Float64, []int{1})
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err = b.Sum(out, a)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Float64s()[0]; got != float64(n) {
			t.Fatalf("sum of %d ones = %v", n, got)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	// 1024 and 16384 blocks: 8 KB and 128 KB of block values when they
	// were all kept; now one window's 8 KB (and a job per window).
	small, large := allocated(1<<20), allocated(1<<24)
	if large > small+16<<10 {
		t.Fatalf("bytes allocated for 2**20 and 2**24 elements: %d, %d", small, large)
	}
}
