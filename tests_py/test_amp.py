"""Autocast (docs/semantics.md): every combination of float16/bfloat16/float32/float64
inputs under each autocast dtype, for minimum, maximum and the arithmetic ops
(all PROMOTE): result dtype, values against NumPy computed in the promoted
dtype, and gradient dtypes and values. Plus the context manager itself:
nesting, enabled=False, thread-locality, the decorator."""

import threading

import numpy as np
import pytest

import pylucid
from pylucid import ops
from pylucid._state import MODE_AUTOCAST, state

ml_dtypes = pytest.importorskip("ml_dtypes")

F16, BF16, F32, F64 = pylucid.float16, pylucid.bfloat16, pylucid.float32, pylucid.float64
FLOATS = [F16, BF16, F32, F64]
NP = {F16: np.dtype(np.float16), BF16: np.dtype(ml_dtypes.bfloat16), F32: np.dtype(np.float32),
      F64: np.dtype(np.float64)}


def promoted(a, b):
    """docs/dtypes.md and the autocast section of docs/semantics.md, PROMOTE: the wider float; float16 with bfloat16 gives float32."""
    if a is b:
        return a
    if {a, b} == {F16, BF16}:
        return F32
    return max(a, b, key=lambda d: d.itemsize)


def _inputs(da, db):
    rng = np.random.default_rng(FLOATS.index(da) * 4 + FLOATS.index(db))
    # |values| in [0.5, 4): no overflow in b*b for float16, no division by ~0
    a = rng.uniform(0.5, 4, (3, 4)) * rng.choice([-1, 1], (3, 4))
    b = rng.uniform(0.5, 4, (4,)) * rng.choice([-1, 1], (4,))
    a[0, :2] = b[:2]  # exact ties (in float64; in narrower dtypes after rounding)
    return a.astype(NP[da]), b.astype(NP[db])


def _expected(name, a, b, p):
    """Forward value and the two gradients (for an upstream gradient of ones),
    computed by NumPy in the promoted dtype p, op by op as the library does."""
    ap, bp = a.astype(NP[p]), np.broadcast_to(b.astype(NP[p]), a.shape)
    one = np.ones(a.shape, NP[p])
    if name == "minimum":
        wins = (ap <= bp) | np.isnan(ap)
        return np.where(wins, ap, bp), wins.astype(NP[p]), (~wins).astype(NP[p])
    if name == "maximum":
        wins = (ap >= bp) | np.isnan(ap)
        return np.where(wins, ap, bp), wins.astype(NP[p]), (~wins).astype(NP[p])
    if name == "add":
        return ap + bp, one, one
    if name == "sub":
        return ap - bp, one, -one
    if name == "mul":
        return ap * bp, one * bp, one * ap
    if name == "div":
        return ap / bp, one / bp, -(one * (ap / (bp * bp)))
    raise AssertionError(name)


@pytest.mark.parametrize("autocast_dtype", [F16, BF16], ids=["ac_f16", "ac_bf16"])
@pytest.mark.parametrize("db", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("da", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("name", ["minimum", "maximum", "add", "sub", "mul", "div"])
def test_autocast_promote(name, da, db, autocast_dtype):
    op = getattr(ops, name)
    assert op.schema.amp_policy is ops.AmpPolicy.PROMOTE
    a, b = _inputs(da, db)
    p = promoted(da, db)
    ta = pylucid.tensor(a, requires_grad=True)
    tb = pylucid.tensor(b, requires_grad=True)
    with pylucid.autocast(dtype=autocast_dtype):
        assert pylucid.is_autocast_enabled() and pylucid.get_autocast_dtype() is autocast_dtype
        y = op(ta, tb)
        y.backward(np.ones(y.shape, NP[p]))
    assert not pylucid.is_autocast_enabled()
    assert y.dtype is p
    want, ga, gb = _expected(name, a, b, p)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    # gradients: in each input's own dtype; b's is summed over the broadcast dim
    assert ta.grad.dtype is da and tb.grad.dtype is db
    np.testing.assert_array_equal(ta.grad.numpy(), ga.astype(NP[da]))
    gb_sum = gb.astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(tb.grad.numpy().astype(np.float64), gb_sum.astype(NP[db]).astype(np.float64),
                               rtol=1e-2 if NP[db].itemsize == 2 else 1e-6)
    # PROMOTE is the ordinary promotion: the same bits as without autocast
    with pylucid.no_grad():
        plain = op(ta, tb)
    assert plain.dtype is p
    np.testing.assert_array_equal(plain.numpy(), y.detach().numpy())


def test_minimum_spec_examples():
    h = pylucid.tensor([1.0, 5.0], dtype=F16, requires_grad=True)
    s = pylucid.tensor([3.0, 2.0], dtype=F32, requires_grad=True)
    h2 = pylucid.tensor([2.0, 2.0], dtype=F16)
    with pylucid.autocast(dtype=F16):
        y = ops.minimum(h, s)
        assert y.dtype is F32  # runs in float32
        assert ops.minimum(h, h2).dtype is F16  # stays float16
        y.sum().backward()
    assert h.grad.dtype is F16 and s.grad.dtype is F32
    np.testing.assert_array_equal(h.grad.numpy(), [1, 0])
    np.testing.assert_array_equal(s.grad.numpy(), [0, 1])


def test_scalars_and_integers_under_autocast():
    h = pylucid.tensor([1.0, 5.0], dtype=F16)
    i = pylucid.tensor([1, 5], dtype=pylucid.int32)
    b = pylucid.tensor([1.0, 5.0], dtype=BF16)
    for ac in (F16, BF16):
        with pylucid.autocast(ac):
            assert ops.minimum(h, 2.0).dtype is F16  # Python scalars stay weak
            assert ops.maximum(b, 2).dtype is BF16
            assert ops.minimum(i, 2.5).dtype is F32  # the default float
            assert ops.minimum(i, h).dtype is F16  # an integer with a float gives that float
            assert ops.minimum(i, i).dtype is pylucid.int32  # non-floating inputs are never cast
            np.testing.assert_array_equal(ops.minimum(i, 2.5).numpy(), [1, 2.5])


def test_nesting_enabled_false_and_errors():
    assert pylucid.get_autocast_dtype() is None
    with pylucid.autocast(F16):
        with pylucid.autocast(dtype="bfloat16"):
            assert pylucid.get_autocast_dtype() is BF16
            with pylucid.autocast(enabled=False):
                assert not pylucid.is_autocast_enabled()
                assert pylucid.get_autocast_dtype() is None
            assert pylucid.get_autocast_dtype() is BF16
        assert pylucid.get_autocast_dtype() is F16
        with pytest.raises(ZeroDivisionError):
            with pylucid.autocast(BF16):
                1 / 0
        assert pylucid.get_autocast_dtype() is F16  # restored on errors
        with pylucid.no_grad():  # grad mode and autocast are independent bits
            assert pylucid.get_autocast_dtype() is F16 and not pylucid.is_grad_enabled()
        assert pylucid.is_grad_enabled()
    assert not pylucid.is_autocast_enabled() and state.mode & MODE_AUTOCAST == 0
    for bad in (F32, F64, pylucid.int32, "float32"):
        with pytest.raises(TypeError, match="float16 or pylucid.bfloat16"):
            pylucid.autocast(dtype=bad)


def test_decorator():
    @pylucid.autocast(dtype=BF16)
    def inside():
        return pylucid.get_autocast_dtype()

    assert inside() is BF16
    assert pylucid.get_autocast_dtype() is None


def test_thread_local_and_shared_instance():
    ac = pylucid.autocast(F16)
    barrier = threading.Barrier(2)
    seen = {}

    def worker(name, d):
        assert not pylucid.is_autocast_enabled()  # a new thread starts with autocast off
        with pylucid.autocast(d):
            with ac:  # one object entered from two threads at once
                barrier.wait()
                seen[name + "_in"] = pylucid.get_autocast_dtype()
                barrier.wait()
            seen[name + "_after"] = pylucid.get_autocast_dtype()

    with pylucid.autocast(BF16):
        ts = [threading.Thread(target=worker, args=("x", BF16)), threading.Thread(target=worker, args=("y", F16))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert pylucid.get_autocast_dtype() is BF16  # untouched by the other threads
    assert seen == {"x_in": F16, "y_in": F16, "x_after": BF16, "y_after": F16}
