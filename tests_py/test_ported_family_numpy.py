"""The min/max family (fmin, fmax, clamp/clip, amin, amax, argmin, argmax,
min/max with a dim, out=) against test cases ported from NumPy's own test
suite (numpy/numpy, main branch).

Each test names its origin: the file under numpy/_core/tests/ and the test
(class.method). NumPy is the reference for values: results are compared with
NumPy's np.fmin/np.fmax/np.clip/np.min/np.max/np.argmin/np.argmax, and bit
for bit with pylucid's selection rule (docs/semantics.md; the references are
in ported_family_util.py). Deliberate differences, asserted as pylucid's rule
with NumPy's behaviour in the docstring:

* values are the winner's bits: of ``-0.0`` and ``+0.0`` the first operand /
  the first position wins (NumPy's minimum/fmin may return either zero);
* ``out=`` must have exactly the result's shape and dtype (no ``casting=``:
  NumPy's ``casting="unsafe"`` cases raise), and an ``out`` that overlaps an
  input other than being that very input raises ValueError (NumPy buffers);
* ``clip(x)`` / ``clip(x, None, None)`` raises ValueError (NumPy returns x);
* complex, object, datetime, longdouble and uint16/32/64 raise TypeError
  naming the dtype (NumPy computes);
* a zero-size reduced slice raises ValueError, as NumPy does; a dim out of
  range raises ValueError or IndexError (NumPy's AxisError is both). On a
  0-d tensor a dim behaves as it does for pylucid's sum (NumPy accepts
  axis 0 on a scalar);
* promotion is pylucid's (docs/dtypes.md): Python scalars are weak, so
  ``clip(int_array, 0.5, None)`` is float32 (NumPy float64), and a bool
  tensor clipped with Python ints is int64.
"""

from __future__ import annotations

import itertools
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optable as T
import pylucid
from ported_family_util import (ARGS, DIM_ERRORS, FMINMAX, OUT_ERRORS, REDUCTIONS, cast, check_clamp,
                                check_clamp_grad, check_fminmax, check_fminmax_grad, check_out,
                                check_out_refused, check_reduction, check_reduction_grad, np_dtype_name, op,
                                out_shape, rng_for, same_bits, same_values, to_numpy)
from pylucid import ops

ALL_INT_CODES = sorted(set(np.typecodes["AllInteger"]))
ALL_FLOAT_CODES = sorted(set(np.typecodes["AllFloat"]))
SUPPORTED = {np.dtype(d) for d in (np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16,
                                   np.float32, np.float64)}


def supported(dt) -> bool:
    return np.dtype(dt) in SUPPORTED


def assert_type_error_naming(fn, dt) -> None:
    with pytest.raises(TypeError) as ei:
        fn()
    assert str(np.dtype(dt)) in str(ei.value) or np.dtype(dt).name in str(ei.value), str(ei.value)


def fold(name, values):
    """np.fmin.reduce / np.fmax.reduce: the left fold of the binary op."""
    acc = values[0]
    for v in values[1:]:
        acc = op(name)(acc, v)
    return acc


# ====================================================================== test_umath.py TestFmin / TestFmax


@pytest.mark.parametrize("code", ALL_INT_CODES + ALL_FLOAT_CODES)
@pytest.mark.parametrize("name", FMINMAX)
def test_fminmax_reduce(name, code):
    """test_umath.py TestFmin.test_reduce / TestFmax.test_reduce: np.fmin.reduce
    of arange(11) and its reverse is 0 (fmax: 10) for every integer and float
    typecode; with NaN at every other element fmin ignores them: 1 (fmax 9).
    The reduction is the left fold of the binary op. Unsupported typecodes
    raise TypeError naming the dtype."""
    seq1 = np.arange(11)
    seq2 = seq1[::-1]
    want = 0 if name == "fmin" else 10
    if not supported(code):
        assert_type_error_naming(lambda: op(name)(seq1.astype(code), seq2.astype(code)), code)
        return
    for tmp in (seq1.astype(code), seq2.astype(code)):
        r = fold(name, [tmp[i:i + 1] for i in range(11)])
        assert r.dtype.name == np_dtype_name(tmp)
        assert to_numpy(r).tolist() == [want]
    if np.dtype(code).kind == "f":
        for tmp in (seq1.astype(code), seq2.astype(code)):
            tmp[::2] = np.nan
            r = to_numpy(fold(name, [tmp[i:i + 1] for i in range(11)]))
            assert r.tolist() == [1 if name == "fmin" else 9]


@pytest.mark.parametrize("code", ALL_INT_CODES + ALL_FLOAT_CODES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_minmax_reduce_as_amin_amax(name, code):
    """test_umath.py TestMinimum.test_reduce / TestMaximum.test_reduce, as
    amin/amax (np.minimum.reduce is np.min): arange(11) and its reverse give
    0 (amax 10) at position 0 or 10; with NaN at every other element the
    result is NaN and its position is the first NaN (0)."""
    seq1 = np.arange(11)
    seq2 = seq1[::-1]
    if not supported(code):
        assert_type_error_naming(lambda: op(name)(seq1.astype(code)), code)
        return
    for tmp in (seq1.astype(code), seq2.astype(code)):
        r = check_reduction(name, tmp)
        assert to_numpy(r).tolist() == (0 if name == "amin" else 10)
        check_reduction("arg" + name[1:], tmp)
    if np.dtype(code).kind == "f":
        for tmp in (seq1.astype(code), seq2.astype(code)):
            tmp[::2] = np.nan
            assert np.isnan(to_numpy(check_reduction(name, tmp)))
            assert to_numpy(check_reduction("arg" + name[1:], tmp)) == 0


@pytest.mark.parametrize("name", FMINMAX)
@pytest.mark.parametrize("data", [[1, 2j], [1 + 3j, 2j]], ids=["1_2j", "1+3j_2j"])
def test_fminmax_reduce_complex(name, data):
    """test_umath.py TestFmin/TestFmax.test_reduce_complex: complex is refused."""
    arr = np.array(data)
    assert_type_error_naming(lambda: op(name)(arr[:1], arr[1:]), arr.dtype)


@pytest.mark.parametrize("dt", T.FLOAT_NAMES)
@pytest.mark.parametrize("name", FMINMAX)
def test_fminmax_float_nans(name, dt):
    """test_umath.py TestFmin/TestFmax.test_float_nans: [0, nan, nan] vs
    [nan, 0, nan] is [0, 0, nan] (every float dtype). Gradient: to the
    non-NaN operand, to a when both are NaN (a wins iff a <= b or b is NaN)."""
    nan = np.nan
    arg1 = cast(np.array([0, nan, nan]), dt)
    arg2 = cast(np.array([nan, 0, nan]), dt)
    got = check_fminmax(name, arg1, arg2)
    same_values(got.astype(np.float64), np.array([0, 0, nan]))
    ga, gb = check_fminmax_grad(name, arg1, arg2, g=cast(np.ones(3), dt))
    assert ga.astype(np.float64).tolist() == [1.0, 0.0, 1.0]
    assert gb.astype(np.float64).tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize("cnan", [complex(np.nan, 0), complex(0, np.nan), complex(np.nan, np.nan)],
                         ids=["nan+0j", "0+nanj", "nan+nanj"])
@pytest.mark.parametrize("name", FMINMAX)
def test_fminmax_complex_nans(name, cnan):
    """test_umath.py TestFmin/TestFmax.test_complex_nans: complex is refused."""
    arg1 = np.array([0, cnan, cnan], dtype=complex)
    arg2 = np.array([cnan, 0, cnan], dtype=complex)
    assert_type_error_naming(lambda: op(name)(arg1, arg2), complex)
    assert_type_error_naming(lambda: op(name)(np.zeros(3), arg2), complex)


@pytest.mark.parametrize("code", ["e", "f", "d", "g"])
@pytest.mark.parametrize("name", ["fmin", "fmax", "amin", "amax"])
def test_precision(name, code):
    """test_umath.py TestFmin/TestFmax/TestMinimum/TestMaximum.test_precision:
    finfo min/max against +-inf, 0.1 against its next float, and NaN, both
    as the binary op and as a reduction of [v1, v2] (fmin/fmax: the fold;
    minimum/maximum: amin/amax, where a NaN wins). longdouble is refused."""
    if not supported(code):
        assert_type_error_naming(lambda: ops.fmin(np.ones(1, code), np.ones(1, code)), code)
        return
    dt = np.dtype(code).type
    dtmin, dtmax = np.finfo(dt).min, np.finfo(dt).max
    d1 = dt(0.1)
    d1_next = np.nextafter(d1, dt(np.inf))
    is_min = name in ("fmin", "amin")
    inf = np.inf if is_min else -np.inf
    cases = [(dtmin, inf, dtmin), (dtmax, inf, dtmax), (d1, d1_next, d1 if is_min else d1_next)]
    if name == "fmin":
        cases.append((dtmin, np.nan, dtmin))
    elif name == "fmax":
        cases.append((dtmax, np.nan, dtmax))
    else:
        cases.append((dtmin if is_min else dtmax, np.nan, np.nan))
    for v1, v2, want in cases:
        pair = np.array([v1, v2], dtype=dt)
        if name in FMINMAX:
            got = check_fminmax(name, pair[:1], pair[1:])
            red = to_numpy(fold(name, [pair[:1], pair[1:]]))
        else:
            got = to_numpy(op("minimum" if is_min else "maximum")(pair[:1], pair[1:]))
            red = to_numpy(check_reduction(name, pair)).reshape(1)
        for r in (got, red):
            same_values(r, np.array([want], dtype=dt))


STRIDED_A = [-4.0, 1.0, 10.0, 0.0, np.nan, -np.nan, np.inf, -np.inf]
STRIDED_B = [-2.0, -1.0, np.nan, 1.0, 0.0, np.nan, 1.0, -3.0]


@pytest.mark.parametrize("name", ["minimum", "maximum"])
def test_strided_array_out(name):
    """test_umath.py TestMinimum/TestMaximum.test_strided_array, its out=
    part: op(arr1[:6:2], arr2[::3], out=out[::3]) writes into every third
    element of a ones array and returns that view."""
    arr1, arr2 = np.array(STRIDED_A), np.array(STRIDED_B)
    out = np.ones(8)
    want = {"minimum": [-4.0, 1.0, 1.0, 1.0, 1.0, 1.0, np.nan, 1.0],
            "maximum": [-2.0, 1.0, 1.0, 10.0, 1.0, 1.0, np.nan, 1.0]}[name]
    view = out[::3]
    r = op(name)(arr1[:6:2], arr2[::3], out=view)
    assert r is view
    same_values(out, np.array(want))
    same_values(view, np.array({"minimum": [-4.0, 1.0, np.nan], "maximum": [-2.0, 10.0, np.nan]}[name]))


# ====================================================================== test_multiarray.py TestArgmax / TestArgmin

USG = {"argmax": [([1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0], 0), ([3, 3, 3, 3, 2, 2, 2, 2], 0),
                  ([0, 1, 2, 3, 4, 5, 6, 7], 7), ([7, 6, 5, 4, 3, 2, 1, 0], 0)],
       "argmin": [([1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0], 8), ([3, 3, 3, 3, 2, 2, 2, 2], 4),
                  ([0, 1, 2, 3, 4, 5, 6, 7], 0), ([7, 6, 5, 4, 3, 2, 1, 0], 7)]}
SG_EXTRA = {"argmax": [([1, 2, 3, 4, -4, -3, -2, -1], 3), ([1, 2, 3, 4, -1, -2, -3, -4], 3)],
            "argmin": [([1, 2, 3, 4, -4, -3, -2, -1], 4), ([1, 2, 3, 4, -1, -2, -3, -4], 7)]}
NAN_DATA = [([0, 1, 2, 3, np.nan], 4), ([0, 1, 2, np.nan, 3], 3), ([np.nan, 0, 1, 2, 3], 0),
            ([np.nan, 0, np.nan, 2, 3], 0)] + [([1] * (k * 5 - 1) + [np.nan], k * 5 - 1) for k in (2, 4, 8, 16, 32)]
BOOL_DATA = {"argmax": [([False, False, False, False, True], 4), ([False, False, False, True, False], 3),
                        ([True, False, False, False, False], 0), ([True, False, True, False, False], 0)],
             "argmin": [([True, True, True, True, False], 4), ([True, True, True, False, True], 3),
                        ([False, True, True, True, True], 0), ([False, True, False, True, True], 0)]}


def _combinations(name):
    cases = []
    for (d, pos), t in itertools.product(USG[name], (np.uint8, np.uint16, np.uint32, np.uint64)):
        cases.append((np.dtype(t).name, d, pos))
    for (d, pos), t in itertools.product(USG[name] + SG_EXTRA[name],
                                         (np.int8, np.int16, np.int32, np.int64, np.float32, np.float64)):
        cases.append((np.dtype(t).name, d, pos))
    # NumPy's NaN datasets run on float32/float64; float16 and bfloat16 added
    for (d, pos), t in itertools.product(NAN_DATA, ("float32", "float64", "float16", "bfloat16")):
        cases.append((t, d, pos))
    for d, pos in BOOL_DATA[name]:
        cases.append(("bool", d, pos))
    return cases


COMBINATIONS = [(name,) + c for name in ARGS for c in _combinations(name)]


@pytest.mark.parametrize("name, dtype, data, pos", COMBINATIONS,
                         ids=["%s-%s-%d" % (c[0], c[1], i) for i, c in enumerate(COMBINATIONS)])
def test_argminmax_combinations(name, dtype, data, pos):
    """test_multiarray.py TestArgmax/TestArgmin.test_combinations: the
    position of the first extreme (the first NaN when there is one), also
    after np.repeat(arr, 129) (pos * 129) and after 513 padding elements of
    the other extreme (pos). uint16/32/64 (and NumPy's complex and datetime
    datasets) are refused. The amin/amax value is the element at that
    position, its gradient goes whole to it, and min/max with dim=0 return
    the same index."""
    if dtype in ("uint16", "uint32", "uint64"):
        assert_type_error_naming(lambda: op(name)(np.array(data, dtype=dtype)), dtype)
        return
    arr = cast(np.array(data, dtype=np.float64 if dtype in T.FLOAT_NAMES else None), dtype) \
        if dtype != "bool" else np.array(data, dtype=bool)
    red = "amax" if name == "argmax" else "amin"
    other = np.min if name == "argmax" else np.max
    rarr = np.repeat(arr, 129)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        pad = np.repeat(cast(np.array(other(arr.astype(np.float64))), dtype) if dtype != "bool"
                        else np.array(other(arr)), 513).astype(arr.dtype)
    for x, want in ((arr, pos), (rarr, pos * 129), (np.concatenate((arr, pad)), pos)):
        got = check_reduction(name, x)
        assert int(to_numpy(got)) == want, (x, want)
        v = to_numpy(check_reduction(red, x))
        same_bits(v, x[want])
        _, idx = op(name[3:])(x, 0)
        assert int(to_numpy(idx)) == want
    if dtype in T.FLOAT_NAMES:
        g = check_reduction_grad(red, arr)
        assert np.flatnonzero(g.astype(np.float64)).tolist() == [pos]


@pytest.mark.parametrize("code", ["b", "h", "i", "q"])
@pytest.mark.parametrize("name", ARGS)
def test_extreme_signed_integers(name, code):
    """test_multiarray.py TestArgmax.test_maximum_signed_integers /
    TestArgmin.test_minimum_signed_integers: iinfo extremes, also repeated
    129 times (position 1 and 129)."""
    info = np.iinfo(code)
    if name == "argmax":
        a = np.array([1, info.max, info.min], dtype=code)
    else:
        a = np.array([1, info.min, info.min + 1, info.max], dtype=code)
    assert int(to_numpy(check_reduction(name, a))) == 1
    assert int(to_numpy(check_reduction(name, a.repeat(129)))) == 129


SIZES = [(), (3,), (3, 2), (2, 3), (3, 3), (2, 3, 4), (4, 3, 2), (1, 2, 3, 4), (2, 3, 4, 1), (3, 4, 1, 2),
         (4, 1, 2, 3), (64,), (128,), (256,)]
SIZE_AXIS = [(s, a) for s in SIZES for a in [*range(-len(s), len(s)), None]]


@pytest.mark.parametrize("size, axis", SIZE_AXIS, ids=["%s-%s" % sa for sa in SIZE_AXIS])
@pytest.mark.parametrize("name", ARGS)
def test_np_argmin_argmax_keepdims(name, size, axis):
    """test_multiarray.py TestArgmaxArgminCommon.test_np_argmin_argmax_keepdims:
    keepdims gives the reduced dims size 1 (all of them with axis None);
    out= (a NumPy array, also a transposed one, and a Tensor) is returned
    itself and holds the result; an out of the wrong shape raises and stays
    untouched. The same for the transposed input."""
    arr = rng_for("keepdims", size).normal(size=size)
    for x in (arr, arr.T):
        new_shape = out_shape(x.shape, axis, True)
        res = check_reduction(name, x, dim=axis, keepdim=True)
        assert res.shape == new_shape
        want = to_numpy(res)
        check_out(op(name), (x,), {"dim": axis, "keepdim": True}, want, as_tensor=False)
        check_out(op(name), (x,), {"dim": axis, "keepdim": True}, want, as_tensor=True)
        outT = np.zeros(new_shape[::-1], dtype=np.int64).T
        assert op(name)(x, dim=axis, keepdim=True, out=outT) is outT
        assert np.array_equal(outT, want)
        if len(size) > 0:
            wrong = list(new_shape)
            wrong[axis if axis is not None else 0] = 2
            check_out_refused(op(name), (x,), {"dim": axis, "keepdim": True}, np.zeros(wrong, dtype=np.int64))
            with pytest.raises(OUT_ERRORS + (IndexError,)):
                op(name)(x[0], dim=axis, keepdim=True, out=outT)


@pytest.mark.parametrize("method", ["max", "min"])
def test_all(method):
    """test_multiarray.py TestArgmaxArgminCommon.test_all: along every axis
    of a (4, 5, 6, 7, 8) array, the value equals the element at the arg
    position (choose over the axis). Also min/max with dim, and the gradient
    of amin/amax along the axis is one-hot per slice."""
    a = rng_for("test_all").normal(0, 1, (4, 5, 6, 7, 8))
    for i in range(a.ndim):
        vals = to_numpy(check_reduction("a" + method, a, dim=i))
        idx = to_numpy(check_reduction("arg" + method, a, dim=i))
        axes = [j for j in range(a.ndim) if j != i]
        assert np.array_equal(vals, idx.choose(*a.transpose(i, *axes)))
        check_reduction(method, a, dim=i)
    check_reduction_grad("a" + method, a, dim=2)


@pytest.mark.parametrize("name", ARGS)
def test_output_shape(name):
    """test_multiarray.py TestArgmaxArgminCommon.test_output_shape (gh-616):
    out of shape (11,), (2, 5) or (1, 10) for argmax(ones((10, 5)), -1)
    raises; (10,) works and holds the result; a float out raises (pylucid's
    out must have the result dtype, int64)."""
    a = np.ones((10, 5))
    for shape in ((11,), (2, 5), (1, 10)):
        check_out_refused(op(name), (a, -1), {}, np.ones(shape, dtype=np.int64))
    check_out_refused(op(name), (a, -1), {}, np.ones(10, dtype=np.float64))
    check_out_refused(op(name), (a, -1), {}, np.ones(10, dtype=np.int32))
    out = np.ones(10, dtype=np.int64)
    op(name)(a, -1, out=out)
    assert np.array_equal(out, to_numpy(op(name)(a, -1)))
    assert np.array_equal(out, np.zeros(10))


@pytest.mark.parametrize("ndim", [0, 1])
@pytest.mark.parametrize("name", ARGS)
def test_ret_is_out(name, ndim):
    """test_multiarray.py TestArgmaxArgminCommon.test_ret_is_out."""
    a = np.ones((4,) + (256,) * ndim)
    out = np.empty((256,) * ndim, dtype=np.int64)
    assert op(name)(a, dim=0, out=out) is out
    assert np.array_equal(out, np.zeros((256,) * ndim))


@pytest.mark.parametrize("name", ARGS)
def test_np_vs_ndarray(name):
    """test_multiarray.py TestArgmaxArgminCommon.test_np_vs_ndarray: the op
    and the Tensor method take the same dim and out (pylucid's out is
    keyword-only)."""
    a = rng_for("np_vs_ndarray").normal(size=(2, 3))
    t = pylucid.from_numpy(a)
    for dim, n in ((1, 2), (0, 3)):
        out1, out2 = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        r1 = getattr(t, name)(dim)
        r2 = op(name)(a, dim, out=out2)
        assert r2 is out2
        assert np.array_equal(to_numpy(r1), out2)
        op(name)(a, dim=dim, out=out1)
        assert np.array_equal(out1, out2)
        assert np.array_equal(out1, getattr(np, name)(a, axis=dim))


# ====================================================================== test_multiarray.py TestMinMax


@pytest.mark.parametrize("name", REDUCTIONS)
def test_minmax_scalar_and_axis(name):
    """test_multiarray.py TestMinMax.test_scalar / test_axis: axis 1 of a
    scalar and axis 1000 of a 1-d array raise; amax([[1, 2, 3]], axis=1) is
    [3]; axis None of a scalar is the scalar. Axis 0 of a 0-d tensor: as
    pylucid's sum (NumPy accepts it)."""
    one = np.array(1)
    with pytest.raises(DIM_ERRORS):
        op(name)(one, 1)
    with pytest.raises(DIM_ERRORS):
        op(name)(np.array([1, 2, 3]), 1000)
    r = check_reduction(name, np.array([[1, 2, 3]]), dim=1)
    assert to_numpy(r).tolist() == [3 if name == "amax" else 1]
    assert to_numpy(check_reduction(name, one)).tolist() == 1
    try:
        want = to_numpy(ops.sum(one, dim=0))
    except DIM_ERRORS:
        with pytest.raises(DIM_ERRORS):
            op(name)(one, dim=0)
    else:
        assert to_numpy(op(name)(one, dim=0)).tolist() == want.tolist()


# ====================================================================== test_umath.py TestMinMax


def _alignment_data(dtype, max_size):
    """numpy.testing's _gen_alignment_data(type='unary'), re-created: every
    size up to max_size at offsets 0 and 1 of a larger buffer, and strided."""
    for size in range(1, max_size + 1):
        for off in (0, 1):
            buf = np.zeros(size + off + 1, dtype=dtype)
            yield buf[off: off + size], "size=%d offset=%d" % (size, off)
        yield np.zeros(size * 2, dtype=dtype)[::2], "size=%d stride=2" % size


@pytest.mark.parametrize("dt, sz", [(np.float32, 15), (np.float64, 7), (np.float16, 15)], ids=["f4", "f8", "f2"])
def test_minmax_blocked(dt, sz):
    """test_umath.py TestMinMax.test_minmax_blocked: inp.max()/inp.min() with
    a NaN at every position of every size and alignment is NaN (amax/amin,
    argmax/argmin at that position); with +-1e10 there instead (6e4 for
    float16) that value wins. float16 added."""
    for inp, msg in _alignment_data(dt, sz):
        for i in range(inp.size):
            inp[:] = np.arange(inp.size, dtype=dt)
            inp[i] = np.nan
            for name in ("amin", "amax"):
                assert np.isnan(to_numpy(check_reduction(name, inp))), msg
                assert int(to_numpy(check_reduction("arg" + name[1:], inp))) == i, msg
            big = 1e10 if dt != np.float16 else 6e4
            inp[i] = big
            assert to_numpy(ops.amax(inp)) == inp[i] and int(to_numpy(ops.argmax(inp))) == i, msg
            inp[i] = -big
            assert to_numpy(ops.amin(inp)) == inp[i] and int(to_numpy(ops.argmin(inp))) == i, msg


@pytest.mark.parametrize("name", REDUCTIONS + ARGS)
def test_lower_align(name):
    """test_umath.py TestMinMax.test_lower_align: float64 data not aligned to
    its element size (a view at a 4-byte offset of an int8 buffer)."""
    d = np.zeros(23 * 8, dtype=np.int8)[4:-4].view(np.float64)
    assert d.ctypes.data % 8 != 0
    r = check_reduction(name, d)
    if name in REDUCTIONS:
        same_bits(to_numpy(r), d[0])
    d[:] = rng_for("lower_align").standard_normal(d.size)
    check_reduction(name, d)


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32])
@pytest.mark.parametrize("code", ["f", "e", "F"])
def test_reduce_reorder(n, code):
    """test_umath.py TestMinMax.test_reduce_reorder: each row of
    diagflat([nan]*n) has its NaN at another position: np.min(row) is NaN,
    without warnings; argmin finds it. complex64 is refused."""
    if code == "F":
        assert_type_error_naming(lambda: ops.amin(np.ones(2, "F")), "F")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i, r in enumerate(np.diagflat(np.array([np.nan] * n, dtype=code))):
            assert np.isnan(to_numpy(check_reduction("amin", r)))
            assert int(to_numpy(check_reduction("argmin", r))) == i


# ====================================================================== test_ufunc.py


def _zero_axis_cases(n, m):
    """TestUfunc.test_reduce_zero_axis's t(expect, func, n, m): (array shape, axis)."""
    return [((n, m), 1), ((m, n), 0), ((n // 2, n // 2, m), 2), ((n // 2, m, n // 2), 1),
            ((n, m // 2, m // 2), (1, 2)), ((m // 2, n, m // 2), (0, 2)),
            ((m // 3, m // 3, m // 3, n // 2, n // 2), (0, 1, 2)),
            ((10, m, n), (0, 1)), ((10, n, m), (0, 2)), ((m, 10, n), 0), ((10, m, n), 1), ((10, n, m), 2)]


@pytest.mark.parametrize("n, m", [(30, 30), (0, 30), (30, 0), (0, 0)])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduce_zero_axis(name, n, m):
    """test_ufunc.py TestUfunc.test_reduce_zero_axis (np.maximum.reduce, no
    identity): n reductions of m-element slices are fine when m > 0 (also
    when n == 0: an empty result) and raise ValueError when m == 0; an empty
    1-d array raises; axis=() of a (0, 0) array reduces nothing."""
    for shape, axis in _zero_axis_cases(n, m):
        x = np.zeros(shape)
        if m > 0:
            r = op(name)(x, dim=axis)
            assert r.shape == out_shape(shape, axis, False)
            assert r.shape == np.max(x, axis=axis).shape
        else:
            with pytest.raises(ValueError):
                op(name)(x, dim=axis)
    with pytest.raises(ValueError):
        op(name)(np.zeros(0))
    assert op(name)(np.zeros((0, 0)), dim=()).shape == (0, 0)


@pytest.mark.parametrize("name", REDUCTIONS + ARGS)
def test_axis_out_of_bounds(name):
    """test_ufunc.py TestUfunc.test_axis_out_of_bounds (a.all(axis=1),
    axis=-2 of a 1-d array): AxisError there, ValueError/IndexError here;
    repeated dims raise too."""
    a = np.array([False, False])
    for axis in (1, -2):
        with pytest.raises(DIM_ERRORS):
            op(name)(a, dim=axis)
    if name in REDUCTIONS:
        with pytest.raises(DIM_ERRORS):
            op(name)(np.zeros((2, 3)), dim=(0, 0))
        with pytest.raises(DIM_ERRORS):
            op(name)(np.zeros((2, 3)), dim=(1, -1))


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, (0, 1), (0, 2), (1, 2), (0, 1, 2), (2, 0), ()],
                         ids=str)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_keepdims_argument(name, axis, keepdims):
    """test_ufunc.py TestUfunc.test_keepdims_argument (there for sum/gufuncs):
    amin/amax over every axis, axis tuple (unsorted too), None and () of a
    (2, 3, 4) array, with and without keepdims, against np.min/np.max, and
    the gradient to the first winner of each slice. The data has ties and
    signed zeros (the first wins)."""
    x = np.array([0.0, -0.0, 1.0, 1.0, -2.0, np.inf, -np.inf, 0.5] * 3).reshape(2, 3, 4)
    check_reduction(name, x, dim=axis, keepdim=keepdims)
    check_reduction_grad(name, x, dim=axis, keepdim=keepdims)
    if axis is None or isinstance(axis, int):
        check_reduction("arg" + name[1:], x, dim=axis, keepdim=keepdims)


# ====================================================================== test_numeric.py TestClip

CLIP_CODES = "?bhilqpBHILQPefdgFDGO"


@pytest.mark.parametrize("code", CLIP_CODES)
def test_ones_pathological(code):
    """test_numeric.py TestClip.test_ones_pathological (gh-12519): with
    amin > amax every element is amax: clip(ones(10), 1, 0) is zeros.
    bool with Python ints promotes to int64 (weak ints lift the category);
    unsupported dtypes are refused."""
    arr = np.ones(10, dtype=code)
    if not supported(code):
        assert_type_error_naming(lambda: ops.clip(arr, 1, 0), code)
        return
    got = check_clamp(arr, 1, 0, name="clip")
    assert np.array_equal(got, np.zeros(10))


def _clip_data(kind, rng, nr=5, nc=3):
    if kind == "double":
        return rng.standard_normal((nr, nc))
    if kind == "float":
        return rng.standard_normal((nr, nc)).astype(np.float32)
    if kind == "int64":
        return (10 * rng.random((nr, nc))).astype(np.int64)
    return (10 * rng.random((nr, nc))).astype(np.int32)


def _choose_clip(a, m, M):
    """TestClip.clip: the reference by a.choose (a if in range, m below, M above)."""
    selector = np.less(a, m) + 2 * np.greater(a, M)
    return selector.choose((a, m, M))


@pytest.mark.parametrize("case", ["simple_double", "simple_int", "array_double", "clip_non_contig",
                                  "simple_float32", "array_min_only", "array_max_only"])
def test_clip_simple(case):
    """test_numeric.py TestClip.test_simple_double / test_simple_int /
    test_array_double / test_clip_non_contig: pylucid's clip equals NumPy's
    fastclip and the choose-based reference; float32 data and one-sided
    array bounds added. Tensor bounds get their gradients (float64)."""
    rng = rng_for("clip", case)
    if case == "simple_double":
        a, m, M = _clip_data("double", rng), 0.1, 0.6
    elif case == "simple_float32":
        a, m, M = _clip_data("float", rng), 0.1, 0.6
    elif case == "simple_int":
        a, m, M = _clip_data("int64", rng), -2, 4
    elif case == "array_double":
        a = _clip_data("double", rng)
        m = np.zeros(a.shape)
        M = m + 0.5
    elif case == "clip_non_contig":
        a = rng.standard_normal((10, 9))[::2, ::3]
        assert not a.flags["F_CONTIGUOUS"] and not a.flags["C_CONTIGUOUS"]
        m, M = -1.6, 1.7
    elif case == "array_min_only":
        a, m, M = _clip_data("double", rng), np.zeros((5, 1)), None
    else:
        a, m, M = _clip_data("double", rng), None, np.full((3,), 0.25)
    got = check_clamp(a, m, M, name="clip")
    if m is not None and M is not None:
        same_values(got, np.asarray(_choose_clip(a, m, M)).astype(got.dtype))
    if a.dtype == np.float64:
        check_clamp_grad(a, m, M)


def test_clip_with_out_simple():
    """test_numeric.py TestClip.test_clip_with_out_simple: out= a float64
    zeros array of a's shape receives the result and is returned."""
    a = _clip_data("double", rng_for("out_simple"))
    want = check_clamp(a, -0.5, 0.6)
    check_out(ops.clip, (a, -0.5, 0.6), {}, want, as_tensor=False)
    check_out(ops.clip, (a, -0.5, 0.6), {}, want, as_tensor=True)


@pytest.mark.parametrize("case", ["simple2", "simple_int32", "array_int32", "array_outint32"])
def test_clip_with_out_casting(case):
    """test_numeric.py TestClip.test_clip_with_out_simple2 / _simple_int32 /
    _array_int32 / _array_outint32: NumPy writes into an out of another
    dtype (casting="unsafe", or int32 into int64). pylucid's out must have
    the result dtype exactly: these raise and leave out untouched; with the
    result dtype the same calls work."""
    rng = rng_for("out_casting", case)
    if case == "simple2":
        a, m, M, out_dt = _clip_data("int32", rng), np.float64(0), np.float64(2), np.int32
    elif case == "simple_int32":
        a, m, M, out_dt = _clip_data("int32", rng), np.int32(-1), np.int32(1), np.int64
    elif case == "array_int32":
        a = _clip_data("int32", rng)
        m, M, out_dt = np.zeros(a.shape, np.float64), np.float64(1), np.int32
    else:
        a, m, M, out_dt = _clip_data("double", rng), -1.0, 2.0, np.int32
    check_out_refused(ops.clip, (a, m, M), {}, np.zeros(a.shape, dtype=out_dt))
    want = check_clamp(a, m, M)
    check_out(ops.clip, (a, m, M), {}, want, as_tensor=False)


def test_clip_with_out_transposed():
    """test_numeric.py TestClip.test_clip_with_out_transposed: a transposed
    out works."""
    a = np.arange(16).reshape(4, 4)
    out = np.empty_like(a).T
    assert ops.clip(a, 4, 10, out=out) is out
    assert np.array_equal(out, _choose_clip(a, 4, 10))


def test_clip_with_out_memory_overlap():
    """test_numeric.py TestClip.test_clip_with_out_memory_overlap:
    a[:-1].clip(4, 10, out=a[1:]) — NumPy buffers the overlap; pylucid
    raises ValueError (an out overlapping an input it is not) and writes
    nothing."""
    a = np.arange(16).reshape(4, 4)
    ac = a.copy()
    with pytest.raises(ValueError):
        ops.clip(a[:-1], 4, 10, out=a[1:])
    assert np.array_equal(a, ac)


@pytest.mark.parametrize("case", ["inplace_array", "inplace_simple", "func_takes_out"])
def test_clip_inplace(case):
    """test_numeric.py TestClip.test_clip_inplace_array / test_clip_inplace_simple
    / test_clip_func_takes_out: out=a (the input itself) clips in place and
    returns a; a Tensor input works the same way."""
    a = _clip_data("double", rng_for("inplace", case))
    m = np.zeros(a.shape) if case == "inplace_array" else -0.5
    M = 1.0 if case == "inplace_array" else 0.6
    want = check_clamp(a, m, M)
    a2 = ops.clip(a, m, M, out=a)
    assert a2 is a
    same_bits(a, want)
    b = pylucid.tensor(_clip_data("double", rng_for("inplace", case)))
    assert ops.clip(b, m, M, out=b) is b
    same_bits(to_numpy(b), want)


@pytest.mark.parametrize("kw", [{"min": np.nan}, {"max": np.nan}, {"min": np.nan, "max": np.nan},
                                {"min": -2, "max": np.nan}, {"min": np.nan, "max": 10}],
                         ids=["min", "max", "both", "max_only_nan", "min_only_nan"])
def test_clip_nan(kw):
    """test_numeric.py TestClip.test_clip_nan: a NaN bound makes every
    element NaN (arange(7.)); the gradient goes to the NaN bound (float64
    tensor bounds), none to x."""
    d = np.arange(7.0)
    got = to_numpy(ops.clip(d, **kw))
    assert np.isnan(got).all()
    check_clamp(d, kw.get("min"), kw.get("max"))
    lo = None if "min" not in kw else np.array(float(kw["min"]))
    hi = None if "max" not in kw else np.array(float(kw["max"]))
    check_clamp_grad(d, lo, hi)


def test_clip_all_none():
    """test_numeric.py TestClip.test_clip_all_none: np.clip(arr, None, None)
    returns arr; pylucid raises ValueError (as PyTorch) — also the method."""
    arr = np.arange(10.0)
    with pytest.raises(ValueError):
        ops.clip(arr, None, None)
    with pytest.raises(ValueError):
        ops.clip(arr)
    with pytest.raises(ValueError):
        pylucid.tensor(arr).clamp()


@pytest.mark.parametrize("amin, amax", [(1, 0), (1, np.zeros(10)), (np.ones(10), np.zeros(10))],
                         ids=["scalars", "scalar_array", "arrays"])
def test_clip_value_min_max_flip(amin, amax):
    """test_numeric.py TestClip.test_clip_value_min_max_flip: with amin > amax
    the result is np.minimum(np.maximum(a, amin), amax) — all amax. The
    gradient of a float64 x goes to max entirely."""
    a = np.arange(10, dtype=np.int64)
    got = check_clamp(a, amin, amax)
    with np.errstate(invalid="ignore"):
        expected = np.minimum(np.maximum(a, amin), amax)
    same_values(got.astype(np.float64), expected.astype(np.float64))
    x = np.arange(10.0)
    lo = amin if not isinstance(amin, np.ndarray) else amin.astype(np.float64)
    hi = amax if not isinstance(amax, np.ndarray) else amax.astype(np.float64)
    check_clamp_grad(x, lo, hi)


def test_clip_scalar_nan_propagation():
    """test_numeric.py TestClip.test_clip_scalar_nan_propagation: int64 data,
    a 0-d float64 NaN min and an int32 max: the result is float64 NaN
    (a 0-d array is a strong operand)."""
    arr = np.zeros(10, dtype=np.int64)
    amin = np.array(np.nan)
    amax = np.zeros(10, dtype=np.int32)
    got = check_clamp(arr, amin, amax)
    assert got.dtype == np.float64 and np.isnan(got).all()


def test_clip_min_max_args():
    """test_numeric.py TestClip.test_clip_min_max_args: min=/max= keywords
    (pylucid's names are min and max, as the new NumPy and PyTorch)."""
    arr = np.arange(5)
    assert np.array_equal(to_numpy(ops.clip(arr, min=2, max=3)), to_numpy(ops.clip(arr, 2, 3)))
    assert np.array_equal(to_numpy(ops.clip(arr, min=None, max=2)), to_numpy(ops.clip(arr, None, 2)))
    assert np.array_equal(to_numpy(ops.clip(arr, min=2)), np.clip(arr, 2, None))


@settings(max_examples=40, deadline=None)
@given(data=st.data(),
       shape=st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple),
       dt=st.sampled_from(["int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"]))
def test_clip_property(data, shape, dt):
    """test_numeric.py TestClip.test_clip_property (Hypothesis): for any array
    and any (NaN-free) bounds — scalars or arrays of broadcastable shapes and
    any supported dtype — clip equals np.minimum(amax, np.maximum(arr,
    amin)) in the result dtype (pylucid's promotion)."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    arr = T.sample(shape, dt, rng)

    def bound():
        kind = data.draw(st.sampled_from(["int", "float", "array"]))
        if kind == "int":
            return data.draw(st.integers(-5, 5))
        if kind == "float":
            return data.draw(st.floats(-5, 5, allow_nan=False))
        bshape = tuple(data.draw(st.sampled_from([1, n])) for n in shape[len(shape) - data.draw(
            st.integers(0, len(shape))):])
        return T.sample(bshape, data.draw(st.sampled_from(["int8", "int32", "float32", "float64"])), rng)

    amin, amax = bound(), bound()
    if dt == "uint8":  # a Python int must fit the result dtype (docs/dtypes.md)
        amin = abs(amin) if not isinstance(amin, np.ndarray) else amin
        amax = abs(amax) if not isinstance(amax, np.ndarray) else amax
    check_clamp(arr, amin, amax, name="clip")


# ====================================================================== test_multiarray.py TestClip


@pytest.mark.parametrize("inplace", [False, True], ids=["copy", "inplace"])
@pytest.mark.parametrize("group, array_max, clip_min, clip_max",
                         [("float", 1024, -12.8, 100.2), ("float", 1024, 0, 0), ("int", 1024, -120, 100),
                          ("int", 1024, 0, 0), ("uint", 1024, 0, 0), ("uint", 1024, 10, 100)],
                         ids=["float", "float0", "int", "int0", "uint0", "uint"])
def test_clip_basic(group, array_max, clip_min, clip_max, inplace):
    """test_multiarray.py TestClip.test_basic (_clip_type): random data times
    array_max in every supported type of the group, native and big-endian,
    clipped (in place with out=x) lies in [clip_min, clip_max] and equals
    np.clip. NumPy's in-place calls need casting="unsafe" where the bounds do
    not fit the dtype (int8 data scaled by 1024 wraps; the bounds -120/100
    fit); a big-endian array is converted or refused with a clear error."""
    types = {"float": ["float16", "float32", "float64"], "int": ["int8", "int16", "int32", "int64"],
             "uint": ["uint8"]}[group]
    rng = rng_for("clip_basic", group, clip_min, clip_max)
    for name in types:
        for byteorder in ("=", ">" if sys.byteorder == "little" else "<"):
            dtype = np.dtype(T.NP_OF[name]).newbyteorder(byteorder)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                x = (rng.random(1000) * array_max).astype(dtype)
            if byteorder != "=":
                try:
                    r = ops.clip(x, clip_min, clip_max)
                except (TypeError, ValueError):
                    continue
                same_values(to_numpy(r).astype(np.float64),
                            np.clip(x.astype(x.dtype.newbyteorder("=")), clip_min, clip_max).astype(np.float64))
                continue
            want = check_clamp(x, clip_min, clip_max)
            if inplace and want.dtype == x.dtype:
                assert ops.clip(x, clip_min, clip_max, out=x) is x
                res = x
            else:
                res = want
            assert np.all(res.astype(np.float64) >= clip_min) and np.all(res.astype(np.float64) <= clip_max)


# ====================================================================== test_umath.py: NaN payloads and signed zeros

#: quiet NaNs with distinct payloads and signs, per float dtype (raw bits)
NAN_BITS = {"float16": (np.uint16, [0x7E01, 0xFE02, 0x7E03]), "bfloat16": (np.uint16, [0x7FC1, 0xFFC2, 0x7FC3]),
            "float32": (np.uint32, [0x7FC00001, 0xFFC00002, 0x7FC00003]),
            "float64": (np.uint64, [0x7FF8000000000001, 0xFFF8000000000002, 0x7FF8000000000003])}


def _nans(dt):
    ut, vals = NAN_BITS[dt]
    return np.array(vals, dtype=ut).view(T.NP_OF[dt])


@pytest.mark.parametrize("dt", T.FLOAT_NAMES)
def test_nan_payloads_and_signed_zeros(dt):
    """test_umath.py TestFmin/TestFmax.test_float_nans and
    TestMinimum/TestMaximum's NaN cases, carried to the bits (NumPy's
    assert_equal treats every NaN alike and -0.0 == +0.0): the result is the
    winner's exact bits — the first NaN's payload and sign for amin/amax/
    min/max (also its position), fmin/fmax of two NaNs give a's, a NaN x
    keeps its payload through clamp, and of -0.0/+0.0 the first wins."""
    n1, n2, n3 = _nans(dt)
    one = cast(np.array(1.0), dt)
    x = np.array([one, n2, one, n1, n3], dtype=T.NP_OF[dt])
    for name in ("amin", "amax", "argmin", "argmax"):
        r = check_reduction(name, x)
        if name.startswith("arg"):
            assert int(to_numpy(r)) == 1
        else:
            same_bits(to_numpy(r), n2)
    for name in ("min", "max"):
        v, i = op(name)(x.reshape(1, 5), 1)
        same_bits(to_numpy(v), np.array([n2]))
        assert to_numpy(i).tolist() == [1]
    a = np.array([n1, n2, one, -one], dtype=T.NP_OF[dt])
    b = np.array([n3, one, n3, n1], dtype=T.NP_OF[dt])
    same_bits(check_fminmax("fmin", a, b), np.array([n1, one, one, -one], dtype=T.NP_OF[dt]))
    same_bits(check_fminmax("fmax", a, b), np.array([n1, one, one, -one], dtype=T.NP_OF[dt]))
    same_bits(check_clamp(a, -one, one), np.array([n1, n2, one, -one], dtype=T.NP_OF[dt]))
    z, nz = cast(np.array([0.0]), dt), cast(np.array([-0.0]), dt)
    zeros = np.concatenate([nz, z, nz, z])
    same_bits(to_numpy(check_reduction("amax", zeros)), nz[0])
    same_bits(to_numpy(check_reduction("amin", zeros[1:])), z[0])
    assert int(to_numpy(check_reduction("argmax", zeros))) == 0
    for name in FMINMAX:
        same_bits(check_fminmax(name, np.concatenate([z, nz]), np.concatenate([nz, z])), np.concatenate([z, nz]))
    same_bits(check_clamp(nz, z, None), nz)  # x == min: x's bits
    same_bits(check_clamp(z, None, nz), z)
    g = check_reduction_grad("amax", zeros, g=cast(np.array(2.0), dt))
    assert g.astype(np.float64).tolist() == [2.0, 0.0, 0.0, 0.0]
