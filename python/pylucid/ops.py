"""pylucid's operators.

Each op accepts Tensors, NumPy arrays and Python scalars mixed, broadcasts like
NumPy, promotes dtypes as docs/dtypes.md says (Python scalars are weak), and records
autograd when an input requires grad. ``op.schema`` is the op's registered
schema; :func:`schemas` lists them all.
"""

from __future__ import annotations

import enum
import functools
import operator
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _lib
from ._runtime import _hot
from ._calls import call_op
from .tensor import Tensor, _operand, as_tensor, binary, late, reduce, reduction_attrs, unary

ArrayLike = Any


class AmpPolicy(enum.Enum):
    """How an op's floating inputs are cast under autocast (docs/dtypes.md)."""

    PROMOTE = "Promote"
    LOWER_PRECISION = "LowerPrecision"
    FP32 = "FP32"


class OpSchema(NamedTuple):
    """An op's registered schema."""

    name: str
    version: int
    amp_policy: AmpPolicy
    deterministic: bool


_schemas: Optional[Dict[str, OpSchema]] = None


def _load_schemas() -> Dict[str, OpSchema]:
    global _schemas
    _lib.check_fork()
    if _schemas is None:
        _schemas = {
            s["name"]: OpSchema(s["name"], s["version"], AmpPolicy(s["amp_policy"]), s["deterministic"])
            for s in _lib.schema_table()
        }
    return _schemas


def schemas() -> List[OpSchema]:
    """Every registered op schema, sorted by name."""
    return sorted(_load_schemas().values())


class _PartialOp(functools.partial):  # type: ignore[type-arg]
    """A callable op with its schema (ops.Op where pylucid._hot is missing).

    A ``functools.partial`` of the op's implementation: calling it goes
    straight to that function (C-level dispatch, no extra Python frame).
    """

    _name: str

    def __new__(cls, name: str, fn: Callable[..., Tensor], *args: Any, doc: str = "") -> "_PartialOp":
        self = super().__new__(cls, fn, *args)
        self._name = name
        self.__doc__ = doc
        self.__name__ = name  # type: ignore[attr-defined]
        return self

    @property
    def schema(self) -> OpSchema:
        return _load_schemas()[self._name]

    def __repr__(self) -> str:
        return "<pylucid op %s>" % self._name

    def __reduce__(self) -> Any:  # pickles by name, like a function
        return (_op_named, (self._name,))


if TYPE_CHECKING:
    class Op:
        """A callable op with its schema (what every public op is)."""

        _name: str
        __name__: str
        func: Callable[..., Any]
        args: Tuple[Any, ...]

        def __init__(self, name: str, fn: Callable[..., Any], *args: Any, doc: str = "") -> None: ...

        def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

        @property
        def schema(self) -> OpSchema: ...
elif _hot is not None:
    # The C type (python/csrc): its calls take the vectorcall protocol, and a
    # binary op called with two Tensors goes straight to the library. Its
    # schema, repr and pickling are as _PartialOp's.
    Op = _hot.Op
else:
    Op = _PartialOp


def _op_named(name: str) -> "Op":
    op = globals()[name]
    assert isinstance(op, Op)
    return op


Dims = Union[None, int, Sequence[int]]

# The public ops are built from the schemas the library exports: every
# elementwise op without attributes (binary or unary) and every reduction,
# called by its id through lucid_op. Internal ops (views, the selection
# halves of the minimum/maximum gradient, and the elementwise ops below,
# which Tensor's methods reach) are not public callables.
_INTERNAL = frozenset({"cast", "copy"})

# Docstrings of the public ops; an op without one here gets a plain one
# made from its schema.
_DOCS = {
    "minimum": """Elementwise minimum with NumPy broadcasting.

    ``y[i] = a[i]`` when ``a[i] <= b[i]`` or ``a[i]`` is NaN, else ``b[i]``
    (the winner's bits). The gradient goes to the operand selected: ties go
    to ``a``, NaN to the operand that produced it (to ``a`` when both are).
    """,
    "maximum": """Elementwise maximum: the mirror of :func:`minimum` (``>=``; ties to ``a``).""",
    "add": "``a + b`` with broadcasting.",
    "sub": "``a - b`` with broadcasting.",
    "mul": "``a * b`` with broadcasting.",
    "div": "``a / b`` (true division) with broadcasting.",
    "neg": "``-a``.",
    "sum": "Sum over ``dim`` (all dims when None); integers sum to int64.",
    "mean": "Mean over ``dim`` (all dims when None) of a floating tensor.",
    "fmin": """Elementwise NumPy ``fmin``: NaN is ignored.

    ``y[i] = a[i]`` when ``a[i] <= b[i]`` or ``b[i]`` is NaN, else ``b[i]``;
    a NaN only where both are (then ``a``'s). Gradient to the operand selected.
    """,
    "fmax": """Elementwise NumPy ``fmax``: the mirror of :func:`fmin` (``>=``).""",
    "amin": """The smallest element over ``dim`` (an int, a tuple, ``()`` for none, None for all).

    Each slice is folded in row-major order: the result is its first NaN if
    it has one, else its first smallest element (bits included), and that
    position gets the whole gradient (ties are not split).
    """,
    "amax": """The largest element over ``dim``: the mirror of :func:`amin`.""",
}

# Every op takes out=: a Tensor or writable NumPy array of exactly the
# result's shape and dtype, written and returned (docs/semantics.md).


def _unary(op: int, a: ArrayLike, *, out: Any = None) -> Tensor:
    return unary(op, as_tensor(a), out)


def _reduction(op: int, a: ArrayLike, dim: Dims = None, keepdim: bool = False, *, out: Any = None) -> Tensor:
    return reduce(op, a, dim, keepdim, out)


def _one_dim(dim: Any, name: str) -> Optional[int]:
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        raise TypeError("%s() takes one dim (an int) or None, got %r" % (name, dim))
    try:
        return operator.index(dim)
    except TypeError:
        raise TypeError("%s(): dim must be an integer or None, got %s" % (name, type(dim).__name__)) from None


def _clamp(op: int, x: ArrayLike, min: Any = None, max: Any = None, *, out: Any = None) -> Tensor:
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must not be None")
    ins = (as_tensor(x), None if min is None else _operand(min), None if max is None else _operand(max))
    return call_op(op, ins, (), out, 1)[0]  # type: ignore[no-any-return]


def _arg(op: int, x: ArrayLike, dim: Optional[int] = None, keepdim: bool = False, *, out: Any = None) -> Tensor:
    d = _one_dim(dim, "argmin" if op == _ids["argmin"] else "argmax")
    t = as_tensor(x)
    return call_op(op, (t,), reduction_attrs(d, keepdim, op, t.ndim), out, 1)[0]  # type: ignore[no-any-return]


class MinMaxResult(NamedTuple):
    """What :func:`min` and :func:`max` over a dim return (as ``torch.min(x, dim)``)."""

    values: Tensor
    indices: Tensor


def _minmax(op: int, x: ArrayLike, dim: Optional[int] = None, keepdim: bool = False, *,
            out: Any = None) -> Union[Tensor, MinMaxResult]:
    name = "min" if op == _ids["min"] else "max"
    if dim is None:
        return reduce(_ids["a" + name], x, None, keepdim, out)  # amin/amax over every dim
    d = _one_dim(dim, name)
    t = as_tensor(x)
    v, i = call_op(op, (t,), reduction_attrs(d, keepdim, op, t.ndim), out, 2)
    return MinMaxResult(v, i)


_ids = {s["name"]: s["id"] for s in _lib.schema_table()}

# Ops whose Python signature is their own (name: implementation, docstring).
_CUSTOM: Dict[str, Tuple[Callable[..., Any], str]] = {
    "clamp": (_clamp, """Clamp ``x`` into ``[min, max]``: exactly ``minimum(maximum(x, min), max)``.

    A bound may be None (skipped; not both), a Python number or a tensor
    broadcasting with ``x``. At ``x == bound`` the gradient goes to ``x``; with
    ``min > max`` every non-NaN element is ``max``; a NaN ``x`` stays NaN.
    Bounds that are tensors get gradients where they win. ``clip`` is the
    same op.
    """),
    "argmin": (_arg, """The int64 position of :func:`amin`'s winner along ``dim`` (flat index when None).

    Equal to NumPy's ``argmin``, NaN included (the first NaN wins). No gradient.
    """),
    "argmax": (_arg, """The int64 position of :func:`amax`'s winner (see :func:`argmin`)."""),
    "min": (_minmax, """``min(x)`` is :func:`amin` over all dims; ``min(x, dim)`` returns ``(values, indices)``.

    As ``torch.min(x, dim)``: a :class:`MinMaxResult` of the winners and their
    int64 positions along ``dim``; the gradient goes to the winners.
    """),
    "max": (_minmax, """The mirror of :func:`min`: :func:`amax`, or ``(values, indices)`` over ``dim``."""),
}


def _build(s: Dict[str, Any]) -> Optional[Op]:
    """The public op for schema s (None for an internal op)."""
    name, kind, arity = s["name"], s["kind"], s["arity"]
    if name in _CUSTOM:
        fn, doc = _CUSTOM[name]
        return Op(name, fn, s["id"], doc=doc)
    if kind == "reduction":
        doc = "``%s`` over ``dim`` (all dims when None)." % name
        return Op(name, _reduction, s["id"], doc=_DOCS.get(name, doc))
    if kind != "elementwise" or s["attrs"] or name in _INTERNAL:
        return None
    if arity == 2:
        return Op(name, binary, s["id"], doc=_DOCS.get(name, "Elementwise ``%s(a, b)`` with broadcasting." % name))
    return Op(name, _unary, s["id"], doc=_DOCS.get(name, "Elementwise ``%s(a)``." % name))


# Declared for type checkers; assigned from the schemas below.
minimum: Op
maximum: Op
add: Op
sub: Op
mul: Op
div: Op
neg: Op
sum: Op
mean: Op
fmin: Op
fmax: Op
clamp: Op
clip: Op
amin: Op
amax: Op
argmin: Op
argmax: Op
min: Op
max: Op

_public: List[str] = []
for _s in _lib.schema_table():
    _op = _build(_s)
    if _op is not None:
        globals()[_s["name"]] = _op
        _public.append(_s["name"])
del _s, _op

clip = globals()["clamp"]  # the same op (schema "clamp"), under NumPy's name
_public.append("clip")
late.ops = sys.modules[__name__]  # Tensor's methods (t.amax(), t.clamp(), ...) call the ops here

__all__ = ["AmpPolicy", "MinMaxResult", "OpSchema", "schemas"] + _public
