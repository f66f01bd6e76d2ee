// The op calls: lucid_op (one output), lucid_op_n (several, out=) and
// lucid_op_jvp (forward mode), with the one reader of their arguments.

package main

/*
#define LUCID_NO_PROTOTYPES
#include "lucid.h"
*/
import "C"

import (
	"unsafe"

	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// maxOpInputs and maxOpAttrs bound the arrays lucid_op reads.
const (
	maxOpInputs = 4
	maxOpAttrs  = 2 + tensor.MaxDims
)

// genericOp runs op id on the tensors behind inputs with attrs (lucid_op).
// With LUCID_MODE_INTERRUPTIBLE in mode, a long reduction is started as a
// job instead (jobs.go) and its id returned; other ops ignore the flag.
func genericOp(id C.int32_t, inputs *C.int64_t, nInputs C.int32_t, attrs *C.int64_t, nAttrs C.int32_t,
	mode C.int32_t) (*tensor.Tensor, int64, error) {
	var buf [maxOpInputs]*tensor.Tensor
	c, in, as, err := opArgs(&buf, false, inputs, nInputs, attrs, nAttrs, mode)
	if err != nil {
		return nil, 0, err
	}
	if mode&C.LUCID_MODE_INTERRUPTIBLE != 0 && nInputs == 1 && in[0].Numel() >= longWork && isReduction(id) &&
		opOutputs[id] == 1 {
		return nil, startOpJob(c, int(id), in, as), nil
	}
	t, err := ops.Call(c, int(id), in, as)
	return t, 0, err
}

// opKinds holds the kind of every op id.
var opKinds = func() []ops.Kind {
	ss := ops.Schemas()
	ks := make([]ops.Kind, len(ss))
	for i, s := range ss {
		ks[i] = s.Kind
	}
	return ks
}()

// opOutputs holds the output count of every op id.
var opOutputs = func() []int {
	ss := ops.Schemas()
	n := make([]int, len(ss))
	for i, s := range ss {
		n[i] = s.Outputs
	}
	return n
}()

func isReduction(id C.int32_t) bool {
	return id >= 0 && int(id) < len(opKinds) && opKinds[id] == ops.Reduction
}

// startOpJob is genericOp's long path (a function of its own, so that its
// closure's captures cost genericOp nothing).
func startOpJob(c *ops.Context, id int, in []*tensor.Tensor, as []int64) int64 {
	ins, attrs := forJob(in, as)
	return startJob(c, nil, func(c *ops.Context) ([]*tensor.Tensor, error) {
		t, err := ops.Call(c, id, ins, attrs)
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{t}, nil
	})
}

// forJob copies an op call's inputs and attributes for a job, which
// outlives the call whose memory holds them, and marks the inputs kept:
// the job may outlive the caller's handles (tensor.Recycle).
func forJob(in []*tensor.Tensor, as []int64) ([]*tensor.Tensor, []int64) {
	ins := append([]*tensor.Tensor(nil), in...)
	for _, t := range ins {
		if t != nil {
			t.MarkKept()
		}
	}
	return ins, append([]int64(nil), as...)
}

//export lucid_op
func lucid_op(id C.int32_t, inputs *C.int64_t, nInputs C.int32_t, attrs *C.int64_t, nAttrs C.int32_t,
	mode C.int32_t, meta *C.int64_t) (rc C.int) {
	defer recoverPanic(&rc)
	t, job, err := genericOp(id, inputs, nInputs, attrs, nAttrs, mode)
	switch {
	case err != nil:
	case job != 0:
		*meta = C.int64_t(job) // meta[0]
		return statusPending
	default:
		err = fillMeta(meta, t)
	}
	return status(err)
}

// maxOpOutputs bounds the outputs lucid_op_n and lucid_op_jvp describe.
const maxOpOutputs = 4

// opArgs reads an op call's context, inputs and attributes (lucid_op,
// lucid_op_n, lucid_op_jvp): the one reader of the op-call arrays. The
// inputs go into buf (no allocation); with absent, a 0 handle is an absent
// (nil) input. The attributes alias the caller's memory, valid during the
// call only: what outlives it (a job) copies them.
func opArgs(buf *[maxOpInputs]*tensor.Tensor, absent bool, inputs *C.int64_t, nInputs C.int32_t,
	attrs *C.int64_t, nAttrs C.int32_t, mode C.int32_t) (*ops.Context, []*tensor.Tensor, []int64, error) {
	gateEnter()
	c, err := contextOf(mode &^ C.LUCID_MODE_INTERRUPTIBLE)
	if err != nil {
		return nil, nil, nil, err
	}
	if nInputs < 0 || nInputs > maxOpInputs || (nInputs > 0 && inputs == nil) {
		return nil, nil, nil, errs.Valuef("invalid input array (%d handles at %p)", int(nInputs), inputs)
	}
	if nAttrs < 0 || nAttrs > maxOpAttrs || (nAttrs > 0 && attrs == nil) {
		return nil, nil, nil, errs.Valuef("invalid attribute array (%d values at %p)", int(nAttrs), attrs)
	}
	in := buf[:nInputs]
	if err := handles.tensorsInto(unsafe.Slice(inputs, int(nInputs)), in, absent); err != nil {
		return nil, nil, nil, err
	}
	var as []int64
	if nAttrs > 0 {
		as = unsafe.Slice((*int64)(unsafe.Pointer(attrs)), int(nAttrs))
	}
	return c, in, as, nil
}

// fillMetas describes ts in consecutive meta blocks; a tensor the caller
// gave (given[i]) gets handle 0, a nil tensor a block of zeros.
func fillMetas(meta *C.int64_t, ts, given []*tensor.Tensor) error {
	if meta == nil {
		return errs.Valuef("output meta pointer is NULL")
	}
	blocks := unsafe.Slice(meta, len(ts)*C.LUCID_META_LEN)
	for i, t := range ts {
		b := blocks[i*C.LUCID_META_LEN:]
		if t == nil {
			b[0], b[1] = 0, 0
			continue
		}
		if i < len(given) && given[i] != nil {
			shape := t.ShapeRef()
			b[0] = 0
			b[1] = C.int64_t(t.Dtype()) | C.int64_t(len(shape))<<8
			for j, d := range shape {
				b[2+j] = C.int64_t(d)
			}
			continue
		}
		if err := fillMeta(&b[0], t); err != nil {
			return err
		}
	}
	return nil
}

// outTensor is the tensor an out= entry describes: a handle's, a view of
// memory lent for the call (never kept: out= records no graph), or nil.
func outTensor(o *C.lucid_out) (*tensor.Tensor, error) { return lentTensor(o, false) }

// lentTensor is the tensor a lucid_out entry describes (outTensor), its
// lent memory read-only when readOnly.
func lentTensor(o *C.lucid_out, readOnly bool) (*tensor.Tensor, error) {
	return lendInto(nil, o, readOnly)
}

// lendInto is lentTensor into room l for the call (nil: fresh tensors,
// which may outlive it).
func lendInto(l *tensor.Lent, o *C.lucid_out, readOnly bool) (*tensor.Tensor, error) {
	if o.handle != 0 {
		return getTensor(o.handle)
	}
	if o.dtype < 0 {
		return nil, nil
	}
	d, err := dtypeOf(o.dtype)
	if err != nil {
		return nil, err
	}
	var shapeBuf, strideBuf [stackDims]int
	shape, err := shapeInto(shapeBuf[:], o.ndim, o.shape)
	if err != nil {
		return nil, err
	}
	strides, err := shapeInto(strideBuf[:], o.ndim, o.strides)
	if err != nil {
		return nil, err
	}
	// The span of bytes the view reaches, from its lowest to highest element.
	lo, hi, n := 0, 0, 1
	for i, dim := range shape {
		n *= dim
		if dim > 1 {
			if ext := (dim - 1) * strides[i]; ext < 0 {
				lo += ext
			} else {
				hi += ext
			}
		}
	}
	var data []byte
	if n != 0 {
		if o.data == nil {
			return nil, errs.Valuef("out memory is NULL")
		}
		sz := d.Size()
		data = unsafe.Slice((*byte)(unsafe.Add(o.data, lo*sz)), (hi-lo+1)*sz)
	} else {
		lo = 0
	}
	if l != nil {
		return l.Lend(data, readOnly, d, shape, strides, -lo)
	}
	return tensor.NewView(tensor.BorrowStorage(data, readOnly, nil), d, shape, strides, -lo)
}

//export lucid_op_n
func lucid_op_n(id C.int32_t, inputs *C.int64_t, nInputs C.int32_t, attrs *C.int64_t, nAttrs C.int32_t,
	outs *C.lucid_out, nOuts C.int32_t, mode C.int32_t, meta *C.int64_t) (rc C.int) {
	defer recoverPanic(&rc)
	var pending int64 // a job started instead (LUCID_MODE_INTERRUPTIBLE)
	defer func() {
		if rc == 0 && pending != 0 {
			*meta = C.int64_t(pending)
			rc = statusPending
		}
	}()
	return status(func() error {
		var buf [maxOpInputs]*tensor.Tensor
		c, in, as, err := opArgs(&buf, true, inputs, nInputs, attrs, nAttrs, mode)
		if err != nil {
			return err
		}
		if nOuts < 0 || nOuts > maxOpOutputs {
			return errs.Valuef("invalid out array (%d handles)", int(nOuts))
		}
		var given []*tensor.Tensor
		if outs != nil && nOuts > 0 {
			given = make([]*tensor.Tensor, nOuts)
			for i := range given {
				if given[i], err = outTensor(&unsafe.Slice(outs, int(nOuts))[i]); err != nil {
					return err
				}
			}
		}
		if mode&C.LUCID_MODE_INTERRUPTIBLE != 0 && len(in) == 1 && in[0] != nil && in[0].Numel() >= longWork &&
			isReduction(id) {
			ins, attrs := forJob(in, as)
			pending = startJob(c, given, func(c *ops.Context) ([]*tensor.Tensor, error) {
				return ops.CallN(c, int(id), ins, attrs, given)
			})
			return nil
		}
		res, err := ops.CallN(c, int(id), in, as, given)
		if err != nil {
			return err
		}
		if len(res) > maxOpOutputs {
			return errs.Valuef("op has %d outputs", len(res))
		}
		return fillMetas(meta, res, given)
	}())
}

//export lucid_op_jvp
func lucid_op_jvp(id C.int32_t, inputs, tangents *C.int64_t, nInputs C.int32_t, attrs *C.int64_t, nAttrs C.int32_t,
	mode C.int32_t, meta *C.int64_t) (rc C.int) {
	defer recoverPanic(&rc)
	return status(func() error {
		var buf [maxOpInputs]*tensor.Tensor
		c, in, as, err := opArgs(&buf, true, inputs, nInputs, attrs, nAttrs, mode)
		if err != nil {
			return err
		}
		ts, err := getTensors(tangents, int(nInputs), true)
		if err != nil {
			return err
		}
		outs, touts, err := ops.CallJvp(c, int(id), in, ts, as)
		if err != nil {
			return err
		}
		if len(outs) > maxOpOutputs {
			return errs.Valuef("op has %d outputs", len(outs))
		}
		return fillMetas(meta, append(outs, touts...), nil)
	}())
}
