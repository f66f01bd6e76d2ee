"""Per-thread call state: grad mode and autocast, encoded as the `mode` flags
every op call passes to the native library."""

from __future__ import annotations

import threading

from ._lib import lib

MODE_GRAD: int = lib.LUCID_MODE_GRAD
MODE_AUTOCAST: int = lib.LUCID_MODE_AUTOCAST


class _State(threading.local):
    def __init__(self) -> None:
        self.mode = MODE_GRAD


state = _State()


def is_grad_enabled() -> bool:
    """Whether ops record the autograd graph on this thread."""
    return bool(state.mode & MODE_GRAD)


def set_grad_enabled(enabled: bool) -> None:
    """Turns graph recording on or off for this thread."""
    if enabled:
        state.mode |= MODE_GRAD
    else:
        state.mode &= ~MODE_GRAD
