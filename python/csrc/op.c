/* ops.Op: the vectorcall type of pylucid's public ops. */
#include "hot.h"

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

PyTypeObject *op_type;
PyObject *binary_func;   /* this module's binary */

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

/* Python's explain(op, args, kwargs, error): called when an op's call
 * raised TypeError, it raises the error in the user's words (the public
 * function and argument, docs/semantics.md) or returns None to keep the
 * original. Set by set_call_error_hook. */
static PyObject *call_error_hook;

PyObject *hot_set_call_error_hook(PyObject *mod, PyObject *hook) {
    (void)mod;
    PyObject *old = call_error_hook;
    Py_INCREF(hook);
    call_error_hook = hook;
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

/* After a failed call (NULL, error set): lets the hook reword a TypeError. */
static PyObject *explain_call_error(OpObject *o, PyObject *const *call, Py_ssize_t nargs, PyObject *kwnames) {
    if (call_error_hook == NULL || !PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    PyObject *args = PyTuple_New(nargs), *kw = PyDict_New(), *hook = call_error_hook, *r = NULL;
    Py_INCREF(hook); /* the hook may be replaced while it runs */
    if (args != NULL && kw != NULL) {
        int ok = 1;
        for (Py_ssize_t i = 0; i < nargs; i++) {
            Py_INCREF(call[i]);
            PyTuple_SetItem(args, i, call[i]);
        }
        for (Py_ssize_t j = 0; j < nkw && ok; j++) {
            ok = PyDict_SetItem(kw, PyTuple_GetItem(kwnames, j), call[nargs + j]) == 0;
        }
        if (ok) r = PyObject_CallFunctionObjArgs(hook, (PyObject *)o, args, kw, value ? value : Py_None, NULL);
    }
    Py_DECREF(hook);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    if (r != NULL) { /* None: the original error stands */
        Py_DECREF(r);
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    if (PyErr_ExceptionMatches(PyExc_TypeError)) { /* the reworded error, its cause the original */
        PyObject *t2, *v2, *tb2;
        PyErr_Fetch(&t2, &v2, &tb2);
        PyErr_NormalizeException(&t2, &v2, &tb2);
        if (v2 != NULL && value != NULL) {
            PyException_SetContext(v2, value); /* steals value */
            value = NULL;
        }
        PyErr_Restore(t2, v2, tb2);
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return NULL;
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
    PyObject *r = op_call_func(o, args, nargs, kwnames);
    return r != NULL ? r : explain_call_error(o, args, nargs, kwnames);
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

PyType_Spec op_spec = {
    "pylucid.ops.Op", sizeof(OpObject), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    op_slots,
};
