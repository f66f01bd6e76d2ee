"""Every row of docs/errors.md: a clear exception of the right class — never a
crash, a hang or a silent wrong answer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import pylucid
from childproc import child_env, run_code
from pylucid import ops



def _assert_works():
    """The library still gives right answers (used after every failure)."""
    a = pylucid.tensor([1.0, 5.0, -2.0], requires_grad=True)
    y = ops.minimum(a, 3.0)
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 3.0, -2.0])
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 0.0, 1.0])


def _shape_in(msg: str, shape) -> bool:
    shape = tuple(shape)
    forms = {
        str(shape),
        "[%s]" % " ".join(map(str, shape)),
        "[%s]" % ", ".join(map(str, shape)),
        "(%s)" % ", ".join(map(str, shape)),
    }
    return any(f in msg for f in forms)


def _run_script(code: str, timeout: float = 120.0) -> "subprocess.CompletedProcess[str]":
    return run_code(code, timeout)


# ---- shapes that do not broadcast ----


BAD_PAIRS = [
    ((2, 3), (4,)),
    ((2, 3), (3, 2)),
    ((5,), (4,)),
    ((0,), (2,)),
    ((2, 1, 4), (3, 5)),
    ((7, 1, 3), (2, 6, 2, 3)),
]


@pytest.mark.parametrize("sa,sb", BAD_PAIRS)
@pytest.mark.parametrize("op", [ops.minimum, ops.maximum, ops.add, ops.mul])
def test_non_broadcasting_shapes_value_error_with_both_shapes(op, sa, sb):
    a = np.ones(sa, np.float32)
    b = np.ones(sb, np.float32)
    for x, y in ((a, b), (pylucid.from_numpy(a), pylucid.tensor(b)), (b, a)):
        with pytest.raises(ValueError) as ei:
            op(x, y)
        msg = str(ei.value)
        assert _shape_in(msg, sa), msg
        assert _shape_in(msg, sb), msg


def test_non_broadcasting_with_grad_and_in_backward_graph():
    a = pylucid.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError) as ei:
        ops.minimum(a, np.ones((3, 3)))
    assert _shape_in(str(ei.value), (2, 3)) and _shape_in(str(ei.value), (3, 3))
    assert a.grad is None
    _assert_works()


# ---- unsupported dtypes ----


UNSUPPORTED = [
    ("complex128", np.array([1 + 2j, 3j])),
    ("complex64", np.array([1 + 2j, 3j], np.complex64)),
    ("object", np.array([1, "a"], dtype=object)),
    ("<U", np.array(["a", "bc"])),
    ("datetime64", np.array(["2020-01-01", "2021-02-03"], dtype="datetime64[D]")),
    ("timedelta64", np.array([1, 2], dtype="timedelta64[s]")),
    ("S", np.array([b"a", b"b"])),
]


@pytest.mark.parametrize("name,arr", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_dtype_type_error_naming_dtype(name, arr):
    entry_points = [
        lambda: pylucid.from_numpy(arr),
        lambda: pylucid.tensor(arr),
        lambda: ops.minimum(arr, 1.0),
        lambda: ops.maximum(pylucid.zeros(arr.shape), arr),
        lambda: ops.minimum(pylucid.zeros(arr.shape), arr[::-1]),
    ]
    for f in entry_points:
        with pytest.raises(TypeError) as ei:
            f()
        msg = str(ei.value)
        assert name in msg or str(arr.dtype) in msg, msg
    _assert_works()


@pytest.mark.parametrize("dt", [np.complex64, np.complex128, "datetime64[s]", object])
def test_unsupported_dtype_as_dtype_argument(dt):
    name = np.dtype(dt).name
    with pytest.raises(TypeError, match=re.escape(name.split("[")[0])):
        pylucid.zeros((2,), dt)
    with pytest.raises(TypeError, match=re.escape(name.split("[")[0])):
        pylucid.tensor([1.0], dtype=dt)
    with pytest.raises(TypeError, match=re.escape(name.split("[")[0])):
        pylucid.tensor([1.0]).to(dt)


def test_python_complex_and_str_scalars_rejected():
    with pytest.raises(TypeError, match="complex"):
        ops.minimum(pylucid.zeros(2), 1j)
    with pytest.raises(TypeError, match="complex"):
        pylucid.tensor([1j, 2])
    with pytest.raises(TypeError, match="str|<U"):
        ops.minimum(pylucid.zeros(2), "abc")
    with pytest.raises(TypeError, match=re.escape("minimum(): argument 'b' must be a Tensor, array or number, "
                                                  "not NoneType")):
        ops.minimum(pylucid.zeros(2), None)


# ---- requires_grad on integer / bool ----


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_, np.uint8, np.int8, np.int16])
def test_requires_grad_on_integer_or_bool(dtype):
    arr = np.array([1, 0, 1], dtype=dtype)
    attempts = [
        lambda: pylucid.tensor(arr, requires_grad=True),
        lambda: pylucid.from_numpy(arr, requires_grad=True),
        lambda: pylucid.tensor(arr).requires_grad_(),
        lambda: setattr(pylucid.from_numpy(arr), "requires_grad", True),
        lambda: pylucid.zeros((3,), dtype).requires_grad_(True),
    ]
    for f in attempts:
        with pytest.raises((RuntimeError, TypeError)) as ei:
            f()
        assert "grad" in str(ei.value).lower()
    t = pylucid.from_numpy(arr)
    with pytest.raises((RuntimeError, TypeError)):
        t.requires_grad_()
    assert t.requires_grad is False
    # the tensor still works, forward only
    np.testing.assert_array_equal(ops.minimum(t, t).numpy(), arr)


def test_requires_grad_python_int_and_bool_data():
    for data in ([1, 2, 3], [True, False]):
        with pytest.raises((RuntimeError, TypeError)):
            pylucid.tensor(data, requires_grad=True)


# ---- backward misuse ----


def test_backward_non_scalar_without_gradient():
    a = pylucid.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = ops.minimum(a, 2.0)
    with pytest.raises(RuntimeError, match="scalar"):
        y.backward()
    with pytest.raises(RuntimeError, match="scalar"):
        pylucid.autograd.grad(y, a)
    m = ops.minimum(pylucid.tensor(np.ones((2, 2)), requires_grad=True), 0.0)
    with pytest.raises(RuntimeError):
        m.backward()
    # the graph was not consumed by the failed call
    y.backward(np.ones(3, np.float32))
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0, 0.0])


@pytest.mark.parametrize("gshape", [(2,), (4,), (3, 1), (1, 3), (), (3, 3)])
def test_backward_gradient_wrong_shape(gshape):
    a = pylucid.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = ops.minimum(a, 2.0)
    g = np.ones(gshape, np.float32)
    with pytest.raises(RuntimeError) as ei:
        y.backward(g)
    assert "shape" in str(ei.value)
    with pytest.raises(RuntimeError):
        pylucid.autograd.grad(y, a, grad_outputs=[g])
    assert a.grad is None
    y.backward(np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 2.0, 0.0])


def test_backward_scalar_with_vector_gradient():
    a = pylucid.tensor([1.0, 2.0], requires_grad=True)
    s = ops.minimum(a, 1.5).sum()
    with pytest.raises(RuntimeError, match="shape"):
        s.backward(np.ones(2, np.float32))


def test_backward_on_tensor_without_graph():
    t = pylucid.tensor([1.0, 2.0]).sum()
    with pytest.raises(RuntimeError, match="grad"):
        t.backward()


# ---- second backward after the graph was freed ----


def _graphs():
    def plain(a, b):
        return ops.minimum(a, b).sum()

    def chain(a, b):
        return (ops.maximum(ops.minimum(a, b) * 2.0, a - 1.0) / 3.0).mean()

    return [plain, chain]


@pytest.mark.parametrize("build", _graphs(), ids=["plain", "chain"])
def test_second_backward_raises_retain_graph(build):
    a = pylucid.tensor(np.array([1.0, 4.0, 2.0]), requires_grad=True)
    b = pylucid.tensor(np.array([3.0, 0.0, 2.0]), requires_grad=True)
    y = build(a, b)
    y.backward()
    first = a.grad.numpy().copy()
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        y.backward()
    np.testing.assert_array_equal(a.grad.numpy(), first)  # nothing half-accumulated
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        pylucid.autograd.grad(y, a)

    # with retain_graph=True a second (and third) pass works and accumulates
    a.grad = None
    b.grad = None
    y = build(a, b)
    y.backward(retain_graph=True)
    g1a, g1b = a.grad.numpy().copy(), b.grad.numpy().copy()
    y.backward(retain_graph=True)
    np.testing.assert_allclose(a.grad.numpy(), 2 * g1a)
    np.testing.assert_allclose(b.grad.numpy(), 2 * g1b)
    (ga,) = pylucid.autograd.grad(y, a, retain_graph=True)
    np.testing.assert_allclose(ga.numpy(), g1a)
    y.backward()  # last use frees
    np.testing.assert_allclose(a.grad.numpy(), 3 * g1a)
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        y.backward()


def test_second_grad_call_raises_retain_graph():
    a = pylucid.tensor([1.0, 2.0], requires_grad=True)
    y = ops.minimum(a, 1.5).sum()
    pylucid.autograd.grad(y, a)
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        pylucid.autograd.grad(y, a)


# ---- shapes: overflow and negative dims ----


@pytest.mark.parametrize("shape", [
    (2**40, 2**40),
    (2**31, 2**31, 2**31),
    (2**62, 4),
    (2**63 - 1, 2),
    (3, 2**61, 3),
])
def test_element_count_overflow_value_error(shape):
    with pytest.raises(ValueError):
        pylucid.zeros(shape)
    _assert_works()


def test_byte_count_overflow_value_error():
    # the element count fits int64 but the byte count does not
    for dt in (pylucid.float32, pylucid.float64, pylucid.int64):
        with pytest.raises(ValueError):
            pylucid.zeros((2**61,), dt)


def test_dim_beyond_int64_value_error():
    for shape in ((2**64,), (3, 2**63), (-(2**63) - 1,)):
        with pytest.raises(ValueError):
            pylucid.zeros(shape)


@pytest.mark.parametrize("shape", [(-1,), (3, -2), (-5, 0), (0, -1), (2, 3, -(2**40))])
def test_negative_dims_value_error(shape):
    with pytest.raises(ValueError, match="negative"):
        pylucid.zeros(shape)
    _assert_works()


def test_broadcast_result_overflow_value_error():
    """Zero-stride NumPy views make huge logical shapes cheaply; a result whose
    element count overflows int64 must be refused up front."""
    one = np.float32(1.0)
    pairs = [
        (np.broadcast_to(one, (2**40, 1)), np.broadcast_to(one, (1, 2**40))),
        (np.broadcast_to(one, (2**32, 1, 1)), np.broadcast_to(one, (1, 2**32, 1))),
    ]
    for x, y in pairs:
        with pytest.raises(ValueError):
            ops.minimum(x, y)
    _assert_works()


def test_impossible_allocation_is_an_exception_not_a_crash():
    """A native failure on a public path (allocation of 2**62 bytes)."""
    big = pylucid.from_numpy(np.broadcast_to(np.float32(1.0), (2**30, 2**30)))
    assert big.shape == (2**30, 2**30)
    with pytest.raises((RuntimeError, MemoryError, ValueError)) as ei:
        ops.minimum(big, 0.5)
    assert "memory" in str(ei.value).lower() or "bytes" in str(ei.value).lower()
    _assert_works()


@pytest.mark.parametrize("nbytes", [2**62, 2**63 - 2**20, 2**63 - 1])
def test_allocations_near_the_int64_limit_are_out_of_memory(nbytes):
    # Sizes whose rounding to a block size overflowed gave a Go panic
    # (index out of range) instead of out of memory (found by review).
    with pytest.raises((RuntimeError, MemoryError)) as ei:
        pylucid.zeros((nbytes,), dtype=pylucid.uint8)
    assert "out of memory" in str(ei.value)
    assert "panic" not in str(ei.value).lower()
    _assert_works()


# ---- Go panics ----


def test_go_panic_becomes_exception_and_process_keeps_running():
    for _ in range(50):
        rc = pylucid._native.lucid_debug_panic()
        assert rc == 4  # LUCID_EPANIC
        msg = pylucid._lib.error_message()
        assert "panic" in msg.lower()
        assert "nil pointer" in msg or "runtime error" in msg
        with pytest.raises(RuntimeError, match="panic"):
            pylucid._lib.check(rc)
    _assert_works()
    # and errors after a panic report their own message, not the stale one
    with pytest.raises(ValueError) as ei:
        ops.minimum(np.ones(2, np.float32), np.ones(3, np.float32))
    assert "panic" not in str(ei.value)
    _assert_works()


def test_go_panic_messages_are_per_thread():
    errors = []
    barrier = threading.Barrier(6)

    def worker(k):
        try:
            barrier.wait()
            for _ in range(100):
                if k % 2:
                    rc = pylucid._native.lucid_debug_panic()
                    assert rc == 4
                    assert "panic" in pylucid._lib.error_message()
                else:
                    try:
                        ops.minimum(np.ones((2, k + 3), np.float32), np.ones((k + 4,), np.float32))
                    except ValueError as e:
                        assert _shape_in(str(e), (2, k + 3)), str(e)
                        assert "panic" not in str(e)
                    else:
                        raise AssertionError("no ValueError")
                a = pylucid.tensor([float(k), 1.0])
                assert ops.maximum(a, 0.5).numpy().tolist() == [max(k, 0.5), 1.0]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    ths = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(120)
    assert not any(t.is_alive() for t in ths)
    assert errors == []
    _assert_works()


def test_python_exception_in_function_backward_leaves_library_usable():
    class Boom(pylucid.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            raise ZeroDivisionError("boom in backward")

    before = pylucid._stats()["handles"]
    for _ in range(5):
        a = pylucid.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(ZeroDivisionError, match="boom"):
            ops.minimum(Boom.apply(a), 5.0).sum().backward()
        del a
    _assert_works()
    pylucid._collect()
    assert pylucid._stats()["handles"] <= before + 2  # the aborted runs were released


# ---- fork ----


FORK_SCRIPT = r"""
import os, sys, time
import numpy as np
import pylucid
from pylucid import ops

a = pylucid.tensor([1.0, 5.0], requires_grad=True)
y = ops.minimum(a, 3.0)
assert y.detach().numpy().tolist() == [1.0, 3.0]

checks = {
    "op on existing tensor": lambda: ops.minimum(a, 2.0),
    "operator": lambda: a + 1.0,
    "numpy input op": lambda: ops.maximum(np.ones(3, np.float32), 0.0),
    "tensor()": lambda: pylucid.tensor([1.0, 2.0]),
    "from_numpy": lambda: pylucid.from_numpy(np.ones(4)),
    "zeros": lambda: pylucid.zeros((2, 2)),
    "sum": lambda: y.sum(),
    "backward": lambda: y.sum().backward(),
    "grad": lambda: pylucid.autograd.grad(y.sum(), a),
    "numpy()": lambda: y.detach().numpy(),
    "set_num_threads": lambda: pylucid.set_num_threads(1),
    "get_num_threads": lambda: pylucid.get_num_threads(),
}

pid = os.fork()
if pid == 0:
    code = 0
    for name, f in checks.items():
        try:
            f()
        except RuntimeError as e:
            msg = str(e)
            if "spawn" not in msg or "forkserver" not in msg:
                print("child: %s: message does not explain spawn/forkserver: %s" % (name, msg), flush=True)
                code = 3
        except BaseException as e:
            print("child: %s raised %r, not RuntimeError" % (name, e), flush=True)
            code = 4
        else:
            print("child: %s did not raise" % name, flush=True)
            code = 2
    del a, y  # finalizers must not call into the dead runtime (no hang at exit)
    sys.stdout.flush()
    sys.exit(code)  # normal interpreter shutdown in the child
_, status = os.waitpid(pid, 0)
print("CHILD_EXIT", os.waitstatus_to_exitcode(status), flush=True)
# the parent is unaffected
b = pylucid.tensor([4.0, -1.0], requires_grad=True)
ops.maximum(b, 0.0).sum().backward()
print("PARENT_OK", b.grad.numpy().tolist(), flush=True)
"""


def test_os_fork_child_raises_runtime_error_at_once():
    r = _run_script(FORK_SCRIPT, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CHILD_EXIT 0" in r.stdout, r.stdout + r.stderr
    assert "PARENT_OK [1.0, 0.0]" in r.stdout, r.stdout + r.stderr


MP_SCRIPT = r"""
import multiprocessing as mp
import sys
import numpy as np
import pylucid
from pylucid import ops


def work(q):
    try:
        r = ops.minimum(np.array([1.0, 5.0], np.float32), 3.0)
        q.put(("ok", r.numpy().tolist()))
    except RuntimeError as e:
        q.put(("RuntimeError", str(e)))
    except BaseException as e:
        q.put(("other", repr(e)))


def run(method):
    ctx = mp.get_context(method)
    q = ctx.Queue()
    p = ctx.Process(target=work, args=(q,))
    p.start()
    res = q.get(timeout=60)
    p.join(60)
    return res, p.exitcode


if __name__ == "__main__":
    ops.minimum(pylucid.tensor([1.0]), 0.0)  # the runtime is up in the parent
    (kind, msg), code = run("fork")
    print("FORK", kind, code, flush=True)
    assert kind == "RuntimeError", (kind, msg)
    assert "spawn" in msg and "forkserver" in msg, msg
    (kind, val), code = run("spawn")
    print("SPAWN", kind, val, code, flush=True)
    assert kind == "ok" and val == [1.0, 3.0], (kind, val)
    assert code == 0
    print("PARENT", ops.minimum(pylucid.tensor([1.0, 5.0]), 3.0).numpy().tolist(), flush=True)
"""


def test_multiprocessing_fork_context_raises_and_spawn_works(tmp_path):
    script = tmp_path / "mp_fork.py"  # spawn needs an importable __main__ file
    script.write_text(MP_SCRIPT)
    env = child_env()
    try:
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail("multiprocessing test hung\n%s\n%s" % (e.stdout, e.stderr))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "FORK RuntimeError 0" in r.stdout, out
    assert "SPAWN ok [1.0, 3.0] 0" in r.stdout, out
    assert "PARENT [1.0, 3.0]" in r.stdout, out


def test_import_only_in_forked_child_works():
    """The fork message suggests importing pylucid only in the child: that works."""
    code = r"""
    import os, sys
    assert "pylucid" not in sys.modules
    pid = os.fork()
    if pid == 0:
        import pylucid
        from pylucid import ops
        r = ops.minimum(pylucid.tensor([1.0, 5.0]), 3.0).numpy().tolist()
        os._exit(0 if r == [1.0, 3.0] else 7)
    _, st = os.waitpid(pid, 0)
    print("CHILD", os.waitstatus_to_exitcode(st))
    """
    r = _run_script(code, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CHILD 0" in r.stdout, r.stdout + r.stderr


# ---- Ctrl-C ----


SIGINT_SCRIPT = r"""
import os, signal, sys, threading, time
import numpy as np
import pylucid
from pylucid import ops

n = 1 << 23
rng = np.random.default_rng(0)
a = rng.standard_normal(n).astype(np.float32)
b = rng.standard_normal(n).astype(np.float32)
ta = pylucid.from_numpy(a, requires_grad=MODE == "backward")
tb = pylucid.from_numpy(b)

def step():
    y = ops.minimum(ta, tb).sum()
    if MODE == "backward":
        y.backward()

step()
sent = []

def fire():
    sent.append(iters)  # steps done when the signal goes
    os.kill(os.getpid(), signal.SIGINT)

threading.Timer(0.5, fire).start()
start = time.monotonic()
iters = 0
try:
    while time.monotonic() - start < 30:  # only bounds the loop
        step()
        iters += 1
    print("NO_INTERRUPT", flush=True)
    sys.exit(3)
except KeyboardInterrupt:
    # steps completed after the signal: at most the one in flight
    print("STEPS_AFTER %d ITERS %d" % (iters - sent[0], iters), flush=True)

# the library keeps working, with right answers
x = pylucid.tensor([1.0, 5.0, -2.0], requires_grad=True)
y = ops.minimum(x, 3.0)
assert y.detach().numpy().tolist() == [1.0, 3.0, -2.0]
y.sum().backward()
assert x.grad.numpy().tolist() == [1.0, 0.0, 1.0]
r = ops.minimum(ta.detach(), tb).numpy()
assert np.array_equal(r, np.minimum(a, b))
print("AFTER_OK", flush=True)
"""


@pytest.mark.parametrize("mode", ["forward", "backward"])
def test_ctrl_c_during_long_ops(mode):
    r = _run_script("MODE = %r\n" % mode + SIGINT_SCRIPT, timeout=90)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    m = re.search(r"STEPS_AFTER (\d+)", r.stdout)
    assert m, out
    assert int(m.group(1)) <= 1, out
    assert "AFTER_OK" in r.stdout, out


def test_ctrl_c_during_one_long_op():
    """A single multi-second reduction: KeyboardInterrupt once it returns,
    at the latest, and the library keeps working."""
    code = r"""
    import os, signal, sys, threading, time
    import numpy as np
    import pylucid
    from pylucid import ops
    pylucid.set_num_threads(1)
    big = pylucid.from_numpy(np.broadcast_to(np.float32(1.0), (2**15, 2**15)))
    s = big.sum()
    assert float(s.item()) == 2.0**30, s
    # The library's test gate holds the first sum until the other thread's
    # op arrives: the signal then goes while that sum runs (no clock involved).
    # That op has more than 4096 elements, so it waits at the gate with the
    # GIL released (a small op keeps the GIL through its call).
    assert pylucid._native.lucid_debug_gate(2, 60000, pylucid._ffi.NULL, pylucid._ffi.NULL) == 0
    done, sent = [0], []
    wide = pylucid.from_numpy(np.ones(8192, np.float32))
    def fire():
        ops.minimum(wide, 0.0)
        sent.append(done[0]); os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=fire).start()
    try:
        for _ in range(20):
            big.sum()
            done[0] += 1
        print("NO_INTERRUPT", flush=True); sys.exit(3)
    except KeyboardInterrupt:
        after = done[0] - sent[0]
        print("SUMS_AFTER %d" % after, flush=True)
        assert after <= 1, after  # the sum in flight, at most
    met = pylucid._ffi.new("int64_t*"); timed_out = pylucid._ffi.new("int64_t*")
    assert pylucid._native.lucid_debug_gate(0, 0, met, timed_out) == 0
    assert timed_out[0] == 0, timed_out[0]
    assert ops.minimum(pylucid.tensor([1.0, 5.0]), 3.0).numpy().tolist() == [1.0, 3.0]
    print("AFTER_OK", flush=True)
    """
    r = _run_script(code, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "SUMS_AFTER" in r.stdout and "AFTER_OK" in r.stdout, out


# ---- dims past int64 and keepdim without a dim (found by a hostile run) ----


@pytest.mark.parametrize("call", [
    lambda x, d: pylucid.ops.amax(x, d), lambda x, d: pylucid.ops.amin(x, (0, d)), lambda x, d: pylucid.ops.argmax(x, d),
    lambda x, d: pylucid.ops.max(x, d), lambda x, d: pylucid.ops.sum(x, d), lambda x, d: x.amax(d, keepdim=True),
    lambda x, d: pylucid.ops.amax(x, d, out=pylucid.zeros(3)), lambda x, d: np.amax(x, axis=d),
], ids=["amax", "amin tuple", "argmax", "max", "sum", "method", "out=", "np.amax"])
@pytest.mark.parametrize("d", [2**63, -2**63 - 1, 2**100])
def test_a_dim_past_int64_is_out_of_range_for_the_op(call, d) -> None:
    # Before: OverflowError "int too big to convert", naming no op.
    x = pylucid.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"^(amax|amin|argmax|max|sum): dimension %d out of range for a 2-d tensor$"
                       % d):
        call(x, d)


@pytest.mark.parametrize("name", ["min", "max"])
def test_min_and_max_without_a_dim_take_keepdim(name) -> None:
    # Before: TypeError, although docs/semantics.md promises amin's shape.
    a = np.array([[3.0, -1.0, 2.0], [0.5, 4.0, -1.0]], np.float32)
    x = pylucid.tensor(a, requires_grad=True)
    y = getattr(pylucid.ops, name)(x, None, keepdim=True)
    z = getattr(x, name)(keepdim=True)
    want = getattr(np, name)(a, keepdims=True)
    for r in (y, z):
        assert r.shape == (1, 1)
        np.testing.assert_array_equal(r.detach().numpy(), want)
    y.sum().backward()
    one_hot = np.zeros_like(a)
    one_hot[np.unravel_index(getattr(np, "arg" + name)(a), a.shape)] = 1
    np.testing.assert_array_equal(x.grad.numpy(), one_hot)
