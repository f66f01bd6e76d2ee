"""pylucid's min/max family on Dask arrays, chunk by chunk (docs/interop.md, "Dask").

    >>> import dask.array as da
    >>> import pylucid.dask as pdk
    >>> a = da.from_array([[1.0, 5.0], [3.0, 3.0]], chunks=1)
    >>> pdk.argmax(a, axis=None).compute()     # the first winner across chunks
    array(1)
    >>> (ga,) = pdk.grad(lambda a: pdk.amax(a, axis=1).sum(), a)
    >>> ga.compute()                            # the tie in row 1 goes whole to its first element
    array([[0., 1.],
           [1., 0.]])

``minimum``, ``maximum``, ``fmin``, ``fmax``, ``clamp`` (alias ``clip``),
``amin``, ``amax``, ``argmin`` and ``argmax`` take Dask's argument names
(``x1, x2``; ``a, axis, keepdims, split_every``; ``clamp(x, min=None,
max=None)``) and return Dask arrays; NumPy arrays are wrapped with
``da.asarray`` and Python/NumPy scalars pass to pylucid unchanged. Each
chunk runs pylucid's kernels (on the scheduler's workers), so the values
are pylucid's on the whole array, bit for bit, with its rules
(docs/semantics.md).

Design
------
* Elementwise ops are one ``da.blockwise`` each, with NumPy's broadcasting
  (dims aligned from the right; a size-1 dim is broadcast, other chunkings
  are unified by Dask). The result dtype and the errors for unsupported
  dtypes come from pylucid itself, run on the client on one-element
  stand-ins; shapes that do not broadcast raise ``ValueError`` there.
* Reductions use Dask's arg-reduction machinery
  (``dask.array.reductions.arg_reduction``): each chunk gives pylucid's
  winner and its position in the slice (the index along ``axis``, or the
  flat row-major index for ``axis=None``); the tree's combine and aggregate
  steps put the candidates of a slice in order of position and let pylucid's
  ``argmin``/``argmax`` pick among them, so the winner is the first in
  row-major order across chunks too, NaN included (Dask's own combine breaks
  ties in chunk-grid order instead). ``amin``/``amax`` return the winner's
  value, ``argmin``/``argmax`` its position. ``axis`` is ``None``, one axis,
  or a tuple naming one axis or all of them.
* Gradients: :func:`grad` calls ``fn`` while a tape (a context variable, so
  other threads are not affected) records each pylucid.dask op it builds:
  op, operands and attributes, keyed by the result's Dask name. Outside
  ``grad`` nothing is recorded. The loss must be the op result ``X`` itself
  (0-d), ``X.sum()`` or ``X.mean()`` with Dask's defaults, or the same of
  an input; grad recognises those by building ``X.sum()``/``X.mean()``
  itself and comparing Dask's deterministic names. The seed gradient is a
  broadcast ``1`` (``1/n`` for a mean, rounded as pylucid's
  ``MeanBackward`` does). Walking back, each elementwise op's chunks are
  re-run by pylucid with ``requires_grad`` and
  :func:`pylucid.autograd.grad` routes the gradient chunk (pylucid sums a
  broadcast operand within the chunk; Dask sums those partial gradients
  across chunks, the only sum involved). A reduction's gradient goes to the
  chunk holding the global winner (the positions computed by the forward
  reduction), where pylucid's own backward of the chunk's reduction puts it
  on the chunk's first winner, which is that global winner.
* Workers: what crosses to a worker is module-level functions of this
  module (pickled by reference), op names and plain data; workers import
  pylucid themselves. Use worker processes that are spawned (the default of
  ``dask.distributed``: ``distributed.worker.multiprocessing-method:
  spawn``); a worker forked from a process that imported pylucid refuses to
  run it (docs/errors.md).

Limits: ``fn`` may only combine pylucid.dask functions (any number, nested)
and end with one ``.sum()``/``.mean()``; any other Dask operation on a path
from an input to the loss (arithmetic, ``rechunk``, ``astype``, a sum in the
middle) raises ``ValueError`` instead of losing a gradient; arrays not
derived from the inputs are constants. First order only. Gradients need
floating inputs; ``argmin``/``argmax`` and integer ops have none. Gradients
are chunked like the op results that produced them. Unknown chunk sizes
(``nan``) raise ``ValueError`` (call ``compute_chunk_sizes()``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import numbers
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, cast

import dask.array as da
import numpy as np
from dask.array.reductions import arg_reduction
from dask.base import tokenize

from . import _lib, autograd, ops
from .amp import autocast, is_autocast_enabled
from .tensor import Tensor, from_numpy

ArrayLike = Any
Axis = Union[None, int, Sequence[int]]
Key = Tuple[Any, ...]

# The ops this bridge offers are the records that list it ("dask" in their
# bridges), each in the form its signature says; a selecting reduction's
# positions come from the arg op of the same rule (amin: argmin, nanmin:
# nanargmin).
_RECORDS = _lib.bridge_records("dask")
_ARG_OF = {v["name"]: a["name"] for v in _RECORDS if v["signature"] == "reduction"
           for a in _lib.schema_table() if a["signature"] == "arg" and a["rule"] == v["rule"]}
_VALUES_OF = {a: v for v, a in _ARG_OF.items()}
_SIGNATURE = {s["name"]: s["signature"] for s in _RECORDS}
_RULE = {s["name"]: s["rule"] for s in _RECORDS}


# ---- on the workers: chunks as pylucid tensors


def _plain() -> Any:
    """Autocast off (a task may run on a thread whose autocast is on)."""
    return autocast(enabled=False) if is_autocast_enabled() else contextlib.nullcontext()


def _grad_on() -> Any:
    return contextlib.nullcontext() if autograd.is_grad_enabled() else autograd.enable_grad()


def _operand(c: Any, requires_grad: bool = False) -> Any:
    """A chunk as a tensor sharing its memory; a scalar passes unchanged."""
    if isinstance(c, np.ndarray):
        return from_numpy(c, requires_grad)
    return c


def _op(key: Key, ts: Sequence[Any]) -> Tensor:
    """The pylucid computation of an elementwise op."""
    op = getattr(ops, key[0])
    if _SIGNATURE[key[0]] == "clamp":
        rest = list(ts[1:])
        lo = rest.pop(0) if key[1] else None
        hi = rest.pop(0) if key[2] else None
        return cast(Tensor, op(ts[0], lo, hi))
    return cast(Tensor, op(ts[0], ts[1]))


def _apply_block(*chunks: Any, spec: Key) -> np.ndarray:
    with _plain():
        return _op(spec, [_operand(c) for c in chunks]).numpy()


def _route_block(*chunks: Any, spec: Key, diff: Tuple[bool, ...], nd: int) -> Tuple[np.ndarray, ...]:
    """The gradients of the differentiable operands (diff) for one output
    chunk: pylucid's vector-Jacobian product of the op with the gradient
    chunk (the last chunk), each in the output chunk's rank (a broadcast
    operand's gradient summed within the chunk by pylucid)."""
    xs, g = chunks[:-1], chunks[-1]
    with _plain(), _grad_on():
        ts = [_operand(c, d) for c, d in zip(xs, diff)]
        y = _op(spec, ts)
        wrt = [t for t, d in zip(ts, diff) if d]
        gs = autograd.grad(y, wrt, grad_outputs=[from_numpy(np.asarray(g))], allow_unused=True)
    out = []
    for t, gi in zip(wrt, gs):
        a = gi.numpy() if gi is not None else np.zeros(t.shape, np.asarray(g).dtype)
        out.append(a.reshape((1,) * (nd - a.ndim) + a.shape))
    return tuple(out)


def _pack(vals: np.ndarray, arg: np.ndarray) -> np.ndarray:
    r = np.empty(vals.shape, dtype=[("vals", vals.dtype), ("arg", np.int64)])
    r["vals"] = vals
    r["arg"] = arg
    return r


def _positions(name: str, x: np.ndarray, axis: Optional[int]) -> np.ndarray:
    """The positions of the winners of reduction name's fold over axis (or
    all), keepdims, by pylucid's arg op of the same rule. Under a rule that
    ignores NaN, a slice of NaNs only has its first element as the fold's
    winner, a position the arg op refuses to give (nanargmin raises, as
    NumPy's): such slices are zeros here, whose first element wins too."""
    if _RULE[name] in ("fmin", "fmax") and x.dtype.kind == "f" and x.size:
        all_nan = np.isnan(x).all(axis=axis, keepdims=True)
        if all_nan.any():
            x = np.where(all_nan, np.zeros((), x.dtype), x)
    with _plain():
        return cast(np.ndarray, getattr(ops, _ARG_OF[name])(from_numpy(_contiguous(x)), axis, True).numpy())


def _arg_chunk(name: str, x: np.ndarray, axis: Tuple[int, ...], offset_info: Any) -> np.ndarray:
    """One chunk's winner (pylucid's amin/amax) and its position in the
    whole slice, as dask's arg_chunk lays them out."""
    arg_axis = None if len(axis) == x.ndim or x.ndim == 1 else axis[0]
    with _plain():
        t = from_numpy(x)
        vals = getattr(ops, name)(t, arg_axis, True).numpy()
    arg = _positions(name, x, arg_axis).astype(np.int64)
    if x.ndim > 0:
        if arg_axis is None:
            offset, total_shape = offset_info
            ind = np.unravel_index(int(arg.ravel()[0]), x.shape)
            arg[...] = np.ravel_multi_index(tuple(o + i for o, i in zip(offset, ind)), total_shape)
        else:
            arg += offset_info
    return _pack(vals, arg)


def _arg_combine(name: str, data: np.ndarray, axis: Any = None, keepdims: bool = False, refuse: str = "") -> np.ndarray:
    """The winner among a slice's candidates: put them in order of position
    and let pylucid's arg op of the same rule pick (ties, and NaN by the
    rule, -> the first). refuse, at the last step of a NaN-ignoring arg op
    (nanargmin), names it: a NaN winner means a slice of NaNs only, which
    it refuses, as pylucid does on the whole array."""
    axes = tuple(range(data.ndim)) if axis is None else tuple(sorted(axis))
    vals, arg = data["vals"], data["arg"]
    keep = [i for i in range(data.ndim) if i not in axes]
    lead = tuple(data.shape[i] for i in keep)
    n = int(np.prod([data.shape[i] for i in axes], dtype=np.int64))  # the candidates (lead may hold a 0)
    v = vals.transpose(keep + list(axes)).reshape(lead + (n,))
    p = arg.transpose(keep + list(axes)).reshape(lead + (n,))
    order = np.argsort(p, axis=-1, kind="stable")
    v = _contiguous(np.take_along_axis(v, order, -1))
    p = np.take_along_axis(p, order, -1)
    w = _positions(name, v, v.ndim - 1)
    shape = tuple(1 if i in axes else s for i, s in enumerate(data.shape))
    vals = np.take_along_axis(v, w, -1).reshape(shape)
    if refuse and vals.dtype.kind == "f" and np.isnan(vals).any():
        raise ValueError("%s: All-NaN slice encountered" % refuse)
    arg = np.take_along_axis(p, w, -1).reshape(shape)
    if not keepdims:
        vals, arg = vals.squeeze(axes), arg.squeeze(axes)
    return _pack(vals, arg)


def _contiguous(a: Any) -> np.ndarray:
    """a as a C-contiguous array of its own rank (np.ascontiguousarray makes a
    0-d array 1-d: a 0-d Dask result computed to shape (1,))."""
    return np.array(a, order="C", copy=None) if np.ndim(a) else np.array(a)


def _field(block: np.ndarray, field: str) -> np.ndarray:
    return _contiguous(block[field])


def _scatter_block(x: np.ndarray, g: np.ndarray, pos: np.ndarray, spec: Key,
                   block_info: Optional[Dict[Any, Any]] = None) -> np.ndarray:
    """The gradient of amin/amax for one chunk: the upstream gradient of the
    slices whose global winner (pos) lies in this chunk goes to the chunk's
    first winner by pylucid's own backward (that winner is the global one)."""
    name, axis, shape = spec
    if x.size == 0:  # a zero-size chunk holds no winner (and pylucid refuses to reduce it)
        return np.zeros(x.shape, x.dtype)
    assert block_info is not None
    loc = block_info[0]["array-location"]
    g = np.asarray(g)
    if axis is None:
        idx = np.unravel_index(int(pos.reshape(-1)[0]), shape) if shape else ()
        inside = all(s <= i < e for i, (s, e) in zip(idx, loc))
        gl = g if inside else np.zeros_like(g)
    else:
        s, e = loc[axis]
        gl = np.where((pos >= s) & (pos < e), g, np.zeros((), g.dtype))
    with _plain(), _grad_on():
        t = from_numpy(x, True)
        y = getattr(ops, name)(t, axis, True)
        (gx,) = autograd.grad(y, [t], grad_outputs=[from_numpy(_contiguous(gl))])
    assert gx is not None
    return gx.numpy()


# ---- on the client: arguments, graphs and the tape


@dataclass(frozen=True)
class _Node:
    """How a pylucid.dask result was made (recorded only inside grad)."""

    key: Key  # ("minimum",) ... ("clamp", has_lo, has_hi) or ("amin", axis, keepdims)
    out: da.Array
    operands: Tuple[Any, ...]  # Dask arrays or scalars
    pos: Optional[da.Array] = None  # a reduction's winner positions (keepdims layout)


_TAPE: contextvars.ContextVar[Optional[Dict[str, _Node]]] = contextvars.ContextVar("pylucid_dask_tape", default=None)


def _record(node: _Node) -> None:
    tape = _TAPE.get()
    if tape is not None:
        tape[node.out.name] = node


def _is_scalar(x: Any) -> bool:
    return isinstance(x, (numbers.Number, np.generic)) and not isinstance(x, np.ndarray)


def _as_dask(x: Any, fn: str) -> da.Array:
    if isinstance(x, da.Array):
        a = x
    else:
        try:
            a = da.asarray(x)
        except Exception as e:  # noqa: BLE001 (dask's own error, named)
            raise TypeError("pylucid.dask.%s: cannot make a Dask array of %s (%s)" % (fn, type(x).__name__, e)) from e
    if any(np.isnan(c) for cs in a.chunks for c in cs):
        raise ValueError("pylucid.dask.%s: the array has unknown chunk sizes (nan); call "
                         "x.compute_chunk_sizes() first" % fn)
    return a


def _stand_in(x: Any) -> Any:
    """A tensor of x's dtype with at most one element per dim (zero-size
    where x is), on which pylucid checks dtypes and arguments with its own
    errors; scalars stand for themselves."""
    if isinstance(x, da.Array):
        return from_numpy(np.zeros(tuple(min(s, 1) for s in x.shape), x.dtype))
    return x


def _meta(nd: int, dtype: Any) -> np.ndarray:
    return np.empty((0,) * nd, dtype)


def _floating(dt: Any) -> bool:
    return bool(np.issubdtype(np.dtype(dt), np.floating)) or np.dtype(dt).name == "bfloat16"


def _elementwise(key: Key, fn: str, operands: Sequence[Any]) -> da.Array:
    xs: List[Any] = [x if _is_scalar(x) else _as_dask(x, fn) for x in operands]
    arrays = [x for x in xs if isinstance(x, da.Array)]
    try:
        shape = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    except ValueError:
        raise ValueError("pylucid.dask.%s: shapes %s do not broadcast"
                         % (fn, " and ".join(str(a.shape) for a in arrays))) from None
    with _plain():
        dt = np.dtype(_op(key, [_stand_in(x) for x in xs]).numpy().dtype)  # pylucid's promotion and dtype errors
    nd = len(shape)
    args: List[Any] = []
    for x in xs:
        args += [x, tuple(range(nd - x.ndim, nd))] if isinstance(x, da.Array) else [x, None]
    name = "pylucid-%s-%s" % (key[0], tokenize(key, *xs))
    out = da.blockwise(_apply_block, tuple(range(nd)), *args, name=name, dtype=dt, meta=_meta(nd, dt), spec=key)
    _record(_Node(key, out, tuple(xs)))
    return out


def _axis_in_range(axis: Any, nd: int, fn: str) -> int:
    """axis (an int, negative counting from the end) normalised; out of
    range raises NumPy's AxisError (a ValueError and an IndexError), as
    pylucid raises for a dim out of range."""
    ax = operator.index(axis)
    if not -nd <= ax < nd:
        raise np.exceptions.AxisError("pylucid.dask.%s: axis %d is out of range for %d dimensions" % (fn, ax, nd))
    return ax % nd


def _one_axis(axis: Axis, nd: int, fn: str, tuples: bool) -> Optional[int]:
    """None (every axis) or the one reduced axis, normalised."""
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        if not tuples:
            raise TypeError("pylucid.dask.%s: axis must be None or an int, got %r" % (fn, axis))
        axes = sorted({_axis_in_range(a, nd, fn) for a in axis})
        if len(axes) != len(axis):
            raise ValueError("pylucid.dask.%s: repeated axis in %r" % (fn, axis))
        if len(axes) == nd:
            return None
        if len(axes) == 1:
            return axes[0]
        raise NotImplementedError("pylucid.dask.%s reduces one axis or all of them, got axis=%r" % (fn, axis))
    return _axis_in_range(cast(int, axis), nd, fn)


def _without_empty_chunks(x: da.Array, ax: Optional[int]) -> da.Array:
    """x rechunked without its zero-size chunks along the reduced axes (all
    of them for None), where the axis has other chunks: a chunk with nothing
    to reduce gives no candidate (``x[x > 0].compute_chunk_sizes()`` makes
    such chunks). An axis of size 0 stays: pylucid raises for it."""
    chunks = list(x.chunks)
    for d in range(x.ndim) if ax is None else (ax,):
        kept = tuple(c for c in x.chunks[d] if c)
        if kept and len(kept) != len(x.chunks[d]):
            chunks[d] = kept
    return x if chunks == list(x.chunks) else x.rechunk(tuple(chunks))


def _winners(name: str, a: ArrayLike, axis: Axis, split_every: Any, fn: str,
             tuples: bool) -> Tuple[da.Array, da.Array, da.Array, Optional[int]]:
    """(x, values, positions, axis) of amin/amax's winners, keepdims layout."""
    x = _as_dask(a, fn)
    ax = _one_axis(axis, x.ndim, fn, tuples)
    with _plain():
        getattr(ops, name)(_stand_in(x), ax, True)  # pylucid's errors: dtypes, zero-size slices
    chunk = functools.partial(_arg_chunk, name)
    combine = functools.partial(_arg_combine, name)
    refuse = fn if fn in _VALUES_OF and _RULE[fn] in ("fmin", "fmax") else ""
    aggregate = functools.partial(_arg_combine, name, refuse=refuse)
    xr = _without_empty_chunks(x, ax)
    both = arg_reduction(xr, chunk, combine, aggregate, axis=ax, keepdims=True, split_every=split_every)
    meta_nd = both.ndim
    vals = both.map_blocks(_field, field="vals", dtype=x.dtype, meta=_meta(meta_nd, x.dtype))
    pos = both.map_blocks(_field, field="arg", dtype=np.int64, meta=_meta(meta_nd, np.int64))
    return x, vals, pos, ax


def _squeeze(y: da.Array, ax: Optional[int], keepdims: bool) -> da.Array:
    if keepdims:
        return y
    return y.reshape(()) if ax is None else y.squeeze(axis=ax)


def _reduction(name: str, a: ArrayLike, axis: Axis, keepdims: bool, split_every: Any) -> da.Array:
    x, vals, pos, ax = _winners(name, a, axis, split_every, name, True)
    out = _squeeze(vals, ax, bool(keepdims))
    _record(_Node((name, ax, bool(keepdims)), out, (x,), pos))
    return out


def _arg(name: str, a: ArrayLike, axis: Optional[int], keepdims: bool, split_every: Any) -> da.Array:
    _, _, pos, ax = _winners(_VALUES_OF[name], a, axis, split_every, name, False)
    return _squeeze(pos, ax, bool(keepdims))


# ---- the public functions, from the records


def _binary_fn(name: str) -> Callable[..., da.Array]:
    def fn(x1: ArrayLike, x2: ArrayLike) -> da.Array:
        return _elementwise((name,), name, (x1, x2))

    return fn


def _clamp_fn(name: str) -> Callable[..., da.Array]:
    def fn(x: ArrayLike, min: Optional[ArrayLike] = None, max: Optional[ArrayLike] = None) -> da.Array:
        operands, given = _lib.clamp_operands(name, x, min, max)
        return _elementwise((name,) + given, name, operands)

    return fn


def _reduction_fn(name: str) -> Callable[..., da.Array]:
    def fn(a: ArrayLike, axis: Axis = None, keepdims: bool = False, split_every: Any = None) -> da.Array:
        return _reduction(name, a, axis, keepdims, split_every)

    return fn


def _arg_fn(name: str) -> Callable[..., da.Array]:
    def fn(a: ArrayLike, axis: Optional[int] = None, keepdims: bool = False, split_every: Any = None) -> da.Array:
        return _arg(name, a, axis, keepdims, split_every)

    return fn


_FORMS: Dict[str, Callable[[str], Callable[..., da.Array]]] = {
    "binary": _binary_fn, "clamp": _clamp_fn, "reduction": _reduction_fn, "arg": _arg_fn}

__all__ = ["grad"] + _lib.publish(globals(), _RECORDS, _FORMS, (
    "``da.%s`` with pylucid's rule, chunk by chunk (Dask's argument names: ``x1, x2``; "
    "``a, axis, keepdims, split_every``; ``x, min, max``).\n\n%s"))


if TYPE_CHECKING:  # the type checker's view of the functions set above (run-time cost: see ops.py)
    def __getattr__(name: str) -> Callable[..., da.Array]: ...


# ---- gradients


def _mean_seed(dtype: Any, n: int) -> Any:
    """1/n in dtype, rounded as pylucid's MeanBackward rounds it."""
    with _plain():
        return ops.div(from_numpy(np.ones((), dtype)), float(n)).numpy()[()]


def _seed(loss: da.Array, tape: Dict[str, _Node], xs: Sequence[da.Array]) -> Tuple[str, da.Array]:
    """The array the loss reduces (its name) and the loss's gradient with
    respect to it (a broadcast view: no memory per chunk)."""
    known: Dict[str, da.Array] = {n.out.name: n.out for n in tape.values()}
    known.update((x.name, x) for x in xs)
    if loss.name in known:
        return loss.name, da.ones((), loss.dtype)
    for x in known.values():
        if not _floating(x.dtype):
            continue
        if x.sum().name == loss.name:
            return x.name, da.broadcast_to(da.ones((), x.dtype), x.shape, chunks=x.chunks)
        if x.mean().name == loss.name:
            one = da.from_array(np.asarray(_mean_seed(x.dtype, x.size)))
            return x.name, da.broadcast_to(one, x.shape, chunks=x.chunks)
    raise ValueError("pylucid.dask.grad: fn must return X.sum() or X.mean() (Dask's, default arguments) of an "
                     "array X made by a pylucid.dask function inside fn, or of an input, or such an X itself if "
                     "it is 0-d; got the Dask array %r" % loss.name)


def _backward_elementwise(node: _Node, g: da.Array) -> List[Tuple[da.Array, da.Array]]:
    out = node.out
    nd = out.ndim
    diff = tuple(isinstance(x, da.Array) and _floating(x.dtype) for x in node.operands)
    if not any(diff):
        return []
    args: List[Any] = []
    for x in node.operands:
        args += [x, tuple(range(nd - x.ndim, nd))] if isinstance(x, da.Array) else [x, None]
    args += [g, tuple(range(nd))]
    name = "pylucid-route-%s-%s" % (node.key[0], tokenize(node.key, *node.operands, g))
    routed = da.blockwise(_route_block, tuple(range(nd)), *args, name=name, dtype=out.dtype,
                          meta=_meta(nd, out.dtype), spec=node.key, diff=diff, nd=nd)
    result = []
    for j, x in enumerate(x for x, d in zip(node.operands, diff) if d):
        pad = nd - x.ndim
        bdims = [d for d in range(nd) if (d < pad or x.shape[d - pad] == 1) and out.shape[d] != 1]
        gi = da.blockwise(operator.getitem, tuple(range(nd)), routed, tuple(range(nd)), j, None,
                          adjust_chunks={d: 1 for d in bdims}, dtype=x.dtype, meta=_meta(nd, x.dtype))
        summed = tuple(d for d in bdims if gi.numblocks[d] > 1)
        if summed:  # Dask sums the partial gradients of a broadcast operand across chunks
            gi = gi.sum(axis=summed, keepdims=True, dtype=x.dtype)
        if pad:
            gi = gi[(0,) * pad]
        result.append((x, gi))
    return result


def _backward_reduction(node: _Node, g: da.Array) -> List[Tuple[da.Array, da.Array]]:
    (x,) = node.operands
    name, ax, keepdims = node.key
    if not _floating(x.dtype):
        return []
    assert node.pos is not None
    if not keepdims:
        g = g.reshape((1,) * x.ndim) if ax is None else da.expand_dims(g, ax)
    spec = (name, ax, tuple(x.shape))
    gx = da.map_blocks(_scatter_block, x, g, node.pos, spec=spec, dtype=x.dtype, meta=_meta(x.ndim, x.dtype),
                       name="pylucid-scatter-%s" % tokenize(spec, x, g, node.pos))
    return [(x, gx)]


def _depends_on(a: da.Array, names: Sequence[str]) -> bool:
    """Whether a's graph contains one of the named arrays (each Dask array
    is a layer named after it; nothing is materialised)."""
    graph = a.__dask_graph__()
    layers = getattr(graph, "layers", None)
    if layers is not None:
        return any(n in layers for n in names)
    return any(isinstance(k, tuple) and k and k[0] in names for k in graph)


def grad(fn: Callable[..., da.Array], *arrays: ArrayLike) -> Tuple[da.Array, ...]:
    """The gradients of the 0-d Dask array ``fn(*arrays)`` with respect to
    each of ``arrays``, as a tuple of lazy Dask arrays (compute them
    together with the loss: ``dask.compute(loss, *grads)`` shares the work).

    ``fn`` gets the arrays as Dask arrays (NumPy arrays are wrapped with
    ``da.asarray``) and must build its result from pylucid.dask functions
    and end in Dask's own ``.sum()`` or ``.mean()`` (or return a 0-d
    pylucid.dask result). Each chunk's backward runs pylucid's; Dask sums
    broadcast operands' gradients across chunks. An input the loss does not
    depend on gets zeros. See the module's documentation for the limits."""
    xs = tuple(_as_dask(a, "grad") for a in arrays)
    for i, x in enumerate(xs):
        if not _floating(x.dtype):
            raise TypeError("pylucid.dask.grad: input %d has dtype %s; gradients need floating arrays" % (i, x.dtype))
    tape: Dict[str, _Node] = {}
    token = _TAPE.set(tape)
    try:
        loss = fn(*xs)
    finally:
        _TAPE.reset(token)
    if not isinstance(loss, da.Array):
        raise TypeError("pylucid.dask.grad: fn must return a Dask array, got %s" % type(loss).__name__)
    if loss.ndim != 0:
        raise RuntimeError("pylucid.dask.grad: fn must return a 0-d Dask array (a scalar loss), got shape %s; "
                           "reduce it with .sum() or .mean()" % (loss.shape,))
    if not _floating(loss.dtype):
        raise TypeError("pylucid.dask.grad: the loss has dtype %s; it must be floating" % loss.dtype)
    input_names = [x.name for x in xs]
    root, seed = _seed(loss, tape, xs)

    order: List[str] = []
    seen = set()

    def visit(name: str) -> None:
        if name in seen or name not in tape:
            return
        seen.add(name)
        for o in tape[name].operands:
            if isinstance(o, da.Array):
                if o.name not in tape and o.name not in input_names and _depends_on(o, input_names):
                    raise ValueError("pylucid.dask.grad: %r depends on an input through Dask operations other than "
                                     "pylucid.dask functions; its gradient cannot be followed" % o.name)
                visit(o.name)
        order.append(name)

    visit(root)
    grads: Dict[str, da.Array] = {root: seed}
    for name in reversed(order):
        g = grads.pop(name, None)
        if g is None:
            continue
        node = tape[name]
        back = _backward_reduction if node.pos is not None else _backward_elementwise
        for x, gx in back(node, g):
            if x.name in tape or x.name in input_names:
                grads[x.name] = grads[x.name] + gx if x.name in grads else gx
    result = []
    for x in xs:
        gx = grads.get(x.name)
        result.append(da.zeros_like(x) if gx is None else gx)
    return tuple(result)
