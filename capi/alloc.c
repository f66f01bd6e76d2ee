// C helpers for the library's allocator (capi/runtime.go). They live in a .c
// file because a cgo preamble next to //export may only declare functions.
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

// lucid_c_alloc returns size bytes aligned to align; with huge set it asks the
// kernel for transparent huge pages, which cut page faults on big tensors by
// a factor of 512.
void *lucid_c_alloc(size_t size, size_t align, int huge) {
    void *p = NULL;
    if (posix_memalign(&p, align, size) != 0) {
        return NULL;
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) {
        madvise(p, size, MADV_HUGEPAGE);
    }
#else
    (void)huge;
#endif
    return p;
}
