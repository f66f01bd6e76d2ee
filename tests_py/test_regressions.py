"""Regressions found in review: each once hung, failed or gave a wrong number."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pylucid as pl
from pylucid import autograd, ops


def run_child(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


def test_leaf_as_its_own_gradient_with_create_graph_does_not_hang() -> None:
    out = run_child("""
        import pylucid as pl
        x = pl.tensor([1.0, 2.0], requires_grad=True)
        x.backward(gradient=x, create_graph=True)
        x.backward(gradient=x, create_graph=True)
        print(x.grad.detach().numpy().tolist())
    """, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2.0, 4.0]"


def test_function_with_more_outputs_than_the_default_buffer() -> None:
    class Spread(autograd.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            return tuple(ops.mul(x, float(i)) for i in range(70))

        @staticmethod
        def backward(ctx, *gs):  # type: ignore[no-untyped-def]
            total = gs[0] * 0.0
            for i, g in enumerate(gs):
                total = total + g * float(i)
            return total

    x = pl.tensor([1.0, 2.0], requires_grad=True)
    outs = Spread.apply(x)
    assert len(outs) == 70
    loss = outs[0].sum()
    for o in outs[1:]:
        loss = loss + o.sum()
    loss.backward()
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), [sum(range(70))] * 2)


def test_dlpack_bools_are_canonicalised() -> None:
    raw = np.frombuffer(b"\x02\x00\x05\x01", np.bool_)
    t = pl.from_dlpack(raw)
    assert t.sum().item() == 3
    np.testing.assert_array_equal(t.numpy().view(np.uint8), [1, 0, 1, 1])


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
def test_copies_keep_negative_zero_and_nan_payloads(dt: type) -> None:
    src = np.array([-0.0, 1.5, np.nan], dtype=dt)
    src.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dt).itemsize])[2] |= 3  # a payload
    for copied in (pl.tensor(pl.from_numpy(src)), pl.from_dlpack(src, copy=True), pl.tensor(src)):
        got = copied.numpy()
        assert not np.shares_memory(got, src)
        assert got.tobytes() == src.tobytes()


def test_node_and_schema_calls_raise_in_a_forked_child() -> None:
    out = run_child("""
        import os, sys
        import pylucid as pl
        x = pl.tensor([1.0], requires_grad=True)
        fn = (x * 2.0).grad_fn
        pid = os.fork()
        if pid == 0:
            bad = 0
            for call in (fn.name, lambda: fn.next_functions, pl.ops.schemas, lambda: pl.ops.minimum.schema):
                try:
                    call()
                    bad += 1
                except RuntimeError as e:
                    if "spawn" not in str(e):
                        bad += 1
            os._exit(bad)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
    """, timeout=60)
    assert out.returncode == 0, (out.returncode, out.stderr)
