"""Python scalars, promotion of weak and strong operands, and the validation
of integer arguments (docs/dtypes.md, docs/errors.md).

- A Python int converts to the op's result dtype exactly: an integer dtype
  that cannot hold it raises OverflowError (never wraps; NumPy 2 raises the
  same), a float dtype gets it rounded once to nearest even from the exact
  integer (±inf past float16/bfloat16/float32, OverflowError past float64).
  The expected floats come from an exact oracle (a bisection over the
  format's bit patterns with Fraction arithmetic), not from NumPy, which
  rounds ints past 2**53 through float64.
- Two weak operands give the default dtype of the higher category; NumPy
  scalars (np.float64 too), 0-d arrays and 0-d tensors are strong.
- Shapes, dims and thread counts take anything operator.index takes and
  reject floats; bool()/int()/float() of a tensor follow NumPy.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import math
import operator
import random
from fractions import Fraction
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

import optable as T
import pylucid
from pylucid import ops

tmod = importlib.import_module("pylucid.tensor")

# ---------------------------------------------------------------- the exact oracle

_FMT = {
    "float16": (np.dtype(np.float16), np.uint16),
    "bfloat16": (np.dtype(ml_dtypes.bfloat16), np.uint16),
    "float32": (np.dtype(np.float32), np.uint32),
    "float64": (np.dtype(np.float64), np.uint64),
}


def _value(name: str, b: int) -> Fraction:
    npd, u = _FMT[name]
    return Fraction(float(np.array([b], dtype=u).view(npd)[0]))


@functools.lru_cache(maxsize=None)
def exact_round(x: int, name: str) -> float:
    """x rounded to nearest (ties to even bit patterns) in float format
    ``name``, found by bisection over the non-negative bit patterns (whose
    values increase with the pattern); inf past the largest finite value plus
    half an ulp. For float64, past that raises OverflowError (as float())."""
    npd, u = _FMT[name]
    inf_bits = int(np.array([np.inf], dtype=npd).view(u)[0])
    top = inf_bits - 1  # the largest finite value
    largest = _value(name, top)
    half_ulp = (largest - _value(name, top - 1)) / 2
    n = abs(x)
    if n >= largest + half_ulp:
        if name == "float64":
            raise OverflowError("int too large to convert to float")
        return -math.inf if x < 0 else math.inf
    lo, hi = 0, top  # value(lo) <= n; find the largest such pattern
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _value(name, mid) <= n:
            lo = mid
        else:
            hi = mid - 1
    best = lo
    if lo < top:
        d_lo, d_hi = n - _value(name, lo), _value(name, lo + 1) - n
        if d_hi < d_lo or (d_hi == d_lo and (lo + 1) % 2 == 0):
            best = lo + 1
    v = float(_value(name, best))
    return -v if x < 0 else v


def test_oracle_is_exact():
    # the oracle itself, on cases known by hand
    assert exact_round(2**60 + 2**36 + 1, "float32") == 2**60 + 2**37  # float64 first would give 2**60
    assert exact_round(2**60 + 2**36, "float32") == 2**60  # a tie goes to even
    assert exact_round(65519, "float16") == 65504
    assert exact_round(65520, "float16") == math.inf  # the tie past the largest value
    assert exact_round(-(2**62 + 2**54 + 1), "bfloat16") == -(2**62 + 2**55)
    assert exact_round(2**1024 - 2**970 - 1, "float64") == float(2**1024 - 2**970 - 1)
    with pytest.raises(OverflowError):
        exact_round(2**1024 - 2**970, "float64")
    assert exact_round(2**1024, "float32") == math.inf


# ---------------------------------------------------------------- the integers tried

INTS = [
    0, 1, -1, 2, 127, 128, -128, -129, 255, 256, -256, 32767, 32768, -32769,
    2**31 - 1, 2**31, -(2**31) - 1, 2**40, 2**53 + 1, -(2**53 + 1),
    2**60 + 2**36 + 1,  # float32 through float64 would round twice
    2**62 + 2**54 + 1,  # bfloat16 through float64 would round twice
    (2**8 + 1) * 2**100, (2**8 + 3) * 2**100,  # bfloat16 ties (to even)
    65504, 65519, 65520, -65520,  # float16's largest value and its overflow tie
    2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64 + 1, 2**70 + 2**46 + 1,
    2**128 - 2**104, 2**128 - 2**103 - 1, 2**128 - 2**103,  # float32's top and its overflow tie
    2**1024 - 2**970 - 1, 2**1024 - 2**970, -(2**1024), 10**400,
]
_rng = random.Random(20251010)
INTS += [_rng.choice((-1, 1)) * _rng.getrandbits(_rng.randint(2, 1100)) for _ in range(24)]

INT64 = (-(2**63), 2**63 - 1)


def in_range(x: int, name: str) -> bool:
    if name == "bool":
        return True
    info = np.iinfo(T.NP_OF[name])
    return int(info.min) <= x <= int(info.max)


# ---------------------------------------------------------------- ways to call an op

CODES = {"minimum": tmod.MINIMUM, "maximum": tmod.MAXIMUM, "add": tmod.ADD, "sub": tmod.SUB, "mul": tmod.MUL,
         "div": tmod.DIV}
OPERATORS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv}
INFO = {o.name: o for o in T.BINARY}


def call(path: str, name: str, a: Any, b: Any) -> pylucid.Tensor:
    if path == "ops":  # the public op (the C hot path, which hands scalars to Python)
        return getattr(ops, name)(a, b)
    if path == "operator":  # Tensor.__add__ / __radd__ …
        return OPERATORS[name](a, b)
    return tmod._py_binary(CODES[name], a, b)  # the Python path itself


PATHS = [(p, n) for n in CODES for p in ("ops", "operator", "python") if p != "operator" or n in OPERATORS]

# Tensor values that make the op's result show the converted scalar c.
NEUTRAL = {"minimum": math.inf, "maximum": -math.inf, "add": 0.0, "sub": 0.0, "mul": 1.0, "div": 1.0}


def result_of_c(name: str, scalar_first: bool, c: float) -> float | None:
    """The op's result from the converted scalar c against NEUTRAL (None: not
    a function of c alone, i.e. 1/c)."""
    if name == "sub" and not scalar_first:
        return -c
    if name == "div" and not scalar_first:
        return None
    return c


def _np_raises(fn: Callable[[], Any]) -> bool:
    try:
        fn()
    except OverflowError:
        return True
    return False


def _np_ufunc(name: str) -> Callable[..., Any]:
    return {"minimum": np.minimum, "maximum": np.maximum, "add": np.add, "sub": np.subtract,
            "mul": np.multiply, "div": np.true_divide}[name]


@pytest.mark.parametrize("scalar_first", [False, True], ids=["t_op_x", "x_op_t"])
@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
@pytest.mark.parametrize("path, name", PATHS, ids=["%s-%s" % p for p in PATHS])
def test_python_int_operand(path, name, dt, scalar_first):
    info = INFO[name]
    pd = T.promote_scalar(dt, 1)
    if not info.supported(pd):
        return  # covered by test_ops_numpy (TypeError)
    rd = info.result(pd)
    float_result = rd in T.FLOAT_NAMES
    t = pylucid.tensor([NEUTRAL[name] if dt in T.FLOAT_NAMES else 1], dtype=dt)
    checked = 0
    for x in INTS:
        args = (x, t) if scalar_first else (t, x)
        if float_result:
            try:
                c = exact_round(x, rd)
            except OverflowError:
                with pytest.raises(OverflowError, match="too large to convert to float64"):
                    call(path, name, *args)
                continue
            y = call(path, name, *args)
            assert y.dtype is T.PL_OF[rd] and y.shape == (1,)
            want = result_of_c(name, scalar_first, c) if dt in T.FLOAT_NAMES else None
            if want is not None:
                got = y.to(pylucid.float64).numpy()[0]
                assert got == want, (x, rd, got, want)
                if abs(x) <= 2**53 and rd != "bfloat16":  # where NumPy rounds correctly too
                    npt = np.array([NEUTRAL[name]], dtype=T.NP_OF[rd])
                    np_args = (x, npt) if scalar_first else (npt, x)
                    with np.errstate(over="ignore"):
                        assert float(_np_ufunc(name)(*np_args)[0]) == want, x
            checked += 1
        else:
            # NumPy 2 gives the same integer result dtype here: it raises exactly when we do.
            npt = np.array([1], dtype=T.NP_OF[dt])
            np_args = (x, npt) if scalar_first else (npt, x)
            with np.errstate(over="ignore"):
                np_overflow = _np_raises(lambda: _np_ufunc(name)(*np_args))
            if not in_range(x, rd):
                assert np_overflow, x
                with pytest.raises(OverflowError, match="out of bounds for %s" % rd):
                    call(path, name, *args)
                continue
            assert not np_overflow
            y = call(path, name, *args)
            assert y.dtype is T.PL_OF[rd]
            with np.errstate(over="ignore"):
                want = np.asarray(_np_ufunc(name)(*np_args)).astype(T.NP_OF[rd])
            assert y.numpy().tolist() == want.tolist(), x
            checked += 1
    assert checked >= 5


@pytest.mark.parametrize("path", ["ops", "python"])
def test_reported_wraparounds_raise(path):
    # the cases of the report, each of which used to wrap
    with pytest.raises(OverflowError, match="Python integer 1000 out of bounds for int8"):
        call(path, "minimum", pylucid.tensor([1, 2, 3], dtype=pylucid.int8), 1000)
    with pytest.raises(OverflowError, match="Python integer -1 out of bounds for uint8"):
        call(path, "maximum", pylucid.tensor([1, 2, 3], dtype=pylucid.uint8), -1)
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        call(path, "minimum", pylucid.tensor([1, 2, 3], dtype=pylucid.int32), 2**40)
    with pytest.raises(OverflowError, match="out of bounds for int8"):
        5000 - pylucid.tensor([1], dtype=pylucid.int8)
    t = pylucid.tensor([1.0]) * 2**70
    assert t.dtype is pylucid.float32 and t.numpy()[0] == np.float32(2.0**70)
    assert (pylucid.tensor([1.0], dtype=pylucid.float16) * 2**70).numpy()[0] == np.inf
    with pytest.raises(OverflowError):
        pylucid.tensor([1.0], dtype=pylucid.float64) * 2**1024
    assert (pylucid.tensor([1.0]) * -(2**1024)).numpy()[0] == -np.inf


# ---------------------------------------------------------------- weak and strong operands

WEAK = [True, False, 3, -2, 2.5, -0.0, 2**63, -(2**70)]


def _category_default(x: Any) -> str:
    return "bool" if isinstance(x, bool) else "int64" if isinstance(x, int) else "float32"


def _exact_in(x: Any, name: str) -> Any:
    """x converted exactly to dtype name, as a NumPy scalar of that dtype."""
    npd = T.NP_OF[name]
    if isinstance(x, int) and not isinstance(x, bool) and name in T.FLOAT_NAMES:
        return np.array(exact_round(x, name)).astype(npd)
    return np.array(x).astype(npd)


@pytest.mark.parametrize("path", ["ops", "python"])
@pytest.mark.parametrize("name", list(CODES))
def test_two_python_scalars_give_the_category_default(path, name):
    info = INFO[name]
    for a, b in itertools.product(WEAK, repeat=2):
        pd = max(_category_default(a), _category_default(b), key=T.category)
        if not info.supported(pd):
            with pytest.raises(TypeError):
                call(path, name, a, b)
            continue
        rd = info.result(pd)
        if rd not in T.FLOAT_NAMES and not (in_range(a, rd) and in_range(b, rd)):
            with pytest.raises(OverflowError):
                call(path, name, a, b)
            continue
        y = call(path, name, a, b)
        assert y.dtype is T.PL_OF[rd] and y.shape == (), (a, b, y.dtype, rd)
        # info.ref: NumPy's function, minimum/maximum by pylucid's selection rule (ties to a)
        want = np.asarray(info.ref(np.asarray(_exact_in(a, rd)), np.asarray(_exact_in(b, rd)))).astype(T.NP_OF[rd])
        assert T.bits(y.numpy()).tolist() == T.bits(want).tolist(), (a, b)
    assert ops.minimum(1, 2.0).dtype is pylucid.float32  # the report's case (was float64)


STRONG = [
    np.float64(2.0), np.float32(2.0), np.float16(2.0), np.int8(2), np.int32(2), np.int64(2), np.uint8(2),
    np.bool_(True), np.array(2.0), np.array(2, dtype=np.int16), np.array(True),
]


def _strong_dtype(s: Any) -> str:
    if isinstance(s, pylucid.Tensor):
        return s.dtype.name
    return {np.dtype(v): k for k, v in T.NP_OF.items()}[np.asarray(s).dtype]


@pytest.mark.parametrize("scalar_first", [False, True], ids=["t_op_s", "s_op_t"])
@pytest.mark.parametrize("path", ["ops", "python"])
@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
def test_numpy_scalars_and_0d_operands_are_strong(dt, path, scalar_first):
    t = pylucid.tensor([1, 0], dtype=dt)
    strong = STRONG + [pylucid.tensor(2.0, dtype=pylucid.float64), pylucid.tensor(2, dtype=pylucid.int8),
                       pylucid.tensor(2.0, dtype=pylucid.bfloat16)]
    for name in CODES:
        info = INFO[name]
        for s in strong:
            pd = T.promote(dt, _strong_dtype(s))
            args = (s, t) if scalar_first else (t, s)
            if not info.supported(pd):
                with pytest.raises(TypeError):
                    call(path, name, *args)
                continue
            y = call(path, name, *args)
            assert y.dtype is T.PL_OF[info.result(pd)], (name, dt, repr(s), y.dtype)
            assert y.shape == (2,)


def test_np_float64_is_strong_but_python_float_is_weak():
    t = pylucid.tensor([1.0, 3.0])
    assert isinstance(np.float64(2.0), float)  # why the check order matters
    assert ops.minimum(t, np.float64(2.0)).dtype is pylucid.float64
    assert ops.minimum(np.float64(2.0), t).dtype is pylucid.float64
    assert (t + np.float64(2.0)).dtype is pylucid.float64
    assert ops.minimum(t, 2.0).dtype is pylucid.float32
    assert ops.minimum(pylucid.tensor([1], dtype=pylucid.int8), np.int64(2)).dtype is pylucid.int64
    assert ops.minimum(pylucid.tensor([1], dtype=pylucid.int8), 2).dtype is pylucid.int8
    assert ops.minimum(pylucid.tensor([1], dtype=pylucid.float16), np.array(2.0)).dtype is pylucid.float64
    # a 0-d tensor counts like any other tensor (NumPy 2 / JAX; PyTorch differs)
    assert ops.minimum(pylucid.tensor([1.0], dtype=pylucid.float16),
                       pylucid.tensor(2.0, dtype=pylucid.float32)).dtype is pylucid.float32
    # NumPy 2 agrees on these (strong NumPy scalars, weak Python floats)
    assert np.minimum(np.ones(2, np.float32), np.float64(2.0)).dtype == np.float64
    assert np.minimum(np.ones(2, np.float32), 2.0).dtype == np.float32


def test_lone_python_scalars_take_the_default_dtype():
    assert ops.neg(2.5).dtype is pylucid.float32
    assert ops.neg(3).dtype is pylucid.int64 and int(ops.neg(3)) == -3
    assert ops.sum(True).dtype is pylucid.int64
    assert ops.neg([1.5, 2.0]).dtype is pylucid.float32
    with pytest.raises(OverflowError, match="out of bounds for int64"):
        ops.neg(2**63)
    with pytest.raises(OverflowError, match="out of bounds for int64"):
        ops.sum([1, 2**64])


# ---------------------------------------------------------------- construction from Python ints


@pytest.mark.parametrize("ctor", ["tensor", "Tensor"])
def test_tensor_from_python_ints_default_dtype(ctor):
    make = pylucid.tensor if ctor == "tensor" else pylucid.Tensor
    for x in INTS:
        for data in ([x], x, [[x, 1], [2, 3]]):
            if in_range(x, "int64"):
                t = make(data)
                assert t.dtype is pylucid.int64 and np.asarray(t.numpy()).ravel()[0] == x
            else:
                with pytest.raises(OverflowError, match="out of bounds for int64"):
                    make(data)
    with pytest.raises(OverflowError, match="Python integer 9223372036854775808 out of bounds for int64"):
        make([2**63])  # NumPy would make it uint64
    with pytest.raises(OverflowError):
        make([-1, 2**63])  # NumPy would make it float64


@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
def test_tensor_from_python_ints_with_dtype(dt):
    for x in INTS:
        for data, at in (([x], (0,)), ([0.5, x], (1,)), ([[1, 2], [3, x]], (1, 1))):
            if dt in T.FLOAT_NAMES:
                try:
                    want = exact_round(x, dt)
                except OverflowError:
                    with pytest.raises(OverflowError):
                        pylucid.tensor(data, dtype=dt)
                    continue
                t = pylucid.tensor(data, dtype=dt)
                assert t.dtype is T.PL_OF[dt]
                assert t.to(pylucid.float64).numpy()[at] == want, (x, dt)
            elif dt == "bool":
                assert bool(pylucid.tensor(data, dtype=dt).numpy()[at]) == (x != 0)
            elif isinstance(data[0], float):
                continue  # a Python float converted to an integer dtype: not a Python int's rule
            elif in_range(x, dt):
                assert pylucid.tensor(data, dtype=dt).numpy()[at] == x
                assert np.array(data, dtype=T.NP_OF[dt])[at] == x  # NumPy 2 agrees
            else:
                with pytest.raises(OverflowError, match="out of bounds for %s" % dt):
                    pylucid.tensor(data, dtype=dt)
                with pytest.raises(OverflowError):
                    np.array(data, dtype=T.NP_OF[dt])  # so does NumPy 2


def test_tensor_from_python_data_default_float_rounds_ints_once():
    for x in INTS:
        try:
            want = exact_round(x, "float32")
        except OverflowError:  # pragma: no cover - float32 never raises
            raise
        t = pylucid.tensor([1.5, x])
        assert t.dtype is pylucid.float32 and t.numpy()[1] == want, x
    # plain floats are unaffected, large ones included
    for v in (1e20, -3.0e38, 1e300, math.inf, 0.1):
        with np.errstate(over="ignore"):
            assert pylucid.tensor([v]).numpy()[0] == np.float32(v)
    assert pylucid.tensor([1e300], dtype=pylucid.float64).numpy()[0] == 1e300
    assert pylucid.tensor([]).dtype is pylucid.float32


# ---------------------------------------------------------------- integer arguments (docs/errors.md)


@pytest.mark.parametrize("bad", [(2.9,), 2.9, [2, 3.0], (np.float64(2.0),), "3", np.array([2.5])])
def test_zeros_rejects_non_integers(bad):
    with pytest.raises(TypeError):
        np.zeros(bad)  # as NumPy
    with pytest.raises(TypeError):
        pylucid.zeros(bad)


def test_zeros_rejects_none():
    """Current NumPy raises TypeError for a None shape; NumPy 2.2 (the floor)
    still took it as () with a DeprecationWarning. pylucid raises."""
    with pytest.raises(TypeError):
        pylucid.zeros(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "shape", [np.int64(3), (np.int32(2), np.int64(3)), np.array([2, 3]), [np.uint8(2)], (), 0, np.array(4)]
)
def test_zeros_accepts_numpy_integers(shape):
    assert pylucid.zeros(shape).shape == np.zeros(shape).shape


def test_zeros_accepts_a_0d_integer_tensor():
    assert pylucid.zeros(pylucid.tensor(3)).shape == (3,)
    assert pylucid.zeros((pylucid.tensor(2, dtype=pylucid.int8), 1)).shape == (2, 1)


def test_set_num_threads_takes_integers_only():
    before = pylucid.get_num_threads()
    try:
        for bad in (1.7, 2.0, "2", None):
            with pytest.raises(TypeError):
                pylucid.set_num_threads(bad)  # type: ignore[arg-type]
            assert pylucid.get_num_threads() == before
        pylucid.set_num_threads(np.int64(1))
        assert pylucid.get_num_threads() == 1
        pylucid.set_num_threads(np.int32(2))
        assert pylucid.get_num_threads() == 2
    finally:
        pylucid.set_num_threads(before)


@pytest.mark.parametrize("how", ["method", "op"])
@pytest.mark.parametrize("red", ["sum", "mean"])
def test_reduction_dims_take_numpy_integers_and_reject_floats(red, how):
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    t = pylucid.tensor(x)

    def run(dim: Any) -> pylucid.Tensor:
        return getattr(t, red)(dim=dim) if how == "method" else getattr(ops, red)(t, dim=dim)

    ref = getattr(np, red)
    for dim, axis in ((np.int64(0), 0), (np.int32(1), 1), ([np.int64(0), np.int8(1)], (0, 1)),
                      ((np.int64(-1),), (-1,)), (pylucid.tensor(1), 1)):
        np.testing.assert_allclose(run(dim).numpy(), ref(x, axis=axis), rtol=1e-6)
    for bad in (0.0, 1.5, [0.5], (0, 1.0), "0"):
        with pytest.raises(TypeError):
            ref(x, axis=bad)  # as NumPy
        with pytest.raises(TypeError):
            run(bad)


# ---------------------------------------------------------------- bool(), int(), float(), index


ONE_ELEMENT = [[0.0], [2.5], [[-1.5]], 0.0, 3.0, [0], [7], 5, [True], False, [[[0]]], -0.0, [math.nan]]


@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
def test_bool_int_float_of_one_element_follow_numpy(dt):
    for data in ONE_ELEMENT:
        with np.errstate(invalid="ignore"):
            a = np.array(data).astype(T.NP_OF[dt])
        t = pylucid.tensor(a)
        assert bool(t) is bool(a), (dt, data)
        assert float(t) == float(a.reshape(())) or (math.isnan(float(t)) and math.isnan(float(a.reshape(())))), data
        if math.isnan(float(a.reshape(()))):
            with pytest.raises(ValueError):
                int(t)
        else:
            assert int(t) == int(a.reshape(())), (dt, data)


@pytest.mark.parametrize("data", [[0.0, 1.0], [], [[1, 2]], np.zeros((2, 2)), np.zeros((0, 3))])
def test_bool_int_float_of_more_elements_is_ambiguous(data):
    t = pylucid.tensor(data)
    for conv in (bool, int, float):
        with pytest.raises(ValueError, match="ambiguous"):
            conv(t)
    with pytest.raises(ValueError):
        bool(np.array(data))  # as NumPy


def test_bfloat16_scalar_conversions_need_no_ml_dtypes():
    t = pylucid.tensor([1.5], dtype=pylucid.bfloat16)
    assert float(t) == 1.5 and int(t) == 1 and bool(t) and t.item() == 1.5


@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
def test_index_follows_numpy(dt):
    for data in (3, [3], 0, [[1]]):
        a = np.array(data).astype(T.NP_OF[dt])
        t = pylucid.tensor(a)
        try:
            want = operator.index(a)
        except TypeError:
            with pytest.raises(TypeError):
                operator.index(t)
        else:
            assert operator.index(t) == want and list(range(10))[t] == want
