"""Packaging: the wheel carries the native library, is tagged
py3-none-<platform>, and the tests import the installed package."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import sysconfig
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_imported_from_outside_the_source_tree(tmp_path: pathlib.Path) -> None:
    # A fresh interpreter in an unrelated directory, without PYTHONPATH, finds
    # the installed package with its library inside it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", "import pylucid, numpy as np; print(pylucid.__file__); "
                               "print(pylucid.ops.minimum(np.float32([1, 3]), 2.0).numpy().tolist())"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=True,
    )
    path, values = out.stdout.strip().splitlines()
    here = pathlib.Path(path).resolve()
    assert ROOT not in here.parents, here
    assert (here.parent / "_native" / "lucid.h").is_file()
    assert (here.parent / "py.typed").is_file()
    assert values == "[1.0, 2.0]"


def test_wheel_is_platform_tagged_and_ships_the_library(tmp_path: pathlib.Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, timeout=600, capture_output=True,
    )
    wheels = list(tmp_path.glob("pylucid-*.whl"))
    assert len(wheels) == 1, wheels
    name = wheels[0].name
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert name.endswith("-py3-none-%s.whl" % plat), (name, plat)
    with zipfile.ZipFile(wheels[0]) as zf:
        names = set(zf.namelist())
    assert "pylucid/_native/liblucid.so" in names or "pylucid/_native/liblucid.dylib" in names, names
    assert "pylucid/_native/lucid.h" in names
    assert "pylucid/py.typed" in names
    assert not any(n.endswith(".go") for n in names)
