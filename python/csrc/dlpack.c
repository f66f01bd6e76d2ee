/* DLPack capsules (python/pylucid/dlpack.py). */
#include "hot.h"

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
PyObject *hot_dlpack_capsule(PyObject *mod, PyObject *args) {
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

/* dlpack_export(t, versioned, copied): a DLPack capsule sharing the memory
 * of t (a Tensor; lucid_dlpack_export), in one call: the managed tensor is
 * owned by its capsule before anything can raise. The export's errors are
 * BufferError (as the array API asks). */
PyObject *hot_dlpack_export(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *t;
    int versioned, copied;
    if (!PyArg_ParseTuple(args, "Opp", &t, &versioned, &copied)) {
        return NULL;
    }
    if (forked) {
        return fork_error();
    }
    if (tensor_type == NULL || !PyObject_TypeCheck(t, tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "dlpack_export() expects a pylucid.Tensor");
        return NULL;
    }
    void *managed = NULL;
    int rc = lucid_dlpack_export(((TensorBase *)t)->h, versioned, copied, &managed);
    if (rc) {
        PyObject *msg = last_error_message();
        if (msg != NULL) {
            PyErr_SetObject(PyExc_BufferError, msg);
            Py_DECREF(msg);
        }
        return NULL;
    }
    PyObject *c = PyCapsule_New(managed, versioned ? "dltensor_versioned" : "dltensor", dlpack_capsule_destructor);
    if (c == NULL) {
        dlpack_delete(managed, versioned);
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
PyObject *hot_dlpack_take(PyObject *mod, PyObject *capsule) {
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
PyObject *hot_dlpack_borrow(PyObject *mod, PyObject *args) {
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
