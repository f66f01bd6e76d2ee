package ops

import (
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/tensor"
)

// The min/max family's kernels are optional capabilities of a backend
// (backend.Selector, Reducer, Clamper). A backend without one still runs
// every op: clamp is composed from the selections (the same bits, by
// definition of its rule), and the other kernels are the reference ones
// (core/backend/ref), correct and slow.

func selector(b backend.IBackend) backend.Selector {
	if s, ok := b.(backend.Selector); ok {
		return s
	}
	return ref.Backend{}
}

func reducer(b backend.IBackend) backend.Reducer {
	if r, ok := b.(backend.Reducer); ok {
		return r
	}
	return ref.Backend{}
}

// clamper returns the backend's fused clamp kernels, or their composition
// from b's selection kernels.
func clamper(b backend.IBackend) backend.Clamper {
	if c, ok := b.(backend.Clamper); ok {
		return c
	}
	return composedClamp{b}
}

// composedClamp is clamp(x, lo, hi) = minimum(maximum(x, lo), hi) kernel by
// kernel: RuleMax between x and lo gives the winner w, then RuleMin between
// w and hi; each gradient and tangent follows the same two selections.
type composedClamp struct{ b backend.IBackend }

func (k composedClamp) Clamp(out, x, lo, hi *tensor.Tensor) error {
	w, err := tensor.Empty(x.Dtype(), x.ShapeRef())
	if err != nil {
		return err
	}
	if err := k.b.Binary(backend.Maximum, w, x, lo); err != nil {
		return err
	}
	return k.b.Binary(backend.Minimum, out, w, hi)
}

func (k composedClamp) ClampRoute(gx, glo, ghi, x, lo, hi, g *tensor.Tensor) error {
	w, err := tensor.Empty(x.Dtype(), x.ShapeRef())
	if err != nil {
		return err
	}
	if err := k.b.Binary(backend.Maximum, w, x, lo); err != nil {
		return err
	}
	gw, err := tensor.Empty(g.Dtype(), g.ShapeRef())
	if err != nil {
		return err
	}
	s := selector(k.b)
	if err := s.Route(backend.RuleMin, gw, ghi, w, hi, g); err != nil {
		return err
	}
	return s.Route(backend.RuleMax, gx, glo, x, lo, gw)
}

func (k composedClamp) ClampSelect(out, x, lo, hi, dx, dlo, dhi *tensor.Tensor) error {
	w, err := tensor.Empty(x.Dtype(), x.ShapeRef())
	if err != nil {
		return err
	}
	if err := k.b.Binary(backend.Maximum, w, x, lo); err != nil {
		return err
	}
	dw, err := tensor.Empty(out.Dtype(), out.ShapeRef())
	if err != nil {
		return err
	}
	s := selector(k.b)
	if err := s.Select(backend.RuleMax, dw, x, lo, dx, dlo); err != nil {
		return err
	}
	return s.Select(backend.RuleMin, out, w, hi, dw, dhi)
}
