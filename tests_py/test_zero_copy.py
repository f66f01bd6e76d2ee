"""Zero-copy exchange with NumPy and the "never write into an input" rule
(docs/interop.md; big-endian: docs/dtypes.md; .numpy() on tensors that require grad: docs/autograd.md)."""

from __future__ import annotations

import numpy as np
import pytest

import pylucid
from pylucid import ops

RNG = np.random.default_rng(20240601)


def _base(dtype=np.float32, shape=(6, 8)):
    if np.dtype(dtype) == np.bool_:
        return RNG.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(0, 100, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _views():
    """(name, array) pairs covering every kind of stride NumPy produces."""
    a = _base()
    return [
        ("contiguous", a),
        ("transposed", a.T),
        ("negative_stride", a[::-1, ::-2]),
        ("negative_both", a[::-2, ::-1]),
        ("sliced", a[1:5, 2:7]),
        ("step", a[::2, 1::3]),
        ("zero_stride_row", np.broadcast_to(a[0], (5, 8))),
        ("zero_stride_col", np.broadcast_to(a[:, :1], (6, 8))),
        ("zero_stride_scalar", np.broadcast_to(np.float32(3.5), (4, 3, 2))),
        ("zero_d", np.array(2.5, dtype=np.float32)),
        ("three_d_swapped", _base(shape=(3, 4, 5)).transpose(2, 0, 1)),
        ("fortran", np.asfortranarray(_base(shape=(5, 7)))),
    ]


VIEWS = _views()


# ---- from_numpy shares memory ----


@pytest.mark.parametrize("name,arr", VIEWS, ids=[v[0] for v in VIEWS])
def test_from_numpy_shares_memory(name, arr):
    t = pylucid.from_numpy(arr)
    assert t.shape == arr.shape
    assert t.dtype.numpy_dtype == arr.dtype
    out = t.numpy()
    assert np.shares_memory(out, arr), name
    np.testing.assert_array_equal(out, arr)
    # same element addresses: the view is the very same memory layout
    assert out.__array_interface__["data"][0] == arr.__array_interface__["data"][0]
    assert out.strides == arr.strides or arr.size <= 1


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32,
                                   np.int64, np.uint8, np.bool_])
def test_from_numpy_shares_memory_every_dtype(dtype):
    a = _base(dtype)
    for v in (a, a.T, a[::-1, ::-3], np.broadcast_to(a[:1], a.shape)):
        t = pylucid.from_numpy(v)
        assert t.dtype.numpy_dtype == np.dtype(dtype)
        out = t.numpy()
        assert out.dtype == np.dtype(dtype)
        assert np.shares_memory(out, v)
        np.testing.assert_array_equal(out, v)


def test_writes_to_source_are_seen_by_the_tensor():
    """No hidden snapshot: the tensor reads the array's memory at op time."""
    a = np.zeros((4, 5), np.float32)
    for view in (a, a.T, a[::-1, ::-1]):
        t = pylucid.from_numpy(view)
        a[...] = np.arange(20, dtype=np.float32).reshape(4, 5)
        np.testing.assert_array_equal(t.numpy(), view)
        np.testing.assert_array_equal(ops.minimum(t, 100.0).numpy(), view)
        a[...] = 0
        np.testing.assert_array_equal(ops.minimum(t, 100.0).numpy(), np.zeros(view.shape, np.float32))


def test_detach_of_borrowed_shares_memory():
    a = _base()
    t = pylucid.from_numpy(a, requires_grad=True)
    assert np.shares_memory(t.detach().numpy(), a)


def test_from_numpy_empty_and_size_zero():
    a = np.zeros((0, 3), np.float32)
    t = pylucid.from_numpy(a)
    assert t.shape == (0, 3)
    assert t.numpy().shape == (0, 3)
    r = ops.minimum(t, np.zeros((1, 3), np.float32))
    assert r.shape == (0, 3)
    assert r.numpy().shape == (0, 3)


# ---- results are views of library memory ----


def _result_cases():
    a = _base()
    b = _base()
    ta, tb = pylucid.from_numpy(a), pylucid.from_numpy(b)
    return [
        ("minimum", lambda: ops.minimum(ta, tb), (a, b)),
        ("minimum_same", lambda: ops.minimum(ta, ta), (a,)),
        ("minimum_a_always_wins", lambda: ops.minimum(ta, 1e30), (a,)),
        ("maximum_b_always_wins", lambda: ops.maximum(ta, np.full((1, 8), 1e30, np.float32)), (a,)),
        ("maximum_numpy_inputs", lambda: ops.maximum(a.T, b.T), (a, b)),
        ("add_zero", lambda: ta + 0.0, (a,)),
        ("mul_one", lambda: ta * 1.0, (a,)),
        ("neg", lambda: -ta, (a,)),
        ("sum_all", lambda: ta.sum(), (a,)),
        ("sum_size1_dim", lambda: pylucid.from_numpy(a[:1]).sum(dim=0), (a,)),
        ("mean_dim", lambda: ta.mean(dim=1, keepdim=True), (a,)),
        ("cast", lambda: ta.to(pylucid.float64), (a,)),
        ("broadcast_input", lambda: ops.minimum(np.broadcast_to(a[:1], a.shape), tb), (a, b)),
    ]


RESULT_CASES = _result_cases()


@pytest.mark.parametrize("name,fn,inputs", RESULT_CASES, ids=[c[0] for c in RESULT_CASES])
def test_result_numpy_is_view_of_library_memory(name, fn, inputs):
    r = fn()
    n1 = r.numpy()
    n2 = r.numpy()
    n3 = np.asarray(r)
    assert np.shares_memory(n1, n2), name
    assert np.shares_memory(n1, n3), name
    for inp in inputs:
        assert not np.shares_memory(n1, inp), name
    if n1.ndim == 0:
        return
    before = n2.copy()
    idx = (0,) * n1.ndim
    n1[idx] = 12345
    assert n2[idx] == 12345
    assert n3[idx] == 12345
    # and the tensor itself sees the write (it is the same memory)
    assert float(ops.add(r, 0).numpy()[idx]) == 12345
    n1[idx] = before[idx]
    for inp in inputs:
        assert not (inp == 12345).any()


def test_result_view_survives_tensor_deletion():
    """The array keeps the library memory alive: no dangling pointer."""
    a = _base(shape=(256, 256))
    r = ops.minimum(a, 0.0)
    view = r.numpy()
    expected = np.minimum(a, 0.0)
    del r
    for _ in range(20):  # churn memory so a freed block would be reused
        ops.maximum(_base(shape=(256, 256)), 1.0).numpy()
    pylucid._collect()
    for _ in range(20):
        ops.maximum(_base(shape=(256, 256)), 1.0).numpy()
    np.testing.assert_array_equal(view, expected)


def test_borrowed_view_survives_source_deletion():
    """A tensor keeps the NumPy buffer it borrows alive."""
    a = _base(shape=(128, 64))
    expected = a.copy()
    t = pylucid.from_numpy(a[::-1])
    del a
    pylucid._collect()
    for _ in range(10):
        np.ones((128, 64), np.float32) * 7  # churn the allocator
    np.testing.assert_array_equal(t.numpy(), expected[::-1])
    np.testing.assert_array_equal(ops.minimum(t, 1e9).numpy(), expected[::-1])


# ---- nothing ever writes into an input ----


def _input_arrays():
    base64 = RNG.standard_normal((7, 9))
    base32 = base64.astype(np.float32)
    # ties, NaN and signed zeros, so every branch of the min/max rule runs
    base32[0, :3] = [np.nan, -0.0, 0.0]
    base64[1, :3] = [0.0, np.nan, -0.0]
    return base32, base64


@pytest.mark.parametrize("op", [ops.minimum, ops.maximum])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "negative", "broadcast", "strided"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inputs_unchanged_after_ops_and_backward(op, layout, dtype):
    b32, b64 = _input_arrays()
    base_a = (b32 if dtype == np.float32 else b64).copy()
    base_b = base_a[::-1, ::-1].copy() * 0.5
    base_b[2, 2] = base_a[2, 2]  # a tie
    views = {
        "contiguous": lambda x: x,
        "transposed": lambda x: x.T,
        "negative": lambda x: x[::-1, ::-2],
        "broadcast": lambda x: np.broadcast_to(x[:, :1], x.shape),
        "strided": lambda x: x[::2, 1::2],
    }
    va, vb = views[layout](base_a), views[layout](base_b)
    grad_out = np.ones(va.shape, dtype) * 2
    snap = [x.tobytes() for x in (base_a, base_b, grad_out)]

    a = pylucid.from_numpy(va, requires_grad=True)
    b = pylucid.from_numpy(vb, requires_grad=True)
    y = op(a, b)
    y.backward(grad_out, retain_graph=True)
    y.backward(pylucid.from_numpy(grad_out))  # accumulation must not write into anything lent
    z = op(va, vb)
    (op(a, 1.0) + op(vb, a)).sum().backward()
    ga, gb = a.grad.numpy(), b.grad.numpy()
    assert not np.shares_memory(ga, base_a)
    assert not np.shares_memory(gb, base_b)
    assert not np.shares_memory(ga, grad_out)
    assert not np.shares_memory(z.numpy(), base_a)
    assert [x.tobytes() for x in (base_a, base_b, grad_out)] == snap


def test_backward_gradient_array_is_never_written():
    """A leaf's .grad must not alias the gradient the caller passed, or a
    second backward would accumulate into the caller's array."""
    for make in (lambda x: x, lambda x: x + 0.0, lambda x: ops.minimum(x, 10.0), lambda x: x.to(pylucid.float32)):
        x = pylucid.tensor([1.0, 2.0, 3.0], requires_grad=True)
        g = np.array([1.0, 0.5, 0.25], np.float32)
        gt = pylucid.tensor([2.0, 2.0, 2.0])
        make(x).backward(g)
        make(x).backward(g)
        make(x).backward(gt)
        make(x).backward(gt)
        np.testing.assert_array_equal(g, [1.0, 0.5, 0.25])
        np.testing.assert_array_equal(gt.numpy(), [2.0, 2.0, 2.0])
        np.testing.assert_array_equal(x.grad.numpy(), [6.0, 5.0, 4.5])


def test_grad_of_output_is_not_written_by_grad_api():
    a = pylucid.tensor([1.0, 5.0, 3.0], requires_grad=True)
    g = np.array([1.0, 2.0, 3.0], np.float32)
    snap = g.tobytes()
    (ga,) = pylucid.autograd.grad(ops.minimum(a, 4.0), a, grad_outputs=[g])
    np.testing.assert_array_equal(ga.numpy(), [1.0, 0.0, 3.0])
    assert not np.shares_memory(ga.numpy(), g)
    assert g.tobytes() == snap


# ---- read-only inputs ----


def _readonly(x):
    x = x.copy()
    x.setflags(write=False)
    return x


def test_readonly_inputs_work():
    a = _readonly(_base())
    b = _readonly(_base())
    snap = (a.tobytes(), b.tobytes())
    r = ops.minimum(a, b)
    np.testing.assert_array_equal(r.numpy(), np.minimum(a, b))
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b[::-1], requires_grad=True)
    ops.maximum(ta, tb).sum().backward()
    win = (a >= b[::-1]) | np.isnan(a)
    np.testing.assert_array_equal(ta.grad.numpy(), win.astype(np.float32))
    np.testing.assert_array_equal(tb.grad.numpy(), (~win).astype(np.float32))
    assert (a.tobytes(), b.tobytes()) == snap


def test_readonly_broadcast_views_work():
    row = _readonly(_base(shape=(1, 8)))
    full = _base()
    bc = np.broadcast_to(row, (6, 8))
    assert not bc.flags.writeable
    t = pylucid.from_numpy(bc, requires_grad=True)
    u = pylucid.from_numpy(full, requires_grad=True)
    y = ops.minimum(t, u)
    np.testing.assert_array_equal(y.detach().numpy(), np.minimum(bc, full))
    y.sum().backward()
    # t has the broadcast shape; its gradient is a fresh, writable array
    g = t.grad.numpy()
    assert g.shape == (6, 8)
    np.testing.assert_array_equal(g, (bc <= full).astype(np.float32))
    assert not np.shares_memory(g, row)
    np.testing.assert_array_equal(ops.maximum(np.broadcast_to(np.float32(2.0), (3, 3)), row[:, :3]).numpy(),
                                  np.maximum(2.0, np.broadcast_to(row[:, :3], (3, 3))))


def test_numpy_of_readonly_borrow_is_readonly():
    """Exposing a read-only buffer as writable would let NumPy users write
    into an input the caller marked read-only."""
    a = _readonly(_base())
    t = pylucid.from_numpy(a)
    v = t.numpy()
    assert np.shares_memory(v, a)
    assert not v.flags.writeable
    with pytest.raises(ValueError):
        v[0, 0] = 1.0
    assert not np.asarray(t).flags.writeable
    assert not t.detach().numpy().flags.writeable
    bc = np.broadcast_to(_base(shape=(1, 8)), (6, 8))
    assert not pylucid.from_numpy(bc).numpy().flags.writeable


def test_numpy_of_writable_borrow_is_writable():
    a = _base()
    v = pylucid.from_numpy(a).numpy()
    assert v.flags.writeable
    v[0, 0] = 42.0
    assert a[0, 0] == 42.0


# ---- np.asarray, .numpy() and requires_grad ----


def test_np_asarray_works():
    a = _base()
    t = ops.minimum(a, 0.5)
    arr = np.asarray(t)
    assert isinstance(arr, np.ndarray)
    np.testing.assert_array_equal(arr, np.minimum(a, 0.5))
    assert np.shares_memory(arr, t.numpy())
    assert arr.dtype == np.float32
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    c = np.array(t)  # np.array copies by default
    assert not np.shares_memory(c, t.numpy())
    np.testing.assert_array_equal(c, arr)
    tb = pylucid.from_numpy(a[::-1])
    assert np.shares_memory(np.asarray(tb), a)
    # NumPy ufuncs accept tensors
    np.testing.assert_array_equal(np.add(t, 1), arr + 1)


def test_numpy_on_requires_grad_raises_pointing_to_detach():
    t = pylucid.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        t.numpy()
    y = ops.minimum(t, 1.5)
    with pytest.raises(RuntimeError, match="detach"):
        y.numpy()
    with pytest.raises(RuntimeError, match="detach"):
        np.asarray(y)
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 1.5])
    b = pylucid.from_numpy(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        b.numpy()


# ---- big-endian arrays ----


BE_CASES = [">f4", ">f8", ">f2", ">i4", ">i8", ">i2"]


@pytest.mark.parametrize("dt", BE_CASES)
def test_big_endian_is_converted_or_rejected_never_misread(dt):
    native = np.dtype(dt).newbyteorder("=")
    vals = np.array([[1.5, -2.25, 3.0], [0.0, 7.0, -8.0]]).astype(native)
    be = vals.astype(dt)
    assert be.dtype.byteorder == ">"
    snap = be.tobytes()
    for view, ref in ((be, vals), (be.T, vals.T), (be[::-1, ::-2], vals[::-1, ::-2])):
        try:
            t = pylucid.from_numpy(view)
        except (TypeError, ValueError) as e:
            assert "endian" in str(e).lower() or "byte" in str(e).lower(), str(e)
            continue
        out = t.numpy()
        assert out.dtype.isnative
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(ops.maximum(view, view[..., ::-1]).numpy(), np.maximum(ref, ref[..., ::-1]))
        np.testing.assert_array_equal(ops.minimum(t, ref[..., :1]).numpy(), np.minimum(ref, ref[..., :1]))
    assert be.tobytes() == snap


def test_big_endian_gradients_are_correct():
    be = np.array([1.0, 4.0, -2.0, 3.0], dtype=">f8")
    try:
        a = pylucid.from_numpy(be, requires_grad=True)
    except (TypeError, ValueError):
        return pytest.fail("big-endian float64 should be converted (from_numpy documents it)")
    b = pylucid.tensor(np.array([2.0, 2.0, 2.0, 3.0]), requires_grad=True)
    y = ops.minimum(a, b)
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 2.0, -2.0, 3.0])
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(b.grad.numpy(), [0.0, 1.0, 0.0, 0.0])


# ---- pylucid.tensor copies ----


@pytest.mark.parametrize("index", range(len(VIEWS)), ids=[v[0] for v in VIEWS])
def test_tensor_copies(index):
    name, arr = _views()[index]  # fresh arrays: this test writes into them
    t = pylucid.tensor(arr)
    out = t.numpy()
    assert not np.shares_memory(out, arr), name
    np.testing.assert_array_equal(out, arr)
    before = out.copy()
    target = arr.base if arr.base is not None and arr.base.flags.writeable else arr
    if target.flags.writeable and target.size:
        target[...] = -99
        assert (arr == -99).all()
    np.testing.assert_array_equal(t.numpy(), before)


def test_tensor_of_tensor_and_constructor_copy():
    a = _base()
    t = pylucid.from_numpy(a)
    c = pylucid.tensor(t)
    assert not np.shares_memory(c.numpy(), a)
    np.testing.assert_array_equal(c.numpy(), a)
    k = pylucid.Tensor(a)
    assert not np.shares_memory(k.numpy(), a)
    a[...] = 0
    assert c.numpy().any() and k.numpy().any()
    lst = [[1.0, 2.0], [3.0, 4.0]]
    tl = pylucid.tensor(lst)
    assert tl.dtype == pylucid.float32
    np.testing.assert_array_equal(tl.numpy(), np.array(lst, np.float32))


def test_tensor_keeps_zero_d_shape():
    for data in (2.5, np.float32(2.5), np.array(2.5), np.array(2.5, np.float32)):
        t = pylucid.tensor(data)
        assert t.shape == ()
        assert t.numpy().shape == ()
        assert float(t.numpy()) == 2.5


# ---- random views (hypothesis) ----

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def _random_view(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.float16, np.int32]))
    seed = draw(st.integers(0, 2**32 - 1))
    base = np.random.default_rng(seed).integers(-4, 5, size=shape).astype(dtype)
    idx = []
    for n in shape:
        step = draw(st.sampled_from([1, 2, -1, -2, 3]))
        start = draw(st.integers(0, n - 1))
        idx.append(slice(start, None, step) if step > 0 else slice(start, None, step))
    view = base[tuple(idx)]
    perm = draw(st.permutations(range(view.ndim)))
    view = view.transpose(perm)
    if draw(st.booleans()):
        view = np.broadcast_to(view[..., :1], view.shape[:-1] + (draw(st.integers(1, 4)),))
    return base, view


@settings(max_examples=150, deadline=None)
@given(_random_view(), _random_view())
def test_random_views_shared_and_never_written(va, vb):
    base_a, a = va
    base_b, b = vb
    snap = (base_a.tobytes(), base_b.tobytes())
    t = pylucid.from_numpy(a)
    assert np.shares_memory(t.numpy(), a)
    np.testing.assert_array_equal(t.numpy(), a)
    try:
        expected = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        with pytest.raises(ValueError):
            ops.minimum(a, b)
    else:
        r = ops.minimum(t, b)
        assert r.shape == expected
        np.testing.assert_array_equal(r.numpy(), np.minimum(a, b).astype(r.dtype.numpy_dtype))
        assert not np.shares_memory(r.numpy(), base_a)
        assert not np.shares_memory(r.numpy(), base_b)
        if a.dtype.kind == "f" and b.dtype.kind == "f":
            ta = pylucid.from_numpy(a, requires_grad=True)
            tb = pylucid.from_numpy(b, requires_grad=True)
            ops.maximum(ta, tb).sum().backward()
            assert ta.grad.shape == a.shape and tb.grad.shape == b.shape
    assert (base_a.tobytes(), base_b.tobytes()) == snap
