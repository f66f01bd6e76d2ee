package ops

import (
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// applyElementwise is the trampoline of the binary elementwise ops: type
// promotion (wrapped numbers are weak), autocast by the op's AmpPolicy, the
// op's dtype rule, casting the inputs to the result dtype, NumPy
// broadcasting, the backend kernel and, when an input requires grad, the
// node.
func applyElementwise(c *Context, s *spec, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return elementwiseInto(c, s, a, b, nil)
}

// elementwiseInto is applyElementwise writing into out (nil: a fresh
// tensor), whose shape and dtype must be the result's (checkOuts has
// checked the rest of out='s rules).
func elementwiseInto(c *Context, s *spec, a, b, out *tensor.Tensor) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(s.Name, a, b); err != nil {
		return nil, err
	}
	rd := promote(c, s, a, b)
	if s.dtype != nil {
		var err error
		if rd, err = s.dtype(rd); err != nil {
			return nil, err
		}
	}
	// Equal shapes (the common case) are the result's shape as they are,
	// read only from here on. Others broadcast into a small buffer on the
	// stack (zeroing MaxDims ints cost every call more than its whole shape
	// work); more dims take one from the heap.
	shape := a.ShapeRef()
	if !tensor.SameShape(shape, b.ShapeRef()) {
		var shapeBuf [8]int
		buf := shapeBuf[:]
		if n := max(a.Ndim(), b.Ndim()); n > len(buf) {
			buf = make([]int, n)
		}
		var err error
		if shape, err = tensor.BroadcastShapesInto(buf, a.ShapeRef(), b.ShapeRef()); err != nil {
			return nil, errs.Valuef("%s: %w", s.Name, err)
		}
	}
	ac, err := castInput(c, a, rd)
	if err != nil {
		return nil, err
	}
	bc, err := castInput(c, b, rd)
	if err != nil {
		return nil, err
	}
	av, err := broadcastInput(ac, shape)
	if err != nil {
		return nil, err
	}
	bv, err := broadcastInput(bc, shape)
	if err != nil {
		return nil, err
	}
	if out == nil {
		if out, err = tensor.Empty(rd, shape); err != nil {
			return nil, err
		}
	} else if err := checkOutMatches(s, out, shape, rd); err != nil {
		return nil, err
	}
	if err := c.Backend.Binary(s.kernel, out, av, bv); err != nil {
		return nil, err
	}
	if !c.GradEnabled || !(a.RequiresGrad() || b.RequiresGrad()) {
		return out, nil // nothing to record: skip building the node's pieces
	}
	record(c, s, []*tensor.Tensor{a, b}, []*tensor.Tensor{out}, s.toSave([]*tensor.Tensor{ac, bc}, nil))
	return out, nil
}

// applyUnary is the trampoline of the unary elementwise ops: the result has
// dtype to (Invalid: a's dtype, passed through the op's dtype rule) and a's
// shape.
func applyUnary(c *Context, s *spec, a *tensor.Tensor, to dtype.Dtype) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(s.Name, a); err != nil {
		return nil, err
	}
	if to == dtype.Invalid {
		to = a.Dtype()
	}
	if s.dtype != nil {
		var err error
		if to, err = s.dtype(to); err != nil {
			return nil, err
		}
	}
	out, err := tensor.Empty(to, a.ShapeRef())
	if err != nil {
		return nil, err
	}
	if err := s.unary(c.Backend, out, a); err != nil {
		return nil, err
	}
	record(c, s, []*tensor.Tensor{a}, []*tensor.Tensor{out}, s.toSave([]*tensor.Tensor{a}, nil))
	return out, nil
}

// binaryVJP adapts a two-input formula: g (in the broadcast shape) and the
// saved inputs (nil unless the op saves them) to (ga, gb).
func binaryVJP(f func(c *Context, g, a, b *tensor.Tensor) (ga, gb *tensor.Tensor, err error)) vjp {
	return func(c *Context, _ *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
		g := grads[0]
		if g == nil {
			return []*tensor.Tensor{nil, nil}, nil
		}
		var a, b *tensor.Tensor
		if len(saved) == 2 {
			a, b = saved[0], saved[1]
		}
		ga, gb, err := f(c, g, a, b)
		return []*tensor.Tensor{ga, gb}, err
	}
}

// unaryVJP adapts a one-input formula of g.
func unaryVJP(f func(c *Context, g *tensor.Tensor) (*tensor.Tensor, error)) vjp {
	return func(c *Context, _ *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if grads[0] == nil {
			return []*tensor.Tensor{nil}, nil
		}
		g, err := f(c, grads[0])
		return []*tensor.Tensor{g}, err
	}
}

// unaryKernel is the unary field of an op whose kernel is backend op k.
func unaryKernel(k backend.UnaryOp) func(be backend.IBackend, out, a *tensor.Tensor) error {
	return func(be backend.IBackend, out, a *tensor.Tensor) error { return be.Unary(k, out, a) }
}

// castKernel converts a into out's dtype (cast, copy).
func castKernel(be backend.IBackend, out, a *tensor.Tensor) error { return be.Cast(out, a) }

// passThrough is the vjp of ops whose gradient is grad_out itself before
// the node's reduction and cast (cast, copy, expand).
func passThrough(_ *Context, _ *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return []*tensor.Tensor{grads[0]}, nil
}
