"""pylucid.jax against pylucid itself and against JAX: values and gradients
of every op of the family equal pylucid's own bit for bit, eagerly and
under jax.jit, jax.vmap, jax.grad and jax.grad(jax.grad(...)); pylucid's tie
rule holds where JAX's own ops split; errors are clear."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import ml_dtypes  # noqa: E402  (jax depends on it)

import pylucid  # noqa: E402
import pylucid.jax as pj  # noqa: E402
from pylucid import autograd, ops  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(a: object) -> np.ndarray:
    """The bits of an array (NaN payloads and signed zeros included)."""
    arr = np.asarray(a)
    if arr.dtype.kind == "f" or arr.dtype == BF16:
        return arr.view(UINT[arr.dtype.itemsize])
    return arr


def assert_same(got: object, want: object) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    assert g.shape == w.shape, (g.shape, w.shape)
    np.testing.assert_array_equal(bits(g), bits(w))


def x64(dt: np.dtype) -> object:
    """float64 needs JAX's x64 mode; the other dtypes run as they are."""
    enable_x64 = getattr(jax, "enable_x64", None)
    if enable_x64 is None:  # older JAX
        from jax.experimental import enable_x64
    return enable_x64(True) if dt == np.float64 else contextlib.nullcontext()


def values(dt: np.dtype, shape: tuple, seed: int, specials: bool = True) -> np.ndarray:
    """Small integers and halves (exact in every float dtype, so products stay
    exact), with ties, signed zeros and NaN."""
    rng = np.random.default_rng(seed)
    v = rng.integers(-4, 5, size=shape).astype(np.float64) / 2
    if specials and v.size >= 4:
        flat = v.reshape(-1)
        flat[0] = np.nan
        flat[1] = -0.0
        flat[2] = 0.0
    return v.astype(dt)


def pl_grads(fn, xs, g) -> tuple:
    ts = [pylucid.from_numpy(np.array(x), requires_grad=True) for x in xs]
    y = fn(*ts)
    return tuple(t.numpy() for t in autograd.grad(y, ts, grad_outputs=[pylucid.from_numpy(np.asarray(g))]))


# (name, pylucid.jax function, pylucid function, shapes of the operands)
BINARY = [
    ("minimum", pj.minimum, ops.minimum),
    ("maximum", pj.maximum, ops.maximum),
    ("fmin", pj.fmin, ops.fmin),
    ("fmax", pj.fmax, ops.fmax),
]
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (5,))]


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("name,jf,pf", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_binary_values_and_vjp_equal_pylucid_bit_for_bit(dt, name, jf, pf, shapes) -> None:
    a, b = values(dt, shapes[0], 1), values(dt, shapes[1], 2)
    want = pf(a, b).numpy()
    g = values(dt, want.shape, 3, specials=False) + np.asarray(1, dt)
    want_ga, want_gb = pl_grads(pf, (a, b), g)
    with x64(dt):
        ja, jb, jg = jnp.asarray(a), jnp.asarray(b), jnp.asarray(g)
        assert ja.dtype == dt
        assert_same(jf(ja, jb), want)
        assert_same(jax.jit(jf)(ja, jb), want)
        y, vjp = jax.vjp(jf, ja, jb)
        assert_same(y, want)
        ga, gb = vjp(jg)
        assert_same(ga, want_ga)
        assert_same(gb, want_gb)
        ga, gb = jax.jit(lambda a, b, g: jax.vjp(jf, a, b)[1](g))(ja, jb, jg)
        assert_same(ga, want_ga)
        assert_same(gb, want_gb)


CLAMPS = [
    ("scalars", lambda x: (x, -1.0, 1.5)),
    ("min only", lambda x: (x, 0.5, None)),
    ("max only", lambda x: (x, None, 0.5)),
    ("array bounds", lambda x: (x, values(x.dtype, (4,), 7), values(x.dtype, (3, 1), 8))),
    ("min > max", lambda x: (x, 1.0, -1.0)),
]


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("case,args", CLAMPS, ids=[c[0] for c in CLAMPS])
def test_clamp_values_and_gradients_equal_pylucid(dt, case, args) -> None:
    x, lo, hi = args(values(dt, (3, 4), 4))
    want = ops.clamp(x, lo, hi).numpy()
    arrays = [v for v in (x, lo, hi) if isinstance(v, np.ndarray)]

    def pfn(*ts):
        it = iter(ts)
        return ops.clamp(next(it), *(next(it) if isinstance(v, np.ndarray) else v for v in (lo, hi)))

    g = values(dt, want.shape, 5, specials=False) + np.asarray(1, dt)
    want_grads = pl_grads(pfn, arrays, g)
    with x64(dt):
        def jfn(*js):
            it = iter(js)
            return pj.clamp(next(it), *(next(it) if isinstance(v, np.ndarray) else v for v in (lo, hi)))

        js = [jnp.asarray(v) for v in arrays]
        assert_same(pj.clamp(js[0], min=lo if lo is None or np.isscalar(lo) else js[1],
                             max=hi if hi is None or np.isscalar(hi) else js[-1]), want)
        y, vjp = jax.jit(lambda *js: jax.vjp(jfn, *js))(*js)
        assert_same(y, want)
        for got, w in zip(vjp(jnp.asarray(g)), want_grads):
            assert_same(got, w)
    assert pj.clip is pj.clamp


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("name", ["amin", "amax"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (None, True), (0, False), (1, True), (-1, False),
                                           ((0, 2), False), ((), False)])
def test_reductions_equal_pylucid(dt, name, axis, keepdims) -> None:
    x = values(dt, (3, 4, 2), 9)
    x[1, 2, :] = np.nan
    x[2] = 1.5  # ties
    pf, jf = getattr(ops, name), getattr(pj, name)
    want = pf(x, axis, keepdims).numpy()
    g = values(dt, want.shape, 10, specials=False) + np.asarray(1, dt)
    (want_g,) = pl_grads(lambda t: pf(t, axis, keepdims), (x,), g)
    with x64(dt):
        jx = jnp.asarray(x)
        assert_same(jf(jx, axis=axis, keepdims=keepdims), want)
        y, vjp = jax.jit(lambda v: jax.vjp(lambda u: jf(u, axis, keepdims), v))(jx)
        assert_same(y, want)
        assert_same(vjp(jnp.asarray(g))[0], want_g)


@pytest.mark.parametrize("name", ["argmin", "argmax"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (None, True), (0, False), (-1, True)])
def test_argmin_argmax_equal_numpy_and_pylucid(name, axis, keepdims) -> None:
    x = values(np.dtype(np.float32), (3, 4), 11)
    x[2, 3] = np.nan
    x[0, :2] = 2.0
    want = getattr(ops, name)(x, axis, keepdims).numpy()
    np.testing.assert_array_equal(want, getattr(np, name)(x, axis=axis, keepdims=keepdims))
    jf = getattr(pj, name)
    for got in (jf(jnp.asarray(x), axis, keepdims), jax.jit(lambda v: jf(v, axis=axis, keepdims=keepdims))(x)):
        assert got.dtype == jnp.argmin(jnp.zeros(2)).dtype  # jnp's default integer
        np.testing.assert_array_equal(np.asarray(got), want)
    # no gradient flows through an index, and asking for one is not an error
    gx = jax.grad(lambda v: jnp.sum(pj.amax(v) * jf(v, axis).astype(v.dtype)))(jnp.asarray(x))
    assert np.all(np.isfinite(np.asarray(gx)) | np.isnan(np.asarray(gx)))


def test_integer_and_bool_operands_run_forward() -> None:
    a = np.array([[3, -1, 7], [0, 2, 2]], np.int32)
    b = np.array([2, 2, 9], np.int32)
    for jf, pf in [(pj.minimum, ops.minimum), (pj.maximum, ops.maximum), (pj.fmin, ops.fmin)]:
        assert_same(jf(a, b), pf(a, b).numpy())
        assert_same(jax.jit(jf)(a, b), pf(a, b).numpy())
    assert_same(pj.amax(a, axis=1), ops.amax(a, 1).numpy())
    assert_same(pj.clamp(jnp.asarray(a), 0, 2), ops.clamp(a, np.int32(0), np.int32(2)).numpy())
    m = np.array([True, False, True])
    assert_same(pj.maximum(m, ~m), ops.maximum(m, ~m).numpy())
    # an integer path inside a differentiated function: no gradient, no error
    f = lambda v: jnp.sum(v * pj.amax(jnp.round(v).astype(jnp.int32)))  # noqa: E731
    np.testing.assert_array_equal(np.asarray(jax.grad(f)(jnp.array([1.2, 2.7]))), [3.0, 3.0])


def test_python_scalars_and_numpy_operands_promote_as_jnp() -> None:
    x = jnp.asarray(np.array([0.25, -1.0, 2.0], np.float16))
    assert pj.minimum(x, 0.5).dtype == jnp.minimum(x, 0.5).dtype == jnp.float16
    assert pj.maximum(np.arange(3), 1.5).dtype == jnp.maximum(np.arange(3), 1.5).dtype
    assert_same(pj.minimum(x, 0.5), ops.minimum(np.asarray(x), 0.5).numpy())
    assert_same(pj.clamp(x, 0, 1), ops.clamp(np.asarray(x), 0, 1).numpy())


# ---- pylucid's rule where JAX's own ops differ, under jit


def test_ties_go_to_the_first_operand_under_jit() -> None:
    a = jnp.array([1.0, 2.0, 0.0, -0.0, 3.0])
    b = jnp.array([1.0, 5.0, -0.0, 0.0, 3.0])
    for jf, jnp_f in [(pj.minimum, jnp.minimum), (pj.maximum, jnp.maximum)]:
        grad = jax.jit(jax.grad(lambda a, b: jnp.sum(jf(a, b)), argnums=(0, 1)))
        ga, gb = grad(a, b)
        tie = np.asarray(a == b)
        assert np.all(np.asarray(ga)[tie] == 1.0) and np.all(np.asarray(gb)[tie] == 0.0)
        np.testing.assert_array_equal(np.asarray(ga) + np.asarray(gb), 1.0)  # a partition
        ja, jb = jax.grad(lambda a, b: jnp.sum(jnp_f(a, b)), argnums=(0, 1))(a, b)
        assert np.asarray(ja)[0] == 0.5 and np.asarray(jb)[0] == 0.5  # JAX splits ties
    # the winner's bits: minimum(+0.0, -0.0) is +0.0 (a's)
    assert np.signbit(np.asarray(jax.jit(pj.minimum)(a, b))).tolist() == [False, False, False, True, False]


def test_nan_gradient_goes_to_the_nan_operand_under_jit() -> None:
    a = jnp.array([np.nan, 1.0, np.nan])
    b = jnp.array([1.0, np.nan, np.nan])
    ga, gb = jax.jit(lambda a, b: jax.vjp(pj.minimum, a, b)[1](jnp.ones(3)))(a, b)
    np.testing.assert_array_equal(np.asarray(ga), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(np.asarray(gb), [0.0, 1.0, 0.0])


def test_amax_gradient_goes_whole_to_the_first_winner_under_jit() -> None:
    x = jnp.array([[1.0, 4.0, 4.0, 2.0], [3.0, 3.0, 3.0, 3.0]])
    g = jax.jit(jax.grad(lambda v: jnp.sum(pj.amax(v, axis=1))))(x)
    np.testing.assert_array_equal(np.asarray(g), [[0, 1, 0, 0], [1, 0, 0, 0]])
    split = jax.grad(lambda v: jnp.sum(jnp.max(v, axis=1)))(x)
    np.testing.assert_array_equal(np.asarray(split), [[0, 0.5, 0.5, 0], [0.25, 0.25, 0.25, 0.25]])
    g = jax.jit(jax.grad(lambda v: pj.amin(v)))(x)
    assert np.asarray(g).tolist() == [[1, 0, 0, 0], [0, 0, 0, 0]]


def test_value_and_grad_under_jit() -> None:
    rng = np.random.default_rng(12)
    a = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    f = jax.jit(jax.value_and_grad(lambda a, b: jnp.sum(pj.minimum(a, b) * 3.0), argnums=(0, 1)))
    v, (ga, gb) = f(a, b)
    wa, wb = pl_grads(ops.minimum, (a, b), np.full(1000, 3.0, np.float32))
    assert_same(ga, wa)
    assert_same(gb, wb)
    assert float(v) == pytest.approx(float(np.minimum(a, b).sum() * 3), rel=1e-5)
    # tie-free data: equal to JAX's own op
    jv, (ja, jb) = jax.value_and_grad(lambda a, b: jnp.sum(jnp.minimum(a, b) * 3.0), argnums=(0, 1))(a, b)
    assert_same(ga, ja)
    assert_same(gb, jb)


# ---- second order


def test_grad_of_grad_equals_pylucid_double_backward() -> None:
    x = values(np.dtype(np.float32), (6,), 13, specials=False)
    b = values(np.dtype(np.float32), (6,), 14, specials=False)
    v = values(np.dtype(np.float32), (6,), 15, specials=False)

    def f(x):
        y = pj.minimum(x, b)
        return jnp.sum(y * y * 1.5)

    hv = jax.grad(lambda x: jnp.sum(jax.grad(f)(x) * v))(x)
    hv_jit = jax.jit(jax.grad(lambda x: jnp.sum(jax.grad(f)(x) * v)))(x)

    tx = pylucid.from_numpy(x.copy(), requires_grad=True)
    y = ops.minimum(tx, b)
    (gx,) = autograd.grad((y * y * 1.5).sum(), tx, create_graph=True)
    (want,) = autograd.grad((gx * v).sum(), tx)
    assert_same(hv, want.numpy())
    assert_same(hv_jit, want.numpy())
    # and the analytic value: 3 v where x wins (x <= b), else 0
    np.testing.assert_array_equal(np.asarray(hv), np.where(x <= b, 3 * v, 0).astype(np.float32))


@pytest.mark.parametrize("name", ["amax", "clamp", "fmax"])
def test_grad_of_grad_of_each_kind(name) -> None:
    x = values(np.dtype(np.float32), (3, 4), 16, specials=False)
    v = values(np.dtype(np.float32), (3, 4), 17, specials=False)
    jfs = {"amax": lambda t: pj.amax(t, axis=1), "clamp": lambda t: pj.clamp(t, -0.5, 1.0),
           "fmax": lambda t: pj.fmax(t, 0.0)}
    pfs = {"amax": lambda t: ops.amax(t, 1), "clamp": lambda t: ops.clamp(t, -0.5, 1.0),
           "fmax": lambda t: ops.fmax(t, np.float32(0.0))}

    def f(t):
        y = jfs[name](t)
        return jnp.sum(y * y * y)

    hv = jax.jit(jax.grad(lambda t: jnp.sum(jax.grad(f)(t) * v)))(x)
    tx = pylucid.from_numpy(x.copy(), requires_grad=True)
    y = pfs[name](tx)
    (gx,) = autograd.grad((y * y * y).sum(), tx, create_graph=True)
    (want,) = autograd.grad((gx * v).sum(), tx)
    np.testing.assert_allclose(np.asarray(hv), want.numpy(), rtol=1e-6)
    # third order runs too (route and select are each other's backward)
    third = jax.grad(lambda t: jnp.sum(jax.grad(lambda s: jnp.sum(jax.grad(f)(s) * v))(t)))(x)
    assert np.asarray(third).shape == x.shape


def test_jacrev_and_forward_mode_agree() -> None:
    # Forward mode works since the ops are custom_jvp (it was refused under
    # the custom_vjp callbacks: deliberate change).
    x = jnp.array([1.0, 3.0, 2.0])
    want = np.diag([1.0, 0, 1.0])  # the tie at 2.0 goes to the first operand
    np.testing.assert_array_equal(np.asarray(jax.jacrev(lambda v: pj.minimum(v, 2.0))(x)), want)
    np.testing.assert_array_equal(np.asarray(jax.jacfwd(lambda v: pj.minimum(v, 2.0))(x)), want)
    _, t = jax.jvp(lambda v: pj.minimum(v, 2.0), (x,), (jnp.array([5.0, 6.0, 7.0]),))
    np.testing.assert_array_equal(np.asarray(t), [5.0, 0.0, 7.0])


# ---- vmap


def test_vmap_amax_over_rows_equals_per_row_pylucid() -> None:
    x = values(np.dtype(np.float32), (5, 3, 4), 18)
    x[3] = 2.0
    for axis in (None, 0, 1, (0, 1), -1):
        got = jax.vmap(lambda r: pj.amax(r, axis=axis))(x)
        want = np.stack([ops.amax(r, axis).numpy() for r in x])
        assert_same(got, want)
        g = jax.jit(jax.vmap(jax.grad(lambda r: jnp.sum(pj.amax(r, axis=axis)))))(x)
        want_g = np.stack([pl_grads(lambda t: ops.amax(t, axis).sum(), (r,), np.float32(1))[0] for r in x])
        assert_same(g, want_g)
    # the batch dimension need not come first
    got = jax.vmap(lambda r: pj.amin(r, axis=0, keepdims=True), in_axes=1)(x)
    assert_same(got, np.stack([ops.amin(x[:, i], 0, True).numpy() for i in range(3)]))
    # argmax over all axes of each batch element: its own flat index
    got = jax.vmap(lambda r: pj.argmax(r))(x)
    np.testing.assert_array_equal(np.asarray(got), [np.argmax(r) for r in x])
    got = jax.vmap(lambda r: pj.argmin(r, axis=1, keepdims=True))(x)
    np.testing.assert_array_equal(np.asarray(got), np.stack([np.argmin(r, axis=1, keepdims=True) for r in x]))
    got = jax.vmap(lambda r: pj.argmin(r, keepdims=True))(x)
    np.testing.assert_array_equal(np.asarray(got), np.stack([np.argmin(r, keepdims=True) for r in x]))
    # nested: a batch of batches
    got = jax.vmap(jax.vmap(lambda r: pj.amax(r, axis=0)))(x)
    assert_same(got, ops.amax(x, 2).numpy())
    got = jax.jit(jax.vmap(jax.vmap(jax.grad(lambda r: pj.amin(r)))))(x)
    assert_same(got, pl_grads(lambda t: ops.amin(t, 2), (x,), np.ones((5, 3), np.float32))[0])
    got = jax.vmap(jax.vmap(lambda r: pj.argmax(r)))(x)
    np.testing.assert_array_equal(np.asarray(got), np.argmax(x, axis=2))


def test_vmap_clamp_with_batched_and_unbatched_bounds() -> None:
    x = values(np.dtype(np.float32), (4, 6), 19)
    lo = values(np.dtype(np.float32), (4, 1), 20, specials=False)
    hi = np.float32(1.0)
    got = jax.vmap(lambda r, l: pj.clamp(r, l, hi))(x, lo)
    assert_same(got, ops.clamp(x, lo, hi).numpy())  # row by row = the broadcast whole
    gx, gl = jax.jit(jax.vmap(jax.grad(lambda r, l: jnp.sum(pj.clamp(r, l, hi)), argnums=(0, 1))))(x, lo[:, 0])
    wx, wl = pl_grads(lambda t, b: ops.clamp(t, b, hi), (x, lo), np.ones((4, 6), np.float32))
    assert_same(gx, wx)
    assert_same(gl, wl[:, 0])
    # a per-example scalar against an unbatched vector lines up with the batch
    s = np.array([0.0, 1.0, 2.0], np.float32)
    vec = np.array([0.5, 1.5], np.float32)
    got = jax.vmap(lambda e: pj.minimum(e, vec))(s)
    assert_same(got, ops.minimum(s[:, None], vec).numpy())
    ge = jax.vmap(jax.grad(lambda e: jnp.sum(pj.minimum(e, vec))))(s)
    np.testing.assert_array_equal(np.asarray(ge), [2.0, 1.0, 0.0])


def test_vmap_of_grad_of_grad() -> None:
    x = values(np.dtype(np.float32), (3, 5), 21, specials=False)

    def f(r):
        y = pj.maximum(r, 0.0)
        return jnp.sum(y * y)

    hvp = jax.vmap(jax.grad(lambda r: jnp.sum(jax.grad(f)(r))))(x)
    np.testing.assert_array_equal(np.asarray(hvp), np.where(x >= 0, 2.0, 0.0))


# ---- memory and errors


def test_jitted_programs_call_pylucid_through_xla_ffi_not_a_host_callback() -> None:
    # The op is a custom call into pylucid's handler, which reads XLA's
    # buffers and writes into its result buffer (no host callback, no copy).
    x = jnp.arange(12.0).reshape(3, 4)
    for f in (lambda v: pj.minimum(v, 1.0), jax.grad(lambda v: jnp.sum(pj.amax(v, axis=0)))):
        text = jax.jit(f).lower(x).as_text()
        assert "callback" not in text
        assert "stablehlo.custom_call @pylucid_" in text


def test_errors_are_clear() -> None:
    x = jnp.ones((2, 3))
    with pytest.raises(ValueError, match="min and max"):
        pj.clamp(x)
    with pytest.raises((IndexError, ValueError)):
        pj.amax(x, axis=2)
    with pytest.raises(ValueError):
        pj.amax(x, axis=(0, 0))
    with pytest.raises(ValueError):
        pj.amin(jnp.ones((0, 3)), axis=0)
    with pytest.raises(ValueError):
        pj.argmax(jnp.ones((0,)))
    with pytest.raises(TypeError):
        pj.argmax(x, axis=(0, 1))
    with pytest.raises(ValueError):
        pj.minimum(jnp.ones(3), jnp.ones(4))
    with pytest.raises(TypeError, match="uint32"):
        pj.minimum(jnp.ones(3, jnp.uint32), jnp.ones(3, jnp.uint32))
    with pytest.raises(TypeError):
        pj.amax(jnp.ones(3, jnp.complex64))
    # the same errors under jit (raised while tracing)
    with pytest.raises((IndexError, ValueError)):
        jax.jit(lambda v: pj.amin(v, axis=5))(x)


class _FakeDevice:
    platform = "gpu"

    def __str__(self) -> str:
        return "cuda:0"


class _FakeGpuArray:
    def devices(self) -> set:
        return {_FakeDevice()}


def test_an_array_on_another_device_is_refused() -> None:
    for call in (lambda a: pj.minimum(a, 1.0), lambda a: pj.amax(a), lambda a: pj.argmin(a),
                 lambda a: pj.clamp(a, 0.0)):
        with pytest.raises(ValueError, match="CPU arrays, got an array on cuda:0"):
            call(_FakeGpuArray())


def test_import_pylucid_does_not_import_jax() -> None:
    code = "import sys, pylucid, pylucid.ops, pylucid.autograd; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"
    code = "import sys, pylucid.jax; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "True"


def test_repeated_calls_leave_nothing_behind() -> None:
    a = jnp.asarray(values(np.dtype(np.float32), (64,), 22))
    b = a[::-1]
    f = jax.jit(jax.value_and_grad(lambda a, b: jnp.sum(pj.amax(pj.clamp(pj.minimum(a, b), -1, 1))), argnums=(0, 1)))
    h = jax.jit(jax.grad(lambda a: jnp.sum(jax.grad(lambda x: jnp.sum(pj.maximum(x, b) ** 2))(a))))
    jax.block_until_ready((f(a, b), h(a)))
    pylucid._collect()
    before = pylucid._stats()
    for _ in range(50):
        jax.block_until_ready((f(a, b), h(a), pj.argmax(a)))
    pylucid._collect()
    after = pylucid._stats()
    for k in ("handles", "borrowed", "c_bytes", "c_blocks"):
        assert after[k] <= before[k], (k, before, after)


def test_reductions_from_the_records_with_nan_slices():
    # Every reduction the records give pylucid.jax, on rows with NaNs, a row
    # of NaNs only and signed zeros: values equal pylucid's (bits; positions
    # in JAX's default integer), the
    # gradient of the value reductions too; the arg reductions equal jnp's
    # where jnp has the function and pylucid gives an answer.
    X = np.array([[1.0, np.nan, 0.5, 0.5], [np.nan, np.nan, np.nan, np.nan], [-0.0, 0.0, np.nan, -1.0]], np.float32)
    records = [s for s in pylucid._lib.schema_table() if "jax" in s["bridges"]]
    reductions = [s for s in records if s["signature"] in ("reduction", "arg")]
    assert {"amin", "argmin"} <= {s["name"] for s in reductions}
    for rec in reductions:
        name = rec["name"]
        f = getattr(pj, name)
        for axis in (None, 0, 1):
            try:
                want = getattr(ops, name)(pylucid.tensor(X), axis).numpy()
            except ValueError as e:
                # pylucid's message reaches the caller (the FFI handler's
                # error, raised by JAX)
                with pytest.raises(Exception, match=str(e).split(":")[-1].strip()):
                    np.asarray(f(jnp.asarray(X), axis=axis))
                continue
            got = np.asarray(f(jnp.asarray(X), axis=axis))
            if rec["signature"] == "arg":  # positions: int32 unless jax_enable_x64
                got = got.astype(np.int64)
            assert_same(got, want)
        if rec["signature"] == "reduction":
            g = jax.grad(lambda x: f(x, axis=1).sum())(jnp.asarray(X))
            t = pylucid.tensor(X, requires_grad=True)
            getattr(ops, name)(t, 1).sum().backward()
            assert_same(g, t.grad.numpy())
        elif hasattr(jnp, name):
            rows = X[[0, 2]]
            np.testing.assert_array_equal(np.asarray(f(jnp.asarray(rows), axis=1)),
                                          np.asarray(getattr(jnp, name)(jnp.asarray(rows), axis=1)))
