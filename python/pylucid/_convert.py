"""The conversions between Python/NumPy values and tensors: from_numpy,
borrow, tensor, as_tensor, the operands of ops and of backward, zeros; and
the other way, NumPy arrays over a tensor's memory (_view_array).
(Importable from pylucid.tensor too, where they were first; this module
is below it and learns the Tensor class from it.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple, Union

import numpy as np

from . import _calls, _lib, _scalars
from ._calls import call1
from ._lib import lib
from ._runtime import COPY, _hot
from .dtypes import DTypeLike, as_dtype, bool_, dtype, float32, float64, from_numpy_dtype

if TYPE_CHECKING:
    from .tensor import Tensor
else:
    Tensor = None  # the class, set by tensor.py once it exists (no import circle)



def from_numpy(arr: np.ndarray, requires_grad: bool = False) -> "Tensor":
    """A tensor sharing memory with ``arr`` (no copy), whatever its strides.

    Read-only arrays are accepted: the library never writes into an input.
    Byte-swapped arrays, and arrays whose strides are not a multiple of the
    item size, are converted (copied) first.
    """
    if _hot is not None and type(arr) is np.ndarray:
        t = _hot.from_ndarray(arr)  # the common case in C (python/csrc); None: the conversions below
        if t is not None:
            if requires_grad:
                t.requires_grad_(True)
            return t  # type: ignore[no-any-return]
    _lib.check_fork()
    if not isinstance(arr, np.ndarray):
        raise TypeError("from_numpy expects a numpy.ndarray, got %s" % type(arr).__name__)
    dt = from_numpy_dtype(arr.dtype)
    if arr.dtype.byteorder not in ("=", "|"):
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype == np.bool_ and arr.size and arr.view(np.uint8).max() > 1:
        arr = arr.view(np.uint8) != 0  # bytes other than 0/1 (np.frombuffer): canonical bools
    isz = arr.itemsize
    strides = arr.strides
    if any(s % isz for s in strides):
        arr = np.ascontiguousarray(arr)
        strides = arr.strides
    nd = arr.ndim
    if nd > lib.LUCID_MAX_DIMS:
        raise ValueError("arrays with more than %d dims are not supported" % lib.LUCID_MAX_DIMS)
    ptr, readonly = arr.__array_interface__["data"]
    t = borrow(ptr, dt, arr.shape, [s // isz for s in strides], readonly, arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def borrow(data: int, dt: dtype, shape: Sequence[int], strides: Sequence[int], readonly: bool, owner: Any) -> "Tensor":
    """A tensor over memory the caller lends: element [0,...,0] at address
    data, strides in elements. owner is kept alive until the library hands
    the token back (drain); the library is given the lowest address the view
    touches and the span of bytes it covers (lucid.h, lucid_tensor_borrow)."""
    return _calls.lend(data, dt.code, dt.itemsize, shape, strides, readonly, owner)


def _scalar(x: Union[bool, int, float]) -> "Tensor":
    """A weak 0-d tensor for a Python bool, int or float operand of a binary
    op (docs/dtypes.md): the op converts it to its result dtype, an int
    exactly (OverflowError where it does not fit)."""
    if isinstance(x, int) and not isinstance(x, bool) and not _INT64_MIN <= x <= _INT64_MAX:
        return _calls.scalar_int(*_scalars.int_parts(x))
    return _calls.scalar(x if isinstance(x, (bool, int)) else float(x))


_INT64_MIN, _INT64_MAX = _scalars.INT64_MIN, _scalars.INT64_MAX


def _operand(x: Any) -> "Tensor":
    """A binary op's operand: Python bool/int/float are weak scalars; NumPy
    scalars (np.float64 too, although it subclasses float), arrays and
    tensors are strong (as_tensor)."""
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return _scalar(x)
    return as_tensor(x)


def _foreign(o: Any) -> bool:
    """Whether o is no operand at all (None, a string, a dict...): an
    arithmetic dunder then returns NotImplemented, so Python tries o's own
    method and otherwise raises its usual "unsupported operand type(s)"."""
    return not isinstance(o, (Tensor, np.ndarray, np.generic, bool, int, float, complex, list, tuple)) and not (
        hasattr(o, "__array__") or hasattr(o, "__array_interface__") or hasattr(o, "__dlpack__"))


def as_tensor(x: Any) -> "Tensor":
    """Tensors pass through; NumPy arrays are shared; NumPy scalars keep
    their dtype; a lone Python number becomes a tensor of its category's
    default dtype (bool, int64, float32), and so do Python lists, as
    :func:`tensor`; other array-likes are converted by NumPy."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return from_numpy(x)
    if isinstance(x, np.generic):
        return from_numpy(np.asarray(x))
    if isinstance(x, (bool, int, float, list, tuple)):
        return tensor(x)  # Python ints convert exactly
    if isinstance(x, complex):
        raise TypeError("pylucid does not support complex numbers")
    return from_numpy(np.asarray(x))  # an array-like keeps its dtype, as an array


_F32_MAX = float(np.finfo(np.float32).max)


def gradient_operand(g: Any, output: "Tensor") -> Any:
    """g, given as the gradient of output, as backward takes it: a Python
    number (weak, docs/dtypes.md) becomes output's floating dtype, rounded
    once, as a 0-d NumPy array for float32/float64 (lent to the C path
    without a copy) or a tensor; anything else is returned as it is."""
    t = type(g)
    if t is not float and t is not int:
        return g
    d = output._dtype
    if (d is float64 or d is float32) and (t is float or -2**53 <= g <= 2**53):  # exact as a double
        if d is float64 or abs(g) <= _F32_MAX:
            return np.array(g, dtype=np.float32 if d is float32 else np.float64)  # one rounding
        with np.errstate(over="ignore"):  # past float32's range: ±inf (NaN stays NaN)
            return np.array(g, dtype=np.float32)
    if d.is_floating_point:
        return tensor(g, dtype=d)  # big ints (exact), float16/bfloat16 (rounded once)
    return as_tensor(g)  # a gradient for an integer output: the engine raises


def tensor(data: Any, dtype: Optional[DTypeLike] = None, requires_grad: bool = False) -> "Tensor":
    """A new tensor holding a copy of ``data``.

    NumPy arrays keep their dtype; Python floats default to float32, ints to
    int64, bools to bool (PyTorch's defaults). With ``dtype`` the values are
    converted straight to it, rounding once (``tensor([0.1],
    dtype=pylucid.float64)`` holds exactly 0.1); float16 and bfloat16 need no
    ml_dtypes.
    """
    _lib.check_fork()
    want = as_dtype(dtype) if dtype is not None else None
    if isinstance(data, Tensor):
        src = data.detach()
        out = src.to(want) if want is not None and want is not src.dtype else _copy(src)
    else:
        if isinstance(data, np.ndarray) or isinstance(data, np.generic):
            arr = np.array(data, copy=True)
        else:
            arr, want = _from_python(data, want)
        from_numpy_dtype(arr.dtype)  # raises TypeError naming an unsupported dtype
        out = array_to(arr, want)
    if _scalars.requires_grad_flag("tensor", requires_grad):
        out.requires_grad_(True)
    return out


def array_to(arr: np.ndarray, want: Optional[dtype]) -> "Tensor":
    """A new tensor of the values of ``arr`` (a private array, which the
    tensor may keep) in ``want`` (None: arr's own dtype), converted as
    docs/dtypes.md says: into float16/bfloat16 by the library's cast, which
    rounds once from the source dtype (ml_dtypes rounds float64 to bfloat16
    through float32) and needs no ml_dtypes; into an integer dtype only
    where every value fits. tensor() and the factories share it."""
    if want is not None and want.is_floating_point and want.itemsize == 2:
        return from_numpy(np.asarray(arr, order="C")).to(want)
    if want is not None:
        _scalars.check_fits(arr, want)  # no NaN, infinity or wrapped value into an integer dtype
        arr = arr.astype(want.numpy_dtype, copy=False)
    return from_numpy(np.asarray(arr, order="C"))  # arr is private: no copy unless its layout needs one


def _from_python(data: Any, want: Optional[dtype]) -> Tuple[np.ndarray, Optional[dtype]]:
    """Python data (numbers, nested lists) as an array for tensor(), and the
    dtype to convert it to. Python ints convert exactly (docs/dtypes.md):
    NumPy's own conversion can hold one past int64 in uint64, object or
    float64 (``[-1, 2**63]``), and rounds ints past 2**53 through float64."""
    try:
        arr = np.array(data)
    except OverflowError:  # e.g. a float and an int past float64's range
        arr = np.array(data, dtype=object)
    kind = arr.dtype.kind
    if kind == "O" or kind == "u":
        # Python ints past int64 (as uint64 or objects), or unsupported
        # objects, which exact_array rejects.
        return _scalars.exact_array(data, want)
    if arr.dtype == np.float64:
        big = np.abs(arr) >= 2.0**53  # ints here may have been rounded through float64
        if big.any() and (want is not float64 or (np.abs(arr[big]) >= 2.0**63).any()):
            return _scalars.exact_array(data, want)
        if want is None:
            arr = arr.astype(np.float32)  # Python floats: the default float dtype
    elif kind == "i" and want is not None and not want.is_floating_point and want is not bool_ and arr.size:
        _scalars.check_int_range(int(arr.min()), int(arr.max()), want)  # no wrap-around
    return arr, want


def _copy(t: "Tensor") -> "Tensor":
    """A private contiguous copy with the same bits (-0.0 and NaN payloads
    kept), outside any graph, so the new tensor never aliases t."""
    _lib.check_fork()
    return call1(COPY, (t,), None, None, True)  # type: ignore[no-any-return]


def zeros(shape: Union[int, Sequence[int]], dtype: DTypeLike = float32) -> "Tensor":
    """A new zero-filled tensor. ``shape`` is an int or a sequence of ints
    (NumPy integers too; a float raises TypeError, as in NumPy)."""
    _lib.check_fork()
    dims = tuple(_scalars.index_list(shape, "shape"))
    for d in dims:
        if not -(2**63) <= d < 2**63:
            raise ValueError("dimension %d of shape %s does not fit in int64" % (d, dims))
    return _calls.tensor_new(as_dtype(dtype).code, dims)


class _ArrayHolder:
    """Exposes a tensor's memory to NumPy; the array keeps it (and so the tensor) alive."""

    __slots__ = ("__array_interface__", "_tensor")

    def __init__(self, t: "Tensor", iface: dict[str, Any]) -> None:
        self.__array_interface__ = iface
        self._tensor = t


def _view_array(t: "Tensor", typestr: Optional[str]) -> np.ndarray:
    """A NumPy array over t's memory (not empty); with typestr, seen as that
    type instead (of the same item size). The array holds a view of t (a
    handle of its own: _calls.view), so the memory stays whatever becomes of
    the Python object t."""
    v, data, strides, readonly = _calls.view(t)
    isz = t._dtype.itemsize
    iface = {
        "version": 3,
        "shape": v._shape,
        "strides": tuple(s * isz for s in strides) if strides else None,
        "typestr": typestr or t._dtype.numpy_dtype.str,
        "descr": [("", typestr)] if typestr else t._dtype.numpy_dtype.descr,
        "data": (data, readonly),
    }
    return np.asarray(_ArrayHolder(v, iface))


def values(t: "Tensor") -> np.ndarray:
    """t's values as a NumPy array over its memory; bfloat16 widened to
    float32 (a copy, exact), which needs no ml_dtypes."""
    from .dtypes import bfloat16

    return t.to(float32).numpy() if t.dtype is bfloat16 else t.numpy()


def _raw_bits(t: "Tensor") -> np.ndarray:
    """A NumPy view of t's elements as unsigned integers of its item size:
    their raw bits (any dtype, bfloat16 without ml_dtypes)."""
    ut = np.dtype("u%d" % t.dtype.itemsize)
    if t.numel() == 0:
        return np.empty(t.shape, dtype=ut)
    return _view_array(t, ut.str)
