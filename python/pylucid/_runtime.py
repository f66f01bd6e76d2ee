"""The runtime layer under the call path: the choice between the C path
(python/csrc) and the cffi fallback, the release of dropped tensors'
handles, memory lent to the library and the queues that hand it back, the
autograd.Function registry, and the ids of the ops Tensor's methods call.

Every function here may run inside a finalizer that the collector runs in
the middle of another pylucid call (docs/autograd.md): none holds a lock
while Python code can run, and none keeps scratch state that a nested call
could overwrite.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Callable, List, Optional, Sequence, Tuple

from . import _lib
from ._lib import ffi, lib, raise_status

# The per-call hot path in C (python/csrc): Tensor's fields and handle release,
# and the common op calls. It links the package's own library, so it is used
# only in API mode (not with PYLUCID_LIBRARY pointing elsewhere).
_hot: Any = None
if _lib.MODE == "api":
    try:
        from . import _hot  # type: ignore[attr-defined,no-redef]
    except ImportError:  # a development tree built without the C extension
        _hot = None

# The lucid_op ids of the ops Tensor's methods and operators call (the
# library exports every op's id with its schema; pylucid.ops builds the rest).
ADD, SUB, MUL, DIV = (_lib.op_id(n) for n in ("add", "sub", "mul", "div"))
MINIMUM, MAXIMUM, SUM, MEAN = (_lib.op_id(n) for n in ("minimum", "maximum", "sum", "mean"))
NEG, CAST, COPY = (_lib.op_id(n) for n in ("neg", "cast", "copy"))

# ---- memory lent to the library, and the release queues ----

_borrowed: dict[int, Any] = {}
_tokens = itertools.count(1)
# Buffers for lucid_drain, one per drain in progress (a drain may run inside
# another, from a finalizer, or on another thread): taken from and given
# back to this list, whose pop and append are atomic.
_drain_bufs: List[Tuple[Any, Any]] = []
# Python autograd.Function records (filled by autograd.py). Every live record
# is in `records`, by id; a Function's output tensors own its record (their
# `_fn`), so that Python's collector sees a reference cycle through it
# (docs/autograd.md). `functions` keeps the records the library may still
# need although no output owns them any more, until it reports the graph node
# gone (drain). Without _hot, every record waits there.
records: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
functions: dict[int, Any] = {}
_QUEUES = ((lib.LUCID_QUEUE_BUFFERS, _borrowed), (lib.LUCID_QUEUE_FUNCTIONS, functions))


class Releaser:
    """The owner of a borrowed buffer that must be told when the library is
    done with it (a DLPack producer's deleter): put one in ``_borrowed``
    under the token and :func:`drain` calls ``fn`` exactly once, after the
    token comes back."""

    __slots__ = ("_fn", "__weakref__")

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn: Optional[Callable[[], None]] = fn

    def release(self) -> None:
        """Calls the callback unless it already ran."""
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


# Handles of small, graph-free tensors waiting to be released together.
_dead: list[int] = []
_dead_lock = threading.Lock()


def flush_released() -> None:
    """Releases the batched handles of dropped small tensors."""
    if _hot is not None:
        _hot.flush()
    if not _dead or not _dead_lock.acquire(blocking=False):
        return  # nothing to do, or a flush is already under way (perhaps re-entered from __del__)
    try:
        n = len(_dead)
        batch = _dead[:n]
        del _dead[:n]  # appends from other threads land after the prefix
        rc = lib.lucid_release_many(batch, n)
    finally:
        _dead_lock.release()
    if rc:
        raise_status(rc)


def drain(tokens: Optional[Sequence[int]] = None) -> None:
    """Forgets buffers and functions the native library no longer uses.
    tokens: buffer tokens already popped from the library's queue (by
    ndarray.c's drain_pending, which hands back those whose owner is not a
    NumPy array).

    No lock is held: the dicts' pops are atomic, the library's queue is its
    own, and the buffer the queue is read into is this call's alone, so a
    drain that a finalizer starts in the middle of this one (the collector
    may run at any allocation) drains on beside it instead of waiting for
    it (docs/autograd.md)."""
    done: list[Any] = []
    lent_in_c: list[int] = []  # tokens of arrays _hot lent: their owners wait in its own table
    try:
        buf, count = _drain_bufs.pop()
    except IndexError:
        buf, count = ffi.new("int64_t[]", 256), ffi.new("int32_t*")
    try:
        for tok in tokens or ():
            obj = _borrowed.pop(tok, None)
            if obj is not None:
                done.append(obj)
        for queue, table in _QUEUES:
            while True:
                rc = lib.lucid_drain(queue, buf, 256, count)
                if rc:
                    raise_status(rc)
                n = count[0]
                for tok in ffi.unpack(buf, n):
                    obj = table.pop(tok, None)
                    if obj is not None:
                        done.append(obj)
                    elif table is _borrowed:
                        lent_in_c.append(tok)
                if n < 256:
                    break
        obj = None
    finally:
        _drain_bufs.append((buf, count))
        # A producer's deleter may run arbitrary code (a Releaser's callback,
        # or the destructor of the owner _hot.dlpack_borrow made, as the last
        # reference goes with `done`), and so may the last reference to an
        # array _hot lent (its base's). The tokens popped before an error
        # still go back.
        if lent_in_c and _hot is not None:
            _hot.return_lent(lent_in_c)
    for r in done:
        if type(r) is Releaser:
            r.release()


def borrowed_owners() -> list[Any]:
    """The owners of every buffer lent to the library whose token has not
    come back yet: those in ``_borrowed`` and the arrays ndarray.c lent (kept
    in its own table). For tests and diagnostics."""
    owners = list(_borrowed.values())
    return owners + (_hot.lent_owners() if _hot is not None else [])
