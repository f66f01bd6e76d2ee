"""The op table of the Python tests (in the spirit of PyTorch's OpInfo).

One entry per public op of ``pylucid.ops`` (``clip`` is ``clamp``: :data:`ALIASES`): the pylucid callable, a NumPy
reference of the forward (computed in the op's result dtype), the dtypes the
op accepts, whether it is differentiable and, for differentiable ops, a NumPy
reference of the gradients given the upstream gradient ``g``. Tests in
``test_ops_numpy.py`` are driven from :data:`OPS`; ``test_minmax_spec.py``
uses the helpers here too.

Everything here is plain NumPy (float64 for gradients); nothing here calls
pylucid except to name the op and the dtype objects.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable, Optional, Sequence, Tuple

import ml_dtypes
import numpy as np

import pylucid
from pylucid import ops

# ---------------------------------------------------------------- dtypes

BF16 = np.dtype(ml_dtypes.bfloat16)

#: (pylucid dtype, NumPy dtype), in the order docs/dtypes.md lists them.
DTYPES = [
    (pylucid.bool_, np.dtype(np.bool_)),
    (pylucid.uint8, np.dtype(np.uint8)),
    (pylucid.int8, np.dtype(np.int8)),
    (pylucid.int16, np.dtype(np.int16)),
    (pylucid.int32, np.dtype(np.int32)),
    (pylucid.int64, np.dtype(np.int64)),
    (pylucid.float16, np.dtype(np.float16)),
    (pylucid.bfloat16, BF16),
    (pylucid.float32, np.dtype(np.float32)),
    (pylucid.float64, np.dtype(np.float64)),
]
NP_OF = {d.name: n for d, n in DTYPES}
PL_OF = {d.name: d for d, _ in DTYPES}
DTYPE_NAMES = [d.name for d, _ in DTYPES]
FLOAT_NAMES = ["float16", "bfloat16", "float32", "float64"]
INT_NAMES = ["uint8", "int8", "int16", "int32", "int64"]

#: unsigned integer views of each itemsize, for bit-for-bit comparisons.
UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

_WIDTH = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
          "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def category(name: str) -> int:
    """docs/dtypes.md categories: bool < integers < floats."""
    if name == "bool":
        return 0
    if name in INT_NAMES:
        return 1
    return 2


def promote(a: str, b: str) -> str:
    """docs/dtypes.md promotion of two tensor dtypes (names)."""
    if a == b:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        if {a, b} == {"float16", "bfloat16"}:
            return "float32"
        return a if _WIDTH[a] >= _WIDTH[b] else b
    # integers: uint8 with int8 needs int16 (as NumPy and PyTorch do)
    if "uint8" in (a, b):
        other = b if a == "uint8" else a
        return "int16" if other == "int8" else other
    return a if _WIDTH[a] >= _WIDTH[b] else b


def promote_scalar(t: str, scalar: Any) -> str:
    """docs/dtypes.md: a Python scalar is weak; it only lifts the category, to the
    category's default (int64 / float32)."""
    c = 0 if isinstance(scalar, bool) else 1 if isinstance(scalar, int) else 2
    if c <= category(t):
        return t
    return "float32" if c == 2 else "int64"


def eps(name: str) -> float:
    """Unit roundoff-ish spacing of a floating dtype (machine epsilon)."""
    return float(ml_dtypes.finfo(NP_OF[name]).eps)


def bits(x: np.ndarray) -> np.ndarray:
    """The raw bits of an array (for bit-for-bit comparisons)."""
    x = np.asarray(x).copy(order="C")
    return x.view(UINT_OF_SIZE[x.dtype.itemsize])


# ---------------------------------------------------------------- broadcasting helpers


def sum_to_shape(g: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Reduces g (a broadcast-shaped gradient) back to ``shape``: sum over the
    leading dims ``shape`` lacks and over dims where ``shape`` has 1."""
    shape = tuple(shape)
    lead = g.ndim - len(shape)
    assert lead >= 0, (g.shape, shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def _isnan(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "biu":
        return np.zeros(x.shape, dtype=bool)
    return np.isnan(x)


def a_wins_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """docs/semantics.md selection rule of minimum: a wins iff a <= b or a is NaN."""
    with np.errstate(invalid="ignore"):
        return (a <= b) | _isnan(a)


def a_wins_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """docs/semantics.md selection rule of maximum: a wins iff a >= b or a is NaN."""
    with np.errstate(invalid="ignore"):
        return (a >= b) | _isnan(a)


def a_wins_fmin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """docs/semantics.md rule of fmin (NumPy's fmin): a wins iff a <= b or b is NaN
    (so both NaN: a)."""
    with np.errstate(invalid="ignore"):
        return (a <= b) | _isnan(b)


def a_wins_fmax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fmax: a wins iff a >= b or b is NaN."""
    with np.errstate(invalid="ignore"):
        return (a >= b) | _isnan(b)


def _select(wins: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(a, b)
        return np.where(wins(a, b), a, b)

    return ref


def _route(wins: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., Tuple[np.ndarray, ...]]:
    def grad(g: np.ndarray, a: np.ndarray, b: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        a, b = np.broadcast_arrays(a, b)
        w = wins(a, b)
        g = np.broadcast_to(g, w.shape)
        return np.where(w, g, 0.0), np.where(w, 0.0, g)

    return grad


def _errstate(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def wrapped(*args: Any, **kw: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(*args, **kw)

    return wrapped


# ---------------------------------------------------------------- the table


@dataclasses.dataclass(frozen=True)
class OpInfo:
    name: str
    op: Callable[..., Any]
    #: "binary", "unary", "reduction" (sum, mean), "clamp" (x, min, max),
    #: "extreme" (amin/amax over dims), "arg" (argmin/argmax over one dim or
    #: all) or "minmax_dim" (min/max: amin over all dims, or (values,
    #: indices) over one)
    kind: str
    #: forward reference: binary ref(a, b) / unary ref(a) with the inputs
    #: already cast to the compute dtype; reduction ref(a64, axis, keepdims)
    #: on float64/int64 data; clamp ref(x, lo, hi) (None: no bound) in the
    #: compute dtype; extreme/arg/minmax_dim ref(x, axis, keepdims) on x in
    #: its own dtype (values: the winners' bits; minmax_dim: the values).
    ref: Callable[..., np.ndarray]
    #: the plain NumPy function of the same name (documented differences
    #: against it are tested explicitly)
    numpy_fn: Optional[Callable[..., np.ndarray]]
    #: whether the op accepts its (promoted) input dtype
    accepts: Callable[[str], bool]
    #: result dtype from the promoted input dtype
    result: Callable[[str], str]
    #: the forward is exact (bit for bit) against ``ref`` for floats
    bit_exact: bool
    differentiable: bool
    #: gradients, float64: binary grad(g, a, b) -> (ga, gb) in the broadcast
    #: shape (un-reduced); unary grad(g, a) -> (ga,); reduction, extreme and
    #: minmax_dim grad(g, a, axis, keepdims) -> (ga,); clamp grad(g, x, lo,
    #: hi) -> (gx, glo, ghi) in the broadcast shape
    grad_ref: Optional[Callable[..., Tuple[np.ndarray, ...]]] = None
    _: dataclasses.KW_ONLY
    #: name of the autograd node
    node: Optional[str] = None
    #: operand values must stay away from zero (b of div) for gradients
    nonzero_b: bool = False
    #: reserved (forward mode and out= are tested for every row from the
    #: forward references: test_ops_numpy.py's jvp and out= sections)
    jvp_ref: Optional[Callable[..., Tuple[np.ndarray, ...]]] = None
    out_cases: Tuple[Any, ...] = ()
    #: the min/max family and minimum/maximum: values are a winner's bits
    #: (NaN payloads included), so forward checks compare every bit
    selection: bool = False
    #: the op's win rule a_wins(a, b) (selection ops; the fold's rule for a
    #: selecting reduction: the running winner a keeps its place against b)
    wins: Optional[Callable[[np.ndarray, np.ndarray], np.ndarray]] = None
    #: minmax_dim: NumPy's function for the indices (numpy_fn gives the values)
    numpy_index_fn: Optional[Callable[..., np.ndarray]] = None
    #: arg rows whose rule ignores NaN: a slice of NaNs only has no position
    #: (NumPy's nanargmin raises ValueError, and so does pylucid)
    refuses_all_nan: bool = False

    @property
    def schema_kind(self) -> str:
        return "elementwise" if self.kind in ("binary", "unary", "clamp") else "reduction"

    @property
    def arity(self) -> int:
        return {"binary": 2, "clamp": 3}.get(self.kind, 1)

    @property
    def outputs(self) -> int:
        return 2 if self.kind == "minmax_dim" else 1

    def supported(self, dt: str) -> bool:
        return self.accepts(dt)

    def __repr__(self) -> str:  # readable pytest ids
        return self.name


def _all(_: str) -> bool:
    return True


def _same(d: str) -> str:
    return d


def _not_bool(d: str) -> bool:
    return d != "bool"


def _float_only(d: str) -> bool:
    return d in FLOAT_NAMES


def _div_result(d: str) -> str:
    return d if d in FLOAT_NAMES else "float32"


def _sum_result(d: str) -> str:
    return d if d in FLOAT_NAMES else "int64"


def _axes_count(shape: Sequence[int], axis: Any) -> int:
    if axis is None:
        return int(np.prod(shape, dtype=np.int64))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return int(np.prod([shape[x] for x in axes], dtype=np.int64))


def _expand_back(g: np.ndarray, shape: Sequence[int], axis: Any, keepdims: bool) -> np.ndarray:
    if axis is None:
        axes = tuple(range(len(shape)))
    else:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(x % len(shape) for x in axes)
    if not keepdims:
        for x in sorted(axes):
            g = np.expand_dims(g, x)
    return np.broadcast_to(g, tuple(shape)).astype(np.float64)


def _sum_ref(a: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    return np.sum(a, axis=axis, keepdims=keepdims)


def _mean_ref(a: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # mean of an empty slice is NaN
        return np.mean(a, axis=axis, keepdims=keepdims)


# ---- the min/max family (docs/semantics.md): references


def clamp_ref(x: np.ndarray, lo: Optional[np.ndarray], hi: Optional[np.ndarray]) -> np.ndarray:
    """clamp = minimum(maximum(x, lo), hi) with the selection rule (a missing
    bound skipped): the winner's bits; at x == bound (+-0 included) x wins."""
    w = np.asarray(x)
    if lo is not None:
        w = _select(a_wins_max)(w, lo)
    if hi is not None:
        w = _select(a_wins_min)(w, hi)
    return np.asarray(w)


def clamp_grad_ref(g: np.ndarray, x: np.ndarray, lo: Optional[np.ndarray],
                   hi: Optional[np.ndarray]) -> Tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]:
    """(gx, glo, ghi) in the broadcast shape (un-reduced): the whole g to the
    operand whose bits the result is (None for a missing bound)."""
    arrs = [np.asarray(x)] + [np.asarray(b) for b in (lo, hi) if b is not None]
    shape = np.broadcast_shapes(np.shape(g), *[a.shape for a in arrs])
    g = np.broadcast_to(g, shape).astype(np.float64)
    xb = np.broadcast_to(x, shape)
    from_x = np.ones(shape, bool)
    from_lo = np.zeros(shape, bool)
    w = xb
    if lo is not None:
        lb = np.broadcast_to(lo, shape)
        keep = a_wins_max(w, lb)
        from_lo = ~keep
        from_x = keep
        w = np.where(keep, w, lb)
    from_hi = np.zeros(shape, bool)
    if hi is not None:
        hb = np.broadcast_to(hi, shape)
        keep = a_wins_min(w, hb)
        from_hi = ~keep
        from_x = from_x & keep
        from_lo = from_lo & keep
    z = np.zeros(shape)
    return (np.where(from_x, g, z), None if lo is None else np.where(from_lo, g, z),
            None if hi is None else np.where(from_hi, g, z))


def norm_axes(ndim: int, axis: Any) -> Tuple[int, ...]:
    """The reduced dims, non-negative and sorted (row-major order of the slice)."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(sorted(int(x) % ndim for x in axes))


def _order_key(x: np.ndarray) -> np.ndarray:
    """x as float64/int64 (order and NaN-ness kept), for NumPy's own
    functions in comparisons."""
    x = np.asarray(x)
    if x.dtype.kind in "biu":
        return x.astype(np.int64)
    return x.astype(np.float64)


Wins = Callable[[np.ndarray, np.ndarray], np.ndarray]


def extreme_index(x: np.ndarray, axis: Any, wins: Wins) -> Tuple[np.ndarray, np.ndarray]:
    """The winner of each reduced slice by the fold rule (docs/semantics.md):
    the slice in row-major order of the reduced dims, the running winner w
    keeping its place against the next element iff wins(w, x_k). Returns
    (values with keepdims, positions with keepdims) where a position indexes
    the slice flattened in row-major order."""
    x = np.asarray(x)
    axes = norm_axes(x.ndim, axis)
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes))
    lead = [x.shape[d] for d in kept]
    n = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    flat = moved.reshape(lead + [n])
    key = _order_key(flat)
    pos = np.zeros(lead, dtype=np.int64)
    w = key[..., 0] if n else np.zeros(lead)
    for k in range(1, n):
        keep = wins(w, key[..., k])
        pos = np.where(keep, pos, k)
        w = np.where(keep, w, key[..., k])
    vals = np.take_along_axis(flat, pos[..., None], axis=-1)[..., 0] if n else np.zeros(lead, x.dtype)
    keep_shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    return vals.reshape(keep_shape), pos.reshape(keep_shape)


def all_nan_slice(x: np.ndarray, axis: Any) -> bool:
    """Whether some reduced slice of x holds NaNs only."""
    x = np.asarray(x)
    if x.dtype.kind in "biu" or x.size == 0:
        return False
    return bool(np.isnan(_order_key(x)).all(axis=norm_axes(x.ndim, axis)).any())


def _squeeze(r: np.ndarray, ndim: int, axis: Any, keepdims: bool) -> np.ndarray:
    if keepdims:
        return r
    axes = norm_axes(ndim, axis)
    return r.reshape(tuple(n for d, n in enumerate(r.shape) if d not in axes))


def extreme_ref(wins: Wins) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
        x = np.asarray(x)
        if axis == ():
            return x.copy()
        v, _ = extreme_index(x, axis, wins)
        return _squeeze(v, x.ndim, axis, keepdims)

    return ref


def arg_ref(wins: Wins) -> Callable[..., np.ndarray]:
    """The fold's positions (flat index when axis is None), keepdims as
    pylucid: np.argmin/np.argmax (nanargmin/nanargmax) exactly."""

    def ref(x: np.ndarray, axis: Optional[int], keepdims: bool) -> np.ndarray:
        x = np.asarray(x)
        _, pos = extreme_index(x, axis, wins)
        return _squeeze(pos, x.ndim, axis, keepdims)

    return ref


def extreme_grad_ref(wins: Wins) -> Callable[..., Tuple[np.ndarray]]:
    """The whole upstream gradient of each output at its winner's position."""

    def grad(g: np.ndarray, x: np.ndarray, axis: Any, keepdims: bool) -> Tuple[np.ndarray]:
        x = np.asarray(x)
        if axis == ():
            return (np.broadcast_to(g, x.shape).astype(np.float64),)
        axes = norm_axes(x.ndim, axis)
        _, pos = extreme_index(x, axis, wins)
        kept = [d for d in range(x.ndim) if d not in axes]
        lead = [x.shape[d] for d in kept]
        n = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
        gk = np.asarray(g, dtype=np.float64).reshape(pos.shape)  # keepdims layout
        gm = np.zeros(lead + [n])
        np.put_along_axis(gm, np.transpose(pos, kept + list(axes)).reshape(lead + [1]),
                          np.transpose(gk, kept + list(axes)).reshape(lead + [1]), axis=-1)
        moved_shape = lead + [x.shape[d] for d in axes]
        back = np.argsort(kept + list(axes))
        return (np.transpose(gm.reshape(moved_shape), back),)

    return grad


OPS = [
    OpInfo(
        "minimum", ops.minimum, "binary", _select(a_wins_min), np.minimum, _all, _same, True, True,
        grad_ref=_route(a_wins_min), node="MinimumBackward", selection=True, wins=a_wins_min,
    ),
    OpInfo(
        "maximum", ops.maximum, "binary", _select(a_wins_max), np.maximum, _all, _same, True, True,
        grad_ref=_route(a_wins_max), node="MaximumBackward", selection=True, wins=a_wins_max,
    ),
    OpInfo(
        "add", ops.add, "binary", _errstate(np.add), np.add, _all, _same, True, True,
        grad_ref=lambda g, a, b: (np.broadcast_to(g, np.broadcast_shapes(g.shape, a.shape, b.shape)),) * 2,
        node="AddBackward",
    ),
    OpInfo(
        "sub", ops.sub, "binary", _errstate(np.subtract), np.subtract, _not_bool, _same, True, True,
        grad_ref=lambda g, a, b: (np.broadcast_to(g, np.broadcast_shapes(g.shape, a.shape, b.shape)),
                                  -np.broadcast_to(g, np.broadcast_shapes(g.shape, a.shape, b.shape))),
        node="SubBackward",
    ),
    OpInfo(
        "mul", ops.mul, "binary", _errstate(np.multiply), np.multiply, _all, _same, True, True,
        grad_ref=lambda g, a, b: (g * b, g * a), node="MulBackward",
    ),
    OpInfo(
        "div", ops.div, "binary", _errstate(np.true_divide), np.true_divide, _all, _div_result, True, True,
        grad_ref=lambda g, a, b: (g / b, -g * a / (b * b)), node="DivBackward", nonzero_b=True,
    ),
    OpInfo(
        "neg", ops.neg, "unary", _errstate(np.negative), np.negative, _not_bool, _same, True, True,
        grad_ref=lambda g, a: (-np.broadcast_to(g, a.shape),), node="NegBackward",
    ),
    OpInfo(
        "sum", ops.sum, "reduction", _sum_ref, np.sum, _all, _sum_result, False, True,
        grad_ref=lambda g, a, axis, keepdims: (_expand_back(g, a.shape, axis, keepdims),),
        node="SumBackward",
    ),
    OpInfo(
        "mean", ops.mean, "reduction", _mean_ref, np.mean, _float_only, _same, False, True,
        grad_ref=lambda g, a, axis, keepdims: (
            _expand_back(g, a.shape, axis, keepdims) / max(_axes_count(a.shape, axis), 1),),
        node="MeanBackward",
    ),
    OpInfo(
        "fmin", ops.fmin, "binary", _select(a_wins_fmin), np.fmin, _all, _same, True, True,
        grad_ref=_route(a_wins_fmin), node="FminBackward", selection=True, wins=a_wins_fmin,
    ),
    OpInfo(
        "fmax", ops.fmax, "binary", _select(a_wins_fmax), np.fmax, _all, _same, True, True,
        grad_ref=_route(a_wins_fmax), node="FmaxBackward", selection=True, wins=a_wins_fmax,
    ),
    OpInfo(
        "clamp", ops.clamp, "clamp", clamp_ref, np.clip, _all, _same, True, True,
        grad_ref=clamp_grad_ref, node="ClampBackward", selection=True,
    ),
    OpInfo(
        "amin", ops.amin, "extreme", extreme_ref(a_wins_min), np.amin, _all, _same, True, True,
        grad_ref=extreme_grad_ref(a_wins_min), node="AminBackward", selection=True, wins=a_wins_min,
    ),
    OpInfo(
        "amax", ops.amax, "extreme", extreme_ref(a_wins_max), np.amax, _all, _same, True, True,
        grad_ref=extreme_grad_ref(a_wins_max), node="AmaxBackward", selection=True, wins=a_wins_max,
    ),
    OpInfo(
        "argmin", ops.argmin, "arg", arg_ref(a_wins_min), np.argmin, _all, lambda d: "int64", True, False, wins=a_wins_min,
    ),
    OpInfo(
        "argmax", ops.argmax, "arg", arg_ref(a_wins_max), np.argmax, _all, lambda d: "int64", True, False, wins=a_wins_max,
    ),
    OpInfo(
        "min", ops.min, "minmax_dim", extreme_ref(a_wins_min), np.min, _all, _same, True, True,
        grad_ref=extreme_grad_ref(a_wins_min), node="MinBackward", selection=True, wins=a_wins_min, numpy_index_fn=np.argmin,
    ),
    OpInfo(
        "max", ops.max, "minmax_dim", extreme_ref(a_wins_max), np.max, _all, _same, True, True,
        grad_ref=extreme_grad_ref(a_wins_max), node="MaxBackward", selection=True, wins=a_wins_max, numpy_index_fn=np.argmax,
    ),
    OpInfo(
        "nanmin", ops.nanmin, "extreme", extreme_ref(a_wins_fmin), np.nanmin, _all, _same, True, True,
        grad_ref=extreme_grad_ref(a_wins_fmin), node="NanminBackward", selection=True, wins=a_wins_fmin,
    ),
    OpInfo(
        "nanmax", ops.nanmax, "extreme", extreme_ref(a_wins_fmax), np.nanmax, _all, _same, True, True,
        grad_ref=extreme_grad_ref(a_wins_fmax), node="NanmaxBackward", selection=True, wins=a_wins_fmax,
    ),
    OpInfo(
        "nanargmin", ops.nanargmin, "arg", arg_ref(a_wins_fmin), np.nanargmin, _all, lambda d: "int64", True, False, wins=a_wins_fmin, refuses_all_nan=True,
    ),
    OpInfo(
        "nanargmax", ops.nanargmax, "arg", arg_ref(a_wins_fmax), np.nanargmax, _all, lambda d: "int64", True, False, wins=a_wins_fmax, refuses_all_nan=True,
    ),
]
OPS_BY_NAME = {o.name: o for o in OPS}
#: public names that are another row's op object (NumPy's name for it)
ALIASES = {"clip": "clamp"}
#: registered ops that are not public callables, with the tests covering them
#: (the library's own op table, tests_go/optable_test.go, has rows for them)
INTERNAL_OPS = {
    "cast": "test_ops_numpy.py casts, test_half.py",
    "clamp_route": "the clamp gradients",
    "clamp_select": "the clamp double gradients and forward mode",
    "gather": "the amin/amax/min/max double gradients and forward mode",
    "scatter": "the amin/amax/min/max gradients",
    "copy": "test_zero_copy.py",
    "expand": "the sum/mean gradients",
    "reshape": "the sum/mean gradients",
    "route": "the minimum/maximum gradients",
    "select": "the minimum/maximum double gradients",
    # The Tensor basics' view and indexing ops (test_tensor_basics.py, tests_go/views_test.go).
    "permute": "test_tensor_basics.py transpose/permute/T",
    "slice": "test_tensor_basics.py basic indexing",
    "slice_backward": "test_tensor_basics.py basic indexing gradients",
    "view": "test_tensor_basics.py view/squeeze",
    "take": "test_tensor_basics.py advanced indexing",
    "take_backward": "test_tensor_basics.py advanced indexing gradients",
}
BINARY = [o for o in OPS if o.kind == "binary"]
UNARY = [o for o in OPS if o.kind == "unary"]
REDUCTIONS = [o for o in OPS if o.kind == "reduction"]
DIFFERENTIABLE = [o for o in OPS if o.differentiable]
#: the reductions of the min/max family: amin/amax and nanmin/nanmax (dims),
#: argmin/argmax and nanargmin/nanargmax, and min/max over one dim
EXTREMES = [o for o in OPS if o.kind in ("extreme", "arg", "minmax_dim")]


def reference(info: OpInfo, *arrays: np.ndarray, out_dtype: str) -> np.ndarray:
    """The forward reference of an elementwise op: inputs cast to the op's
    compute dtype (its result dtype), then the NumPy function in that dtype."""
    npd = NP_OF[out_dtype]
    cast = [np.asarray(x).astype(npd) for x in arrays]
    return np.asarray(info.ref(*cast)).astype(npd)


# ---------------------------------------------------------------- data


def sample(shape: Sequence[int], name: str, rng: np.random.Generator, *, nonzero: bool = False) -> np.ndarray:
    """Random values of dtype ``name`` with many ties (small value sets), so
    that comparison ops see equal operands often."""
    shape = tuple(shape)
    return np.asarray(_sample(shape, name, rng, nonzero), dtype=NP_OF[name]).reshape(shape)


def _sample(shape: Tuple[int, ...], name: str, rng: np.random.Generator, nonzero: bool) -> Any:
    npd = NP_OF[name]
    if name == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if name == "uint8":
        x = rng.integers(0, 12, size=shape)
        if nonzero:
            x = np.where(x == 0, 1, x)
        return x.astype(npd)
    if name in INT_NAMES:
        x = rng.integers(-6, 7, size=shape)
        if nonzero:
            x = np.where(x == 0, 3, x)
        return x.astype(npd)
    # floats: quarter steps (exact in every float dtype) plus some non-dyadic values
    x = rng.integers(-12, 13, size=shape) / 4.0
    if x.size:
        extra = rng.standard_normal(shape)
        x = np.where(rng.random(shape) < 0.5, x, extra)
    if nonzero:
        x = np.where(np.abs(x) < 0.25, 0.5 + np.abs(x), x)
    return np.asarray(x).astype(npd)


def distinct_pair(shape_a: Sequence[int], shape_b: Sequence[int], rng: np.random.Generator,
                  spacing: float = 0.0625) -> Tuple[np.ndarray, np.ndarray]:
    """float64 a, b whose every value is distinct (all pairwise gaps >=
    spacing), so min/max are differentiable at every point, with |b| >= 0.5
    (so that division is smooth too)."""
    na = int(np.prod(shape_a, dtype=np.int64))
    nb = int(np.prod(shape_b, dtype=np.int64))
    grid = np.arange(-64, 64) * spacing
    grid = grid[np.abs(grid) >= 0.5]
    vals = rng.choice(grid, size=na + nb, replace=False)
    a = vals[:na].reshape(shape_a).astype(np.float64)
    b = vals[na:].reshape(shape_b).astype(np.float64)
    return a, b


# ---------------------------------------------------------------- NumPy layouts

LAYOUTS = ["contiguous", "transposed", "negative_stride", "zero_stride", "readonly"]


def layout(x: np.ndarray, kind: str) -> np.ndarray:
    """``x`` re-expressed in a memory layout; the values are those of the
    returned array (zero_stride replaces x by a broadcast of its first row)."""
    x = np.asarray(x)
    if kind == "contiguous":
        return x.copy(order="C")
    if kind == "transposed":
        # the .T of a bigger array: the values live in a strided window of a
        # larger buffer laid out in the reversed order
        if x.ndim == 0:
            return x.copy()
        big_shape = tuple(n + 2 for n in reversed(x.shape))
        big = np.zeros(big_shape, dtype=x.dtype)
        window = tuple(slice(1, 1 + n) for n in reversed(x.shape))
        big[window] = x.T
        v = big[window].T
        assert v.shape == x.shape and np.array_equal(bits(v), bits(x))
        return v
    if kind == "negative_stride":
        if x.ndim == 0:
            return x.copy()
        flipped = np.ascontiguousarray(x[(slice(None, None, -1),) * x.ndim])
        v = flipped[(slice(None, None, -1),) * x.ndim]
        assert np.array_equal(bits(v), bits(x))
        return v
    if kind == "zero_stride":
        if x.ndim == 0 or x.shape[0] == 0:
            return np.broadcast_to(x, x.shape)
        return np.broadcast_to(x[:1], x.shape)
    if kind == "readonly":
        v = np.array(x, copy=True)
        v.flags.writeable = False
        return v
    raise ValueError(kind)


#: the broadcast pairs of the brief
BROADCAST_PAIRS = [
    ((), ()),
    ((1,), ()),
    ((2, 1), (2,)),
    ((3, 1, 2), (1, 3, 2)),
    ((0, 3), (1, 3)),
    ((4, 1, 5), (6, 1)),
    # not in the brief's list: same shapes, so the contiguous fast paths run
    ((3, 5), (3, 5)),
]


def pair_id(p: Tuple[Tuple[int, ...], Tuple[int, ...]]) -> str:
    return "%s-%s" % ("x".join(map(str, p[0])) or "s", "x".join(map(str, p[1])) or "s")
