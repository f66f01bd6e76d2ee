package ref

import (
	"fmt"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// The min/max family's reductions and clamp, one element at a time.

// forSlices calls fn(i, o, k) for every element i (row-major) of a tensor
// of shape shape reduced to keep (Sum's keepdim layout: the reduced dims are
// those where keep is 1 and shape is not): o is the flat index of the
// element's output in keep, k its position in its slice (row-major over
// the reduced dims).
func forSlices(shape, keep []int, fn func(i, o, k int)) { forSlicesUntil(shape, keep, nil, fn) }

// forSlicesUntil is forSlices that looks at done every 4096 elements and
// stops once it is closed, reporting whether it stopped.
func forSlicesUntil(shape, keep []int, done <-chan struct{}, fn func(i, o, k int)) bool {
	n := 1
	for _, d := range shape {
		n *= d
	}
	ix := make([]int, len(shape))
	for i := 0; i < n; i++ {
		if done != nil && i%4096 == 0 && backend.Stopped(done) {
			return true
		}
		o, k := 0, 0
		for d := range shape {
			if keep[d] == 1 && shape[d] != 1 {
				k = k*shape[d] + ix[d]
				o *= keep[d]
			} else {
				o = o*keep[d] + ix[d]
			}
		}
		fn(i, o, k)
		for d := len(shape) - 1; d >= 0; d-- {
			ix[d]++
			if ix[d] < shape[d] {
				break
			}
			ix[d] = 0
		}
	}
	return false
}

// sliceLen returns the number of elements of one slice of a tensor of shape
// shape reduced to keep.
func sliceLen(shape, keep []int) int {
	r := 1
	for d := range shape {
		if keep[d] == 1 && shape[d] != 1 {
			r *= shape[d]
		}
	}
	return r
}

// checkIdx checks that idx is an int64 tensor of shape keep whose positions
// are all in [0, r).
func checkIdx(idx *tensor.Tensor, keep []int, r int) error {
	if idx.Dtype() != dtype.Int64 {
		return fmt.Errorf("index operand must be int64, got %v", idx.Dtype())
	}
	if !tensor.SameShape(idx.ShapeRef(), keep) {
		return fmt.Errorf("index shape %v does not match %v", idx.Shape(), keep)
	}
	for o := 0; o < idx.Numel(); o++ {
		if k := tensor.LoadInt64(dtype.Int64, idx.ElementPointer(o)); k < 0 || k >= int64(r) {
			return fmt.Errorf("index %d out of range for slices of %d elements", k, r)
		}
	}
	return nil
}

// ArgReduce implements backend.IBackend: the fold of each slice, element by
// element in row-major order (so each slice's elements come in position
// order), keeping the running winner iff it wins by winsAt.
func (b Backend) ArgReduce(r backend.Rule, vals, idx, a *tensor.Tensor) error {
	return b.ArgReduceUntil(r, vals, idx, a, nil)
}

// ArgReduceUntil implements backend.InterruptibleArgReduce.
func (Backend) ArgReduceUntil(r backend.Rule, vals, idx, a *tensor.Tensor, done <-chan struct{}) error {
	if err := backend.CheckArgReduce(r, vals, idx, a); err != nil {
		return err
	}
	keep := idx
	if keep == nil { // values only
		keep = vals
	}
	if keep.Numel() == 0 {
		return nil
	}
	dt := a.Dtype()
	win := make([]int, keep.Numel()) // the running winner's flat index in a
	pos := make([]int, keep.Numel()) // and its position
	if forSlicesUntil(a.ShapeRef(), keep.ShapeRef(), done, func(i, o, k int) {
		if k == 0 || !winsAt(r, dt, a.ElementPointer(win[o]), a.ElementPointer(i)) {
			win[o], pos[o] = i, k
		}
	}) {
		return backend.ErrInterrupted
	}
	for o := range win {
		if idx != nil {
			tensor.StoreInt64(dtype.Int64, idx.ElementPointer(o), int64(pos[o]))
		}
		if vals != nil {
			copyElem(dt, vals.ElementPointer(o), a.ElementPointer(win[o]))
		}
	}
	return nil
}

// Scatter implements backend.IBackend.
func (Backend) Scatter(out, g, idx *tensor.Tensor) error {
	if err := backend.CheckScatter(out, g); err != nil {
		return err
	}
	if err := checkIdx(idx, g.ShapeRef(), sliceLen(out.ShapeRef(), g.ShapeRef())); err != nil {
		return err
	}
	dt := out.Dtype()
	forSlices(out.ShapeRef(), g.ShapeRef(), func(i, o, k int) {
		if int64(k) == tensor.LoadInt64(dtype.Int64, idx.ElementPointer(o)) {
			copyElem(dt, out.ElementPointer(i), g.ElementPointer(o))
		} else {
			zeroElem(dt, out.ElementPointer(i))
		}
	})
	return nil
}

// Gather implements backend.IBackend.
func (Backend) Gather(out, x, idx *tensor.Tensor) error {
	if err := backend.CheckScatter(x, out); err != nil {
		return err
	}
	if err := checkIdx(idx, out.ShapeRef(), sliceLen(x.ShapeRef(), out.ShapeRef())); err != nil {
		return err
	}
	dt := out.Dtype()
	forSlices(x.ShapeRef(), out.ShapeRef(), func(i, o, k int) {
		if int64(k) == tensor.LoadInt64(dtype.Int64, idx.ElementPointer(o)) {
			copyElem(dt, out.ElementPointer(o), x.ElementPointer(i))
		}
	})
	return nil
}

// clampWinner returns which of x (0), lo (1) and hi (2) clamp selects at
// element i: RuleMax between x and lo, then RuleMin between that winner and
// hi.
func clampWinner(x, lo, hi *tensor.Tensor, i int) int {
	dt := x.Dtype()
	w, pw := 0, x.ElementPointer(i)
	if !winsAt(backend.RuleMax, dt, pw, lo.ElementPointer(i)) {
		w, pw = 1, lo.ElementPointer(i)
	}
	if !winsAt(backend.RuleMin, dt, pw, hi.ElementPointer(i)) {
		w = 2
	}
	return w
}

// checkClamp checks the compared operands of the clamp kernels: x, lo, hi
// of shape shape and one dtype.
func checkClamp(shape *tensor.Tensor, x, lo, hi *tensor.Tensor) error {
	if err := backend.CheckSameShape(shape, x, lo, hi); err != nil {
		return err
	}
	return backend.CheckSameDtype(x, lo, hi)
}

// Clamp implements backend.IBackend.
func (Backend) Clamp(out, x, lo, hi *tensor.Tensor) error {
	if err := checkClamp(out, x, lo, hi); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(out, x); err != nil {
		return err
	}
	ops := [3]*tensor.Tensor{x, lo, hi}
	for i := 0; i < out.Numel(); i++ {
		copyElem(out.Dtype(), out.ElementPointer(i), ops[clampWinner(x, lo, hi, i)].ElementPointer(i))
	}
	return nil
}

// ClampRoute implements backend.IBackend.
func (Backend) ClampRoute(gx, glo, ghi, x, lo, hi, g *tensor.Tensor) error {
	if err := checkClamp(g, x, lo, hi); err != nil {
		return err
	}
	if err := backend.CheckSameShape(g, gx, glo, ghi); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(g, gx, glo, ghi); err != nil {
		return err
	}
	outs := [3]*tensor.Tensor{gx, glo, ghi}
	dt := g.Dtype()
	for i := 0; i < g.Numel(); i++ {
		w := clampWinner(x, lo, hi, i)
		for j, o := range outs {
			if j == w {
				copyElem(dt, o.ElementPointer(i), g.ElementPointer(i))
			} else {
				zeroElem(dt, o.ElementPointer(i))
			}
		}
	}
	return nil
}

// ClampSelect implements backend.IBackend.
func (Backend) ClampSelect(out, x, lo, hi, dx, dlo, dhi *tensor.Tensor) error {
	if err := checkClamp(out, x, lo, hi); err != nil {
		return err
	}
	if err := backend.CheckSameShape(out, dx, dlo, dhi); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(out, dx, dlo, dhi); err != nil {
		return err
	}
	vs := [3]*tensor.Tensor{dx, dlo, dhi}
	for i := 0; i < out.Numel(); i++ {
		copyElem(out.Dtype(), out.ElementPointer(i), vs[clampWinner(x, lo, hi, i)].ElementPointer(i))
	}
	return nil
}
