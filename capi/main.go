// Command capi is pylucid's C ABI: `go build -buildmode=c-shared ./capi`
// produces liblucid, whose functions are documented in lucid.h.
//
// Conventions: every export returns a status code and recovers panics (see
// call); Go objects cross only as int64 handles; tensor memory is C memory
// (the C allocator is installed at init) or memory the caller lent. Nothing
// here calls back into the host or installs signal handlers.
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
	"sync/atomic"
	"unsafe"

	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

func main() {}

// copyString writes s into buf (size n), always NUL-terminated when n > 0.
func copyString(s string, buf *C.char, n C.size_t) {
	if buf == nil || n == 0 {
		return
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	k := copy(dst[:len(dst)-1], s)
	dst[k] = 0
}

//export lucid_errmsg
func lucid_errmsg(buf *C.char, n C.size_t) C.int {
	errMu.Lock()
	msg := errMsgs[C.pthread_self()]
	errMu.Unlock()
	copyString(msg, buf, n)
	return C.int(len(msg))
}

func fill(out *C.lucid_tensor_info, t *tensor.Tensor) error {
	if out == nil {
		return errs.Valuef("output info pointer is NULL")
	}
	out.handle = C.int64_t(handles.put(t))
	fillInfo(out, t, false)
	return nil
}

// fillMeta gives t a handle and describes it in a meta array (lucid.h,
// LUCID_META_LEN): the compact form of fill for hot paths.
func fillMeta(meta *C.int64_t, t *tensor.Tensor) error {
	if meta == nil {
		return errs.Valuef("output meta pointer is NULL")
	}
	shape := t.ShapeRef()
	m := unsafe.Slice(meta, 2+len(shape))
	m[0] = C.int64_t(handles.put(t))
	packed := C.int64_t(t.Dtype()) | C.int64_t(len(shape))<<8
	if t.RequiresGrad() {
		packed |= 1 << 16
	}
	if pendingItems.Load() > 0 {
		packed |= 1 << 17
	}
	m[1] = packed
	for i, d := range shape {
		m[2+i] = C.int64_t(d)
	}
	return nil
}

// fillInfo describes t in out. The data address is given only when asked
// (lucid_tensor_info_get): handing it out pins small tensors' Go memory,
// which op results should not pay for.
func fillInfo(out *C.lucid_tensor_info, t *tensor.Tensor, withData bool) {
	out.data = nil
	if withData {
		out.data = t.ExportDataPointer()
	}
	out.dtype = C.int32_t(t.Dtype())
	out.ndim = C.int32_t(t.Ndim())
	out.requires_grad = boolInt(t.RequiresGrad())
	out.is_leaf = boolInt(t.IsLeaf())
	out.readonly = boolInt(t.Storage().ReadOnly())
	out.pending = C.int32_t(min(pendingItems.Load(), 1<<30))
	for i, d := range t.ShapeRef() {
		out.shape[i] = C.int64_t(d)
	}
	for i, s := range t.StridesRef() {
		out.strides[i] = C.int64_t(s)
	}
}

func boolInt(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

func shapeOf(ndim C.int32_t, p *C.int64_t) ([]int, error) {
	if ndim < 0 || ndim > tensor.MaxDims {
		return nil, errs.Valuef("number of dims %d out of range [0, %d]", int(ndim), tensor.MaxDims)
	}
	return shapeInto(make([]int, int(ndim)), ndim, p)
}

// stackDims is the room of the stack buffers handed to shapeInto: most
// arrays have a few dims, and a buffer of tensor.MaxDims would be zeroed
// (512 bytes) on every call that lends or copies one.
const stackDims = 8

// shapeInto is shapeOf into buf when it has room for ndim dims (else into
// a new slice).
func shapeInto(buf []int, ndim C.int32_t, p *C.int64_t) ([]int, error) {
	if ndim < 0 || int(ndim) > tensor.MaxDims {
		return nil, errs.Valuef("number of dims %d out of range [0, %d]", int(ndim), tensor.MaxDims)
	}
	if ndim > 0 && p == nil {
		return nil, errs.Valuef("shape pointer is NULL")
	}
	if int(ndim) > len(buf) {
		buf = make([]int, int(ndim))
	}
	shape := buf[:ndim]
	for i, d := range unsafe.Slice(p, int(ndim)) {
		shape[i] = int(d)
	}
	return shape, nil
}

func dtypeOf(d C.int32_t) (dtype.Dtype, error) {
	dt := dtype.Dtype(d)
	if d < 0 || d > 255 || !dt.Valid() {
		return 0, errs.Typef("unsupported dtype code %d", int(d))
	}
	return dt, nil
}

// dtypeAndShape decodes the dtype and shape arguments of a tensor-making call.
func dtypeAndShape(dt C.int32_t, ndim C.int32_t, shape *C.int64_t) (dtype.Dtype, []int, error) {
	d, err := dtypeOf(dt)
	if err != nil {
		return 0, nil, err
	}
	s, err := shapeOf(ndim, shape)
	return d, s, err
}

// contextOf decodes an op call's mode flags. Contexts are immutable, so one
// per mode is made once and shared (an op call allocates none).
func contextOf(mode C.int32_t) (*ops.Context, error) {
	if mode >= 0 && int(mode) < len(contexts) {
		if c := contexts[mode].Load(); c != nil {
			return c, nil
		}
	}
	c := &ops.Context{Backend: cpu.Default, GradEnabled: mode&C.LUCID_MODE_GRAD != 0}
	if mode&C.LUCID_MODE_AUTOCAST != 0 {
		st, err := amp.NewState(dtype.Dtype((mode >> 8) & 0xff))
		if err != nil {
			return nil, errs.Typef("%v", err)
		}
		c.Autocast = st
	}
	if mode >= 0 && int(mode) < len(contexts) {
		contexts[mode].Store(c)
	}
	return c, nil
}

var contexts [1 << 12]atomic.Pointer[ops.Context]
