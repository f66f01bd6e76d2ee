"""Builds ``pylucid._lucid_ffi``, the cffi API-mode (out-of-line) extension
through which the package calls liblucid.

API mode compiles one C wrapper per function of lucid.h, so a call goes
Python -> C -> Go without ABI mode's generic marshalling through libffi
(``lucid_get_num_threads``: 0.14 us per call against 0.29 us in ABI mode on
the development machine). The
extension links against liblucid (``-llucid``) and finds it at run time
through the rpath ``$ORIGIN/_native``: it lies next to the package's
``_native`` directory, in the wheel and in a development tree alike.

Build time only; the package never imports this file:

- setup.py's build_ext loads it by path, writes the C source with
  ``make_ffi(native).emit_c_code(...)`` and compiles it as an ordinary
  setuptools Extension with ``extension_kwargs()``;
- tools/devbuild.sh runs it as a script to build the extension in place:
  ``python3 python/pylucid/_ffi_build.py python/pylucid/_native``.

It imports nothing from the package (importing pylucid would load the
library), only ``_cdef.py``, by path.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import sys
import sysconfig
import tempfile
from typing import Any, Callable

MODULE = "pylucid._lucid_ffi"
SOURCE = '#include "lucid.h"\n'  # with the prototypes: LUCID_NO_PROTOTYPES stays undefined
LIMITED_API = (3, 10)  # the oldest CPython the extension supports: requires-python in pyproject.toml

_HERE = pathlib.Path(__file__).resolve().parent


def limited_api() -> bool:
    """Whether this interpreter builds a limited-API (abi3) extension: not for
    a debug build (cffi's own rule) nor a free-threaded one (no abi3 there)."""
    return not hasattr(sys, "gettotalrefcount") and not sysconfig.get_config_var("Py_GIL_DISABLED")


def wheel_python_tag() -> str | None:
    """The wheel's python tag for the limited API ("cp310", with abi tag
    "abi3"), or None when the extension is built for this interpreter only."""
    return "cp%d%d" % LIMITED_API if limited_api() else None


def extension_kwargs() -> dict[str, Any]:
    """Everything the extension needs besides its C source and the directory
    of lucid.h and liblucid (see make_ffi), as setuptools Extension keywords.

    cffi's generated C defines Py_LIMITED_API without a value (the 3.2 stable
    ABI) unless it is defined already; it is defined here to the version of
    the wheel tag, so the tag states exactly what was compiled."""
    kwargs: dict[str, Any] = {"libraries": ["lucid"]}
    if sys.platform == "darwin":
        kwargs["extra_link_args"] = ["-Wl,-rpath,@loader_path/_native"]
    elif sys.platform != "win32":
        # No shell sees this argument: $ORIGIN reaches the linker literally.
        kwargs["extra_link_args"] = ["-Wl,-rpath,$ORIGIN/_native"]
    if limited_api():
        kwargs["py_limited_api"] = True
        kwargs["define_macros"] = [("Py_LIMITED_API", "0x%02X%02X0000" % LIMITED_API)]
    else:
        kwargs["py_limited_api"] = False
        kwargs["define_macros"] = [("_CFFI_NO_LIMITED_API", None)]
    return kwargs


def _is_rpath_option(arg: str) -> bool:
    """Whether a link-command argument sets a run-time search path
    (``-Wl,-rpath,DIR``, ``-Wl,-rpath=DIR``, ``-Wl,-R,DIR``, ``-Wl,-RDIR``)."""
    if not arg.startswith("-Wl,"):
        return False
    first = arg[4:].split(",", 1)[0]
    return first in ("-rpath", "--rpath", "-R") or first.startswith(("-rpath=", "--rpath=", "-R"))


def drop_interpreter_rpaths(compiler: Any) -> None:
    """Removes the run-time search paths from the interpreter's own shared-object
    link command (``LDSHARED``), in place on a distutils compiler object.

    An interpreter configured with ``LDFLAGS=-Wl,-rpath,<its lib dir>`` (as
    pyenv's are) puts that directory into the RUNPATH of every extension it
    links, ahead of ours: the build machine's path would travel in the wheel,
    and a library of that name there would be loaded instead of the bundled
    one. The extensions' only search path is ``$ORIGIN/_native``, which
    ``extension_kwargs`` passes as an extra argument (not affected here)."""
    for attr in ("linker_so", "linker_so_cxx"):
        cmd = getattr(compiler, attr, None)
        if isinstance(cmd, list):
            setattr(compiler, attr, [a for a in cmd if not _is_rpath_option(a)])


def build_ext_class() -> Any:
    """setuptools' build_ext with ``drop_interpreter_rpaths`` applied before
    linking: setup.py's command derives from it, and the in-place builds
    below use it."""
    from setuptools.command.build_ext import build_ext

    class BuildExt(build_ext):  # type: ignore[misc]
        def build_extensions(self) -> None:
            drop_interpreter_rpaths(self.compiler)
            super().build_extensions()

    return BuildExt


def _build_extension_inplace(ext: Any, module: str, package: pathlib.Path, prefix: str) -> pathlib.Path:
    """Compiles the setuptools Extension ``ext`` with ``build_ext_class()`` and
    moves it into ``package`` with an atomic rename, so a process that has the
    old one loaded keeps working; other builds' files named ``prefix.*`` are
    removed. Returns its path."""
    from setuptools import Distribution

    with tempfile.TemporaryDirectory() as tmp:
        dist = Distribution({"name": "pylucid-" + prefix.strip("_"), "ext_modules": [ext],
                             "cmdclass": {"build_ext": build_ext_class()}})
        cmd: Any = dist.get_command_obj("build_ext")
        cmd.build_lib = os.path.join(tmp, "lib")
        cmd.build_temp = os.path.join(tmp, "temp")
        cmd.ensure_finalized()
        cmd.run()
        built = pathlib.Path(cmd.get_ext_fullpath(module))
        staged = package / (built.name + ".new")
        shutil.copy2(built, staged)
        os.replace(staged, package / built.name)
    target = package / built.name
    for other in package.glob(prefix + ".*"):
        if other != target and other.suffix in (".so", ".pyd", ".dylib"):
            other.unlink()  # another build's name would shadow or confuse this one
    return target


def _cdef() -> Callable[[str], str]:
    spec = importlib.util.spec_from_file_location("_pylucid_cdef", _HERE / "_cdef.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cdef: Callable[[str], str] = module.cdef
    return cdef


def make_ffi(native: pathlib.Path) -> Any:
    """The cffi.FFI of the extension, set up to compile against
    ``native/lucid.h`` and link against the liblucid in ``native``."""
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(_cdef()((native / "lucid.h").read_text()))
    ffi.set_source(MODULE, SOURCE, include_dirs=[str(native)], library_dirs=[str(native)], **extension_kwargs())
    return ffi


def build_inplace(native: pathlib.Path) -> pathlib.Path:
    """Compiles the extension against ``native`` (a development tree's
    python/pylucid/_native) into the package directory above it (see
    _build_extension_inplace). Returns its path."""
    from setuptools import Extension

    native = native.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        c_file = pathlib.Path(tmp) / "_lucid_ffi.c"
        make_ffi(native).emit_c_code(str(c_file))
        ext = Extension(MODULE, sources=[str(c_file)], include_dirs=[str(native)], library_dirs=[str(native)],
                        **extension_kwargs())
        return _build_extension_inplace(ext, MODULE, native.parent, "_lucid_ffi")


HOT_MODULE = "pylucid._hot"
# The C sources of pylucid._hot, one file per room (python/csrc/hot.h).
HOT_DIR = _HERE.parent / "csrc"
HOT_FILES = ("module.c", "tensor.c", "call.c", "op.c", "ndarray.c", "autograd.c", "dlpack.c", "lent.c")


def hot_sources(root: pathlib.Path = _HERE.parent.parent) -> list[str]:
    """The C files of pylucid._hot, as paths under root (the source tree)."""
    return [str(root / "python" / "csrc" / f) for f in HOT_FILES]


def hot_kwargs() -> dict[str, Any]:
    """extension_kwargs for pylucid._hot: its files share symbols through
    hot.h, which stay hidden (only PyInit__hot is exported)."""
    kwargs = extension_kwargs()
    if sys.platform != "win32":
        kwargs["extra_compile_args"] = ["-fvisibility=hidden"]
    kwargs["depends"] = [str(HOT_DIR / "hot.h")]
    return kwargs


def hot_extension(native: pathlib.Path) -> Any:
    """The setuptools Extension of ``pylucid._hot`` (the per-call hot path in
    C, python/csrc), compiled and linked like the cffi extension."""
    from setuptools import Extension

    return Extension(HOT_MODULE, sources=hot_sources(), include_dirs=[str(native), str(HOT_DIR)],
                     library_dirs=[str(native)], **hot_kwargs())


def build_hot_inplace(native: pathlib.Path) -> pathlib.Path:
    """Compiles ``pylucid._hot`` against ``native`` into the package directory
    (see build_inplace)."""
    native = native.resolve()
    return _build_extension_inplace(hot_extension(native), HOT_MODULE, native.parent, "_hot")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 python/pylucid/_ffi_build.py NATIVE_DIR (holding liblucid and lucid.h)")
    print(build_inplace(pathlib.Path(sys.argv[1])))
    print(build_hot_inplace(pathlib.Path(sys.argv[1])))
