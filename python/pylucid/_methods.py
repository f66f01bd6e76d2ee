"""The Tensor methods PyTorch users reach for (docs/tensor.md): indexing
and writing through it, the shape methods, comparisons, copies and casts,
layout queries, in-place fills and the logical operators of bool and
integer tensors. Tensor takes them from TensorMethods, a base
class without state, so tensor.py keeps to the core of the class.
"""

from __future__ import annotations

import builtins

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Tuple, Union, cast

import numpy as np

from . import _basics, _calls, _convert
from ._runtime import COPY

if TYPE_CHECKING:
    from .tensor import Tensor


def _t(self: Any) -> "Tensor":
    """self as the Tensor it is (these methods are Tensor's alone)."""
    return cast("Tensor", self)


class TensorMethods:
    """Methods of :class:`pylucid.Tensor` (see there)."""

    __slots__ = ()

    # ---- indexing and shape (docs/tensor.md): views share this memory ----
    def __getitem__(self, key: Any) -> "Tensor":
        return _basics.getitem(_t(self), key)

    def __setitem__(self, key: Any, value: Any) -> None:
        """``t[key] = value``: writes value (broadcast, cast to this dtype)
        into this tensor's memory, outside any graph (docs/tensor.md)."""
        _basics.setitem(_t(self), key, value)

    def reshape(self, *shape: Any) -> "Tensor":
        """This tensor with a new shape (one dim may be -1): a view when the layout allows, else a copy."""
        return _basics.reshape(_t(self), _basics.sizes(shape, "shape"))

    def view(self, *shape: Any) -> "Tensor":
        """This tensor with a new shape, sharing its memory (RuntimeError when the strides do not allow it)."""
        return _basics.view(_t(self), _basics.sizes(shape, "shape"))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        """Dims ``start_dim`` to ``end_dim`` merged into one (a view when the layout allows)."""
        return _basics.flatten(_t(self), start_dim, end_dim)

    def squeeze(self, dim: Union[None, int, Sequence[int]] = None) -> "Tensor":
        """This tensor without its size-1 dims (all, or those in ``dim``): a view."""
        return _basics.squeeze(_t(self), dim)

    def unsqueeze(self, dim: int) -> "Tensor":
        """A view with a size-1 dim inserted at ``dim``."""
        return _basics.unsqueeze(_t(self), dim)

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        """A view with dims ``dim0`` and ``dim1`` swapped."""
        return _basics.transpose(_t(self), dim0, dim1)

    def permute(self, *dims: Any) -> "Tensor":
        """A view with the dims in the order ``dims``."""
        return _basics.permute(_t(self), _basics.sizes(dims, "dims"))

    @property
    def T(self) -> "Tensor":
        """The dims reversed (a view)."""
        return _basics.permute(_t(self), tuple(range(_t(self).ndim - 1, -1, -1)))

    def expand(self, *sizes: Any) -> "Tensor":
        """A broadcast view with ``sizes`` (-1 keeps a dim)."""
        return _basics.expand(_t(self), _basics.sizes(sizes))

    # ---- comparisons: bool tensors, no graph (NaN compares as NumPy) ----
    def __lt__(self, o: Any) -> "Tensor":
        return _basics.compare(_t(self), o, np.less)

    def __le__(self, o: Any) -> "Tensor":
        return _basics.compare(_t(self), o, np.less_equal)

    def __gt__(self, o: Any) -> "Tensor":
        return _basics.compare(_t(self), o, np.greater)

    def __ge__(self, o: Any) -> "Tensor":
        return _basics.compare(_t(self), o, np.greater_equal)

    def __eq__(self, o: Any) -> "Tensor":  # type: ignore[override]
        return _basics.compare(_t(self), o, np.equal)

    def __ne__(self, o: Any) -> "Tensor":  # type: ignore[override]
        return _basics.compare(_t(self), o, np.not_equal)

    # ---- copies and casts ----
    def clone(self) -> "Tensor":
        """A contiguous copy, recorded in the graph (its gradient flows back
        to this tensor), as torch's ``clone``."""
        return cast("Tensor", _calls.call1(COPY, (_t(self),)))

    def contiguous(self) -> "Tensor":
        """This tensor when its elements are in row-major order, else
        :meth:`clone`."""
        return _t(self) if _t(self).is_contiguous() else _t(self).clone()

    def _as(self, name: str) -> "Tensor":
        from . import dtypes

        d = getattr(dtypes, name)
        return _t(self) if _t(self).dtype is d else _t(self).to(d)

    def float(self) -> "Tensor":
        """``self.to(pylucid.float32)`` (this tensor if it is float32)."""
        return _t(self)._as("float32")

    def double(self) -> "Tensor":
        """``self.to(pylucid.float64)`` (this tensor if it is float64)."""
        return _t(self)._as("float64")

    def half(self) -> "Tensor":
        """``self.to(pylucid.float16)`` (this tensor if it is float16)."""
        return _t(self)._as("float16")

    def bfloat16(self) -> "Tensor":
        """``self.to(pylucid.bfloat16)`` (this tensor if it is bfloat16)."""
        return _t(self)._as("bfloat16")

    def long(self) -> "Tensor":
        """``self.to(pylucid.int64)`` (this tensor if it is int64)."""
        return _t(self)._as("int64")

    def int(self) -> "Tensor":
        """``self.to(pylucid.int32)`` (this tensor if it is int32)."""
        return _t(self)._as("int32")

    def bool(self) -> "Tensor":
        """``self.to(pylucid.bool)`` (this tensor if it is bool)."""
        return _t(self)._as("bool_")

    # ---- layout ----
    def stride(self, dim: Optional[builtins.int] = None) -> Union[Tuple[builtins.int, ...], builtins.int]:
        """The strides in elements (of dim ``dim`` when given), as torch's."""
        v, _, strides, _ = _calls.view(_t(self))
        del v
        st = tuple(strides) if _t(self).ndim else ()
        if dim is None:
            return st
        d = _basics._dim(dim, _t(self).ndim, "stride(): dim")
        return st[d] if _t(self).ndim else 1

    def is_contiguous(self) -> builtins.bool:
        """Whether the elements lie in row-major order without gaps (size-1
        dims may have any stride, as in torch)."""
        expect = 1
        for n, st in reversed(list(zip(_t(self).shape, cast(Tuple[builtins.int, ...], _t(self).stride())))):
            if n == 0:
                return True
            if n != 1 and st != expect:
                return False
            expect *= n
        return True

    def t(self) -> "Tensor":
        """The transpose of a tensor of at most 2 dims (a view), as torch's ``t()``."""
        if _t(self).ndim > 2:
            raise RuntimeError("t() expects a tensor with <= 2 dimensions, but self is %dD" % _t(self).ndim)
        return _t(self) if _t(self).ndim < 2 else _t(self).transpose(0, 1)

    @property
    def device(self) -> str:
        """Where the elements live: always ``"cpu"``."""
        return "cpu"

    def cpu(self) -> "Tensor":
        """This tensor (it is on the CPU already)."""
        return _t(self)

    def element_size(self) -> builtins.int:
        """The size of one element in bytes."""
        return builtins.int(_t(self).dtype.itemsize)

    def nelement(self) -> builtins.int:
        """The number of elements (:meth:`numel`)."""
        return _t(self).numel()

    # ---- in-place fills (the rules of t[...] = v) ----
    def fill_(self, value: Any) -> "Tensor":
        """Writes ``value`` into every element (``self[...] = value``) and returns this tensor."""
        _basics.setitem(_t(self), Ellipsis, value)
        return _t(self)

    def zero_(self) -> "Tensor":
        """Writes zeros into every element and returns this tensor."""
        return _t(self).fill_(0)

    # ---- logical and bitwise operators: bool and integer tensors, no graph ----
    def __invert__(self) -> "Tensor":
        return _logic("~", np.invert, _t(self))

    def __and__(self, o: Any) -> "Tensor":
        return _logic("&", np.bitwise_and, _t(self), o)

    def __rand__(self, o: Any) -> "Tensor":
        return _logic("&", np.bitwise_and, o, _t(self))

    def __or__(self, o: Any) -> "Tensor":
        return _logic("|", np.bitwise_or, _t(self), o)

    def __ror__(self, o: Any) -> "Tensor":
        return _logic("|", np.bitwise_or, o, _t(self))

    def __xor__(self, o: Any) -> "Tensor":
        return _logic("^", np.bitwise_xor, _t(self), o)

    def __rxor__(self, o: Any) -> "Tensor":
        return _logic("^", np.bitwise_xor, o, _t(self))


def _logic(sym: str, ufunc: Callable[..., Any], *xs: Any) -> "Tensor":
    """A logical (bool) or bitwise (integer) operator: NumPy's ufunc on the
    operands' elements in the dtype the ops promote the tensors and arrays
    to (Python bools and ints are weak, as in the comparisons); a floating
    operand raises TypeError, as in torch. A new tensor outside any graph."""
    tensor_class = getattr(_convert, "Tensor")
    if any(_convert._foreign(x) for x in xs):
        return cast("Tensor", NotImplemented)  # (the operators hand it to Python's protocol)

    def weak(x: Any) -> bool:
        return isinstance(x, (bool, int)) and not isinstance(x, np.generic)

    strong = [x.detach() if isinstance(x, tensor_class) else _convert.as_tensor(x) for x in xs if not weak(x)]
    common = strong[0].dtype
    for other in strong[1:]:
        common = _basics._promoted(strong[0].to(common), other)
    if common.is_floating_point:
        raise TypeError("%s is only for bool and integer tensors, not %s" % (sym, common.name))
    it = iter(strong)
    arrays = [x if weak(x) else next(it).to(common).numpy() for x in xs]
    return _convert.from_numpy(np.asarray(ufunc(*arrays), order="C"))
