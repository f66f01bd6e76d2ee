package ops

import (
	"github.com/pylucid/pylucid/core/tensor"
)

// Forward-mode rules of the arithmetic, view and summing ops (the min/max
// family's are with their ops). Each maps input tangents (nil: zero) to
// output tangents; CallJvp expands and casts the results.

func init() {
	addOp.jvp = linearJVP(func(c *Context, x, y *tensor.Tensor) (*tensor.Tensor, error) { return Add(c, x, y) }, false)
	subOp.jvp = linearJVP(func(c *Context, x, y *tensor.Tensor) (*tensor.Tensor, error) { return Sub(c, x, y) }, true)
	mulOp.jvp = mulJVP
	divOp.jvp = divJVP
	negOp.jvp = unaryJVP(func(c *Context, t *tensor.Tensor, _ *jvpCall) (*tensor.Tensor, error) { return Neg(c, t) })
	castOp.jvp = unaryJVP(func(_ *Context, t *tensor.Tensor, _ *jvpCall) (*tensor.Tensor, error) { return t, nil })
	copyOp.jvp = unaryJVP(func(c *Context, t *tensor.Tensor, _ *jvpCall) (*tensor.Tensor, error) { return Copy(c, t) })
	expandOp.jvp = unaryJVP(func(_ *Context, t *tensor.Tensor, _ *jvpCall) (*tensor.Tensor, error) { return t, nil })
	reshapeOp.jvp = unaryJVP(func(c *Context, t *tensor.Tensor, k *jvpCall) (*tensor.Tensor, error) {
		return Reshape(c, t, k.out[0].ShapeRef())
	})
	sumOp.jvp = reductionJVP(Sum)
	meanOp.jvp = reductionJVP(Mean)
}

// linearJVP is the rule of a + b (a - b when negate): f of the tangents,
// a missing one negated or skipped.
func linearJVP(f func(c *Context, x, y *tensor.Tensor) (*tensor.Tensor, error), negate bool) jvp {
	return func(c *Context, _ *jvpCall, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
		x, y := ts[0], ts[1]
		var t *tensor.Tensor
		var err error
		switch {
		case y == nil:
			t = x
		case x == nil && negate:
			t, err = Neg(c, y)
		case x == nil:
			t = y
		default:
			t, err = f(c, x, y)
		}
		return []*tensor.Tensor{t}, err
	}
}

// mulJVP: d(a·b) = da·b + a·db.
func mulJVP(c *Context, k *jvpCall, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
	var terms []*tensor.Tensor
	if ts[0] != nil {
		t, err := Mul(c, ts[0], k.in[1])
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	if ts[1] != nil {
		t, err := Mul(c, k.in[0], ts[1])
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	return sumTerms(c, terms)
}

// divJVP: d(a/b) = da/b - (a/b)·db/b.
func divJVP(c *Context, k *jvpCall, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
	var terms []*tensor.Tensor
	if ts[0] != nil {
		t, err := Div(c, ts[0], k.in[1])
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	if ts[1] != nil {
		q, err := Div(c, ts[1], k.in[1])
		if err != nil {
			return nil, err
		}
		if q, err = Mul(c, k.out[0], q); err != nil {
			return nil, err
		}
		if q, err = Neg(c, q); err != nil {
			return nil, err
		}
		terms = append(terms, q)
	}
	return sumTerms(c, terms)
}

func sumTerms(c *Context, terms []*tensor.Tensor) ([]*tensor.Tensor, error) {
	switch len(terms) {
	case 0:
		return []*tensor.Tensor{nil}, nil
	case 1:
		return terms, nil
	}
	t, err := Add(c, terms[0], terms[1])
	return []*tensor.Tensor{t}, err
}

// unaryJVP is the rule of a one-input op linear in its input: f of the
// tangent.
func unaryJVP(f func(c *Context, t *tensor.Tensor, k *jvpCall) (*tensor.Tensor, error)) jvp {
	return func(c *Context, k *jvpCall, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if ts[0] == nil {
			return []*tensor.Tensor{nil}, nil
		}
		t, err := f(c, ts[0], k)
		return []*tensor.Tensor{t}, err
	}
}

// reductionJVP is the rule of sum and mean: the same reduction of the
// tangent.
func reductionJVP(f func(c *Context, a *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error)) jvp {
	return unaryJVP(func(c *Context, t *tensor.Tensor, k *jvpCall) (*tensor.Tensor, error) {
		dims, keepdim, err := reductionAttrs("jvp", k.attrs)
		if err != nil {
			return nil, err
		}
		return f(c, t, dims, keepdim)
	})
}
