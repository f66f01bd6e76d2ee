/* backward and autograd.grad's common forms in C, and Run: the owner of a
 * backward run stopped at a Python autograd.Function. */
#include "hot.h"

/* Run: owns a backward run handle from the moment the library returns it, so
 * that nothing (not even a KeyboardInterrupt between two bytecodes) can drop
 * it without releasing it. close() releases it early; the handle is h. */
typedef struct {
    PyObject_HEAD
    int64_t h;
} RunObject;

PyTypeObject *run_type;

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

PyType_Spec run_spec = {
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
PyObject *hot_backward_grad(PyObject *mod, PyObject *args) {
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
PyObject *hot_grad_run(PyObject *mod, PyObject *args) {
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


/* grad(t): t's accumulated gradient, or None. */
PyObject *hot_grad(PyObject *mod, PyObject *t) {
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
PyObject *hot_backward_run(PyObject *mod, PyObject *t) {
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
PyObject *hot_set_grad(PyObject *mod, PyObject *args) {
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

/* ---- NodeBase: the C base type of pylucid's autograd nodes (Tensor.grad_fn) ----
 * It owns a node handle from the moment the library hands it out, so that
 * nothing can drop it unreleased (a node keeps its whole graph alive). */
typedef struct {
    PyObject_HEAD
    long long h;
    PyObject *weaklist;
} NodeObject;

PyTypeObject *node_type; /* pylucid.tensor.Node, a subclass (init) */
static allocfunc node_alloc;

static void node_dealloc(PyObject *self) {
    NodeObject *n = (NodeObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    if (n->weaklist != NULL) {
        PyObject_ClearWeakRefs(self);
    }
    if (n->h != 0 && !forked) {
        lucid_release(n->h);
    }
    n->h = 0;
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyMemberDef node_members[] = {
    {"_h", T_LONGLONG, offsetof(NodeObject, h), READONLY, "the node handle"},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(NodeObject, weaklist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot node_slots[] = {
    {Py_tp_dealloc, (void *)node_dealloc},
    {Py_tp_members, node_members},
    {Py_tp_doc, (void *)"The C part of an autograd node: its handle, released when the node is dropped."},
    {0, NULL},
};

PyType_Spec node_spec = {
    "pylucid._hot.NodeBase", sizeof(NodeObject), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, node_slots,
};

int set_node_type(PyObject *tp) {
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)tp, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "node type has no tp_alloc");
        }
        return -1;
    }
    set_ref((PyObject **)&node_type, tp);
    node_alloc = alloc;
    return 0;
}

/* A new Node owning handle h (0: None); on failure h is released. */
static PyObject *new_node(int64_t h) {
    if (h == 0) {
        Py_RETURN_NONE;
    }
    NodeObject *n = node_alloc != NULL ? (NodeObject *)node_alloc(node_type, 0) : NULL;
    if (n == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "pylucid: no node type registered");
        }
        lucid_release(h);
        return NULL;
    }
    n->h = h;
    return (PyObject *)n;
}

/* grad_fn(t): t's node, or None for a leaf. */
PyObject *hot_grad_fn(PyObject *mod, PyObject *t) {
    (void)mod;
    if (forked) {
        return fork_error();
    }
    if (tensor_type == NULL || !PyObject_TypeCheck(t, tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "grad_fn() expects a pylucid.Tensor");
        return NULL;
    }
    int64_t h = 0;
    int rc = lucid_grad_fn(((TensorBase *)t)->h, &h);
    return rc ? status_error(rc) : new_node(h);
}

/* node_next(node): next_functions, a tuple of (Node or None, output number). */
PyObject *hot_node_next(PyObject *mod, PyObject *node) {
    (void)mod;
    if (forked) {
        return fork_error();
    }
    if (node_type == NULL || !PyObject_TypeCheck(node, node_type)) {
        PyErr_SetString(PyExc_TypeError, "node_next() expects a pylucid autograd node");
        return NULL;
    }
    int64_t small_nodes[16], *nodes = small_nodes;
    int32_t small_outs[16], *outs = small_outs, cap = 16, count = 0;
    int rc;
    for (;;) {
        rc = lucid_node_next(((NodeObject *)node)->h, nodes, outs, cap, &count);
        if (rc || count <= cap) {
            break;
        }
        /* nothing was handed out: retry with room for all */
        if (nodes != small_nodes) {
            PyMem_Free(nodes);
            PyMem_Free(outs);
        }
        cap = count;
        nodes = PyMem_Malloc((size_t)cap * sizeof *nodes);
        outs = PyMem_Malloc((size_t)cap * sizeof *outs);
        if (nodes == NULL || outs == NULL) {
            PyMem_Free(nodes);
            PyMem_Free(outs);
            return PyErr_NoMemory();
        }
    }
    PyObject *r = NULL;
    if (rc) {
        status_error(rc);
        goto done;
    }
    /* Every handle is owned as soon as it is wrapped; the unwrapped rest is
     * released on failure. */
    int32_t i = 0;
    r = PyTuple_New(count);
    for (; r != NULL && i < count; i++) {
        PyObject *n = new_node(nodes[i]);
        PyObject *pair = n == NULL ? NULL : Py_BuildValue("(Ni)", n, (int)outs[i]);
        if (pair == NULL) {
            Py_CLEAR(r);
            i++;
            break;
        }
        PyTuple_SetItem(r, i, pair);
    }
    for (; r == NULL && i < count; i++) {
        if (nodes[i] != 0) {
            lucid_release(nodes[i]);
        }
    }
done:
    if (nodes != small_nodes) {
        PyMem_Free(nodes);
        PyMem_Free(outs);
    }
    return r;
}

/* Tensors for n gradient handles (0: None), each owned as soon as it is
 * wrapped: a list, or NULL with every handle not yet owned released. */
static PyObject *grad_list(const int64_t *hs, int32_t n) {
    PyObject *l = PyList_New(n);
    int32_t i = 0;
    for (; l != NULL && i < n; i++) {
        PyObject *g = hs[i] == 0 ? Py_NewRef(Py_None) : tensor_from_handle(hs[i], NULL);
        if (g == NULL) {
            Py_CLEAR(l);
            i++;
            break;
        }
        PyList_SetItem(l, i, g);
    }
    for (; l == NULL && i < n; i++) {
        if (hs[i] != 0) {
            lucid_release(hs[i]);
        }
    }
    return l;
}

/* backward_next(run): runs a started backward until it is done (None) or
 * a Python Function must run: (its id, its output gradients as a list of
 * Tensors or None, whether to free its saved state afterwards). */
PyObject *hot_backward_next(PyObject *mod, PyObject *run) {
    (void)mod;
    if (forked) {
        return fork_error();
    }
    long long h = PyLong_AsLongLong(run);
    if (h == -1 && PyErr_Occurred()) {
        return NULL;
    }
    int64_t fid = 0, small[64], *grads = small;
    int32_t cap = 64, n = 0, release = 0;
    int rc;
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        rc = lucid_backward_next(h, &fid, grads, cap, &n, &release);
        Py_END_ALLOW_THREADS
        if (!(rc == LUCID_EVALUE && n > cap)) {
            break;
        }
        if (grads != small) { /* too small: the function waits for a retry with room for all */
            PyMem_Free(grads);
        }
        cap = n;
        if ((grads = PyMem_Malloc((size_t)cap * sizeof *grads)) == NULL) {
            return PyErr_NoMemory();
        }
    }
    PyObject *r = NULL;
    if (rc) {
        status_error(rc);
    } else if (fid == 0) {
        r = Py_NewRef(Py_None);
    } else {
        PyObject *l = grad_list(grads, n);
        r = l == NULL ? NULL : Py_BuildValue("(LNO)", (long long)fid, l, release ? Py_True : Py_False);
    }
    if (grads != small) {
        PyMem_Free(grads);
    }
    return r;
}

/* backward_result(run, n): the gradients of a finished grad() run's n
 * inputs, a list of Tensors or None (unused inputs). */
PyObject *hot_backward_result(PyObject *mod, PyObject *args) {
    (void)mod;
    long long h;
    int n;
    if (!PyArg_ParseTuple(args, "Li", &h, &n)) {
        return NULL;
    }
    if (forked) {
        return fork_error();
    }
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "backward_result: negative count");
        return NULL;
    }
    int64_t small[MAX_GRAD_ARGS], *hs = n <= MAX_GRAD_ARGS ? small : PyMem_Calloc((size_t)n, sizeof *hs);
    if (hs == NULL) {
        return PyErr_NoMemory();
    }
    int rc = lucid_backward_result(h, hs, n);
    PyObject *r = rc ? status_error(rc) : grad_list(hs, n);
    if (hs != small) {
        PyMem_Free(hs);
    }
    return r;
}
