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

// raised is maximum(x, lo) in a fresh tensor: the composition's first half.
func (k composedClamp) raised(x, lo *tensor.Tensor) (*tensor.Tensor, error) {
	w, err := tensor.Empty(x.Dtype(), x.ShapeRef())
	if err != nil {
		return nil, err
	}
	return w, k.b.Binary(backend.Maximum, w, x, lo)
}

func (k composedClamp) Clamp(out, x, lo, hi *tensor.Tensor) error {
	w, err := k.raised(x, lo)
	if err != nil {
		return err
	}
	return k.b.Binary(backend.Minimum, out, w, hi)
}

func (k composedClamp) ClampRoute(gx, glo, ghi, x, lo, hi, g *tensor.Tensor) error {
	return k.twoSelections(x, lo, g, func(s backend.Selector, w, gw *tensor.Tensor) error {
		if err := s.Route(backend.RuleMin, gw, ghi, w, hi, g); err != nil {
			return err
		}
		return s.Route(backend.RuleMax, gx, glo, x, lo, gw)
	})
}

func (k composedClamp) ClampSelect(out, x, lo, hi, dx, dlo, dhi *tensor.Tensor) error {
	return k.twoSelections(x, lo, out, func(s backend.Selector, w, dw *tensor.Tensor) error {
		if err := s.Select(backend.RuleMax, dw, x, lo, dx, dlo); err != nil {
			return err
		}
		return s.Select(backend.RuleMin, out, w, hi, dw, dhi)
	})
}

// twoSelections runs the two selections of a clamp gradient or tangent:
// with w = maximum(x, lo) and mid, a fresh tensor like like (the gradient
// or tangent between the two selections).
func (k composedClamp) twoSelections(x, lo, like *tensor.Tensor,
	steps func(s backend.Selector, w, mid *tensor.Tensor) error) error {
	w, err := k.raised(x, lo)
	if err != nil {
		return err
	}
	mid, err := tensor.Empty(like.Dtype(), like.ShapeRef())
	if err != nil {
		return err
	}
	return steps(selector(k.b), w, mid)
}
