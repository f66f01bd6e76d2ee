"""The public ops are typed for a user's type checker (docs/semantics.md):
mypy --strict over a user script reveals what each call form returns and
rejects wrong calls. The ops' types come from the op records
(tools/gen_op_types.py), checked current here too."""

import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

import pylucid

ROOT = pathlib.Path(__file__).resolve().parent.parent

pytest.importorskip("mypy")  # the [test] extra installs it; CI runs this

USER_SCRIPT = textwrap.dedent('''
    import numpy as np
    import pylucid
    from pylucid import ops

    a = pylucid.tensor([1.0, 2.0])
    arr = np.ones(2, dtype=np.float32)
    reveal_type(ops.minimum(a, a))  # R: pylucid.tensor.Tensor
    reveal_type(ops.minimum(arr, 1.0))  # R: pylucid.tensor.Tensor
    reveal_type(ops.maximum([1, 2], np.float32(3)))  # R: pylucid.tensor.Tensor
    reveal_type(ops.minimum(a, a, out=arr))  # R: numpy.ndarray
    reveal_type(ops.minimum(a, a, out=a))  # R: pylucid.tensor.Tensor
    reveal_type(ops.neg(a))  # R: pylucid.tensor.Tensor
    reveal_type(ops.clamp(a, 0.0))  # R: pylucid.tensor.Tensor
    reveal_type(ops.clip(a, max=1.0))  # R: pylucid.tensor.Tensor
    reveal_type(ops.amin(a, dim=(0,), keepdim=True))  # R: pylucid.tensor.Tensor
    reveal_type(ops.argmin(a, 0))  # R: pylucid.tensor.Tensor
    reveal_type(ops.min(a))  # R: pylucid.tensor.Tensor
    reveal_type(ops.min(a, 0))  # R: tuple[pylucid.tensor.Tensor, pylucid.tensor.Tensor, fallback=pylucid.ops.MinMaxResult]
    reveal_type(ops.max(a, dim=0).indices)  # R: pylucid.tensor.Tensor
    reveal_type(ops.minimum.schema.version)  # R: int
    reveal_type(a.max())  # R: pylucid.tensor.Tensor
    reveal_type(a.min(0, keepdim=True))  # R: tuple[pylucid.tensor.Tensor, pylucid.tensor.Tensor, fallback=pylucid.ops.MinMaxResult]
    reveal_type(pylucid.rand_like(a))  # R: pylucid.tensor.Tensor
    ops.minimum(a)  # E: call-overload
    ops.minimum(a, "x")  # E: arg-type
    ops.minimum(a, a, a)  # E: call-overload
    ops.amin(a, dim=1.5)  # E: call-overload
    ops.argmin(a, dim=(0, 1))  # E: call-overload
    ops.minimum(a, a, out=[0.0, 0.0])  # E: call-overload
    ops.no_such_op(a)  # E: attr-defined
''')


def _norm(t: str) -> str:
    """A revealed type as every mypy version since 1.8 spells it."""
    return t.replace("builtins.", "").replace("Tuple[", "tuple[")


def test_mypy_reveals_the_ops_types_and_rejects_wrong_calls(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    (tmp_path / "mypy.ini").write_text("[mypy]\nstrict = True\n")
    env_path = pathlib.Path(pylucid.__file__).resolve().parent.parent
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"),
           "--cache-dir", str(tmp_path / "cache"), "--show-error-codes", "--no-color-output", str(script)]
    env = None
    if "site-packages" not in str(env_path):  # a source checkout (PYTHONPATH): tell mypy where pylucid is
        import os
        env = dict(os.environ, MYPYPATH=str(env_path))
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    got = {}  # line -> messages
    for line in out.stdout.splitlines():
        m = re.match(r".*user\.py:(\d+): (\w+): (.*)", line)
        if m:
            got.setdefault(int(m.group(1)), []).append((m.group(2), m.group(3)))
    lines = USER_SCRIPT.split("\n")
    checked = 0
    for n, text in enumerate(lines, 1):
        if "# R: " in text:
            want = text.split("# R: ")[1]
            notes = [msg for kind, msg in got.get(n, []) if kind == "note"]
            assert len(notes) == 1 and notes[0].startswith('Revealed type is "'), (n, text, got.get(n))
            shown = _norm(notes[0][len('Revealed type is "'):-1])
            assert shown == _norm(want) or shown.startswith(_norm(want) + "["), (n, text, shown)
            checked += 1
        elif "# E: " in text:
            code = text.split("# E: ")[1]
            errors = [msg for kind, msg in got.get(n, []) if kind == "error"]
            assert errors and errors[0].endswith("[%s]" % code), (n, text, got.get(n), out.stdout[-2000:])
            checked += 1
        else:
            assert n not in got, (n, text, got[n])  # the valid lines type-check
    assert checked == 24


def test_the_ops_types_are_current_with_the_records() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_op_types.py"), "--check"],
                         capture_output=True, text=True, timeout=120,
                         env=None if "site-packages" in pylucid.__file__ else
                         {**__import__("os").environ, "PYTHONPATH": str(pathlib.Path(pylucid.__file__).parent.parent)})
    assert out.returncode == 0, out.stderr
