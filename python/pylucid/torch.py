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

import inspect
import math
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
import torch
import torch.autograd.forward_ad as _fwd_ad

from . import _calls, _lib
from . import ops as _ops
from ._torch_ops import TORCH_OPS, Bound, Dims  # noqa: F401  (TORCH_OPS: public here)
from ._torch_ops import _CODES, _FLOATING, _IDS, _KERNELS, _MASK_KWARGS, _OPS, _RECORDS, _TORCH, _Tensor
from ._torch_ops import _arg_kernel, _binary_kernel, _check, _clamp_dtype, _clamp_kernel, _dims, _empty_like
from ._torch_ops import _grad_enabled, _hot, _minmax_kernel, _reduction_kernel, _result_dtypes, _same_device


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
