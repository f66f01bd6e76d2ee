/*
 * lent(op, form, ins, attrs, outs, codes): an op (form 0), its winners
 * (1) or their gradient (2) on the memory of another framework's tensors, lent for the
 * call (lucid_op_lent): pylucid.torch's kernels. Each entry is None (an
 * absent input: clamp's missing bound) or an object with data_ptr(), shape,
 * stride() and dtype (a torch.Tensor), its dtype mapped to pylucid's code by
 * the dict given. The library reads the inputs and writes the outputs in
 * place; nothing is kept after the call, so nothing needs owning. Bad input
 * (a dtype the dict lacks, a shape the op refuses) raises; nothing crashes.
 */
#include "hot.h"

/* The most entries of one call, and of dims per entry (lucid.h). */
#define LENT_MAX 5

static PyObject *s_data_ptr, *s_shape, *s_stride, *s_dtype, *s_is_contiguous, *s_is_neg, *s_resolve_neg, *s_clone;

static int intern_names(void) {
    if (s_data_ptr != NULL) return 0;
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_shape = PyUnicode_InternFromString("shape");
    s_stride = PyUnicode_InternFromString("stride");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    s_is_neg = PyUnicode_InternFromString("is_neg");
    s_resolve_neg = PyUnicode_InternFromString("resolve_neg");
    s_clone = PyUnicode_InternFromString("clone");
    return (s_data_ptr && s_shape && s_stride && s_dtype && s_is_contiguous && s_is_neg && s_resolve_neg && s_clone)
               ? 0
               : -1;
}

/* Reads a tuple of ints into dims; returns its length, or -1 (raised). */
static int read_dims(PyObject *seq, int64_t *dims, const char *what) {
    if (!PyTuple_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "pylucid: a tensor's %s is not a tuple", what);
        return -1;
    }
    Py_ssize_t n = PyTuple_Size(seq);
    if (n > LUCID_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "pylucid: a tensor has %zd dims (at most %d)", n, LUCID_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GetItem(seq, i));
        if (v == -1 && PyErr_Occurred()) return -1;
        dims[i] = v;
    }
    return (int)n;
}

/* Fills e (with its shape and strides in dims) from tensor-like t, as its
 * memory reads; *numel gets its element count. With ask_contiguous it first
 * asks t.is_contiguous() and, where it is, computes the row-major strides
 * instead of calling stride() (torch builds that tuple per call: the
 * dearer of the two). 0, or -1 with an exception set. */
static int read_memory(PyObject *t, PyObject *codes, lucid_out *e, int64_t *shape, int64_t *strides,
                       int64_t *numel, int ask_contiguous) {
    memset(e, 0, sizeof *e);
    if (t == Py_None) {
        e->dtype = -1;
        *numel = 0;
        return 0;
    }
    int rc = -1;
    PyObject *dt = PyObject_GetAttr(t, s_dtype);
    PyObject *ptr = NULL, *sh = NULL, *st = NULL;
    if (dt == NULL) goto done;
    PyObject *code = PyDict_GetItemWithError(codes, dt); /* borrowed */
    if (code == NULL) {
        if (!PyErr_Occurred()) {
            PyObject *r = PyObject_Str(dt);
            PyErr_Format(PyExc_TypeError, "pylucid does not compute on dtype %S", r ? r : dt);
            Py_XDECREF(r);
        }
        goto done;
    }
    int contiguous = 0;
    if (ask_contiguous) {
        PyObject *c = PyObject_CallMethodObjArgs(t, s_is_contiguous, NULL);
        if (c == NULL) goto done;
        contiguous = PyObject_IsTrue(c);
        Py_DECREF(c);
        if (contiguous < 0) goto done;
    }
    ptr = PyObject_CallMethodObjArgs(t, s_data_ptr, NULL);
    if (ptr == NULL) goto done; /* e.g. a sparse tensor: torch's own error, before anything else runs */
    sh = PyObject_GetAttr(t, s_shape);
    if (sh == NULL) goto done;
    int nd = read_dims(sh, shape, "shape");
    if (nd < 0) goto done;
    if (contiguous) {
        int64_t step = 1;
        for (int i = nd - 1; i >= 0; i--) {
            strides[i] = step;
            step *= shape[i] > 1 ? shape[i] : 1;
        }
    } else {
        st = PyObject_CallMethodObjArgs(t, s_stride, NULL);
        if (st == NULL) goto done;
        if (read_dims(st, strides, "stride") != nd) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "pylucid: a tensor's stride and shape differ");
            goto done;
        }
    }
    e->data = PyLong_AsVoidPtr(ptr);
    if (e->data == NULL && PyErr_Occurred()) goto done;
    e->dtype = (int32_t)PyLong_AsLong(code);
    e->ndim = nd;
    e->shape = shape;
    e->strides = strides;
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    *numel = n;
    rc = 0;
done:
    Py_XDECREF(dt);
    Py_XDECREF(ptr);
    Py_XDECREF(sh);
    Py_XDECREF(st);
    return rc;
}

/* read_memory of an input t whose values its memory may not hold as they
 * read (docs/interop.md, "PyTorch"): torch's negative bit (a lazily negated
 * view: z.conj().imag, torch._neg_view) is resolved first, and a tensor with
 * elements but no memory (torch's ZeroTensor) is cloned into memory; *hold
 * then owns the tensor read, to be released after the call (NULL
 * otherwise). Outputs are the caller's fresh tensors and read as they are.
 * The conjugate bit needs nothing: it is only ever set on complex tensors,
 * which the codes refuse. */
static int read_input(PyObject *t, PyObject *codes, lucid_out *e, int64_t *shape, int64_t *strides,
                      int64_t *numel, int ask_contiguous, PyObject **hold) {
    *hold = NULL;
    if (t != Py_None) {
        PyObject *neg = PyObject_CallMethodObjArgs(t, s_is_neg, NULL);
        if (neg == NULL) return -1;
        int is_neg = PyObject_IsTrue(neg);
        Py_DECREF(neg);
        if (is_neg < 0) return -1;
        if (is_neg) {
            if ((*hold = PyObject_CallMethodObjArgs(t, s_resolve_neg, NULL)) == NULL) return -1;
            t = *hold;
        }
    }
    if (read_memory(t, codes, e, shape, strides, numel, ask_contiguous) != 0) return -1;
    if (t != Py_None && e->data == NULL && *numel > 0) {
        PyObject *c = PyObject_CallMethodObjArgs(t, s_clone, NULL);
        if (c == NULL) return -1;
        Py_XDECREF(*hold);
        *hold = c;
        if (read_memory(c, codes, e, shape, strides, numel, ask_contiguous) != 0) return -1;
        if (e->data == NULL) {
            PyErr_SetString(PyExc_ValueError, "pylucid: a tensor with elements has no memory to read");
            return -1;
        }
    }
    return 0;
}

static void release_holds(PyObject **holds, int n) {
    for (int i = 0; i < n; i++) Py_CLEAR(holds[i]);
}

/* Reads the tuple seq: inputs (holds given, see read_input) or outputs. */
static int read_entries(PyObject *seq, PyObject *codes, lucid_out *es, int64_t (*shapes)[LUCID_MAX_DIMS],
                        int64_t (*strides)[LUCID_MAX_DIMS], int *n, int64_t *work, PyObject **holds) {
    if (!PyTuple_Check(seq) || PyTuple_Size(seq) > LENT_MAX) {
        PyErr_Format(PyExc_TypeError, "pylucid: lent() takes tuples of at most %d tensors", LENT_MAX);
        return -1;
    }
    *n = (int)PyTuple_Size(seq);
    for (int i = 0; i < *n; i++) {
        int64_t numel;
        PyObject *t = PyTuple_GetItem(seq, i);
        int rc = holds != NULL ? read_input(t, codes, &es[i], shapes[i], strides[i], &numel, 0, &holds[i])
                               : read_memory(t, codes, &es[i], shapes[i], strides[i], &numel, 0);
        if (rc != 0) return -1;
        if (numel > *work) *work = numel;
    }
    return 0;
}

PyObject *hot_lent(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "lent(op, winners, ins, attrs, outs, codes)");
        return NULL;
    }
    if (forked) return fork_error();
    if (intern_names() != 0) return NULL;
    long op = PyLong_AsLong(args[0]);
    long winners = PyLong_AsLong(args[1]); /* 0, 1, 2: lucid_op_lent's forms */
    if ((op == -1 || winners == -1) && PyErr_Occurred()) return NULL;
    PyObject *codes = args[5];
    if (!PyDict_Check(codes)) {
        PyErr_SetString(PyExc_TypeError, "lent(): codes must be a dict");
        return NULL;
    }
    lucid_out ins[LENT_MAX], outs[LENT_MAX];
    int64_t in_shapes[LENT_MAX][LUCID_MAX_DIMS], in_strides[LENT_MAX][LUCID_MAX_DIMS];
    int64_t out_shapes[LENT_MAX][LUCID_MAX_DIMS], out_strides[LENT_MAX][LUCID_MAX_DIMS];
    int n_in = 0, n_out = 0;
    int64_t work = 0;
    PyObject *holds[LENT_MAX] = {NULL};
    PyObject *result = NULL;
    if (read_entries(args[2], codes, ins, in_shapes, in_strides, &n_in, &work, holds) != 0) goto done;
    if (read_entries(args[4], codes, outs, out_shapes, out_strides, &n_out, &work, NULL) != 0) goto done;
    int64_t attrs[LUCID_MAX_DIMS + 2];
    int n_attrs = 0;
    if (args[3] != Py_None && (n_attrs = read_dims(args[3], attrs, "attrs")) < 0) goto done;
    int rc;
    /* The tensors stay alive: the caller holds ins and outs, holds the
     * inputs read in their place. */
    NATIVE_CALL(work <= GIL_KEEP_ELEMS,
                rc = lucid_op_lent((int32_t)op, (int32_t)winners, ins, n_in, attrs, n_attrs, outs, n_out));
    if (rc != 0) {
        status_error(rc);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    release_holds(holds, n_in);
    return result;
}

/*
 * lent_binary(op, winners, a, b, codes, empty_like, mask_kwargs): a binary
 * op's value (lucid_op_lent's form 0) on a and b of one dtype and shape,
 * written into y = empty_like(a), which it returns; with winners (form 1),
 * also its winner mask, written into empty_like(a, **mask_kwargs) (a bool
 * tensor), returning (y, mask). None where a and b differ in dtype or shape:
 * the caller then takes the general path (broadcasting, promotion). The
 * eager fast path of pylucid.torch's binary functions: it reads the operands
 * and results in C, where the Python kernel would make a dozen attribute
 * calls.
 */
PyObject *hot_lent_binary(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "lent_binary(op, winners, a, b, codes, empty_like, mask_kwargs)");
        return NULL;
    }
    if (forked) return fork_error();
    if (intern_names() != 0) return NULL;
    long op = PyLong_AsLong(args[0]);
    if (op == -1 && PyErr_Occurred()) return NULL;
    int winners = PyObject_IsTrue(args[1]);
    if (winners < 0) return NULL;
    PyObject *a = args[2], *b = args[3], *codes = args[4], *empty_like = args[5], *mask_kwargs = args[6];
    if (!PyDict_Check(codes) || (winners && !PyDict_Check(mask_kwargs))) {
        PyErr_SetString(PyExc_TypeError, "lent_binary(): codes and mask_kwargs must be dicts");
        return NULL;
    }
    if (a == Py_None || b == Py_None) Py_RETURN_NONE;
    lucid_out ins[2], outs[2];
    int64_t shapes[4][LUCID_MAX_DIMS], strides[4][LUCID_MAX_DIMS];
    int64_t numel, other;
    PyObject *ys[2] = {NULL, NULL}, *holds[2] = {NULL, NULL}, *result = NULL;
    if (read_input(a, codes, &ins[0], shapes[0], strides[0], &numel, 1, &holds[0]) != 0) goto done;
    if (read_input(b, codes, &ins[1], shapes[1], strides[1], &other, 1, &holds[1]) != 0) goto done;
    if (ins[0].dtype != ins[1].dtype || ins[0].ndim != ins[1].ndim ||
        memcmp(shapes[0], shapes[1], (size_t)ins[0].ndim * sizeof(int64_t)) != 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int n_out = winners ? 2 : 1;
    for (int i = 0; i < n_out; i++) {
        if (i == 0) {
            ys[i] = PyObject_CallFunctionObjArgs(empty_like, a, NULL);
        } else {
            PyObject *pos = PyTuple_Pack(1, a);
            ys[i] = pos ? PyObject_Call(empty_like, pos, mask_kwargs) : NULL;
            Py_XDECREF(pos);
        }
        if (ys[i] == NULL) goto done;
        /* empty_like gives a's shape (and dtype, for y); its strides are
         * read, since it keeps a dense a's layout. */
        if (read_memory(ys[i], codes, &outs[i], shapes[2 + i], strides[2 + i], &other, 1) != 0) goto done;
        if (outs[i].ndim != ins[0].ndim || (i == 0 && outs[i].dtype != ins[0].dtype) ||
            memcmp(shapes[2 + i], shapes[0], (size_t)ins[0].ndim * sizeof(int64_t)) != 0) {
            PyErr_SetString(PyExc_ValueError, "lent_binary(): empty_like gave another shape or dtype");
            goto done;
        }
    }
    int rc;
    /* a, b (the caller's) and ys (ours) stay alive across the call. */
    NATIVE_CALL(numel <= GIL_KEEP_ELEMS, rc = lucid_op_lent((int32_t)op, winners, ins, 2, NULL, 0, outs, n_out));
    if (rc != 0) {
        status_error(rc);
        goto done;
    }
    if (!winners) {
        result = ys[0];
        ys[0] = NULL;
    } else {
        result = PyTuple_Pack(2, ys[0], ys[1]);
    }
done:
    Py_XDECREF(ys[0]);
    Py_XDECREF(ys[1]);
    release_holds(holds, 2);
    return result;
}
