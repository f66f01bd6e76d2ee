"""pylucid's operators.

Each op accepts Tensors, NumPy arrays and Python scalars mixed, broadcasts like
NumPy, promotes dtypes as docs/dtypes.md says (Python scalars are weak), and records
autograd when an input requires grad. ``op.schema`` is the op's registered
schema; :func:`schemas` lists them all.
"""

from __future__ import annotations

import enum
import functools
import inspect
import operator
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _lib
from ._runtime import _hot
from ._calls import call_op
import numpy as np

from .tensor import Tensor, _operand, _py_binary, as_tensor, binary, late, reduce, reduction_attrs, unary

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

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except TypeError as e:
            _explain_call_error(self, args, kwargs, e)
            raise

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

# The public ops are built from the records the library exports (its
# schemas): each op's "signature" says which of the call forms below it
# takes, its "doc" is its docstring and its "aliases" its other names. Ops
# without a signature (casts, views, the halves of the family's gradients)
# are internal. Nothing here names an op (docs/adding-an-op.md).

# Every op takes out=: a Tensor or writable NumPy array of exactly the
# result's shape and dtype, written and returned (docs/semantics.md).


def _unary(op: int, a: ArrayLike, *, out: Any = None) -> Tensor:
    return unary(op, as_tensor(a), out)


def _reduction(op: int, a: ArrayLike, dim: Dims = None, keepdim: bool = False, *, out: Any = None) -> Tensor:
    return reduce(op, a, dim, keepdim, out)


def _name(op: int) -> str:
    return str(_lib.schema_table()[op]["name"])


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
    d = _one_dim(dim, _name(op))
    t = as_tensor(x)
    return call_op(op, (t,), reduction_attrs(d, keepdim, op, t.ndim), out, 1)[0]  # type: ignore[no-any-return]


class MinMaxResult(NamedTuple):
    """What :func:`min` and :func:`max` over a dim return (as ``torch.min(x, dim)``)."""

    values: Tensor
    indices: Tensor


def _minmax(op: int, whole: int, x: ArrayLike, dim: Optional[int] = None, keepdim: bool = False, *,
            out: Any = None) -> Union[Tensor, MinMaxResult]:
    if dim is None:
        return reduce(whole, x, None, keepdim, out)  # e.g. amin over every dim
    d = _one_dim(dim, _name(op))
    t = as_tensor(x)
    v, i = call_op(op, (t,), reduction_attrs(d, keepdim, op, t.ndim), out, 2)
    return MinMaxResult(v, i)


_ids = {s["name"]: s["id"] for s in _lib.schema_table()}

# signature -> (implementation, the bound arguments after the op id)
_FORMS: Dict[str, Tuple[Callable[..., Any], Callable[[Dict[str, Any]], Tuple[Any, ...]]]] = {
    "binary": (binary, lambda s: ()),
    "unary": (_unary, lambda s: ()),
    "clamp": (_clamp, lambda s: ()),
    "reduction": (_reduction, lambda s: ()),
    "arg": (_arg, lambda s: ()),
    "minmax": (_minmax, lambda s: (_ids[s["whole"]],)),
}


def _build(s: Dict[str, Any]) -> Optional[Op]:
    """The public op of schema s (None for an internal op)."""
    form = _FORMS.get(s["signature"])
    if form is None:
        return None
    fn, bound = form
    return Op(s["name"], fn, s["id"], *bound(s), doc=s["doc"])


_public: List[str] = []
for _s in _lib.schema_table():
    _op = _build(_s)
    if _op is not None:
        for _n in [_s["name"]] + list(_s["aliases"]):
            globals()[_n] = _op  # an alias is the same op (clip: its schema is clamp's)
            _public.append(_n)
del _s, _op, _n


if TYPE_CHECKING:
    # For the type checker only: the functions are module attributes set
    # above from the library's records. Not defined at run time, where a
    # module __getattr__ keeps CPython from specializing every attribute
    # load of the module (``ops.minimum`` was ~35 ns slower per call).
    def __getattr__(name: str) -> Op:
        """The ops are module attributes set above from the library's records;
        this says so for the type checker, and names what is missing."""
        raise AttributeError("module 'pylucid.ops' has no op %r" % name)


# ---- signatures, and wrong calls in the user's words (docs/semantics.md)


def _public_signature(s: Dict[str, Any]) -> inspect.Signature:
    """The signature users call op s with: its form's function without the
    arguments the op binds (its id, minmax's whole-tensor op)."""
    fn, bound = _FORMS[s["signature"]]
    if fn is binary:
        fn = _py_binary  # binary's Python form, same parameters
    params = list(inspect.signature(fn).parameters.values())[1 + len(bound(s)):]
    return inspect.Signature(params, return_annotation=inspect.signature(fn).return_annotation)


_SIGNATURES: Dict[str, inspect.Signature] = {}
for _s in _lib.schema_table():
    if _s["signature"] in _FORMS:
        for _n in [_s["name"]] + list(_s["aliases"]):
            _SIGNATURES[_n] = _public_signature(_s)
del _s, _n
setattr(Op, "__signature__", property(lambda self: _SIGNATURES[self.__name__], doc="inspect.signature's answer"))

# The parameters that take an operand (a Tensor, array or number; clamp's
# bounds also None).
_OPERANDS = {"a": False, "b": False, "x": False, "min": True, "max": True}


def _is_operand(v: Any) -> bool:
    if isinstance(v, (Tensor, np.ndarray, np.generic, bool, int, float, complex)):  # complex: the dtype's error
        return True
    if isinstance(v, (list, tuple)):
        return all(_is_operand(e) for e in v)
    return hasattr(v, "__array__") or hasattr(v, "__dlpack__") or hasattr(v, "__array_interface__")


def _explain_call_error(op: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], error: BaseException) -> None:
    """Called when op(*args, **kwargs) raised TypeError: raises one that
    names the public function and the argument where the call itself is
    wrong; returns (keeping the original) otherwise."""
    name = op.__name__
    sig = _SIGNATURES.get(name)
    if sig is None:
        return
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError("%s(): %s" % (name, e)) from None
    for pname, value in bound.arguments.items():
        none_ok = _OPERANDS.get(pname)
        if none_ok is None or (value is None and none_ok):
            continue
        if not _is_operand(value):
            raise TypeError("%s(): argument '%s' must be a Tensor, array or number, not %s"
                            % (name, pname, type(value).__name__)) from None


if _hot is not None:
    _hot.set_call_error_hook(_explain_call_error)


late.ops = sys.modules[__name__]  # Tensor's methods (t.amax(), t.clamp(), ...) call the ops here

__all__ = ["AmpPolicy", "MinMaxResult", "OpSchema", "schemas"] + _public


def __dir__() -> List[str]:
    """dir(pylucid.ops): the public names (the ops, their schemas' types),
    not the module's imports and helpers."""
    return sorted(__all__)
