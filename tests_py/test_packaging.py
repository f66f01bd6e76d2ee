"""Packaging: the wheel carries the native library and the cffi extension
(API mode) linked against it, is tagged cp310-abi3-<platform> (CPython's
limited API), the extensions find the library through $ORIGIN/_native only,
the sdist carries everything the README's jobs need, and the tests import the
installed package."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import struct
import subprocess
import sys
import sysconfig
import tarfile
import zipfile


ROOT = pathlib.Path(__file__).resolve().parent.parent


def _installed(code: str, tmp_path: pathlib.Path, **env_extra: str) -> list[str]:
    """Runs code in a fresh interpreter in an unrelated directory, without
    PYTHONPATH, so it imports the installed package; returns its output lines."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYLUCID_LIBRARY")}
    env.update(env_extra)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()


def _runpaths(elf: bytes) -> list[str]:
    """The DT_RUNPATH and DT_RPATH entries of a little-endian ELF64 shared
    object, as written (``readelf -d`` shows the same)."""
    assert elf[:4] == b"\x7fELF" and elf[4] == 2 and elf[5] == 1, "not a little-endian ELF64 file"
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    dynamic = [sec for sec in sections if sec[1] == 6]  # SHT_DYNAMIC
    assert len(dynamic) == 1
    _, _, _, _, off, size, link, _, _, _ = dynamic[0]
    strtab_off = sections[link][4]
    found = []
    for pos in range(off, off + size, 16):
        tag, val = struct.unpack_from("<qQ", elf, pos)
        if tag == 0:  # DT_NULL
            break
        if tag in (15, 29):  # DT_RPATH, DT_RUNPATH
            end = elf.index(b"\0", strtab_off + val)
            found.append(elf[strtab_off + val:end].decode())
    return found


def test_extensions_of_this_build_search_only_origin_native() -> None:
    # The interpreter's own link command may carry -Wl,-rpath,<its lib dir>
    # (pyenv's does); the extensions must not: their one search path is the
    # package's _native directory.
    import pylucid

    package = pathlib.Path(pylucid.__file__).parent
    exts = sorted(p for p in package.iterdir() if p.name.startswith(("_hot.", "_lucid_ffi.")) and p.suffix == ".so")
    assert len(exts) == 2, exts
    for ext in exts:
        assert _runpaths(ext.read_bytes()) == ["$ORIGIN/_native"], ext


def test_interpreter_rpath_options_are_dropped_from_the_link_command() -> None:
    build = _load_ffi_build()

    class Compiler:
        linker_so = ["gcc", "-shared", "-L/py/lib", "-Wl,-rpath,/py/lib", "-Wl,-rpath=/x", "-Wl,-R,/y",
                     "-Wl,-R/z", "-Wl,--as-needed", "-lm"]

    compiler = Compiler()
    build.drop_interpreter_rpaths(compiler)
    assert compiler.linker_so == ["gcc", "-shared", "-L/py/lib", "-Wl,--as-needed", "-lm"]
    # our own rpath is an extra argument, not part of the interpreter's command
    assert "-Wl,-rpath,$ORIGIN/_native" in build.extension_kwargs().get("extra_link_args", []) \
        or not sys.platform.startswith("linux")


def _load_ffi_build():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("_ffi_build_under_test", ROOT / "python" / "pylucid" / "_ffi_build.py")
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    return build


def _stable_abi() -> bool:
    # what setup.py builds for: the limited API except on debug and free-threaded interpreters
    return not hasattr(sys, "gettotalrefcount") and not sysconfig.get_config_var("Py_GIL_DISABLED")


def test_imported_from_outside_the_source_tree(tmp_path: pathlib.Path) -> None:
    # The installed package, with its library and extension inside it, runs in
    # API mode.
    path, mode, ext, hot, base, values = _installed(
        "import sys, pylucid, numpy as np; print(pylucid.__file__); print(pylucid._lib.MODE); "
        "print(sys.modules['pylucid._lucid_ffi'].__file__); print(sys.modules['pylucid._hot'].__file__); "
        "print([b.__module__ + '.' + b.__name__ for b in pylucid.Tensor.__mro__ if b.__module__ != 'pylucid._methods'][1]); "
        "print(pylucid.ops.minimum(np.float32([1, 3]), 2.0).numpy().tolist())",
        tmp_path,
    )
    here = pathlib.Path(path).resolve()
    assert ROOT not in here.parents, here
    assert (here.parent / "_native" / "lucid.h").is_file()
    assert (here.parent / "py.typed").is_file()
    assert mode == "api"
    assert pathlib.Path(ext).resolve().parent == here.parent
    assert pathlib.Path(hot).resolve().parent == here.parent
    assert base == "pylucid._hot.TensorBase"  # the C hot path is in use
    if _stable_abi():
        assert pathlib.Path(ext).name == "_lucid_ffi.abi3.so", ext
        assert pathlib.Path(hot).name == "_hot.abi3.so", hot
    assert values == "[1.0, 2.0]"


def test_pylucid_library_override_runs_in_abi_mode(tmp_path: pathlib.Path) -> None:
    # PYLUCID_LIBRARY names a library build to load with ffi.dlopen (ABI mode);
    # the extension, which would load the bundled library too, stays unimported.
    (native,) = _installed("import pylucid, pathlib; print(pathlib.Path(pylucid.__file__).parent / '_native')",
                           tmp_path)
    lib = next(p for p in pathlib.Path(native).iterdir() if p.name.startswith("liblucid."))
    mode, imported, values, grads = _installed(
        "import sys, pylucid, numpy as np; from pylucid import ops; print(pylucid._lib.MODE); "
        "print('pylucid._lucid_ffi' in sys.modules or 'pylucid._hot' in sys.modules); "
        "a = pylucid.tensor([1.0, 5.0, 2.0, float('nan')], requires_grad=True); "
        "y = ops.minimum(a, np.float32([3, 4, 2, 0])); print(y.detach().numpy().tolist()); "
        "y.sum().backward(); print(a.grad.numpy().tolist())",
        tmp_path, PYLUCID_LIBRARY=str(lib),
    )
    assert mode == "abi"
    assert imported == "False"
    assert values == "[1.0, 4.0, 2.0, nan]"
    assert grads == "[1.0, 0.0, 1.0, 1.0]"


def test_wheel_is_abi3_tagged_and_ships_the_library_and_extension(tmp_path: pathlib.Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, timeout=600, capture_output=True,
    )
    wheels = list(tmp_path.glob("pylucid_tensors-*.whl"))
    assert len(wheels) == 1, wheels
    name = wheels[0].name
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    if _stable_abi():
        # Py_LIMITED_API 0x030A0000 is compiled in, matching requires-python >= 3.10
        assert name.endswith("-cp310-abi3-%s.whl" % plat), (name, plat)
    else:
        assert "-cp%d%d-" % sys.version_info[:2] in name and name.endswith("-%s.whl" % plat), (name, plat)
    with zipfile.ZipFile(wheels[0]) as zf:
        names = set(zf.namelist())
        exts = [n for n in names if n.startswith("pylucid/_lucid_ffi.") and not n.endswith(".pyi")]
        assert len(exts) == 1, names
        if _stable_abi():
            assert exts == ["pylucid/_lucid_ffi.abi3.so"] or sys.platform == "win32", exts
        hots = [n for n in names if n.startswith("pylucid/_hot.")]
        assert len(hots) == 1, names
        if _stable_abi():
            assert hots == ["pylucid/_hot.abi3.so"] or sys.platform == "win32", hots
        if sys.platform.startswith("linux"):
            # the one run-time search path: no directory of the build machine
            assert _runpaths(zf.read(exts[0])) == ["$ORIGIN/_native"]
            assert _runpaths(zf.read(hots[0])) == ["$ORIGIN/_native"]
        assert "pylucid_tensors-0.1.0.dist-info/licenses/LICENSE" in names, names
    assert "pylucid/_native/liblucid.so" in names or "pylucid/_native/liblucid.dylib" in names, names
    assert "pylucid/_native/lucid.h" in names
    assert "pylucid/py.typed" in names
    assert "pylucid/_lucid_ffi.pyi" in names
    assert not any(n.endswith((".go", ".c")) for n in names), names
    assert "pylucid/_ffi_build.py" not in names  # the build script is setup.py's, not the package's
    assert "pylucid/_cdef.py" in names  # which the package itself needs


def test_wheel_tag_matches_requires_python() -> None:
    # The limited-API version compiled in (and so the cpXY of the tag) is the
    # oldest Python the project supports.
    build = _load_ffi_build()
    m = re.search(r'requires-python = ">=(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert m, "requires-python not found"
    assert build.LIMITED_API == (int(m.group(1)), int(m.group(2)))
    assert build.extension_kwargs()["define_macros"] == (
        [("Py_LIMITED_API", "0x%02X%02X0000" % build.LIMITED_API)] if _stable_abi() else [("_CFFI_NO_LIMITED_API", None)])
    assert build.wheel_python_tag() == ("cp%s%s" % m.groups() if _stable_abi() else None)


def test_python_fallback_path_passes_the_spec_tests(tmp_path: pathlib.Path) -> None:
    # Without the C hot path (ABI mode: PYLUCID_LIBRARY set), Tensor creation,
    # release and op calls run in Python; the spec, op-table spot checks and
    # early-freeing tests must pass there too.
    import pylucid

    lib = next(p for p in (pathlib.Path(pylucid.__file__).parent / "_native").iterdir()
               if p.name.startswith("liblucid."))
    env = {k: v for k, v in os.environ.items() if k != "PYLUCID_LIBRARY"}
    env["PYLUCID_LIBRARY"] = str(lib)
    here = pathlib.Path(__file__).resolve().parent
    probe = subprocess.run(
        [sys.executable, "-c", "import importlib, pylucid; print(pylucid._lib.MODE, "
                               "importlib.import_module('pylucid.tensor')._hot)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert probe.stdout.split() == ["abi", "None"], probe.stdout + probe.stderr
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         str(here / "test_minmax_spec.py"), str(here / "test_early_free.py"), str(here / "test_errors.py"),
         str(here / "test_memory.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert " passed" in out.stdout and "failed" not in out.stdout


SHIPPED_DIRS = ["core", "capi", "python/pylucid", "python/csrc", "examples", "tests_py", "tests_go", "docs", "tools", "bench", ".ci"]
BUILD_OUTPUTS = re.compile(r"(^|/)(__pycache__|_native|\.pytest_cache|\.mypy_cache|out)(/|$)|\.(so|pyc|dylib|dll)$")


def _source_files() -> set[str]:
    """The files of the project's directories in this tree (a git checkout or
    an unpacked sdist), without build outputs."""
    files = {n for n in ("LICENSE", "README.md", "pyproject.toml", "setup.py", "MANIFEST.in", "go.mod", "go.sum")}
    for d in SHIPPED_DIRS:
        for p in (ROOT / d).rglob("*"):
            rel = p.relative_to(ROOT).as_posix()
            if p.is_file() and not BUILD_OUTPUTS.search(rel) and ".egg-info" not in rel:
                files.add(rel)
    return files


def test_sdist_ships_everything_the_readme_jobs_need(tmp_path: pathlib.Path) -> None:
    # The README's main job (examples/fit_piecewise.py), its test command
    # (tests_py, tests_go with their fuzz corpus, .ci/run) and the docs and
    # license it links run from the sdist as from a checkout. (.ci/run also
    # installs from the sdist and runs the main job there.)
    out = subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), str(ROOT)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "SetuptoolsDeprecationWarning" not in out.stdout + out.stderr  # e.g. the license as a TOML table
    (sdist,) = tmp_path.glob("pylucid_tensors-*.tar.gz")
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    expected = _source_files()
    for must in ("examples/fit_piecewise.py", "tests_py/test_readme.py", "tests_go/readme_example_test.go",
                 "docs/index.md", "LICENSE", ".ci/run", "tools/build-wheel", "tests_go/testdata"):
        assert any(e == must or e.startswith(must + "/") for e in expected), must
    missing = sorted(expected - names)
    assert not missing, missing


def test_python_below_the_floor_gets_a_version_message_not_a_numpy_error() -> None:
    # pip resolves a local project's dependencies before it checks
    # requires-python: setup.py says why first. Run with each pyenv Python
    # older than the floor found here (CI's machines have 3.9).
    olds = sorted(pathlib.Path("/root/.pyenv/versions").glob("3.[89].*/bin/python3"))
    if not olds:
        olds = [pathlib.Path(p) for p in ("/usr/bin/python3.9", "/usr/bin/python3.8") if os.path.exists(p)]
    assert olds, "no Python below 3.10 to check setup.py with"
    for py in olds:
        out = subprocess.run([str(py), "setup.py", "--name"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert out.returncode != 0
        assert "pylucid needs Python 3.10 or newer" in out.stderr, (py, out.stderr)

