// Backward runs driven by the host, and Python-defined functions
// (lucid_function_record) whose backward the host runs.

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
	"fmt"
	"runtime"
	"unsafe"

	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

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
