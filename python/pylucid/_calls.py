"""The native call path under tensor.py: every call of the library that makes
tensors, on Tensors (the operand conversions are tensor.py's).

With the C extension (API mode) each is one C call that wraps its results in
their Python objects before anything can raise (python/csrc/call.c): a
KeyboardInterrupt between two bytecodes, or a finalizer that the collector
runs in the middle, can neither leak a result nor overwrite another call's
buffers. Without it (ABI mode, PYLUCID_LIBRARY) the same calls go through
cffi with buffers of their own per call, and own their results as soon as
Python code can (a development path: it cannot close the gap between the
native call's return and its first bytecode, where a Ctrl-C could still
leak a result).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _lib
from ._forward import forward_levels, fw, tangent_of
from ._lib import ffi, lib, raise_status
from ._runtime import _borrowed, _hot, _tokens, drain
from ._state import MODE_GRAD, state
from .dtypes import BY_CODE, from_numpy_dtype

if TYPE_CHECKING:
    from .tensor import Tensor

_LEN = lib.LUCID_META_LEN
_META_RG = lib.LUCID_META_REQUIRES_GRAD
_META_PENDING = lib.LUCID_META_PENDING
_INTERRUPTIBLE = lib.LUCID_MODE_INTERRUPTIBLE
_PENDING = lib.LUCID_PENDING
_JOB_SLICE_MS = 25  # as call.c's JOB_SLICE_MS (python/csrc)
_NULL = ffi.NULL
_lucid_op_n = lib.lucid_op_n
_lucid_job_wait = lib.lucid_job_wait

_tensor: Any = None  # pylucid.Tensor (register)
_new_tensor = object.__new__


def register(tensor_class: Any) -> None:
    """tensor.py's Tensor class, which the ABI path instantiates."""
    global _tensor
    _tensor = tensor_class


# ---- a Ctrl-C that landed in a finalizer ----

_interrupted = False


def note_interrupt() -> None:
    """A KeyboardInterrupt landed in a finalizer, where exceptions are only
    printed: the next op call raises it."""
    global _interrupted
    _interrupted = True


def reraise_interrupt() -> None:
    global _interrupted
    if _interrupted:
        _interrupted = False
        raise KeyboardInterrupt


# ---- wrapping what a call described (ABI mode; python/csrc does it in C) ----


def _adopt(h: int) -> "Tensor":
    """A new Tensor owning handle h: when this raises (a KeyboardInterrupt
    before the handle is stored), h is released, so either way nothing is
    left unowned. The caller fills in the other fields."""
    t = None
    try:
        t = _new_tensor(_tensor)
        t._h = h
    except BaseException:
        if t is None or t._h != h:
            _release_unowned([h])
        raise
    return t  # type: ignore[no-any-return]


def wrap_meta(mv: memoryview) -> "Tensor":
    """Wraps the result a *_meta call described (taking over its handle)."""
    t = _adopt(mv[0])
    m = mv[1]
    nd = (m >> 8) & 0xFF
    t._shape = () if nd == 0 else (mv[2],) if nd == 1 else tuple(mv[2: 2 + nd])
    t._dtype = BY_CODE[m & 0xFF]
    t._rg = m & _META_RG != 0
    if m & _META_PENDING:
        drain()
    return t


def wrap_info(info: Any) -> "Tensor":
    """Wraps (and takes ownership of) the tensor a lucid_tensor_info describes."""
    t = _adopt(info.handle)
    t._dtype = BY_CODE[info.dtype]
    nd = info.ndim
    t._shape = tuple(ffi.unpack(info.shape, nd)) if nd else ()
    t._rg = bool(info.requires_grad)
    if info.pending:
        drain()
    return t


def _info_call(call: Callable[[Any], int]) -> "Tensor":
    """call(info) into a lucid_tensor_info of its own, and its tensor."""
    info = ffi.new("lucid_tensor_info*")
    rc = call(info)
    if rc:
        raise_status(rc)
    return wrap_info(info)


def _release_unowned(handles: Sequence[int]) -> None:
    for h in handles:
        if h and not _lib._forked:
            lib.lucid_release(h)


def _owned(meta: Any, nout: int, given: Optional[Sequence[Any]]) -> Any:
    """The outputs a successful lucid_op_n described (ABI mode): the given
    out= objects where there were some, else new Tensors; the handles not
    yet wrapped are released if anything raises (the one being wrapped is
    owned or released by _adopt)."""
    mv = memoryview(ffi.buffer(meta)).cast("q")
    res: List[Any] = []
    try:
        for i in range(nout):
            if given is not None and given[i] is not None:
                res.append(given[i])
            else:
                res.append(wrap_meta(mv[i * _LEN:(i + 1) * _LEN]))
    except BaseException:
        _release_unowned([meta[j * _LEN] for j in range(len(res) + 1, nout) if given is None or given[j] is None])
        raise
    return res[0] if nout == 1 else tuple(res)


# ---- calls that make one tensor ----

detach: Callable[["Tensor"], "Tensor"]
tensor_new: Callable[[int, Sequence[int]], "Tensor"]
scalar: Callable[[Any], "Tensor"]
scalar_int: Callable[[int, int], "Tensor"]
borrow: Callable[..., "Tensor"]
view: Callable[["Tensor"], Tuple["Tensor", int, Tuple[int, ...], bool]]
from_handle: Callable[[int], "Tensor"]

if _hot is not None:
    detach, tensor_new, scalar, scalar_int = _hot.detach, _hot.tensor_new, _hot.scalar, _hot.scalar_int
    borrow, view = _hot.borrow, _hot.view
else:
    def detach(t: "Tensor") -> "Tensor":
        """A tensor sharing t's memory outside any graph (lucid_detach)."""
        return _info_call(lambda info: lib.lucid_detach(t._h, info))

    def tensor_new(code: int, dims: Sequence[int]) -> "Tensor":
        """A new zero-filled tensor (lucid_tensor_new)."""
        return _info_call(lambda info: lib.lucid_tensor_new(code, len(dims), list(dims), info))

    def scalar(x: Any) -> "Tensor":
        """The weak 0-d tensor of a Python bool, int (int64) or float."""
        if isinstance(x, bool):
            return _info_call(lambda info: lib.lucid_scalar(lib.LUCID_BOOL, 0.0, 1 if x else 0, info))
        if isinstance(x, int):
            return _info_call(lambda info: lib.lucid_scalar_int(x, 0, info))
        return _info_call(lambda info: lib.lucid_scalar(lib.LUCID_FLOAT64, x, 0, info))

    def scalar_int(m: int, exp: int) -> "Tensor":
        """The weak 0-d tensor of the Python int m * 2**exp."""
        return _info_call(lambda info: lib.lucid_scalar_int(m, exp, info))

    def borrow(base: int, nbytes: int, code: int, shape: Sequence[int], strides: Sequence[int], offset: int,
               readonly: bool, token: int) -> "Tensor":
        """A tensor over lent memory (lucid_tensor_borrow)."""
        return _info_call(lambda info: lib.lucid_tensor_borrow(ffi.cast("void*", base), nbytes, code, len(shape),
                                                               list(shape), list(strides), offset,
                                                               1 if readonly else 0, token, info))

    def view(t: "Tensor") -> Tuple["Tensor", int, Tuple[int, ...], bool]:
        """(v, data, strides, readonly): v a tensor sharing t's memory
        outside any graph, which keeps that memory (lucid_tensor_view)."""
        info = ffi.new("lucid_tensor_info*")
        rc = lib.lucid_tensor_view(t._h, info)
        if rc:
            raise_status(rc)
        v = wrap_info(info)
        nd = info.ndim
        return v, int(ffi.cast("uintptr_t", info.data)), tuple(ffi.unpack(info.strides, nd)) if nd else (), \
            bool(info.readonly)


def _from_handle(h: int) -> "Tensor":
    """Wraps (and takes ownership of) a handle the library returned outside
    a lucid_tensor_info (ABI mode; released if that fails)."""
    info = ffi.new("lucid_tensor_info*")
    try:
        rc = lib.lucid_tensor_info_get(h, info)
        if rc:
            raise_status(rc)
    except BaseException:
        _release_unowned([h])
        raise
    return wrap_info(info)  # owns h (or has released it) whatever happens


from_handle = _from_handle


# ---- out= NumPy arrays ----

# Descriptors (lucid_out) of NumPy arrays passed as out=, by id(array): a
# loop that writes into the same array pays for one descriptor. An entry is
# used only while its array is alive and unchanged in shape, strides, dtype
# and writeability. The C path copies what it reads from one.
_out_descs: Dict[int, Tuple[Any, Tuple[int, ...], Tuple[int, ...], Any, Any]] = {}


def out_desc(o: np.ndarray) -> Any:
    """A lucid_out describing a writable NumPy array (lent for one call)."""
    e = _out_descs.get(id(o))
    if e is not None and e[0]() is o and e[1] == o.shape and e[2] == o.strides and e[3] == o.dtype:
        if not o.flags.writeable:
            raise ValueError("out is a read-only array")
        return e[4]
    if not o.flags.writeable:
        raise ValueError("out is a read-only array")
    if o.dtype.byteorder not in ("=", "|") or any(st % o.itemsize for st in o.strides):
        raise ValueError("out must be an array in native byte order with strides that are multiples of its item "
                         "size, got dtype %s with strides %s" % (o.dtype, o.strides))
    if o.ndim > lib.LUCID_MAX_DIMS:
        raise ValueError("arrays with more than %d dims are not supported" % lib.LUCID_MAX_DIMS)
    dt = from_numpy_dtype(o.dtype)
    d = ffi.new("lucid_out *")
    shape = ffi.new("int64_t[]", list(o.shape) or [0])
    strides = ffi.new("int64_t[]", [st // o.itemsize for st in o.strides] or [0])
    d.handle = 0
    d.data = ffi.cast("void *", o.__array_interface__["data"][0])
    d.dtype = dt.code
    d.ndim = o.ndim
    d.shape = shape
    d.strides = strides
    if len(_out_descs) >= 64:
        _out_descs.clear()
    _out_descs[id(o)] = (weakref.ref(o), o.shape, o.strides, o.dtype, (d, shape, strides))
    return (d, shape, strides)


def out_desc_address(o: np.ndarray) -> int:
    """out_desc(o)'s address, for the C path (which copies it at once)."""
    return int(ffi.cast("intptr_t", out_desc(o)[0]))


# ---- op calls ----


def _call_interruptible(call: Callable[[], int], buf: Any) -> int:
    """call() (lucid_op_n in LUCID_MODE_INTERRUPTIBLE, meta in buf), then the
    wait for the job it may start (_await_job). A Ctrl-C that lands right
    after the call returned, before its status reached Python, cancels that
    job too: buf[1] is set to -1, which a call that starts a job leaves as it
    is (it writes only the job's id, in buf[0]), while a result overwrites it."""
    buf[0], buf[1] = 0, -1
    rc: Optional[int] = None
    try:
        rc = call()
        if rc == _PENDING:
            rc = _await_job(buf)
        return rc
    except BaseException:
        if (rc is None or rc == _PENDING) and buf[1] == -1 and buf[0] != 0:
            lib.lucid_job_cancel(buf[0])  # LUCID_EVALUE, harmless, if _await_job cancelled it
        raise


def _await_job(buf: Any) -> int:
    """Waits for the job a call left in buf[0] (a long reduction: lucid.h,
    LUCID_MODE_INTERRUPTIBLE) in short slices. Each wait releases the GIL, and
    between waits the interpreter runs signal handlers, so Ctrl-C raises
    KeyboardInterrupt here: the job is then cancelled (its work has ended when
    lucid_job_cancel returns) and the exception goes on. Returns the call's
    status; on 0, buf holds its result."""
    job = buf[0]
    try:
        while True:
            rc: int = _lucid_job_wait(job, _JOB_SLICE_MS, buf)
            if rc != _PENDING:
                return rc
    except BaseException:
        lib.lucid_job_cancel(job)  # LUCID_EVALUE, harmless, if it ended just before
        raise


def _abi_call(op: int, ins: Sequence[Optional["Tensor"]], attrs: Optional[Sequence[int]], out: Any, nout: int,
              nograd: bool) -> Any:
    """_hot.call through cffi (ABI mode)."""
    in_arr = ffi.new("int64_t[]", [0 if t is None else t._h for t in ins] or [0])
    given: Optional[Sequence[Any]] = None
    outs_arr = _NULL
    keep: List[Any] = []
    if out is not None:
        if nout == 1:
            given = (out,)
        elif not isinstance(out, (tuple, list)) or len(out) != nout:
            raise TypeError("out must be a tuple of %d tensors or arrays" % nout)
        else:
            given = tuple(out)
        outs_arr = ffi.new("lucid_out[]", nout)
        for i, o in enumerate(given):
            if o is None:
                outs_arr[i].dtype = -1
            elif isinstance(o, _tensor):
                outs_arr[i].handle = o._h
            elif isinstance(o, np.ndarray):
                d = out_desc(o)
                keep.append(d)
                outs_arr[i] = d[0][0]
            else:
                raise TypeError("out must be a pylucid.Tensor or a numpy.ndarray, got %s" % type(o).__name__)
    meta = ffi.new("int64_t[]", nout * _LEN)
    attrs = list(attrs) if attrs else []
    attrs_arr = ffi.new("int64_t[]", attrs) if attrs else _NULL
    n_given = nout if given is not None else 0
    mode = state.mode & ~MODE_GRAD if nograd else state.mode
    rc = _call_interruptible(  # a long reduction runs as a job: Ctrl-C stops it (lucid.h)
        lambda: _lucid_op_n(op, in_arr, len(ins), attrs_arr, len(attrs), outs_arr, n_given, mode | _INTERRUPTIBLE,
                            meta), meta)
    if rc:
        raise_status(rc)
    return _owned(meta, nout, given)


native_call: Callable[..., Any] = _hot.call if _hot is not None else _abi_call


def call1(op: int, ins: Tuple[Optional["Tensor"], ...], attrs: Optional[Sequence[int]] = None, out: Any = None,
          nograd: bool = False) -> Any:
    """The one output of op on ins (Tensors; None: an absent optional input)
    with attrs: forward mode's tangents pushed when a level is open, out=
    written and returned; nograd records no graph whatever the mode."""
    if _lib._forked or _interrupted or forward_levels[0]:
        r = _entry(op, ins, attrs or (), out, 1)
        if r is not None:
            return r[0]
    return native_call(op, ins, attrs, out, 1, nograd)


def call_op(op: int, ins: Sequence[Optional["Tensor"]], attrs: Sequence[int], out: Any, nout: int) -> List[Any]:
    """lucid_op_n: op on ins (None: an absent optional input) with attrs; out
    is None, or the out= argument (a tuple of nout entries when nout > 1).
    Returns the outputs: where out gave one, that very object."""
    if nout == 1:
        return [call1(op, tuple(ins), attrs, out)]
    r = _entry(op, ins, attrs, out, nout)
    if r is not None:
        return r
    return list(native_call(op, tuple(ins), attrs, out, nout, False))


def _entry(op: int, ins: Sequence[Optional["Tensor"]], attrs: Sequence[int], out: Any, nout: int) -> Optional[List[Any]]:
    """What every op call checks first: a forked child raises, a pending
    interrupt is raised, and in an open forward-mode level the op runs with
    its tangents (the outputs returned; out= with a tangent is refused).
    None: the plain native call follows."""
    if _lib._forked:
        _lib.check_fork()
    if _interrupted:
        reraise_interrupt()
    if forward_levels[0] and fw.level is not None:
        if out is None:
            return jvp_op(op, ins, attrs, nout)
        _refuse_out_with_tangents(op, ins, out)
    return None


def _refuse_out_with_tangents(op: int, ins: Sequence[Optional["Tensor"]], out: Any) -> None:
    """out= records no tangent: with an input (or out) that has one in the
    open forward-mode level, the written result's tangent would be silently
    wrong (zero, or out's stale one), so the call is refused, as out= is in
    grad mode with an input that requires grad (docs/semantics.md)."""
    s = _lib.schema_table()[op]
    name = s["name"]
    if s["signature"] == "arg":  # int64 positions: no tangent to lose (as they record no graph)
        return
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if any(tangent_of(t) is not None for t in tuple(ins) + outs):
        raise RuntimeError("%s(): an out= argument does not support forward-mode differentiation, but an argument "
                           "has a tangent (autograd.jvp); call it without out=" % name)


def _abi_call_jvp(op: int, ins: Sequence[Optional["Tensor"]], ts: Sequence[Optional["Tensor"]],
                  attrs: Sequence[int], nout: int) -> Tuple[Tuple[Any, ...], Tuple[Any, ...]]:
    """_hot.call_jvp through cffi (ABI mode)."""
    in_arr = ffi.new("int64_t[]", [0 if t is None else t._h for t in ins])
    t_arr = ffi.new("int64_t[]", [0 if t is None else t._h for t in ts])
    meta = ffi.new("int64_t[]", 2 * nout * _LEN)
    attrs_arr = ffi.new("int64_t[]", list(attrs)) if attrs else _NULL
    rc = lib.lucid_op_jvp(op, in_arr, t_arr, len(ins), attrs_arr, len(attrs), state.mode, meta)
    if rc:
        raise_status(rc)
    mv = memoryview(ffi.buffer(meta)).cast("q")
    blocks = [mv[i * _LEN:(i + 1) * _LEN] for i in range(2 * nout)]
    res: List[Any] = []
    try:
        for b in blocks:
            res.append(wrap_meta(b) if b[0] else None)
    except BaseException:
        _release_unowned([b[0] for b in blocks[len(res) + 1:]])
        raise
    return tuple(res[:nout]), tuple(res[nout:])


native_call_jvp: Callable[..., Tuple[Tuple[Any, ...], Tuple[Any, ...]]] = \
    _hot.call_jvp if _hot is not None else _abi_call_jvp


def jvp_op(op: int, ins: Sequence[Optional["Tensor"]], attrs: Sequence[int], nout: int) -> Optional[List[Any]]:
    """Runs op through lucid_op_jvp when an input has a tangent, recording the
    outputs' tangents in the level; None when no input has one."""
    ts = [tangent_of(t) for t in ins]
    if all(t is None for t in ts):
        return None
    outs, touts = native_call_jvp(op, tuple(ins), tuple(ts), tuple(attrs), nout)
    lvl = fw.level
    assert lvl is not None
    for o, t in zip(outs, touts):
        if t is not None:
            lvl[id(o)] = (o, t)
    return list(outs)


# ---- memory lent to the library ----


def lend(data: int, code: int, itemsize: int, shape: Sequence[int], strides: Sequence[int], readonly: bool,
         owner: Any) -> "Tensor":
    """A tensor over memory the caller lends (lucid_tensor_borrow): element
    [0,...,0] at address data, strides in elements. The library gets the
    lowest address the view touches and the span of bytes it covers; owner
    stays in ``_runtime._borrowed`` until the token comes back (drain)."""
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
    try:
        return borrow(base, span, code, tuple(shape), tuple(strides), offset, bool(readonly), token)
    except BaseException:
        _borrowed.pop(token, None)
        raise
