"""pylucid.jax as XLA FFI custom calls under every JAX transform
(docs/interop.md, "JAX"): per family op, forward and reverse mode by
pylucid's rule (the winner's tangent; on data with ties, NaN and signed
zeros, against pylucid's own jvp and grad), jit, vmap, lax.scan,
checkpoint, check_grads in both modes to second order, jax.export's round
trip, no host callback in the lowered program, and handler errors as
Python exceptions."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import pylucid  # noqa: E402
import pylucid.jax as pj  # noqa: E402
from pylucid import autograd, ops  # noqa: E402

NAN = np.nan
X = np.array([[1.0, 2.0, NAN, -0.0], [0.0, 3.0, NAN, 5.0]], np.float32)
Y = np.array([[1.0, NAN, 2.0, 0.0], [-0.0, 4.0, NAN, 1.0]], np.float32)

# Every differentiable op the records give pylucid.jax, as a function of
# (x, y) (the second operand unused by the reductions), with pylucid's op
# of the same call as the reference.
RECORDS = [s for s in pylucid._lib.schema_table() if "jax" in s["bridges"] and s["signature"] != "arg"]


def cases():
    out = {}
    for s in RECORDS:
        n = s["name"]
        if s["signature"] == "binary":
            out[n] = (lambda x, y, n=n: getattr(pj, n)(x, y), lambda x, y, n=n: getattr(ops, n)(x, y))
        elif s["signature"] == "clamp":
            out[n + "_tensors"] = (lambda x, y, n=n: getattr(pj, n)(x, y, y + 1.0),
                                   lambda x, y, n=n: getattr(ops, n)(x, y, y + 1.0))
            out[n + "_number"] = (lambda x, y, n=n: getattr(pj, n)(x, None, 2.0),
                                  lambda x, y, n=n: getattr(ops, n)(x, None, 2.0))
            # one bound: the winners are a bool mask of where x won
            out[n + "_min_tensor"] = (lambda x, y, n=n: getattr(pj, n)(x, y),
                                      lambda x, y, n=n: getattr(ops, n)(x, y))
        else:
            out[n + "_axis1"] = (lambda x, y, n=n: getattr(pj, n)(x, axis=1),
                                 lambda x, y, n=n: getattr(ops, n)(x, 1))
            out[n + "_all_keepdims"] = (lambda x, y, n=n: getattr(pj, n)(x, keepdims=True),
                                        lambda x, y, n=n: getattr(ops, n)(x, None, True))
    return out


CASES = cases()
NAMES = sorted(CASES)


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def rule(name, tx, ty):
    """pylucid's value, J·(tx, ty) and the gradient of sum(y * v)."""
    ref = CASES[name][1]
    _, t = autograd.jvp(ref, (pylucid.tensor(X), pylucid.tensor(Y)), (pylucid.tensor(tx), pylucid.tensor(ty)))
    px, py = pylucid.tensor(X, requires_grad=True), pylucid.tensor(Y, requires_grad=True)
    yv = ref(px, py)
    v = np.arange(1.0, 1.0 + yv.detach().numpy().size, dtype=np.float32).reshape(yv.shape)
    (yv * pylucid.tensor(v)).sum().backward()
    grads = [p.grad.numpy() if p.grad is not None else np.zeros_like(X) for p in (px, py)]
    return yv.detach().numpy(), t.numpy(), v, grads


@pytest.mark.parametrize("name", NAMES)
def test_forward_and_reverse_mode_follow_the_rule(name):
    f = CASES[name][0]
    x, y = jnp.asarray(X), jnp.asarray(Y)
    tx, ty = np.full_like(X, 2.0), np.full_like(Y, 3.0)
    want_y, want_t, v, (gx, gy) = rule(name, tx, ty)
    same_bits(jax.jit(f)(x, y), want_y)
    out, t = jax.jvp(f, (x, y), (jnp.asarray(tx), jnp.asarray(ty)))
    same_bits(out, want_y)
    same_bits(t, want_t)
    lin_out, lin = jax.linearize(f, x, y)
    same_bits(lin(jnp.asarray(tx), jnp.asarray(ty)), want_t)
    g = jax.jit(jax.grad(lambda a, b: jnp.sum(f(a, b) * v), argnums=(0, 1)))(x, y)
    same_bits(g[0], gx)
    same_bits(g[1], gy)
    jr = jax.jacrev(f, argnums=(0, 1))(x, y)
    jf = jax.jacfwd(f, argnums=(0, 1))(x, y)
    for r, w in zip(jr, jf):
        same_bits(r, w)
    h = jax.hessian(lambda a: jnp.sum(f(a, y) ** 2))(jnp.nan_to_num(x))
    assert h.shape == X.shape + X.shape and bool(jnp.all(jnp.isfinite(h)))


@pytest.mark.parametrize("name", NAMES)
def test_vmap_scan_and_checkpoint_agree_with_calls_one_by_one(name):
    f = CASES[name][0]
    xs = jnp.stack([jnp.asarray(X), jnp.asarray(X[:, ::-1]), jnp.asarray(Y)])
    y = jnp.asarray(Y)
    per = [f(xs[i], y) for i in range(3)]
    for got in (jax.vmap(f, in_axes=(0, None))(xs, y), jax.jit(jax.vmap(f, in_axes=(0, 0)))(xs, jnp.stack([y] * 3))):
        for i in range(3):
            same_bits(got[i], per[i])
    _, scanned = lax.scan(lambda c, a: (c, f(a, y)), 0.0, xs)
    for i in range(3):
        same_bits(scanned[i], per[i])
    g = jax.grad(lambda a: jnp.sum(jax.checkpoint(f)(a, y)))(jnp.asarray(X))
    same_bits(g, jax.grad(lambda a: jnp.sum(f(a, y)))(jnp.asarray(X)))


@pytest.mark.parametrize("name", NAMES)
def test_check_grads_both_modes_second_order(name):
    f = CASES[name][0]
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.standard_normal((2, 4)).astype(np.float32))
    y = jnp.asarray(rng.standard_normal((2, 4)).astype(np.float32))
    check_grads(f, (x, y), order=2, modes=("fwd", "rev"), eps=1e-3, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("name", NAMES)
def test_jax_export_round_trip(name):
    f = CASES[name][0]
    x, y = jnp.asarray(X), jnp.asarray(Y)

    def g(a, b):
        return f(a, b), jax.grad(lambda a: jnp.sum(jnp.nan_to_num(f(a, b))))(a)

    checks = [export.DisabledSafetyCheck.custom_call(t) for t in pj.CUSTOM_CALL_TARGETS]
    blob = export.export(jax.jit(g), disabled_checks=checks)(x, y).serialize()
    got = export.deserialize(blob).call(x, y)
    for a, b in zip(got, g(x, y)):
        same_bits(a, b)


def test_lowered_programs_hold_pylucid_custom_calls_and_no_host_callback():
    x, y = jnp.asarray(X), jnp.asarray(Y)
    for name in NAMES:
        f = CASES[name][0]
        for fn in (f, jax.grad(lambda a, b: jnp.sum(f(a, b)))):
            text = jax.jit(fn).lower(x, y).as_text()
            assert "callback" not in text
            assert "stablehlo.custom_call @pylucid_" in text


def test_the_rules_winners_call_writes_the_winners_alone():
    # jit(grad) of a loss needs only where each element came from: the rule's
    # custom call returns the mask (form 3), not the values as well.
    x, y = jnp.asarray(X), jnp.asarray(Y)
    text = jax.jit(jax.grad(lambda a, b: jnp.sum(pj.minimum(a, b)))).lower(x, y).as_text()
    calls = [ln for ln in text.splitlines() if "stablehlo.custom_call @pylucid_minimum" in ln]
    assert len(calls) == 1 and "winners = 3" in calls[0], calls
    assert calls[0].rstrip().endswith("-> tensor<%sxi1>" % "x".join(map(str, X.shape))), calls


def test_a_handler_error_is_a_python_exception_with_pylucids_message():
    x = jnp.ones((2, 3))
    call = jax.ffi.ffi_call("pylucid_minimum", jax.ShapeDtypeStruct((2, 3), jnp.float32))
    with pytest.raises(Exception, match="version 99"):
        jax.block_until_ready(call(x, x, op="minimum", version=np.int64(99), winners=np.int64(0)))
    with pytest.raises(Exception, match="unknown op"):
        jax.block_until_ready(call(x, x, op="no_such_op", version=np.int64(1), winners=np.int64(0)))
    bad = jax.ffi.ffi_call("pylucid_minimum", jax.ShapeDtypeStruct((5,), jnp.float32))
    with pytest.raises(Exception, match="shape"):
        jax.block_until_ready(bad(x, x, op="minimum", version=np.int64(1), winners=np.int64(0)))
    # and the process is fine afterwards
    same_bits(pj.minimum(x, 2.0), np.ones((2, 3), np.float32))


SYMBOLIC = dict(CASES, argmax_axis1=(lambda x, y: pj.argmax(x, axis=1), lambda x, y: ops.argmax(x, 1)),
                argmin_all=(lambda x, y: pj.argmin(x), lambda x, y: ops.argmin(x)),
                nanargmax_axis0=(lambda x, y: pj.nanargmax(jnp.nan_to_num(x), axis=0),
                                 lambda x, y: ops.nanargmax(np.nan_to_num(np.asarray(x)), 0)))


@pytest.mark.parametrize("name", sorted(SYMBOLIC))
def test_jax_export_with_a_symbolic_batch_size(name):
    """jax.export with symbolic shapes, the way models are exported for
    serving (jax.export.symbolic_shape("b, 4")): the function and its
    gradient export once and run at every concrete batch size, equal to
    pylucid's own bit for bit. It failed while tracing before ("'_DimExpr'
    object cannot be interpreted as an integer"; argmax:
    InconclusiveDimensionOperation)."""
    f, ref = SYMBOLIC[name]
    differentiable = not name.startswith(("arg", "nanarg"))

    def g(a, b):
        if not differentiable:
            return (f(a, b),)
        return f(a, b), jax.grad(lambda a: jnp.sum(jnp.nan_to_num(f(a, b))))(a)

    spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, 4"), jnp.float32)
    checks = [export.DisabledSafetyCheck.custom_call(t) for t in pj.CUSTOM_CALL_TARGETS]
    exported = export.deserialize(export.export(jax.jit(g), disabled_checks=checks)(spec, spec).serialize())
    assert "b" in str(exported.in_avals[0].shape)
    rng = np.random.default_rng(5)
    for batch in (1, 2, 5):
        x = np.where(rng.random((batch, 4)) < 0.2, np.nan, rng.integers(-2, 3, (batch, 4))).astype(np.float32)
        y = np.where(rng.random((batch, 4)) < 0.2, -0.0, rng.integers(-2, 3, (batch, 4))).astype(np.float32)
        got = exported.call(jnp.asarray(x), jnp.asarray(y))
        for a, b in zip(got, g(jnp.asarray(x), jnp.asarray(y))):
            same_bits(a, b)
        want = ref(pylucid.from_numpy(x), pylucid.from_numpy(y))
        same_bits(got[0], jnp.asarray(want.numpy()))


def test_empty_reduction_errors_name_the_inputs_shape():
    """pylucid.jax checked its arguments on a placeholder and named its
    shape, (0, 1), for an input of shape (0, 3)."""
    x = jnp.zeros((0, 3), jnp.float32)
    calls = [lambda: pj.amax(x, 0), lambda: pj.amin(x), lambda: pj.argmax(x, 0), lambda: pj.nanargmin(x),
             lambda: jax.jit(lambda a: pj.amax(a, 0))(x)]
    for call in calls:
        with pytest.raises(ValueError, match=r"zero-size slice \(input shape \(0, 3\)\)"):
            call()
    assert pj.amax(x, 1).shape == (0,)  # reducing the non-empty dim is fine
