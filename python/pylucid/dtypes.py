"""pylucid's dtypes and their mapping to NumPy."""

from __future__ import annotations

import sys
from typing import Any, Callable, List, Optional, Union

import numpy as np

from ._lib import lib

# bfloat16 at the NumPy boundary needs ml_dtypes (optional). It is imported
# when a bfloat16 NumPy dtype is first needed, not with pylucid: importing
# it costs ~0.4 s, six times NumPy's import (docs/dtypes.md).
_bf16_np: Optional[np.dtype[Any]] = None
_bf16_looked = False
_bf16_loaded: List[Callable[[], None]] = []  # run once it is found (the C fast path's table)


def _bfloat16_numpy(load: bool) -> Optional[np.dtype[Any]]:
    """ml_dtypes' bfloat16 NumPy dtype, or None where ml_dtypes is absent;
    with load=False, only if ml_dtypes is imported already (a NumPy array of
    that dtype exists only then)."""
    global _bf16_np, _bf16_looked
    if not _bf16_looked and (load or "ml_dtypes" in sys.modules):
        try:
            import ml_dtypes
        except ImportError:  # pragma: no cover - depends on the environment
            pass
        else:
            _bf16_np = np.dtype(ml_dtypes.bfloat16)
            _BY_NUMPY[_bf16_np] = bfloat16
        _bf16_looked = True
        if _bf16_np is not None:
            for hook in _bf16_loaded:
                hook()
    return _bf16_np


class dtype:
    """An element type: ``pylucid.float32``, ``pylucid.bfloat16``, …"""

    __slots__ = ("name", "code", "itemsize", "is_floating_point", "_np")

    def __init__(self, name: str, code: int, itemsize: int, is_float: bool, np_dtype: Optional[np.dtype[Any]]):
        self.name = name
        self.code = code
        self.itemsize = itemsize
        self.is_floating_point = is_float
        self._np = np_dtype

    def __repr__(self) -> str:
        return "pylucid." + self.name

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        """The matching NumPy dtype (bfloat16 needs the ml_dtypes package)."""
        npd = self._np if self._np is not None or self.code != lib.LUCID_BFLOAT16 else _bfloat16_numpy(True)
        if npd is None:
            raise TypeError(
                "pylucid.bfloat16 has no NumPy dtype unless the ml_dtypes package is installed "
                "(the bf16 extra, docs/install.md); convert with .to(pylucid.float32) first"
            )
        return npd


# The codes are the library's (lucid.h, LUCID_BOOL ... LUCID_FLOAT64).
bool_ = dtype("bool", lib.LUCID_BOOL, 1, False, np.dtype(np.bool_))
uint8 = dtype("uint8", lib.LUCID_UINT8, 1, False, np.dtype(np.uint8))
int8 = dtype("int8", lib.LUCID_INT8, 1, False, np.dtype(np.int8))
int16 = dtype("int16", lib.LUCID_INT16, 2, False, np.dtype(np.int16))
int32 = dtype("int32", lib.LUCID_INT32, 4, False, np.dtype(np.int32))
int64 = dtype("int64", lib.LUCID_INT64, 8, False, np.dtype(np.int64))
float16 = dtype("float16", lib.LUCID_FLOAT16, 2, True, np.dtype(np.float16))
bfloat16 = dtype("bfloat16", lib.LUCID_BFLOAT16, 2, True, None)  # its NumPy dtype: _bfloat16_numpy
float32 = dtype("float32", lib.LUCID_FLOAT32, 4, True, np.dtype(np.float32))
float64 = dtype("float64", lib.LUCID_FLOAT64, 8, True, np.dtype(np.float64))

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
BY_CODE = {d.code: d for d in ALL}
BY_NAME = {d.name: d for d in ALL}
BY_NAME["bool_"] = bool_
BY_NAME["half"] = float16
BY_NAME["float"] = float32
BY_NAME["double"] = float64

#: What functions taking a dtype accept: a pylucid dtype, its name
#: ("float32", "bfloat16", "half", …) or anything ``numpy.dtype`` understands.
DTypeLike = Union[dtype, str, "np.dtype[Any]", type]

_BY_NUMPY = {d._np: d for d in ALL if d._np is not None}

_REJECTED_KINDS = {
    "c": "complex",
    "O": "object",
    "U": "str",
    "S": "bytes",
    "M": "datetime",
    "m": "timedelta",
    "V": "void/structured",
}


def from_numpy_dtype(dt: np.dtype[Any]) -> dtype:
    """The pylucid dtype of a NumPy dtype, or TypeError naming it."""
    native = dt.newbyteorder("=") if dt.byteorder not in ("=", "|") else dt
    found = _BY_NUMPY.get(native)
    if found is None and _bfloat16_numpy(False) is not None:
        found = _BY_NUMPY.get(native)
    if found is not None:
        return found
    kind = _REJECTED_KINDS.get(dt.kind, "unsupported")
    raise TypeError(
        "pylucid does not support NumPy dtype %s (%s); supported: %s"
        % (dt, kind, ", ".join(d.name for d in ALL))
    )


def as_dtype(d: DTypeLike) -> dtype:
    """Accepts a pylucid dtype, its name, or a NumPy dtype-like."""
    if isinstance(d, dtype):
        return d
    if isinstance(d, str) and d in BY_NAME:
        return BY_NAME[d]
    try:
        npd = np.dtype(d)
    except TypeError:
        raise TypeError("not a dtype: %r" % (d,)) from None
    return from_numpy_dtype(npd)
