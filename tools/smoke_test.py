"""A smoke test of an installed pylucid (CI runs it against the manylinux
wheel in a fresh virtual environment without Go): the package comes from
site-packages with its library inside, runs in API mode with the C hot path,
and computes a minimum, its gradient, and NumPy and DLPack round trips.

    python tools/smoke_test.py
"""

from __future__ import annotations

import pathlib
import shutil
import sys

import numpy as np

import pylucid
from pylucid import ops


def main() -> None:
    here = pathlib.Path(pylucid.__file__).resolve().parent
    assert "site-packages" in here.parts, here  # the installed package, not a source tree
    assert (here / "_native" / "liblucid.so").is_file()
    assert pylucid._lib.MODE == "api", pylucid._lib.MODE
    assert any(b.__module__ == "pylucid._hot" for b in pylucid.Tensor.__mro__)  # the C hot path is in use
    a = pylucid.tensor([1.0, 5.0, 2.0, float("nan")], requires_grad=True)
    y = ops.minimum(a, np.float32([3, 4, 2, 0]))
    y.sum().backward()
    assert y.detach().numpy().tolist()[:3] == [1.0, 4.0, 2.0] and np.isnan(y.detach().numpy()[3])
    assert a.grad is not None and a.grad.numpy().tolist() == [1.0, 0.0, 1.0, 1.0]
    x = np.arange(6.0)[::-2]
    t = pylucid.from_dlpack(x)
    assert np.shares_memory(np.from_dlpack(t), x) and np.shares_memory(t.numpy(), x)
    print("smoke test passed: pylucid", here, "python", sys.version.split()[0], "numpy", np.__version__,
          "go on PATH:", shutil.which("go") is not None)


if __name__ == "__main__":
    main()
