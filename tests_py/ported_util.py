"""Shared checks of the test cases ported from NumPy's, PyTorch's and JAX's own
test suites (tests_py/test_ported_numpy.py, test_ported_torch.py,
test_ported_jax.py).

Every check compares pylucid against two things:

* the peer's expectation, as NumPy computes it (values: NaN equals NaN and
  ``-0.0`` equals ``+0.0``), and
* pylucid's own selection rule (docs/semantics.md): for ``minimum`` ``a`` wins
  at ``i`` iff ``a_i <= b_i`` or ``a_i`` is NaN (``maximum``: ``>=``); the
  result is the winner's bits and the whole gradient goes to the winner.

Where the two differ (``minimum(+0.0, -0.0)`` is ``+0.0``; ties give the whole
gradient to ``a``; a NaN's gradient goes to the operand that produced it) the
test that meets the difference says so, with what the peer does.
"""

from __future__ import annotations

import zlib
from typing import Any, Optional, Sequence, Tuple

import numpy as np

import optable as T
import pylucid
from pylucid import autograd, ops

OPS = {"minimum": ops.minimum, "maximum": ops.maximum}
WINS = {"minimum": T.a_wins_min, "maximum": T.a_wins_max}
NP_OPS = {"minimum": np.minimum, "maximum": np.maximum}
MINMAX = ["minimum", "maximum"]


def rng_for(*key: object) -> np.random.Generator:
    """A generator seeded from the case's key (stable across runs and processes)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def to_numpy(t: pylucid.Tensor) -> np.ndarray:
    """A private NumPy copy of a tensor's values (bfloat16 as ml_dtypes.bfloat16)."""
    arr = t.detach().numpy()
    if t.dtype is pylucid.bfloat16 and arr.dtype != T.BF16:
        arr = arr.view(T.BF16)
    return np.array(arr, copy=True)


def name_of(x: Any) -> Optional[str]:
    """The pylucid dtype name of an array/tensor operand; None for a Python scalar."""
    if isinstance(x, pylucid.Tensor):
        return str(x.dtype.name)
    if isinstance(x, (np.ndarray, np.generic)):
        return str(pylucid.dtypes.from_numpy_dtype(np.asarray(x).dtype).name)
    return None


def cast(x: Any, name: str) -> np.ndarray:
    """``x`` (array, tensor or Python scalar) converted to dtype ``name`` in
    NumPy. bfloat16 goes through pylucid's own conversion, which rounds once
    from the exact value (ml_dtypes rounds float64 through float32)."""
    if isinstance(x, pylucid.Tensor):
        x = to_numpy(x)
    arr = np.asarray(x)
    if name == "bfloat16" and arr.dtype != T.BF16:
        src = arr.astype(np.float64) if arr.dtype.kind in "biu" or arr.dtype == object else arr
        return to_numpy(pylucid.tensor(np.asarray(src), dtype=pylucid.bfloat16))
    with np.errstate(all="ignore"):
        return arr.astype(T.NP_OF[name])


def same_values(got: np.ndarray, want: np.ndarray, msg: str = "") -> None:
    """Equal values (NaN equals NaN, -0.0 equals +0.0), same shape."""
    assert got.shape == want.shape, (got.shape, want.shape, msg)
    if got.dtype.kind == "f" or got.dtype == T.BF16:
        g64, w64 = got.astype(np.float64), want.astype(np.float64)
        assert np.array_equal(np.isnan(g64), np.isnan(w64)), (got, want, msg)
        ok = ~np.isnan(g64)
        assert np.array_equal(g64[ok], w64[ok]), (got, want, msg)
    else:
        assert np.array_equal(got, want), (got, want, msg)


def same_bits(got: np.ndarray, want: np.ndarray, msg: str = "") -> None:
    """Bit-for-bit equal (signed zeros and NaN payloads included)."""
    assert got.shape == want.shape, (got.shape, want.shape, msg)
    assert got.dtype.itemsize == want.dtype.itemsize, (got.dtype, want.dtype, msg)
    assert np.array_equal(T.bits(got), T.bits(want)), (got, want, T.bits(got), T.bits(want), msg)


def result_name(a: Any, b: Any) -> str:
    """pylucid's promotion of two operands (docs/dtypes.md): arrays, tensors
    and NumPy scalars are strong, Python scalars weak; two weak operands give
    the default dtype of the higher category."""
    na, nb = name_of(a), name_of(b)
    if na is not None and nb is not None:
        return T.promote(na, nb)
    if na is not None:
        return T.promote_scalar(na, b)
    if nb is not None:
        return T.promote_scalar(nb, a)
    cat = max(0 if isinstance(x, bool) else 1 if isinstance(x, int) else 2 for x in (a, b))
    return ("bool", "int64", "float32")[cat]


def check_minmax(name: str, a: Any, b: Any, out_dtype: Optional[str] = None) -> np.ndarray:
    """Runs pylucid's ``name`` on (a, b) and checks the result's dtype (the
    given one, else pylucid's promotion), shape, its values against NumPy's
    ``np.minimum``/``np.maximum`` in the result dtype, and its bits against
    the selection rule. Returns the result as NumPy."""
    y = OPS[name](a, b)
    want_dtype = out_dtype if out_dtype is not None else result_name(a, b)
    assert y.dtype.name == want_dtype, (y.dtype, want_dtype)
    A, B = cast(a, want_dtype), cast(b, want_dtype)
    got = to_numpy(y)
    with np.errstate(invalid="ignore"):
        peer = np.asarray(NP_OPS[name](A, B))
    assert got.shape == peer.shape, (got.shape, peer.shape)
    same_values(got, peer.astype(got.dtype), name)
    A, B = np.broadcast_arrays(A, B)
    rule = np.where(WINS[name](A, B), A, B)
    if name_of(a) == want_dtype and name_of(b) == want_dtype:
        same_bits(got, rule, name)  # no conversion: the winner's exact bits
    else:
        same_values(got, rule, name)
        if got.dtype.kind == "f" or got.dtype == T.BF16:  # signed zeros survive every conversion
            g64, r64 = np.atleast_1d(got.astype(np.float64)), np.atleast_1d(rule.astype(np.float64))
            ok = ~np.isnan(g64)
            assert np.array_equal(np.signbit(g64[ok]), np.signbit(r64[ok])), (got, rule)
    return got


def check_minmax_grad(name: str, a: np.ndarray, b: np.ndarray, g: Optional[np.ndarray] = None
                      ) -> Tuple[np.ndarray, np.ndarray]:
    """Gradients of ``name`` for floating leaves ``a`` and ``b`` (NumPy arrays,
    perhaps of different dtypes and shapes) and upstream ``g``: the whole of
    each g_i goes to the winner, summed back to each input's shape, in each
    input's dtype. Returns (ga, gb) as NumPy."""
    out = T.promote(name_of(a), name_of(b))  # type: ignore[arg-type]
    shape = np.broadcast_shapes(a.shape, b.shape)
    if g is None:
        g = rng_for("g", name, a.shape, b.shape).integers(1, 4, size=shape).astype(T.NP_OF[out]) \
            if out != "bfloat16" else cast(np.ones(shape), out)
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    y = OPS[name](ta, tb)
    assert y.grad_fn is not None and y.grad_fn.name() == name.capitalize() + "Backward"
    ga, gb = autograd.grad([y], [ta, tb], grad_outputs=[pylucid.from_numpy(np.asarray(g))])
    A, B = np.broadcast_arrays(cast(a, out), cast(b, out))
    w = WINS[name](A, B)
    g64 = np.broadcast_to(np.asarray(g).astype(np.float64), shape)
    want_a = T.sum_to_shape(np.where(w, g64, 0.0), a.shape)
    want_b = T.sum_to_shape(np.where(w, 0.0, g64), b.shape)
    res = []
    for got, want, x in ((ga, want_a, a), (gb, want_b, b)):
        assert got is not None and got.shape == x.shape and got.dtype.name == name_of(x), (got, x.dtype)
        same_values(to_numpy(got).astype(np.float64), want, name)
        res.append(to_numpy(got))
    return res[0], res[1]


def fold(name: str, values: Sequence[Any]) -> pylucid.Tensor:
    """NumPy's ``np.minimum.reduce`` (``maximum``) written as the left fold of
    the binary op, which is what the reduction is: ``op(op(v0, v1), v2)…``."""
    acc = values[0] if len(values) > 1 else OPS[name](values[0], values[0])  # op(x, x) is x
    for v in values[1:]:
        acc = OPS[name](acc, v)
    assert isinstance(acc, pylucid.Tensor)
    return acc


def elements(x: np.ndarray) -> list:
    """The elements of a 1-d array as 1-element array views (strong operands)."""
    return [x[i : i + 1] for i in range(x.shape[0])]
