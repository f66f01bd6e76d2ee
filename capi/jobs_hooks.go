package main

/*
#define LUCID_NO_PROTOTYPES
#include "lucid.h"
*/
import "C"

// Go-typed doors to the job exports for jobs_test.go (cgo cannot appear in
// a _test file).

import "github.com/pylucid/pylucid/core/tensor"

const (
	modeInterruptible = int32(C.LUCID_MODE_INTERRUPTIBLE)
	modeGrad          = int32(C.LUCID_MODE_GRAD)
)

// metaArray is a meta array (lucid.h) in Go's types.
type metaArray = [C.LUCID_META_LEN]int64

func tensorOf(h int64) (*tensor.Tensor, error) { return getTensor(C.int64_t(h)) }

// reduceMeta calls lucid_reduce_meta(op: 0 sum, 1 mean) over dims (nil:
// all) of tensor handle h.
func reduceMeta(op int32, h int64, dims []int64, keepdim bool, mode int32) (int, metaArray) {
	var meta [C.LUCID_META_LEN]C.int64_t
	var dp *C.int64_t
	nd := C.int32_t(-1)
	if dims != nil {
		nd = C.int32_t(len(dims))
		cd := make([]C.int64_t, len(dims)+1)
		for i, d := range dims {
			cd[i] = C.int64_t(d)
		}
		dp = &cd[0]
	}
	kd := C.int32_t(0)
	if keepdim {
		kd = 1
	}
	rc := lucid_reduce_meta(C.int32_t(op), C.int64_t(h), dp, nd, kd, C.int32_t(mode), &meta[0])
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
