"""Python numbers and integer arguments at the library's boundary.

- Python ints convert to a dtype exactly (docs/dtypes.md): to an integer
  dtype only when they fit (else ``OverflowError``, never a wrap-around), to
  a float dtype rounded once to nearest even from the exact integer (±inf past
  the float16/bfloat16/float32 range, ``OverflowError`` past float64's, as
  Python's ``float()``).
- Arguments that must be integers (shapes, dims, thread counts) accept
  anything ``operator.index`` accepts (NumPy integer scalars included) and
  reject floats with ``TypeError`` (docs/errors.md).
"""

from __future__ import annotations

import math
import operator
from typing import Any, List, Optional, Tuple

import numpy as np

from .dtypes import bfloat16, bool_, dtype, float16, float32, float64, int64

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# The largest exponent passed to lucid_scalar_int: any larger integer is past
# every dtype's range anyway.
_MAX_EXP = 2**30


def int_parts(x: int) -> Tuple[int, int]:
    """(m, exp) with x's top 62 bits in m and the lowest bit of m set when
    any dropped bit is (round-to-odd): lucid_scalar_int's encoding of a
    Python int outside int64."""
    n = -x if x < 0 else x
    exp = n.bit_length() - 62
    m = n >> exp
    if (m << exp) != n:
        m |= 1
    return (-m if x < 0 else m), min(exp, _MAX_EXP)


# (significand bits, largest finite value) of the narrow float formats.
_FORMATS = {
    float16: (11, 65504.0),
    bfloat16: (8, 3.3895313892515355e38),
    float32: (24, 3.4028234663852886e38),
}


def int_to_float(x: int, d: dtype) -> float:
    """x rounded once to nearest even in float dtype d, as a float64 that
    holds the rounded value exactly (±inf past d's range; OverflowError past
    float64's)."""
    if d is float64:
        return float(x)
    p, largest = _FORMATS[d]
    n = -x if x < 0 else x
    length = n.bit_length()
    if length > p:
        s = length - p
        q = n >> s
        r = n - (q << s)
        half = 1 << (s - 1)
        if r > half or (r == half and q & 1):
            q += 1
        v = math.ldexp(q, s) if s < 1000 else math.inf
    else:
        v = float(n)
    if v > largest:
        v = math.inf
    return -v if x < 0 else v


def check_int_range(lo_value: int, hi_value: int, d: dtype) -> None:
    """OverflowError unless the integers lo_value..hi_value fit d."""
    info = np.iinfo(d.numpy_dtype)
    for v in (lo_value, hi_value):
        if not info.min <= v <= info.max:
            raise OverflowError("Python integer %d out of bounds for %s" % (v, d.name))


def check_fits(values: Any, d: dtype) -> None:
    """Refuses values (an array, or anything NumPy makes one of) that an
    integer dtype d cannot hold, before they are converted to it: a NaN or
    infinity raises ValueError, a value out of d's range (a float's part
    before the point, as the conversion truncates) OverflowError, instead
    of the wrapped or undefined number NumPy's cast would give. Bool and
    float dtypes hold anything."""
    if d.is_floating_point or d.name == "bool":
        return
    a = np.asarray(values)
    if not a.size or a.dtype.kind not in "iuf" and a.dtype.name != "bfloat16":
        return
    info = np.iinfo(d.numpy_dtype)
    if a.dtype.kind in "iu":
        lo_i, hi_i = int(a.min()), int(a.max())
        if lo_i < info.min or hi_i > info.max:
            raise OverflowError("value %d is out of range for %s" % (lo_i if lo_i < info.min else hi_i, d.name))
        return
    f = a.astype(np.float64)
    finite = np.isfinite(f)
    if not finite.all():
        raise ValueError("cannot convert float %r to integer dtype %s" % (float(f[~finite].flat[0]), d.name))
    t = np.trunc(f)
    lo, hi = float(t.min()), float(t.max())
    if lo < info.min or hi >= float(info.max + 1):  # info.min and info.max + 1 are powers of 2: exact in float64
        bad = float(f.flat[int(np.argmin(t) if lo < info.min else np.argmax(t))])
        raise OverflowError("value %r is out of range for %s" % (bad, d.name))


def exact_array(data: Any, want: Optional[dtype]) -> Tuple[np.ndarray, dtype]:
    """The Python numbers in ``data`` (nested lists) as an array to convert
    to the returned dtype, each Python int converted exactly: for a float
    dtype, a float64 array holding the values that dtype will hold (the
    library's cast then changes nothing); else an array of that dtype.
    Used where NumPy's own conversion would lose an int's exact value."""
    obj = np.array(data, dtype=object)
    flat = obj.ravel().tolist()
    has_float = has_int = False
    for v in flat:
        if isinstance(v, (bool, np.bool_)):
            continue
        if isinstance(v, (int, np.integer)):
            has_int = True
        elif isinstance(v, (float, np.floating)):
            has_float = True
        else:
            raise TypeError(
                "pylucid does not support NumPy dtype object (object): the data holds a %s" % type(v).__name__
            )
    target = want if want is not None else (float32 if has_float else int64 if has_int else bool_)
    if target.is_floating_point:
        vals = [
            int_to_float(int(v), target) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else float(v)
            for v in flat
        ]
        return np.array(vals, dtype=np.float64).reshape(obj.shape), target
    if target is bool_:
        return np.array([bool(v) for v in flat], dtype=np.bool_).reshape(obj.shape), target
    ints = [int(v) for v in flat]  # floats truncate toward zero, as NumPy's cast
    if ints:
        check_int_range(min(ints), max(ints), target)
    return np.array(ints, dtype=target.numpy_dtype).reshape(obj.shape), target


def flag(value: Any, what: str, strict: bool = False) -> bool:
    """A bool argument (keepdim, requires_grad): a bool, NumPy bool or the
    int 0 or 1; anything else raises TypeError rather than being read by
    its truth (``keepdim="no"`` is not True). strict, for a factory's
    ``requires_grad=`` (as torch's factories): a bool or None (False), and
    no int."""
    if isinstance(value, (bool, np.bool_)) or (value is None if strict else type(value) is int and value in (0, 1)):
        return bool(value)
    raise TypeError("%s must be %s, not %s" % (what, "bool" if strict else "a bool", type(value).__name__))


def requires_grad_flag(name: str, value: Any) -> bool:
    """The ``requires_grad=`` of factory ``name``: :func:`flag`, strict."""
    return flag(value, "%s(): argument 'requires_grad'" % name, strict=True)


def index_list(value: Any, what: str) -> List[int]:
    """``value`` as a list of ints: one integer (anything ``operator.index``
    accepts) or a sequence of them. Floats, bools and other non-integers
    raise TypeError, as in NumPy and torch (``sum(dim=True)`` is no dim 1)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("%s must be an int or a sequence of ints, not bool" % what)
    try:
        return [operator.index(value)]
    except TypeError:
        pass
    try:
        items = list(value)
    except TypeError:
        raise TypeError(
            "%s must be an int or a sequence of ints, got %s" % (what, type(value).__name__)
        ) from None
    out = []
    for d in items:
        if isinstance(d, (bool, np.bool_)):
            raise TypeError("%s must be an int or a sequence of ints, not bool" % what)
        try:
            out.append(operator.index(d))
        except TypeError as e:
            raise TypeError("%s must be an int or a sequence of ints: %s" % (what, e)) from None
    return out
