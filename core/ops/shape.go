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

var (
	sumSchema     = Register(OpSchema{Name: "sum", Version: 1, AmpPolicy: amp.Promote, Deterministic: true})
	meanSchema    = Register(OpSchema{Name: "mean", Version: 1, AmpPolicy: amp.Promote, Deterministic: true})
	castSchema    = Register(OpSchema{Name: "cast", Version: 1, AmpPolicy: amp.Promote, Deterministic: true})
	expandSchema  = Register(OpSchema{Name: "expand", Version: 1, AmpPolicy: amp.Promote, Deterministic: true})
	reshapeSchema = Register(OpSchema{Name: "reshape", Version: 1, AmpPolicy: amp.Promote, Deterministic: true})
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

func broadcastViews(shape []int, ts ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	out := make([]*tensor.Tensor, len(ts))
	for i, t := range ts {
		v, err := t.BroadcastTo(shape)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// Cast returns a converted to dt (a itself when it already has dt).
// CastBackward casts the gradient back (done by the trampoline).
func Cast(c *Context, a *tensor.Tensor, dt dtype.Dtype) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(castSchema.Name, a); err != nil {
		return nil, err
	}
	if !dt.Valid() {
		return nil, errs.Typef("cast: unsupported dtype %v", dt)
	}
	if a.Dtype() == dt {
		return a, nil
	}
	out, err := castPlain(c, a, dt)
	if err != nil {
		return nil, err
	}
	record(c, "CastBackward", []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil, passThrough)
	return out, nil
}

var copySchema = Register(OpSchema{Name: "copy", Version: 1, AmpPolicy: amp.Promote, Deterministic: true})

// Copy returns a contiguous copy of a with the same bits (-0.0 and NaN
// payloads included). CopyBackward passes the gradient through.
func Copy(c *Context, a *tensor.Tensor) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(copySchema.Name, a); err != nil {
		return nil, err
	}
	out, err := castPlain(c, a, a.Dtype())
	if err != nil {
		return nil, err
	}
	record(c, "CopyBackward", []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil, passThrough)
	return out, nil
}

// passThrough is the formula of ops whose gradient is grad_out itself before
// the trampoline's reduction and cast (cast, expand).
func passThrough(_ *Context, _ *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return []*tensor.Tensor{grads[0]}, nil
}

// Expand returns a broadcast view of a with shape (zero strides on the
// stretched dims; no memory is copied). ExpandBackward is sum_to_shape, done
// by the trampoline. The engine gives callers contiguous copies of any
// gradient that is still such a view.
func Expand(c *Context, a *tensor.Tensor, shape []int) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(expandSchema.Name, a); err != nil {
		return nil, err
	}
	out, err := a.BroadcastTo(shape) // a new view: outside any graph until recorded
	if err != nil {
		return nil, errs.Valuef("expand: %w", err)
	}
	record(c, "ExpandBackward", []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil, passThrough)
	return out, nil
}

// Reshape returns a with a new shape of the same element count: a view when
// the layout allows, else a contiguous copy (ReshapeBackward reshapes back).
func Reshape(c *Context, a *tensor.Tensor, shape []int) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(reshapeSchema.Name, a); err != nil {
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
	record(c, "ReshapeBackward", []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil,
		func(c *Context, n *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if grads[0] == nil {
				return []*tensor.Tensor{nil}, nil
			}
			g, err := Reshape(c, grads[0], n.inputs[0].Shape)
			return []*tensor.Tensor{g}, err
		})
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

// reduce runs the backend sum of a into a fresh tensor of dtype dt and
// keepdim shape keep, stopping early once c.Done is closed.
func reduce(c *Context, name string, a *tensor.Tensor, keep []int, dt dtype.Dtype) (*tensor.Tensor, error) {
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

// Sum returns the sum of a over dims (nil: all dims), keeping reduced dims
// as size 1 when keepdim. Integers and bool sum to int64; float16 and
// bfloat16 accumulate in float32. The order of additions is fixed
// (backend.SumBlock), so results do not depend on the thread count.
func Sum(c *Context, a *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(sumSchema.Name, a); err != nil {
		return nil, err
	}
	keep, shape, _, err := reduceShape(sumSchema.Name, a, dims, keepdim)
	if err != nil {
		return nil, err
	}
	out, err := reduce(c, sumSchema.Name, a, keep, dtype.SumDtype(a.Dtype()))
	if err != nil {
		return nil, err
	}
	if out, err = out.Reshape(shape); err != nil {
		return nil, err
	}
	if n := record(c, "SumBackward", []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil, sumFormula); n != nil {
		n.shape = keep
	}
	return out, nil
}

// Mean returns the mean of a floating tensor over dims (nil: all dims). It
// accumulates in float32 for float16/bfloat16, divides, and rounds once to
// a's dtype. The mean over zero elements is NaN.
func Mean(c *Context, a *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(meanSchema.Name, a); err != nil {
		return nil, err
	}
	if !a.Dtype().IsFloat() {
		return nil, errs.Typef("mean: input dtype must be floating point, got %v", a.Dtype())
	}
	keep, shape, count, err := reduceShape(meanSchema.Name, a, dims, keepdim)
	if err != nil {
		return nil, err
	}
	acc := dtype.AccumulateDtype(a.Dtype())
	s, err := reduce(c, meanSchema.Name, a, keep, acc)
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
	if acc != a.Dtype() {
		if q, err = castPlain(c, q, a.Dtype()); err != nil {
			return nil, err
		}
	}
	out, err := q.Reshape(shape)
	if err != nil {
		return nil, err
	}
	if n := record(c, "MeanBackward", []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil, meanFormula); n != nil {
		n.shape, n.count = keep, count
	}
	return out, nil
}

// sumFormula is SumBackward: the output gradient, back in the keepdim shape
// and expanded to the input's.
func sumFormula(c *Context, n *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
	g := grads[0]
	if g == nil {
		return []*tensor.Tensor{nil}, nil
	}
	// Back to the keepdim shape, unless broadcasting aligns g already (a
	// full reduction, or keepdim).
	if g.Ndim() != 0 && !tensor.SameShape(g.ShapeRef(), n.shape) {
		var err error
		if g, err = Reshape(c, g, n.shape); err != nil {
			return nil, err
		}
	}
	g, err := Expand(c, g, n.inputs[0].Shape)
	return []*tensor.Tensor{g}, err
}

// meanFormula is MeanBackward: sumFormula divided by the count.
func meanFormula(c *Context, n *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if grads[0] == nil {
		return []*tensor.Tensor{nil}, nil
	}
	g, err := Reshape(c, grads[0], n.shape)
	if err != nil {
		return nil, err
	}
	cnt, err := tensor.WrappedScalar(dtype.Float64, float64(n.count))
	if err != nil {
		return nil, err
	}
	if g, err = Div(c, g, cnt); err != nil {
		return nil, err
	}
	g, err = Expand(c, g, n.inputs[0].Shape)
	return []*tensor.Tensor{g}, err
}
