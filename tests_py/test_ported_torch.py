"""Test cases ported from PyTorch's own test suite (pytorch/pytorch), run
against pylucid. PyTorch need not be installed: the inputs are re-created
with NumPy, and the expected values come from NumPy (the reference PyTorch's
tests use too) or from pylucid's rule where pylucid deliberately differs.

Origins (each test names its own):
* test/test_binary_ufuncs.py — test_maximum_minimum_*, test_min_max_binary_op_nan,
  test_maximum_and_minimum_subgradient, test_mul_intertype_scalar, test_sub,
  test_muldiv_scalar;
* torch/testing/_internal/common_methods_invocations.py —
  sample_inputs_max_min_binary (the OpInfo samples of maximum/minimum);
* torch/testing/_internal/opinfo/core.py — reference_inputs_elementwise_binary
  and its generators (small, large and extremal values, broadcasting,
  noncontiguous and arbitrarily strided tensors, Python scalars);
* test/test_autograd.py (TestAutogradDeviceType) —
  test_min_max_median_backprops_to_all_values.

Deliberate differences from PyTorch, asserted as pylucid's rule:
* ties (a == b, -0.0 vs +0.0 included) give the whole gradient to ``a``
  (PyTorch splits it 50/50), and the value is a's bits;
* at a NaN the gradient goes to the NaN operand only, to ``a`` when both are
  NaN (PyTorch gives the whole gradient to both operands);
* ``minimum(t, 2)`` with a Python scalar is accepted (a weak scalar);
  PyTorch's maximum/minimum reject Python scalars;
* complex is refused with TypeError (PyTorch: RuntimeError "not implemented").
"""

from __future__ import annotations

import itertools
import math
from functools import partial

import numpy as np
import pytest

import optable as T
import pylucid
from ported_util import (MINMAX, OPS, WINS, cast, check_minmax, check_minmax_grad, fold, rng_for, same_bits,
                         same_values, to_numpy)
from pylucid import autograd, ops

S, M, XS = 5, 10, 3  # PyTorch's OpInfo sizes

#: all_types_and(torch.half, torch.bfloat16, torch.bool), as pylucid names
TORCH_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float32", "float64", "float16", "bfloat16", "bool"]
INTEGRAL_AND_BOOL = ["uint8", "int8", "int16", "int32", "int64", "bool"]
FLOATING = ["float32", "float64", "float16", "bfloat16"]

# PyTorch's promotion table (c10/core/ScalarType.cpp, _promoteTypesLookup),
# restricted to the dtypes pylucid has.
_U1, _I1, _I2, _I4, _I8, _F2, _F4, _F8, _B1, _BF = ("uint8", "int8", "int16", "int32", "int64", "float16",
                                                    "float32", "float64", "bool", "bfloat16")
_ORDER = [_U1, _I1, _I2, _I4, _I8, _F2, _F4, _F8, _B1, _BF]
_TORCH_PROMOTE = [
    # u1   i1   i2   i4   i8   f2   f4   f8   b1   bf
    [_U1, _I2, _I2, _I4, _I8, _F2, _F4, _F8, _U1, _BF],  # u1
    [_I2, _I1, _I2, _I4, _I8, _F2, _F4, _F8, _I1, _BF],  # i1
    [_I2, _I2, _I2, _I4, _I8, _F2, _F4, _F8, _I2, _BF],  # i2
    [_I4, _I4, _I4, _I4, _I8, _F2, _F4, _F8, _I4, _BF],  # i4
    [_I8, _I8, _I8, _I8, _I8, _F2, _F4, _F8, _I8, _BF],  # i8
    [_F2, _F2, _F2, _F2, _F2, _F2, _F4, _F8, _F2, _F4],  # f2
    [_F4, _F4, _F4, _F4, _F4, _F4, _F4, _F8, _F4, _F4],  # f4
    [_F8, _F8, _F8, _F8, _F8, _F8, _F8, _F8, _F8, _F8],  # f8
    [_U1, _I1, _I2, _I4, _I8, _F2, _F4, _F8, _B1, _BF],  # b1
    [_BF, _BF, _BF, _BF, _BF, _F4, _F4, _F8, _BF, _BF],  # bf
]


def torch_result_type(a: str, b: str) -> str:
    return _TORCH_PROMOTE[_ORDER.index(a)][_ORDER.index(b)]


def make_tensor(shape, dtype: str, rng: np.random.Generator, low=None, high=None, noncontiguous=False,
                exclude_zero=False) -> np.ndarray:
    """torch.testing.make_tensor re-created in NumPy: uniform values in
    [low, high) — by default [-9, 9] ([0, 9] for uint8, {False, True} for
    bool), floats rounded to the dtype; noncontiguous gives a strided view
    (every other element of a larger buffer), as PyTorch does."""
    shape = tuple(shape)
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        vals = rng.integers(0, 2, size=n).astype(np.bool_)
    else:
        lo = (0 if dtype == "uint8" else -9) if low is None else low
        hi = 9 if high is None else high
        if dtype in FLOATING:
            vals = cast(rng.uniform(lo, hi, size=n), dtype)
        else:
            vals = rng.integers(lo, hi, size=n, endpoint=True).astype(T.NP_OF[dtype])
        if exclude_zero:
            vals[vals == 0] = 1
    if noncontiguous and n > 1:
        buf = np.zeros(2 * n, dtype=vals.dtype)
        buf[::2] = vals
        return buf[::2].reshape(shape) if len(shape) <= 1 else buf[::2].reshape(shape)
    return vals.reshape(shape)


def noncontig(x: np.ndarray) -> np.ndarray:
    """SampleInput.noncontiguous(): the same values in a strided view."""
    buf = np.zeros(x.shape + (2,), dtype=x.dtype)
    buf[..., 0] = x
    v = buf[..., 0]
    assert not v.flags.c_contiguous or x.size <= 1
    return v


def check_case(name: str, a, b) -> None:
    """A sample: values vs NumPy, bits by the selection rule, and for
    floating same-dtype operands the gradients by the rule."""
    check_minmax(name, a, b)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype \
            and (a.dtype.kind == "f" or a.dtype == T.BF16) and a.size and b.size:
        check_minmax_grad(name, np.ascontiguousarray(a) if a.ndim else a, b)


# ====================================================================== test_binary_ufuncs.py


@pytest.mark.parametrize("db", TORCH_DTYPES)
@pytest.mark.parametrize("da", TORCH_DTYPES)
@pytest.mark.parametrize("name", MINMAX)
def test_maximum_minimum_type_promotion(name, da, db):
    """test_binary_ufuncs.py test_maximum_minimum_type_promotion: a=(0, 1),
    b=(1, 0) of every dtype pair; the result dtype is torch.result_type(a, b)
    (PyTorch's table, restated above), and the values are NumPy's."""
    a = cast(np.array([0, 1]), da)
    b = cast(np.array([1, 0]), db)
    want = torch_result_type(da, db)
    got = check_minmax(name, a, b, out_dtype=want)
    assert got.astype(np.float64).tolist() == ([0, 0] if name == "minimum" else [1, 1])
    # 0-d tensors promote the same (both strong), and tensors like arrays
    y = OPS[name](pylucid.tensor(a), pylucid.tensor(b))
    assert y.dtype.name == want


@pytest.mark.parametrize("dtype", INTEGRAL_AND_BOOL)
@pytest.mark.parametrize("name", MINMAX)
def test_maximum_minimum_int_and_bool(name, dtype):
    """test_binary_ufuncs.py test_maximum_minimum_int_and_bool: random integers
    in [-100, 100) of size 10 converted to the dtype (astype, as
    torch_to_numpy_dtype_dict does), against NumPy."""
    rng = rng_for("int_and_bool", name, dtype)
    for _ in range(5):
        a_np = np.array(rng.integers(-100, 100, size=10)).astype(T.NP_OF[dtype])
        b_np = np.array(rng.integers(-100, 100, size=10)).astype(T.NP_OF[dtype])
        got = check_minmax(name, a_np, b_np)
        assert np.array_equal(got, getattr(np, name)(a_np, b_np))
        got_t = to_numpy(OPS[name](pylucid.tensor(a_np), pylucid.tensor(b_np)))
        assert np.array_equal(got_t, got)


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("name", MINMAX)
def test_maximum_minimum_float(name, dtype):
    """test_binary_ufuncs.py test_maximum_minimum_float: randn(10) (float64 then
    converted for bfloat16) against NumPy; exact, since rounding is monotonic
    (PyTorch allows 1e-2 for bfloat16)."""
    rng = rng_for("float", name, dtype)
    for _ in range(5):
        a64, b64 = rng.standard_normal(10), rng.standard_normal(10)
        a_np, b_np = cast(a64, dtype), cast(b64, dtype)
        got = check_minmax(name, a_np, b_np)
        same_values(got, cast(getattr(np, name)(a64, b64), dtype))
        check_minmax_grad(name, a_np, b_np)


NAN_INF_A = (float("inf"), -float("inf"), float("nan"), float("inf"), float("nan"), float("nan"), 1, float("nan"))
NAN_INF_B = (-float("inf"), float("inf"), float("inf"), float("nan"), float("nan"), 0, float("nan"), -5)


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("name", MINMAX)
def test_maximum_minimum_float_nan_and_inf(name, dtype):
    """test_binary_ufuncs.py test_maximum_minimum_float_nan_and_inf: the
    NaN/inf pairs against NumPy (if either is NaN the result is NaN). The
    gradient: whole to the NaN operand (to a when both are); PyTorch gives
    the whole gradient to both operands at a NaN."""
    a_np = cast(np.array(NAN_INF_A, dtype=np.float64), dtype)
    b_np = cast(np.array(NAN_INF_B, dtype=np.float64), dtype)
    got = check_minmax(name, a_np, b_np)
    same_values(got, cast(getattr(np, name)(np.array(NAN_INF_A), np.array(NAN_INF_B)), dtype))
    ga, gb = check_minmax_grad(name, a_np, b_np, g=cast(np.ones(8), dtype))
    a_nan = np.isnan(np.array(NAN_INF_A))
    b_nan = np.isnan(np.array(NAN_INF_B))
    assert np.array_equal(ga.astype(np.float64)[a_nan], np.ones(a_nan.sum()))
    assert np.array_equal(gb.astype(np.float64)[b_nan & ~a_nan], np.ones((b_nan & ~a_nan).sum()))
    assert np.array_equal(ga.astype(np.float64) + gb.astype(np.float64), np.ones(8))


@pytest.mark.parametrize("other", TORCH_DTYPES + ["complex64", "complex128"])
@pytest.mark.parametrize("cplx", ["complex64", "complex128"])
def test_maximum_minimum_complex(cplx, other):
    """test_binary_ufuncs.py test_maximum_minimum_complex: a complex operand,
    either side, is refused — TypeError naming the complex dtype (PyTorch:
    RuntimeError '... not implemented for ...')."""
    c = np.ones(1, dtype=cplx)
    o = np.ones(1, dtype=T.NP_OF[other]) if other in T.NP_OF else np.ones(1, dtype=other)
    for op in (ops.maximum, ops.minimum):
        for args in ((c, o), (o, c)):
            with pytest.raises(TypeError, match="complex"):
                op(*args)


@pytest.mark.parametrize("name", MINMAX)
def test_maximum_minimum_cross_device_scalar_tensor(name):
    """test_binary_ufuncs.py test_maximum_minimum_cross_device, its second part
    (a 0-d CPU tensor with a 1-d tensor) — pylucid has one device: a 0-d
    int64 array with [3, 0, 4], both orders, against NumPy."""
    a_np = np.array(1)
    b_np = np.array([3, 0, 4])
    check_minmax(name, a_np, b_np)
    check_minmax(name, b_np, a_np)
    check_minmax(name, pylucid.tensor(a_np), pylucid.tensor(b_np))


@pytest.mark.parametrize("db", FLOATING)
@pytest.mark.parametrize("da", FLOATING)
@pytest.mark.parametrize("name", MINMAX)
def test_maximum_and_minimum_subgradient(name, da, db):
    """test_binary_ufuncs.py test_maximum_and_minimum_subgradient: a=[0, 1, 2],
    b=[1, 1, 1], z.sum().backward(). At the tie (index 1) PyTorch gives 0.5
    to each; pylucid gives the whole gradient to a. Gradients come back in
    each input's dtype."""
    a = pylucid.tensor(np.array([0.0, 1.0, 2.0]), dtype=T.PL_OF[da], requires_grad=True)
    b = pylucid.tensor(np.array([1.0, 1.0, 1.0]), dtype=T.PL_OF[db], requires_grad=True)
    z = OPS[name](a, b)
    assert z.dtype.name == torch_result_type(da, db)
    z.sum().backward()
    assert a.grad.dtype.name == da and b.grad.dtype.name == db
    if name == "maximum":  # PyTorch: a.grad [0, 0.5, 1], b.grad [1, 0.5, 0]
        want_a, want_b = [0.0, 1.0, 1.0], [1.0, 0.0, 0.0]
    else:  # PyTorch: a.grad [1, 0.5, 0], b.grad [0, 0.5, 1]
        want_a, want_b = [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]
    assert to_numpy(a.grad).astype(np.float64).tolist() == want_a
    assert to_numpy(b.grad).astype(np.float64).tolist() == want_b


@pytest.mark.parametrize("name", MINMAX)
def test_maximum_minimum_forward_ad_float32(name):
    """test_binary_ufuncs.py test_maximum_minimum_forward_ad_float32: the
    tangent of maximum is where(x > y, tx, ty) in PyTorch; pylucid's is the
    winner's tangent, where(x >= y, tx, ty) (ties to x). pylucid's
    elementwise Jacobian is read off reverse mode (the 0/1 masks), so the
    tangent is ma*tx + mb*ty; asserted bit for bit, with forced ties."""
    rng = rng_for("fwad", name)
    x = rng.standard_normal(64).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    y[::4] = x[::4]
    tx = rng.standard_normal(64).astype(np.float32)
    ty = rng.standard_normal(64).astype(np.float32)
    xt = pylucid.from_numpy(x, requires_grad=True)
    yt = pylucid.from_numpy(y, requires_grad=True)
    ma, mb = autograd.grad([OPS[name](xt, yt)], [xt, yt], grad_outputs=[np.ones(64, np.float32)])
    tangent = to_numpy(ma) * tx + to_numpy(mb) * ty
    expected = np.where(WINS[name](x, y), tx, ty)
    same_bits(tangent, expected)


@pytest.mark.parametrize("dtype", FLOATING)
def test_min_max_binary_op_nan(dtype):
    """test_binary_ufuncs.py test_min_max_binary_op_nan (float/double on CPU
    there; here every float dtype): rand(1000) with NaN in a only (0:250), b
    only (250:500), both (500:750), neither (750:1000): NaN exactly in the
    first 750 results of max and min. Gradient: to the NaN operand."""
    rng = rng_for("binary_op_nan", dtype)
    a = cast(rng.random(1000), dtype)
    b = cast(rng.random(1000), dtype)
    a[:250] = np.nan
    b[250:500] = np.nan
    a[500:750] = np.nan
    b[500:750] = np.nan
    for name in MINMAX:
        got = check_minmax(name, a, b).astype(np.float64)
        assert np.isnan(got[:750]).all() and not np.isnan(got[750:]).any()
        ga, gb = check_minmax_grad(name, a, b, g=cast(np.ones(1000), dtype))
        ga, gb = ga.astype(np.float64), gb.astype(np.float64)
        assert (ga[:250] == 1).all() and (gb[:250] == 0).all()
        assert (ga[250:500] == 0).all() and (gb[250:500] == 1).all()
        assert (ga[500:750] == 1).all() and (gb[500:750] == 0).all()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mul_intertype_scalar(dtype):
    """test_binary_ufuncs.py test_mul_intertype_scalar: a 0-d float tensor
    times a 0-d int32 tensor is 4.5, either order, in the float dtype (the
    in-place part has no pylucid counterpart)."""
    x = pylucid.tensor(1.5, dtype=T.PL_OF[dtype])
    y = pylucid.tensor(3, dtype=pylucid.int32)
    for r in (x * y, y * x, ops.mul(x, y)):
        assert r.item() == 4.5 and r.dtype.name == dtype and r.shape == ()


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_sub(dtype):
    """test_binary_ufuncs.py test_sub: [2, 4] - [1, 2] for integers, [2.34,
    4.44] - [1.23, 2.33] for floats (within 0.01 for float16/bfloat16, as
    PyTorch); bool raises (TypeError; PyTorch RuntimeError)."""
    pl = T.PL_OF[dtype]
    if dtype == "bool":
        with pytest.raises(TypeError):
            pylucid.tensor([True, False]) - pylucid.tensor([False, True])
        return
    if dtype in FLOATING:
        m1 = pylucid.tensor([2.34, 4.44], dtype=pl)
        m2 = pylucid.tensor([1.23, 2.33], dtype=pl)
        diff = np.array([1.11, 2.11])
        got = to_numpy(m1 - m2).astype(np.float64)
        tol = 0.01 if dtype in ("float16", "bfloat16") else 1e-6
        assert np.allclose(got, diff, atol=tol, rtol=0)
        # exactly the difference of the stored values, rounded once
        want = cast(to_numpy(m1).astype(np.float64) - to_numpy(m2).astype(np.float64), dtype)
        same_values(to_numpy(m1 - m2), want)
    else:
        m1 = pylucid.tensor([2, 4], dtype=pl)
        m2 = pylucid.tensor([1, 2], dtype=pl)
        assert (m1 - m2).tolist() == [1, 2] and (m1 - m2).dtype is pl


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_muldiv_scalar(dtype):
    """test_binary_ufuncs.py test_muldiv_scalar: x * s == x * full_like(x, s)
    and the same for s * x, x / s, s / x, with x of shape (10, 3) and s a
    Python scalar of the dtype's kind."""
    rng = rng_for("muldiv", dtype)
    x = make_tensor((10, 3), dtype, rng)
    s = make_tensor((1,), dtype, rng).item()
    if dtype in FLOATING:
        s = float(s)
    y = np.full_like(x, s)
    xt, yt = pylucid.from_numpy(x), pylucid.from_numpy(y)
    with np.errstate(all="ignore"):
        for got, want in ((xt * s, xt * yt), (s * xt, yt * xt), (xt / s, xt / yt), (s / xt, yt / xt)):
            assert got.dtype is want.dtype
            same_values(to_numpy(got), to_numpy(want))


# ====================================================================== common_methods_invocations.py


MAX_MIN_BINARY_SHAPES = [
    ((S, S, S), (S, S, S)),
    ((S, S, S), (S,)),
    ((S,), (S, S, S)),
    ((S, 1, S), (S, S)),
    ((S, S), (S, S)),
    ((), ()),
    ((S, S, S), ()),
    ((), (S, S, S)),
]


@pytest.mark.parametrize("shapes", MAX_MIN_BINARY_SHAPES, ids=[f"{a}-{b}" for a, b in MAX_MIN_BINARY_SHAPES])
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("name", MINMAX)
def test_sample_inputs_max_min_binary(name, dtype, shapes):
    """common_methods_invocations.py sample_inputs_max_min_binary: the
    OpInfo samples of maximum/minimum (make_tensor, low=None, high=None),
    against NumPy; gradients by the rule for floats."""
    rng = rng_for("sample_inputs", name, dtype, shapes)
    a = make_tensor(shapes[0], dtype, rng)
    b = make_tensor(shapes[1], dtype, rng)
    check_case(name, a, b)


@pytest.mark.parametrize("shapes", MAX_MIN_BINARY_SHAPES, ids=[f"{a}-{b}" for a, b in MAX_MIN_BINARY_SHAPES])
@pytest.mark.parametrize("name", MINMAX)
def test_sample_inputs_gradcheck(name, shapes):
    """OpInfo test_fn_grad / test_fn_gradgrad (test/test_ops_gradients.py) on
    sample_inputs_max_min_binary, float64: gradcheck and gradgradcheck.
    The samples are distinct values (a tie has no derivative to compare)."""
    rng = rng_for("gradcheck", name, shapes)
    na, nb = int(np.prod(shapes[0])), int(np.prod(shapes[1]))
    vals = (rng.permutation(na + nb) - (na + nb) / 2) * 0.25 + 0.01  # distinct, 0.25 apart
    a, b = vals[:na].reshape(shapes[0]), vals[na:].reshape(shapes[1])
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    assert autograd.gradcheck(OPS[name], [ta, tb])
    assert autograd.gradgradcheck(OPS[name], [ta, tb])


# ====================================================================== opinfo/core.py reference inputs

_UNSIGNED_INT_VALS = (0, 1, 55, 127, 128, 190, 210, 220, 254)
_INT_VALS = (0, -1, 1, -55, 55, -127, 127, -128)
_FLOAT_VALS = (0.0, -0.0, -0.001, 0.001, -0.25, 0.25, -1.0, 1.0, -math.pi / 2, math.pi / 2, -math.pi + 0.00001,
               math.pi - 0.00001, -math.pi, math.pi, -math.pi - 0.00001, math.pi + 0.00001)
_LARGE_INT_VALS = (-1113, 1113, -10701, 10701)
_LARGE_FLOAT16_VALS = (-501, 501, -1001.2, 1001.2, -13437.7, 13437.7)
_LARGE_FLOAT_VALS = _LARGE_FLOAT16_VALS + (-4988429.2, 4988429.2, -1e20, 1e20)
_FLOAT_EXTREMALS = (float("inf"), float("-inf"), float("nan"))


def _product_pair(vals, dtype):
    l_vals, r_vals = zip(*itertools.product(vals, vals))
    return cast(np.array(l_vals, dtype=np.float64), dtype), cast(np.array(r_vals, dtype=np.float64), dtype)


@pytest.mark.parametrize("dtype", [d for d in TORCH_DTYPES if d != "bool"])
@pytest.mark.parametrize("name", MINMAX)
def test_small_value_tensors(name, dtype):
    """opinfo/core.py generate_elementwise_binary_small_value_tensors: every
    pair of the interesting values (0.0 and -0.0, +-pi and neighbours, …;
    -128..127 for signed integers, 0..254 for uint8). The signed-zero pairs
    give a's bits (NumPy: minimum(0.0, -0.0) is -0.0)."""
    vals = _FLOAT_VALS if dtype in FLOATING else _UNSIGNED_INT_VALS if dtype == "uint8" else _INT_VALS
    a, b = _product_pair(vals, dtype)
    check_case(name, a, b)
    if dtype in FLOATING:  # the (0.0, -0.0) and (-0.0, 0.0) pairs: index 1 and 16
        got = to_numpy(OPS[name](a, b)).astype(np.float64)
        assert not np.signbit(got[1]) and np.signbit(got[16])


@pytest.mark.parametrize("dtype", ["int16", "int32", "int64"] + FLOATING)
@pytest.mark.parametrize("name", MINMAX)
def test_large_value_tensors(name, dtype):
    """opinfo/core.py generate_elementwise_binary_large_value_tensors."""
    vals = _LARGE_INT_VALS if dtype.startswith("int") else _LARGE_FLOAT16_VALS if dtype == "float16" \
        else _LARGE_FLOAT_VALS
    a, b = _product_pair(vals, dtype)
    check_case(name, a, b)


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("name", MINMAX)
def test_extremal_value_tensors(name, dtype):
    """opinfo/core.py generate_elementwise_binary_extremal_value_tensors: every
    pair of inf, -inf, nan; then 128x128 tensors with NaN at every third
    element of each (NaN propagation)."""
    a, b = _product_pair(_FLOAT_EXTREMALS, dtype)
    check_case(name, a, b)
    rng = rng_for("extremal", name, dtype)
    lhs = make_tensor((128, 128), dtype, rng)
    rhs = make_tensor((128, 128), dtype, rng)
    lhs.reshape(-1)[::3] = np.nan
    rhs.reshape(-1)[::3] = np.nan
    check_case(name, lhs, rhs)


BROADCAST_SHAPES = [((1,), ()), ((2,), ()), ((1,), (2,)), ((2, 1), (2,)), ((1, 2), (2,)), ((3, 2), (2,)),
                    ((1, 3, 2), (2,)), ((1, 3, 2), (3, 2)), ((3, 1, 2), (3, 2)), ((2, 3, 2), ()),
                    ((3, 1, 2), (1, 3, 2))]


@pytest.mark.parametrize("noncontiguous", [True, False], ids=["noncontig", "contig"])
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=[f"{a}-{b}" for a, b in BROADCAST_SHAPES])
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("name", MINMAX)
def test_broadcasting_tensors(name, dtype, shapes, noncontiguous):
    """opinfo/core.py generate_elementwise_binary_broadcasting_tensors."""
    rng = rng_for("bcast", name, dtype, shapes, noncontiguous)
    a = make_tensor(shapes[0], dtype, rng)
    b = make_tensor(shapes[1], dtype, rng)
    if noncontiguous:
        a, b = noncontig(a), noncontig(b)
    check_case(name, a, b)


ELEMENTWISE_SHAPES = [(0,), (1, 0, 3), (), (20,), (812,), (1029, 917)]


@pytest.mark.parametrize("shape", ELEMENTWISE_SHAPES, ids=[str(s) for s in ELEMENTWISE_SHAPES])
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("name", MINMAX)
def test_elementwise_binary_tensors(name, dtype, shape):
    """opinfo/core.py generate_elementwise_binary_tensors: empty, 0-d, small,
    medium and a large 2-D pair; reference_inputs_elementwise_binary also
    runs each sample noncontiguously."""
    rng = rng_for("elementwise", name, dtype, shape)
    a = make_tensor(shape, dtype, rng)
    b = make_tensor(shape, dtype, rng)
    if a.size > 100_000:  # the large pair: values and bits only (the gradient path is the same)
        check_minmax(name, a, b)
        check_minmax(name, noncontig(a), noncontig(b))
        return
    check_case(name, a, b)
    check_case(name, noncontig(a), noncontig(b))


STRIDED_CASES = [((5, 6, 2), (1, 1, 7), 2), ((5, 5, 4), (1, 1, 7), 2), ((5, 5, 2), (4, 5, 7), 3),
                 ((5, 5, 2), (5, 5, 7), 3), ((5, 5, 2), (5, 5, 5), 3), ((9, 5, 2), (0, 1, 7), 3)]


@pytest.mark.parametrize("case", STRIDED_CASES, ids=[str(c) for c in STRIDED_CASES])
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("name", MINMAX)
def test_arbitrarily_strided_tensors(name, dtype, case):
    """opinfo/core.py generate_elementwise_binary_arbitrarily_strided_tensors:
    as_strided views of a 500-element buffer (overlapping elements, a zero
    stride) with a contiguous operand."""
    shape, strides, offset = case
    rng = rng_for("strided", name, dtype, case)
    base = make_tensor((500,), dtype, rng)
    item = base.itemsize
    a = np.lib.stride_tricks.as_strided(base[offset:], shape=shape, strides=tuple(s * item for s in strides),
                                        writeable=False)
    b = make_tensor(shape, dtype, rng)
    check_minmax(name, a, b)
    check_minmax(name, b, a)


@pytest.mark.parametrize("shape", [(), (3,), (5, 3), (0, 1, 3), (1, 5)])
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("name", MINMAX)
def test_with_scalar_samples(name, dtype, shape):
    """opinfo/core.py generate_elementwise_binary_with_scalar_samples: a
    tensor with a Python scalar of its kind, both sides. PyTorch's
    maximum/minimum do not take Python scalars (supports_rhs_python_scalar
    is False: error_inputs expect an exception); pylucid takes them as weak
    scalars and keeps the tensor's dtype."""
    rng = rng_for("scalar", name, dtype, shape)
    t = make_tensor(shape, dtype, rng)
    s = make_tensor((), dtype, rng).item()
    for a, b in ((t, s), (s, t)):
        got = check_minmax(name, a, b)
        assert got.dtype == t.dtype


def _noncontiguous_samples(dtype, rng):
    """opinfo/core.py generate_elementwise_binary_noncontiguous_tensors."""
    lhs = make_tensor((1026,), dtype, rng, noncontiguous=True)
    rhs = make_tensor((1026,), dtype, rng, noncontiguous=True)
    yield "1026", lhs.copy(), rhs.copy()
    yield "1026-contig-lhs", np.ascontiguousarray(lhs), rhs
    lhs = make_tensor((789, 357), dtype, rng)
    rhs = make_tensor((789, 357), dtype, rng)
    yield "transposed", lhs.T, rhs.T
    for shape in ((5, 7), (1024,)):
        lhs = make_tensor(shape, dtype, rng)
        rhs = make_tensor(shape, dtype, rng)
        lnc = np.zeros(shape + (2,), dtype=lhs.dtype)[..., 0]
        lnc[...] = lhs
        rnc = np.zeros(shape + (2,), dtype=rhs.dtype)[..., 0]
        rnc[...] = rhs
        yield "pairs%s" % (shape,), lnc, rnc
        yield "pairs-contig%s" % (shape,), np.ascontiguousarray(lnc), rnc
    lhs = make_tensor((2, 2, 1, 2), dtype, rng)
    rhs = make_tensor((2, 2, 1, 2), dtype, rng)
    yield "indices", lhs[:, 1, ...], rhs[:, 1, ...]
    for shape in ((1, 3), (1, 7), (5, 7)):
        lhs = make_tensor(shape, dtype, rng)
        rhs = make_tensor(shape, dtype, rng)
        yield "expanded%s" % (shape,), np.broadcast_to(lhs, (3,) + shape), np.broadcast_to(rhs, (3,) + shape)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("name", MINMAX)
def test_noncontiguous_tensors(name, dtype):
    """opinfo/core.py generate_elementwise_binary_noncontiguous_tensors:
    strided, transposed, sliced and expanded (zero-stride) operands."""
    rng = rng_for("noncontig", name, dtype)
    for label, a, b in _noncontiguous_samples(dtype, rng):
        got = check_minmax(name, a, b)
        assert got.shape == np.broadcast_shapes(a.shape, b.shape), label


# ====================================================================== test_autograd.py


@pytest.mark.parametrize("name", MINMAX)
def test_min_max_median_backprops_to_all_values(name):
    """test_autograd.py TestAutogradDeviceType.test_min_max_median_backprops_to_all_values:
    torch.min/max of [1, 0, 1, 0, 1, 0] and of [nan, nan, nan] spread the
    gradient evenly over the tied extremes (x.grad == 1/3 at three places).
    pylucid's reduction of a slice — here the fold of the binary op — gives
    the whole gradient to one position: the first extreme (the first NaN
    when there is one); x.grad still sums to 1."""
    for values, want in (([1.0, 0.0, 1.0, 0.0, 1.0, 0.0], {"minimum": 1, "maximum": 0}),
                         ([float("nan")] * 3, {"minimum": 0, "maximum": 0})):
        x = pylucid.tensor(np.array(values), requires_grad=True)
        parts = [x * pylucid.tensor(np.eye(len(values))[i]) for i in range(len(values))]
        # pick element i as a 1-element tensor: sum of x * e_i (differentiable)
        elems = [ops.sum(p, dim=0, keepdim=True) for p in parts]
        y = fold(name, elems)
        y.backward(np.ones(1))
        g = to_numpy(x.grad)
        assert g.sum() == 1.0
        assert g.tolist() == [1.0 if i == want[name] else 0.0 for i in range(len(values))]


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("name", MINMAX)
def test_self_tie_gradient(name, dtype):
    """test_autograd.py / OpInfo gradients with the same tensor on both sides
    (torch.maximum(x, x)): PyTorch gives 0.5 + 0.5 = 1 per element; pylucid
    gives 1 to a and 0 to b, which also sums to 1 per element."""
    x = pylucid.tensor(np.array([0.5, -1.0, 2.0]), dtype=T.PL_OF[dtype], requires_grad=True)
    OPS[name](x, x).sum().backward()
    assert to_numpy(x.grad).astype(np.float64).tolist() == [1.0, 1.0, 1.0]
