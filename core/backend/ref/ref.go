// Package ref is the reference backend: plain scalar loops over row-major
// indices, one element at a time, written to be obviously right rather than
// fast. It is the oracle the cpu backend is tested against, bit for bit, and
// is never optimised.
//
// Conventions: floats compute in float64 and round once to the output dtype
// (which equals correctly rounded float32/float16/bfloat16 arithmetic);
// integers compute in int64 and wrap on store. Errors as in package backend.
package ref

import (
	"math"
	"unsafe"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// Backend is the reference backend. The zero value is ready to use.
type Backend struct{}

func init() { backend.Register(Backend{}) }

// Name returns "ref".
func (Backend) Name() string { return "ref" }

var _ backend.IBackend = Backend{}

// winsAt is the reference form of the selection rule (docs/semantics.md),
// stated once for this package: whether the element at pa keeps its place
// against the element at pb (both of dtype dt) under rule r. A case per
// rule, on exact float64 or int64 values, independent of the cpu backend's
// predicates. Callers check that r is valid.
func winsAt(r backend.Rule, dt dtype.Dtype, pa, pb unsafe.Pointer) bool {
	var aNaN, bNaN bool
	var order int // -1: a < b, 0: a == b (±0 equal), 1: a > b; when neither is NaN
	if dt.IsFloat() {
		x, y := tensor.LoadFloat64(dt, pa), tensor.LoadFloat64(dt, pb)
		aNaN, bNaN = math.IsNaN(x), math.IsNaN(y)
		switch {
		case x < y:
			order = -1
		case x > y:
			order = 1
		}
	} else {
		x, y := tensor.LoadInt64(dt, pa), tensor.LoadInt64(dt, pb)
		switch {
		case x < y:
			order = -1
		case x > y:
			order = 1
		}
	}
	switch r {
	case backend.RuleMin: // NaN propagates: a NaN a wins, a NaN b wins
		return aNaN || (!bNaN && order <= 0)
	case backend.RuleMax:
		return aNaN || (!bNaN && order >= 0)
	case backend.RuleFMin: // NaN is ignored: a NaN b loses, a NaN a loses
		return bNaN || (!aNaN && order <= 0)
	case backend.RuleFMax:
		return bNaN || (!aNaN && order >= 0)
	}
	panic("ref: invalid selection rule " + r.String())
}

// wins is winsAt on element i of a and b (same dtype).
func wins(r backend.Rule, a, b *tensor.Tensor, i int) bool {
	return winsAt(r, a.Dtype(), a.ElementPointer(i), b.ElementPointer(i))
}

func copyElem(dt dtype.Dtype, dst, src unsafe.Pointer) {
	sz := dt.Size()
	copy(unsafe.Slice((*byte)(dst), sz), unsafe.Slice((*byte)(src), sz))
}

func zeroElem(dt dtype.Dtype, dst unsafe.Pointer) {
	clear(unsafe.Slice((*byte)(dst), dt.Size()))
}

// Binary implements backend.IBackend.
func (Backend) Binary(op backend.BinaryOp, out, a, b *tensor.Tensor) error {
	if err := backend.CheckBinary(op, out, a, b); err != nil {
		return err
	}
	dt := out.Dtype()
	r, selects := op.Rule()
	for i := 0; i < out.Numel(); i++ {
		po := out.ElementPointer(i)
		if selects {
			if wins(r, a, b, i) {
				copyElem(dt, po, a.ElementPointer(i))
			} else {
				copyElem(dt, po, b.ElementPointer(i))
			}
			continue
		}
		if dt.IsFloat() {
			x, y := tensor.LoadFloat64(dt, a.ElementPointer(i)), tensor.LoadFloat64(dt, b.ElementPointer(i))
			tensor.StoreFloat64(dt, po, backend.Arith(op, x, y))
			continue
		}
		x, y := tensor.LoadInt64(dt, a.ElementPointer(i)), tensor.LoadInt64(dt, b.ElementPointer(i))
		tensor.StoreInt64(dt, po, backend.Arith(op, x, y))
	}
	return nil
}

// Unary implements backend.IBackend.
func (Backend) Unary(op backend.UnaryOp, out, a *tensor.Tensor) error {
	if err := backend.CheckUnary(op, out, a); err != nil {
		return err
	}
	dt := out.Dtype()
	for i := 0; i < out.Numel(); i++ {
		if dt.IsFloat() {
			tensor.StoreFloat64(dt, out.ElementPointer(i), -tensor.LoadFloat64(dt, a.ElementPointer(i)))
		} else {
			tensor.StoreInt64(dt, out.ElementPointer(i), -tensor.LoadInt64(dt, a.ElementPointer(i)))
		}
	}
	return nil
}

// Cast implements backend.IBackend.
func (Backend) Cast(out, a *tensor.Tensor) error {
	if err := backend.CheckSameShape(out, a); err != nil {
		return err
	}
	for i := 0; i < out.Numel(); i++ {
		switch {
		case a.Dtype().IsFloat() && out.Dtype().IsFloat():
			tensor.CastFloat(out.Dtype(), a.Dtype(), out.ElementPointer(i), a.ElementPointer(i))
		case a.Dtype().IsFloat():
			tensor.StoreFloat64(out.Dtype(), out.ElementPointer(i), tensor.LoadFloat64(a.Dtype(), a.ElementPointer(i)))
		default:
			tensor.StoreInt64(out.Dtype(), out.ElementPointer(i), tensor.LoadInt64(a.Dtype(), a.ElementPointer(i)))
		}
	}
	return nil
}

// sumState is one output's running sum in the canonical order.
type sumState[A float32 | float64 | int64] struct {
	k     int
	lanes [backend.SumLanes]A
	total A
}

func (s *sumState[A]) reset(nz A) {
	for j := range s.lanes {
		s.lanes[j] = nz
	}
}

func (s *sumState[A]) flush(nz A) {
	l := s.lanes
	s.total += ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
	s.reset(nz)
}

func sumCanonical[A float32 | float64 | int64](out, a *tensor.Tensor, load func(unsafe.Pointer) A, nz A, store func(unsafe.Pointer, A),
	done <-chan struct{}) error {
	// One state per output, in Go's heap: larger than the output itself.
	if err := tensor.CheckHeap(out.Numel(), int(unsafe.Sizeof(sumState[A]{})), "the reference sum's state"); err != nil {
		return err
	}
	red := backend.ReducedDims(out, a)
	states := make([]sumState[A], out.Numel())
	for i := range states {
		states[i].reset(nz)
		states[i].total = nz
	}
	shape := a.Shape()
	idx := make([]int, len(shape))
	for i := 0; i < a.Numel(); i++ {
		if done != nil && i%(1<<16) == 0 && backend.Stopped(done) {
			return backend.ErrInterrupted
		}
		// output flat index of input index idx
		o := 0
		for d := range shape {
			if !red[d] {
				o = o*out.Dim(d) + idx[d]
			} else {
				o = o * out.Dim(d)
			}
		}
		s := &states[o]
		s.lanes[s.k%backend.SumLanes] += load(a.ElementPointer(i))
		s.k++
		if s.k%backend.SumBlock == 0 {
			s.flush(nz)
		}
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	for i := range states {
		if states[i].k%backend.SumBlock != 0 {
			states[i].flush(nz)
		}
		if states[i].k == 0 {
			states[i].total = 0 // an empty sum is +0
		}
		store(out.ElementPointer(i), states[i].total)
	}
	return nil
}

// Sum implements backend.IBackend.
func (b Backend) Sum(out, a *tensor.Tensor) error { return b.SumUntil(out, a, nil) }

// SumUntil implements backend.Interruptible: it looks at done every 65536
// elements.
func (Backend) SumUntil(out, a *tensor.Tensor, done <-chan struct{}) error {
	if err := backend.CheckSumShape(out, a); err != nil {
		return err
	}
	dt, odt := a.Dtype(), out.Dtype()
	switch dtype.AccumulateDtype(dt) {
	case dtype.Float32:
		return sumCanonical(out, a,
			func(p unsafe.Pointer) float32 { return float32(tensor.LoadFloat64(dt, p)) },
			float32(math.Copysign(0, -1)),
			func(p unsafe.Pointer, v float32) { tensor.StoreFloat64(odt, p, float64(v)) }, done)
	case dtype.Float64:
		return sumCanonical(out, a,
			func(p unsafe.Pointer) float64 { return tensor.LoadFloat64(dt, p) },
			math.Copysign(0, -1),
			func(p unsafe.Pointer, v float64) { tensor.StoreFloat64(odt, p, v) }, done)
	default:
		return sumCanonical(out, a,
			func(p unsafe.Pointer) int64 { return tensor.LoadInt64(dt, p) },
			0,
			func(p unsafe.Pointer, v int64) { tensor.StoreInt64(odt, p, v) }, done)
	}
}

// Route implements backend.IBackend.
func (Backend) Route(r backend.Rule, ga, gb, a, b, g *tensor.Tensor) error {
	if err := backend.CheckSameShape(g, ga, gb, a, b); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(a, b); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(g, ga, gb); err != nil {
		return err
	}
	if err := backend.CheckRule(r); err != nil {
		return err
	}
	dt := g.Dtype()
	for i := 0; i < g.Numel(); i++ {
		win, lose := ga.ElementPointer(i), gb.ElementPointer(i)
		if !wins(r, a, b, i) {
			win, lose = lose, win
		}
		copyElem(dt, win, g.ElementPointer(i))
		zeroElem(dt, lose)
	}
	return nil
}

// Select implements backend.IBackend.
func (Backend) Select(r backend.Rule, out, a, b, x, y *tensor.Tensor) error {
	if err := backend.CheckSameShape(out, a, b, x, y); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(a, b); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(out, x, y); err != nil {
		return err
	}
	if err := backend.CheckRule(r); err != nil {
		return err
	}
	for i := 0; i < out.Numel(); i++ {
		src := y.ElementPointer(i)
		if wins(r, a, b, i) {
			src = x.ElementPointer(i)
		}
		copyElem(out.Dtype(), out.ElementPointer(i), src)
	}
	return nil
}
