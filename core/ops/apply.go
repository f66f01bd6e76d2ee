package ops

import (
	"fmt"

	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// formula maps output gradients (nil = none arrived) and saved tensors to one
// gradient per input, in any shape that sum-reduces to the input's shape.
// What else it needs it reads from its node (op, shape, inputs), so that
// recording an op allocates no closure.
type formula func(c *Context, n *node, grads []*tensor.Tensor, saved []*tensor.Tensor) ([]*tensor.Tensor, error)

// node is the autograd node of every op in this package.
type node struct {
	name    string
	edges   []autograd.Edge
	inputs  []autograd.InputMeta
	nOut    int
	backend backend.IBackend
	grad    formula
	spec    *binarySpec  // broadcasting binary ops: the spec whose grad runs
	rule    backend.Rule // route/select: which selection rule
	shape   []int        // sum/mean: the keepdim shape of the result
	count   int          // mean: the number of elements averaged
	autograd.Saved

	edgeBuf [2]autograd.Edge
	metaBuf [2]autograd.InputMeta
	dimsBuf [8]int // the inputs' shapes, copied: referencing them would keep the inputs' memory alive
}

func (n *node) Name() string                 { return n.name }
func (n *node) Next() []autograd.Edge        { return n.edges }
func (n *node) NumOutputs() int              { return n.nOut }
func (n *node) String() string               { return n.name }
func (n *node) Inputs() []autograd.InputMeta { return n.inputs }

// Apply runs the grad formula, then reduces and casts each gradient back to
// its input's shape and dtype: the one place where un-broadcasting happens.
func (n *node) Apply(grads []*tensor.Tensor, createGraph bool) ([]*tensor.Tensor, error) {
	saved, err := n.Tensors()
	if err != nil {
		return nil, err
	}
	c := &Context{Backend: n.backend, GradEnabled: createGraph}
	gs, err := n.grad(c, n, grads, saved)
	if err != nil {
		return nil, err
	}
	if len(gs) != len(n.edges) {
		return nil, fmt.Errorf("%s: formula returned %d gradients for %d inputs", n.name, len(gs), len(n.edges))
	}
	// gs is the formula's own slice: adapted in place.
	for i, e := range n.edges {
		if e.Node == nil || gs[i] == nil {
			gs[i] = nil
			continue
		}
		if gs[i], err = adapt(c, gs[i], n.inputs[i].Shape, n.inputs[i].Dtype); err != nil {
			return nil, err
		}
	}
	return gs, nil
}

// adapt reduces g to shape (SumToShape) and casts it to dt.
func adapt(c *Context, g *tensor.Tensor, shape []int, dt dtype.Dtype) (*tensor.Tensor, error) {
	g, err := SumToShape(c, g, shape)
	if err != nil {
		return nil, err
	}
	return Cast(c, g, dt)
}

// record attaches a node to outputs when c records gradients and an input
// requires them, and returns it (nil when nothing was recorded). saved are
// kept for the formula until the graph is freed.
func record(c *Context, name string, inputs, outputs, saved []*tensor.Tensor, f formula) *node {
	if !c.GradEnabled {
		return nil
	}
	var edgeBuf [2]autograd.Edge
	edges := edgeBuf[:0]
	if len(inputs) > len(edgeBuf) {
		edges = make([]autograd.Edge, 0, len(inputs))
	}
	any := false
	for _, t := range inputs {
		e := autograd.EdgeOf(t)
		edges = append(edges, e)
		any = any || e.Node != nil
	}
	if !any {
		return nil
	}
	n := &node{name: name, nOut: len(outputs), backend: c.Backend, grad: f}
	if len(inputs) <= len(n.edgeBuf) {
		n.edges, n.inputs = n.edgeBuf[:len(inputs)], n.metaBuf[:len(inputs)]
	} else {
		n.edges, n.inputs = make([]autograd.Edge, len(inputs)), make([]autograd.InputMeta, len(inputs))
	}
	copy(n.edges, edges)
	dims := n.dimsBuf[:0]
	for i, t := range inputs {
		sh := t.ShapeRef()
		if len(dims)+len(sh) > cap(dims) {
			dims = make([]int, 0, len(sh))
		}
		dims = append(dims, sh...)
		n.inputs[i] = autograd.InputMeta{Shape: dims[len(dims)-len(sh) : len(dims) : len(dims)], Dtype: t.Dtype()}
	}
	n.Save(saved...)
	for i, o := range outputs {
		if o.Dtype().IsFloat() {
			o.SetGradFn(n, i)
		}
	}
	return n
}

// promote is the result dtype of two operands: wrapped numbers (Python
// scalars) are weak, and under autocast the op's AmpPolicy applies first.
func promote(c *Context, s OpSchema, a, b *tensor.Tensor) dtype.Dtype {
	ad, bd := a.Dtype(), b.Dtype()
	if c.Autocast.Enabled {
		var floats []dtype.Dtype
		for _, t := range []*tensor.Tensor{a, b} {
			if !t.IsWrappedNumber() && t.Dtype().IsFloat() {
				floats = append(floats, t.Dtype())
			}
		}
		if !a.IsWrappedNumber() {
			ad = c.Autocast.CastDtype(s.AmpPolicy, ad, floats)
		}
		if !b.IsWrappedNumber() {
			bd = c.Autocast.CastDtype(s.AmpPolicy, bd, floats)
		}
	}
	switch {
	case a.IsWrappedNumber() && b.IsWrappedNumber():
		// Two weak operands: the default dtype of the higher category.
		return dtype.ScalarDtype(max(ad.Category(), bd.Category()))
	case a.IsWrappedNumber():
		return dtype.PromoteScalar(bd, ad.Category())
	case b.IsWrappedNumber():
		return dtype.PromoteScalar(ad, bd.Category())
	}
	return dtype.Promote(ad, bd)
}

// castInput converts an op input to dt, recording the cast when the input
// requires grad so higher-order gradients see through it. A wrapped integer
// (a Python int) converts exactly, or fails with an Overflow error.
func castInput(c *Context, t *tensor.Tensor, dt dtype.Dtype) (*tensor.Tensor, error) {
	if t.IsWrappedNumber() && t.Dtype() == dtype.Int64 {
		return t.WrappedIntTo(dt)
	}
	if t.Dtype() == dt {
		return t, nil
	}
	if c.GradEnabled && t.RequiresGrad() {
		return Cast(c, t, dt)
	}
	return castPlain(c, t, dt)
}

func castPlain(c *Context, t *tensor.Tensor, dt dtype.Dtype) (*tensor.Tensor, error) {
	out, err := tensor.Empty(dt, t.Shape())
	if err != nil {
		return nil, err
	}
	return out, c.Backend.Cast(out, t)
}

func checkInputs(name string, ts ...*tensor.Tensor) error {
	for i, t := range ts {
		if t == nil {
			return errs.Valuef("%s: input %d is nil", name, i)
		}
	}
	return nil
}

// broadcastInput returns t viewed with shape (t itself when it has it already).
func broadcastInput(t *tensor.Tensor, shape []int) (*tensor.Tensor, error) {
	if tensor.SameShape(t.ShapeRef(), shape) {
		return t, nil
	}
	return t.BroadcastTo(shape)
}

// binarySpec is what a broadcasting binary op states about itself.
type binarySpec struct {
	schema OpSchema
	node   string // autograd node name, e.g. "MinimumBackward"
	kernel backend.BinaryOp
	// dtype adjusts the promoted dtype (div of integers gives a float) or
	// rejects it.
	dtype func(dtype.Dtype) (dtype.Dtype, error)
	// saves says whether the formula needs the (cast) inputs.
	saves bool
	// grad maps g (in the broadcast shape) and the saved inputs to (ga, gb).
	grad func(c *Context, g, a, b *tensor.Tensor) (ga, gb *tensor.Tensor, err error)
}

// binaryFormula runs the node's spec's two-input grad.
func binaryFormula(c *Context, n *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
	g := grads[0]
	if g == nil {
		return []*tensor.Tensor{nil, nil}, nil
	}
	var x, y *tensor.Tensor
	if len(saved) == 2 {
		x, y = saved[0], saved[1]
	}
	ga, gb, err := n.spec.grad(c, g, x, y)
	return []*tensor.Tensor{ga, gb}, err
}

// applyBinary is the trampoline for broadcasting binary ops.
func applyBinary(c *Context, s *binarySpec, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(s.schema.Name, a, b); err != nil {
		return nil, err
	}
	rd := promote(c, s.schema, a, b)
	if s.dtype != nil {
		var err error
		if rd, err = s.dtype(rd); err != nil {
			return nil, err
		}
	}
	var shapeBuf [tensor.MaxDims]int
	shape, err := tensor.BroadcastShapesInto(shapeBuf[:], a.ShapeRef(), b.ShapeRef())
	if err != nil {
		return nil, errs.Valuef("%s: %w", s.schema.Name, err)
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
	out, err := tensor.Empty(rd, shape)
	if err != nil {
		return nil, err
	}
	if err := c.Backend.Binary(s.kernel, out, av, bv); err != nil {
		return nil, err
	}
	if !c.GradEnabled || !(a.RequiresGrad() || b.RequiresGrad()) {
		return out, nil // nothing to record: skip building the node's pieces
	}
	var saved []*tensor.Tensor
	if s.saves {
		saved = []*tensor.Tensor{ac, bc}
	}
	if n := record(c, s.node, []*tensor.Tensor{a, b}, []*tensor.Tensor{out}, saved, binaryFormula); n != nil {
		n.spec = s
	}
	return out, nil
}
