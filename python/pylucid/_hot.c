/*
 * pylucid._hot: the per-call hot path in C.
 *
 * A Python-level op call used to spend more time in the interpreter than in
 * the library: building the result Tensor, reading its metadata through cffi
 * and running Tensor.__del__ cost about 1 us of a 2 us call. This module
 * holds:
 *   - TensorBase, the base class of pylucid.Tensor: its four fields (_h,
 *     _dtype, _shape, _rg) are C members, and its deallocator releases the
 *     handle (small graph-free tensors in batches of 64, one call to
 *     lucid_release_many), with no Python frame;
 *   - binary, reduce_all and grad: the common op calls from argument check to
 *     result object, calling lucid_op (and lucid_get_grad_meta) with the GIL
 *     released (as cffi does), so threads run ops in parallel, except around
 *     an op with a small result (GIL_KEEP_ELEMS);
 * Anything unusual (operands that are neither Tensors nor plain NumPy
 * arrays, a forked process) goes to
 * the Python fallback registered with init(), which raises the same errors
 * as before. Errors from the library are raised by the registered
 * raise_status, which fetches the message on this same thread.
 *
 * Limited API (Py_LIMITED_API is set by the build to 3.10), like the cffi
 * extension: one wheel for CPython 3.10 and later.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "lucid.h"

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

/* Bumped as each collection starts (gc_started): a tensor gives the same
 * answer to every traversal of one collection, even if another thread
 * changes the graph meanwhile. */
static unsigned long long gc_epoch = 1;

/* Registered by init(). */
static PyTypeObject *tensor_type;  /* pylucid.Tensor (a subclass of TensorBase) */
static allocfunc tensor_alloc;
static PyObject *by_code;          /* tuple: dtype code -> pylucid.dtype */
static PyObject *state;            /* the per-thread call state (its .mode) */
static PyObject *mode_name;
static PyObject *raise_status;     /* raise_status(rc): raises the library's error */
static PyObject *drain;            /* drain(): forget what the library handed back */
static PyObject *fallback_binary;  /* binary(op, a, b) in Python */
static PyObject *fallback_reduce;  /* reduce(op, a, None, keepdim) in Python */
static PyObject *pinned;           /* dict: function id -> record kept for the library (set_pinned) */
static PyObject *out_desc_address; /* out_desc_address(ndarray): address of a cached lucid_out */
static PyTypeObject *ndarray_type;  /* numpy.ndarray */
static void set_ref(PyObject **slot, PyObject *v);
static int drain_pending(void);
static int forward_levels;         /* forward-mode levels open in any thread (set_forward): then the
                                      Python path runs every op, to push tangents (autograd.jvp) */

/* What each lucid_op id is, from the exported schemas (init): binary takes
 * only OP_BINARY ids, reduce_all only OP_REDUCTION ones. */
#define MAX_OPS 1024
#define OP_BINARY 'b'
#define OP_REDUCTION 'r'
static char op_kinds[MAX_OPS];
static int32_t n_ops;

static volatile int forked;

static void mark_forked(void) { forked = 1; }

/* Handles of dropped small, graph-free tensors, released 64 at a time. */
#define DEAD_CAP 64
static int64_t dead[DEAD_CAP];
static int ndead;

static void flush_dead(void) {
    if (ndead > 0 && !forked) {
        int32_t n = ndead;
        ndead = 0;
        lucid_release_many(dead, n);
    }
    ndead = 0;
}

/* Whether a tensor may wait in the batch: no graph, at most 4096 elements
 * in at most one dim (anything that could hold much memory goes at once). */
static int batchable(TensorBase *t) {
    if (t->rg || t->shape == NULL || !PyTuple_Check(t->shape)) {
        return 0;
    }
    Py_ssize_t nd = PyTuple_Size(t->shape);
    if (nd == 0) {
        return 1;
    }
    if (nd != 1) {
        return 0;
    }
    /* Never touches the error indicator: a tensor may be dropped while an
     * exception is being raised (its own dims are exact ints, so nothing here
     * can fail). */
    PyObject *d = PyTuple_GetItem(t->shape, 0);
    if (d == NULL || !PyLong_Check(d)) {
        return 0;
    }
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(d, &overflow);
    return overflow == 0 && n <= 4096;
}

/* A Function's outputs own its record (t->fn), so that Python's collector
 * sees a cycle through it (docs/autograd.md): t's traverse visits the record
 * while t is the only way left to reach the function's graph node. When t
 * lets go of it and is not the only way, the record is pinned in the dict
 * until the library reports the node gone (drain). */
static int sole_owner(TensorBase *t, int64_t *id) {
    int32_t sole = 0;
    *id = 0;
    if (t->h == 0 || forked || lucid_function_owner(t->h, id, &sole) != 0) {
        return 0;
    }
    return sole;
}

static void drop_fn(TensorBase *t) {
    PyObject *fn = t->fn;
    if (fn == NULL) {
        return;
    }
    t->fn = NULL;
    int64_t id;
    if (!sole_owner(t, &id) && id != 0 && pinned != NULL) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb); /* may run in a deallocator while an exception is set */
        PyObject *key = PyLong_FromLongLong(id);
        if (key == NULL || PyDict_SetItem(pinned, key, fn) < 0) {
            /* No memory to pin it: keep the record forever rather than
             * free what the library may still need. */
            Py_INCREF(fn);
            PyErr_Clear();
        }
        Py_XDECREF(key);
        PyErr_Restore(type, value, tb);
    }
    Py_DECREF(fn);
}

static int tensor_traverse(PyObject *self, visitproc visit, void *arg) {
    TensorBase *t = (TensorBase *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(t->dtype);
    Py_VISIT(t->shape);
    if (t->fn != NULL) {
        if (t->fn_epoch != gc_epoch) {
            int64_t id;
            t->fn_sole = sole_owner(t, &id);
            t->fn_epoch = gc_epoch;
        }
        if (t->fn_sole) {
            Py_VISIT(t->fn);
        }
    }
    return 0;
}

static int tensor_clear(PyObject *self) {
    drop_fn((TensorBase *)self);
    return 0;
}

/* Releases t's handle as a dropped tensor's: small graph-free ones in the batch. */
static void release_handle(TensorBase *t) {
    drop_fn(t);
    if (t->h != 0 && !forked) {
        if (batchable(t)) {
            dead[ndead++] = t->h;
            if (ndead == DEAD_CAP) {
                flush_dead();
            }
        } else {
            lucid_release(t->h);
        }
    }
    t->h = 0;
}

static void tensor_dealloc(PyObject *self) {
    TensorBase *t = (TensorBase *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    release_handle(t);
    Py_CLEAR(t->dtype);
    Py_CLEAR(t->shape);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp); /* instances of heap types own a reference to their type */
}

static PyMemberDef tensor_members[] = {
    {"_h", T_LONGLONG, offsetof(TensorBase, h), 0, "the library handle (0: none)"},
    {"_dtype", T_OBJECT_EX, offsetof(TensorBase, dtype), 0, "the pylucid.dtype"},
    {"_shape", T_OBJECT_EX, offsetof(TensorBase, shape), 0, "the shape, a tuple"},
    {"_rg", T_BOOL, offsetof(TensorBase, rg), 0, "requires_grad"},
    {"_fn", T_OBJECT, offsetof(TensorBase, fn), 0, "the autograd.Function record this tensor is an output of"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot tensor_slots[] = {
    {Py_tp_dealloc, (void *)tensor_dealloc},
    {Py_tp_traverse, (void *)tensor_traverse},
    {Py_tp_clear, (void *)tensor_clear},
    {Py_tp_members, tensor_members},
    {Py_tp_doc, (void *)"The C part of pylucid.Tensor: its fields and the release of its handle."},
    {0, NULL},
};

static PyType_Spec tensor_spec = {
    "pylucid._hot.TensorBase", sizeof(TensorBase), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    tensor_slots,
};

/* Run: owns a backward run handle from the moment the library returns it, so
 * that nothing (not even a KeyboardInterrupt between two bytecodes) can drop
 * it without releasing it. close() releases it early; the handle is h. */
typedef struct {
    PyObject_HEAD
    int64_t h;
} RunObject;

static PyTypeObject *run_type;

static void run_close_handle(RunObject *r) {
    if (r->h != 0 && !forked) {
        lucid_release(r->h);
    }
    r->h = 0;
}

static PyObject *run_close(PyObject *self, PyObject *unused) {
    (void)unused;
    run_close_handle((RunObject *)self);
    Py_RETURN_NONE;
}

static void run_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    run_close_handle((RunObject *)self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyMemberDef run_members[] = {
    {"h", T_LONGLONG, offsetof(RunObject, h), READONLY, "the run handle (0 once closed)"},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef run_methods[] = {
    {"close", run_close, METH_NOARGS, "Releases the run (idempotent)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot run_slots[] = {
    {Py_tp_dealloc, (void *)run_dealloc},
    {Py_tp_members, run_members},
    {Py_tp_methods, run_methods},
    {Py_tp_doc, (void *)"A backward run stopped at a Python autograd.Function; released when closed or dropped."},
    {0, NULL},
};

static PyType_Spec run_spec = {
    "pylucid._hot.Run", sizeof(RunObject), 0, Py_TPFLAGS_DEFAULT, run_slots,
};

/* A new Run owning handle h; on failure h is released. */
static PyObject *new_run(int64_t h) {
    allocfunc alloc = (allocfunc)PyType_GetSlot(run_type, Py_tp_alloc);
    RunObject *r = (RunObject *)alloc(run_type, 0);
    if (r == NULL) {
        lucid_release(h);
        return NULL;
    }
    r->h = h;
    return (PyObject *)r;
}

/* A new pylucid.Tensor for the result a *_meta call described; it owns the
 * handle from here on (released if anything fails). */
/* like's shape tuple when it holds the dims in m (an op's result most often
 * has an input's shape: tuples are immutable, so it is shared), else NULL. */
static PyObject *same_shape(const int64_t *m, int nd, PyObject *like) {
    if (like == NULL) {
        return NULL;
    }
    PyObject *sh = ((TensorBase *)like)->shape;
    if (sh == NULL || !PyTuple_Check(sh) || PyTuple_Size(sh) != nd) {
        return NULL;
    }
    for (int i = 0; i < nd; i++) {
        PyObject *d = PyTuple_GetItem(sh, i);
        int overflow = 0;
        if (d == NULL || !PyLong_Check(d) || PyLong_AsLongLongAndOverflow(d, &overflow) != m[2 + i] || overflow) {
            PyErr_Clear();
            return NULL;
        }
    }
    Py_INCREF(sh);
    return sh;
}

/* from_meta, sharing the shape tuple of like (a Tensor, or NULL) where it is
 * the same. */
static PyObject *from_meta_like(const int64_t *m, PyObject *like) {
    int64_t packed = m[1];
    int code = (int)(packed & 0xFF), nd = (int)((packed >> 8) & 0xFF);
    PyObject *dt = PyTuple_GetItem(by_code, code);
    PyObject *shape = dt ? same_shape(m, nd, like) : NULL;
    TensorBase *t = NULL;
    if (shape == NULL && dt != NULL) {
        shape = PyTuple_New(nd);
        if (shape == NULL) {
            goto fail;
        }
        for (int i = 0; i < nd; i++) {
            PyObject *d = PyLong_FromLongLong(m[2 + i]);
            if (d == NULL || PyTuple_SetItem(shape, i, d) < 0) {
                goto fail;
            }
        }
    }
    if (shape == NULL) {
        goto fail;
    }
    t = (TensorBase *)tensor_alloc(tensor_type, 0);
    if (t == NULL) {
        goto fail;
    }
    Py_INCREF(dt);
    t->h = m[0];
    t->dtype = dt;
    t->shape = shape;
    t->rg = (packed & LUCID_META_REQUIRES_GRAD) != 0;
    if ((packed & LUCID_META_PENDING) && drain_pending() < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return (PyObject *)t;
fail:
    Py_XDECREF(shape);
    lucid_release(m[0]);
    return NULL;
}

static PyObject *from_meta(const int64_t *m) { return from_meta_like(m, NULL); }

/* The calling thread's mode, as its state.mode last set it (set_mode,
 * called by _state's setter); tl_mode_known is 0 until the thread's state
 * exists (reading state.mode creates it, and sets these). */
static _Thread_local int32_t tl_mode;
static _Thread_local int tl_mode_known;

static int current_mode(int32_t *mode) {
    if (tl_mode_known) {
        *mode = tl_mode;
        return 0;
    }
    PyObject *m = PyObject_GetAttr(state, mode_name);
    if (m == NULL) {
        return -1;
    }
    long v = PyLong_AsLong(m);
    Py_DECREF(m);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    *mode = (int32_t)v;
    return 0;
}

static PyObject *status_error(int rc) {
    PyObject *r = PyObject_CallFunction(raise_status, "i", rc);
    Py_XDECREF(r); /* raise_status always raises */
    return NULL;
}

static int is_tensor(PyObject *o) { return tensor_type != NULL && Py_TYPE(o) == tensor_type; }

/* An op whose result has at most this many elements keeps the GIL through
 * its call, as NumPy's ufuncs do below 500: its whole native call is shorter
 * than handing the GIL to another thread and taking it back, which cost
 * every small op 5-10% (docs/interop.md, threads). Go never calls into
 * Python, so a call that keeps the GIL cannot wait on another Python
 * thread. */
#define GIL_KEEP_ELEMS 4096

/* The dims of a shape tuple into dims (room for LUCID_MAX_DIMS): their
 * count, or -1 for anything but a tuple of at most LUCID_MAX_DIMS ints. */
static int shape_dims(PyObject *shape, int64_t *dims) {
    if (shape == NULL || !PyTuple_Check(shape) || PyTuple_Size(shape) > LUCID_MAX_DIMS) {
        return -1;
    }
    int nd = (int)PyTuple_Size(shape);
    for (int i = 0; i < nd; i++) {
        dims[i] = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
        if (dims[i] < 0) {
            PyErr_Clear(); /* not a dim (cannot happen for a Tensor's shape) */
            return -1;
        }
    }
    return nd;
}

/* Whether the broadcast of shapes da (na dims) and db (nb dims; 0 for a
 * lone shape) has at most GIL_KEEP_ELEMS elements: the product over dims of
 * the larger extent, an upper bound of the result's size. A negative count
 * says no. */
static int small_dims(const int64_t *da, int na, const int64_t *db, int nb) {
    if (na < 0 || nb < 0) {
        return 0;
    }
    long long n = 1;
    for (int i = 1; i <= na || i <= nb; i++) {
        long long x = i <= na ? da[na - i] : 1, y = i <= nb ? db[nb - i] : 1;
        if (x > GIL_KEEP_ELEMS || y > GIL_KEEP_ELEMS) {
            return 0; /* before the product: a broadcast view's dims can be huge */
        }
        n *= x > y ? x : y;
        if (n > GIL_KEEP_ELEMS) {
            return 0;
        }
    }
    return 1;
}

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

/* The op code as an int32 (-1 with ValueError when it cannot be one). */
static int op_code(PyObject *op, int32_t *code) {
    long v = PyLong_AsLong(op);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "unknown op code %ld", v);
        return -1;
    }
    *code = (int32_t)v;
    return 0;
}

/* code as an op id of the given kind (-1 with ValueError when it is not one). */
static int check_kind(int32_t code, char kind, const char *what) {
    if (code < 0 || code >= n_ops || op_kinds[code] != kind) {
        PyErr_Format(PyExc_ValueError, "unknown %s %d", what, (int)code);
        return -1;
    }
    return 0;
}

/* The Python path of binary for a fast call's arguments. */
static PyObject *binary_fallback(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *t = PyTuple_New(nargs), *kw = NULL, *r = NULL;
    if (t == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SetItem(t, i, args[i]);
    }
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    if (nkw > 0) {
        kw = PyDict_New();
        if (kw == NULL) {
            goto done;
        }
        for (Py_ssize_t j = 0; j < nkw; j++) {
            if (PyDict_SetItem(kw, PyTuple_GetItem(kwnames, j), args[nargs + j]) < 0) {
                goto done;
            }
        }
    }
    r = PyObject_Call(fallback_binary, t, kw);
done:
    Py_DECREF(t);
    Py_XDECREF(kw);
    return r;
}

static int ndarray_out(PyObject *o, lucid_out *d, int64_t *shape, int64_t *strides);

/* binary(op, a, b, out=out) on the handles in (hot_binary's operands,
 * keep: a small result): lucid_op_n writing into out, a
 * Tensor or a NumPy array (an exact writable ndarray of a registered native
 * dtype is described here, on the stack: ndarray_out; any other array
 * through the Python side's cached descriptor, out_desc_address, which
 * raises its errors); anything else takes the Python path. Returns out
 * itself. */
static PyObject *binary_out(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject *out,
                            const int64_t *in, int keep) {
    PyObject *op = args[0];
    lucid_out desc;
    int64_t shape[LUCID_MAX_DIMS + 1], strides[LUCID_MAX_DIMS + 1];
    const lucid_out *d = &desc;
    if (is_tensor(out)) {
        memset(&desc, 0, sizeof desc);
        desc.handle = ((TensorBase *)out)->h;
    } else if (ndarray_out(out, &desc, shape, strides)) {
        /* desc describes out */
    } else if (out_desc_address != NULL && PyObject_TypeCheck(out, ndarray_type)) {
        PyObject *addr = PyObject_CallFunctionObjArgs(out_desc_address, out, NULL);
        if (addr == NULL) {
            return NULL;
        }
        d = (const lucid_out *)PyLong_AsVoidPtr(addr);
        Py_DECREF(addr);
        if (d == NULL && PyErr_Occurred()) {
            return NULL;
        }
    } else {
        return binary_fallback(args, nargs, kwnames);
    }
    int32_t code, mode;
    if (op_code(op, &code) < 0 || check_kind(code, OP_BINARY, "binary op") < 0 || current_mode(&mode) < 0) {
        return NULL;
    }
    int64_t meta[LUCID_META_LEN];
    int rc;
    NATIVE_CALL(keep, rc = lucid_op_n(code, in, 2, NULL, 0, d, 1, mode, meta));
    if (rc) {
        return status_error(rc);
    }
    Py_INCREF(out);
    return out;
}

/* lucid_op(code, in[0], in[1]) (code: a binary op's id; keep: a small
 * result), the result a new Tensor sharing like's shape tuple where it can
 * (like: a Tensor operand, or NULL). */
static PyObject *binary_call(int32_t code, const int64_t *in, int keep, PyObject *like) {
    int32_t mode;
    if (current_mode(&mode) < 0) {
        return NULL;
    }
    int64_t meta[LUCID_META_LEN];
    int rc;
    NATIVE_CALL(keep, rc = lucid_op(code, in, 2, NULL, 0, mode, meta));
    if (rc) {
        return status_error(rc);
    }
    return from_meta_like(meta, like);
}

static int lend_ndarray(PyObject *arr, int64_t *meta);
static void release_temps(const int64_t *temps, Py_ssize_t n);
static int lent_temp(const int64_t *meta, int64_t *temp);

/* The end of making a small temporary tensor in C (a number's scalar, a
 * copied or number gradient) by a call that returned rc and filled info:
 * rc's error raised, else *h the new handle, *temp its release in the batch
 * of dropped small tensors, and the buffer queue drained when the library
 * says items wait. Returns 1, or -1 with an exception set (nothing left
 * made). */
static int small_temp(int rc, const lucid_tensor_info *info, int64_t *h, int64_t *temp) {
    if (rc) {
        status_error(rc);
        return -1;
    }
    *h = info->handle;
    *temp = -info->handle;
    if (info->pending && drain_pending() < 0) {
        lucid_release(info->handle);
        *temp = 0;
        return -1;
    }
    return 1;
}

/* A Python float, int or bool (exact types, not NumPy scalars). */
static int is_number(PyObject *o) { return PyFloat_CheckExact(o) || PyLong_CheckExact(o) || PyBool_Check(o); }

/* The weak 0-d tensor of a Python number operand, as tensor._scalar makes
 * it on the Python path (docs/dtypes.md): *h its handle, *temp its release
 * (in the batch of dropped small tensors). Returns 1; 0 for the Python path
 * (an int past int64, which tensor._scalar encodes exactly); -1 with an
 * exception set. */
static int number_operand(PyObject *x, int64_t *h, int64_t *temp) {
    lucid_tensor_info info;
    int rc;
    if (PyFloat_CheckExact(x)) {
        double v = PyFloat_AsDouble(x);
        if (v == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        rc = lucid_scalar(LUCID_FLOAT64, v, 0, &info);
    } else if (PyBool_Check(x)) {
        rc = lucid_scalar(LUCID_BOOL, 0.0, x == Py_True, &info);
    } else {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow) {
            return 0;
        }
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        rc = lucid_scalar_int(v, 0, &info);
    }
    return small_temp(rc, &info, h, temp);
}

/* The handles of a binary op's operands: a Tensor's own (temps[i] 0), an
 * exact ndarray lent for the call, as from_numpy would wrap it, or a Python
 * number's weak scalar (number_operand) beside one of those (temps[i]: its
 * handle, for release_temps). *keep: the result is small (small_dims).
 * Returns 1, 0 for the Python path (other operands; nothing lent), -1 with
 * an exception set (nothing lent). */
static int binary_operands(PyObject *a, PyObject *b, int64_t *in, int64_t *temps, int *keep) {
    PyObject *arg[2] = {a, b};
    int64_t dims[2][LUCID_MAX_DIMS];
    int nd[2], numbers = 0;
    temps[0] = temps[1] = 0;
    for (int i = 0; i < 2; i++) { /* nothing lent for a call that goes to Python anyway */
        if (is_number(arg[i])) {
            numbers++;
        } else if (!is_tensor(arg[i]) && (ndarray_type == NULL || Py_TYPE(arg[i]) != ndarray_type)) {
            return 0;
        }
    }
    if (numbers == 2) { /* two numbers: the Python path's own rules for the result */
        return 0;
    }
    for (int i = 0; i < 2; i++) {
        if (is_tensor(arg[i])) {
            in[i] = ((TensorBase *)arg[i])->h;
            nd[i] = i == 1 && arg[1] == arg[0] ? 0 : shape_dims(((TensorBase *)arg[i])->shape, dims[i]);
            continue;
        }
        if (is_number(arg[i])) {
            int r = number_operand(arg[i], &in[i], &temps[i]);
            if (r != 1) {
                release_temps(temps, i);
                return r;
            }
            nd[i] = 0;
            continue;
        }
        int64_t meta[LUCID_META_LEN];
        int r = lend_ndarray(arg[i], meta);
        if (r == 1 && lent_temp(meta, &temps[i]) < 0) {
            r = -1;
        }
        if (r != 1) {
            release_temps(temps, i);
            return r;
        }
        in[i] = meta[0];
        nd[i] = (int)((meta[1] >> 8) & 0xFF);
        for (int k = 0; k < nd[i]; k++) {
            dims[i][k] = meta[2 + k];
        }
    }
    *keep = small_dims(dims[0], nd[0], dims[1], nd[1]);
    return 1;
}

/* binary(op, a, b): lucid_op on two operands, each a Tensor or a plain
 * NumPy array lent for the call (binary_operands; op: a binary op's id). A
 * fast call (METH_FASTCALL; an Op passes its arguments as they came, see Op
 * below). Keyword arguments other than out=, other argument counts and
 * other operands take the Python path, which raises the usual errors. */
static PyObject *hot_binary(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    (void)mod;
    PyObject *out = NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    if (nkw > 0) {
        if (nkw == 1 && nargs == 3) {
            PyObject *name = PyTuple_GetItem(kwnames, 0);
            int is_out = PyUnicode_Check(name) ? PyUnicode_CompareWithASCIIString(name, "out") == 0 : 0;
            out = is_out ? args[3] : NULL;
        }
        if (out == NULL || out == Py_None) {
            return binary_fallback(args, nargs, kwnames);
        }
    }
    if (nargs != 3) {
        return binary_fallback(args, nargs, kwnames);
    }
    PyObject *op = args[0], *a = args[1], *b = args[2];
    int64_t in[2], temps[2];
    int keep = 0, r = forked || forward_levels ? 0 : binary_operands(a, b, in, temps, &keep);
    if (r <= 0) {
        return r < 0 ? NULL : binary_fallback(args, nargs, kwnames);
    }
    PyObject *res = NULL;
    int32_t code;
    if (out != NULL) {
        res = binary_out(args, nargs, kwnames, out, in, keep);
    } else if (op_code(op, &code) == 0 && check_kind(code, OP_BINARY, "binary op") == 0) {
        res = binary_call(code, in, keep, is_tensor(a) ? a : is_tensor(b) ? b : NULL);
    }
    release_temps(temps, 2);
    return res;
}

/* ---- Op: the type of pylucid's public ops (ops.Op) ----
 * An op is called far more often than anything else: it is a callable
 * object with the vectorcall protocol, holding the implementation (func),
 * the arguments bound before the caller's (args: the op id) and its name and
 * docstring. Called with two Tensors and nothing else, an op whose func is
 * binary (a binary op) goes straight to lucid_op with the id it was made
 * with; any other call is func(*args, *call_args, **call_kwargs), binary's
 * without a Python frame or an argument tuple. A Python subclass of a C type
 * would not keep the vectorcall slot on CPython 3.11, so ops.Op is this
 * type itself (ops.py keeps a pure-Python one where _hot is missing).
 *
 * Py_TPFLAGS_HAVE_VECTORCALL and the __vectorcalloffset__ member are
 * honoured by PyType_FromSpec since CPython 3.9 and part of the limited API
 * from 3.12; PyObject_VectorcallDict is exported since 3.9 (stable ABI from
 * 3.12): this file targets 3.10's limited API, so they are declared here. */
#ifndef Py_TPFLAGS_HAVE_VECTORCALL
#define Py_TPFLAGS_HAVE_VECTORCALL (1UL << 11)
#endif
#ifndef PY_VECTORCALL_ARGUMENTS_OFFSET
#define PY_VECTORCALL_ARGUMENTS_OFFSET ((size_t)1 << (8 * sizeof(size_t) - 1))
#endif
#if defined(Py_LIMITED_API) && Py_LIMITED_API + 0 < 0x030C0000
PyAPI_FUNC(PyObject *) PyObject_VectorcallDict(PyObject *callable, PyObject *const *args, size_t nargsf,
                                               PyObject *kwargs);
#endif

typedef PyObject *(*op_vectorcallfunc)(PyObject *, PyObject *const *, size_t, PyObject *);

typedef struct {
    PyObject_HEAD
    op_vectorcallfunc vectorcall;
    PyObject *func; /* the implementation */
    PyObject *args; /* a tuple: the arguments bound before the caller's (the op id) */
    PyObject *name; /* the op's name (its schema's) */
    PyObject *doc;  /* the docstring */
    int32_t code;   /* with func binary and args (id,): the id; else -1 */
} OpObject;

static PyTypeObject *op_type;
static PyObject *binary_func;   /* this module's binary */

#define OP_STACK 8

/* func(*args, *call_args, **kw): binary's in C; kwnames' values follow the
 * positional ones in call_args (vectorcall). */
static PyObject *op_call_func(OpObject *o, PyObject *const *call, Py_ssize_t nargs, PyObject *kwnames) {
    Py_ssize_t nbound = PyTuple_Size(o->args);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    Py_ssize_t total = nbound + nargs + nkw;
    PyObject *small[OP_STACK], **stack = small, *r = NULL, *kw = NULL;
    if (total > OP_STACK) {
        stack = PyMem_Malloc((size_t)total * sizeof(PyObject *));
        if (stack == NULL) {
            return PyErr_NoMemory();
        }
    }
    for (Py_ssize_t i = 0; i < nbound; i++) {
        stack[i] = PyTuple_GetItem(o->args, i);
    }
    for (Py_ssize_t i = 0; i < nargs + nkw; i++) {
        stack[nbound + i] = call[i];
    }
    if (o->func == binary_func) {
        r = hot_binary(NULL, stack, nbound + nargs, nkw > 0 ? kwnames : NULL);
        goto done;
    }
    if (nkw > 0) {
        kw = PyDict_New();
        if (kw == NULL) {
            goto done;
        }
        for (Py_ssize_t j = 0; j < nkw; j++) {
            if (PyDict_SetItem(kw, PyTuple_GetItem(kwnames, j), call[nargs + j]) < 0) {
                goto done;
            }
        }
    }
    r = PyObject_VectorcallDict(o->func, stack, (size_t)(nbound + nargs), kw);
done:
    Py_XDECREF(kw);
    if (stack != small) {
        PyMem_Free(stack);
    }
    return r;
}

static PyObject *op_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    OpObject *o = (OpObject *)self;
    Py_ssize_t nargs = (Py_ssize_t)(nargsf & ~PY_VECTORCALL_ARGUMENTS_OFFSET);
    if (o->func == NULL || o->args == NULL) { /* cleared by the collector (interpreter shutdown) */
        PyErr_SetString(PyExc_RuntimeError, "pylucid op called after it was cleared");
        return NULL;
    }
    if (o->code >= 0 && nargs == 2 && kwnames == NULL && !forked && !forward_levels && is_tensor(args[0]) &&
        is_tensor(args[1]) && o->code < n_ops && op_kinds[o->code] == OP_BINARY) {
        int64_t in[2] = {((TensorBase *)args[0])->h, ((TensorBase *)args[1])->h};
        int64_t dims[2][LUCID_MAX_DIMS];
        PyObject *sa = ((TensorBase *)args[0])->shape, *sb = ((TensorBase *)args[1])->shape;
        int keep = small_dims(dims[0], shape_dims(sa, dims[0]), dims[1], sb == sa ? 0 : shape_dims(sb, dims[1]));
        return binary_call(o->code, in, keep, args[0]);
    }
    return op_call_func(o, args, nargs, kwnames);
}

/* tp_call (PyObject_Call goes through the vectorcall slot; this serves
 * type(op).__call__). */
static PyObject *op_call(PyObject *self, PyObject *args, PyObject *kw) {
    Py_ssize_t nargs = PyTuple_Size(args), nkw = kw == NULL ? 0 : PyDict_Size(kw);
    PyObject **stack = PyMem_Malloc((size_t)(nargs + nkw + 1) * sizeof(PyObject *));
    PyObject *names = nkw > 0 ? PyTuple_New(nkw) : NULL, *r = NULL;
    if (stack == NULL || (nkw > 0 && names == NULL)) {
        PyMem_Free(stack);
        Py_XDECREF(names);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        stack[i] = PyTuple_GetItem(args, i);
    }
    if (nkw > 0) {
        Py_ssize_t pos = 0, j = 0;
        PyObject *k, *v;
        while (PyDict_Next(kw, &pos, &k, &v)) {
            Py_INCREF(k);
            PyTuple_SetItem(names, j, k);
            stack[nargs + j++] = v;
        }
    }
    r = op_vectorcall(self, stack, (size_t)nargs, names);
    Py_XDECREF(names);
    PyMem_Free(stack);
    return r;
}

/* Op(name, func, *args, doc=""). */
static PyObject *op_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    Py_ssize_t n = PyTuple_Size(args);
    PyObject *doc = NULL;
    if (kw != NULL && PyDict_Size(kw) > 0) {
        doc = PyDict_GetItemString(kw, "doc"); /* borrowed */
        if (doc == NULL || PyDict_Size(kw) != 1) {
            PyErr_SetString(PyExc_TypeError, "Op() takes only doc= as a keyword argument");
            return NULL;
        }
    }
    if (n < 2 || !PyUnicode_Check(PyTuple_GetItem(args, 0)) || !PyCallable_Check(PyTuple_GetItem(args, 1))) {
        PyErr_SetString(PyExc_TypeError, "Op(name: str, fn: callable, *args, doc='')");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    OpObject *o = (OpObject *)alloc(tp, 0);
    if (o == NULL) {
        return NULL;
    }
    o->vectorcall = op_vectorcall;
    o->code = -1;
    o->name = PyTuple_GetItem(args, 0);
    Py_INCREF(o->name);
    o->func = PyTuple_GetItem(args, 1);
    Py_INCREF(o->func);
    o->args = PyTuple_GetSlice(args, 2, n);
    o->doc = doc != NULL ? doc : PyUnicode_FromString("");
    if (doc != NULL) {
        Py_INCREF(doc);
    }
    if (o->args == NULL || o->doc == NULL) {
        Py_DECREF(o);
        return NULL;
    }
    if (o->func == binary_func && n == 3 && PyLong_Check(PyTuple_GetItem(args, 2))) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(PyTuple_GetItem(args, 2), &overflow);
        if (!overflow && v >= 0 && v < MAX_OPS) {
            o->code = (int32_t)v;
        }
        PyErr_Clear();
    }
    return (PyObject *)o;
}

static int op_traverse(PyObject *self, visitproc visit, void *arg) {
    OpObject *o = (OpObject *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(o->func);
    Py_VISIT(o->args);
    Py_VISIT(o->name);
    Py_VISIT(o->doc);
    return 0;
}

static int op_clear(PyObject *self) {
    OpObject *o = (OpObject *)self;
    o->code = -1;
    Py_CLEAR(o->func);
    Py_CLEAR(o->args);
    Py_CLEAR(o->name);
    Py_CLEAR(o->doc);
    return 0;
}

static void op_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    op_clear(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyObject *op_repr(PyObject *self) {
    return PyUnicode_FromFormat("<pylucid op %U>", ((OpObject *)self)->name);
}

/* pylucid.ops's attribute attr (ops.py is imported by the time an op exists). */
static PyObject *ops_attr(const char *attr) {
    PyObject *m = PyImport_ImportModule("pylucid.ops");
    if (m == NULL) {
        return NULL;
    }
    PyObject *r = PyObject_GetAttrString(m, attr);
    Py_DECREF(m);
    return r;
}

/* Pickled by name, like a function: ops._op_named(name). */
static PyObject *op_reduce(PyObject *self, PyObject *unused) {
    (void)unused;
    PyObject *f = ops_attr("_op_named");
    if (f == NULL) {
        return NULL;
    }
    return Py_BuildValue("(N(O))", f, ((OpObject *)self)->name);
}

/* op.schema: its registered schema (ops.OpSchema). */
static PyObject *op_schema(PyObject *self, void *closure) {
    (void)closure;
    PyObject *load = ops_attr("_load_schemas");
    if (load == NULL) {
        return NULL;
    }
    PyObject *table = PyObject_CallObject(load, NULL);
    Py_DECREF(load);
    if (table == NULL) {
        return NULL;
    }
    PyObject *r = PyObject_GetItem(table, ((OpObject *)self)->name);
    Py_DECREF(table);
    return r;
}

static PyObject *op_keywords(PyObject *self, void *closure) {
    (void)self;
    (void)closure;
    return PyDict_New();
}

static PyMemberDef op_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(OpObject, vectorcall), READONLY, NULL},
    {"func", T_OBJECT, offsetof(OpObject, func), READONLY, "the implementation"},
    {"args", T_OBJECT, offsetof(OpObject, args), READONLY, "the arguments bound before the caller's (the op id)"},
    {"_name", T_OBJECT, offsetof(OpObject, name), READONLY, "the op's schema name"},
    {"__name__", T_OBJECT, offsetof(OpObject, name), READONLY, "the op's name"},
    {"__doc__", T_OBJECT, offsetof(OpObject, doc), 0, "the op's docstring"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef op_getset[] = {
    {"schema", op_schema, NULL, "the op's registered schema (ops.OpSchema)", NULL},
    {"keywords", op_keywords, NULL, "keyword arguments bound (none)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef op_methods[] = {
    {"__reduce__", op_reduce, METH_NOARGS, "Pickles the op by name."},
    {NULL, NULL, 0, NULL},
};

/* No Py_tp_doc: the __doc__ member gives each op its own (help(ops.minimum)). */
static PyType_Slot op_slots[] = {
    {Py_tp_new, (void *)op_new},
    {Py_tp_call, (void *)op_call},
    {Py_tp_dealloc, (void *)op_dealloc},
    {Py_tp_traverse, (void *)op_traverse},
    {Py_tp_clear, (void *)op_clear},
    {Py_tp_repr, (void *)op_repr},
    {Py_tp_members, op_members},
    {Py_tp_getset, op_getset},
    {Py_tp_methods, op_methods},
    {0, NULL},
};

static PyType_Spec op_spec = {
    "pylucid.ops.Op", sizeof(OpObject), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    op_slots,
};

/* ---- NumPy arrays lent to the library without a Python frame ----
 * The C path reads an exact numpy.ndarray's fields directly: the public
 * PyArrayObject_fields layout below (unchanged from NumPy 1.7 to 2.x). It is
 * checked once against a probe array (set_ndarray); where it does not match,
 * every array takes the Python path. Only native dtypes known by identity
 * (np.dtype singletons, bool excluded: its bytes must be checked) are taken;
 * anything else (byte-swapped, odd strides, too many dims, subclasses) goes
 * to Python, which converts or raises as before (docs/interop.md). */
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
static PyObject *np_descrs[MAX_NP_DTYPES]; /* owned */
static int np_codes[MAX_NP_DTYPES], np_sizes[MAX_NP_DTYPES];
static int n_np_dtypes;
static PyObject *borrowed;    /* _runtime._borrowed: token -> owner of what Python lent, until drain pops it */
static int ndarray_ok;        /* the probe matched the layout */

/* The owners of the arrays lend_ndarray lent, by token, until the token
 * comes back through the buffer queue (drain_pending, or Python's drain
 * via return_lent). A slot table under the GIL, not the borrowed dict: a
 * loan then costs no int object, hash or dict entry (766 of the 38,001
 * instructions of backward(g ndarray) on 1,000 float32 elements). A token is LENT_TAG + (generation << 32)
 * + slot: apart from the Python side's tokens (itertools.count from 1), and
 * one that does not match its slot's generation is ignored (a leak, never
 * another array's release). */
#define LENT_TAG ((int64_t)1 << 61)
#define LENT_GEN_BITS 24
static PyObject **lent_owner; /* NULL: a free slot */
static uint32_t *lent_gen, *lent_free; /* generations; the stack of free slots */
static uint32_t lent_cap, lent_nfree;

static int is_lent_token(int64_t tok) { return tok >= LENT_TAG && tok < LENT_TAG + ((int64_t)1 << (32 + LENT_GEN_BITS)); }

/* Keeps owner (a new reference) until its token comes back: *token the
 * token. Returns 0, or -1 with MemoryError set (nothing kept). */
static int lent_keep(PyObject *owner, int64_t *token) {
    if (lent_nfree == 0) {
        uint32_t cap = lent_cap ? lent_cap * 2 : 64;
        if (cap <= lent_cap || (size_t)cap > PY_SSIZE_T_MAX / sizeof(PyObject *)) {
            PyErr_NoMemory();
            return -1;
        }
        PyObject **o = PyMem_Realloc(lent_owner, cap * sizeof *o);
        if (o == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        lent_owner = o;
        uint32_t *g = PyMem_Realloc(lent_gen, cap * sizeof *g);
        if (g == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        lent_gen = g;
        uint32_t *f = PyMem_Realloc(lent_free, cap * sizeof *f);
        if (f == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        lent_free = f;
        for (uint32_t i = cap; i > lent_cap; i--) { /* lowest slots on top */
            lent_owner[i - 1] = NULL;
            lent_gen[i - 1] = 0;
            lent_free[lent_nfree++] = i - 1;
        }
        lent_cap = cap;
    }
    uint32_t slot = lent_free[--lent_nfree];
    Py_INCREF(owner);
    lent_owner[slot] = owner;
    *token = LENT_TAG + ((int64_t)lent_gen[slot] << 32) + slot;
    return 0;
}

/* The owner kept under token (a reference the caller now owns), and the
 * slot free again; NULL for a token that is not a live one. */
static PyObject *lent_take(int64_t token) {
    if (!is_lent_token(token)) {
        return NULL;
    }
    uint64_t rel = (uint64_t)(token - LENT_TAG); /* in range: no overflow */
    uint32_t slot = (uint32_t)(rel & 0xFFFFFFFF), gen = (uint32_t)(rel >> 32);
    if (slot >= lent_cap || lent_owner[slot] == NULL || lent_gen[slot] != gen) {
        return NULL;
    }
    PyObject *owner = lent_owner[slot];
    lent_owner[slot] = NULL;
    lent_gen[slot] = (gen + 1) & ((1u << LENT_GEN_BITS) - 1);
    lent_free[lent_nfree++] = slot;
    return owner;
}

/* return_lent(tokens): Python's drain hands back the tokens of this
 * table it popped from the buffer queue (a list of ints); their owners are
 * let go, other tokens ignored. */
static PyObject *hot_return_lent(PyObject *mod, PyObject *tokens) {
    (void)mod;
    if (!PyList_Check(tokens)) {
        PyErr_SetString(PyExc_TypeError, "return_lent: tokens must be a list of ints");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_Size(tokens); i++) {
        long long tok = PyLong_AsLongLong(PyList_GetItem(tokens, i));
        if (tok == -1 && PyErr_Occurred()) {
            return NULL;
        }
        Py_XDECREF(lent_take(tok));
    }
    Py_RETURN_NONE;
}

/* lent_owners(): the owners of the arrays lent from C still out (for
 * tests and diagnostics: _runtime.borrowed_owners). */
static PyObject *hot_lent_owners(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    PyObject *l = PyList_New(0);
    for (uint32_t i = 0; l != NULL && i < lent_cap; i++) {
        if (lent_owner[i] != NULL && PyList_Append(l, lent_owner[i]) < 0) {
            Py_CLEAR(l);
        }
    }
    return l;
}

/* arr's fields when it is an exact ndarray of a registered native dtype
 * with at most LUCID_MAX_DIMS dims (*k: the dtype's index in np_descrs),
 * else NULL: the arrays the C path takes (lent, copied or written). */
static np_fields *native_ndarray(PyObject *arr, int *k) {
    if (!ndarray_ok || forked || Py_TYPE(arr) != ndarray_type) {
        return NULL;
    }
    np_fields *a = (np_fields *)arr;
    if (a->nd < 0 || a->nd > LUCID_MAX_DIMS) {
        return NULL;
    }
    for (*k = 0; *k < n_np_dtypes; (*k)++) {
        if (np_descrs[*k] == a->descr) {
            return a;
        }
    }
    return NULL;
}

/* Lends arr's memory to the library (lucid_tensor_borrow) and fills meta
 * as lucid_op would for the new tensor. Returns 1 done, 0 when the array
 * needs the Python path, -1 with an exception set. */
static int lend_ndarray(PyObject *arr, int64_t *meta) {
    int k;
    np_fields *a = native_ndarray(arr, &k);
    if (a == NULL) {
        return 0;
    }
    int nd = a->nd;
    int64_t isz = np_sizes[k], shape[LUCID_MAX_DIMS], strides[LUCID_MAX_DIMS];
    int empty = 0;
    for (int i = 0; i < nd; i++) {
        if (a->strides[i] % isz != 0) {
            return 0;
        }
        shape[i] = a->dimensions[i];
        strides[i] = a->strides[i] / isz;
        empty |= shape[i] == 0;
    }
    char *base = a->data;
    int64_t offset = 0, span = 0;
    if (!empty) {
        int64_t lo = 0, hi = 0;
        for (int i = 0; i < nd; i++) {
            if (strides[i] < 0) {
                lo += (shape[i] - 1) * strides[i];
            } else {
                hi += (shape[i] - 1) * strides[i];
            }
        }
        base = a->data + lo * isz;
        offset = -lo;
        span = (hi - lo + 1) * isz;
    }
    int64_t token;
    if (lent_keep(arr, &token) < 0) {
        return -1;
    }
    lucid_tensor_info info;
    int rc = lucid_tensor_borrow(base, span, np_codes[k], nd, shape, strides, offset,
                                 (a->flags & NP_WRITEABLE) == 0, token, &info);
    if (rc) {
        Py_XDECREF(lent_take(token));
        status_error(rc);
        return -1;
    }
    meta[0] = info.handle;
    meta[1] = (int64_t)(info.dtype & 0xFF) | ((int64_t)info.ndim << 8) |
              (info.requires_grad ? LUCID_META_REQUIRES_GRAD : 0) | (info.pending ? LUCID_META_PENDING : 0);
    for (int i = 0; i < info.ndim; i++) {
        meta[2 + i] = info.shape[i];
    }
    return 1;
}

/* out= an ndarray, described in C: an exact ndarray, writable, of a
 * registered native dtype (bool is not one), at most LUCID_MAX_DIMS dims,
 * strides multiples of the item size. Fills d, with shape and strides (room
 * for LUCID_MAX_DIMS each) as its arrays, and returns 1; else 0: the Python
 * path (out_desc), which converts or raises as before (docs/semantics.md). */
static int ndarray_out(PyObject *o, lucid_out *d, int64_t *shape, int64_t *strides) {
    int k;
    np_fields *a = native_ndarray(o, &k);
    if (a == NULL || !(a->flags & NP_WRITEABLE)) {
        return 0;
    }
    int64_t isz = np_sizes[k];
    for (int i = 0; i < a->nd; i++) {
        if (a->strides[i] % isz != 0) {
            return 0;
        }
        shape[i] = a->dimensions[i];
        strides[i] = a->strides[i] / isz;
    }
    d->handle = 0;
    d->data = a->data;
    d->dtype = np_codes[k];
    d->ndim = a->nd;
    d->shape = shape;
    d->strides = strides;
    return 1;
}

/* from_ndarray(arr): a Tensor sharing arr's memory, or None (the Python
 * path: from_numpy's conversions and errors). */
static PyObject *hot_from_ndarray(PyObject *mod, PyObject *arr) {
    (void)mod;
    int64_t meta[LUCID_META_LEN];
    int r = lend_ndarray(arr, meta);
    if (r < 0) {
        return NULL;
    }
    if (r == 0) {
        Py_RETURN_NONE;
    }
    return from_meta(meta);
}

/* set_ndarray(probe, data, dtypes, borrowed): checks the layout against
 * probe (a 2-d C-contiguous array whose data address is data), registers
 * dtypes ((np.dtype, code, itemsize) triples) and the borrowed dict. */
static PyObject *hot_set_ndarray(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *probe, *dtypes, *bdict;
    unsigned long long data;
    if (!PyArg_ParseTuple(args, "OKO!O!", &probe, &data, &PyTuple_Type, &dtypes, &PyDict_Type, &bdict)) {
        return NULL;
    }
    ndarray_ok = 0;
    if (ndarray_type == NULL || Py_TYPE(probe) != ndarray_type) {
        PyErr_SetString(PyExc_TypeError, "set_ndarray: call set_out_desc first; probe must be an ndarray");
        return NULL;
    }
    np_fields *a = (np_fields *)probe;
    PyObject *dt = PyObject_GetAttrString(probe, "dtype");
    if (dt == NULL) {
        return NULL;
    }
    int ok = (uintptr_t)a->data == (uintptr_t)data && a->nd == 2 && a->dimensions[0] == 3 && a->dimensions[1] == 5 &&
             a->strides[1] == 4 && a->strides[0] == 20 && a->descr == dt && (a->flags & NP_WRITEABLE);
    Py_DECREF(dt);
    for (int i = 0; i < n_np_dtypes; i++) {
        Py_CLEAR(np_descrs[i]);
    }
    n_np_dtypes = 0;
    Py_ssize_t n = PyTuple_Size(dtypes);
    for (Py_ssize_t i = 0; i < n && n_np_dtypes < MAX_NP_DTYPES; i++) {
        PyObject *d;
        int code, size;
        if (!PyArg_ParseTuple(PyTuple_GetItem(dtypes, i), "Oii", &d, &code, &size)) {
            return NULL;
        }
        Py_INCREF(d);
        np_descrs[n_np_dtypes] = d;
        np_codes[n_np_dtypes] = code;
        np_sizes[n_np_dtypes] = size;
        n_np_dtypes++;
    }
    set_ref(&borrowed, bdict);
    ndarray_ok = ok;
    return PyBool_FromLong(ok);
}

/* The library has items to hand back (LUCID_META_PENDING). Most often
 * they are tokens of NumPy arrays lent to it (this file's lend_ndarray, or
 * the Python side's from_numpy): those are let go here, without a Python
 * frame (lend_ndarray's from its slot table, the others from the borrowed
 * dict). Every 16th time, or when the buffer queue was empty, or when a
 * token's owner is anything else (a DLPack owner, whose release is
 * Python's business: that token is handed to the Python drain, its entry
 * left in the dict), the Python drain runs too, for the functions queue
 * (docs/autograd.md). */
static int drain_calls;

static int drain_pending(void) {
    int64_t items[64];
    int32_t n = 0;
    int python = (++drain_calls & 15) == 0;
    if (forked || borrowed == NULL || lucid_drain(LUCID_QUEUE_BUFFERS, items, 64, &n) != 0) {
        n = 0;
        python = 1;
    }
    if (n == 0) {
        python = 1;
    }
    /* lend_ndarray's tokens first: their release cannot fail, so an error
     * in the dict's pass below loses none of them. Letting an array go may
     * run Python code (its base's __del__), which may call the library and
     * drain again: the table is consistent by then, and items is ours. */
    for (int32_t i = 0; i < n; i++) {
        if (is_lent_token(items[i])) {
            PyObject *owner = lent_take(items[i]);
            items[i] = 0; /* no token is 0 */
            Py_XDECREF(owner);
        }
    }
    PyObject *keep = NULL; /* owners that are not arrays: Python's to release */
    for (int32_t i = 0; i < n; i++) {
        if (items[i] == 0) {
            continue;
        }
        PyObject *key = PyLong_FromLongLong(items[i]);
        if (key == NULL) {
            Py_XDECREF(keep);
            return -1; /* the token is lost: its owner stays in the dict (a leak, not a crash) */
        }
        PyObject *owner = PyDict_GetItemWithError(borrowed, key); /* borrowed reference */
        if (owner != NULL && ndarray_type != NULL && Py_TYPE(owner) == ndarray_type) {
            Py_INCREF(owner);
            if (PyDict_DelItem(borrowed, key) < 0) {
                PyErr_Clear();
            }
            Py_DECREF(owner); /* may free the array (and run its base's __del__) */
        } else if (owner != NULL) {
            /* Leave it to Python: a later drain finds it through this list. */
            if (keep == NULL) {
                keep = PyList_New(0);
            }
            if (keep == NULL || PyList_Append(keep, key) < 0) {
                PyErr_Clear();
            }
            python = 1;
        } else if (PyErr_Occurred()) {
            Py_DECREF(key);
            Py_XDECREF(keep);
            return -1;
        }
        Py_DECREF(key);
    }
    PyObject *r;
    if (keep != NULL) {
        r = PyObject_CallFunctionObjArgs(drain, keep, NULL);
        Py_DECREF(keep);
    } else if (python) {
        r = PyObject_CallObject(drain, NULL);
    } else {
        return 0;
    }
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* Arrays of at most this many bytes given as a gradient are copied, not
 * lent (copy_small_ndarray). */
#define GRAD_COPY_BYTES 256

/* A C-contiguous exact ndarray of a registered native dtype and at most
 * GRAD_COPY_BYTES bytes, copied into a new tensor (lucid_tensor_copy): for a
 * gradient given to backward a copy costs less than a loan (three Go
 * allocations, and a token that comes back through the buffer queue), and the
 * values are the same (backward only reads it, and a leaf's .grad is a copy
 * either way). Returns 1 (*h its
 * handle, *temp its release in the batch of dropped small tensors), 0 when
 * arr is not such an array (nothing made), -1 with an exception set. */
static int copy_small_ndarray(PyObject *arr, int64_t *h, int64_t *temp) {
    int k;
    np_fields *a = native_ndarray(arr, &k);
    if (a == NULL) {
        return 0;
    }
    int64_t isz = np_sizes[k], n = 1, shape[LUCID_MAX_DIMS];
    int empty = 0;
    for (int i = 0; i < a->nd; i++) {
        shape[i] = a->dimensions[i];
        empty |= shape[i] == 0;
    }
    for (int i = a->nd - 1; i >= 0 && !empty; i--) { /* C-contiguous (an empty array's strides do not matter), */
        if (shape[i] > GRAD_COPY_BYTES || (shape[i] != 1 && a->strides[i] != n * isz)) {
            return 0;
        }
        n *= shape[i];
        if (n * isz > GRAD_COPY_BYTES) { /* and small: checked before the product can grow past it */
            return 0;
        }
    }
    if (empty) {
        n = 0;
    }
    lucid_tensor_info info;
    int rc = lucid_tensor_copy(a->data, n * isz, np_codes[k], a->nd, shape, &info);
    return small_temp(rc, &info, h, temp);
}

/* The gradient handle for g in a backward call: a Tensor's own (*temp 0),
 * None (0), with copy a small ndarray's copy (copy_small_ndarray), or
 * another exact ndarray lent for the call (*temp: the new handle, released
 * by the caller). Only backward copies: it clones a leaf's gradient from
 * the caller's memory anyway, while autograd.grad may return the gradient
 * it was given, which aliases the caller's array when it is lent, as on the
 * Python path. Returns 1, 0 for the Python path, -1 on error. */
static int grad_handle(PyObject *g, int copy, int64_t *h, int64_t *temp) {
    *temp = 0;
    if (g == Py_None) {
        *h = 0;
        return 1;
    }
    if (is_tensor(g)) {
        *h = ((TensorBase *)g)->h;
        return 1;
    }
    int c = copy ? copy_small_ndarray(g, h, temp) : 0;
    if (c != 0) {
        return c;
    }
    int64_t meta[LUCID_META_LEN];
    int r = lend_ndarray(g, meta);
    if (r == 1) {
        *h = meta[0];
        if (lent_temp(meta, temp) < 0) {
            return -1;
        }
    }
    return r;
}

/* *temp for the handle of an array lend_ndarray described in meta: the
 * handle, or minus it for a small array (released in the batch, as a
 * dropped small tensor's handle). Drains what the library handed back if
 * meta says so; on an error there, releases the handle, sets *temp 0 and
 * returns -1. */
static int lent_temp(const int64_t *meta, int64_t *temp) {
    int nd = (int)((meta[1] >> 8) & 0xFF);
    *temp = nd == 0 || (nd == 1 && meta[2] <= 4096) ? -meta[0] : meta[0];
    if ((meta[1] & LUCID_META_PENDING) && drain_pending() < 0) {
        lucid_release(meta[0]);
        *temp = 0;
        return -1;
    }
    return 0;
}

/* Releases the handles grad_handle lent (negative: a small array's, which
 * waits in the batch of dropped small tensors; its token, and so the array,
 * comes back at the next flush). */
static void release_temps(const int64_t *temps, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (temps[i] == 0 || forked) {
            continue;
        }
        if (temps[i] < 0) {
            dead[ndead++] = -temps[i];
            if (ndead == DEAD_CAP) {
                flush_dead();
            }
        } else {
            lucid_release(temps[i]);
        }
    }
}

/* A Python float g given as the gradient of t, a float32 or float64 tensor:
 * a 0-d tensor of t's dtype holding g rounded once (lucid_scalar converts
 * the double), as tensor.gradient_operand makes it on the Python path
 * (docs/autograd.md). Returns grad_handle's values; 0 (the Python path)
 * for other dtypes. */
static int number_grad(PyObject *t, PyObject *g, int64_t *h, int64_t *temp) {
    *temp = 0;
    PyObject *dt = ((TensorBase *)t)->dtype;
    int32_t code = -1;
    for (Py_ssize_t i = 0; i < PyTuple_Size(by_code) && code < 0; i++) {
        if (PyTuple_GetItem(by_code, i) == dt) {
            code = (int32_t)i;
        }
    }
    if (code != LUCID_FLOAT32 && code != LUCID_FLOAT64) {
        return 0;
    }
    double v = PyFloat_AsDouble(g);
    if (v == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    lucid_tensor_info info;
    int rc = lucid_scalar(code, v, 0, &info);
    return small_temp(rc, &info, h, temp);
}

/* backward_grad(t, g, flags): t.backward(g) with g a Tensor or an ndarray
 * (lent for the call, or copied when small: grad_handle), flags lucid.h's
 * (retain_graph); None when done, a Run stopped at a Python Function, or
 * NotImplemented for the Python path. */
static PyObject *hot_backward_grad(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t, *g;
    int flags;
    if (!PyArg_ParseTuple(args, "OOi", &t, &g, &flags)) {
        return NULL;
    }
    if (forked || !is_tensor(t) || g == Py_None) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int32_t mode;
    int64_t gh, temp;
    int r = PyFloat_CheckExact(g) ? number_grad(t, g, &gh, &temp) : grad_handle(g, 1, &gh, &temp);
    if (r <= 0) {
        if (r == 0) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        return NULL;
    }
    if (current_mode(&mode) < 0) {
        release_temps(&temp, 1);
        return NULL;
    }
    int64_t root = ((TensorBase *)t)->h, run = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = lucid_backward_run(&root, &gh, 1, flags, mode, &run);
    Py_END_ALLOW_THREADS
    release_temps(&temp, 1);
    if (rc) {
        return status_error(rc);
    }
    if (run == 0) {
        Py_RETURN_NONE;
    }
    return new_run(run);
}

#define MAX_GRAD_ARGS 8

/* grad_run(outputs, grad_outputs, inputs, flags): autograd.grad's common
 * forms. outputs and inputs are tuples of Tensors, grad_outputs None or a
 * tuple as long as outputs of Tensors, ndarrays (lent for the call) or
 * None. Returns the tuple of gradients (None: unused), a Run stopped at a
 * Python Function (the caller drives it and reads the result), or
 * NotImplemented for the Python path. */
static PyObject *hot_grad_run(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *outs, *gouts, *ins;
    int flags;
    if (!PyArg_ParseTuple(args, "O!OO!i", &PyTuple_Type, &outs, &gouts, &PyTuple_Type, &ins, &flags)) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(outs), ni = PyTuple_Size(ins);
    if (forked || n < 1 || n > MAX_GRAD_ARGS || ni > MAX_GRAD_ARGS ||
        (gouts != Py_None && (!PyTuple_Check(gouts) || PyTuple_Size(gouts) != n))) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int64_t roots[MAX_GRAD_ARGS], inh[MAX_GRAD_ARGS], gh[MAX_GRAD_ARGS], temps[MAX_GRAD_ARGS] = {0};
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GetItem(outs, i);
        if (!is_tensor(o)) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        roots[i] = ((TensorBase *)o)->h;
    }
    for (Py_ssize_t i = 0; i < ni; i++) {
        PyObject *o = PyTuple_GetItem(ins, i);
        if (!is_tensor(o)) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        inh[i] = ((TensorBase *)o)->h;
    }
    if (gouts != Py_None) {
        for (Py_ssize_t i = 0; i < n; i++) {
            int r = grad_handle(PyTuple_GetItem(gouts, i), 0, &gh[i], &temps[i]);
            if (r <= 0) {
                release_temps(temps, i);
                if (r == 0) {
                    Py_RETURN_NOTIMPLEMENTED;
                }
                return NULL;
            }
        }
    }
    int32_t mode;
    if (current_mode(&mode) < 0) {
        release_temps(temps, n);
        return NULL;
    }
    int64_t meta[MAX_GRAD_ARGS * LUCID_META_LEN];
    int64_t run = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = lucid_backward_grad(roots, gouts == Py_None ? NULL : gh, (int32_t)n, ni ? inh : NULL, (int32_t)ni, flags,
                             mode, &run, meta);
    Py_END_ALLOW_THREADS
    release_temps(temps, n);
    if (rc) {
        return status_error(rc);
    }
    if (run != 0) {
        return new_run(run);
    }
    PyObject *res = PyTuple_New(ni);
    if (res == NULL) {
        for (Py_ssize_t i = 0; i < ni; i++) {
            if (meta[i * LUCID_META_LEN] != 0) {
                lucid_release(meta[i * LUCID_META_LEN]);
            }
        }
        return NULL;
    }
    for (Py_ssize_t i = 0; i < ni; i++) {
        int64_t *m = &meta[i * LUCID_META_LEN];
        PyObject *x;
        if (m[0] == 0) {
            Py_INCREF(Py_None);
            x = Py_None;
        } else {
            x = from_meta_like(m, PyTuple_GetItem(ins, i)); /* owns (or releases) the handle */
        }
        if (x == NULL) {
            for (Py_ssize_t j = i + 1; j < ni; j++) {
                if (meta[j * LUCID_META_LEN] != 0) {
                    lucid_release(meta[j * LUCID_META_LEN]);
                }
            }
            Py_DECREF(res);
            return NULL;
        }
        PyTuple_SetItem(res, i, x);
    }
    return res;
}

/* How long one wait for a job lasts before the thread comes back for the
 * GIL to look for signals (Ctrl-C). */
#define JOB_SLICE_MS 25

/* The call that filled meta came back LUCID_PENDING: a long reduction runs
 * on as job meta[0] (lucid.h, LUCID_MODE_INTERRUPTIBLE). Waits for it in
 * slices with the GIL released, running the signal handlers between slices
 * (on the main thread, Ctrl-C raises KeyboardInterrupt there). Returns the
 * call's status (meta filled on LUCID_OK); on an exception from a handler,
 * cancels the job, waits for its work to end, and returns -1 with the
 * exception set. */
static int await_job(int64_t *meta) {
    int64_t job = meta[0];
    for (;;) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = lucid_job_wait(job, JOB_SLICE_MS, meta);
        Py_END_ALLOW_THREADS
        if (rc != LUCID_PENDING) {
            return rc;
        }
        if (PyErr_CheckSignals() < 0) {
            Py_BEGIN_ALLOW_THREADS /* the exception stays set in this thread's state */
            lucid_job_cancel(job);
            Py_END_ALLOW_THREADS
            return -1;
        }
    }
}

/* reduce_all(op, a, keepdim): lucid_op over all dims (op: a reduction's id). */
static PyObject *hot_reduce_all(PyObject *mod, PyObject *args) {
    (void)mod;
    if (PyTuple_Size(args) != 3) {
        PyErr_SetString(PyExc_TypeError, "reduce_all(op, a, keepdim)");
        return NULL;
    }
    PyObject *op = PyTuple_GetItem(args, 0), *a = PyTuple_GetItem(args, 1), *keep = PyTuple_GetItem(args, 2);
    if (forked || forward_levels || !is_tensor(a)) {
        return PyObject_CallFunctionObjArgs(fallback_reduce, op, a, Py_None, keep, NULL);
    }
    int keepdim = PyObject_IsTrue(keep);
    int32_t code, mode;
    if (keepdim < 0 || op_code(op, &code) < 0 || check_kind(code, OP_REDUCTION, "reduction") < 0 ||
        current_mode(&mode) < 0) {
        return NULL;
    }
    int64_t ha = ((TensorBase *)a)->h;
    int64_t attrs[2] = {keepdim, -1}; /* keepdim, all dims */
    int64_t meta[LUCID_META_LEN];
    int rc;
    int64_t dims[LUCID_MAX_DIMS];
    NATIVE_CALL(small_dims(dims, shape_dims(((TensorBase *)a)->shape, dims), NULL, 0),
                rc = lucid_op(code, &ha, 1, attrs, 2, mode | LUCID_MODE_INTERRUPTIBLE, meta));
    if (rc) {
        if (rc == LUCID_PENDING && (rc = await_job(meta)) == 0) {
            return from_meta(meta);
        }
        return rc < 0 ? NULL : status_error(rc);
    }
    return from_meta(meta);
}

/* grad(t): t's accumulated gradient, or None. */
static PyObject *hot_grad(PyObject *mod, PyObject *t) {
    (void)mod;
    if (!is_tensor(t)) {
        PyErr_SetString(PyExc_TypeError, "grad() expects a pylucid.Tensor");
        return NULL;
    }
    int64_t meta[LUCID_META_LEN];
    int rc = lucid_get_grad_meta(((TensorBase *)t)->h, meta);
    if (rc) {
        return status_error(rc);
    }
    if (meta[0] == 0) {
        Py_RETURN_NONE;
    }
    return from_meta_like(meta, t);
}

/* backward_run(t): lucid_backward_run from t with an implicit gradient, no
 * retained graph; returns None when done, else a Run that owns the run
 * stopped at a Python Function. The GIL is released for the pass. */
static PyObject *hot_backward_run(PyObject *mod, PyObject *t) {
    (void)mod;
    if (!is_tensor(t)) {
        PyErr_SetString(PyExc_TypeError, "backward_run() expects a pylucid.Tensor");
        return NULL;
    }
    int32_t mode;
    if (current_mode(&mode) < 0) {
        return NULL;
    }
    int64_t root = ((TensorBase *)t)->h, run = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = lucid_backward_run(&root, NULL, 1, 0, mode, &run);
    Py_END_ALLOW_THREADS
    if (rc) {
        return status_error(rc);
    }
    if (run == 0) {
        Py_RETURN_NONE;
    }
    return new_run(run);
}

/* set_grad(t, g): replaces t's gradient by the Tensor g, or clears it (None). */
static PyObject *hot_set_grad(PyObject *mod, PyObject *args) {
    (void)mod;
    if (PyTuple_Size(args) != 2) {
        PyErr_SetString(PyExc_TypeError, "set_grad(t, g)");
        return NULL;
    }
    PyObject *t = PyTuple_GetItem(args, 0), *g = PyTuple_GetItem(args, 1);
    if (!is_tensor(t) || (g != Py_None && !is_tensor(g))) {
        PyErr_SetString(PyExc_TypeError, "set_grad() expects pylucid.Tensors (or None)");
        return NULL;
    }
    int rc = lucid_set_grad(((TensorBase *)t)->h, g == Py_None ? 0 : ((TensorBase *)g)->h);
    if (rc) {
        return status_error(rc);
    }
    Py_RETURN_NONE;
}

static PyObject *hot_flush(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    flush_dead();
    Py_RETURN_NONE;
}

static PyObject *hot_pending(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyLong_FromLong(ndead);
}

/* set_pinned(d): the dict in which records still needed by the library wait. */
static void set_ref(PyObject **slot, PyObject *v) {
    PyObject *old = *slot;
    Py_XINCREF(v);
    *slot = v;
    Py_XDECREF(old);
}

/* set_out_desc(fn, ndarray_type): how binary_out describes a NumPy out=. */
static PyObject *hot_set_out_desc(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *fn, *tp;
    if (!PyArg_ParseTuple(args, "OO", &fn, &tp) || !PyType_Check(tp)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "set_out_desc(fn, ndarray type)");
        }
        return NULL;
    }
    set_ref(&out_desc_address, fn);
    set_ref((PyObject **)&ndarray_type, tp);
    Py_RETURN_NONE;
}

/* set_mode(m): the calling thread's state.mode changed to m. */
static PyObject *hot_set_mode(PyObject *mod, PyObject *v) {
    (void)mod;
    long m = PyLong_AsLong(v);
    if (m == -1 && PyErr_Occurred()) {
        return NULL;
    }
    tl_mode = (int32_t)m;
    tl_mode_known = 1;
    Py_RETURN_NONE;
}

/* set_forward(n): the number of forward-mode levels open (0: none). */
static PyObject *hot_set_forward(PyObject *mod, PyObject *n) {
    (void)mod;
    long v = PyLong_AsLong(n);
    if (v == -1 && PyErr_Occurred()) {
        return NULL;
    }
    forward_levels = (int)v;
    Py_RETURN_NONE;
}

static PyObject *hot_set_pinned(PyObject *mod, PyObject *d) {
    (void)mod;
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "set_pinned() expects a dict");
        return NULL;
    }
    PyObject *old = pinned;
    Py_INCREF(d);
    pinned = d;
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyObject *hot_gc_started(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    gc_epoch++;
    Py_RETURN_NONE;
}

/* release(t): lets go of t's handle (and Function record) as dropping t
 * would, leaving t empty (_h == 0). */
static PyObject *hot_release(PyObject *mod, PyObject *t) {
    (void)mod;
    if (tensor_type == NULL || !PyObject_TypeCheck(t, tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "release() expects a pylucid.Tensor");
        return NULL;
    }
    release_handle((TensorBase *)t);
    Py_RETURN_NONE;
}

static PyObject *hot_mark_forked(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    forked = 1;
    Py_RETURN_NONE;
}

/* ---- DLPack capsules (python/pylucid/dlpack.py) ----
 * The destructor of a capsule pylucid produced. A consumer that took the
 * managed tensor renamed the capsule "used_..." and calls its deleter
 * itself; otherwise nobody took it and it is deleted here (DLPack: the
 * producer's capsule destructor does that). It runs whenever the capsule is
 * dropped, often while the consumer is raising an exception (NumPy rejecting
 * a dtype, say): the error indicator is saved and restored around the work,
 * so that exception reaches the caller unchanged (docs/errors.md). */
static void dlpack_delete(void *p, int versioned) {
    if (versioned) {
        DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)p;
        if (m != NULL && m->deleter != NULL) {
            m->deleter(m);
        }
    } else {
        DLManagedTensor *m = (DLManagedTensor *)p;
        if (m != NULL && m->deleter != NULL) {
            m->deleter(m);
        }
    }
}

static void dlpack_capsule_destructor(PyObject *capsule) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        dlpack_delete(PyCapsule_GetPointer(capsule, "dltensor_versioned"), 1);
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
        dlpack_delete(PyCapsule_GetPointer(capsule, "dltensor"), 0);
    }
    PyErr_Restore(type, value, tb);
}

/* dlpack_capsule(managed, versioned): the capsule owning the managed tensor
 * at address managed (from lucid_dlpack_export); on failure the managed
 * tensor is deleted. */
static PyObject *hot_dlpack_capsule(PyObject *mod, PyObject *args) {
    (void)mod;
    unsigned long long addr;
    int versioned;
    if (!PyArg_ParseTuple(args, "Kp", &addr, &versioned)) {
        return NULL;
    }
    void *p = (void *)(uintptr_t)addr;
    if (p == NULL) {
        PyErr_SetString(PyExc_ValueError, "dlpack_capsule: NULL managed tensor");
        return NULL;
    }
    PyObject *c = PyCapsule_New(p, versioned ? "dltensor_versioned" : "dltensor", dlpack_capsule_destructor);
    if (c == NULL) {
        dlpack_delete(p, versioned);
    }
    return c;
}

/* dlpack_take(capsule): takes a producer's DLPack capsule for from_dlpack
 * (docs/interop.md). Returns (address of the managed tensor, versioned)
 * after renaming the capsule "used_dltensor[_versioned]", which tells the
 * producer's destructor the consumer now owns the managed tensor and will
 * call its deleter. Raises TypeError for an object that is not a DLPack
 * capsule and BufferError for one already consumed; the capsule is left
 * untouched then. */
static PyObject *hot_dlpack_take(PyObject *mod, PyObject *capsule) {
    (void)mod;
    int versioned;
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        versioned = 1;
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
        versioned = 0;
    } else if (PyCapsule_IsValid(capsule, "used_dltensor_versioned") ||
               PyCapsule_IsValid(capsule, "used_dltensor")) {
        PyErr_SetString(PyExc_BufferError, "pylucid.from_dlpack: this DLPack capsule was already consumed; "
                                           "call __dlpack__() again for a new one");
        return NULL;
    } else {
        PyErr_SetString(PyExc_TypeError, "pylucid.from_dlpack: not a DLPack capsule (its name is neither "
                                         "\"dltensor\" nor \"dltensor_versioned\")");
        return NULL;
    }
    void *p = PyCapsule_GetPointer(capsule, versioned ? "dltensor_versioned" : "dltensor");
    if (p == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_BufferError, "pylucid.from_dlpack: the DLPack capsule holds a NULL tensor");
        }
        return NULL;
    }
    PyObject *out = Py_BuildValue("(KO)", (unsigned long long)(uintptr_t)p, versioned ? Py_True : Py_False);
    if (out == NULL) {
        return NULL; /* the capsule is still the producer's */
    }
    if (PyCapsule_SetName(capsule, versioned ? "used_dltensor_versioned" : "used_dltensor")) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_BufferError, "pylucid.from_dlpack: could not take ownership of the DLPack capsule");
        return NULL;
    }
    return out;
}

/* The owner of a producer's managed tensor that dlpack_borrow took: a
 * capsule named "pylucid_dlpack_owner" (its context non-NULL when the tensor
 * is versioned) whose destructor calls the producer's deleter, exactly once,
 * when the last reference goes (dlpack.py keeps it in _runtime._borrowed
 * until the library hands the borrow token back, and drain drops it outside
 * its lock). */
static void dlpack_owner_destructor(PyObject *o) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    void *p = PyCapsule_GetPointer(o, "pylucid_dlpack_owner");
    void *versioned = PyCapsule_GetContext(o);
    PyErr_Clear();
    if (p != NULL) {
        dlpack_delete(p, versioned != NULL);
    }
    PyErr_Restore(type, value, tb);
}

/* dlpack_borrow(capsule, token, codes): from_dlpack's common case in one
 * call (docs/interop.md). codes maps DLPack (code << 8 | bits) to pylucid's
 * dtype codes. For a CPU tensor of a mapped dtype (one lane, at most
 * LUCID_MAX_DIMS dims, DLPack major version 1 when versioned) it takes the
 * capsule (renamed "used_..."), lends the memory to the library under token
 * (lucid_tensor_borrow: the lowest address the view touches and the span of
 * bytes it covers, strides in elements, NULL strides row-major) and returns
 * (tensor, owner). Anything else returns None and leaves the capsule
 * untouched: the Python path takes it and raises its errors. */
static PyObject *hot_dlpack_borrow(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *capsule, *codes;
    long long token;
    if (!PyArg_ParseTuple(args, "OLO!", &capsule, &token, &PyDict_Type, &codes)) {
        return NULL;
    }
    if (forked) {
        Py_RETURN_NONE;
    }
    int versioned;
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        versioned = 1;
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
        versioned = 0;
    } else {
        Py_RETURN_NONE;
    }
    void *p = PyCapsule_GetPointer(capsule, versioned ? "dltensor_versioned" : "dltensor");
    if (p == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    DLTensor *dl;
    int readonly = 0;
    if (versioned) {
        DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)p;
        if (m->version.major != LUCID_DLPACK_MAJOR) {
            Py_RETURN_NONE;
        }
        readonly = (m->flags & LUCID_DL_FLAG_READ_ONLY) != 0;
        dl = &m->dl_tensor;
    } else {
        dl = &((DLManagedTensor *)p)->dl_tensor;
    }
    int nd = dl->ndim;
    if (dl->device.device_type != LUCID_DL_CPU || dl->dtype.lanes != 1 || nd < 0 || nd > LUCID_MAX_DIMS ||
        dl->dtype.bits % 8 != 0 || (nd > 0 && dl->shape == NULL)) {
        Py_RETURN_NONE;
    }
    PyObject *key = PyLong_FromLong((long)dl->dtype.code << 8 | dl->dtype.bits);
    if (key == NULL) {
        return NULL;
    }
    PyObject *v = PyDict_GetItemWithError(codes, key); /* borrowed */
    Py_DECREF(key);
    if (v == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    long code = PyLong_AsLong(v);
    if (code == -1 && PyErr_Occurred()) {
        return NULL;
    }
    int64_t strides[LUCID_MAX_DIMS];
    int64_t acc = 1;
    for (int i = nd - 1; i >= 0; i--) {
        if (dl->strides != NULL) {
            strides[i] = dl->strides[i];
        } else {
            strides[i] = acc;
            acc *= dl->shape[i];
        }
    }
    int64_t itemsize = dl->dtype.bits / 8;
    char *data = (char *)dl->data + dl->byte_offset;
    char *base = data;
    int64_t offset = 0, span = 0;
    int empty = 0;
    for (int i = 0; i < nd; i++) {
        empty |= dl->shape[i] == 0;
    }
    if (!empty) {
        int64_t lo = 0, hi = 0;
        for (int i = 0; i < nd; i++) {
            int64_t s = strides[i], n = dl->shape[i];
            if (s < 0) {
                lo += (n - 1) * s;
            } else {
                hi += (n - 1) * s;
            }
        }
        base = data + lo * itemsize;
        offset = -lo;
        span = (hi - lo + 1) * itemsize;
    }
    /* From here on the managed tensor is ours: the owner deletes it. */
    PyObject *owner = PyCapsule_New(p, "pylucid_dlpack_owner", dlpack_owner_destructor);
    if (owner == NULL) {
        return NULL; /* the capsule is still the producer's */
    }
    if ((versioned && PyCapsule_SetContext(owner, (void *)1)) ||
        PyCapsule_SetName(capsule, versioned ? "used_dltensor_versioned" : "used_dltensor")) {
        PyCapsule_SetDestructor(owner, NULL); /* not ours after all */
        Py_DECREF(owner);
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_BufferError, "pylucid.from_dlpack: could not take ownership of the DLPack capsule");
        }
        return NULL;
    }
    lucid_tensor_info info;
    int rc = lucid_tensor_borrow(base, span, (int32_t)code, nd, dl->shape, strides, offset, readonly, token, &info);
    if (rc) {
        Py_DECREF(owner); /* the producer's deleter runs */
        return status_error(rc);
    }
    int64_t meta[2 + LUCID_MAX_DIMS];
    meta[0] = info.handle;
    meta[1] = (int64_t)(info.dtype & 0xFF) | ((int64_t)info.ndim << 8) |
              (info.requires_grad ? LUCID_META_REQUIRES_GRAD : 0) | (info.pending ? LUCID_META_PENDING : 0);
    for (int i = 0; i < info.ndim; i++) {
        meta[2 + i] = info.shape[i];
    }
    PyObject *t = from_meta(meta);
    if (t == NULL) {
        Py_DECREF(owner);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, t, owner);
    Py_DECREF(t);
    Py_DECREF(owner);
    return out;
}

/* init(tensor_type, by_code, state, raise_status, drain, fallback_binary, fallback_reduce, kinds):
 * kinds is a bytes object, one byte per op id: 'b' a binary op, 'r' a
 * reduction, anything else an op these calls do not take. */
static PyObject *hot_init(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *tp, *codes, *st, *raiser, *drainer, *fb, *fr;
    const char *kinds;
    Py_ssize_t nkinds;
    if (!PyArg_ParseTuple(args, "OOOOOOOy#", &tp, &codes, &st, &raiser, &drainer, &fb, &fr, &kinds, &nkinds)) {
        return NULL;
    }
    if (!PyType_Check(tp) || !PyTuple_Check(codes) || nkinds > MAX_OPS) {
        PyErr_SetString(PyExc_TypeError, "init(tensor_type, by_code tuple, ..., kinds of at most 1024 ops)");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)tp, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "tensor type has no tp_alloc");
        }
        return NULL;
    }
    set_ref((PyObject **)&tensor_type, tp);
    tensor_alloc = alloc;
    set_ref(&by_code, codes);
    set_ref(&state, st);
    set_ref(&raise_status, raiser);
    set_ref(&drain, drainer);
    set_ref(&fallback_binary, fb);
    set_ref(&fallback_reduce, fr);
    memcpy(op_kinds, kinds, (size_t)nkinds);
    n_ops = (int32_t)nkinds;
    Py_RETURN_NONE;
}

static PyMethodDef hot_methods[] = {
    {"init", hot_init, METH_VARARGS, "Registers the Python side (called once by pylucid.tensor)."},
    {"binary", (PyCFunction)(void (*)(void))hot_binary, METH_FASTCALL | METH_KEYWORDS,
     "binary(op, a, b): the op on two Tensors (others: the Python path)."},
    {"reduce_all", hot_reduce_all, METH_VARARGS, "reduce_all(op, a, keepdim): a one-output reduction over all dims."},
    {"grad", hot_grad, METH_O, "grad(t): the accumulated gradient of t, or None."},
    {"backward_run", hot_backward_run, METH_O,
     "backward_run(t): the common backward call; None, or a Run stopped at a Python Function."},
    {"backward_grad", hot_backward_grad, METH_VARARGS,
     "backward_grad(t, g, flags): t.backward(g), g a Tensor or ndarray; None, a Run, or NotImplemented."},
    {"grad_run", hot_grad_run, METH_VARARGS,
     "grad_run(outputs, grad_outputs, inputs, flags): autograd.grad's common forms (a tuple, a Run or NotImplemented)."},
    {"from_ndarray", hot_from_ndarray, METH_O, "from_ndarray(arr): a Tensor lending arr's memory, or None."},
    {"return_lent", hot_return_lent, METH_O, "return_lent(tokens): Python's drain hands back lend_ndarray's tokens."},
    {"lent_owners", hot_lent_owners, METH_NOARGS, "lent_owners(): the owners of the arrays lent from C still out."},
    {"set_ndarray", hot_set_ndarray, METH_VARARGS, "set_ndarray(probe, data, dtypes, borrowed): see _hot.c."},
    {"set_grad", hot_set_grad, METH_VARARGS, "set_grad(t, g): t.grad = g (a Tensor or None)."},
    {"flush", hot_flush, METH_NOARGS, "Releases the handles of dropped tensors waiting in the batch."},
    {"pending", hot_pending, METH_NOARGS, "How many dropped tensors' handles wait in the batch."},
    {"gc_started", hot_gc_started, METH_NOARGS, "Called as each collection starts (gc.callbacks)."},
    {"set_out_desc", hot_set_out_desc, METH_VARARGS, "set_out_desc(fn, ndarray): NumPy out= descriptors."},
    {"set_mode", hot_set_mode, METH_O, "set_mode(m): the calling thread's state.mode is now m."},
    {"set_forward", hot_set_forward, METH_O, "set_forward(n): forward-mode levels open (the Python path runs ops)."},
    {"set_pinned", hot_set_pinned, METH_O, "set_pinned(d): where records the library may still need wait."},
    {"release", hot_release, METH_O, "release(t): lets go of t's handle as dropping t would (t._h becomes 0)."},
    {"mark_forked", hot_mark_forked, METH_NOARGS, "Stops all calls into the library (this is a forked child)."},
    {"dlpack_take", hot_dlpack_take, METH_O,
     "dlpack_take(capsule): (address of the managed tensor, versioned); renames the capsule \"used_...\"."},
    {"dlpack_borrow", hot_dlpack_borrow, METH_VARARGS,
     "dlpack_borrow(capsule, token, codes): (tensor, owner) for a CPU capsule of a known dtype, else None."},
    {"dlpack_capsule", hot_dlpack_capsule, METH_VARARGS,
     "dlpack_capsule(managed, versioned): a DLPack capsule owning the managed tensor at that address."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef hot_module = {
    PyModuleDef_HEAD_INIT, "pylucid._hot", "pylucid's per-call hot path in C (see _hot.c).", -1, hot_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__hot(void) {
    PyObject *m = PyModule_Create(&hot_module);
    if (m == NULL) {
        return NULL;
    }
    mode_name = PyUnicode_InternFromString("mode");
    run_type = (PyTypeObject *)PyType_FromSpec(&run_spec);
    if (run_type == NULL || PyModule_AddObject(m, "Run", (PyObject *)run_type) < 0) {
        Py_XDECREF(run_type);
        run_type = NULL;
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(run_type); /* the module's reference was stolen; keep ours */
    PyObject *base = PyType_FromSpec(&tensor_spec);
    if (mode_name == NULL || base == NULL || PyModule_AddObject(m, "TensorBase", base) < 0) {
        Py_XDECREF(base);
        Py_DECREF(m);
        return NULL;
    }
    op_type = (PyTypeObject *)PyType_FromSpec(&op_spec);
    if (op_type == NULL || PyModule_AddObject(m, "Op", (PyObject *)op_type) < 0) {
        Py_XDECREF(op_type);
        op_type = NULL;
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(op_type);
    binary_func = PyObject_GetAttrString(m, "binary");
    if (binary_func == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    pthread_atfork(NULL, NULL, mark_forked);
    return m;
}
