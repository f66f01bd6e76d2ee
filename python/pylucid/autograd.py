"""Autograd from Python: backward, grad, grad mode, Python-defined Functions
and gradient checks.

The Go engine runs the graph. A Python :class:`Function` is a node whose
backward runs here: the engine stops at it, hands out its output gradients,
and resumes with the input gradients this module computes (docs/autograd.md).
"""

from __future__ import annotations

import functools
import itertools
import threading
from typing import Any, Callable, List, Optional, Protocol, Sequence, Tuple, TypeVar, Union, cast

import numpy as np

from . import _lib
from ._lib import ffi, lib, raise_status
from ._state import MODE_GRAD, is_grad_enabled, state
from ._state import set_grad_enabled as _set_grad
from ._runtime import _hot, functions, records
from ._calls import from_handle
from ._forward import fw as _forward_state
from ._forward import set_forward_level, tangent_of
from .tensor import Tensor, as_tensor, gradient_operand, zeros
from .tensor import late as _tensor_late

__all__ = [
    "backward",
    "grad",
    "Function",
    "FunctionCtx",
    "gradcheck",
    "gradgradcheck",
    "GradcheckError",
    "jvp",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
]

F = TypeVar("F", bound=Callable[..., Any])


class _GradMode:
    """Grad mode as a context manager and decorator. Grad mode is per thread,
    and one object may be entered by several threads at once (or nested on
    one): the states it saves are kept per thread, so each thread's exit
    restores what that thread had."""

    _enabled = True

    def __init__(self) -> None:
        self._tls = threading.local()

    def _stack(self) -> list[int]:
        stack: Optional[list[int]] = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        return stack

    def __enter__(self) -> None:
        self._stack().append(state.mode)
        _set_grad(self._enabled)

    def __exit__(self, *exc: Any) -> None:
        prev = self._stack().pop()
        state.mode = (state.mode & ~MODE_GRAD) | (prev & MODE_GRAD)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._fresh():
                return fn(*args, **kwargs)

        return cast(F, wrapper)

    def _fresh(self) -> "_GradMode":
        return self.__class__()


class no_grad(_GradMode):
    """Context manager (and decorator): ops record no graph on this thread."""

    _enabled = False


class enable_grad(_GradMode):
    """Context manager (and decorator): ops record the graph on this thread."""

    _enabled = True


class set_grad_enabled(_GradMode):
    """Turns graph recording on or off for this thread, at once (as PyTorch's
    ``set_grad_enabled``). Used as a context manager or decorator, it restores
    the calling thread's previous state on exit."""

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self._enabled = bool(mode)
        # The state before this call, restored by the first `with` on this
        # thread (`with set_grad_enabled(False):` has already switched).
        self._tls.before = state.mode
        _set_grad(self._enabled)

    def __enter__(self) -> None:
        before: Optional[int] = getattr(self._tls, "before", None)
        if before is None:
            before = state.mode
        else:
            self._tls.before = None
        self._stack().append(before)
        _set_grad(self._enabled)

    def __call__(self, fn: F) -> F:
        # As a decorator the call itself must not switch the mode.
        before: Optional[int] = getattr(self._tls, "before", None)
        if before is not None:
            self._tls.before = None
            state.mode = (state.mode & ~MODE_GRAD) | (before & MODE_GRAD)
        return super().__call__(fn)

    def _fresh(self) -> "_GradMode":
        fresh = _GradMode()
        fresh._enabled = self._enabled
        return fresh


_FLAG_RETAIN, _FLAG_CREATE, _FLAG_ALLOW_UNUSED = 1, 2, 4
_RETAIN_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call .backward() "
    "or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time "
    "or if you need to access saved tensors after calling backward."
)


def _tensors(xs: Union[Any, Sequence[Any]]) -> list[Tensor]:
    if isinstance(xs, (list, tuple)):
        return [as_tensor(x) for x in xs]
    return [as_tensor(xs)]


def _run(roots: list[Tensor], grads: Optional[list[Optional[Tensor]]], inputs: Optional[list[Tensor]],
         flags: int, create_graph: bool) -> list[Optional[Tensor]]:
    _lib.check_fork()
    n = len(roots)
    root_h = ffi.new("int64_t[]", [r._h for r in roots])
    grad_h = ffi.NULL
    if grads is not None:
        if len(grads) != n:
            raise RuntimeError("grad_tensors has %d entries but there are %d outputs" % (len(grads), n))
        grad_h = ffi.new("int64_t[]", [0 if g is None else g._h for g in grads])
    run = _RunOwner()  # the library writes the handle straight into it
    if inputs is None:
        # backward(): one call runs the whole graph unless it meets a Python Function.
        rc = lib.lucid_backward_run(root_h, grad_h, n, flags, state.mode, run.buf)
        if rc:
            raise_status(rc)
        if run.h == 0:
            return []
    else:
        in_h = ffi.new("int64_t[]", [t._h for t in inputs]) if inputs else ffi.NULL
        rc = lib.lucid_backward_start(root_h, grad_h, n, in_h, len(inputs), flags, state.mode, run.buf)
        if rc:
            raise_status(rc)
    return _drive(run, inputs, create_graph)


class _RunOwner:
    """Owns a backward run handle from the moment the library writes it into
    ``buf`` (the C path's ``_hot.Run`` is the same for its calls): a run
    dropped for any reason, a KeyboardInterrupt between two bytecodes
    included, is released, never leaked with the gradients it holds."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = ffi.new("int64_t*")

    @property
    def h(self) -> int:
        return int(self.buf[0])

    def close(self) -> None:
        h = self.buf[0]
        if h:
            self.buf[0] = 0
            if not _lib._forked:
                lib.lucid_release(h)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


class _Run(Protocol):
    """A started run: _RunOwner, or _hot.Run from the C path."""

    @property
    def h(self) -> int: ...

    def close(self) -> None: ...


def _wrap_handles(hs: Any, n: int) -> list[Optional[Tensor]]:
    """Tensors owning the n gradient handles in hs (0: None), ABI mode: the
    handles not yet wrapped are released if anything raises."""
    res: list[Optional[Tensor]] = []
    try:
        for i in range(n):
            res.append(from_handle(hs[i]) if hs[i] else None)
    except BaseException:
        for i in range(len(res) + 1, n):
            if hs[i] and not _lib._forked:
                lib.lucid_release(hs[i])
        raise
    return res


def _abi_backward_next(h: int) -> Optional[Tuple[int, list[Optional[Tensor]], bool]]:
    """_hot.backward_next through cffi (ABI mode)."""
    fid, ngrads, release = ffi.new("int64_t*"), ffi.new("int32_t*"), ffi.new("int32_t*")
    cap = _max_outputs
    buf = ffi.new("int64_t[]", cap)
    rc = lib.lucid_backward_next(h, fid, buf, cap, ngrads, release)
    if rc:
        raise_status(rc)
    if fid[0] == 0:
        return None
    return fid[0], _wrap_handles(buf, ngrads[0]), bool(release[0])


def _abi_backward_result(h: int, n: int) -> list[Optional[Tensor]]:
    """_hot.backward_result through cffi (ABI mode)."""
    out = ffi.new("int64_t[]", max(n, 1))
    rc = lib.lucid_backward_result(h, out, n)
    if rc:
        raise_status(rc)
    return _wrap_handles(out, n)


# Each gradient the engine hands out is owned by its Tensor before anything
# can raise (python/csrc/autograd.c); ABI mode does it in Python.
_backward_next: Callable[[int], Optional[Tuple[int, list[Optional[Tensor]], bool]]] = \
    _hot.backward_next if _hot is not None else _abi_backward_next
_backward_result: Callable[[int, int], list[Optional[Tensor]]] = \
    _hot.backward_result if _hot is not None else _abi_backward_result


def _drive(run: _Run, inputs: Optional[list[Tensor]], create_graph: bool) -> list[Optional[Tensor]]:
    """Runs a started backward to the end, running Python Functions as the
    engine stops at them, and releases the run."""
    try:
        h = run.h
        while True:
            step = _backward_next(h)
            if step is None:
                break
            fid, out_grads, release = step
            record = records.get(fid)
            if record is None:
                raise RuntimeError("autograd.Function node %d is no longer known" % fid)
            results = record.run_backward(out_grads, create_graph)
            keep = results  # keep the tensors alive across the call
            res_h = ffi.new("int64_t[]", [0 if g is None else g._h for g in keep] or [0])
            rc = lib.lucid_backward_resume(h, res_h, len(keep))
            if rc:
                raise_status(rc)  # the node's claim went back: its ctx stays, for the next call's same error
            if release:
                record.ctx._free()  # only once the engine took the gradients
        if inputs is None:
            return []
        return list(_backward_result(h, len(inputs)))
    finally:
        run.close()


def _gradients(gs: Sequence[Any], roots: Sequence[Tensor]) -> List[Optional[Tensor]]:
    """The given gradients as tensors, a Python number in its output's dtype
    (gradient_operand); the engine checks their count and shapes."""
    return [None if g is None else as_tensor(gradient_operand(g, roots[i]) if i < len(roots) else g)
            for i, g in enumerate(gs)]


def backward(tensors: Union[Tensor, Sequence[Tensor]], grad_tensors: Optional[Sequence[Any]] = None,
             retain_graph: Optional[bool] = None, create_graph: bool = False) -> None:
    """Accumulates gradients of ``tensors`` into the ``.grad`` of every leaf."""
    roots = _tensors(tensors)
    grads = None if grad_tensors is None else _gradients(grad_tensors, roots)
    retain = create_graph if retain_graph is None else retain_graph
    flags = (_FLAG_RETAIN if retain else 0) | (_FLAG_CREATE if create_graph else 0)
    _run(roots, grads, None, flags, create_graph)


def grad(outputs: Union[Tensor, Sequence[Tensor]], inputs: Union[Tensor, Sequence[Tensor]],
         grad_outputs: Optional[Sequence[Any]] = None, retain_graph: Optional[bool] = None,
         create_graph: bool = False, allow_unused: bool = False) -> Tuple[Optional[Tensor], ...]:
    """The gradients of ``outputs`` with respect to ``inputs`` (no ``.grad`` is touched)."""
    if _hot is not None and not create_graph:
        # The common forms in C (python/csrc): Tensors, and gradients given as
        # Tensors, NumPy arrays (lent for the call) or None.
        outs = outputs if type(outputs) is tuple else (outputs,) if type(outputs) is Tensor else tuple(outputs) \
            if type(outputs) is list else None
        ins_t = inputs if type(inputs) is tuple else (inputs,) if type(inputs) is Tensor else tuple(inputs) \
            if type(inputs) is list else None
        if grad_outputs is None or type(grad_outputs) is tuple:
            gos: Any = grad_outputs
        elif type(grad_outputs) is list:
            gos = tuple(grad_outputs)
        else:
            gos = (grad_outputs,)
        if outs is not None and ins_t is not None:
            _flags = (_FLAG_RETAIN if retain_graph else 0) | (_FLAG_ALLOW_UNUSED if allow_unused else 0)
            if _lib._forked:
                _lib.check_fork()
            r = _hot.grad_run(outs, gos, ins_t, _flags)
            if r is not NotImplemented:
                if type(r) is tuple:
                    return r
                return tuple(_drive(r, list(ins_t), False))
    roots = _tensors(outputs)
    ins = _tensors(inputs)
    grads = None
    if grad_outputs is not None:
        go = grad_outputs if isinstance(grad_outputs, (list, tuple)) else [grad_outputs]
        grads = _gradients(go, roots)
    retain = create_graph if retain_graph is None else retain_graph
    flags = ((_FLAG_RETAIN if retain else 0) | (_FLAG_CREATE if create_graph else 0)
             | (_FLAG_ALLOW_UNUSED if allow_unused else 0))
    return tuple(_run(roots, grads, ins, flags, create_graph))


# ---- Python-defined functions ----


class FunctionCtx:
    """The ``ctx`` of a :class:`Function`: save tensors in forward, read them in backward."""

    def __init__(self) -> None:
        self.needs_input_grad: Tuple[bool, ...] = ()
        self._saved: Tuple[Any, ...] = ()
        self._versions: Tuple[Optional[int], ...] = ()
        self._freed = False
        self._node = "a Function's backward"  # "<Name>Backward", set by Function.apply

    def save_for_backward(self, *tensors: Any) -> None:
        """Keeps tensors (or other values) for ``backward``, read back with
        ``saved_tensors``; a tensor written in place after ``forward``
        returned (out=, a method ending in _) makes that read raise, as a
        native node does (docs/autograd.md). Writes inside ``forward``
        itself are allowed, as in PyTorch: the versions are taken when it
        returns."""
        self._saved = tensors

    def _record_versions(self) -> None:
        self._versions = tuple(t._version if isinstance(t, Tensor) else None for t in self._saved)

    @property
    def saved_tensors(self) -> Tuple[Any, ...]:
        """What ``save_for_backward`` kept; raises once the graph was freed
        (backward without ``retain_graph=True``), or when a saved tensor was
        written in place since it was saved."""
        if self._freed:
            raise RuntimeError(_RETAIN_MESSAGE)
        for i, (t, v) in enumerate(zip(self._saved, self._versions)):
            if v is not None and t._version != v:
                raise RuntimeError(modified_message(t, self._node, i, t._version, v))
        return self._saved

    def _free(self) -> None:
        self._saved = ()
        self._versions = ()
        self._freed = True


def modified_message(t: Tensor, node: str, index: int, version: int, expected: int) -> str:
    """The error of a saved tensor written in place since it was saved (the
    native nodes' message, core/autograd: ModifiedError)."""
    return ("one of the variables needed for gradient computation has been modified by an inplace operation: the "
            "%s tensor of shape %s that %s saved (saved tensor %d) is at version %d; expected version %d instead. "
            "Hint: an in-place write (out=, t[...] = v, or a method ending in _) changed it after the forward pass; write into "
            "a copy instead, or make the in-place change after backward." % (t.dtype.name, t.shape, node, index,
                                                                             version, expected))


class _FunctionRecord:
    """What the engine needs to run one Function call's backward."""

    __slots__ = ("cls", "ctx", "tensor_positions", "nargs", "out_meta", "__weakref__")

    def __init__(self, cls: "type[Function]", ctx: FunctionCtx, tensor_positions: list[int], nargs: int,
                 out_meta: list[Tuple[Tuple[int, ...], Any]]) -> None:
        self.cls = cls
        self.ctx = ctx
        self.tensor_positions = tensor_positions
        self.nargs = nargs
        self.out_meta = out_meta

    def run_backward(self, grads: list[Optional[Tensor]], create_graph: bool) -> list[Optional[Tensor]]:
        if self.ctx._freed:
            raise RuntimeError(_RETAIN_MESSAGE)
        full = [g if g is not None else zeros(shape, dt) for g, (shape, dt) in zip(grads, self.out_meta)]
        prev = state.mode
        _set_grad(create_graph)
        try:
            res = self.cls.backward(self.ctx, *full)
        finally:
            state.mode = prev
        if not isinstance(res, tuple):
            res = (res,)
        name = self.cls.__name__
        if len(res) != self.nargs:
            raise RuntimeError("function %sBackward returned an incorrect number of gradients (expected %d, got %d)"
                               % (name, self.nargs, len(res)))
        return [None if res[i] is None else as_tensor(res[i]) for i in self.tensor_positions]


_function_ids = itertools.count(1)
# The most outputs any Function call has had: the size of backward's buffer.
_max_outputs = 64


class Function:
    """Base class of Python-defined differentiable functions.

    Subclasses define ``forward(ctx, *args)`` and ``backward(ctx, *grads)`` as
    static methods and are called with ``MyFn.apply(*args)``. Their nodes join
    the same graph as native ops and are run by the same engine.
    """

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        """Computes the outputs from the inputs (runs without recording a graph)."""
        raise NotImplementedError("subclasses of pylucid.autograd.Function define forward")

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        """Returns one gradient per argument of ``forward`` (None for
        non-tensors), given one gradient per output."""
        raise NotImplementedError("subclasses of pylucid.autograd.Function define backward")

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """Runs ``forward`` and, when an input requires grad, records a node
        whose backward is this class's ``backward``. Inside
        :func:`jvp`, an input with a tangent calls the class's
        ``jvp(ctx, *tangents)`` (one tangent per argument, None for
        non-tensors and inputs without one) for the outputs' tangents; a
        class without ``jvp`` raises NotImplementedError."""
        _lib.check_fork()
        ctx = FunctionCtx()
        ctx._node = cls.__name__ + "Backward"
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        level = _forward_state.level
        tangents = [tangent_of(a) for a in args] if level is not None else []
        forward_mode = any(t is not None for t in tangents)
        if forward_mode and getattr(cls, "jvp", None) is None:
            raise NotImplementedError("%s has no jvp(ctx, *tangents) staticmethod: it cannot be used in forward mode "
                                      "(pylucid.autograd.jvp)" % cls.__name__)
        prev = set_forward_level(None) if level is not None else None  # forward's own ops push no tangents
        try:
            with no_grad():
                result = cls.forward(ctx, *args)
        finally:
            if level is not None:
                set_forward_level(prev)
        ctx._record_versions()
        single = not isinstance(result, tuple)
        outs = [as_tensor(o) for o in ((result,) if single else result)]
        if forward_mode:
            outs = _function_jvp(cls, ctx, outs, tangents, level)
        if is_grad_enabled() and any(ctx.needs_input_grad):
            outs = [o.detach() for o in outs]  # fresh tensors to carry this node
            global _max_outputs
            _max_outputs = max(_max_outputs, len(outs))
            positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
            ins = [args[i] for i in positions]
            fid = next(_function_ids)  # atomic under the GIL: no lock a finalizer could find held
            record = _FunctionRecord(cls, ctx, positions, len(args), [(o.shape, o.dtype) for o in outs])
            records[fid] = record
            if _hot is None:
                functions[fid] = record  # no owner field on the outputs: kept until the node is gone
            in_h = ffi.new("int64_t[]", [t._h for t in ins])
            out_h = ffi.new("int64_t[]", [t._h for t in outs])
            rc = lib.lucid_function_record((cls.__name__ + "Backward").encode(), fid, in_h, len(ins), out_h,
                                           len(outs))
            if rc:
                functions.pop(fid, None)
                raise_status(rc)
            for o in outs:
                o._rg = o.dtype.is_floating_point
                if o._rg and _hot is not None:
                    o._fn = record  # the outputs own the record (see tensor.records)
        return outs[0] if single else tuple(outs)


def _function_jvp(cls: "type[Function]", ctx: FunctionCtx, outs: list[Tensor], tangents: list[Optional[Tensor]],
                  level: Any) -> list[Tensor]:
    """Runs cls.jvp for a Function call in forward mode and records the
    outputs' tangents in the level."""
    prev = set_forward_level(None)
    try:
        with no_grad():
            res = cls.jvp(ctx, *tangents)  # type: ignore[attr-defined]
    finally:
        set_forward_level(prev)
    res_t = res if isinstance(res, tuple) else (res,)
    if len(res_t) != len(outs):
        raise RuntimeError("%s.jvp returned %d tangents for %d outputs" % (cls.__name__, len(res_t), len(outs)))
    # An output returned twice gets a tangent of its own as a detached alias;
    # outputs are told apart by identity (== on tensors is elementwise).
    outs = [o.detach() if any(o is p for p in outs[:i]) else o for i, o in enumerate(outs)]
    for o, t in zip(outs, res_t):
        if t is not None:
            level[id(o)] = (o, _check_tangent(as_tensor(t), o, "%s.jvp" % cls.__name__))
    return outs


# ---- forward mode ----


def _check_tangent(t: Tensor, p: Tensor, what: str) -> Tensor:
    if t.shape != p.shape:
        raise ValueError("%s: a tangent has shape %s, but its primal has shape %s" % (what, t.shape, p.shape))
    if not p.dtype.is_floating_point:
        raise TypeError("%s: a primal of dtype %s cannot have a tangent (only floating tensors)" % (what, p.dtype))
    return t.detach() if t.dtype == p.dtype else t.detach().to(p.dtype)


def jvp(fn: Callable[..., Any], primals: Union[Tensor, Sequence[Tensor]],
        tangents: Union[Any, Sequence[Any]]) -> Tuple[Any, Any]:
    """Forward mode: ``(fn(*primals), J·tangents)``.

    ``primals`` and ``tangents`` are a Tensor each, or sequences of the same
    length (a tangent: a Tensor or array of its primal's shape; its primal
    must be floating). Each op that ``fn`` calls pushes the tangents forward
    with its own rule (for the min/max family an output's tangent is its
    winner's tangent, bit for bit: the exact transpose of the backward). The
    output tangents have the structure of ``fn``'s result (a Tensor, or a
    tuple/list of them); an output that does not depend on the primals, or
    an integer output, gets zeros. A :class:`Function` used inside needs a
    ``jvp(ctx, *tangents)`` staticmethod.
    """
    _lib.check_fork()
    single = isinstance(primals, Tensor)
    ps = [cast(Tensor, primals)] if single else list(cast(Sequence[Tensor], primals))
    if isinstance(tangents, (list, tuple)):
        ts = list(tangents)
    else:
        ts = [tangents]
    if len(ps) != len(ts):
        raise ValueError("jvp: %d primals but %d tangents" % (len(ps), len(ts)))
    level: dict[int, Tuple[Tensor, Tensor]] = {}
    for p, t in zip(ps, ts):
        if not isinstance(p, Tensor):
            raise TypeError("jvp: primals must be Tensors, got %s" % type(p).__name__)
        level[id(p)] = (p, _check_tangent(as_tensor(t), p, "jvp"))
    prev = set_forward_level(level)
    try:
        out = fn(*ps)
    finally:
        set_forward_level(prev)

    def tangent(o: Any) -> Any:
        if not isinstance(o, Tensor):
            raise TypeError("jvp: fn must return a Tensor or a tuple/list of Tensors, got %s" % type(o).__name__)
        e = level.get(id(o))
        if e is not None and e[0] is o:
            return e[1]
        return zeros(o.shape, o.dtype)

    if isinstance(out, tuple):
        tans: Any = tuple(tangent(o) for o in out)
        if hasattr(out, "_fields"):  # a named tuple (ops.min/max over a dim)
            tans = type(out)(*tans)
    elif isinstance(out, list):
        tans = [tangent(o) for o in out]
    else:
        tans = tangent(out)
    return out, tans


# ---- gradient checks ----


class GradcheckError(RuntimeError):
    """Raised by gradcheck/gradgradcheck when gradients disagree."""


def _as_inputs(inputs: Union[Tensor, Sequence[Tensor]]) -> list[Tensor]:
    return list(inputs) if isinstance(inputs, (list, tuple)) else [cast(Tensor, inputs)]


def _outputs(fn: Callable[..., Any], xs: Sequence[Tensor]) -> list[Tensor]:
    out = fn(*xs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _numpy64(t: Tensor) -> np.ndarray:
    return np.array(t.detach().numpy(), dtype=np.float64)


def gradcheck(fn: Callable[..., Any], inputs: Union[Tensor, Sequence[Tensor]], eps: float = 1e-6,
              atol: float = 1e-5, rtol: float = 1e-3, raise_exception: bool = True) -> bool:
    """Compares the analytical Jacobian (autograd) with central finite
    differences for every input that requires grad and every output (float64
    expected). Returns True, or raises GradcheckError (False with
    raise_exception=False)."""
    from .tensor import tensor as make

    xs = _as_inputs(inputs)
    base = [_numpy64(x) for x in xs]
    outs = _outputs(fn, xs)
    diff = [i for i, x in enumerate(xs) if x.requires_grad]
    if not diff:
        raise ValueError("gradcheck: no input requires grad")

    def evaluate(vals: list[np.ndarray]) -> list[np.ndarray]:
        # Fresh inputs like the originals (fn may itself differentiate them).
        ts = [make(v, dtype=x.dtype, requires_grad=x.requires_grad) for v, x in zip(vals, xs)]
        return [_numpy64(o) for o in _outputs(fn, ts)]

    for k, out in enumerate(outs):
        n_out = out.numel()
        for i in diff:
            n_in = base[i].size
            numerical = np.zeros((n_in, n_out))
            for j in range(n_in):
                plus = [b.copy() for b in base]
                minus = [b.copy() for b in base]
                plus[i].reshape(-1)[j] += eps
                minus[i].reshape(-1)[j] -= eps
                numerical[j] = ((evaluate(plus)[k] - evaluate(minus)[k]) / (2 * eps)).reshape(-1)
            analytical = np.zeros((n_in, n_out))
            if out.requires_grad:
                for m in range(n_out):
                    onehot = np.zeros(out.shape, dtype=out.dtype.numpy_dtype)
                    onehot.reshape(-1)[m] = 1
                    g = grad([out], [xs[i]], grad_outputs=[onehot], retain_graph=True, allow_unused=True)[0]
                    if g is not None:
                        analytical[:, m] = _numpy64(g).reshape(-1)
            if not np.allclose(analytical, numerical, atol=atol, rtol=rtol):
                if not raise_exception:
                    return False
                raise GradcheckError(
                    "Jacobian mismatch for output %d with respect to input %d:\nnumerical:%s\nanalytical:%s"
                    % (k, i, numerical, analytical)
                )
    return True


def gradgradcheck(fn: Callable[..., Any], inputs: Union[Tensor, Sequence[Tensor]],
                  grad_outputs: Optional[Sequence[Any]] = None, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, raise_exception: bool = True, seed: int = 0) -> bool:
    """Checks second-order gradients: gradcheck of the map (inputs, v) ->
    grad(fn(inputs), inputs, grad_outputs=v, create_graph=True), with the
    upstream gradients v as inputs too (random float64 when not given)."""
    from .tensor import tensor as make

    xs = _as_inputs(inputs)
    outs = _outputs(fn, xs)
    rng = np.random.default_rng(seed)
    if grad_outputs is None:
        vs = [make(rng.standard_normal(o.shape), dtype=o.dtype, requires_grad=True) for o in outs]
    else:
        vs = [make(v, requires_grad=True) if not isinstance(v, Tensor) else v for v in grad_outputs]
    n = len(xs)
    wrt = [i for i, x in enumerate(xs) if x.requires_grad]

    def first_derivative(*args: Tensor) -> Tuple[Tensor, ...]:
        ins, ups = list(args[:n]), list(args[n:])
        ys = _outputs(fn, ins)
        gs = grad(ys, [ins[i] for i in wrt], grad_outputs=ups, create_graph=True, allow_unused=True)
        return tuple(g if g is not None else zeros(ins[i].shape, ins[i].dtype) for g, i in zip(gs, wrt))

    return gradcheck(first_derivative, xs + vs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception)


_tensor_late.drive, _tensor_late.run, _tensor_late.backward = _drive, _run, backward
