"""Ctrl-C during one long op (docs/errors.md): a reduction over a huge
broadcast view runs in bounded memory but for hours; Ctrl-C must raise
KeyboardInterrupt while it runs, not when it returns, and leave the library
working with nothing left behind.

Each case runs in a child process, on the C hot path (the default) and on
the Python fallback path (ABI mode: PYLUCID_LIBRARY set, no _hot). A helper
thread waits until the op is seen running inside the library (the job
counter of ``pylucid._stats()``), then sends SIGINT to the process. Nothing
here measures time: the child's timeout only guards against a hang, which is
what happened before the fix (the signal was handled only once the op came
back, hours later).
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pylucid
from childproc import child_env


SCRIPT = r"""
import os, signal, sys, threading, time
import numpy as np
import pylucid
from pylucid import ops

assert (sys.modules["pylucid.tensor"]._hot is not None) == (MODE == "hot"), MODE

def huge(dt, shape):
    return pylucid.from_numpy(np.broadcast_to(np.asarray(1, dtype=dt), shape))

x = huge(DTYPE, SHAPE)
ops.sum(pylucid.tensor([1.0, 2.0]))  # warm up
pylucid._collect()
base = pylucid._stats()
assert base["jobs"] == 0, base

seen = []

def interrupt():
    # Wait for the op to be running inside the library (bounded: a
    # library that never reports it fails below), then press Ctrl-C.
    for _ in range(6000):
        if pylucid._stats()["jobs"] > 0:
            seen.append(True)
            break
        time.sleep(0.005)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
try:
    r = EXPR
    print("NO_INTERRUPT", r, flush=True)
    sys.exit(3)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
assert seen, "the op was never seen running"

# Nothing left behind: no job, handle, borrowed buffer or C memory.
assert pylucid._stats()["jobs"] == 0, pylucid._stats()
pylucid._collect()
after = pylucid._stats()
assert after == base, (base, after)

# The library keeps working, with right answers, the long path included
# (2**25 elements run as a job to the end; each output of a reduction over
# dims is summed in the canonical order of its own elements, so the job's
# bits are those of the short call over one row or column).
a = pylucid.tensor([1.0, 5.0, -2.0], requires_grad=True)
y = ops.minimum(a, 3.0)
assert y.detach().numpy().tolist() == [1.0, 3.0, -2.0]
y.sum().backward()
assert a.grad.numpy().tolist() == [1.0, 0.0, 1.0]
assert float(ops.sum(huge(np.float32, (1 << 25,))).item()) == 2.0**25
rng = np.random.default_rng(3)
row = (rng.standard_normal(1024) * np.exp(rng.standard_normal(1024) * 3)).astype(np.float32)
big = pylucid.from_numpy(np.broadcast_to(row, (1 << 15, 1024)))
by_row = ops.sum(big, dim=1).numpy()
assert (by_row.view(np.uint32) == ops.sum(pylucid.from_numpy(row)).numpy().view(np.uint32)).all()
by_col = ops.sum(big, dim=0).numpy()
for j in (0, 1, 511, 1023):
    one = ops.sum(pylucid.from_numpy(np.broadcast_to(row[j], (1 << 15,)))).numpy()
    assert by_col[j].view(np.uint32) == one.view(np.uint32), j
del a, y, big, by_row, by_col
pylucid._collect()
assert pylucid._stats()["jobs"] == 0
print("AFTER_OK", flush=True)
"""

CASES = {
    "sum": ("float32", "(1 << 44,)", "ops.sum(x)"),
    "method_sum_keepdim": ("float32", "(1 << 22, 1 << 22)", "x.sum(keepdim=True)"),
    "mean": ("float32", "(1 << 44,)", "ops.mean(x)"),
    "sum_dim": ("float32", "(1 << 22, 1 << 22)", "ops.sum(x, dim=1)"),
    "sum_float16": ("float16", "(1 << 44,)", "ops.sum(x)"),
    "mean_dim_float64": ("float64", "(16, 1 << 40)", "ops.mean(x, dim=-1)"),
    # the selecting reductions: rows, columns, several outputs, out=
    "amax": ("float32", "(1 << 44,)", "ops.amax(x)"),
    "argmin_dim": ("float32", "(1 << 22, 1 << 22)", "ops.argmin(x, 1)"),
    "max_dim_columns": ("float32", "(1 << 22, 1 << 22)", "ops.max(x, 0)"),
    "amin_out": ("float64", "(16, 1 << 40)", "ops.amin(x, -1, out=np.empty(16))"),
    "amax_float16": ("float16", "(1 << 44,)", "ops.amax(x)"),
}


def _library() -> str:
    native = pathlib.Path(pylucid.__file__).parent / "_native"
    return str(next(p for p in native.iterdir() if p.name.startswith("liblucid.")))


@pytest.mark.parametrize("mode", ["hot", "fallback"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_ctrl_c_interrupts_a_long_reduction(case: str, mode: str) -> None:
    dt, shape, expr = CASES[case]
    env = child_env({k: v for k, v in os.environ.items() if k != "PYLUCID_LIBRARY"})
    if mode == "fallback":
        env["PYLUCID_LIBRARY"] = _library()
    code = "MODE = %r\nDTYPE = %r\nSHAPE = %s\n" % (mode, dt, shape) + SCRIPT.replace("EXPR", expr)
    try:
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                           timeout=120, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail("Ctrl-C did not stop the op: the child hung\nstdout:\n%s\nstderr:\n%s" % (e.stdout, e.stderr))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "INTERRUPTED" in r.stdout and "AFTER_OK" in r.stdout, out


@pytest.mark.parametrize("expr", ["ops.argmin(x, 1)", "ops.max(x, 0)", "ops.amax(x, 1)", "x.sum(dim=1)"])
def test_ctrl_c_right_after_the_call_returned_cancels_the_job(monkeypatch, expr):
    # The unluckiest moment for Ctrl-C on the Python path (ABI mode, run here
    # in this process: _calls._abi_call): the library has started the job
    # and returned LUCID_PENDING, and the KeyboardInterrupt is raised before
    # the status reaches Python code. The job must still be cancelled, not
    # left running over the huge view for hours. (The C path, python/csrc
    # call.c, has no such moment: the wait is part of its one C call.)
    cmod = sys.modules["pylucid._calls"]
    calls = []
    real = cmod._lucid_op_n

    def call(*args):
        calls.append(real(*args))
        raise KeyboardInterrupt

    x = pylucid.from_numpy(np.broadcast_to(np.float32(1), (1 << 22, 1 << 22)))
    pylucid._collect()
    base = pylucid._stats()
    monkeypatch.setattr(cmod, "native_call", cmod._abi_call)
    monkeypatch.setattr(cmod, "_lucid_op_n", call)
    with pytest.raises(KeyboardInterrupt):
        eval(expr, {"ops": pylucid.ops, "x": x})
    monkeypatch.undo()
    assert calls == [cmod._PENDING]  # the job was started, then Ctrl-C
    pylucid._collect()
    assert pylucid._stats() == base
