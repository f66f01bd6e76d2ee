package main

/*
#include "lucid.h"
*/
import "C"

import (
	"unsafe"

	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// maxOpOutputs bounds the outputs lucid_op_n and lucid_op_jvp describe.
const maxOpOutputs = 4

// opArgs reads the inputs (0 handles: absent), attributes and context of an
// op call.
func opArgs(inputs *C.int64_t, nInputs C.int32_t, attrs *C.int64_t, nAttrs C.int32_t, mode C.int32_t) (
	*ops.Context, []*tensor.Tensor, []int64, error) {
	gateEnter()
	c, err := contextOf(mode &^ C.LUCID_MODE_INTERRUPTIBLE)
	if err != nil {
		return nil, nil, nil, err
	}
	if nInputs < 0 || nInputs > maxOpInputs {
		return nil, nil, nil, errs.Valuef("invalid input array (%d handles)", int(nInputs))
	}
	in, err := getTensors(inputs, int(nInputs), true)
	if err != nil {
		return nil, nil, nil, err
	}
	if nAttrs < 0 || nAttrs > maxOpAttrs || (nAttrs > 0 && attrs == nil) {
		return nil, nil, nil, errs.Valuef("invalid attribute array (%d values at %p)", int(nAttrs), attrs)
	}
	var as []int64
	if nAttrs > 0 {
		as = append(as, unsafe.Slice((*int64)(unsafe.Pointer(attrs)), int(nAttrs))...)
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
func outTensor(o *C.lucid_out) (*tensor.Tensor, error) {
	if o.handle != 0 {
		return getTensor(o.handle)
	}
	if o.dtype < 0 {
		return nil, nil
	}
	d, shape, err := dtypeAndShape(o.dtype, o.ndim, o.shape)
	if err != nil {
		return nil, err
	}
	strides, err := shapeOf(o.ndim, o.strides)
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
	if n == 0 {
		return tensor.NewView(tensor.BorrowStorage(nil, false, nil), d, shape, strides, 0)
	}
	if o.data == nil {
		return nil, errs.Valuef("out memory is NULL")
	}
	sz := d.Size()
	base := unsafe.Add(o.data, lo*sz)
	data := unsafe.Slice((*byte)(base), (hi-lo+1)*sz)
	return tensor.NewView(tensor.BorrowStorage(data, false, nil), d, shape, strides, -lo)
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
		c, in, as, err := opArgs(inputs, nInputs, attrs, nAttrs, mode)
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
			pending = startJob(c, given, func(c *ops.Context) ([]*tensor.Tensor, error) {
				return ops.CallN(c, int(id), in, as, given)
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
		c, in, as, err := opArgs(inputs, nInputs, attrs, nAttrs, mode)
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
