"""The Tensor basics PyTorch users reach for (docs/tensor.md): indexing,
the shape methods, comparisons and the factories.

Views (basic indexing, permute/transpose/T, view, reshape where the layout
allows, squeeze/unsqueeze/flatten, expand) share memory with their base and
are recorded as the core's view ops, so gradients flow back through them;
integer-array and boolean-mask indexing copy through the core's ``take``
(repeated indices summed in the gradient). Comparisons return bool tensors
and record no graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union, cast

import math
import operator
import secrets

import numpy as np

from . import _convert, _lib, _scalars
from ._lib import lib
from ._calls import call1

if TYPE_CHECKING:
    from .tensor import Tensor

_IDS = {s["name"]: s["id"] for s in _lib.schema_table()}
PERMUTE, SLICE, VIEW, RESHAPE, EXPAND, TAKE = (_IDS[n] for n in ("permute", "slice", "view", "reshape", "expand", "take"))


def sizes(args: Tuple[Any, ...], what: str = "size") -> Tuple[int, ...]:
    """Sizes given as ints or as one sequence (``reshape(2, 3)``,
    ``reshape((2, 3))``): anything ``operator.index`` takes (NumPy integers,
    0-d integer tensors), a NumPy integer array too; floats and bools raise
    TypeError."""
    if len(args) == 1 and not _is_index(args[0]):
        if isinstance(args[0], (str, bytes)) or not hasattr(args[0], "__iter__"):
            raise TypeError("%s must be ints or a sequence of ints, not %s" % (what, type(args[0]).__name__))
        args = tuple(args[0])
    out = []
    for a in args:
        if isinstance(a, (bool, np.bool_)):
            raise TypeError("%s must be ints, not bool" % what)
        try:
            out.append(operator.index(a))
        except TypeError:
            raise TypeError("%s must be ints, not %s" % (what, type(a).__name__)) from None
    return tuple(out)


def _is_index(v: Any) -> bool:
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


def _size_and_dtype(size: Tuple[Any, ...], dtype: Any) -> Tuple[Tuple[int, ...], Any]:
    """torch's ``zeros(2, 3, dtype=d)`` and NumPy's ``zeros((2, 3), d)``: a
    last positional argument that is neither an integer nor a sequence of
    them is the dtype."""
    if (len(size) == 2 and dtype is None and not _is_index(size[1])
            and not isinstance(size[1], (list, tuple, np.ndarray, float, np.floating))):
        return sizes(size[:1]), size[1]
    return sizes(size), dtype


def _resolve(shape: Tuple[int, ...], numel: int) -> Tuple[int, ...]:
    """shape with its one -1 inferred from numel (RuntimeError as torch otherwise)."""
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for d in shape:
        if d != -1:
            if d < 0:
                raise RuntimeError("invalid shape dimension %d" % d)
            known *= d
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError("shape '%s' is invalid for input of size %d" % (list(shape), numel))
        shape = tuple(numel // known if d == -1 else d for d in shape)
    elif known != numel:
        raise RuntimeError("shape '%s' is invalid for input of size %d" % (list(shape), numel))
    return shape


def reshape(t: "Tensor", shape: Tuple[int, ...]) -> "Tensor":
    return call1(RESHAPE, (t,), _resolve(shape, t.numel()))  # type: ignore[no-any-return]


def view(t: "Tensor", shape: Tuple[int, ...]) -> "Tensor":
    return call1(VIEW, (t,), _resolve(shape, t.numel()))  # type: ignore[no-any-return]


def _dim(d: Any, n: int, name: str = "dim") -> int:
    """Dim d of a tensor with n dims, as a non-negative int (a 0-d tensor
    takes 0 and -1, as in torch). d is an int (anything ``operator.index``
    takes: NumPy integers too); a bool is not a dim (docs/tensor.md), nor a
    float: TypeError."""
    if isinstance(d, (bool, np.bool_)) or not _is_index(d):
        raise TypeError("%s must be an int, not %s" % (name, type(d).__name__))
    d = operator.index(d)
    if not -max(n, 1) <= d < max(n, 1):
        raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but got %d)"
                         % (-max(n, 1), max(n, 1) - 1, d))
    return d % n if n else 0


def permute(t: "Tensor", dims: Tuple[int, ...]) -> "Tensor":
    return call1(PERMUTE, (t,), dims)  # type: ignore[no-any-return]


def transpose(t: "Tensor", d0: int, d1: int) -> "Tensor":
    n = t.ndim
    a, b = _dim(d0, n, "transpose(): dim0"), _dim(d1, n, "transpose(): dim1")  # a 0-d tensor takes 0 and -1
    if n == 0:
        return t
    perm = list(range(n))
    perm[a], perm[b] = b, a
    return permute(t, tuple(perm))


def squeeze(t: "Tensor", dim: Union[None, int, Sequence[int]] = None) -> "Tensor":
    shape = t.shape
    if dim is None:
        drop = {i for i, d in enumerate(shape) if d == 1}
    else:
        if isinstance(dim, (bool, np.bool_)) or not (_is_index(dim) or isinstance(dim, (tuple, list))):
            raise TypeError("squeeze(): dim must be an int or a sequence of ints, not %s" % type(dim).__name__)
        dims: Sequence[Any] = (dim,) if _is_index(dim) else tuple(cast(Sequence[int], dim))
        ds = [_dim(d, len(shape), "squeeze(): dim") for d in dims]  # every dim checked, also on a 0-d tensor
        drop = {d for d in ds if shape and shape[d] == 1}
    return view_or_reshape(t, tuple(d for i, d in enumerate(shape) if i not in drop))


def unsqueeze(t: "Tensor", dim: int) -> "Tensor":
    n = t.ndim + 1
    d = _dim(dim, n, "unsqueeze(): dim")
    shape = t.shape
    return view_or_reshape(t, shape[:d] + (1,) + shape[d:])


def flatten(t: "Tensor", start_dim: int = 0, end_dim: int = -1) -> "Tensor":
    shape = t.shape
    s, e = _dim(start_dim, len(shape), "flatten(): start_dim"), _dim(end_dim, len(shape), "flatten(): end_dim")
    if not shape:
        return reshape(t, (1,))
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    mid = 1
    for d in shape[s:e + 1]:
        mid *= d
    return reshape(t, shape[:s] + (mid,) + shape[e + 1:])


def view_or_reshape(t: "Tensor", shape: Tuple[int, ...]) -> "Tensor":
    """Inserting or dropping size-1 dims is always a view."""
    return call1(RESHAPE, (t,), shape)  # type: ignore[no-any-return]


def expand(t: "Tensor", shape: Tuple[int, ...]) -> "Tensor":
    lead = len(shape) - t.ndim
    if lead < 0:
        raise RuntimeError("expand: the number of sizes provided (%d) must be greater or equal to the number of "
                           "dimensions in the tensor (%d)" % (len(shape), t.ndim))
    full = tuple(t.shape[i - lead] if d == -1 and i >= lead else d for i, d in enumerate(shape))
    return call1(EXPAND, (t,), full)  # type: ignore[no-any-return]


def _is_basic(k: Any) -> bool:
    return (k is None or k is Ellipsis or isinstance(k, slice)
            or (isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))))


def _ints_first(ndim: int, keys: Tuple[Any, ...]) -> Tuple[Tuple[Any, ...], Tuple[Any, ...]]:
    """An advanced key as torch reads it: its ints index first, as basic
    indices, and the rest (slices, None, ..., arrays) then indexes what is
    left by NumPy's rules. NumPy instead counts an int next to an array as
    one more array, which moves the indexed dims to the front:
    ``x[0, :, [1, 2]]`` of a (2, 3, 4) x is (3, 2) in torch and here, (2, 3)
    in NumPy. Returns (the ints' key, the rest's key), each for NumPy."""
    def width(k: Any) -> int:  # the dims k consumes
        if k is None or k is Ellipsis or isinstance(k, (bool, np.bool_)):
            return 0
        if isinstance(k, (np.ndarray, list)) and np.asarray(k).dtype == np.bool_:
            return int(np.asarray(k).ndim)  # a mask spans its own dims (a 0-d one none, as True)
        return 1

    if sum(k is Ellipsis for k in keys) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    spread = max(ndim - sum(width(k) for k in keys), 0)  # the dims ... stands for (or the trailing ones)
    ints: List[Any] = []
    rest: List[Any] = []
    for k in keys:
        if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            ints.append(k)
        else:
            ints.extend([slice(None)] * (spread if k is Ellipsis else width(k)))
            rest.append(k)
    return tuple(ints) + (Ellipsis,), tuple(rest)  # (the Ellipsis keeps a 0-d result a view, not a scalar)


def _positions(shape: Tuple[int, ...], ints: Tuple[Any, ...], rest: Tuple[Any, ...]) -> np.ndarray:
    """The row-major flat positions of the elements ``x[ints][rest]`` reads
    from an x of shape (NumPy's rules for each step), in memory proportional
    to the result and the key, never to x: an expanded view can have any
    size at all. Each int fixes its dim; in ``rest`` every dim is indexed
    by a stand-in that lists only the positions the key can reach there (a
    slice's range, an array's values, a mask's nonzero), and NumPy's own
    indexing of broadcast views of those lists places the result dims."""
    steps = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        steps[d] = steps[d + 1] * shape[d + 1]
    if len(ints) - 1 > len(shape):
        raise IndexError("too many indices for array: array is %d-dimensional, but %d were indexed"
                         % (len(shape), len(ints) - 1))
    base = 0
    free: List[int] = []  # the dims ints leaves to rest
    for d, k in enumerate(ints[:-1]):  # ints: one entry per leading dim, then Ellipsis
        if isinstance(k, slice):
            free.append(d)
            continue
        n, i = shape[d], operator.index(k)
        if not -n <= i < n:
            raise IndexError("index %d is out of bounds for axis %d with size %d" % (i, d, n))
        base += (i % n) * steps[d]
    free.extend(range(len(ints) - 1, len(shape)))

    # NumPy's verdict on the key, with the installed NumPy's own errors
    # (bounds, mask sizes, index types, too many indices; its edge cases
    # differ between versions), on a view of the free dims without memory.
    np.broadcast_to(np.zeros((), np.int8), tuple(shape[d] for d in free))[tuple(rest)]

    def width(k: Any) -> int:  # the dims of x that k consumes
        if k is None or k is Ellipsis or isinstance(k, (bool, np.bool_)):
            return 0
        return int(k.ndim) if isinstance(k, np.ndarray) and k.dtype == np.bool_ else 1

    keys = [(np.asarray(k) if k else np.zeros(0, np.int64)) if isinstance(k, list) else k
            for k in rest]  # x[[]]: an empty list indexes as ints, as NumPy
    used = sum(width(k) for k in keys)
    if not any(k is Ellipsis for k in keys):
        keys.append(Ellipsis)
    key: List[Any] = []
    lists: List[np.ndarray] = []  # per free dim: the positions its stand-in lists
    for k in keys:
        if k is None or isinstance(k, (bool, np.bool_)) or isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype == np.bool_:
            key.append(k)  # a new dim (None, a 0-d bool), no dim of x
            continue
        if k is Ellipsis:  # kept, so NumPy places the result dims as it would (an Ellipsis separates arrays)
            for d in free[len(lists):len(lists) + len(free) - used]:
                lists.append(np.arange(shape[d], dtype=np.int64) * steps[d])
            key.append(Ellipsis)
            continue
        dims = free[len(lists):len(lists) + width(k)]
        if isinstance(k, slice):
            r = range(shape[dims[0]])[k]
            lists.append(np.arange(r.start, r.stop, r.step, dtype=np.int64) * steps[dims[0]])
            key.append(slice(None))
            continue
        arrays = [np.asarray(k)]
        if arrays[0].dtype == np.bool_:
            arrays = list(arrays[0].nonzero())  # x[mask] is x[mask.nonzero()] (NumPy)
        for raw, d in zip(arrays, dims):
            a = raw.astype(np.int64)
            # (an index NumPy let through out of range selects nothing: the result is empty)
            lists.append(np.where(a < 0, a + shape[d], a).ravel() * steps[d])
            key.append(np.arange(a.size, dtype=np.int64).reshape(a.shape) if a.ndim else np.int64(0))
    sizes = tuple(len(v) for v in lists)
    pos: Any = None
    for j, v in enumerate(lists):
        part = np.broadcast_to(v.reshape((len(v),) + (1,) * (len(lists) - 1 - j)), sizes)[tuple(key)]
        pos = part if pos is None else pos + part
    if pos is None:
        pos = np.zeros((), dtype=np.int64)[tuple(key)]
    return pos + base  # type: ignore[no-any-return]


def getitem(t: "Tensor", key: Any) -> "Tensor":
    Tensor, from_numpy = getattr(_convert, "Tensor"), _convert.from_numpy  # the class tensor.py registered

    keys = key if isinstance(key, tuple) else (key,)
    if not all(_is_basic(k) for k in keys):
        ints, rest = _ints_first(t.ndim, tuple(k.numpy() if isinstance(k, Tensor) else k for k in keys))
        pos = _positions(t.shape, ints, rest)
        return call1(TAKE, (t, from_numpy(np.asarray(pos, order="C"))))  # type: ignore[no-any-return]
    if sum(k is Ellipsis for k in keys) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in keys if k is not None and k is not Ellipsis)
    if used > t.ndim:
        raise IndexError("too many indices for tensor of dimension %d" % t.ndim)
    if Ellipsis in keys:  # identity comparison is fine: Ellipsis is a singleton
        i = next(j for j, k in enumerate(keys) if k is Ellipsis)
        keys = keys[:i] + (slice(None),) * (t.ndim - used) + keys[i + 1:]
    out, d = t, 0
    for k in keys:
        if k is None:
            shape = out.shape
            out = view_or_reshape(out, shape[:d] + (1,) + shape[d:])
            d += 1
        elif isinstance(k, slice):
            n = out.shape[d]
            start, stop, step = k.indices(n)
            if step < 0 and stop == -1:
                stop = -(n + 1)  # "before the first element", not "the last"
            out = call1(SLICE, (out,), (d, start, stop, step))
            d += 1
        else:
            n = out.shape[d]
            i = int(k)
            if not -n <= i < n:
                raise IndexError("index %d is out of bounds for dimension %d with size %d" % (i, d, n))
            i %= n
            out = call1(SLICE, (out,), (d, i, i + 1, 1))
            shape = out.shape
            out = view_or_reshape(out, shape[:d] + shape[d + 1:])
    return out


def setitem(t: "Tensor", key: Any, value: Any) -> None:
    """``t[key] = value`` (docs/tensor.md): value (a Tensor, array, number or
    nested list) broadcast and cast to t's dtype, written into t's memory
    where ``t[key]`` reads, by NumPy's assignment rules (any key getitem
    takes, overlap handled). Records no graph, as out= (so a graph tensor
    or a value that requires grad is refused in grad mode); counts one
    in-place write, so a node that saved t refuses to run afterwards. On
    any error t is left as it was."""
    Tensor = getattr(_convert, "Tensor")  # the class tensor.py registered
    from ._forward import forward_levels, tangent_of
    from ._state import is_grad_enabled

    value_rg = isinstance(value, Tensor) and value.requires_grad
    if is_grad_enabled() and (t.requires_grad or value_rg):
        if t.requires_grad and t.is_leaf:
            raise RuntimeError("a leaf Tensor that requires grad is being used in an in-place operation (t[...] = v); "
                               "write under pylucid.no_grad() (as an optimizer step does)")
        raise RuntimeError("t[...] = v does not support automatic differentiation, but %s requires grad; write under "
                           "pylucid.no_grad() or into a tensor outside the graph"
                           % ("the tensor written into" if t.requires_grad else "the value"))
    if forward_levels[0] and (tangent_of(t) is not None or (isinstance(value, Tensor) and tangent_of(value) is not None)):
        raise RuntimeError("t[...] = v does not support forward-mode differentiation, but an argument has a tangent "
                           "(autograd.jvp)")
    same_bits = t.dtype.name == "bfloat16" and isinstance(value, Tensor) and value.dtype is t.dtype
    src = None if same_bits else _assigned(value, t.dtype)
    keys = key if isinstance(key, tuple) else (key,)
    keys = tuple(k.numpy() if isinstance(k, Tensor) else k for k in keys)
    advanced = not all(_is_basic(k) for k in keys)
    ints, rest = _ints_first(t.ndim, keys) if advanced else (keys, ())

    if t.dtype.name == "bfloat16":
        # The raw bits, written as bits: the value rounded once by the core
        # (docs/dtypes.md; no ml_dtypes, whose float64 conversion rounds
        # through float32), a bfloat16 tensor's own bits as they are.
        arr = _convert._raw_bits(t.detach())
        src = _convert._raw_bits(value.detach() if same_bits else _convert.tensor(np.asarray(src), dtype=t.dtype))
    else:
        arr = t.detach().numpy()
    with np.errstate(all="ignore"):  # cast first, so no warning (an error under -W error) comes mid-write; floats
        src = np.asarray(src).astype(arr.dtype, copy=False)  # round to ±inf silently (docs/dtypes.md)
    if src.ndim and src.shape[0] == 1:  # leading size-1 dims past the target's are dropped, as torch does
        shape = np.shape(arr[ints][rest] if advanced else arr[keys])  # (NumPy refuses [5.] into one element)
        while src.ndim > len(shape) and src.shape[0] == 1:
            src = src.reshape(src.shape[1:])
    if not t.numel():
        target = np.empty(t.shape)  # the errors a write would give; nothing to write
        if advanced:
            target[ints][rest] = src
        else:
            target[keys] = src
        return
    if any(st == 0 and n > 1 for st, n in zip(arr.strides, arr.shape)):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a single "
                           "memory location (an expanded view); clone it before writing")
    if not arr.flags.writeable:
        raise ValueError("cannot write into this tensor: its memory is read-only (borrowed from a read-only array)")
    h, refused = t._h, False
    try:
        if advanced:
            arr[ints][rest] = src  # arr[ints] is a view: the write reaches arr
        else:
            arr[keys] = src
    except (IndexError, ValueError, TypeError):
        refused = True  # NumPy checks keys and shapes before it writes an element
        raise
    finally:
        if not refused:  # written, or interrupted (Ctrl-C) during or after the write: it counts
            rc = lib.lucid_tensor_bump_version(h)  # a C call: no signal handler runs before it
    if rc:
        _lib.raise_status(rc)


def _assigned(value: Any, dt: Any) -> Any:
    """value as NumPy assigns it into an array of pylucid dtype dt: a
    Tensor's elements, a Python int exactly (range-checked for an integer
    dtype, rounded once for a float one), other numbers and arrays as NumPy
    converts them; strings, complex numbers and objects raise TypeError."""
    Tensor = getattr(_convert, "Tensor")
    if isinstance(value, int) and not isinstance(value, bool):
        if dt.is_floating_point:
            return _scalars.int_to_float(value, dt)
        if dt.name != "bool":
            _scalars.check_int_range(value, value, dt)
        return value
    arr = _convert.values(value.detach()) if isinstance(value, Tensor) else np.asarray(value)
    if arr.dtype.kind not in "biuf" and arr.dtype.name != "bfloat16" or arr.dtype.kind == "c":
        raise TypeError("can't assign a %s to a pylucid Tensor" % type(value).__name__)
    _scalars.check_fits(arr, dt)  # a NaN or 1e10 into int32 raises, never writes a wrapped number
    return arr


def compare(t: "Tensor", other: Any, ufunc: Any) -> "Tensor":
    """t <op> other in the dtype pylucid's promotion gives the pair
    (docs/dtypes.md: an int64 tensor against a float32 one compares in
    float32, as in torch, not in float64 as NumPy would), a bool tensor
    outside any graph; NaN is unequal to everything, as in NumPy. A Python
    int compares exactly, as Python compares an int with a float (_int_compare).
    bfloat16 compares through float32 (exact), so it needs no ml_dtypes."""
    Tensor, from_numpy = getattr(_convert, "Tensor"), _convert.from_numpy  # the class tensor.py registered
    from .dtypes import bfloat16, float32

    if _convert._foreign(other):
        return NotImplemented  # type: ignore[no-any-return]  # t == "a" is False, t < None a TypeError, as torch
    a = t.detach()
    if isinstance(other, (Tensor, np.ndarray, np.generic, list, tuple)):  # strong: the ops' promotion decides
        try:
            b = other.detach() if isinstance(other, Tensor) else _convert.as_tensor(other)
        except TypeError:  # a NumPy dtype pylucid lacks (uint32, str, ...): NumPy compares it
            return from_numpy(np.asarray(ufunc(_convert.values(a), other), order="C"))
        common = _promoted(a, b)
        a, b = a.to(common), b.to(common)
        other = _convert.values(b)
    elif isinstance(other, float):
        if not a.dtype.is_floating_point:
            a = a.to(float32)  # a Python float is weak: an integer tensor meets it in the default float
        elif a.dtype is bfloat16:
            other = _convert.tensor(other, dtype=bfloat16).item()  # weak: rounded to the tensor's dtype, as NumPy
    elif isinstance(other, int) and a.dtype.is_floating_point and not -2048 <= other <= 2048:
        # (an int up to 2**11 is a value of every float dtype that compares here, bfloat16 being
        # widened to float32: NumPy's comparison below is exact for it, t > 0 stays fast)
        return from_numpy(np.asarray(_int_compare(_convert.values(a), other, ufunc), order="C"))
    # else a Python int or bool meets an integer or bool t in t's dtype: NumPy's weak rule (exact out of range)
    return from_numpy(np.asarray(ufunc(_convert.values(a), other), order="C"))  # asarray: a 0-d result stays 0-d


def _int_compare(x: np.ndarray, n: int, ufunc: Any) -> np.ndarray:
    """ufunc(x, n) for a floating array x and a Python int n, exact as
    Python compares an int with a float (tensor([16777216.]) == 16777217 is
    False in float32, and no int is converted past a dtype's range). Where n
    is one of x's dtype's values the comparison is NumPy's; otherwise no
    element equals n, and x < n exactly where x is at most lo, the largest
    value of x's dtype below n (x > n where x is at least hi, the smallest
    above it; ±inf past the range)."""
    c = x.dtype.type
    f = _nearest_float(n, x.dtype)
    if f == n:  # exact in x's dtype (Python compares the float and the int exactly)
        return ufunc(x, c(f))  # type: ignore[no-any-return]
    if ufunc is np.equal or ufunc is np.not_equal:
        return np.full(x.shape, ufunc is np.not_equal)
    with np.errstate(over="ignore"):  # the step from the largest finite value is ±inf, as wanted
        lo, hi = (np.nextafter(c(f), c(-np.inf)), c(f)) if f > n else (c(f), np.nextafter(c(f), c(np.inf)))
    if ufunc is np.less or ufunc is np.less_equal:
        return np.less_equal(x, lo)  # type: ignore[no-any-return]
    return np.greater_equal(x, hi)  # type: ignore[no-any-return]


def _nearest_float(n: int, npd: np.dtype) -> float:
    """The value of NumPy float dtype npd nearest to the int n (rounded once,
    ±inf past the range), as a Python float."""
    from .dtypes import float16, float32

    if npd == np.float64:
        try:
            return float(n)
        except OverflowError:
            return math.inf if n > 0 else -math.inf
    return _scalars.int_to_float(n, float16 if npd == np.float16 else float32)


def _promoted(a: "Tensor", b: "Tensor") -> Any:
    """The dtype pylucid's binary ops give a and b (asked of the core once
    per pair of dtypes, on empty views: no elements computed)."""
    key = (a.dtype, b.dtype)
    dt = _promotions.get(key)
    if dt is None:
        from ._runtime import MINIMUM

        empty = tuple(call1(SLICE, (view_or_reshape(x, (x.numel(),)),), (0, 0, 0, 1)) for x in (a, b))
        dt = _promotions[key] = call1(MINIMUM, empty).dtype
    return dt


# (dtype, dtype) -> the dtype the pair promotes to (the empty views are 1-d,
# so only the dtypes decide).
_promotions: Dict[Tuple[Any, Any], Any] = {}


class Generator:
    """A source of random numbers for :func:`rand` and :func:`randn`
    (NumPy's PCG64 underneath): ``Generator().manual_seed(s)`` makes the
    same numbers again."""

    def __init__(self) -> None:
        self.seed()

    def seed(self) -> int:
        """Reseeds the generator from OS entropy and returns the seed (as
        ``torch.Generator.seed``)."""
        return self._reseed(secrets.randbits(64))

    def manual_seed(self, seed: int) -> "Generator":
        """Reseeds the generator and returns it. The seed is an integer in
        ``[-2**63, 2**64)``; a negative one wraps to 64 bits, as in torch."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"manual_seed(): seed must be an int, not {type(seed).__name__}")
        seed = int(seed)
        if not -(1 << 63) <= seed < (1 << 64):
            raise ValueError(f"manual_seed(): seed {seed} is out of range [-2**63, 2**64)")
        self._reseed(seed % (1 << 64))
        return self

    def initial_seed(self) -> int:
        """The seed the generator was last seeded with (by :meth:`manual_seed`,
        :meth:`seed` or at construction)."""
        return self._seed

    def _reseed(self, seed: int) -> int:
        self._seed = seed
        self._rng = np.random.Generator(np.random.PCG64(seed))
        return seed


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seeds the default generator and returns it."""
    return default_generator.manual_seed(seed)


# ---- factories ----

def _make(name: str, values: np.ndarray, dtype: Any, requires_grad: Any) -> "Tensor":
    """A factory's result: values (a fresh array) in dtype, converted as
    tensor() converts (_convert.array_to: float16/bfloat16 rounded once from
    the float64 or int64 values, integers only where they fit); the default
    float for float64 values without a dtype."""
    from .dtypes import as_dtype

    requires_grad = _scalars.requires_grad_flag(name, requires_grad)
    dt = as_dtype(dtype) if dtype is not None else None
    if dt is None and values.dtype == np.float64:
        values = values.astype(np.float32)
    out = _convert.array_to(values, dt)
    if requires_grad:
        if not out.dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point dtype can require gradients")
        out.requires_grad_(True)
    return out


def _default(dtype: Any) -> Any:
    from .dtypes import float32

    return float32 if dtype is None else dtype


def full(size: Any, fill_value: Union[bool, int, float], *, dtype: Any = None, requires_grad: bool = False) -> "Tensor":
    """A new tensor of ``size`` filled with ``fill_value`` (its dtype follows
    the value, as torch: bool, int64 or the default float, unless given; a
    NumPy number counts as the Python number of its kind)."""
    shape = sizes(size if isinstance(size, tuple) else (size,))
    if not isinstance(fill_value, (bool, int, float, np.bool_, np.integer, np.floating)):
        raise TypeError("full(): fill_value must be a number (bool, int or float), not %s" % type(fill_value).__name__)
    if isinstance(fill_value, np.generic):
        fill_value = fill_value.item()  # np.int64(3) fills int64, as 3 does
    if dtype is None:
        from .dtypes import bool_, float32, int64
        dtype = bool_ if isinstance(fill_value, bool) else int64 if isinstance(fill_value, int) else float32
    values = np.full(shape, fill_value, dtype=np.float64 if isinstance(fill_value, float) else None)
    return _make("full", values, dtype, requires_grad)


def ones(*size: Any, dtype: Any = None, requires_grad: bool = False) -> "Tensor":
    """A new tensor of ones (the default float unless ``dtype``):
    ``ones(2, 3)``, ``ones((2, 3))`` or, as NumPy, ``ones((2, 3), dtype)``."""
    shape, dtype = _size_and_dtype(size, dtype)
    return _make("ones", np.ones(shape), _default(dtype), requires_grad)


def zeros(*size: Any, dtype: Any = None, requires_grad: bool = False) -> "Tensor":
    """A new tensor of zeros (the default float unless ``dtype``):
    ``zeros(2, 3)``, ``zeros((2, 3))`` or, as NumPy, ``zeros((2, 3), dtype)``."""
    shape, dtype = _size_and_dtype(size, dtype)
    requires_grad = _scalars.requires_grad_flag("zeros", requires_grad)
    out = _convert.zeros(shape, _default(dtype))  # zeroed by the core: no NumPy array made
    if requires_grad:
        if not out.dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point dtype can require gradients")
        out.requires_grad_(True)
    return out


def empty(*size: Any, dtype: Any = None, requires_grad: bool = False) -> "Tensor":
    """A new tensor whose values are unspecified (here: zeros); called as
    :func:`zeros`."""
    return zeros(*size, dtype=dtype, requires_grad=_scalars.requires_grad_flag("empty", requires_grad))


def arange(start: Union[int, float], end: Optional[Union[int, float]] = None, step: Union[int, float] = 1, *,
           dtype: Any = None, requires_grad: bool = False) -> "Tensor":
    """``[start, end)`` in steps of ``step``: int64 when every argument is an
    integer, else the default float."""
    for what, v in (("start", start), ("end", end), ("step", step)):
        if v is not None and (isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating))):
            raise TypeError("arange(): %s must be a number, not %s" % (what, type(v).__name__))
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, end, step))
    if dtype is None:
        from .dtypes import float32, int64
        dtype = int64 if ints else float32
    if ints:
        vals = _int_range(int(start), int(end), int(step))
    else:
        vals = np.arange(start, end, step, dtype=np.float64)
    return _make("arange", vals, dtype, requires_grad)


def _int_range(start: int, end: int, step: int) -> np.ndarray:
    """arange of Python ints, counted exactly: every value must be an
    int64 (arange(2**63 - 2, 2**63 + 2) raises OverflowError, where NumPy
    wraps to negative numbers)."""
    n = max(0, -((start - end) // step))  # ceil((end - start) / step)
    last = start + (n - 1) * step
    lo, hi = -(1 << 63), (1 << 63) - 1
    for v in ((start, last) if n else ()):
        if not lo <= v <= hi:
            raise OverflowError("arange(): value %d is out of the range of int64" % v)
    if not lo <= step <= hi:
        raise OverflowError("arange(): step %d is out of the range of int64" % step)
    # start + step * i: each product and sum wraps modulo 2**64 at most where
    # the exact result, an int64 (checked above), comes out right.
    with np.errstate(over="ignore"):
        return np.arange(n, dtype=np.int64) * np.int64(step) + np.int64(start)


def linspace(start: float, end: float, steps: int, *, dtype: Any = None, requires_grad: bool = False) -> "Tensor":
    """``steps`` values evenly spaced from ``start`` to ``end`` inclusive."""
    if isinstance(steps, (bool, np.bool_)) or not isinstance(steps, (int, np.integer)):
        raise TypeError("linspace(): steps must be an int, not %s" % type(steps).__name__)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _make("linspace", np.linspace(start, end, int(steps)), _default(dtype), requires_grad)


def _like(t: "Tensor", dtype: Any, name: str, requires_grad: Any) -> Tuple[Tuple[int, ...], Any, bool]:
    """A *_like factory's shape, dtype and checked requires_grad."""
    Tensor = getattr(_convert, "Tensor")
    if not isinstance(t, Tensor):
        raise TypeError("%s(): argument 'input' must be a Tensor, not %s" % (name, type(t).__name__))
    return t.shape, t.dtype if dtype is None else dtype, _scalars.requires_grad_flag(name, requires_grad)


def zeros_like(t: "Tensor", *, dtype: Any = None, requires_grad: bool = False) -> "Tensor":
    """A new tensor of zeros with ``t``'s shape (and its dtype unless ``dtype``)."""
    shape, dt, requires_grad = _like(t, dtype, "zeros_like", requires_grad)
    return zeros(shape, dtype=dt, requires_grad=requires_grad)


def ones_like(t: "Tensor", *, dtype: Any = None, requires_grad: bool = False) -> "Tensor":
    """A new tensor of ones with ``t``'s shape (and its dtype unless ``dtype``)."""
    shape, dt, requires_grad = _like(t, dtype, "ones_like", requires_grad)
    return ones(shape, dtype=dt, requires_grad=requires_grad)


def empty_like(t: "Tensor", *, dtype: Any = None, requires_grad: bool = False) -> "Tensor":
    """A new tensor with ``t``'s shape (and its dtype unless ``dtype``), values unspecified (here: zeros)."""
    shape, dt, requires_grad = _like(t, dtype, "empty_like", requires_grad)
    return empty(shape, dtype=dt, requires_grad=requires_grad)


def full_like(t: "Tensor", fill_value: Union[bool, int, float], *, dtype: Any = None,
              requires_grad: bool = False) -> "Tensor":
    """A new tensor of ``fill_value`` with ``t``'s shape (and its dtype unless ``dtype``)."""
    shape, dt, requires_grad = _like(t, dtype, "full_like", requires_grad)
    return full(shape, fill_value, dtype=dt, requires_grad=requires_grad)


def _random(name: str, draw: str, shape: Tuple[int, ...], generator: Optional[Generator], dtype: Any,
            requires_grad: bool) -> "Tensor":
    """rand/randn: shape's numbers from generator's draw, in a floating dtype."""
    from .dtypes import as_dtype

    if generator is not None and not isinstance(generator, Generator):
        raise TypeError("%s(): generator must be a pylucid.Generator, not %s" % (name, type(generator).__name__))
    dt = as_dtype(_default(dtype))
    if not dt.is_floating_point:
        raise TypeError("%s(): dtype must be a floating dtype, got %s" % (name, dt.name))
    g = generator or default_generator
    bits = _SIGNIFICAND_BITS.get(dt.name)
    if draw == "random" and bits is not None:
        # On the dtype's own grid, k / 2**p for k in [0, 2**p): a float64
        # draw rounded to a narrower dtype can round up to 1.0.
        values = g._rng.integers(0, 1 << bits, size=shape, dtype=np.int64) * (0.5 ** bits)
    else:
        values = getattr(g._rng, draw)(shape)
    return _make(name, values, dt, requires_grad)


# The significand bits (the implicit one included) of the floating dtypes
# narrower than float64, whose uniform draws are multiples of 2**-bits.
_SIGNIFICAND_BITS = {"float16": 11, "bfloat16": 8, "float32": 24}


def rand(*size: Any, generator: Optional[Generator] = None, dtype: Any = None,
         requires_grad: bool = False) -> "Tensor":
    """Uniform numbers in [0, 1) from ``generator`` (the default one unless given)."""
    return _random("rand", "random", sizes(size), generator, dtype, requires_grad)


def randn(*size: Any, generator: Optional[Generator] = None, dtype: Any = None,
          requires_grad: bool = False) -> "Tensor":
    """Standard normal numbers from ``generator`` (the default one unless given)."""
    return _random("randn", "standard_normal", sizes(size), generator, dtype, requires_grad)


def rand_like(t: "Tensor", *, generator: Optional[Generator] = None, dtype: Any = None,
              requires_grad: bool = False) -> "Tensor":
    """:func:`rand` with ``t``'s shape (and its dtype unless ``dtype``)."""
    shape, dt, requires_grad = _like(t, dtype, "rand_like", requires_grad)
    return _random("rand_like", "random", shape, generator, dt, requires_grad)


def randn_like(t: "Tensor", *, generator: Optional[Generator] = None, dtype: Any = None,
               requires_grad: bool = False) -> "Tensor":
    """:func:`randn` with ``t``'s shape (and its dtype unless ``dtype``)."""
    shape, dt, requires_grad = _like(t, dtype, "randn_like", requires_grad)
    return _random("randn_like", "standard_normal", shape, generator, dt, requires_grad)
