"""Test cases ported from JAX's own test suite (jax-ml/jax, main branch), run
against pylucid. JAX is not needed: the inputs are re-created with NumPy
(JAX's samplers, restated below), the expected values come from NumPy (the
reference JAX's tests use) and the expected dtypes from JAX's tables, mapped
to pylucid's rule where they differ.

Origins (each test names its own):
* tests/lax_numpy_operators_test.py — testOp for the op records "maximum"
  and "minimum" (every dtype, every shape pair incl. NumPy and Python scalars);
* tests/lax_test.py — testOpAgainstNumpy for lax.max / lax.min;
* tests/lax_autodiff_test.py — testOpGrad for lax.max / lax.min (order 2),
  and the disabled MaxSomeEqual/MinSomeEqual specs (ties);
* tests/lax_numpy_test.py — testReluGradientConstants;
* tests/dtypes_test.py — testBinaryPromotion, testBinaryPromotionTable
  (the x64 table), testBinaryPromotionJitInvariance;
* tests/lax_numpy_reducers_test.py — testReducer for sum and mean.

Deliberate differences from JAX, asserted as pylucid's rule:
* ties give the whole gradient to ``a`` (JAX splits it, 0.5 each); a NaN's
  gradient goes to the NaN operand (JAX's select-based rule gives it 0 at
  NaN positions in some paths);
* a result is never weakly typed: where JAX's table says ``f*`` (a weak
  float) pylucid gives the default float, float32, and ``i*`` int64;
  pylucid keeps float64 when asked (JAX's ALLOW x64 mode, which the table
  rows for explicit float64 follow);
* uint16/32/64 and complex raise TypeError (JAX computes);
* two Python scalars give the default dtype of the higher category
  (float32 with a float; JAX: a weak float); NumPy scalars, np.float64
  included, are strong operands (docs/dtypes.md);
* a Python int with an integer operand must fit the result dtype, else
  OverflowError (NumPy 2's rule too, which the test derives the expectation
  from; JAX wraps it into the dtype); with a float result it rounds;
* integer sums are int64 for every integer dtype (JAX: uint64 for unsigned);
  mean of an integer tensor raises TypeError (JAX computes in float).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import optable as T
import pylucid
from ported_util import (MINMAX, NP_OPS, OPS, WINS, cast, check_minmax, check_minmax_grad, result_name, rng_for,
                         to_numpy)
from pylucid import autograd, ops

# ---------------------------------------------------------------- JAX's dtypes and shapes

#: jtu.dtypes: all_floating, all_integer, all_unsigned, boolean, complex (as NumPy dtypes)
JAX_ALL_DTYPES = [T.BF16, np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64),
                  np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.int64),
                  np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64),
                  np.dtype(np.bool_), np.dtype(np.complex64), np.dtype(np.complex128)]
PL_SUPPORTED = {T.NP_OF[n] for n in T.DTYPE_NAMES}

NUMPY_SCALAR_SHAPE = "numpy_scalar"  # jtu.NUMPY_SCALAR_SHAPE
PYTHON_SCALAR_SHAPE = "python_scalar"  # jtu.PYTHON_SCALAR_SHAPE
NONEMPTY_NONSCALAR = [(4,), (3, 4), (3, 1), (1, 4), (2, 1, 4), (2, 3, 4)]
ARRAY_SHAPES = [()] + NONEMPTY_NONSCALAR + [(0,), (0, 4), (3, 0)]
ALL_SHAPES = [NUMPY_SCALAR_SHAPE, PYTHON_SCALAR_SHAPE] + ARRAY_SHAPES
#: python_scalar_dtypes = [jnp.bool_, jnp.int_, jnp.float_, jnp.complex_]
PYTHON_SCALAR_DTYPES = [np.dtype(np.bool_), np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.complex128)]


def _shape_of(s):
    return () if s in (NUMPY_SCALAR_SHAPE, PYTHON_SCALAR_SHAPE) else s


def _broadcast_compatible(pair) -> bool:
    try:
        np.broadcast_shapes(*(_shape_of(s) for s in pair))
        return True
    except ValueError:
        return False


TESTOP_SHAPE_PAIRS = [p for p in itertools.combinations_with_replacement(ALL_SHAPES, 2) if _broadcast_compatible(p)]


def rand_dtype(rng, shape, dtype, scale=3.0, some_inf=False, some_equal=False):
    """jtu._rand_dtype with rand_default (randn * 3), rand_small (scale 1e-3),
    rand_some_inf (10% +inf and 10% -inf in floats) and rand_some_equal
    (scale 100, half of the elements set to the first)."""
    shape = _shape_of(shape)
    dims = shape
    vals = rng.standard_normal(dims) * scale
    if some_equal and vals.size:
        flat = vals.reshape(-1)
        flips = rng.random(flat.shape) < 0.5
        vals = np.where(flips.reshape(dims), flat[0], vals)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return np.asarray(vals > 0)
    if dt.kind == "u":
        vals = np.abs(vals)
    if dt.kind == "c":
        vals = vals + 1j * rng.standard_normal(dims) * scale
    if some_inf and (dt.kind == "f" or dt == T.BF16):
        vals = np.where(rng.random(dims) < 0.1, np.inf, vals)
        vals = np.where(rng.random(dims) < 0.1, -np.inf, vals)
    if dt == T.BF16:
        return cast(np.asarray(vals, dtype=np.float64), "bfloat16")
    with np.errstate(all="ignore"):
        return np.asarray(vals).astype(dt)


def make_operand(rng, shape, dtype, **kw):
    """An operand of JAX's shape kind: a Python scalar, a NumPy scalar or an array."""
    x = rand_dtype(rng, shape, dtype, **kw)
    if shape == PYTHON_SCALAR_SHAPE:
        return x.item()  # bool, int, float or complex
    if shape == NUMPY_SCALAR_SHAPE:
        return np.dtype(dtype).type(x.item()) if np.dtype(dtype) != T.BF16 else x[()]
    return x


def _supported(x) -> bool:
    if isinstance(x, complex):
        return False
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x).dtype in PL_SUPPORTED
    return True


def _numpy_overflows(name, a, b) -> bool:
    """Whether NumPy 2 refuses the pair with OverflowError (NEP 50: a Python
    int that does not fit the integer dtype of the other operand)."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            NP_OPS[name](a, b)
    except OverflowError:
        return True
    return False


def _int_does_not_fit(a, b) -> bool:
    """pylucid's rule (docs/dtypes.md): a Python int converted to an integer
    result dtype must fit it (to a float result dtype it rounds)."""
    out = result_name(a, b)
    if out not in T.INT_NAMES:
        return False
    info = np.iinfo(T.NP_OF[out])
    return any(type(x) is int and not info.min <= x <= info.max for x in (a, b))


def _testop_operands(name, shapes):
    for da, db in itertools.product(*([d for d in (PYTHON_SCALAR_DTYPES if s == PYTHON_SCALAR_SHAPE
                                                    else JAX_ALL_DTYPES)] for s in shapes)):
        rng = rng_for("testOp", name, shapes, str(da), str(db))
        a = make_operand(rng, shapes[0], da, some_inf=True)
        b = make_operand(rng, shapes[1], db, some_inf=True)
        yield a, b


def _run_testop(name, a, b):
    if not (_supported(a) and _supported(b)):
        with pytest.raises(TypeError):
            OPS[name](a, b)
        return
    overflows = _numpy_overflows(name, a, b)
    assert overflows == _int_does_not_fit(a, b), (a, b)  # NumPy 2 and pylucid agree here
    if overflows:
        with pytest.raises(OverflowError, match=result_name(a, b)):
            OPS[name](a, b)
        return
    check_minmax(name, a, b)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype \
            and (a.dtype.kind == "f" or a.dtype == T.BF16) and a.size and b.size:
        check_minmax_grad(name, a, b)


# ====================================================================== lax_numpy_operators_test.py


@pytest.mark.parametrize("shapes", TESTOP_SHAPE_PAIRS, ids=["%s-%s" % p for p in TESTOP_SHAPE_PAIRS])
@pytest.mark.parametrize("name", MINMAX)
def test_numpy_op(name, shapes):
    """lax_numpy_operators_test.py LaxBackedNumpyTests.testOp, records
    op_record("maximum"/"minimum", 2, all_dtypes, all_shapes,
    jtu.rand_some_inf): every broadcast-compatible shape pair (NumPy and
    Python scalars included) x every dtype pair, against NumPy; the result
    dtype is pylucid's promotion (NumPy scalars, np.float64 included, are
    strong; two Python scalars give the default dtype of the higher category,
    float32 with a float); unsupported dtypes (uint16/32/64, complex) raise
    TypeError; a Python int that does not fit an integer result dtype (a
    negative one with uint8) raises OverflowError where NumPy 2 does (JAX
    wraps it)."""
    n = 0
    for a, b in _testop_operands(name, shapes):
        _run_testop(name, a, b)
        n += 1
    assert n > 0


# ====================================================================== lax_test.py

#: lax_test_util.compatible_shapes
COMPATIBLE_SHAPES = [[(3,)], [(3, 4), (3, 1), (1, 4)], [(2, 3, 4), (2, 1, 4)]]
LAX_SHAPE_PAIRS = [p for g in COMPATIBLE_SHAPES for p in itertools.combinations_with_replacement(g, 2)]
LAX_PAIR_IDS = ["%s-%s" % p for p in LAX_SHAPE_PAIRS]


@pytest.mark.parametrize("dtype", JAX_ALL_DTYPES, ids=[str(d) for d in JAX_ALL_DTYPES])
@pytest.mark.parametrize("shapes", LAX_SHAPE_PAIRS, ids=LAX_PAIR_IDS)
@pytest.mark.parametrize("name", MINMAX)
def test_lax_op_against_numpy(name, shapes, dtype):
    """lax_test.py LaxTest.testOpAgainstNumpy, op_record("max"/"min", 2,
    all_dtypes, rand_small) over lax_test_util.compatible_shapes: same-dtype
    operands against lax_reference (np.maximum/np.minimum)."""
    rng = rng_for("lax", name, shapes, str(dtype))
    a = rand_dtype(rng, shapes[0], dtype, scale=1e-3)
    b = rand_dtype(rng, shapes[1], dtype, scale=1e-3)
    _run_testop(name, a, b)


# ====================================================================== lax_autodiff_test.py


@pytest.mark.parametrize("shapes", LAX_SHAPE_PAIRS, ids=LAX_PAIR_IDS)
@pytest.mark.parametrize("name", MINMAX)
def test_lax_op_grad_order2(name, shapes):
    """lax_autodiff_test.py LaxAutodiffTest.testOpGrad, grad_test_spec(lax.max
    / lax.min, nargs=2, order=2, rng_factory=jtu.rand_default): check_grads
    in reverse mode to second order — pylucid's gradcheck and gradgradcheck
    in float64 (randn * 3 has no ties)."""
    rng = rng_for("grad", name, shapes)
    a = rand_dtype(rng, shapes[0], np.float64)
    b = rand_dtype(rng, shapes[1], np.float64)
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    assert autograd.gradcheck(OPS[name], [ta, tb])
    assert autograd.gradgradcheck(OPS[name], [ta, tb])


@pytest.mark.parametrize("dtype", T.FLOAT_NAMES)
@pytest.mark.parametrize("shapes", LAX_SHAPE_PAIRS, ids=LAX_PAIR_IDS)
@pytest.mark.parametrize("name", MINMAX)
def test_lax_op_grad_some_equal(name, shapes, dtype):
    """lax_autodiff_test.py, the disabled specs grad_test_spec(lax.max/min,
    nargs=2, order=1, rng_factory=jtu.rand_some_equal, name="MaxSomeEqual")
    ("make some-equal checks more robust"): with many ties JAX's gradient is
    split 0.5/0.5 at a tie; pylucid's goes whole to a, and the two
    gradients partition g exactly (summed back to each shape)."""
    rng = rng_for("some_equal", name, shapes, dtype)
    a = cast(rand_dtype(rng, shapes[0], np.float64, scale=100.0, some_equal=True), dtype)
    b = cast(rand_dtype(rng, shapes[1], np.float64, scale=100.0, some_equal=True), dtype)
    b.reshape(-1)[: max(1, b.size // 2)] = a.reshape(-1)[0]  # ties across the operands too
    check_minmax(name, a, b)
    ga, gb = check_minmax_grad(name, a, b)
    A, B = np.broadcast_arrays(a, b)
    if np.any(A == B):
        # at least one tie, and it went to a: the full count of g's mass lies in ga+gb
        assert np.any(WINS[name](A, B) & (A == B))


# ====================================================================== lax_numpy_test.py


@pytest.mark.parametrize("dtype", T.FLOAT_NAMES)
def test_relu_gradient_constants(dtype):
    """lax_numpy_test.py LaxBackedNumpyTests.testReluGradientConstants: the
    gradient of sum(maximum(z, 0.)) at z = zeros((3, 4)), accumulated five
    times. Every element is a tie: JAX's gradient is 0.5 there (its
    _balanced_eq), pylucid's is 1 (ties to z, the first operand), so y grows
    by 5, not 2.5; with the operands swapped the gradient to z is 0."""
    x = pylucid.tensor(np.zeros((3, 4)), dtype=T.PL_OF[dtype], requires_grad=True)
    acc = np.zeros((3, 4))
    for _ in range(5):
        (g,) = autograd.grad([ops.sum(ops.maximum(x, 0.0))], [x])
        acc += to_numpy(g).astype(np.float64)
    assert np.array_equal(acc, np.full((3, 4), 5.0))
    (g,) = autograd.grad([ops.sum(ops.maximum(0.0, x))], [x])
    assert np.array_equal(to_numpy(g).astype(np.float64), np.zeros((3, 4)))
    z = pylucid.tensor(np.array([-1.0, 0.0, 2.0, -0.0]), dtype=T.PL_OF[dtype], requires_grad=True)
    (g,) = autograd.grad([ops.sum(ops.maximum(z, 0.0))], [z])
    assert to_numpy(g).astype(np.float64).tolist() == [0.0, 1.0, 1.0, 1.0]


# ====================================================================== dtypes_test.py

# testBinaryPromotion's testcases; "dfloat" is canonicalize_dtype(float) =
# float32 (JAX without x64, and pylucid's default float). Each operand is
# (kind, dtype): "0d"/"1d" arrays (jnp.array(1.) / jnp.array([1.])) or "py"
# (the Python float 0.).
_D = "default"
BINARY_PROMOTION_CASES = [
    (("0d", _D), ("py", None), "float32"),
    (("0d", _D), ("0d", _D), "float32"),
    # JAX: float16 — jnp.array(1.) of a Python float is weakly typed there;
    # pylucid.tensor(1.) is a strong float32 tensor, so float32.
    (("0d", _D), ("0d", "float16"), "float32"),
    (("0d", _D), ("0d", "float32"), "float32"),
    (("0d", _D), ("0d", "float64"), "float64"),
    (("0d", "float16"), ("py", None), "float16"),
    (("0d", "float32"), ("py", None), "float32"),
    (("0d", "float64"), ("py", None), "float64"),
    (("0d", "float16"), ("0d", "float16"), "float16"),
    (("0d", "float16"), ("0d", "float32"), "float32"),
    (("0d", "float16"), ("0d", "float64"), "float64"),
    (("0d", "float32"), ("0d", "float32"), "float32"),
    (("0d", "float32"), ("0d", "float64"), "float64"),
    (("0d", "float64"), ("0d", "float64"), "float64"),
    (("1d", _D), ("py", None), "float32"),
    (("1d", _D), ("0d", _D), "float32"),
    # JAX: dfloat (the 1-d array wins over a 0-d float16 within a category,
    # PyTorch's rule); pylucid: 0-d arrays are strong like any other (NumPy 2),
    # so float32 with float16 gives float32 — the same here.
    (("1d", _D), ("0d", "float16"), "float32"),
    (("1d", _D), ("0d", "float32"), "float32"),
    (("1d", _D), ("0d", "float64"), "float64"),
    (("1d", "float32"), ("0d", "float16"), "float32"),
    (("1d", "float16"), ("0d", "float32"), "float32"),
    (("1d", "float16"), ("py", None), "float16"),
]


def _promotion_operand(kind, dt):
    if kind == "py":
        return 0.0
    pl = None if dt == _D else T.PL_OF[dt]
    return pylucid.tensor(1.0 if kind == "0d" else [1.0], dtype=pl)


@pytest.mark.parametrize("opname", ["add", "minimum", "maximum"])
@pytest.mark.parametrize("swap", [False, True], ids=["", "swap"])
@pytest.mark.parametrize("case", BINARY_PROMOTION_CASES, ids=[f"{c[0]}-{c[1]}" for c in BINARY_PROMOTION_CASES])
def test_binary_promotion(case, swap, opname):
    """dtypes_test.py DtypesTest.testBinaryPromotion (jit is not a pylucid
    concept: the non-jit half), with add as there, and minimum/maximum."""
    (ka, da), (kb, db), want = case
    x, y = _promotion_operand(ka, da), _promotion_operand(kb, db)
    if swap:
        x, y = y, x
    z = getattr(ops, opname)(x, y)
    assert isinstance(z, pylucid.Tensor)
    assert z.dtype.name == want
    assert z.shape == np.broadcast_shapes(np.shape(to_numpy(x) if isinstance(x, pylucid.Tensor) else x),
                                          np.shape(to_numpy(y) if isinstance(y, pylucid.Tensor) else y))


# testBinaryPromotionTable, enable_x64 expected table.
TABLE_CODES = ["b1", "u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "bf", "f2", "f4", "f8", "c4", "c8",
               "i*", "f*", "c*"]
X64_TABLE = [
    ["b1", "u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "bf", "f2", "f4", "f8", "c4", "c8", "i*", "f*", "c*"],
    ["u1", "u1", "u2", "u4", "u8", "i2", "i2", "i4", "i8", "bf", "f2", "f4", "f8", "c4", "c8", "u1", "f*", "c*"],
    ["u2", "u2", "u2", "u4", "u8", "i4", "i4", "i4", "i8", "bf", "f2", "f4", "f8", "c4", "c8", "u2", "f*", "c*"],
    ["u4", "u4", "u4", "u4", "u8", "i8", "i8", "i8", "i8", "bf", "f2", "f4", "f8", "c4", "c8", "u4", "f*", "c*"],
    ["u8", "u8", "u8", "u8", "u8", "f*", "f*", "f*", "f*", "bf", "f2", "f4", "f8", "c4", "c8", "u8", "f*", "c*"],
    ["i1", "i2", "i4", "i8", "f*", "i1", "i2", "i4", "i8", "bf", "f2", "f4", "f8", "c4", "c8", "i1", "f*", "c*"],
    ["i2", "i2", "i4", "i8", "f*", "i2", "i2", "i4", "i8", "bf", "f2", "f4", "f8", "c4", "c8", "i2", "f*", "c*"],
    ["i4", "i4", "i4", "i8", "f*", "i4", "i4", "i4", "i8", "bf", "f2", "f4", "f8", "c4", "c8", "i4", "f*", "c*"],
    ["i8", "i8", "i8", "i8", "f*", "i8", "i8", "i8", "i8", "bf", "f2", "f4", "f8", "c4", "c8", "i8", "f*", "c*"],
    ["bf", "bf", "bf", "bf", "bf", "bf", "bf", "bf", "bf", "bf", "f4", "f4", "f8", "c4", "c8", "bf", "bf", "c4"],
    ["f2", "f2", "f2", "f2", "f2", "f2", "f2", "f2", "f2", "f4", "f2", "f4", "f8", "c4", "c8", "f2", "f2", "c4"],
    ["f4", "f4", "f4", "f4", "f4", "f4", "f4", "f4", "f4", "f4", "f4", "f4", "f8", "c4", "c8", "f4", "f4", "c4"],
    ["f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "c8", "c8", "f8", "f8", "c8"],
    ["c4", "c4", "c4", "c4", "c4", "c4", "c4", "c4", "c4", "c4", "c4", "c4", "c8", "c4", "c8", "c4", "c4", "c4"],
    ["c8", "c8", "c8", "c8", "c8", "c8", "c8", "c8", "c8", "c8", "c8", "c8", "c8", "c8", "c8", "c8", "c8", "c8"],
    ["i*", "u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "bf", "f2", "f4", "f8", "c4", "c8", "i*", "f*", "c*"],
    ["f*", "f*", "f*", "f*", "f*", "f*", "f*", "f*", "f*", "bf", "f2", "f4", "f8", "c4", "c8", "f*", "f*", "c*"],
    ["c*", "c*", "c*", "c*", "c*", "c*", "c*", "c*", "c*", "c4", "c4", "c4", "c8", "c4", "c8", "c*", "c*", "c*"],
]
CODE_TO_NP = {"b1": np.bool_, "u1": np.uint8, "u2": np.uint16, "u4": np.uint32, "u8": np.uint64, "i1": np.int8,
              "i2": np.int16, "i4": np.int32, "i8": np.int64, "bf": T.BF16, "f2": np.float16, "f4": np.float32,
              "f8": np.float64, "c4": np.complex64, "c8": np.complex128}
#: pylucid's reading of a table entry: weak results are pylucid's default dtypes
CODE_TO_PL = {"b1": "bool", "u1": "uint8", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
              "bf": "bfloat16", "f2": "float16", "f4": "float32", "f8": "float64", "i*": "int64", "f*": "float32"}
TABLE_PAIRS = list(itertools.product(range(len(TABLE_CODES)), repeat=2))


def _table_value(code, numpy_scalar=False):
    """typecode_to_val: dtype(0), or the Python 0 / 0.0 / 0j for weak codes.
    Strong values are 0-d pylucid tensors (or NumPy scalars when asked);
    codes pylucid lacks are 0-d NumPy arrays (refused)."""
    if code == "i*":
        return 0
    if code == "f*":
        return 0.0
    if code == "c*":
        return 0j
    arr = np.zeros((), dtype=CODE_TO_NP[code])
    if code in CODE_TO_PL and not numpy_scalar:
        return pylucid.tensor(arr)
    return arr[()] if numpy_scalar else arr


def _check_table_entry(i, j, opname, numpy_scalar=False):
    c1, c2 = TABLE_CODES[i], TABLE_CODES[j]
    v1, v2 = _table_value(c1, numpy_scalar), _table_value(c2, numpy_scalar)
    want = X64_TABLE[j][i]  # table = [[val_to_typecode(v1 + v2) for v1 in vals] for v2 in vals]
    op = getattr(ops, opname)
    if c1 not in CODE_TO_PL or c2 not in CODE_TO_PL:
        with pytest.raises(TypeError):
            op(v1, v2)
        return
    z = op(v1, v2)
    assert z.dtype.name == CODE_TO_PL[want], (c1, c2, want, z.dtype)
    assert to_numpy(z).astype(np.float64).item() == 0.0


@pytest.mark.parametrize("opname", ["add", "minimum", "maximum"])
@pytest.mark.parametrize("ij", TABLE_PAIRS, ids=["%s+%s" % (TABLE_CODES[i], TABLE_CODES[j])
                                                 for i, j in TABLE_PAIRS])
def test_binary_promotion_table(ij, opname):
    """dtypes_test.py DtypesTest.testBinaryPromotionTable, the enable_x64
    table, with + as there and minimum/maximum: strong operands are 0-d
    tensors, weak ones Python scalars. Where JAX answers a weak type (i*,
    f*) pylucid gives its default dtype (int64, float32), not weak — two
    weak operands included (i* + f* is float32); dtypes pylucid lacks
    (u2/u4/u8, complex) raise TypeError."""
    _check_table_entry(ij[0], ij[1], opname)


@pytest.mark.parametrize("opname", ["add", "minimum"])
@pytest.mark.parametrize("other", [c for c in TABLE_CODES if c in CODE_TO_PL],
                         ids=[c for c in TABLE_CODES if c in CODE_TO_PL])
def test_binary_promotion_table_numpy_float64_scalar(other, opname):
    """dtypes_test.py DtypesTest.testBinaryPromotionTable with the table's own
    values, NumPy scalars (dtype(0)): np.float64(0) is strong although it
    subclasses float, so the f8 row holds with every other operand (float32
    with it is float64)."""
    i, j = TABLE_CODES.index("f8"), TABLE_CODES.index(other)
    _check_table_entry(i, j, opname, numpy_scalar=True)
    _check_table_entry(j, i, opname, numpy_scalar=True)


JIT_TYPES = [int, float, np.int16, np.int32, np.float16, np.float32]
JIT_TYPE_PAIRS = list(itertools.product(JIT_TYPES, repeat=2))
JIT_FUNS = [("identity", lambda x: x), ("abs", abs), ("array", pylucid.tensor)]


def _jit_invariance_cases(xtype, ytype):
    for (xn, xfun), (yn, yfun) in itertools.product(JIT_FUNS, repeat=2):
        x, y = xfun(xtype(1)), yfun(ytype(1))
        yield xn, yn, x, y


@pytest.mark.parametrize("types", JIT_TYPE_PAIRS, ids=["%s-%s" % (a.__name__, b.__name__) for a, b in JIT_TYPE_PAIRS])
def test_binary_promotion_jit_invariance(types):
    """dtypes_test.py DtypesTest.testBinaryPromotionJitInvariance: the dtype
    of xfun(x) + yfun(y) for x, y of int, float, int16, int32, float16,
    float32 and xfun, yfun in identity, abs, array (jnp.array here
    pylucid.tensor, which makes a strong default-dtype tensor of a Python
    scalar; JAX's keeps it weak) follows the promotion rule — the same
    function computed independently from the operands' kinds. Two Python
    scalars give the default dtype of the higher category: int64, or float32
    with a float (JAX: a weak int / weak float)."""
    for xn, yn, x, y in _jit_invariance_cases(*types):
        z = ops.add(x, y)
        assert z.dtype.name == result_name(x, y), (xn, yn, x, y)
        if type(x) in (int, float) and type(y) in (int, float):
            assert z.dtype.name == ("float32" if float in (type(x), type(y)) else "int64"), (xn, yn, x, y)
        assert z.item() == 2


# ====================================================================== lax_numpy_reducers_test.py

REDUCER_SHAPES = [(), (4,), (3, 4), (3, 1), (1, 4), (2, 1, 4), (2, 3, 4), (0,), (0, 4), (3, 0)]


def _sum_dtype(name):
    # _reducer_output_dtype with promote_integers: bool and integers to the
    # default int; pylucid: int64 for every integer (JAX: uint64 for unsigned)
    return "int64" if name == "bool" or name in T.INT_NAMES else name


@pytest.mark.parametrize("shape", REDUCER_SHAPES, ids=[str(s) for s in REDUCER_SHAPES])
@pytest.mark.parametrize("dtype", T.DTYPE_NAMES)
@pytest.mark.parametrize("opname", ["sum", "mean"])
def test_reducer(opname, dtype, shape):
    """lax_numpy_reducers_test.py JaxNumpyReducerTests.testReducer, records
    op_record("sum", 1, all_dtypes, all_shapes) and op_record("mean", 1,
    number_dtypes, nonempty_shapes): every axis (negative included) and
    None, keepdims False/True, against NumPy with JAX's tolerances (float16
    1e-2, float32 1e-3, float64 1e-5; bfloat16 as float16). pylucid's mean
    takes floats only (TypeError for integers and bool; JAX computes)."""
    rng = rng_for("reducer", opname, dtype, shape)
    x = rand_dtype(rng, shape, T.NP_OF[dtype])
    tol = {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-3, "float64": 1e-5}.get(dtype, 0)
    for axis in list(range(-len(shape), len(shape))) + [None]:
        for keepdims in (False, True):
            if opname == "mean" and dtype not in T.FLOAT_NAMES:
                with pytest.raises(TypeError):
                    ops.mean(x, dim=axis, keepdim=keepdims)
                continue
            got = getattr(ops, opname)(x, dim=axis, keepdim=keepdims)
            want_dtype = _sum_dtype(dtype) if opname == "sum" else dtype
            assert got.dtype.name == want_dtype
            x64 = x.astype(np.float64)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # NumPy: "Mean of empty slice"
                want = getattr(np, opname)(x64, axis=axis, keepdims=keepdims)
            g = to_numpy(got).astype(np.float64)
            assert g.shape == np.shape(want), (axis, keepdims)
            if tol:
                np.testing.assert_allclose(g, want, rtol=tol, atol=tol, equal_nan=True)
            else:
                assert np.array_equal(g, want)
