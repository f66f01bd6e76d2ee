"""docs/semantics.md (minimum / maximum) case by case, end to end through Python.

    a wins at i  <=>  a_i <= b_i  or  a_i is NaN      (maximum: a_i >= b_i or a_i is NaN)
    y_i = a_i if a wins else b_i                        (the winner's bits)
    dL/da_i = [a wins] g_i,   dL/db_i = [b wins] g_i    (reduced to each input's shape)

Also the schemas and AMP policy PROMOTE (docs/semantics.md) and grad_fn names (docs/autograd.md;
next_functions, create_graph with constant masks) as they concern these ops.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import optable as T
import pylucid
from pylucid import autograd, ops
from pylucid.ops import AmpPolicy

FLOATS = T.FLOAT_NAMES
MINMAX = [("minimum", ops.minimum, T.a_wins_min), ("maximum", ops.maximum, T.a_wins_max)]
MINMAX_IDS = ["minimum", "maximum"]

HYP = settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

#: quiet NaNs with distinct payloads (and signs) per dtype, as raw bits
NAN_BITS = {
    "float16": (0x7E01, 0xFE03),
    "bfloat16": (0x7FC1, 0xFFC3),
    "float32": (0x7FC00001, 0xFFC00003),
    "float64": (0x7FF8000000000001, 0xFFF8000000000003),
}


def rng_for(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def arr(values, dt):
    return np.asarray(np.array(values, dtype=np.float64).astype(T.NP_OF[dt]))


def from_bits(bits, dt):
    u = T.UINT_OF_SIZE[T.NP_OF[dt].itemsize]
    return np.array(bits, dtype=u).view(T.NP_OF[dt])


def np_of(t):
    x = t.detach().numpy()
    return np.array(x, copy=True)


def grads(op, a, b, g):
    """(y, ga, gb) for leaves a, b (NumPy, floating) and upstream g."""
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    y = op(ta, tb)
    ga, gb = autograd.grad([y], [ta, tb], grad_outputs=[g])
    return np_of(y), np_of(ga), np_of(gb)


# ------------------------------------------------------------------ schemas and nodes


def test_schemas():
    assert ops.minimum.schema == ("minimum", 1, AmpPolicy.PROMOTE, True)
    assert ops.maximum.schema == ("maximum", 1, AmpPolicy.PROMOTE, True)
    s = ops.minimum.schema
    assert (s.name, s.version, s.amp_policy, s.deterministic) == ("minimum", 1, AmpPolicy.PROMOTE, True)
    listed = ops.schemas()
    assert ops.minimum.schema in listed and ops.maximum.schema in listed
    names = [x.name for x in listed]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert {x.name: x for x in listed}["maximum"] == ("maximum", 1, AmpPolicy.PROMOTE, True)


@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_grad_fn_and_next_functions(name, op, wins):
    node_name = {"minimum": "MinimumBackward", "maximum": "MaximumBackward"}[name]
    a = pylucid.tensor(np.array([1.0, 5.0]), requires_grad=True)
    b = pylucid.tensor(np.array([3.0, 2.0]), requires_grad=True)
    y = op(a, b)
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.name() == node_name
    assert repr(y.grad_fn) == "<%s>" % node_name
    nf = y.grad_fn.next_functions
    assert len(nf) == 2
    assert [n.name() for n, _ in nf] == ["AccumulateGrad", "AccumulateGrad"]
    assert [k for _, k in nf] == [0, 0]
    # only a requires grad: b has no edge
    y = op(a, np.array([3.0, 2.0]))
    nf = y.grad_fn.next_functions
    assert nf[0][0].name() == "AccumulateGrad" and nf[1][0] is None
    y = op(3.0, b)
    nf = y.grad_fn.next_functions
    assert nf[0][0] is None and nf[1][0].name() == "AccumulateGrad"
    # chained: the other op's node is the next function
    other = ops.maximum if name == "minimum" else ops.minimum
    z = op(other(a, b), a)
    inner = z.grad_fn.next_functions[0][0]
    assert inner.name() == ("MaximumBackward" if name == "minimum" else "MinimumBackward")
    assert z.grad_fn.next_functions[1][0].name() == "AccumulateGrad"
    # no graph without requires_grad, or under no_grad
    assert op(np.ones(2), np.ones(2)).grad_fn is None
    with pylucid.no_grad():
        w = op(a, b)
    assert w.grad_fn is None and not w.requires_grad


# ------------------------------------------------------------------ ties


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_ties_go_to_a(name, op, wins, dt):
    a = arr([1.5, -2.0, 0.0, np.inf, -np.inf, 7.0], dt)
    b = a.copy()
    g = arr([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dt)
    y, ga, gb = grads(op, a, b, g)
    np.testing.assert_array_equal(T.bits(y), T.bits(a))
    np.testing.assert_array_equal(T.bits(ga), T.bits(g))
    np.testing.assert_array_equal(gb.astype(np.float64), np.zeros(6))


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_signed_zero_ties_both_orders(name, op, wins, dt):
    """+0.0 vs -0.0 is a tie: y is a's bits, the whole gradient goes to a."""
    pz, nz = arr([0.0], dt), arr([-0.0], dt)
    assert T.bits(pz)[0] != T.bits(nz)[0]
    g = arr([3.0], dt)
    for a, b in ((pz, nz), (nz, pz)):
        y, ga, gb = grads(op, a, b, g)
        assert T.bits(y)[0] == T.bits(a)[0], (name, dt, a, b, y)
        assert np.signbit(y.astype(np.float64))[0] == np.signbit(a.astype(np.float64))[0]
        assert ga.astype(np.float64)[0] == 3.0 and gb.astype(np.float64)[0] == 0.0
        # the documented difference with NumPy: same value, possibly other bits
        with np.errstate(invalid="ignore"):
            ref = getattr(np, name)(a, b)
        assert y.astype(np.float64)[0] == ref.astype(np.float64)[0]
    # the case docs/semantics.md names: minimum(+0.0, -0.0) is +0.0 (NumPy: -0.0)
    y = np_of(op(pz, nz))
    assert not np.signbit(y.astype(np.float64))[0]
    y = np_of(op(nz, pz))
    assert np.signbit(y.astype(np.float64))[0]


@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_signed_zero_with_python_scalars(name, op, wins):
    a = np.array([0.0, -0.0], dtype=np.float32)
    y = np_of(op(a, -0.0))
    np.testing.assert_array_equal(np.signbit(y), [False, True])  # a's zeros
    y = np_of(op(-0.0, a))
    np.testing.assert_array_equal(np.signbit(y), [True, True])  # the scalar is a


@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_same_tensor_on_both_sides(name, op, wins):
    """op(x, x): every index is a tie, so x's gradient is g once (all via a)."""
    x = pylucid.tensor(np.array([1.0, -2.0, 0.0, np.nan]), requires_grad=True)
    g = np.array([1.0, 2.0, 3.0, 4.0])
    (gx,) = autograd.grad([op(x, x)], [x], grad_outputs=[g])
    np.testing.assert_array_equal(np_of(gx), g)
    y = op(x, x)
    y.backward(g)
    np.testing.assert_array_equal(np_of(x.grad), g)


# ------------------------------------------------------------------ NaN


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_nan_in_a_b_or_both(name, op, wins, dt):
    nan1, nan2 = from_bits(NAN_BITS[dt], dt)
    one, big = arr([1.0], dt)[0], arr([-1e3 if name == "maximum" else 1e3], dt)[0]
    # columns: NaN in a | NaN in b | both | NaN(neg) in a vs inf | inf vs NaN(neg) in b
    inf = arr([np.inf if name == "minimum" else -np.inf], dt)[0]
    a = np.array([nan1, one, nan1, nan2, inf], dtype=T.NP_OF[dt])
    b = np.array([big, nan2, nan2, inf, nan2], dtype=T.NP_OF[dt])
    g = arr([1.0, 2.0, 3.0, 4.0, 5.0], dt)
    y, ga, gb = grads(op, a, b, g)
    assert np.isnan(y.astype(np.float64)).all()
    # the winner's bits (the NaN operand; a when both are NaN)
    winner = np.array([a[0], b[1], a[2], a[3], b[4]], dtype=T.NP_OF[dt])
    np.testing.assert_array_equal(T.bits(y), T.bits(winner))
    np.testing.assert_array_equal(ga.astype(np.float64), [1.0, 0.0, 3.0, 4.0, 0.0])
    np.testing.assert_array_equal(gb.astype(np.float64), [0.0, 2.0, 0.0, 0.0, 5.0])
    # NumPy agrees on values (NaN wherever an operand is NaN)
    with np.errstate(invalid="ignore"):
        assert np.isnan(getattr(np, name)(a, b).astype(np.float64)).all()


@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_nan_scalar_operand(name, op, wins):
    a = np.array([1.0, -2.0], dtype=np.float32)
    ta = pylucid.from_numpy(a, requires_grad=True)
    y = op(ta, float("nan"))
    assert y.dtype is pylucid.float32
    assert np.isnan(np_of(y)).all()
    (ga,) = autograd.grad([y], [ta], grad_outputs=[np.ones(2, np.float32)])
    np.testing.assert_array_equal(np_of(ga), [0.0, 0.0])  # the NaN came from b
    y = op(float("nan"), ta)
    (ga,) = autograd.grad([y], [ta], grad_outputs=[np.ones(2, np.float32)])
    np.testing.assert_array_equal(np_of(ga), [0.0, 0.0])  # a (the scalar) is NaN: a wins


# ------------------------------------------------------------------ infinities


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_infinities(name, op, wins, dt):
    inf, ninf = np.inf, -np.inf
    a = arr([inf, ninf, inf, ninf, 5.0, 5.0, inf, ninf], dt)
    b = arr([1.0, 1.0, ninf, inf, inf, ninf, inf, ninf], dt)
    g = arr([1, 2, 3, 4, 5, 6, 7, 8], dt)
    y, ga, gb = grads(op, a, b, g)
    w = wins(a, b)
    exp_y = np.where(w, a, b)
    np.testing.assert_array_equal(T.bits(y), T.bits(exp_y))
    np.testing.assert_array_equal(ga.astype(np.float64), np.where(w, g.astype(np.float64), 0.0))
    np.testing.assert_array_equal(gb.astype(np.float64), np.where(w, 0.0, g.astype(np.float64)))
    if name == "minimum":
        np.testing.assert_array_equal(y.astype(np.float64), [1, ninf, ninf, ninf, 5, ninf, inf, ninf])
        np.testing.assert_array_equal(w, [False, True, False, True, True, False, True, True])
    else:
        np.testing.assert_array_equal(y.astype(np.float64), [inf, 1, inf, inf, inf, 5, inf, ninf])
        np.testing.assert_array_equal(w, [True, False, True, False, False, True, True, True])


# ------------------------------------------------------------------ partition on random data


def special_values(dt):
    vals = np.array([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.inf, -np.inf, np.nan], dtype=np.float64)
    return vals.astype(T.NP_OF[dt])


def tie_heavy(shape, dt, rng):
    """Values from a small set (ties everywhere), with NaN, +-0 and +-inf."""
    vals = special_values(dt)
    return np.asarray(rng.choice(vals, size=shape)).reshape(shape)


def dyadic_g(shape, dt, rng):
    """A non-uniform upstream gradient whose sums are exact in every dtype."""
    return np.asarray(rng.integers(1, 9, size=shape) / 8.0).reshape(shape).astype(T.NP_OF[dt])


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_partition_large_same_shape(name, op, wins, dt):
    """Large contiguous and strided arrays (the fast paths and the parallel
    split): ga + gb == g, ga * gb == 0, and each equals the rule, exactly."""
    rng = rng_for("part", name, dt)
    n = 100_003
    a = tie_heavy((n,), dt, rng)
    b = tie_heavy((n,), dt, rng)
    g = dyadic_g((n,), dt, rng)
    for la, lb in (("contiguous", "contiguous"), ("negative_stride", "readonly")):
        aa, bb = T.layout(a, la), T.layout(b, lb)
        y, ga, gb = grads(op, aa, bb, g)
        w = wins(a, b)
        np.testing.assert_array_equal(T.bits(y), T.bits(np.where(w, a, b)))
        g64, ga64, gb64 = (x.astype(np.float64) for x in (g, ga, gb))
        np.testing.assert_array_equal(ga64 + gb64, g64)
        assert not (ga64 * gb64).any()
        np.testing.assert_array_equal(ga64, np.where(w, g64, 0.0))
        assert ga.dtype == T.NP_OF[dt] and gb.dtype == T.NP_OF[dt]
    # strided 2-d: a transposed view against a broadcast (zero-stride) b
    a2 = T.layout(tie_heavy((301, 67), dt, rng), "transposed")
    b2 = T.layout(tie_heavy((301, 67), dt, rng), "zero_stride")
    g2 = dyadic_g((301, 67), dt, rng)
    y, ga, gb = grads(op, a2, b2, g2)
    w = wins(a2, b2)
    np.testing.assert_array_equal(T.bits(y), T.bits(np.where(w, a2, b2)))
    np.testing.assert_array_equal(ga.astype(np.float64), np.where(w, g2.astype(np.float64), 0.0))
    np.testing.assert_array_equal(gb.astype(np.float64), np.where(w, 0.0, g2.astype(np.float64)))


@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_results_do_not_depend_on_thread_count(name, op, wins):
    rng = rng_for("threads", name)
    a = tie_heavy((257, 1031), "float32", rng)
    b = tie_heavy((1031,), "float32", rng)
    g = dyadic_g((257, 1031), "float32", rng)
    prev = pylucid.get_num_threads()
    try:
        outs = []
        for n in (1, 4, 7):
            pylucid.set_num_threads(n)
            y, ga, gb = grads(op, a, b, g)
            outs.append((T.bits(y), T.bits(ga), T.bits(gb)))
    finally:
        pylucid.set_num_threads(prev)
    for other in outs[1:]:
        for x, z in zip(outs[0], other):
            np.testing.assert_array_equal(x, z)


@st.composite
def broadcast_case(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4))
    sa, sb = shapes.input_shapes
    out = shapes.result_shape
    dt = draw(st.sampled_from(FLOATS))
    seed = draw(st.integers(0, 2**32 - 1))
    which = draw(st.sampled_from(MINMAX_IDS))
    return sa, sb, out, dt, seed, which


@HYP
@given(broadcast_case())
def test_partition_with_broadcasting_hypothesis(case):
    """Random broadcast shapes, tie/NaN-heavy values, non-uniform upstream:
    each gradient is the rule's mask times g summed to the input's shape, so
    sum(ga) + sum(gb) == sum(g); the value is the winner's bits."""
    sa, sb, out, dt, seed, which = case
    name, op, wins = MINMAX[MINMAX_IDS.index(which)]
    rng = np.random.default_rng(seed)
    a = tie_heavy(sa, dt, rng)
    b = tie_heavy(sb, dt, rng)
    g = dyadic_g(out, dt, rng)
    y, ga, gb = grads(op, a, b, g)
    assert y.shape == out and ga.shape == sa and gb.shape == sb
    assert ga.dtype == T.NP_OF[dt] and gb.dtype == T.NP_OF[dt]
    ab, bb = np.broadcast_arrays(a, b)
    w = wins(ab, bb)
    np.testing.assert_array_equal(T.bits(y), T.bits(np.where(w, ab, bb)))
    g64 = g.astype(np.float64)
    exp_a = T.sum_to_shape(np.where(w, g64, 0.0), sa)
    exp_b = T.sum_to_shape(np.where(w, 0.0, g64), sb)
    # dyadic g with at most 64 terms: every partial sum is exact in each dtype
    np.testing.assert_array_equal(ga.astype(np.float64), exp_a)
    np.testing.assert_array_equal(gb.astype(np.float64), exp_b)
    assert ga.astype(np.float64).sum() + gb.astype(np.float64).sum() == g64.sum()


@HYP
@given(
    st.sampled_from(MINMAX_IDS),
    st.sampled_from(T.DTYPE_NAMES),
    hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=5),
    st.integers(0, 2**32 - 1),
)
def test_values_equal_numpy_hypothesis(which, dt, shapes, seed):
    """Every dtype: bit-identical to NumPy except docs/semantics.md's signed-zero tie,
    where pylucid returns a's bits (compare equal to NumPy's result)."""
    name, op, wins = MINMAX[MINMAX_IDS.index(which)]
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    if dt in FLOATS:
        a, b = tie_heavy(sa, dt, rng), tie_heavy(sb, dt, rng)
    else:
        a, b = T.sample(sa, dt, rng), T.sample(sb, dt, rng)
    y_t = op(a, b)
    assert y_t.dtype is T.PL_OF[dt]
    y = np_of(y_t)
    ab, bb = np.broadcast_arrays(a, b)
    with np.errstate(invalid="ignore"):
        ref = getattr(np, name)(ab, bb)
    assert y.shape == ref.shape
    if dt in FLOATS:
        with np.errstate(invalid="ignore"):
            zt = (ab == 0) & (bb == 0) & (np.signbit(ab.astype(np.float64)) != np.signbit(bb.astype(np.float64)))
        np.testing.assert_array_equal(T.bits(y[~zt]), T.bits(ref[~zt]))
        np.testing.assert_array_equal(T.bits(y[zt]), T.bits(ab[zt]))
        np.testing.assert_array_equal(y[zt].astype(np.float64), ref[zt].astype(np.float64))
    else:
        np.testing.assert_array_equal(y, ref)


# ------------------------------------------------------------------ create_graph: masks are constants


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_double_backward_masks_are_constants(name, op, wins, dt):
    """With create_graph=True the first gradients are g routed by constant
    masks (NaN and ties included): differentiating <wa, ga> + <wb, gb> gives
    wa where a wins, wb where b wins with respect to g, and nothing with
    respect to a and b."""
    rng = rng_for("gg", name, dt)
    a = tie_heavy((3, 4), dt, rng)
    b = tie_heavy((4,), dt, rng)
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    v = pylucid.from_numpy(dyadic_g((3, 4), dt, rng), requires_grad=True)
    ga, gb = autograd.grad([op(ta, tb)], [ta, tb], grad_outputs=[v], create_graph=True)
    assert ga.requires_grad and gb.requires_grad
    wa = dyadic_g((3, 4), dt, rng)
    wb = dyadic_g((4,), dt, rng)
    s = ops.add(ops.sum(ops.mul(ga, wa)), ops.sum(ops.mul(gb, wb)))
    da, db, dv = autograd.grad([s], [ta, tb, v], allow_unused=True)
    w = wins(*np.broadcast_arrays(a, b))
    exp_v = np.where(w, wa.astype(np.float64), np.broadcast_to(wb, (3, 4)).astype(np.float64))
    np.testing.assert_array_equal(np_of(dv).astype(np.float64), exp_v)
    for d in (da, db):
        assert d is None or not np_of(d).any()


@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_double_backward_through_a_product(name, op, wins):
    """y = op(a, b) * a: d2y/da2 at the points where a wins is 2 (the mask is
    constant); checked against finite differences of the first derivative."""
    a = np.array([0.5, -1.0, 2.0, 3.0])
    b = np.array([1.0, -2.0, 2.5, -1.0])

    def first(x):
        t = pylucid.from_numpy(np.array(x), requires_grad=True)
        (g,) = autograd.grad([ops.sum(ops.mul(op(t, b), t))], [t], create_graph=True)
        return t, g

    t, g = first(a)
    (h,) = autograd.grad([ops.sum(g)], [t])
    eps = 1e-6
    num = np.zeros(4)
    for j in range(4):
        p, m = a.copy(), a.copy()
        p[j] += eps
        m[j] -= eps
        num[j] = (np_of(first(p)[1]).sum() - np_of(first(m)[1]).sum()) / (2 * eps)
    np.testing.assert_allclose(np_of(h), num, rtol=1e-6, atol=1e-6)
    w = wins(a, b)
    np.testing.assert_allclose(np_of(h), np.where(w, 2.0, 0.0), atol=1e-12)


@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_gradcheck_with_broadcasting(name, op, wins):
    rng = rng_for("gc", name)
    a, b = T.distinct_pair((3, 1, 2), (1, 3, 2), rng)
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    assert autograd.gradcheck(op, [ta, tb])
    assert autograd.gradgradcheck(op, [ta, tb])
    assert autograd.gradcheck(lambda x, y: ops.mul(op(x, y), x), [ta, tb])


# ------------------------------------------------------------------ dtypes


@pytest.mark.parametrize("dt", T.INT_NAMES + ["bool"])
@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_integer_and_bool_are_forward_only(name, op, wins, dt):
    rng = rng_for("int", name, dt)
    a = T.sample((5, 3), dt, rng)
    b = T.sample((3,), dt, rng)
    y = op(a, b)
    assert y.dtype is T.PL_OF[dt] and not y.requires_grad and y.grad_fn is None
    np.testing.assert_array_equal(np_of(y), getattr(np, name)(a, b))
    with pytest.raises((RuntimeError, TypeError)):
        pylucid.from_numpy(a, requires_grad=True)
    with pytest.raises((RuntimeError, TypeError)):
        pylucid.tensor(a).requires_grad_()
    # mixed with a float that requires grad: only the float is differentiated
    f = pylucid.from_numpy(np.full((3,), 2.0), requires_grad=True)
    z = op(a, f)
    assert z.dtype is pylucid.float64 and z.grad_fn.next_functions[0][0] is None
    (gf,) = autograd.grad([z], [f], grad_outputs=[np.ones((5, 3))])
    a_wins = wins(a.astype(np.float64), np.full((5, 3), 2.0))
    np.testing.assert_array_equal(np_of(gf), (~a_wins).sum(axis=0).astype(np.float64))


@pytest.mark.parametrize("da, db", [("float16", "float32"), ("bfloat16", "float16"), ("float32", "float64"),
                                    ("bfloat16", "float64")])
@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_mixed_dtypes_masks_on_promoted_values(name, op, wins, da, db):
    """Ties are judged on the promoted values (exact upcasts); gradients come
    back in each input's dtype."""
    a = arr([0.1, 0.1, 1.0, np.nan, -0.0], da)
    # b[0]: the same number as a[0] (a tie); b[1]: 0.1 in b's dtype (not a tie)
    b = np.array([a[0].astype(np.float64), 0.1, np.nan, 1.0, 0.0]).astype(T.NP_OF[db])
    rd = T.promote(da, db)
    g = arr([1, 2, 3, 4, 5], rd)
    y, ga, gb = grads(op, a, b, g)
    assert y.dtype == T.NP_OF[rd] and ga.dtype == T.NP_OF[da] and gb.dtype == T.NP_OF[db]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    w = wins(a64, b64)
    assert w[0] and w[3] and w[4] and not w[2]
    np.testing.assert_array_equal(T.bits(y), T.bits(np.where(w, a64, b64).astype(T.NP_OF[rd])))
    np.testing.assert_array_equal(ga.astype(np.float64), np.where(w, g.astype(np.float64), 0.0))
    np.testing.assert_array_equal(gb.astype(np.float64), np.where(w, 0.0, g.astype(np.float64)))


@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_weak_scalar_promotion(name, op, wins):
    assert op(np.ones(3, np.float16), 2.0).dtype is pylucid.float16
    assert op(2.0, np.ones(3, np.float16)).dtype is pylucid.float16
    assert op(np.ones(3, np.int32), 2.5).dtype is pylucid.float32
    assert op(np.ones(3, np.int32), 2).dtype is pylucid.int32
    assert op(np.ones(3, np.float16), np.ones(3, T.BF16)).dtype is pylucid.float32
    assert op(np.ones(3, np.float64), np.ones(3, np.float32)).dtype is pylucid.float64
    y = np_of(op(np.array([1, 2, 3], np.int32), 2.5))
    np.testing.assert_array_equal(y, getattr(np, name)(np.array([1, 2, 3], np.float32), np.float32(2.5)))


@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_autocast_promote_policy(name, op, wins):
    """PROMOTE: under autocast the inputs go to the widest floating dtype
    among them; gradients still come back in each input's dtype."""
    a = np.array([1.0, 4.0], np.float16)
    b = np.array([2.0, 3.0], np.float32)
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    with pylucid.autocast(pylucid.float16):
        assert pylucid.is_autocast_enabled()
        y = op(ta, tb)
        assert op(a, a).dtype is pylucid.float16
        assert op(np.ones(2), a).dtype is pylucid.float64
    with pylucid.autocast(pylucid.bfloat16):
        assert op(a, np.ones(2, T.BF16)).dtype is pylucid.float32
    assert not pylucid.is_autocast_enabled()
    assert y.dtype is pylucid.float32
    ga, gb = autograd.grad([y], [ta, tb], grad_outputs=[np.array([5.0, 7.0], np.float32)])
    assert ga.dtype is pylucid.float16 and gb.dtype is pylucid.float32
    w = wins(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_array_equal(np_of(ga).astype(np.float64), np.where(w, [5.0, 7.0], 0.0))
    np.testing.assert_array_equal(np_of(gb).astype(np.float64), np.where(w, 0.0, [5.0, 7.0]))


@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_inputs_untouched_and_result_fresh(name, op, wins):
    a = np.array([[1.0, np.nan], [-0.0, 3.0]], np.float32)
    b = np.array([0.0, 2.0], np.float32)
    a.flags.writeable = False
    before = T.bits(a).copy(), T.bits(b).copy()
    y = op(a, b)
    out = y.numpy()
    assert not np.shares_memory(out, a) and not np.shares_memory(out, b)
    np.testing.assert_array_equal(T.bits(a), before[0])
    np.testing.assert_array_equal(T.bits(b), before[1])


@pytest.mark.parametrize("name, op, wins", MINMAX, ids=MINMAX_IDS)
def test_incompatible_shapes_name_both(name, op, wins):
    with pytest.raises(ValueError) as ei:
        op(np.ones((2, 3)), np.ones((4,)))
    msg = str(ei.value)
    assert "3" in msg and "4" in msg and "2" in msg
