"""The Tensor type and the conversions between Python/NumPy values and tensors."""

from __future__ import annotations

import gc
import math
import operator
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union, overload

import numpy as np

from . import _lib
from ._lib import ffi, lib, raise_status
from ._state import state
from . import _scalars
from . import dtypes as _dtypes
from .dtypes import BY_CODE, DTypeLike, as_dtype, bfloat16, bool_, dtype, float32, from_numpy_dtype

# The runtime layer (_runtime.py): the C path or the fallback, handles'
# release, lent memory, the release queues, the Function registry, op ids;
# the native call path (_calls.py) and forward-mode state (_forward.py).
# Their names stay importable from here too.
from ._runtime import ADD, CAST, COPY, DIV, MAXIMUM, MEAN, MINIMUM, MUL, NEG, SUB, SUM  # noqa: F401
from ._runtime import _dead, _hot, drain, flush_released, functions  # noqa: F401
from ._runtime import Releaser, _borrowed, _dead_lock, _tokens, records  # noqa: F401
from . import _basics, _calls, _convert
from ._methods import TensorMethods
from ._calls import _PENDING, _out_descs, call1, call_op, from_handle, out_desc, out_desc_address  # noqa: F401
from ._calls import wrap_info as _wrap  # noqa: F401
from ._forward import forward_levels, set_forward_level, tangent_of  # noqa: F401
from ._forward import fw as _fw  # noqa: F401
# The conversions (_convert.py), also importable from here.
from ._convert import (
    _F32_MAX as _F32_MAX,
    _INT64_MAX as _INT64_MAX,
    _INT64_MIN as _INT64_MIN,
    _copy as _copy,
    _from_python as _from_python,
    _operand as _operand,
    _scalar as _scalar,
    as_tensor as as_tensor,
    borrow as borrow,
    from_numpy as from_numpy,
    gradient_operand as gradient_operand,
    tensor as tensor,
    zeros as zeros,
)
from ._convert import _foreign, _raw_bits, _view_array


if TYPE_CHECKING:
    from .ops import MinMaxResult
    _NodeBase = object
else:
    _NodeBase = _hot.NodeBase if _hot is not None else object


class Node(_NodeBase):
    """An autograd node (a tensor's ``grad_fn``).

    With the C extension its handle is a member of _hot.NodeBase, owned from
    the moment the library hands it out and released when the node goes;
    without it, a slot released by ``__del__``."""

    __slots__ = () if _hot is not None else ("_h", "__weakref__")
    _h: int

    if _hot is None:
        def __init__(self, h: int) -> None:
            self._h = h

        def __del__(self) -> None:
            try:
                if not _lib._forked:
                    lib.lucid_release(self._h)
            except Exception:  # interpreter shutdown
                pass

    def name(self) -> str:
        """The node's class name, e.g. ``"MinimumBackward"``."""
        _lib.check_fork()
        buf = ffi.new("char[]", 256)
        rc = lib.lucid_node_name(self._h, buf, 256)
        if rc:
            raise_status(rc)
        return str(ffi.string(buf).decode())

    @property
    def next_functions(self) -> Tuple[Tuple[Optional["Node"], int], ...]:
        """One (node, output_nr) pair per input; node is None for inputs
        that need no gradient. Leaves appear as ``AccumulateGrad`` nodes."""
        _lib.check_fork()
        if _hot is not None:
            return _hot.node_next(self)  # type: ignore[no-any-return]
        cap = 16
        while True:
            nodes = ffi.new("int64_t[]", cap)
            outs = ffi.new("int32_t[]", cap)
            count = ffi.new("int32_t*")
            rc = lib.lucid_node_next(self._h, nodes, outs, cap, count)
            if rc:
                raise_status(rc)
            if count[0] <= cap:
                break
            cap = count[0]  # nothing was handed out: retry with room for all
        return tuple((Node(nodes[i]) if nodes[i] else None, outs[i]) for i in range(count[0]))

    def __repr__(self) -> str:
        return "<%s>" % self.name()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and other._h == self._h

    def __hash__(self) -> int:
        return hash(self._h)


Scalar = Union[bool, int, float]
TensorLike = Union["Tensor", np.ndarray, Scalar]


if TYPE_CHECKING:
    _TensorBase = object
else:
    _TensorBase = _hot.TensorBase if _hot is not None else object


class Tensor(TensorMethods, _TensorBase):
    """An n-dimensional array with autograd, backed by pylucid's native core.

    Create one with :func:`pylucid.tensor` (copies) or
    :func:`pylucid.from_numpy` (shares memory).
    """

    # With _hot, the fields are members of its TensorBase, whose deallocator
    # releases the handle; without it, slots and _py_del below.
    __slots__ = ("__weakref__",) if _hot is not None else ("_h", "_dtype", "_shape", "_rg", "__weakref__")
    _h: int
    _dtype: dtype
    _shape: Tuple[int, ...]
    _rg: bool
    _fn: Any  # with _hot: the autograd.Function record this tensor is an output of

    def __init__(self, data: Any, dtype: Optional[DTypeLike] = None, requires_grad: bool = False) -> None:
        t = tensor(data, dtype=dtype, requires_grad=requires_grad)
        # Take over t's handle. Initialised again, the old tensor is let go
        # as if dropped (its graph, .grad and NumPy views stay with whatever
        # still refers to them: a view holds a handle of its own).
        if _hot is not None:
            _hot.adopt(self, t)  # in one step that nothing can interrupt
            return
        if getattr(self, "_h", 0):
            _release(self)
        self._h, self._dtype, self._shape, self._rg = t._h, t._dtype, t._shape, t._rg
        t._h = 0

    # ---- metadata ----
    @property
    def shape(self) -> Tuple[int, ...]:
        """The size of each dim, as a tuple (``()`` for a 0-d tensor)."""
        return self._shape

    def size(self, dim: Optional[int] = None) -> Union[Tuple[int, ...], int]:
        """The shape, or the size of dim ``dim`` when given."""
        if dim is None:
            return self._shape
        if isinstance(dim, (bool, np.bool_)) or not _basics._is_index(dim):
            raise TypeError("size(): dim must be an int, not %s" % type(dim).__name__)  # a bool is not a dim
        n, d = len(self._shape), operator.index(dim)
        if not -n <= d < n:
            raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but got %d)"
                             % (-n, n - 1, d))
        return self._shape[d]

    @property
    def dtype(self) -> dtype:
        """The element type (``pylucid.float32``, …)."""
        return self._dtype

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self._shape)

    def dim(self) -> int:
        """The number of dims (as ``ndim``)."""
        return len(self._shape)

    def numel(self) -> int:
        """The number of elements."""
        return math.prod(self._shape)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def _meta(self) -> Any:
        _lib.check_fork()
        info = ffi.new("lucid_tensor_info*")
        rc = lib.lucid_tensor_info_get(self._h, info)
        if rc:
            raise_status(rc)
        return info

    # ---- autograd ----
    @property
    def requires_grad(self) -> bool:
        """Whether autograd records ops on this tensor (floating dtypes only)."""
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, flag: bool = True) -> "Tensor":
        """Sets ``requires_grad`` in place and returns the tensor; integer and
        bool tensors raise."""
        _lib.check_fork()
        flag = _scalars.flag(flag, "requires_grad_(): requires_grad")
        rc = lib.lucid_set_requires_grad(self._h, 1 if flag else 0)
        if rc:
            raise_status(rc)
        self._rg = bool(flag)
        return self

    @property
    def _version(self) -> int:
        """The number of in-place writes into this tensor's memory through
        pylucid (out=, methods ending in _, ``t[key] = v``), shared by its views and
        detached copies; autograd nodes check it (docs/autograd.md)."""
        _lib.check_fork()
        v = ffi.new("int64_t*")
        rc = lib.lucid_tensor_version(self._h, v)
        if rc:
            raise_status(rc)
        return int(v[0])

    @property
    def is_leaf(self) -> bool:
        """True for tensors not produced by a recorded op (their ``.grad`` is kept)."""
        return bool(self._meta().is_leaf)

    @property
    def grad(self) -> Optional["Tensor"]:
        """The gradient accumulated by ``backward()`` (None before any); settable.
        A non-leaf keeps one only after ``retain_grad()``; reading it otherwise
        warns, as torch does."""
        if _lib._forked:
            _lib.check_fork()
        if _hot is not None and type(self) is Tensor:
            g = _hot_grad(self)
        else:
            buf = ffi.new("int64_t[]", _calls._LEN)
            rc = _lucid_get_grad_meta(self._h, buf)
            if rc:
                raise_status(rc)
            g = _calls.wrap_meta(memoryview(ffi.buffer(buf)).cast("q")) if buf[0] else None
        if g is None and not self.is_leaf and not self.retains_grad:
            import warnings

            warnings.warn("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                          "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
                          "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor "
                          "(docs/autograd.md).", UserWarning, stacklevel=2)
        return g  # type: ignore[no-any-return]

    @grad.setter
    def grad(self, g: Optional["Tensor"]) -> None:
        if _lib._forked:
            _lib.check_fork()
        if _hot is not None and type(self) is Tensor and (g is None or type(g) is Tensor):
            _hot.set_grad(self, g)
            return
        rc = _lucid_set_grad(self._h, 0 if g is None else as_tensor(g)._h)
        if rc:
            raise_status(rc)

    def retain_grad(self) -> None:
        """Makes ``backward()`` keep this non-leaf's gradient in ``.grad`` (a leaf keeps its own already)."""
        _lib.check_fork()
        rc = lib.lucid_retain_grad(self._h)
        if rc:
            raise_status(rc)

    @property
    def retains_grad(self) -> bool:
        """True once ``retain_grad()`` was called on this non-leaf."""
        flag = ffi.new("int32_t*")
        rc = lib.lucid_retains_grad(self._h, flag)
        if rc:
            raise_status(rc)
        return bool(flag[0])

    @property
    def grad_fn(self) -> Optional[Node]:
        """The node that produced this tensor (``MinimumBackward``, …), None for a leaf."""
        _lib.check_fork()
        if _hot is not None:
            return _hot.grad_fn(self)  # type: ignore[no-any-return]
        node = ffi.new("int64_t*")
        rc = lib.lucid_grad_fn(self._h, node)
        if rc:
            raise_status(rc)
        return Node(node[0]) if node[0] else None

    def detach(self) -> "Tensor":
        """A tensor sharing this one's memory, outside any graph."""
        _lib.check_fork()
        return _calls.detach(self)

    def backward(self, gradient: Optional[TensorLike] = None, retain_graph: Optional[bool] = None,
                 create_graph: bool = False) -> None:
        """Accumulates d(self)/d(leaf) into every leaf's ``.grad``."""
        if gradient is None and not retain_graph and not create_graph:
            # The common call: one C call (in ABI mode, autograd._run).
            if _lib._forked:
                _lib.check_fork()
            if _hot is not None and type(self) is Tensor:
                stopped = _hot.backward_run(self)  # None, or a Run that owns the handle
                if stopped is not None:  # stopped at a Python autograd.Function: run the rest from Python
                    late.drive(stopped, None, False)
                return
            late.run([self], None, None, 0, False)
            return
        if gradient is not None and (type(gradient) is not float or _hot is None or create_graph):
            gradient = gradient_operand(gradient, self)  # a float: _hot.backward_grad makes it (number_grad)
        if gradient is not None and not create_graph and _hot is not None and type(self) is Tensor:
            # backward(g), g a Tensor, a NumPy array (lent for the call) or a
            # Python number (as an array), in C.
            if _lib._forked:
                _lib.check_fork()
            stopped = _hot.backward_grad(self, gradient, 1 if retain_graph else 0)
            if stopped is not NotImplemented:
                if stopped is not None:
                    late.drive(stopped, None, False)
                return
        late.backward([self], None if gradient is None else [gradient], retain_graph=retain_graph,
                 create_graph=create_graph)

    # ---- NumPy ----
    def data_ptr(self) -> int:
        """The address of this tensor's first element (0 when it has none),
        as ``torch.Tensor.data_ptr()``: valid while the tensor (or a view of
        its memory) lives."""
        info = self._meta()
        return int(ffi.cast("uintptr_t", info.data))

    def numpy(self) -> np.ndarray:
        """A NumPy array sharing this tensor's memory (no copy).

        The array keeps that memory alive through a handle of its own, so it
        stays valid whatever becomes of this Tensor object (``__init__``
        again, or dropped)."""
        if self._rg:
            raise RuntimeError("Can't call numpy() on a Tensor that requires grad. Use tensor.detach().numpy() instead.")
        npd = self._dtype.numpy_dtype
        if self.numel() == 0:
            return np.empty(self._shape, dtype=npd)
        arr = _view_array(self, None)
        return arr if arr.dtype == npd else arr.view(npd)  # e.g. ml_dtypes.bfloat16 from "V2"

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        """NumPy's conversion (``np.asarray(t)``): the view of :meth:`numpy`
        (a copy with ``copy=True``; requires_grad refuses, as numpy())."""
        if self._rg:
            raise RuntimeError("Can't convert a Tensor that requires grad to a NumPy array. Use tensor.detach() first.")
        arr = self.numpy()
        if dtype is not None:
            arr = arr.astype(dtype, copy=False)
        if copy:
            arr = arr.copy()
        return arr

    def tolist(self) -> Any:
        """The values as nested Python lists (a number for a 0-d tensor)."""
        return _convert.values(self.detach()).tolist()  # bfloat16 through float32: no ml_dtypes needed

    def item(self) -> Scalar:
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise ValueError("only one-element tensors can be converted to Python scalars, shape is %s" % (self._shape,))
        src = self.detach()
        if self._dtype is bfloat16:  # exact through float32, without ml_dtypes
            src = src.to(float32)
        return src.numpy().reshape(()).item()  # type: ignore[no-any-return]

    def _one_value(self, what: str) -> Scalar:
        """item() for bool()/int()/float() (docs/errors.md, as NumPy): a
        one-element tensor of any shape gives its value, any other is
        ambiguous (ValueError)."""
        n = self.numel()
        if n != 1:
            raise ValueError(
                "%s of a tensor with %s is ambiguous; it needs exactly one element (shape is %s)"
                % (what, "no elements" if n == 0 else "%d elements" % n, self._shape)
            )
        return self.item()

    def __bool__(self) -> bool:
        return bool(self._one_value("the truth value"))

    def __int__(self) -> int:
        return int(self._one_value("int()"))

    def __float__(self) -> float:
        return float(self._one_value("float()"))

    def __index__(self) -> int:
        # As NumPy: only a 0-d integer tensor is an index (shapes, dims, range()).
        if self._shape or not (2 <= self._dtype.code <= 6):
            raise TypeError("only 0-d integer tensors can be converted to an index, got shape %s and dtype %s"
                            % (self._shape, self._dtype.name))
        return int(self.item())

    def __repr__(self) -> str:
        from ._repr import tensor_repr

        return tensor_repr(self)

    def __iter__(self) -> Iterator["Tensor"]:
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = _TensorBase.__hash__  # by identity, as torch: == is elementwise

    # ---- copying and pickling: new memory, the same values and flags ----
    def __deepcopy__(self, memo: dict[int, Any]) -> "Tensor":
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol; use .detach() first")
        out = _copy(self.detach())
        if self._rg:
            out.requires_grad_(True)
        memo[id(self)] = out
        return out

    def __reduce__(self) -> Any:
        """Pickles (and copy.copy) by value, every bit kept (NaN payloads and
        -0.0 included): the data as a NumPy array (bfloat16 as its raw bits,
        uint16, so no ml_dtypes is needed) and the requires_grad flag."""
        if not self.is_leaf:
            raise RuntimeError("Can't pickle a Tensor that is not a graph leaf; use .detach() first")
        src = self.detach()
        values = _raw_bits(src) if self._dtype is bfloat16 else src.numpy()
        return (_rebuild, (np.array(values, copy=True), self._dtype.name, self._rg))

    # ---- ops ----
    def to(self, dtype: DTypeLike) -> "Tensor":
        """This tensor converted to ``dtype`` (differentiable)."""
        return call1(CAST, (self,), (as_dtype(dtype).code,))  # type: ignore[no-any-return]

    def sum(self, dim: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> "Tensor":
        """Sum over ``dim`` (all dims when None); see :func:`pylucid.ops.sum`."""
        if dim is None and _hot is not None:  # (a subclass takes the Python path inside)
            return _hot_reduce_all(SUM, self, keepdim)  # type: ignore[no-any-return]
        return reduce(SUM, self, dim, keepdim)

    def mean(self, dim: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> "Tensor":
        """Mean over ``dim`` (all dims when None); see :func:`pylucid.ops.mean`."""
        return reduce(MEAN, self, dim, keepdim)

    def __add__(self, o: TensorLike) -> "Tensor":
        try:
            return binary(ADD, self, o)
        except TypeError:
            if _foreign(o):
                return NotImplemented
            raise

    def __radd__(self, o: TensorLike) -> "Tensor":
        try:
            return binary(ADD, o, self)
        except TypeError:
            if _foreign(o):
                return NotImplemented
            raise

    def __sub__(self, o: TensorLike) -> "Tensor":
        try:
            return binary(SUB, self, o)
        except TypeError:
            if _foreign(o):
                return NotImplemented
            raise

    def __rsub__(self, o: TensorLike) -> "Tensor":
        try:
            return binary(SUB, o, self)
        except TypeError:
            if _foreign(o):
                return NotImplemented
            raise

    def __mul__(self, o: TensorLike) -> "Tensor":
        try:
            return binary(MUL, self, o)
        except TypeError:
            if _foreign(o):
                return NotImplemented
            raise

    def __rmul__(self, o: TensorLike) -> "Tensor":
        try:
            return binary(MUL, o, self)
        except TypeError:
            if _foreign(o):
                return NotImplemented
            raise

    def __truediv__(self, o: TensorLike) -> "Tensor":
        try:
            return binary(DIV, self, o)
        except TypeError:
            if _foreign(o):
                return NotImplemented
            raise

    def __rtruediv__(self, o: TensorLike) -> "Tensor":
        try:
            return binary(DIV, o, self)
        except TypeError:
            if _foreign(o):
                return NotImplemented
            raise

    def __neg__(self) -> "Tensor":
        return call1(NEG, (self,))  # type: ignore[no-any-return]

    # ---- the min/max family (pylucid.ops; PyTorch's method names) ----
    def minimum(self, other: TensorLike) -> "Tensor":
        """:func:`pylucid.ops.minimum` of this tensor and ``other``."""
        return late.ops.minimum(self, other)  # type: ignore[no-any-return]

    def maximum(self, other: TensorLike) -> "Tensor":
        """:func:`pylucid.ops.maximum` of this tensor and ``other``."""
        return late.ops.maximum(self, other)  # type: ignore[no-any-return]

    def fmin(self, other: TensorLike) -> "Tensor":
        """:func:`pylucid.ops.fmin` of this tensor and ``other``."""
        return late.ops.fmin(self, other)  # type: ignore[no-any-return]

    def fmax(self, other: TensorLike) -> "Tensor":
        """:func:`pylucid.ops.fmax` of this tensor and ``other``."""
        return late.ops.fmax(self, other)  # type: ignore[no-any-return]

    def clamp(self, min: Any = None, max: Any = None) -> "Tensor":
        """:func:`pylucid.ops.clamp` of this tensor."""
        return late.ops.clamp(self, min, max)  # type: ignore[no-any-return]

    clip = clamp

    def clamp_(self, min: Any = None, max: Any = None) -> "Tensor":
        """Clamps this tensor in place (``clamp(self, min, max, out=self)``) and returns it."""
        return late.ops.clamp(self, min, max, out=self)  # type: ignore[no-any-return]

    def amin(self, dim: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> "Tensor":
        """:func:`pylucid.ops.amin` over ``dim``."""
        return late.ops.amin(self, dim, keepdim)  # type: ignore[no-any-return]

    def amax(self, dim: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> "Tensor":
        """:func:`pylucid.ops.amax` over ``dim``."""
        return late.ops.amax(self, dim, keepdim)  # type: ignore[no-any-return]

    def argmin(self, dim: Optional[int] = None, keepdim: bool = False) -> "Tensor":
        """:func:`pylucid.ops.argmin` along ``dim``."""
        return late.ops.argmin(self, dim, keepdim)  # type: ignore[no-any-return]

    def argmax(self, dim: Optional[int] = None, keepdim: bool = False) -> "Tensor":
        """:func:`pylucid.ops.argmax` along ``dim``."""
        return late.ops.argmax(self, dim, keepdim)  # type: ignore[no-any-return]

    @overload
    def min(self, dim: None = None, keepdim: bool = False) -> "Tensor": ...
    @overload
    def min(self, dim: int, keepdim: bool = False) -> "MinMaxResult": ...

    def min(self, dim: Optional[int] = None, keepdim: bool = False) -> Any:
        """:func:`pylucid.ops.min`: ``amin()``, or ``(values, indices)`` over ``dim``."""
        return late.ops.min(self, dim, keepdim)

    @overload
    def max(self, dim: None = None, keepdim: bool = False) -> "Tensor": ...
    @overload
    def max(self, dim: int, keepdim: bool = False) -> "MinMaxResult": ...

    def max(self, dim: Optional[int] = None, keepdim: bool = False) -> Any:
        """:func:`pylucid.ops.max`: ``amax()``, or ``(values, indices)`` over ``dim``."""
        return late.ops.max(self, dim, keepdim)

    # NumPy asks __array_ufunc__ below about `ndarray op Tensor`; the priority
    # stays for code that still looks at it.
    __array_priority__ = 1000

    # NumPy's override protocols (docs/interop.md, "NumPy protocols"): the
    # ufuncs and functions pylucid has an op for run it and return Tensors
    # with autograd; any other gets the tensors as arrays, or raises
    # TypeError when one requires grad. The work is in _numpy_protocols.py.
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """NumPy's ufunc protocol: ``np.minimum(t, x)`` is ``ops.minimum(t, x)``."""
        return late.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """NumPy's function protocol: ``np.amax(t, axis=0)`` is ``ops.amax(t, 0)``."""
        return late.array_function(func, types, args, kwargs)

    # ---- DLPack (python/pylucid/dlpack.py) ----
    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A DLPack capsule sharing this tensor's memory (the Python array
        API's protocol): ``"dltensor_versioned"`` when the consumer asks for
        ``max_version >= (1, 0)``, else the legacy ``"dltensor"``."""
        return late.to_dlpack(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """``(kDLCPU, 0)``: pylucid tensors live in host memory."""
        return (lib.LUCID_DL_CPU, 0)


setattr(_convert, "Tensor", Tensor)  # the conversions make and recognise Tensors


class _Late:
    """What the modules above this one (autograd, dlpack, ops,
    _numpy_protocols) give Tensor's methods: they register it here as they
    are imported (the package imports them all), so that this module never
    imports them and no module imports another in a circle."""

    drive: Callable[..., Any]  # autograd._drive
    run: Callable[..., Any]  # autograd._run
    backward: Callable[..., None]  # autograd.backward
    to_dlpack: Callable[..., Any]  # dlpack.to_dlpack
    ops: Any  # the pylucid.ops module
    array_ufunc: Callable[..., Any]  # _numpy_protocols.array_ufunc
    array_function: Callable[..., Any]  # _numpy_protocols.array_function


late: _Late = _Late()


def _py_binary(op: int, a: Any, b: Any, *, out: Any = None) -> Tensor:
    """One C call: op(a, b) with promotion, broadcasting and autograd.

    The Python form of the hot path (_hot.binary does the same in C and comes
    here for arguments that are not Tensors): the operands converted, then
    the call path (_calls.call1).
    """
    if _lib._forked:
        _lib.check_fork()
    ta = a if type(a) is Tensor else _operand(a)
    tb = b if type(b) is Tensor else _operand(b)
    return call1(op, (ta, tb), None, out)  # type: ignore[no-any-return]


def unary(op: int, t: Tensor, out: Any = None) -> Tensor:
    """The elementwise op whose lucid_op id is op on t."""
    return call1(op, (t,), None, out)  # type: ignore[no-any-return]


def reduce(op: int, a: Any, dim: Union[None, int, Sequence[int]], keepdim: bool, out: Any = None) -> Tensor:
    """The reduction whose lucid_op id is op over dim (all dims when None)."""
    if out is not None:
        ta = as_tensor(a)
        return call1(op, (ta,), reduction_attrs(dim, keepdim, op, ta.ndim), out)  # type: ignore[no-any-return]
    if dim is None and _hot is not None:
        return _hot_reduce_all(op, a, keepdim)  # type: ignore[no-any-return]
    return _py_reduce(op, a, dim, keepdim)


def reduction_attrs(dim: Union[None, int, Sequence[int]], keepdim: bool, op: Optional[int] = None,
                    ndim: int = 0) -> List[int]:
    """A reduction's attributes for lucid_op: keepdim, ndims (-1: all dims),
    dims (lucid.h). A dim past int64 is out of range for any tensor: it
    raises the library's ValueError for the op (whose id is op) on an ndim-d
    tensor here, where the C call could only say the int is too big."""
    attrs = [1 if _scalars.flag(keepdim, "keepdim") else 0, -1]
    if dim is not None:
        dims = _scalars.index_list(dim, "dim")
        for d in dims:
            if not _INT64_MIN <= d <= _INT64_MAX:
                name = _lib.schema_table()[op]["name"] if op is not None else "reduction"
                raise ValueError("%s: dimension %d out of range for a %d-d tensor" % (name, d, ndim))
        attrs[1] = len(dims)
        attrs += dims
    return attrs


def _py_reduce(op: int, a: Any, dim: Union[None, int, Sequence[int]], keepdim: bool) -> Tensor:
    if _lib._forked:
        _lib.check_fork()
    ta = a if type(a) is Tensor else as_tensor(a)
    return call1(op, (ta,), reduction_attrs(dim, keepdim, op, ta.ndim))  # type: ignore[no-any-return]


_lucid_get_grad_meta = lib.lucid_get_grad_meta
_lucid_set_grad = lib.lucid_set_grad
_lucid_release = lib.lucid_release


def _py_del(self: Tensor) -> None:
    """Tensor.__del__ without _hot: small tensors outside any graph are
    released in batches (one C call per 64); anything that could keep memory
    or a graph alive is released at once."""
    try:
        h = self._h
        if h and not _lib._forked:
            if not self._rg and len(self._shape) <= 1 and (not self._shape or self._shape[0] <= 4096):
                _dead.append(h)
                if len(_dead) >= 64:
                    flush_released()
            else:
                _lucid_release(h)
    except KeyboardInterrupt:
        # Ctrl-C landed in this finalizer, where exceptions are only printed:
        # the next op call raises it (_calls.reraise_interrupt).
        _calls.note_interrupt()
    except Exception:  # a half-built object, or interpreter shutdown
        pass


def _release(t: Tensor) -> None:
    """Lets go of t's handle as dropping t would; t._h becomes 0."""
    if _hot is not None:
        _hot.release(t)
        return
    h, t._h = t._h, 0
    if h and not _lib._forked:
        _lucid_release(h)


def _gc_phase(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _hot_gc_started()


def _hot_kind(s: dict[str, Any]) -> int:
    """An op's kind as _hot.init takes it (one byte per op id)."""
    if s["kind"] == "elementwise" and s["arity"] == 2 and not s["attrs"]:
        return ord("b")
    return ord("r") if s["kind"] == "reduction" and s["outputs"] == 1 else ord("-")


binary: Callable[[int, Any, Any], Tensor]
_calls.register(Tensor)
if _hot is not None:
    _hot.init(Tensor, Node, tuple(BY_CODE.get(i) for i in range(256)), state, drain, _py_binary, _py_reduce,
              bytes(_hot_kind(s) for s in _lib.schema_table()), _lib.FORK_MESSAGE)
    _hot.set_pinned(functions)
    _hot.set_out_desc(out_desc_address, np.ndarray)
    def _lendable(d: dtype) -> Optional[np.dtype[Any]]:
        """d's NumPy dtype where _hot.from_ndarray may take it (bool: its
        bytes need checking; bfloat16: once ml_dtypes is loaded, which this
        does not do)."""
        if d is bfloat16:
            return _dtypes._bfloat16_numpy(False)
        nd = np.dtype(d.numpy_dtype)
        return nd if d is not bool_ and from_numpy_dtype(nd) is d else None

    def _set_ndarray() -> None:
        """Tells _hot the NumPy dtypes it may lend (again when ml_dtypes'
        bfloat16 arrives)."""
        probe = np.zeros((3, 5), np.float32)
        _hot.set_ndarray(probe, probe.__array_interface__["data"][0],
                         tuple((_lendable(d), d.code, d.itemsize) for d in BY_CODE.values()
                               if _lendable(d) is not None), _borrowed)

    _set_ndarray()
    _dtypes._bf16_loaded.append(_set_ndarray)
    _hot_from_ndarray = _hot.from_ndarray
    binary = _hot.binary
    _hot_reduce_all = _hot.reduce_all
    _hot_grad = _hot.grad
    _hot_gc_started = _hot.gc_started
    gc.callbacks.append(_gc_phase)  # each collection sees one answer per tensor (python/csrc)
else:
    binary = _py_binary
    setattr(Tensor, "__del__", _py_del)


def _rebuild(values: np.ndarray, dtype_name: str, requires_grad: bool) -> Tensor:
    """Unpickles a Tensor (see Tensor.__reduce__)."""
    if dtype_name == "bfloat16" and values.dtype == np.uint16:  # raw bits
        out = zeros(values.shape, dtype=dtype_name)
        np.copyto(_raw_bits(out), values)
        if requires_grad:
            out.requires_grad_(True)
        return out
    return tensor(values, dtype=dtype_name, requires_grad=requires_grad)
