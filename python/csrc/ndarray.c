/* NumPy arrays lent to the library (or copied, or written as out=) without
 * a Python frame, the table of their owners, and drain_pending: the queue
 * of what the library hands back. */
#include "hot.h"

/* ---- NumPy arrays lent to the library without a Python frame ----
 * The C path reads an exact numpy.ndarray's fields directly: the public
 * PyArrayObject_fields layout below (unchanged from NumPy 1.7 to 2.x). It is
 * checked once against a probe array (set_ndarray); where it does not match,
 * every array takes the Python path. Only native dtypes known by identity
 * (np.dtype singletons, bool excluded: its bytes must be checked) are taken;
 * anything else (byte-swapped, odd strides, too many dims, subclasses) goes
 * to Python, which converts or raises as before (docs/interop.md). */

static PyObject *np_descrs[MAX_NP_DTYPES]; /* owned */
int np_codes[MAX_NP_DTYPES], np_sizes[MAX_NP_DTYPES];
static int n_np_dtypes;
PyObject *borrowed;    /* _runtime._borrowed: token -> owner of what Python lent, until drain pops it */
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
PyObject *hot_return_lent(PyObject *mod, PyObject *tokens) {
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
PyObject *hot_lent_owners(PyObject *mod, PyObject *unused) {
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
np_fields *native_ndarray(PyObject *arr, int *k) {
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
int lend_ndarray(PyObject *arr, int64_t *meta) {
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
int ndarray_out(PyObject *o, lucid_out *d, int64_t *shape, int64_t *strides) {
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
PyObject *hot_from_ndarray(PyObject *mod, PyObject *arr) {
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
PyObject *hot_set_ndarray(PyObject *mod, PyObject *args) {
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

int drain_pending(void) {
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
int copy_small_ndarray(PyObject *arr, int64_t *h, int64_t *temp) {
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


/* *temp for the handle of an array lend_ndarray described in meta: the
 * handle, or minus it for a small array (released in the batch, as a
 * dropped small tensor's handle). Drains what the library handed back if
 * meta says so; on an error there, releases the handle, sets *temp 0 and
 * returns -1. */
int lent_temp(const int64_t *meta, int64_t *temp) {
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
void release_temps(const int64_t *temps, Py_ssize_t n) {
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
