"""The C paths of backward(gradient), autograd.grad and from_numpy (python/csrc):
the same gradients, bit for bit, as the Python path; the same exceptions
with the same messages; handles and borrowed buffers back to their
baseline; and threads."""

import contextlib
import gc
import sys
import threading
import warnings

import numpy as np
import pytest

import pylucid
from pylucid import autograd, ops
from pylucid._runtime import _hot
from pylucid.autograd import Function

_tensor_mod = sys.modules["pylucid.tensor"]

pytestmark = pytest.mark.skipif(_hot is None, reason="no C extension (ABI mode)")


def _pair(n, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    a[::3] = b[::3]  # ties
    return a, b


def _leaves(a, b):
    return pylucid.from_numpy(a.copy(), requires_grad=True), pylucid.from_numpy(b.copy(), requires_grad=True)


def _bits(t):
    return None if t is None else t.numpy().tobytes()


def _run_backward(a, b, g, python, retain=None):
    x, y = _leaves(a, b)
    out = ops.minimum(x, y) * 3.0
    if python:
        autograd.backward([out], [g], retain_graph=retain)  # the Python path (autograd._run)
    else:
        out.backward(g, retain_graph=retain)
    return _bits(x.grad), _bits(y.grad)


def _python_grad(*args, **kw):
    saved = autograd._hot
    autograd._hot = None
    try:
        return autograd.grad(*args, **kw)
    finally:
        autograd._hot = saved


@pytest.mark.parametrize("n", [1, 7, 1000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("form", ["tensor", "ndarray", "strided", "readonly"])
def test_backward_gradient_matches_python_path(n, dtype, form):
    a, b = _pair(n, dtype)
    gn = np.random.default_rng(5).standard_normal(2 * n).astype(dtype)
    if form == "strided":
        g = gn[::-2]  # negative strides: lent as they are
    else:
        g = gn[:n].copy()
        if form == "readonly":
            g.flags.writeable = False
        if form == "tensor":
            g = pylucid.from_numpy(g)
    assert _run_backward(a, b, g, python=False) == _run_backward(a, b, g, python=True)


@contextlib.contextmanager
def _backward_grad_calls():
    """Records what each _hot.backward_grad call returns (NotImplemented:
    it handed the call back to the Python path)."""
    calls = []
    real = _hot.backward_grad

    class Spy:
        def __getattr__(self, name):
            return getattr(_hot, name)

        def backward_grad(self, *args):
            r = real(*args)
            calls.append(r)
            return r

    saved = _tensor_mod._hot
    _tensor_mod._hot = Spy()
    try:
        yield calls
    finally:
        _tensor_mod._hot = saved


def test_backward_gradient_reaches_c_path():
    with _backward_grad_calls() as calls:
        a, b = _pair(4)
        x, y = _leaves(a, b)
        ops.minimum(x, y).backward(np.ones(4, np.float32))
        ops.minimum(x, y).backward(pylucid.from_numpy(np.ones(4, np.float32)))
    assert calls == [None, None]  # done in C, never NotImplemented


def test_backward_retain_graph_with_gradient():
    a, b = _pair(5)
    g = np.arange(5, dtype=np.float32)
    x, y = _leaves(a, b)
    out = ops.minimum(x, y)
    out.backward(g, retain_graph=True)
    out.backward(g)
    x2, y2 = _leaves(a, b)
    out2 = ops.minimum(x2, y2)
    autograd.backward([out2], [g], retain_graph=True)
    autograd.backward([out2], [g])
    assert _bits(x.grad) == _bits(x2.grad) and _bits(y.grad) == _bits(y2.grad)
    win = (a <= b) | np.isnan(a)
    np.testing.assert_array_equal(x.grad.numpy(), np.where(win, 2 * g, 0))


def test_backward_python_scalar_gradient():
    x = pylucid.tensor(3.0, requires_grad=True)
    (x * x).backward(2.0)
    np.testing.assert_array_equal(x.grad.numpy(), np.float32(12.0))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("g", [0.1, -2.5e-8, 3, 2**60 + 1, 1e300, -1e39, float("inf"), float("nan")])
def test_python_number_gradient_rounds_once_in_output_dtype(dtype, g):
    # A Python number is weak (docs/dtypes.md): it becomes the output's
    # dtype, rounded once from its exact value, in every backward form
    # (it used to go through float32 first, so a float64 output got
    # 0.10000000149011612 for 0.1). Reference: pylucid.tensor(g, dtype),
    # which rounds once (tests_py/test_half.py checks it against NumPy).
    with np.errstate(over="ignore"):  # tensor() warns as NumPy's cast does past the range
        want = pylucid.tensor(g, dtype=dtype)
    forms = []
    for form in ("method", "backward", "grad"):
        x = pylucid.tensor(np.ones(3), dtype=dtype, requires_grad=True)
        y = (x * 1.0).sum()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no overflow warning for ±inf
            if form == "method":
                y.backward(g)
                got = x.grad
            elif form == "backward":
                autograd.backward([y], [g])
                got = x.grad
            else:
                (got,) = autograd.grad(y, x, g)
        assert got.dtype == want.dtype
        assert _bits(got) == _bits(want) * 3, form  # three elements, each want's bits
        forms.append(form)
    assert forms == ["method", "backward", "grad"]


def test_python_number_gradient_takes_c_path():
    with _backward_grad_calls() as calls:
        x = pylucid.tensor(np.ones(2, np.float32), requires_grad=True)
        ops.minimum(x, 2.0).sum().backward(1.5)
    assert calls == [None]
    np.testing.assert_array_equal(x.grad.numpy(), np.float32([1.5, 1.5]))


def test_python_number_gradient_errors_unchanged():
    x = pylucid.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 1.0).backward(0.5)  # non-scalar output, number gradient
    with pytest.raises(RuntimeError, match="grad_tensors has 2 entries"):
        autograd.backward([(x * 1.0).sum()], [0.5, 0.5])


def _error(fn):
    with pytest.raises(Exception) as e:
        fn()
    return type(e.value), str(e.value)


@pytest.mark.parametrize("bad", ["shape_nd", "shape_t", "dtype_nd", "dtype_t"])
def test_backward_gradient_errors_match(bad):
    a, b = _pair(4)
    g = {"shape_nd": np.ones(3, np.float32), "shape_t": pylucid.from_numpy(np.ones(3, np.float32)),
         "dtype_nd": np.ones(4, np.int64), "dtype_t": pylucid.from_numpy(np.ones(4, np.int32))}[bad]

    def outcome(python):
        x, y = _leaves(a, b)
        try:
            if python:
                autograd.backward([ops.minimum(x, y)], [g])
            else:
                ops.minimum(x, y).backward(g)
        except Exception as e:  # noqa: BLE001
            return type(e), str(e)
        return _bits(x.grad), _bits(y.grad)  # the engine accepts it (dtype): the same gradients

    oc = outcome(False)
    assert oc == outcome(True)
    if bad.startswith("shape"):
        assert oc[0] is RuntimeError and "shape" in oc[1]


def test_second_backward_and_nonscalar_errors_match():
    a, b = _pair(4)
    g = np.ones(4, np.float32)

    def twice(python):
        x, y = _leaves(a, b)
        out = ops.minimum(x, y) * 2.0
        if python:
            autograd.backward([out], [g])
            autograd.backward([out], [g])
        else:
            out.backward(g)
            out.backward(g)

    ec, ep = _error(lambda: twice(False)), _error(lambda: twice(True))
    assert ec == ep and ec[0] is RuntimeError and "retain_graph=True" in ec[1]

    def nonscalar(python):
        x, y = _leaves(a, b)
        if python:
            autograd.grad(ops.minimum(x, y), [x], create_graph=True)  # Python path, grad_outputs None
        else:
            autograd.grad(ops.minimum(x, y), [x])

    ec, ep = _error(lambda: nonscalar(False)), _error(lambda: nonscalar(True))
    assert ec == ep


@pytest.mark.parametrize("go_form", [None, "tensor", "ndarray", "list", "none_entry"])
@pytest.mark.parametrize("allow_unused", [False, True])
def test_grad_matches_python_path(go_form, allow_unused):
    a, b = _pair(9)
    x, y = _leaves(a, b)
    z = pylucid.from_numpy(np.ones(9, np.float32), requires_grad=True)

    def outs():
        m = ops.minimum(x, y)
        return m.sum() if go_form in (None, "none_entry") else m * 1.5

    g = np.linspace(-1, 1, 9).astype(np.float32)
    go = {None: None, "tensor": pylucid.from_numpy(g), "ndarray": g, "list": [g], "none_entry": [None]}[go_form]
    ins = [x, y, z] if allow_unused else (x, y)
    r_c = autograd.grad(outs(), ins, go, allow_unused=allow_unused)
    r_p = _python_grad(outs(), ins, go, allow_unused=allow_unused)
    assert type(r_c) is tuple and len(r_c) == len(r_p)
    assert [_bits(t) for t in r_c] == [_bits(t) for t in r_p]
    assert x.grad is None and y.grad is None


def test_grad_errors_match():
    a, b = _pair(4)
    x, y = _leaves(a, b)
    z = pylucid.from_numpy(np.ones(4, np.float32), requires_grad=True)
    ec = _error(lambda: autograd.grad(ops.minimum(x, y).sum(), [x, z]))
    ep = _error(lambda: _python_grad(ops.minimum(x, y).sum(), [x, z]))
    assert ec == ep
    ec = _error(lambda: autograd.grad(ops.minimum(x, y), [x], np.ones(5, np.float32)))
    ep = _error(lambda: _python_grad(ops.minimum(x, y), [x], np.ones(5, np.float32)))
    assert ec == ep
    ec = _error(lambda: autograd.grad([ops.minimum(x, y)], [x], [None, None]))
    ep = _error(lambda: _python_grad([ops.minimum(x, y)], [x], [None, None]))
    assert ec == ep


class Twice(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


def test_python_function_in_graph():
    a, b = _pair(6)
    g = np.arange(6, dtype=np.float32)
    x, y = _leaves(a, b)
    Twice.apply(ops.minimum(x, y)).backward(g)
    win = (a <= b) | np.isnan(a)
    np.testing.assert_array_equal(x.grad.numpy(), np.where(win, 2 * g, 0))
    gx, gy = autograd.grad(Twice.apply(ops.minimum(x, y)), (x, y), g)
    np.testing.assert_array_equal(gx.numpy(), np.where(win, 2 * g, 0))
    np.testing.assert_array_equal(gy.numpy(), np.where(win, 0, 2 * g))


@pytest.mark.parametrize("arr", [
    np.arange(6, dtype=np.float32),
    np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::-2],
    np.arange(24, dtype=np.int64).reshape(2, 3, 4).transpose(2, 0, 1),
    np.array(3.5, dtype=np.float16),
    np.zeros((0, 3), np.int32),
    np.arange(5, dtype=np.uint8),
    np.arange(4, dtype=">f4"),  # byte-swapped: the Python path converts it
    np.array([0, 1, 1], dtype=np.bool_),
])
def test_from_numpy_c_path(arr):
    t = pylucid.from_numpy(arr)
    np.testing.assert_array_equal(t.numpy(), arr)
    assert t.numpy().dtype == arr.dtype.newbyteorder("=")
    t2 = pylucid.from_numpy(arr, requires_grad=arr.dtype.kind == "f")
    assert t2.requires_grad == (arr.dtype.kind == "f")


def test_from_numpy_shares_memory_and_readonly():
    a = np.zeros(4, np.float32)
    t = pylucid.from_numpy(a)
    a[1] = 7
    assert t.numpy()[1] == 7
    r = np.ones(3, np.float32)
    r.flags.writeable = False
    tr = pylucid.from_numpy(r)
    assert not tr.numpy().flags.writeable


def test_from_numpy_errors_unchanged():
    with pytest.raises(TypeError, match="complex"):
        pylucid.from_numpy(np.ones(2, np.complex64))
    with pytest.raises(TypeError, match="from_numpy expects"):
        pylucid.from_numpy([1.0])


def _counts():
    gc.collect()
    pylucid._collect()
    s = pylucid._stats()
    return s["handles"], s["borrowed"]


def test_no_leaks():
    a, b = _pair(100)
    x, y = _leaves(a, b)
    g = np.ones(100, np.float32)
    for _ in range(3):  # warm
        ops.minimum(x, y).backward(g)
    x.grad = None
    y.grad = None
    base = _counts()
    for _ in range(200):
        ops.minimum(x, y).backward(g)
        ops.minimum(x, y).backward(pylucid.from_numpy(g))
        autograd.grad(ops.minimum(x, y), (x, y), g)
        autograd.grad([ops.minimum(x, y)], [x], [g])
        pylucid.from_numpy(g)
        with pytest.raises(RuntimeError):
            ops.minimum(x, y).backward(np.ones(3, np.float32))
        x.grad = None
        y.grad = None
    assert _counts() == base


def test_threads():
    a, b = _pair(50)
    g = np.linspace(0, 1, 50).astype(np.float32)
    x0, y0 = _leaves(a, b)
    want = [_bits(t) for t in _python_grad(ops.minimum(x0, y0), (x0, y0), g)]
    errors = []

    def work():
        try:
            for _ in range(200):
                x, y = _leaves(a, b)
                ops.minimum(x, y).backward(g)
                assert [_bits(x.grad), _bits(y.grad)] == want
                r = autograd.grad(ops.minimum(x, y), (x, y), g)
                assert [_bits(t) for t in r] == want
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors



def _is_lent(arr):
    from pylucid import _runtime

    return any(v is arr for v in _runtime.borrowed_owners())


@pytest.mark.parametrize("shape", [(), (1,), (7,), (2, 3), (0,), (4, 16)])
def test_small_contiguous_gradient_is_copied_not_lent(shape):
    # An ndarray gradient of at most 256 bytes, C-contiguous, is copied into
    # the library (lucid_tensor_copy): it never enters the table of lent
    # buffers. Larger or non-contiguous ones are lent (whether one is still
    # in the table right after depends on the batch of dropped handles); all
    # give the Python path's gradients bit for bit.
    n = int(np.prod(shape))
    a, b = _pair(max(n, 1))
    a, b = a[:n].reshape(shape), b[:n].reshape(shape)
    g = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    got = _run_backward(a, b, g, python=False)
    assert not _is_lent(g)
    assert got == _run_backward(a, b, g, python=True)
    fortran = np.asfortranarray(np.random.default_rng(4).standard_normal((3, 5)).astype(np.float32))
    for lent in [np.ones(1000, np.float32), fortran]:
        sa, sb = (x.reshape(lent.shape) for x in _pair(lent.size))
        assert _run_backward(sa, sb, lent, python=False) == _run_backward(sa, sb, lent, python=True)


def test_tensor_copy_rejects_bad_input_with_a_message():
    # lucid_tensor_copy, the C API behind a copied gradient: a wrong byte
    # count, a NULL source, an unknown dtype or too many dims is an error
    # status with a message, and nothing is made; good input copies.
    from pylucid._lib import error_message, ffi, lib

    info = ffi.new("lucid_tensor_info*")
    shape = ffi.new("int64_t[]", [2, 3])
    src = np.arange(6, dtype=np.float32)
    data = ffi.cast("void*", src.ctypes.data)
    before = pylucid._stats()["handles"]
    for args, message in [((data, 20, lib.LUCID_FLOAT32, 2, shape), "copy of 20 bytes"),
                          ((ffi.NULL, 24, lib.LUCID_FLOAT32, 2, shape), "NULL"),
                          ((data, 24, 99, 2, shape), "dtype"),
                          ((data, 24, lib.LUCID_FLOAT32, 99, shape), "dims")]:
        rc = lib.lucid_tensor_copy(*args, info)
        assert rc != 0
        assert message in error_message()
    assert pylucid._stats()["handles"] == before
    assert lib.lucid_tensor_copy(data, 24, lib.LUCID_FLOAT32, 2, shape, info) == 0
    t = _tensor_mod._wrap(info)
    src[:] = -1  # a copy: the tensor keeps the values it was given
    np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_many_dims_past_the_native_stack_buffers():
    # The library reads a lent or copied array's shape and strides into
    # stack buffers of 8 dims and into a new slice past that: 20 dims (and
    # the most the library takes, 64) work on both paths, 65 is an error.
    from pylucid._lib import error_message, ffi, lib

    shape = (1,) * 8 + (2,) + (1,) * 9 + (3, 1)
    arr = np.arange(6, dtype=np.float32).reshape(shape)
    t = pylucid.from_numpy(arr)  # lent (lucid_tensor_borrow)
    assert t.shape == shape
    np.testing.assert_array_equal(t.numpy(), arr)
    np.testing.assert_array_equal(ops.minimum(arr, arr[..., ::-1, :]).numpy(), np.minimum(arr, arr[..., ::-1, :]))
    x = pylucid.from_numpy(np.full(shape, 1.0, np.float32), requires_grad=True)
    ops.minimum(x, 2.0).backward(arr)  # 24 bytes: copied (lucid_tensor_copy)
    np.testing.assert_array_equal(x.grad.numpy(), arr)
    info = ffi.new("lucid_tensor_info*")
    src = np.arange(6, dtype=np.float32)
    for nd in (20, 64, 65):
        dims = ffi.new("int64_t[]", [2, 3] + [1] * (nd - 2))
        rc = lib.lucid_tensor_copy(ffi.cast("void*", src.ctypes.data), 24, lib.LUCID_FLOAT32, nd, dims, info)
        if nd <= 64:
            assert rc == 0
            c = _tensor_mod._wrap(info)
            assert c.shape == (2, 3) + (1,) * (nd - 2)
            np.testing.assert_array_equal(c.numpy().ravel(), src)
        else:
            assert rc != 0 and "dims" in error_message()


def test_grad_treats_small_and_large_ndarray_gradients_alike():
    # autograd.grad lends every ndarray gradient (only backward copies small
    # ones): a result that is the given gradient itself (here y = x + 0)
    # shares the array's memory whatever its size, as on the Python path
    # (found by review: a copied small gradient made this depend on size).
    seen = []
    for n in (4, 1000):
        x = pylucid.from_numpy(np.ones(n, np.float32), requires_grad=True)
        g = np.full(n, 2.0, np.float32)
        (gx,) = autograd.grad(x + 0.0, x, g)
        g[:] = 5.0
        seen.append(float(gx.numpy()[0]))
    assert seen[0] == seen[1], seen
