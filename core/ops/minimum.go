package ops

import (
	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/tensor"
)

// MinimumBackward: y = min(a, b) with broadcasting (SPEC §1).
//
// Schema ("minimum", 1, Promote, deterministic). Forward dispatches to the
// backend's minimum kernel. The node saves both (promoted) inputs; its
// formula routes grad_out to the winner by the selection rule — a wins iff
// a <= b or a is NaN — so ties and NaN in a go to a, and the two masks
// partition every index. The trampoline then sum-reduces each branch to its
// input's shape and casts it to its input's dtype.
var minimumSpec = &binarySpec{
	schema: Register(OpSchema{Name: "minimum", Version: 1, AmpPolicy: amp.Promote, Deterministic: true}),
	node:   "MinimumBackward",
	kernel: backend.Minimum,
	saves:  true,
	grad: func(c *Context, g, a, b *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
		return route(c, backend.RuleMin, a, b, g)
	},
}

// MaximumBackward is the mirror of MinimumBackward: a wins iff a >= b or a is
// NaN; ties go to a.
var maximumSpec = &binarySpec{
	schema: Register(OpSchema{Name: "maximum", Version: 1, AmpPolicy: amp.Promote, Deterministic: true}),
	node:   "MaximumBackward",
	kernel: backend.Maximum,
	saves:  true,
	grad: func(c *Context, g, a, b *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
		return route(c, backend.RuleMax, a, b, g)
	},
}

// Minimum returns the elementwise minimum of a and b with NumPy broadcasting:
// y_i is a_i when a_i <= b_i or a_i is NaN, else b_i (bit for bit). Its
// gradient goes to the operand selected; ties go to a.
func Minimum(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyBinary(c, minimumSpec, a, b)
}

// Maximum returns the elementwise maximum of a and b: y_i is a_i when
// a_i >= b_i or a_i is NaN, else b_i. Ties go to a.
func Maximum(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyBinary(c, maximumSpec, a, b)
}

// The two halves of the min/max gradient, adjoint to each other so that
// create_graph works to any order (the masks are constants of every pass):
//
//	route(a, b, g)        = (g·[a wins], g·[b wins])   RouteBackward → select
//	select(a, b, x, y)    = x·[a wins] + y·[b wins]    SelectBackward → route

var (
	routeSchema  = Register(OpSchema{Name: "route", Version: 1, AmpPolicy: amp.Promote, Deterministic: true})
	selectSchema = Register(OpSchema{Name: "select", Version: 1, AmpPolicy: amp.Promote, Deterministic: true})
)

// route splits g between a and b by selection rule r.
func route(c *Context, r backend.Rule, a, b, g *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
	if err := checkInputs(routeSchema.Name, a, b, g); err != nil {
		return nil, nil, err
	}
	shape, err := broadcastAll(a, b, g)
	if err != nil {
		return nil, nil, err
	}
	views, err := broadcastViews(shape, a, b, g)
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
	if err := c.Backend.Route(r, ga, gb, views[0], views[1], views[2]); err != nil {
		return nil, nil, err
	}
	if n := record(c, "RouteBackward", []*tensor.Tensor{g}, []*tensor.Tensor{ga, gb}, []*tensor.Tensor{a, b},
		routeFormula); n != nil {
		n.rule = r
	}
	return ga, gb, nil
}

// routeFormula is RouteBackward: select the two output gradients back.
func routeFormula(c *Context, n *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if grads[0] == nil && grads[1] == nil {
		return []*tensor.Tensor{nil}, nil
	}
	x, y, err := orZero(grads[0], grads[1])
	if err != nil {
		return nil, err
	}
	dg, err := selectBy(c, n.rule, saved[0], saved[1], x, y)
	return []*tensor.Tensor{dg}, err
}

// selectBy returns x where a wins (by rule r) and y elsewhere.
func selectBy(c *Context, r backend.Rule, a, b, x, y *tensor.Tensor) (*tensor.Tensor, error) {
	if err := checkInputs(selectSchema.Name, a, b, x, y); err != nil {
		return nil, err
	}
	shape, err := broadcastAll(a, b, x, y)
	if err != nil {
		return nil, err
	}
	views, err := broadcastViews(shape, a, b, x, y)
	if err != nil {
		return nil, err
	}
	out, err := tensor.Empty(x.Dtype(), shape)
	if err != nil {
		return nil, err
	}
	if err := c.Backend.Select(r, out, views[0], views[1], views[2], views[3]); err != nil {
		return nil, err
	}
	if n := record(c, "SelectBackward", []*tensor.Tensor{x, y}, []*tensor.Tensor{out}, []*tensor.Tensor{a, b},
		selectFormula); n != nil {
		n.rule = r
	}
	return out, nil
}

// selectFormula is SelectBackward: route the output gradient.
func selectFormula(c *Context, n *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if grads[0] == nil {
		return []*tensor.Tensor{nil, nil}, nil
	}
	dx, dy, err := route(c, n.rule, saved[0], saved[1], grads[0])
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
