"""pylucid.torch inside PyTorch's compiler and transforms (docs/interop.md,
"PyTorch"): torch.compile with no graph break and eager's bits, torch.export
with torch.library ops that pass opcheck, meta/FakeTensor propagation,
torch.func and forward AD by pylucid's rule (the winner's tangent, the whole
cotangent to the winner) on data with ties, NaN and signed zeros, gradcheck
in every mode, out= and the (values, indices) reductions."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.func as tf  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

import pylucid  # noqa: E402
import pylucid.torch as pt  # noqa: E402
from pylucid import ops  # noqa: E402

F64 = torch.float64
NAN = float("nan")
# ties, NaN on either side and both, signed zeros
A = [[1.0, 2.0, NAN, -0.0], [0.0, 3.0, NAN, 5.0]]
B = [[1.0, NAN, 2.0, 0.0], [-0.0, 4.0, NAN, 1.0]]

# Each op on (a, b) float64 tensors of shape (2, 4): a name and a function.
FAMILY = {
    "minimum": lambda a, b: pt.minimum(a, b),
    "maximum": lambda a, b: pt.maximum(a, b),
    "fmin": lambda a, b: pt.fmin(a, b),
    "fmax": lambda a, b: pt.fmax(a, b),
    "minimum_broadcast": lambda a, b: pt.minimum(a, b.sum(0)),
    "clamp_numbers": lambda a, b: pt.clamp(a, -0.0, 2.0),
    "clamp_tensors": lambda a, b: pt.clamp(a, b, b + 1.0),
    "clamp_min_tensor": lambda a, b: pt.clamp(a, min=b),
    "amin": lambda a, b: pt.amin(a, 1),
    "amax_all": lambda a, b: pt.amax(a),
    "amax_dims_keepdim": lambda a, b: pt.amax(a, (0, 1), keepdim=True),
    "min_dim": lambda a, b: pt.min(a, 1).values,
    "max_dim_keepdim": lambda a, b: pt.max(a, 0, keepdim=True)[0],
}
# The same with pylucid's own ops (the rule's reference).
REFERENCE = {
    "minimum": lambda a, b: ops.minimum(a, b),
    "maximum": lambda a, b: ops.maximum(a, b),
    "fmin": lambda a, b: ops.fmin(a, b),
    "fmax": lambda a, b: ops.fmax(a, b),
    "minimum_broadcast": lambda a, b: ops.minimum(a, ops.sum(b, 0)),
    "clamp_numbers": lambda a, b: ops.clamp(a, -0.0, 2.0),
    "clamp_tensors": lambda a, b: ops.clamp(a, b, b + 1.0),
    "clamp_min_tensor": lambda a, b: ops.clamp(a, b, None),
    "amin": lambda a, b: ops.amin(a, 1),
    "amax_all": lambda a, b: ops.amax(a),
    "amax_dims_keepdim": lambda a, b: ops.amax(a, (0, 1), True),
    "min_dim": lambda a, b: ops.min(a, 1)[0],
    "max_dim_keepdim": lambda a, b: ops.max(a, 0, True)[0],
}
NAMES = sorted(FAMILY)


def data(requires_grad: bool = False, nan: bool = True):
    if nan:
        a, b = torch.tensor(A, dtype=F64), torch.tensor(B, dtype=F64)
    else:  # tie-free, NaN-free: finite differences apply
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(2, 4, dtype=F64, generator=g), torch.randn(2, 4, dtype=F64, generator=g)
    return a.requires_grad_(requires_grad), b.requires_grad_(requires_grad)


def bits(t):
    return t.detach().contiguous().view(torch.int64) if t.dtype == F64 else t.detach()


def same_bits(x, y):
    assert x.shape == y.shape and x.dtype == y.dtype
    assert torch.equal(bits(x), bits(y)), (x, y)


def reference(name):
    """pylucid's value and the gradients of sum(y * v) for both operands."""
    a, b = data()
    pa = pylucid.tensor(a.numpy(), requires_grad=True)
    pb = pylucid.tensor(b.numpy(), requires_grad=True)
    y = REFERENCE[name](pa, pb)
    v = np.arange(1.0, 1.0 + y.detach().numpy().size).reshape(y.shape)
    (y * pylucid.tensor(v)).sum().backward()
    grads = [torch.from_numpy(np.array(p.grad.numpy() if p.grad is not None else np.zeros(p.shape)))
             for p in (pa, pb)]
    return torch.from_numpy(np.array(y.detach().numpy())), torch.from_numpy(v), grads


# ---- torch.compile


@pytest.mark.parametrize("name", NAMES)
def test_dynamo_sees_one_graph_and_no_break(name):
    a, b = data(True)
    ex = torch._dynamo.explain(FAMILY[name])(a, b)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons


@pytest.mark.parametrize("name", NAMES)
def test_compile_fullgraph_gives_eager_bits_backward_included(name):
    torch._dynamo.reset()
    f = FAMILY[name]
    a, b = data(True)
    want = f(a, b)
    got = torch.compile(f, fullgraph=True)(a, b)
    same_bits(got, want)
    v = torch.arange(1.0, 1.0 + want.numel(), dtype=F64).reshape(want.shape)
    gw = torch.autograd.grad(want, (a, b), v, allow_unused=True)
    gg = torch.autograd.grad(got, (a, b), v, allow_unused=True)
    for x, y in zip(gw, gg):
        assert (x is None) == (y is None)
        if x is not None:
            same_bits(y, x)
    # and both are pylucid's rule
    ry, _, rgrads = reference(name)
    same_bits(want, ry.reshape(want.shape))
    for g, r in zip(gw, rgrads):
        torch.testing.assert_close(g if g is not None else torch.zeros_like(r), r, rtol=0, atol=0)


def test_compiled_training_step_matches_eager():
    # A small box loss (the shape of real use: many small calls per step):
    # intersection by minimum/maximum, a clamp, an amax; SGD, three steps.
    torch.manual_seed(0)

    def make():
        torch.manual_seed(0)
        return torch.nn.Linear(8, 4, dtype=F64)

    boxes = torch.rand(16, 8, dtype=F64)
    target = torch.rand(16, 4, dtype=F64)

    def loss_fn(model, x):
        p = model(x)
        lo = pt.maximum(p[:, :2], target[:, :2])
        hi = pt.minimum(p[:, 2:], target[:, 2:])
        inter = pt.clamp(hi - lo, min=0.0).prod(1)
        return (1.0 - inter).mean() + 0.1 * pt.amax(p.abs(), 1).mean()

    def train(step_fn, model):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = step_fn(model, boxes)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().clone() for p in model.parameters()]

    eager = train(loss_fn, make())
    compiled = train(torch.compile(loss_fn, fullgraph=True), make())
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-12)
    for p, q in zip(compiled[1], eager[1]):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)


# ---- torch.export, opcheck, meta and fake tensors


class Family(torch.nn.Module):
    def forward(self, a, b):
        return tuple(FAMILY[n](a, b) for n in NAMES) + (pt.argmin(a, 1), pt.argmax(a), pt.min(a, 0).indices)


def test_export_holds_pylucid_ops_and_matches_eager():
    a, b = data()
    ep = torch.export.export(Family(), (a, b))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {"pylucid.minimum.default", "pylucid.clamp.default", "pylucid.amax.default",
            "pylucid.min.default", "pylucid.argmax.default"} <= targets
    for got, want in zip(ep.module()(a, b), Family()(a, b)):
        same_bits(got, want)


SAMPLES = {  # every registered op: sample arguments for opcheck
    "minimum": lambda a, b: (a, b), "maximum": lambda a, b: (a, b[0]), "fmin": lambda a, b: (a, b),
    "fmax": lambda a, b: (a, b), "clamp": lambda a, b: (a, b, None), "amin": lambda a, b: (a, [1], False),
    "amax": lambda a, b: (a, [0, 1], True), "argmin": lambda a, b: (a, 1, False),
    "argmax": lambda a, b: (a, None, False), "min": lambda a, b: (a, 1, False), "max": lambda a, b: (a, 0, True),
}


@pytest.mark.parametrize("op", pt.TORCH_OPS)
def test_opcheck_passes_on_every_registered_op(op):
    base = op[:-len("_winners")] if op.endswith("_winners") else op
    a, b = data(nan=False)
    args = SAMPLES[base](a, b)
    result = torch.library.opcheck(getattr(torch.ops.pylucid, op).default, args)
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("op", [o for o in pt.TORCH_OPS if o.split("_")[0] in ("minimum", "maximum", "fmin", "fmax")])
def test_binary_ops_lay_results_out_as_torch_and_as_their_fake(op):
    # Same-shape operands laid out alike (transposed): the result keeps that
    # layout, as torch.minimum's does, in eager and in the fake kernel.
    a, b = (torch.from_numpy(np.random.default_rng(s).standard_normal((5, 3))).t() for s in (1, 2))
    assert a.stride() == b.stride() == (1, 3)
    result = torch.library.opcheck(getattr(torch.ops.pylucid, op).default, (a, b))
    assert set(result.values()) == {"SUCCESS"}, result
    name = op.split("_")[0]
    want = getattr(torch, name)(a, b)
    got = getattr(pt, name)(a, b)
    assert got.stride() == want.stride() == (1, 3)
    same_bits(got, want)
    with FakeTensorMode():
        fake = getattr(torch.ops.pylucid, op)(torch.empty_strided((3, 5), (1, 3), dtype=F64),
                                              torch.empty_strided((3, 5), (1, 3), dtype=F64))
        for f in (fake if isinstance(fake, tuple) else (fake,)):
            assert f.stride() == (1, 3)


@pytest.mark.parametrize("name", NAMES)
def test_fake_and_meta_inputs_give_shape_and_dtype_without_data(name):
    a, b = data()
    want = FAMILY[name](a, b)
    with FakeTensorMode():
        fa, fb = torch.empty(2, 4, dtype=F64), torch.empty(2, 4, dtype=F64)
        got = FAMILY[name](fa, fb)
        assert type(got).__name__ == "FakeTensor"
        assert got.shape == want.shape and got.dtype == want.dtype
    m = FAMILY[name](a.to("meta"), b.to("meta"))
    assert m.device.type == "meta" and m.shape == want.shape and m.dtype == want.dtype


# ---- torch.func and forward AD, against the rule


@pytest.mark.parametrize("name", NAMES)
def test_torch_func_transforms_follow_the_rule(name):
    f = FAMILY[name]
    a, b = data()
    ry, v, (rga, rgb) = reference(name)
    ry = ry.reshape(f(a, b).shape)
    v = v.reshape(ry.shape)
    # grad / vjp: the cotangent goes whole to the winner
    ga, gb = tf.grad(lambda x, y: (f(x, y) * v).sum(), argnums=(0, 1))(a, b)
    same_bits(ga, rga)
    same_bits(gb, rgb)
    out, vjp_fn = tf.vjp(f, a, b)
    same_bits(out, ry)
    va, vb = vjp_fn(v)
    same_bits(va, rga)
    same_bits(vb, rgb)
    # jacrev and jacfwd agree: the tangent of an output is its winner's
    jr = tf.jacrev(f, argnums=(0, 1))(a, b)
    jf = tf.jacfwd(f, argnums=(0, 1))(a, b)
    for r, w in zip(jr, jf):
        same_bits(r, w)
    # jvp and forward AD give J·t
    ta, tb = torch.full_like(a, 2.0), torch.full_like(b, 3.0)
    _, t = tf.jvp(f, (a, b), (ta, tb))
    n_out = ry.numel()
    jt = sum(j.reshape(n_out, -1) @ u.reshape(-1) for j, u in zip(jr, (ta, tb))).reshape(ry.shape)
    same_bits(t, jt)
    import torch.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        y = f(fwAD.make_dual(a, ta), fwAD.make_dual(b, tb))
        same_bits(fwAD.unpack_dual(y).tangent, jt)
    # hessian: the rule's Jacobian is piecewise constant
    h = tf.hessian(lambda x: (f(x, b) ** 2).sum())(a.nan_to_num())
    assert h.shape == a.shape + a.shape and torch.isfinite(h).all()


@pytest.mark.parametrize("name", NAMES)
def test_vmap_batched_and_unbatched_operands(name):
    f = FAMILY[name]
    a, b = data()
    xs = torch.stack([a, a.flip(1), b])
    for in_dims, call in (((0, 0), lambda i: f(xs[i], xs.flip(0)[i])),
                          ((0, None), lambda i: f(xs[i], b)),
                          ((None, 0), lambda i: f(a, xs[i]))):
        args = (xs if in_dims[0] == 0 else a, xs.flip(0) if in_dims == (0, 0) else xs if in_dims[1] == 0 else b)
        got = tf.vmap(f, in_dims=in_dims)(*args)
        for i in range(3):
            same_bits(got[i], call(i))


@pytest.mark.parametrize("name", NAMES)
def test_gradcheck_in_every_mode(name):
    f = FAMILY[name]
    a, b = data(True, nan=False)
    assert torch.autograd.gradcheck(f, (a, b), check_forward_ad=True, check_batched_grad=True,
                                    check_batched_forward_grad=True)
    assert torch.autograd.gradgradcheck(f, (a, b), check_fwd_over_rev=True, check_batched_grad=True)


# ---- out= and the index reductions


def test_out_writes_and_returns_out_and_refuses_grad():
    a, b = data(nan=False)
    out = torch.empty(2, 4, dtype=F64)
    assert pt.minimum(a, b, out=out) is out
    same_bits(out, torch.minimum(a, b))
    small = torch.empty(0, dtype=F64)
    pt.clamp(a, -0.5, 0.5, out=small)  # resized, as torch does
    same_bits(small, torch.clamp(a, -0.5, 0.5))
    vals, idx = torch.empty(2, dtype=F64), torch.empty(2, dtype=torch.int64)
    r = pt.min(a, 1, out=(vals, idx))
    assert r.values is vals and r.indices is idx
    assert torch.equal(idx, torch.min(a, 1).indices)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        pt.maximum(a.requires_grad_(), b, out=out)
    with pytest.raises(RuntimeError, match="can't be cast"):
        pt.minimum(a.detach(), b, out=torch.empty(2, 4, dtype=torch.int64))


def test_index_reductions_equal_torch_on_tie_free_data():
    a, _ = data(nan=False)
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            assert torch.equal(pt.argmin(a, dim, keepdim), torch.argmin(a, dim, keepdim))
            assert torch.equal(pt.argmax(a, dim, keepdim), torch.argmax(a, dim, keepdim))
            got, want = pt.max(a, dim, keepdim), torch.max(a, dim, keepdim)
            assert type(got) is type(want)
            assert torch.equal(got.values, want.values) and torch.equal(got.indices, want.indices)
    assert torch.equal(pt.argmax(a), torch.argmax(a))
    assert torch.equal(pt.min(a), torch.min(a))
    assert torch.equal(pt.max(a, torch.zeros(4, dtype=F64)), torch.max(a, torch.zeros(4, dtype=F64)))
    # the first NaN wins, as torch's argmax
    x = torch.tensor([1.0, NAN, 3.0, NAN])
    assert pt.argmax(x).item() == 1 == torch.argmax(x).item()
