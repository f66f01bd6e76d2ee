"""pylucid.torch: the min/max family as torch.autograd Functions running
pylucid's kernels on the torch tensors' memory (docs/interop.md).

On tie-free, NaN-free data values and gradients equal torch's own ops; at
ties and NaN pylucid's rule holds (docs/semantics.md) where torch splits;
gradcheck and gradgradcheck pass; nothing is copied either way."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pylucid  # noqa: E402
import pylucid.torch as pt  # noqa: E402

F64 = torch.float64
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _rand(*shape, dtype=F64, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=F64).to(dtype).requires_grad_(requires_grad)


def _leaves(*ts):
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in ts]


def _grads(fn, inputs, seed=1):
    """fn(*inputs) and the gradients of <fn(*inputs), w> for a random w."""
    y = fn(*inputs)
    w = _rand(*y.shape, seed=seed).to(y.dtype)
    diff = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    gs = torch.autograd.grad((y * w).sum(), diff)
    return y, gs


def _same(ours, theirs):
    y, gs = ours
    ty, tgs = theirs
    assert y.dtype == ty.dtype and y.shape == ty.shape
    assert torch.equal(y, ty), (y, ty)
    for g, tg in zip(gs, tgs):
        assert g.dtype == tg.dtype and g.shape == tg.shape
        if g.numel() == y.numel() or g.numel() == 1 and y.numel() <= 1:
            assert torch.equal(g, tg), (g, tg)  # each element is one selected gradient: exact
        else:
            torch.testing.assert_close(g, tg)  # summed over broadcast dims, perhaps in another order


# ---- values and gradients equal torch's on tie-free data ----

BINARY = [(pt.minimum, torch.minimum), (pt.maximum, torch.maximum), (pt.fmin, torch.fmin),
          (pt.fmax, torch.fmax)]
SHAPES = [((5,), (5,)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 3), ())]


@pytest.mark.parametrize("ours,theirs", BINARY, ids=lambda f: getattr(f, "__name__", "?"))
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_equals_torch_off_ties(ours, theirs, sa, sb):
    a = _rand(*sa, seed=2, requires_grad=True)
    b = _rand(*sb, seed=3, requires_grad=True)
    _same(_grads(ours, _leaves(a, b)), _grads(theirs, _leaves(a, b)))


CLAMPS = [
    dict(min=-0.5, max=0.5),
    dict(min=-0.5),
    dict(max=0.25),
    dict(min=0.5, max=-0.5),  # min > max: every element is max
    dict(min="t", max="t"),
    dict(min="t"),
    dict(min=-0.3, max="t"),
]


@pytest.mark.parametrize("kw", CLAMPS, ids=str)
def test_clamp_equals_torch_off_ties(kw):
    x = _rand(4, 5, seed=4, requires_grad=True)
    bounds = {}
    for i, (k, v) in enumerate(kw.items()):
        bounds[k] = (_rand(5, seed=10 + i, requires_grad=True) - (0.5 if k == "min" else -0.5)) if v == "t" else v
    names = [k for k, v in bounds.items() if isinstance(v, torch.Tensor)]

    def run(fn):
        ins = _leaves(x, *[bounds[k] for k in names])
        kws = dict(bounds)
        kws.update(zip(names, ins[1:]))
        if fn is torch.clamp and names:  # torch's clamp takes two numbers or two tensors
            kws = {k: v if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=F64) for k, v in kws.items()}
        return _grads(lambda *_: fn(ins[0], **kws), ins)

    _same(run(pt.clamp), run(torch.clamp))


DIMS = [(), [], None, 0, 1, -1, (0, 2), (2, -3), [1]]


@pytest.mark.parametrize("ours,theirs", [(pt.amin, torch.amin), (pt.amax, torch.amax)],
                         ids=["amin", "amax"])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_equal_torch_off_ties(ours, theirs, dim, keepdim):
    x = _rand(3, 4, 5, seed=5, requires_grad=True)
    _same(_grads(lambda t: ours(t, dim, keepdim), _leaves(x)),
          _grads(lambda t: theirs(t, dim, keepdim), _leaves(x)))


def test_reduction_defaults_are_torchs():
    x = _rand(3, 4, seed=6)
    assert torch.equal(pt.amax(x), torch.amax(x)) and pt.amax(x).shape == ()
    assert pt.amin(x, keepdim=True).shape == torch.amin(x, keepdim=True).shape == (1, 1)
    assert torch.equal(pt.amax(x, dim=1), torch.amax(x, dim=1))
    s = torch.tensor(2.5, dtype=F64)
    assert torch.equal(pt.amax(s, 0), torch.amax(s, 0))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dtypes(dtype):
    a = _rand(6, 7, dtype=dtype, seed=7, requires_grad=True)
    b = _rand(7, dtype=dtype, seed=8, requires_grad=True)
    _same(_grads(pt.minimum, _leaves(a, b)), _grads(torch.minimum, _leaves(a, b)))
    _same(_grads(lambda t: pt.clamp(t, -0.5, 0.5), _leaves(a)), _grads(lambda t: torch.clamp(t, -0.5, 0.5), _leaves(a)))
    _same(_grads(lambda t: pt.amax(t, 1), _leaves(a)), _grads(lambda t: torch.amax(t, 1), _leaves(a)))
    y = pt.fmax(a, b)
    assert y.dtype == dtype and y.grad_fn.name() == "FmaxBackward"


def test_mixed_dtypes_promote_and_grads_keep_input_dtypes():
    a = _rand(4, dtype=torch.float32, seed=9, requires_grad=True)
    b = _rand(4, dtype=F64, seed=10, requires_grad=True)
    i = torch.tensor([0, 1, -1, 2])
    _same(_grads(pt.minimum, _leaves(a, b)), _grads(torch.minimum, _leaves(a, b)))
    y, (ga,) = _grads(pt.maximum, [a, i])
    ty, (tga,) = _grads(torch.maximum, [a, i])
    assert torch.equal(y, ty) and torch.equal(ga, tga)


def test_integer_and_bool_forward():
    a, b = torch.tensor([3, -1, 7], dtype=torch.int32), torch.tensor([2, 5, 7], dtype=torch.int32)
    for ours, theirs in BINARY[:2]:
        assert torch.equal(ours(a, b), theirs(a, b))
    assert torch.equal(pt.clamp(a, 0, 4), torch.clamp(a, 0, 4))
    assert torch.equal(pt.amax(a), torch.amax(a))
    t, f = torch.tensor([True, False]), torch.tensor([False, False])
    assert torch.equal(pt.maximum(t, f), torch.maximum(t, f))


# ---- pylucid's rule where torch splits ----


def test_ties_go_whole_to_the_first_operand():
    a = torch.tensor([1.0, 2.0, -0.0, 3.0], requires_grad=True)
    b = torch.tensor([1.0, 1.0, 0.0, 3.0], requires_grad=True)
    for ours, theirs in BINARY:
        ga, gb = torch.autograd.grad(ours(a, b).sum(), (a, b))
        ta, tb = torch.autograd.grad(theirs(a, b).sum(), (a, b))
        tie = torch.tensor([True, False, True, True])
        assert torch.equal(ga[tie], torch.ones(3)) and torch.equal(gb[tie], torch.zeros(3))
        assert torch.equal(ta[tie], torch.full((3,), 0.5))  # torch halves it
        assert torch.equal(ga + gb, torch.ones(4))
    y = pt.minimum(a, b)
    assert str(y[2].item()) == "-0.0"  # the winner's bits: a's -0.0


def test_amax_at_ties_all_to_the_first_position():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, 1.0, 0.0, -1.0]], requires_grad=True)
    (g,) = torch.autograd.grad(pt.amax(x, 1).sum(), x)
    (tg,) = torch.autograd.grad(torch.amax(x, 1).sum(), x)
    assert g.tolist() == [[0, 1, 0, 0, 0], [1, 0, 0, 0, 0]]
    assert torch.allclose(tg, torch.tensor([[0, 1 / 3, 1 / 3, 0, 1 / 3], [0.5, 0.5, 0, 0, 0]]))
    (g,) = torch.autograd.grad(pt.amin(x).sum(), x)
    assert g.tolist() == [[0, 0, 0, 0, 0], [0, 0, 0, 0, 1]]
    (g,) = torch.autograd.grad(pt.amax(x, (0, 1)), x)
    assert g.sum().item() == 1 and g[0, 1].item() == 1


def test_clamp_at_the_bound_goes_to_the_input_and_min_over_max_is_max():
    x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    lo = torch.tensor([0.0, 0.0, 0.0], requires_grad=True)
    gx, glo = torch.autograd.grad(pt.clamp(x, lo, 1.0).sum(), (x, lo))
    assert gx.tolist() == [1, 1, 0] and glo.tolist() == [0, 0, 0]
    assert pt.clamp(x, 2.0, 1.0).tolist() == [1.0, 1.0, 1.0]


def test_nan_rules():
    nan = float("nan")
    a = torch.tensor([nan, 1.0, nan], requires_grad=True)
    b = torch.tensor([0.0, nan, nan], requires_grad=True)
    y = pt.minimum(a, b)
    assert torch.isnan(y).all()
    ga, gb = torch.autograd.grad(y.sum(), (a, b))
    assert ga.tolist() == [1, 0, 1] and gb.tolist() == [0, 1, 0]  # to the NaN's operand; torch: both
    y = pt.fmin(a, b)
    assert y[:2].tolist() == [0.0, 1.0] and torch.isnan(y[2])
    ga, gb = torch.autograd.grad(y.sum(), (a, b))
    assert ga.tolist() == [0, 1, 1] and gb.tolist() == [1, 0, 0]
    x = torch.tensor([1.0, nan, 5.0, nan], requires_grad=True)
    assert torch.isnan(pt.amax(x))
    (g,) = torch.autograd.grad(pt.amax(x), x)
    assert g.tolist() == [0, 1, 0, 0]  # the first NaN
    assert torch.isnan(pt.clamp(x, 0.0, 2.0)[1])


# ---- gradcheck, gradgradcheck ----

CHECKS = [
    ("minimum", lambda a, b: pt.minimum(a, b)),
    ("maximum", lambda a, b: pt.maximum(a, b)),
    ("fmin", lambda a, b: pt.fmin(a, b)),
    ("fmax", lambda a, b: pt.fmax(a, b)),
    ("clamp tensors", lambda a, b: pt.clamp(a, b - 0.3, b + 0.3)),
    ("clamp min", lambda a, b: pt.clamp(a, min=b)),
    ("clamp scalars", lambda a, b: pt.clamp(a * b, -0.4, 0.4)),
    ("amin", lambda a, b: pt.amin(a * b, 0)),
    ("amax", lambda a, b: pt.amax(a + b, (0, 1), keepdim=True)),
    ("amax all", lambda a, b: pt.amax(a - b)),
]


@pytest.mark.parametrize("fn", [f for _, f in CHECKS], ids=[n for n, _ in CHECKS])
def test_gradcheck_and_gradgradcheck(fn):
    a = _rand(3, 4, seed=11, requires_grad=True)
    b = _rand(4, seed=12, requires_grad=True)
    assert torch.autograd.gradcheck(fn, (a, b))
    assert torch.autograd.gradgradcheck(fn, (a, b))


def test_third_order_runs_and_second_derivatives_are_zero():
    a = _rand(5, seed=13, requires_grad=True)
    b = _rand(5, seed=14, requires_grad=True)
    y = pt.minimum(a, b)
    g = torch.ones_like(y, requires_grad=True)
    (ga,) = torch.autograd.grad(y, a, g, create_graph=True)
    assert ga.grad_fn is not None
    (gg,) = torch.autograd.grad((ga * ga).sum(), g, create_graph=True)
    assert torch.equal(gg, 2 * ga)  # ga = mask * g: d/dg sum(ga^2) = 2 mask^2 g
    (ggg,) = torch.autograd.grad(gg.sum(), g, retain_graph=True)
    assert torch.equal(ggg, 2 * (a <= b).to(F64))
    # no gradient from a gradient back to the inputs: the masks are constants
    (da,) = torch.autograd.grad((ga * 3).sum(), a, allow_unused=True)
    assert da is None or torch.equal(da, torch.zeros(5, dtype=F64))


# ---- training ----


def test_twenty_sgd_steps_equal_torch_minimum():
    x = _rand(32, 6, seed=15)
    target = _rand(32, seed=16)

    def train(minimum):
        torch.manual_seed(0)
        w = torch.nn.Parameter(_rand(6, seed=17))
        cap = torch.nn.Parameter(_rand(6, seed=18) + 1)
        opt = torch.optim.SGD([w, cap], lr=0.05, momentum=0.5)
        for _ in range(20):
            opt.zero_grad()
            h = minimum(x * w, cap)  # (32, 6) against (6,): broadcast
            loss = ((h.sum(1) - target) ** 2).mean()
            loss.backward()
            opt.step()
        return w.detach(), cap.detach()

    w, cap = train(pt.minimum)
    tw, tcap = train(torch.minimum)
    assert torch.equal(w, tw) and torch.equal(cap, tcap)


# ---- memory: shared, never copied ----


@pytest.fixture
def spy(monkeypatch):
    # Every pylucid kernel call of pylucid.torch: the tensors whose memory
    # it reads and writes (lent for the call: data_ptr, shape, strides).
    seen = []
    real = pylucid._hot.lent

    def lent(op, winners, ins, attrs, outs, codes):
        seen.append((ins, outs))
        return real(op, winners, ins, attrs, outs, codes)

    real_binary = pylucid._hot.lent_binary

    def lent_binary(op, winners, a, b, codes, empty_like, mask_kwargs):
        r = real_binary(op, winners, a, b, codes, empty_like, mask_kwargs)
        if r is not None:  # the same lending, the outputs made by empty_like
            seen.append(((a, b), r if winners else (r,)))
        return r

    monkeypatch.setattr(pylucid._hot, "lent", lent)
    monkeypatch.setattr(pylucid._hot, "lent_binary", lent_binary)
    return seen


def test_nothing_is_copied_either_way(spy):
    base = _rand(6, 8, seed=19)
    a = base[:, ::2].requires_grad_()  # non-contiguous: shares base's memory
    b = _rand(4, 6, seed=20).t().requires_grad_()  # transposed
    assert not a.is_contiguous() and not b.is_contiguous()
    y = pt.minimum(a, b)
    assert torch.equal(y, torch.minimum(a, b))
    ((ins, outs),) = spy
    # pylucid read the inputs where they are and wrote y itself
    assert [t.data_ptr() for t in ins] == [a.data_ptr(), b.data_ptr()]
    assert outs[0].data_ptr() == y.data_ptr()
    # the output's memory is its own
    ys = (y.data_ptr(), y.data_ptr() + y.untyped_storage().nbytes())
    for x in (a, b):
        xs = (x.data_ptr(), x.data_ptr() + x.untyped_storage().nbytes())
        assert ys[1] <= xs[0] or xs[1] <= ys[0]
    # the backward is pylucid's route of g by the forward's mask, read where
    # g is and written into the gradients themselves
    spy.clear()
    g = _rand(4, 6, seed=21).t()  # non-contiguous too
    ga, gb = torch.autograd.grad(y, (a, b), g)
    ((ins, outs),) = spy
    assert ins[0].dtype == torch.bool and ins[1].data_ptr() == g.data_ptr()
    assert [o.data_ptr() for o in outs] == [ga.data_ptr(), gb.data_ptr()]
    assert torch.equal(ga + gb, g)
    wa = (a <= b).to(F64)
    assert torch.equal(ga, g * wa) and torch.equal(gb, g * (1 - wa))
    # with create_graph, the same gradients (differentiable torch selections)
    gg = g.clone().requires_grad_()
    ga2, gb2 = torch.autograd.grad(pt.minimum(a, b), (a, b), gg, create_graph=True)
    assert torch.equal(ga2, ga) and torch.equal(gb2, gb) and ga2.requires_grad


def test_inputs_modified_in_place_after_the_forward_do_not_change_its_gradient():
    # The node saves pylucid's winner mask, not the inputs (a deliberate
    # difference from torch.minimum, which saves them and raises here): the
    # gradient is the forward's, whatever happens to the inputs afterwards.
    a = _rand(4, seed=22, requires_grad=True)
    b = _rand(4, seed=23)
    c = a * 1
    y = pt.minimum(c, b)
    want = (c <= b).to(a.dtype)
    c.add_(100)
    y.sum().backward()
    assert torch.equal(a.grad, want)
    # y itself is saved by nothing either: modifying it is no error
    (y2 := pt.minimum(a * 1, b)).add_(1)


def test_memory_is_released():
    a = _rand(1000, seed=24, requires_grad=True)
    b = _rand(1000, seed=25, requires_grad=True)
    for _ in range(3):
        pt.minimum(a, b).sum().backward()
    pylucid._collect()
    before = pylucid._stats()
    for _ in range(50):
        pt.amax(pt.clamp(pt.minimum(a, b), -1.0, 1.0), 0).backward()
    del _
    pylucid._collect()
    after = pylucid._stats()
    assert after["borrowed"] <= before["borrowed"] and after["dlpack"] <= before["dlpack"]
    assert after["handles"] <= before["handles"] + 2


# ---- errors ----


def test_meta_tensors_propagate_and_devices_do_not_mix():
    # meta inputs give meta outputs of the right shape and dtype (the fake
    # kernels; no data is read); meta mixed with CPU is refused.
    m = torch.empty(3, 1, device="meta", dtype=torch.float16)
    c = torch.zeros(4)
    y = pt.minimum(m, m)
    assert y.device.type == "meta" and y.shape == (3, 1) and y.dtype == torch.float16
    assert pt.amax(m, 0).shape == (1,)
    assert pt.clamp(m, 0.0, 1.0).dtype == torch.float16
    for fn in (lambda: pt.minimum(m, c), lambda: pt.minimum(c, m), lambda: pt.clamp(c, min=m)):
        with pytest.raises(RuntimeError, match="same device"):
            fn()


def test_unsupported_dtypes_are_refused():
    z = torch.zeros(3, dtype=torch.complex64)
    with pytest.raises(TypeError, match="complex64"):
        pt.minimum(z, z)
    with pytest.raises(TypeError, match="uint16"):
        pt.amax(torch.zeros(3, dtype=torch.uint16))


def test_integer_inputs_cannot_require_grad():
    # torch itself refuses integer tensors that require grad ...
    with pytest.raises(RuntimeError, match="floating point"):
        torch.tensor([1, 2]).requires_grad_()
    # ... so the bridge's own check is seen only through a tensor that claims it does
    class Claims(torch.Tensor):
        requires_grad = property(lambda self: True)  # type: ignore[assignment]

    i = torch.tensor([1, 2]).as_subclass(Claims)
    with pytest.raises(TypeError, match="int64 requires grad; only floating"):
        pt.minimum(i, torch.tensor([0, 3]))
    # ... and an integer input next to a floating one gets no gradient
    a = torch.tensor([1.0, 5.0], requires_grad=True)
    (g,) = torch.autograd.grad(pt.minimum(torch.tensor([3, 3]), a).sum(), a)
    assert g.tolist() == [1.0, 0.0]


def test_bad_arguments():
    x = torch.zeros(3)
    with pytest.raises(TypeError, match="torch.Tensor"):
        pt.minimum(x, np.zeros(3))
    with pytest.raises(ValueError, match="min and max"):
        pt.clamp(x)
    with pytest.raises(TypeError, match="min must be"):
        pt.clamp(x, min="0")
    with pytest.raises(TypeError, match="dim"):
        pt.amax(x, dim=1.0)
    with pytest.raises((IndexError, ValueError)):
        pt.amax(x, dim=3)
    with pytest.raises(ValueError):
        pt.amin(torch.zeros(0, 3), 0)


def test_function_names():
    a = torch.zeros(2, requires_grad=True)
    names = {f.__name__: f(a, a).grad_fn.name() for f in (pt.minimum, pt.maximum, pt.fmin, pt.fmax)}
    assert names == {"minimum": "MinimumBackward", "maximum": "MaximumBackward", "fmin": "FminBackward",
                     "fmax": "FmaxBackward"}
    assert pt.clamp(a, 0.0).grad_fn.name() == "ClampBackward"
    assert pt.amin(a).grad_fn.name() == "AminBackward" and pt.amax(a).grad_fn.name() == "AmaxBackward"


def test_a_large_tensor_equals_torch():
    a = _rand(1 << 15, seed=28, requires_grad=True)
    b = _rand(1 << 15, seed=29, requires_grad=True)
    _same(_grads(pt.minimum, _leaves(a, b)), _grads(torch.minimum, _leaves(a, b)))


def test_expanded_zero_size_and_0d_inputs():
    base = _rand(4, 1, seed=30, requires_grad=True)
    b = _rand(4, 5, seed=31, requires_grad=True)
    _same(_grads(lambda u, v: pt.maximum(u.expand(4, 5), v), _leaves(base, b)),
          _grads(lambda u, v: torch.maximum(u.expand(4, 5), v), _leaves(base, b)))  # stride-0 input
    e = torch.zeros(0, 3, requires_grad=True)
    y = pt.minimum(e, torch.zeros(3))
    assert y.shape == (0, 3)
    (g,) = torch.autograd.grad(y.sum(), e)
    assert g.shape == (0, 3)
    s = torch.tensor(1.5, dtype=F64, requires_grad=True)
    _same(_grads(lambda u: pt.clamp(u, 0.0, 1.0), _leaves(s)), _grads(lambda u: torch.clamp(u, 0.0, 1.0), _leaves(s)))


def test_threads():
    import threading

    a = _rand(64, 8, seed=32)
    b = _rand(8, seed=33)
    want = _grads(pt.minimum, _leaves(a.requires_grad_(), b.requires_grad_()))
    errors = []

    def work():
        try:
            for _ in range(30):
                _same(_grads(pt.minimum, _leaves(a, b)), want)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_the_bridge_broadcasts_shapes_as_torch_does() -> None:
    # pylucid.torch broadcasts plain int shapes itself (torch.broadcast_shapes
    # is ~25 us a call); the result and the errors are torch's.
    from pylucid._torch_ops import _broadcast

    rng = np.random.default_rng(0)
    for _ in range(300):
        shapes = [tuple(int(d) for d in rng.choice([0, 1, 2, 3], size=rng.integers(0, 4))) for _ in range(rng.integers(1, 4))]
        try:
            want = list(torch.broadcast_shapes(*shapes))
        except RuntimeError as e:
            with pytest.raises(RuntimeError) as ours:
                _broadcast(*shapes)
            assert str(ours.value) == str(e)  # torch's own error
            continue
        assert _broadcast(*shapes) == want, shapes


def test_number_bounds_are_reused_but_never_mixed_up() -> None:
    x = torch.tensor([-1.0, 0.3, 0.7, 2.0])
    for lo, hi in [(0.0, 1.0), (0.25, 0.5), (0.0, 0.5), (-0.0, 1.0), (1, 2)]:
        np.testing.assert_array_equal(pt.clamp(x, lo, hi).numpy(), torch.clamp(x, lo, hi).numpy())
    with torch.inference_mode():  # a bound made here is an inference tensor: not kept for later calls
        pt.clamp(x, 0.125)
    leaf = x.clone().requires_grad_()
    pt.clamp(leaf, 0.125).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [0.0, 1.0, 1.0, 1.0])


def test_numpy_and_enum_number_bounds_are_numbers() -> None:
    import enum

    class Level(enum.IntEnum):
        ONE = 1

    x = torch.tensor([-1.0, 0.3, 0.7, 2.0])
    np.testing.assert_array_equal(pt.clamp(x, np.float64(0.5)).numpy(), torch.clamp(x, 0.5).numpy())
    np.testing.assert_array_equal(pt.clamp(x, max=Level.ONE).numpy(), torch.clamp(x, max=1).numpy())


@pytest.mark.parametrize("bounds", [{"min": 0.0}, {"max": -0.0}, {"min": -1.0, "max": 1.0}, {"min": 1},
                                    {"max": float("nan")}, {"min": 0.5, "max": -0.5}], ids=str)
def test_clamp_with_number_bounds_on_a_strided_leaf_view_follows_the_rule(bounds):
    """clamp of a plain eager tensor with number bounds (the common
    clamp(x, min=0) of a model) takes its own path: values bit for bit
    pylucid's, the gradient the rule's (whole to x where x won, at ties, NaN
    and signed zeros as pylucid's own autograd routes it), on a strided view
    of a leaf, first order and with create_graph."""
    from pylucid import ops

    vals = np.array([0.0, -0.0, 1.0, -1.0, np.nan, 0.5, -0.5, 2.0, -3.0, 0.25], np.float32)
    p = torch.from_numpy(np.stack([vals, vals[::-1].copy()], 1)).requires_grad_()
    x = p[:, 0]  # stride 2
    w = torch.arange(1.0, 11.0)
    y = pt.clamp(x, **bounds)
    assert y.grad_fn.name() == "ClampBackward"
    px = pylucid.tensor(vals, requires_grad=True)
    py = ops.clamp(px, bounds.get("min"), bounds.get("max"))
    np.testing.assert_array_equal(y.detach().numpy().view(np.uint32), py.detach().numpy().view(np.uint32))
    (ops.sum(py * pylucid.tensor(w.numpy()))).backward()
    for create_graph in (False, True):
        (g,) = torch.autograd.grad(pt.clamp(x, **bounds), p, w, create_graph=create_graph)
        np.testing.assert_array_equal(g[:, 0].detach().numpy(), px.grad.numpy())
        assert not g[:, 1].any()
    with torch.no_grad():
        assert torch.equal(pt.clamp(x, **bounds).view(torch.int32), y.detach().view(torch.int32))


@pytest.mark.parametrize("name", ["minimum", "maximum", "fmin", "fmax"])
@pytest.mark.parametrize("side", [0, 1, 2], ids=["a", "b", "both"])
def test_binary_gradient_when_one_operand_requires_grad_follows_the_rule(name, side):
    """The backward writes only the part an operand needs (one pass of
    pylucid's kernel each way): gradients equal pylucid's own autograd at
    ties, NaN and signed zeros, with broadcasting, for a, b or both
    requiring grad."""
    from pylucid import ops

    a = np.array([[1.0, np.nan, 0.0, -0.0, 2.0], [3.0, 1.0, np.nan, 0.0, -1.0]], np.float32)
    b = np.array([1.0, 2.0, -0.0, 0.0, np.nan], np.float32)
    w = np.arange(1.0, 11.0, dtype=np.float32).reshape(2, 5)
    ta = torch.from_numpy(a.copy()).requires_grad_(side in (0, 2))
    tb = torch.from_numpy(b.copy()).requires_grad_(side in (1, 2))
    y = getattr(pt, name)(ta, tb)
    wants = [t for t in (ta, tb) if t.requires_grad]
    got = torch.autograd.grad(y, wants, torch.from_numpy(w))
    la, lb = pylucid.tensor(a, requires_grad=True), pylucid.tensor(b, requires_grad=True)
    ops.sum(getattr(ops, name)(la, lb) * pylucid.tensor(w)).backward()
    ref = [g for g, t in zip((la.grad, lb.grad), (ta, tb)) if t.requires_grad]
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g.numpy(), r.numpy())


def test_tensor_indexing_with_ints_and_arrays_matches_torch() -> None:
    """pylucid.Tensor's indexing (not the bridge) follows torch where NumPy
    differs: ints index before arrays (docs/tensor.md). Random keys of ints,
    slices, int lists, bool masks, None and ..., read and written, against
    torch on the same data."""
    rng = np.random.default_rng(7)
    x = np.arange(60.0).reshape(3, 4, 5)

    def part(d: int) -> Any:
        n = x.shape[d]
        kind = rng.integers(4)
        if kind == 0:
            return int(rng.integers(-n, n))
        if kind == 1:
            return slice(int(rng.integers(0, n)), None, int(rng.choice([1, 2])))
        if kind == 2:
            return [int(i) for i in rng.integers(-n, n, size=int(rng.integers(1, 3)))]
        return rng.random(n) > 0.4

    checked = 0
    for _ in range(300):
        key: list = [part(d) for d in range(3)]
        if rng.integers(3) == 0:
            key.insert(int(rng.integers(0, 4)), None)
        if rng.integers(3) == 0:
            key[int(rng.integers(0, len(key)))] = Ellipsis
        k = tuple(key)
        tk = tuple(torch.tensor(v) if isinstance(v, (list, np.ndarray)) else v for v in k)
        try:
            want = torch.from_numpy(x)[tk]
        except (IndexError, RuntimeError):  # e.g. masks and lists that do not broadcast
            with pytest.raises(IndexError):
                pylucid.tensor(x)[k]
            continue
        got = pylucid.tensor(x)[k]
        assert got.shape == tuple(want.shape), k
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        t, tt = pylucid.tensor(x), torch.from_numpy(x.copy())
        t[k] = -1.0
        tt[tk] = -1.0
        np.testing.assert_array_equal(t.numpy(), tt.numpy())
        checked += 1
    assert checked > 150


# ---- tensors whose memory does not hold their values as they read ----

# (name, call): every function of the family, on x (and y: a second operand)
LAZY_CALLS = [
    ("minimum", lambda x, y: pt.minimum(x, y)), ("maximum", lambda x, y: pt.maximum(x, y)),
    ("fmin", lambda x, y: pt.fmin(x, y)), ("fmax", lambda x, y: pt.fmax(x, y)),
    ("clamp_number", lambda x, y: pt.clamp(x, 0.0)), ("clamp_numbers", lambda x, y: pt.clamp(x, -1.0, 1.0)),
    ("clamp_tensors", lambda x, y: pt.clamp(x, y, y + 1)), ("amin", lambda x, y: pt.amin(x, 1)),
    ("amax", lambda x, y: pt.amax(x)), ("argmin", lambda x, y: pt.argmin(x)),
    ("argmax", lambda x, y: pt.argmax(x, 1)), ("min", lambda x, y: pt.min(x, 1)[0]),
    ("max_indices", lambda x, y: pt.max(x, 0)[1]), ("max_all", lambda x, y: pt.max(x)),
]


def _tricky(dtype, seed):
    """Values with ties, NaN and signed zeros, (3, 4)."""
    v = torch.tensor([[2.0, -4.0, 0.0, -0.0], [float("nan"), 1.0, 1.0, -3.0], [5.0, -5.0, 2.0, 0.5]], dtype=F64)
    return (v + seed).to(dtype) if seed else v.to(dtype)


@pytest.fixture(params=["C", "ABI"])
def lent_path(request, monkeypatch):
    """Both readers of a torch tensor's memory: python/csrc/lent.c and the
    cffi fallback (_torch_ops._Lent)."""
    if request.param == "ABI":
        import pylucid._torch_ops as tops
        monkeypatch.setattr(tops, "_hot", tops._Lent)
        monkeypatch.setattr(pt, "_hot", tops._Lent)
    return request.param


def _bits(t):
    return t.view(torch.int16 if t.element_size() == 2 else torch.int64 if t.element_size() == 8 else
                  torch.int32 if t.element_size() == 4 else torch.uint8) if t.is_floating_point() else t


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name,call", LAZY_CALLS, ids=[n for n, _ in LAZY_CALLS])
def test_negative_bit_views_are_read_by_value(lent_path, name, call, dtype):
    """torch's negative bit (z.conj().imag, torch._neg_view: a lazily negated
    view over the same memory): every function reads the values the view
    shows, in the plain call, in the recording call, and for a negated
    incoming gradient, bit for bit as on the materialised tensor (the issue:
    pt.minimum read the raw memory, [0, -4, 0] for torch's [-2, 0, -6])."""
    z, w = _tricky(dtype, 0), _tricky(dtype, 0.5)
    lazy_x, lazy_y = torch._neg_view(z), torch._neg_view(w)
    assert lazy_x.is_neg() and lazy_x.data_ptr() == z.data_ptr()
    want = call(z.neg(), w.neg())
    got = call(lazy_x, lazy_y)
    assert torch.equal(_bits(got), _bits(want)), (got, want)
    if name.startswith("arg") or name == "max_indices":
        return
    # Recording: the leaf's gradient through a negated view, with a negated
    # incoming gradient; against the same with both materialised.
    g = torch.arange(1.0, 1.0 + want.numel(), dtype=F64).reshape(want.shape).to(dtype)
    grads = []
    for lazy in (True, False):
        a = z.clone().requires_grad_(True)
        b = w.clone().requires_grad_(True)
        xa = torch._neg_view(a * 1) if lazy else (a * 1).neg()
        xb = torch._neg_view(b * 1) if lazy else (b * 1).neg()
        y = call(xa, xb)
        y.backward(torch._neg_view(g.clone()) if lazy else g.neg())
        grads.append((y.detach(), a.grad, b.grad))
    for ours, ref in zip(grads[0], grads[1]):
        if ref is None:
            assert ours is None
            continue
        assert torch.equal(_bits(ours), _bits(ref)), (ours, ref)


def test_the_negative_bit_example_of_the_issue_matches_torch():
    z = torch.tensor([1 + 2j, 3 - 4j, 5 + 6j])
    v = z.conj().imag  # [-2, 4, -6], lazily negated over z's memory
    assert v.is_neg()
    zero = torch.zeros(3)
    assert torch.equal(pt.minimum(v, zero), torch.minimum(v, zero))
    assert torch.equal(pt.minimum(v, zero), torch.tensor([-2.0, 0.0, -6.0]))
    assert torch.equal(pt.clamp(v, 0.0), torch.clamp(v, 0.0))
    assert torch.equal(pt.amax(v), torch.amax(v)) and torch.equal(pt.argmax(v), torch.argmax(v))
    assert torch.equal(pt.max(v, 0).values, torch.max(v, 0).values)


def test_zero_tensors_without_memory_are_read_as_zeros(lent_path):
    """torch's ZeroTensor (an efficient zero with no memory, data_ptr 0):
    read as its zeros, not refused with a message about memory."""
    zt = torch._efficientzerotensor(3)
    assert zt._is_zerotensor() and zt.data_ptr() == 0
    one = torch.tensor([1.0, -1.0, 0.0])
    assert torch.equal(pt.minimum(zt, one), torch.minimum(torch.zeros(3), one))
    assert torch.equal(pt.amax(zt), torch.tensor(0.0))
    assert torch.equal(pt.clamp(one, zt), torch.tensor([1.0, 0.0, 0.0]))


@pytest.mark.parametrize("layout", ["sparse_coo", "mkldnn"])
def test_tensors_without_strided_memory_raise(layout):
    """A layout whose memory is not a strided array raises a clear error
    (as torch.minimum does), never reads whatever data_ptr points at."""
    x = torch.tensor([1.0, 0.0, 2.0])
    x = x.to_sparse() if layout == "sparse_coo" else x.to_mkldnn()
    for fn in (lambda: pt.minimum(x, torch.ones(3)), lambda: pt.amax(x), lambda: pt.clamp(x, 0.0)):
        with pytest.raises(RuntimeError, match="storage|stride|layout|mkldnn|Mkldnn|sparse|Sparse"):
            fn()


@pytest.mark.parametrize("dims", [(0, 0), (0, -2), [1, -1], (1, 0, 1)], ids=str)
def test_a_repeated_dim_raises_value_error(dims):
    """docs/errors.md: a repeated dim is a ValueError (pylucid.torch.amax(x,
    (0, 0)) reduced silently; torch raises too), in every call form."""
    x = torch.arange(6.0).reshape(2, 3)
    forms = [lambda: pt.amax(x, dims), lambda: pt.amin(x, dims, True),
             lambda: pt.amax(x.clone().requires_grad_(True), dims),
             lambda: torch.ops.pylucid.amax(x, list(dims), False),
             lambda: torch.ops.pylucid.amin(x.to("meta"), list(dims), False)]
    for form in forms:
        with pytest.raises(ValueError, match=r"appears multiple times in the list of dims"):
            form()
    with pytest.raises(RuntimeError, match="appears multiple times"):
        torch.amax(x, dims)  # the peer raises too
    z = torch.tensor(1.0)  # a 0-d tensor takes dims 0 and -1, once
    for zd in [(0, 0), (0, -1)]:
        with pytest.raises(ValueError, match="appears multiple times"):
            pt.amax(z, zd)
        with pytest.raises(RuntimeError, match="appears multiple times"):
            torch.amax(z, zd)
    assert pt.amax(z, (0,)) == 1.0


@pytest.mark.parametrize("bad", [torch.complex64, torch.uint32, torch.uint16, torch.uint64], ids=str)
def test_the_library_ops_refuse_unsupported_dtypes_with_type_error(bad):
    """torch.ops.pylucid.clamp (and the other ops called directly, without
    pylucid.torch's checks) with a complex or uint32 operand raised
    KeyError; a TypeError naming the operand, on CPU and meta tensors."""
    x = torch.ones(3)
    b = torch.ones(3, dtype=bad)
    calls = [lambda d: torch.ops.pylucid.clamp(x.to(d), b.to(d), None),
             lambda d: torch.ops.pylucid.clamp(x.to(d), None, b.to(d)),
             lambda d: torch.ops.pylucid.clamp_winners(x.to(d), b.to(d), None),
             lambda d: torch.ops.pylucid.minimum(x.to(d), b.to(d)),
             lambda d: torch.ops.pylucid.maximum_winners(b.to(d), x.to(d)),
             lambda d: torch.ops.pylucid.amax(b.to(d), [], False)]
    for device in ("cpu", "meta"):
        for call in calls:
            with pytest.raises(TypeError, match="dtype torch.%s" % str(bad).split(".")[1]):
                call(device)


@pytest.mark.parametrize("op", ["argmax", "argmin", "max", "min", "amax"])
def test_the_library_reductions_refuse_unsupported_dtypes_also_at_zero_dims(op):
    z = torch.tensor(1 + 2j)
    for x in (z, z.to("meta"), torch.ones(2, dtype=torch.uint32)):
        args = (x, [], False) if op == "amax" else (x, 0, False) if op in ("max", "min") else (x, None, False)
        with pytest.raises(TypeError, match="which pylucid does not support"):
            getattr(torch.ops.pylucid, op)(*args)
