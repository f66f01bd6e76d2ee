"""The version counter (docs/autograd.md, as PyTorch's): every in-place write
through pylucid (a method ending in _, out=) bumps the written tensor's
version, shared by its views and detached tensors; a node that saved a
tensor refuses to run backward once its version moved, with a RuntimeError
naming the node and the tensor. Writes that bypass pylucid (through a NumPy
view of the memory) are not seen, as in PyTorch.

Before the fix, ``h.clamp_(0, .5)`` under no_grad after ``y = minimum(h, 3)``
gave ``h.grad == [1, 1]`` silently (the gradient of other data than the
forward pass used; PyTorch raises).
"""

from __future__ import annotations

import numpy as np
import pytest

import pylucid
from pylucid import autograd, ops

MODIFIED = "modified by an inplace operation"


def test_in_place_writes_bump_the_version_shared_by_views() -> None:
    t = pylucid.tensor([1.0, -2.0, 3.0])
    d = t.detach()
    assert t._version == d._version == 0
    t.clamp_(0.0, 2.0)
    assert t._version == d._version == 1
    ops.minimum(t, 1.0, out=d)
    assert t._version == d._version == 2
    ops.amax(pylucid.tensor([[5.0, 6.0, 7.0]]), 0, out=t)
    assert t._version == 3 and t.numpy().tolist() == [5.0, 6.0, 7.0]
    # reading, ops without out= and out= into another tensor leave it
    other = pylucid.zeros(3)
    ops.maximum(t, t, out=other)
    _ = ops.minimum(t, 2.0), t.numpy(), t.sum()
    assert t._version == 3 and other._version == 1
    with pytest.raises(ValueError):  # a refused write (out of the wrong shape) is no write
        ops.minimum(pylucid.tensor([1.0, 2.0]), 1.0, out=t)
    assert t._version == 3


def _refused(fn, node: str) -> None:
    with pytest.raises(RuntimeError) as e:
        fn()
    msg = str(e.value)
    assert MODIFIED in msg and node in msg, msg
    assert "is at version 1; expected version 0" in msg, msg


@pytest.mark.parametrize("write", ["clamp_", "out=", "out= through a view", "ufunc out="])
def test_backward_refuses_a_saved_input_written_in_place(write: str) -> None:
    h = pylucid.tensor([1.0, 5.0], requires_grad=True)
    y = ops.minimum(h, 3.0)
    with autograd.no_grad():
        if write == "clamp_":
            h.clamp_(0.0, 0.5)
        elif write == "out=":
            ops.minimum(h, 0.5, out=h)
        elif write == "out= through a view":
            v = h.detach()
            ops.maximum(v, 4.0, out=v)
        else:
            np.minimum(h.detach(), 0.5, out=h.detach())
    _refused(lambda: y.sum().backward(), "MinimumBackward")
    assert h.grad is None
    _refused(lambda: autograd.grad(y.sum(), h), "MinimumBackward")


_SAVING = {
    "maximum": lambda h: ops.maximum(h, 3.0), "fmin": lambda h: ops.fmin(h, 3.0), "fmax": lambda h: ops.fmax(h, 3.0),
    "clamp": lambda h: ops.clamp(h, 0.0, 3.0), "mul": lambda h: h * h, "div": lambda h: 1.0 / h,
}


@pytest.mark.parametrize("op", sorted(_SAVING))
def test_every_node_that_saves_its_inputs_checks_them(op: str) -> None:
    h = pylucid.tensor([[1.0, 5.0], [2.0, -1.0]], requires_grad=True)
    y = _SAVING[op](h)
    node = y.grad_fn.name()
    with autograd.no_grad():
        h.clamp_(0.0, 4.0)
    with pytest.raises(RuntimeError, match=MODIFIED) as e:
        y.sum().backward()
    assert node in str(e.value), (node, str(e.value))


@pytest.mark.parametrize("op", ["amax", "amin", "max", "min"])
def test_the_selecting_reductions_save_positions_not_values(op: str) -> None:
    # Their node keeps the winners' positions found by the forward pass, not
    # x: a later write into x changes nothing the backward reads (the
    # gradient still goes to the forward pass's winner).
    h = pylucid.tensor([[1.0, 5.0], [2.0, -1.0]], requires_grad=True)
    y = ops.max(h, 1).values if op == "max" else ops.min(h, 1).values if op == "min" else getattr(ops, op)(h, 1)
    with autograd.no_grad():
        h.clamp_(0.0, 0.5)
    y.sum().backward()
    want = {"amax": [[0, 1], [1, 0]], "max": [[0, 1], [1, 0]], "amin": [[1, 0], [0, 1]], "min": [[1, 0], [0, 1]]}[op]
    assert h.grad.numpy().tolist() == want


def test_unaffected_cases_still_run() -> None:
    # A write before the op, a write into a tensor the node did not save
    # (add saves nothing), and a saved copy (a cast) run backward as usual.
    h = pylucid.tensor([1.0, 5.0], requires_grad=True)
    with autograd.no_grad():
        h.clamp_(0.0, 4.0)
    y = ops.minimum(h, 3.0)
    y.sum().backward()
    assert h.grad.numpy().tolist() == [1.0, 0.0]
    g = pylucid.tensor([1.0, 5.0], requires_grad=True)
    z = g + 1.0
    with autograd.no_grad():
        g.clamp_(0.0, 2.0)
    z.sum().backward()
    assert g.grad.numpy().tolist() == [1.0, 1.0]
    f = pylucid.tensor([1.0, 5.0], dtype="float32", requires_grad=True)
    w = ops.minimum(f, pylucid.tensor([3.0], dtype="float64"))  # f is saved as its float64 copy
    with autograd.no_grad():
        f.clamp_(0.0, 0.5)
    w.sum().backward()
    assert f.grad.numpy().tolist() == [1.0, 0.0]


def test_a_write_through_numpy_is_not_seen() -> None:
    # As PyTorch: memory written outside the library has no version to bump.
    h = pylucid.tensor([1.0, 5.0], requires_grad=True)
    y = ops.minimum(h, 3.0)
    h.detach().numpy()[:] = [9.0, 0.0]
    assert h._version == 0
    y.sum().backward()
    assert h.grad.numpy().tolist() == [0.0, 1.0]  # the masks from the memory as it is now


class _Square(autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2.0 * x


def test_a_function_ctx_refuses_a_saved_tensor_written_in_place() -> None:
    x = pylucid.tensor([1.0, 2.0], requires_grad=True)
    y = _Square.apply(x)
    with autograd.no_grad():
        x.clamp_(0.0, 1.0)
    _refused(lambda: y.sum().backward(), "_SquareBackward")
    x2 = pylucid.tensor([1.0, 2.0], requires_grad=True)
    _Square.apply(x2).sum().backward()
    assert x2.grad.numpy().tolist() == [2.0, 4.0]


class _Scratch(autograd.Function):
    # forward saves a buffer, then fills it with out=: writes inside forward
    # are allowed (the versions are taken when it returns), as in PyTorch
    @staticmethod
    def forward(ctx, x):
        buf = pylucid.zeros(x.shape, dtype=x.dtype)
        ctx.save_for_backward(buf)
        ops.mul(x, 2.0, out=buf)
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        (buf,) = ctx.saved_tensors
        return g * buf


def test_a_function_may_write_what_it_saved_inside_forward() -> None:
    x = pylucid.tensor([1.0, 3.0], requires_grad=True)
    _Scratch.apply(x).sum().backward()
    assert x.grad.numpy().tolist() == [2.0, 6.0]


def test_out_into_a_list_of_arrays_keeps_them_alive() -> None:
    # A list given as out= is held for the call (it could be emptied meanwhile).
    x = pylucid.tensor(np.arange(12.0).reshape(3, 4))
    outs = [pylucid.zeros(3, dtype="float64"), pylucid.zeros(3, dtype="int64")]
    v, i = ops.max(x, 1, out=outs)
    assert v is outs[0] and i is outs[1]
    assert v.numpy().tolist() == [3.0, 7.0, 11.0] and i.numpy().tolist() == [3, 3, 3]
