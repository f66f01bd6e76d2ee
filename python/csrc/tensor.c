/* TensorBase, the C base type of pylucid.Tensor: its fields, the release of
 * its handle (small graph-free tensors in batches of DEAD_CAP, one call to
 * lucid_release_many, with no Python frame), the autograd.Function record
 * its traverse reports to Python's collector, and from_meta: the Tensor for
 * a result a *_meta call described, which owns the handle from then on. */
#include "hot.h"

/* Bumped as each collection starts (gc_started): a tensor gives the same
 * answer to every traversal of one collection, even if another thread
 * changes the graph meanwhile. */
unsigned long long gc_epoch = 1;

/* Handles of dropped small, graph-free tensors, released DEAD_CAP at a time. */
int64_t dead[DEAD_CAP];
int ndead;

void flush_dead(void) {
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
void release_handle(TensorBase *t) {
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

PyType_Spec tensor_spec = {
    "pylucid._hot.TensorBase", sizeof(TensorBase), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    tensor_slots,
};


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
PyObject *from_meta_like(const int64_t *m, PyObject *like) {
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

PyObject *from_meta(const int64_t *m) { return from_meta_like(m, NULL); }

void info_meta(const lucid_tensor_info *info, int64_t *meta) {
    meta[0] = info->handle;
    meta[1] = (int64_t)(info->dtype & 0xFF) | ((int64_t)info->ndim << 8) |
              (info->requires_grad ? LUCID_META_REQUIRES_GRAD : 0) | (info->pending ? LUCID_META_PENDING : 0);
    for (int i = 0; i < info->ndim && i < LUCID_MAX_DIMS; i++) {
        meta[2 + i] = info->shape[i];
    }
}

PyObject *from_info(const lucid_tensor_info *info, PyObject *like) {
    int64_t meta[LUCID_META_LEN];
    info_meta(info, meta);
    return from_meta_like(meta, like);
}

/* The Tensor for a call that filled info and returned rc (the calls that
 * make one tensor: lucid_detach, lucid_tensor_new, lucid_scalar, ...). */
static PyObject *info_result(int rc, const lucid_tensor_info *info, PyObject *like) {
    if (rc) {
        return status_error(rc);
    }
    return from_info(info, like);
}

static int tensor_arg(PyObject *t, const char *what) {
    if (tensor_type == NULL || !PyObject_TypeCheck(t, tensor_type)) {
        PyErr_Format(PyExc_TypeError, "%s() expects a pylucid.Tensor", what);
        return -1;
    }
    return 0;
}

/* detach(t): a Tensor sharing t's memory outside any graph. */
PyObject *hot_detach(PyObject *mod, PyObject *t) {
    (void)mod;
    if (forked || tensor_arg(t, "detach") < 0) {
        return forked ? fork_error() : NULL;
    }
    lucid_tensor_info info;
    int rc = lucid_detach(((TensorBase *)t)->h, &info);
    return info_result(rc, &info, t);
}

/* view(t): (v, data, strides, readonly): v a Tensor sharing t's memory
 * outside any graph, which keeps that memory whatever becomes of t (an
 * exposed NumPy view holds v), data its address, strides in elements. */
PyObject *hot_view(PyObject *mod, PyObject *t) {
    (void)mod;
    if (forked || tensor_arg(t, "view") < 0) {
        return forked ? fork_error() : NULL;
    }
    lucid_tensor_info info;
    int rc = lucid_tensor_view(((TensorBase *)t)->h, &info);
    PyObject *v = info_result(rc, &info, t);
    if (v == NULL) {
        return NULL;
    }
    PyObject *strides = PyTuple_New(info.ndim);
    for (int i = 0; strides != NULL && i < info.ndim; i++) {
        PyObject *s = PyLong_FromLongLong(info.strides[i]);
        if (s == NULL) {
            Py_CLEAR(strides);
            break;
        }
        PyTuple_SetItem(strides, i, s);
    }
    PyObject *r = strides == NULL ? NULL : Py_BuildValue("(NKNO)", v, (unsigned long long)(uintptr_t)info.data,
                                                          strides, info.readonly ? Py_True : Py_False);
    if (r == NULL && strides == NULL) {
        Py_DECREF(v);
    }
    return r;
}

/* tensor_new(code, shape): a new zero-filled Tensor. */
PyObject *hot_tensor_new(PyObject *mod, PyObject *args) {
    (void)mod;
    if (forked) {
        return fork_error();
    }
    int code;
    PyObject *shape;
    int64_t dims[LUCID_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "iO", &code, &shape)) {
        return NULL;
    }
    int nd = ints_arg(shape, dims, LUCID_MAX_DIMS, "tensor_new: shape");
    if (nd < 0) {
        return NULL;
    }
    lucid_tensor_info info;
    int rc = lucid_tensor_new(code, nd, dims, &info);
    return info_result(rc, &info, NULL);
}

/* scalar(x): the weak 0-d Tensor of a Python bool, float or int within
 * int64 (docs/dtypes.md). */
PyObject *hot_scalar(PyObject *mod, PyObject *x) {
    (void)mod;
    if (forked) {
        return fork_error();
    }
    lucid_tensor_info info;
    int rc;
    if (PyBool_Check(x)) {
        rc = lucid_scalar(LUCID_BOOL, 0.0, x == Py_True, &info);
    } else if (PyLong_Check(x)) {
        long long v = PyLong_AsLongLong(x);
        if (v == -1 && PyErr_Occurred()) {
            return NULL;
        }
        rc = lucid_scalar_int(v, 0, &info);
    } else {
        double v = PyFloat_AsDouble(x);
        if (v == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
        rc = lucid_scalar(LUCID_FLOAT64, v, 0, &info);
    }
    return info_result(rc, &info, NULL);
}

/* scalar_int(m, exp): the weak 0-d Tensor of the Python int m * 2**exp
 * (lucid_scalar_int). */
PyObject *hot_scalar_int(PyObject *mod, PyObject *args) {
    (void)mod;
    if (forked) {
        return fork_error();
    }
    long long m;
    int exp;
    if (!PyArg_ParseTuple(args, "Li", &m, &exp)) {
        return NULL;
    }
    lucid_tensor_info info;
    int rc = lucid_scalar_int(m, exp, &info);
    return info_result(rc, &info, NULL);
}

/* borrow(base, nbytes, code, shape, strides, offset, readonly, token): a
 * Tensor over memory the caller lends (lucid_tensor_borrow). */
PyObject *hot_borrow(PyObject *mod, PyObject *args) {
    (void)mod;
    if (forked) {
        return fork_error();
    }
    unsigned long long base;
    long long nbytes, offset, token;
    int code, readonly;
    PyObject *shape, *strides;
    int64_t dims[LUCID_MAX_DIMS], st[LUCID_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "KLiOOLpL", &base, &nbytes, &code, &shape, &strides, &offset, &readonly, &token)) {
        return NULL;
    }
    int nd = ints_arg(shape, dims, LUCID_MAX_DIMS, "borrow: shape");
    int ns = nd < 0 ? -1 : ints_arg(strides, st, LUCID_MAX_DIMS, "borrow: strides");
    if (nd < 0 || ns < 0) {
        return NULL;
    }
    if (ns != nd) {
        PyErr_SetString(PyExc_ValueError, "borrow: shape and strides differ in length");
        return NULL;
    }
    lucid_tensor_info info;
    int rc = lucid_tensor_borrow((void *)(uintptr_t)base, nbytes, code, nd, dims, st, offset, readonly, token, &info);
    return info_result(rc, &info, NULL);
}

/* from_handle(h): a Tensor owning handle h (released if that fails). */
PyObject *tensor_from_handle(int64_t h, PyObject *like) {
    lucid_tensor_info info;
    int rc = lucid_tensor_info_get(h, &info);
    if (rc) {
        PyObject *r = status_error(rc);
        lucid_release(h);
        return r;
    }
    return from_info(&info, like);
}

/* adopt(t, src): t takes over src's handle and fields (src is left empty),
 * letting go of its own handle as dropping t would: Tensor.__init__ of a
 * tensor initialised before, in one step that nothing can interrupt. */
PyObject *hot_adopt(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t, *src;
    if (!PyArg_ParseTuple(args, "OO", &t, &src) || tensor_arg(t, "adopt") < 0 || tensor_arg(src, "adopt") < 0) {
        return NULL;
    }
    if (t == src) {
        Py_RETURN_NONE;
    }
    TensorBase *a = (TensorBase *)t, *b = (TensorBase *)src;
    PyObject *old_dtype = a->dtype, *old_shape = a->shape;
    release_handle(a);
    a->h = b->h;
    a->dtype = b->dtype;
    a->shape = b->shape;
    a->rg = b->rg;
    a->fn = b->fn;
    b->h = 0;
    b->dtype = NULL;
    b->shape = NULL;
    b->fn = NULL;
    Py_XDECREF(old_dtype);
    Py_XDECREF(old_shape);
    Py_RETURN_NONE;
}

int is_tensor(PyObject *o) { return tensor_type != NULL && Py_TYPE(o) == tensor_type; }

PyObject *hot_flush(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    flush_dead();
    Py_RETURN_NONE;
}

PyObject *hot_pending(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyLong_FromLong(ndead);
}


PyObject *hot_gc_started(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    gc_epoch++;
    Py_RETURN_NONE;
}

/* release(t): lets go of t's handle (and Function record) as dropping t
 * would, leaving t empty (_h == 0). */
PyObject *hot_release(PyObject *mod, PyObject *t) {
    (void)mod;
    if (tensor_type == NULL || !PyObject_TypeCheck(t, tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "release() expects a pylucid.Tensor");
        return NULL;
    }
    release_handle((TensorBase *)t);
    Py_RETURN_NONE;
}
