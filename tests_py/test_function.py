"""Python-defined autograd.Function nodes in native graphs, and the autograd
API around them (docs/autograd.md)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pylucid
from pylucid import ops
from pylucid.autograd import Function, grad

RNG = np.random.default_rng(99)


class Cube(Function):
    """x**3 with pylucid ops in backward (so create_graph works through it)."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        Cube.calls += 1
        (x,) = ctx.saved_tensors
        return g * 3.0 * x * x


class ScaleShift(Function):
    """a * k + b with a Python float k: needs_input_grad and None gradients."""

    seen_needs = None

    @staticmethod
    def forward(ctx, a, k, b):
        ctx.k = k
        ScaleShift.seen_needs = ctx.needs_input_grad
        return a * k + b

    @staticmethod
    def backward(ctx, g):
        ScaleShift.seen_needs = ctx.needs_input_grad
        ga = g * ctx.k if ctx.needs_input_grad[0] else None
        gb = g if ctx.needs_input_grad[2] else None
        return ga, None, gb


class MinMax(Function):
    """Two outputs: (minimum(a, b), maximum(a, b)) with the rule of docs/semantics.md."""

    received = None

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ops.minimum(a, b), ops.maximum(a, b)

    @staticmethod
    def backward(ctx, gmin, gmax):
        MinMax.received = (gmin, gmax)
        a, b = ctx.saved_tensors
        an, bn = a.detach().numpy(), b.detach().numpy()
        a_min = ((an <= bn) | np.isnan(an)).astype(an.dtype)
        a_max = ((an >= bn) | np.isnan(an)).astype(an.dtype)
        ga = gmin * a_min + gmax * a_max
        gb = gmin * (1 - a_min) + gmax * (1 - a_max)
        return ga, gb


def _f64(shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, size=shape)


def _numeric_grad(f, x0, eps=1e-6):
    """Central differences of scalar f (NumPy in, float out) at x0 (float64)."""
    g = np.zeros_like(x0)
    flat = g.reshape(-1)
    for j in range(x0.size):
        xp = x0.copy()
        xm = x0.copy()
        xp.reshape(-1)[j] += eps
        xm.reshape(-1)[j] -= eps
        flat[j] = (f(xp) - f(xm)) / (2 * eps)
    return g


# ---- a Function in the middle of a native chain ----


def _chain(x, c, d, cube):
    u = ops.minimum(x, c)
    v = cube(u)
    w = ops.maximum(v, d) * 1.5 - x
    return w.sum()


def test_function_in_native_chain_matches_native_and_finite_differences():
    x0 = _f64((4, 5))
    c = _f64((5,))  # broadcast
    d = _f64((4, 1))
    x0[0, 0] = c[0]  # a tie: gradient to x (the first operand)

    x = pylucid.tensor(x0, requires_grad=True)
    Cube.calls = 0
    loss = _chain(x, c, d, Cube.apply)
    assert loss.grad_fn is not None
    loss.backward()
    assert Cube.calls == 1
    g_fn = x.grad.numpy().copy()

    xn = pylucid.tensor(x0, requires_grad=True)
    _chain(xn, c, d, lambda u: u * u * u).backward()
    g_native = xn.grad.numpy()
    np.testing.assert_allclose(g_fn, g_native, rtol=1e-12, atol=1e-12)

    def f(xv):
        with pylucid.no_grad():
            return float(_chain(pylucid.tensor(xv), c, d, Cube.apply).item())

    # finite differences away from the kinks (the tie gets its own check)
    num = _numeric_grad(f, x0)
    mask = np.ones_like(x0, bool)
    mask[0, 0] = False
    np.testing.assert_allclose(g_fn[mask], num[mask], rtol=1e-5, atol=1e-6)
    # at the tie x == c the gradient is x's: 3 u^2 [v >= d] * 1.5 - 1
    u = x0[0, 0]
    expected = (3 * u * u * 1.5 if u**3 >= d[0, 0] else 0.0) - 1.0
    np.testing.assert_allclose(g_fn[0, 0], expected, rtol=1e-12)


def test_function_graph_structure():
    x = pylucid.tensor(_f64((3,)), requires_grad=True)
    u = ops.minimum(x, 0.5)
    v = Cube.apply(u)
    assert v.requires_grad
    assert not v.is_leaf
    assert v.grad_fn.name() == "CubeBackward"
    (prev, _), = v.grad_fn.next_functions
    assert prev.name() == "MinimumBackward"
    # ops inside forward are not recorded: the output's node is the Function's
    y = ops.maximum(v, 0.0)
    assert y.grad_fn.next_functions[0][0].name() == "CubeBackward"


def test_gradcheck_through_function():
    x = pylucid.tensor(_f64((3, 2)) + 0.01, requires_grad=True)  # away from ties with 0.3
    c = pylucid.tensor(_f64((2,)), requires_grad=True)
    assert pylucid.autograd.gradcheck(lambda a, b: Cube.apply(ops.minimum(a, b) - 0.3) * 2.0, [x, c])


# ---- one Function node reached twice; the Function applied twice ----


def test_function_output_used_twice_runs_backward_once_with_summed_grad():
    x0 = np.array([-1.5, 0.2, 0.7, 1.3])
    x = pylucid.tensor(x0, requires_grad=True)
    Cube.calls = 0
    v = Cube.apply(x)
    loss = (v * 2.0 + ops.minimum(v, 0.5)).sum()
    loss.backward()
    assert Cube.calls == 1
    v0 = x0**3
    dv = 2.0 + (v0 <= 0.5)
    np.testing.assert_allclose(x.grad.numpy(), dv * 3 * x0**2, rtol=1e-12)


def test_function_applied_twice_to_related_inputs():
    x0 = np.array([-1.2, 0.4, 0.9, 1.1])
    x = pylucid.tensor(x0, requires_grad=True)
    Cube.calls = 0
    u = ops.minimum(x, 1.0)
    v1 = Cube.apply(u)
    v2 = Cube.apply(u * 2.0)
    loss = (ops.maximum(v1, v2) + v1).sum()
    (g,) = grad(loss, x)
    assert Cube.calls == 2
    xn = pylucid.tensor(x0, requires_grad=True)
    un = ops.minimum(xn, 1.0)
    (ops.maximum(un * un * un, (un * 2.0) * (un * 2.0) * (un * 2.0)) + un * un * un).sum().backward()
    np.testing.assert_allclose(g.numpy(), xn.grad.numpy(), rtol=1e-12)

    def f(xv):
        uu = np.minimum(xv, 1.0)
        return float((np.maximum(uu**3, (2 * uu) ** 3) + uu**3).sum())

    np.testing.assert_allclose(g.numpy(), _numeric_grad(f, x0), rtol=1e-5, atol=1e-6)


def test_function_applied_to_same_tensor_twice_as_two_arguments():
    class Mul(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    x0 = np.array([1.0, -2.0, 3.0])
    x = pylucid.tensor(x0, requires_grad=True)
    Mul.apply(x, x).sum().backward()  # d(x*x)/dx = 2x: both gradients land in x
    np.testing.assert_allclose(x.grad.numpy(), 2 * x0)


# ---- two outputs ----


def test_function_with_two_outputs():
    a0 = np.array([1.0, 5.0, 2.0, np.nan])
    b0 = np.array([3.0, 4.0, 2.0, 1.0])
    a = pylucid.tensor(a0, requires_grad=True)
    b = pylucid.tensor(b0, requires_grad=True)
    lo, hi = MinMax.apply(a, b)
    assert lo.grad_fn is not None and lo.grad_fn == hi.grad_fn
    np.testing.assert_array_equal(lo.detach().numpy(), [1.0, 4.0, 2.0, np.nan])
    np.testing.assert_array_equal(hi.detach().numpy(), [3.0, 5.0, 2.0, np.nan])
    (lo * 2.0 + hi * 10.0).sum().backward()
    # a wins min at 0, 2 (tie), 3 (NaN); a wins max at 1, 2 (tie), 3 (NaN)
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 10.0, 12.0, 12.0])
    np.testing.assert_array_equal(b.grad.numpy(), [10.0, 2.0, 0.0, 0.0])
    # the same with native ops
    an = pylucid.tensor(a0, requires_grad=True)
    bn = pylucid.tensor(b0, requires_grad=True)
    (ops.minimum(an, bn) * 2.0 + ops.maximum(an, bn) * 10.0).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), an.grad.numpy())
    np.testing.assert_array_equal(b.grad.numpy(), bn.grad.numpy())


def test_function_two_outputs_only_one_used():
    a = pylucid.tensor([1.0, 5.0], requires_grad=True)
    b = pylucid.tensor([3.0, 4.0], requires_grad=True)
    lo, hi = MinMax.apply(a, b)
    MinMax.received = None
    hi.sum().backward()
    gmin, gmax = MinMax.received
    # the unused output's gradient comes as zeros of its shape
    assert gmin is not None and gmin.shape == (2,)
    np.testing.assert_array_equal(gmin.numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(gmax.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 1.0])
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 0.0])


# ---- needs_input_grad and None gradients ----


def test_needs_input_grad_and_none_gradients():
    a = pylucid.tensor([1.0, 2.0], requires_grad=True)
    b = pylucid.tensor([10.0, 20.0])
    y = ScaleShift.apply(a, 3.0, b)
    assert ScaleShift.seen_needs == (True, False, False)
    y.sum().backward()
    assert ScaleShift.seen_needs == (True, False, False)
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 3.0])
    assert b.grad is None

    b2 = pylucid.tensor([10.0, 20.0], requires_grad=True)
    a2 = pylucid.tensor([1.0, 2.0])
    ScaleShift.apply(a2, 3.0, b2).sum().backward()
    assert ScaleShift.seen_needs == (False, False, True)
    np.testing.assert_array_equal(b2.grad.numpy(), [1.0, 1.0])
    assert a2.grad is None


def test_function_without_grad_inputs_records_nothing():
    y = ScaleShift.apply(pylucid.tensor([1.0]), 2.0, pylucid.tensor([1.0]))
    assert y.grad_fn is None
    assert not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), [3.0])


def test_function_gradient_broadcast_and_dtype_adapted():
    class AddBC(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            # returns gradients of the output's shape and in float32
            return g.to(pylucid.float32), g.to(pylucid.float32)

    a = pylucid.tensor(np.ones((3, 4)), requires_grad=True)  # float64
    b = pylucid.tensor(np.ones((4,)), requires_grad=True)
    (AddBC.apply(a, b) * 2.0).sum().backward()
    assert a.grad.dtype == pylucid.float64 and b.grad.dtype == pylucid.float64
    assert b.grad.shape == (4,)
    np.testing.assert_array_equal(a.grad.numpy(), np.full((3, 4), 2.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full((4,), 6.0))


def test_function_backward_wrong_count_or_shape_raises():
    class WrongCount(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g

    class WrongShape(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2.0

        @staticmethod
        def backward(ctx, g):
            return pylucid.zeros((5, 7), pylucid.float64)

    a = pylucid.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="number of gradients|expected 2"):
        WrongCount.apply(a, a).sum().backward()
    with pytest.raises(RuntimeError, match="shape"):
        WrongShape.apply(a).sum().backward()
    assert a.grad is None


# ---- retain_graph ----


def test_retain_graph_through_function():
    x0 = np.array([0.5, -1.0, 2.0])
    x = pylucid.tensor(x0, requires_grad=True)
    Cube.calls = 0
    loss = ops.minimum(Cube.apply(x), 1.0).sum()
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    assert Cube.calls == 2
    exp = 3 * x0**2 * (x0**3 <= 1.0)
    np.testing.assert_allclose(x.grad.numpy(), 2 * exp)
    loss.backward()  # frees the graph, the Function's saved tensors included
    np.testing.assert_allclose(x.grad.numpy(), 3 * exp)
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        loss.backward()
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        grad(loss, x)
    np.testing.assert_allclose(x.grad.numpy(), 3 * exp)


def test_second_backward_through_function_only_graph():
    x = pylucid.tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        y.backward()


# ---- create_graph: double backward through a Function ----


def test_double_backward_through_function():
    x0 = np.array([-1.5, 0.3, 0.8, 2.0])
    x = pylucid.tensor(x0, requires_grad=True)
    y = ops.minimum(Cube.apply(x), 1.0).sum()
    (g,) = grad(y, x, create_graph=True)
    mask = (x0**3 <= 1.0).astype(float)
    np.testing.assert_allclose(g.detach().numpy(), 3 * x0**2 * mask, rtol=1e-12)
    assert g.requires_grad and g.grad_fn is not None
    (h,) = grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * x0 * mask, rtol=1e-12)

    # the same via backward(create_graph=True) then backward on the grad
    x2 = pylucid.tensor(x0, requires_grad=True)
    y2 = ops.minimum(Cube.apply(x2), 1.0).sum()
    y2.backward(create_graph=True)
    g2 = x2.grad
    assert g2.requires_grad
    x2.grad = None
    (g2 * 1.0).sum().backward()
    np.testing.assert_allclose(x2.grad.numpy(), 6 * x0 * mask, rtol=1e-12)


def test_gradgradcheck_through_function():
    x = pylucid.tensor(np.array([0.4, -0.7, 1.3]), requires_grad=True)
    assert pylucid.autograd.gradgradcheck(lambda a: Cube.apply(ops.maximum(a, -0.5)) * 2.0, [x])


# ---- autograd.grad ----


def test_grad_allow_unused():
    x = pylucid.tensor([1.0, 3.0], requires_grad=True)
    unused = pylucid.tensor([5.0], requires_grad=True)
    y = Cube.apply(ops.minimum(x, 2.0)).sum()
    gx, gu = grad(y, [x, unused], allow_unused=True, retain_graph=True)
    assert gu is None
    np.testing.assert_allclose(gx.numpy(), [3.0, 0.0])
    with pytest.raises(RuntimeError, match="allow_unused"):
        grad(y, [x, unused], retain_graph=True)
    # grad() touches no .grad
    assert x.grad is None and unused.grad is None


def test_grad_of_intermediate_and_multiple_paths():
    x0 = np.array([1.0, 4.0, 2.0])
    x = pylucid.tensor(x0, requires_grad=True)
    u = ops.minimum(x, 2.5)
    y = (Cube.apply(u) + u * 2.0 + x).sum()
    gu, gx = grad(y, [u, x])
    u0 = np.minimum(x0, 2.5)
    np.testing.assert_allclose(gu.numpy(), 3 * u0**2 + 2.0)
    np.testing.assert_allclose(gx.numpy(), (3 * u0**2 + 2.0) * (x0 <= 2.5) + 1.0)


def test_grad_with_grad_outputs_and_several_outputs():
    x0 = np.array([1.0, -2.0])
    x = pylucid.tensor(x0, requires_grad=True)
    v = Cube.apply(x)
    w = ops.maximum(x, 0.0)
    (g,) = grad([v, w], x, grad_outputs=[np.array([1.0, 2.0]), np.array([10.0, 10.0])])
    np.testing.assert_allclose(g.numpy(), np.array([1.0, 2.0]) * 3 * x0**2 + 10.0 * (x0 >= 0))


# ---- no_grad ----


def test_no_grad_records_nothing():
    x = pylucid.tensor([1.0, 2.0], requires_grad=True)
    with pylucid.no_grad():
        assert not pylucid.is_grad_enabled()
        y = ops.minimum(x, 1.5) * 2.0
        z = Cube.apply(x)
        s = y.sum()
    assert pylucid.is_grad_enabled()
    for t in (y, z, s):
        assert t.grad_fn is None
        assert not t.requires_grad
        assert t.is_leaf
    np.testing.assert_array_equal(y.numpy(), [2.0, 3.0])
    with pytest.raises(RuntimeError):
        s.backward()
    assert x.grad is None

    @pylucid.no_grad()
    def f(t):
        return ops.maximum(t, 0.0)

    assert f(x).grad_fn is None
    with pylucid.no_grad():
        with pylucid.enable_grad():
            assert ops.maximum(x, 0.0).grad_fn is not None
        assert ops.maximum(x, 0.0).grad_fn is None
    assert ops.maximum(x, 0.0).grad_fn is not None


# ---- accumulation, is_leaf, detach ----


def test_gradients_accumulate_across_backward_calls():
    x0 = np.array([0.5, 2.0, -1.0])
    x = pylucid.tensor(x0, requires_grad=True)
    ops.minimum(x, 1.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 1.0])
    Cube.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.array([1.0, 0.0, 1.0]) + 3 * x0**2)
    (ops.maximum(x, 1.0) * 4.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.array([1.0, 0.0, 1.0]) + 3 * x0**2 + 4.0 * (x0 >= 1.0))
    x.grad = None
    ops.minimum(x, 1.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 1.0])


def test_accumulated_grad_is_not_aliased_between_leaves():
    a = pylucid.tensor([1.0, 2.0], requires_grad=True)
    b = pylucid.tensor([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward()  # the same incoming gradient reaches both leaves
    ga = a.grad.numpy()
    gb = b.grad.numpy()
    assert not np.shares_memory(ga, gb)
    (a * 2.0).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0])


def test_is_leaf_and_detach():
    x = pylucid.tensor([1.0, -1.0], requires_grad=True)
    plain = pylucid.tensor([1.0, 2.0])
    assert x.is_leaf and plain.is_leaf
    y = ops.minimum(x, 0.0)
    f = Cube.apply(x)
    assert not y.is_leaf and not f.is_leaf
    d = y.detach()
    assert d.is_leaf and not d.requires_grad and d.grad_fn is None
    np.testing.assert_array_equal(d.numpy(), [0.0, -1.0])
    # detach shares memory with its source
    assert np.shares_memory(d.numpy(), y.detach().numpy())
    # nothing flows through a detached tensor
    (ops.maximum(d, x) + f).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.array([1.0, 0.0]) + 3 * np.array([1.0, 1.0]))
    # a detached tensor may start its own graph
    d.requires_grad_()
    assert d.is_leaf and d.requires_grad
    ops.minimum(d, 5.0).sum().backward()
    np.testing.assert_array_equal(d.grad.numpy(), [1.0, 1.0])


def test_a_gradient_the_user_holds_becomes_a_separate_grad_tensor() -> None:
    # The leaf's .grad is a tensor object of its own, even when backward
    # returns a tensor the user keeps (review: it was the same object).
    const = pylucid.tensor([2.0, 3.0])

    class Const(Function):
        @staticmethod
        def forward(ctx, a):  # type: ignore[no-untyped-def]
            return a * 1.0

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            return const

    x = pylucid.tensor([1.0, 1.0], requires_grad=True)
    Const.apply(x).sum().backward()
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 3.0])
    x.grad.requires_grad_(True)
    assert not const.requires_grad  # flags of one do not show on the other
    x.grad = None
    np.testing.assert_array_equal(const.numpy(), [2.0, 3.0])  # the user's tensor is intact


def _stopped_graph():
    """A graph whose backward stops at a Python Function (Cube)."""
    x = pylucid.tensor([1.0, 2.0, 3.0], requires_grad=True)
    return x, ops.minimum(Cube.apply(x), 100.0).sum()


def _live_handles() -> int:
    import gc

    gc.collect()
    return int(pylucid._stats()["handles"])


@pytest.mark.parametrize("path", ["c", "python"])
def test_a_stopped_run_dropped_before_it_is_driven_is_released(path: str) -> None:
    # A KeyboardInterrupt can land between the call that starts a run and the
    # code that drives it: the run must still be released, with everything it
    # holds. Both owners hold the handle from the moment the library returns it.
    import importlib

    autograd = importlib.import_module("pylucid.autograd")
    hot = importlib.import_module("pylucid.tensor")._hot
    if path == "c" and hot is None:
        pytest.skip("ABI mode: no C hot path")
    x, y = _stopped_graph()
    before = _live_handles()
    if path == "c":
        run = hot.backward_run(y)
        assert run is not None and run.h > 0
    else:
        run = autograd._RunOwner()
        rc = autograd.lib.lucid_backward_run(autograd.ffi.new("int64_t[]", [y._h]), autograd.ffi.NULL, 1, 0,
                                            autograd.state.mode, run.buf)
        assert rc == 0 and run.h > 0
    assert _live_handles() == before + 1
    del run  # dropped without being driven
    assert _live_handles() == before
    assert x.grad is None  # the run stopped before reaching x


def test_a_driven_run_is_closed_once() -> None:
    x, y = _stopped_graph()
    before = _live_handles()
    y.backward()
    assert _live_handles() == before  # the run is gone (x.grad is held by x, not by a handle)
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0, 27.0])


def test_gradients_a_function_returns_outlive_their_handles_in_the_run() -> None:
    # Two Functions feed one node (a = 2x): the gradient the first one's
    # backward returns waits in that node's buffer while Python drops its
    # handle, and the second one's backward allocates blocks of the same
    # size meanwhile. The waiting gradient was freed early (a Go panic,
    # "unsafe.Slice: ptr is nil").
    class Double(Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            return x * 1.0

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            return g * 2.0  # a fresh result that only Python owns

    class Triple(Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            return x * 1.0

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            junk = [g * 100.0 for _ in range(8)]  # reuse of freed memory shows
            del junk
            return g * 3.0

    for n in (16, 8192):
        x = pylucid.tensor(np.ones(n, dtype=np.float32), requires_grad=True)
        a = x * 2.0
        (Double.apply(a) + Triple.apply(a)).sum().backward()
        assert x.grad is not None
        np.testing.assert_array_equal(x.grad.numpy(), np.full(n, 10, np.float32))


def test_a_function_whose_gradient_is_refused_fails_the_same_way_again():
    """A Function's backward that returns a gradient of the wrong shape
    fails; the node gives its claim back and keeps its ctx, so the next
    backward reports the same error (docs/autograd.md), not a freed graph."""

    class BadShape(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return pylucid.ones(5)

    x = pylucid.tensor([1.0, 2.0], requires_grad=True)
    y = BadShape.apply(x)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
            y.sum().backward()
