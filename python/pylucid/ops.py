"""pylucid's operators.

Each op accepts Tensors, NumPy arrays and Python scalars mixed, broadcasts like
NumPy, promotes dtypes as SPEC §3 says (Python scalars are weak), and records
autograd when an input requires grad. ``op.schema`` is the op's registered
schema; :func:`schemas` lists them all.
"""

from __future__ import annotations

import enum
import functools
import json
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Union

from . import _lib
from ._lib import ffi, lib, raise_status
from .tensor import ADD, DIV, MAXIMUM, MEAN, MINIMUM, MUL, SUB, SUM, Tensor, binary, reduce

ArrayLike = Any


class AmpPolicy(enum.Enum):
    """How an op's floating inputs are cast under autocast (SPEC §4)."""

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
        needed = ffi.new("size_t*")
        rc = lib.lucid_schemas(ffi.NULL, 0, needed)
        if rc:
            raise_status(rc)
        buf = ffi.new("char[]", needed[0])
        rc = lib.lucid_schemas(buf, needed[0], needed)
        if rc:
            raise_status(rc)
        raw = json.loads(ffi.string(buf).decode())
        _schemas = {
            s["name"]: OpSchema(s["name"], s["version"], AmpPolicy(s["amp_policy"]), s["deterministic"]) for s in raw
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


def _binary_op(name: str, code: int, doc: str) -> Op:
    return Op(name, binary, code, doc=doc)


minimum = _binary_op(
    "minimum",
    MINIMUM,
    """Elementwise minimum with NumPy broadcasting.

    ``y[i] = a[i]`` when ``a[i] <= b[i]`` or ``a[i]`` is NaN, else ``b[i]``
    (the winner's bits). The gradient goes to the operand selected: ties go
    to ``a``, NaN to the operand that produced it (to ``a`` when both are).
    """,
)
maximum = _binary_op(
    "maximum",
    MAXIMUM,
    """Elementwise maximum: the mirror of :func:`minimum` (``>=``; ties to ``a``).""",
)
add = _binary_op("add", ADD, "``a + b`` with broadcasting.")
sub = _binary_op("sub", SUB, "``a - b`` with broadcasting.")
mul = _binary_op("mul", MUL, "``a * b`` with broadcasting.")
div = _binary_op("div", DIV, "``a / b`` (true division) with broadcasting.")


def _neg(a: ArrayLike) -> Tensor:
    from .tensor import as_tensor

    return -as_tensor(a)


neg = Op("neg", _neg, doc="``-a``.")

Dims = Union[None, int, Sequence[int]]


def _sum(a: ArrayLike, dim: Dims = None, keepdim: bool = False) -> Tensor:
    return reduce(SUM, a, dim, keepdim)


def _mean(a: ArrayLike, dim: Dims = None, keepdim: bool = False) -> Tensor:
    return reduce(MEAN, a, dim, keepdim)


sum = Op("sum", _sum, doc="Sum over ``dim`` (all dims when None); integers sum to int64.")
mean = Op("mean", _mean, doc="Mean over ``dim`` (all dims when None) of a floating tensor.")

__all__ = [
    "AmpPolicy",
    "OpSchema",
    "schemas",
    "minimum",
    "maximum",
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "sum",
    "mean",
]
