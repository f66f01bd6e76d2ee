/* pylucid._hot's module: what init() registers (the Python side the C paths
 * call back into), the setters the Python side calls, and the method table.
 * The rooms are listed in hot.h. */
#include "hot.h"

/* Registered by init(). */
PyTypeObject *tensor_type;  /* pylucid.Tensor (a subclass of TensorBase) */
allocfunc tensor_alloc;
PyObject *by_code;          /* tuple: dtype code -> pylucid.dtype */
PyObject *state;            /* the per-thread call state (its .mode) */
PyObject *mode_name;
PyObject *drain;            /* drain(): forget what the library handed back */
PyObject *fallback_binary;  /* binary(op, a, b) in Python */
PyObject *fallback_reduce;  /* reduce(op, a, None, keepdim) in Python */
PyObject *pinned;           /* dict: function id -> record kept for the library (set_pinned) */
PyObject *out_desc_address; /* out_desc_address(ndarray): address of a cached lucid_out */
PyTypeObject *ndarray_type;  /* numpy.ndarray */
int forward_levels;         /* forward-mode levels open in any thread (set_forward): then the
                                      Python path runs every op, to push tangents (autograd.jvp) */

/* What each lucid_op id is (hot.h, OP_BINARY). */
char op_kinds[MAX_OPS];
int32_t n_ops;

volatile int forked;
static PyObject *fork_message; /* _lib.FORK_MESSAGE */

PyObject *fork_error(void) {
    PyErr_SetObject(PyExc_RuntimeError, fork_message != NULL ? fork_message : Py_None);
    return NULL;
}

static void mark_forked(void) { forked = 1; }

/* *slot = v, keeping a reference to v and dropping the old one. */
void set_ref(PyObject **slot, PyObject *v) {
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

/* set_pinned(d): the dict in which records still needed by the library wait. */
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



static PyObject *hot_mark_forked(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    forked = 1;
    Py_RETURN_NONE;
}


/* init(tensor_type, node_type, by_code, state, drain, fallback_binary,
 * fallback_reduce, kinds, fork_message): kinds is a bytes object, one byte
 * per op id: 'b' a binary op, 'r' a reduction, anything else an op these
 * calls do not take. */
static PyObject *hot_init(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *tp, *ntp, *codes, *st, *drainer, *fb, *fr, *fmsg;
    const char *kinds;
    Py_ssize_t nkinds;
    if (!PyArg_ParseTuple(args, "OOOOOOOy#U", &tp, &ntp, &codes, &st, &drainer, &fb, &fr, &kinds, &nkinds, &fmsg)) {
        return NULL;
    }
    if (!PyType_Check(tp) || !PyType_Check(ntp) || !PyTuple_Check(codes) || nkinds > MAX_OPS) {
        PyErr_SetString(PyExc_TypeError, "init(tensor_type, node_type, by_code tuple, ..., kinds of at most 1024 ops)");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)tp, Py_tp_alloc);
    if (alloc == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "tensor type has no tp_alloc");
        }
        return NULL;
    }
    if (set_node_type(ntp) < 0) {
        return NULL;
    }
    set_ref((PyObject **)&tensor_type, tp);
    tensor_alloc = alloc;
    set_ref(&by_code, codes);
    set_ref(&state, st);
    set_ref(&drain, drainer);
    set_ref(&fallback_binary, fb);
    set_ref(&fallback_reduce, fr);
    set_ref(&fork_message, fmsg);
    memcpy(op_kinds, kinds, (size_t)nkinds);
    n_ops = (int32_t)nkinds;
    Py_RETURN_NONE;
}

static PyMethodDef hot_methods[] = {
    {"init", hot_init, METH_VARARGS, "Registers the Python side (called once by pylucid.tensor)."},
    {"binary", (PyCFunction)(void (*)(void))hot_binary, METH_FASTCALL | METH_KEYWORDS,
     "binary(op, a, b): the op on two Tensors (others: the Python path)."},
    {"reduce_all", hot_reduce_all, METH_VARARGS, "reduce_all(op, a, keepdim): a one-output reduction over all dims."},
    {"call", (PyCFunction)(void (*)(void))hot_call, METH_FASTCALL,
     "call(op, ins, attrs, out, nout, nograd): any op; its results owned before anything can raise."},
    {"lent", (PyCFunction)(void (*)(void))hot_lent, METH_FASTCALL,
     "lent(op, winners, ins, attrs, outs, codes): an op on other tensors' memory, into outs (lucid_op_lent)."},
    {"set_call_error_hook", hot_set_call_error_hook, METH_O,
     "set_call_error_hook(fn): fn(op, args, kwargs, error) rewords an op call's TypeError (or returns None)."},
    {"lent_binary", (PyCFunction)(void (*)(void))hot_lent_binary, METH_FASTCALL,
     "lent_binary(op, winners, a, b, codes, empty_like, mask_kwargs): a binary op's value (and mask) into empty_like(a), or None."},
    {"call_jvp", (PyCFunction)(void (*)(void))hot_call_jvp, METH_FASTCALL,
     "call_jvp(op, ins, tangents, attrs, nout): (outputs, tangents) of forward mode's call."},
    {"detach", hot_detach, METH_O, "detach(t): a Tensor sharing t's memory outside any graph."},
    {"view", hot_view, METH_O, "view(t): (v, data, strides, readonly), v a Tensor keeping t's memory."},
    {"tensor_new", hot_tensor_new, METH_VARARGS, "tensor_new(code, shape): a new zero-filled Tensor."},
    {"scalar", hot_scalar, METH_O, "scalar(x): the weak 0-d Tensor of a Python bool, int (int64) or float."},
    {"scalar_int", hot_scalar_int, METH_VARARGS, "scalar_int(m, exp): the weak 0-d Tensor of m * 2**exp."},
    {"borrow", hot_borrow, METH_VARARGS,
     "borrow(base, nbytes, code, shape, strides, offset, readonly, token): a Tensor over lent memory."},
    {"adopt", hot_adopt, METH_VARARGS, "adopt(t, src): t takes over src's handle, letting go of its own."},
    {"grad_fn", hot_grad_fn, METH_O, "grad_fn(t): t's autograd node, or None."},
    {"node_next", hot_node_next, METH_O, "node_next(node): next_functions, ((Node or None, output), ...)."},
    {"backward_next", hot_backward_next, METH_O,
     "backward_next(run handle): None when done, else (function id, gradients, release)."},
    {"backward_result", hot_backward_result, METH_VARARGS, "backward_result(run handle, n): the inputs' gradients."},
    {"dlpack_export", hot_dlpack_export, METH_VARARGS,
     "dlpack_export(t, versioned, copied): a DLPack capsule sharing t's memory."},
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
    PyObject *node_base = PyType_FromSpec(&node_spec);
    if (node_base == NULL || PyModule_AddObject(m, "NodeBase", node_base) < 0) {
        Py_XDECREF(node_base);
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
