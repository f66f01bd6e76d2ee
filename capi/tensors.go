// Tensors: new, borrowed, copied and scalar tensors, their descriptors,
// views, versions and release; requires_grad and the .grad slot; detach.

package main

/*
#define LUCID_NO_PROTOTYPES
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "lucid.h"
*/
import "C"

import (
	"math"
	"unsafe"

	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

//export lucid_tensor_new
func lucid_tensor_new(dt C.int32_t, ndim C.int32_t, shape *C.int64_t, out *C.lucid_tensor_info) C.int {
	return call(func() error {
		d, s, err := dtypeAndShape(dt, ndim, shape)
		if err != nil {
			return err
		}
		t, err := tensor.New(d, s)
		if err != nil {
			return err
		}
		return fill(out, t)
	})
}

// bufferReturned is every loan's release (tensor.LendStorage): the token
// goes back to the host through the buffer queue.
func bufferReturned(token int64, n int) {
	borrowedCount.Add(-1)
	borrowedBytes.Add(-int64(n))
	noteFreed()
	bufferQueue.push(token)
}

//export lucid_tensor_borrow
func lucid_tensor_borrow(base unsafe.Pointer, nbytes C.int64_t, dt C.int32_t, ndim C.int32_t, shape *C.int64_t,
	strides *C.int64_t, offset C.int64_t, readonly C.int32_t, token C.int64_t, out *C.lucid_tensor_info) C.int {
	return call(func() error {
		d, err := dtypeOf(dt)
		if err != nil {
			return err
		}
		// Shape and strides on the stack: the view copies them into its own
		// allocation (this runs for every NumPy operand of a call).
		var shapeBuf, strideBuf [stackDims]int
		s, err := shapeInto(shapeBuf[:], ndim, shape)
		if err != nil {
			return err
		}
		st, err := shapeInto(strideBuf[:], ndim, strides)
		if err != nil {
			return err
		}
		if nbytes < 0 || (nbytes > 0 && base == nil) {
			return errs.Valuef("invalid buffer (%d bytes at %p)", int64(nbytes), base)
		}
		var data []byte
		if nbytes > 0 {
			data = unsafe.Slice((*byte)(base), int(nbytes))
		}
		storage := tensor.LendStorage(data, readonly != 0, int64(token), bufferReturned)
		borrowedCount.Add(1)
		borrowedBytes.Add(int64(nbytes))
		maybeCollect(0)
		t, err := tensor.NewSoleView(storage, d, s, st, int(offset))
		if err != nil {
			return err
		}
		return fill(out, t)
	})
}

//export lucid_tensor_copy
func lucid_tensor_copy(data unsafe.Pointer, nbytes C.int64_t, dt C.int32_t, ndim C.int32_t, shape *C.int64_t,
	out *C.lucid_tensor_info) C.int {
	return call(func() error {
		d, err := dtypeOf(dt)
		if err != nil {
			return err
		}
		var shapeBuf [stackDims]int
		s, err := shapeInto(shapeBuf[:], ndim, shape)
		if err != nil {
			return err
		}
		n, err := tensor.Numel(s)
		if err != nil {
			return err
		}
		if n > math.MaxInt64/d.Size() || int64(nbytes) != int64(n*d.Size()) {
			return errs.Valuef("copy of %d bytes for %d elements of %v", int64(nbytes), n, d)
		}
		if nbytes > 0 && data == nil {
			return errs.Valuef("copy source pointer is NULL")
		}
		t, err := tensor.Empty(d, s)
		if err != nil {
			return err
		}
		if nbytes > 0 {
			copy(t.Storage().Bytes(), unsafe.Slice((*byte)(data), int(nbytes)))
		}
		return fill(out, t)
	})
}

//export lucid_scalar
func lucid_scalar(dt C.int32_t, fv C.double, iv C.int64_t, out *C.lucid_tensor_info) C.int {
	return call(func() error {
		d, err := dtypeOf(dt)
		if err != nil {
			return err
		}
		var t *tensor.Tensor
		switch {
		case d.IsFloat():
			t, err = tensor.WrappedScalar(d, float64(fv))
		case d == dtype.Bool:
			var v float64
			if iv != 0 {
				v = 1
			}
			t, err = tensor.WrappedScalar(d, v)
		default:
			if t, err = tensor.FromInt64s(d, nil, []int64{int64(iv)}); err == nil {
				t, err = t.AsWrappedNumber()
			}
		}
		if err != nil {
			return err
		}
		return fill(out, t)
	})
}

//export lucid_scalar_int
func lucid_scalar_int(v C.int64_t, exp C.int32_t, out *C.lucid_tensor_info) C.int {
	return call(func() error {
		t, err := tensor.WrappedInt(int64(v), int(exp))
		if err != nil {
			return err
		}
		return fill(out, t)
	})
}

// onTensor runs fn on the tensor behind handle h as an export (call: a
// status, panics recovered).
func onTensor(h C.int64_t, fn func(t *tensor.Tensor) error) C.int {
	return call(func() error {
		t, err := getTensor(h)
		if err != nil {
			return err
		}
		return fn(t)
	})
}

// withTensor is onTensor for an export that writes its result through out,
// refused when NULL ("<what> pointer is NULL").
func withTensor[P any](h C.int64_t, out *P, what string, fn func(t *tensor.Tensor) error) C.int {
	return onTensor(h, func(t *tensor.Tensor) error {
		if out == nil {
			return errs.Valuef("%s pointer is NULL", what)
		}
		return fn(t)
	})
}

//export lucid_tensor_info_get
func lucid_tensor_info_get(h C.int64_t, out *C.lucid_tensor_info) C.int {
	return withTensor(h, out, "output info", func(t *tensor.Tensor) error {
		out.handle = h
		fillInfo(out, t, true)
		return nil
	})
}

//export lucid_tensor_view
func lucid_tensor_view(h C.int64_t, out *C.lucid_tensor_info) C.int {
	return withTensor(h, out, "output info", func(t *tensor.Tensor) error {
		v := t.Detach()
		out.handle = C.int64_t(handles.put(v))
		fillInfo(out, v, true)
		return nil
	})
}

//export lucid_tensor_version
func lucid_tensor_version(h C.int64_t, version *C.int64_t) C.int {
	return withTensor(h, version, "output version", func(t *tensor.Tensor) error {
		*version = C.int64_t(t.Version())
		return nil
	})
}

// lucid_tensor_bump_version counts one write into h's memory that the host
// made itself (a NumPy assignment through a view of it), as the library's
// own in-place writes are counted, so a node that saved the tensor refuses
// to run on the changed values.
//
//export lucid_tensor_bump_version
func lucid_tensor_bump_version(h C.int64_t) C.int {
	return onTensor(h, func(t *tensor.Tensor) error {
		t.BumpVersion()
		return nil
	})
}

//export lucid_release
func lucid_release(h C.int64_t) C.int {
	return call(func() error { return handles.release(int64(h)) })
}

//export lucid_release_many
func lucid_release_many(hs *C.int64_t, n C.int32_t) C.int {
	return call(func() error {
		if n < 0 || (n > 0 && hs == nil) {
			return errs.Valuef("invalid handle array (n=%d)", int(n))
		}
		var first error
		for _, h := range unsafe.Slice(hs, int(n)) {
			if err := handles.release(int64(h)); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
}

//export lucid_set_requires_grad
func lucid_set_requires_grad(h C.int64_t, flag C.int32_t) C.int {
	return onTensor(h, func(t *tensor.Tensor) error { return t.SetRequiresGrad(flag != 0) })
}

//export lucid_retain_grad
func lucid_retain_grad(h C.int64_t) C.int { return onTensor(h, autograd.RetainGrad) }

//export lucid_retains_grad
func lucid_retains_grad(h C.int64_t, flag *C.int32_t) C.int {
	return withTensor(h, flag, "flag", func(t *tensor.Tensor) error {
		*flag = 0
		if t.RetainsGrad() {
			*flag = 1
		}
		return nil
	})
}

//export lucid_get_grad
func lucid_get_grad(h C.int64_t, out *C.lucid_tensor_info) (rc C.int) {
	defer recoverPanic(&rc)
	return describeGrad(h, out, "output info", func() { out.handle = 0 }, func(g *tensor.Tensor) error { return fill(out, g) })
}

//export lucid_get_grad_meta
func lucid_get_grad_meta(h C.int64_t, meta *C.int64_t) (rc C.int) {
	defer recoverPanic(&rc)
	return describeGrad(h, meta, "output meta", func() { *meta = 0 }, func(g *tensor.Tensor) error { return fillMeta(meta, g) })
}

// describeGrad describes the .grad of the tensor behind h through out (a
// handle 0 when it has none: none), held while it is described.
func describeGrad[P any](h C.int64_t, out *P, what string, none func(), describe func(g *tensor.Tensor) error) C.int {
	g, err := gradOf(h)
	defer releaseHold(g)
	switch {
	case err != nil:
	case out == nil:
		err = errs.Valuef("%s pointer is NULL", what)
	case g == nil:
		none()
	default:
		err = describe(g)
	}
	return status(err)
}

// gradOf returns the gradient of the tensor behind h, held: the caller puts
// it in a handle (which holds it too) and then gives this hold back with
// releaseHold, so that clearing .grad on another thread in between cannot
// free it.
func gradOf(h C.int64_t) (*tensor.Tensor, error) {
	t, err := getTensor(h)
	if err != nil {
		return nil, err
	}
	return t.HoldGrad(), nil
}

func releaseHold(g *tensor.Tensor) {
	if g != nil {
		g.Storage().ReleaseHandle()
	}
}

//export lucid_set_grad
func lucid_set_grad(h C.int64_t, g C.int64_t) C.int {
	return onTensor(h, func(t *tensor.Tensor) error {
		if g == 0 {
			t.SetGrad(nil)
			return nil
		}
		gt, err := getTensor(g)
		if err != nil {
			return err
		}
		if !tensor.SameShape(gt.Shape(), t.Shape()) {
			return errs.Valuef("assigned grad has shape %s but the tensor has shape %s",
				tensor.FormatShape(gt.Shape()), tensor.FormatShape(t.Shape()))
		}
		if gt.Dtype() != t.Dtype() {
			return errs.Typef("assigned grad has dtype %v but the tensor has dtype %v", gt.Dtype(), t.Dtype())
		}
		autograd.MarkKept(gt)
		t.SetGrad(gt)
		return nil
	})
}

//export lucid_detach
func lucid_detach(h C.int64_t, out *C.lucid_tensor_info) C.int {
	return onTensor(h, func(t *tensor.Tensor) error { return fill(out, t.Detach()) })
}

//export lucid_grad_fn
func lucid_grad_fn(h C.int64_t, node *C.int64_t) C.int {
	return withTensor(h, node, "node", func(t *tensor.Tensor) error {
		fn, _ := t.GradFn()
		*node = 0
		if n := autograd.NodeOf(fn); n != nil {
			*node = C.int64_t(handles.putShared(n))
		}
		return nil
	})
}
