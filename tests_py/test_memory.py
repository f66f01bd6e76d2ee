"""Memory stays bounded (docs/interop.md): a loop that wraps large arrays, runs
forward+backward and drops everything keeps RSS flat, and every handle and
borrowed buffer is given back."""

from __future__ import annotations

import gc
import os
import time

import numpy as np
import pytest

import pylucid
from pylucid import ops
import importlib

_tensor_mod = importlib.import_module("pylucid.tensor")
_runtime = importlib.import_module("pylucid._runtime")

MB = 1 << 20


def _rss() -> int:
    """Resident set size now (Linux), else the peak RSS (never lower than now)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def _settle():
    gc.collect()
    pylucid._collect()


def _counters():
    s = pylucid._stats()
    return {"handles": s["handles"], "borrowed": s["borrowed"], "c_bytes": s["c_bytes"],
            "c_blocks": s["c_blocks"], "py_borrowed": len(_runtime.borrowed_owners()),
            "py_functions": len(_tensor_mod.functions)}


def test_wrap_minimum_backward_loop_keeps_memory_flat():
    n = 2 * MB  # 2M float32 = 8 MB per array
    rng = np.random.default_rng(0)
    base_a = rng.standard_normal(n).astype(np.float32)
    base_b = rng.standard_normal(n).astype(np.float32)
    exp_ga = (base_a <= base_b).astype(np.float32)
    exp_gb = 1 - exp_ga
    exp_sum = np.minimum(base_a, base_b).astype(np.float64).sum()

    def one_iteration(i, check):
        a_np = base_a.copy()  # fresh NumPy memory every time: each is borrowed, then returned
        b_np = base_b.copy()
        a = pylucid.from_numpy(a_np, requires_grad=True)
        if i % 2:
            b = pylucid.tensor(b_np, requires_grad=True)  # a library-owned copy
        else:
            b = pylucid.from_numpy(b_np, requires_grad=True)
        y = ops.minimum(a, b)
        s = y.sum()
        s.backward()
        if check:
            np.testing.assert_allclose(float(s.item()), exp_sum, rtol=1e-4)
            np.testing.assert_array_equal(a.grad.numpy(), exp_ga)
            np.testing.assert_array_equal(b.grad.numpy(), exp_gb)
        del a, b, y, s, a_np, b_np

    for i in range(5):  # warm up allocators and the runtime
        one_iteration(i, check=True)
    _settle()
    start = _counters()
    rss0 = _rss()
    peak = 0
    t0 = time.monotonic()
    for i in range(2000):
        one_iteration(i, check=(i % 250 == 0))
        if i % 25 == 0:
            peak = max(peak, _rss() - rss0)
    elapsed = time.monotonic() - t0
    peak = max(peak, _rss() - rss0)
    print("2000 iterations: %.1fs, peak RSS growth %.1f MB" % (elapsed, peak / MB))
    assert peak < 200 * MB, "RSS grew by %.1f MB" % (peak / MB)
    _settle()
    end = _counters()
    assert end["handles"] == start["handles"], (start, end)
    assert end["borrowed"] == start["borrowed"], (start, end)
    assert end["py_borrowed"] == start["py_borrowed"], (start, end)
    assert end["c_bytes"] <= start["c_bytes"], (start, end)
    assert end["c_blocks"] <= start["c_blocks"], (start, end)
    assert _rss() - rss0 < 200 * MB


def test_counters_track_objects():
    """The counters this file relies on do move: a live tensor holds a handle,
    a borrowed array counts as borrowed, and C memory is accounted."""
    _settle()
    s0 = _counters()
    arr = np.ones(1 << 16, np.float32)
    t = pylucid.from_numpy(arr)
    r = ops.maximum(t, 2.0)
    s1 = _counters()
    assert s1["handles"] >= s0["handles"] + 2
    assert s1["borrowed"] >= s0["borrowed"] + 1
    assert s1["c_bytes"] >= s0["c_bytes"] + arr.nbytes
    del t, r
    _settle()
    s2 = _counters()
    assert s2["handles"] == s0["handles"]
    assert s2["borrowed"] == s0["borrowed"]
    assert s2["py_borrowed"] == s0["py_borrowed"]
    assert s2["c_bytes"] == s0["c_bytes"]


def test_numpy_views_keep_memory_until_dropped():
    _settle()
    s0 = _counters()
    views = []
    for k in range(20):
        views.append(ops.minimum(np.full(1 << 16, k, np.float32), 10.0).numpy())
    _settle()
    assert _counters()["c_bytes"] >= s0["c_bytes"] + 20 * (1 << 16) * 4  # the views hold it
    for k, v in enumerate(views):
        assert (v == min(k, 10)).all()
    del views, v
    _settle()
    s1 = _counters()
    assert s1["c_bytes"] == s0["c_bytes"]
    assert s1["handles"] == s0["handles"]


def test_small_tensors_numpy_views_survive_collections_and_churn():
    # Tensors of at most 256 bytes live in Go memory (no C block), pinned when
    # their address is handed out: the view keeps them alive and in place.
    _settle()
    c0 = _counters()["c_bytes"]
    a = np.arange(16, dtype=np.float32)
    b = np.full(16, 7.5, np.float32)
    views = [ops.minimum(a, b + k).numpy() for k in range(50)]
    addrs = [v.__array_interface__["data"][0] for v in views]
    assert all(p % 64 == 0 for p in addrs)  # the header's alignment promise holds for Go memory too
    assert _counters()["c_bytes"] == c0  # no C memory behind them
    for _ in range(3):
        junk = [ops.maximum(b, a) for _ in range(3000)]  # reuse any freed memory
        del junk
        _settle()
    for k, v in enumerate(views):
        np.testing.assert_array_equal(v, np.minimum(a, b + k))
        assert v.__array_interface__["data"][0] == addrs[k]


def test_detached_results_do_not_keep_their_graph_alive():
    # loss_history.append(loss.detach()) must keep only the loss: not its
    # graph, the saved inputs, or the intermediates.
    _settle()
    before = _counters()
    kept = []
    for k in range(10):
        a = pylucid.tensor(np.full(1 << 20, float(k), np.float32), requires_grad=True)  # 4 MB, library memory
        b = pylucid.tensor(np.full(1 << 20, 2.0, np.float32), requires_grad=True)
        y = ops.minimum(a, b)
        s = y.sum()
        kept.append(s.detach())
        kept.append(y.detach().sum())
        del a, b, y, s
    _settle()
    after = _counters()
    assert after["c_bytes"] - before["c_bytes"] < 1 << 20, (before, after)
    assert after["borrowed"] == before["borrowed"], (before, after)  # the inputs' private copies went back
    assert [float(t.item()) for t in kept[::2]] == [min(k, 2.0) * (1 << 20) for k in range(10)]


def test_graphs_dropped_without_backward_are_freed():
    n = 1 << 20
    _settle()
    start = _counters()
    rss0 = _rss()
    for i in range(150):
        a = pylucid.from_numpy(np.full(n, float(i), np.float32), requires_grad=True)
        b = pylucid.from_numpy(np.zeros(n, np.float32), requires_grad=True)
        y = (ops.maximum(a, b) * 2.0).sum()  # saved tensors, never used
        if i % 3 == 0:
            y.backward(retain_graph=True)  # a retained graph, then dropped
        del a, b, y
    _settle()
    end = _counters()
    assert end["handles"] == start["handles"], (start, end)
    assert end["borrowed"] == start["borrowed"], (start, end)
    assert end["py_borrowed"] == start["py_borrowed"], (start, end)
    assert end["c_bytes"] <= start["c_bytes"], (start, end)
    assert _rss() - rss0 < 200 * MB


class _Double(pylucid.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2.0


def _function_loop(iters):
    for i in range(iters):
        x = pylucid.from_numpy(np.full(1000, float(i), np.float32), requires_grad=True)
        y = ops.minimum(_Double.apply(x), 100.0).sum()
        if i % 2:
            y.backward()
            assert float(x.grad.numpy()[0]) == (2.0 if 2 * i <= 100 else 0.0)
        del x, y


def test_python_function_records_are_released():
    _settle()
    start = _counters()
    _function_loop(300)
    # Dropping a Function node hands its record back to Python, whose saved
    # tensors then release their handles: allow a few rounds to reach the end.
    for _ in range(4):
        _settle()
    end = _counters()
    assert end["py_functions"] == start["py_functions"], (start, end)
    assert end["handles"] == start["handles"], (start, end)
    assert end["borrowed"] == start["borrowed"], (start, end)
    assert end["py_borrowed"] == start["py_borrowed"], (start, end)


def test_one_collect_releases_function_graphs():
    _settle()
    _settle()
    start = _counters()
    _function_loop(100)
    gc.collect()
    pylucid._collect()
    end = _counters()
    assert end["borrowed"] == start["borrowed"], (start, end)
    assert end["py_borrowed"] == start["py_borrowed"], (start, end)
