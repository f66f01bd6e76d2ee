"""pylucid's min/max family for JAX arrays (docs/interop.md, "JAX").

    >>> import jax, jax.numpy as jnp
    >>> import pylucid.jax as pj
    >>> x = jnp.array([1.0, 3.0, 3.0])
    >>> jax.grad(lambda x: pj.amax(x))(x)       # the whole gradient to the first winner
    Array([0., 1., 0.], dtype=float32)

``minimum``, ``maximum``, ``fmin``, ``fmax``, ``clamp`` (alias ``clip``),
``amin``, ``amax``, ``argmin`` and ``argmax`` take jnp's argument names
(``x1, x2``; ``a, axis, keepdims``; ``clamp(x, min=None, max=None)``) and
CPU jax arrays (NumPy arrays and Python scalars too, converted and promoted
as jnp does). Their values and gradients are pylucid's, bit for bit, with
its rules (docs/semantics.md): ties go to the first operand / first
position, NaN to the operand that produced it, a reduction's whole gradient
to its winner; JAX's own ``jnp.minimum``/``jnp.max`` split ties.

Design
------
Every op runs pylucid's kernels inside ``jax.pure_callback``: the callback
wraps the host buffers JAX lends it with :func:`pylucid.from_numpy` (no
copy) and hands back ``Tensor.numpy()`` views of pylucid's results. JAX
copies the operands into the callback and the results out of it; the bridge
adds no copy of its own.

* Gradients: each op is a ``jax.custom_vjp`` whose backward is a second
  pylucid.jax function, ``route`` (the vector-Jacobian product ``Jᵀg``,
  computed by :func:`pylucid.autograd.grad`), itself a ``custom_vjp`` whose
  backward is ``select`` (the Jacobian-vector product ``J·u``, computed by
  :func:`pylucid.autograd.jvp`), whose backward is ``route`` again: route
  and select are adjoint, as in pylucid's core, so ``jax.grad`` works to any
  order. Their derivatives with respect to the primal inputs are zero (the
  Jacobian of a selection is piecewise constant), as in pylucid.
  Forward mode (``jax.jvp``, ``jax.jacfwd``) is not available: JAX does not
  differentiate a ``custom_vjp`` function forward; ``jax.jacrev`` works.
* ``jax.jit``: the callbacks are staged into the compiled program.
* ``jax.vmap``: the callbacks declare ``vmap_method``: the forward uses
  ``"expand_dims"`` (operands are first brought to a common rank, so
  pylucid's broadcasting lines the batch dimension up), ``route`` and
  ``select`` ``"broadcast_all"``; a reduction's callback shifts its axes past
  the leading batch dimensions it finds, and ``argmin``/``argmax`` over all
  axes flattens each batch element's slice.
* Integer and bool operands, and ``argmin``/``argmax``, are forward only
  (their operands pass through ``lax.stop_gradient``).

Why ``pure_callback`` and not the XLA FFI. Measured jitted, float32, on the
development machine (2 shared, loaded cores: medians, rough to ±30%),
forward ``minimum`` (``bench/jax_ffi_prototype.py``, whose FFI handler,
``bench/jax_ffi_prototype.cc``, borrows XLA's operand buffers and writes
into its result buffer through pylucid's C API):

    elements   callback doing nothing   pylucid.jax   FFI prototype   jnp.minimum
    1,000      0.21-0.25 ms             0.40-0.44 ms  0.015 ms        0.06 ms
    2^24       400-425 ms               360-510 ms    100-130 ms      120-190 ms

and ``jax.value_and_grad`` of ``sum(minimum(a, b))`` (both operands):
1.6 ms against jnp's 0.11 ms at 1,000 elements (14x), 1.2-2.0 s against
0.3-0.5 s at 2^24 (3.9-5x; ``bench/run.py`` reports it). Nearly all of
pylucid.jax's time is JAX's callback machinery: it copies every operand into
the callback and every result out of it (a callback that does nothing costs
as much), while pylucid's own work is 30 ms (forward) and 110 ms (route) at
2^24. An FFI handler removes that: about 25x less per call, and as fast as
jnp's own forward at 2^24. It is not used yet because it has to be compiled against
XLA's FFI ABI and shipped in the wheel (a C handler in pylucid's extension,
handed to JAX as a capsule), with route and select driven through pylucid's
C API (``lucid_backward_start``, ``lucid_op_jvp``) and every op's attributes
and batch dimensions decoded in C; ``pure_callback`` gives the same values,
gradients, jit and vmap today with pylucid's Python API.

Not supported: arrays on a device other than the CPU (``ValueError``; under
``jax.jit`` the placement is not visible, and a callback always runs on the
host), dtypes pylucid lacks (uint16/32/64, complex: ``TypeError``).
"""

from __future__ import annotations

import contextlib
import functools
import operator
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Tuple, Union, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import _lib, autograd, ops
from .amp import autocast, is_autocast_enabled
from .dtypes import from_numpy_dtype
from .tensor import Tensor, from_numpy

# The ops this bridge offers are the records that list it ("jax" in their
# bridges), each in the form its signature says.
_RECORDS = _lib.bridge_records("jax")
_SIGNATURE = {s["name"]: s["signature"] for s in _RECORDS}

ArrayLike = Any
Axis = Union[None, int, Sequence[int]]
Key = Tuple[Any, ...]
Kernel = Callable[[Sequence[Tensor], int], Tensor]


# ---- inside the callbacks: host buffers as pylucid tensors


def _t(a: Any, requires_grad: bool = False) -> Tensor:
    # np.asarray of the host buffer JAX lends (a NumPy array or, in newer
    # JAX, a CPU jax.Array) is a view of it; from_numpy shares it.
    return from_numpy(np.asarray(a), requires_grad)


def _plain() -> Any:
    """Autocast off in a callback (it runs on a thread of JAX's, or on the
    caller's, which may have turned pylucid's autocast on)."""
    return autocast(enabled=False) if is_autocast_enabled() else contextlib.nullcontext()


def _batch_dims(arrays: Sequence[Any], nd: int) -> int:
    """How many leading batch dimensions jax.vmap added to the operands."""
    return int(np.ndim(arrays[0])) - nd


def _kernel(key: Key) -> Kernel:
    """The pylucid computation of an op: (tensors, batch dims) -> Tensor."""
    name = key[0]
    if _SIGNATURE[name] == "binary":
        op = getattr(ops, name)
        return lambda ts, k: op(ts[0], ts[1])
    if _SIGNATURE[name] == "clamp":
        has_lo, has_hi = key[2], key[3]

        def clamp_(ts: Sequence[Tensor], k: int) -> Tensor:
            rest = list(ts[1:])
            lo = rest.pop(0) if has_lo else None
            hi = rest.pop(0) if has_hi else None
            return cast(Tensor, getattr(ops, name)(ts[0], lo, hi))

        return clamp_
    _, nd, axes, keepdims = key
    red = getattr(ops, name)

    def reduce_(ts: Sequence[Tensor], k: int) -> Tensor:
        if k == 0:
            return red(ts[0], axes, keepdims)  # type: ignore[no-any-return]
        dims = range(nd) if axes is None else axes
        return red(ts[0], tuple(d + k for d in dims), keepdims)  # type: ignore[no-any-return]

    return reduce_


def _n_inputs(key: Key) -> int:
    if _SIGNATURE[key[0]] == "clamp":
        return 1 + int(key[2]) + int(key[3])
    return 2 if _SIGNATURE[key[0]] == "binary" else 1


def _out_shape(key: Key, shapes: Sequence[Tuple[int, ...]]) -> Tuple[int, ...]:
    if _SIGNATURE[key[0]] == "reduction":
        _, nd, axes, keepdims = key
        shape = shapes[0]
        red = set(range(nd)) if axes is None else set(axes)
        if keepdims:
            return tuple(1 if i in red else s for i, s in enumerate(shape))
        return tuple(s for i, s in enumerate(shape) if i not in red)
    return tuple(np.broadcast_shapes(*shapes))


def _struct(shape: Tuple[int, ...], dtype: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)  # type: ignore[no-untyped-call]


def _sds(x: Any) -> jax.ShapeDtypeStruct:
    return _struct(np.shape(x), x.dtype)


def _out_sds(key: Key, xs: Sequence[Any]) -> jax.ShapeDtypeStruct:
    return _struct(_out_shape(key, [np.shape(x) for x in xs]), xs[0].dtype)


def _apply_callback(key: Key) -> Callable[..., np.ndarray]:
    fn = _kernel(key)
    nd = key[1]

    def cb(*arrays: Any) -> np.ndarray:
        with _plain():  # the operands do not require grad: no graph is recorded
            return fn([_t(a) for a in arrays], _batch_dims(arrays, nd)).numpy()

    return cb


@functools.lru_cache(maxsize=None)
def _forward_only(key: Key) -> Callable[..., jax.Array]:
    """The op without gradients (integer and bool operands)."""
    cb = _apply_callback(key)

    def call(*xs: jax.Array) -> jax.Array:
        xs = tuple(lax.stop_gradient(x) for x in xs)
        return jax.pure_callback(cb, _out_sds(key, xs), *xs, vmap_method="expand_dims")  # type: ignore[no-any-return]

    return call


@functools.lru_cache(maxsize=None)
def _family(key: Key) -> Callable[..., jax.Array]:
    """The differentiable op of ``key``: a custom_vjp whose backward is
    ``route`` (Jᵀg), whose backward is ``select`` (J·u), whose backward is
    ``route``: each a pylucid computation in a pure_callback."""
    fn = _kernel(key)
    nd = key[1]
    n = _n_inputs(key)
    cb_apply = _apply_callback(key)

    def cb_route(*arrays: Any) -> Tuple[np.ndarray, ...]:
        with _plain(), (contextlib.nullcontext() if autograd.is_grad_enabled() else autograd.enable_grad()):
            xs = [_t(a, True) for a in arrays[:n]]
            y = fn(xs, _batch_dims(arrays, nd))
            grads = autograd.grad(y, xs, grad_outputs=[_t(arrays[n])])
        return tuple(g.numpy() for g in grads)  # type: ignore[union-attr]

    def cb_select(*arrays: Any) -> np.ndarray:
        k = _batch_dims(arrays, nd)
        with _plain():
            _, tangent = autograd.jvp(lambda *ps: fn(ps, k), [_t(a) for a in arrays[:n]],
                                      [_t(a) for a in arrays[n:]])
        return tangent.numpy()  # type: ignore[no-any-return]

    @jax.custom_vjp
    def apply(*xs: jax.Array) -> jax.Array:
        return jax.pure_callback(cb_apply, _out_sds(key, xs), *xs,  # type: ignore[no-any-return]
                                 vmap_method="expand_dims")

    def apply_fwd(*xs: jax.Array) -> Tuple[jax.Array, Tuple[jax.Array, ...]]:
        return apply(*xs), xs

    def apply_bwd(xs: Tuple[jax.Array, ...], g: jax.Array) -> Tuple[jax.Array, ...]:
        return route(*xs, g)  # type: ignore[no-any-return]  # (without JAX installed)

    apply.defvjp(apply_fwd, apply_bwd)

    @jax.custom_vjp
    def route(*args: jax.Array) -> Tuple[jax.Array, ...]:
        out = jax.pure_callback(cb_route, tuple(_sds(x) for x in args[:n]), *args, vmap_method="broadcast_all")
        return tuple(out)

    def route_fwd(*args: jax.Array) -> Tuple[Tuple[jax.Array, ...], Tuple[jax.Array, ...]]:
        return route(*args), args

    def route_bwd(args: Tuple[jax.Array, ...], us: Tuple[jax.Array, ...]) -> Tuple[jax.Array, ...]:
        xs = args[:n]
        return tuple(jnp.zeros_like(x) for x in xs) + (select(*xs, *us),)

    route.defvjp(route_fwd, route_bwd)

    @jax.custom_vjp
    def select(*args: jax.Array) -> jax.Array:
        return jax.pure_callback(cb_select, _out_sds(key, args[:n]), *args,  # type: ignore[no-any-return]
                                 vmap_method="broadcast_all")

    def select_fwd(*args: jax.Array) -> Tuple[jax.Array, Tuple[jax.Array, ...]]:
        return select(*args), args

    def select_bwd(args: Tuple[jax.Array, ...], w: jax.Array) -> Tuple[jax.Array, ...]:
        xs = args[:n]
        return tuple(jnp.zeros_like(x) for x in xs) + tuple(route(*xs, w))

    select.defvjp(select_fwd, select_bwd)
    return apply  # type: ignore[no-any-return]  # (without JAX installed)


# ---- argument handling (at trace time)


def _check_cpu(x: Any, fn: str) -> None:
    if not hasattr(x, "devices"):  # NumPy arrays and Python scalars
        return
    try:
        devices = x.devices()
    except jax.errors.ConcretizationTypeError:  # a tracer: placement is not known while tracing
        return
    other = sorted(str(d) for d in devices if d.platform != "cpu")
    if other:
        raise ValueError("pylucid.jax.%s works on CPU arrays, got an array on %s; move it with "
                         "jax.device_put(x, jax.devices('cpu')[0])" % (fn, ", ".join(other)))


def _differentiable(dt: np.dtype[Any]) -> bool:
    return bool(jnp.issubdtype(dt, jnp.floating))


def _elementwise(name: str, fn: str, operands: Sequence[ArrayLike], extra: Key = ()) -> jax.Array:
    for x in operands:
        _check_cpu(x, fn)
    dt = jnp.result_type(*operands)
    from_numpy_dtype(np.dtype(dt))  # TypeError for a dtype pylucid lacks
    xs = [jnp.asarray(x, dt) for x in operands]
    nd = len(np.broadcast_shapes(*(x.shape for x in xs)))
    # A common rank, so that a batch dimension vmap puts in front lines up
    # (a reshape, no copy).
    xs = [x if x.ndim == nd else jnp.reshape(x, (1,) * (nd - x.ndim) + x.shape) for x in xs]
    key = (name, nd) + extra
    if not _differentiable(dt):
        return _forward_only(key)(*xs)
    return _family(key)(*xs)


def _dummy(x: jax.Array) -> Tensor:
    """A tensor of x's dtype and rank with at most one element (zero-size
    where x is), on which pylucid checks the op's arguments with its own
    errors."""
    return from_numpy(np.zeros(tuple(min(s, 1) for s in x.shape), np.dtype(x.dtype)))


def _axes(axis: Axis, nd: int) -> Optional[Tuple[int, ...]]:
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        return tuple(operator.index(a) % nd for a in axis)
    return (operator.index(cast(int, axis)) % nd,)


def _reduction(name: str, a: ArrayLike, axis: Axis, keepdims: bool) -> jax.Array:
    _check_cpu(a, name)
    x = jnp.asarray(a)
    keepdims = bool(keepdims)
    getattr(ops, name)(_dummy(x), axis, keepdims)  # pylucid's errors: dims, zero-size slices, dtypes
    key = (name, x.ndim, _axes(axis, x.ndim), keepdims)
    if not _differentiable(x.dtype):
        return _forward_only(key)(x)
    return _family(key)(x)


@functools.lru_cache(maxsize=None)
def _arg_reduction(name: str, nd: int, axis: Optional[int], keepdims: bool, out: Any) -> Callable[..., jax.Array]:
    op = getattr(ops, name)
    out_dtype = np.dtype(out)

    def cb(arr: Any) -> np.ndarray:
        x = np.asarray(arr)
        k = x.ndim - nd
        with _plain():
            if k == 0:
                r = op(from_numpy(x), axis, keepdims).numpy()
            elif axis is None:  # the flat position within each batch element
                r = op(from_numpy(x.reshape(x.shape[:k] + (-1,))), k, False).numpy()
                if keepdims:
                    r = r.reshape(r.shape + (1,) * nd)
            else:
                r = op(from_numpy(x), axis + k, keepdims).numpy()
        return cast(np.ndarray, r.astype(out_dtype, copy=False))

    def call(x: jax.Array) -> jax.Array:
        if axis is None:
            shape: Tuple[int, ...] = (1,) * nd if keepdims else ()
        else:
            shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape) if keepdims or i != axis)
        sds = _struct(shape, out_dtype)
        return jax.pure_callback(cb, sds, lax.stop_gradient(x), vmap_method="expand_dims")  # type: ignore[no-any-return]

    return call


def _arg(name: str, a: ArrayLike, axis: Optional[int], keepdims: Optional[bool]) -> jax.Array:
    _check_cpu(a, name)
    x = jnp.asarray(a)
    keepdims = bool(keepdims)
    getattr(ops, name)(_dummy(x), axis, keepdims)  # pylucid's errors
    ax = None if axis is None else operator.index(axis) % x.ndim
    out = jax.dtypes.canonicalize_dtype(np.int64)  # int32 unless jax_enable_x64, as jnp.argmin
    return _arg_reduction(name, x.ndim, ax, keepdims, np.dtype(out).str)(x)


# ---- the public functions, from the records


def _binary_fn(name: str) -> Callable[..., jax.Array]:
    def fn(x1: ArrayLike, x2: ArrayLike) -> jax.Array:
        return _elementwise(name, name, (x1, x2))

    return fn


def _clamp_fn(name: str) -> Callable[..., jax.Array]:
    def fn(x: ArrayLike, min: Optional[ArrayLike] = None, max: Optional[ArrayLike] = None) -> jax.Array:
        operands, given = _lib.clamp_operands(name, x, min, max)
        return _elementwise(name, name, operands, given)

    return fn


def _reduction_fn(name: str) -> Callable[..., jax.Array]:
    def fn(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> jax.Array:
        return _reduction(name, a, axis, keepdims)

    return fn


def _arg_fn(name: str) -> Callable[..., jax.Array]:
    def fn(a: ArrayLike, axis: Optional[int] = None, keepdims: Optional[bool] = None) -> jax.Array:
        return _arg(name, a, axis, keepdims)

    return fn


_FORMS: dict[str, Callable[[str], Callable[..., jax.Array]]] = {
    "binary": _binary_fn, "clamp": _clamp_fn, "reduction": _reduction_fn, "arg": _arg_fn}

__all__: list[str] = _lib.publish(globals(), _RECORDS, _FORMS, (
    "``jnp.%s`` with pylucid's rule (jnp's argument names: ``x1, x2``; ``a, axis, keepdims``; "
    "``x, min, max``).\n\n%s"))


if TYPE_CHECKING:  # the type checker's view of the functions set above (run-time cost: see ops.py)
    def __getattr__(name: str) -> Callable[..., jax.Array]: ...
