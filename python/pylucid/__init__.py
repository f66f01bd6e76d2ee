"""pylucid: tensors and autograd with a Go core.

    >>> import numpy as np, pylucid
    >>> a = pylucid.tensor([1.0, 5.0], requires_grad=True)
    >>> y = pylucid.ops.minimum(a, np.float32(3.0))
    >>> y.sum().backward(); a.grad.numpy()
    array([1., 0.], dtype=float32)
"""

from typing import Any as _Any, Dict as _Dict

from . import _lib
from ._lib import check as _check
from ._lib import ffi as _ffi
from ._lib import lib as _native
from . import ops
from . import _numpy_protocols  # noqa: F401 - Tensor's NumPy protocols (__array_ufunc__, __array_function__)
from . import autograd
from .amp import autocast, get_autocast_dtype, is_autocast_enabled
from .autograd import Function, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .dtypes import (
    bfloat16,
    bool_,
    dtype,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
)
from .tensor import Node, Tensor, from_numpy, tensor
from ._basics import (Generator, arange, empty, empty_like, full, full_like, linspace, manual_seed, ones, ones_like,
                      rand, rand_like, randn, randn_like, zeros, zeros_like)
from . import dlpack
from .dlpack import from_dlpack

__version__ = "0.1.0"


def set_num_threads(n: int) -> None:
    """Sets the number of worker goroutines of the cpu backend (results do
    not depend on it). ``n`` is an int (NumPy integers too; a float raises
    TypeError)."""
    import operator

    _lib.check_fork()
    _check(_native.lucid_set_num_threads(operator.index(n)))


def get_num_threads() -> int:
    """The number of worker goroutines of the cpu backend."""
    _lib.check_fork()
    out = _ffi.new("int32_t*")
    _check(_native.lucid_get_num_threads(out))
    return int(out[0])


def show_config(file: _Any = None) -> _Dict[str, _Any]:
    """Prints what this pylucid is, as ``numpy.show_config()`` does: its
    version, the Go version its core was built with, the kernels compiled in
    (SIMD/AVX2 or portable), the CPU features they use, the thread count and
    the NumPy and ml_dtypes versions (ml_dtypes is not imported to find it).
    Returns the same facts as a dict (``file``: where to print, default
    ``sys.stdout``)."""
    import importlib.metadata
    import sys

    import numpy

    info = _lib.build_info()
    try:
        ml = importlib.metadata.version("ml_dtypes")
    except importlib.metadata.PackageNotFoundError:
        ml = None
    facts: _Dict[str, _Any] = {
        "pylucid": __version__, "go": info["go_version"], "kernels": info["kernels"],
        "cpu features": info["cpu_features"], "threads": info["threads"],
        "platform": "%s/%s" % (info["os"], info["arch"]), "python": sys.version.split()[0],
        "numpy": numpy.__version__, "ml_dtypes": ml,
    }
    out = sys.stdout if file is None else file
    for k, v in facts.items():
        shown = " ".join(v) or "none" if isinstance(v, list) else ("not installed" if v is None else v)
        print("%s: %s" % (k, shown), file=out)
    return facts


def _stats() -> dict[str, int]:
    """Library counters: live handles, borrowed buffers, C bytes and blocks,
    DLPack exports whose deleter has not run yet, and long calls (jobs) whose
    work has not ended, and small tensors pinned for an address handed out."""
    from ._runtime import flush_released

    _lib.check_fork()
    flush_released()  # dropped tensors count as released
    out = _ffi.new("int64_t[]", 7)
    _check(_native.lucid_stats(out, 7))
    return {"handles": out[0], "borrowed": out[1], "c_bytes": out[2], "c_blocks": out[3], "dlpack": out[4],
            "jobs": out[5], "pinned": out[6]}


def _collect() -> None:
    """Runs the native collector until released memory is freed, then drops
    the NumPy buffers the library handed back."""
    import gc

    from ._runtime import drain, flush_released

    _lib.check_fork()
    # Dropping Python records (Function contexts, borrowed arrays) can release
    # more native objects in turn: repeat until the counters settle.
    before = None
    for _ in range(10):
        gc.collect()
        flush_released()
        _check(_native.lucid_collect())
        drain()
        now = _stats()
        if now == before:
            break
        before = now


bool = bool_  # noqa: A001 - pylucid.bool, as torch.bool

__all__ = [
    "show_config",
    "Tensor",
    "Node",
    "tensor",
    "from_numpy",
    "from_dlpack",
    "zeros",
    "ones",
    "full",
    "empty",
    "arange",
    "linspace",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "rand",
    "randn",
    "rand_like",
    "randn_like",
    "Generator",
    "manual_seed",
    "ops",
    "autograd",
    "Function",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "autocast",
    "is_autocast_enabled",
    "get_autocast_dtype",
    "set_num_threads",
    "get_num_threads",
    "dtype",
    "bool_",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
]
