package main

/*
#define LUCID_NO_PROTOTYPES
#include "lucid.h"
*/
import "C"

import "fmt"

// callLoop makes iters lucid_binary(minimum) calls on two float32 tensors of
// n elements, as Python would: the Go side of the per-call overhead (see
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
	for i := 0; i < iters; i++ {
		if rc := lucid_binary(C.LUCID_MINIMUM, x, y, mode, &info); rc != 0 {
			return fmt.Errorf("binary: %d", rc)
		}
		lucid_release(info.handle)
	}
	lucid_release(x)
	lucid_release(y)
	return nil
}
