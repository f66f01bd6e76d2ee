"""NumPy's protocols on Tensor (docs/interop.md, "NumPy protocols").

The ufuncs np.minimum, np.maximum, np.fmin, np.fmax, np.add, np.subtract,
np.multiply, np.true_divide, np.negative (and minimum/maximum.reduce) and the
functions np.clip, np.amin, np.amax, np.min, np.max, np.argmin, np.argmax,
np.sum, np.mean run pylucid's ops and return Tensors with autograd; any other
ufunc or function gets plain arrays when no tensor requires grad, and raises
TypeError naming it when one does. References: NumPy on the same arrays, the
pylucid op called directly, analytic gradients and finite differences.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import pylucid
from pylucid import autograd, ops
from pylucid.tensor import late

RNG = np.random.default_rng(1234)


def _tie_free(shape, dtype=np.float64, rng=RNG):
    """Values with no two equal (and no ±0), so winners are unambiguous."""
    n = int(np.prod(shape))
    v = rng.permutation(n).astype(dtype) - n / 2 + 0.25
    return v.reshape(shape)


def _leaf(arr):
    return pylucid.tensor(arr, requires_grad=True)


def _np(t):
    return t.detach().numpy()


def _bits_equal(x, y):
    x, y = np.asarray(x), np.asarray(y)
    assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, y.dtype, x.shape, y.shape)
    u = np.dtype("u%d" % x.dtype.itemsize)
    np.testing.assert_array_equal(x.view(u), y.view(u))


# ---- elementwise ufuncs ----

# ufunc, pylucid op, grad_fn name, analytic VJP (a, b, g) -> (ga, gb) in NumPy
BINARY = [
    (np.minimum, ops.minimum, "MinimumBackward", lambda a, b, g: (g * (a <= b), g * (a > b))),
    (np.maximum, ops.maximum, "MaximumBackward", lambda a, b, g: (g * (a >= b), g * (a < b))),
    (np.fmin, ops.fmin, "FminBackward", lambda a, b, g: (g * (a <= b), g * (a > b))),
    (np.fmax, ops.fmax, "FmaxBackward", lambda a, b, g: (g * (a >= b), g * (a < b))),
    (np.add, ops.add, "AddBackward", lambda a, b, g: (g, g)),
    (np.subtract, ops.sub, "SubBackward", lambda a, b, g: (g, -g)),
    (np.multiply, ops.mul, "MulBackward", lambda a, b, g: (g * b, g * a)),
    (np.true_divide, ops.div, "DivBackward", lambda a, b, g: (g / b, -g * a / (b * b))),
]
BINARY_IDS = [u.__name__ for u, *_ in BINARY]


def _reduce_to(g, shape):
    """g summed down to shape (the broadcasting VJP)."""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for i, s in enumerate(shape):
        if s == 1 and g.shape[i] != 1:
            g = g.sum(axis=i, keepdims=True)
    return g


@pytest.mark.parametrize("ufunc, op, node, vjp", BINARY, ids=BINARY_IDS)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1))])
def test_binary_ufunc_dispatches_with_autograd(ufunc, op, node, vjp, shapes):
    both = _tie_free((int(np.prod(shapes[0])) + int(np.prod(shapes[1])),))
    an = both[: int(np.prod(shapes[0]))].reshape(shapes[0])
    bn = both[int(np.prod(shapes[0])):].reshape(shapes[1])
    a, b = _leaf(an), _leaf(bn)
    y = ufunc(a, b)
    assert type(y) is pylucid.Tensor
    assert y.grad_fn is not None and y.grad_fn.name() == node
    _bits_equal(_np(y), ufunc(an, bn))  # IEEE ops and selections: NumPy's bits
    g = RNG.standard_normal(y.shape)
    y.backward(pylucid.tensor(g))
    ga, gb = vjp(np.broadcast_to(an, y.shape), np.broadcast_to(bn, y.shape), g)
    np.testing.assert_allclose(_np(a.grad), _reduce_to(ga, an.shape), rtol=1e-12, atol=0)
    np.testing.assert_allclose(_np(b.grad), _reduce_to(gb, bn.shape), rtol=1e-12, atol=0)
    # and exactly the op's own gradients
    a2, b2 = _leaf(an), _leaf(bn)
    op(a2, b2).backward(pylucid.tensor(g))
    _bits_equal(_np(a.grad), _np(a2.grad))
    _bits_equal(_np(b.grad), _np(b2.grad))


@pytest.mark.parametrize("ufunc, op, node, vjp", BINARY, ids=BINARY_IDS)
def test_binary_ufunc_gradcheck(ufunc, op, node, vjp):
    both = _tie_free((12,))
    a, b = _leaf(both[:6].reshape(2, 3)), _leaf(both[6:].reshape(2, 3))
    assert autograd.gradcheck(lambda x, y: ufunc(x, y), (a, b))


def test_negative_dispatches_with_autograd():
    an = _tie_free((2, 5))
    a = _leaf(an)
    y = np.negative(a)
    assert type(y) is pylucid.Tensor and y.grad_fn.name() == "NegBackward"
    _bits_equal(_np(y), np.negative(an))
    g = RNG.standard_normal(y.shape)
    y.backward(pylucid.tensor(g))
    _bits_equal(_np(a.grad), -g)


@pytest.mark.parametrize("ufunc, op, node, vjp", BINARY, ids=BINARY_IDS)
def test_mixed_ndarray_and_tensor_in_either_position(ufunc, op, node, vjp):
    both = _tie_free((8,))
    xn, tn = both[:4], both[4:]
    for args, which in (((_leaf(tn), xn), 0), ((xn, _leaf(tn)), 1)):
        y = ufunc(*args)
        assert type(y) is pylucid.Tensor and y.grad_fn.name() == node
        ref = ufunc(*(_np(v) if isinstance(v, pylucid.Tensor) else v for v in args))
        _bits_equal(_np(y), ref)
        g = RNG.standard_normal(4)
        y.backward(pylucid.tensor(g))
        an, bn = (tn, xn) if which == 0 else (xn, tn)
        want = vjp(an, bn, g)[which]
        np.testing.assert_allclose(_np(args[which].grad), want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("pyop, node", [(lambda x, t: x + t, "AddBackward"), (lambda x, t: x - t, "SubBackward"),
                                        (lambda x, t: x * t, "MulBackward"), (lambda x, t: x / t, "DivBackward")])
def test_ndarray_operator_tensor_gives_a_tensor(pyop, node):
    xn = np.array([1.5, -2.0, 3.0])
    t = _leaf(np.array([0.5, 4.0, -1.0]))
    y = pyop(xn, t)
    assert type(y) is pylucid.Tensor and y.grad_fn.name() == node
    _bits_equal(_np(y), pyop(xn, _np(t)))


def test_scalars_follow_pylucids_promotion():
    t = _leaf(np.array([1.0, 5.0], dtype=np.float32))
    # Python scalars are weak: float32 stays float32
    for y in (np.minimum(t, 3.0), np.maximum(2, t), np.add(t, 1.5), np.true_divide(1.0, t)):
        assert type(y) is pylucid.Tensor and y.dtype is pylucid.float32 and y.grad_fn is not None
    np.testing.assert_array_equal(_np(np.minimum(t, 3.0)), [1.0, 3.0])
    np.testing.assert_array_equal(_np(np.maximum(2, t)), [2.0, 5.0])
    # NumPy scalars are strong, as the op called directly (and NumPy 2) say
    for s in (np.float64(2.0), np.float16(2.0), np.int64(3)):
        y = np.multiply(s, t)
        assert y.dtype is ops.mul(s, t).dtype
        if isinstance(s, np.floating):  # (int with float: docs/dtypes.md's rule, not NumPy's)
            assert y.dtype.numpy_dtype == np.result_type(s, np.float32)
    y = np.minimum(t, 3.0)
    y.sum().backward()
    np.testing.assert_array_equal(_np(t.grad), [1.0, 0.0])


def test_ties_follow_pylucids_rule_through_numpy():
    # minimum(+0.0, -0.0) is +0.0 (the first operand), gradient to a
    a, b = _leaf(np.array([0.0, 2.0])), _leaf(np.array([-0.0, 2.0]))
    y = np.minimum(a, b)
    _bits_equal(_np(y), np.array([0.0, 2.0]))
    y.sum().backward()
    np.testing.assert_array_equal(_np(a.grad), [1.0, 1.0])
    np.testing.assert_array_equal(_np(b.grad), [0.0, 0.0])


def test_bfloat16_tensors_dispatch():
    a = pylucid.tensor([1.0, 5.0], dtype=pylucid.bfloat16)
    b = pylucid.tensor([3.0, 2.0], dtype=pylucid.bfloat16)
    y = np.minimum(a, b)
    assert type(y) is pylucid.Tensor and y.dtype is pylucid.bfloat16
    np.testing.assert_array_equal(_np(y.to(pylucid.float32)), [1.0, 2.0])


# ---- minimum/maximum.reduce ----

def _with_nans_and_ties():
    x = np.array([[3.0, 1.0, 1.0, 7.0],
                  [np.nan, 2.0, np.nan, -1.0],
                  [-0.0, 0.0, 5.0, -0.0]])
    return x


@pytest.mark.parametrize("ufunc, op, node", [(np.minimum, ops.amin, "AminBackward"),
                                             (np.maximum, ops.amax, "AmaxBackward")])
@pytest.mark.parametrize("axis", [1, 0, -1, None, (0, 1), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_minmax_reduce_is_amin_amax_bit_for_bit(ufunc, op, node, axis, keepdims):
    xn = _with_nans_and_ties()
    t = _leaf(xn)
    y = ufunc.reduce(t, axis=axis, keepdims=keepdims)
    assert type(y) is pylucid.Tensor
    t2 = _leaf(xn)
    ref = op(t2, axis, keepdims)
    _bits_equal(_np(y), _np(ref))
    # NumPy's values (NaN propagates; it does not promise which zero)
    np.testing.assert_array_equal(_np(y), ufunc.reduce(xn, axis=axis, keepdims=keepdims))
    if axis == ():
        return
    assert y.grad_fn.name() == node
    g = RNG.standard_normal(y.shape)
    y.backward(pylucid.tensor(g))
    ref.backward(pylucid.tensor(g))
    _bits_equal(_np(t.grad), _np(t2.grad))


def test_minimum_reduce_axis_1_equals_amin_dim_1():
    xn = RNG.standard_normal((5, 6)).astype(np.float32)
    xn[2, 3] = np.nan
    t = _leaf(xn)
    y = np.minimum.reduce(t, axis=1)
    _bits_equal(_np(y), _np(ops.amin(t, dim=1)))
    assert y.grad_fn.name() == "AminBackward"
    y.sum().backward()
    want = np.zeros_like(xn)
    want[np.arange(5), np.argmin(xn, axis=1)] = 1  # NumPy's argmin: first NaN, else first smallest
    np.testing.assert_array_equal(_np(t.grad), want)


def test_reduce_default_axis_is_0_as_numpy():
    xn = _tie_free((3, 4))
    t = pylucid.tensor(xn)
    _bits_equal(_np(np.maximum.reduce(t)), np.maximum.reduce(xn))
    assert np.maximum.reduce(t).shape == (4,)


@pytest.mark.parametrize("ufunc, op", [(np.fmin, "nanmin"), (np.fmax, "nanmax")])
def test_fmin_fmax_reduce_are_the_nan_reductions(ufunc, op):
    # fmin.reduce ignores NaN as nanmin does (fmin's rule folded): a Tensor
    # with autograd (it went to NumPy before nanmin existed).
    xn = _with_nans_and_ties()
    r = ufunc.reduce(pylucid.tensor(xn), axis=1)
    assert isinstance(r, pylucid.Tensor)
    np.testing.assert_array_equal(r.numpy(), ufunc.reduce(xn, axis=1))
    x = _leaf(xn)
    y = ufunc.reduce(x, axis=1)
    assert y.grad_fn.name() == op.capitalize() + "Backward"
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy().sum(axis=1), np.ones(xn.shape[0]))


# ---- out= ----

def test_ufunc_out_tensor_and_ndarray():
    a = pylucid.tensor([1.0, 5.0, -2.0])
    x = np.array([2.0, 2.0, 2.0], dtype=np.float32)
    o = pylucid.zeros(3)
    r = np.minimum(a, x, out=o)
    assert r is o
    np.testing.assert_array_equal(o.numpy(), [1.0, 2.0, -2.0])
    on = np.zeros(3, dtype=np.float32)
    r = np.maximum(a, x, out=(on,))
    assert r is on
    np.testing.assert_array_equal(on, [2.0, 5.0, 2.0])
    # only the out is a Tensor: NumPy still asks pylucid
    o2 = pylucid.zeros(3)
    r = np.add(x, x, out=o2)
    assert r is o2
    np.testing.assert_array_equal(o2.numpy(), [4.0, 4.0, 4.0])
    # positional out
    o3 = pylucid.zeros(3)
    assert np.negative(a, o3) is o3
    np.testing.assert_array_equal(o3.numpy(), [-1.0, -5.0, 2.0])


def test_ufunc_out_in_place_and_augmented_assignment():
    a = pylucid.tensor([1.0, 5.0, -2.0])
    r = np.minimum(a, 0.0, out=a)
    assert r is a
    np.testing.assert_array_equal(a.numpy(), [0.0, 0.0, -2.0])
    arr = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    keep = arr
    arr += pylucid.tensor([10.0, 20.0, 30.0])
    assert arr is keep and type(arr) is np.ndarray
    np.testing.assert_array_equal(arr, [11.0, 22.0, 33.0])


def test_ufunc_out_that_would_record_a_graph_raises():
    a = _leaf(np.array([1.0, 2.0]))
    o = np.zeros(2)
    with pytest.raises(RuntimeError):
        np.minimum(a, 1.5, out=o)
    np.testing.assert_array_equal(o, [0.0, 0.0])


def test_ufunc_out_wrong_shape_raises_and_leaves_out():
    a = pylucid.tensor([1.0, 5.0])
    o = np.full(3, 7.0, dtype=np.float32)
    with pytest.raises(ValueError):
        np.minimum(a, 2.0, out=o)
    np.testing.assert_array_equal(o, [7.0, 7.0, 7.0])


def test_reduce_out():
    xn = _tie_free((3, 4))
    o = np.zeros(3)
    r = np.minimum.reduce(pylucid.tensor(xn), axis=1, out=o)
    assert r is o
    _bits_equal(o, xn.min(axis=1))
    ot = pylucid.zeros((1, 4), dtype=pylucid.float64)
    r = np.maximum.reduce(pylucid.tensor(xn), axis=0, keepdims=True, out=ot)
    assert r is ot
    _bits_equal(ot.numpy(), xn.max(axis=0, keepdims=True))


# ---- functions ----

def test_clip_dispatches_with_autograd():
    xn = np.array([-2.0, 0.25, 0.5, 3.0, 1.0, np.nan])
    x = _leaf(xn)
    y = np.clip(x, 0.0, 1.0)
    assert type(y) is pylucid.Tensor and y.grad_fn.name() == "ClampBackward"
    _bits_equal(_np(y), np.clip(xn, 0.0, 1.0))
    y.sum().backward()
    np.testing.assert_array_equal(_np(x.grad), [0.0, 1.0, 1.0, 0.0, 1.0, 1.0])  # x == bound: to x; NaN: to x
    # keyword forms, one bound, tensor bounds that get gradients
    x = pylucid.tensor(xn[:5])
    np.testing.assert_array_equal(_np(np.clip(x, min=0.0, max=1.0)), np.clip(xn[:5], 0.0, 1.0))
    np.testing.assert_array_equal(_np(np.clip(x, None, 0.5)), np.clip(xn[:5], None, 0.5))
    np.testing.assert_array_equal(_np(np.clip(x, a_min=0.0)), np.clip(xn[:5], 0.0, None))
    lo = _leaf(np.array([0.0, 0.5, 0.0, 0.0, 0.0]))
    y = np.clip(x, lo, 2.0)
    assert y.grad_fn.name() == "ClampBackward"
    y.sum().backward()
    np.testing.assert_array_equal(_np(lo.grad), [1.0, 1.0, 0.0, 0.0, 0.0])
    lo2 = _leaf(np.array([0.0, 0.5, 0.0, 0.0, 0.0]))
    ops.clamp(x, lo2, 2.0).sum().backward()
    _bits_equal(_np(lo.grad), _np(lo2.grad))


def test_clip_gradcheck_and_out():
    x = _leaf(_tie_free((6,)) / 4)
    assert autograd.gradcheck(lambda v: np.clip(v, -0.3, 0.3), (x,))
    xn = _tie_free((6,))
    o = np.zeros(6)
    assert np.clip(pylucid.tensor(xn), -1.0, 1.0, out=o) is o
    _bits_equal(o, np.clip(xn, -1.0, 1.0))
    ot = pylucid.zeros(6, dtype=pylucid.float64)
    assert np.clip(pylucid.tensor(xn), -1.0, 1.0, out=ot) is ot
    _bits_equal(ot.numpy(), np.clip(xn, -1.0, 1.0))


def test_clip_without_bounds_goes_to_numpy():
    xn = np.array([1.0, -2.0])
    r = np.clip(pylucid.tensor(xn), None, None)
    assert type(r) is np.ndarray
    np.testing.assert_array_equal(r, xn)
    with pytest.raises(TypeError, match=r"numpy\.clip"):
        np.clip(_leaf(xn), None, None)


EXTREMA = [(np.amin, ops.amin, "AminBackward", np.argmin), (np.min, ops.amin, "AminBackward", np.argmin),
           (np.amax, ops.amax, "AmaxBackward", np.argmax), (np.max, ops.amax, "AmaxBackward", np.argmax)]


@pytest.mark.parametrize("fn, op, node, argfn", EXTREMA, ids=[f.__name__ for f, *_ in EXTREMA])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_amin_amax_min_max_dispatch(fn, op, node, argfn, axis, keepdims):
    xn = _tie_free((3, 5))
    x = _leaf(xn)
    y = fn(x, axis=axis, keepdims=keepdims)
    assert type(y) is pylucid.Tensor and y.grad_fn.name() == node
    _bits_equal(_np(y), fn(xn, axis=axis, keepdims=keepdims))
    y.sum().backward()
    want = np.zeros_like(xn)
    if axis is None or axis == (0, 1):
        want.flat[argfn(xn)] = 1
    elif axis == 0:
        want[argfn(xn, axis=0), np.arange(5)] = 1
    else:
        want[np.arange(3), argfn(xn, axis=1)] = 1
    np.testing.assert_array_equal(_np(x.grad), want)


@pytest.mark.parametrize("fn", [np.amin, np.max])
def test_extrema_positional_axis_out_and_gradcheck(fn):
    xn = _tie_free((3, 4))
    _bits_equal(_np(fn(pylucid.tensor(xn), 1)), fn(xn, 1))
    o = np.zeros(4)
    assert fn(pylucid.tensor(xn), 0, o) is o
    _bits_equal(o, fn(xn, 0))
    ot = pylucid.zeros((), dtype=pylucid.float64)
    assert fn(pylucid.tensor(xn), out=ot) is ot
    _bits_equal(ot.numpy(), np.asarray(fn(xn)))
    assert autograd.gradcheck(lambda v: fn(v, axis=1), (_leaf(xn),))


@pytest.mark.parametrize("fn", [np.argmin, np.argmax])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmin_argmax_dispatch(fn, axis, keepdims):
    xn = _with_nans_and_ties()
    y = fn(pylucid.tensor(xn), axis=axis, keepdims=keepdims)
    assert type(y) is pylucid.Tensor and y.dtype is pylucid.int64 and not y.requires_grad
    _bits_equal(y.numpy(), np.asarray(fn(xn, axis=axis, keepdims=keepdims), dtype=np.int64))
    # on a tensor that requires grad too (argmin records nothing)
    y = fn(_leaf(xn), axis=axis, keepdims=keepdims)
    assert type(y) is pylucid.Tensor and y.grad_fn is None
    o = np.zeros(np.shape(fn(xn, axis=axis, keepdims=keepdims)), dtype=np.int64)
    assert fn(pylucid.tensor(xn), axis=axis, out=o, keepdims=keepdims) is o
    np.testing.assert_array_equal(o, fn(xn, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("fn, node", [(np.sum, "SumBackward"), (np.mean, "MeanBackward")])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_mean_dispatch(fn, node, axis, keepdims):
    xn = RNG.standard_normal((3, 4))
    x = _leaf(xn)
    y = fn(x, axis=axis, keepdims=keepdims)
    assert type(y) is pylucid.Tensor and y.grad_fn.name() == node
    np.testing.assert_allclose(_np(y), fn(xn, axis=axis, keepdims=keepdims), rtol=1e-13, atol=1e-15)
    y.sum().backward()
    n = xn.size if axis in (None, (0, 1)) else xn.shape[axis]
    want = np.ones_like(xn) if fn is np.sum else np.full_like(xn, 1.0 / n)
    np.testing.assert_allclose(_np(x.grad), want, rtol=1e-15)
    o = np.zeros(np.shape(fn(xn, axis=axis, keepdims=keepdims)))
    assert fn(pylucid.tensor(xn), axis=axis, keepdims=keepdims, out=o) is o
    y2 = fn(pylucid.tensor(xn), axis=axis, keepdims=keepdims)
    _bits_equal(o, y2.numpy())


def test_mean_of_integers_goes_to_numpy():
    r = np.mean(pylucid.tensor([1, 2, 4]))
    assert not isinstance(r, pylucid.Tensor)
    assert r == np.mean(np.array([1, 2, 4]))


# ---- everything else ----

@pytest.mark.parametrize("call, name", [
    (lambda t: np.amin(t, initial=5.0), "numpy.amin"),
    (lambda t: np.max(t, where=np.array([True, False, True]), initial=-9.0), "numpy.max"),
    (lambda t: np.sum(t, dtype=np.float32), "numpy.sum"),
    (lambda t: np.mean(t, dtype=np.float32), "numpy.mean"),
    (lambda t: np.clip(t, 0.0, 1.0, where=np.array([True, False, True]), out=np.full(3, 9.0)), "numpy.clip"),
    (lambda t: np.minimum(t, 0.0, where=np.array([True, False, True]), out=np.full(3, 9.0)), "numpy.minimum"),
    (lambda t: np.add(t, 1.0, dtype=np.float32), "numpy.add"),
    (lambda t: np.add.accumulate(t), "numpy.add.accumulate"),
    (lambda t: np.maximum.accumulate(t), "numpy.maximum.accumulate"),
    (lambda t: np.multiply.outer(t, t), "numpy.multiply.outer"),
    (lambda t: np.add.reduce(t), "numpy.add.reduce"),
    (lambda t: np.minimum.reduce(t, initial=0.0), "numpy.minimum.reduce"),
    (lambda t: np.sin(t), "numpy.sin"),
    (lambda t: np.exp(t), "numpy.exp"),
    (lambda t: np.isnan(t), "numpy.isnan"),
    (lambda t: np.sort(t), "numpy.sort"),
    (lambda t: np.cumsum(t), "numpy.cumsum"),
    (lambda t: np.concatenate([t, np.array([1.0])]), "numpy.concatenate"),
    (lambda t: np.stack((np.array([1.0, 2.0, 3.0]), [t, t][1])), "numpy.stack"),
    (lambda t: np.linalg.norm(t), "numpy.linalg.norm"),
])
def test_other_ufuncs_and_functions(call, name):
    xn = np.array([0.5, -1.5, 2.0])
    # without grad: NumPy's result, as on the array
    r = call(pylucid.tensor(xn))
    assert not isinstance(r, pylucid.Tensor)
    ref = call(xn)
    assert type(r) is type(ref)
    np.testing.assert_array_equal(r, ref)
    # with grad: a TypeError naming the function
    with pytest.raises(TypeError, match=r"^%s\b.*requires grad" % name.replace(".", r"\.")):
        call(_leaf(xn))


def test_tensors_nested_in_sequences_are_seen():
    t = pylucid.tensor([1.0, 2.0])
    r = np.concatenate([np.array([0.0]), (t, [t])[1][0]])
    assert type(r) is np.ndarray
    np.testing.assert_array_equal(r, [0.0, 1.0, 2.0])
    with pytest.raises(TypeError, match=r"numpy\.concatenate"):
        np.concatenate([np.array([0.0], dtype=np.float32), pylucid.tensor([1.0], requires_grad=True)])
    # a requires-grad tensor anywhere, the out= included
    with pytest.raises(TypeError, match=r"numpy\.sin"):
        np.sin(np.array([1.0]), out=(pylucid.tensor([0.0], dtype=pylucid.float64, requires_grad=True),))


def test_other_ufunc_out_tensor_is_returned_and_written():
    t = pylucid.tensor([1.0, 2.0], dtype=pylucid.float64)
    o = pylucid.zeros(2, dtype=pylucid.float64)
    r = np.sin(t, out=o)
    assert r is o
    np.testing.assert_array_equal(o.numpy(), np.sin([1.0, 2.0]))
    o2 = pylucid.zeros(2, dtype=pylucid.float64)
    r = np.cumsum(t, out=o2)
    assert r is o2
    np.testing.assert_array_equal(o2.numpy(), [1.0, 3.0])


def test_detach_is_the_way_out():
    t = _leaf(np.array([0.5, 1.0]))
    with pytest.raises(TypeError, match=r"\.detach\(\)"):
        np.sin(t)
    np.testing.assert_array_equal(np.sin(t.detach()), np.sin([0.5, 1.0]))


def test_comparisons_with_arrays_are_elementwise():
    t = pylucid.tensor([1.0, 2.0, 3.0])
    x = np.array([1.0, 0.0, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(x == t, [True, False, True])
    np.testing.assert_array_equal(np.less(x, t), [False, True, False])


class _Foreign:
    """Another library's array type with its own protocols."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return ("foreign", ufunc.__name__)

    def __array_function__(self, func, types, args, kwargs):
        return ("foreign", func.__name__)


def test_foreign_overrides_get_their_turn():
    t = pylucid.tensor([1.0, 2.0])
    f = _Foreign()
    assert np.minimum(t, f) == ("foreign", "minimum")
    assert np.minimum(f, t) == ("foreign", "minimum")
    assert np.concatenate([t, f]) == ("foreign", "concatenate")
    assert np.clip(t, f, 1.0) == ("foreign", "clip")


class _OwnSubclass(np.ndarray):
    """An ndarray subclass with a function protocol of its own."""

    def __array_function__(self, func, types, args, kwargs):
        return ("subclass", func.__name__)


def test_ndarray_subclasses_with_their_own_protocol_get_their_turn():
    t = pylucid.tensor([1.0, 2.0])
    s = np.array([3.0], dtype=np.float32).view(_OwnSubclass)
    assert np.concatenate([t, s]) == ("subclass", "concatenate")
    assert np.amax(t, out=s) == ("subclass", "amax")
    # a plain subclass (no protocol of its own) is an array like any other
    m = np.ma.masked_array([3.0, 0.0], dtype=np.float32)
    r = np.concatenate([t, m])
    assert not isinstance(r, pylucid.Tensor)
    np.testing.assert_array_equal(np.asarray(r), [1.0, 2.0, 3.0, 0.0])


# ---- what worked before keeps working ----

def test_conversions_printing_pickling_and_testing_helpers():
    xn = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    t = pylucid.from_numpy(xn)
    a = np.asarray(t)
    assert type(a) is np.ndarray and np.shares_memory(a, xn)
    b = np.array(t)
    assert not np.shares_memory(b, xn)
    np.testing.assert_array_equal(b, xn)
    assert np.shares_memory(t.numpy(), xn)
    np.testing.assert_array_equal(t, xn)
    np.testing.assert_allclose(t, xn)
    np.testing.assert_array_equal(xn, t)
    assert "tensor(" in repr(t) and "grad_fn" in repr(np.minimum(_leaf(xn), 2.0))
    u = pickle.loads(pickle.dumps(t))
    _bits_equal(u.numpy(), xn)
    w = pickle.loads(pickle.dumps(_leaf(xn)))
    assert w.requires_grad
    with pytest.raises(RuntimeError):
        np.asarray(_leaf(xn))  # as before: a tensor that requires grad is no array


def test_hot_path_does_not_go_through_numpy(monkeypatch):
    calls = []
    real = late.array_ufunc

    def counting(*args):
        calls.append(args[0])
        return real(*args)

    monkeypatch.setattr(late, "array_ufunc", counting)
    t1, t2 = pylucid.tensor([1.0, 2.0]), pylucid.tensor([2.0, 1.0])
    ops.minimum(t1, t2)
    t1 + t2
    t1 * 2.0
    -t1
    ops.maximum(t1, np.array([0.0], dtype=np.float32))
    assert calls == []
    np.minimum(t1, t2)
    np.array([1.0, 1.0], dtype=np.float32) + t1
    assert calls == [np.minimum, np.add]
