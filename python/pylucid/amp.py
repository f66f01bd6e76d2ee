"""Automatic mixed precision: ``with pylucid.autocast(dtype=pylucid.float16):``.

Thread-local and nestable. Inside, each op casts its floating inputs by its
schema's AmpPolicy (SPEC §4): ``minimum``/``maximum`` are PROMOTE, so
``minimum(f16, f32)`` runs in float32 and ``minimum(f16, f16)`` stays float16.
Gradients come back in each input's own dtype.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, cast
import functools

from ._state import MODE_AUTOCAST, state
from .dtypes import as_dtype, bfloat16, float16

F = TypeVar("F", bound=Callable[..., Any])
_MASK = MODE_AUTOCAST | (0xFF << 8)


class autocast:
    """Context manager (and decorator) enabling autocast on this thread."""

    def __init__(self, dtype: Any = float16, enabled: bool = True) -> None:
        d = as_dtype(dtype)
        if d is not float16 and d is not bfloat16:
            raise TypeError("autocast dtype must be pylucid.float16 or pylucid.bfloat16, got %r" % (d,))
        self.dtype = d
        self.enabled = bool(enabled)
        self._prev: list[int] = []

    def __enter__(self) -> "autocast":
        self._prev.append(state.mode & _MASK)
        state.mode &= ~_MASK
        if self.enabled:
            state.mode |= MODE_AUTOCAST | (self.dtype.code << 8)
        return self

    def __exit__(self, *exc: Any) -> None:
        state.mode = (state.mode & ~_MASK) | self._prev.pop()

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.dtype, self.enabled):
                return fn(*args, **kwargs)

        return cast(F, wrapper)


def is_autocast_enabled() -> bool:
    """Whether autocast is on for this thread."""
    return bool(state.mode & MODE_AUTOCAST)
