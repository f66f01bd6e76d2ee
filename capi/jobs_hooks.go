package main

/*
#define LUCID_NO_PROTOTYPES
#include "lucid.h"
*/
import "C"

// Go-typed doors to the job exports for jobs_test.go (cgo cannot appear in
// a _test file).

import (
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

const (
	modeInterruptible = int32(C.LUCID_MODE_INTERRUPTIBLE)
	modeGrad          = int32(C.LUCID_MODE_GRAD)
)

// metaArray is a meta array (lucid.h) in Go's types.
type metaArray = [C.LUCID_META_LEN]int64

func tensorOf(h int64) (*tensor.Tensor, error) { return getTensor(C.int64_t(h)) }

// reduceMeta calls lucid_op for reduction op (0 sum, 1 mean) over dims
// (nil: all) of tensor handle h.
func reduceMeta(op int32, h int64, dims []int64, keepdim bool, mode int32) (int, metaArray) {
	var meta [C.LUCID_META_LEN]C.int64_t
	attrs := []C.int64_t{0, -1}
	if keepdim {
		attrs[0] = 1
	}
	if dims != nil {
		attrs[1] = C.int64_t(len(dims))
		for _, d := range dims {
			attrs = append(attrs, C.int64_t(d))
		}
	}
	s, _ := ops.Lookup([]string{"sum", "mean"}[op])
	in := C.int64_t(h)
	rc := lucid_op(C.int32_t(s.ID), &in, 1, &attrs[0], C.int32_t(len(attrs)), C.int32_t(mode), &meta[0])
	return int(rc), goMeta(&meta)
}

// opMeta calls lucid_op for the op named name on tensor handles hs with no
// attributes.
func opMeta(name string, hs []int64, mode int32) (int, metaArray) {
	var meta [C.LUCID_META_LEN]C.int64_t
	s, _ := ops.Lookup(name)
	in := make([]C.int64_t, len(hs))
	for i, h := range hs {
		in[i] = C.int64_t(h)
	}
	rc := lucid_op(C.int32_t(s.ID), &in[0], C.int32_t(len(in)), nil, 0, C.int32_t(mode), &meta[0])
	return int(rc), goMeta(&meta)
}

func jobWait(job int64, ms int32) (int, metaArray) {
	var meta [C.LUCID_META_LEN]C.int64_t
	rc := lucid_job_wait(C.int64_t(job), C.int32_t(ms), &meta[0])
	return int(rc), goMeta(&meta)
}

func jobCancel(job int64) int { return int(lucid_job_cancel(C.int64_t(job))) }

func goMeta(m *[C.LUCID_META_LEN]C.int64_t) (out metaArray) {
	for i, v := range m {
		out[i] = int64(v)
	}
	return out
}
