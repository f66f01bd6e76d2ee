"""NumPy's override protocols for Tensor: ``__array_ufunc__`` and
``__array_function__`` (docs/interop.md, "NumPy protocols").

The ufuncs and functions that pylucid has an op for run that op, so
``np.minimum(t, x)``, ``np.clip(t, 0, 1)`` or ``np.amax(t, axis=0)`` return
Tensors with autograd. Everything else goes to NumPy with each Tensor seen as
the array sharing its memory, and returns NumPy's own result; when a Tensor
that requires grad takes part, that would lose the graph, so it raises
``TypeError`` naming the function instead.

This module sits above ops: Tensor's protocol methods reach it through
``tensor.late`` (the package imports it), so tensor.py never imports it.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, Mapping, Sequence, Tuple

import numpy as np

from . import ops
from .tensor import Tensor, late

# What a handler returns for a call pylucid does not take over (an argument
# or a value it has no op for): the call then goes to NumPy as any other.
_OTHER: Any = object()

# NumPy's "argument not given" default (numpy._NoValue), so that a handler
# can tell `keepdims` left out from `keepdims=False`.
_NV: Any = getattr(np, "_NoValue", object())

# ---- the table, from the library's records ----

# Each public op's record lists the NumPy ufuncs and functions it is
# ("minimum", "minimum.reduce" for a ufunc's reduce, "amin", "nanmin", ...):
# ufunc calls run the op (_CALL), a ufunc's reduce the reduction (_REDUCE),
# a function its handler by the op's signature (_FUNCS). np.true_divide is
# np.divide.
_CALL: Dict[np.ufunc, Callable[..., Any]] = {}
_REDUCE: Dict[np.ufunc, Callable[..., Any]] = {}
_FUNCS: Dict[Any, Callable[..., Any]] = {}


def array_ufunc(ufunc: np.ufunc, method: str, inputs: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """Tensor.__array_ufunc__: the pylucid op for ufunc, else NumPy."""
    op: Any = None
    if method == "__call__":
        op = _CALL.get(ufunc)
        if op is not None and not _foreign(inputs, kwargs):
            if not kwargs:
                return op(*inputs)
            if len(kwargs) == 1 and "out" in kwargs and len(kwargs["out"]) == 1:
                return op(*inputs, out=kwargs["out"][0])  # the op returns out itself, as NumPy
    elif method == "reduce":
        op = _REDUCE.get(ufunc)
        if op is not None and not _foreign(inputs, kwargs):
            r = _reduce(op, inputs, kwargs)
            if r is not _OTHER:
                return r
    if _foreign(inputs, kwargs):
        return NotImplemented
    name = "numpy.%s" % ufunc.__name__ if method == "__call__" else "numpy.%s.%s" % (ufunc.__name__, method)
    return _other(name, getattr(ufunc, method), inputs, kwargs, op is not None)


def _reduce(op: Callable[..., Any], inputs: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """ufunc.reduce(a, axis=0, dtype=None, out=None, keepdims=False) as
    amin/amax; any other argument (initial, where, a dtype) is _OTHER."""
    if len(inputs) != 1:
        return _OTHER
    axis: Any = 0  # NumPy's default for ufunc.reduce
    keepdims = False
    out = None
    for k, v in kwargs.items():
        if k == "axis":
            axis = v
        elif k == "keepdims":
            keepdims = bool(v)
        elif k == "out":
            if len(v) != 1:
                return _OTHER
            out = v[0]
        elif k == "dtype" and v is None:
            pass
        else:
            return _OTHER
    return op(inputs[0], axis, keepdims, out=out)


# Whether a type has a protocol method of its own (not NumPy's arrays' nor
# Tensor's), by (type, method): pylucid answers NotImplemented to calls that
# involve one, so that NumPy asks that type instead.
_known: Dict[Tuple[type, str], bool] = {}


def _is_foreign(t: type, method: str = "__array_ufunc__") -> bool:
    f = _known.get((t, method))
    if f is None:
        m = getattr(t, method, None)
        f = m is not None and m is not getattr(np.ndarray, method) and not issubclass(t, Tensor)
        _known[(t, method)] = f
    return f


def _foreign(inputs: Tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
    for x in inputs:
        if type(x) is not Tensor and _is_foreign(type(x)):
            return True
    out = kwargs.get("out")
    if out is not None:
        for x in out:
            if x is not None and type(x) is not Tensor and _is_foreign(type(x)):
                return True
    return False


# ---- functions ----


def _keep(keepdims: Any) -> bool:
    return False if keepdims is _NV else bool(keepdims)


def _clip_handler(op: Callable[..., Any]) -> Callable[..., Any]:
    def handler(a: Any, a_min: Any = _NV, a_max: Any = _NV, out: Any = None, *, min: Any = _NV, max: Any = _NV,
                **kwargs: Any) -> Any:
        if kwargs:  # ufunc arguments (where=, casting=, dtype=, ...)
            return _OTHER
        if a_min is not _NV and min is not _NV or a_max is not _NV and max is not _NV:
            raise TypeError("clip: pass a_min or min (a_max or max), not both")
        lo = a_min if min is _NV else min
        hi = a_max if max is _NV else max
        lo = None if lo is _NV else lo
        hi = None if hi is _NV else hi
        if lo is None and hi is None:
            return _OTHER  # NumPy returns a copy; pylucid's clamp needs a bound
        return op(a, lo, hi, out=out)

    return handler


# The arguments a reduction's handler takes from NumPy's signatures; any
# other one given (initial=, where=, a dtype=, ddof=) goes to NumPy.
_TAKEN = {"a", "axis", "out", "keepdims"}


def _reduction_handler(func: Any, op: Callable[..., Any], floating: bool) -> Callable[..., Any]:
    """A handler of NumPy's func (amin, nanmax, argmin, sum, mean, ...) by its
    own signature: (a, axis, out, keepdims) to op(a, axis, keepdims,
    out=out). An op that takes floating inputs only (mean) leaves others to
    NumPy, which averages integers in float64."""
    sig = inspect.signature(func)

    def handler(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return _OTHER  # NumPy raises its own error
        given = bound.arguments
        for k, v in given.items():
            if k not in _TAKEN and not (k == "dtype" and v is None) and v is not _NV:
                return _OTHER
        a = given["a"]
        if floating and isinstance(a, Tensor) and not a.dtype.is_floating_point:
            return _OTHER
        return op(a, given.get("axis"), _keep(given.get("keepdims", _NV)), out=given.get("out"))

    return handler


def _register() -> None:
    from . import _lib

    for s in _lib.schema_table():
        if not s["numpy"] or not hasattr(ops, s["name"]):
            continue
        op = getattr(ops, s["name"])
        for name in s["numpy"]:
            ufunc, _, method = name.partition(".")
            f = getattr(np, ufunc)
            if method == "reduce":
                _REDUCE[f] = op
            elif isinstance(f, np.ufunc):
                _CALL[f] = op
            elif s["signature"] == "clamp":
                _FUNCS[f] = _clip_handler(op)
            else:
                _FUNCS[f] = _reduction_handler(f, op, s["floating"])


_register()


def array_function(func: Any, types: Sequence[type], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """Tensor.__array_function__: the pylucid op for func, else NumPy."""
    for t in types:
        if t is not Tensor and _is_foreign(t, "__array_function__"):
            return NotImplemented
    h = _FUNCS.get(func)
    if h is not None:
        r = h(*args, **kwargs)
        if r is not _OTHER:
            return r
    name = "%s.%s" % (getattr(func, "__module__", None) or "numpy", getattr(func, "__name__", repr(func)))
    # The implementation behind NumPy's dispatch, so that the call does not
    # come back here.
    impl = getattr(func, "_implementation", func)
    return _other(name, impl, args, kwargs, h is not None)


# ---- any other ufunc or function: NumPy on the tensors' memory ----


def _needs_grad(x: Any) -> bool:
    if isinstance(x, Tensor):
        return x.requires_grad
    if type(x) in (list, tuple):
        return any(_needs_grad(i) for i in x)
    if type(x) is dict:
        return any(_needs_grad(i) for i in x.values())
    return False


def _as_numpy(x: Any) -> Any:
    """x with every Tensor in it (lists, tuples and dicts searched) replaced
    by the NumPy array sharing its memory."""
    if isinstance(x, Tensor):
        return x.numpy()
    if type(x) in (list, tuple):
        items = [_as_numpy(i) for i in x]
        if all(a is b for a, b in zip(items, x)):
            return x
        return items if type(x) is list else tuple(items)
    if type(x) is dict:
        return {k: _as_numpy(v) for k, v in x.items()}
    return x


def _other(name: str, impl: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any],
           mapped: bool) -> Any:
    """impl (NumPy's) on args with each Tensor as an array, when none
    requires grad; a Tensor given as out= is returned as itself."""
    if _needs_grad(args) or _needs_grad(kwargs):
        how = " with these arguments" if mapped else ""
        raise TypeError(
            "%s%s is not supported by pylucid on a tensor that requires grad (the graph would be lost); call "
            ".detach() first, or use pylucid.ops" % (name, how)
        )
    conv_args = _as_numpy(args)
    conv_kwargs = _as_numpy(kwargs)
    res = impl(*conv_args, **conv_kwargs)
    given = kwargs.get("out")
    if given is None:
        return res
    # A Tensor given as out= comes back as itself, where NumPy returns the
    # array it wrote into (that Tensor's memory).
    made = conv_kwargs["out"]
    pairs = zip(given, made) if type(given) is tuple else [(given, made)]
    swap = {id(m): g for g, m in pairs if isinstance(g, Tensor)}
    if not swap:
        return res
    if type(res) is tuple:
        return tuple(swap.get(id(r), r) for r in res)
    return swap.get(id(res), res)


late.array_ufunc = array_ufunc
late.array_function = array_function
