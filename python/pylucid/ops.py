"""pylucid's operators.

Each op accepts Tensors, NumPy arrays and Python scalars mixed, broadcasts like
NumPy, promotes dtypes as docs/dtypes.md says (Python scalars are weak), and records
autograd when an input requires grad. ``op.schema`` is the op's registered
schema; :func:`schemas` lists them all.
"""

from __future__ import annotations

import enum
import functools
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Union

from . import _lib
from .tensor import Tensor, as_tensor, binary, reduce, unary

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


class Op(functools.partial):  # type: ignore[type-arg]
    """A callable op with its schema.

    A ``functools.partial`` of the op's implementation: calling it goes
    straight to that function (C-level dispatch, no extra Python frame), which
    matters on the per-call hot path.
    """

    _name: str

    def __new__(cls, name: str, fn: Callable[..., Tensor], *args: Any, doc: str = "") -> "Op":
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
}


def _unary(op: int, a: ArrayLike) -> Tensor:
    return unary(op, as_tensor(a))


def _reduction(op: int, a: ArrayLike, dim: Dims = None, keepdim: bool = False) -> Tensor:
    return reduce(op, a, dim, keepdim)


def _build(s: Dict[str, Any]) -> Optional[Op]:
    """The public op for schema s (None for an internal op)."""
    name, kind, arity = s["name"], s["kind"], s["arity"]
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

_public: List[str] = []
for _s in _lib.schema_table():
    _op = _build(_s)
    if _op is not None:
        globals()[_s["name"]] = _op
        _public.append(_s["name"])
del _s, _op

__all__ = ["AmpPolicy", "OpSchema", "schemas"] + _public
