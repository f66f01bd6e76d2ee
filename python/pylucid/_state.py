"""Per-thread call state: grad mode and autocast, encoded as the `mode` flags
every op call passes to the native library."""

from __future__ import annotations

import threading

from ._lib import lib
from ._runtime import _hot

MODE_GRAD: int = lib.LUCID_MODE_GRAD
MODE_AUTOCAST: int = lib.LUCID_MODE_AUTOCAST


_set_mode = _hot.set_mode if _hot is not None else None


class _State(threading.local):
    """The calling thread's mode. Each change is also handed to the C path
    (_hot.set_mode), which then reads the mode without a Python lookup."""

    def __init__(self) -> None:
        self.mode = MODE_GRAD

    @property
    def mode(self) -> int:
        return self._mode

    @mode.setter
    def mode(self, m: int) -> None:
        self._mode = m
        if _set_mode is not None:
            _set_mode(m)


state: _State = _State()


def is_grad_enabled() -> bool:
    """Whether ops record the autograd graph on this thread."""
    return bool(state.mode & MODE_GRAD)


def set_grad_enabled(enabled: bool) -> None:
    """Turns graph recording on or off for this thread."""
    if enabled:
        state.mode |= MODE_GRAD
    else:
        state.mode &= ~MODE_GRAD
