"""A soak of re-entry (docs/autograd.md): four threads run every kind of
pylucid call while the collector runs after every allocation
(``gc.set_threshold(1)``) and each collection runs finalizers and weakref
callbacks that use pylucid themselves. Every result is checked against
NumPy, in the threads and in the finalizers; nothing may hang (the child's
timeout), abort (its exit status), return another call's result, or leave a
handle, a lent buffer or C memory behind (``pylucid._stats()`` back to its
start).

The run has a budget of STRESS_SECONDS (30 by default) of work; no
assertion reads the clock.
"""

from __future__ import annotations

import os

import pytest

from childproc import run_code

from pylucid._runtime import _hot

SCRIPT = r"""
import gc, os, random, sys, threading, time, traceback, weakref
import numpy as np
import pylucid
from pylucid import autograd, ops

BUDGET = float(os.environ.get("STRESS_SECONDS", "30"))
errors = []
lock = threading.Lock()  # guards errors only (taken by no finalizer while pylucid runs)


def fail(where):
    with lock:
        errors.append(where + "\n" + traceback.format_exc())


class Sub(np.ndarray):
    pass


class Square(autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2.0 * x


def check(got, want):
    got = got.detach().numpy() if isinstance(got, pylucid.Tensor) else np.asarray(got)
    if not (got.shape == np.shape(want) and np.array_equal(got, want, equal_nan=True)):
        raise AssertionError((got, want))


def one_call(rng):
    n = int(rng.integers(1, 40))
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    a[rng.random(n) < 0.1] = np.nan
    k = int(rng.integers(0, 14))
    if k == 0:
        check(ops.minimum(pylucid.tensor(a), pylucid.tensor(b)), np.where((a <= b) | np.isnan(a), a, b))
    elif k == 1:
        check(ops.maximum(a, b), np.where((a >= b) | np.isnan(a), a, b))
    elif k == 2:
        check(ops.clamp(a, -0.5, 0.5), np.clip(a, np.float32(-0.5), np.float32(0.5)))
    elif k == 3:
        m = a.reshape(1, -1)
        check(ops.amax(pylucid.from_numpy(m.view(Sub)), 1), [m[0][np.isnan(m[0])][0] if np.isnan(m).any()
                                                               else m.max()])
    elif k == 4:
        t = pylucid.tensor(b, requires_grad=True)
        y = ops.minimum(t, 0.0)
        y.sum().backward()
        check(t.grad, (b <= 0).astype(np.float32))
    elif k == 5:
        t = pylucid.tensor(b, requires_grad=True)
        (g,) = autograd.grad(ops.maximum(t, 0.0), t, np.ones(n, np.float32))
        check(g, (b >= 0).astype(np.float32))
    elif k == 6:
        t = pylucid.tensor(b.astype(np.float64), requires_grad=True)
        Square.apply(t).sum().backward()
        check(t.grad, 2.0 * b.astype(np.float64))
    elif k == 7:
        t = pylucid.tensor(b)
        v = t.numpy()
        d = t.detach()
        t.__init__([1.0])
        check(v, b)
        check(d, b)
    elif k == 8:
        out = np.empty(n, np.float32)
        r = ops.fmin(a, b, out=out)
        assert r is out
        check(out, np.fmin(a, b))
    elif k == 9:
        t = pylucid.tensor(b)
        check(np.from_dlpack(t), b)
        check(pylucid.from_dlpack(np.array(b)), b)
    elif k == 10:
        v, i = ops.min(pylucid.tensor(b.reshape(1, -1)), 1)
        check(i, [np.argmin(b)])
        check(v, [b.min()])
    elif k == 11:
        t = pylucid.tensor(b)
        out, tan = autograd.jvp(lambda x: ops.minimum(x, 0.0), t, pylucid.tensor(np.ones(n, np.float32)))
        check(out, np.minimum(b, np.float32(0)))
        check(tan, (b <= 0).astype(np.float32))
    elif k == 12:
        check(-pylucid.tensor(a) + 1.0, -a + np.float32(1))
        check(pylucid.tensor(a).to(pylucid.float64), a.astype(np.float64))
    else:
        check(pylucid.zeros((2, n)).sum(dim=0), np.zeros(n, np.float32))
        check(pylucid.tensor(b).detach(), b)


class Cycle:
    def __init__(self, seed):
        self.me = self
        self.seed = seed

    def __del__(self):
        try:
            guarded_call(np.random.default_rng(self.seed))
        except BaseException:
            fail("finalizer")


class Target:
    pass


def guarded_call(rng):
    # A finalizer runs with the grad mode of the code it interrupted (a
    # Function's forward runs under no_grad), as in PyTorch: it asks for grad
    # itself, and must leave the interrupted code's mode as it found it.
    before = pylucid.is_grad_enabled()
    with pylucid.enable_grad():
        one_call(rng)
    if pylucid.is_grad_enabled() != before:
        raise AssertionError("a finalizer changed the grad mode of the code it interrupted")


def callback(ref):
    try:
        guarded_call(np.random.default_rng(id(ref) & 0xFFFF))
    except BaseException:
        fail("weakref callback")


stop = time.monotonic() + BUDGET
counts = [0] * 4


def worker(w):
    rng = np.random.default_rng(w)
    refs = []
    try:
        while time.monotonic() < stop:
            Cycle(int(rng.integers(1 << 30)))
            o = Target()
            refs.append(weakref.ref(o, callback))
            del o
            if len(refs) > 64:
                refs.clear()
            one_call(rng)
            counts[w] += 1
    except BaseException:
        fail("thread %d" % w)


for _ in range(3):  # warm up, then the baseline
    one_call(np.random.default_rng(0))
gc.collect()
pylucid._collect()
base = pylucid._stats()
gc.set_threshold(1)
threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
gc.set_threshold(700)
for _ in range(3):
    gc.collect()
pylucid._collect()
after = pylucid._stats()
print("calls per thread:", counts, flush=True)
if errors:
    print("ERRORS (%d):" % len(errors), *errors[:5], sep="\n", flush=True)
    sys.exit(1)
assert min(counts) > 0, counts
assert after == base, (base, after)
print("OK", flush=True)
"""


@pytest.mark.skipif(_hot is None, reason="DLPack needs the C extension (ABI mode has none)")
def test_finalizers_and_weakref_callbacks_under_load() -> None:
    budget = float(os.environ.get("STRESS_SECONDS", "30"))
    r = run_code(SCRIPT, timeout=budget * 4 + 120)
    out = r.stdout + r.stderr
    assert r.returncode == 0, "exit %s\n%s" % (r.returncode, out[-6000:])
    assert "OK" in r.stdout, out[-6000:]
