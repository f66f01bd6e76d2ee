"""DLPack: zero-copy exchange with NumPy, PyTorch, JAX and every library that
speaks the Python array API's ``__dlpack__`` protocol.

Export: ``Tensor.__dlpack__`` asks the native library for a managed tensor
(``lucid_dlpack_export``: C memory holding its own reference to the tensor)
and wraps it in a PyCapsule named ``"dltensor_versioned"`` (DLPack 1.0,
``DLManagedTensorVersioned``) when the consumer passes ``max_version >= (1, 0)``,
else ``"dltensor"`` (the legacy ``DLManagedTensor``). A consumer renames the
capsule to ``"used_..."`` and calls the deleter when it is done; a capsule that
is never consumed calls the deleter itself when it is garbage collected. Either
way the deleter runs exactly once.

Import: :func:`from_dlpack` takes the producer's capsule, renames it (it is
then ours), and lends the memory to the library with ``lucid_tensor_borrow``
(any strides, ``byte_offset`` honoured). The producer's deleter, which keeps
the producer's memory alive until it runs, is called exactly once, when the
library hands the borrow token back (``tensor.drain``).

Only CPU memory is exchanged; other devices raise ``BufferError``.
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Tuple, Union

import numpy as np

from . import _lib
from ._lib import ffi, lib
from .dtypes import ALL, bfloat16, bool_, dtype, float16, float32, float64, int8, int16, int32, int64, uint8
from ._runtime import Releaser, _borrowed, _hot, _tokens
from .tensor import Tensor, _copy, borrow, from_numpy
from .tensor import late as _tensor_late

__all__ = ["from_dlpack", "to_dlpack", "DLPACK_VERSION", "KDL_CPU"]

#: The DLPack version pylucid produces (and the newest major it reads).
DLPACK_VERSION: Tuple[int, int] = (lib.LUCID_DLPACK_MAJOR, lib.LUCID_DLPACK_MINOR)
#: DLDeviceType of host memory.
KDL_CPU: int = lib.LUCID_DL_CPU

_FLAG_READ_ONLY = lib.LUCID_DL_FLAG_READ_ONLY

# DLPack (code, bits) of each dtype, and back.
_KDL_INT, _KDL_UINT, _KDL_FLOAT = lib.LUCID_DL_INT, lib.LUCID_DL_UINT, lib.LUCID_DL_FLOAT
_KDL_BFLOAT, _KDL_BOOL = lib.LUCID_DL_BFLOAT, lib.LUCID_DL_BOOL
_FROM_DL: dict[Tuple[int, int], dtype] = {
    (_KDL_BOOL, 8): bool_,
    (_KDL_UINT, 8): uint8,
    (_KDL_INT, 8): int8,
    (_KDL_INT, 16): int16,
    (_KDL_INT, 32): int32,
    (_KDL_INT, 64): int64,
    (_KDL_FLOAT, 16): float16,
    (_KDL_BFLOAT, 16): bfloat16,
    (_KDL_FLOAT, 32): float32,
    (_KDL_FLOAT, 64): float64,
}
_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque handle", 4: "bfloat", 5: "complex", 6: "bool"}
_DEVICE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan", 8: "kDLMetal",
                 10: "kDLROCM", 13: "kDLCUDAManaged", 14: "kDLOneAPI"}


# ---- capsules: in the C extension (python/csrc) ----


def _need_hot(what: str) -> Any:
    """The C extension, which makes and takes DLPack capsules; without it
    (ABI mode: PYLUCID_LIBRARY set) DLPack is unavailable."""
    if _hot is None:
        raise RuntimeError("pylucid: DLPack %s needs pylucid's compiled extension (_hot), which is not loaded "
                           "(PYLUCID_LIBRARY is set, or the build is incomplete); use Tensor.numpy() and "
                           "pylucid.from_numpy instead, or unset PYLUCID_LIBRARY" % what)
    return _hot


def _call_deleter(ptr: int, versioned: bool) -> None:
    """Calls the deleter of the managed tensor at ptr (it frees the struct)."""
    m = ffi.cast("DLManagedTensorVersioned *" if versioned else "DLManagedTensor *", ptr)
    if m.deleter != ffi.NULL:
        m.deleter(m)


def _is_capsule(x: Any) -> bool:
    return type(x).__name__ == "PyCapsule"


# ---- export ----


def to_dlpack(t: Tensor, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
              dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
    """A DLPack capsule sharing ``t``'s memory: ``Tensor.__dlpack__``.

    ``max_version``: the newest DLPack version the consumer reads; with a
    major version of 1 or more the capsule is ``"dltensor_versioned"``
    (read-only memory is flagged), else the legacy ``"dltensor"``.
    ``dl_device``: must be the CPU, ``(1, 0)``, when given. ``copy=True``
    exports a private copy (flagged as copied); ``False`` and ``None`` never
    copy. ``stream`` must be None: the CPU has no streams.

    Raises ``BufferError`` when the export is impossible (another device, a
    stream, read-only memory for a legacy consumer) and ``RuntimeError`` for a
    tensor that requires grad (use ``t.detach()``).
    """
    _lib.check_fork()
    hot = _need_hot("export")
    if stream is not None:
        raise BufferError("pylucid tensors live on the CPU, which has no streams: stream must be None, got %r"
                          % (stream,))
    if dl_device is not None and (int(dl_device[0]), int(dl_device[1])) != (KDL_CPU, 0):
        raise BufferError("pylucid tensors live on the CPU (device (1, 0)); cannot export to device %r"
                          % (tuple(dl_device),))
    if t.requires_grad:
        raise RuntimeError("Can't export a Tensor that requires grad with DLPack. Use tensor.detach() first.")
    versioned = max_version is not None and int(max_version[0]) >= 1
    src = _copy(t) if copy else t
    # One C call: the managed tensor is owned by its capsule before anything
    # can raise (errors: BufferError with the library's message).
    return hot.dlpack_export(src, versioned, bool(copy))


def _export_versioned(t: Tensor) -> Any:
    """``to_dlpack(t, max_version=DLPACK_VERSION)`` for a bridge's own
    results (CPU, not requiring grad, C extension loaded): the export
    without the argument checks."""
    if _hot is None:
        return to_dlpack(t, max_version=DLPACK_VERSION)
    return _hot.dlpack_export(t, True, False)


# ---- import ----


def _dtype_of(code: int, bits: int, lanes: int) -> dtype:
    found = _FROM_DL.get((code, bits))
    if found is None or lanes != 1:
        kind = "%s%d" % (_CODE_NAMES.get(code, "code %d " % code), bits)
        if lanes != 1:
            kind += "x%d" % lanes
        raise TypeError("pylucid.from_dlpack: DLPack dtype %s is not supported; supported: %s"
                        % (kind, ", ".join(d.name for d in ALL)))
    return found


def _device_name(device_type: int) -> str:
    return _DEVICE_NAMES.get(device_type, "device type %d" % device_type)


def _check_device(device_type: int, device_id: int) -> None:
    if device_type != KDL_CPU:
        raise BufferError(
            "pylucid.from_dlpack: only CPU memory can be shared, but the tensor is on %s (%d, %d); "
            "move it to the CPU first (e.g. x.cpu() in PyTorch, jax.device_put(x, jax.devices('cpu')[0]))"
            % (_device_name(device_type), device_type, device_id)
        )


def _borrow(dl: Any, readonly: bool, owner: Releaser) -> Tensor:
    """Lends the DLTensor's memory to the library; owner is released when the
    library hands the token back."""
    _check_device(int(dl.device.device_type), int(dl.device.device_id))
    dt = _dtype_of(int(dl.dtype.code), int(dl.dtype.bits), int(dl.dtype.lanes))
    nd = int(dl.ndim)
    if not 0 <= nd <= lib.LUCID_MAX_DIMS:
        raise ValueError("pylucid.from_dlpack: %d dims; at most %d are supported" % (nd, lib.LUCID_MAX_DIMS))
    shape = [int(d) for d in ffi.unpack(dl.shape, nd)] if nd else []
    if nd and dl.strides != ffi.NULL:
        strides = [int(s) for s in ffi.unpack(dl.strides, nd)]
    else:  # NULL strides: row-major contiguous
        strides, acc = [0] * nd, 1
        for i in range(nd - 1, -1, -1):
            strides[i] = acc
            acc *= shape[i]
    data = int(ffi.cast("uintptr_t", dl.data)) + int(dl.byte_offset)
    return borrow(data, dt, shape, strides, readonly, owner)


# DLPack (code << 8 | bits) -> pylucid dtype code, for _hot.dlpack_borrow.
_DL_CODES = {c << 8 | b: d.code for (c, b), d in _FROM_DL.items()}


def _consume(capsule: Any) -> Tensor:
    """Takes ownership of a DLPack capsule and wraps its memory."""
    if _hot is not None:
        # The common case in one C call: a CPU tensor of a supported dtype.
        # It returns None, the capsule untouched, for anything else: the
        # path below takes it and raises the errors.
        token = next(_tokens)
        taken = _hot.dlpack_borrow(capsule, token, _DL_CODES)
        if taken is not None:
            t, owner = taken
            # The token comes back only after t is released: the owner is
            # in place before drain could look for it.
            _borrowed[token] = owner
            return t  # type: ignore[no-any-return]
    # Checks the name ("dltensor[_versioned]"), takes the pointer and renames
    # the capsule "used_..." (raises TypeError / BufferError otherwise).
    ptr, versioned = _need_hot("import").dlpack_take(capsule)
    # From here on the managed tensor is ours: its deleter runs exactly once,
    # through the owner, whatever happens next.
    owner = Releaser(functools.partial(_call_deleter, ptr, versioned))
    try:
        if versioned:
            m = ffi.cast("DLManagedTensorVersioned *", ptr)
            if m.version.major != DLPACK_VERSION[0]:
                raise BufferError("pylucid.from_dlpack: the producer sent DLPack %d.%d; pylucid reads %d.x"
                                  % (m.version.major, m.version.minor, DLPACK_VERSION[0]))
            return _borrow(m.dl_tensor, bool(m.flags & _FLAG_READ_ONLY), owner)
        legacy = ffi.cast("DLManagedTensor *", ptr)
        return _borrow(legacy.dl_tensor, False, owner)
    except BaseException:
        owner.release()  # idempotent: a token already handed out releases nothing twice
        raise


Device = Union[None, str, Tuple[int, int]]


def from_dlpack(x: Any, *, device: Device = None, copy: Optional[bool] = None) -> Tensor:
    """A tensor sharing the memory of ``x``, any object with ``__dlpack__``
    (a NumPy array, a PyTorch tensor, a JAX array, a pylucid Tensor, …) or a
    DLPack capsule; any strides.

    The producer's memory stays alive as long as the tensor needs it and is
    released exactly once afterwards. ``copy=True`` returns a private copy
    instead; ``copy=False`` and ``None`` share (pylucid never needs to copy).
    ``device`` may only be the CPU (``"cpu"`` or ``(1, 0)``). Memory on another
    device raises ``BufferError``; unsupported dtypes raise ``TypeError``.
    The result does not require grad.
    """
    _lib.check_fork()
    if device is not None and device != "cpu" and tuple(device) != (KDL_CPU, 0):
        raise BufferError("pylucid.from_dlpack: pylucid tensors live on the CPU; device=%r is not supported"
                          % (device,))
    if _is_capsule(x):
        capsule = x
    else:
        get_device = getattr(x, "__dlpack_device__", None)
        export = getattr(x, "__dlpack__", None)
        if export is None:
            raise TypeError("pylucid.from_dlpack expects an object with __dlpack__ (a NumPy array, a PyTorch "
                            "tensor, a JAX array, ...) or a DLPack capsule, got %s" % type(x).__name__)
        if get_device is not None:
            dev_type, dev_id = get_device()
            _check_device(int(dev_type), int(dev_id))
        try:
            capsule = export(max_version=DLPACK_VERSION)
        except TypeError:  # a producer older than DLPack 1.0 takes no keywords
            capsule = export()
    t = _consume(capsule)
    if t.dtype is bool_ and t.numel():
        raw = t.numpy().view(np.uint8)
        if raw.max() > 1:  # bytes other than 0/1: the kernels need canonical bools
            return from_numpy(raw != 0)
    return _copy(t) if copy else t


_tensor_late.to_dlpack = to_dlpack
