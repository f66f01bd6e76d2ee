package ops

import (
	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/tensor"
)

// MinimumBackward
//
// Autograd node for elementwise minimum y = min(a, b) with NumPy
// broadcasting (docs/semantics.md).
//
// Saves both inputs a and b (after promotion), so the backward pass can
// rebuild the masks of the comparison. The gradient flows only through the
// operand that won: a wins iff a <= b or a is NaN, so ties and NaN in a give
// the whole gradient to a.
//
// Math
//
//	y_i     = a_i if a wins at i, else b_i (the winner's bits)
//	dL/da_i = 1{a wins at i} · dL/dy_i
//	dL/db_i = 1{b wins at i} · dL/dy_i
//
// The two masks partition the index set, so grad_a + grad_b == grad_out at
// every position; the masks are constants of every pass, so create_graph
// works to any order (route and select below are adjoint).
//
// Shape: the output takes the broadcast shape; the trampoline sum-reduces
// both gradient branches back to their input's shape and casts them to its
// dtype.
//
// Schema: "minimum", version 1, Promote, deterministic. Forward: the
// backend's minimum kernel. See also MaximumBackward, the mirror.
var minimumOp = defineSelecting("minimum", "MinimumBackward", backend.Minimum,
	`Elementwise minimum with NumPy broadcasting: ties go to a, NaN propagates.

y[i] = a[i] when a[i] <= b[i] or a[i] is NaN, else b[i] (the winner's
bits). The gradient goes to the operand selected: ties go to a, NaN to
the operand that produced it (to a when both are).`,
	`>>> ops.minimum([1.0, 5.0, np.nan], [3.0, 2.0, 0.0])
tensor([ 1.,  2., nan])
>>> ops.minimum([[0.0], [4.0]], [1.0, 2.0])
tensor([[0., 0.],
        [1., 2.]])
>>> a = pylucid.tensor([1.0, 2.0], requires_grad=True)
>>> b = pylucid.tensor([1.0, 0.0], requires_grad=True)
>>> ops.minimum(a, b).sum().backward()
>>> a.grad, b.grad
(tensor([1., 0.]), tensor([0., 1.]))`)

// MaximumBackward is the mirror of MinimumBackward: a wins iff a >= b or a is
// NaN; ties go to a.
var maximumOp = defineSelecting("maximum", "MaximumBackward", backend.Maximum,
	`Elementwise maximum with NumPy broadcasting: ties go to a, NaN propagates.

y[i] = a[i] when a[i] >= b[i] or a[i] is NaN, else b[i] (the winner's
bits). The gradient goes to the operand selected: ties go to a, NaN to
the operand that produced it (to a when both are). The mirror of minimum.`,
	`>>> ops.maximum([1.0, 5.0, np.nan], [3.0, 2.0, 0.0])
tensor([ 3.,  5., nan])`)

// FminBackward is MinimumBackward under NumPy's fmin rule: a wins iff
// a <= b or b is NaN, so NaN is ignored unless both are NaN (then a's NaN
// and a's gradient). backend.RuleFMin states the rule; the kernels and the
// gradient both take it from there.
var fminOp = defineSelecting("fmin", "FminBackward", backend.FMin,
	`Elementwise NumPy fmin: ties go to a, NaN is ignored (NaN only where both are).

y[i] = a[i] when a[i] <= b[i] or b[i] is NaN, else b[i]; a NaN only where
both are (then a's). The gradient goes to the operand selected.`,
	`>>> ops.fmin([1.0, np.nan, np.nan], [3.0, 2.0, np.nan])
tensor([ 1.,  2., nan])`)

// FmaxBackward: the mirror of FminBackward (a >= b or b is NaN).
var fmaxOp = defineSelecting("fmax", "FmaxBackward", backend.FMax,
	`Elementwise NumPy fmax: ties go to a, NaN is ignored (NaN only where both are).

y[i] = a[i] when a[i] >= b[i] or b[i] is NaN, else b[i]; a NaN only where
both are (then a's). The gradient goes to the operand selected. The
mirror of fmin.`,
	`>>> ops.fmax([1.0, np.nan, np.nan], [3.0, 2.0, np.nan])
tensor([ 3.,  2., nan])`)

// defineSelecting registers a binary selection: kernel k of the backend,
// the gradient and tangent of k's rule; NumPy's ufunc of the same name.
func defineSelecting(name, node string, k backend.BinaryOp, doc, example string) *spec {
	r, _ := k.Rule()
	schema := binarySchema(name, name, doc, example)
	schema.Rule, schema.Bridges = r.String(), allBridges
	return define(&spec{
		OpSchema: schema,
		node:     node,
		kernel:   k,
		rule:     r,
		saves:    savesInputs,
		vjp:      selectionVJP(r),
		jvp:      selectionJVP(r),
	})
}

// selectionVJP is the gradient of a binary selection by rule r: the output
// gradient routed to the winner.
func selectionVJP(r backend.Rule) vjp {
	return binaryVJP(func(c *Context, g, a, b *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
		return route(c, r, a, b, g)
	})
}

// selectionJVP is the tangent of a binary selection by rule r: the winner's
// tangent, bit for bit (the transpose of selectionVJP).
func selectionJVP(r backend.Rule) jvp {
	return func(c *Context, k *jvpCall, tangents []*tensor.Tensor) ([]*tensor.Tensor, error) {
		rd := k.out[0].Dtype()
		a, err := castInput(c, k.in[0], rd)
		if err != nil {
			return nil, err
		}
		b, err := castInput(c, k.in[1], rd)
		if err != nil {
			return nil, err
		}
		x, y, err := tangentsIn(c, rd, tangents[0], tangents[1])
		if err != nil {
			return nil, err
		}
		t, err := selectBy(c, r, a, b, x, y)
		return []*tensor.Tensor{t}, err
	}
}

// Fmin returns NumPy's fmin of a and b with broadcasting: y_i is a_i when
// a_i <= b_i or b_i is NaN, else b_i (a NaN only when both are).
func Fmin(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyElementwise(c, fminOp, a, b)
}

// Fmax returns NumPy's fmax of a and b: a_i when a_i >= b_i or b_i is NaN.
func Fmax(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyElementwise(c, fmaxOp, a, b)
}

// Minimum returns the elementwise minimum of a and b with NumPy broadcasting:
// y_i is a_i when a_i <= b_i or a_i is NaN, else b_i (bit for bit). Its
// gradient goes to the operand selected; ties go to a.
func Minimum(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyElementwise(c, minimumOp, a, b)
}

// Maximum returns the elementwise maximum of a and b: y_i is a_i when
// a_i >= b_i or a_i is NaN, else b_i. Ties go to a.
func Maximum(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyElementwise(c, maximumOp, a, b)
}

// The two halves of the min/max gradient, adjoint to each other so that
// create_graph works to any order (the masks are constants of every pass):
//
//	route(a, b, g)        = (g·[a wins], g·[b wins])   RouteBackward → select
//	select(a, b, x, y)    = x·[a wins] + y·[b wins]    SelectBackward → route
//
// Their node's attribute is the selection rule; a and b are saved operands,
// not differentiated.

var routeOp = define(&spec{
	OpSchema: OpSchema{Name: "route", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: Selection, Arity: 3, Outputs: 2},
	node:  "RouteBackward",
	saves: savesOperands,
	vjp:   routeVJP,
})

var selectOp = define(&spec{
	OpSchema: OpSchema{Name: "select", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: Selection, Arity: 4, Outputs: 1},
	node:  "SelectBackward",
	saves: savesOperands,
})

// select's vjp calls route, whose vjp calls select: attached here (a
// package-level initialiser may not refer to itself).
func init() { selectOp.vjp = selectVJP }

// route splits g between a and b by selection rule r.
func route(c *Context, r backend.Rule, a, b, g *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
	shape, views, err := operandViews(routeOp.Name, a, b, g)
	if err != nil {
		return nil, nil, err
	}
	ga, err := tensor.Empty(g.Dtype(), shape)
	if err != nil {
		return nil, nil, err
	}
	gb, err := tensor.Empty(g.Dtype(), shape)
	if err != nil {
		return nil, nil, err
	}
	if err := selector(c.Backend).Route(r, ga, gb, views[0], views[1], views[2]); err != nil {
		return nil, nil, err
	}
	if n := record(c, routeOp, []*tensor.Tensor{g}, []*tensor.Tensor{ga, gb}, []*tensor.Tensor{a, b}); n != nil {
		n.attr = r
	}
	return ga, gb, nil
}

// routeVJP is RouteBackward: select the two output gradients back.
func routeVJP(c *Context, n *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if grads[0] == nil && grads[1] == nil {
		return []*tensor.Tensor{nil}, nil
	}
	x, y, err := orZero(grads[0], grads[1])
	if err != nil {
		return nil, err
	}
	dg, err := selectBy(c, n.attr.(backend.Rule), saved[0], saved[1], x, y)
	return []*tensor.Tensor{dg}, err
}

// selectBy returns x where a wins (by rule r) and y elsewhere.
func selectBy(c *Context, r backend.Rule, a, b, x, y *tensor.Tensor) (*tensor.Tensor, error) {
	shape, views, err := operandViews(selectOp.Name, a, b, x, y)
	if err != nil {
		return nil, err
	}
	out, err := tensor.Empty(x.Dtype(), shape)
	if err != nil {
		return nil, err
	}
	if err := selector(c.Backend).Select(r, out, views[0], views[1], views[2], views[3]); err != nil {
		return nil, err
	}
	if n := record(c, selectOp, []*tensor.Tensor{x, y}, []*tensor.Tensor{out}, []*tensor.Tensor{a, b}); n != nil {
		n.attr = r
	}
	return out, nil
}

// selectVJP is SelectBackward: route the output gradient.
func selectVJP(c *Context, n *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if grads[0] == nil {
		return []*tensor.Tensor{nil, nil}, nil
	}
	dx, dy, err := route(c, n.attr.(backend.Rule), saved[0], saved[1], grads[0])
	return []*tensor.Tensor{dx, dy}, err
}

// orZero replaces a missing gradient by a 0-d zero of the other's dtype.
func orZero(x, y *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
	var err error
	if x == nil {
		x, err = tensor.New(y.Dtype(), nil)
	}
	if y == nil {
		y, err = tensor.New(x.Dtype(), nil)
	}
	return x, y, err
}
