"""Threads (docs/interop.md; determinism: docs/semantics.md): calls release the GIL (ops on at
most 4,096 result elements keep it, as NumPy's small ufunc calls do), many Python
threads may run ops and backward at once, and results do not depend on the
number of worker threads."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import pylucid
from pylucid import ops


@pytest.fixture
def restore_threads():
    n = pylucid.get_num_threads()
    yield
    pylucid.set_num_threads(n)


def _run_threads(target, args_list, timeout=300):
    errors = []

    def wrap(*args):
        try:
            target(*args)
        except BaseException as e:  # noqa: BLE001 - reported below
            import traceback

            errors.append("".join(traceback.format_exception(e)))

    ths = [threading.Thread(target=wrap, args=a) for a in args_list]
    for t in ths:
        t.start()
    for t in ths:
        t.join(timeout)
    assert not any(t.is_alive() for t in ths), "threads hung"
    assert not errors, errors[0]


# ---- the GIL is released: threads are inside the library at once ----
#
# Proven without a clock: the library's test gate (lucid_debug_gate) makes
# every op and backward call wait on entry until `want` calls have arrived.
# Had a call kept the GIL (or had the library serialised its callers), no
# second thread could arrive and the first would give up once its bounded
# wait ran out: a failure, never a hang. The wait only bounds the test.

_GATE_WAIT_MS = 60_000


class _Gate:
    def __init__(self, want, wait_ms=_GATE_WAIT_MS):
        self.want, self.wait_ms = want, wait_ms
        self.met = self.timed_out = None

    def __enter__(self):
        assert pylucid._native.lucid_debug_gate(self.want, self.wait_ms, pylucid._ffi.NULL, pylucid._ffi.NULL) == 0
        return self

    def __exit__(self, *exc):
        met = pylucid._ffi.new("int64_t*")
        timed_out = pylucid._ffi.new("int64_t*")
        assert pylucid._native.lucid_debug_gate(0, 0, met, timed_out) == 0
        self.met, self.timed_out = int(met[0]), int(timed_out[0])


def _inside_together(calls):
    """Runs each call on its own thread while the gate waits for all of them;
    returns the gate (its counts) and each call's result."""
    results = [None] * len(calls)

    def run(i):
        results[i] = calls[i]()

    with _Gate(len(calls)) as g:
        _run_threads(run, [(i,) for i in range(len(calls))])
    return g, results


def test_gate_catches_a_call_that_arrives_alone():
    """The proof below can fail: one call alone gives up (after its bounded
    wait) and is counted as such."""
    a = pylucid.tensor([1.0, 5.0])
    with _Gate(2, wait_ms=50) as g:  # nobody else comes: the bound is only how long that takes
        r = ops.minimum(a, 3.0)
    assert (g.met, g.timed_out) == (0, 1)
    assert r.numpy().tolist() == [1.0, 3.0]  # the call itself went on


@pytest.mark.parametrize("hot", [True, False])
def test_two_threads_run_in_parallel(restore_threads, hot):
    pylucid.set_num_threads(1)
    rng = np.random.default_rng(0)
    n = 4097  # one past the size an op keeps the GIL for
    data = [(rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32))
            for _ in range(2)]
    ts = [(pylucid.from_numpy(a), pylucid.from_numpy(b)) for a, b in data]

    def call(k):
        if hot:  # the C fast path (_hot.binary)
            return lambda: ops.minimum(*ts[k]).numpy()
        return lambda: ops.minimum(data[k][0], data[k][1]).numpy()  # the Python path (NumPy arguments)

    g, results = _inside_together([call(0), call(1)])
    assert (g.met, g.timed_out) == (2, 0)
    for k in range(2):
        np.testing.assert_array_equal(results[k], np.minimum(*data[k]))


@pytest.mark.parametrize("form", ["binary", "broadcast", "out", "sum"])
def test_small_ops_keep_the_gil(restore_threads, form):
    """An op on Tensors with at most 4,096 result elements keeps the GIL
    (the C fast path), so a second thread cannot arrive while the first waits
    in the gate. One past that size, they meet."""
    for n, together in ((4096, False), (4097, True)):
        a = pylucid.from_numpy(np.arange(n, dtype=np.float32))
        b = pylucid.from_numpy(np.full(n, 7.0, np.float32))
        col = pylucid.from_numpy(np.arange(64, dtype=np.float32).reshape(64, 1))
        row = pylucid.from_numpy(np.ones((1, 64 if n == 4096 else 65), np.float32))
        outs = [pylucid.tensor(np.zeros(n, np.float32)) for _ in range(2)]
        calls = {
            "binary": lambda k: ops.minimum(a, b),
            "broadcast": lambda k: ops.maximum(col, row),  # (64, 1) x (1, 64): 4096 elements, or 4160
            "out": lambda k: ops.minimum(a, b, out=outs[k]),
            "sum": lambda k: a.sum(),
        }
        results = [None, None]

        def run(k):
            results[k] = calls[form](k)

        with _Gate(2, wait_ms=300 if not together else _GATE_WAIT_MS) as g:
            _run_threads(run, [(0,), (1,)])
        # kept: the first gives up alone, and the second, arriving after it, passes
        assert (g.met, g.timed_out) == ((2, 0) if together else (1, 1)), (n, g.met, g.timed_out)
        want = {"binary": np.minimum(a.numpy(), b.numpy()), "out": np.minimum(a.numpy(), b.numpy()),
                "broadcast": np.maximum(col.numpy(), row.numpy()), "sum": np.float32(a.numpy().sum())}[form]
        for r in results:
            np.testing.assert_array_equal(np.asarray(r.numpy()), want)


def test_gil_released_during_long_op(restore_threads):
    """A reduction over 2**26 elements and an op called from another thread
    are inside the library together."""
    pylucid.set_num_threads(1)
    big = pylucid.from_numpy(np.broadcast_to(np.float32(1.0), (2**12, 2**14)))
    small = pylucid.tensor([1.0, 5.0])
    g, results = _inside_together([lambda: big.sum().item(), lambda: ops.minimum(small, 3.0).numpy().tolist()])
    assert (g.met, g.timed_out) == (2, 0)
    assert results == [2.0**26, [1.0, 3.0]]


def test_gil_released_during_backward(restore_threads):
    pylucid.set_num_threads(1)
    rng = np.random.default_rng(3)
    n = 1 << 16
    a_np = rng.standard_normal(n).astype(np.float32)
    b_np = rng.standard_normal(n).astype(np.float32)
    a = pylucid.from_numpy(a_np, requires_grad=True)
    b = pylucid.from_numpy(b_np, requires_grad=True)
    y = (ops.maximum(ops.minimum(a, b) * 2.0, b - 1.0) + a).sum()
    x = pylucid.tensor([2.0], requires_grad=True)
    z = (x * 3.0).sum()
    # y.backward() (one C call runs the whole pass) meets z.backward() on
    # another thread
    g, _ = _inside_together([y.backward, z.backward])
    assert (g.met, g.timed_out) == (2, 0)
    wa = (a_np <= b_np)
    wmax = (np.minimum(a_np, b_np) * 2.0 >= b_np - 1.0)
    np.testing.assert_array_equal(a.grad.numpy(), (2.0 * wa * wmax + 1.0).astype(np.float32))
    assert x.grad.numpy().tolist() == [3.0]


# ---- correctness under concurrency ----


def test_many_threads_ops_and_backward_correct():
    shapes = [((64, 33), (64, 33)), ((17, 1), (1, 40)), ((5, 7, 9), (9,)), ((1000,), ()), ((3, 1, 8), (3, 4, 1))]

    def work(k):
        rng = np.random.default_rng(100 + k)
        for it in range(25):
            sa, sb = shapes[(k + it) % len(shapes)]
            a_np = rng.integers(-5, 5, size=sa).astype(np.float64)  # many ties
            b_np = rng.integers(-5, 5, size=sb).astype(np.float64)
            a = pylucid.from_numpy(a_np, requires_grad=True)
            b = pylucid.tensor(b_np, requires_grad=True)
            use_max = (k + it) % 2
            y = ops.maximum(a, b) if use_max else ops.minimum(a, b)
            ref = np.maximum(a_np, b_np) if use_max else np.minimum(a_np, b_np)
            np.testing.assert_array_equal(y.detach().numpy(), ref)
            g_np = rng.standard_normal(ref.shape)
            (y * g_np).sum().backward()
            wa = (a_np >= b_np) if use_max else (a_np <= b_np)
            wa = np.broadcast_to(wa, ref.shape)
            ga = _sum_to(g_np * wa, sa)
            gb = _sum_to(g_np * ~wa, sb)
            np.testing.assert_allclose(a.grad.numpy(), ga, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(b.grad.numpy(), gb, rtol=1e-12, atol=1e-12)

    _run_threads(work, [(k,) for k in range(8)])


def _sum_to(x, shape):
    x = np.asarray(x)
    lead = x.ndim - len(shape)
    if lead:
        x = x.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1)
    if axes:
        x = x.sum(axis=axes, keepdims=True)
    return x.reshape(shape)


def test_concurrent_backward_into_shared_leaf():
    """Gradients from many threads accumulate into one leaf without loss."""
    n = 4096
    rng = np.random.default_rng(7)
    w_np = rng.integers(-3, 4, size=n).astype(np.float32)
    w = pylucid.from_numpy(w_np, requires_grad=True)
    bs = [rng.integers(-3, 4, size=n).astype(np.float32) for _ in range(8)]
    reps = 20

    def work(k):
        for _ in range(reps):
            ops.minimum(w, bs[k]).sum().backward()

    _run_threads(work, [(k,) for k in range(8)])
    expected = sum((w_np <= b).astype(np.float64) for b in bs) * reps
    np.testing.assert_array_equal(w.grad.numpy(), expected.astype(np.float32))


def test_concurrent_grad_on_one_retained_graph():
    rng = np.random.default_rng(11)
    a_np = rng.standard_normal((50, 20))
    b_np = rng.standard_normal((20,))
    c_np = rng.standard_normal((50, 20))
    a = pylucid.from_numpy(a_np, requires_grad=True)
    b = pylucid.from_numpy(b_np, requires_grad=True)
    y = (ops.minimum(a, b) * c_np).sum()
    wa = a_np <= b_np
    exp_a = c_np * wa
    exp_b = (c_np * ~wa).sum(axis=0)

    def work(k):
        for _ in range(30):
            ga, gb = pylucid.autograd.grad(y, [a, b], retain_graph=True)
            np.testing.assert_allclose(ga.numpy(), exp_a, rtol=1e-12)
            np.testing.assert_allclose(gb.numpy(), exp_b, rtol=1e-12)

    _run_threads(work, [(k,) for k in range(6)])
    assert a.grad is None and b.grad is None  # grad() never touches .grad


def test_concurrent_python_functions():
    class Scale(pylucid.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            ctx.save_for_backward(x)
            return x * k

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ctx.k, None

    def work(k):
        rng = np.random.default_rng(k)
        for _ in range(30):
            x_np = rng.standard_normal(100)
            x = pylucid.tensor(x_np, requires_grad=True)
            y = ops.minimum(Scale.apply(x, float(k + 1)), 0.0).sum()
            (g,) = pylucid.autograd.grad(y, x)
            np.testing.assert_array_equal(g.numpy(), (k + 1) * ((k + 1) * x_np <= 0))

    _run_threads(work, [(k,) for k in range(6)])


def test_grad_mode_is_per_thread():
    inside = threading.Event()
    release = threading.Event()
    seen = {}

    def no_grad_thread():
        with pylucid.no_grad():
            inside.set()
            release.wait(30)
            a = pylucid.tensor([1.0], requires_grad=True)
            seen["nograd"] = ops.minimum(a, 2.0).grad_fn

    def grad_thread():
        inside.wait(30)
        a = pylucid.tensor([1.0], requires_grad=True)
        seen["grad"] = ops.minimum(a, 2.0).grad_fn
        release.set()

    _run_threads(lambda f: f(), [(no_grad_thread,), (grad_thread,)])
    assert seen["nograd"] is None
    assert seen["grad"] is not None and seen["grad"].name() == "MinimumBackward"


def _two_threads_share_one_manager(cm, enter, a_mode, b_mode, read):
    """Thread A (state a_mode) enters cm, then thread B (state b_mode) enters
    the same object; A exits while B is inside, then B exits. Each thread
    must end with the state it had (docs/autograd.md: grad mode is per
    thread). The order is fixed by events, not by timing."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        enter(a_mode)
        with cm:
            a_in.set()
            assert b_in.wait(30)
        seen["a"] = read()
        a_out.set()

    def b():
        enter(b_mode)
        assert a_in.wait(30)
        with cm:
            b_in.set()
            assert a_out.wait(30)
            seen["b_inside"] = read()
        seen["b"] = read()

    _run_threads(lambda f: f(), [(a,), (b,)])
    assert seen["a"] == a_mode, seen
    assert seen["b"] == b_mode, seen
    return seen


@pytest.mark.parametrize("kind", ["no_grad", "enable_grad", "set_grad_enabled"])
def test_one_grad_mode_object_entered_by_two_threads(kind):
    outer = pylucid.is_grad_enabled()
    if kind == "no_grad":
        cm, inside, a_mode = pylucid.no_grad(), False, True
    elif kind == "enable_grad":
        cm, inside, a_mode = pylucid.enable_grad(), True, False
    else:
        cm, inside, a_mode = pylucid.set_grad_enabled(False), False, True
        pylucid.set_grad_enabled(outer)  # the constructor switched this thread
    assert pylucid.is_grad_enabled() == outer
    seen = _two_threads_share_one_manager(cm, pylucid.set_grad_enabled, a_mode, not a_mode,
                                          pylucid.is_grad_enabled)
    assert seen["b_inside"] == inside
    assert pylucid.is_grad_enabled() == outer  # this thread was never touched


def test_one_autocast_object_entered_by_two_threads():
    cm = pylucid.autocast(dtype=pylucid.bfloat16)

    def enter(on):
        if on:
            pylucid.autocast(dtype=pylucid.float16).__enter__()  # this worker thread ends with it on

    def read():
        return pylucid.get_autocast_dtype() is pylucid.float16

    seen = _two_threads_share_one_manager(cm, enter, True, False, read)
    assert seen["b_inside"] is False  # bfloat16 inside, not float16
    assert pylucid.get_autocast_dtype() is None


def test_set_grad_enabled_call_context_manager_and_decorator():
    assert pylucid.is_grad_enabled()
    pylucid.set_grad_enabled(False)
    assert not pylucid.is_grad_enabled()
    pylucid.set_grad_enabled(True)
    assert pylucid.is_grad_enabled()
    with pylucid.set_grad_enabled(False):
        assert not pylucid.is_grad_enabled()
        with pylucid.set_grad_enabled(True):
            assert pylucid.is_grad_enabled()
        assert not pylucid.is_grad_enabled()
    assert pylucid.is_grad_enabled()

    @pylucid.set_grad_enabled(False)
    def f():
        return pylucid.is_grad_enabled()

    assert pylucid.is_grad_enabled()  # decorating switches nothing
    assert f() is False
    assert pylucid.is_grad_enabled()
    with pytest.raises(ZeroDivisionError):
        with pylucid.set_grad_enabled(False):
            1 / 0
    assert pylucid.is_grad_enabled()  # restored on errors too


# ---- number of threads ----


def test_set_get_num_threads_roundtrip(restore_threads):
    for n in (1, 2, 3, 4, 8, 2):
        pylucid.set_num_threads(n)
        assert pylucid.get_num_threads() == n
    for bad in (0, -1):
        with pytest.raises(ValueError):
            pylucid.set_num_threads(bad)
    assert pylucid.get_num_threads() == 2  # unchanged by the refused calls


def _deterministic_results():
    rng = np.random.default_rng(1234)
    n = (1 << 20) + 12345
    x32 = (rng.standard_normal(n) * np.exp(rng.uniform(-8, 8, n))).astype(np.float32)
    x64 = rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n))
    x16 = rng.standard_normal(n).astype(np.float16)
    m = rng.standard_normal((1030, 1100)).astype(np.float32)
    a_np = rng.standard_normal((700, 1500)).astype(np.float32)
    b_np = rng.standard_normal((1, 1500)).astype(np.float32)
    out = {}
    out["sum32"] = pylucid.from_numpy(x32).sum()
    out["sum64"] = pylucid.from_numpy(x64).sum()
    out["sum16"] = pylucid.from_numpy(x16).sum()
    out["sum_strided"] = pylucid.from_numpy(x32[::-3]).sum()
    out["mean32"] = pylucid.from_numpy(x32).mean()
    out["sum_dim0"] = pylucid.from_numpy(m).sum(dim=0)
    out["sum_dim1"] = pylucid.from_numpy(m).sum(dim=1)
    out["sum_T"] = pylucid.from_numpy(m.T).sum(dim=1)
    a = pylucid.from_numpy(a_np, requires_grad=True)
    b = pylucid.from_numpy(b_np, requires_grad=True)
    y = ops.minimum(a, b)
    out["min"] = y.detach()
    g = rng.standard_normal((700, 1500)).astype(np.float32)
    y.backward(g)
    out["grad_a"] = a.grad
    out["grad_b"] = b.grad  # a broadcast reduction over 700 rows
    return {k: v.numpy().tobytes() for k, v in out.items()}, x32, x64


def test_results_bit_identical_for_any_thread_count(restore_threads):
    results = {}
    for n in (1, 2, 4):
        pylucid.set_num_threads(n)
        assert pylucid.get_num_threads() == n
        results[n], x32, x64 = _deterministic_results()
    for n in (2, 4):
        for k in results[1]:
            assert results[n][k] == results[1][k], "%s differs between 1 and %d threads" % (k, n)
    # and the sums are right (not just consistently wrong)
    s32 = np.frombuffer(results[1]["sum32"], np.float32)[0]
    np.testing.assert_allclose(s32, x32.astype(np.float64).sum(), rtol=1e-4)
    s64 = np.frombuffer(results[1]["sum64"], np.float64)[0]
    np.testing.assert_allclose(s64, np.sum(x64), rtol=1e-10)


@pytest.mark.parametrize("entry", ["backward", "grad"])
def test_two_threads_one_graph_without_retain_graph(entry):
    """docs/autograd.md: two threads run backward over one graph without
    retain_graph; exactly one succeeds, the other raises the retain_graph
    error, and the leaf gets one gradient, not two. The first thread holds
    the window open inside a Function's backward (an Event), so the race is
    taken every time rather than by luck (issue: both used to succeed)."""
    entered, gate = threading.Event(), threading.Event()
    calls: list = []

    class Slow(pylucid.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            calls.append(1)
            if len(calls) == 1:  # the first backward to get here waits
                entered.set()
                assert gate.wait(60)
            return g * 2.0

    x = pylucid.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = ops.minimum(Slow.apply(x), 5.0)  # the Function first, under a native node
    root = Slow.apply(y)                 # and as the root
    y.retain_grad()                      # retained non-leaves: their gradients are not added twice either
    root.retain_grad()
    g = pylucid.tensor([1.0, 10.0, 100.0])

    def run():
        if entry == "backward":
            root.backward(g)
            return None
        return pylucid.autograd.grad(root, x, g)[0]

    results: list = []
    first = threading.Thread(target=lambda: results.append(run()))
    first.start()
    assert entered.wait(60)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        run()
    gate.set()
    first.join(60)
    assert not first.is_alive() and len(results) == 1
    # d root / dx = 2 * [2x <= 5] * 2
    expected = np.array([4.0, 40.0, 0.0], dtype=np.float32)
    got = x.grad if entry == "backward" else results[0]
    np.testing.assert_array_equal(got.numpy(), expected)
    if entry == "backward":
        np.testing.assert_array_equal(y.grad.numpy(), [2.0, 20.0, 200.0])
        np.testing.assert_array_equal(root.grad.numpy(), g.numpy())
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        run()
