"""What a new user meets first (docs/install.md, docs/semantics.md): the
public names of pylucid.ops, and the examples' messages when an extra is
missing."""

import pathlib
import subprocess
import sys

import pylucid
from pylucid import ops

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_dir_of_ops_lists_the_public_names_only():
    names = dir(ops)
    assert names == sorted(ops.__all__)
    assert {"minimum", "maximum", "amin", "clamp", "clip", "nanmax", "schemas", "MinMaxResult"} <= set(names)
    for internal in ("Any", "Dict", "sys", "functools", "enum", "operator", "binary", "call_op", "Tensor"):
        assert internal not in names
    assert all(not n.startswith("_") for n in names)
    assert all(hasattr(ops, n) for n in names)
    assert ops.Tensor is pylucid.Tensor  # still importable, only not listed


def test_torch_example_without_torch_names_the_extra():
    # torch made unimportable (a None entry in sys.modules), as on a machine
    # without the extra
    code = ("import runpy, sys\nsys.modules['torch'] = None\nsys.argv = ['torch_train.py']\n"
            "runpy.run_path(%r, run_name='__main__')" % str(ROOT / "examples" / "torch_train.py"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert out.stderr.strip() == ('examples/torch_train.py needs PyTorch: install pylucid with its torch extra, '
                                  'python3 -m pip install ".[torch]" from a checkout (docs/install.md)')
