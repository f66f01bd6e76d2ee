"""The C hot path (pylucid._hot): Tensor's C base type, batched release of
dropped tensors, and the fallbacks to the Python path."""

from __future__ import annotations

import gc
import importlib
import sys

import numpy as np
import pytest

import pylucid
from pylucid import ops

_t = importlib.import_module("pylucid.tensor")
hot = _t._hot
pytestmark = pytest.mark.skipif(hot is None, reason="ABI mode: no C hot path (see test_packaging)")


def test_dropped_small_tensors_wait_in_a_batch_and_large_ones_go_at_once() -> None:
    # Count handles with Python's cycle collector settled and off, so that
    # garbage from earlier tests is not released in the middle.
    gc.collect()
    gc.disable()
    try:
        _batching_checks()
    finally:
        gc.enable()


def _batching_checks() -> None:
    pylucid._stats()  # flushes
    base = pylucid._stats()["handles"]
    x = pylucid.from_numpy(np.arange(8, dtype=np.float32))
    results = [ops.minimum(x, 3.0) for _ in range(10)]
    assert pylucid._stats()["handles"] == base + 11
    del results
    assert hot.pending() == 10  # small and graph-free: batched
    assert pylucid._stats()["handles"] == base + 1  # _stats flushes the batch first
    assert hot.pending() == 0
    z, one = pylucid.from_numpy(np.zeros(5000, np.float32)), pylucid.tensor(1.0)
    big = ops.minimum(z, one)
    del big  # more than 4096 elements: released at once, not batched
    assert hot.pending() == 0
    g = pylucid.tensor([1.0, 2.0], requires_grad=True)
    y = ops.minimum(g, one)
    del y  # part of a graph: released at once
    assert hot.pending() == 0
    del x, g, z, one
    assert pylucid._stats()["handles"] == base


def test_batch_flushes_itself_every_64() -> None:
    pylucid._stats()
    x = pylucid.from_numpy(np.ones(4, np.float32))
    for _ in range(64 * 3 + 5):
        ops.maximum(x, 0.0)
    assert hot.pending() < 64


def test_non_tensor_arguments_and_subclasses_give_the_same_results() -> None:
    class Sub(pylucid.Tensor):
        __slots__ = ()

    s = Sub(np.float32([1, 4]))
    assert type(s) is Sub
    for a, b in [(s, 2.0), (np.float32([1, 4]), 2.0), ([2.0, 2.0], s), (2, s)]:
        np.testing.assert_array_equal(ops.minimum(a, b).numpy(), np.minimum(np.float32([1, 4]), 2.0))
    assert type(ops.minimum(s, s)) is pylucid.Tensor


def test_errors_from_the_library_keep_their_type_and_message() -> None:
    a, b = pylucid.from_numpy(np.ones(3, np.float32)), pylucid.from_numpy(np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)|\[3\].*\[4\]"):
        ops.minimum(a, b)
    with pytest.raises(ValueError, match="unknown binary op"):
        hot.binary(99, a, a)
    with pytest.raises(ValueError, match="unknown reduction"):
        hot.reduce_all(7, a, False)
    # nothing leaked by the failures
    pylucid._stats()
    np.testing.assert_array_equal(ops.minimum(a, a).numpy(), np.ones(3, np.float32))


def test_tensor_fields_are_c_members() -> None:
    t = ops.minimum(np.float32([[1, 2]]), 0.5)
    assert hot.TensorBase in type(t).__mro__  # after _methods.TensorMethods, a base without state (__slots__ = ())
    assert t._shape == (1, 2) and t._dtype is pylucid.float32 and t._rg is False and t._h > 0
    with pytest.raises(AttributeError):
        t.anything = 1  # type: ignore[attr-defined]
    import weakref

    r = weakref.ref(t)
    del t
    assert r() is None


def test_grad_setter_and_backward_take_the_c_path_and_keep_python_semantics() -> None:
    x = pylucid.tensor([1.0, 5.0], requires_grad=True)
    ops.minimum(x, 2.0).sum().backward()  # _hot.backward_run
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0])
    x.grad = None  # _hot.set_grad
    assert x.grad is None
    x.grad = np.float32([3, 4])  # not a Tensor: the Python path converts it
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    with pytest.raises(TypeError):
        hot.set_grad(x, np.float32([1, 2]))
    with pytest.raises(TypeError):
        hot.backward_run(np.float32([1]))
    with pytest.raises(RuntimeError, match="does not require grad"):
        pylucid.tensor([1.0]).sum().backward()


def test_subclasses_keep_grad_and_backward() -> None:
    # found by review: the C paths took only the exact Tensor type
    class Sub(pylucid.Tensor):
        __slots__ = ()

    s = Sub(np.float32([1, 5]), requires_grad=True)
    ops.minimum(s, 2.0).sum().backward()
    np.testing.assert_array_equal(s.grad.numpy(), [1.0, 0.0])
    r = Sub(np.float32([3.0]), requires_grad=True)
    r.backward()
    np.testing.assert_array_equal(r.grad.numpy(), [1.0])
    assert s.sum().item() == 6.0


def test_ops_take_keyword_arguments() -> None:
    x = pylucid.tensor([1.0, 5.0])
    for call in (lambda: ops.minimum(a=x, b=2.0), lambda: ops.minimum(x, b=2.0)):
        np.testing.assert_array_equal(call().numpy(), [1.0, 2.0])
    with pytest.raises(TypeError):
        ops.maximum(x)
    with pytest.raises(ValueError, match="unknown op code"):
        hot.binary(2**32 + 2, x, x)  # not truncated to another op


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "bool"])
def test_copy_deepcopy_and_pickle_give_new_memory_with_the_same_bits(dtype: str) -> None:
    # Tensor's C base type makes copying explicit: by value, never a second
    # owner of the same handle.
    import copy
    import pickle

    src = np.arange(6).reshape(2, 3)[:, ::-1] % 2 if dtype == "bool" else np.arange(6.0).reshape(2, 3)[:, ::-1]
    t = pylucid.tensor(src, dtype=dtype)
    if t.dtype.is_floating_point:
        t.requires_grad_(True)
    for c in (copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert c is not t and c._h != t._h
        assert c.dtype is t.dtype and c.shape == t.shape and c.requires_grad == t.requires_grad
        np.testing.assert_array_equal(c.detach().to(pylucid.float64).numpy(), t.detach().to(pylucid.float64).numpy())
        assert not np.shares_memory(c.detach().numpy(), t.detach().numpy())
    if t.requires_grad:
        y = ops.minimum(t, t)
        with pytest.raises(RuntimeError, match="leaves"):
            copy.deepcopy(y)
        with pytest.raises(RuntimeError, match="leaf"):
            pickle.dumps(y)


# ---- Op, the C type of the public ops (python/csrc) ----

def test_ops_are_the_c_op_type_with_their_public_face() -> None:
    import pickle
    import pydoc

    assert ops.Op is hot.Op and isinstance(ops.minimum, ops.Op) and isinstance(ops.clip, ops.Op)
    assert repr(ops.minimum) == "<pylucid op minimum>" and ops.minimum.__name__ == "minimum"
    assert ops.minimum.schema.name == "minimum" and ops.clip.schema.name == "clamp"
    assert next(s["doc"] for s in pylucid._lib.schema_table() if s["name"] == "minimum") in ops.minimum.__doc__
    assert "Elementwise minimum with NumPy broadcasting" in pydoc.render_doc(ops.minimum, renderer=pydoc.plaintext)
    for op in (ops.minimum, ops.sum, ops.clip, ops.argmin):
        assert pickle.loads(pickle.dumps(op)) is op
    assert ops.minimum.func is _t.binary and ops.minimum.args == (ops._ids["minimum"],)


def test_op_calls_match_the_python_path() -> None:
    """Every way of calling an op (two Tensors: straight to the library; other
    operands, out=, keywords, wrong arguments: through the implementation)
    gives what the implementation called directly gives, errors included."""
    x = np.float32([1.0, np.nan, -0.0, 3.0])
    y = np.float32([2.0, 0.0, 0.0, np.nan])
    a, b = pylucid.from_numpy(x), pylucid.from_numpy(y)
    mid = ops._ids["minimum"]
    for args, kw in [((a, b), {}), ((a, y), {}), ((x, 1.5), {}), ((a,), {"b": b}), ((), {"a": a, "b": b})]:
        want = _t._py_binary(mid, *args, **kw).numpy()
        for got in (ops.minimum(*args, **kw), type(ops.minimum).__call__(ops.minimum, *args, **kw)):
            np.testing.assert_array_equal(got.numpy().view(np.uint32), want.view(np.uint32))
    # Wrong calls fail in the implementation too, but both call forms report
    # them in the op's public name (docs/errors.md), never the internal one.
    for args, kw in [((a,), {}), ((a, b, b), {}), ((a, b), {"c": 1}), ((a, "x"), {})]:
        with pytest.raises(TypeError) as want_err:
            _t._py_binary(mid, *args, **kw)
        with pytest.raises(TypeError) as got_err:
            ops.minimum(*args, **kw)
        with pytest.raises(TypeError) as slot_err:
            type(ops.minimum).__call__(ops.minimum, *args, **kw)
        assert str(got_err.value) == str(slot_err.value)
        assert str(got_err.value).startswith("minimum(): ") and "_py_binary" not in str(got_err.value)
        assert str(got_err.value) != str(want_err.value)
    np.testing.assert_array_equal(ops.sum(x).numpy(), np.sum(x))
    np.testing.assert_array_equal(ops.amax(np.float32([[1, 5], [7, 2]]), dim=1).numpy(), [5, 7])
    np.testing.assert_array_equal(ops.neg(a).numpy(), -x)
    with pytest.raises(TypeError):
        ops.Op("x", 1, 2)


# ---- out= a NumPy array, described in C (python/csrc ndarray_out) ----

def _out_call(o, a, b):
    """ops.minimum(a, b, out=o) and whether it took the Python descriptor
    path (_t.out_desc, which caches by id)."""
    _t._out_descs.clear()
    r = ops.minimum(a, b, out=o)
    return r, id(o) in _t._out_descs


@pytest.mark.parametrize("make", [
    lambda: np.zeros((4, 6), np.float32),
    lambda: np.zeros((4, 12), np.float32)[:, ::2],     # not contiguous
    lambda: np.zeros((6, 4), np.float32).T,            # transposed
    lambda: np.zeros((4, 6), np.float32)[::-1, ::-1],  # negative strides
])
def test_out_ndarray_views_take_the_c_path_and_match_numpy(make) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((4, 6)).astype(np.float32)
    x[0, 0], y[1, 1] = np.nan, np.nan
    o = make()
    r, python_path = _out_call(o, pylucid.from_numpy(x), pylucid.from_numpy(y))
    assert r is o and not python_path
    np.testing.assert_array_equal(o.view(np.uint32), np.minimum(x, y).view(np.uint32))


def test_out_ndarray_0d_takes_the_c_path() -> None:
    o = np.zeros((), np.float32)
    r, python_path = _out_call(o, pylucid.tensor(np.float32(2)), pylucid.tensor(np.float32(-1)))
    assert r is o and not python_path and o == -1


def _same_error(o, a, b):
    """out=o raises as the Python path (call_op) does; returns the error."""
    mid = ops._ids["minimum"]
    with pytest.raises(Exception) as want:
        _t.call_op(mid, (a, b), (), o, 1)
    with pytest.raises(Exception) as got:
        ops.minimum(a, b, out=o)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
    return got.value


def test_out_ndarray_errors_are_the_python_paths() -> None:
    a = pylucid.from_numpy(np.float32([1, 2, 3, 4]))
    b = pylucid.from_numpy(np.float32([4, 3, 2, 1]))
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    assert isinstance(_same_error(ro, a, b), ValueError) and not ro.any()
    _same_error(np.zeros(4, np.float64), a, b)                        # wrong dtype
    _same_error(np.zeros(4, np.bool_), a, b)                          # bool (the Python path)
    _same_error(np.zeros(4, np.dtype(np.float32).newbyteorder()), a, b)  # byte-swapped
    _same_error(np.zeros(5, np.float32), a, b)                        # wrong shape
    _same_error(np.ndarray((4,), np.float32, np.zeros(20, np.uint8), 0, (5,)), a, b)  # strides not in items
    _same_error(np.zeros((), np.float32), a, b)                       # 0-d for a 1-d result
    with pytest.raises(TypeError):
        ops.minimum(a, b, out=[0.0] * 4)


def test_out_ndarray_bool_and_byteswapped_take_the_python_path() -> None:
    t = pylucid.from_numpy(np.array([True, False, True]))
    f = pylucid.from_numpy(np.array([True, True, False]))
    o = np.zeros(3, np.bool_)
    r, python_path = _out_call(o, t, f)
    assert r is o and python_path
    np.testing.assert_array_equal(o, [True, False, False])


def test_out_ndarray_in_place_and_overlap() -> None:
    x = np.float32([5, 1, 4, 2])
    a = pylucid.from_numpy(x)  # shares x's memory
    b = pylucid.from_numpy(np.float32([3, 3, 3, 3]))
    r, python_path = _out_call(x, a, b)  # in place: out is that input
    assert r is x and not python_path
    np.testing.assert_array_equal(x, [3, 1, 3, 2])
    buf = np.float32([5, 1, 4, 2, 0])
    _same_error(buf[1:], pylucid.from_numpy(buf[:-1]), b)  # shares memory with an input, not being it


# ---- NumPy operands, lent in C for the call (python/csrc binary_operands) ----

def _python_binary_calls(fn):
    """fn() and how many times it entered the Python implementation of a
    binary op (tensor._py_binary), seen through a profile hook."""
    calls = [0]
    code = _t._py_binary.__code__

    def prof(frame, event, arg):
        if event == "call" and frame.f_code is code:
            calls[0] += 1

    sys.setprofile(prof)
    try:
        r = fn()
    finally:
        sys.setprofile(None)
    return r, calls[0]


def _settled_borrowed() -> int:
    gc.collect()
    pylucid._collect()
    return int(pylucid._stats()["borrowed"])


_ND_OPERANDS = {
    "contiguous": lambda x: x,
    "strided": lambda x: np.repeat(x, 2, axis=1)[:, ::2],
    "negative": lambda x: x[::-1, ::-1].copy()[::-1, ::-1],
    "read-only": lambda x: np.frombuffer(x.tobytes(), x.dtype).reshape(x.shape),
    "broadcast": lambda x: np.broadcast_to(x[:1], x.shape),
}


@pytest.mark.parametrize("layout", list(_ND_OPERANDS))
@pytest.mark.parametrize("pair", ["nd-nd", "nd-tensor", "tensor-nd", "nd-nd-out", "tensor-nd-out-tensor"])
def test_ndarray_operands_take_the_c_path_and_match_numpy(layout, pair) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    y = rng.standard_normal((3, 5)).astype(np.float32)
    x[0, 1], y[2, 2], x[1, 3], y[1, 3] = np.nan, np.nan, 0.5, 0.5  # NaNs and a tie (no signed zeros: NumPy's pick differs)
    xa, ya = _ND_OPERANDS[layout](x), y
    want = np.minimum(xa, ya)
    before = _settled_borrowed()
    a = pylucid.from_numpy(xa) if pair.startswith("tensor") else xa
    b = ya if "tensor-nd" in pair else (pylucid.from_numpy(ya) if pair == "nd-tensor" else ya)
    o = None
    if pair == "nd-nd-out":
        o = np.full((3, 5), 9.0, np.float32)
        r, n = _python_binary_calls(lambda: ops.minimum(a, b, out=o))
        assert r is o
        got = o
    elif pair == "tensor-nd-out-tensor":
        o = pylucid.tensor(np.zeros((3, 5), np.float32))
        r, n = _python_binary_calls(lambda: ops.minimum(a, b, out=o))
        assert r is o
        got = o.numpy()
    else:
        r, n = _python_binary_calls(lambda: ops.minimum(a, b))
        got = r.numpy()
    assert n == 0  # no Python frame of the op
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(xa, _ND_OPERANDS[layout](x))  # the inputs are untouched
    r = a = b = o = got = None
    assert _settled_borrowed() == before  # every lent array went back


def test_ndarray_operands_keep_from_numpy_semantics() -> None:
    """Promotion, broadcasting, gradients through a Tensor operand, and the
    cases the C path leaves to Python (bool arrays, lists, subclasses)
    give what from_numpy's tensors give."""
    h = np.float16([1.5, -2.0, 3.0])
    f = np.float32([[1.0], [2.0]])
    for a, b in [(h, f), (f, h), (h, h), (np.int32([1, 5, 3]), h), (np.float64([0.5, 9.0, 1.0]), f)]:
        got = ops.maximum(a, b)
        ref = ops.maximum(pylucid.from_numpy(a), pylucid.from_numpy(b))
        assert got.dtype is ref.dtype and got.shape == ref.shape
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
    t = pylucid.tensor([1.0, 4.0, 2.0], requires_grad=True)
    y = ops.minimum(np.float32([3.0, 4.0, 2.0]), t)  # ties to a: the ndarray wins them
    assert y.grad_fn is not None and y.grad_fn.name() == "MinimumBackward"
    y.backward(np.float32([1.0, 10.0, 100.0]))
    np.testing.assert_array_equal(t.grad.numpy(), [1.0, 0.0, 0.0])
    m = np.ma.masked_array([1.0, 2.0], dtype=np.float32)  # a subclass: the Python path
    for a, b in [(np.bool_([True, False]), np.bool_([False, False])), (m, m),
                 (np.float32([1, 4]), [2.0, 2.0])]:
        _, n = _python_binary_calls(lambda: ops.minimum(a, b))
        assert n == 1


def test_ndarray_operand_errors_leave_nothing_lent() -> None:
    before = _settled_borrowed()
    x, y = np.zeros(3, np.float32), np.zeros(4, np.float32)
    for a, b in [(x, y), (pylucid.from_numpy(x), y), (x, pylucid.from_numpy(y))]:
        with pytest.raises(ValueError, match="broadcast"):
            ops.minimum(a, b)
        with pytest.raises(ValueError):
            ops.minimum(x, x, out=np.zeros(4, np.float32))
    huge = np.broadcast_to(np.float32(1), (2**52, 1))  # a view of 4 bytes whose broadcast cannot exist
    with pytest.raises(ValueError, match="more elements than fit"):
        ops.minimum(huge, np.ones((1, 4096), np.float32))
    del a, b
    assert _settled_borrowed() == before


def _outcome(fn):
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001 - compared between the two paths
        return type(e), str(e)
    return r.dtype, r.shape, r.numpy().tobytes()


_NUMBERS = [0.5, -0.0, 0.0, float("nan"), float("-inf"), 1e300, 3, -2, 0, True, False,
            2**62, -(2**63), 2**63 - 1, 2**63, -(2**63) - 1, 10**30]


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"])
@pytest.mark.parametrize("name", ["minimum", "maximum", "fmin", "fmax"])
def test_python_number_operands_match_the_python_path(name, dt) -> None:
    # A Python float, int (within int64) or bool beside a Tensor or an exact
    # ndarray is made a weak scalar in C (number_operand in python/csrc): every
    # result (dtype, shape, bits) and every error equals the Python path's,
    # which tensor._py_binary runs for the same operands.
    op = getattr(ops, name)
    code = op.args[0]
    base = np.array([-1.5, 0.0, 2.0, np.nan, 7.0], np.float64)
    if dt == "bool":
        arr = base > 0
    elif dt in ("float16", "bfloat16"):
        arr = None
    else:
        arr = np.nan_to_num(base).astype(dt) if dt[0] in "iu" else base.astype(dt)
    tensor = pylucid.tensor(base, dtype=dt) if arr is None else pylucid.from_numpy(arr)
    operands = [tensor] + ([] if arr is None else [arr])
    for x in operands:
        for s in _NUMBERS:
            for a, b in [(x, s), (s, x)]:
                want = _outcome(lambda: _t._py_binary(code, a, b))
                got = _outcome(lambda: op(a, b))
                assert got == want, (name, dt, type(x).__name__, a if a is s else b)


def test_python_number_operands_take_the_c_path() -> None:
    x = pylucid.from_numpy(np.float32([1, 4]))
    arr = np.float32([1, 4])
    for a, b in [(x, 2.0), (3, x), (arr, True), (x, -(2**63)), (arr, 0.5)]:
        assert _python_binary_calls(lambda: ops.minimum(a, b))[1] == 0, (a, b)
    # An int past int64 (encoded exactly on the Python path), two numbers,
    # NumPy scalars (strong, not weak) and lists still go to Python.
    for a, b in [(x, 2**63), (1.0, 2.0), (x, np.float64(2.0)), ([1.0, 2.0], 1.0)]:
        assert _python_binary_calls(lambda: ops.minimum(a, b))[1] == 1, (a, b)


def test_python_number_operand_of_a_graph() -> None:
    # The scalar a graph saves lives on after the call released its handle.
    x = pylucid.tensor(np.float64([1.0, 3.0, 2.0]), requires_grad=True)
    y = ops.minimum(x, 2.0)
    gc.collect()
    pylucid._stats()  # flushes the batch of dropped small tensors
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 1.0])  # the tie at 2.0 goes to x
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 2.0, 2.0])


def test_arrays_lent_from_c_are_kept_until_their_tokens_come_back() -> None:
    """python/csrc keeps the arrays it lends in its own slot table (not the
    borrowed dict): each is held while the library may read it, every one of
    them goes back once its tensors are gone, and tokens that are not live
    ones change nothing."""
    from pylucid import _runtime

    arrs = [np.full(3, i, np.float32) for i in range(300)]  # more than the table's first 64 slots
    rc = [sys.getrefcount(a) for a in arrs]
    ts = [pylucid.from_numpy(a) for a in arrs]
    assert [sys.getrefcount(a) for a in arrs] == [r + 1 for r in rc]  # the table's reference
    owners = hot.lent_owners()  # the C table itself, past its first 64 slots
    assert all(any(o is a for o in owners) for a in arrs)
    assert all(any(o is a for o in _runtime.borrowed_owners()) for a in arrs)
    owners = None
    # No live token among these (a slot past any the table can have, other
    # ranges, and the extremes of int64).
    hot.return_lent([0, -1, 1, -(2**63), 2**61 - 1, 2**62, 2**63 - 1, 2**61 + 0xFFFFFFFF, 2**61 + (3 << 32) + 0xFFFFFFFF])
    with pytest.raises(TypeError):
        hot.return_lent((1, 2))
    with pytest.raises(TypeError):
        hot.return_lent(["1"])
    gc.collect()
    for i, t in enumerate(ts):
        np.testing.assert_array_equal(t.numpy(), np.full(3, i, np.float32))
    assert [sys.getrefcount(a) for a in arrs] == [r + 1 for r in rc]
    t = ts = None
    _settled_borrowed()
    pylucid.from_numpy(np.zeros(1, np.float32))  # a call after the last release drains the queue
    _settled_borrowed()
    assert [sys.getrefcount(a) for a in arrs] == rc
    assert not any(o is a for o in _runtime.borrowed_owners() for a in arrs)


def test_last_reference_to_a_lent_array_may_run_python_code() -> None:
    """The table's reference may be an array's last: letting it go frees
    the array's base, whose __del__ may call the library again (here an op
    on lent arrays). Nothing deadlocks or loses a release, whichever drain
    (C's or Python's) hands the token back."""
    ran = []

    class Buffer(bytearray):
        def __del__(self) -> None:
            ran.append(float(ops.minimum(np.ones(2, np.float32), np.full(2, 3.0, np.float32)).numpy()[0]))

    for _ in range(200):
        arr = np.frombuffer(Buffer(16), np.float32)
        t = pylucid.from_numpy(arr)
        arr = t = None
        pylucid.from_numpy(np.zeros(1, np.float32))  # drains (C) what came back
    _settled_borrowed()  # and the Python drain the rest
    pylucid.from_numpy(np.zeros(1, np.float32))
    _settled_borrowed()
    assert ran == [1.0] * 200
