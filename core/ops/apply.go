package ops

import (
	"fmt"

	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// node is the autograd node of every op in this package: the op's spec
// (whose vjp runs on backward) and the attribute value the spec defines.
type node struct {
	spec    *spec
	attr    any // route/select: the selection rule; sum/mean: *reduced
	edges   []autograd.Edge
	inputs  []autograd.InputMeta
	nOut    int
	backend backend.IBackend
	autograd.Saved

	edgeBuf [2]autograd.Edge
	metaBuf [2]autograd.InputMeta
	dimsBuf [8]int // the inputs' shapes, copied: referencing them would keep the inputs' memory alive
}

func (n *node) Name() string                 { return n.spec.node }
func (n *node) Next() []autograd.Edge        { return n.edges }
func (n *node) NumOutputs() int              { return n.nOut }
func (n *node) String() string               { return n.spec.node }
func (n *node) Inputs() []autograd.InputMeta { return n.inputs }

// Apply runs the op's vjp, then reduces and casts each gradient back to
// its input's shape and dtype: the one place where un-broadcasting happens.
func (n *node) Apply(grads []*tensor.Tensor, createGraph bool) ([]*tensor.Tensor, error) {
	saved, err := n.Tensors()
	if err != nil {
		if m, ok := err.(*autograd.ModifiedError); ok {
			return nil, m.WithNode(n.spec.node)
		}
		return nil, err
	}
	c := &Context{Backend: n.backend, GradEnabled: createGraph}
	gs, err := n.spec.vjp(c, n, grads, saved)
	if err != nil {
		return nil, err
	}
	if len(gs) != len(n.edges) {
		return nil, fmt.Errorf("%s: vjp returned %d gradients for %d inputs", n.spec.node, len(gs), len(n.edges))
	}
	// gs is the vjp's own slice: adapted in place.
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

// record attaches a node of op s to outputs when c records gradients and an
// input requires them, and returns it (nil when nothing was recorded). saved
// are kept for the vjp until the graph is freed.
func record(c *Context, s *spec, inputs, outputs, saved []*tensor.Tensor) *node {
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
	n := &node{spec: s, nOut: len(outputs), backend: c.Backend}
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
func promote(c *Context, s *spec, a, b *tensor.Tensor) dtype.Dtype {
	return promoteDtypes(c, s, a.Dtype(), a.IsWrappedNumber(), b.Dtype(), b.IsWrappedNumber())
}

// promoteDtypes is promote on dtypes, aw and bw saying which are weak.
func promoteDtypes(c *Context, s *spec, ad dtype.Dtype, aw bool, bd dtype.Dtype, bw bool) dtype.Dtype {
	if c.Autocast.Enabled {
		var buf [2]dtype.Dtype
		floats := buf[:0]
		if !aw && ad.IsFloat() {
			floats = append(floats, ad)
		}
		if !bw && bd.IsFloat() {
			floats = append(floats, bd)
		}
		if !aw {
			ad = c.Autocast.CastDtype(s.AmpPolicy, ad, floats)
		}
		if !bw {
			bd = c.Autocast.CastDtype(s.AmpPolicy, bd, floats)
		}
	}
	switch {
	case aw && bw:
		// Two weak operands: the default dtype of the higher category.
		return dtype.ScalarDtype(max(ad.Category(), bd.Category()))
	case aw:
		return dtype.PromoteScalar(bd, ad.Category())
	case bw:
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
	if t.IsWrappedNumber() && t.Dtype().IsFloat() && dt.IsFloat() {
		return t.FloatScalarTo(dt) // a Python float: no kernel call for one element
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
