package ops

import (
	"github.com/pylucid/pylucid/core/tensor"
)

// The shapes of forward-mode rules that several ops share (each op's own
// rule is set in its record's file). A rule maps input tangents (nil:
// zero) to output tangents; CallJvp expands and casts the results.

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
