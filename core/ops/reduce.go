package ops

import (
	"errors"
	"fmt"

	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// SumBackward: y = the sum of a over dims (docs/semantics.md); the gradient
// is grad_out back in the keepdim shape, expanded to a's shape. Integers and
// bool sum to int64; float16 and bfloat16 accumulate in float32, in the
// fixed order of backend.SumBlock.
var sumOp = define(&spec{
	OpSchema: OpSchema{Name: "sum", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: Reduction, Arity: 1, Outputs: 1, Attrs: reductionAttrNames, Signature: SigReduction,
		NumPy: []string{"sum"}, Doc: "Sum over dim (all dims when None); integers sum to int64.",
		Example: ">>> ops.sum([[1, 2], [3, 4]], dim=0)\ntensor([4, 6])"},
	node:  "SumBackward",
	dtype: func(d dtype.Dtype) (dtype.Dtype, error) { return dtype.SumDtype(d), nil },
	reduce: func(c *Context, a *tensor.Tensor, keep []int, _ int, dt dtype.Dtype) (*tensor.Tensor, error) {
		return sumInto(c, "sum", a, keep, dt)
	},
	vjp: sumVJP,
})

// MeanBackward: y = the mean of a floating a over dims; the gradient is
// SumBackward's divided by the count. It accumulates in float32 for
// float16/bfloat16, divides, and rounds once to a's dtype; the mean over
// zero elements is NaN.
var meanOp = define(&spec{
	OpSchema: OpSchema{Name: "mean", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: Reduction, Arity: 1, Outputs: 1, Attrs: reductionAttrNames, Signature: SigReduction,
		Floating: true, NumPy: []string{"mean"}, Doc: "Mean over dim (all dims when None) of a floating tensor.",
		Example: ">>> ops.mean([[1.0, 2.0], [3.0, 5.0]], dim=1, keepdim=True)\ntensor([[1.5],\n        [4. ]])"},
	node: "MeanBackward",
	dtype: func(d dtype.Dtype) (dtype.Dtype, error) {
		if !d.IsFloat() {
			return d, errs.Typef("mean: input dtype must be floating point, got %v", d)
		}
		return d, nil
	},
	reduce: meanKernel,
})

func init() {
	meanOp.vjp = meanVJP
	sumOp.jvp = reductionJVP(Sum)
	meanOp.jvp = reductionJVP(Mean)
}

// reductionAttrNames are the attributes of every reduction for Call.
var reductionAttrNames = []string{"keepdim", "ndims", "dims"}

// Sum returns the sum of a over dims (nil: all dims), keeping reduced dims
// as size 1 when keepdim. The order of additions is fixed, so results do not
// depend on the thread count.
func Sum(c *Context, a *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error) {
	return applyReduction(c, sumOp, a, dims, keepdim)
}

// Mean returns the mean of a floating tensor over dims (nil: all dims).
func Mean(c *Context, a *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error) {
	return applyReduction(c, meanOp, a, dims, keepdim)
}

// reduced is the attribute of a reduction's node.
type reduced struct {
	keep  []int // the keepdim shape of the result
	count int   // the number of elements reduced into each output
}

// applyReduction is the trampoline of reductions: the op's dtype rule, the
// dims, the kernel (into the keepdim shape), the result's shape and the
// node.
func applyReduction(c *Context, s *spec, a *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(s.Name, a); err != nil {
		return nil, err
	}
	dt, err := s.dtype(a.Dtype())
	if err != nil {
		return nil, err
	}
	keep, shape, count, err := reduceShape(s.Name, a, dims, keepdim)
	if err != nil {
		return nil, err
	}
	out, err := s.reduce(c, a, keep, count, dt)
	if err != nil {
		return nil, err
	}
	if out, err = out.Reshape(shape); err != nil {
		return nil, err
	}
	if n := record(c, s, []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil); n != nil {
		n.attr = &reduced{keep: keep, count: count}
	}
	return out, nil
}

// reduceShape normalises dims (nil = all) and returns the keepdim shape and
// the output shape.
func reduceShape(name string, a *tensor.Tensor, dims []int, keepdim bool) (keep, out []int, count int, err error) {
	nd := a.Ndim()
	red := make([]bool, nd)
	if dims == nil {
		for i := range red {
			red[i] = true
		}
	}
	for _, d := range dims {
		k, err := tensor.NormDim(d, nd)
		if err != nil {
			return nil, nil, 0, errs.Valuef("%s: %w", name, err)
		}
		if red[k] {
			return nil, nil, 0, errs.Valuef("%s: dim %d appears multiple times in the list of dims", name, d)
		}
		red[k] = true
	}
	count = 1
	for i, d := range a.ShapeRef() {
		if red[i] {
			keep = append(keep, 1)
			count *= d
			if keepdim {
				out = append(out, 1)
			}
		} else {
			keep = append(keep, d)
			out = append(out, d)
		}
	}
	return keep, out, count, nil
}

// sumInto runs the backend sum of a into a fresh tensor of dtype dt and
// keepdim shape keep, stopping early once c.Done is closed.
func sumInto(c *Context, name string, a *tensor.Tensor, keep []int, dt dtype.Dtype) (*tensor.Tensor, error) {
	out, err := tensor.Empty(dt, keep)
	if err != nil {
		return nil, err
	}
	if c.Done == nil {
		return out, c.Backend.Sum(out, a)
	}
	if ib, ok := c.Backend.(backend.Interruptible); ok {
		err = ib.SumUntil(out, a, c.Done)
	} else if backend.Stopped(c.Done) {
		err = ErrInterrupted
	} else {
		err = c.Backend.Sum(out, a)
	}
	if errors.Is(err, ErrInterrupted) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, err
}

// meanKernel sums in the accumulation dtype, divides by the count there and
// rounds once to dt.
func meanKernel(c *Context, a *tensor.Tensor, keep []int, count int, dt dtype.Dtype) (*tensor.Tensor, error) {
	acc := dtype.AccumulateDtype(dt)
	s, err := sumInto(c, "mean", a, keep, acc)
	if err != nil {
		return nil, err
	}
	n, err := tensor.Scalar(acc, float64(count))
	if err != nil {
		return nil, err
	}
	nv, _ := n.BroadcastTo(keep)
	q, err := tensor.Empty(acc, keep)
	if err != nil {
		return nil, err
	}
	if err := c.Backend.Binary(backend.Div, q, s, nv); err != nil {
		return nil, err
	}
	if acc != dt {
		return castPlain(c, q, dt)
	}
	return q, nil
}

// sumVJP is SumBackward: the output gradient, back in the keepdim shape and
// expanded to the input's.
func sumVJP(c *Context, n *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
	g := grads[0]
	if g == nil {
		return []*tensor.Tensor{nil}, nil
	}
	// Back to the keepdim shape, unless broadcasting aligns g already (a
	// full reduction, or keepdim).
	keep := n.attr.(*reduced).keep
	if g.Ndim() != 0 && !tensor.SameShape(g.ShapeRef(), keep) {
		var err error
		if g, err = Reshape(c, g, keep); err != nil {
			return nil, err
		}
	}
	g, err := Expand(c, g, n.inputs[0].Shape)
	return []*tensor.Tensor{g}, err
}

// meanVJP is MeanBackward: sumVJP divided by the count.
func meanVJP(c *Context, n *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if grads[0] == nil {
		return []*tensor.Tensor{nil}, nil
	}
	r := n.attr.(*reduced)
	g, err := Reshape(c, grads[0], r.keep)
	if err != nil {
		return nil, err
	}
	cnt, err := tensor.WrappedScalar(dtype.Float64, float64(r.count))
	if err != nil {
		return nil, err
	}
	if g, err = Div(c, g, cnt); err != nil {
		return nil, err
	}
	g, err = Expand(c, g, n.inputs[0].Shape)
	return []*tensor.Tensor{g}, err
}
