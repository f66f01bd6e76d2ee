"""The min/max family (amin/amax, argmin/argmax, clamp/clip, fmin/fmax,
forward mode) against test cases ported from JAX's own test suite
(jax-ml/jax, main branch). JAX is not needed: the inputs are re-created with
NumPy (JAX's samplers, restated in test_ported_jax.py), the expected values
come from NumPy (the reference JAX's tests use) or from the literal values
of the upstream test (references in ported_family_util.py).

Origins (each test names its own):
* tests/lax_numpy_reducers_test.py — testReducerNoDtype and
  testReducerNoInitialZeroDims for the records "max" and "min";
* tests/lax_numpy_test.py — testArgMinMax, testArgMinMaxEmpty,
  testClipStaticBounds, testClipNone, testClipComplexInputError,
  testClipUpperPrecedence;
* tests/lax_test.py — testClamp/testClampAgainstNumpy (lax_reference.clamp),
  testArgMinMaxEmptyError, testArgMinMaxInvalidAxisError,
  testArgMaxOfNanChoosesNaN, testArgMinMaxIndexDtypeError;
* tests/lax_autodiff_test.py — testReduceGrad (lax.max/lax.min with
  rand_unique_int, order 2, fwd and rev), testClampGrad;
* jax/_src/lax/lax.py — the JVP rules of reduce_max/reduce_min
  (_reduce_chooser_jvp_rule) and clamp_p that the difference tests restate.

Deliberate differences from JAX, asserted as pylucid's rule:
* reduce_max/reduce_min's JVP (and so its VJP) averages the tangents of
  all elements equal to the result (counts of _eq_meet); pylucid's tangent
  (and gradient) is the first winner's alone. With a NaN in the slice JAX's
  indicator is empty (NaN != NaN) and the tangent is 0/0 = NaN; pylucid's is
  the first NaN's tangent;
* lax.clamp's JVP gives g to x only strictly inside (min < x < max), to min
  only if min > x and min < max, to max only if max < x: at x == a bound
  nobody gets it, and with min > max and x <= max it is lost. pylucid: to x
  at a bound, and to max wherever max is the value (min > max) — the
  gradients always partition g;
* jnp.clip(x) returns x; pylucid's clip without bounds raises ValueError;
* lax.argmax takes no negative axis ("Invalid axis -1"); pylucid accepts
  negative dims (NumPy's rule); pylucid's indices are always int64 (no
  index_dtype);
* dtypes: uint16/32/64 and complex raise TypeError; a weak result type
  (JAX's jnp.clip(int, -0.9)) is the default float, float32.
"""

from __future__ import annotations

import numpy as np
import pytest

import optable as T
import pylucid
from ported_family_util import (ARGS, DIM_ERRORS, EXTREME, REDUCTIONS, cast, check_clamp, check_clamp_grad,
                                check_jvp_numeric, check_jvp_selects, check_reduction, check_reduction_grad,
                                op, out_shape, ref_arg, ref_clamp, ref_gather, rng_for, same_bits,
                                to_numpy)
from pylucid import autograd, ops
from test_ported_jax import JAX_ALL_DTYPES, NUMPY_SCALAR_SHAPE, PL_SUPPORTED, PYTHON_SCALAR_SHAPE, rand_dtype

NONEMPTY_ARRAY_SHAPES = [(), (4,), (3, 4), (3, 1), (1, 4), (2, 1, 4), (2, 3, 4)]
EMPTY_ARRAY_SHAPES = [(0,), (0, 4), (3, 0)]
#: float_dtypes + int_dtypes of the tests (bfloat16, float16, float32, float64, int8..int64)
DEFAULT_DTYPES = [T.BF16, np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int8),
                  np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.int64)]


def _name(dt) -> str:
    return "bfloat16" if np.dtype(dt) == T.BF16 else np.dtype(dt).name


def _sid(s) -> str:
    return "x".join(map(str, s)) or "scalar"


def rand_some_equal(rng, shape, dtype):
    """jtu.rand_some_equal: randn * 100, half of the elements set to the first."""
    return rand_dtype(rng, shape, dtype, scale=100.0, some_equal=True)


def rand_unique_int(rng, shape, dtype):
    """jtu.rand_unique_int: a permutation of arange(prod(shape))."""
    n = int(np.prod(shape, dtype=np.int64))
    return cast(rng.choice(np.arange(max(n, 1)), size=n, replace=False).reshape(shape).astype(np.float64),
                _name(dtype))


# ====================================================================== lax_numpy_reducers_test.py

#: JAX's Python scalars are bool, int, float (and complex): other dtypes have no Python-scalar case
REDUCER_CASES = [(rec, dt, s) for rec in ("max", "min") for dt in JAX_ALL_DTYPES
                 for s in [NUMPY_SCALAR_SHAPE, PYTHON_SCALAR_SHAPE] + NONEMPTY_ARRAY_SHAPES
                 if s != PYTHON_SCALAR_SHAPE or np.dtype(dt) in (np.dtype(np.bool_), np.dtype(np.int64),
                                                                 np.dtype(np.float64), np.dtype(np.complex128))]


@pytest.mark.parametrize("rec, dtype, shape", REDUCER_CASES,
                         ids=["%s-%s-%s" % (r, _name(d), s if isinstance(s, str) else _sid(s))
                              for r, d, s in REDUCER_CASES])
def test_reducer_no_dtype(rec, dtype, shape):
    """lax_numpy_reducers_test.py testReducerNoDtype, records op_record("max" /
    "min", 1, all_dtypes, nonempty_shapes, jtu.rand_default): every axis
    (negative too) and None, keepdims False/True, against np.max/np.min —
    here amax/amin, exactly (a selection), and the winner's bits. A NumPy or
    Python scalar is a 0-d input. uint16/32/64 and complex are refused."""
    name = "a" + rec
    rng = rng_for("reducer", rec, str(dtype), shape)
    x = rand_dtype(rng, (), dtype) if isinstance(shape, str) else rand_dtype(rng, shape, dtype)
    if np.dtype(dtype) not in PL_SUPPORTED:
        with pytest.raises(TypeError):
            op(name)(x)
        return
    ndim = x.ndim
    for axis in list(range(-ndim, ndim)) + [None]:
        for keepdims in (False, True):
            check_reduction(name, x, dim=axis, keepdim=keepdims)
            if axis is None or ndim:
                check_reduction("arg" + rec, x, dim=axis, keepdim=keepdims)
    if shape == PYTHON_SCALAR_SHAPE:  # a Python scalar itself: the default dtype of its kind (weak)
        v = x.item()
        r = op(name)(v)
        want = np.asarray(v).astype({bool: np.bool_, int: np.int64, float: np.float32}[type(v)])
        assert r.shape == () and to_numpy(r).item() == want.item()


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", DEFAULT_DTYPES + [np.dtype(np.bool_), np.dtype(np.uint8)], ids=_name)
@pytest.mark.parametrize("rec", ["max", "min"])
def test_reducer_no_initial_zero_dims(rec, dtype, keepdims):
    """lax_numpy_reducers_test.py testReducerNoInitialZeroDims (records "max",
    "min"): an empty array reduced over an axis of size >= 1 gives an empty
    result of np.max's shape; over the size-0 axis (or all axes) pylucid
    raises ValueError, as NumPy ("zero-size array to reduction operation")."""
    for shape in EMPTY_ARRAY_SHAPES:
        x = np.zeros(shape, dtype=dtype)
        for axis in range(-len(shape), len(shape)):
            if shape[axis] >= 1:
                r = op("a" + rec)(x, dim=axis, keepdim=keepdims)
                assert r.shape == np.max(x, axis=axis, keepdims=keepdims).shape
                assert r.dtype.name == _name(dtype)
            else:
                with pytest.raises(ValueError):
                    op("a" + rec)(x, dim=axis, keepdim=keepdims)
        with pytest.raises(ValueError):
            op("a" + rec)(x)


# ====================================================================== lax_numpy_test.py: argmin / argmax

ARG_CASES = [(n, d, s, a) for n in ARGS for s in [NUMPY_SCALAR_SHAPE] + NONEMPTY_ARRAY_SHAPES
             for d in DEFAULT_DTYPES for a in range(-len(s if not isinstance(s, str) else ()),
                                                     len(s if not isinstance(s, str) else ()))]


@pytest.mark.parametrize("name, dtype, shape, axis", ARG_CASES,
                         ids=["%s-%s-%s-%d" % (n, _name(d), _sid(s) if not isinstance(s, str) else s, a)
                              for n, d, s, a in ARG_CASES])
def test_arg_min_max(name, dtype, shape, axis):
    """lax_numpy_test.py testArgMinMax (records argmin/argmax, default_dtypes,
    nonempty_shapes, jtu.rand_some_equal — half the elements tie with the
    first), every axis, keepdims: against np.argmin/np.argmax (the first
    winner). min/max with that dim return the same index and the winner's
    value."""
    rng = rng_for("argminmax", name, str(dtype), shape, axis)
    x = rand_some_equal(rng, shape, dtype)
    for keepdims in (False, True):
        check_reduction(name, x, dim=axis, keepdim=keepdims)
        check_reduction(EXTREME[name], x, dim=axis, keepdim=keepdims)


@pytest.mark.parametrize("name", ARGS)
def test_arg_min_max_empty(name):
    """lax_numpy_test.py testArgMinMaxEmpty: "attempt to get argmax of an empty
    sequence" for np.array([]) and zeros((2, 0)) over axis 1 (ValueError);
    over axis 0 of zeros((2, 0)) the result is empty, as NumPy's; lax_test.py
    testArgMinMaxEmptyError: ones((0, 2)) over axis 0 raises ValueError."""
    with pytest.raises(ValueError):
        op(name)(np.array([]))
    with pytest.raises(ValueError):
        op(name)(np.zeros((2, 0)), dim=1)
    r = op(name)(np.zeros((2, 0)), dim=0)
    assert r.shape == getattr(np, name)(np.zeros((2, 0)), axis=0).shape == (0,)
    assert r.dtype is pylucid.int64
    with pytest.raises(ValueError):
        op(name)(np.ones((0, 2)), dim=0)


@pytest.mark.parametrize("name", ARGS)
def test_arg_min_max_axis(name):
    """lax_test.py testArgMinMaxInvalidAxisError: lax.argmax(ones((2, 3)),
    axis=-1) raises "Invalid axis -1"; pylucid takes negative dims as NumPy
    does (-1 is dim 1); dim 2 and -3 are out of range. testArgMinMaxIndexDtypeError:
    pylucid has no index_dtype, the indices are int64."""
    x = rng_for("argaxis").standard_normal((2, 3))
    same_bits(to_numpy(check_reduction(name, x, dim=-1)), to_numpy(op(name)(x, dim=1)))
    for d in (2, -3):
        with pytest.raises(DIM_ERRORS):
            op(name)(x, dim=d)
    assert op(name)(x, dim=0).dtype is pylucid.int64


@pytest.mark.parametrize("dtype", T.FLOAT_NAMES)
def test_argmax_of_nan_chooses_nan(dtype):
    """lax_test.py testArgMaxOfNanChoosesNaN: argmax([0., nan]) is 1; argmin
    too; amax/amin are that NaN and its gradient goes to it."""
    x = cast(np.array([0.0, np.nan]), dtype)
    for name in ARGS:
        assert int(to_numpy(check_reduction(name, x, dim=0))) == 1
    for name in REDUCTIONS:
        g = check_reduction_grad(name, x, dim=0, g=cast(np.array(1.0), dtype))
        assert g.astype(np.float64).tolist() == [0.0, 1.0]


# ====================================================================== lax_numpy_test.py: clip

CLIP_BOUNDS = [(-1, None), (None, 1), (-0.9, 1), (-np.ones(1), None), (None, np.ones(1)),
               (np.full(1, -0.9), np.ones(1))]
CLIP_DTYPES = ["bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8"]
CLIP_SHAPES = [NUMPY_SCALAR_SHAPE] + NONEMPTY_ARRAY_SHAPES + EMPTY_ARRAY_SHAPES


@pytest.mark.parametrize("dtype", CLIP_DTYPES)
@pytest.mark.parametrize("bounds", range(len(CLIP_BOUNDS)),
                         ids=["m1_none", "none_1", "m09_1", "arr_m1_none", "none_arr1", "arr_m09_arr1"])
def test_clip_static_bounds(bounds, dtype):
    """lax_numpy_test.py testClipStaticBounds: jnp.clip(x, min=a_min,
    max=a_max) against np.clip (check_dtypes=False there; here pylucid's
    promotion: a Python float bound makes an integer x float32, a float64
    array bound float64), every shape and dtype (unsigned: |bounds|)."""
    a_min, a_max = CLIP_BOUNDS[bounds]
    if dtype == "uint8":
        a_min = None if a_min is None else abs(a_min)
        a_max = None if a_max is None else abs(a_max)
    for shape in CLIP_SHAPES:
        rng = rng_for("clip_static", bounds, dtype, shape)
        x = rand_dtype(rng, () if isinstance(shape, str) else shape, T.NP_OF[dtype])
        check_clamp(x, a_min, a_max, name="clip")
        if dtype == "float64" and x.size:
            check_clamp_grad(x, a_min, a_max)


@pytest.mark.parametrize("dtype", CLIP_DTYPES)
def test_clip_none(dtype):
    """lax_numpy_test.py testClipNone: jnp.clip(x) is x; pylucid's clip (and
    clamp) without bounds raises ValueError."""
    x = rand_dtype(rng_for("clipnone", dtype), (3, 4), T.NP_OF[dtype])
    with pytest.raises(ValueError):
        ops.clip(x)
    with pytest.raises(ValueError):
        ops.clamp(x, None, None)


def test_clip_complex_input_error():
    """lax_numpy_test.py testClipComplexInputError: complex x or a complex
    bound raises (ValueError "Complex values have no ordering" there;
    TypeError naming complex here)."""
    x = np.ones(5, dtype=np.complex64)
    for args in ((x, None, 1.0), (x, None, x), (np.ones(5, np.int32), -1 + 5j, None),
                 (np.ones(5, np.int32), None, np.array([-1 + 5j]))):
        with pytest.raises(TypeError, match="complex"):
            ops.clip(*args)


def test_clip_upper_precedence():
    """lax_numpy_test.py testClipUpperPrecedence: with min 3 > max 2 the
    result for x = 4 is max (2), as np.clip."""
    a_min, a_max, x = 3 * np.ones(1), 2 * np.ones(1), 4 * np.ones(1)
    y = to_numpy(ops.clip(x, min=a_min, max=a_max))
    assert y.tolist() == [2.0] and y.tolist() == np.clip(x, a_min, a_max).tolist()
    check_clamp_grad(x, a_min, a_max)


# ====================================================================== lax_test.py: clamp

CLAMP_SHAPES = [((), (2, 3), ()), ((2, 3), (2, 3), ()), ((), (2, 3), (2, 3)), ((2, 3), (2, 3), (2, 3))]


@pytest.mark.parametrize("dtype", [_name(d) for d in DEFAULT_DTYPES])
@pytest.mark.parametrize("shapes", CLAMP_SHAPES, ids=lambda s: "-".join(map(_sid, s)))
def test_clamp_against_numpy(shapes, dtype):
    """lax_test.py testClamp / testClampAgainstNumpy: lax.clamp(min, x, max)
    with rand_default operands of the same dtype (random bounds: min > max
    in places) against lax_reference.clamp, np.clip(x, np.clip(min, None,
    max), max) — max wins where min > max, as pylucid's rule; gradients to
    all three for floats."""
    rng = rng_for("clamp", shapes, dtype)
    lo, x, hi = (rand_dtype(rng, s, T.NP_OF[dtype]) for s in shapes)
    got = check_clamp(x, lo, hi)
    with np.errstate(invalid="ignore"):
        ref = np.clip(x.astype(np.float64), np.clip(lo.astype(np.float64), None, hi.astype(np.float64)),
                      hi.astype(np.float64))
    assert np.array_equal(got.astype(np.float64), ref)
    if dtype in T.FLOAT_NAMES:
        check_clamp_grad(x, lo, hi)


# ====================================================================== lax_autodiff_test.py

REDUCE_GRAD_SHAPES = [((), ()), ((3, 4, 5), ()), ((3, 4, 5), (0,)), ((3, 4, 5), (1, 2)), ((3, 4, 5), (0, 2)),
                      ((3, 4, 5), (0, 1, 2)), ((3, 1), (1,)), ((3, 0, 5), (1,))]


@pytest.mark.parametrize("dtype", T.FLOAT_NAMES)
@pytest.mark.parametrize("shape, dims", REDUCE_GRAD_SHAPES, ids=["%s-%s" % (_sid(s), _sid(d)) for s, d in
                                                                 REDUCE_GRAD_SHAPES])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduce_grad(name, shape, dims, dtype):
    """lax_autodiff_test.py testReduceGrad for (-inf, lax.max) / (inf, lax.min)
    with grad_inexact_dtypes and jtu.rand_unique_int: check_grads order 2,
    fwd and rev — here gradcheck and gradgradcheck (float64), the jvp against
    finite differences and the vjp, and in every float dtype the gradient /
    tangent of the unique winner. dims () reduces nothing (lax.reduce's
    convention too). A zero-size shape is skipped for max/min upstream; here
    its zero-size reduced slice raises ValueError."""
    rng = rng_for("reduce_grad", name, shape, dims, dtype)
    if 0 in shape:
        with pytest.raises(ValueError):
            op(name)(np.zeros(shape), dim=dims)
        return
    x = rand_unique_int(rng, shape, dtype)
    fn = lambda t: op(name)(t, dim=dims)  # noqa: E731
    check_reduction(name, x, dim=dims)
    check_reduction_grad(name, x, dim=dims)
    v = cast(rng.standard_normal(shape), dtype)
    if dims == ():
        want = v
    else:
        idx = ref_arg(x, dims, EXTREME[name])
        want = ref_gather(v, idx, dims).reshape(out_shape(shape, dims, False))
    check_jvp_selects(fn, [x], [v], want)
    if dtype == "float64":
        t = pylucid.from_numpy(x, requires_grad=True)
        assert autograd.gradcheck(fn, [t])
        # second order on a (2, 3, 2) window of the same data (a cheaper Jacobian of the Jacobian)
        small = pylucid.from_numpy(np.array(x[:2, :3, :2] if x.ndim == 3 else x), requires_grad=True)
        assert autograd.gradgradcheck(fn, [small])
        check_jvp_numeric(fn, [x], [np.asarray(rng.standard_normal(shape))])


@pytest.mark.parametrize("dtype", T.FLOAT_NAMES)
@pytest.mark.parametrize("shape", [(), (2, 3)], ids=_sid)
@pytest.mark.parametrize("arrangement", ["operand_low_high", "low_operand_high", "low_high_operand"])
def test_clamp_grad(arrangement, shape, dtype):
    """lax_autodiff_test.py testClampGrad: low = operand - 10, high = operand +
    10, check_grads of lax.clamp(operand, low, high), (low, operand, high),
    (low, high, operand) — lax.clamp(min, x, max): the value comes from min,
    x and max respectively, and so does the whole gradient and tangent.
    gradcheck/gradgradcheck in float64, the rule in every float dtype."""
    rng = rng_for("clamp_grad", arrangement, shape, dtype)
    operand = cast(rng.standard_normal(shape) * 3, dtype)
    low = cast(operand.astype(np.float64) - 10, dtype)
    high = cast(operand.astype(np.float64) + 10, dtype)
    lmin, lx, lmax = {"operand_low_high": (operand, low, high), "low_operand_high": (low, operand, high),
                      "low_high_operand": (low, high, operand)}[arrangement]
    check_clamp(lx, lmin, lmax)
    check_clamp_grad(lx, lmin, lmax)
    src = {"operand_low_high": 1, "low_operand_high": 0, "low_high_operand": 2}[arrangement]
    _, s = ref_clamp(lx, lmin, lmax, dtype)
    assert (s == src).all()
    tangents = [cast(rng.standard_normal(shape), dtype) for _ in range(3)]
    check_jvp_selects(lambda a, b, c: ops.clamp(a, b, c), [lx, lmin, lmax], tangents, tangents[src])
    if dtype == "float64":
        ts = [pylucid.from_numpy(np.array(v, order="C"), requires_grad=True) for v in (lx, lmin, lmax)]
        assert autograd.gradcheck(ops.clamp, ts)
        assert autograd.gradgradcheck(ops.clamp, ts)
        check_jvp_numeric(ops.clamp, [lx, lmin, lmax], [np.asarray(rng.standard_normal(shape)) for _ in range(3)])


# ====================================================================== jax/_src/lax/lax.py JVP rules: differences


def _jax_reduce_chooser_tangent(x, v, axis, extreme):
    """_reduce_chooser_jvp_rule: sum of the tangents where operand == ans,
    divided by their count (NaN == NaN is false: 0/0)."""
    ans = (np.max if extreme == "max" else np.min)(x, axis=axis, keepdims=True)
    ind = (x == ans).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return (v * ind).sum(axis=axis) / ind.sum(axis=axis)


@pytest.mark.parametrize("dtype", T.FLOAT_NAMES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduce_chooser_ties_and_nan(name, dtype):
    """jax/_src/lax/lax.py _reduce_chooser_jvp_rule (reduce_max/reduce_min's
    JVP; its transpose is the VJP): with rand_some_equal data (ties with the
    first element) JAX's tangent is the mean of the tied elements' tangents;
    pylucid's is the first winner's, bit for bit, and its gradient goes
    whole to that position. Where they agree (a unique winner) the values
    are equal. A NaN in a row: JAX gives NaN, pylucid the first NaN's
    tangent."""
    rng = rng_for("chooser", name, dtype)
    ext = EXTREME[name]
    x = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, -1.0, 5.0, 5.0], [0.0, -0.0, 7.0, -0.0], [2.0, 4.0, 6.0, 8.0]])
    if ext == "min":
        x = -x
    x = cast(x, dtype)
    v = cast(rng.integers(1, 9, size=x.shape).astype(np.float64), dtype)
    want = ref_gather(v, ref_arg(x, 1, ext), 1).reshape(4)
    tan = check_jvp_selects(lambda t: op(name)(t, dim=1), [x], [v], want)
    jax_tan = _jax_reduce_chooser_tangent(x.astype(np.float64), v.astype(np.float64), 1, ext)
    t64 = to_numpy(tan).astype(np.float64)
    assert t64[3] == jax_tan[3]  # unique winner: the same
    assert t64[0] == v.astype(np.float64)[0, 1] and jax_tan[0] == (v.astype(np.float64)[0, 1] +
                                                                  v.astype(np.float64)[0, 2]) / 2
    g = check_reduction_grad(name, x, dim=1, g=cast(np.ones(4), dtype))
    assert g.astype(np.float64).sum(axis=1).tolist() == [1.0] * 4
    assert (np.count_nonzero(g.astype(np.float64), axis=1) == 1).all()
    xn = x.copy()
    xn[3, 1] = np.nan
    xn[3, 3] = np.nan
    tan = to_numpy(autograd.jvp(lambda t: op(name)(t, dim=1), pylucid.from_numpy(xn), pylucid.from_numpy(v))[1])
    assert tan.astype(np.float64)[3] == v.astype(np.float64)[3, 1]
    assert np.isnan(_jax_reduce_chooser_tangent(xn.astype(np.float64), v.astype(np.float64), 1, ext)[3])


def _jax_clamp_vjp(x, lo, hi):
    """clamp_p's JVP rules read as masks (min, operand, max)."""
    with np.errstate(invalid="ignore"):
        return ((lo > x) & (lo < hi), (x > lo) & (x < hi), hi < x)


@pytest.mark.parametrize("case", ["x_at_min", "x_at_max", "min_gt_max_x_low", "min_gt_max_x_high", "inside"])
def test_clamp_jvp_rule_differences(case):
    """jax/_src/lax/lax.py ad.defjvp(clamp_p, ...): JAX gives the gradient to
    operand only strictly inside (min < x < max), to min only if min > x and
    min < max, to max only if max < x. At x == min or x == max nobody gets
    it; with min > max and x <= max it is lost too. pylucid's gradient always
    partitions g: to x at a bound, to max whenever min > max."""
    x, lo, hi, src = {"x_at_min": (1.0, 1.0, 2.0, 0), "x_at_max": (2.0, 1.0, 2.0, 0),
                      "min_gt_max_x_low": (0.0, 3.0, 2.0, 2), "min_gt_max_x_high": (4.0, 3.0, 2.0, 2),
                      "inside": (1.5, 1.0, 2.0, 0)}[case]
    X, L, H = (np.array([v]) for v in (x, lo, hi))
    check_clamp_grad(X, L, H, g=np.ones(1))
    _, s = ref_clamp(X, L, H, "float64")
    assert s.tolist() == [src]
    jax_masks = _jax_clamp_vjp(X, L, H)
    jax_total = sum(m.astype(np.float64) for m in jax_masks)
    assert jax_total.tolist() == ([1.0] if case in ("inside", "min_gt_max_x_high") else [0.0])
