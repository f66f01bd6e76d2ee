"""Results whose only handle goes are freed at once (not at the next garbage
collection). These tests run workloads with LUCID_DEBUG_POISON=1, which makes
the library overwrite every freed block, so any use of memory that was freed
too early shows up as wrong numbers. Small results (at most 64 bytes) are
not freed but reused whole, tensor object and all, by the next small result
(docs/architecture.md): the same workload on small shapes shows any reuse of
one that something still refers to as wrong numbers too."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

WORKLOAD = r'''
import numpy as np, pylucid as pl
from pylucid import ops, autograd, dlpack

rng = np.random.default_rng(0)
a_np = rng.standard_normal(A_SHAPE).astype(np.float32)
b_np = rng.standard_normal(B_SHAPE).astype(np.float32)
want_min = np.minimum(a_np, b_np)
for i in range(300):
    a = pl.from_numpy(a_np)
    b = pl.tensor(b_np)
    y = ops.minimum(a, b)            # a fresh result, dropped next iteration
    v = y.numpy()                    # a NumPy view keeps it alive
    del y
    z = ops.add(ops.maximum(a, b), 1.0)
    assert np.array_equal(v, want_min), i
    assert np.array_equal(z.numpy(), np.maximum(a_np, b_np) + 1), i
    t = pl.tensor(a_np, requires_grad=True)
    loss = ops.minimum(t, b).sum()
    g = autograd.grad(loss, t)[0]
    del loss
    assert np.array_equal(g.numpy(), (a_np <= b_np).astype(np.float32)), i
    u = ops.add(a, 1.0)              # no grad, but saved by mul for its backward
    loss2 = ops.mul(t, u).sum()
    del u
    g2 = autograd.grad(loss2, t)[0]
    assert np.array_equal(g2.numpy(), a_np + 1), i
    d = ops.mul(a, 2.0)
    if dlpack._hot is not None:
        cap = np.from_dlpack(d)      # a DLPack consumer outlives the tensor
        del d
        assert np.array_equal(cap, a_np * 2), i
    else:                            # ABI mode: DLPack needs the C extension
        try:
            np.from_dlpack(d)
            raise AssertionError("DLPack export worked without the C extension")
        except RuntimeError as exc:
            assert "compiled extension" in str(exc), exc
        del d
    e = ops.sub(a, b).detach()       # detach shares memory
    r = e.to(pl.float32)             # same dtype: the same tensor
    del e
    assert np.array_equal(r.numpy(), a_np - b_np), i
    f = ops.minimum(a, 0.5)          # a Python number's scalar: a temporary
    h = ops.maximum(f, -0.5)
    del f
    assert np.array_equal(h.numpy(), np.clip(a_np, np.float32(-0.5), np.float32(0.5))), i
print("ok")
'''


@pytest.mark.parametrize("a_shape, b_shape", [((64, 256), (256,)), ((2, 3), (3,)), ((1,), (1,)), ((), ())])
def test_early_free_never_frees_memory_still_in_use(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    env = dict(os.environ, LUCID_DEBUG_POISON="1")
    code = textwrap.dedent(WORKLOAD).replace("A_SHAPE", repr(a_shape)).replace("B_SHAPE", repr(b_shape))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_dropped_results_free_their_memory_at_once() -> None:
    code = r'''
import numpy as np, pylucid as pl
from pylucid import ops
a = pl.from_numpy(np.ones(1 << 16, np.float32))
before = pl._stats()["c_blocks"]
for _ in range(50):
    ops.minimum(a, a)
print(pl._stats()["c_blocks"] - before)
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"  # without early freeing, 50 blocks wait for the collector


def test_dropped_graph_outputs_free_their_memory_at_once() -> None:
    # A node refers to its inputs, never to its outputs: a result that is part
    # of a graph goes back at once when dropped.
    code = r'''
import numpy as np, pylucid as pl
from pylucid import ops
a = pl.tensor(np.linspace(-1, 1, 1 << 16, dtype=np.float32), requires_grad=True)
b = pl.from_numpy(np.zeros(1 << 16, np.float32))
before = pl._stats()["c_blocks"]
for k in range(50):
    y = ops.maximum(a, b)
    s = y.sum()
    assert s.grad_fn is not None
    del y, s
print(pl._stats()["c_blocks"] - before)
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"  # without it, 50 blocks wait for the collector


def test_dropped_borrows_go_back_at_once() -> None:
    # A NumPy array lent for one call (from_numpy dropped at once, a gradient
    # given to backward) is handed back when its tensor's handle goes, not
    # at the next collection; one that a view still uses stays lent.
    code = r'''
import sys
import numpy as np, pylucid as pl
from pylucid import ops
a = np.ones(3, np.float32)
rc = sys.getrefcount(a)
for _ in range(2000):
    pl.from_numpy(a)
x = pl.from_numpy(np.arange(3, dtype=np.float32), requires_grad=True)
g = np.full(3, 2, np.float32)
for _ in range(2000):
    x.grad = None
    ops.minimum(x, x).backward(g)
assert np.array_equal(x.grad.numpy(), [2, 2, 2])
t = pl.from_numpy(a)
v = t.detach()  # shares the memory
del t
for _ in range(300):
    pl.from_numpy(np.zeros(2, np.float32))
print(pl._stats()["borrowed"], sys.getrefcount(a) - rc, sys.getrefcount(g) - 2, v.numpy().tolist())
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    borrowed, held_a, held_g, v = out.stdout.split(maxsplit=3)
    # x, the view's array and at most a release batch (64) and a drain (64)
    # of each loop: without early release, thousands wait for the collector
    assert int(borrowed) <= 2 + 128, out.stdout
    assert 1 <= int(held_a) <= 1 + 128, out.stdout  # the view keeps a lent
    assert int(held_g) <= 128, out.stdout
    assert v.strip() == "[1.0, 1.0, 1.0]"


def test_borrowed_gradient_outlives_a_paused_run() -> None:
    # A run that stops at a Python Function hands the gradient lent for the
    # call to that Function after the call that lent it has returned (the
    # lending handle is gone by then): the memory must still be there.
    code = r'''
import numpy as np, pylucid as pl
from pylucid import ops, autograd

class Twice(autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return ops.mul(x, 2.0)

    @staticmethod
    def backward(ctx, g):
        return ops.mul(g, 2.0)

for n in (3, 5000):
    x = pl.tensor(np.arange(n, dtype=np.float64), requires_grad=True)
    for i in range(200):
        g = np.full(n, i, np.float64)
        y = Twice.apply(x)
        got = autograd.grad([y], [x], grad_outputs=[g], retain_graph=True)[0]
        assert np.array_equal(got.numpy(), 2 * g), (n, i)
        x.grad = None
        Twice.apply(x).backward(g)
        assert np.array_equal(x.grad.numpy(), 2 * g), (n, i)
print("ok")
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "LUCID_DEBUG_POISON": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_exported_small_results_are_unpinned_with_their_last_handle() -> None:
    # A 1-element result's bytes live in Go memory, pinned when NumPy is given
    # their address; the pin goes with the last handle (it used to be given
    # back by a cleanup that the pin itself kept from running: a leak per call).
    # A leaf's .grad is unpinned with Python's last handle too, though the
    # leaf's gradient slot still holds it.
    code = r'''
import gc
import numpy as np, pylucid as pl
from pylucid import ops
a, b = pl.tensor(np.float32(1.5)), pl.tensor(np.float32(-2.0))
kept = [ops.minimum(a, b).numpy() for _ in range(10)]
total = 0.0
for _ in range(3000):
    total += float(ops.maximum(a, b).numpy())
for _ in range(3000):  # a fresh leaf's 1-element .grad read through NumPy, then dropped with the leaf
    x = pl.tensor([1.5], requires_grad=True)
    ops.minimum(x, 2.0).sum().backward()
    total += float(x.grad.numpy()[0])
    del x
gc.collect()
mid = pl._stats()["pinned"]
del kept
gc.collect()
print(total, mid, pl._stats()["pinned"])
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    total, mid, end = out.stdout.split()
    assert float(total) == 4500.0 + 3000.0
    assert 10 <= int(mid) <= 10 + 128, out.stdout  # the kept arrays, and at most the release batches
    assert int(end) <= 128, out.stdout
