"""pylucid's min/max family for PyTorch: ``minimum``, ``maximum``, ``fmin``,
``fmax``, ``clamp``, ``amin``, ``amax``, ``argmin``, ``argmax``, ``min`` and
``max`` on CPU torch tensors, with torch's signatures (``out=`` included) and
pylucid's rules (docs/semantics.md).

    >>> import torch, pylucid.torch as plt
    >>> a = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> plt.minimum(a, torch.tensor([2.0, 2.0])).sum().backward()
    >>> a.grad            # the tie goes whole to the first operand
    tensor([1., 1.])

Native to PyTorch (docs/interop.md, "PyTorch"):

* The kernels are ``torch.library`` ops in the namespace ``pylucid``
  (``torch.ops.pylucid.minimum``, ``torch.ops.pylucid.minimum_winners``,
  ...), each with a fake implementation (shape, dtype and strides without
  data) and a vmap rule, registered from pylucid's op records. Their CPU
  kernel runs pylucid's on the torch tensors' own memory (``data_ptr``,
  shape and strides lent for the call, any strides, no copy) and writes
  into a ``torch.empty`` result. ``torch.compile(fullgraph=True)`` and
  ``torch.export`` see opaque ops, meta and FakeTensor inputs propagate.
* Differentiation is a ``torch.autograd.Function`` (``setup_context``,
  ``jvp``, ``generate_vmap_rule``) around the ``_winners`` ops, which return
  the value and where it came from (pylucid's kernels: a mask, clamp's
  winning operand, a reduction's winner positions). The backward and the
  tangent are then torch ops on constants: a cotangent goes whole to the
  winner (``torch.where``, a scatter), an output's tangent is the winner's
  (``torch.where``, a gather). So every torch transform works:
  ``torch.func.grad``/``vjp``/``jvp``/``vmap``/``jacrev``/``jacfwd``/
  ``hessian``, forward AD, double backward, ``gradcheck`` in every mode.
* In plain eager mode (no transform, no mode, no compiler) a call that
  records nothing skips torch's dispatcher and runs the kernel at once.

Where torch splits a gradient at a tie (``torch.amax`` splits it evenly
among tied elements, ``torch.minimum`` halves it between equal operands,
``torch.clamp`` at ``x == bound``), pylucid gives it whole to the first
operand / first position; at a NaN pylucid's rules hold. On tie-free,
NaN-free data values and gradients equal torch's.

Dtypes: float16, bfloat16, float32, float64 (differentiable), and the
integer and bool dtypes pylucid has (forward only). Other dtypes raise
``TypeError``; a tensor on a device other than the CPU (or meta) raises
``RuntimeError``, also while tracing.

This module imports torch; ``import pylucid`` never imports it.
"""

from __future__ import annotations

import builtins
import inspect
import math
import operator
from numbers import Number
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, cast

import numpy as np
import torch
import torch.autograd.forward_ad as _fwd_ad

from . import _calls, _lib
from . import ops as _ops
from ._runtime import _hot as _hot_module
from .dtypes import from_numpy_dtype

# The ops this bridge offers: the records that list it ("torch").
_RECORDS = {s["name"]: s for s in _lib.bridge_records("torch")}

# pylucid's dtype codes (lucid.h) of the torch dtypes it computes on; the
# floating ones are differentiable.
_CODES: Dict[torch.dtype, int] = {
    torch.bool: 1, torch.uint8: 2, torch.int8: 3, torch.int16: 4, torch.int32: 5, torch.int64: 6,
    torch.float16: 7, torch.bfloat16: 8, torch.float32: 9, torch.float64: 10}
_FLOATING = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})
_NUMPY = {torch.bool: np.bool_, torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
          torch.int32: np.int32, torch.int64: np.int64, torch.float16: np.float16, torch.float32: np.float32,
          torch.float64: np.float64}
_TORCH = {from_numpy_dtype(np.dtype(v)).name: k for k, v in _NUMPY.items()}
_TORCH["bfloat16"] = torch.bfloat16

Dims = Union[None, int, Sequence[int]]
Bound = Union[None, Number, torch.Tensor]


# ---- checks and shapes (at trace time too: they read metadata only)


def _check(name: str, t: Any, what: str) -> None:
    """Raises a clear error for what pylucid cannot compute on."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("pylucid.torch.%s: %s must be a torch.Tensor, got %s" % (name, what, type(t).__name__))
    if t.device.type not in ("cpu", "meta"):
        raise RuntimeError("pylucid.torch.%s: %s is on device '%s'; pylucid computes on CPU tensors only "
                           "(move it with .cpu())" % (name, what, t.device))
    if t.dtype not in _CODES:
        raise TypeError("pylucid.torch.%s: %s has dtype %s, which pylucid does not support (supported: float16, "
                        "bfloat16, float32, float64; integers and bool forward only)" % (name, what, t.dtype))
    if t.requires_grad and t.dtype not in _FLOATING:
        raise TypeError("pylucid.torch.%s: %s of dtype %s requires grad; only floating tensors can"
                        % (name, what, t.dtype))


def _same_device(name: str, xs: Sequence[Optional[torch.Tensor]]) -> None:
    devs = {x.device for x in xs if x is not None}
    if len(devs) > 1:
        raise RuntimeError("pylucid.torch.%s: expected all tensors to be on the same device, got %s"
                           % (name, ", ".join(sorted(str(d) for d in devs))))


def _broadcast(*shapes: Sequence[int]) -> List[int]:
    """NumPy's broadcast of shapes. Plain ints are broadcast here:
    torch.broadcast_shapes costs ~25 us a call (it runs torch's reference
    implementation); symbolic sizes (under compile) and mismatches go to it,
    which raises torch's own error."""
    first = list(shapes[0])
    if all(list(s) == first for s in shapes[1:]):
        return first
    nd = builtins.max(len(s) for s in shapes)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate(s, nd - len(s)):
            if type(d) is not int:
                return list(torch.broadcast_shapes(*shapes))  # type: ignore[no-untyped-call]
            if d != out[i]:
                if out[i] == 1:
                    out[i] = d
                elif d != 1:
                    return list(torch.broadcast_shapes(*shapes))  # type: ignore[no-untyped-call]
    return out


_result_dtypes: Dict[Tuple[Any, ...], torch.dtype] = {}


def _result_dtype(name: str, *dts: torch.dtype) -> torch.dtype:
    """The dtype pylucid's op gives for operands of dts (its promotion,
    docs/dtypes.md), found once per combination on 0-d operands."""
    key = (name,) + dts
    dt = _result_dtypes.get(key)
    if dt is None:
        ts = [_calls.tensor_new(_CODES[d], ()) for d in dts]
        dt = _result_dtypes[key] = _TORCH[getattr(_ops, name)(*ts).dtype.name]
    return dt


def _dims(name: str, dim: Dims, nd: int) -> Tuple[int, ...]:
    """torch's dim (an int, a sequence where empty means every dim, or None:
    every dim) as sorted non-negative dims (every dim: all of them)."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(nd))
    ds = [dim] if not isinstance(dim, (tuple, list)) else list(dim)
    out = set()
    for d in ds:
        if isinstance(d, (torch.Tensor, bool)) or not hasattr(d, "__index__"):
            raise TypeError("pylucid.torch.%s: dim must be an int or a tuple of ints, got %s" % (name, type(d).__name__))
        i = operator.index(d)
        lim = builtins.max(nd, 1)
        if not -lim <= i < lim:
            raise IndexError("pylucid.torch.%s: dim %d is out of range for a tensor of %d dims" % (name, i, nd))
        if nd:
            out.add(i % nd)
    return tuple(sorted(out))


def _reduced(shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> List[int]:
    if keepdim:
        return [1 if i in dims else s for i, s in enumerate(shape)]
    return [s for i, s in enumerate(shape) if i not in dims]


def _check_nonempty(name: str, x: torch.Tensor, dims: Sequence[int]) -> None:
    if any(x.shape[d] == 0 for d in dims) or (x.numel() == 0 and not dims and x.dim() == 0):
        raise ValueError("pylucid.torch.%s: cannot reduce over a zero-size dimension (input shape %s)"
                         % (name, tuple(x.shape)))


def _red_attrs(dims: Sequence[int], keepdim: bool) -> Tuple[int, ...]:
    return (int(keepdim), len(dims)) + tuple(dims)


# ---- the kernels: pylucid's, on the torch tensors' memory


_IDS = {s["name"]: int(s["id"]) for s in _lib.schema_table()}


_Tensor = torch.Tensor
_empty_like = torch.empty_like
_MASK_KWARGS = {"dtype": torch.bool}
_grad_enabled = torch.is_grad_enabled


class _Lent:
    """lucid_op_lent through cffi, where pylucid._hot is absent (ABI mode):
    what _hot.lent does, slower."""

    @staticmethod
    def lent(op: int, form: int, ins: Tuple[Optional[torch.Tensor], ...], attrs: Optional[Tuple[int, ...]],
             outs: Tuple[torch.Tensor, ...], codes: Dict[torch.dtype, int]) -> None:
        ffi, lib = _lib.ffi, _lib.lib
        keep: List[Any] = []

        def entries(ts: Sequence[Optional[torch.Tensor]]) -> Any:
            es = ffi.new("lucid_out[]", builtins.max(1, len(ts)))
            for e, t in zip(es, ts):
                e.handle = 0
                if t is None:
                    e.dtype = -1
                    continue
                if t.dtype not in codes:
                    raise TypeError("pylucid does not compute on dtype %s" % t.dtype)
                shape, strides = ffi.new("int64_t[]", list(t.shape) or [0]), ffi.new("int64_t[]", list(t.stride()) or [0])
                keep.extend((shape, strides))
                e.data, e.dtype, e.ndim = ffi.cast("void*", t.data_ptr()), codes[t.dtype], t.dim()
                e.shape, e.strides = shape, strides
            return es

        a = list(attrs or ())
        ca = ffi.new("int64_t[]", a or [0])
        _lib.check(lib.lucid_op_lent(op, form, entries(ins), len(ins), ca, len(a), entries(outs), len(outs)))

    @staticmethod
    def lent_binary(op: int, winners: bool, a: torch.Tensor, b: torch.Tensor, codes: Dict[torch.dtype, int],
                    empty_like: Callable[..., torch.Tensor], mask_kwargs: Dict[str, Any]) -> Any:
        if a.shape != b.shape or a.dtype != b.dtype:
            return None
        ys = (empty_like(a), empty_like(a, **mask_kwargs)) if winners else (empty_like(a),)
        _Lent.lent(op, int(winners), (a, b), None, ys, codes)
        return ys if winners else ys[0]


_hot: Any = _hot_module if _hot_module is not None else _Lent


def _binary_kernel(name: str, winners: bool) -> Callable[..., Any]:
    op_id = _IDS[name]

    def kernel(a: torch.Tensor, b: torch.Tensor) -> Any:
        r = _hot.lent_binary(op_id, winners, a, b, _CODES, _empty_like, _MASK_KWARGS)
        if r is not None:  # one dtype and shape: the results laid out as a
            return r
        shape = _broadcast(a.shape, b.shape)
        y = torch.empty(shape, dtype=_result_dtype(name, a.dtype, b.dtype))
        if not winners:
            _hot.lent(_IDS[name], False, (a, b), None, (y,), _CODES)
            return y
        mask = torch.empty(shape, dtype=torch.bool)
        _hot.lent(_IDS[name], True, (a, b), None, (y, mask), _CODES)
        return y, mask

    return kernel


def _binary_fake(name: str, winners: bool) -> Callable[..., Any]:
    def fake(a: torch.Tensor, b: torch.Tensor) -> Any:
        if a.shape == b.shape and a.dtype == b.dtype:  # the kernel's layout: a's, as torch.minimum's
            y = torch.empty_like(a)
            return (y, torch.empty_like(a, dtype=torch.bool)) if winners else y
        shape = _broadcast(a.shape, b.shape)
        y = a.new_empty(shape, dtype=_result_dtype(name, a.dtype, b.dtype))
        return (y, a.new_empty(shape, dtype=torch.bool)) if winners else y

    return fake


def _clamp_dtype(name: str, x: torch.Tensor, lo: Optional[torch.Tensor], hi: Optional[torch.Tensor]) -> torch.dtype:
    dts = [x.dtype] + [b.dtype for b in (lo, hi) if b is not None]
    key = (name, lo is not None, hi is not None) + tuple(dts)
    dt = _result_dtypes.get(key)
    if dt is None:
        ts = [_calls.tensor_new(_CODES[d], ()) for d in dts]
        it = iter(ts[1:])
        r = getattr(_ops, name)(ts[0], next(it) if lo is not None else None, next(it) if hi is not None else None)
        dt = _result_dtypes[key] = _TORCH[r.dtype.name]
    return dt


def _clamp_shape(x: torch.Tensor, lo: Optional[torch.Tensor], hi: Optional[torch.Tensor]) -> List[int]:
    return _broadcast(*[t.shape for t in (x, lo, hi) if t is not None])


def _clamp_kernel(name: str, winners: bool) -> Callable[..., Any]:
    def kernel(x: torch.Tensor, lo: Optional[torch.Tensor] = None, hi: Optional[torch.Tensor] = None) -> Any:
        shape = _clamp_shape(x, lo, hi)
        y = torch.empty(shape, dtype=_clamp_dtype(name, x, lo, hi))
        if not winners:
            _hot.lent(_IDS[name], False, (x, lo, hi), None, (y,), _CODES)
            return y
        code = torch.empty(shape, dtype=torch.int8)
        _hot.lent(_IDS[name], True, (x, lo, hi), None, (y, code), _CODES)
        return y, code

    return kernel


def _clamp_fake(name: str, winners: bool) -> Callable[..., Any]:
    def fake(x: torch.Tensor, lo: Optional[torch.Tensor] = None, hi: Optional[torch.Tensor] = None) -> Any:
        shape = _clamp_shape(x, lo, hi)
        y = x.new_empty(shape, dtype=_clamp_dtype(name, x, lo, hi))
        return (y, x.new_empty(shape, dtype=torch.int8)) if winners else y

    return fake


def _reduction_kernel(name: str, winners: bool, fake: bool = False) -> Callable[..., Any]:
    def kernel(x: torch.Tensor, dim: List[int], keepdim: bool) -> Any:
        dims = _dims(name, dim, x.dim())
        _check_nonempty(name, x, dims)
        new = x.new_empty if fake else torch.empty
        y = new(_reduced(x.shape, dims, keepdim), dtype=x.dtype)
        if not winners:
            if not fake:
                _hot.lent(_IDS[name], False, (x,), _red_attrs(dims, keepdim), (y,), _CODES)
            return y
        pos = new(_reduced(x.shape, dims, True), dtype=torch.int64)
        if not fake:
            _hot.lent(_IDS[name], True, (x,), _red_attrs(dims, keepdim), (y, pos), _CODES)
        return y, pos

    return kernel


def _arg_kernel(name: str, fake: bool = False) -> Callable[..., Any]:
    def kernel(x: torch.Tensor, dim: Optional[int] = None, keepdim: bool = False) -> torch.Tensor:
        new = x.new_empty if fake else torch.empty
        if dim is None:
            _check_nonempty(name, x, range(x.dim()))
            y = new([1] * x.dim() if keepdim else [], dtype=torch.int64)
            if not fake:
                _hot.lent(_IDS[name], False, (x.reshape(-1),), (0, 1, 0), (y.view(()),), _CODES)
            return y
        (d,) = _dims(name, dim, x.dim()) or (0,)
        _check_nonempty(name, x, (d,) if x.dim() else ())
        y = new(_reduced(x.shape, (d,), keepdim) if x.dim() else [], dtype=torch.int64)
        if not fake:
            if x.dim() == 0:
                y.zero_()
            else:
                _hot.lent(_IDS[name], False, (x,), (int(keepdim), 1, d), (y,), _CODES)
        return y

    return kernel


def _minmax_kernel(name: str, fake: bool = False) -> Callable[..., Any]:
    def kernel(x: torch.Tensor, dim: int, keepdim: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
        new = x.new_empty if fake else torch.empty
        if x.dim() == 0:
            _dims(name, dim, 0)
            v, i = new([], dtype=x.dtype), new([], dtype=torch.int64)
            if not fake:
                v.copy_(x)
                i.zero_()
            return v, i
        (d,) = _dims(name, dim, x.dim())
        _check_nonempty(name, x, (d,))
        shape = _reduced(x.shape, (d,), keepdim)
        v, i = new(shape, dtype=x.dtype), new(shape, dtype=torch.int64)
        if not fake:
            _hot.lent(_IDS[name], False, (x,), (int(keepdim), 1, d), (v, i), _CODES)
        return v, i

    return kernel


# ---- vmap rules of the ops: the batch dimension in front, ranks aligned


def _front(xs: Sequence[Optional[torch.Tensor]], dims: Sequence[Optional[int]]) -> List[Optional[torch.Tensor]]:
    """Operands of an elementwise op with their batch dim moved in front and
    padded to a common logical rank, so pylucid's broadcasting lines the
    batch up; unbatched operands as they are."""
    ranks = [x.dim() - (d is not None) for x, d in zip(xs, dims) if x is not None]
    r = builtins.max(ranks) if ranks else 0
    out: List[Optional[torch.Tensor]] = []
    for x, d in zip(xs, dims):
        if x is None or d is None:
            out.append(x)
            continue
        x = x.movedim(d, 0)
        out.append(x.reshape((x.shape[0],) + (1,) * (r - (x.dim() - 1)) + tuple(x.shape[1:])))
    return out


def _elementwise_vmap(op: Any, n_out: int) -> Callable[..., Any]:
    def rule(info: Any, in_dims: Tuple[Any, ...], *xs: Any) -> Any:
        res = op(*_front(xs, in_dims))
        return res, ((0,) * n_out if n_out > 1 else 0)

    return rule


def _reduction_vmap(op: Any, n_out: int) -> Callable[..., Any]:
    def rule(info: Any, in_dims: Tuple[Any, ...], x: torch.Tensor, dim: List[int], keepdim: bool) -> Any:
        x = x.movedim(in_dims[0], 0)
        dims = [d + 1 for d in _dims("vmap", dim, x.dim() - 1)]
        return op(x, dims, keepdim), ((0,) * n_out if n_out > 1 else 0)

    return rule


def _arg_vmap(op: Any) -> Callable[..., Any]:
    def rule(info: Any, in_dims: Tuple[Any, ...], x: torch.Tensor, dim: Optional[int] = None,
             keepdim: bool = False) -> Any:
        x = x.movedim(in_dims[0], 0)
        nd = x.dim() - 1
        if dim is None:
            y = op(x.reshape(x.shape[0], -1), 1, False)
            return (y.reshape((x.shape[0],) + (1,) * nd) if keepdim else y), 0
        if nd == 0:
            return op(x, None, False) * 0, 0  # position 0 of each element (a 0-d slice)
        return op(x, _dims("vmap", dim, nd)[0] + 1, keepdim), 0

    return rule


def _minmax_vmap(op: Any) -> Callable[..., Any]:
    def rule(info: Any, in_dims: Tuple[Any, ...], x: torch.Tensor, dim: int, keepdim: bool = False) -> Any:
        x = x.movedim(in_dims[0], 0)
        nd = x.dim() - 1
        if nd == 0:
            return (x.clone(), torch.zeros(x.shape, dtype=torch.int64)), (0, 0)
        return tuple(op(x, _dims("vmap", dim, nd)[0] + 1, keepdim)), (0, 0)

    return rule


# ---- the torch.library ops, from the records

_LIB = torch.library.Library("pylucid", "DEF")  # type: ignore[no-untyped-call]  # kept: the registrations live as long as it does


def _define(name: str, schema: str, kernel: Callable[..., Any], fake: Callable[..., Any],
            vmap: Callable[[Any], Callable[..., Any]]) -> Any:
    _LIB.define(name + schema)  # type: ignore[no-untyped-call]
    _LIB.impl(name, kernel, "CPU")  # type: ignore[no-untyped-call]
    qual = "pylucid::" + name
    torch.library.register_fake(qual)(fake)
    op = getattr(torch.ops.pylucid, name).default
    torch.library.register_vmap(qual)(vmap(op))
    _KERNELS[op] = kernel
    return op


# op -> its CPU kernel, which plain eager calls run without the dispatcher.
_KERNELS: Dict[Any, Callable[..., Any]] = {}


_OPS: Dict[str, Any] = {}
for _name, _rec in _RECORDS.items():
    _sig = _rec["signature"]
    if _sig == "binary":
        _OPS[_name] = _define(_name, "(Tensor self, Tensor other) -> Tensor", _binary_kernel(_name, False),
                              _binary_fake(_name, False), lambda op: _elementwise_vmap(op, 1))
        _OPS[_name + "_winners"] = _define(
            _name + "_winners", "(Tensor self, Tensor other) -> (Tensor, Tensor)", _binary_kernel(_name, True),
            _binary_fake(_name, True), lambda op: _elementwise_vmap(op, 2))
    elif _sig == "clamp":
        _OPS[_name] = _define(_name, "(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor",
                              _clamp_kernel(_name, False), _clamp_fake(_name, False),
                              lambda op: _elementwise_vmap(op, 1))
        _OPS[_name + "_winners"] = _define(
            _name + "_winners", "(Tensor self, Tensor? min=None, Tensor? max=None) -> (Tensor, Tensor)",
            _clamp_kernel(_name, True), _clamp_fake(_name, True), lambda op: _elementwise_vmap(op, 2))
    elif _sig == "reduction":
        _OPS[_name] = _define(_name, "(Tensor self, int[] dim, bool keepdim) -> Tensor",
                              _reduction_kernel(_name, False), _reduction_kernel(_name, False, True),
                              lambda op: _reduction_vmap(op, 1))
        _OPS[_name + "_winners"] = _define(
            _name + "_winners", "(Tensor self, int[] dim, bool keepdim) -> (Tensor, Tensor)",
            _reduction_kernel(_name, True), _reduction_kernel(_name, True, True), lambda op: _reduction_vmap(op, 2))
    elif _sig == "arg":
        _OPS[_name] = _define(_name, "(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
                              _arg_kernel(_name), _arg_kernel(_name, True), _arg_vmap)
    elif _sig == "minmax":
        _OPS[_name] = _define(_name, "(Tensor self, int dim, bool keepdim=False) -> (Tensor, Tensor)",
                              _minmax_kernel(_name), _minmax_kernel(_name, True), _minmax_vmap)

#: The torch.library ops this module registers (``torch.ops.pylucid.<name>``).
TORCH_OPS: Tuple[str, ...] = tuple(sorted(_OPS))


# ---- differentiation: torch ops on pylucid's winners

# The op ids of the _winners ops (their backward's fast path).
_WINNER_IDS: Dict[Any, int] = {_OPS[n + "_winners"]: _IDS[n] for n, r in _RECORDS.items()
                               if r["signature"] in ("binary", "reduction")}
_WINNER_IDS.update({_KERNELS[op]: i for op, i in list(_WINNER_IDS.items())})


def _plain_backward(g: torch.Tensor) -> bool:
    """Whether a backward may run pylucid's kernel on g's memory: a plain
    CPU tensor, nothing recording the gradient (no create_graph), no
    transform, mode or compiler watching."""
    return (type(g) is torch.Tensor and g.is_cpu and not torch.is_grad_enabled() and not _is_compiling()
            and not _is_wrapped(g) and not _is_legacy_batched(g) and not _dispatch_modes() and not _function_modes())

_Function: Any = torch.autograd.Function


def _sum_to(g: torch.Tensor, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """g reduced to shape (the un-broadcast of NumPy's rule) in dtype."""
    if list(g.shape) != list(shape):
        g = g.sum_to_size(shape) if len(shape) else g.sum()
    return g if g.dtype == dtype else g.to(dtype)


class _Selection(_Function):
    """An elementwise selection (minimum, ..., clamp): forward is the
    ``_winners`` op (value, then winner: a mask or clamp's code), backward
    and tangent select by that winner. Operands absent (clamp's missing
    bound) are None."""

    generate_vmap_rule = True

    @staticmethod
    def forward(op: Any, *xs: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        return cast(Tuple[torch.Tensor, torch.Tensor], op(*xs))

    @staticmethod
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[torch.Tensor, torch.Tensor]) -> None:
        xs = inputs[1:]
        y, who = output
        ctx.mark_non_differentiable(who)
        ctx.save_for_backward(who)
        if _fwd_ad._current_level >= 0 or _transforms_active():  # jvp may follow
            ctx.save_for_forward(who)
        ctx.metas = [(x.shape, x.dtype) if x is not None else None for x in xs]
        ctx.out_dtype = y.dtype
        ctx.op_id = _WINNER_IDS.get(inputs[0])

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor, _: Any) -> Tuple[Optional[torch.Tensor], ...]:
        (who,) = ctx.saved_tensors
        return (None,) + _selection_grads(ctx.op_id, who, gy, ctx.metas, ctx.needs_input_grad[1:])


def _selection_grads(op_id: Optional[int], who: torch.Tensor, gy: torch.Tensor,
                     metas: Sequence[Optional[Tuple[Any, torch.dtype]]],
                     need: Sequence[bool]) -> Tuple[Optional[torch.Tensor], ...]:
    """A selection's operands' gradients from its winners who and gy (metas:
    each operand's shape and dtype, None where absent or, for clamp's bool
    form, a number bound; need: which take one)."""
    if who.dtype == torch.bool and op_id is not None and _plain_backward(gy):
        # pylucid's route of gy by the mask, in one pass: both parts, or
        # the one an operand needs (clamp's bool form, with number
        # bounds, has x's part alone)
        if len(metas) == 2 and need[0] and need[1]:
            ga, gb = torch.empty(who.shape, dtype=gy.dtype), torch.empty(who.shape, dtype=gy.dtype)
            _hot.lent(op_id, 2, (who, gy), None, (ga, gb), _CODES)
            return _sum_to(ga, *metas[0]), _sum_to(gb, *metas[1])  # type: ignore[misc]
        part = 1 if len(metas) == 2 and need[1] else 0
        g = torch.empty(who.shape, dtype=gy.dtype)
        _hot.lent(op_id, 4, (who, gy), (part,), (g,), _CODES)
        grads: List[Optional[torch.Tensor]] = [None] * len(metas)
        grads[part] = _sum_to(g, *metas[part])  # type: ignore[misc]
        return tuple(grads)
    zero = gy.new_zeros(())
    grads = []
    for i, (meta, needed) in enumerate(zip(metas, need)):
        if meta is None or not needed:
            grads.append(None)
            continue
        sel = (who if i == 0 else ~who) if who.dtype == torch.bool else who == i
        grads.append(_sum_to(torch.where(sel, gy, zero), meta[0], meta[1]))
    return tuple(grads)


def _selection_jvp(ctx: Any, _: Any, *ts: Optional[torch.Tensor]) -> Tuple[torch.Tensor, None]:
    (who,) = ctx.saved_tensors
    dt = ctx.out_dtype

    def tangent(i: int) -> torch.Tensor:
        t = ts[i] if i < len(ts) else None
        return who.new_zeros((), dtype=dt) if t is None else t.to(dt)

    if who.dtype == torch.bool:
        return torch.where(who, tangent(0), tangent(1)), None
    t = tangent(0)
    for i in (1, 2):
        if ctx.metas[i] is not None:
            t = torch.where(who == i, tangent(i), t)
    return t.expand(who.shape) if t.shape != who.shape else t, None



def _layout(shape: Sequence[int], dims: Sequence[int]) -> Tuple[List[int], List[int], List[int]]:
    """The permutation that puts a reduction's slices last (kept dims, then
    the reduced ones in order), its inverse, and the kept dims' sizes."""
    kept = [i for i in range(len(shape)) if i not in dims]
    perm = kept + list(dims)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return perm, inv, [shape[i] for i in kept]


class _Reduction(_Function):
    """amin and its kin: forward is the ``_winners`` op (value, then each
    slice's winner position), backward scatters the cotangent to it and
    the tangent gathers the winner's."""

    generate_vmap_rule = True

    @staticmethod
    def forward(op: Any, x: torch.Tensor, dims: Tuple[int, ...], keepdim: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        return cast(Tuple[torch.Tensor, torch.Tensor], op(x, list(dims), keepdim))

    @staticmethod
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[torch.Tensor, torch.Tensor]) -> None:
        _, x, dims, keepdim = inputs
        y, pos = output
        ctx.mark_non_differentiable(pos)
        ctx.save_for_backward(pos)
        ctx.save_for_forward(pos)
        ctx.shape, ctx.dims, ctx.y_shape, ctx.dtype = list(x.shape), dims, list(y.shape), y.dtype
        ctx.op_id = _WINNER_IDS.get(inputs[0])

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor, _: Any) -> Tuple[Optional[torch.Tensor], ...]:
        (pos,) = ctx.saved_tensors
        if ctx.op_id is not None and _plain_backward(gy):
            # pylucid's scatter of gy to the winners, in one pass
            gx = torch.empty(ctx.shape, dtype=gy.dtype)
            _hot.lent(ctx.op_id, 2, (pos, gy.reshape(pos.shape)), None, (gx,), _CODES)
            return None, gx, None, None
        perm, inv, kept = _layout(ctx.shape, ctx.dims)
        n = 1
        for d in ctx.dims:
            n *= ctx.shape[d]
        z = gy.new_zeros(kept + [n]).scatter(-1, pos.reshape(kept + [1]), gy.reshape(kept + [1]))
        g = z.reshape(kept + [ctx.shape[d] for d in ctx.dims]).permute(inv)
        return None, g, None, None


def _reduction_jvp(ctx: Any, _: Any, t: Optional[torch.Tensor], *rest: Any) -> Tuple[torch.Tensor, None]:
    (pos,) = ctx.saved_tensors
    perm, _inv, kept = _layout(ctx.shape, ctx.dims)
    if t is None:
        return pos.new_zeros(ctx.y_shape, dtype=ctx.dtype), None
    flat = t.permute(perm).reshape(kept + [-1])
    return flat.gather(-1, pos.reshape(kept + [1])).reshape(ctx.y_shape), None



class _MinMaxDim(_Function):
    """min/max over one dim: (values, indices); the indices are the winners."""

    generate_vmap_rule = True

    @staticmethod
    def forward(op: Any, x: torch.Tensor, dim: int, keepdim: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        return cast(Tuple[torch.Tensor, torch.Tensor], op(x, dim, keepdim))

    @staticmethod
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[torch.Tensor, torch.Tensor]) -> None:
        _, x, dim, keepdim = inputs
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])
        ctx.save_for_forward(output[1])
        ctx.shape, ctx.dim, ctx.keepdim = list(x.shape), dim, keepdim

    @staticmethod
    def backward(ctx: Any, gv: torch.Tensor, _: Any) -> Tuple[Optional[torch.Tensor], ...]:
        (idx,) = ctx.saved_tensors
        if not ctx.shape:
            return None, gv, None, None
        if not ctx.keepdim:
            gv, idx = gv.unsqueeze(ctx.dim), idx.unsqueeze(ctx.dim)
        return None, gv.new_zeros(ctx.shape).scatter(ctx.dim, idx, gv), None, None


def _minmax_jvp(ctx: Any, _: Any, t: torch.Tensor, *rest: Any) -> Tuple[torch.Tensor, None]:
    (idx,) = ctx.saved_tensors
    if not ctx.shape:
        return t, None
    i = idx if ctx.keepdim else idx.unsqueeze(ctx.dim)
    v = t.gather(ctx.dim, i)
    return (v if ctx.keepdim else v.squeeze(ctx.dim)), None



_JVPS: Dict[Any, Callable[..., Any]] = {}


_SETUP_UNDEFINED = torch.autograd.function._SingleLevelFunction.setup_context


def _function(base: Any, name: str) -> Tuple[Any, Any, Any]:
    """base's subclasses for op name, named after it (its grad_fn is
    ``MinimumBackward``, ...): for torch.func transforms (setup_context,
    the forward-mode rule, a generated vmap rule); for torch.compile, the
    same without the forward-mode rule (dynamo does not trace a Function
    that has one; a compiled graph has no forward mode); and for plain
    eager calls, the classic form (forward(ctx, ...)), which torch applies
    without binding its arguments to a signature first (~10 us a call)."""
    attrs = {"__module__": __name__, "__doc__": "pylucid.torch.%s as a torch Function." % name}
    jvp = staticmethod(_JVPS[base])
    func = type(name.capitalize(), (base,), dict(attrs, jvp=jvp))
    compiled = type(name.capitalize(), (base,), dict(attrs))

    def forward(ctx: Any, *args: Any) -> Any:
        out = base.forward(*args)
        base.setup_context(ctx, args, out)
        return out

    eager = type(name.capitalize(), (base,), dict(attrs, jvp=jvp, forward=staticmethod(forward),
                                                  setup_context=_SETUP_UNDEFINED, generate_vmap_rule=False))
    return func, compiled, eager


_transforms_active: Callable[[], bool] = torch._C._are_functorch_transforms_active


def _apply(functions: Tuple[Any, Any, Any], *args: Any) -> Any:
    if _is_compiling():
        return functions[1].apply(*args)
    if _transforms_active():
        return functions[0].apply(*args)
    op = args[0]
    if not (_dispatch_modes() or _function_modes()) and all(
            type(x) is _Tensor and x.is_cpu for x in args[1:] if isinstance(x, torch.Tensor)):
        op = _KERNELS[op]
    return functions[2].apply(op, *args[1:])


_JVPS.update({_Selection: _selection_jvp, _Reduction: _reduction_jvp, _MinMaxDim: _minmax_jvp})
for _base in _JVPS:
    # Function.apply binds its arguments to forward's signature on every
    # call (torch.func's form); given once, inspect finds it at once.
    _base.forward.__signature__ = inspect.signature(_base.forward)


# ---- when to record: any input that could carry a gradient or tangent

_is_wrapped: Callable[[torch.Tensor], bool] = torch._C._functorch.is_functorch_wrapped_tensor
# torch's older vmap (gradcheck's batched gradients): a tensor without storage
_is_legacy_batched: Callable[[torch.Tensor], bool] = torch._C._functorch.is_legacy_batchedtensor
_dispatch_modes: Callable[[], int] = torch._C._len_torch_dispatch_stack
_function_modes: Callable[[], bool] = torch._C._is_torch_function_mode_enabled
_is_compiling: Callable[[], bool] = torch.compiler.is_compiling


def _mode(xs: Sequence[Optional[torch.Tensor]]) -> int:
    """0: plain eager, nothing to record (call the kernel directly); 1: call
    the op (a mode, a tracer, a transform may be watching); 2: record (the
    Function)."""
    if _is_compiling():
        return 2 if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in xs) else 1
    direct = True
    for x in xs:
        if x is None:
            continue
        if (x.requires_grad and torch.is_grad_enabled()) or _is_wrapped(x):
            return 2
        if type(x) is not torch.Tensor or not x.is_cpu:
            direct = False
    if _fwd_ad._current_level >= 0:
        return 2
    if not direct or _dispatch_modes() or _function_modes():
        return 1
    return 0


def _write_out(name: str, y: torch.Tensor, out: torch.Tensor, xs: Sequence[Optional[torch.Tensor]]) -> torch.Tensor:
    if not torch.can_cast(y.dtype, out.dtype):
        raise RuntimeError("pylucid.torch.%s: result type %s can't be cast to the desired output type %s"
                           % (name, y.dtype, out.dtype))
    if list(out.shape) != list(y.shape):
        out.resize_(y.shape)
    return out.copy_(y)


def _refuse_out_grad(name: str, xs: Sequence[Optional[torch.Tensor]]) -> None:
    if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in xs):
        raise RuntimeError("pylucid.torch.%s(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad." % name)


def _check_out(name: str, out: Any) -> None:
    if not isinstance(out, torch.Tensor):
        raise TypeError("pylucid.torch.%s: out must be a torch.Tensor, got %s" % (name, type(out).__name__))
    if out.device.type not in ("cpu", "meta"):
        raise RuntimeError("pylucid.torch.%s: out is on device '%s'; pylucid computes on CPU tensors only"
                           % (name, out.device))


# ---- the public functions, from the records


def _elementwise_call(name: str, xs: Tuple[Optional[torch.Tensor], ...], out: Optional[torch.Tensor], value_op: Any,
                      winners_op: Any, kernel: Callable[..., Any], function: Any) -> torch.Tensor:
    """An elementwise selection's call once its operands are checked: the
    Function where a graph records it, the op where something watches, else
    the kernel; out= written last."""
    _same_device(name, xs)
    if out is not None:
        _check_out(name, out)
        _refuse_out_grad(name, xs)
    m = _mode(xs)
    if m == 2:
        y = _apply(function, winners_op, *xs)[0]
    else:
        y = value_op(*xs) if m == 1 else kernel(*xs)
    return y if out is None else _write_out(name, y, out, xs)


def _lean_function(eager: Any, route_id: int,
                   winners: Callable[..., Tuple[torch.Tensor, torch.Tensor, Tuple[Any, ...]]]) -> Any:
    """The Function of a selection's plain eager call with grad (the inputs
    plain CPU tensors, no transform, forward-mode level, mode or compiler
    watching): winners(*xs) gives the values, the bool mask of where the
    first operand won, and the operands' (shape, dtype) (None: no gradient);
    the mask is saved and the backward routes by it (op route_id's kernel).
    Nothing else: the general classes' forward takes the op as an argument
    and runs for every base. Named as the others (its grad_fn is
    ``MinimumBackward``, ...)."""

    def forward(ctx: Any, *xs: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        y, who, ctx.metas = winners(*xs)
        ctx.mark_non_differentiable(who)
        ctx.save_for_backward(who)
        return y, who

    def backward(ctx: Any, gy: torch.Tensor, _: Any) -> Tuple[Optional[torch.Tensor], ...]:
        (who,) = ctx.saved_tensors
        return _selection_grads(route_id, who, gy, ctx.metas, ctx.needs_input_grad)

    return type(eager.__name__, (_Function,), {"__module__": __name__, "__doc__": eager.__doc__,
                                               "forward": staticmethod(forward), "backward": staticmethod(backward)})


def _lean_binary(name: str, eager: Any) -> Any:
    """_lean_function of a binary selection."""
    op_id = _IDS[name]
    winners_kernel = _KERNELS[_OPS[name + "_winners"]]

    def winners(a: torch.Tensor, b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, Tuple[Any, ...]]:
        r = _hot.lent_binary(op_id, True, a, b, _CODES, _empty_like, _MASK_KWARGS)
        y, who = r if r is not None else winners_kernel(a, b)
        return y, who, ((a.shape, a.dtype), (b.shape, b.dtype))

    return _lean_function(eager, op_id, winners)


def _binary_fn(name: str) -> Callable[..., torch.Tensor]:
    value_op, winners_op = _OPS[name], _OPS[name + "_winners"]
    kernel = _binary_kernel(name, False)
    function = _function(_Selection, name)
    op_id, lean = _IDS[name], _lean_binary(name, function[2])

    def fn(input: torch.Tensor, other: torch.Tensor, *, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        # Plain eager CPU tensors, nothing watching: no dispatcher (what
        # _elementwise_call would choose, without its general checks).
        if (out is None and type(input) is _Tensor and type(other) is _Tensor and input.is_cpu and other.is_cpu
                and not (_is_compiling() or _is_wrapped(input) or _is_wrapped(other) or _dispatch_modes()
                         or _function_modes())):
            if not (input.requires_grad or other.requires_grad):
                if input.dtype in _CODES and other.dtype in _CODES and _fwd_ad._current_level < 0:
                    y = _hot.lent_binary(op_id, False, input, other, _CODES, _empty_like, _MASK_KWARGS)
                    return y if y is not None else cast(torch.Tensor, kernel(input, other))
            elif (input.dtype in _FLOATING and other.dtype in _FLOATING and _grad_enabled()
                  and not _transforms_active() and _fwd_ad._current_level < 0):
                return cast(torch.Tensor, lean.apply(input, other)[0])  # record
        _check(name, input, "input")
        _check(name, other, "other")
        return _elementwise_call(name, (input, other), out, value_op, winners_op, kernel, function)

    return fn


@torch.compiler.assume_constant_result  # type: ignore[untyped-decorator]
def _bound_dtype(name: str, which: str, x: torch.dtype, bound: type, other: Any) -> torch.dtype:
    """The result dtype of clamp with a number bound of type bound (the
    other bound: a tensor's dtype, a number's type or NoneType), found once
    on 0-d operands (a constant to torch.compile)."""
    key = (name, "scalar", which, x, bound, other)
    dt = _result_dtypes.get(key)
    if dt is None:
        one = {bool: True, int: 1, float: 1.0}
        xt = _calls.tensor_new(_CODES[x], ())
        bt = _calls.scalar(one[bound])
        ot = _calls.tensor_new(_CODES[other], ()) if isinstance(other, torch.dtype) else (
            None if other is type(None) else _calls.scalar(one[other]))
        args = (xt, bt, ot) if which == "min" else (xt, ot, bt)
        dt = _result_dtypes[key] = _TORCH[getattr(_ops, name)(*args).dtype.name]
    return dt


def _as_bound(name: str, which: str, b: Any, x: torch.Tensor, other: Any) -> Optional[torch.Tensor]:
    """A clamp bound as a tensor: a number becomes a 0-d tensor of the
    dtype pylucid's rule gives the result (a Python number is weak: it
    takes x's dtype when x's kind can hold it, docs/dtypes.md)."""
    if b is None or isinstance(b, torch.Tensor):
        if b is not None:
            _check(name, b, which)
        return b
    if isinstance(b, bool) or not isinstance(b, (int, float)):
        raise TypeError("pylucid.torch.%s: %s must be None, a number or a torch.Tensor, got %s"
                        % (name, which, type(b).__name__))
    other_kind = other.dtype if isinstance(other, torch.Tensor) else _number_kind(other)
    dt = _bound_dtype(name, which, x.dtype, _number_kind(b), other_kind)
    if (type(x) is _Tensor and x.is_cpu and not (_is_compiling() or _dispatch_modes() or _function_modes()
                                                  or torch.is_inference_mode_enabled())):
        # Plain eager: the same number's 0-d tensor again (torch.tensor costs
        # ~5 us; the kernels only read it, and no graph saves it). -0.0 and
        # 0.0 are different bounds.
        key = (b, dt, isinstance(b, float) and math.copysign(1.0, b) < 0)
        t = _bound_tensors.get(key)
        if t is None:
            if len(_bound_tensors) >= 256:
                _bound_tensors.clear()
            t = _bound_tensors[key] = torch.tensor(b, dtype=dt)
        return t
    return torch.tensor(b, dtype=dt, device=x.device)


def _number_kind(b: Any) -> type:
    """A bound's kind for the promotion: float or int (a np.float64 or an
    IntEnum is one of them), NoneType for no bound."""
    if b is None:
        return type(None)
    return float if isinstance(b, float) else int


_bound_tensors: Dict[Tuple[Any, torch.dtype, bool], torch.Tensor] = {}


def _lean_clamp(name: str, eager: Any) -> Any:
    """_lean_function of clamp with number bounds (0-d, needing no
    gradient): the values and a bool mask of where x won (all x's gradient
    needs), which the backward routes as a binary selection's (one pass of
    pylucid's kernel, where the int8 code takes three torch ops)."""
    op_id = _IDS[name]

    def winners(x: torch.Tensor, lo: Optional[torch.Tensor],
                hi: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor, Tuple[Any, ...]]:
        y = torch.empty(x.shape, dtype=_clamp_dtype(name, x, lo, hi))
        who = torch.empty(x.shape, dtype=torch.bool)
        _hot.lent(op_id, True, (x, lo, hi), None, (y, who), _CODES)
        return y, who, ((x.shape, x.dtype), None, None)

    return _lean_function(eager, _IDS["minimum"], winners)  # a bool mask routes as any binary selection's


def _clamp_fn(name: str) -> Callable[..., torch.Tensor]:
    value_op, winners_op = _OPS[name], _OPS[name + "_winners"]
    kernel = _clamp_kernel(name, False)
    function = _function(_Selection, name)
    lean = _lean_clamp(name, function[2])

    def fn(input: torch.Tensor, min: Bound = None, max: Bound = None, *,
           out: Optional[torch.Tensor] = None) -> torch.Tensor:
        if (out is None and type(input) is _Tensor and input.is_cpu and input.dtype in _CODES
                and not isinstance(min, torch.Tensor) and not isinstance(max, torch.Tensor)
                and not (min is None and max is None)
                and not (_is_compiling() or _is_wrapped(input) or _dispatch_modes() or _function_modes())
                and _fwd_ad._current_level < 0):
            # Plain eager CPU tensor, number bounds, nothing watching: what
            # _elementwise_call would choose, without its general checks.
            lo = _as_bound(name, "min", min, input, max)
            hi = _as_bound(name, "max", max, input, min)
            if not input.requires_grad:
                return cast(torch.Tensor, kernel(input, lo, hi))
            if _grad_enabled() and not _transforms_active():  # (only floating tensors require grad)
                return cast(torch.Tensor, lean.apply(input, lo, hi)[0])  # record
            return _elementwise_call(name, (input, lo, hi), None, value_op, winners_op, kernel, function)
        _check(name, input, "input")
        if min is None and max is None:
            raise ValueError("pylucid.torch.%s: at least one of min and max must not be None" % name)
        lo = _as_bound(name, "min", min, input, max)
        hi = _as_bound(name, "max", max, input, min)
        return _elementwise_call(name, (input, lo, hi), out, value_op, winners_op, kernel, function)

    return fn


def _reduction_fn(name: str) -> Callable[..., torch.Tensor]:
    value_op, winners_op = _OPS[name], _OPS[name + "_winners"]
    kernel = _reduction_kernel(name, False)
    function = _function(_Reduction, name)

    def fn(input: torch.Tensor, dim: Dims = (), keepdim: bool = False, *,
           out: Optional[torch.Tensor] = None) -> torch.Tensor:
        _check(name, input, "input")
        dims = _dims(name, dim, input.dim())
        keepdim = bool(keepdim)
        if out is not None:
            _check_out(name, out)
            _refuse_out_grad(name, (input,))
        m = _mode((input,))
        if m == 2:
            y = _apply(function, winners_op, input, dims, keepdim)[0]
        elif m == 1:
            y = value_op(input, list(dims), keepdim)
        else:
            y = kernel(input, list(dims), keepdim)
        return y if out is None else _write_out(name, y, out, (input,))

    return fn


def _arg_fn(name: str) -> Callable[..., torch.Tensor]:
    op = _OPS[name]
    kernel = _arg_kernel(name)

    def fn(input: torch.Tensor, dim: Optional[int] = None, keepdim: bool = False, *,
           out: Optional[torch.Tensor] = None) -> torch.Tensor:
        _check(name, input, "input")
        if dim is not None:
            _dims(name, dim, input.dim())  # TypeError/IndexError before any work
        if out is not None:
            _check_out(name, out)
        y = kernel(input, dim, bool(keepdim)) if _mode((input,)) == 0 else op(input, dim, bool(keepdim))
        return y if out is None else _write_out(name, y, out, (input,))

    return fn


def _minmax_fn(name: str) -> Callable[..., Any]:
    op = _OPS[name]
    kernel = _minmax_kernel(name)
    function = _function(_MinMaxDim, name)
    whole = _RECORDS[name]["whole"]  # min(x): amin over every dim
    pair = "minimum" if name == "min" else "maximum"
    rtype = getattr(torch.return_types, name)

    def fn(input: torch.Tensor, dim: Any = None, keepdim: bool = False, *,
           out: Optional[Any] = None) -> Any:
        if isinstance(dim, torch.Tensor):  # torch.min(input, other)
            return _PUBLIC[pair](input, dim, out=out)
        if dim is None:
            return _PUBLIC[whole](input, out=out)
        _check(name, input, "input")
        (d,) = _dims(name, dim, input.dim()) or (0,)
        keepdim = bool(keepdim)
        if out is not None:
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise TypeError("pylucid.torch.%s: out must be a (values, indices) pair of tensors" % name)
            for o in out:
                _check_out(name, o)
            _refuse_out_grad(name, (input,))
        m = _mode((input,))
        if m == 2:
            v, i = _apply(function, op, input, d, keepdim)
        elif m == 1:
            v, i = op(input, d, keepdim)
        else:
            v, i = kernel(input, d, keepdim)
        if out is not None:
            v, i = _write_out(name, v, out[0], (input,)), _write_out(name, i, out[1], (input,))
        return rtype((v, i))

    return fn


_FORMS: Dict[str, Callable[[str], Callable[..., Any]]] = {
    "binary": _binary_fn, "clamp": _clamp_fn, "reduction": _reduction_fn, "arg": _arg_fn, "minmax": _minmax_fn}

_PUBLIC: Dict[str, Any] = {}
__all__: List[str] = _lib.publish(_PUBLIC, list(_RECORDS.values()), _FORMS, (
    "``torch.%s`` with pylucid's rule (torch's signature, ``out=`` included).\n\n%s"))
globals().update(_PUBLIC)
__all__ += ["TORCH_OPS"]

if TYPE_CHECKING:  # the type checker's view of the functions set above (run-time cost: see ops.py)
    def __getattr__(name: str) -> Callable[..., Any]: ...
