/*
 * pylucid._hot's shared declarations: one header for the rooms of the
 * extension, each a file of its own (docs/architecture.md):
 *   module.c    what init() registers, the module's setters and method table
 *   tensor.c    TensorBase (Tensor's C base type): fields, handle release in
 *               batches, the Function-record ownership its traverse reports,
 *               and the wrapping of a result described in a meta array
 *   call.c      the op calls: the binary fast path, reductions, the generic
 *               call of any op (outputs wrapped before anything can raise)
 *   op.c        ops.Op, the vectorcall type of the public ops
 *   ndarray.c   NumPy arrays lent to the library, and the queue of what it
 *               hands back (drain_pending)
 *   autograd.c  backward and autograd.grad's common forms, Run
 *   dlpack.c    DLPack capsules
 *   lent.c      ops on other frameworks' tensors' memory (pylucid.torch)
 * Every symbol is hidden (the build compiles with -fvisibility=hidden):
 * only PyInit__hot is exported.
 *
 * Limited API (Py_LIMITED_API is set by the build to 3.10), like the cffi
 * extension: one wheel for CPython 3.10 and later.
 */
#ifndef PYLUCID_HOT_H
#define PYLUCID_HOT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "lucid.h"

/* ---- module.c: the Python side, registered by init() ---- */
extern PyTypeObject *tensor_type;  /* pylucid.Tensor (a subclass of TensorBase) */
extern allocfunc tensor_alloc;
extern PyObject *by_code;          /* tuple: dtype code -> pylucid.dtype */
extern PyObject *state;            /* the per-thread call state (its .mode) */
extern PyObject *mode_name;
extern PyObject *drain;            /* drain(): forget what the library handed back */
extern PyObject *fallback_binary;  /* binary(op, a, b) in Python */
extern PyObject *fallback_reduce;  /* reduce(op, a, None, keepdim) in Python */
extern PyObject *pinned;           /* dict: function id -> record kept for the library (set_pinned) */
extern PyObject *out_desc_address; /* out_desc_address(ndarray): address of a cached lucid_out */
extern PyTypeObject *ndarray_type; /* numpy.ndarray */
extern int forward_levels;         /* forward-mode levels open in any thread (set_forward): then the
                                      Python path runs every op, to push tangents (autograd.jvp) */
extern volatile int forked;
/* Raises the RuntimeError of a call in a forked child (_lib.FORK_MESSAGE); NULL. */
PyObject *fork_error(void);

/* What each lucid_op id is, from the exported schemas (init): binary takes
 * only OP_BINARY ids, reduce_all only OP_REDUCTION ones. */
#define MAX_OPS 1024
#define OP_BINARY 'b'
#define OP_REDUCTION 'r'
extern char op_kinds[MAX_OPS];
extern int32_t n_ops;

void set_ref(PyObject **slot, PyObject *v);

/* ---- tensor.c ---- */
typedef struct {
    PyObject_HEAD
    long long h;
    PyObject *dtype;
    PyObject *shape;
    char rg;
    PyObject *fn; /* the autograd.Function record whose output this is, or NULL */
    unsigned long long fn_epoch; /* the collection fn_sole was found in */
    int fn_sole;
} TensorBase;

extern PyType_Spec tensor_spec;
extern unsigned long long gc_epoch;
#define DEAD_CAP 64
extern int64_t dead[DEAD_CAP];
extern int ndead;
void flush_dead(void);
int is_tensor(PyObject *o);
PyObject *from_meta_like(const int64_t *m, PyObject *like);
PyObject *from_meta(const int64_t *m);
/* info as a meta array (lucid.h, LUCID_META_LEN), and the Tensor for it. */
void info_meta(const lucid_tensor_info *info, int64_t *meta);
PyObject *from_info(const lucid_tensor_info *info, PyObject *like);
PyObject *tensor_from_handle(int64_t h, PyObject *like);
void release_handle(TensorBase *t);
PyObject *hot_detach(PyObject *mod, PyObject *t);
PyObject *hot_view(PyObject *mod, PyObject *t);
PyObject *hot_tensor_new(PyObject *mod, PyObject *args);
PyObject *hot_scalar(PyObject *mod, PyObject *x);
PyObject *hot_scalar_int(PyObject *mod, PyObject *args);
PyObject *hot_borrow(PyObject *mod, PyObject *args);
PyObject *hot_adopt(PyObject *mod, PyObject *args);
PyObject *hot_flush(PyObject *mod, PyObject *unused);
PyObject *hot_pending(PyObject *mod, PyObject *unused);
PyObject *hot_gc_started(PyObject *mod, PyObject *unused);
PyObject *hot_release(PyObject *mod, PyObject *t);

/* ---- lent.c ---- */
PyObject *hot_lent(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *hot_set_call_error_hook(PyObject *mod, PyObject *hook);
PyObject *hot_lent_binary(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);

/* ---- call.c ---- */
/* An op whose result has at most this many elements keeps the GIL through
 * its call, as NumPy's ufuncs do below 500: its whole native call is shorter
 * than handing the GIL to another thread and taking it back, which cost
 * every small op 5-10% (docs/interop.md, threads). Go never calls into
 * Python, so a call that keeps the GIL cannot wait on another Python
 * thread. */
#define GIL_KEEP_ELEMS 4096

/* Runs the native call (a statement) with the GIL kept when keep is true,
 * else released around it. */
#define NATIVE_CALL(keep, ...)        \
    do {                              \
        if (keep) {                   \
            __VA_ARGS__;              \
        } else {                      \
            Py_BEGIN_ALLOW_THREADS    \
            __VA_ARGS__;              \
            Py_END_ALLOW_THREADS      \
        }                             \
    } while (0)

int current_mode(int32_t *mode);
/* The calling thread's last error message from the library (lucid_errmsg), a new str. */
PyObject *last_error_message(void);
PyObject *status_error(int rc);
int shape_dims(PyObject *shape, int64_t *dims);
int small_dims(const int64_t *da, int na, const int64_t *db, int nb);
PyObject *binary_call(int32_t code, const int64_t *in, int keep, PyObject *like);
int small_temp(int rc, const lucid_tensor_info *info, int64_t *h, int64_t *temp);
PyObject *hot_set_mode(PyObject *mod, PyObject *v);
PyObject *hot_binary(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *hot_reduce_all(PyObject *mod, PyObject *args);
PyObject *hot_call(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *hot_call_jvp(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
/* The ints of a tuple or list (at most cap) into out: their count, or -1
 * with an exception set (what names the argument). */
int ints_arg(PyObject *seq, int64_t *out, int cap, const char *what);
/* type(o).__name__, a new reference (NULL with an exception set). */
PyObject *type_name(PyObject *o);

/* ---- op.c ---- */
extern PyType_Spec op_spec;
extern PyTypeObject *op_type;
extern PyObject *binary_func; /* this module's binary */

/* ---- ndarray.c ---- */
/* The public PyArrayObject_fields layout (unchanged from NumPy 1.7 to 2.x),
 * checked once against a probe array (set_ndarray). */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} np_fields;

#define NP_WRITEABLE 0x0400
#define MAX_NP_DTYPES 16
extern int np_codes[MAX_NP_DTYPES], np_sizes[MAX_NP_DTYPES];
extern PyObject *borrowed; /* _runtime._borrowed: token -> owner of what Python lent, until drain pops it */
np_fields *native_ndarray(PyObject *arr, int *k);
int lend_ndarray(PyObject *arr, int64_t *meta);
int ndarray_out(PyObject *o, lucid_out *d, int64_t *shape, int64_t *strides);
int copy_small_ndarray(PyObject *arr, int64_t *h, int64_t *temp);
int lent_temp(const int64_t *meta, int64_t *temp);
void release_temps(const int64_t *temps, Py_ssize_t n);
int drain_pending(void);
PyObject *hot_return_lent(PyObject *mod, PyObject *tokens);
PyObject *hot_lent_owners(PyObject *mod, PyObject *unused);
PyObject *hot_from_ndarray(PyObject *mod, PyObject *arr);
PyObject *hot_set_ndarray(PyObject *mod, PyObject *args);

/* ---- autograd.c ---- */
extern PyType_Spec run_spec;
extern PyTypeObject *run_type;
PyObject *hot_backward_grad(PyObject *mod, PyObject *args);
PyObject *hot_grad_run(PyObject *mod, PyObject *args);
PyObject *hot_grad(PyObject *mod, PyObject *t);
PyObject *hot_backward_run(PyObject *mod, PyObject *t);
PyObject *hot_set_grad(PyObject *mod, PyObject *args);
extern PyType_Spec node_spec;
extern PyTypeObject *node_type;
int set_node_type(PyObject *tp);
PyObject *hot_grad_fn(PyObject *mod, PyObject *t);
PyObject *hot_node_next(PyObject *mod, PyObject *node);
PyObject *hot_backward_next(PyObject *mod, PyObject *run);
PyObject *hot_backward_result(PyObject *mod, PyObject *args);

/* ---- dlpack.c ---- */
PyObject *hot_dlpack_capsule(PyObject *mod, PyObject *args);
PyObject *hot_dlpack_export(PyObject *mod, PyObject *args);
PyObject *hot_dlpack_take(PyObject *mod, PyObject *capsule);
PyObject *hot_dlpack_borrow(PyObject *mod, PyObject *args);

#endif
