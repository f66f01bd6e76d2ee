"""Forward-mode state (autograd.jvp): the calling thread's level, a dict from
id(tensor) to (tensor, tangent), and the count of levels open in any thread.
Op entry points look at the level only while that count is not 0, and the
C path (python/csrc) sends every call to them meanwhile (set_forward)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from ._runtime import _hot

if TYPE_CHECKING:
    from .tensor import Tensor

Level = Dict[int, Tuple["Tensor", "Tensor"]]


class _Forward(threading.local):
    """The calling thread's forward-mode level (autograd.jvp): a dict from
    id(tensor) to (tensor, tangent), holding both alive while the level is
    open; None outside jvp."""

    level: Optional[Level] = None


fw = _Forward()
# Levels open in any thread: op entry points look at fw only when it is not
# 0, and the C path sends calls to them meanwhile (set_forward).
forward_levels = [0]
# Re-entrant: a finalizer the collector runs inside the block, on this thread,
# may open a level of its own.
_fw_lock = threading.RLock()


def tangent_of(t: Any) -> Optional["Tensor"]:
    """t's tangent in the calling thread's forward-mode level (None: zero)."""
    lvl = fw.level
    if lvl is None:
        return None
    e = lvl.get(id(t))
    return e[1] if e is not None and e[0] is t else None


def set_forward_level(level: Optional[Level]) -> Optional[Level]:
    """Opens (a dict) or closes (None) the calling thread's forward-mode
    level; returns the previous one.

    A finalizer or signal handler may run between any two bytecodes here and
    open a level of its own on this thread; whatever it does, it undoes. So
    the count may over-count this thread's level (that only sends calls to
    the Python path) but never under-count it: it goes up before a level is
    set and down after it is cleared. (Down first, a nested jvp in between
    saw this thread's level still set, took the count as including it, and
    its ops ran the plain path: zero tangents.)"""
    prev = fw.level
    if prev is None and level is not None:
        _count_levels(1)
        fw.level = level
    elif prev is not None and level is None:
        fw.level = None
        _count_levels(-1)
    else:
        fw.level = level
    return prev


def _count_levels(step: int) -> None:
    with _fw_lock:
        forward_levels[0] += step
        if _hot is not None:
            _hot.set_forward(forward_levels[0])
