"""Test cases ported from NumPy's own test suite (numpy/numpy, main branch),
run against pylucid.

Each test names its origin: the file under numpy/_core/tests/ and the test
(class.method). The inputs are NumPy's; the expected values are NumPy's own
results (NumPy is the reference), except where pylucid deliberately differs,
which is asserted as pylucid's rule with NumPy's behaviour in a comment:

* ``minimum(+0.0, -0.0)`` is ``+0.0`` (the first operand's bits; NumPy gives
  ``-0.0``; the values compare equal) — every result is the winner's bits;
* complex, object, longdouble, uint16/32/64 raise ``TypeError`` naming the
  dtype (NumPy computes);
* an integer with a float gives that float (``float32`` with ``int64`` stays
  ``float32``; NumPy gives ``float64``), and the integer sum is int64 for
  every integer dtype (NumPy: uint64 for unsigned);
* an int/int true division gives the default float, float32 (NumPy float64);
* two Python scalars give the default dtype of the higher category (float32
  with a float; NumPy float64);
* ``out=`` parts of NumPy's tests are left out (pylucid's ops take no ``out=``).

As in NumPy 2, NumPy scalars (np.float64 included) are strong operands and a
Python int that does not fit an integer operand's dtype raises OverflowError.

NumPy's tests for ``np.minimum.reduce`` are ported as the left fold of the
binary op, which is what the reduction computes.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optable as T
import pylucid
from ported_util import (MINMAX, NP_OPS, OPS, cast, check_minmax, check_minmax_grad, elements, fold,
                         rng_for, same_bits, same_values, to_numpy)
from pylucid import ops

SRC = "numpy/numpy numpy/_core/tests/"

#: every NumPy typecode these tests loop over, and whether pylucid supports it
ALL_INT_CODES = sorted(set(np.typecodes["AllInteger"]))
ALL_FLOAT_CODES = sorted(set(np.typecodes["AllFloat"]))
SUPPORTED = {np.dtype(d) for d in (np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16,
                                   np.float32, np.float64)}


def supported(code: str) -> bool:
    return np.dtype(code) in SUPPORTED


def assert_type_error_naming(fn, dt) -> None:
    """pylucid refuses the dtype with a TypeError that names it."""
    with pytest.raises(TypeError) as ei:
        fn()
    assert str(np.dtype(dt)) in str(ei.value) or np.dtype(dt).name in str(ei.value), str(ei.value)


# ====================================================================== test_umath.py TestMaximum / TestMinimum


@pytest.mark.parametrize("code", ALL_INT_CODES + ALL_FLOAT_CODES)
@pytest.mark.parametrize("name", MINMAX)
def test_reduce(name, code):
    """test_umath.py TestMaximum.test_reduce / TestMinimum.test_reduce: the
    reduction of arange(11) and its reverse over every integer and float
    typecode; with NaN at every other element the float reductions are NaN.
    pylucid has no complex/longdouble/uint16+ dtypes: TypeError naming it."""
    seq1 = np.arange(11)
    seq2 = seq1[::-1]
    want = 10 if name == "maximum" else 0
    if not supported(code):
        assert_type_error_naming(lambda: OPS[name](seq1.astype(code), seq2.astype(code)), code)
        return
    for tmp in (seq1.astype(code), seq2.astype(code)):
        r = fold(name, elements(tmp))
        assert r.dtype.name == pylucid.dtypes.from_numpy_dtype(np.dtype(code)).name
        assert to_numpy(r).tolist() == [want]
    if np.dtype(code).kind == "f":
        for tmp in (seq1.astype(code), seq2.astype(code)):
            tmp[::2] = np.nan
            r = to_numpy(fold(name, elements(tmp)))
            assert np.isnan(r).all()


@pytest.mark.parametrize("name", MINMAX)
@pytest.mark.parametrize("data", [[1, 2j], [1 + 3j, 2j]], ids=["1_2j", "1+3j_2j"])
def test_reduce_complex(name, data):
    """test_umath.py TestMaximum/TestMinimum.test_reduce_complex: NumPy orders
    complex numbers lexicographically; pylucid has no complex dtype."""
    arr = np.array(data)
    assert_type_error_naming(lambda: OPS[name](arr[:1], arr[1:]), arr.dtype)
    with pytest.raises(TypeError):
        OPS[name](data[0], data[1])  # Python complex scalars too


@pytest.mark.parametrize("dt", T.FLOAT_NAMES)
@pytest.mark.parametrize("name", MINMAX)
def test_float_nans(name, dt):
    """test_umath.py TestMaximum/TestMinimum.test_float_nans (float64 there;
    here every float dtype): [0, nan, nan] vs [nan, 0, nan] is all NaN. The
    gradient goes to the NaN operand, to a when both are (pylucid's rule;
    NumPy has no gradient, PyTorch gives both operands the whole gradient at
    a NaN, JAX gives NaN positions 0)."""
    nan = np.nan
    arg1 = cast(np.array([0, nan, nan]), dt)
    arg2 = cast(np.array([nan, 0, nan]), dt)
    got = check_minmax(name, arg1, arg2)
    assert np.isnan(got.astype(np.float64)).all()
    ga, gb = check_minmax_grad(name, arg1, arg2, g=cast(np.ones(3), dt))
    assert ga.astype(np.float64).tolist() == [0.0, 1.0, 1.0]
    assert gb.astype(np.float64).tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("cnan", [complex(np.nan, 0), complex(0, np.nan), complex(np.nan, np.nan)],
                         ids=["nan+0j", "0+nanj", "nan+nanj"])
@pytest.mark.parametrize("name", MINMAX)
def test_complex_nans(name, cnan):
    """test_umath.py TestMaximum/TestMinimum.test_complex_nans: complex is
    refused (TypeError naming it), in either operand."""
    arg1 = np.array([0, cnan, cnan], dtype=complex)
    arg2 = np.array([cnan, 0, cnan], dtype=complex)
    assert_type_error_naming(lambda: OPS[name](arg1, arg2), complex)
    assert_type_error_naming(lambda: OPS[name](arg1, np.zeros(3)), complex)
    assert_type_error_naming(lambda: OPS[name](np.zeros(3), arg2), complex)


@pytest.mark.parametrize("name", MINMAX)
def test_object_nans_and_object_array(name):
    """test_umath.py TestMaximum/TestMinimum.test_object_nans and
    test_object_array: object arrays are refused (TypeError naming object)."""
    x = np.array(float("nan"), object)
    with pytest.raises(TypeError, match="object"):
        OPS[name](x, 1.0)
    arg1 = np.arange(5, dtype=object)
    with pytest.raises(TypeError, match="object"):
        OPS[name](arg1, arg1 + 1)


STRIDED_A = [-4.0, 1.0, 10.0, 0.0, np.nan, -np.nan, np.inf, -np.inf]
STRIDED_B = [-2.0, -1.0, np.nan, 1.0, 0.0, np.nan, 1.0, -3.0]
STRIDED_WANT = {
    "maximum": [-2.0, 1.0, np.nan, 1.0, np.nan, np.nan, np.inf, -3.0],
    "minimum": [-4.0, -1.0, np.nan, 0.0, np.nan, np.nan, 1.0, -np.inf],
}
STRIDED_SLICES = {
    # (slice of arr1, slice of arr2) -> NumPy's expected values
    "maximum": [
        ((slice(None, None, 2), slice(None, None, 2)), None),
        ((slice(None, 4), slice(None, None, 2)), [-2.0, np.nan, 10.0, 1.0]),
        ((slice(None, None, 3), slice(None, 3)), [-2.0, 0.0, np.nan]),
        ((slice(None, 6, 2), slice(None, None, 3)), [-2.0, 10.0, np.nan]),
    ],
    "minimum": [
        ((slice(None, None, 2), slice(None, None, 2)), None),
        ((slice(None, 4), slice(None, None, 2)), [-4.0, np.nan, 0.0, 0.0]),
        ((slice(None, None, 3), slice(None, 3)), [-4.0, -1.0, np.nan]),
        ((slice(None, 6, 2), slice(None, None, 3)), [-4.0, 1.0, np.nan]),
    ],
}


@pytest.mark.parametrize("dt", T.FLOAT_NAMES)
@pytest.mark.parametrize("name", MINMAX)
def test_strided_array(name, dt):
    """test_umath.py TestMaximum/TestMinimum.test_strided_array (float64
    there; here every float dtype), strided views of both operands, with
    -nan as well as nan; the out= part is left out (no out= in pylucid).
    Values as NumPy; bits and gradients by pylucid's rule (a NaN's bits are
    the NaN operand's, so maximum(nan, -nan) is nan and maximum(-nan, nan)
    is -nan)."""
    arr1 = cast(np.array(STRIDED_A), dt)
    arr2 = cast(np.array(STRIDED_B), dt)
    same_values(check_minmax(name, arr1, arr2), cast(np.array(STRIDED_WANT[name]), dt))
    for (s1, s2), want in STRIDED_SLICES[name]:
        a, b = arr1[s1], arr2[s2]
        got = check_minmax(name, a, b)
        want_arr = cast(np.array(STRIDED_WANT[name]), dt)[s1] if want is None else cast(np.array(want), dt)
        same_values(got, want_arr)
        check_minmax_grad(name, a, b)
    y = to_numpy(OPS[name](arr1, arr2))
    assert not np.signbit(y[4].astype(np.float64)) and np.signbit(y[5].astype(np.float64))  # a's NaN


PRECISION_CODES = ["e", "f", "d", "g"]


@pytest.mark.parametrize("code", PRECISION_CODES + ["bfloat16"])
@pytest.mark.parametrize("name", MINMAX)
def test_precision(name, code):
    """test_umath.py TestMaximum/TestMinimum.test_precision: finfo min/max
    against +-inf, 0.1 against its next float, a bound against NaN — both as
    the binary op on 1-element arrays and as the reduction of the pair.
    longdouble ("g") is refused; bfloat16 is added (ml_dtypes' finfo)."""
    if code == "g":
        assert_type_error_naming(lambda: OPS[name](np.array([1], "g"), np.array([1], "g")), "g")
        return
    dt = T.BF16 if code == "bfloat16" else np.dtype(code)
    fi = T.ml_dtypes.finfo(dt)
    dtmin, dtmax = dt.type(fi.min), dt.type(fi.max)
    d1 = dt.type(0.1)
    # the next float after 0.1 (positive: one more in the bits; ml_dtypes has no nextafter)
    d1_next = (np.array([d1]).view(T.UINT_OF_SIZE[dt.itemsize]) + 1).view(dt)[0]
    if code != "bfloat16":
        assert d1_next == np.nextafter(d1, dt.type(np.inf))
    if name == "maximum":
        cases = [(dtmin, -np.inf, dtmin), (dtmax, -np.inf, dtmax), (d1, d1_next, d1_next), (dtmax, np.nan, np.nan)]
    else:
        cases = [(dtmin, np.inf, dtmin), (dtmax, np.inf, dtmax), (d1, d1_next, d1), (dtmin, np.nan, np.nan)]
    for v1, v2, expected in cases:
        a = np.array([v1], dtype=dt)
        b = np.array([v2], dtype=dt)
        got = check_minmax(name, a, b)
        same_values(got, np.array([expected], dtype=dt))
        r = to_numpy(fold(name, [a, b]))
        same_values(r, np.array([expected], dtype=dt))
        check_minmax_grad(name, a, b)


# ====================================================================== test_umath.py TestMinMax


def _alignment_data(dtype, max_size):
    """The (inp, msg) pairs of numpy.testing's _gen_alignment_data(type='unary'),
    re-created here: every size up to max_size, at offsets 0 and 1 of a larger
    buffer (misaligned to the vector width), in place and out of place."""
    for size in range(1, max_size + 1):
        for off in (0, 1):
            buf = np.zeros(size + off + 1, dtype=dtype)
            yield buf[off : off + size], "size=%d offset=%d" % (size, off)
        base = np.zeros(size * 2, dtype=dtype)
        yield base[::2], "size=%d stride=2" % size


@pytest.mark.parametrize("dt, sz", [(np.float32, 15), (np.float64, 7), (np.float16, 31)], ids=["f4", "f8", "f2"])
def test_minmax_blocked(dt, sz):
    """test_umath.py TestMinMax.test_minmax_blocked: a NaN at every position of
    every size/alignment propagates (SIMD bodies and tails); a +-1e10 at every
    position wins. NumPy reduces inp.max(); here the binary op against a
    shifted copy and the fold of the elements (float16 added, 31 lanes)."""
    for inp, msg in _alignment_data(dt, sz):
        for i in range(inp.size):
            inp[:] = np.arange(inp.size, dtype=dt)
            inp[i] = np.nan
            other = np.roll(np.arange(inp.size, dtype=dt), 1)
            for name in MINMAX:
                got = check_minmax(name, inp, other)
                assert np.isnan(got[i]) and np.isnan(got).sum() == 1, msg
                got = check_minmax(name, other, inp)
                assert np.isnan(got[i]) and np.isnan(got).sum() == 1, msg
                assert np.isnan(to_numpy(fold(name, elements(inp)))).all(), msg
            inp[i] = 1e10 if dt != np.float16 else 6e4
            assert to_numpy(fold("maximum", elements(inp)))[0] == inp[i], msg
            inp[i] = -inp[i]
            assert to_numpy(fold("minimum", elements(inp)))[0] == inp[i], msg


@pytest.mark.parametrize("name", MINMAX)
def test_lower_align(name):
    """test_umath.py TestMinMax.test_lower_align: float64 data that is not
    aligned to its element size (a view at a 4-byte offset of an int8
    buffer) is read correctly."""
    d = np.zeros(23 * 8, dtype=np.int8)[4:-4].view(np.float64)
    assert d.ctypes.data % 8 != 0
    same_bits(check_minmax(name, d, d), d)
    d2 = np.zeros(23 * 8, dtype=np.int8)[4:-4].view(np.float64)
    d2[:] = rng_for("lower_align").standard_normal(d2.size)
    check_minmax(name, d2, d2[::-1])
    check_minmax(name, d2, 0.0)
    check_minmax_grad(name, d2, np.ascontiguousarray(d2[::-1]))


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32])
@pytest.mark.parametrize("code", ["f", "e", "F"])
def test_reduce_reorder(n, code):
    """test_umath.py TestMinMax.test_reduce_reorder: each row of
    diagflat([nan]*n) has its NaN at a different position; the minimum of the
    row is NaN (no warnings). complex64 is refused."""
    if code == "F":
        assert_type_error_naming(lambda: ops.minimum(np.ones(2, "F"), np.ones(2, "F")), "F")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for r in np.diagflat(np.array([np.nan] * n, dtype=code)):
            assert np.isnan(to_numpy(fold("minimum", elements(r)))).all()
            assert np.isnan(to_numpy(fold("maximum", elements(r)))).all()


def test_minimize_no_warns():
    """test_umath.py TestMinMax.test_minimize_no_warns: minimum(nan, 1) is NaN
    and warns nothing. Two Python scalars give the default dtype of the
    higher category: float32 (NumPy gives float64)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = ops.minimum(np.nan, 1)
        assert np.isnan(a.item())
        assert a.dtype is pylucid.float32
        assert np.isnan(ops.minimum(np.array(np.nan), 1).item())
        assert np.isnan(ops.maximum(1, np.array([np.nan])).item())
    assert ops.minimum(1, 2.0).dtype is pylucid.float32
    assert ops.maximum(1, 2).dtype is pylucid.int64
    assert ops.maximum(True, False).dtype is pylucid.bool_


# ====================================================================== test_umath.py TestBool


@pytest.mark.parametrize("code", ALL_FLOAT_CODES + ALL_INT_CODES + ["?"])
def test_truth_table_logical(code):
    """test_umath.py TestBool.test_truth_table_logical: maximum is logical OR
    and minimum logical AND of truth values, over every typecode (2, 3 and 4
    serve as true values)."""
    input1 = [0, 0, 3, 2]
    input2 = [0, 4, 0, 2]
    dtype = np.dtype(code)
    arg1 = np.asarray(input1, dtype=dtype)
    arg2 = np.asarray(input2, dtype=dtype)
    if not supported(code):
        assert_type_error_naming(lambda: ops.maximum(arg1, arg2), dtype)
        return
    assert to_numpy(ops.maximum(arg1, arg2)).astype(bool).tolist() == [False, True, True, True]
    assert to_numpy(ops.minimum(arg1, arg2)).astype(bool).tolist() == [False, False, False, True]
    check_minmax("maximum", arg1, arg2)
    check_minmax("minimum", arg1, arg2)


@pytest.mark.parametrize("fn", [lambda a: ops.neg(a), lambda a: ops.sub(a, a), lambda a: -pylucid.tensor(a)],
                         ids=["neg", "sub", "__neg__"])
def test_bool_exceptions(fn):
    """test_umath.py TestBool.test_exceptions: negative and subtract of
    booleans raise TypeError (np.positive has no pylucid counterpart)."""
    with pytest.raises(TypeError):
        fn(np.ones(1, dtype=np.bool_))


# ====================================================================== test_umath.py TestAdd / TestDivision


def test_add_reduce_alignment():
    """test_umath.py TestAdd.test_reduce_alignment (gh-9876): the float64 field
    of a structured array (a stride of 12 bytes, not a multiple of 8) sums
    correctly."""
    a = np.zeros(2, dtype=[("a", np.int32), ("b", np.float64)])
    a["a"] = -1
    assert ops.sum(a["b"]).item() == 0
    a["b"] = [1.5, 2.25]
    assert ops.sum(a["b"]).item() == 3.75
    assert ops.mean(a["b"]).item() == 1.875
    same_values(to_numpy(ops.minimum(a["b"], a["b"][::-1])), np.array([1.5, 1.5]))


def test_division_int():
    """test_umath.py TestDivision.test_division_int: x / 100 of an int64 array.
    NumPy's result is float64; pylucid's int/int true division gives the
    default float, float32 (the values are NumPy's, rounded to float32).
    (// and % have no pylucid counterpart.)"""
    x = np.array([5, 10, 90, 100, -5, -10, -90, -100, -120])
    y = ops.div(x, 100)
    assert y.dtype is pylucid.float32
    want = np.array([0.05, 0.1, 0.9, 1, -0.05, -0.1, -0.9, -1, -1.2])
    assert np.array_equal(to_numpy(y), want.astype(np.float32))
    assert np.array_equal(to_numpy(x / pylucid.tensor(100)), want.astype(np.float32))


@pytest.mark.parametrize("code", ["b", "h", "i", "l", "B"])
def test_division_int_boundary_true_divide(code):
    """test_umath.py TestDivision.test_division_int_boundary, the dividends of
    its first two cases (fo.max-lsize..fo.max, fo.min..fo.min+lsize) divided
    by arange(lsize) and by scalar divisors — with true division (pylucid's
    div), whose NumPy reference is computed in float32, the result dtype."""
    fo = np.iinfo(code)
    lsize = 512 + 7
    for a, b in (
        (np.array(range(fo.max - lsize, fo.max)).astype(code), np.arange(lsize).astype(code)),
        (np.arange(fo.min, fo.min + lsize).astype(code), np.arange(lsize // -2, lsize // 2).astype(code)),
    ):
        if fo.min == 0:
            b = np.abs(b.astype(np.int64)).astype(code)
        y = to_numpy(ops.div(a, b))
        with np.errstate(all="ignore"):
            want = np.true_divide(a.astype(np.float32), b.astype(np.float32))
        same_values(y, want)
        for d in (1, 3, 9, 13):
            with np.errstate(all="ignore"):
                same_values(to_numpy(ops.div(a, d)), a.astype(np.float32) / np.float32(d))


# ====================================================================== test_nep50_promotions.py


def test_nep50_examples():
    """test_nep50_promotions.py test_nep50_examples, with pylucid ops: a uint8
    array with a Python int stays uint8; with a strong int64 (NumPy scalar or
    0-d array) it is int64; float32 with a Python float too large overflows
    to inf in float32; ``np.array([0.1], float32) + np.float64(0.1)`` is
    float64 — a NumPy scalar is strong although np.float64 subclasses float.
    Difference: float32 with int64 stays float32 in pylucid (an integer with
    a float gives that float); NumPy gives float64."""
    u8 = np.array([1], np.uint8)
    for op in (ops.add, ops.minimum, ops.maximum):
        assert op(u8, 2).dtype is pylucid.uint8
        assert op(u8, np.int64(1)).dtype is pylucid.int64
        assert op(u8, np.array(1, dtype=np.int64)).dtype is pylucid.int64
        assert op(np.array([1.0], np.float32), np.int64(3)).dtype is pylucid.float32  # NumPy: float64
        assert op(np.array([1.0], np.float32), np.array(3, np.int64)).dtype is pylucid.float32
        assert op(np.array([0.1], np.float32), np.float64(0.1)).dtype is pylucid.float64
        assert op(np.float64(0.1), np.array([0.1], np.float16)).dtype is pylucid.float64
        assert op(pylucid.tensor([1.0]), np.float64(1.0)).dtype is pylucid.float64
    r = ops.add(np.array([1.0], np.float32), 3e100)
    assert r.dtype is pylucid.float32 and np.isinf(r.item())
    r = ops.maximum(np.array([1.0], np.float32), 3e100)
    assert r.dtype is pylucid.float32 and r.item() == np.inf
    r = ops.minimum(np.array([1.0], np.float32), -3e100)
    assert r.dtype is pylucid.float32 and r.item() == -np.inf
    assert to_numpy(ops.add(np.array([0.1], np.float32), 0.1)).dtype == np.float32


@pytest.mark.parametrize("code", [c for c in ALL_INT_CODES if supported(c)])
@pytest.mark.parametrize("opname", ["add", "minimum", "maximum"])
def test_nep50_weak_integers(code, opname):
    """test_nep50_promotions.py test_nep50_weak_integers: an array with a
    Python int that fits (iinfo max) keeps its dtype; the values are NumPy's."""
    maxint = int(np.iinfo(code).max)
    arr = np.array(100, dtype=code)
    op = getattr(ops, opname)
    res = op(arr, maxint)
    assert res.dtype.name == np.dtype(code).name
    with np.errstate(over="ignore"):
        want = getattr(np, opname)(arr, maxint)
    assert to_numpy(res).item() == want.item()


@pytest.mark.parametrize("code", ["e", "f", "bfloat16"])
def test_nep50_weak_integers_with_inexact(code):
    """test_nep50_promotions.py test_nep50_weak_integers_with_inexact, float16
    and float32 (bfloat16 added): a Python int beyond the float's range (for
    float32 and bfloat16 beyond int64's too) rounds to inf in that dtype."""
    dt = T.BF16 if code == "bfloat16" else np.dtype(code)
    too_big_int = int(float(T.ml_dtypes.finfo(dt).max)) * 2
    arr = np.array(1, dtype=dt)
    for op in (ops.add, ops.maximum):
        res = op(arr, too_big_int)
        assert res.dtype.name == (code if code == "bfloat16" else dt.name)
        assert to_numpy(res).astype(np.float64).item() == np.inf
    assert to_numpy(ops.minimum(arr, -too_big_int)).astype(np.float64).item() == -np.inf


@pytest.mark.parametrize("opname", ["add", "minimum", "maximum", "mul"])
def test_weak_promotion_scalar_path(opname):
    """test_nep50_promotions.py test_weak_promotion_scalar_path: the integer
    and float paths keep the array's dtype, and ``op(np.uint8(3), 1000)``
    raises OverflowError."""
    op = getattr(ops, opname)
    res = op(np.array(3, np.uint8), 5)
    assert res.item() == {"add": 8, "minimum": 3, "maximum": 5, "mul": 15}[opname]
    assert res.dtype is pylucid.uint8
    res = op(np.array(3, np.float32), 5.0)
    assert res.item() == {"add": 8.0, "minimum": 3.0, "maximum": 5.0, "mul": 15.0}[opname]
    assert res.dtype is pylucid.float32
    with pytest.raises(OverflowError):
        op(np.array([3], np.uint8), 1000)


def test_nep50_weak_integers_with_inexact_float64():
    """test_nep50_promotions.py test_nep50_weak_integers_with_inexact, 'd': a
    Python int past float64's range raises OverflowError (as Python's
    float())."""
    too_big_int = int(np.finfo(np.float64).max) * 2
    for op in (ops.add, ops.minimum, ops.maximum):
        with pytest.raises(OverflowError):
            op(np.array(1, dtype=np.float64), too_big_int)


@pytest.mark.parametrize("value", [300, -1])
@pytest.mark.parametrize("opname", ["add", "minimum", "maximum"])
def test_nep50_integer_conversion_errors(opname, value):
    """test_nep50_promotions.py test_nep50_integer_conversion_errors: uint8
    with 300 or -1 raises OverflowError naming uint8 (NumPy's message:
    'Python integer -1 out of bounds for uint8')."""
    with pytest.raises(OverflowError, match="uint8"):
        getattr(ops, opname)(np.array([1], np.uint8), value)


@pytest.mark.parametrize("value", [2**63, 2**100, -(2**63) - 1])
@pytest.mark.parametrize("opname", ["add", "minimum", "maximum"])
def test_nep50_huge_integers(opname, value):
    """test_nep50_promotions.py test_nep50_huge_integers: an int64 operand
    with 2**63 or 2**100 raises OverflowError."""
    with pytest.raises(OverflowError):
        getattr(ops, opname)(np.array([1], np.int64), value)
    with pytest.raises(OverflowError):
        getattr(ops, opname)(pylucid.tensor([0]), value)


def test_nep50_huge_integer_to_float():
    """test_nep50_promotions.py test_nep50_huge_integers: ``ufunc(1.0,
    2**100)`` is a float (NumPy: float64); in pylucid two Python scalars give
    float32, and 2**100 rounds to nearest in it."""
    r = ops.maximum(1.0, 2**100)
    assert r.dtype is pylucid.float32
    assert r.item() == float(np.float32(2.0**100))


@settings(max_examples=60, deadline=None, database=None)
@given(data=st.data())
@pytest.mark.parametrize("expected, dtypes, optional", [
    ("float32", [np.float32], [np.float16, 0.0, np.int16, np.int8, 0]),
    # NumPy: float32 (int16 does not fit float16); pylucid: an integer with a
    # float gives that float, so float16.
    ("float16", [np.int16, np.float16], [np.int8, np.uint8, 0.0, 0]),
    ("int16", [np.int16, np.uint8], [np.int8, np.uint8, 0, np.bool_]),
    ("float32", [np.float16, np.float32], [np.int8, np.int64, np.float16, 0.0, 0, np.bool_]),
], ids=["f4", "i2_f2", "i2_u1", "f2_f4"])
def test_expected_promotion(expected, dtypes, optional, data):
    """test_nep50_promotions.py test_expected_promotion (uint16 replaced: not a
    pylucid dtype): folding minimum over any permutation of the operands gives
    the same result dtype (a dtype: a 1-element array; 0 / 0.0: weak Python
    scalars)."""
    extra = data.draw(st.lists(st.sampled_from(dtypes + optional), max_size=5))
    seq = data.draw(st.permutations(dtypes + extra))
    operands = [x if isinstance(x, (int, float)) else np.zeros(1, dtype=x) for x in seq]
    # NumPy's result_type is n-ary; pylucid's ops are binary, and a weak scalar
    # folded in before the strong operands would lift the category to its
    # default dtype (int64/float32) early: the strong operands go first, in
    # their drawn order, then the weak ones.
    operands.sort(key=lambda x: not isinstance(x, np.ndarray))
    if len(operands) == 1:
        operands.append(operands[0])
    assert fold("minimum", operands).dtype.name == expected


#: test_integer_comparison's (sctype, other_val) pairs, split by whether the int fits the dtype
_CMP_PAIRS = list(itertools.product(["b", "h", "i", "l", "B"], [-2 * 100, -1, 0, 9, 10, 11, 2**63, 2 * 100]))
CMP_IN_RANGE = [(c, v) for c, v in _CMP_PAIRS if np.iinfo(c).min <= v <= np.iinfo(c).max]
CMP_OUT_OF_RANGE = [(c, v) for c, v in _CMP_PAIRS if not np.iinfo(c).min <= v <= np.iinfo(c).max]


@pytest.mark.parametrize("code, other_val", CMP_IN_RANGE)
@pytest.mark.parametrize("name", MINMAX)
def test_integer_comparison_values(name, code, other_val):
    """test_nep50_promotions.py test_integer_comparison, as minimum/maximum of
    an integer array of 10s with a Python int: where the int fits the dtype
    the result is Python's min/max."""
    val = np.array([10, 10], dtype=code)
    want = (min if name == "minimum" else max)(10, other_val)
    got = OPS[name](val, other_val)
    assert got.dtype.name == np.dtype(code).name
    assert to_numpy(got).tolist() == [want, want]
    got = OPS[name](other_val, val)
    assert to_numpy(got).tolist() == [want, want]


@pytest.mark.parametrize("code, other_val", CMP_OUT_OF_RANGE)
@pytest.mark.parametrize("name", MINMAX)
def test_integer_comparison_out_of_range(name, code, other_val):
    """test_nep50_promotions.py test_integer_comparison, the values that do
    not fit the dtype: minimum/maximum raise OverflowError (NumPy's
    np.minimum raises OverflowError too; its comparisons compare exactly)."""
    with pytest.raises(OverflowError):
        NP_OPS[name](np.array([10], code), other_val)  # the reference raises too
    with pytest.raises(OverflowError):
        OPS[name](np.array([10, 10], dtype=code), other_val)
    with pytest.raises(OverflowError):
        OPS[name](other_val, pylucid.tensor(np.array([10, 10], dtype=code)))


@pytest.mark.parametrize("code", ["b", "h", "i", "l", "B"])
def test_oob_creation(code):
    """test_nep50_promotions.py test_oob_creation: creating a tensor of an
    integer dtype from a Python int out of its range raises OverflowError;
    the bounds themselves are kept."""
    iinfo = np.iinfo(code)
    pl = pylucid.dtypes.from_numpy_dtype(np.dtype(code))
    with pytest.raises(OverflowError):
        pylucid.tensor([iinfo.min - 1], dtype=pl)
    with pytest.raises(OverflowError):
        pylucid.tensor([iinfo.max + 1], dtype=pl)
    assert pylucid.tensor([iinfo.min], dtype=pl).tolist() == [iinfo.min]
    assert pylucid.tensor([iinfo.max], dtype=pl).tolist() == [iinfo.max]


# ====================================================================== casts (test_half.py)


def _half_values():
    """test_half.py TestHalf.setup_method: every finite float16 value, as
    float16 and its exact float32/float64 values."""
    all_f16 = np.arange(0x10000, dtype=np.uint16).view(np.float16)
    finite = all_f16[np.isfinite(all_f16)]
    return finite


def test_half_conversion_roundtrip():
    """test_half.py TestHalf.test_half_conversion_rounding-style round trips:
    every finite float16 converts to float32 and float64 exactly and back to
    the same bits (pylucid's Tensor.to)."""
    f16 = _half_values()
    t = pylucid.from_numpy(f16)
    for dt in (pylucid.float32, pylucid.float64):
        up = t.to(dt)
        same_bits(to_numpy(up), f16.astype(dt.numpy_dtype))
        same_bits(to_numpy(up.to(pylucid.float16)), f16)


@pytest.mark.parametrize("src", [np.float32, np.float64])
def test_half_rounding_from_wider(src):
    """test_half.py TestHalf.test_half_conversion_rounding: values halfway
    between float16 neighbours (and one ulp either side) round to nearest
    even, as NumPy's astype(float16)."""
    f16 = _half_values()
    f16 = f16[np.abs(f16.astype(np.float64)) < 65504]
    nxt = np.nextafter(f16, np.float16(np.inf))
    ok = np.isfinite(nxt)
    lo = f16[ok].astype(np.float64)
    hi = nxt[ok].astype(np.float64)
    mids = ((lo + hi) / 2).astype(src)
    for x in (mids, np.nextafter(mids, src(np.inf)), np.nextafter(mids, src(-np.inf))):
        got = to_numpy(pylucid.from_numpy(x).to(pylucid.float16))
        same_bits(got, x.astype(np.float16))


def test_half_overflow_underflow():
    """test_half.py TestHalf.test_half_values / test_half_underflow-style:
    float32 values past float16's range become +-inf, the subnormals and
    the smallest values round as NumPy, signed zeros keep their sign."""
    x = np.array([65504.0, 65519.996, 65520.0, 1e6, -1e6, 2.0**-24, 2.0**-25, 2.0**-25 * 1.0001,
                  -(2.0**-26), 0.0, -0.0, np.inf, -np.inf], dtype=np.float32)
    with np.errstate(over="ignore"):  # the reference's casts overflow to inf, as they should
        want32, want64 = x.astype(np.float16), x.astype(np.float64).astype(np.float16)
    same_bits(to_numpy(pylucid.from_numpy(x).to(pylucid.float16)), want32)
    same_bits(to_numpy(pylucid.from_numpy(x.astype(np.float64)).to(pylucid.float16)), want64)
