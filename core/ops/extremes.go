package ops

import (
	"errors"
	"fmt"

	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// AminBackward, AmaxBackward, MinBackward, MaxBackward
//
// The selecting reductions (docs/semantics.md): each output is the winner
// of its reduced slice, found by folding the slice in row-major order of the
// reduced dims with the selection rule (backend.Rule): the running winner
// keeps its place against the next element iff it wins. So the winner is
// the slice's first NaN, else its first smallest (amin, min) or largest
// (amax, max) element; of -0.0 and +0.0 the first. argmin and argmax
// return the winner's position (int64, no node).
//
// Math
//
//	y_j      = x at w(j), the winner of slice j (its bits)
//	dL/dx_i  = dL/dy_j if i == w(j), else 0
//
// so the gradient of each slice sums exactly to its output's gradient
// however many elements tie (PyTorch's amax and JAX's reduce_max split it
// among them instead).
//
// The node saves the winners' positions (int64, one per output), not the
// input. Its vjp scatters the output gradient to them (ScatterBackward,
// whose own vjp gathers, and back), and the jvp gathers the input tangent
// from them: the tangent of an output is its winner's tangent, bit for bit.
//
// Schemas: "amin", "amax", "argmin", "argmax", "min", "max", version 1,
// Promote, deterministic. amin/amax take reduction attributes (keepdim,
// ndims, dims; ndims -1 for all); argmin/argmax one dim or all (flat
// positions); min/max exactly one dim, with two outputs (values, indices).

var (
	aminOp = defineExtreme(extremeRecord{name: "amin", node: "AminBackward", rule: backend.RuleMin,
		returns: extremeValues, numpy: []string{"amin", "min", "minimum.reduce"}, bridges: allBridges,
		doc: `The smallest element over dim (an int, a tuple, () for none, None for all): the first NaN, else the first smallest.

Each slice is folded in row-major order: the result is its first NaN if
it has one, else its first smallest element (bits included), and that
position gets the whole gradient (ties are not split).`,
		example: `>>> ops.amin([[3.0, 1.0], [np.nan, 0.0]], dim=1)
tensor([ 1., nan])
>>> ops.amin([[3.0, 1.0], [2.0, 0.0]])
tensor(0.)`})
	amaxOp = defineExtreme(extremeRecord{name: "amax", node: "AmaxBackward", rule: backend.RuleMax,
		returns: extremeValues, numpy: []string{"amax", "max", "maximum.reduce"}, bridges: allBridges,
		doc: `The largest element over dim (an int, a tuple, () for none, None for all): the first NaN, else the first largest.

Each slice is folded in row-major order: the result is its first NaN if
it has one, else its first largest element (bits included), and that
position gets the whole gradient (ties are not split). The mirror of amin.`,
		example: `>>> ops.amax([[3.0, 1.0], [np.nan, 0.0]], dim=1)
tensor([ 3., nan])
>>> ops.amax([[3.0, 1.0], [2.0, 0.0]])
tensor(3.)`})
	argminOp = defineExtreme(extremeRecord{name: "argmin", rule: backend.RuleMin, returns: extremeIndex,
		numpy: []string{"argmin"}, bridges: allBridges,
		doc: `The int64 position of amin's winner along dim (flat index when None): the first NaN, else the first smallest.

Equal to NumPy's argmin, NaN included (the first NaN wins). No gradient.`,
		example: `>>> ops.argmin([[3.0, 1.0, 1.0], [np.nan, 0.0, 2.0]], dim=1)
tensor([1, 0])
>>> ops.argmin([[3.0, 1.0], [2.0, 0.0]])
tensor(3)`})
	argmaxOp = defineExtreme(extremeRecord{name: "argmax", rule: backend.RuleMax, returns: extremeIndex,
		numpy: []string{"argmax"}, bridges: allBridges,
		doc: `The int64 position of amax's winner along dim (flat index when None): the first NaN, else the first largest.

Equal to NumPy's argmax, NaN included (the first NaN wins). No gradient.`,
		example: `>>> ops.argmax([[3.0, 3.0, 1.0], [np.nan, 0.0, 2.0]], dim=1)
tensor([0, 0])`})
	minOp = defineExtreme(extremeRecord{name: "min", node: "MinBackward", rule: backend.RuleMin,
		returns: extremeBoth, whole: "amin", bridges: []string{"torch"},
		doc: `min(x) is amin over all dims; min(x, dim) returns (values, indices): the first NaN, else the first smallest.

As torch.min(x, dim): a MinMaxResult of the winners and their int64
positions along dim; the gradient goes to the winners.`,
		example: `>>> ops.min([[3.0, 1.0, 1.0], [2.0, 0.0, 4.0]], dim=1)
MinMaxResult(values=tensor([1., 0.]), indices=tensor([1, 1]))
>>> ops.min([[3.0, 1.0], [2.0, 0.0]])
tensor(0.)`})
	maxOp = defineExtreme(extremeRecord{name: "max", node: "MaxBackward", rule: backend.RuleMax,
		returns: extremeBoth, whole: "amax", bridges: []string{"torch"},
		doc: `max(x) is amax over all dims; max(x, dim) returns (values, indices): the first NaN, else the first largest.

As torch.max(x, dim): a MinMaxResult of the winners and their int64
positions along dim; the gradient goes to the winners. The mirror of min.`,
		example: `>>> ops.max([[3.0, 1.0, 3.0], [2.0, 0.0, 4.0]], dim=1)
MinMaxResult(values=tensor([3., 4.]), indices=tensor([0, 2]))
>>> ops.max([[3.0, 1.0], [2.0, 0.0]])
tensor(3.)`})
)

// allBridges: every framework bridge offers the op under its name.
var allBridges = []string{"torch", "jax", "dask"}

// What a selecting reduction returns.
type extremeKind uint8

const (
	extremeValues extremeKind = iota // amin, amax: the winners
	extremeIndex                     // argmin, argmax: their positions
	extremeBoth                      // min, max over a dim: both
)

// extremeRecord is what a selecting reduction's record says of it: the
// rest (kernel, what the node saves, vjp, jvp) follows from its rule and
// what it returns.
type extremeRecord struct {
	name, node string
	rule       backend.Rule
	returns    extremeKind
	whole      string // SigMinMax: the op over every dim
	numpy      []string
	bridges    []string
	check      func(s *spec, x, vals, idx *tensor.Tensor) error
	doc        string
	example    string
}

func defineExtreme(r extremeRecord) *spec {
	outputs, sig := 1, SigReduction
	switch r.returns {
	case extremeBoth:
		outputs, sig = 2, SigMinMax
	case extremeIndex:
		sig = SigArg
	}
	s := define(&spec{
		OpSchema: OpSchema{Name: r.name, Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
			Kind: Reduction, Arity: 1, Outputs: outputs, Attrs: reductionAttrNames,
			Signature: sig, Rule: r.rule.String(), Whole: r.whole, NumPy: r.numpy, Bridges: r.bridges, Doc: r.doc,
			Example: r.example},
		node:    r.node,
		rule:    r.rule,
		forward: extremeForward,
		returns: r.returns,
		check:   r.check,
	})
	if r.returns != extremeIndex {
		s.saves, s.vjp, s.jvp = savesPositions, extremeVJP, extremeJVP
	} else {
		// Positions are integers: no tangent (zeros), but every op has a
		// forward-mode rule (docs/autograd.md), so jvp through argmin works.
		s.jvp = noTangentJVP
	}
	return s
}

// The internal halves of the gradient: scatter(g, idx) puts each output
// gradient at its winner's position in an input-shaped zero tensor;
// gather(x, idx) reads each winner's element. They are each other's
// transpose. The node attribute is the *reduced of the reduction.
var (
	scatterOp = define(&spec{
		OpSchema: OpSchema{Name: "scatter", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
			Kind: Selection, Arity: 2, Outputs: 1},
		node:  "ScatterBackward",
		saves: savesOperands,
	})
	gatherOp = define(&spec{
		OpSchema: OpSchema{Name: "gather", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
			Kind: Selection, Arity: 2, Outputs: 1},
		node:  "GatherBackward",
		saves: savesOperands,
	})
)

func init() {
	scatterOp.vjp = scatterVJP
	gatherOp.vjp = gatherVJP
}

// Amin returns the smallest element of each slice of x over dims (nil: all
// dims), the first NaN where there is one; keepdim keeps reduced dims as 1.
// Its gradient goes whole to the winner's position.
func Amin(c *Context, x *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error) {
	return one(c, aminOp, x, dims, keepdim)
}

// Amax is Amin's mirror: the largest element, the first NaN where there is
// one.
func Amax(c *Context, x *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error) {
	return one(c, amaxOp, x, dims, keepdim)
}

// Argmin returns the int64 position of Amin's winner along dim, or its flat
// index when dim is nil (NumPy's argmin, NaN included).
func Argmin(c *Context, x *tensor.Tensor, dim *int, keepdim bool) (*tensor.Tensor, error) {
	return one(c, argminOp, x, dimList(dim), keepdim)
}

// Argmax returns the int64 position of Amax's winner (see Argmin).
func Argmax(c *Context, x *tensor.Tensor, dim *int, keepdim bool) (*tensor.Tensor, error) {
	return one(c, argmaxOp, x, dimList(dim), keepdim)
}

// MinDim returns Amin over dim and the int64 positions of the winners along
// it, as torch.min(x, dim) does.
func MinDim(c *Context, x *tensor.Tensor, dim int, keepdim bool) (values, indices *tensor.Tensor, err error) {
	out, _, err := extreme(ctxOr(c), minOp, x, []int{dim}, keepdim)
	if err != nil {
		return nil, nil, err
	}
	return out[0], out[1], nil
}

// MaxDim is MinDim's mirror.
func MaxDim(c *Context, x *tensor.Tensor, dim int, keepdim bool) (values, indices *tensor.Tensor, err error) {
	out, _, err := extreme(ctxOr(c), maxOp, x, []int{dim}, keepdim)
	if err != nil {
		return nil, nil, err
	}
	return out[0], out[1], nil
}

// one is the one output of the selecting reduction s (Amin, Nanargmax, ...).
func one(c *Context, s *spec, x *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error) {
	out, _, err := extreme(ctxOr(c), s, x, dims, keepdim)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func dimList(dim *int) []int {
	if dim == nil {
		return nil
	}
	return []int{*dim}
}

// extremeForward is the generic entry (Call) of the selecting reductions.
func extremeForward(c *Context, s *spec, in []*tensor.Tensor, attrs []int64) ([]*tensor.Tensor, any, error) {
	dims, keepdim, err := reductionAttrs(s.Name, attrs)
	if err != nil {
		return nil, nil, err
	}
	return extreme(ctxOr(c), s, in[0], dims, keepdim)
}

// extreme runs selecting reduction s of x over dims. It returns the outputs
// and the winners' positions in the keepdim shape (the jvp's aux).
func extreme(c *Context, s *spec, x *tensor.Tensor, dims []int, keepdim bool) ([]*tensor.Tensor, any, error) {
	if err := checkInputs(s.Name, x); err != nil {
		return nil, nil, err
	}
	k := s.returns
	switch {
	case k == extremeIndex && dims != nil && len(dims) != 1:
		return nil, nil, errs.Valuef("%s: takes one dim or None, got %d dims", s.Name, len(dims))
	case k == extremeBoth && len(dims) != 1:
		return nil, nil, errs.Valuef("%s: takes exactly one dim, got %d", s.Name, len(dims))
	}
	if !x.Dtype().Valid() {
		return nil, nil, errs.Typef("%s: unsupported dtype %v", s.Name, x.Dtype())
	}
	keep, shape, count, err := reduceShape(s.Name, x, dims, keepdim)
	if err != nil {
		return nil, nil, err
	}
	if count == 0 {
		return nil, nil, errs.Valuef("%s: cannot reduce over a zero-size slice (input shape %s): "+
			"the operation has no identity", s.Name, tensor.FormatShape(x.ShapeRef()))
	}
	// amin and amax need the winners' positions only for a gradient (a
	// node) or a tangent (forward mode); without either they ask the
	// backend for values only, which is faster. A check looks at the
	// values.
	var idx *tensor.Tensor
	if k != extremeValues || c.forwardMode || (c.GradEnabled && autograd.EdgeOf(x).Node != nil) {
		if idx, err = tensor.Empty(dtype.Int64, keep); err != nil {
			return nil, nil, err
		}
	}
	var vals *tensor.Tensor
	if k != extremeIndex || s.check != nil {
		if vals, err = tensor.Empty(x.Dtype(), keep); err != nil {
			return nil, nil, err
		}
	}
	if err := argReduce(c, s, vals, idx, x); err != nil {
		return nil, nil, err
	}
	if s.check != nil {
		if err := s.check(s, x, vals, idx); err != nil {
			return nil, nil, err
		}
	}
	var outs []*tensor.Tensor
	if k != extremeIndex {
		v, err := vals.Reshape(shape)
		if err != nil {
			return nil, nil, err
		}
		outs = append(outs, v)
	}
	if k != extremeValues {
		i, err := idx.Reshape(shape)
		if err != nil {
			return nil, nil, err
		}
		outs = append(outs, i)
	}
	if idx != nil && k != extremeIndex {
		if n := record(c, s, []*tensor.Tensor{x}, outs, s.toSave([]*tensor.Tensor{x}, idx)); n != nil {
			n.attr = &reduced{keep: keep, count: count}
		}
	}
	if idx == nil {
		return outs, nil, nil
	}
	return outs, idx, nil
}

// argReduce runs the backend's ArgReduce, stopping early once c.Done is
// closed (as sumInto does).
func argReduce(c *Context, s *spec, vals, idx, x *tensor.Tensor) error {
	k := reducer(c.Backend)
	if c.Done == nil {
		return k.ArgReduce(s.rule, vals, idx, x)
	}
	var err error
	if ib, ok := k.(backend.InterruptibleArgReduce); ok {
		err = ib.ArgReduceUntil(s.rule, vals, idx, x, c.Done)
	} else if backend.Stopped(c.Done) {
		err = ErrInterrupted
	} else {
		err = k.ArgReduce(s.rule, vals, idx, x)
	}
	if errors.Is(err, ErrInterrupted) {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	return err
}

// extremeVJP scatters the values' gradient to the winners.
func extremeVJP(c *Context, n *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
	g := grads[0]
	if g == nil {
		return []*tensor.Tensor{nil}, nil
	}
	g, err := scatter(c, g, saved[0], n.inputs[0].Shape)
	return []*tensor.Tensor{g}, err
}

// noTangentJVP is the forward-mode rule of an op whose outputs are
// integers (argmin, argmax): none has a tangent.
func noTangentJVP(_ *Context, k *jvpCall, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return make([]*tensor.Tensor, len(k.out)), nil
}

// extremeJVP gathers the winners' tangents.
func extremeJVP(c *Context, k *jvpCall, tangents []*tensor.Tensor) ([]*tensor.Tensor, error) {
	out := make([]*tensor.Tensor, len(k.out))
	t, err := gather(c, tangents[0], k.aux.(*tensor.Tensor))
	if err != nil {
		return nil, err
	}
	if out[0], err = Reshape(c, t, k.out[0].ShapeRef()); err != nil {
		return nil, err
	}
	return out, nil
}

// scatter returns a zero tensor of shape and g's dtype with g (reshaped to
// idx's keepdim shape) at the positions idx.
func scatter(c *Context, g, idx *tensor.Tensor, shape []int) (*tensor.Tensor, error) {
	if !tensor.SameShape(g.ShapeRef(), idx.ShapeRef()) {
		var err error
		if g, err = Reshape(c, g, idx.ShapeRef()); err != nil {
			return nil, err
		}
	}
	out, err := tensor.Empty(g.Dtype(), shape)
	if err != nil {
		return nil, err
	}
	if err := reducer(c.Backend).Scatter(out, g, idx); err != nil {
		return nil, err
	}
	record(c, scatterOp, []*tensor.Tensor{g}, []*tensor.Tensor{out}, []*tensor.Tensor{idx})
	return out, nil
}

// gather returns the elements of x (the reduced tensor's shape) at the
// positions idx, in idx's keepdim shape.
func gather(c *Context, x, idx *tensor.Tensor) (*tensor.Tensor, error) {
	out, err := tensor.Empty(x.Dtype(), idx.ShapeRef())
	if err != nil {
		return nil, err
	}
	if err := reducer(c.Backend).Gather(out, x, idx); err != nil {
		return nil, err
	}
	record(c, gatherOp, []*tensor.Tensor{x}, []*tensor.Tensor{out}, []*tensor.Tensor{idx})
	return out, nil
}

// scatterVJP is ScatterBackward: gather the gradient back from the winners.
func scatterVJP(c *Context, _ *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if grads[0] == nil {
		return []*tensor.Tensor{nil}, nil
	}
	g, err := gather(c, grads[0], saved[0])
	return []*tensor.Tensor{g}, err
}

// gatherVJP is GatherBackward: scatter the gradient to the winners.
func gatherVJP(c *Context, n *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if grads[0] == nil {
		return []*tensor.Tensor{nil}, nil
	}
	g, err := scatter(c, grads[0], saved[0], n.inputs[0].Shape)
	return []*tensor.Tensor{g}, err
}
