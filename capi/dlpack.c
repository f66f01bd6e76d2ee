// C side of the DLPack export (capi/dlpack.go): allocation of the managed
// tensor and the deleters a consumer calls. They live in a .c file because a
// cgo preamble next to //export may only declare functions.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "lucid.h"

// Exports whose deleter has not run yet (LUCID_STAT_DLPACK).
static int64_t dlpack_live;

// Set in a child process after fork(): the Go runtime does not survive fork,
// so a deleter running there frees its C memory but never calls into Go.
static volatile int dlpack_forked;

static void dlpack_mark_forked(void) { dlpack_forked = 1; }

__attribute__((constructor)) static void dlpack_init(void) {
    pthread_atfork(NULL, NULL, dlpack_mark_forked);
}

int64_t lucid_dlpack_live(void) { return __atomic_load_n(&dlpack_live, __ATOMIC_SEQ_CST); }

// Drops the tensor handle a managed tensor holds (its manager_ctx).
static void dlpack_drop(void *ctx) {
    if (dlpack_forked) {
        return;
    }
    lucid_release((int64_t)(intptr_t)ctx);
    __atomic_sub_fetch(&dlpack_live, 1, __ATOMIC_SEQ_CST);
}

static void dlpack_delete(DLManagedTensor *self) {
    if (self == NULL) {
        return;
    }
    dlpack_drop(self->manager_ctx);
    free(self);
}

static void dlpack_delete_versioned(DLManagedTensorVersioned *self) {
    if (self == NULL) {
        return;
    }
    dlpack_drop(self->manager_ctx);
    free(self);
}

// lucid_dlpack_alloc allocates a managed tensor (versioned or legacy) with
// room for shape and strides behind it, holding handle as its manager_ctx,
// and returns it; *tensor points to its DLTensor, whose shape and strides
// fields are set. NULL when out of memory.
void *lucid_dlpack_alloc(int32_t versioned, uint64_t flags, int32_t ndim, int64_t handle, DLTensor **tensor) {
    size_t head = versioned ? sizeof(DLManagedTensorVersioned) : sizeof(DLManagedTensor);
    head = (head + 7) & ~(size_t)7;
    char *p = calloc(1, head + 2 * (size_t)ndim * sizeof(int64_t) + sizeof(int64_t));
    if (p == NULL) {
        return NULL;
    }
    DLTensor *t;
    if (versioned) {
        DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)p;
        m->version.major = LUCID_DLPACK_MAJOR;
        m->version.minor = LUCID_DLPACK_MINOR;
        m->manager_ctx = (void *)(intptr_t)handle;
        m->deleter = dlpack_delete_versioned;
        m->flags = flags;
        t = &m->dl_tensor;
    } else {
        DLManagedTensor *m = (DLManagedTensor *)p;
        m->manager_ctx = (void *)(intptr_t)handle;
        m->deleter = dlpack_delete;
        t = &m->dl_tensor;
    }
    t->shape = (int64_t *)(p + head);
    t->strides = t->shape + ndim;
    t->ndim = ndim;
    t->device.device_type = LUCID_DL_CPU;
    t->device.device_id = 0;
    __atomic_add_fetch(&dlpack_live, 1, __ATOMIC_SEQ_CST);
    *tensor = t;
    return p;
}
