/*
 * lucid.h — the C ABI of pylucid's Go core (liblucid, built with
 * `go build -buildmode=c-shared ./capi`).
 *
 * Conventions
 *  - Every function is prefixed lucid_ and returns a status code: LUCID_OK (0)
 *    or the kind of error (LUCID_EVALUE, LUCID_ETYPE, LUCID_ERUNTIME,
 *    LUCID_EPANIC, LUCID_EOVERFLOW: a host integer out of range for a
 *    result dtype, LUCID_ENOMEM: an allocation the machine cannot satisfy,
 *    refused before any work). After a non-zero status, lucid_errmsg on the same thread
 *    returns the message. The one non-zero status that is not an error,
 *    LUCID_PENDING, comes only to callers that ask for it
 *    (LUCID_MODE_INTERRUPTIBLE).
 *  - Go objects cross the boundary only as int64 handles (tensors, autograd
 *    nodes, backward runs). A handle is released with lucid_release; 0 is
 *    never a valid handle. Tensor data lives in C memory (allocated by the
 *    library, 64-byte aligned), in memory the caller lent with
 *    lucid_tensor_borrow, or, for tensors of at most 256 bytes, in 64-byte
 *    aligned Go memory that is pinned before its address is handed out
 *    (lucid_tensor_info_get, lucid_dlpack_export) and stays put as long as
 *    the tensor lives. No unpinned Go pointer is ever returned.
 *  - Strides are in elements. Shapes have at most LUCID_MAX_DIMS dims.
 *  - Every function recovers Go panics and reports them as LUCID_EPANIC.
 *  - The library installs no signal handlers and never calls back into the
 *    caller; a caller that wants to honour Ctrl-C during a long call takes it
 *    as a job (LUCID_MODE_INTERRUPTIBLE). It must not be used in a child
 *    process after fork().
 *
 * This header is also the cdef of the Python binding (python/pylucid/_cdef.py
 * strips the preprocessor lines; the compiled extension includes it whole),
 * so it stays within what cffi parses.
 */
#ifndef LUCID_H
#define LUCID_H
#include <stddef.h>
#include <stdint.h>

#define LUCID_MAX_DIMS 64

/* status codes */
#define LUCID_OK 0
#define LUCID_EVALUE 1
#define LUCID_ETYPE 2
#define LUCID_ERUNTIME 3
#define LUCID_EPANIC 4
#define LUCID_EOVERFLOW 5
#define LUCID_ENOMEM 6
/* Not an error: the call runs on as a job (see LUCID_MODE_INTERRUPTIBLE). */
#define LUCID_PENDING 64

/* dtypes (values of core/dtype.Dtype) */
#define LUCID_BOOL 1
#define LUCID_UINT8 2
#define LUCID_INT8 3
#define LUCID_INT16 4
#define LUCID_INT32 5
#define LUCID_INT64 6
#define LUCID_FLOAT16 7
#define LUCID_BFLOAT16 8
#define LUCID_FLOAT32 9
#define LUCID_FLOAT64 10

/* call flags (the `mode` argument of op calls): grad recording and autocast */
#define LUCID_MODE_GRAD 1
#define LUCID_MODE_AUTOCAST 2
/* the autocast dtype goes in bits 8..15: mode |= dtype << 8 */
/* The caller of lucid_op takes long work as a job: a reduction over
 * many elements (a broadcast view can make one last for hours in no memory)
 * then returns LUCID_PENDING at once, before any work, with the job in
 * meta[0], and runs on inside the library. The caller waits for it in short
 * slices with lucid_job_wait, free to look for Ctrl-C between them (a host
 * language's signal handlers run only when its thread comes back from the
 * library), and gives up with lucid_job_cancel. Every job ends in exactly one
 * lucid_job_wait that returns other than LUCID_PENDING, or one
 * lucid_job_cancel. Other calls ignore the flag; without it every call runs
 * to the end before returning. */
#define LUCID_MODE_INTERRUPTIBLE 65536

/* backward flags */
#define LUCID_RETAIN_GRAPH 1
#define LUCID_CREATE_GRAPH 2
#define LUCID_ALLOW_UNUSED 4

/* lucid_drain queues */
#define LUCID_QUEUE_BUFFERS 0
#define LUCID_QUEUE_FUNCTIONS 1

/* lucid_stats slots */
#define LUCID_STAT_HANDLES 0
#define LUCID_STAT_BORROWED 1
#define LUCID_STAT_C_BYTES 2
#define LUCID_STAT_C_BLOCKS 3
#define LUCID_STAT_DLPACK 4    /* DLPack exports whose deleter has not run yet */
#define LUCID_STAT_JOBS 5      /* jobs (LUCID_MODE_INTERRUPTIBLE) whose work has not ended */
#define LUCID_STAT_PINNED 6    /* small tensors pinned because their address was handed out */
#define LUCID_STAT_COUNT 7

/* What the caller needs to know about a tensor, filled by every call that
 * returns one. */
typedef struct {
    int64_t handle;
    void *data;            /* address of element [0,...,0]; NULL when empty. Only
                              lucid_tensor_info_get fills it: other calls leave NULL */
    int32_t dtype;
    int32_t ndim;
    int32_t requires_grad;
    int32_t is_leaf;
    int32_t readonly;      /* borrowed read-only memory */
    int32_t pending;       /* items waiting in lucid_drain queues: drain when > 0 */
    int64_t shape[64];
    int64_t strides[64];   /* in elements */
} lucid_tensor_info;

/* A meta array is the compact form of lucid_tensor_info that the hot calls
 * (lucid_op, lucid_job_wait, lucid_get_grad_meta) fill: it holds
 * LUCID_META_LEN values,
 *   meta[0]            the new handle,
 *   meta[1]            dtype | ndim << 8 | requires_grad << 16
 *                      | (items pending in lucid_drain queues ? 1 : 0) << 17,
 *   meta[2 .. 2+ndim)  the shape.
 * Strides and the data address come from lucid_tensor_info_get. */
#define LUCID_META_LEN 66
#define LUCID_META_REQUIRES_GRAD 65536
#define LUCID_META_PENDING 131072

/* ---- DLPack (the exchange format of the Python array API's __dlpack__) ----
 * The structs below are laid out exactly as in dlpack.h (DLPack 1.x ABI);
 * a program that includes dlpack.h before this header uses its definitions
 * instead. A pylucid tensor is exported as a DLManagedTensorVersioned
 * (PyCapsule "dltensor_versioned") or as the legacy DLManagedTensor
 * (PyCapsule "dltensor"); both carry strides in elements and byte_offset 0. */
#define LUCID_DLPACK_MAJOR 1
#define LUCID_DLPACK_MINOR 0
/* DLDeviceType: pylucid tensors live on the CPU */
#define LUCID_DL_CPU 1
/* DLDataTypeCode */
#define LUCID_DL_INT 0
#define LUCID_DL_UINT 1
#define LUCID_DL_FLOAT 2
#define LUCID_DL_BFLOAT 4
#define LUCID_DL_COMPLEX 5
#define LUCID_DL_BOOL 6
/* DLManagedTensorVersioned.flags */
#define LUCID_DL_FLAG_READ_ONLY 1
#define LUCID_DL_FLAG_IS_COPIED 2

#ifndef DLPACK_DLPACK_H_
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef struct {
    int32_t device_type;   /* DLDeviceType: kDLCPU = 1 */
    int32_t device_id;
} DLDevice;

typedef struct {
    uint8_t code;          /* DLDataTypeCode */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;      /* in elements; NULL means row-major contiguous */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif /* DLPACK_DLPACK_H_ */

/* An out= entry of lucid_op_n: a tensor handle, or caller memory lent for
 * the one call. */
typedef struct {
    int64_t handle;         /* a tensor to write into; or 0: */
    void *data;             /* caller memory lent for this call only: element [0,...,0] */
    int32_t dtype;          /* its dtype; -1 (with handle 0): no out, a fresh result */
    int32_t ndim;
    const int64_t *shape;
    const int64_t *strides; /* in elements */
} lucid_out;

#ifndef LUCID_NO_PROTOTYPES
/* Copies the calling thread's last error message into buf (always
 * NUL-terminated when n > 0) and returns its full length. */
int lucid_errmsg(char *buf, size_t n);

/* A zero-filled contiguous tensor. */
int lucid_tensor_new(int32_t dtype, int32_t ndim, const int64_t *shape, lucid_tensor_info *out);
/* Wraps caller memory without copying. base is the lowest address the view
 * touches and nbytes its span; offset (elements) locates element [0,...,0]
 * from base. token is handed back through LUCID_QUEUE_BUFFERS once the
 * library no longer uses the memory. */
int lucid_tensor_borrow(void *base, int64_t nbytes, int32_t dtype, int32_t ndim, const int64_t *shape,
                        const int64_t *strides, int64_t offset, int32_t readonly, int64_t token,
                        lucid_tensor_info *out);
/* A new contiguous tensor holding a copy of the nbytes bytes at data (the
 * C-contiguous elements of that dtype and shape; nbytes must be their exact
 * size). For a small host array given for one call, a copy costs less than
 * a loan (no token to hand back). */
int lucid_tensor_copy(const void *data, int64_t nbytes, int32_t dtype, int32_t ndim, const int64_t *shape,
                      lucid_tensor_info *out);
/* A 0-d "wrapped number" (a host-language scalar: weak in promotion). For
 * integer and bool dtypes ivalue is used, else fvalue. */
int lucid_scalar(int32_t dtype, double fvalue, int64_t ivalue, lucid_tensor_info *out);
/* A 0-d wrapped host integer (weak in promotion) whose value is
 * value * 2**exp. exp is 0 for an integer that fits int64; a larger one
 * passes its top 62 bits in value (the lowest bit set when any dropped bit
 * is) and the number of dropped bits in exp. The binary ops convert it to
 * their result dtype exactly: an integer dtype that cannot hold it fails with
 * LUCID_EOVERFLOW, a float dtype rounds it to nearest even (to +-Inf past
 * float16/bfloat16/float32; LUCID_EOVERFLOW past float64). Other functions
 * see only value, so pass one with exp > 0 to the binary ops alone. */
int lucid_scalar_int(int64_t value, int32_t exp, lucid_tensor_info *out);
/* Refreshes the info of a handle. */
int lucid_tensor_info_get(int64_t h, lucid_tensor_info *out);
/* A new handle to a tensor sharing h's memory outside any graph (as
 * lucid_detach), described with its data address (as lucid_tensor_info_get):
 * what a host keeps while it exposes the memory (a NumPy view), so the
 * memory stays whatever becomes of h. */
int lucid_tensor_view(int64_t h, lucid_tensor_info *out);
/* The number of in-place writes into h's memory through the library so far
 * (out= of any op, and lucid_tensor_bump_version): every tensor sharing
 * that memory (views, lucid_detach) shares the count. A node that saved a
 * tensor refuses to run once its count changed (LUCID_ERUNTIME). */
int lucid_tensor_version(int64_t h, int64_t *version);
/* Counts one write into h's memory made by the host itself, outside the
 * library (an assignment through a NumPy view of it), as out= writes are
 * counted: a node that saved a tensor sharing that memory then refuses to
 * run. */
int lucid_tensor_bump_version(int64_t h);
/* Releases a handle (tensor, node or backward run). */
int lucid_release(int64_t h);
/* Releases n handles in one call (all are attempted; the first error is
 * reported). */
int lucid_release_many(const int64_t *hs, int32_t n);

int lucid_set_requires_grad(int64_t h, int32_t flag);
/* retain_grad(): later backward() runs store the gradient reaching this
 * non-leaf in its .grad, as for leaves (a leaf is left as it is);
 * LUCID_ERUNTIME when it does not require grad. */
int lucid_retain_grad(int64_t h);
/* *flag = 1 when retain_grad() was called on the (non-leaf) tensor, else 0. */
int lucid_retains_grad(int64_t h, int32_t *flag);
/* The accumulated gradient (out->handle == 0 when there is none). */
int lucid_get_grad(int64_t h, lucid_tensor_info *out);
/* lucid_get_grad with a meta array (meta[0] == 0 when there is none). */
int lucid_get_grad_meta(int64_t h, int64_t *meta);
/* Replaces the gradient; g == 0 clears it. */
int lucid_set_grad(int64_t h, int64_t g);
int lucid_detach(int64_t h, lucid_tensor_info *out);
/* The grad_fn node of a tensor (*node == 0 for a leaf). The same node always
 * gets the same handle while one is live. */
int lucid_grad_fn(int64_t h, int64_t *node);
int lucid_node_name(int64_t node, char *buf, size_t n);
/* next_functions: node handles (0 = none) and output numbers, at most cap. */
int lucid_node_next(int64_t node, int64_t *nodes, int32_t *outputs, int32_t cap, int32_t *count);

/* The generic op call: runs the op whose "id" lucid_schemas gives on
 * n_inputs tensor handles (its "arity") with n_attrs attributes (its "attrs",
 * in order) under mode, and describes the result in meta (see
 * LUCID_META_LEN; meta[0] is its handle). The attributes by kind:
 *   "elementwise": none; cast takes the dtype code;
 *   "reduction":   keepdim (0 or 1), ndims, then ndims dims (ndims -1: all
 *                  dims, and no dims follow);
 *   "view":        the shape.
 * Ops of kind "selection" (parts of another op's gradient) are not callable
 * (LUCID_EVALUE). At most 4 inputs and LUCID_MAX_DIMS + 2 attributes. With
 * LUCID_MODE_INTERRUPTIBLE in mode, a long reduction returns LUCID_PENDING
 * and a job in meta[0]. */
int lucid_op(int32_t op_id, const int64_t *inputs, int32_t n_inputs, const int64_t *attrs, int32_t n_attrs,
             int32_t mode, int64_t *meta);
/* lucid_op for every op, with out= and several outputs: runs op_id on inputs
 * (a 0 handle is an absent optional input: clamp's missing bound) and fills
 * one meta block of LUCID_META_LEN values per output (min and max over a
 * dim have two: values, indices), so meta holds outputs * LUCID_META_LEN
 * values. outs, unless NULL, holds n_outs (the op's output count) entries:
 * where to write each output (out=, docs/semantics.md), see lucid_out. A
 * block whose output went into an out has handle 0 (the caller keeps its
 * own). out= rules: exactly the result's shape (LUCID_EVALUE) and dtype
 * (LUCID_ETYPE), writable, no zero strides, no memory shared with an input
 * except being that input (in place) and none with another out; a call that
 * would record a graph fails (LUCID_ERUNTIME). On error no out was written.
 * At most 4 outputs. LUCID_MODE_INTERRUPTIBLE works as for lucid_op (a
 * reduction's job; lucid_job_wait then fills every output's block). */
int lucid_op_n(int32_t op_id, const int64_t *inputs, int32_t n_inputs, const int64_t *attrs, int32_t n_attrs,
               const lucid_out *outs, int32_t n_outs, int32_t mode, int64_t *meta);
/* The entry of the framework bridges (PyTorch custom ops, XLA FFI
 * handlers): runs op_id with no graph and no autocast on memory lent for
 * this call only. Each input entry is a handle or read-only memory (dtype
 * -1 with handle 0: an absent input, such as clamp's missing bound); every
 * output is given (handle or memory) with exactly the result's shape and
 * dtype, and written in place. With winners != 0 the op's winners come
 * after its outputs (one more out entry): for minimum, maximum, fmin and
 * fmax a bool mask of the output's shape, true where the first operand
 * wins; for clamp an int8 code of the output's shape (0: x, 1: min, 2: max
 * wins), or, into a bool out, true where x wins; for amin, amax, nanmin, nanmax, min and max the int64 position of
 * each slice's winner among the slice's elements (row-major), in the
 * keepdim shape. With winners == 2 the inputs are those winners and a
 * cotangent g, the outputs the operands' gradients before un-broadcasting
 * (ops.WinnersVJP): for the binary selections ga and gb of g's shape (g
 * where that operand won, +0 elsewhere); for the reductions g (keepdim
 * shape) scattered to the winners, in the input's shape (the output's).
 * With winners == 3 the one output is the winners alone, without the op's
 * outputs (ops.WinnersOnly: a host that selects the values itself). With
 * winners == 4 (binary selections) the inputs are the bool mask and g, the
 * one attribute the part (0: a, 1: b) and the one output that operand's
 * gradient alone (ops.WinnersVJPPart). A clamp whose winners went into a
 * bool out (true where x wins) takes that mask as its winners here too.
 * docs/interop.md says how the bridges use them. */
int lucid_op_lent(int32_t op_id, int32_t winners, const lucid_out *inputs, int32_t n_inputs,
                  const int64_t *attrs, int32_t n_attrs, const lucid_out *outs, int32_t n_outs);
/* The id, schema version and arity of the op named by the n bytes at name
 * (not NUL-terminated). */
int lucid_op_lookup(const char *name, size_t n, int32_t *id, int32_t *version, int32_t *arity);
/* The XLA FFI handler of every op (XLA's stable C ABI, XLA_FFI_Handler): a
 * custom call's attributes name the op (op: string, version: int64 of its
 * schema), winners (int64: lucid_op_lent's form, 0, 1 or 3), attrs (int64 array) and present (int64
 * bitmask of the operand slots given). Returned as a function pointer for
 * jax.ffi.register_ffi_target (python/pylucid/jax.py). */
void *lucid_xla_ffi_handler(void);
/* Forward mode: runs op_id as lucid_op_n does (no out=) and pushes
 * tangents (one handle per input, 0: zero; each of its input's shape) through
 * it. meta receives 2 * outputs blocks: the outputs, then one tangent per
 * output (handle 0: a zero tangent, or an integer output). */
int lucid_op_jvp(int32_t op_id, const int64_t *inputs, const int64_t *tangents, int32_t n_inputs,
                 const int64_t *attrs, int32_t n_attrs, int32_t mode, int64_t *meta);
/* Waits up to ms milliseconds (ms <= 0: not at all) for a job. While it runs:
 * LUCID_PENDING. Once it has ended, the job is gone and this returns what the
 * call that started it would have: LUCID_OK with its result in meta, or its
 * error (message in lucid_errmsg on this thread). */
int lucid_job_wait(int64_t job, int32_t ms, int64_t *meta);
/* Stops a job and waits until its work has ended (within a fraction of a
 * millisecond of work, on every thread it used); frees it and whatever it
 * made. LUCID_EVALUE for a job that is unknown or has already ended. */
int lucid_job_cancel(int64_t job);

/* Backward: start a run from n roots (grads[i] == 0: implicit ones). With
 * ninputs >= 0 it is a grad() call over inputs; with ninputs < 0 gradients
 * accumulate into leaves. */
int lucid_backward_start(const int64_t *roots, const int64_t *grads, int32_t n, const int64_t *inputs,
                         int32_t ninputs, int32_t flags, int32_t mode, int64_t *run);
/* backward() in one call: starts a run that accumulates into leaves and runs
 * it to the end (*run == 0 then), or until a host-defined function must run:
 * then *run is the run's handle and lucid_backward_next hands that function
 * out first. */
int lucid_backward_run(const int64_t *roots, const int64_t *grads, int32_t n, int32_t flags, int32_t mode,
                       int64_t *run);
/* grad() in one call: starts a run over ninputs >= 0 inputs (as
 * lucid_backward_start) and runs it to the end: then *run == 0 and meta
 * holds one block of LUCID_META_LEN values per input describing its gradient
 * (a new handle, as lucid_op's result; handle 0 and dtype 0 for an unused
 * input). When a host-defined function must run, *run is the run's handle,
 * lucid_backward_next hands that function out first and lucid_backward_result
 * gives the gradients at the end; meta is untouched then. */
int lucid_backward_grad(const int64_t *roots, const int64_t *grads, int32_t n, const int64_t *inputs,
                        int32_t ninputs, int32_t flags, int32_t mode, int64_t *run, int64_t *meta);
/* Runs until done (*function == 0) or until a host-defined function must run:
 * then *function is its id, grads[0..*ngrads) its output gradients (0 = none)
 * and *release says to free its saved state afterwards. When cap is too small
 * it fails with LUCID_EVALUE, sets *ngrads to the size needed and keeps the
 * function pending for a retry. */
int lucid_backward_next(int64_t run, int64_t *function, int64_t *grads, int32_t cap, int32_t *ngrads,
                        int32_t *release);
/* Hands back one gradient per input of the pending function (0 = none). */
int lucid_backward_resume(int64_t run, const int64_t *grads, int32_t n);
/* grad(): the gradients for the run's inputs (0 = unused). */
int lucid_backward_result(int64_t run, int64_t *grads, int32_t n);

/* Records a host-defined function (autograd.Function) as the grad_fn of its
 * outputs; id identifies it to the host; name is its node name. */
int lucid_function_record(const char *name, int64_t id, const int64_t *inputs, int32_t ninputs,
                          const int64_t *outputs, int32_t noutputs);

/* *id: the id of the host-defined function whose output tensor h is (0: none);
 * *sole: 1 when h is the only way left to reach that call (no other handle of
 * its outputs, no graph edge, node handle or run), so that the host may free
 * the call's state with h's owner (a cycle through it). */
int lucid_function_owner(int64_t h, int64_t *id, int32_t *sole);
/* Pops up to cap released tokens (buffers) or function ids from a queue. */
int lucid_drain(int32_t queue, int64_t *items, int32_t cap, int32_t *count);
/* Counters: see LUCID_STAT_*. */
int lucid_stats(int64_t *out, int32_t n);
/* Runs a full garbage collection and waits for released memory to be freed. */
int lucid_collect(void);

int lucid_set_num_threads(int32_t n);
int lucid_get_num_threads(int32_t *n);
/* JSON array of op schemas, sorted by name: [{"name":..., "version":...,
 * "amp_policy":..., "deterministic":..., "id":..., "kind":..., "arity":...,
 * "outputs":..., "attrs":[...], "signature":..., "node":..., "rule":...,
 * "whole":..., "floating":..., "numpy":[...], "bridges":[...], "aliases":[...], "doc":...}];
 * "id" is the op's position in the array and what lucid_op takes. The
 * fields after "attrs" tell a host how to offer the op without naming it:
 * "signature" how it is called ("binary", "unary", "clamp", "reduction",
 * "arg", "minmax"; "" for an op hosts do not call), "node" its autograd
 * node's name, "rule" the min/max family's selection rule ("min", "max",
 * "fmin", "fmax"), "whole" the op a "minmax" one is over every dim,
 * "floating" whether it takes floating inputs only, "numpy" the NumPy
 * ufuncs and functions it is ("minimum.reduce": a ufunc's reduce),
 * "bridges" the framework bridges that offer it ("torch", "jax", "dask"),
 * "aliases" other names for it ("clip"), "doc" its documentation. */
int lucid_schemas(char *buf, size_t n, size_t *needed);
/* What this build is, as a JSON object (written, NUL-terminated and cut to
 * fit, into buf of n bytes; *needed gets the full size, NUL included, as
 * lucid_schemas): "go_version" (the toolchain: "go1.26.8"), "module",
 * "os", "arch", "kernels" ("simd (AVX2)", "simd compiled, portable in use
 * (no AVX2)" or "portable"), "simd" (the SIMD kernels compiled in),
 * "cpu_features" (those the kernels in use rely on) and "threads". */
int lucid_build_info(char *buf, size_t n, size_t *needed);
/* Exports tensor h for a DLPack consumer. *managed receives a new
 * DLManagedTensorVersioned* (versioned != 0; DLPack 1.0, flags
 * LUCID_DL_FLAG_READ_ONLY for read-only borrowed memory and
 * LUCID_DL_FLAG_IS_COPIED when copied != 0) or a legacy DLManagedTensor*
 * (versioned == 0; refused for read-only memory, which it cannot mark). The
 * managed tensor holds its own reference to the tensor's memory until the
 * consumer calls its deleter, which it must do exactly once; the deleter may
 * be called from any thread and needs no lock. */
int lucid_dlpack_export(int64_t h, int32_t versioned, int32_t copied, void **managed);

/* Test hook: from now on, every op and backward call waits on entry until
 * `want` calls have arrived, or for at most wait_ms (want <= 0: no waiting).
 * *met and *timed_out (either may be NULL) receive the counts of the hook
 * this call replaces: calls that met the others, and calls that gave up. */
int lucid_debug_gate(int32_t want, int32_t wait_ms, int64_t *met, int64_t *timed_out);
/* Test hook: panics inside Go; must come back as LUCID_EPANIC. */
int lucid_debug_panic(void);
/* Starts a Go CPU profile into path, or stops it when path is NULL. */
int lucid_debug_profile(const char *path);
#endif /* LUCID_NO_PROTOTYPES */
#endif /* LUCID_H */
