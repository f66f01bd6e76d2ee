/* The op calls: binary (the fast path of every binary op, from argument
 * check to result object), reduce_all, and the mode and status helpers they
 * share. Calls release the GIL around the library (as cffi does), except
 * around an op with a small result (GIL_KEEP_ELEMS). Anything unusual goes
 * to the Python fallback registered with init(), which raises the same
 * errors. */
#include "hot.h"

/* The calling thread's mode, as its state.mode last set it (set_mode,
 * called by _state's setter); tl_mode_known is 0 until the thread's state
 * exists (reading state.mode creates it, and sets these). */
static _Thread_local int32_t tl_mode;
static _Thread_local int tl_mode_known;

int current_mode(int32_t *mode) {
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

/* set_mode(m): the calling thread's state.mode changed to m. */
PyObject *hot_set_mode(PyObject *mod, PyObject *v) {
    (void)mod;
    long m = PyLong_AsLong(v);
    if (m == -1 && PyErr_Occurred()) {
        return NULL;
    }
    tl_mode = (int32_t)m;
    tl_mode_known = 1;
    Py_RETURN_NONE;
}

PyObject *status_error(int rc) {
    PyObject *r = PyObject_CallFunction(raise_status, "i", rc);
    Py_XDECREF(r); /* raise_status always raises */
    return NULL;
}




/* The dims of a shape tuple into dims (room for LUCID_MAX_DIMS): their
 * count, or -1 for anything but a tuple of at most LUCID_MAX_DIMS ints. */
int shape_dims(PyObject *shape, int64_t *dims) {
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
int small_dims(const int64_t *da, int na, const int64_t *db, int nb) {
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
PyObject *binary_call(int32_t code, const int64_t *in, int keep, PyObject *like) {
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


/* The end of making a small temporary tensor in C (a number's scalar, a
 * copied or number gradient) by a call that returned rc and filled info:
 * rc's error raised, else *h the new handle, *temp its release in the batch
 * of dropped small tensors, and the buffer queue drained when the library
 * says items wait. Returns 1, or -1 with an exception set (nothing left
 * made). */
int small_temp(int rc, const lucid_tensor_info *info, int64_t *h, int64_t *temp) {
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
PyObject *hot_binary(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
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
PyObject *hot_reduce_all(PyObject *mod, PyObject *args) {
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
