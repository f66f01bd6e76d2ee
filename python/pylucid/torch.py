"""pylucid's min/max family for PyTorch: ``minimum``, ``maximum``, ``fmin``,
``fmax``, ``clamp``, ``amin`` and ``amax`` on CPU torch tensors, with
torch's signatures and pylucid's rules (docs/semantics.md).

    >>> import torch, pylucid.torch as plt
    >>> a = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> plt.minimum(a, torch.tensor([2.0, 2.0])).sum().backward()
    >>> a.grad            # the tie goes whole to the first operand
    tensor([1., 1.])

Each function is a ``torch.autograd.Function``: its forward and backward
run pylucid's kernels on the torch tensors' own memory, shared through
DLPack both ways (``pylucid.from_dlpack`` on the inputs, ``torch.from_dlpack``
on the results; nothing is copied, any strides). The saved tensors are the
torch inputs themselves. The backward is itself differentiable (double
backward and beyond): its forward is pylucid's vector-Jacobian product and
its backward pylucid's Jacobian-vector product (the selection masks are
constants, so no gradient flows back to the inputs from a gradient).

Where torch splits a gradient at a tie (``torch.amax`` splits it evenly
among tied elements, ``torch.minimum`` halves it between equal operands,
``torch.clamp`` at ``x == bound``), pylucid gives it whole to the first
operand / first position; at a NaN pylucid's rules of docs/semantics.md
hold. On tie-free, NaN-free data values and gradients equal torch's.

Dtypes: float16, bfloat16, float32, float64 (differentiable), and the
integer and bool dtypes pylucid has (forward only). Other dtypes raise
``TypeError``; a tensor not on the CPU raises ``RuntimeError``.

This module imports torch; ``import pylucid`` never imports it.
"""

from __future__ import annotations

import operator
from numbers import Number
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union, cast

import torch

from . import autograd as _ag
from . import ops as _ops
from ._state import MODE_GRAD, state
from .dlpack import DLPACK_VERSION, from_dlpack as _pl_from_dlpack
from .dlpack import _consume, _export_versioned
from .tensor import Tensor

__all__ = ["minimum", "maximum", "fmin", "fmax", "clamp", "amin", "amax"]

# The torch dtypes pylucid computes on; the floating ones are differentiable.
_FLOATING = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})
_SUPPORTED = _FLOATING | frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64})

# A versioned (DLPack 1.0) capsule of a CPU tensor that does not require
# grad: torch's own exporter, without the checks of Tensor.__dlpack__ (done
# by _check); Tensor.__dlpack__(max_version=...) where it is missing.
_torch_capsule: Callable[[torch.Tensor], Any] = getattr(
    torch._C, "_to_dlpack_versioned", lambda t: t.__dlpack__(max_version=DLPACK_VERSION))
_torch_from_capsule: Callable[[Any], torch.Tensor] = torch._C._from_dlpack


# ---- the exchange: torch <-> pylucid through DLPack, no copies ----


def _check(name: str, t: Any, what: str) -> None:
    """Raises a clear error for what pylucid cannot compute on."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("pylucid.torch.%s: %s must be a torch.Tensor, got %s" % (name, what, type(t).__name__))
    if not t.is_cpu:
        raise RuntimeError("pylucid.torch.%s: %s is on device '%s'; pylucid computes on CPU tensors only "
                           "(move it with .cpu())" % (name, what, t.device))
    if t.dtype not in _SUPPORTED:
        raise TypeError("pylucid.torch.%s: %s has dtype %s, which pylucid does not support (supported: float16, "
                        "bfloat16, float32, float64; integers and bool forward only)" % (name, what, t.dtype))
    if t.requires_grad and t.dtype not in _FLOATING:
        raise TypeError("pylucid.torch.%s: %s of dtype %s requires grad; only floating tensors can"
                        % (name, what, t.dtype))


def _from_torch(t: torch.Tensor) -> Tensor:
    """A pylucid tensor over ``t``'s memory (DLPack; any strides, no copy):
    ``pylucid.from_dlpack(t)`` without its generic checks."""
    if t.dtype is torch.bool:
        return _pl_from_dlpack(t.detach())  # checks that the bytes are 0/1
    return _consume(_torch_capsule(t.detach()))


def _to_torch(t: Tensor) -> torch.Tensor:
    """A torch tensor over the pylucid tensor's memory (DLPack, no copy):
    ``torch.from_dlpack(t)``."""
    return _torch_from_capsule(_export_versioned(t))


# ---- the computations, on pylucid tensors ----

# An op is a function (params, *pylucid tensors) -> pylucid tensor.
_Kernel = Callable[..., Tensor]


def _binary(op: Callable[..., Tensor]) -> _Kernel:
    def run(params: Any, a: Tensor, b: Tensor) -> Tensor:
        return op(a, b)

    return run


_TENSOR = object()  # marks a clamp bound passed as a tensor input


def _clamp_kernel(params: Tuple[Any, Any], x: Tensor, *bounds: Tensor) -> Tensor:
    lo, hi = params
    i = 0
    if lo is _TENSOR:
        lo, i = bounds[0], 1
    if hi is _TENSOR:
        hi = bounds[i]
    return cast(Tensor, _ops.clamp(x, lo, hi))


def _amin_kernel(params: Tuple[Any, bool], x: Tensor) -> Tensor:
    return cast(Tensor, _ops.amin(x, params[0], params[1]))


def _amax_kernel(params: Tuple[Any, bool], x: Tensor) -> Tensor:
    return cast(Tensor, _ops.amax(x, params[0], params[1]))


def _vjp(kernel: _Kernel, params: Any, needs: Tuple[bool, ...], g: torch.Tensor,
         xs: Sequence[torch.Tensor], views: Optional[Sequence[Tensor]] = None) -> Tuple[Optional[torch.Tensor], ...]:
    """pylucid's vector-Jacobian product: the gradient of each input that
    needs one (None for the others), reduced to its shape and dtype. views:
    pylucid tensors over xs' memory already (the forward's)."""
    ps = [_from_torch(x) for x in xs] if views is None else [v.detach() for v in views]
    for p, n in zip(ps, needs):
        if n:
            p.requires_grad_(True)
    prev = state.mode
    state.mode = prev | MODE_GRAD
    try:
        y = kernel(params, *ps)
        # Into the fresh leaves' .grad: what grad(y, inputs, g) returns,
        # for less work per call.
        y.backward(_from_torch(g))
    finally:
        state.mode = prev
    out: List[Optional[torch.Tensor]] = []
    for p, x, n in zip(ps, xs, needs):
        gp = p.grad if n else None
        out.append(_to_torch(gp) if gp is not None else torch.zeros(x.shape, dtype=x.dtype) if n else None)
    return tuple(out)


def _jvp(kernel: _Kernel, params: Any, vs: Sequence[Optional[torch.Tensor]],
         xs: Sequence[torch.Tensor]) -> torch.Tensor:
    """pylucid's Jacobian-vector product: the output's tangent given the
    inputs' tangents vs (None: zero)."""
    ps = [_from_torch(x) for x in xs]
    idx = [i for i, v in enumerate(vs) if v is not None]
    tangents = [_from_torch(v) for v in vs if v is not None]  # in idx's order

    def fn(*moving: Tensor) -> Tensor:
        full = list(ps)
        for i, m in zip(idx, moving):
            full[i] = m
        return kernel(params, *full)

    if not idx:
        y = kernel(params, *ps)
        return torch.zeros(y.shape, dtype=_TORCH_DTYPE[y.dtype.name])
    _, t = _ag.jvp(fn, tuple(ps[i] for i in idx), tuple(tangents))
    return _to_torch(t)


_TORCH_DTYPE = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
                "float64": torch.float64, "bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8,
                "int16": torch.int16, "int32": torch.int32, "int64": torch.int64}


# ---- the torch Functions ----

# torch's Function base, as Any for the type checker (torch's stubs type
# forward/backward loosely, and torch may be absent where mypy runs).
_Function: Any = torch.autograd.Function


class _Select(_Function):
    """y = kernel(params, *xs); its backward is :class:`SelectionVjp`. Each
    public function has its own subclass, named after it (its grad_fn is
    ``MinimumBackward``, ``AmaxBackward``, ...)."""

    @staticmethod
    def forward(ctx: Any, kernel: _Kernel, params: Any, *xs: torch.Tensor) -> torch.Tensor:
        ctx.kernel, ctx.params = kernel, params
        ctx.save_for_backward(*xs)
        views = [_from_torch(x) for x in xs]
        if any(ctx.needs_input_grad):
            # The backward reads the inputs through the same views (fresh
            # leaves by detach(): no new import); ctx.saved_tensors still
            # checks that no input was modified in place meanwhile.
            ctx.views = views
        return _to_torch(kernel(params, *views))

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        xs = ctx.saved_tensors
        needs = ctx.needs_input_grad[2:]
        grads: Tuple[Optional[torch.Tensor], ...]
        if torch.is_grad_enabled():  # create_graph: the gradients are differentiable in turn
            grads = SelectionVjp.apply(ctx.kernel, ctx.params, needs, g, *xs)
        else:  # the same computation, without a node nobody will differentiate
            grads = _vjp(ctx.kernel, ctx.params, needs, g, xs, ctx.views)
        return (None, None) + grads


class SelectionVjp(_Function):
    """``(g, *xs) -> the gradients of xs`` (pylucid's vector-Jacobian
    product); its backward is :class:`SelectionJvp` to ``g``, and nothing to
    ``xs``: the selection masks are constants."""

    @staticmethod
    def forward(ctx: Any, kernel: _Kernel, params: Any, needs: Tuple[bool, ...], g: torch.Tensor,
                *xs: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        ctx.kernel, ctx.params, ctx.needs = kernel, params, needs
        ctx.save_for_backward(*xs)
        return _vjp(kernel, params, needs, g, xs)

    @staticmethod
    def backward(ctx: Any, *vs: Optional[torch.Tensor]) -> Tuple[Optional[torch.Tensor], ...]:
        xs = ctx.saved_tensors
        dg = None
        if ctx.needs_input_grad[3]:
            dg = SelectionJvp.apply(ctx.kernel, ctx.params, ctx.needs, len(xs), *vs, *xs)
        return (None, None, None, dg) + (None,) * len(xs)


class SelectionJvp(_Function):
    """``(*vs, *xs) -> J·vs`` (pylucid's Jacobian-vector product); its
    backward is :class:`SelectionVjp` to ``vs``, and nothing to ``xs``."""

    @staticmethod
    def forward(ctx: Any, kernel: _Kernel, params: Any, needs: Tuple[bool, ...], n: int,
                *args: Optional[torch.Tensor]) -> torch.Tensor:
        vs, xs = args[:n], args[n:]
        ctx.kernel, ctx.params, ctx.needs, ctx.n = kernel, params, needs, n
        ctx.save_for_backward(*xs)
        return _jvp(kernel, params, [v if need else None for v, need in zip(vs, needs)],
                    cast(Sequence[torch.Tensor], xs))

    @staticmethod
    def backward(ctx: Any, w: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        xs = ctx.saved_tensors
        n: int = ctx.n
        needs = tuple(a and b for a, b in zip(ctx.needs, ctx.needs_input_grad[4:4 + n]))
        dvs: Tuple[Optional[torch.Tensor], ...] = (None,) * n
        if any(needs):
            dvs = tuple(SelectionVjp.apply(ctx.kernel, ctx.params, needs, w, *xs))
        return (None, None, None, None) + dvs + (None,) * n


# ---- the public functions ----


_FUNCTIONS: dict[str, Any] = {name: type(name.capitalize(), (_Select,), {"__doc__": "pylucid.torch.%s as a torch Function." % name,
                                                             "__module__": __name__})
              for name in ("minimum", "maximum", "fmin", "fmax", "clamp", "amin", "amax")}


def _apply(name: str, kernel: _Kernel, params: Any, xs: Sequence[torch.Tensor],
           what: Sequence[str] = ("input", "other")) -> torch.Tensor:
    for x, w in zip(xs, what):
        _check(name, x, w)
    return cast(torch.Tensor, _FUNCTIONS[name].apply(kernel, params, *xs))


_MINIMUM, _MAXIMUM = _binary(_ops.minimum), _binary(_ops.maximum)
_FMIN, _FMAX = _binary(_ops.fmin), _binary(_ops.fmax)


def minimum(input: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """``torch.minimum`` by pylucid's rule: ``input`` wins where
    ``input <= other`` or ``input`` is NaN; the gradient goes whole to the
    winner (a tie to ``input``; torch halves it)."""
    return _apply("minimum", _MINIMUM, None, (input, other))


def maximum(input: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """``torch.maximum`` by pylucid's rule: the mirror of :func:`minimum` (``>=``, ties to ``input``)."""
    return _apply("maximum", _MAXIMUM, None, (input, other))


def fmin(input: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """``torch.fmin``: NaN is ignored (``input`` wins where ``input <= other``
    or ``other`` is NaN); the gradient goes whole to the winner."""
    return _apply("fmin", _FMIN, None, (input, other))


def fmax(input: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """``torch.fmax``: the mirror of :func:`fmin` (``>=``)."""
    return _apply("fmax", _FMAX, None, (input, other))


Bound = Union[None, Number, torch.Tensor]


def clamp(input: torch.Tensor, min: Bound = None, max: Bound = None) -> torch.Tensor:
    """``torch.clamp``: exactly ``minimum(maximum(input, min), max)`` (a
    missing bound is skipped; not both). Bounds are numbers or tensors
    broadcasting with ``input``; tensor bounds get gradients where they win.
    At ``input == bound`` the gradient goes to ``input``; with ``min > max``
    every non-NaN element is ``max``."""
    if min is None and max is None:
        raise ValueError("pylucid.torch.clamp: at least one of min and max must not be None")
    xs = [input]
    what = ["input"]
    lo: Any = min
    hi: Any = max
    if isinstance(min, torch.Tensor):
        xs.append(min)
        what.append("min")
        lo = _TENSOR
    if isinstance(max, torch.Tensor):
        xs.append(max)
        what.append("max")
        hi = _TENSOR
    for name, b in (("min", lo), ("max", hi)):
        if b is not None and b is not _TENSOR and (isinstance(b, bool) or not isinstance(b, (int, float))):
            raise TypeError("pylucid.torch.clamp: %s must be None, a number or a torch.Tensor, got %s"
                            % (name, type(b).__name__))
    return _apply("clamp", _clamp_kernel, (lo, hi), xs, what)


Dims = Union[None, int, Sequence[int]]


def _dims(name: str, dim: Dims) -> Any:
    """torch's dim (an int, a sequence where empty means every dim, or None:
    every dim, as recent torch takes it) as pylucid's (None for every dim)."""
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        return None if len(dim) == 0 else tuple(operator.index(d) for d in dim)
    if isinstance(dim, (torch.Tensor, bool)) or not hasattr(dim, "__index__"):
        raise TypeError("pylucid.torch.%s: dim must be an int or a tuple of ints, got %s" % (name, type(dim).__name__))
    return operator.index(cast(int, dim))


def _reduction(name: str, kernel: _Kernel, input: torch.Tensor, dim: Dims, keepdim: bool) -> torch.Tensor:
    dims = _dims(name, dim)
    if dims is not None and isinstance(input, torch.Tensor) and input.dim() == 0:
        # torch takes dim 0 or -1 of a 0-d tensor as the tensor itself
        for d in (dims,) if isinstance(dims, int) else dims:
            if d not in (0, -1):
                raise IndexError("pylucid.torch.%s: dim %d is out of range for a 0-d tensor (0 or -1)" % (name, d))
        dims = None
    return _apply(name, kernel, (dims, bool(keepdim)), (input,))


def amin(input: torch.Tensor, dim: Dims = (), keepdim: bool = False) -> torch.Tensor:
    """``torch.amin``: the smallest element over ``dim`` (an int or a tuple;
    ``()``, the default, reduces every dim, as in torch). Each slice's first
    NaN, else its first smallest element, gets the whole gradient (torch
    splits it evenly among tied elements)."""
    return _reduction("amin", _amin_kernel, input, dim, keepdim)


def amax(input: torch.Tensor, dim: Dims = (), keepdim: bool = False) -> torch.Tensor:
    """``torch.amax``: the mirror of :func:`amin` (the first largest element gets the whole gradient)."""
    return _reduction("amax", _amax_kernel, input, dim, keepdim)

