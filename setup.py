"""Builds pylucid's native parts and ships them inside the package.

build_ext does both, in this order:
1. the Go library (``go build -buildmode=c-shared ./capi``) into
   pylucid/_native, with the documented header lucid.h next to it;
2. the cffi extension pylucid._lucid_ffi (API mode, the C source written by
   python/pylucid/_ffi_build.py), compiled against that lucid.h and linked
   against that library, which it finds at run time through the rpath
   ``$ORIGIN/_native``;
3. pylucid._hot (python/csrc/*.c: Tensor's C base type and the per-call
   hot path), compiled and linked the same way.

The extensions' only run-time search path is ``$ORIGIN/_native``: the
interpreter's own rpath options (pyenv's Pythons link extensions with
``-Wl,-rpath,<their lib dir>``) are dropped from the link command
(_ffi_build.drop_interpreter_rpaths).

The extensions use CPython's limited API (Py_LIMITED_API 0x030A0000, the
oldest version requires-python allows), so the wheel is tagged
cp310-abi3-<platform>: one wheel for CPython 3.10 and later. ``pip wheel .``
gives a ``linux_x86_64`` wheel, which package indexes refuse;
tools/build-wheel repairs it into a ``manylinux`` one (docs/install.md).
The library itself
does not depend on Python at all. On an interpreter without the stable ABI
(a debug or free-threaded build) the extension and the wheel tag are for that
interpreter only.
"""

import importlib.util
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import types

# Before anything else: pip does not check requires-python of a local
# project before it resolves the dependencies, so on Python 3.9 the install
# would end in "No matching distribution found for numpy>=2.2.5".
if sys.version_info < (3, 10):
    sys.exit("pylucid needs Python 3.10 or newer (this is Python %d.%d): NumPy 2.2.5, its floor, does; "
             "see docs/install.md" % sys.version_info[:2])

from setuptools import Extension, setup  # noqa: E402
from setuptools.command.build_py import build_py  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent
LIBNAME = {"darwin": "liblucid.dylib", "win32": "lucid.dll"}.get(sys.platform, "liblucid.so")


def _load(name: str) -> types.ModuleType:
    """A module of the package loaded by path: importing pylucid itself would
    need the library this script builds."""
    path = ROOT / "python" / "pylucid" / (name + ".py")
    spec = importlib.util.spec_from_file_location("_pylucid_build_" + name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ffi_build = _load("_ffi_build")


def go_version(go: str) -> tuple:
    """(major, minor) of the Go toolchain, (0, 0) when unknown."""
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"go(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def portable_kernels_message(version: tuple, goexperiment: "str | None") -> str:
    """The line the build prints when it builds the portable kernels only."""
    why = ("Go %d.%d has no GOEXPERIMENT=simd (Go 1.26 or newer has)" % version[:2] if version < (1, 26)
           else "GOEXPERIMENT=%s leaves out simd" % goexperiment)
    return ("pylucid: building the portable kernels only (%s): about 4x slower at 2^24 elements than the "
            "AVX2 kernels; pylucid.show_config() says which a build has" % why)


def build_native(dest: pathlib.Path) -> None:
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("building pylucid needs the Go toolchain (go >= 1.24) on PATH")
    dest.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CGO_ENABLED="1")
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    version = go_version(go)
    if x86 and "GOEXPERIMENT" not in os.environ and version >= (1, 26):
        env["GOEXPERIMENT"] = "simd"  # the AVX2 kernels (core/backend/cpu/simd_amd64.go)
    if x86 and "simd" not in env.get("GOEXPERIMENT", "").split(","):
        # one line, so a slower build is never a silent one (docs/install.md)
        print(portable_kernels_message(version, env.get("GOEXPERIMENT")), file=sys.stderr, flush=True)
    ldflags = "-s -w"
    if sys.platform == "darwin":
        ldflags += " -extldflags=-Wl,-install_name,@rpath/" + LIBNAME  # found through the extension's rpath
    subprocess.check_call(
        [go, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=" + ldflags, "-o", str(dest / LIBNAME), "./capi"],
        cwd=ROOT,
        env=env,
    )
    generated = dest / (pathlib.Path(LIBNAME).stem + ".h")
    if generated.exists():
        generated.unlink()  # cgo's generated header; lucid.h is the documented one
    shutil.copy(ROOT / "capi" / "lucid.h", dest / "lucid.h")


class BuildExtWithGo(ffi_build.build_ext_class()):  # type: ignore[misc]
    """Builds the Go library, then the cffi extension that links against it."""

    def run(self) -> None:
        # the library goes where the extension will lie (its rpath is $ORIGIN/_native)
        if self.inplace or getattr(self, "editable_mode", False):
            package = pathlib.Path(self.get_finalized_command("build_py").get_package_dir("pylucid")).resolve()
        else:
            package = pathlib.Path(self.build_lib) / "pylucid"
        native = package / "_native"
        build_native(native)
        c_file = pathlib.Path(self.build_temp) / "_lucid_ffi.c"
        c_file.parent.mkdir(parents=True, exist_ok=True)
        ffi_build.make_ffi(native).emit_c_code(str(c_file))
        ext = self.ext_map[ffi_build.MODULE]
        ext.sources = [str(c_file)]
        ext.include_dirs = [str(native)]
        ext.library_dirs = [str(native)]
        # relink whenever the library or the build settings change, not only the C source
        ext.depends = [str(native / LIBNAME), str(ROOT / "python" / "pylucid" / "_ffi_build.py")]
        hot = self.ext_map[ffi_build.HOT_MODULE]
        hot.include_dirs = [str(native), str(ROOT / "python" / "csrc")]
        hot.library_dirs = [str(native)]
        hot.depends = [str(native / LIBNAME), str(native / "lucid.h"), str(ROOT / "python" / "csrc" / "hot.h")]
        super().run()


class BuildPyWithoutBuilder(build_py):
    """build_py without _ffi_build.py: the extensions' build script is
    setup.py's, not the installed package's (the sdist keeps it: MANIFEST.in)."""

    def find_package_modules(self, package: str, package_dir: str) -> list:  # type: ignore[type-arg]
        return [m for m in super().find_package_modules(package, package_dir) if m[1] != "_ffi_build"]


tag = ffi_build.wheel_python_tag()
setup(
    cmdclass={"build_ext": BuildExtWithGo, "build_py": BuildPyWithoutBuilder},
    # sources and directories are filled in by BuildExtWithGo once the library exists
    ext_modules=[
        Extension(ffi_build.MODULE, sources=[], **ffi_build.extension_kwargs()),
        Extension(ffi_build.HOT_MODULE, sources=[str(pathlib.Path("python", "csrc", f)) for f in ffi_build.HOT_FILES],
                  **ffi_build.hot_kwargs()),
    ],
    options={"bdist_wheel": {"py_limited_api": tag}} if tag else {},
)
