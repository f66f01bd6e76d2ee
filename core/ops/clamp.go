package ops

import (
	"math"

	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// ClampBackward
//
// Autograd node for y = clamp(x, lo, hi) = minimum(maximum(x, lo), hi)
// (docs/semantics.md), either bound optional, bounds scalars or tensors that
// broadcast with x. One fused node, equal to the composition bit for bit in
// values, gradients and dtypes: the selection rule is backend.RuleMax
// between x and lo, then backend.RuleMin between that winner and hi, so
// exactly one of x, lo, hi wins at each element and gets the whole
// gradient. At x == bound the gradient goes to x; with lo > hi every
// non-NaN element is hi; a NaN x stays NaN and keeps its gradient.
//
// Math
//
//	y_i      = the winner's bits
//	dL/dx_i  = [x wins at i]  · dL/dy_i   (likewise lo, hi)
//
// Saves x, lo and hi (after promotion). A missing bound is an extreme of
// the result dtype (-inf/+inf, an integer type's limits), which never wins
// against x, so the kernels always see three operands. The backward is
// ClampRoute, whose own backward is ClampSelect and back (both linear, the
// masks constants), so create_graph works to any order; the trampoline
// sum-reduces each gradient to its input's shape.
//
// Schema: "clamp" (clip is the same op), version 1, Promote, deterministic.
var clampOp = define(&spec{
	OpSchema: OpSchema{Name: "clamp", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: Elementwise, Arity: 3, Outputs: 1, Signature: SigClamp, NumPy: []string{"clip"}, Bridges: allBridges, Aliases: []string{"clip"},
		Doc: `Clamp x into [min, max]: exactly minimum(maximum(x, min), max); x wins ties, a NaN x stays NaN.

The three operands are promoted together. A bound may be None (skipped;
not both), a Python number or a tensor broadcasting with x. At x == bound
the gradient goes to x; with min > max every non-NaN element is max.
Bounds that are tensors get gradients where they win. clip is the same op.`,
		Example: `>>> ops.clamp([-2.0, 0.5, 3.0, np.nan], 0.0, 1.0)
tensor([0. , 0.5, 1. , nan])
>>> ops.clip([1, 7], max=5)
tensor([1, 5])`},
	node:  "ClampBackward",
	saves: savesInputs,
	vjp:   clampVJP,
})

// The two halves of clamp's gradient, adjoint to each other as route and
// select are (minimum.go):
//
//	clamp_route(x, lo, hi, g)               = (g·[x wins], g·[lo wins], g·[hi wins])
//	clamp_select(x, lo, hi, dx, dlo, dhi)   = dx·[x wins] + dlo·[lo wins] + dhi·[hi wins]
var clampRouteOp = define(&spec{
	OpSchema: OpSchema{Name: "clamp_route", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: Selection, Arity: 4, Outputs: 3},
	node:  "ClampRouteBackward",
	saves: savesOperands,
})

var clampSelectOp = define(&spec{
	OpSchema: OpSchema{Name: "clamp_select", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: Selection, Arity: 6, Outputs: 1},
	node:  "ClampSelectBackward",
	saves: savesOperands,
})

func init() {
	clampOp.forward, clampOp.into, clampOp.jvp = clampForward, clampInto, clampJVP
	clampRouteOp.vjp = clampRouteVJP
	clampSelectOp.vjp = clampSelectVJP
}

// Clamp returns minimum(maximum(x, lo), hi) as one op; a nil bound is
// skipped, and at least one must be given.
func Clamp(c *Context, x, lo, hi *tensor.Tensor) (*tensor.Tensor, error) {
	out, _, err := clampForward(ctxOr(c), clampOp, []*tensor.Tensor{x, lo, hi}, nil)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// clampOperands promotes and casts x and the bounds as the composition
// would (maximum(x, lo) first, then that result with hi) and fills a
// missing bound with its never-winning extreme. It returns the cast
// operands (xc, loc, hic), the operands as recorded (the given tensors,
// fills for missing bounds) and the result dtype.
func clampOperands(c *Context, x, lo, hi *tensor.Tensor) (cast, recorded [3]*tensor.Tensor, rd dtype.Dtype, err error) {
	if x == nil {
		return cast, recorded, 0, errs.Valuef("clamp: input is nil")
	}
	if lo == nil && hi == nil {
		return cast, recorded, 0, errs.Valuef("clamp: at least one of min and max must not be None")
	}
	rd, weak := x.Dtype(), x.IsWrappedNumber()
	if lo != nil {
		rd = promoteDtypes(c, clampOp, rd, weak, lo.Dtype(), lo.IsWrappedNumber())
		weak = false // the composition's inner maximum returns a tensor
	}
	if hi != nil {
		rd = promoteDtypes(c, clampOp, rd, weak, hi.Dtype(), hi.IsWrappedNumber())
	}
	recorded = [3]*tensor.Tensor{x, lo, hi}
	for i, t := range recorded {
		if t == nil {
			if t, err = boundFill(rd, i == 2); err != nil {
				return cast, recorded, 0, err
			}
			recorded[i] = t
		}
		if cast[i], err = castInput(c, t, rd); err != nil {
			return cast, recorded, 0, err
		}
	}
	return cast, recorded, rd, nil
}

// boundFill is the value of a missing bound in dtype dt: one that never wins
// against x (upper: +inf or the type's largest value; lower: -inf or its
// smallest), as a 0-d tensor.
func boundFill(dt dtype.Dtype, upper bool) (*tensor.Tensor, error) {
	if dt.IsFloat() {
		sign := -1
		if upper {
			sign = 1
		}
		return tensor.Scalar(dt, math.Inf(sign))
	}
	var lo, hi int64
	switch {
	case dt == dtype.Bool:
		lo, hi = 0, 1
	case dt == dtype.Uint8:
		lo, hi = 0, math.MaxUint8
	default:
		hi = int64(1)<<(8*dt.Size()-1) - 1
		lo = -hi - 1
	}
	v := lo
	if upper {
		v = hi
	}
	return tensor.FromInt64s(dt, nil, []int64{v})
}

func clampForward(c *Context, s *spec, in []*tensor.Tensor, attrs []int64) ([]*tensor.Tensor, any, error) {
	return clampInto(c, s, in, attrs, nil)
}

// clampInto is clampForward writing into out (nil: a fresh tensor), whose
// shape and dtype must be the result's: the kernel reads element i of every
// operand before writing element i, so out may be x itself.
func clampInto(c *Context, s *spec, in []*tensor.Tensor, attrs []int64, out *tensor.Tensor) ([]*tensor.Tensor, any, error) {
	c = ctxOr(c)
	if len(in) != 3 || len(attrs) != 0 {
		return nil, nil, errs.Valuef("clamp takes x, min, max (nil when absent) and no attributes")
	}
	cast, recorded, rd, err := clampOperands(c, in[0], in[1], in[2])
	if err != nil {
		return nil, nil, err
	}
	shape, views, err := operandViews(s.Name, cast[:]...)
	if err != nil {
		return nil, nil, err
	}
	if out == nil {
		if out, err = tensor.Empty(rd, shape); err != nil {
			return nil, nil, err
		}
	} else if err := checkOutMatches(s, out, shape, rd); err != nil {
		return nil, nil, err
	}
	if err := clamper(c.Backend).Clamp(out, views[0], views[1], views[2]); err != nil {
		return nil, nil, err
	}
	record(c, s, recorded[:], []*tensor.Tensor{out}, s.toSave(cast[:], nil))
	return []*tensor.Tensor{out}, nil, nil
}

// clampVJP is ClampBackward: route g to the winner.
func clampVJP(c *Context, _ *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if grads[0] == nil {
		return []*tensor.Tensor{nil, nil, nil}, nil
	}
	return clampRoute(c, saved[0], saved[1], saved[2], grads[0])
}

// clampJVP pushes tangents through clamp: the winner's tangent.
func clampJVP(c *Context, k *jvpCall, tangents []*tensor.Tensor) ([]*tensor.Tensor, error) {
	cast, _, rd, err := clampOperands(c, k.in[0], k.in[1], k.in[2])
	if err != nil {
		return nil, err
	}
	var ts [3]*tensor.Tensor
	for i := range ts {
		if tangents[i] != nil {
			ts[i], err = Cast(c, tangents[i], rd)
		} else {
			ts[i], err = tensor.New(rd, nil)
		}
		if err != nil {
			return nil, err
		}
	}
	t, err := clampSelect(c, cast[0], cast[1], cast[2], ts[0], ts[1], ts[2])
	return []*tensor.Tensor{t}, err
}

// clampRoute splits g between x, lo and hi by clamp's rule.
func clampRoute(c *Context, x, lo, hi, g *tensor.Tensor) ([]*tensor.Tensor, error) {
	shape, views, err := operandViews(clampRouteOp.Name, x, lo, hi, g)
	if err != nil {
		return nil, err
	}
	gs := make([]*tensor.Tensor, 3)
	for i := range gs {
		if gs[i], err = tensor.Empty(g.Dtype(), shape); err != nil {
			return nil, err
		}
	}
	if err := clamper(c.Backend).ClampRoute(gs[0], gs[1], gs[2], views[0], views[1], views[2], views[3]); err != nil {
		return nil, err
	}
	record(c, clampRouteOp, []*tensor.Tensor{g}, gs, []*tensor.Tensor{x, lo, hi})
	return gs, nil
}

// clampRouteVJP is ClampRouteBackward: select the three output gradients.
func clampRouteVJP(c *Context, _ *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if grads[0] == nil && grads[1] == nil && grads[2] == nil {
		return []*tensor.Tensor{nil}, nil
	}
	dt := saved[0].Dtype()
	for _, g := range grads {
		if g != nil {
			dt = g.Dtype()
			break
		}
	}
	var ds [3]*tensor.Tensor
	for i, g := range grads {
		ds[i] = g
		if g == nil {
			var err error
			if ds[i], err = tensor.New(dt, nil); err != nil {
				return nil, err
			}
		}
	}
	t, err := clampSelect(c, saved[0], saved[1], saved[2], ds[0], ds[1], ds[2])
	return []*tensor.Tensor{t}, err
}

// clampSelect returns dx, dlo or dhi, whichever operand wins at each
// element.
func clampSelect(c *Context, x, lo, hi, dx, dlo, dhi *tensor.Tensor) (*tensor.Tensor, error) {
	shape, views, err := operandViews(clampSelectOp.Name, x, lo, hi, dx, dlo, dhi)
	if err != nil {
		return nil, err
	}
	out, err := tensor.Empty(dx.Dtype(), shape)
	if err != nil {
		return nil, err
	}
	if err := clamper(c.Backend).ClampSelect(out, views[0], views[1], views[2], views[3], views[4], views[5]); err != nil {
		return nil, err
	}
	record(c, clampSelectOp, []*tensor.Tensor{dx, dlo, dhi}, []*tensor.Tensor{out}, []*tensor.Tensor{x, lo, hi})
	return out, nil
}

// clampSelectVJP is ClampSelectBackward: route the output gradient.
func clampSelectVJP(c *Context, _ *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if grads[0] == nil {
		return []*tensor.Tensor{nil, nil, nil}, nil
	}
	return clampRoute(c, saved[0], saved[1], saved[2], grads[0])
}
