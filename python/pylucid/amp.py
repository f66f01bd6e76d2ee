"""Automatic mixed precision: ``with pylucid.autocast(dtype=pylucid.float16):``.

Autocast is thread-local and nestable; ``autocast(enabled=False)`` switches it
off inside an enclosing block. Inside, each op casts its floating inputs by the
AMP policy of its schema (docs/semantics.md, ``op.schema.amp_policy``):

- ``PROMOTE`` (``minimum``, ``maximum``, ``add``, ``sub``, ``mul``, ``div``,
  ``neg``, ``sum``, ``mean``): floating inputs are cast to the widest floating
  dtype among them, so ``minimum(f16, f32)`` runs in float32 and
  ``minimum(f16, f16)`` stays float16; float16 with bfloat16 gives float32.
  Autocast never produces float64: it stays only when an input is float64.
  Python scalars stay weak (``minimum(t_f16, 2.0)`` is float16).
- ``LOWER_PRECISION``: floating inputs other than float64 are cast to the
  autocast dtype.
- ``FP32``: floating inputs other than float64 are cast to float32.

Gradients come back in each input's own dtype. Outside autocast the policies
have no effect.
"""

from __future__ import annotations

import functools
import threading
from types import TracebackType
from typing import Any, Callable, Optional, Type, TypeVar, cast

from ._state import MODE_AUTOCAST, state
from .dtypes import BY_CODE, DTypeLike, as_dtype, bfloat16, dtype, float16

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype"]

F = TypeVar("F", bound=Callable[..., Any])
_MASK = MODE_AUTOCAST | (0xFF << 8)


class autocast:
    """Context manager (and decorator) that turns autocast on (or, with
    ``enabled=False``, off) for the current thread.

    ``dtype`` is the lower-precision dtype: ``pylucid.float16`` (default) or
    ``pylucid.bfloat16`` (names such as ``"bfloat16"`` are accepted too).
    Blocks nest; leaving one restores the state it found, also on errors.
    """

    def __init__(self, dtype: DTypeLike = float16, enabled: bool = True) -> None:
        d = as_dtype(dtype)
        if d is not float16 and d is not bfloat16:
            raise TypeError("autocast dtype must be pylucid.float16 or pylucid.bfloat16, got %r" % (d,))
        self.dtype = d
        self.enabled = bool(enabled)
        self._tls = threading.local()  # saved states, per thread: one object may be entered from many

    def __enter__(self) -> "autocast":
        stack: Optional[list[int]] = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        stack.append(state.mode & _MASK)
        mode = state.mode & ~_MASK
        if self.enabled:
            mode |= MODE_AUTOCAST | (self.dtype.code << 8)
        state.mode = mode
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        state.mode = (state.mode & ~_MASK) | self._tls.stack.pop()

    def __call__(self, fn: F) -> F:
        """Use as a decorator: ``fn`` runs inside this autocast setting."""

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.dtype, self.enabled):
                return fn(*args, **kwargs)

        return cast(F, wrapper)

    def __repr__(self) -> str:
        return "pylucid.autocast(dtype=%r, enabled=%r)" % (self.dtype, self.enabled)


def is_autocast_enabled() -> bool:
    """Whether autocast is on for this thread."""
    return bool(state.mode & MODE_AUTOCAST)


def get_autocast_dtype() -> Optional[dtype]:
    """The autocast dtype in force on this thread, or None when autocast is off."""
    if not state.mode & MODE_AUTOCAST:
        return None
    return BY_CODE[(state.mode >> 8) & 0xFF]
