"""Loads pylucid's native library (Go core, C ABI) through cffi.

Normally through the compiled extension ``pylucid._lucid_ffi`` (cffi's API,
out-of-line mode, built by ``_ffi_build.py`` at install time and linked
against ``_native/liblucid``): a call is a direct C call, about half the
cost of one in ABI mode. ABI mode (``ffi.dlopen`` of the library, the cdef
made from lucid.h at import) is used instead when PYLUCID_LIBRARY names
another library build to load, or when the extension is missing (a source
tree where only the library was built); ``MODE`` says which one is active
("api" or "abi").

Boundary rules (docs/interop.md, docs/errors.md): exactly one library per process (with
PYLUCID_LIBRARY set the extension is not even imported, as it would load
the bundled library too); calls release the GIL (cffi does so around every
call in both modes; nothing here asks it to keep the GIL); errors come back
as status codes whose message is fetched with ``lucid_errmsg`` and raised as
the matching Python exception; in a process forked after import every call
raises at once.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Callable, Dict, List, NoReturn, Optional, Tuple

from ._cdef import cdef as _cdef

_HERE = pathlib.Path(__file__).resolve().parent
_NATIVE = _HERE / "_native"


def _header_text() -> str:
    candidates = [_NATIVE / "lucid.h", _HERE.parent.parent / "capi" / "lucid.h"]
    for path in candidates:
        if path.is_file():
            return path.read_text()
    raise ImportError("pylucid: lucid.h not found; reinstall the package (pip install .)")


def _library_path() -> str:
    override = os.environ.get("PYLUCID_LIBRARY")
    if override:
        return override
    for name in ("liblucid.so", "liblucid.dylib", "lucid.dll"):
        path = _NATIVE / name
        if path.is_file():
            return str(path)
    raise ImportError(
        "pylucid: native library not found in %s; build it with `pip install .` "
        "(needs Go) or set PYLUCID_LIBRARY" % _NATIVE
    )


def _load_abi() -> tuple[Any, Any]:
    import cffi

    abi_ffi = cffi.FFI()
    abi_ffi.cdef(_cdef(_header_text()))
    return abi_ffi, abi_ffi.dlopen(_library_path())


ffi: Any
lib: Any
MODE: str
if os.environ.get("PYLUCID_LIBRARY"):
    ffi, lib = _load_abi()
    MODE = "abi"
else:
    try:
        from ._lucid_ffi import ffi, lib
    except ModuleNotFoundError as e:
        if e.name != __name__.rpartition(".")[0] + "._lucid_ffi":
            raise
        ffi, lib = _load_abi()
        MODE = "abi"
    else:
        MODE = "api"

# Every C type the package names (ffi.new, ffi.cast), realized at import
# together with every function of the library and every struct's layout:
# cffi realizes a type on its first use, and a finalizer that the collector
# runs in the middle of that (any allocation can run one) and uses the same
# type made cffi build it twice, then fail an assertion (an abort) or a type
# check ("the types are different"). tests_py/test_finalizers.py checks that
# this list covers every type string in the package's source.
C_TYPES = (
    "char[]", "int32_t*", "int32_t[]", "int64_t*", "int64_t[]", "size_t*", "void **", "void *", "void*",
    "intptr_t", "uintptr_t", "lucid_tensor_info*", "lucid_out *", "lucid_out[]", "DLManagedTensor *",
    "DLManagedTensorVersioned *",
)


def _realize_all() -> None:
    seen: set[Any] = set()

    def fields(tp: Any) -> None:
        while tp.kind in ("pointer", "array") and tp not in seen:
            seen.add(tp)
            tp = tp.item
        if tp.kind == "struct" and tp not in seen:
            seen.add(tp)
            for _, f in tp.fields or ():
                fields(f.type)

    for name in dir(lib):
        getattr(lib, name)
    for name in C_TYPES:
        fields(ffi.typeof(name))


_realize_all()

_forked = False


def _mark_forked() -> None:
    global _forked
    _forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_forked)

FORK_MESSAGE = (
    "pylucid cannot be used in a process forked after pylucid was imported: the Go "
    "runtime inside its native library does not survive fork(). Use the 'spawn' or "
    "'forkserver' start method (multiprocessing.set_start_method('spawn')), or import "
    "pylucid only in the child."
)


def forked() -> bool:
    return _forked


def check_fork() -> None:
    if _forked:
        raise RuntimeError(FORK_MESSAGE)


_EXCEPTIONS: dict[int, type[Exception]] = {
    lib.LUCID_EVALUE: ValueError,
    lib.LUCID_ETYPE: TypeError,
    lib.LUCID_ERUNTIME: RuntimeError,
    lib.LUCID_EPANIC: RuntimeError,
    lib.LUCID_EOVERFLOW: OverflowError,
    lib.LUCID_ENOMEM: MemoryError,
}

def error_message() -> str:
    """The calling thread's last error message from the library. The buffer
    is this call's own: a finalizer run in between could fetch its own
    message into a shared one."""
    buf = ffi.new("char[]", 4096)
    n = lib.lucid_errmsg(buf, 4096)
    if n >= 4096:
        big = ffi.new("char[]", n + 1)
        lib.lucid_errmsg(big, n + 1)
        return str(ffi.string(big).decode("utf-8", "replace"))
    return str(ffi.string(buf).decode("utf-8", "replace"))


def raise_status(rc: int) -> NoReturn:
    """Raises the exception for a non-zero status of the last call on this thread."""
    raise _EXCEPTIONS.get(rc, RuntimeError)(error_message())


def check(rc: int) -> None:
    if rc:
        raise_status(rc)


_schema_table: Optional[List[Dict[str, Any]]] = None


def schema_table() -> List[Dict[str, Any]]:
    """The op schemas the library exports (``lucid_schemas``), parsed once:
    dicts with name, version, amp_policy, deterministic, id, kind, arity,
    outputs and attrs, in id order. ``id`` is what ``lucid_op`` takes."""
    global _schema_table
    if _schema_table is None:
        check_fork()
        needed = ffi.new("size_t*")
        check(lib.lucid_schemas(ffi.NULL, 0, needed))
        buf = ffi.new("char[]", needed[0])
        check(lib.lucid_schemas(buf, needed[0], needed))
        table: List[Dict[str, Any]] = json.loads(ffi.string(buf).decode())
        _schema_table = sorted(table, key=lambda s: int(s["id"]))
    return _schema_table


def build_info() -> Dict[str, Any]:
    """What the native library is (``lucid_build_info``): its Go version,
    kernels, CPU features and thread count."""
    check_fork()
    needed = ffi.new("size_t*")
    check(lib.lucid_build_info(ffi.NULL, 0, needed))
    buf = ffi.new("char[]", needed[0])
    check(lib.lucid_build_info(buf, needed[0], needed))
    info: Dict[str, Any] = json.loads(ffi.string(buf).decode())
    return info


def bridge_records(bridge: str) -> List[Dict[str, Any]]:
    """The records of the ops a framework bridge offers ("torch", "jax",
    "dask": the op record's Bridges)."""
    return [s for s in schema_table() if bridge in s["bridges"]]


def publish(namespace: Dict[str, Any], records: List[Dict[str, Any]], forms: Dict[str, Callable[[str], Any]],
            doc: str) -> List[str]:
    """Define a bridge's functions in namespace (its module's globals) from
    records: one function per record, made by the form of its signature,
    named after the op and its aliases, documented by doc (a format taking
    the op's name and the record's doc). Returns the names defined."""
    names: List[str] = []
    for s in records:
        f = forms[s["signature"]](s["name"])
        f.__name__ = f.__qualname__ = s["name"]
        f.__doc__ = doc % (s["name"], s["doc"])
        for n in [s["name"]] + list(s["aliases"]):
            namespace[n] = f
            names.append(n)
    return names


def clamp_operands(name: str, x: Any, lo: Any, hi: Any) -> Tuple[List[Any], Tuple[bool, bool]]:
    """A bridge's clamp(x, min, max) operands: x and the bounds given, and
    which bounds were given; both None is a ValueError, as pylucid's."""
    if lo is None and hi is None:
        raise ValueError("%s: at least one of min and max must not be None" % name)
    return [x] + [b for b in (lo, hi) if b is not None], (lo is not None, hi is not None)


def op_id(name: str) -> int:
    """The ``lucid_op`` id of the op registered under name."""
    for s in schema_table():
        if s["name"] == name:
            return int(s["id"])
    raise KeyError("no op %r in the library" % name)
