package main

/*
#define LUCID_NO_PROTOTYPES
#include <stdlib.h>
#include "lucid.h"
void *lucid_dlpack_alloc(int32_t versioned, uint64_t flags, int32_t ndim, int64_t handle, DLTensor **tensor);
int64_t lucid_dlpack_live(void);
*/
import "C"

import (
	"unsafe"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
)

// DLPack export. The managed tensor is C memory (capi/dlpack.c) holding a
// handle to the tensor as its manager_ctx, so the tensor and its memory stay
// alive until the consumer calls the deleter, which releases the handle and
// frees the struct. The Python side wraps it in a PyCapsule
// (python/pylucid/dlpack.py); importing goes through lucid_tensor_borrow.

// dlDataType maps a dtype to DLPack's (code, bits).
func dlDataType(d dtype.Dtype) (code, bits uint8, err error) {
	switch d {
	case dtype.Bool:
		return C.LUCID_DL_BOOL, 8, nil
	case dtype.Uint8:
		return C.LUCID_DL_UINT, 8, nil
	case dtype.Int8, dtype.Int16, dtype.Int32, dtype.Int64:
		return C.LUCID_DL_INT, uint8(8 * d.Size()), nil
	case dtype.Float16, dtype.Float32, dtype.Float64:
		return C.LUCID_DL_FLOAT, uint8(8 * d.Size()), nil
	case dtype.BFloat16:
		return C.LUCID_DL_BFLOAT, 16, nil
	}
	return 0, 0, errs.Typef("dtype %v has no DLPack equivalent", d)
}

//export lucid_dlpack_export
func lucid_dlpack_export(h C.int64_t, versioned C.int32_t, copied C.int32_t, managed *unsafe.Pointer) C.int {
	return call(func() error {
		if managed == nil {
			return errs.Valuef("managed pointer is NULL")
		}
		*managed = nil
		t, err := getTensor(h)
		if err != nil {
			return err
		}
		code, bits, err := dlDataType(t.Dtype())
		if err != nil {
			return err
		}
		var flags C.uint64_t
		if t.Storage().ReadOnly() {
			if versioned == 0 {
				return errs.Valuef("a read-only tensor cannot be exported as a legacy DLPack tensor, which " +
					"cannot mark memory read-only; the consumer must ask for DLPack >= 1.0 (max_version=(1, 0))")
			}
			flags |= C.LUCID_DL_FLAG_READ_ONLY
		}
		if copied != 0 && versioned != 0 {
			flags |= C.LUCID_DL_FLAG_IS_COPIED
		}
		nd := t.Ndim()
		ref := handles.put(t) // the managed tensor's own reference, dropped by its deleter
		var dl *C.DLTensor
		m := C.lucid_dlpack_alloc(versioned, flags, C.int32_t(nd), C.int64_t(ref), &dl)
		if m == nil {
			_ = handles.release(ref)
			return errs.Memoryf("out of memory allocating a DLPack tensor")
		}
		dl.data = t.ExportDataPointer()
		dl.dtype = C.DLDataType{code: C.uint8_t(code), bits: C.uint8_t(bits), lanes: 1}
		dl.byte_offset = 0
		shape := unsafe.Slice(dl.shape, nd)
		strides := unsafe.Slice(dl.strides, nd)
		for i, d := range t.Shape() {
			shape[i] = C.int64_t(d)
		}
		for i, s := range t.Strides() {
			strides[i] = C.int64_t(s)
		}
		*managed = m
		return nil
	})
}

// dlpackLive is the number of exports whose deleter has not run yet.
func dlpackLive() int64 { return int64(C.lucid_dlpack_live()) }
