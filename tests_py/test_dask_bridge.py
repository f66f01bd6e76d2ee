"""pylucid.dask on a real dask.distributed cluster of spawned worker
processes: values and gradients equal pylucid's on the whole NumPy arrays
(bit for bit where no sum is involved), the first winner across chunks,
and clear errors on the client."""

from __future__ import annotations

import os
import re
import threading
from typing import Any, Callable

import numpy as np
import pytest

distributed = pytest.importorskip("dask.distributed")
import dask  # noqa: E402
import dask.array as da  # noqa: E402

import pylucid  # noqa: E402
import pylucid.dask as pdk  # noqa: E402
from pylucid import autograd, ops  # noqa: E402

BINARY = ["minimum", "maximum", "fmin", "fmax"]


@pytest.fixture(scope="module")
def client():
    # Worker processes are spawned (SPEC: a process forked after importing
    # pylucid refuses to run it); spawn is distributed's default, set here
    # explicitly.
    with dask.config.set({"distributed.worker.multiprocessing-method": "spawn"}):
        cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                           dashboard_address=None, memory_limit="1GiB")
        c = distributed.Client(cluster)
        try:
            yield c
        finally:
            c.close()
            cluster.close()


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """fn() run in a thread that must finish within seconds (nothing hangs);
    its exception is re-raised here."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "still running after %s s" % seconds
    if "error" in box:
        raise box["error"]
    return box.get("value")


def whole(name: str, *args: Any, **kw: Any) -> np.ndarray:
    ts = [pylucid.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args]
    return getattr(ops, name)(*ts, **kw).numpy()


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def data(shape, dtype=np.float32, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, size=shape).astype(dtype)  # small integers: many ties
    if np.issubdtype(np.dtype(dtype), np.floating):
        flat = x.reshape(-1)
        flat[rng.choice(flat.size, max(1, flat.size // 10), replace=False)] = np.nan
        flat[rng.choice(flat.size, max(1, flat.size // 10), replace=False)] = -0.0
    return x


def test_workers_are_spawned_processes_running_pylucid(client) -> None:
    assert dask.config.get("distributed.worker.multiprocessing-method") == "spawn"
    pids = client.run(os.getpid)
    assert len(pids) == 2 and os.getpid() not in pids.values()
    if os.path.exists("/proc/self/cmdline"):  # a spawned process runs multiprocessing's spawn_main
        cmdlines = client.run(lambda: open("/proc/self/cmdline", "rb").read())
        assert all(b"spawn_main" in c for c in cmdlines.values()), cmdlines
    # pylucid works in the workers (a forked one would raise RuntimeError)
    x = da.from_array(np.arange(6.0), chunks=2)
    assert same_bits(pdk.minimum(x, 2.5).compute(), np.minimum(np.arange(6.0), 2.5))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32])
def test_elementwise_values_equal_pylucid_bit_for_bit(client, dtype) -> None:
    A, B = data((9, 10), dtype, 1), data((9, 10), dtype, 2)
    C = data((1, 10), dtype, 3)
    results = {}
    for chunks in [((4, 5), (3, 7)), (2, 10), (9, 10)]:
        a = da.from_array(A, chunks=chunks[0] if isinstance(chunks[0], tuple) else chunks)
        b = da.from_array(B, chunks=chunks[1] if isinstance(chunks[0], tuple) else chunks)
        c = da.from_array(C, chunks=(1, 3))
        got = dask.compute(*[getattr(pdk, f)(a, b) for f in BINARY],
                           *[getattr(pdk, f)(a, c) for f in BINARY],
                           pdk.clamp(a, b, c), pdk.clamp(a, min=-1), pdk.clip(a, max=c), pdk.minimum(a, 2))
        want = ([whole(f, A, B) for f in BINARY] + [whole(f, A, C) for f in BINARY]
                + [whole("clamp", A, B, C), whole("clamp", A, -1), whole("clamp", A, None, C), whole("minimum", A, 2)])
        for i, (g, w) in enumerate(zip(got, want)):
            assert same_bits(g, w), (chunks, i)
        results[str(chunks)] = [g.tobytes() for g in got]
        again = dask.compute(pdk.fmin(a, b))[0]
        assert same_bits(again, got[2])  # repeated runs
    assert len({tuple(r) for r in results.values()}) == 1  # every chunking, the same bits


def test_mixed_dtypes_promote_as_pylucid(client) -> None:
    A, B = data((5, 6), np.float32), data((5, 6), np.float64, 4)
    I = np.arange(30, dtype=np.int64).reshape(5, 6) % 4
    a, b, i = (da.from_array(x, chunks=3) for x in (A, B, I))
    for got, want in [(pdk.minimum(a, b), whole("minimum", A, B)), (pdk.maximum(a, i), whole("maximum", A, I)),
                      (pdk.fmax(i, 1.5), whole("fmax", I, 1.5)), (pdk.clamp(i, 0, 2), whole("clamp", I, 0, 2))]:
        assert got.dtype == want.dtype
        assert same_bits(got.compute(), want)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_reductions_equal_pylucid_for_every_axis(client, dtype) -> None:
    A = data((7, 9, 5), dtype, 5)
    # every reduction the bridge offers (from the records), against pylucid
    # on the whole array
    reductions, values = _bridge_reductions()
    cases = [(f, ax, kd) for f in reductions for ax in [None, 0, 1, -1] for kd in [False, True]]
    cases += [(f, ax, False) for f in values for ax in [(1,), (0, 1, 2)]]
    arrays = [da.from_array(A, chunks=chunks) for chunks in [(2, 4, 3), (7, 9, 5), (3, 5, 5)]]
    graphs = [getattr(pdk, f)(a, ax, kd, split_every=2) for a in arrays for f, ax, kd in cases]
    got = dask.compute(*graphs)  # one round trip
    for k, g in enumerate(got):
        f, ax, kd = cases[k % len(cases)]
        want = whole(f, A, ax, kd)
        assert same_bits(g, want), (k // len(cases), f, ax, kd, g, want)


def test_the_first_winner_across_chunk_boundaries(client) -> None:
    # 2x2 chunks of 2x2: the minimum -1 appears at (0, 3) in chunk (0, 1)
    # and at (1, 0) in chunk (0, 0); row-major order puts (0, 3) first, the
    # chunk grid puts chunk (0, 0) first.
    A = np.zeros((4, 4), np.float32)
    A[1, 0] = A[0, 3] = A[3, 3] = -1
    a = da.from_array(A, chunks=2)
    assert pdk.argmin(a).compute() == 3 == np.argmin(A)
    assert pdk.argmin(a, axis=0).compute().tolist() == [1, 0, 0, 0]
    # ties of +0.0 and -0.0 straddling a boundary: the first one's bits
    Z = np.array([1.0, 0.0, -0.0, -0.0, 0.0, 2.0], np.float32)
    for chunks in [1, 4]:
        z = da.from_array(Z, chunks=chunks)
        assert same_bits(pdk.amin(z).compute(), np.float32(0.0))
        assert same_bits(pdk.amin(z[2:]).compute(), np.float32(-0.0))
        assert pdk.argmin(z, split_every=2).compute() == 1
    # NaN wins amax/argmax (the first NaN, with its own payload), loses nothing in fmax
    n1 = np.frombuffer(np.uint32(0x7FC00001).tobytes(), np.float32)[0]
    n2 = np.frombuffer(np.uint32(0x7FC00002).tobytes(), np.float32)[0]
    N = np.array([[5.0, 9.0, 1.0], [2.0, 9.0, 7.0], [3.0, 3.0, 9.0]], np.float32)
    N[1, 2], N[2, 0] = n1, n2
    for chunks in [1, (2, 1)]:
        x = da.from_array(N, chunks=chunks)
        assert same_bits(pdk.amax(x).compute(), np.float32(n1))
        assert pdk.argmax(x).compute() == 5
        assert same_bits(pdk.amax(x, axis=0).compute(), whole("amax", N, 0))
        assert pdk.argmax(x, axis=1).compute().tolist() == [1, 2, 0]
        assert pdk.argmin(x, axis=0, keepdims=True).compute().tolist() == [[2, 2, 1]]  # NaN wins min too
        assert pdk.argmax(x, axis=0).compute().tolist() == [2, 0, 1]
    # a tie across the chunks of one axis
    T = np.array([3.0, 7.0, 1.0, 7.0, 7.0, 1.0], np.float32)
    for chunks in [1, 2, 3]:
        t = da.from_array(T, chunks=chunks)
        assert (pdk.argmax(t).compute(), pdk.argmin(t).compute()) == (1, 2)


def pl_grads(loss_fn: Callable[..., Any], *arrays: np.ndarray):
    ts = [pylucid.from_numpy(a.copy(), True) for a in arrays]
    return [g.numpy() for g in autograd.grad(loss_fn(*ts), ts)]


def test_gradients_bit_for_bit_without_sums(client) -> None:
    A, B, L = data((8, 10), np.float32, 6), data((8, 10), np.float32, 7), data((8, 10), np.float32, 8)
    cases = [
        (lambda a, b: pdk.minimum(a, b).sum(), lambda a, b: ops.minimum(a, b).sum()),
        (lambda a, b: pdk.fmax(a, b).mean(), lambda a, b: ops.fmax(a, b).mean()),
        (lambda a, b: pdk.clamp(pdk.maximum(a, b), -1.0, 2.0).sum(),
         lambda a, b: ops.clamp(ops.maximum(a, b), -1.0, 2.0).sum()),
        (lambda a, b: pdk.amax(pdk.fmin(a, b), axis=1).sum(), lambda a, b: ops.amax(ops.fmin(a, b), 1).sum()),
        (lambda a, b: pdk.amin(pdk.minimum(a, b), axis=0, keepdims=True).mean(),
         lambda a, b: ops.amin(ops.minimum(a, b), 0, True).mean()),
        (lambda a, b: pdk.amax(pdk.clamp(a, b)), lambda a, b: ops.amax(ops.clamp(a, b))),
    ]
    chunkings = [(3, 4), (8, 2)]
    graphs = []
    for fd, _ in cases:
        for chunks in chunkings:
            a, b = da.from_array(A, chunks=chunks), da.from_array(B, chunks=(4, 5))
            graphs += pdk.grad(fd, a, b)
    got = dask.compute(*graphs)  # one round trip
    for k, (_, fp) in enumerate(cases):
        want = pl_grads(fp, A, B)
        runs = []
        for j, chunks in enumerate(chunkings):
            pair = got[2 * (k * len(chunkings) + j):][:2]
            for g, w in zip(pair, want):
                assert same_bits(g, w), (k, chunks)
            runs.append(b"".join(g.tobytes() for g in pair))
        assert len(set(runs)) == 1
    # clamp with array bounds: each bound gets its gradient where it wins
    want = pl_grads(lambda x, lo, hi: ops.clamp(x, lo, hi).sum(), A, B, L + 2)
    got = dask.compute(*pdk.grad(lambda x, lo, hi: pdk.clamp(x, lo, hi).sum(),
                                 *(da.from_array(v, chunks=3) for v in (A, B, L + 2))))
    assert all(same_bits(g, w) for g, w in zip(got, want))


def test_reduction_gradients_go_to_the_first_winner_across_chunks(client) -> None:
    A = np.zeros((4, 4), np.float32)
    A[1, 0] = A[0, 3] = A[3, 3] = -1
    A[2, 1] = A[2, 2] = np.nan
    cases = [(name, ax, chunks) for ax in [None, 0, 1] for name in ["amin", "amax"] for chunks in [1, 3, (4, 1)]]
    graphs = [pdk.grad(lambda x: getattr(pdk, name)(x, ax, split_every=2).sum(), da.from_array(A, chunks=chunks))[0]
              for name, ax, chunks in cases]
    for (name, ax, chunks), g in zip(cases, dask.compute(*graphs)):
        want = pl_grads(lambda x: getattr(ops, name)(x, ax).sum(), A)[0]
        assert same_bits(g, want), (name, ax, chunks)
    (g,) = pdk.grad(lambda x: pdk.amax(x), da.from_array(A, chunks=2))
    assert np.argwhere(g.compute()).tolist() == [[2, 1]]  # the first NaN


def test_broadcast_gradients_are_summed_by_dask_within_rounding(client) -> None:
    A = np.random.default_rng(9).standard_normal((64, 48)).astype(np.float32)
    R = np.random.default_rng(10).standard_normal((1, 48)).astype(np.float32)
    C = np.random.default_rng(11).standard_normal((64, 1)).astype(np.float32)
    want = pl_grads(lambda a, r, c: ops.clamp(ops.minimum(a, r), c).mean(), A, R, C)
    a, r, c = da.from_array(A, chunks=(16, 12)), da.from_array(R, chunks=(1, 24)), da.from_array(C, chunks=8)
    got = dask.compute(*pdk.grad(lambda a, r, c: pdk.clamp(pdk.minimum(a, r), c).mean(), a, r, c))
    assert same_bits(got[0], want[0])  # not broadcast: no sum
    for g, w in zip(got[1:], want[1:]):
        assert g.shape == w.shape and g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-8)
    # a 1-d operand broadcast over rows, and a scalar bound (no gradient)
    V = R[0]
    wa, wv = pl_grads(lambda a, v: ops.maximum(a, v).sum(), A, V)
    ga, gv = dask.compute(*pdk.grad(lambda a, v: pdk.maximum(a, v).sum(), a, da.from_array(V, chunks=10)))
    assert same_bits(ga, wa) and gv.shape == (48,)
    np.testing.assert_allclose(gv, wv, rtol=0, atol=0)  # sums of 0s and 1s are exact


def test_an_input_the_loss_ignores_gets_zeros_and_a_reused_one_accumulates(client) -> None:
    A, B = data((6, 6), np.float32, 12), data((6, 6), np.float32, 13)
    a, b = da.from_array(A, chunks=3), da.from_array(B, chunks=3)
    ga, gb = dask.compute(*pdk.grad(lambda a, b: pdk.amax(a).sum(), a, b))
    assert not gb.any() and gb.shape == B.shape
    want = pl_grads(lambda a: ops.minimum(ops.maximum(a, 0.5), a).sum(), A)[0]
    (g,) = dask.compute(*pdk.grad(lambda a: pdk.minimum(pdk.maximum(a, 0.5), a).sum(), a))
    np.testing.assert_array_equal(g, want)
    # an array not derived from the inputs is a constant, whatever Dask made it with
    c = da.from_array(B, chunks=2) * 2
    want = pl_grads(lambda a: ops.fmin(a, pylucid.from_numpy(B * 2)).sum(), A)[0]
    (g,) = dask.compute(*pdk.grad(lambda a: pdk.fmin(a, c).sum(), a))
    assert same_bits(g, want)


def test_bad_input_raises_clear_errors_on_the_client(client) -> None:
    a = da.from_array(np.ones((4, 3), np.float32), chunks=2)
    b = da.from_array(np.ones((5, 3), np.float32), chunks=2)
    with pytest.raises(ValueError, match=r"\(4, 3\) and \(5, 3\)"):
        within(30, lambda: pdk.minimum(a, b))
    with pytest.raises(ValueError, match="do not broadcast"):
        within(30, lambda: pdk.clamp(a, da.ones((2,), chunks=1)))
    with pytest.raises(TypeError, match="complex64"):
        within(30, lambda: pdk.maximum(a, da.ones((4, 3), dtype=np.complex64, chunks=2)))
    with pytest.raises(TypeError, match="uint32"):
        within(30, lambda: pdk.amax(da.ones((4,), dtype=np.uint32, chunks=2)))
    with pytest.raises(TypeError):
        within(30, lambda: pdk.fmin(a, np.array(["x"] * 3)))
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        within(30, lambda: pdk.argmax(a[a[:, 0] > 0]))
    with pytest.raises(ValueError):
        within(30, lambda: pdk.amin(da.ones((0, 3), chunks=2), axis=0))  # zero-size slices
    with pytest.raises(NotImplementedError):
        within(30, lambda: pdk.amin(da.ones((2, 3, 4), chunks=2), axis=(0, 1)))
    with pytest.raises((IndexError, ValueError)):
        within(30, lambda: pdk.argmin(a, axis=2))
    with pytest.raises(ValueError, match="min and max"):
        pdk.clamp(a)
    # gradients
    with pytest.raises(RuntimeError, match="0-d"):
        within(30, lambda: pdk.grad(lambda a: pdk.minimum(a, 1.0), a))
    with pytest.raises(RuntimeError, match="0-d"):
        within(30, lambda: pdk.grad(lambda a: pdk.amax(a, axis=0).sum(axis=0, keepdims=True), a))
    with pytest.raises(ValueError, match="X.sum"):
        within(30, lambda: pdk.grad(lambda a: (pdk.minimum(a, 1.0) * 2).sum(), a))
    with pytest.raises(ValueError, match="other than"):
        within(30, lambda: pdk.grad(lambda a: pdk.minimum(a * 2, 1.0).sum(), a))
    with pytest.raises(TypeError, match="floating"):
        within(30, lambda: pdk.grad(lambda i: pdk.minimum(i, 1).sum(), da.ones((3,), dtype=np.int32, chunks=1)))
    with pytest.raises(TypeError, match="Dask array"):
        within(30, lambda: pdk.grad(lambda a: 1.0, a))


def test_a_worker_error_reaches_the_client(client) -> None:
    # the declared dtype lies: the chunks are complex; pylucid raises on the
    # worker and the error comes back, nothing hangs
    lie = da.ones((4,), chunks=2).map_blocks(lambda c: c.astype(np.complex64), dtype=np.float64)
    with pytest.raises(TypeError, match="complex"):
        within(60, lambda: pdk.minimum(lie, 0.0).compute())
    assert pdk.minimum(da.ones((4,), chunks=2), 0.5).compute().tolist() == [0.5] * 4  # still working


def test_the_module_docstring_example_runs(client) -> None:
    import doctest

    result = doctest.testmod(pdk, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 4 and result.failed == 0, result


# ---- edge cases of the reductions (found by a hostile run) ----


@pytest.mark.parametrize("axis", [(5,), (-3,), (2,), (0, 5), 5, -3])
def test_an_axis_out_of_range_raises_as_pylucid_does(client, axis) -> None:
    # Before: a tuple axis wrapped silently (axis=(5,) reduced axis 1).
    a = da.from_array(np.arange(6.0).reshape(2, 3), chunks=1)
    for f in (pdk.amax, pdk.amin):
        with pytest.raises(np.exceptions.AxisError, match="out of range") as e:
            within(30, lambda: f(a, axis=axis))
        assert isinstance(e.value, ValueError) and isinstance(e.value, IndexError)  # pylucid's type and Dask's
    with pytest.raises(ValueError, match="out of range"):
        ops.amax(pylucid.tensor(np.arange(6.0).reshape(2, 3)), 5)  # what pylucid says


def test_reductions_of_a_0d_array_are_0d(client) -> None:
    # Before: the result reported shape () but computed to shape (1,).
    A = np.float32(3.5)
    z = da.from_array(A)
    for f, kd in [(f, kd) for f in ("amin", "amax", "argmin", "argmax") for kd in (False, True)]:
        r = getattr(pdk, f)(z, keepdims=kd)
        got = r.compute()
        assert r.shape == () and np.shape(got) == (), (f, kd, np.shape(got))
        assert same_bits(np.asarray(got), whole(f, np.asarray(A), None, kd)), (f, kd)
    loss = pdk.amax(z)
    (g,) = pdk.grad(lambda z: pdk.amax(z), z)
    assert g.shape == () and same_bits(np.asarray(g.compute()), np.array(1.0, np.float32))
    assert float(loss.compute()) == 3.5


@pytest.mark.parametrize("chunks", [((2, 0, 3),), ((0, 5),), ((5, 0),), ((1, 0, 0, 4),)])
def test_zero_size_chunks_are_skipped(client, chunks) -> None:
    # Before: "cannot reduce over a zero-size slice" from inside a task
    # (x[x > 0].compute_chunk_sizes() makes such chunks).
    A = np.array([1.0, 5.0, np.nan, 5.0, -2.0])
    B = np.array([1.0, 5.0, 2.0, 5.0, -2.0])
    for X in (A, B):
        x = da.from_array(X, chunks=chunks)
        assert x.chunks == chunks
        for f in ("amin", "amax", "argmin", "argmax"):
            assert same_bits(np.asarray(getattr(pdk, f)(x).compute()), whole(f, X)), (f, X)
            assert same_bits(np.asarray(getattr(pdk, f)(x, axis=0).compute()), whole(f, X, 0)), (f, X)
        for f in ("amin", "amax"):
            (g,) = pdk.grad(lambda x: getattr(pdk, f)(x).sum(), x)
            t = pylucid.tensor(X, requires_grad=True)
            getattr(ops, f)(t).backward()
            assert same_bits(g.compute(), t.grad.numpy()), (f, X)


def test_zero_size_chunks_in_two_dims(client) -> None:
    M = data((3, 4), np.float64, 7)
    m = da.from_array(M, chunks=((1, 0, 2), (2, 0, 2)))
    for f in ("amin", "amax", "argmin", "argmax"):
        for ax in (None, 0, 1):
            assert same_bits(np.asarray(getattr(pdk, f)(m, axis=ax).compute()), whole(f, M, ax)), (f, ax)
    (g,) = pdk.grad(lambda m: pdk.amax(m, axis=1).sum(), m)
    t = pylucid.tensor(M, requires_grad=True)
    ops.amax(t, 1).sum().backward()
    assert same_bits(g.compute(), t.grad.numpy())
    y = da.from_array(np.array([-1.0, 2.0, -3.0, 4.0, 5.0, -6.0]), chunks=2)
    pos = y[y > 0].compute_chunk_sizes()
    assert pdk.amin(pos).compute() == 2.0 and pdk.argmax(pos).compute() == 2


def _bridge_reductions() -> tuple[list[str], list[str]]:
    """The reductions pylucid.dask offers, read from the op records: all of
    them (values and positions) and the value ones."""
    records = [s for s in pylucid._lib.schema_table() if "dask" in s["bridges"]]
    reductions = [s["name"] for s in records if s["signature"] in ("reduction", "arg")]
    assert {"amin", "amax", "argmin", "argmax"} <= set(reductions)
    return reductions, [s["name"] for s in records if s["signature"] == "reduction"]


def test_reductions_with_nan_chunks_and_nan_slices_equal_pylucid(client) -> None:
    # Chunks of NaNs only, a row of NaNs only and signed zeros, for every
    # reduction of the records: the result (bits) or the error pylucid
    # gives on the whole array, and the gradient pylucid gives.
    X = np.array([[np.nan, np.nan, 2.0, np.nan], [np.nan, np.nan, np.nan, np.nan], [-0.0, 5.0, 0.0, -1.0]])
    x = da.from_array(X, chunks=(1, 2))
    reductions, values = _bridge_reductions()
    for f in reductions:
        for ax in (None, 0, 1):
            try:
                want = whole(f, X, ax)
            except ValueError as e:
                with pytest.raises(ValueError, match=re.escape(str(e).split(":")[-1].strip())):
                    within(60, lambda: getattr(pdk, f)(x, axis=ax).compute())
                continue
            assert same_bits(np.asarray(getattr(pdk, f)(x, axis=ax).compute()), want), (f, ax)
    for f in values:
        (g,) = pdk.grad(lambda x: getattr(pdk, f)(x, axis=1).sum(), x)
        t = pylucid.tensor(X, requires_grad=True)
        getattr(ops, f)(t, 1).sum().backward()
        assert same_bits(g.compute(), t.grad.numpy()), f
