package main

/*
#define LUCID_NO_PROTOTYPES
#include "lucid.h"
*/
import "C"

import (
	"fmt"

	"github.com/pylucid/pylucid/core/ops"
)

// The entries callLoop measures.
const (
	viaBinary     = iota // lucid_binary
	viaBinaryMeta        // lucid_binary_meta
	viaOp                // lucid_op, the generic call
)

// callLoop makes iters lucid_binary(minimum) calls on two float32 tensors of
// n elements, as Python would: the Go side of the per-call overhead (see
// overhead_test.go; cgo cannot appear in a _test file).
func callLoop(n, iters int, grad bool) error { return callLoopVia(viaBinary, n, iters, grad) }

// callLoopVia is callLoop through the entry via.
func callLoopVia(via, n, iters int, grad bool) error {
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
	s, _ := ops.Lookup("minimum")
	id := C.int32_t(s.ID)
	in := [2]C.int64_t{x, y}
	var meta [C.LUCID_META_LEN]C.int64_t
	for i := 0; i < iters; i++ {
		var rc C.int
		h := &info.handle
		switch via {
		case viaBinary:
			rc = lucid_binary(C.LUCID_MINIMUM, x, y, mode, &info)
		case viaBinaryMeta:
			rc, h = lucid_binary_meta(C.LUCID_MINIMUM, x, y, mode, &meta[0]), &meta[0]
		default:
			rc, h = lucid_op(id, &in[0], 2, nil, 0, mode, &meta[0]), &meta[0]
		}
		if rc != 0 {
			return fmt.Errorf("minimum via %d: %d", via, rc)
		}
		lucid_release(*h)
	}
	lucid_release(x)
	lucid_release(y)
	return nil
}

// stepLoop is one training step as Python makes it, iters times: clear both
// grads, minimum, sum, backward, read both grads, release everything.
func stepLoop(n, iters int) error {
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
	for i := 0; i < iters; i++ {
		for _, h := range leaves {
			lucid_set_grad(h, 0)
		}
		if rc := lucid_binary(C.LUCID_MINIMUM, leaves[0], leaves[1], C.LUCID_MODE_GRAD, &info); rc != 0 {
			return fmt.Errorf("binary: %d", rc)
		}
		y := info.handle
		if rc := lucid_reduce(C.LUCID_SUM, y, nil, -1, 0, C.LUCID_MODE_GRAD, &info); rc != 0 {
			return fmt.Errorf("sum: %d", rc)
		}
		s := info.handle
		if rc := lucid_backward_run(&s, nil, 1, 0, C.LUCID_MODE_GRAD, &run); rc != 0 || run != 0 {
			return fmt.Errorf("backward: %d", rc)
		}
		for _, h := range leaves {
			if rc := lucid_get_grad(h, &info); rc != 0 {
				return fmt.Errorf("grad: %d", rc)
			}
			lucid_release(info.handle)
		}
		lucid_release(y)
		lucid_release(s)
	}
	lucid_release(leaves[0])
	lucid_release(leaves[1])
	return nil
}
