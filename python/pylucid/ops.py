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
    if isinstance(dim, (bool, np.bool_)):
        raise TypeError("%s(): dim must be an integer or None, got bool" % name)
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
        try:
            return reduce(whole, x, None, keepdim, out)  # e.g. amin over every dim
        except ValueError as e:  # say min, the function the user called, not amin
            w = _name(whole) + ":"
            if e.args and isinstance(e.args[0], str) and e.args[0].startswith(w):
                e.args = (_name(op) + ":" + e.args[0][len(w):],) + e.args[1:]
            raise
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


def _public_signature(s: Dict[str, Any]) -> inspect.Signature:
    """The signature users call op s with: its form's function without the
    arguments the op binds (its id, minmax's whole-tensor op)."""
    fn, bound = _FORMS[s["signature"]]
    if fn is binary:
        fn = _py_binary  # binary's Python form, same parameters
    params = list(inspect.signature(fn).parameters.values())[1 + len(bound(s)):]
    return inspect.Signature(params, return_annotation=inspect.signature(fn).return_annotation)


# What each form's docstring says of its parameters and result (numpydoc).
_OPERAND = "Tensor, array_like or scalar"
_PARAMS = {
    "binary": ("a, b : %s\n    The operands, broadcast together as NumPy does and promoted as\n"
               "    docs/dtypes.md says (Python numbers are weak)." % _OPERAND),
    "unary": "a : %s" % _OPERAND,
    "clamp": ("x : %s\nmin, max : %s or None\n    The bounds, broadcast with x (None: no bound; not both)."
              % (_OPERAND, _OPERAND)),
    "reduction": ("a : %s\ndim : int, tuple of ints or None\n    The dims reduced: None for all, () for none.\n"
                  "keepdim : bool\n    Keep the reduced dims, with size 1." % _OPERAND),
    "arg": ("x : %s\ndim : int or None\n    The dim searched; None: the flat position over all dims.\n"
            "keepdim : bool\n    Keep the searched dim, with size 1." % _OPERAND),
    "minmax": ("x : %s\ndim : int or None\n    None: the whole-tensor reduction (a Tensor); an int: the winners\n"
               "    along it and their positions.\nkeepdim : bool\n    Keep the reduced dim, with size 1." % _OPERAND),
}
_OUT_PARAM = ("out : Tensor or ndarray, optional\n    Written with the result and returned; exactly its shape and dtype.\n"
              "    Records no graph (RuntimeError if an input requires grad); docs/semantics.md.")
_RETURNS = {
    "arg": "Tensor\n    int64 positions (``out`` when given).",
    "minmax": ("Tensor or MinMaxResult\n    The whole-tensor result when dim is None, else the named tuple\n"
               "    (values, indices) (``out`` when given: a pair)."),
}


def _docstring(s: Dict[str, Any]) -> str:
    """Op s's docstring: its signature line (what help() shows), the
    record's text, its form's parameters, and the record's example."""
    sig = _public_signature(s)
    bare = sig.replace(parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                       return_annotation=sig.empty)
    ret = _RETURNS.get(s["signature"], "Tensor\n    The result (``out`` when given).")
    parts = ["%s%s -> %s" % (s["name"], bare, ret.split("\n")[0]), s["doc"],
             "Parameters\n----------\n%s\n%s" % (_PARAMS[s["signature"]], _OUT_PARAM),
             "Returns\n-------\n%s" % ret]
    if s["aliases"]:
        parts.append("Also named %s." % ", ".join(s["aliases"]))
    if s["example"]:
        parts.append("Examples\n--------\n>>> import numpy as np\n>>> import pylucid\n>>> from pylucid import ops\n%s"
                     % s["example"])
    return "\n\n".join(parts)


def _build(s: Dict[str, Any]) -> Optional[Op]:
    """The public op of schema s (None for an internal op)."""
    form = _FORMS.get(s["signature"])
    if form is None:
        return None
    fn, bound = form
    return Op(s["name"], fn, s["id"], *bound(s), doc=_docstring(s))


_public: List[str] = []
for _s in _lib.schema_table():
    _op = _build(_s)
    if _op is not None:
        for _n in [_s["name"]] + list(_s["aliases"]):
            globals()[_n] = _op  # an alias is the same op (clip: its schema is clamp's)
            _public.append(_n)
del _s, _op, _n


if TYPE_CHECKING:
    # For the type checker only: the ops are module attributes set above
    # from the library's records, each typed by its form below (the list of
    # names is generated). Not defined at run time: a module __getattr__
    # would keep CPython from specializing every attribute load of the
    # module (``ops.minimum`` was ~35 ns slower per call).
    from typing import Protocol, TypeVar, overload

    class _SupportsArray(Protocol):
        __array__: Callable[..., Any]

    class _SupportsDLPack(Protocol):
        __dlpack__: Callable[..., Any]

    # What an operand may be: a Tensor, a NumPy array or scalar, a Python
    # number or (nested) list of them, or another library's array.
    Operand = Union[Tensor, "np.ndarray[Any, Any]", np.generic, float, Sequence[float], Sequence[Sequence[float]],
                    Sequence[Sequence[Sequence[float]]], _SupportsArray, _SupportsDLPack]
    _Out = TypeVar("_Out", Tensor, "np.ndarray[Any, Any]")

    class _BinaryOp(Op):
        @overload
        def __call__(self, a: Operand, b: Operand, *, out: None = None) -> Tensor: ...
        @overload
        def __call__(self, a: Operand, b: Operand, *, out: _Out) -> _Out: ...
        def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    class _UnaryOp(Op):
        @overload
        def __call__(self, a: Operand, *, out: None = None) -> Tensor: ...
        @overload
        def __call__(self, a: Operand, *, out: _Out) -> _Out: ...
        def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    class _ClampOp(Op):
        @overload
        def __call__(self, x: Operand, min: Optional[Operand] = None, max: Optional[Operand] = None, *,
                     out: None = None) -> Tensor: ...
        @overload
        def __call__(self, x: Operand, min: Optional[Operand] = None, max: Optional[Operand] = None, *,
                     out: _Out) -> _Out: ...
        def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    class _ReductionOp(Op):
        @overload
        def __call__(self, a: Operand, dim: Dims = None, keepdim: bool = False, *, out: None = None) -> Tensor: ...
        @overload
        def __call__(self, a: Operand, dim: Dims = None, keepdim: bool = False, *, out: _Out) -> _Out: ...
        def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    class _ArgOp(Op):
        @overload
        def __call__(self, x: Operand, dim: Optional[int] = None, keepdim: bool = False, *,
                     out: None = None) -> Tensor: ...
        @overload
        def __call__(self, x: Operand, dim: Optional[int] = None, keepdim: bool = False, *, out: _Out) -> _Out: ...
        def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    class _MinmaxOp(Op):
        @overload
        def __call__(self, x: Operand, dim: None = None, keepdim: bool = False, *, out: None = None) -> Tensor: ...
        @overload
        def __call__(self, x: Operand, dim: None = None, keepdim: bool = False, *, out: _Out) -> _Out: ...
        @overload
        def __call__(self, x: Operand, dim: int, keepdim: bool = False, *,
                     out: Optional[Tuple[Any, Any]] = None) -> MinMaxResult: ...
        def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    # BEGIN the ops' types: written by tools/gen_op_types.py from the op records (tests_py checks it is current)
    add: _BinaryOp
    amax: _ReductionOp
    amin: _ReductionOp
    argmax: _ArgOp
    argmin: _ArgOp
    clamp: _ClampOp
    clip: _ClampOp
    div: _BinaryOp
    fmax: _BinaryOp
    fmin: _BinaryOp
    max: _MinmaxOp
    maximum: _BinaryOp
    mean: _ReductionOp
    min: _MinmaxOp
    minimum: _BinaryOp
    mul: _BinaryOp
    nanargmax: _ArgOp
    nanargmin: _ArgOp
    nanmax: _ReductionOp
    nanmin: _ReductionOp
    neg: _UnaryOp
    sub: _BinaryOp
    sum: _ReductionOp
    # END the ops' types


# ---- signatures, and wrong calls in the user's words (docs/semantics.md)


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
