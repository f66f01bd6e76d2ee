"""Forward mode, pylucid.autograd.jvp (docs/autograd.md): structure of the
results, Functions with and without a jvp, errors, and threads."""

import sys
import threading

import numpy as np
import pytest

import pylucid
from pylucid import autograd, ops


def t64(*vals, shape=None):
    a = np.array(vals, dtype=np.float64)
    return pylucid.tensor(a.reshape(shape) if shape else a)


def test_single_tensor_in_and_out():
    x = t64(1.0, 3.0, 3.0)
    y, ty = autograd.jvp(ops.amax, x, t64(10.0, 20.0, 30.0))
    assert isinstance(y, pylucid.Tensor) and isinstance(ty, pylucid.Tensor)
    assert float(y) == 3.0 and float(ty) == 20.0  # the first winner's tangent, not a split


def test_tuple_outputs_keep_their_structure():
    x = t64(1.0, 7.0, 7.0, 4.0, 2.0, 4.0, shape=(2, 3))
    (vals, idx), (tv, ti) = autograd.jvp(lambda a: ops.max(a, 1), (x,), (pylucid.tensor(np.arange(6.0).reshape(2, 3)),))
    np.testing.assert_array_equal(vals.numpy(), [7.0, 4.0])
    np.testing.assert_array_equal(tv.numpy(), [1.0, 3.0])
    # indices are integers: their tangent is zero, in their dtype
    assert ti.dtype == pylucid.int64 and not ti.numpy().any()
    out, tans = autograd.jvp(lambda a, b: [a * b, a - b], (t64(2.0), t64(5.0)), (t64(1.0), t64(0.0)))
    assert isinstance(tans, list) and [float(t) for t in tans] == [5.0, 1.0]


def test_composition_matches_finite_differences():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5))
    b = rng.standard_normal(5)
    va, vb = rng.standard_normal((4, 5)), rng.standard_normal(5)

    def f(x, y):
        return ops.clamp(ops.fmin(x * y, y - 0.3), -0.5, None).sum(1) / 3.0 + ops.amax(x, 0).mean()

    _, jv = autograd.jvp(f, (pylucid.tensor(a), pylucid.tensor(b)), (pylucid.tensor(va), pylucid.tensor(vb)))
    eps = 1e-6
    fp = f(pylucid.tensor(a + eps * va), pylucid.tensor(b + eps * vb)).numpy()
    fm = f(pylucid.tensor(a - eps * va), pylucid.tensor(b - eps * vb)).numpy()
    np.testing.assert_allclose(jv.numpy(), (fp - fm) / (2 * eps), rtol=1e-6, atol=1e-8)


def test_outputs_independent_of_the_primals_get_zero_tangents():
    c = t64(1.0, 2.0)
    _, t = autograd.jvp(lambda x: c * 2.0, t64(0.0, 0.0), t64(1.0, 1.0))
    np.testing.assert_array_equal(t.numpy(), [0.0, 0.0])


def test_tangent_dtype_is_converted_and_shape_checked():
    x = pylucid.tensor([1.0, 2.0], dtype=pylucid.float32)
    _, t = autograd.jvp(lambda a: a * 3.0, x, np.array([1.0, 1.0]))
    assert t.dtype == pylucid.float32
    np.testing.assert_array_equal(t.numpy(), [3.0, 3.0])
    with pytest.raises(ValueError, match="shape"):
        autograd.jvp(lambda a: a, x, np.ones(3))
    with pytest.raises(TypeError, match="int64"):
        autograd.jvp(lambda a: a, pylucid.tensor([1, 2]), np.ones(2))
    with pytest.raises(ValueError):
        autograd.jvp(lambda a, b: a, (x, x), (np.ones(2),))


class Square(autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2.0 * x

    @staticmethod
    def jvp(ctx, tx):
        (x,) = ctx.saved_tensors
        return tx * 2.0 * x


class NoJvp(autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g


def test_function_with_jvp():
    x = t64(1.0, -2.0)
    y, t = autograd.jvp(lambda a: Square.apply(a) + a, x, t64(1.0, 1.0))
    np.testing.assert_array_equal(y.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(t.numpy(), [3.0, -3.0])


class SplitScale(autograd.Function):
    """Two tensor outputs (2x, 3x); with same=True the first one twice."""

    @staticmethod
    def forward(ctx, x, same):
        ctx.same = same
        a = x * 2.0
        return (a, a) if same else (a, x * 3.0)

    @staticmethod
    def backward(ctx, ga, gb):
        return ga * 2.0 + gb * (2.0 if ctx.same else 3.0), None

    @staticmethod
    def jvp(ctx, tx, _):
        return tx * 2.0, tx * (2.0 if ctx.same else 3.0)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_function_with_two_tensor_outputs_under_jvp(n):
    """The outputs are told apart by identity: comparing them with == (an
    elementwise comparison) raised "the truth value of a tensor with 2
    elements is ambiguous" for any output of more than one element."""
    x = pylucid.tensor(np.arange(1.0, n + 1.0))
    tx = pylucid.tensor(np.full(n, 0.5))
    (a, b), (ta, tb) = autograd.jvp(lambda v: SplitScale.apply(v, False), x, tx)
    np.testing.assert_array_equal(b.numpy(), 3.0 * np.arange(1.0, n + 1.0))
    np.testing.assert_array_equal(ta.numpy(), np.full(n, 1.0))
    np.testing.assert_array_equal(tb.numpy(), np.full(n, 1.5))
    # the same tensor returned twice: two outputs, each with its tangent
    (a, b), (ta, tb) = autograd.jvp(lambda v: SplitScale.apply(v, True), x, tx)
    assert a is not b
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(ta.numpy(), np.full(n, 1.0))
    np.testing.assert_array_equal(tb.numpy(), np.full(n, 1.0))
    # equal values in distinct outputs stay distinct outputs
    z = pylucid.tensor(np.zeros(n))
    (a, b), (ta, tb) = autograd.jvp(lambda v: SplitScale.apply(v, False), z, tx)
    np.testing.assert_array_equal(ta.numpy(), np.full(n, 1.0))
    np.testing.assert_array_equal(tb.numpy(), np.full(n, 1.5))


def test_function_without_jvp_raises():
    with pytest.raises(NotImplementedError, match="NoJvp"):
        autograd.jvp(NoJvp.apply, t64(1.0), t64(1.0))
    # Outside forward mode, or without tangents on its inputs, it is fine.
    assert float(NoJvp.apply(t64(2.0))) == 2.0
    _, t = autograd.jvp(lambda a: NoJvp.apply(t64(5.0)) * a, t64(1.0), t64(1.0))
    assert float(t) == 5.0


def test_forward_mode_composes_with_reverse_mode():
    x = pylucid.tensor([1.0, 4.0, 2.0], dtype=pylucid.float64, requires_grad=True)
    y, t = autograd.jvp(lambda a: ops.amax(a * a), x, t64(1.0, 1.0, 1.0))
    assert float(t) == 8.0
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 8.0, 0.0])


def test_levels_are_per_thread():
    """While one thread is inside jvp, ops on other threads (the C fast path
    gives way to the Python path meanwhile) compute the same values and
    record no tangents."""
    inside, done = threading.Event(), threading.Event()
    results = {}

    def fn(a):
        inside.set()
        assert done.wait(10)
        return a * 2.0

    def forward():
        results["jvp"] = autograd.jvp(fn, t64(1.0), t64(1.0))

    th = threading.Thread(target=forward)
    th.start()
    assert inside.wait(10)
    a, b = t64(1.0, 5.0), t64(3.0, 2.0)
    results["other"] = (ops.minimum(a, b).numpy().copy(), (a + b).sum().numpy().copy())
    y, ty = autograd.jvp(lambda u: u - 1.0, t64(4.0), t64(2.0))  # a second level, on this thread
    done.set()
    th.join()
    np.testing.assert_array_equal(results["other"][0], [1.0, 2.0])
    assert float(results["other"][1]) == 11.0
    assert float(ty) == 2.0
    assert float(results["jvp"][1]) == 2.0
    # Both levels are closed: the C path is back.
    assert sys.modules["pylucid.tensor"].forward_levels == [0]


def test_a_level_opened_at_any_point_of_another_opening_or_closing():
    """A finalizer, weakref callback or signal handler may run between any two
    bytecodes of the code that opens or closes a level on this thread, and
    may use forward mode itself (docs/autograd.md, re-entry). A tracer runs a
    nested jvp at every opcode of set_forward_level while an outer jvp opens
    its level, runs a Function (which closes and reopens it) and closes it:
    every nested and outer tangent is the rule's, and the count of open
    levels is back to 0. The count dropping before the level is cleared
    gave a finalizer's jvp zero tangents (a CI failure of the soak in
    test_stress_finalizers)."""
    from pylucid import _forward

    code = _forward.set_forward_level.__code__
    b = np.array([-1.0, 2.0, 0.0, -3.0])
    want = (b <= 0).astype(np.float64)
    nested = {"busy": False, "runs": 0, "bad": []}

    def inner_jvp():
        out, tan = autograd.jvp(lambda x: ops.minimum(x, 0.0), pylucid.tensor(b), pylucid.tensor(np.ones(4)))
        if not np.array_equal(tan.numpy(), want):
            nested["bad"].append(tan.numpy().copy())

    def local(frame, event, arg):
        if event == "opcode" and not nested["busy"]:
            nested["busy"] = True
            try:
                inner_jvp()
                nested["runs"] += 1
            finally:
                nested["busy"] = False
        return local

    def tracer(frame, event, arg):
        if frame.f_code is code and not nested["busy"]:
            frame.f_trace_opcodes = True
            return local
        return None

    x = t64(1.0, -2.0, 3.0)
    sys.settrace(tracer)
    try:
        y, t = autograd.jvp(lambda a: ops.minimum(Square.apply(a), a + 2.0), x, t64(1.0, 1.0, 1.0))
    finally:
        sys.settrace(None)
    assert nested["runs"] > 20  # every opcode of four calls: opening, the Function's close and reopen, closing
    assert nested["bad"] == []
    np.testing.assert_array_equal(y.numpy(), [1.0, 0.0, 5.0])
    np.testing.assert_array_equal(t.numpy(), [2.0, 1.0, 1.0])  # 2x at 1 (x*x won), a+2's 1 at -2 and 3
    assert _forward.forward_levels == [0]
