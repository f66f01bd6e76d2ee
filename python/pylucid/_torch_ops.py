"""The torch.library half of pylucid.torch (docs/interop.md, "PyTorch"):
the ops in the namespace ``pylucid``, registered from pylucid's op records,
each with its CPU kernel (pylucid's, on the torch tensors' memory lent for
the call), its fake implementation and its vmap rule; and the checks and
shape rules the public functions share with them. pylucid.torch builds the
differentiable public functions on these; only it imports this module, so
``import pylucid`` never imports torch.
"""

from __future__ import annotations

import builtins
import operator
from numbers import Number
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

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
        raise _unsupported(name, what, t.dtype)
    if t.requires_grad and t.dtype not in _FLOATING:
        raise TypeError("pylucid.torch.%s: %s of dtype %s requires grad; only floating tensors can"
                        % (name, what, t.dtype))


def _unsupported(name: str, what: str, dt: torch.dtype) -> TypeError:
    return TypeError("pylucid.torch.%s: %s has dtype %s, which pylucid does not support (supported: float16, "
                     "bfloat16, float32, float64; integers and bool forward only)" % (name, what, dt))


def _codes(name: str, whats: Sequence[str], dts: Sequence[torch.dtype]) -> List[int]:
    """pylucid's dtype codes of dts (the operands named whats), TypeError for
    a dtype pylucid lacks: the ops and fake kernels called directly
    (torch.ops.pylucid.clamp with a complex bound) check here, not _check."""
    for what, dt in zip(whats, dts):
        if dt not in _CODES:
            raise _unsupported(name, what, dt)
    return [_CODES[dt] for dt in dts]


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
        ts = [_calls.tensor_new(c, ()) for c in _codes(name, ("input", "other"), dts)]
        dt = _result_dtypes[key] = _TORCH[getattr(_ops, name)(*ts).dtype.name]
    return dt


def _dims(name: str, dim: Dims, nd: int) -> Tuple[int, ...]:
    """torch's dim (an int, a sequence where empty means every dim, or None:
    every dim) as sorted non-negative dims (every dim: all of them)."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(nd))
    ds = [dim] if not isinstance(dim, (tuple, list)) else list(dim)
    out, seen = set(), set()
    for d in ds:
        if isinstance(d, (torch.Tensor, bool)) or not hasattr(d, "__index__"):
            raise TypeError("pylucid.torch.%s: dim must be an int or a tuple of ints, got %s" % (name, type(d).__name__))
        i = operator.index(d)
        lim = builtins.max(nd, 1)
        if not -lim <= i < lim:
            raise IndexError("pylucid.torch.%s: dim %d is out of range for a tensor of %d dims" % (name, i, nd))
        if i % lim in seen:  # as pylucid.ops (docs/errors.md: ValueError); torch raises too, 0-d tensors included
            raise ValueError("pylucid.torch.%s: dim %d appears multiple times in the list of dims" % (name, i % lim))
        seen.add(i % lim)
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

        def entries(ts: Sequence[Optional[torch.Tensor]], inputs: bool) -> Any:
            es = ffi.new("lucid_out[]", builtins.max(1, len(ts)))
            for e, t in zip(es, ts):
                e.handle = 0
                if t is None:
                    e.dtype = -1
                    continue
                if t.dtype not in codes:
                    raise TypeError("pylucid does not compute on dtype %s" % t.dtype)
                if inputs:  # values as they read (python/csrc/lent.c: read_input)
                    if t.is_neg():
                        t = t.resolve_neg()
                    if t.numel() and not t.data_ptr():
                        t = t.clone()
                    keep.append(t)
                shape, strides = ffi.new("int64_t[]", list(t.shape) or [0]), ffi.new("int64_t[]", list(t.stride()) or [0])
                keep.extend((shape, strides))
                e.data, e.dtype, e.ndim = ffi.cast("void*", t.data_ptr()), codes[t.dtype], t.dim()
                e.shape, e.strides = shape, strides
            return es

        a = list(attrs or ())
        ca = ffi.new("int64_t[]", a or [0])
        _lib.check(lib.lucid_op_lent(op, form, entries(ins, True), len(ins), ca, len(a), entries(outs, False), len(outs)))

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
        _codes(name, ("input", "other"), (a.dtype, b.dtype))
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
        whats = ["input"] + [w for w, b in (("min", lo), ("max", hi)) if b is not None]
        ts = [_calls.tensor_new(c, ()) for c in _codes(name, whats, dts)]
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
        _codes(name, ("input",), (x.dtype,))
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
        _codes(name, ("input",), (x.dtype,))
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
        _codes(name, ("input",), (x.dtype,))
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


