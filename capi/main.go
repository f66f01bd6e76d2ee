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
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/backend"
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

//export lucid_tensor_info_get
func lucid_tensor_info_get(h C.int64_t, out *C.lucid_tensor_info) C.int {
	return call(func() error {
		t, err := getTensor(h)
		if err != nil {
			return err
		}
		if out == nil {
			return errs.Valuef("output info pointer is NULL")
		}
		out.handle = h
		fillInfo(out, t, true)
		return nil
	})
}

//export lucid_tensor_view
func lucid_tensor_view(h C.int64_t, out *C.lucid_tensor_info) C.int {
	return call(func() error {
		t, err := getTensor(h)
		if err != nil {
			return err
		}
		if out == nil {
			return errs.Valuef("output info pointer is NULL")
		}
		v := t.Detach()
		out.handle = C.int64_t(handles.put(v))
		fillInfo(out, v, true)
		return nil
	})
}

//export lucid_tensor_version
func lucid_tensor_version(h C.int64_t, version *C.int64_t) C.int {
	return call(func() error {
		t, err := getTensor(h)
		if err != nil {
			return err
		}
		if version == nil {
			return errs.Valuef("output version pointer is NULL")
		}
		*version = C.int64_t(t.Version())
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
	return call(func() error {
		t, err := getTensor(h)
		if err != nil {
			return err
		}
		return t.SetRequiresGrad(flag != 0)
	})
}

//export lucid_get_grad
func lucid_get_grad(h C.int64_t, out *C.lucid_tensor_info) (rc C.int) {
	defer recoverPanic(&rc)
	g, err := gradOf(h)
	defer releaseHold(g)
	switch {
	case err != nil:
	case out == nil:
		err = errs.Valuef("output info pointer is NULL")
	case g == nil:
		out.handle = 0
	default:
		err = fill(out, g)
	}
	return status(err)
}

//export lucid_get_grad_meta
func lucid_get_grad_meta(h C.int64_t, meta *C.int64_t) (rc C.int) {
	defer recoverPanic(&rc)
	g, err := gradOf(h)
	defer releaseHold(g)
	switch {
	case err != nil:
	case meta == nil:
		err = errs.Valuef("output meta pointer is NULL")
	case g == nil:
		*meta = 0
	default:
		err = fillMeta(meta, g)
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
	return call(func() error {
		t, err := getTensor(h)
		if err != nil {
			return err
		}
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
	return call(func() error {
		t, err := getTensor(h)
		if err != nil {
			return err
		}
		return fill(out, t.Detach())
	})
}

//export lucid_grad_fn
func lucid_grad_fn(h C.int64_t, node *C.int64_t) C.int {
	return call(func() error {
		t, err := getTensor(h)
		if err != nil {
			return err
		}
		if node == nil {
			return errs.Valuef("node pointer is NULL")
		}
		fn, _ := t.GradFn()
		*node = 0
		if n := autograd.NodeOf(fn); n != nil {
			*node = C.int64_t(handles.putShared(n))
		}
		return nil
	})
}

func getNode(h C.int64_t) (autograd.Node, error) {
	o, ok := handles.get(int64(h))
	if !ok {
		return nil, fmt.Errorf("invalid or released node handle %d", int64(h))
	}
	n, ok := o.(autograd.Node)
	if !ok {
		return nil, fmt.Errorf("handle %d is not an autograd node", int64(h))
	}
	return n, nil
}

//export lucid_node_name
func lucid_node_name(h C.int64_t, buf *C.char, n C.size_t) C.int {
	return call(func() error {
		node, err := getNode(h)
		if err != nil {
			return err
		}
		copyString(node.Name(), buf, n)
		return nil
	})
}

//export lucid_node_next
func lucid_node_next(h C.int64_t, nodes *C.int64_t, outputs *C.int32_t, capacity C.int32_t, count *C.int32_t) C.int {
	return call(func() error {
		node, err := getNode(h)
		if err != nil {
			return err
		}
		edges := node.Next()
		if count == nil || (capacity > 0 && (nodes == nil || outputs == nil)) {
			return errs.Valuef("NULL output pointer")
		}
		*count = C.int32_t(len(edges))
		if int(capacity) < len(edges) {
			return nil // the caller retries with a larger buffer
		}
		ns, os := unsafe.Slice(nodes, len(edges)), unsafe.Slice(outputs, len(edges))
		for i, e := range edges {
			ns[i], os[i] = 0, C.int32_t(e.Output)
			if e.Node != nil {
				ns[i] = C.int64_t(handles.putShared(e.Node))
			}
		}
		return nil
	})
}

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
	gateEnter()
	interruptible := mode&C.LUCID_MODE_INTERRUPTIBLE != 0
	c, err := contextOf(mode &^ C.LUCID_MODE_INTERRUPTIBLE)
	if err != nil {
		return nil, 0, err
	}
	if nInputs < 0 || nInputs > maxOpInputs || (nInputs > 0 && inputs == nil) {
		return nil, 0, errs.Valuef("invalid input array (%d handles at %p)", int(nInputs), inputs)
	}
	if nAttrs < 0 || nAttrs > maxOpAttrs || (nAttrs > 0 && attrs == nil) {
		return nil, 0, errs.Valuef("invalid attribute array (%d values at %p)", int(nAttrs), attrs)
	}
	var buf [maxOpInputs]*tensor.Tensor
	in := buf[:nInputs]
	if err := handles.tensorsInto(unsafe.Slice(inputs, int(nInputs)), in); err != nil {
		return nil, 0, err
	}
	var as []int64
	if nAttrs > 0 {
		as = unsafe.Slice((*int64)(unsafe.Pointer(attrs)), int(nAttrs))
	}
	if interruptible && nInputs == 1 && in[0].Numel() >= longWork && isReduction(id) && opOutputs[id] == 1 {
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
// closure's captures cost genericOp nothing): the job gets copies of the
// inputs and attributes, which live in the caller's memory only during the
// call.
func startOpJob(c *ops.Context, id int, in []*tensor.Tensor, as []int64) int64 {
	ins := append([]*tensor.Tensor(nil), in...)
	for _, t := range ins {
		t.MarkKept() // the job may outlive the caller's handles (tensor.Recycle)
	}
	attrs := append([]int64(nil), as...)
	return startJob(c, nil, func(c *ops.Context) ([]*tensor.Tensor, error) {
		t, err := ops.Call(c, id, ins, attrs)
		if err != nil {
			return nil, err
		}
		return []*tensor.Tensor{t}, nil
	})
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

// backwardRun is a backward pass in progress, driven by the host.
type backwardRun struct {
	run *autograd.Run
	// pending is the host function lucid_backward_run stopped at; the next
	// lucid_backward_next hands it out.
	pending *autograd.Pending
}

// pausedRun is the handle of a run stopped at a host function. The run
// outlives the call that gave it its gradients, and the host may drop those
// gradients' handles as soon as the call returns (the C extension does so
// with a NumPy array lent for the call), so they are marked shared: never
// freed early while the paused run may still hand them to a host function.
func pausedRun(r *autograd.Run, p *autograd.Pending, given []*tensor.Tensor) C.int64_t {
	for _, g := range given {
		if g != nil {
			g.Storage().MarkShared()
		}
	}
	return C.int64_t(handles.put(&backwardRun{run: r, pending: p}))
}

func startRun(roots, grads *C.int64_t, n C.int32_t, inputs *C.int64_t, ninputs C.int32_t,
	flags C.int32_t, mode C.int32_t) (*autograd.Run, []*tensor.Tensor, error) {
	gateEnter()
	c, err := contextOf(mode)
	if err != nil {
		return nil, nil, err
	}
	rs, err := getTensors(roots, int(n), false)
	if err != nil {
		return nil, nil, err
	}
	var gs []*tensor.Tensor
	if grads != nil {
		if gs, err = getTensors(grads, int(n), true); err != nil {
			return nil, nil, err
		}
	}
	opts := autograd.Options{
		RetainGraph: flags&C.LUCID_RETAIN_GRAPH != 0,
		CreateGraph: flags&C.LUCID_CREATE_GRAPH != 0,
		AllowUnused: flags&C.LUCID_ALLOW_UNUSED != 0,
		Math:        ops.EngineMath(c),
	}
	if ninputs >= 0 {
		if opts.Inputs, err = getTensors(inputs, int(ninputs), false); err != nil {
			return nil, nil, err
		}
	}
	r, err := autograd.Start(rs, gs, opts)
	return r, gs, err
}

//export lucid_backward_start
func lucid_backward_start(roots, grads *C.int64_t, n C.int32_t, inputs *C.int64_t, ninputs C.int32_t,
	flags C.int32_t, mode C.int32_t, run *C.int64_t) C.int {
	return call(func() error {
		if run == nil {
			return errs.Valuef("run pointer is NULL")
		}
		r, given, err := startRun(roots, grads, n, inputs, ninputs, flags, mode)
		if err != nil {
			return err
		}
		*run = pausedRun(r, nil, given)
		return nil
	})
}

//export lucid_backward_run
func lucid_backward_run(roots, grads *C.int64_t, n C.int32_t, flags C.int32_t, mode C.int32_t, run *C.int64_t) C.int {
	return call(func() error {
		if run == nil {
			return errs.Valuef("run pointer is NULL")
		}
		*run = 0
		r, given, err := startRun(roots, grads, n, nil, -1, flags, mode)
		if err != nil {
			return err
		}
		p, err := r.Next()
		if err != nil || p == nil {
			return err
		}
		*run = pausedRun(r, p, given)
		return nil
	})
}

//export lucid_backward_grad
func lucid_backward_grad(roots, grads *C.int64_t, n C.int32_t, inputs *C.int64_t, ninputs C.int32_t,
	flags C.int32_t, mode C.int32_t, run *C.int64_t, meta *C.int64_t) C.int {
	return call(func() error {
		if run == nil || meta == nil {
			return errs.Valuef("run or meta pointer is NULL")
		}
		*run = 0
		if ninputs < 0 {
			return errs.Valuef("lucid_backward_grad needs ninputs >= 0, got %d", int(ninputs))
		}
		r, given, err := startRun(roots, grads, n, inputs, ninputs, flags, mode)
		if err != nil {
			return err
		}
		p, err := r.Next()
		if err != nil {
			return err
		}
		if p != nil {
			*run = pausedRun(r, p, given)
			return nil
		}
		res := r.Result()
		for _, g := range res {
			if g != nil {
				autograd.MarkKept(g) // a second handle: see lucid_function_owner
			}
		}
		return fillMetas(meta, res, nil)
	})
}

func getRun(h C.int64_t) (*backwardRun, error) {
	o, ok := handles.get(int64(h))
	if !ok {
		return nil, fmt.Errorf("invalid or released backward handle %d", int64(h))
	}
	r, ok := o.(*backwardRun)
	if !ok {
		return nil, fmt.Errorf("handle %d is not a backward run", int64(h))
	}
	return r, nil
}

//export lucid_backward_next
func lucid_backward_next(h C.int64_t, function *C.int64_t, grads *C.int64_t, capacity C.int32_t, ngrads *C.int32_t,
	release *C.int32_t) C.int {
	return call(func() error {
		r, err := getRun(h)
		if err != nil {
			return err
		}
		if function == nil || ngrads == nil || release == nil {
			return errs.Valuef("NULL output pointer")
		}
		p := r.pending
		r.pending = nil
		if p == nil {
			if p, err = r.run.Next(); err != nil {
				return err
			}
		}
		*function, *ngrads, *release = 0, 0, 0
		if p == nil {
			return nil
		}
		if int(capacity) < len(p.Grads) || grads == nil {
			r.pending = p // keep it: the caller may retry with a larger buffer
			*ngrads = C.int32_t(len(p.Grads))
			return errs.Valuef("gradient buffer of %d too small for %d outputs", int(capacity), len(p.Grads))
		}
		out := unsafe.Slice(grads, len(p.Grads))
		for i, g := range p.Grads {
			out[i] = 0
			if g != nil {
				autograd.MarkKept(g) // a second handle: see lucid_function_owner
				out[i] = C.int64_t(handles.put(g))
			}
		}
		*function, *ngrads, *release = C.int64_t(p.Node.ID), C.int32_t(len(p.Grads)), boolInt(p.Release)
		return nil
	})
}

//export lucid_backward_resume
func lucid_backward_resume(h C.int64_t, grads *C.int64_t, n C.int32_t) C.int {
	return call(func() error {
		r, err := getRun(h)
		if err != nil {
			return err
		}
		gs, err := getTensors(grads, int(n), true)
		if err != nil {
			return err
		}
		for _, g := range gs {
			if g != nil {
				// The run keeps it (in a waiting node's buffer, with no
				// hold) while the host drops its handle as soon as this
				// returns: never freed early (as pausedRun's gradients).
				autograd.MarkKept(g)
				g.Storage().MarkShared()
			}
		}
		return r.run.Resume(gs)
	})
}

//export lucid_backward_result
func lucid_backward_result(h C.int64_t, grads *C.int64_t, n C.int32_t) C.int {
	return call(func() error {
		r, err := getRun(h)
		if err != nil {
			return err
		}
		res := r.run.Result()
		if int(n) != len(res) || (n > 0 && grads == nil) {
			return errs.Valuef("result buffer of %d for %d inputs", int(n), len(res))
		}
		out := unsafe.Slice(grads, len(res))
		for i, g := range res {
			out[i] = 0
			if g != nil {
				autograd.MarkKept(g) // a second handle: see lucid_function_owner
				out[i] = C.int64_t(handles.put(g))
			}
		}
		return nil
	})
}

//export lucid_function_record
func lucid_function_record(name *C.char, id C.int64_t, inputs *C.int64_t, ninputs C.int32_t,
	outputs *C.int64_t, noutputs C.int32_t) C.int {
	return call(func() error {
		if name == nil {
			return errs.Valuef("function name is NULL")
		}
		ins, err := getTensors(inputs, int(ninputs), false)
		if err != nil {
			return err
		}
		outs, err := getTensors(outputs, int(noutputs), false)
		if err != nil {
			return err
		}
		edges := make([]autograd.Edge, len(ins))
		metas := make([]autograd.InputMeta, len(ins))
		for i, t := range ins {
			edges[i] = autograd.EdgeOf(t)
			metas[i] = autograd.InputMeta{Shape: t.Shape(), Dtype: t.Dtype()}
		}
		fn := autograd.NewExternalFn(C.GoString(name), int64(id), edges, metas, len(outs))
		fid := int64(id)
		runtime.AddCleanup(fn, func(fid int64) { functionQueue.push(fid) }, fid)
		owners := unsafe.Slice(outputs, len(outs))
		for i, o := range outs {
			if !o.IsLeaf() {
				return errs.Valuef("output %d of %s already has a grad_fn; return new tensors from forward", i, C.GoString(name))
			}
		}
		for i, o := range outs {
			if o.Dtype().IsFloat() {
				fn.Owners = append(fn.Owners, int64(owners[i]))
				o.SetGradFn(fn, i)
			}
		}
		return nil
	})
}

// lucid_function_owner says whether the tensor behind h is the only way to
// reach the host function call that produced it, and gives that call's id
// (0: h is not a function's output). Only then may the host let its
// collector free the call's state together with h's owner: no other handle
// of its outputs is live, no output was kept by Go elsewhere, and no graph
// edge, node handle or run refers to the call's node (once a collection
// found the node unreachable; until then the answer is no).
//
//export lucid_function_owner
func lucid_function_owner(h C.int64_t, id *C.int64_t, sole *C.int32_t) C.int {
	return call(func() error {
		if id == nil || sole == nil {
			return errs.Valuef("NULL output pointer")
		}
		*id, *sole = 0, 0
		o, ok := handles.get(int64(h))
		if !ok {
			return nil
		}
		t, ok := o.(*tensor.Tensor)
		if !ok {
			return nil
		}
		fn, _ := t.GradFn()
		f, ok := fn.(*autograd.ExternalFn)
		if !ok {
			return nil
		}
		*id = C.int64_t(f.ID)
		if f.Escaped() || f.InGraph() {
			return nil
		}
		mine := false
		for _, oh := range f.Owners {
			if oh == int64(h) {
				mine = true
			} else if _, live := handles.get(oh); live {
				return nil
			}
		}
		*sole = boolInt(mine)
		return nil
	})
}

//export lucid_drain
func lucid_drain(q C.int32_t, items *C.int64_t, capacity C.int32_t, count *C.int32_t) C.int {
	return call(func() error {
		if count == nil || (capacity > 0 && items == nil) {
			return errs.Valuef("NULL output pointer")
		}
		var src *queue
		switch q {
		case C.LUCID_QUEUE_BUFFERS:
			src = &bufferQueue
		case C.LUCID_QUEUE_FUNCTIONS:
			src = &functionQueue
		default:
			return errs.Valuef("unknown queue %d", int(q))
		}
		got := src.pop(int(capacity))
		copy(unsafe.Slice(items, len(got)), unsafe.Slice((*C.int64_t)(unsafe.Pointer(unsafe.SliceData(got))), len(got)))
		*count = C.int32_t(len(got))
		return nil
	})
}

//export lucid_stats
func lucid_stats(out *C.int64_t, n C.int32_t) C.int {
	return call(func() error {
		if n > 0 && out == nil {
			return errs.Valuef("NULL output pointer")
		}
		vals := []int64{int64(handles.count()), borrowedCount.Load(), cBytes.Load(), cBlocks.Load(), dlpackLive(),
			jobsRunning.Load(), int64(tensor.PinnedInline())}
		dst := unsafe.Slice(out, int(n))
		for i := range dst {
			if i < len(vals) {
				dst[i] = C.int64_t(vals[i])
			}
		}
		return nil
	})
}

//export lucid_collect
func lucid_collect() C.int {
	return call(func() error {
		// Cleanups run on their own goroutine after a collection: repeat
		// until the counters settle.
		prev := int64(-1)
		for i := 0; i < 50; i++ {
			tensor.FlushYoung()
			runtime.GC()
			time.Sleep(2 * time.Millisecond)
			cur := cBlocks.Load()*1000003 + borrowedCount.Load()
			if cur == prev {
				break
			}
			prev = cur
		}
		baseline.Store(outstanding())
		return nil
	})
}

//export lucid_set_num_threads
func lucid_set_num_threads(n C.int32_t) C.int {
	return call(func() error {
		if n < 1 {
			return errs.Valuef("number of threads must be at least 1, got %d", int(n))
		}
		cpu.Default.SetThreads(int(n))
		return nil
	})
}

//export lucid_get_num_threads
func lucid_get_num_threads(n *C.int32_t) C.int {
	return call(func() error {
		if n == nil {
			return errs.Valuef("NULL output pointer")
		}
		*n = C.int32_t(cpu.Default.Threads())
		return nil
	})
}

type schemaJSON struct {
	Name          string   `json:"name"`
	Version       int      `json:"version"`
	AmpPolicy     string   `json:"amp_policy"`
	Deterministic bool     `json:"deterministic"`
	ID            int      `json:"id"`
	Kind          string   `json:"kind"`
	Arity         int      `json:"arity"`
	Outputs       int      `json:"outputs"`
	Attrs         []string `json:"attrs"`
}

//export lucid_schemas
func lucid_schemas(buf *C.char, n C.size_t, needed *C.size_t) C.int {
	return call(func() error {
		var out []schemaJSON
		for _, s := range ops.Schemas() {
			attrs := s.Attrs
			if attrs == nil {
				attrs = []string{}
			}
			out = append(out, schemaJSON{s.Name, s.Version, s.AmpPolicy.String(), s.Deterministic,
				s.ID, s.Kind.String(), s.Arity, s.Outputs, attrs})
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		if needed != nil {
			*needed = C.size_t(len(b) + 1)
		}
		copyString(string(b), buf, n)
		return nil
	})
}

//export lucid_debug_gate
func lucid_debug_gate(want C.int32_t, waitMs C.int32_t, met, timedOut *C.int64_t) C.int {
	return call(func() error {
		if waitMs < 0 {
			return errs.Valuef("negative wait %d ms", int(waitMs))
		}
		old := setGate(int(want), time.Duration(waitMs)*time.Millisecond)
		var m, t int64
		if old != nil {
			m, t = old.counts()
		}
		if met != nil {
			*met = C.int64_t(m)
		}
		if timedOut != nil {
			*timedOut = C.int64_t(t)
		}
		return nil
	})
}

//export lucid_debug_panic
func lucid_debug_panic() C.int {
	return call(func() error {
		var b backend.IBackend
		return b.Binary(backend.Add, nil, nil, nil) // nil interface: a real Go runtime panic
	})
}

var profileFile *os.File

// lucid_debug_profile starts a Go CPU profile written to path, or stops the
// running one when path is NULL (a tool for performance work).
//
//export lucid_debug_profile
func lucid_debug_profile(path *C.char) C.int {
	return call(func() error {
		if path == nil {
			if profileFile != nil {
				pprof.StopCPUProfile()
				err := profileFile.Close()
				profileFile = nil
				return err
			}
			return nil
		}
		f, err := os.Create(C.GoString(path))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		profileFile = f
		return nil
	})
}
