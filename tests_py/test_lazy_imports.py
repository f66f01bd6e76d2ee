"""`import pylucid` loads neither ml_dtypes nor a framework (docs/dtypes.md:
ml_dtypes costs ~0.4 s to import, six times NumPy); ml_dtypes is loaded when
a bfloat16 NumPy array is first needed, and bfloat16 arrays are then lent
without copying as before. Import time itself is a benchmark line
(bench/import_time.py), not a timed test."""

import subprocess
import sys

import pytest

HEAVY = ("ml_dtypes", "torch", "jax", "dask", "distributed", "jaxlib")


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_pylucid_loads_no_ml_dtypes_and_no_framework():
    code = "import sys, pylucid, pylucid.ops, pylucid.autograd\nprint(sorted(m for m in %r if m in sys.modules))" % (
        HEAVY,)
    assert _run(code) == "[]"


def test_a_bfloat16_tensor_works_without_loading_ml_dtypes():
    code = ("import sys, pylucid\n"
            "t = pylucid.tensor([1.5, -2.0], dtype=pylucid.bfloat16, requires_grad=True)\n"
            "y = pylucid.ops.minimum(t, pylucid.tensor([0.0, 0.0], dtype=pylucid.bfloat16))\n"
            "y.sum().backward()\n"
            "print(y.detach().to(pylucid.float32).numpy().tolist(), t.grad.to(pylucid.float32).numpy().tolist(),"
            " 'ml_dtypes' in sys.modules)")
    assert _run(code) == "[0.0, -2.0] [0.0, 1.0] False"


def test_ml_dtypes_is_loaded_when_a_bfloat16_array_is_first_needed():
    pytest.importorskip("ml_dtypes")
    code = ("import sys, pylucid\n"
            "t = pylucid.tensor([1.5, 2.0], dtype=pylucid.bfloat16)\n"
            "before = 'ml_dtypes' in sys.modules\n"
            "a = t.numpy()\n"
            "print(before, 'ml_dtypes' in sys.modules, a.dtype, a.tolist())")
    assert _run(code) == "False True bfloat16 [1.5, 2.0]"


def test_bfloat16_arrays_of_a_user_who_imported_ml_dtypes_are_lent_without_copying():
    pytest.importorskip("ml_dtypes")
    code = ("import numpy as np, ml_dtypes, pylucid\n"
            "x = np.array([1.0, 3.0, -2.0], dtype=ml_dtypes.bfloat16)\n"
            "t = pylucid.from_numpy(x)\n"
            "y = pylucid.ops.maximum(x, x[::-1])\n"
            "print(t.dtype, np.shares_memory(t.numpy(), x), pylucid.dtypes.as_dtype(ml_dtypes.bfloat16),"
            " y.numpy().tolist())")
    assert _run(code) == "pylucid.bfloat16 True pylucid.bfloat16 [1.0, 3.0, 1.0]"
