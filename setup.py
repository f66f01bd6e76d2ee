"""Builds pylucid's native library with the Go toolchain and ships it inside
the package. The wheel is tagged py3-none-<platform>: the library talks to
Python only through cffi's ABI mode, so it does not depend on CPython's ABI."""

import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover
    bdist_wheel = None

ROOT = pathlib.Path(__file__).resolve().parent
LIBNAME = {"darwin": "liblucid.dylib", "win32": "lucid.dll"}.get(sys.platform, "liblucid.so")


def go_version(go: str) -> tuple:
    """(major, minor) of the Go toolchain, (0, 0) when unknown."""
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"go(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def build_native(dest: pathlib.Path) -> None:
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("building pylucid needs the Go toolchain (go >= 1.24) on PATH")
    dest.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CGO_ENABLED="1")
    if platform.machine().lower() in ("x86_64", "amd64") and "GOEXPERIMENT" not in os.environ \
            and go_version(go) >= (1, 26):
        env["GOEXPERIMENT"] = "simd"  # the AVX2 kernels (core/backend/cpu/simd_amd64.go)
    subprocess.check_call(
        [go, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", str(dest / LIBNAME), "./capi"],
        cwd=ROOT,
        env=env,
    )
    generated = dest / (pathlib.Path(LIBNAME).stem + ".h")
    if generated.exists():
        generated.unlink()  # cgo's generated header; lucid.h is the documented one
    shutil.copy(ROOT / "capi" / "lucid.h", dest / "lucid.h")


class BuildPyWithGo(build_py):
    def run(self) -> None:
        super().run()
        build_native(pathlib.Path(self.build_lib) / "pylucid" / "_native")


cmdclass = {"build_py": BuildPyWithGo}

if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        def finalize_options(self) -> None:
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):  # type: ignore[no-untyped-def]
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel

class BinaryDistribution(Distribution):
    """The package ships a native library: platform-specific, laid out at the
    wheel's root (platlib), not under .data/purelib."""

    def has_ext_modules(self) -> bool:
        return True


setup(cmdclass=cmdclass, distclass=BinaryDistribution)
