package ops

import (
	"sync"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// Winners runs a member of the min/max family like CallN, with no graph,
// and returns one more tensor after its outputs: where each output element
// came from, by the op's own rule (docs/semantics.md). A framework that
// differentiates with its own ops (PyTorch's autograd, JAX's JVPs) needs
// nothing else: an output's tangent is its winner's tangent, a cotangent
// goes whole to the winner.
//
//   - a binary selection (minimum, maximum, fmin, fmax): bool, the output's
//     shape, true where a wins;
//   - clamp: int8, the output's shape, 0 where x wins, 1 where min does,
//     2 where max does; or, where outs gives a bool tensor for it, true
//     where x wins (all a caller needs when the bounds take no gradient);
//   - a selecting reduction (amin, amax, nanmin, nanmax, min, max): int64,
//     the keepdim shape, each slice's winner's position (the row-major index
//     of the winner among the slice's elements).
//
// outs, when not nil, has an entry per returned tensor, as CallN's: a
// tensor of exactly that shape and dtype to write into, or nil. Any other op
// is an errs.Value error.
func Winners(c *Context, id int, in []*tensor.Tensor, attrs []int64, outs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return winners(c, id, in, attrs, outs, true)
}

// WinnersOnly is Winners without the op's outputs: the winners alone,
// written into out when it is not nil. A host that takes the values as the
// winners' bits itself (JAX's rules select them with a where, which its
// compiler fuses and drops when unused) saves a pass that writes them.
func WinnersOnly(c *Context, id int, in []*tensor.Tensor, attrs []int64, out *tensor.Tensor) (*tensor.Tensor, error) {
	var outs []*tensor.Tensor
	if out != nil {
		outs = []*tensor.Tensor{out}
	}
	res, err := winners(c, id, in, attrs, outs, false)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// winners is Winners (values: the op's outputs first, then the winners) or
// WinnersOnly (the winners alone); outs has an entry per returned tensor.
func winners(c *Context, id int, in []*tensor.Tensor, attrs []int64, outs []*tensor.Tensor, values bool) ([]*tensor.Tensor, error) {
	if id < 0 || id >= len(byID) {
		return nil, errs.Valuef("unknown op id %d", id)
	}
	s := byID[id]
	n := 1
	if values {
		n += s.Outputs
	}
	if outs != nil && len(outs) != n {
		return nil, errs.Valuef("%s: winners returns %d tensors, got %d out= entries", s.Name, n, len(outs))
	}
	nc := *ctxOr(c)
	nc.GradEnabled = false
	nc.forwardMode = true // the selecting reductions keep their positions
	var res []*tensor.Tensor
	var err error
	switch {
	case s.Signature == "binary" && s.Rule != "":
		res, err = binaryWinners(&nc, s, in, attrs, outs, values)
	case s.Signature == "clamp":
		res, err = clampWinners(&nc, s, in, attrs, outs, values)
	case s.forward != nil && s.Kind == Reduction && s.Rule != "" && s.Signature != "arg":
		res, err = reductionWinners(&nc, s, in, attrs, outs, values)
	default:
		return nil, errs.Valuef("%s is not a selection of the min/max family: it has no winners", s.Name)
	}
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		if o != nil {
			o.BumpVersion()
		}
	}
	return res, nil
}

// binaryWinners is Winners of minimum and its kin: the values (into out=
// directly) unless !values, then the mask by the op's rule (pylucid's
// Select kernel).
func binaryWinners(c *Context, s *spec, in []*tensor.Tensor, attrs []int64, outs []*tensor.Tensor, values bool) ([]*tensor.Tensor, error) {
	if len(in) != 2 || in[0] == nil || in[1] == nil || len(attrs) != 0 {
		return nil, errs.Valuef("%s takes 2 inputs and no attributes", s.Name)
	}
	var res []*tensor.Tensor
	rd := promote(c, s, in[0], in[1])
	if values {
		var valOut []*tensor.Tensor
		if outs != nil && outs[0] != nil {
			valOut = outs[:1]
		}
		vals, err := CallN(c, s.ID, in, nil, valOut)
		if err != nil {
			return nil, err
		}
		res, rd = vals, vals[0].Dtype()
	}
	a, err := castInput(c, in[0], rd)
	if err != nil {
		return nil, err
	}
	b, err := castInput(c, in[1], rd)
	if err != nil {
		return nil, err
	}
	k := winnerConstants()
	shape, views, err := operandViews(s.Name, a, b, k.yes, k.no)
	if err != nil {
		return nil, err
	}
	mask, err := winnersOut(s, outs, len(res), dtype.Bool, shape)
	if err != nil {
		return nil, err
	}
	if err := selector(c.Backend).Select(s.rule, mask, views[0], views[1], views[2], views[3]); err != nil {
		return nil, err
	}
	return append(res, mask), nil
}

// clampWinners is Winners of clamp: the values unless !values, then each
// element's winner as a code, by pylucid's ClampSelect kernel choosing
// among 0, 1 and 2.
func clampWinners(c *Context, s *spec, in []*tensor.Tensor, attrs []int64, outs []*tensor.Tensor, values bool) ([]*tensor.Tensor, error) {
	if len(in) != 3 || in[0] == nil || len(attrs) != 0 {
		return nil, errs.Valuef("clamp takes x, min, max (nil when absent) and no attributes")
	}
	var res []*tensor.Tensor
	if values {
		var out *tensor.Tensor
		if outs != nil {
			out = outs[0]
		}
		if out != nil {
			if err := checkOuts(c, s, in, outs[:1]); err != nil {
				return nil, err
			}
		}
		vals, _, err := clampInto(c, s, in, attrs, out)
		if err != nil {
			return nil, err
		}
		res = vals[:1]
	}
	cast, _, _, err := clampOperands(c, in[0], in[1], in[2])
	if err != nil {
		return nil, err
	}
	k := winnerConstants()
	codes, wdt := k.codes, dtype.Int8
	if outs != nil && outs[len(res)] != nil && outs[len(res)].Dtype() == dtype.Bool {
		codes, wdt = k.xWins, dtype.Bool
	}
	shape, views, err := operandViews(s.Name, cast[0], cast[1], cast[2], codes[0], codes[1], codes[2])
	if err != nil {
		return nil, err
	}
	who, err := winnersOut(s, outs, len(res), wdt, shape)
	if err != nil {
		return nil, err
	}
	switch {
	case wdt == dtype.Bool && (in[1] == nil) != (in[2] == nil):
		err = clampWhoOneBound(c, who, views, in[1] != nil)
	case wdt == dtype.Bool:
		err = clampWhoBothBounds(c, who, views)
	default:
		err = clamper(c.Backend).ClampSelect(who, views[0], views[1], views[2], views[3], views[4], views[5])
	}
	if err != nil {
		return nil, err
	}
	return append(res, who), nil
}

// clampWhoOneBound writes where x won into the bool who for a clamp with
// one bound, by clamp's rule (clampPick's: RuleMax against lo, RuleMin
// against hi): one pass of the backend's Select into a mask, which is
// vectorized where the fused ClampSelect goes element by element (a
// model's clamp(x, min=0)). views: x, lo, hi and the bool winners' codes,
// broadcast to who's shape.
func clampWhoOneBound(c *Context, who *tensor.Tensor, views []*tensor.Tensor, lower bool) error {
	yes, no := views[3], views[4]
	if lower {
		return selector(c.Backend).Select(backend.RuleMax, who, views[0], views[1], yes, no)
	}
	return selector(c.Backend).Select(backend.RuleMin, who, views[0], views[2], yes, no)
}

// clampWhoBothBounds writes where x won into the bool who for a clamp with
// both bounds: x wins the max against lo and then, its value going on, the
// min against hi (clampPick's two steps), so who is the AND of two passes
// of the vectorized Select mask kernel, the Mul of two bool masks; the
// fused ClampSelect would go element by element. views as
// clampWhoOneBound's.
func clampWhoBothBounds(c *Context, who *tensor.Tensor, views []*tensor.Tensor) error {
	sel := selector(c.Backend)
	overLo, err := tensor.Empty(dtype.Bool, who.ShapeRef())
	if err != nil {
		return err
	}
	// The first pass goes to scratch and who is written by the last two
	// only, each reading the operands at the element it writes: so who may
	// be one of the operands (a bool clamp given out=x), as with the fused
	// kernel.
	if err := sel.Select(backend.RuleMax, overLo, views[0], views[1], views[3], views[4]); err != nil {
		return err
	}
	if err := sel.Select(backend.RuleMin, who, views[0], views[2], views[3], views[4]); err != nil {
		return err
	}
	return c.Backend.Binary(backend.Mul, who, who, overLo)
}

// reductionWinners is Winners of a selecting reduction: its outputs (unless
// !values) and the positions its forward finds, copied into the outs given.
func reductionWinners(c *Context, s *spec, in []*tensor.Tensor, attrs []int64, outs []*tensor.Tensor, values bool) ([]*tensor.Tensor, error) {
	if len(in) != 1 || in[0] == nil {
		return nil, errs.Valuef("%s takes 1 input", s.Name)
	}
	res, aux, err := s.forward(c, s, in, attrs)
	if err != nil {
		return nil, err
	}
	idx, ok := aux.(*tensor.Tensor)
	if !ok || idx == nil {
		return nil, errs.Valuef("%s: its forward kept no winner positions", s.Name)
	}
	if values {
		res = append(res, idx)
	} else {
		res = []*tensor.Tensor{idx}
	}
	if outs == nil {
		return res, nil
	}
	return copyIntoOuts(c, s, res, outs)
}

// WinnersVJPPart is one operand's part of a binary selection's
// WinnersVJP: g where operand part (0: a, 1: b) won and +0 elsewhere,
// written into out when it is not nil. A caller with one operand that takes
// a gradient (a model's minimum of an activation and a constant) saves the
// other part's buffer and its writes.
func WinnersVJPPart(c *Context, id int, who, g *tensor.Tensor, part int, out *tensor.Tensor) (*tensor.Tensor, error) {
	if id < 0 || id >= len(byID) {
		return nil, errs.Valuef("unknown op id %d", id)
	}
	s := byID[id]
	if s.Signature != "binary" || s.Rule == "" {
		return nil, errs.Valuef("%s has no one-operand winners' gradient", s.Name)
	}
	if who == nil || g == nil {
		return nil, errs.Valuef("%s: winners and cotangent must be given", s.Name)
	}
	if who.Dtype() != dtype.Bool {
		return nil, errs.Typef("%s: the winners are a bool mask, got %v", s.Name, who.Dtype())
	}
	if part != 0 && part != 1 {
		return nil, errs.Valuef("%s: the gradient's part is 0 (a) or 1 (b), got %d", s.Name, part)
	}
	nc := *ctxOr(c)
	nc.GradEnabled = false
	zero, err := tensor.New(g.Dtype(), nil)
	if err != nil {
		return nil, err
	}
	// who wins against false by RuleMin exactly where who is false: b won.
	where, other := zero, g // part 0: g where who is true
	if part == 1 {
		where, other = g, zero
	}
	shape, views, err := operandViews(s.Name, who, winnerConstants().no, where, other)
	if err != nil {
		return nil, err
	}
	var outs []*tensor.Tensor
	if out != nil {
		outs = []*tensor.Tensor{out}
	}
	res, err := winnersOut(s, outs, 0, g.Dtype(), shape)
	if err != nil {
		return nil, err
	}
	if err := selector(nc.Backend).Select(backend.RuleMin, res, views[0], views[1], views[2], views[3]); err != nil {
		return nil, err
	}
	return res, nil
}

// winnerConsts are the 0-d tensors the selection kernels write as winners:
// made once and shared, since kernels only read their operands (a fresh set
// per call was most of a small call's allocations).
type winnerConsts struct {
	yes, no *tensor.Tensor
	codes   [3]*tensor.Tensor // clamp's int8 0, 1, 2
	xWins   [3]*tensor.Tensor // clamp's bool form: true, false, false
}

var winnerConstants = sync.OnceValue(func() *winnerConsts {
	scalar := func(dt dtype.Dtype, v int64) *tensor.Tensor {
		t, err := tensor.FromInt64s(dt, nil, []int64{v})
		if err != nil {
			panic(err) // a 0-d bool or int8 always exists
		}
		t.MarkKept() // shared: never reused as another result
		return t
	}
	k := &winnerConsts{yes: scalar(dtype.Bool, 1), no: scalar(dtype.Bool, 0)}
	for i := range k.codes {
		k.codes[i] = scalar(dtype.Int8, int64(i))
	}
	k.xWins = [3]*tensor.Tensor{k.yes, k.no, k.no}
	return k
})

// winnersOut is the tensor the winners go into: outs[i] when given (of
// exactly dt and shape), else a fresh one.
func winnersOut(s *spec, outs []*tensor.Tensor, i int, dt dtype.Dtype, shape []int) (*tensor.Tensor, error) {
	if outs == nil || outs[i] == nil {
		return tensor.Empty(dt, shape)
	}
	if err := checkOutMatches(s, outs[i], shape, dt); err != nil {
		return nil, err
	}
	return outs[i], nil
}

// WinnersVJP is the transpose of the selection Winners describes: given
// the winners who it returned and a cotangent g, each operand's gradient
// before un-broadcasting, by pylucid's kernels (one pass).
//
//   - a binary selection: g has the output's shape; it returns (ga, gb) of
//     that shape, g where a won (b won) and +0 elsewhere;
//   - a selecting reduction: g has the keepdim shape; it returns g at each
//     slice's winner and +0 elsewhere, in the input's shape, which outs[0]
//     gives (outs are required here).
//
// outs as in Winners: one entry per returned tensor, nil for a fresh one.
func WinnersVJP(c *Context, id int, who, g *tensor.Tensor, outs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if id < 0 || id >= len(byID) {
		return nil, errs.Valuef("unknown op id %d", id)
	}
	s := byID[id]
	if who == nil || g == nil {
		return nil, errs.Valuef("%s: winners and cotangent must be given", s.Name)
	}
	nc := *ctxOr(c)
	nc.GradEnabled = false
	switch {
	case s.Signature == "binary" && s.Rule != "":
		if who.Dtype() != dtype.Bool {
			return nil, errs.Typef("%s: the winners are a bool mask, got %v", s.Name, who.Dtype())
		}
		if outs != nil && len(outs) != 2 {
			return nil, errs.Valuef("%s: the gradient has 2 parts, got %d out= entries", s.Name, len(outs))
		}
		shape, views, err := operandViews(s.Name, who, winnerConstants().no, g)
		if err != nil {
			return nil, err
		}
		ga, err := winnersOut(s, outs, 0, g.Dtype(), shape)
		if err != nil {
			return nil, err
		}
		gb, err := winnersOut(s, outs, 1, g.Dtype(), shape)
		if err != nil {
			return nil, err
		}
		// who <= false exactly where who is false: there b won.
		if err := selector(nc.Backend).Route(backend.RuleMin, gb, ga, views[0], views[1], views[2]); err != nil {
			return nil, err
		}
		return []*tensor.Tensor{ga, gb}, nil
	case s.forward != nil && s.Kind == Reduction && s.Rule != "" && s.Signature != "arg":
		if len(outs) != 1 || outs[0] == nil {
			return nil, errs.Valuef("%s: the gradient's shape comes from its out= tensor", s.Name)
		}
		out := outs[0]
		if out.Dtype() != g.Dtype() || who.Dtype() != dtype.Int64 {
			return nil, errs.Typef("%s: the gradient takes g's dtype and int64 positions", s.Name)
		}
		if err := reducer(nc.Backend).Scatter(out, g, who); err != nil {
			return nil, err
		}
		return outs, nil
	}
	return nil, errs.Valuef("%s has no winners' gradient", s.Name)
}
