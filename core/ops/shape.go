package ops

import (
	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

func broadcastAll(ts ...*tensor.Tensor) ([]int, error) {
	shape := ts[0].ShapeRef()
	for _, t := range ts[1:] {
		if tensor.SameShape(shape, t.ShapeRef()) {
			continue
		}
		s, err := tensor.BroadcastShapes(shape, t.ShapeRef())
		if err != nil {
			return nil, err
		}
		shape = s
	}
	return shape, nil
}

// operandViews checks that op name's operands are all given and returns
// their broadcast shape and each one viewed with it (the selection kernels'
// operands).
func operandViews(name string, ts ...*tensor.Tensor) ([]int, []*tensor.Tensor, error) {
	if err := checkInputs(name, ts...); err != nil {
		return nil, nil, err
	}
	shape, err := broadcastAll(ts...)
	if err != nil {
		return nil, nil, errs.Valuef("%s: %w", name, err)
	}
	views, err := broadcastViews(shape, ts...)
	return shape, views, err
}

func broadcastViews(shape []int, ts ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	out := make([]*tensor.Tensor, len(ts))
	for i, t := range ts {
		v, err := broadcastInput(t, shape) // t itself where it has the shape
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// CastBackward: y = a converted to the dtype attribute; the gradient passes
// through and the node casts it back to a's dtype.
var castOp = define(&spec{
	OpSchema: OpSchema{Name: "cast", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: Elementwise, Arity: 1, Outputs: 1, Attrs: []string{"dtype"}},
	node:  "CastBackward",
	unary: castKernel,
	vjp:   passThrough,
})

// Cast returns a converted to dt (a itself when it already has dt).
func Cast(c *Context, a *tensor.Tensor, dt dtype.Dtype) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(castOp.Name, a); err != nil {
		return nil, err
	}
	if !dt.Valid() {
		return nil, errs.Typef("cast: unsupported dtype %v", dt)
	}
	if a.Dtype() == dt {
		return a, nil
	}
	return applyUnary(c, castOp, a, dt)
}

// CopyBackward: y = a contiguous copy of a with the same bits (-0.0 and NaN
// payloads included); the gradient passes through.
var copyOp = define(&spec{
	OpSchema: OpSchema{Name: "copy", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: Elementwise, Arity: 1, Outputs: 1},
	node:  "CopyBackward",
	unary: castKernel,
	vjp:   passThrough,
})

// Copy returns a contiguous copy of a with the same bits.
func Copy(c *Context, a *tensor.Tensor) (*tensor.Tensor, error) {
	return applyUnary(c, copyOp, a, dtype.Invalid)
}

// ExpandBackward: y = a broadcast to the shape attribute; the node
// sum-reduces the gradient back to a's shape.
var expandOp = define(&spec{
	OpSchema: OpSchema{Name: "expand", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: View, Arity: 1, Outputs: 1, Attrs: []string{"shape"}},
	node: "ExpandBackward",
	vjp:  passThrough,
})

// Expand returns a broadcast view of a with shape (zero strides on the
// stretched dims; no memory is copied). ExpandBackward is sum_to_shape, done
// by the trampoline. The engine gives callers contiguous copies of any
// gradient that is still such a view.
func Expand(c *Context, a *tensor.Tensor, shape []int) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(expandOp.Name, a); err != nil {
		return nil, err
	}
	out, err := a.BroadcastTo(shape) // a new view: outside any graph until recorded
	if err != nil {
		return nil, errs.Valuef("expand: %w", err)
	}
	record(c, expandOp, []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil)
	return out, nil
}

// ReshapeBackward: y = a with the shape attribute; the gradient is
// reshaped back to a's shape.
var reshapeOp = define(&spec{
	OpSchema: OpSchema{Name: "reshape", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: View, Arity: 1, Outputs: 1, Attrs: []string{"shape"}},
	node: "ReshapeBackward",
})

// The generic calls and reshape's vjp call the ops they belong to, so they
// are attached in init (a package-level initialiser may not refer to
// itself).
func init() {
	castOp.jvp = unaryJVP(func(_ *Context, t *tensor.Tensor, _ *jvpCall) (*tensor.Tensor, error) { return t, nil })
	copyOp.jvp = unaryJVP(func(c *Context, t *tensor.Tensor, _ *jvpCall) (*tensor.Tensor, error) { return Copy(c, t) })
	expandOp.jvp = unaryJVP(func(_ *Context, t *tensor.Tensor, _ *jvpCall) (*tensor.Tensor, error) { return t, nil })
	reshapeOp.jvp = unaryJVP(func(c *Context, t *tensor.Tensor, k *jvpCall) (*tensor.Tensor, error) {
		return Reshape(c, t, k.out[0].ShapeRef())
	})
	castOp.call = func(c *Context, a *tensor.Tensor, attrs []int64) (*tensor.Tensor, error) {
		if len(attrs) != 1 {
			return nil, errs.Valuef("cast takes one attribute (the dtype), got %d", len(attrs))
		}
		if attrs[0] < 0 || attrs[0] > 255 {
			return nil, errs.Typef("unsupported dtype code %d", attrs[0])
		}
		return Cast(c, a, dtype.Dtype(attrs[0]))
	}
	expandOp.call = func(c *Context, a *tensor.Tensor, attrs []int64) (*tensor.Tensor, error) {
		return Expand(c, a, intsOf(attrs))
	}
	reshapeOp.call = func(c *Context, a *tensor.Tensor, attrs []int64) (*tensor.Tensor, error) {
		return Reshape(c, a, intsOf(attrs))
	}
	reshapeOp.vjp = func(c *Context, n *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if grads[0] == nil {
			return []*tensor.Tensor{nil}, nil
		}
		g, err := Reshape(c, grads[0], n.inputs[0].Shape)
		return []*tensor.Tensor{g}, err
	}
}

// intsOf converts attributes to ints.
func intsOf(attrs []int64) []int {
	out := make([]int, len(attrs))
	for i, v := range attrs {
		out[i] = int(v)
	}
	return out
}

// Reshape returns a with a new shape of the same element count: a view when
// the layout allows, else a contiguous copy (ReshapeBackward reshapes back).
func Reshape(c *Context, a *tensor.Tensor, shape []int) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(reshapeOp.Name, a); err != nil {
		return nil, err
	}
	out, err := a.Reshape(shape) // a new view: outside any graph until recorded
	if err != nil {
		n, nerr := tensor.Numel(shape)
		if nerr != nil || n != a.Numel() {
			return nil, err
		}
		cont, cerr := castPlain(c, a, a.Dtype())
		if cerr != nil {
			return nil, cerr
		}
		if out, err = cont.Reshape(shape); err != nil {
			return nil, err
		}
	}
	record(c, reshapeOp, []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil)
	return out, nil
}

// SumToShape sums g over the leading dims that shape lacks and over the dims
// where shape has 1 and g does not: the reverse of broadcasting shape to g's
// shape. It returns g itself when the shapes already match.
func SumToShape(c *Context, g *tensor.Tensor, shape []int) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs("sum_to_shape", g); err != nil {
		return nil, err
	}
	gs := g.ShapeRef()
	if tensor.SameShape(gs, shape) {
		return g, nil
	}
	lead := len(gs) - len(shape)
	if lead < 0 {
		return nil, errs.Valuef("sum_to_shape: cannot reduce shape %s to %s",
			tensor.FormatShape(gs), tensor.FormatShape(shape))
	}
	var dims []int
	for i, d := range gs {
		switch {
		case i < lead:
			dims = append(dims, i)
		case shape[i-lead] == d:
		case shape[i-lead] == 1:
			dims = append(dims, i)
		default:
			return nil, errs.Valuef("sum_to_shape: cannot reduce shape %s to %s",
				tensor.FormatShape(gs), tensor.FormatShape(shape))
		}
	}
	s, err := Sum(c, g, dims, true)
	if err != nil {
		return nil, err
	}
	if tensor.SameShape(s.ShapeRef(), shape) {
		return s, nil
	}
	return Reshape(c, s, shape)
}
