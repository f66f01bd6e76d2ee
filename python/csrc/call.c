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

PyObject *last_error_message(void) {
    char small[512], *msg = small, *big = NULL;
    int n = lucid_errmsg(small, sizeof small);
    if (n >= (int)sizeof small && (big = PyMem_Malloc((size_t)n + 1)) != NULL) {
        lucid_errmsg(big, (size_t)n + 1);
        msg = big;
    }
    PyObject *s = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    PyMem_Free(big);
    return s;
}

/* Raises the library's error for status rc of the last call on this thread
 * (lucid_errmsg), as _lib.raise_status does, and returns NULL. The message
 * is read before anything can run Python code: a finalizer that ran first
 * and failed a call of its own would replace it. */
PyObject *status_error(int rc) {
    PyObject *s = last_error_message();
    PyObject *exc;
    switch (rc) {
    case LUCID_EVALUE:
        exc = PyExc_ValueError;
        break;
    case LUCID_ETYPE:
        exc = PyExc_TypeError;
        break;
    case LUCID_EOVERFLOW:
        exc = PyExc_OverflowError;
        break;
    case LUCID_ENOMEM:
        exc = PyExc_MemoryError;
        break;
    default: /* LUCID_ERUNTIME, LUCID_EPANIC and anything else */
        exc = PyExc_RuntimeError;
    }
    if (s != NULL) {
        PyErr_SetObject(exc, s);
        Py_DECREF(s);
    }
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
/* Describes out (an out= argument) in *desc, with shape and strides (room
 * for LUCID_MAX_DIMS + 1 each) as its arrays: an ndarray the C path does
 * not describe itself through the Python side's cached descriptor
 * (out_desc_address), copied (another thread may drop it from the cache
 * while the call runs). Returns 1, 0 when out is neither a Tensor nor an
 * ndarray, -1 with an exception set (out_desc's errors: a read-only array,
 * odd strides). */
static int describe_out(PyObject *out, lucid_out *desc, int64_t *shape, int64_t *strides) {
    if (is_tensor(out) || (tensor_type != NULL && PyObject_TypeCheck(out, tensor_type))) {
        memset(desc, 0, sizeof *desc);
        desc->handle = ((TensorBase *)out)->h;
        return 1;
    }
    if (ndarray_out(out, desc, shape, strides)) {
        return 1;
    }
    if (out_desc_address == NULL || ndarray_type == NULL || !PyObject_TypeCheck(out, ndarray_type)) {
        return 0;
    }
    PyObject *addr = PyObject_CallFunctionObjArgs(out_desc_address, out, NULL);
    if (addr == NULL) {
        return -1;
    }
    const lucid_out *d = (const lucid_out *)PyLong_AsVoidPtr(addr);
    Py_DECREF(addr);
    if (d == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_SystemError, "out_desc_address returned NULL");
        }
        return -1;
    }
    *desc = *d;
    int nd = d->ndim < 0 ? 0 : d->ndim > LUCID_MAX_DIMS ? LUCID_MAX_DIMS : d->ndim;
    memcpy(shape, d->shape, (size_t)nd * sizeof *shape);
    memcpy(strides, d->strides, (size_t)nd * sizeof *strides);
    desc->shape = shape;
    desc->strides = strides;
    return 1;
}

static PyObject *binary_out(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject *out,
                            const int64_t *in, int keep) {
    PyObject *op = args[0];
    lucid_out desc;
    int64_t shape[LUCID_MAX_DIMS + 1], strides[LUCID_MAX_DIMS + 1];
    const lucid_out *d = &desc;
    int described = describe_out(out, &desc, shape, strides);
    if (described <= 0) {
        return described < 0 ? NULL : binary_fallback(args, nargs, kwnames);
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

int ints_arg(PyObject *seq, int64_t *out, int cap, const char *what) {
    int list = PyList_Check(seq);
    if (!list && !PyTuple_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a tuple or list of ints", what);
        return -1;
    }
    Py_ssize_t n = list ? PyList_Size(seq) : PyTuple_Size(seq);
    if (n > cap) {
        PyErr_Format(PyExc_ValueError, "%s: at most %d values are supported, got %zd", what, cap, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = list ? PyList_GetItem(seq, i) : PyTuple_GetItem(seq, i); /* borrowed */
        out[i] = PyLong_AsLongLong(x);
        if (out[i] == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    return (int)n;
}

PyObject *type_name(PyObject *o) { return PyObject_GetAttrString((PyObject *)Py_TYPE(o), "__name__"); }

/* At most this many inputs, attributes and outputs of call() live on the
 * stack (more: the heap). */
#define CALL_STACK 8
#define CALL_ATTRS 72

/* Whether op inputs with these shapes (Tensors' shape tuples, NULL for an
 * absent input) broadcast to at most GIL_KEEP_ELEMS elements (small_dims
 * over all of them). */
static int small_inputs(PyObject *ins) {
    int64_t acc[LUCID_MAX_DIMS], dims[LUCID_MAX_DIMS], next[LUCID_MAX_DIMS];
    int na = 0;
    for (Py_ssize_t i = 0; i < PyTuple_Size(ins); i++) {
        PyObject *t = PyTuple_GetItem(ins, i);
        if (t == Py_None) {
            continue;
        }
        int nd = shape_dims(((TensorBase *)t)->shape, dims);
        if (nd < 0 || !small_dims(acc, na, dims, nd)) {
            return 0;
        }
        int m = nd > na ? nd : na; /* acc becomes the broadcast extents so far */
        for (int k = 1; k <= m; k++) {
            int64_t x = k <= na ? acc[na - k] : 1, y = k <= nd ? dims[nd - k] : 1;
            next[m - k] = x > y ? x : y;
        }
        memcpy(acc, next, (size_t)m * sizeof *acc);
        na = m;
    }
    return 1;
}

/* The outputs a successful call described in meta (nout blocks of
 * LUCID_META_LEN): the given out= object where there was one (given[i]
 * not NULL), else a new Tensor owning its handle (sharing like's shape
 * tuple where it can). One object for nout == 1, else a tuple. On failure
 * every handle not yet owned is released. */
static PyObject *call_results(const int64_t *meta, Py_ssize_t nout, PyObject *const *given, PyObject *like) {
    PyObject *objs[CALL_STACK], **o = objs, *r = NULL;
    if (nout > CALL_STACK && (o = PyMem_Calloc((size_t)nout, sizeof *o)) == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    for (Py_ssize_t i = 0; i < nout; i++) {
        if (given != NULL && given[i] != NULL) {
            o[i] = Py_NewRef(given[i]);
            continue;
        }
        o[i] = from_meta_like(meta + i * LUCID_META_LEN, like); /* owns, or released, its handle */
        if (o[i] == NULL) {
            for (Py_ssize_t j = i + 1; j < nout; j++) {
                if (given == NULL || given[j] == NULL) {
                    lucid_release(meta[j * LUCID_META_LEN]);
                }
            }
            for (Py_ssize_t j = 0; j < i; j++) {
                Py_DECREF(o[j]);
            }
            goto done;
        }
    }
    if (nout == 1) {
        r = o[0];
    } else if ((r = PyTuple_New(nout)) != NULL) {
        for (Py_ssize_t i = 0; i < nout; i++) {
            PyTuple_SetItem(r, i, o[i]);
        }
    } else {
        for (Py_ssize_t i = 0; i < nout; i++) {
            Py_DECREF(o[i]);
        }
    }
done:
    if (o != objs) {
        PyMem_Free(o);
    }
    return r;
release:
    for (Py_ssize_t j = 0; j < nout; j++) {
        if (given == NULL || given[j] == NULL) {
            lucid_release(meta[j * LUCID_META_LEN]);
        }
    }
    return NULL;
}

/* call(op, ins, attrs, out, nout, nograd): any op through lucid_op_n (and
 * the wait for the job a long reduction starts, which Ctrl-C cancels). ins:
 * a tuple of Tensors (None: an absent optional input); attrs: a sequence of
 * ints (lucid.h) or None; out: None, or the out= argument (a Tensor or
 * ndarray; a tuple of nout of them, or None, when nout > 1); nograd: record
 * no graph whatever the mode. Returns the result (nout == 1) or a tuple of
 * results, where out gave one that very object. Every result is owned by
 * its Python object before anything can raise (a signal's
 * KeyboardInterrupt included): nothing is ever leaked. */
PyObject *hot_call(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 6 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "call(op, ins tuple, attrs, out, nout, nograd)");
        return NULL;
    }
    if (forked) {
        return fork_error();
    }
    int32_t code, mode;
    long nout = PyLong_AsLong(args[4]);
    int nograd = PyObject_IsTrue(args[5]);
    if (op_code(args[0], &code) < 0 || (nout == -1 && PyErr_Occurred()) || nograd < 0 || current_mode(&mode) < 0) {
        return NULL;
    }
    if (nout < 1 || nout > CALL_STACK) {
        PyErr_Format(PyExc_ValueError, "call: %ld outputs", nout);
        return NULL;
    }
    if (nograd) {
        mode &= ~LUCID_MODE_GRAD;
    }
    PyObject *ins = args[1];
    Py_ssize_t nin = PyTuple_Size(ins);
    int64_t in[CALL_STACK], attrs[CALL_ATTRS];
    if (nin > CALL_STACK) {
        PyErr_Format(PyExc_ValueError, "call: %zd inputs", nin);
        return NULL;
    }
    PyObject *like = NULL;
    for (Py_ssize_t i = 0; i < nin; i++) {
        PyObject *x = PyTuple_GetItem(ins, i);
        if (x == Py_None) {
            in[i] = 0;
        } else if (tensor_type != NULL && PyObject_TypeCheck(x, tensor_type)) {
            in[i] = ((TensorBase *)x)->h;
            like = like != NULL ? like : x;
        } else {
            PyErr_Format(PyExc_TypeError, "call: input %zd is not a pylucid.Tensor", i);
            return NULL;
        }
    }
    int nattrs = args[2] == Py_None ? 0 : ints_arg(args[2], attrs, CALL_ATTRS, "call: attrs");
    if (nattrs < 0) {
        return NULL;
    }
    /* out=: described before any work (out_desc's errors leave nothing made) */
    /* out= entries are borrowed from a tuple this call owns: a list could
     * drop them (another thread, a signal handler) while the GIL is released. */
    PyObject *out = args[3], *given[CALL_STACK] = {NULL}, *outs_held = NULL;
    lucid_out descs[CALL_STACK];
    int64_t oshape[CALL_STACK][LUCID_MAX_DIMS + 1], ostrides[CALL_STACK][LUCID_MAX_DIMS + 1];
    int n_given = 0;
    if (out != Py_None) {
        if (nout == 1) {
            given[0] = out;
        } else {
            if (!(PyTuple_Check(out) || PyList_Check(out)) || PySequence_Size(out) != nout) {
                PyErr_Format(PyExc_TypeError, "out must be a tuple of %ld tensors or arrays", nout);
                return NULL;
            }
            if ((outs_held = PySequence_Tuple(out)) == NULL) {
                return NULL;
            }
            for (long i = 0; i < nout; i++) {
                PyObject *o = PyTuple_GetItem(outs_held, i); /* borrowed from outs_held */
                given[i] = o == Py_None ? NULL : o;
            }
        }
        for (long i = 0; i < nout; i++) {
            if (given[i] == NULL) {
                memset(&descs[i], 0, sizeof descs[i]);
                descs[i].dtype = -1; /* a fresh output */
                continue;
            }
            int r = describe_out(given[i], &descs[i], oshape[i], ostrides[i]);
            if (r <= 0) {
                if (r == 0) {
                    PyObject *name = type_name(given[i]);
                    if (name != NULL) {
                        PyErr_Format(PyExc_TypeError, "out must be a pylucid.Tensor or a numpy.ndarray, got %U", name);
                        Py_DECREF(name);
                    }
                }
                Py_XDECREF(outs_held);
                return NULL;
            }
        }
        n_given = (int)nout;
    }
    int64_t small_meta[2 * LUCID_META_LEN], *meta = small_meta;
    if (nout > 2 && (meta = PyMem_Malloc((size_t)nout * LUCID_META_LEN * sizeof *meta)) == NULL) {
        Py_XDECREF(outs_held);
        return PyErr_NoMemory();
    }
    int rc;
    NATIVE_CALL(small_inputs(ins), rc = lucid_op_n(code, in, (int32_t)nin, nattrs ? attrs : NULL, nattrs,
                                                         n_given ? descs : NULL, n_given,
                                                         mode | LUCID_MODE_INTERRUPTIBLE, meta));
    if (rc == LUCID_PENDING) {
        rc = await_job(meta);
    }
    PyObject *res = rc == 0 ? call_results(meta, nout, n_given ? given : NULL, like) : rc < 0 ? NULL : status_error(rc);
    if (meta != small_meta) {
        PyMem_Free(meta);
    }
    Py_XDECREF(outs_held);
    return res;
}

/* call_jvp(op, ins, tangents, attrs, nout): forward mode's call of op
 * (lucid_op_jvp): (outputs, their tangents), tuples of nout, a tangent None
 * where it is zero. ins and tangents: tuples of Tensors or None. Every
 * result is owned by its Python object before anything can raise. */
PyObject *hot_call_jvp(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 5 || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2]) ||
        PyTuple_Size(args[1]) != PyTuple_Size(args[2])) {
        PyErr_SetString(PyExc_TypeError, "call_jvp(op, ins tuple, tangents tuple of the same length, attrs, nout)");
        return NULL;
    }
    if (forked) {
        return fork_error();
    }
    int32_t code, mode;
    long nout = PyLong_AsLong(args[4]);
    if (op_code(args[0], &code) < 0 || (nout == -1 && PyErr_Occurred()) || current_mode(&mode) < 0) {
        return NULL;
    }
    Py_ssize_t nin = PyTuple_Size(args[1]);
    if (nout < 1 || nout > CALL_STACK || nin > CALL_STACK) {
        PyErr_Format(PyExc_ValueError, "call_jvp: %zd inputs, %ld outputs", nin, nout);
        return NULL;
    }
    int64_t in[CALL_STACK], tin[CALL_STACK], attrs[CALL_ATTRS];
    for (int k = 0; k < 2; k++) {
        for (Py_ssize_t i = 0; i < nin; i++) {
            PyObject *x = PyTuple_GetItem(args[1 + k], i);
            int64_t h = 0;
            if (x != Py_None) {
                if (tensor_type == NULL || !PyObject_TypeCheck(x, tensor_type)) {
                    PyErr_Format(PyExc_TypeError, "call_jvp: %s %zd is not a pylucid.Tensor", k ? "tangent" : "input", i);
                    return NULL;
                }
                h = ((TensorBase *)x)->h;
            }
            (k ? tin : in)[i] = h;
        }
    }
    int nattrs = args[3] == Py_None ? 0 : ints_arg(args[3], attrs, CALL_ATTRS, "call_jvp: attrs");
    if (nattrs < 0) {
        return NULL;
    }
    int64_t *meta = PyMem_Malloc((size_t)(2 * nout) * LUCID_META_LEN * sizeof *meta);
    if (meta == NULL) {
        return PyErr_NoMemory();
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = lucid_op_jvp(code, in, tin, (int32_t)nin, nattrs ? attrs : NULL, nattrs, mode, meta);
    Py_END_ALLOW_THREADS
    PyObject *res = NULL;
    if (rc) {
        status_error(rc);
        goto done;
    }
    PyObject *parts[2] = {PyTuple_New(nout), PyTuple_New(nout)};
    long i = 0; /* blocks 0..2*nout: the outputs, then their tangents */
    for (; parts[0] != NULL && parts[1] != NULL && i < 2 * nout; i++) {
        int64_t *m = meta + i * LUCID_META_LEN;
        PyObject *x = m[0] == 0 ? Py_NewRef(Py_None) : from_meta(m); /* owns, or released, its handle */
        if (x == NULL) {
            i++;
            break;
        }
        PyTuple_SetItem(parts[i / nout], i % nout, x);
    }
    if (i == 2 * nout && parts[0] != NULL && parts[1] != NULL && !PyErr_Occurred()) {
        res = PyTuple_Pack(2, parts[0], parts[1]);
    } else {
        for (; i < 2 * nout; i++) {
            if (meta[i * LUCID_META_LEN] != 0) {
                lucid_release(meta[i * LUCID_META_LEN]);
            }
        }
    }
    Py_XDECREF(parts[0]);
    Py_XDECREF(parts[1]);
done:
    PyMem_Free(meta);
    return res;
}

/* reduce_all(op, a, keepdim): lucid_op over all dims (op: a reduction's id). */
PyObject *hot_reduce_all(PyObject *mod, PyObject *args) {
    (void)mod;
    if (PyTuple_Size(args) != 3) {
        PyErr_SetString(PyExc_TypeError, "reduce_all(op, a, keepdim)");
        return NULL;
    }
    PyObject *op = PyTuple_GetItem(args, 0), *a = PyTuple_GetItem(args, 1), *keep = PyTuple_GetItem(args, 2);
    if (forked || forward_levels || !is_tensor(a) || (keep != Py_True && keep != Py_False)) {
        /* (a keepdim other than a bool: the Python path checks it) */
        return PyObject_CallFunctionObjArgs(fallback_reduce, op, a, Py_None, keep, NULL);
    }
    int keepdim = keep == Py_True;
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
