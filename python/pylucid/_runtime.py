"""The runtime layer under tensor.py: the choice between the C path
(python/csrc) and the cffi fallback, the per-thread call buffers, the release of
dropped tensors' handles, memory lent to the library and the queues that
hand it back, the autograd.Function registry, and the ids of the ops
Tensor's methods call. It knows nothing of Tensor: tensor.py wraps what
these calls return."""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Callable, Optional, Sequence, Tuple

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

_IN = lib.LUCID_META_LEN  # where lucid_op's inputs go in the meta buffer

_tls = threading.local()


def _info() -> Any:
    """A per-thread lucid_tensor_info, reused by every call on the thread."""
    try:
        return _tls.info
    except AttributeError:
        _tls.info = ffi.new("lucid_tensor_info*")
        return _tls.info


# ---- memory lent to the library, and the release queues ----

_borrowed: dict[int, Any] = {}
_tokens = itertools.count(1)
_drain_lock = threading.Lock()
_drain_buf = ffi.new("int64_t[]", 256)
_drain_count = ffi.new("int32_t*")
# Python autograd.Function records (filled by autograd.py). Every live record
# is in `records`, by id; a Function's output tensors own its record (their
# `_fn`), so that Python's collector sees a reference cycle through it
# (docs/autograd.md). `functions` keeps the records the library may still
# need although no output owns them any more, until it reports the graph node
# gone (drain). Without _hot, every record waits there.
records: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
functions: dict[int, Any] = {}


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
    python/csrc's drain_pending, which hands back those whose owner is not a
    NumPy array)."""
    done: list[Any] = []
    lent_in_c: list[int] = []  # tokens of arrays _hot lent: their owners wait in its own table
    try:
        with _drain_lock:
            for tok in tokens or ():
                obj = _borrowed.pop(tok, None)
                if obj is not None:
                    done.append(obj)
            for queue, table in ((lib.LUCID_QUEUE_BUFFERS, _borrowed), (lib.LUCID_QUEUE_FUNCTIONS, functions)):
                while True:
                    rc = lib.lucid_drain(queue, _drain_buf, 256, _drain_count)
                    if rc:
                        raise_status(rc)
                    n = _drain_count[0]
                    for i in range(n):
                        tok = _drain_buf[i]
                        obj = table.pop(tok, None)
                        if obj is not None:
                            done.append(obj)
                        elif table is _borrowed:
                            lent_in_c.append(tok)
                    if n < 256:
                        break
            obj = None
    finally:
        # Outside the lock: a producer's deleter may run arbitrary code (a
        # Releaser's callback, or the destructor of the owner
        # _hot.dlpack_borrow made, as the last reference goes with `done`),
        # and so may the last reference to an array _hot lent (its base's).
        # The tokens popped before an error still go back.
        if lent_in_c and _hot is not None:
            _hot.return_lent(lent_in_c)
    for r in done:
        if type(r) is Releaser:
            r.release()


def borrowed_owners() -> list[Any]:
    """The owners of every buffer lent to the library whose token has not
    come back yet: those in ``_borrowed`` and the arrays python/csrc lent (kept
    in its own table). For tests and diagnostics."""
    with _drain_lock:
        owners = list(_borrowed.values())
    return owners + (_hot.lent_owners() if _hot is not None else [])


def _lend(data: int, code: int, itemsize: int, shape: Sequence[int], strides: Sequence[int], readonly: bool,
          owner: Any) -> Any:
    """Lends memory to the library (lucid_tensor_borrow): element [0,...,0]
    at address data, strides in elements. The library gets the lowest
    address the view touches and the span of bytes it covers; owner stays
    in ``_borrowed`` until the token comes back (drain). Returns the
    thread's lucid_tensor_info, describing the new tensor."""
    base, offset, span = data, 0, 0
    if all(shape):
        lo = hi = 0
        for n, s in zip(shape, strides):
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
        base, offset, span = data + lo * itemsize, -lo, (hi - lo + 1) * itemsize
    token = next(_tokens)
    _borrowed[token] = owner
    info = _info()
    rc = lib.lucid_tensor_borrow(ffi.cast("void*", base), span, code, len(shape), shape, strides, offset,
                                 1 if readonly else 0, token, info)
    if rc:
        _borrowed.pop(token, None)
        raise_status(rc)
    return info


def _meta_buffer() -> Tuple[Any, memoryview, Any]:
    """The calling thread's meta array (lucid.h, LUCID_META_LEN) and an int64
    memoryview of it: indexing the view is cheaper than reading cffi fields.
    The third value points at two more, where lucid_op's inputs go
    (``mv[_IN]``, ``mv[_IN + 1]``)."""
    try:
        return _tls.meta  # type: ignore[no-any-return]
    except AttributeError:
        buf = ffi.new("int64_t[]", _IN + 2)
        _tls.meta = (buf, memoryview(ffi.buffer(buf)).cast("q"), buf + _IN)
        return _tls.meta  # type: ignore[no-any-return]
