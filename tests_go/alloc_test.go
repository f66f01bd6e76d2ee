package tests_go

import (
	"fmt"
	"testing"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// The CPU backend's per-call cost on small tensors: below cpu.MinParallel a
// kernel call allocates nothing, whatever the layout (outputs are
// preallocated by the caller). The exact bound is asserted so that a
// regression fails. testing.AllocsPerRun is meaningless under the race
// detector, which allocates.

func allocTensor(t *testing.T, dt dtype.Dtype, shape []int) *tensor.Tensor {
	t.Helper()
	x, err := tensor.New(dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// expanded returns a 0-d tensor of dt seen with shape (all strides zero), as
// sum's backward hands its gradient to Route.
func expanded(t *testing.T, dt dtype.Dtype, shape []int) *tensor.Tensor {
	t.Helper()
	x, err := allocTensor(t, dt, nil).BroadcastTo(shape)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// maxKernelAllocs is the most allocations a small kernel call may make.
const maxKernelAllocs = 0

func requireAllocs(t *testing.T, name string, f func() error) {
	t.Helper()
	if err := f(); err != nil { // warm up (pools, stack growth), and it must work
		t.Fatalf("%s: %v", name, err)
	}
	var err error
	got := testing.AllocsPerRun(100, func() {
		if e := f(); e != nil {
			err = e
		}
	})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if got != maxKernelAllocs {
		t.Errorf("%s: %v allocations per call, want %d", name, got, maxKernelAllocs)
	}
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func TestCPUKernelAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, threads := range []int{1, 4} {
		be := cpu.New(threads)
		for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float64, dtype.BFloat16, dtype.Int32, dtype.Bool} {
			for _, shape := range [][]int{{1}, {1000}, {}, {7, 9}, {3, 1, 5}} {
				name := func(op string) string { return fmt.Sprintf("%s/%v/%v/threads=%d", op, dt, shape, threads) }
				out, a, b := allocTensor(t, dt, shape), allocTensor(t, dt, shape), allocTensor(t, dt, shape)
				ga, gb, g := allocTensor(t, dt, shape), allocTensor(t, dt, shape), allocTensor(t, dt, shape)
				bs, gs := expanded(t, dt, shape), expanded(t, dt, shape)
				for _, op := range []backend.BinaryOp{backend.Minimum, backend.Maximum, backend.Add, backend.Mul} {
					requireAllocs(t, name(op.String()), func() error { return be.Binary(op, out, a, b) })
				}
				requireAllocs(t, name("minimum-scalar"), func() error { return be.Binary(backend.Minimum, out, a, bs) })
				requireAllocs(t, name("route"), func() error { return be.Route(backend.RuleMin, ga, gb, a, b, g) })
				requireAllocs(t, name("route-expanded"), func() error { return be.Route(backend.RuleMax, ga, gb, a, b, gs) })
				requireAllocs(t, name("select"), func() error { return be.Select(backend.RuleMax, out, a, b, ga, gb) })
				requireAllocs(t, name("neg"), func() error { return be.Unary(backend.Neg, out, a) })
				f32 := allocTensor(t, dtype.Float32, shape)
				requireAllocs(t, name("cast"), func() error { return be.Cast(f32, a) })
				sum := allocTensor(t, dtype.SumDtype(dt), ones(len(shape)))
				requireAllocs(t, name("sum"), func() error { return be.Sum(sum, a) })
				if len(shape) < 2 {
					continue
				}
				// strided layouts: a transposed view, a reduction of the last dim
				at, err := a.Transpose(0, len(shape)-1)
				if err != nil {
					t.Fatal(err)
				}
				tshape := at.Shape()
				outT, bT := allocTensor(t, dt, tshape), allocTensor(t, dt, tshape)
				requireAllocs(t, name("minimum-transposed"), func() error { return be.Binary(backend.Minimum, outT, at, bT) })
				rs := append(append([]int(nil), tshape[:len(tshape)-1]...), 1)
				sumT := allocTensor(t, dtype.SumDtype(dt), rs)
				requireAllocs(t, name("sum-transposed-lastdim"), func() error { return be.Sum(sumT, at) })
				rs = append([]int{1}, tshape[1:]...)
				sumT0 := allocTensor(t, dtype.SumDtype(dt), rs)
				requireAllocs(t, name("sum-transposed-dim0"), func() error { return be.Sum(sumT0, at) })
			}
		}
	}
}
