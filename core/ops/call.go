package ops

import (
	"fmt"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// CallN runs the op with the given id like Call and returns all its
// outputs (min and max over a dim have two: values and indices).
//
// outs, when not nil, has one entry per output: a tensor to write that
// output into (out=, docs/semantics.md), or nil for a fresh one. Each given
// tensor must have exactly the output's shape (errs.Value) and dtype
// (errs.Type; nothing is cast), no zero strides and writable memory; it may
// be an input itself (the same elements, an in-place update) but may not
// otherwise share memory with an input or another output (errs.Value). A
// call that would record a graph (grad mode on, the op differentiable and
// an input or out requiring grad) is refused (a runtime error), as no node
// can be attached to memory the caller owns. On any error every out is left
// as it was. The returned slice holds the given tensors where they were
// given.
func CallN(c *Context, id int, in []*tensor.Tensor, attrs []int64, outs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	c = ctxOr(c)
	if id < 0 || id >= len(byID) {
		return nil, errs.Valuef("unknown op id %d", id)
	}
	s := byID[id]
	if outs != nil {
		return callOut(c, s, in, attrs, outs)
	}
	if s.forward != nil {
		if len(in) != s.Arity {
			return nil, errs.Valuef("%s takes %d inputs, got %d", s.Name, s.Arity, len(in))
		}
		out, _, err := s.forward(c, s, in, attrs)
		return out, err
	}
	t, err := Call(c, id, in, attrs)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{t}, nil
}

// differentiable reports whether op s can record a node.
func (s *spec) differentiable() bool { return s.vjp != nil }

// callOut is CallN with out= tensors.
func callOut(c *Context, s *spec, in []*tensor.Tensor, attrs []int64, outs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(outs) != s.Outputs {
		return nil, errs.Valuef("%s has %d outputs, got %d out= tensors", s.Name, s.Outputs, len(outs))
	}
	if err := checkOuts(c, s, in, outs); err != nil {
		return nil, err
	}
	res, err := callOutChecked(c, s, in, attrs, outs)
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		if o != nil {
			o.BumpVersion() // an in-place write: nodes that saved o see it (autograd.Saved)
		}
	}
	return res, nil
}

// callOutChecked is callOut once the outs passed checkOuts.
func callOutChecked(c *Context, s *spec, in []*tensor.Tensor, attrs []int64, outs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	// The binary elementwise ops write straight into out: their result
	// shape and dtype are known before any work, and their kernels read
	// element i of every input before writing element i of the output.
	if s.Kind == Elementwise && s.Arity == 2 && s.call == nil && s.forward == nil {
		if len(in) != 2 || len(attrs) != 0 {
			return nil, errs.Valuef("%s takes 2 inputs and no attributes", s.Name)
		}
		t, err := elementwiseInto(c, s, in[0], in[1], outs[0])
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{t}, nil
	}
	if s.into != nil {
		if len(in) != s.Arity {
			return nil, errs.Valuef("%s takes %d inputs, got %d", s.Name, s.Arity, len(in))
		}
		res, _, err := s.into(c, s, in, attrs, outs[0])
		return res, err
	}
	// Everything else computes fresh results, checks them against out and
	// copies them in: out is touched only once the op has succeeded.
	res, err := CallN(c.NoGrad(), s.ID, in, attrs, nil)
	if err != nil {
		return nil, err
	}
	return copyIntoOuts(c, s, res, outs)
}

// copyIntoOuts copies fresh results res into the outs given (nil entries:
// res's own), each checked to match its result first, so that no out is
// touched unless all match; it returns res with the outs in their places.
func copyIntoOuts(c *Context, s *spec, res, outs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	for i, o := range outs {
		if o != nil {
			if err := checkOutMatches(s, o, res[i].ShapeRef(), res[i].Dtype()); err != nil {
				return nil, err
			}
		}
	}
	for i, o := range outs {
		if o != nil {
			if err := c.Backend.Cast(o, res[i]); err != nil {
				return nil, err
			}
			res[i] = o
		}
	}
	return res, nil
}

// checkOuts checks what out= tensors must satisfy before any work: no graph
// to record, writable, no zero strides, and no partial overlap with an input
// or with each other.
func checkOuts(c *Context, s *spec, in, outs []*tensor.Tensor) error {
	if c.GradEnabled && s.differentiable() {
		for _, t := range append(in[:len(in):len(in)], outs...) {
			if t != nil && t.RequiresGrad() {
				return fmt.Errorf("%s(): an out= argument does not support automatic differentiation, "+
					"but an argument requires grad; call it under no_grad() or without out=", s.Name)
			}
		}
	}
	for i, o := range outs {
		if o == nil {
			continue
		}
		if o.ReadOnly() {
			return errs.Valuef("%s: out is read-only", s.Name)
		}
		for d, st := range o.StridesRef() {
			if st == 0 && o.Dim(d) > 1 && o.Numel() > 0 { // an empty out has no elements to share (NumPy gives it zero strides)
				return errs.Valuef("%s: out has a zero stride (a broadcast view): its elements share memory", s.Name)
			}
		}
		for j, t := range in {
			if t == nil {
				continue
			}
			a, err := tensor.Alias(o, t)
			if err != nil {
				return err
			}
			if a == tensor.Partial {
				return errs.Valuef("%s: out shares memory with input %d without being the same elements; "+
					"pass separate memory, or the input itself for an in-place update", s.Name, j)
			}
		}
		for _, p := range outs[:i] {
			if p == nil {
				continue
			}
			if a, err := tensor.Alias(o, p); err != nil || a != tensor.Disjoint {
				return errs.Valuef("%s: the out= tensors share memory", s.Name)
			}
		}
	}
	return nil
}

// checkOutMatches checks out against the result's shape and dtype.
func checkOutMatches(s *spec, out *tensor.Tensor, shape []int, dt dtype.Dtype) error {
	if !tensor.SameShape(out.ShapeRef(), shape) {
		return errs.Valuef("%s: out has shape %s, but the result has shape %s", s.Name,
			tensor.FormatShape(out.ShapeRef()), tensor.FormatShape(shape))
	}
	if out.Dtype() != dt {
		return errs.Typef("%s: out has dtype %v, but the result has dtype %v (out= does not cast)", s.Name, out.Dtype(), dt)
	}
	return nil
}

// jvpCall is what an op's jvp sees of the call it differentiates.
type jvpCall struct {
	spec    *spec            // the op's record
	in, out []*tensor.Tensor // the call's inputs, as given, and its outputs
	attrs   []int64
	aux     any // what the op's forward left for its jvp (spec.forward)
}

// CallJvp runs the op with the given id like CallN (without out=) and
// pushes tangents, one per input (nil: zero), forward through it: it
// returns the outputs and one tangent per output, nil where the tangent is
// zero (every input tangent nil, or an integer output). A tangent has its
// input's shape; it is converted to its input's dtype, which must be
// floating. For the min/max family an output's tangent is its winner's
// tangent, bit for bit.
func CallJvp(c *Context, id int, in, tangents []*tensor.Tensor, attrs []int64) (outs, touts []*tensor.Tensor, err error) {
	c = ctxOr(c)
	if id < 0 || id >= len(byID) {
		return nil, nil, errs.Valuef("unknown op id %d", id)
	}
	s := byID[id]
	if len(tangents) != len(in) {
		return nil, nil, errs.Valuef("%s: %d tangents for %d inputs", s.Name, len(tangents), len(in))
	}
	var aux any
	if s.forward != nil {
		if len(in) != s.Arity {
			return nil, nil, errs.Valuef("%s takes %d inputs, got %d", s.Name, s.Arity, len(in))
		}
		fc := *c
		fc.forwardMode = true
		outs, aux, err = s.forward(&fc, s, in, attrs)
	} else {
		outs, err = CallN(c, id, in, attrs, nil)
	}
	if err != nil {
		return nil, nil, err
	}
	ts := make([]*tensor.Tensor, len(tangents))
	any := false
	for i, t := range tangents {
		if t == nil {
			continue
		}
		p := in[i]
		if p == nil {
			return nil, nil, errs.Valuef("%s: a tangent for absent input %d", s.Name, i)
		}
		if !p.Dtype().IsFloat() {
			return nil, nil, errs.Typef("%s: input %d has dtype %v: only floating inputs have tangents", s.Name, i, p.Dtype())
		}
		if !tensor.SameShape(t.ShapeRef(), p.ShapeRef()) {
			return nil, nil, errs.Valuef("%s: tangent %d has shape %s, but its input has shape %s", s.Name, i,
				tensor.FormatShape(t.ShapeRef()), tensor.FormatShape(p.ShapeRef()))
		}
		if ts[i], err = Cast(c.NoGrad(), t, p.Dtype()); err != nil {
			return nil, nil, err
		}
		any = true
	}
	touts = make([]*tensor.Tensor, len(outs))
	if !any || s.jvp == nil {
		// An op without a jvp is fine when no output could carry a tangent
		// (argmin, argmax: integer outputs, whose tangent is nil).
		for _, o := range outs {
			if any && o.Dtype().IsFloat() {
				return nil, nil, fmt.Errorf("%s has no forward-mode derivative", s.Name)
			}
		}
		return outs, touts, nil
	}
	nc := c.NoGrad()
	got, err := s.jvp(nc, &jvpCall{spec: s, in: in, out: outs, attrs: attrs, aux: aux}, ts)
	if err != nil {
		return nil, nil, err
	}
	for i, t := range got {
		o := outs[i]
		if t == nil || !o.Dtype().IsFloat() {
			continue
		}
		if t, err = Cast(nc, t, o.Dtype()); err != nil {
			return nil, nil, err
		}
		if !tensor.SameShape(t.ShapeRef(), o.ShapeRef()) {
			if t, err = Expand(nc, t, o.ShapeRef()); err != nil {
				return nil, nil, err
			}
			if t, err = Copy(nc, t); err != nil { // a tangent is a tensor of its own, not a broadcast view
				return nil, nil, err
			}
		}
		touts[i] = t
	}
	return outs, touts, nil
}

// tangentsIn returns tangents converted to dt, with a 0-d zero in place of
// a missing one.
func tangentsIn(c *Context, dt dtype.Dtype, ts ...*tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
	var out [2]*tensor.Tensor
	for i := range out {
		var err error
		if i >= len(ts) || ts[i] == nil {
			out[i], err = tensor.New(dt, nil)
		} else {
			out[i], err = Cast(c, ts[i], dt)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return out[0], out[1], nil
}
