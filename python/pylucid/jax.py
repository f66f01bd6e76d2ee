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
Every op is an XLA custom call into pylucid's native library through XLA's
FFI (``jax.ffi.ffi_call``; the handler, ``capi/xla_ffi.c``, is built into
the wheel against XLA's stable C ABI): XLA hands pylucid its operand
buffers and pylucid writes into XLA's result buffers, no host callback and
no copy. The custom-call targets are ``pylucid_<op>`` (``pylucid_minimum``,
``pylucid_amax``, ...; :data:`CUSTOM_CALL_TARGETS`), the names to allow in
``jax.export.DisabledSafetyCheck.custom_call`` when exporting. Each call
carries the op's name and schema version as attributes, so a program
exported with another version of an op fails with a clear error instead of
running something else.

* Differentiation is a ``jax.custom_jvp``: the primal call also returns
  pylucid's winners (``lucid_op_lent``: where ``a`` wins; where x wins
  against clamp's one bound, or with both bounds the masks of its rule's
  two steps, maximum with min and minimum with max; a reduction's winner
  positions), and an output's tangent is its
  winner's tangent (``jnp.where`` / ``take_along_axis``), which is linear in
  the tangents, so JAX transposes it for reverse mode: ``grad``, ``vjp``,
  ``jvp``, ``jacfwd``, ``jacrev``, ``hessian`` and ``linearize`` all work,
  to any order. The masks come from pylucid's kernels, so NaN and signed
  zero follow docs/semantics.md exactly.
* ``jax.vmap``: the calls declare ``vmap_method="expand_dims"``; operands
  are first brought to a common rank and reductions name their axes from
  the end, so a leading batch dimension lines up in pylucid's broadcasting.
* Integer and bool operands, and ``argmin``/``argmax``, are forward only
  (their operands pass through ``lax.stop_gradient``).
* A handler error (an operand pylucid refuses, an op version this pylucid
  lacks, an FFI version the handler does not know) comes back as JAX's
  exception with pylucid's message.

Not supported: arrays on a device other than the CPU (``ValueError``),
dtypes pylucid lacks (uint16/32/64, complex: ``TypeError``).
"""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Tuple, Union, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import _lib, ops
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


# ---- the custom calls


def _target(name: str) -> str:
    return "pylucid_" + name


#: The XLA custom-call targets of this bridge, one per op.
CUSTOM_CALL_TARGETS: Tuple[str, ...] = tuple(_target(s["name"]) for s in _RECORDS)

# The ops a call may name: the bridge's own and the values-and-positions
# ops behind min/max.
_VERSION = {s["name"]: int(s["version"]) for s in _lib.schema_table()}


def _register() -> None:
    # jax.ffi.pycapsule wraps the handler's address (a void* it passes on)
    handler = jax.ffi.pycapsule(int(_lib.ffi.cast("uintptr_t", _lib.lib.lucid_xla_ffi_handler())))  # type: ignore[no-untyped-call]
    for name in CUSTOM_CALL_TARGETS:
        jax.ffi.register_ffi_target(name, handler, platform="cpu")


_register()


def _struct(shape: Tuple[int, ...], dtype: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)  # type: ignore[no-untyped-call]


def _call(name: str, xs: Sequence[jax.Array], results: Sequence[jax.ShapeDtypeStruct], *, winners: bool = False,
          attrs: Sequence[int] = (), present: Optional[int] = None) -> Sequence[jax.Array]:
    """pylucid's op ``name`` as an XLA custom call on xs (lucid_op_lent):
    its outputs, or (winners) only where they come from. The rules take the
    values as the winners' bits with a where, which XLA fuses into what uses
    them and drops when nothing does (jit(grad) of a loss)."""
    form = _WINNERS_ONLY if winners else 0
    kw: dict[str, Any] = {"op": name, "version": np.int64(_VERSION[name]), "winners": np.int64(form)}
    if attrs:
        kw["attrs"] = np.asarray(attrs, np.int64)
    if present is not None:
        kw["present"] = np.int64(present)
    call = jax.ffi.ffi_call(_target(name), tuple(results), vmap_method="expand_dims")
    return call(*xs, **kw)  # type: ignore[no-any-return]


_WINNERS_ONLY = 3  # lucid_op_lent's form: the winners alone (capi/lucid.h)


def _index_dtype() -> np.dtype[Any]:
    """int64 under jax_enable_x64, else int32 (as jnp.argmin's result)."""
    dt: np.dtype[Any] = np.dtype(jax.dtypes.canonicalize_dtype(np.int64))  # Any where JAX is absent
    return dt


def _broadcast(*shapes: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """NumPy's broadcast of shapes (NumPy's error where they do not
    broadcast), also of symbolic sizes (jax.export.symbolic_shape: the
    exported function then runs at every size), which lax broadcasts."""
    if all(isinstance(d, (int, np.integer)) for s in shapes for d in s):
        return tuple(np.broadcast_shapes(*shapes))
    return tuple(lax.broadcast_shapes(*shapes))


@functools.lru_cache(maxsize=None)
def _binary_op(name: str) -> Callable[..., jax.Array]:
    """minimum and its kin: y; tangent = where(a wins, ta, tb)."""

    @jax.custom_jvp
    def f(a: jax.Array, b: jax.Array) -> jax.Array:
        shape = _broadcast(a.shape, b.shape)
        return _call(name, (a, b), (_struct(shape, a.dtype),))[0]

    @f.defjvp
    def f_jvp(primals: Tuple[jax.Array, ...], tangents: Tuple[jax.Array, ...]) -> Tuple[jax.Array, jax.Array]:
        a, b = primals
        shape = _broadcast(a.shape, b.shape)
        (mask,) = _call(name, _constant(primals), (_struct(shape, np.bool_),), winners=True)
        # The winner's bits are the value (pylucid's, bit for bit), and as a
        # selection by a constant mask it is differentiable again: higher
        # orders need no other rule.
        return jnp.where(mask, a, b), jnp.where(mask, tangents[0], tangents[1])

    return f  # type: ignore[no-any-return]


def _two_bounds_jvp(primals: Tuple[jax.Array, ...], tangents: Tuple[jax.Array, ...]) -> Tuple[jax.Array, jax.Array]:
    """clamp's rule with both bounds as it is defined (docs/semantics.md):
    maximum with min, then minimum of that winner with max, each winner
    mask from pylucid's vectorized mask kernel (clamp's own int8 code is
    found element by element: 34x jnp.clip's gradient at 2^22)."""
    (x, lo, hi), (tx, tlo, thi) = primals, tangents
    inner = _broadcast(x.shape, lo.shape)
    (won_lo,) = _call("maximum", _constant((x, lo)), (_struct(inner, np.bool_),), winners=True)
    w = jnp.where(won_lo, x, lo)
    shape = _broadcast(inner, hi.shape)
    (won_hi,) = _call("minimum", _constant((w, hi)), (_struct(shape, np.bool_),), winners=True)
    return jnp.where(won_hi, w, hi), jnp.where(won_hi, jnp.where(won_lo, tx, tlo), thi)


@functools.lru_cache(maxsize=None)
def _clamp_op(name: str, has_lo: bool, has_hi: bool) -> Callable[..., jax.Array]:
    """clamp: y; tangent = the winning operand's. With one bound the winners
    are where x won (a bool mask, pylucid's vectorized select); with two,
    the rule's two masks (_two_bounds_jvp)."""
    present = 1 | (2 if has_lo else 0) | (4 if has_hi else 0)

    def result(xs: Sequence[jax.Array], dtype: Any) -> Tuple[jax.ShapeDtypeStruct]:
        return (_struct(_broadcast(*(x.shape for x in xs)), dtype),)

    @jax.custom_jvp
    def f(*xs: jax.Array) -> jax.Array:
        return _call(name, xs, result(xs, xs[0].dtype), present=present)[0]

    @f.defjvp
    def f_jvp(primals: Tuple[jax.Array, ...], tangents: Tuple[jax.Array, ...]) -> Tuple[jax.Array, jax.Array]:
        if has_lo and has_hi:
            return _two_bounds_jvp(primals, tangents)
        (x_won,) = _call(name, _constant(primals), result(primals, np.bool_), present=present, winners=True)
        # The winner's bits are the value, differentiable again (see _binary_op).
        return jnp.where(x_won, primals[0], primals[1]), jnp.where(x_won, tangents[0], tangents[1])

    return f  # type: ignore[no-any-return]


def _reduced_shape(shape: Tuple[int, ...], dims: Tuple[int, ...], keepdims: bool) -> Tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def _red_attrs(nd: int, dims: Tuple[int, ...], keepdims: bool) -> Tuple[int, ...]:
    # Axes counted from the end: a batch dimension vmap puts in front
    # leaves them naming the same axes.
    return (int(keepdims), len(dims)) + tuple(d - nd for d in dims)


@functools.lru_cache(maxsize=None)
def _reduction_op(name: str, dims: Tuple[int, ...], keepdims: bool) -> Callable[..., jax.Array]:
    """amin and its kin over dims (sorted, non-negative): y; tangent = the
    tangent at each slice's winner position."""

    @jax.custom_jvp
    def f(x: jax.Array) -> jax.Array:
        out = _struct(_reduced_shape(x.shape, dims, keepdims), x.dtype)
        return _call(name, (x,), (out,), attrs=_red_attrs(x.ndim, dims, keepdims))[0]

    @f.defjvp
    def f_jvp(primals: Tuple[jax.Array, ...], tangents: Tuple[jax.Array, ...]) -> Tuple[jax.Array, jax.Array]:
        (x,), (t,) = primals, tangents
        out = _struct(_reduced_shape(x.shape, dims, keepdims), x.dtype)
        pos_sds = _struct(_reduced_shape(x.shape, dims, True), _index_dtype())
        (pos,) = _call(name, _constant(primals), (pos_sds,), attrs=_red_attrs(x.ndim, dims, keepdims), winners=True)
        kept = [i for i in range(x.ndim) if i not in dims]
        p = jnp.reshape(pos, tuple(x.shape[i] for i in kept) + (1,))

        def pick(v: jax.Array) -> jax.Array:  # each slice's element at its winner's position
            # The slices' elements last, in row-major order of the reduced dims.
            flat = jnp.reshape(jnp.transpose(v, kept + list(dims)), tuple(x.shape[i] for i in kept) + (-1,))
            return jnp.reshape(jnp.take_along_axis(flat, p, axis=-1), out.shape)

        return pick(x), pick(t)

    return f  # type: ignore[no-any-return]


def _constant(xs: Sequence[jax.Array]) -> Tuple[jax.Array, ...]:
    """xs as constants of differentiation: the winners a rule computes are."""
    return tuple(lax.stop_gradient(x) for x in xs)


def _forward_only(f: Callable[..., jax.Array], xs: Sequence[jax.Array]) -> jax.Array:
    """The op without gradients (integer and bool operands): the primal
    call alone (custom_jvp's function is called as a plain one here)."""
    return f(*_constant(xs))


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


def _elementwise(name: str, operands: Sequence[ArrayLike], given: Tuple[bool, bool] = (False, False)) -> jax.Array:
    for x in operands:
        _check_cpu(x, name)
    dt = jnp.result_type(*operands)
    from_numpy_dtype(np.dtype(dt))  # TypeError for a dtype pylucid lacks
    xs = [jnp.asarray(x, dt) for x in operands]
    nd = len(_broadcast(*(x.shape for x in xs)))
    # A common rank, so that a batch dimension vmap puts in front lines up
    # (a reshape, no copy).
    xs = [x if x.ndim == nd else jnp.reshape(x, (1,) * (nd - x.ndim) + x.shape) for x in xs]
    f = _clamp_op(name, *given) if _SIGNATURE[name] == "clamp" else _binary_op(name)
    if not _differentiable(dt):
        return _forward_only(f, xs)
    return f(*xs)


def _dummy(x: jax.Array) -> Tensor:
    """A tensor of x's dtype and rank on which pylucid checks the op's
    arguments with its own errors: one element, or where x has none x's
    own shape (which costs no memory), so an error names it. A symbolic
    size (jax.export) counts as 1 here: it is checked when the exported
    function runs."""
    sizes = tuple(int(s) if isinstance(s, (int, np.integer)) else 1 for s in x.shape)
    return from_numpy(np.zeros(sizes if 0 in sizes else (1,) * len(sizes), np.dtype(x.dtype)))


def _axes(axis: Axis, nd: int) -> Tuple[int, ...]:
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, (tuple, list)):
        return tuple(sorted({operator.index(a) % nd for a in axis}))
    return (operator.index(cast(int, axis)) % nd,)


def _reduction(name: str, a: ArrayLike, axis: Axis, keepdims: bool) -> jax.Array:
    _check_cpu(a, name)
    x = jnp.asarray(a)
    keepdims = bool(keepdims)
    getattr(ops, name)(_dummy(x), axis, keepdims)  # pylucid's errors: dims, zero-size slices, dtypes
    f = _reduction_op(name, _axes(axis, x.ndim), keepdims)
    if not _differentiable(x.dtype):
        return _forward_only(f, (x,))
    return f(x)


def _arg(name: str, a: ArrayLike, axis: Optional[int], keepdims: Optional[bool]) -> jax.Array:
    _check_cpu(a, name)
    x = lax.stop_gradient(jnp.asarray(a))
    keepdims = bool(keepdims)
    getattr(ops, name)(_dummy(x), axis, keepdims)  # pylucid's errors
    if axis is None:  # the flat position: over the flattened array (vmap flattens each element's)
        r = _call(name, (jnp.reshape(x, (-1,)),), (_struct((), _index_dtype()),), attrs=(0, 1, -1))[0]
        return jnp.reshape(r, (1,) * x.ndim) if keepdims else r
    ax = operator.index(axis) % x.ndim
    shape = _reduced_shape(x.shape, (ax,), keepdims)
    return _call(name, (x,), (_struct(shape, _index_dtype()),), attrs=(int(keepdims), 1, ax - x.ndim))[0]


# ---- the public functions, from the records


def _binary_fn(name: str) -> Callable[..., jax.Array]:
    def fn(x1: ArrayLike, x2: ArrayLike) -> jax.Array:
        return _elementwise(name, (x1, x2))

    return fn


def _clamp_fn(name: str) -> Callable[..., jax.Array]:
    def fn(x: ArrayLike, min: Optional[ArrayLike] = None, max: Optional[ArrayLike] = None) -> jax.Array:
        operands, given = _lib.clamp_operands(name, x, min, max)
        return _elementwise(name, operands, given)

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
