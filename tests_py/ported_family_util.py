"""Shared references and checks of the min/max family test cases ported from
NumPy's, PyTorch's and JAX's own test suites
(tests_py/test_ported_family_numpy.py, test_ported_family_torch.py,
test_ported_family_jax.py).

Everything here is plain NumPy except the calls into pylucid that the checks
make. The references restate pylucid's selection rule (docs/semantics.md):

* ``fmin(a, b)``: ``a`` wins iff ``a <= b`` or ``b`` is NaN (``fmax``: ``>=``);
* ``clamp(x, lo, hi)`` is ``minimum(maximum(x, lo), hi)``: ``x`` wins against
  ``lo`` iff ``x >= lo`` or ``x`` is NaN, then that winner against ``hi`` iff
  ``w <= hi`` or ``w`` is NaN;
* ``amin``/``amax``/``argmin``/``argmax``/``min``/``max`` with a dim: each
  output is the winner of its slice, in row-major order of the reduced dims:
  the first NaN if there is one, else the first extreme element — exactly
  NumPy's ``argmin``/``argmax`` position;

and in every case the value is the winner's bits and the whole gradient (and
the whole tangent) goes to the winner.

The ops are looked up by name when a test runs (``op("amax")``), so the test
files import and collect even where an op is missing.
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np
import pytest

import optable as T
import pylucid
from ported_util import cast, name_of, rng_for, same_bits, same_values, to_numpy  # noqa: F401
from pylucid import autograd, ops

Dim = Union[None, int, Tuple[int, ...]]

#: every family op: name -> (kind, extreme) where extreme is "min" or "max"
REDUCTIONS = ["amin", "amax"]
ARGS = ["argmin", "argmax"]
MINMAX_DIM = ["min", "max"]
FMINMAX = ["fmin", "fmax"]
EXTREME = {"amin": "min", "amax": "max", "argmin": "min", "argmax": "max", "min": "min", "max": "max",
           "fmin": "min", "fmax": "max"}
NODE = {"amin": "AminBackward", "amax": "AmaxBackward", "min": "MinBackward", "max": "MaxBackward",
        "fmin": "FminBackward", "fmax": "FmaxBackward", "clamp": "ClampBackward", "clip": "ClampBackward"}
NP_REDUCE = {"min": np.min, "max": np.max}
NP_ARG = {"min": np.argmin, "max": np.argmax}
NP_FMINMAX = {"fmin": np.fmin, "fmax": np.fmax}

#: exceptions pylucid may raise for a bad dim (docs: ValueError or IndexError)
DIM_ERRORS = (ValueError, IndexError)
#: exceptions for an ``out=`` of the wrong shape or dtype
OUT_ERRORS = (ValueError, TypeError)


def op(name: str) -> Any:
    """The pylucid op ``name`` (looked up when the test runs)."""
    return getattr(ops, name)


def is_float(name: str) -> bool:
    return name in T.FLOAT_NAMES


def np_dtype_name(x: np.ndarray) -> str:
    return str(pylucid.dtypes.from_numpy_dtype(np.asarray(x).dtype).name)


# ---------------------------------------------------------------- reductions: reference


def norm_dims(ndim: int, dim: Dim) -> Tuple[int, ...]:
    """The reduced dims, non-negative and sorted (None: all; () none)."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)):
        dim = (int(dim),)
    return tuple(sorted(d % ndim if ndim else d for d in dim))


def out_shape(shape: Sequence[int], dim: Dim, keepdim: bool) -> Tuple[int, ...]:
    red = norm_dims(len(shape), dim)
    if keepdim:
        return tuple(1 if i in red else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in red)


def _slices(x: np.ndarray, red: Tuple[int, ...]) -> np.ndarray:
    """x with its reduced dims moved last (in order) and flattened: shape
    (kept dims..., K)."""
    keep = tuple(i for i in range(x.ndim) if i not in red)
    k = int(np.prod([x.shape[i] for i in red], dtype=np.int64))
    moved = np.transpose(x, keep + red)
    return moved.reshape(tuple(x.shape[i] for i in keep) + (k,))


def _comparable(x: np.ndarray) -> np.ndarray:
    """Values NumPy compares exactly: floats (bfloat16 included) as float64."""
    if x.dtype.kind == "f" or x.dtype == T.BF16:
        return x.astype(np.float64)
    return x


def ref_arg(x: np.ndarray, dim: Dim, extreme: str) -> np.ndarray:
    """Position of each slice's winner within the slice (row-major order of
    the reduced dims), shaped as the keepdim result. NumPy's argmin/argmax
    rule: the first NaN, else the first extreme element."""
    red = norm_dims(x.ndim, dim)
    s = _slices(_comparable(np.asarray(x)), red)
    assert s.shape[-1] > 0, "zero-size reduced slice"
    idx = NP_ARG[extreme](s, axis=-1).astype(np.int64)
    return idx.reshape(out_shape(x.shape, dim, True))


def ref_gather(x: np.ndarray, idx: np.ndarray, dim: Dim) -> np.ndarray:
    """x's elements at the slice positions idx (keepdim shape): the winners' bits."""
    red = norm_dims(x.ndim, dim)
    s = _slices(np.asarray(x), red)
    flat_idx = idx.reshape(s.shape[:-1] + (1,))
    return np.take_along_axis(s, flat_idx, axis=-1).reshape(idx.shape)


def ref_scatter(shape: Sequence[int], idx: np.ndarray, g: np.ndarray, dim: Dim) -> np.ndarray:
    """The gradient of a value-selecting reduction: each g at its winner's
    position, 0 elsewhere (float64, x's shape). g has the keepdim shape."""
    shape = tuple(shape)
    red = norm_dims(len(shape), dim)
    keep = tuple(i for i in range(len(shape)) if i not in red)
    k = int(np.prod([shape[i] for i in red], dtype=np.int64))
    s = np.zeros(tuple(shape[i] for i in keep) + (k,), dtype=np.float64)
    np.put_along_axis(s, idx.reshape(s.shape[:-1] + (1,)),
                      np.asarray(g, dtype=np.float64).reshape(s.shape[:-1] + (1,)), axis=-1)
    moved = s.reshape(tuple(shape[i] for i in keep) + tuple(shape[i] for i in red))
    inv = np.argsort(keep + red)
    return np.transpose(moved, inv)


def ref_reduce(x: np.ndarray, dim: Dim, keepdim: bool, extreme: str) -> Tuple[np.ndarray, np.ndarray]:
    """(values, indices) of amin/amax/argmin/argmax/min/max, in the result shape."""
    if dim == ():
        return np.array(x, copy=True), np.zeros(x.shape, dtype=np.int64)
    idx = ref_arg(x, dim, extreme)
    vals = ref_gather(x, idx, dim)
    shape = out_shape(x.shape, dim, keepdim)
    return vals.reshape(shape), idx.reshape(shape)


def numpy_reduce(x: np.ndarray, dim: Dim, keepdim: bool, extreme: str) -> np.ndarray:
    """NumPy's own np.min/np.max (float64 for floats), the independent reference."""
    with np.errstate(invalid="ignore"):
        return np.asarray(NP_REDUCE[extreme](_comparable(np.asarray(x)), axis=dim, keepdims=keepdim))


# ---------------------------------------------------------------- reductions: checks


def check_reduction(name: str, x: Any, dim: Dim = None, keepdim: bool = False,
                    values: Optional[np.ndarray] = None) -> Any:
    """Runs ``ops.<name>(x, dim=dim, keepdim=keepdim)`` for amin/amax/argmin/
    argmax (and min/max, whose values and indices are both checked) and
    compares it with the references: shape, dtype (int64 for positions), the
    winner's bits, NumPy's np.min/np.max values and np.argmin/np.argmax
    positions. ``values`` is x as NumPy when x is a tensor. Returns the result."""
    if values is None:
        values = to_numpy(x) if isinstance(x, pylucid.Tensor) else x
    xv = np.asarray(values)
    extreme = EXTREME[name]
    want_vals, want_idx = ref_reduce(xv, dim, keepdim, extreme)
    res = op(name)(x, dim=dim, keepdim=keepdim)
    shape = out_shape(xv.shape, dim, keepdim)
    if name in ARGS:
        assert res.dtype is pylucid.int64, res.dtype
        assert res.shape == shape, (res.shape, shape)
        got = to_numpy(res)
        assert np.array_equal(got, want_idx), (got, want_idx)
        if dim is None or isinstance(dim, int):
            assert np.array_equal(got, NP_ARG[extreme](_comparable(xv), axis=dim, keepdims=keepdim))
        assert not res.requires_grad and res.grad_fn is None
        return res
    if name in MINMAX_DIM and dim is not None:
        vals_t, idx_t = res.values, res.indices
        v2, i2 = res  # unpackable, as torch's named tuple
        assert v2 is vals_t and i2 is idx_t
        assert idx_t.dtype is pylucid.int64 and idx_t.shape == shape
        assert np.array_equal(to_numpy(idx_t), want_idx)
        assert not idx_t.requires_grad
    else:
        vals_t = res
    assert vals_t.dtype.name == np_dtype_name(xv), (vals_t.dtype, xv.dtype)
    assert vals_t.shape == shape, (vals_t.shape, shape)
    got = to_numpy(vals_t)
    same_bits(got, want_vals, name)
    if xv.size and dim != ():
        same_values(_comparable(got), numpy_reduce(xv, dim, keepdim, extreme), name)
    return res


def grad_of(y: pylucid.Tensor, x: pylucid.Tensor, g: np.ndarray) -> np.ndarray:
    (gx,) = autograd.grad([y], [x], grad_outputs=[pylucid.from_numpy(np.array(g, order="C"))])
    assert gx is not None and gx.shape == x.shape and gx.dtype == x.dtype, (gx, x)
    return to_numpy(gx)


def upstream(shape: Sequence[int], dtype: str, *key: Any) -> np.ndarray:
    """A distinct small-integer upstream gradient (exact in every float dtype)."""
    rng = rng_for("upstream", tuple(shape), dtype, *key)
    g = rng.integers(1, 9, size=tuple(shape)).astype(np.float64)
    return cast(g, dtype)


def check_reduction_grad(name: str, x: np.ndarray, dim: Dim = None, keepdim: bool = False,
                         g: Optional[np.ndarray] = None) -> np.ndarray:
    """The gradient of amin/amax (or min/max values) for a floating x: each
    upstream g goes whole to its slice's winner, bit for bit (g's values are
    placed, never summed); every slice's gradient sums exactly to its g.
    Returns x's gradient as NumPy."""
    dt = np_dtype_name(x)
    tx = pylucid.from_numpy(x, requires_grad=True)
    res = op(name)(tx, dim=dim, keepdim=keepdim)
    y = res.values if name in MINMAX_DIM and dim is not None else res
    assert y.requires_grad and y.grad_fn is not None
    assert y.grad_fn.name() == NODE[name], y.grad_fn.name()
    if g is None:
        g = upstream(y.shape, dt, name, dim, keepdim)
    gx = grad_of(y, tx, g)
    if dim == ():
        same_bits(gx, np.asarray(g), name)
        return gx
    idx = ref_arg(x, dim, EXTREME[name])
    want = ref_scatter(x.shape, idx, np.asarray(g).astype(np.float64).reshape(idx.shape), dim)
    same_bits(gx, cast(want, dt), name)
    # slice sums: every slice's gradient adds up to exactly its upstream value
    red = norm_dims(x.ndim, dim)
    sums = gx.astype(np.float64).sum(axis=red, keepdims=True) if red else gx.astype(np.float64)
    assert np.array_equal(sums.reshape(idx.shape), np.asarray(g).astype(np.float64).reshape(idx.shape))
    return gx


# ---------------------------------------------------------------- fmin / fmax


def a_wins(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """docs/semantics.md: fmin: a wins iff a <= b or b is NaN (fmax: >=)."""
    with np.errstate(invalid="ignore"):
        cmp = (a <= b) if name == "fmin" else (a >= b)
    return cmp | T._isnan(np.asarray(b))


def result_dtype(*operands: Any) -> str:
    """pylucid's promotion of any number of operands (docs/dtypes.md): the
    strong ones promote together, then Python scalars (weak) may lift the
    category to its default dtype; only weak operands: the default dtype of
    the highest category."""
    strong = [name_of(v) for v in operands if v is not None and name_of(v) is not None]
    weak = [v for v in operands if v is not None and name_of(v) is None]
    if not strong:
        cat = max(0 if isinstance(v, bool) else 1 if isinstance(v, int) else 2 for v in weak)
        return ("bool", "int64", "float32")[cat]
    t = functools.reduce(T.promote, strong)
    for v in weak:
        t = T.promote_scalar(t, v)
    return t


def check_fminmax(name: str, a: Any, b: Any, **kw: Any) -> np.ndarray:
    """fmin/fmax of (a, b): dtype by pylucid's promotion, values as NumPy's
    np.fmin/np.fmax in that dtype, bits by the selection rule (the winner's
    bits when no conversion happens). Returns the result as NumPy."""
    y = op(name)(a, b, **kw)
    dt = result_dtype(a, b)
    assert y.dtype.name == dt, (y.dtype, dt)
    A, B = cast(a, dt), cast(b, dt)
    got = to_numpy(y)
    with np.errstate(invalid="ignore"):
        peer = np.asarray(NP_FMINMAX[name](_comparable(A), _comparable(B)))
    assert got.shape == peer.shape, (got.shape, peer.shape)
    same_values(_comparable(got), peer, name)
    A, B = np.broadcast_arrays(A, B)
    rule = np.where(a_wins(name, _comparable(A), _comparable(B)), A, B)
    if name_of(a) == dt and name_of(b) == dt:
        same_bits(got, rule, name)
    else:
        same_values(got, rule, name)
    return got


def check_fminmax_grad(name: str, a: np.ndarray, b: np.ndarray, g: Optional[np.ndarray] = None
                       ) -> Tuple[np.ndarray, np.ndarray]:
    """Gradients of fmin/fmax for floating leaves a, b: g goes whole to the
    winner (ties and both-NaN to a, a NaN b's share to a), summed back to each
    input's shape, in each input's dtype."""
    dt = T.promote(np_dtype_name(a), np_dtype_name(b))
    shape = np.broadcast_shapes(a.shape, b.shape)
    if g is None:
        g = upstream(shape, dt, name, a.shape, b.shape)
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    y = op(name)(ta, tb)
    assert y.grad_fn is not None and y.grad_fn.name() == NODE[name], y.grad_fn
    ga, gb = autograd.grad([y], [ta, tb], grad_outputs=[pylucid.from_numpy(np.asarray(g))])
    A, B = np.broadcast_arrays(_comparable(cast(a, dt)), _comparable(cast(b, dt)))
    w = a_wins(name, A, B)
    g64 = np.broadcast_to(np.asarray(g).astype(np.float64), shape)
    want_a = T.sum_to_shape(np.where(w, g64, 0.0), a.shape)
    want_b = T.sum_to_shape(np.where(w, 0.0, g64), b.shape)
    out = []
    for got, want, x in ((ga, want_a, a), (gb, want_b, b)):
        assert got is not None and got.shape == x.shape and got.dtype.name == np_dtype_name(x)
        same_values(to_numpy(got).astype(np.float64), want, name)
        out.append(to_numpy(got))
    return out[0], out[1]


# ---------------------------------------------------------------- clamp


def ref_clamp(x: Any, lo: Any, hi: Any, dt: str) -> Tuple[np.ndarray, np.ndarray]:
    """(values, source) of clamp(x, lo, hi) in dtype dt by the rule
    minimum(maximum(x, lo), hi); source is 0 where x won, 1 where lo, 2 where hi."""
    X = cast(x, dt)
    arrays = [X] + [cast(v, dt) for v in (lo, hi) if v is not None]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    w = np.broadcast_to(X, shape).copy()
    src = np.zeros(shape, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        if lo is not None:
            L = np.broadcast_to(cast(lo, dt), shape)
            keep = T.a_wins_max(_comparable(w), _comparable(L))
            w, src = np.where(keep, w, L), np.where(keep, src, 1)
        if hi is not None:
            H = np.broadcast_to(cast(hi, dt), shape)
            keep = T.a_wins_min(_comparable(w), _comparable(H))
            w, src = np.where(keep, w, H), np.where(keep, src, 2)
    return w, src


def check_clamp(x: Any, lo: Any = None, hi: Any = None, name: str = "clamp", **kw: Any) -> np.ndarray:
    """clamp/clip of x to [lo, hi]: dtype by promotion of the three at once
    (as np.clip and torch.clamp), values as NumPy's np.clip in that dtype,
    bits by the rule (exactly minimum(maximum(x, lo), hi), also checked
    against pylucid's own composition bit for bit whenever the pairwise
    composition has the same dtype). Returns the result as NumPy."""
    y = op(name)(x, lo, hi, **kw)
    dt = result_dtype(x, lo, hi)
    assert y.dtype.name == dt, (y.dtype, dt)
    got = to_numpy(y)
    want, _ = ref_clamp(x, lo, hi, dt)
    assert got.shape == want.shape, (got.shape, want.shape)
    X = _comparable(cast(x, dt))
    LO = None if lo is None else _comparable(cast(lo, dt))
    HI = None if hi is None else _comparable(cast(hi, dt))
    with np.errstate(invalid="ignore"):
        peer = np.clip(X, LO, HI)
    same_values(_comparable(got), np.broadcast_to(peer, got.shape), "clip")
    if all(v is None or name_of(v) == dt for v in (x, lo, hi)):
        same_bits(got, want, "clamp")
    else:
        same_values(got, want, "clamp")
    # Exactly maximum then minimum in the result dtype (operands converted
    # to it first, as clamp converts them).
    comp_dt = pylucid.tensor(cast(x, dt))
    if lo is not None:
        comp_dt = ops.maximum(comp_dt, pylucid.tensor(cast(lo, dt)))
    if hi is not None:
        comp_dt = ops.minimum(comp_dt, pylucid.tensor(cast(hi, dt)))
    same_bits(got, np.broadcast_to(to_numpy(comp_dt), got.shape), "composition in %s" % dt)
    # The composition as written promotes pairwise: where every step already
    # has the result dtype it is the same computation; elsewhere a narrower
    # step may round first (int8 with a weak 5e-154 is float32: 0.0), and
    # clamp, which promotes the three at once (as NumPy and PyTorch), does not.
    comp, steps_in_dt = x, True
    for f, v in ((ops.maximum, lo), (ops.minimum, hi)):
        if v is not None:
            comp = f(comp, v)
            steps_in_dt = steps_in_dt and comp.dtype.name == dt
    comp_np = to_numpy(comp) if isinstance(comp, pylucid.Tensor) else np.asarray(comp)
    if steps_in_dt and comp_np.dtype == got.dtype:
        same_bits(got, np.broadcast_to(comp_np, got.shape), "composition")
    return got


def check_clamp_grad(x: np.ndarray, lo: Any, hi: Any, g: Optional[np.ndarray] = None) -> None:
    """Gradients of clamp to x and to tensor bounds: each g goes whole to
    the source of the value (x at x == bound; hi when min > max), summed back
    to each input's shape; equal to the composition's gradients."""
    leaves = [pylucid.from_numpy(x, requires_grad=True)]
    args = [leaves[0]]
    for v in (lo, hi):
        if isinstance(v, np.ndarray):
            t = pylucid.from_numpy(v, requires_grad=True)
            leaves.append(t)
            args.append(t)
        else:
            args.append(v)
    y = op("clamp")(*args)
    assert y.grad_fn is not None and y.grad_fn.name() == "ClampBackward", y.grad_fn
    dt = y.dtype.name
    if g is None:
        g = upstream(y.shape, dt, "clamp", x.shape)
    grads = autograd.grad([y], leaves, grad_outputs=[pylucid.from_numpy(np.asarray(g))])
    _, src = ref_clamp(x, lo, hi, dt)
    g64 = np.asarray(g).astype(np.float64)
    sources = [0] + [k for k, v in ((1, lo), (2, hi)) if isinstance(v, np.ndarray)]
    arrays = [x] + [v for v in (lo, hi) if isinstance(v, np.ndarray)]
    for got, k, arr in zip(grads, sources, arrays):
        want = T.sum_to_shape(np.where(src == k, g64, 0.0), arr.shape)
        assert got is not None and got.shape == arr.shape and got.dtype.name == np_dtype_name(arr)
        same_values(to_numpy(got).astype(np.float64), want, "clamp grad %d" % k)
    # the composition's gradients are the same
    comp_leaves = [pylucid.from_numpy(a, requires_grad=True) for a in arrays]
    it = iter(comp_leaves[1:])
    c_lo = next(it) if isinstance(lo, np.ndarray) else lo
    c_hi = next(it) if isinstance(hi, np.ndarray) else hi
    comp = comp_leaves[0]
    if lo is not None:
        comp = ops.maximum(comp, c_lo)
    if hi is not None:
        comp = ops.minimum(comp, c_hi)
    cgrads = autograd.grad([comp], comp_leaves, grad_outputs=[pylucid.from_numpy(np.asarray(g))],
                           allow_unused=True)
    for got, want in zip(grads, cgrads):
        want_np = np.zeros(got.shape) if want is None else to_numpy(want).astype(np.float64)
        assert np.array_equal(to_numpy(got).astype(np.float64), want_np)


# ---------------------------------------------------------------- out=


def fill_like(shape: Sequence[int], dt: str, value: float = 7) -> np.ndarray:
    return cast(np.full(tuple(shape), value), dt)


def check_out(fn: Any, args: Sequence[Any], kwargs: dict, want: np.ndarray, as_tensor: bool) -> None:
    """``fn(*args, out=o, **kwargs)`` returns ``o`` itself (a Tensor or a NumPy
    array) holding ``want`` bit for bit."""
    buf = np.zeros(want.shape, dtype=want.dtype)
    o = pylucid.from_numpy(buf) if as_tensor else buf
    r = fn(*args, out=o, **kwargs)
    assert r is o
    same_bits(buf, want)


def check_out_refused(fn: Any, args: Sequence[Any], kwargs: dict, bad: np.ndarray) -> None:
    """An ``out=`` of the wrong shape or dtype raises and is left untouched."""
    before = np.array(bad, copy=True)
    with pytest.raises(OUT_ERRORS):
        fn(*args, out=bad, **kwargs)
    same_bits(bad, before)


# ---------------------------------------------------------------- forward mode


def check_jvp_selects(fn: Any, primals: Sequence[np.ndarray], tangents: Sequence[np.ndarray],
                      want_tangent: np.ndarray) -> pylucid.Tensor:
    """autograd.jvp(fn, primals, tangents): the output equals fn(primals) bit
    for bit and the output tangent is want_tangent bit for bit (the winner's
    tangent)."""
    P = tuple(pylucid.from_numpy(np.asarray(p)) for p in primals)
    V = tuple(pylucid.from_numpy(np.asarray(v)) for v in tangents)
    out, tan = autograd.jvp(fn, P if len(P) > 1 else P[0], V if len(V) > 1 else V[0])
    assert isinstance(out, pylucid.Tensor) and isinstance(tan, pylucid.Tensor)
    same_bits(to_numpy(out), to_numpy(fn(*P)))
    assert tan.shape == out.shape and tan.dtype == out.dtype
    same_bits(to_numpy(tan), want_tangent)
    return tan


def check_jvp_numeric(fn: Any, primals: Sequence[np.ndarray], tangents: Sequence[np.ndarray],
                      eps: float = 1e-6) -> None:
    """float64 on tie-free data: the jvp equals central finite differences
    and the transpose of the vjp: <J v, u> == <v, Jᵀ u>."""
    P = tuple(pylucid.from_numpy(np.asarray(p)) for p in primals)
    V = tuple(pylucid.from_numpy(np.asarray(v)) for v in tangents)
    _, tan = autograd.jvp(fn, P if len(P) > 1 else P[0], V if len(V) > 1 else V[0])
    jv = to_numpy(tan).astype(np.float64)
    plus = fn(*(pylucid.from_numpy(np.asarray(p + eps * v)) for p, v in zip(primals, tangents)))
    minus = fn(*(pylucid.from_numpy(np.asarray(p - eps * v)) for p, v in zip(primals, tangents)))
    fd = (to_numpy(plus).astype(np.float64) - to_numpy(minus).astype(np.float64)) / (2 * eps)
    np.testing.assert_allclose(jv, fd, rtol=1e-6, atol=1e-6)
    u = rng_for("jvp-u", tuple(p.shape for p in primals)).standard_normal(jv.shape)
    leaves = [pylucid.from_numpy(np.asarray(p), requires_grad=True) for p in primals]
    y = fn(*leaves)
    grads = autograd.grad([y], leaves, grad_outputs=[pylucid.from_numpy(np.asarray(u))], allow_unused=True)
    rhs = sum(float(np.sum(v * (0.0 if gr is None else to_numpy(gr)))) for v, gr in zip(tangents, grads))
    lhs = float(np.sum(jv * u))
    assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs)), (lhs, rhs)


def distinct(shape: Sequence[int], *key: Any) -> np.ndarray:
    """float64 values, all distinct with gaps >= 1/16 (tie-free, so min/max
    are differentiable and finite differences with eps <= 1e-3 stay on one
    side)."""
    rng = rng_for("distinct", tuple(shape), *key)
    n = int(np.prod(shape, dtype=np.int64))
    grid = np.arange(-4 * max(n, 16), 4 * max(n, 16)) / 16.0
    return rng.choice(grid, size=n, replace=False).reshape(tuple(shape)).astype(np.float64)
