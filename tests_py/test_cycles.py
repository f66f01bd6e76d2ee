"""Reference cycles through the native graph are freed by Python's collector
(docs/autograd.md): a Function's ctx (or a saved object) referring back to
its output. Also: re-initialising a Tensor lets go of its old handle."""

from __future__ import annotations

import gc

import numpy as np

import pylucid
import pylucid.tensor  # noqa: F401 - the module, for its records

_tensor_module = __import__("sys").modules["pylucid.tensor"]
from pylucid.autograd import Function

N = 1 << 18  # float32: 1 MB per tensor


class Keep(Function):
    """y = 2x, keeping `keep` on ctx (a layer, or anything)."""

    @staticmethod
    def forward(ctx, x, keep):
        ctx.keep = keep
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0, None


class Layer:
    def __call__(self, x):
        self.out = Keep.apply(x, self)  # layer -> out -> node -> ctx -> layer
        return self.out


def _live():
    gc.collect()
    s = pylucid._stats()
    return s["handles"], len(_tensor_module.records)


def _baseline():
    pylucid._collect()
    return _live(), pylucid._stats()["c_bytes"]


def _x():
    return pylucid.from_numpy(np.ones(N, np.float32), requires_grad=True)


def test_layer_keeping_its_output_is_collected():
    x = _x()
    (live0, bytes0) = _baseline()
    for _ in range(200):
        Layer()(x)
    assert _live() == live0  # gc.collect() alone frees every cycle
    pylucid._collect()
    assert pylucid._stats()["c_bytes"] <= bytes0  # and the 200 MB with them


def test_output_saved_into_ctx_after_apply_is_collected():
    ctxs = []

    class Grab(Function):
        @staticmethod
        def forward(ctx, x):
            ctxs.append(ctx)
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    x = _x()
    (live0, bytes0) = _baseline()
    for _ in range(200):
        y = Grab.apply(x)
        ctxs.pop().out = y  # y -> node -> ctx -> y
        del y
    assert _live() == live0
    pylucid._collect()
    assert pylucid._stats()["c_bytes"] <= bytes0


def test_cycle_with_downstream_graph_is_collected_once_the_graph_goes():
    x = _x()
    (live0, bytes0) = _baseline()
    for _ in range(50):
        Layer()(x).sum().backward()
    # The downstream nodes are Go objects: the library's collector must see
    # them gone before the cycle is free; _collect runs both collectors.
    pylucid._collect()
    assert _live() == live0
    assert pylucid._stats()["c_bytes"] <= bytes0 + 4 * N  # x.grad (1 MB) is new
    np.testing.assert_array_equal(x.grad.numpy(), np.full(N, 100.0, np.float32))


def test_backward_through_cycles_and_retained_graphs():
    x = pylucid.tensor([1.0, -2.0], requires_grad=True)
    layer = Layer()
    y = layer(x)
    gc.collect()
    y.sum().backward(retain_graph=True)
    gc.collect()
    pylucid._collect()
    y.sum().backward()
    assert x.grad.numpy().tolist() == [4.0, 4.0]


def test_graph_held_only_by_a_downstream_tensor_keeps_the_ctx():
    x = pylucid.tensor([1.0, -2.0], requires_grad=True)
    layer = Layer()
    z = layer(x) * 3.0
    del layer  # the cycle layer <-> output is garbage, but z's graph needs the ctx
    for _ in range(3):
        gc.collect()
        pylucid._collect()
    z.sum().backward()
    assert x.grad.numpy().tolist() == [6.0, 6.0]

    w = pylucid.tensor([1.0, -2.0], requires_grad=True)
    z = Keep.apply(w, None) + 1.0  # a plain output dropped at once
    for _ in range(3):
        gc.collect()
        pylucid._collect()
    z.sum().backward()
    assert w.grad.numpy().tolist() == [2.0, 2.0]


def test_output_kept_as_a_grad_keeps_the_ctx():
    x = pylucid.tensor([1.0, -2.0], requires_grad=True)
    w = pylucid.tensor([0.0, 0.0], requires_grad=True)
    layer = Layer()
    w.grad = layer(x)  # Go keeps the output in w's .grad slot
    del layer
    for _ in range(3):
        gc.collect()
        pylucid._collect()
    w.grad.sum().backward()
    assert x.grad.numpy().tolist() == [2.0, 2.0]


def test_grad_fn_handle_keeps_the_cycle_until_it_goes():
    x = pylucid.tensor([1.0, -2.0], requires_grad=True)
    (live0, _) = _baseline()
    layer = Layer()
    fn = layer(x).grad_fn  # a node handle: Python can reach the graph through it
    assert fn.name() == "KeepBackward"
    del layer
    pylucid._collect()
    assert _live()[1] == live0[1] + 1  # the record stays while the node handle lives
    del fn
    pylucid._collect()
    assert _live() == live0


def test_multi_output_function_cycle_is_collected_when_all_outputs_go():
    class Two(Function):
        @staticmethod
        def forward(ctx, x, keep):
            ctx.keep = keep
            return x * 2.0, x * 3.0

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2.0 + g2 * 3.0, None

    class Holder:
        pass

    x = _x()
    (live0, bytes0) = _baseline()
    for _ in range(20):
        h = Holder()
        h.a, h.b = Two.apply(x, h)
        del h
    pylucid._collect()
    # As PyTorch: a node shared by two live outputs is not traversed, so such
    # a cycle stays until one output goes; none may be freed too early.
    h = Holder()
    h.a, h.b = Two.apply(x, h)
    (h.a.sum() + h.b.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(N, 5.0, np.float32))


def test_reinit_releases_the_old_handle():
    t = pylucid.tensor([1.0, 2.0])
    gc.collect()
    h0 = pylucid._stats()["handles"]
    for i in range(1000):
        t.__init__([float(i), 1.0])
    assert pylucid._stats()["handles"] == h0
    assert t.numpy().tolist() == [999.0, 1.0]


def test_reinit_of_a_tensor_in_a_graph_with_a_grad():
    a = pylucid.tensor([1.0, 2.0], requires_grad=True)
    y = (a * 3.0).sum()
    y.backward(retain_graph=True)
    assert a.grad.numpy().tolist() == [3.0, 3.0]
    gc.collect()
    h0 = pylucid._stats()["handles"]
    a.__init__([5.0], requires_grad=True)  # a new leaf; the graph keeps the old one
    assert pylucid._stats()["handles"] == h0
    assert a.grad is None and a.is_leaf and a.requires_grad and a.shape == (1,)
    y.backward()  # the old leaf is still reachable through y's graph
    assert a.grad is None
    (a * 2.0).sum().backward()
    assert a.grad.numpy().tolist() == [2.0]


def test_reinit_of_a_function_output():
    x = pylucid.tensor([1.0, -2.0], requires_grad=True)
    (live0, _) = _baseline()
    y = Keep.apply(x, None)
    z = y * 3.0
    y.__init__([7.0])  # y lets go of the node; z's graph still needs the ctx
    pylucid._collect()
    z.sum().backward()
    assert x.grad.numpy().tolist() == [6.0, 6.0]
    assert y.numpy().tolist() == [7.0] and y.is_leaf
    del y, z
    pylucid._collect()
    assert _live() == live0
