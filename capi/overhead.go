package main

/*
#define LUCID_NO_PROTOTYPES
#include <stdlib.h>
#include "lucid.h"
*/
import "C"

import (
	"fmt"

	"github.com/pylucid/pylucid/core/ops"
)

// callLoop makes iters lucid_op(minimum) calls on two float32 tensors of n
// elements, as Python would: the Go side of the per-call overhead (see
// overhead_test.go; cgo cannot appear in a _test file).
func callLoop(n, iters int, grad bool) error {
	var info C.lucid_tensor_info
	shape := []C.int64_t{C.int64_t(n)}
	if rc := lucid_tensor_new(C.LUCID_FLOAT32, 1, &shape[0], &info); rc != 0 {
		return fmt.Errorf("tensor_new: %d", rc)
	}
	x := info.handle
	if rc := lucid_tensor_new(C.LUCID_FLOAT32, 1, &shape[0], &info); rc != 0 {
		return fmt.Errorf("tensor_new: %d", rc)
	}
	y := info.handle
	mode := C.int32_t(0)
	if grad {
		mode = C.LUCID_MODE_GRAD
		lucid_set_requires_grad(x, 1)
	}
	id := opID("minimum")
	in := [2]C.int64_t{x, y}
	var meta [C.LUCID_META_LEN]C.int64_t
	for i := 0; i < iters; i++ {
		if rc := lucid_op(id, &in[0], 2, nil, 0, mode, &meta[0]); rc != 0 {
			return fmt.Errorf("minimum: %d", rc)
		}
		lucid_release(meta[0])
	}
	lucid_release(x)
	lucid_release(y)
	return nil
}

func opID(name string) C.int32_t {
	s, ok := ops.Lookup(name)
	if !ok {
		panic("no op " + name)
	}
	return C.int32_t(s.ID)
}

// stepLoop is one training step as Python makes it, iters times: clear both
// grads, minimum, sum, backward, read both grads, release everything. form
// "sum" is y.sum().backward(); "grad" is y.backward(g) with g a tensor;
// "autograd" is autograd.grad(y, (a, b), g) (lucid_backward_grad).
func stepLoop(n, iters int) error { return stepLoopForm(n, iters, "sum") }

func stepLoopForm(n, iters int, form string) error {
	var info C.lucid_tensor_info
	shape := []C.int64_t{C.int64_t(n)}
	var leaves [2]C.int64_t
	for i := range leaves {
		if rc := lucid_tensor_new(C.LUCID_FLOAT32, 1, &shape[0], &info); rc != 0 {
			return fmt.Errorf("tensor_new: %d", rc)
		}
		leaves[i] = info.handle
		lucid_set_requires_grad(leaves[i], 1)
	}
	var run C.int64_t
	var meta [C.LUCID_META_LEN]C.int64_t
	minimum, sum := opID("minimum"), opID("sum")
	all := [2]C.int64_t{0, -1} // keepdim 0, all dims
	var y, s, g C.int64_t      // outside the loop: their addresses are taken once
	if rc := lucid_tensor_new(C.LUCID_FLOAT32, 1, &shape[0], &info); rc != 0 {
		return fmt.Errorf("tensor_new: %d", rc)
	}
	g = info.handle
	defer lucid_release(g)
	var metas [2 * C.LUCID_META_LEN]C.int64_t
	for i := 0; i < iters; i++ {
		for _, h := range leaves {
			lucid_set_grad(h, 0)
		}
		if rc := lucid_op(minimum, &leaves[0], 2, nil, 0, C.LUCID_MODE_GRAD, &meta[0]); rc != 0 {
			return fmt.Errorf("minimum: %d", rc)
		}
		y = meta[0]
		switch form {
		case "sum":
			if rc := lucid_op(sum, &y, 1, &all[0], 2, C.LUCID_MODE_GRAD, &meta[0]); rc != 0 {
				return fmt.Errorf("sum: %d", rc)
			}
			s = meta[0]
			if rc := lucid_backward_run(&s, nil, 1, 0, C.LUCID_MODE_GRAD, &run); rc != 0 || run != 0 {
				return fmt.Errorf("backward: %d", rc)
			}
			lucid_release(s)
		case "grad":
			if rc := lucid_backward_run(&y, &g, 1, 0, C.LUCID_MODE_GRAD, &run); rc != 0 || run != 0 {
				return fmt.Errorf("backward(g): %d", rc)
			}
		case "autograd":
			if rc := lucid_backward_grad(&y, &g, 1, &leaves[0], 2, 0, C.LUCID_MODE_GRAD, &run, &metas[0]); rc != 0 ||
				run != 0 {
				return fmt.Errorf("backward_grad: %d", rc)
			}
			lucid_release(metas[0])
			lucid_release(metas[C.LUCID_META_LEN])
			lucid_release(y)
			continue
		}
		for _, h := range leaves {
			if rc := lucid_get_grad(h, &info); rc != 0 {
				return fmt.Errorf("grad: %d", rc)
			}
			lucid_release(info.handle)
		}
		lucid_release(y)
	}
	lucid_release(leaves[0])
	lucid_release(leaves[1])
	return nil
}

// borrowLoop lends an n-element float32 buffer iters times, as _hot.c lends
// a NumPy operand for one call (lucid_tensor_borrow), and releases each
// handle: the Go side of from_numpy and of an ndarray operand. The buffer is
// C memory, as NumPy's is; its tokens come back through the buffer queue.
func borrowLoop(n, iters int) error {
	buf := C.malloc(C.size_t(4 * n))
	defer C.free(buf)
	shape := [1]C.int64_t{C.int64_t(n)}
	strides := [1]C.int64_t{1}
	var info C.lucid_tensor_info
	for i := 0; i < iters; i++ {
		if rc := lucid_tensor_borrow(buf, C.int64_t(4*n), C.LUCID_FLOAT32, 1, &shape[0], &strides[0], 0, 0,
			C.int64_t(i+1), &info); rc != 0 {
			return fmt.Errorf("tensor_borrow: %d", rc)
		}
		lucid_release(info.handle)
	}
	return nil
}

// scalarLoop is callLoop with a Python float as b: its weak 0-d tensor made
// per call (lucid_scalar, as _hot.c's number_operand does) and released
// with the result.
func scalarLoop(n, iters int) error {
	var info C.lucid_tensor_info
	shape := []C.int64_t{C.int64_t(n)}
	if rc := lucid_tensor_new(C.LUCID_FLOAT32, 1, &shape[0], &info); rc != 0 {
		return fmt.Errorf("tensor_new: %d", rc)
	}
	x := info.handle
	id := opID("minimum")
	var meta [C.LUCID_META_LEN]C.int64_t
	for i := 0; i < iters; i++ {
		if rc := lucid_scalar(C.LUCID_FLOAT64, 0.5, 0, &info); rc != 0 {
			return fmt.Errorf("scalar: %d", rc)
		}
		in := [2]C.int64_t{x, info.handle}
		if rc := lucid_op(id, &in[0], 2, nil, 0, 0, &meta[0]); rc != 0 {
			return fmt.Errorf("minimum: %d", rc)
		}
		lucid_release(meta[0])
		lucid_release(info.handle)
	}
	lucid_release(x)
	return nil
}
