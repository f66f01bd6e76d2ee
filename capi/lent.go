// The framework bridges' entry: an op run on memory lent for the call
// (lucid_op_lent), and the op lookup by name their handlers use.

package main

/*
#define LUCID_NO_PROTOTYPES
#include "lucid.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

//export lucid_op_lent
func lucid_op_lent(id C.int32_t, winners C.int32_t, inputs *C.lucid_out, nInputs C.int32_t, attrs *C.int64_t,
	nAttrs C.int32_t, outs *C.lucid_out, nOuts C.int32_t) (rc C.int) {
	defer recoverPanic(&rc)
	return status(opLent(id, int(winners), inputs, nInputs, attrs, nAttrs, outs, nOuts))
}

// The forms of lucid_op_lent (its winners argument).
const (
	lentOp         = 0 // the op's outputs
	lentWinners    = 1 // its outputs and winners (ops.Winners)
	lentWinnersVJP = 2 // the operands' gradients from the winners and g (ops.WinnersVJP)
	lentWinnersOf  = 3 // the winners alone (ops.WinnersOnly)
	lentVJPPart    = 4 // one operand's gradient from the winners and g (ops.WinnersVJPPart)
)

func opLent(id C.int32_t, form int, inputs *C.lucid_out, nInputs C.int32_t, attrs *C.int64_t,
	nAttrs C.int32_t, outs *C.lucid_out, nOuts C.int32_t) error {
	gateEnter()
	if nInputs < 0 || nInputs > maxOpInputs || (nInputs > 0 && inputs == nil) {
		return errs.Valuef("invalid input array (%d entries at %p)", int(nInputs), inputs)
	}
	if nAttrs < 0 || nAttrs > maxOpAttrs || (nAttrs > 0 && attrs == nil) {
		return errs.Valuef("invalid attribute array (%d values at %p)", int(nAttrs), attrs)
	}
	if nOuts < 1 || nOuts > maxOpOutputs || outs == nil {
		return errs.Valuef("invalid out array (%d entries at %p)", int(nOuts), outs)
	}
	// The call records nothing and returns nothing of its tensors, so the
	// views of the lent memory live in reused room (one pool entry per call
	// in flight: a nested call takes another).
	room := lentRooms.Get().(*lentRoom)
	defer lentRooms.Put(room)
	var inBuf [maxOpInputs]*tensor.Tensor
	in := inBuf[:nInputs]
	for i, e := range unsafe.Slice(inputs, int(nInputs)) {
		t, err := lendInto(&room.in[i], &e, true)
		if err != nil {
			return errs.Valuef("input %d: %v", i, err)
		}
		in[i] = t
	}
	var outBuf [maxOpOutputs]*tensor.Tensor
	given := outBuf[:nOuts]
	for i, e := range unsafe.Slice(outs, int(nOuts)) {
		t, err := lendInto(&room.out[i], &e, false)
		if err != nil {
			return errs.Valuef("output %d: %v", i, err)
		}
		if t == nil {
			return errs.Valuef("output %d: every output of lucid_op_lent is given", i)
		}
		given[i] = t
	}
	var as []int64
	if nAttrs > 0 {
		as = unsafe.Slice((*int64)(unsafe.Pointer(attrs)), int(nAttrs))
	}
	c, err := contextOf(0) // no graph, no autocast
	if err != nil {
		return err
	}
	switch {
	case form == lentWinnersVJP:
		if len(in) != 2 || len(as) != 0 {
			return errs.Valuef("the winners' gradient takes the winners and g, and no attributes")
		}
		_, err = ops.WinnersVJP(c, int(id), in[0], in[1], given)
		return err
	case form == lentVJPPart:
		if len(in) != 2 || len(as) != 1 || len(given) != 1 {
			return errs.Valuef("one operand's gradient takes the winners and g, the part (an attribute) and one output")
		}
		_, err = ops.WinnersVJPPart(c, int(id), in[0], in[1], int(as[0]), given[0])
		return err
	case form != lentOp && form != lentWinners && form != lentWinnersOf:
		return errs.Valuef("unknown form %d of lucid_op_lent", form)
	case narrowIndices(id, given):
		return castOuts(c, id, form, in, as, given)
	}
	_, err = lentCall(c, id, form, in, as, given)
	return err
}

// lentCall runs form 0, 1 or 3 of lucid_op_lent into outs (nil: fresh
// tensors).
func lentCall(c *ops.Context, id C.int32_t, form int, in []*tensor.Tensor, as []int64, outs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	switch form {
	case lentWinners:
		return ops.Winners(c, int(id), in, as, outs)
	case lentWinnersOf:
		if len(outs) > 1 {
			return nil, errs.Valuef("the winners alone are one output, got %d", len(outs))
		}
		var out *tensor.Tensor
		if len(outs) == 1 {
			out = outs[0]
		}
		who, err := ops.WinnersOnly(c, int(id), in, as, out)
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{who}, nil
	}
	return ops.CallN(c, int(id), in, as, outs)
}

// lentRoom holds the views of one lucid_op_lent call.
type lentRoom struct {
	in  [maxOpInputs]tensor.Lent
	out [maxOpOutputs]tensor.Lent
}

var lentRooms = sync.Pool{New: func() any { return new(lentRoom) }}

// narrowIndices reports whether a reduction's call gives an int32 out: a
// host without 64-bit integers (JAX by default) takes positions and
// indices as int32.
func narrowIndices(id C.int32_t, given []*tensor.Tensor) bool {
	if !isReduction(id) {
		return false
	}
	for _, t := range given {
		if t.Dtype() == dtype.Int32 {
			return true
		}
	}
	return false
}

// castOuts runs the call into fresh tensors and writes them into the outs
// given: each of exactly its result's shape and dtype, but for int64 results
// (positions, indices) into int32 outs, which must hold them.
func castOuts(c *ops.Context, id C.int32_t, form int, in []*tensor.Tensor, as []int64, given []*tensor.Tensor) error {
	res, err := lentCall(c, id, form, in, as, nil)
	if err != nil {
		return err
	}
	if len(res) != len(given) {
		return errs.Valuef("the op returns %d tensors, got %d outs", len(res), len(given))
	}
	for i, r := range res {
		g := given[i]
		if !tensor.SameShape(r.ShapeRef(), g.ShapeRef()) {
			return errs.Valuef("out %d has shape %s, the result %s", i, tensor.FormatShape(g.ShapeRef()),
				tensor.FormatShape(r.ShapeRef()))
		}
		if r.Dtype() != g.Dtype() && !(r.Dtype() == dtype.Int64 && g.Dtype() == dtype.Int32) {
			return errs.Typef("out %d has dtype %v, the result %v", i, g.Dtype(), r.Dtype())
		}
		if r.Dtype() != g.Dtype() {
			for _, v := range r.Int64s() {
				if v != int64(int32(v)) {
					return errs.Overflowf("index %d does not fit the int32 out %d", v, i)
				}
			}
		}
	}
	for i, r := range res {
		if err := c.Backend.Cast(given[i], r); err != nil {
			return err
		}
	}
	return nil
}

//export lucid_op_lookup
func lucid_op_lookup(name *C.char, n C.size_t, id, version, arity *C.int32_t) (rc C.int) {
	defer recoverPanic(&rc)
	if name == nil || id == nil || version == nil || arity == nil {
		return status(errs.Valuef("lucid_op_lookup: NULL argument"))
	}
	s, ok := ops.Lookup(C.GoStringN(name, C.int(n)))
	if !ok {
		return status(errs.Valuef("unknown op %q", C.GoStringN(name, C.int(n))))
	}
	*id, *version, *arity = C.int32_t(s.ID), C.int32_t(s.Version), C.int32_t(s.Arity)
	return 0
}
