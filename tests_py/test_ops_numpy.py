"""Every op of the op table (optable.OPS) against its NumPy reference.

Forward: all dtypes x the broadcast pairs x NumPy layouts (contiguous,
transposed, negative-stride, zero-stride, read-only); mixed-dtype pairs and
weak Python scalars follow docs/dtypes.md promotion; reductions over dims/keepdim.
Backward: float64 gradients against the NumPy gradient references (which are
themselves checked by central finite differences), pylucid.autograd.gradcheck
and gradgradcheck with broadcasting, and gradients in every floating dtype
(including mixed-dtype pairs) come back in each input's shape and dtype.

Exactness: every elementwise result is bit-identical to NumPy computed in the
result dtype (float16 and ml_dtypes' bfloat16 compute through float32 and
round once, as pylucid does), except that NaNs are compared as NaN (payload
and sign of a NaN produced by arithmetic are not part of the contract) and
docs/semantics.md's signed-zero tie of minimum/maximum (a's bits; asserted explicitly).
Sums and means use tolerances for floats (blocked summation order) and are
exact for integers.

The min/max family (docs/semantics.md): fmin/fmax are binary rows (so all of
the above), clamp/clip, amin/amax, argmin/argmax and min/max over a dim have
their own sections: every dtype, broadcasting bounds, layouts (a rotating
sample per dtype for the reductions), values compared bit for bit with the
selection rule's reference (NaN payloads included) and in value with NumPy,
gradients whole to the winner (ties and NaN included), gradcheck and
gradgradcheck. For every differentiable op: forward mode (autograd.jvp)
against finite differences and <J v, u> == <v, Jᵀ u>; for every op: out=
(Tensor and NumPy outs, strided, in place, and the errors) and the Tensor
methods.
"""

from __future__ import annotations

import itertools
import json
import zlib

import warnings

import numpy as np
import pytest

import optable as T
import pylucid
from pylucid import autograd, ops

OP_IDS = [o.name for o in T.OPS]
PAIR_IDS = [T.pair_id(p) for p in T.BROADCAST_PAIRS]


def rng_for(*key: object) -> np.random.Generator:
    """A generator seeded from the test's key (stable across processes)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def with_specials(x: np.ndarray, name: str, rng: np.random.Generator) -> np.ndarray:
    """Sprinkles +-0.0, +-inf and NaN into a floating array (in place on a copy)."""
    if name not in T.FLOAT_NAMES or x.size == 0:
        return x
    x = np.array(x, copy=True)
    flat = x.reshape(-1)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype=np.float64).astype(x.dtype)
    where = rng.random(flat.size) < 0.25
    flat[where] = rng.choice(specials, size=int(where.sum()))
    return x


#: quiet NaNs with distinct payloads and signs per dtype, as raw bits: the
#: selection ops return a winner's bits, NaN payloads included
NAN_BITS = {
    "float16": (0x7E01, 0xFE03),
    "bfloat16": (0x7FC1, 0xFFC3),
    "float32": (0x7FC00001, 0xFFC00003),
    "float64": (0x7FF8000000000001, 0xFFF8000000000003),
}


def with_payload_nans(x: np.ndarray, name: str, rng: np.random.Generator) -> np.ndarray:
    """Replaces each NaN of a floating array by one of NAN_BITS[name] at random."""
    if name not in T.FLOAT_NAMES or x.size == 0:
        return x
    x = np.array(x, copy=True)
    u = T.UINT_OF_SIZE[x.dtype.itemsize]
    flat = x.reshape(-1).view(u)
    nan = np.isnan(x.reshape(-1).astype(np.float64))
    flat[nan] = rng.choice(np.array(NAN_BITS[name], dtype=u), size=int(nan.sum()))
    return x


def family_data(shape, name, rng, *, nonzero=False):
    """sample() with +-0, +-inf and NaNs of several payloads (floats)."""
    return with_payload_nans(with_specials(T.sample(shape, name, rng, nonzero=nonzero), name, rng), name, rng)


def to_numpy(t: pylucid.Tensor) -> np.ndarray:
    arr = t.detach().numpy()
    if t.dtype is pylucid.bfloat16 and arr.dtype != T.BF16:
        # see test_bfloat16_numpy_has_bfloat16_dtype (numpy() loses the dtype)
        arr = arr.view(T.BF16)
    return np.array(arr, copy=True)


def assert_same_values(actual: np.ndarray, expected: np.ndarray, exact_bits: bool) -> None:
    """Equal dtype, shape and values; NaN equals NaN. With exact_bits every
    non-NaN element is bit-identical (so the sign of zero counts too)."""
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.dtype.kind == "f" or actual.dtype == T.BF16:
        an = np.isnan(actual.astype(np.float64))
        en = np.isnan(expected.astype(np.float64))
        np.testing.assert_array_equal(an, en, err_msg="NaN positions differ")
        if exact_bits:
            np.testing.assert_array_equal(T.bits(actual)[~an], T.bits(expected)[~en])
        else:
            np.testing.assert_array_equal(actual.astype(np.float64)[~an], expected.astype(np.float64)[~en])
    else:
        np.testing.assert_array_equal(actual, expected)


def check_minmax_vs_numpy(info: T.OpInfo, a: np.ndarray, b: np.ndarray, y: np.ndarray, rd: str) -> None:
    """minimum/maximum/fmin/fmax equal NumPy bit for bit except docs/semantics.md's
    signed-zero tie: there pylucid returns a's bits (NumPy may return b's);
    the values still compare equal (NaNs compare as NaN: NumPy does not say
    whose NaN it returns)."""
    npd = T.NP_OF[rd]
    ac, bc = np.broadcast_arrays(a.astype(npd), b.astype(npd))
    with np.errstate(invalid="ignore"):
        expected_np = info.numpy_fn(ac, bc)
    if rd in T.FLOAT_NAMES:
        with np.errstate(invalid="ignore"):
            zero_tie = (ac == 0) & (bc == 0) & (np.signbit(ac) != np.signbit(bc))
        assert_same_values(y[~zero_tie], expected_np[~zero_tie], exact_bits=True)
        # the documented difference: a's bits, equal in value to NumPy's result
        np.testing.assert_array_equal(T.bits(y[zero_tie]), T.bits(np.ascontiguousarray(ac[zero_tie])))
        np.testing.assert_array_equal(y[zero_tie].astype(np.float64), expected_np[zero_tie].astype(np.float64))
    else:
        np.testing.assert_array_equal(y, expected_np)


# ------------------------------------------------------------------ binary ops, one dtype


@pytest.mark.parametrize("pair", T.BROADCAST_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
@pytest.mark.parametrize("info", T.BINARY, ids=[o.name for o in T.BINARY])
def test_binary_forward_layouts(info, dt, pair):
    sa, sb = pair
    rng = rng_for(info.name, dt, pair)
    rd = info.result(dt)
    for la, lb in zip(T.LAYOUTS, T.LAYOUTS[1:] + T.LAYOUTS[:1]):
        for lay_a, lay_b in ((la, la), (la, lb)):
            a = T.layout(with_specials(T.sample(sa, dt, rng), dt, rng), lay_a)
            b = T.layout(with_specials(T.sample(sb, dt, rng, nonzero=True), dt, rng), lay_b)
            if info.selection:
                a, b = (T.layout(with_payload_nans(x, dt, rng), la) for x, la in ((a, lay_a), (b, lay_b)))
            assert a.dtype == T.NP_OF[dt] and b.dtype == T.NP_OF[dt]
            before = (T.bits(a).copy(), T.bits(b).copy())
            if not info.supported(dt):
                with pytest.raises(TypeError):
                    info.op(a, b)
                continue
            y_t = info.op(a, b)
            assert y_t.dtype is T.PL_OF[rd]
            assert y_t.shape == np.broadcast_shapes(sa, sb)
            y = to_numpy(y_t)
            expected = T.reference(info, a, b, out_dtype=rd)
            assert_same_values(y, expected, exact_bits=True)
            if info.selection:
                # the winner's bits, NaN payloads included
                np.testing.assert_array_equal(T.bits(y), T.bits(expected))
                check_minmax_vs_numpy(info, a, b, y, rd)
            # nothing writes into an input, results never alias inputs
            np.testing.assert_array_equal(T.bits(a), before[0])
            np.testing.assert_array_equal(T.bits(b), before[1])
            out = y_t.numpy()
            assert not np.shares_memory(out, a) and not np.shares_memory(out, b)


@pytest.mark.parametrize(
    "info, dt",
    [(o, d) for o in T.BINARY for d in T.DTYPE_NAMES if o.supported(d)],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_binary_tensor_inputs_match_numpy_inputs(info, dt):
    """pylucid Tensors (copies), from_numpy views and NumPy arrays mixed give
    the same result."""
    rng = rng_for("mix", info.name, dt)
    a = T.sample((3, 1, 2), dt, rng)
    b = T.sample((1, 3, 2), dt, rng, nonzero=True)
    ref = to_numpy(info.op(a, b))
    for x, y in ((pylucid.tensor(a), b), (a, pylucid.from_numpy(b)), (pylucid.tensor(a), pylucid.tensor(b))):
        got = to_numpy(info.op(x, y))
        assert_same_values(got, ref, exact_bits=True)


# ------------------------------------------------------------------ binary ops, mixed dtypes


@pytest.mark.parametrize("db", T.DTYPE_NAMES)
@pytest.mark.parametrize("da", T.DTYPE_NAMES)
@pytest.mark.parametrize("info", T.BINARY, ids=[o.name for o in T.BINARY])
def test_binary_mixed_dtypes(info, da, db):
    rng = rng_for("mixed", info.name, da, db)
    a = T.layout(T.sample((2, 1, 3), da, rng), "transposed")
    b = T.sample((4, 1), db, rng, nonzero=True)
    pd = T.promote(da, db)
    if not info.supported(pd):
        with pytest.raises(TypeError):
            info.op(a, b)
        return
    rd = info.result(pd)
    y_t = info.op(a, b)
    assert y_t.dtype is T.PL_OF[rd], (da, db, y_t.dtype, rd)
    assert y_t.shape == (2, 4, 3)
    y = to_numpy(y_t)
    assert_same_values(y, T.reference(info, a, b, out_dtype=rd), exact_bits=True)
    if info.selection:
        check_minmax_vs_numpy(info, a, b, y, rd)


# ------------------------------------------------------------------ weak Python scalars

SCALARS = [True, 3, -2, 2.5, -0.0]


@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
@pytest.mark.parametrize("info", T.BINARY, ids=[o.name for o in T.BINARY])
def test_binary_weak_scalars(info, dt, scalar):
    rng = rng_for("scalar", info.name, dt, repr(scalar))
    a = T.sample((2, 3), dt, rng, nonzero=True)
    pd = T.promote_scalar(dt, scalar)
    for args in ((a, scalar), (scalar, a)):
        if not info.supported(pd):
            with pytest.raises(TypeError):
                info.op(*args)
            continue
        rd = info.result(pd)
        if type(scalar) is int and np.dtype(T.NP_OF[rd]).kind in "iu" and not (
            np.iinfo(T.NP_OF[rd]).min <= scalar <= np.iinfo(T.NP_OF[rd]).max
        ):  # a Python int converts exactly to the result dtype or raises (as NumPy 2), never wraps
            with pytest.raises(OverflowError, match="out of bounds for %s" % rd):
                info.op(*args)
            continue
        y_t = info.op(*args)
        assert y_t.dtype is T.PL_OF[rd], (dt, scalar, y_t.dtype, rd)
        assert y_t.shape == (2, 3)
        npd = T.NP_OF[rd]
        ref_args = [np.asarray(x).astype(npd) for x in args]
        expected = np.asarray(info.ref(*ref_args)).astype(npd)
        if expected.shape != (2, 3):
            expected = np.broadcast_to(expected, (2, 3))
        assert_same_values(to_numpy(y_t), np.ascontiguousarray(expected), exact_bits=True)


@pytest.mark.parametrize(
    "a, b, want",
    [
        (np.ones(3, np.float16), 2.0, "float16"),
        (np.ones(3, np.int32), 2.5, "float32"),
        (np.ones(3, np.int32), 2, "int32"),
        (np.ones(3, np.bool_), 2, "int64"),
        (np.ones(3, np.bool_), 2.0, "float32"),
        (np.ones(3, np.int8), True, "int8"),
        (np.ones(3, np.float64), 2.0, "float64"),
        (np.ones(3, np.float16), np.ones(3, T.BF16), "float32"),
        (np.ones(3, T.BF16), np.ones(3, np.float16), "float32"),
        (np.ones(3, np.float64), np.ones(3, np.float32), "float64"),
        (np.ones(3, np.int64), np.ones(3, np.float16), "float16"),
        (np.ones(3, np.uint8), np.ones(3, np.int8), "int16"),
        (np.ones(3, np.bool_), np.ones(3, np.uint8), "uint8"),
    ],
    ids=lambda v: getattr(v, "dtype", v).__str__() if not isinstance(v, str) else v,
)
@pytest.mark.parametrize("name", ["minimum", "maximum", "add", "mul"])
def test_promotion_examples_from_spec(name, a, b, want):
    """docs/dtypes.md's examples, spelled out (both argument orders)."""
    op = T.OPS_BY_NAME[name].op
    assert op(a, b).dtype is T.PL_OF[want]
    assert op(b, a).dtype is T.PL_OF[want]


# ------------------------------------------------------------------ unary


UNARY_SHAPES = [(), (1,), (2, 3), (3, 1, 2), (0, 3), (4, 1, 5)]


@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
@pytest.mark.parametrize("info", T.UNARY, ids=[o.name for o in T.UNARY])
def test_unary_forward_layouts(info, dt, shape):
    rng = rng_for("unary", info.name, dt, shape)
    for lay in T.LAYOUTS:
        a = T.layout(with_specials(T.sample(shape, dt, rng), dt, rng), lay)
        before = T.bits(a).copy()
        if not info.supported(dt):
            with pytest.raises(TypeError):
                info.op(a)
            continue
        y_t = info.op(a)
        assert y_t.dtype is T.PL_OF[info.result(dt)]
        assert y_t.shape == shape
        assert_same_values(to_numpy(y_t), T.reference(info, a, out_dtype=info.result(dt)), exact_bits=True)
        np.testing.assert_array_equal(T.bits(a), before)


# ------------------------------------------------------------------ reductions


REDUCE_SHAPES = [(), (5,), (2, 3), (3, 1, 2), (0, 3), (4, 1, 5), (37, 129)]


def dims_for(shape):
    out = [None]
    if len(shape) >= 1:
        out += [0, -1]
    if len(shape) >= 2:
        out += [(0, 1), (-1, 0)]
    if len(shape) >= 3:
        out += [(0, 2), (1,)]
    return out


def reduction_tolerance(rd: str, x64: np.ndarray, axis, keepdims: bool, n: int) -> np.ndarray:
    """Tolerance for a blocked float sum: rounding of the result plus
    accumulation error (float32 accumulation for float16/bfloat16)."""
    acc = "float64" if rd == "float64" else "float32"
    abs_sum = np.sum(np.abs(x64), axis=axis, keepdims=keepdims)
    return 2 * T.eps(rd) * abs_sum + max(n, 1) * T.eps(acc) * abs_sum + 1e-300


@pytest.mark.parametrize("shape", REDUCE_SHAPES, ids=str)
@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
@pytest.mark.parametrize("info", T.REDUCTIONS, ids=[o.name for o in T.REDUCTIONS])
def test_reduction_forward(info, dt, shape):
    rng = rng_for("reduce", info.name, dt, shape)
    for lay in T.LAYOUTS:
        if shape == (37, 129) and lay not in ("contiguous", "transposed"):
            continue
        a = T.layout(T.sample(shape, dt, rng), lay)
        before = T.bits(a).copy()
        for axis in dims_for(shape):
            for keepdim in (False, True):
                if not info.supported(dt):
                    with pytest.raises(TypeError):
                        info.op(a, dim=axis, keepdim=keepdim)
                    continue
                y_t = info.op(a, dim=axis, keepdim=keepdim)
                rd = info.result(dt)
                assert y_t.dtype is T.PL_OF[rd], (y_t.dtype, rd)
                if rd in T.FLOAT_NAMES:
                    x64 = a.astype(np.float64)
                else:
                    x64 = a.astype(np.int64)
                expected = np.asarray(info.ref(x64, axis, keepdim))
                y = to_numpy(y_t)
                assert y.shape == expected.shape, (y.shape, expected.shape, axis, keepdim)
                if rd not in T.FLOAT_NAMES:
                    # integer/bool sums are exact and int64
                    np.testing.assert_array_equal(y, expected.astype(np.int64))
                    continue
                n = T._axes_count(shape, axis)
                yf = y.astype(np.float64)
                if n == 0 and info.name == "mean":
                    assert np.isnan(yf).all()
                    continue
                tol = reduction_tolerance(rd, x64, axis, keepdim, n)
                if info.name == "mean":
                    tol = tol / max(n, 1) + 2 * T.eps(rd) * np.abs(expected)
                err = np.abs(yf - expected)
                assert (err <= tol).all(), (axis, keepdim, lay, yf, expected)
                if rd == "float64" and n <= 2:
                    # no reassociation possible: exact
                    np.testing.assert_array_equal(yf, expected)
        np.testing.assert_array_equal(T.bits(a), before)


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64", "int32"])
def test_sum_is_deterministic_across_threads(dt):
    """docs/semantics.md: the same inputs give bit-identical sums for any thread count."""
    rng = rng_for("det", dt)
    a = T.sample((513, 1031), dt, rng)
    prev = pylucid.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3, 8):
            pylucid.set_num_threads(n)
            assert pylucid.get_num_threads() == n
            results.append([T.bits(to_numpy(ops.sum(a, dim=d))) for d in (None, 0, 1)])
        for r in results[1:]:
            for x, y in zip(results[0], r):
                np.testing.assert_array_equal(x, y)
    finally:
        pylucid.set_num_threads(prev)


@pytest.mark.parametrize("dt", T.FLOAT_NAMES)
def test_half_sums_accumulate_in_float32(dt):
    """1 + 4096 tiny values: a float16/bfloat16 accumulator would lose every
    one of them; float32 accumulation keeps them (docs/semantics.md)."""
    small = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53}[dt]
    x = np.full(4097, small, dtype=np.float64)
    x[0] = 1.0
    a = x.astype(T.NP_OF[dt])
    got = float(to_numpy(ops.sum(a)).astype(np.float64))
    want = float(np.asarray(1.0 + 4096 * small).astype(T.NP_OF[dt]))
    if dt in ("float16", "bfloat16"):
        assert got == want and got > 1.0
    else:
        assert abs(got - (1.0 + 4096 * small)) <= 4097 * T.eps(dt)


# ------------------------------------------------------------------ gradients: the table's references


def fd_vjp(f, xs, i, g, h=1e-6):
    """Central finite differences of <g, f(xs)> with respect to xs[i] (float64)."""
    x = xs[i]
    out = np.zeros(x.shape)
    flat = out.reshape(-1)
    for j in range(x.size):
        plus = [v.copy() for v in xs]
        minus = [v.copy() for v in xs]
        plus[i].reshape(-1)[j] += h
        minus[i].reshape(-1)[j] -= h
        flat[j] = (np.sum(g * f(*plus)) - np.sum(g * f(*minus))) / (2 * h)
    return out


def binary_case(info, pair, seed_key):
    rng = rng_for(*seed_key)
    sa, sb = pair
    a, b = T.distinct_pair(sa, sb, rng)
    g = rng.standard_normal(np.broadcast_shapes(sa, sb))
    return a, b, g


@pytest.mark.parametrize("pair", T.BROADCAST_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("info", T.BINARY, ids=[o.name for o in T.BINARY])
def test_binary_grad_float64_matches_reference(info, pair):
    a, b, g = binary_case(info, pair, ("g64", info.name, pair))
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    y = info.op(ta, tb)
    assert y.grad_fn is not None and y.grad_fn.name() == info.node
    ga, gb = autograd.grad([y], [ta, tb], grad_outputs=[g])
    ref = info.grad_ref(g, a, b)
    exp_a = T.sum_to_shape(np.asarray(ref[0], float), a.shape)
    exp_b = T.sum_to_shape(np.asarray(ref[1], float), b.shape)
    for got, exp, x in ((ga, exp_a, a), (gb, exp_b, b)):
        assert got.dtype is pylucid.float64 and got.shape == x.shape
        np.testing.assert_allclose(to_numpy(got), exp, rtol=1e-12, atol=1e-12)
    # the table's gradient reference agrees with finite differences of its forward reference
    fwd = lambda u, v: info.ref(u, v)  # noqa: E731
    np.testing.assert_allclose(fd_vjp(fwd, [a, b], 0, g), exp_a, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(fd_vjp(fwd, [a, b], 1, g), exp_b, rtol=1e-6, atol=1e-6)
    # and .backward accumulates the same into .grad
    y2 = info.op(ta, tb)
    y2.backward(g)
    np.testing.assert_allclose(to_numpy(ta.grad), exp_a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(to_numpy(tb.grad), exp_b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("pair", T.BROADCAST_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("info", T.BINARY, ids=[o.name for o in T.BINARY])
def test_binary_gradcheck(info, pair):
    a, b, _ = binary_case(info, pair, ("gc", info.name, pair))
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    assert autograd.gradcheck(info.op, [ta, tb])
    # only one input requiring grad: the other is skipped cleanly
    assert autograd.gradcheck(info.op, [ta, pylucid.from_numpy(b)])
    assert autograd.gradcheck(info.op, [pylucid.from_numpy(a), tb])


def skip_big_pair_for_fmin_fmax(info, pair):
    """Second order: fmin/fmax's backward is minimum/maximum's with another
    mask (the same route/select ops), so the slowest pair runs for those only."""
    if info.name in ("fmin", "fmax") and pair == ((4, 1, 5), (6, 1)):
        pytest.skip("second order of the route/select ops: covered by minimum/maximum on this pair")


@pytest.mark.parametrize("pair", T.BROADCAST_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize(
    "info",
    T.BINARY,
    ids=[o.name for o in T.BINARY],
)
def test_binary_gradgradcheck(info, pair):
    skip_big_pair_for_fmin_fmax(info, pair)
    a, b, _ = binary_case(info, pair, ("ggc", info.name, pair))
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    assert autograd.gradgradcheck(info.op, [ta, tb])


def second_order_check(f, xs, out_shape, rng, h=1e-6):
    """A full double-backward check (what gradgradcheck should do, with the
    upstream gradient v as an input too): S(xs, v) = sum_i <w_i, d<v, f(xs)>/dx_i>;
    autograd's dS/d(xs, v) through create_graph=True against central
    differences of S. Returns the analytical gradients."""
    v = rng.standard_normal(out_shape)
    ws = [rng.standard_normal(x.shape) for x in xs]

    def S(vals, vv, record):
        ts = [pylucid.from_numpy(np.array(x), requires_grad=True) for x in vals]
        tv = pylucid.from_numpy(np.array(vv), requires_grad=True)
        gs = autograd.grad([f(*ts)], ts, grad_outputs=[tv], create_graph=record, allow_unused=True)
        total = None
        for g, w in zip(gs, ws):
            if g is None:
                continue
            term = ops.sum(ops.mul(g, w))
            total = term if total is None else ops.add(total, term)
        return total, ts, tv

    total, ts, tv = S(xs, v, True)
    if total is None or not total.requires_grad:
        analytical = [np.zeros(x.shape) for x in xs] + [np.zeros(v.shape)]
    else:
        res = autograd.grad([total], ts + [tv], allow_unused=True)
        analytical = [np.zeros(x.shape) if r is None else to_numpy(r) for r, x in zip(res, xs + [v])]
    base = [np.array(x, dtype=np.float64) for x in xs] + [np.array(v, dtype=np.float64)]

    def value(vals):
        t, _, _ = S(vals[:-1], vals[-1], False)
        return 0.0 if t is None else float(t.detach().numpy())

    for i, target in enumerate(base):
        num = np.zeros(target.shape)
        for j in range(target.size):
            plus = [x.copy() for x in base]
            minus = [x.copy() for x in base]
            plus[i].reshape(-1)[j] += h
            minus[i].reshape(-1)[j] -= h
            num.reshape(-1)[j] = (value(plus) - value(minus)) / (2 * h)
        np.testing.assert_allclose(analytical[i], num, rtol=1e-4, atol=1e-6, err_msg="input %d" % i)
    return analytical


@pytest.mark.parametrize("pair", T.BROADCAST_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("info", T.BINARY, ids=[o.name for o in T.BINARY])
def test_binary_double_backward(info, pair):
    """create_graph=True: second-order gradients with respect to a, b and the
    upstream gradient itself agree with finite differences."""
    skip_big_pair_for_fmin_fmax(info, pair)
    rng = rng_for("gg", info.name, pair)
    a, b, _ = binary_case(info, pair, ("gg", info.name, pair))
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    analytical = second_order_check(info.op, [a, b], out_shape, rng)
    if info.selection or info.name in ("add", "sub"):
        # the first derivative is linear in v and constant in a, b
        assert not analytical[0].any() and not analytical[1].any()


def test_gradcheck_detects_a_wrong_gradient():
    """gradcheck itself can fail (so the checks above mean something)."""

    class Wrong(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return ops.mul(x, x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return ops.mul(g, x)  # should be 2·g·x

    x = pylucid.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    with pytest.raises(autograd.GradcheckError):
        autograd.gradcheck(Wrong.apply, [x])
    assert autograd.gradcheck(Wrong.apply, [x], raise_exception=False) is False


UNARY_GRAD_SHAPES = [(), (1,), (2, 3), (3, 1, 2), (0, 3)]


@pytest.mark.parametrize("shape", UNARY_GRAD_SHAPES, ids=str)
@pytest.mark.parametrize("info", T.UNARY, ids=[o.name for o in T.UNARY])
def test_unary_grad(info, shape):
    rng = rng_for("ug", info.name, shape)
    a = np.asarray(rng.standard_normal(shape))
    g = np.asarray(rng.standard_normal(shape))
    ta = pylucid.from_numpy(a, requires_grad=True)
    y = info.op(ta)
    assert y.grad_fn.name() == info.node
    (ga,) = autograd.grad([y], [ta], grad_outputs=[g])
    exp = info.grad_ref(g, a)[0]
    np.testing.assert_allclose(to_numpy(ga), exp, rtol=1e-12, atol=0)
    np.testing.assert_allclose(fd_vjp(info.ref, [a], 0, g), exp, rtol=1e-6, atol=1e-6)
    if a.size:
        assert autograd.gradcheck(info.op, [ta])
        assert autograd.gradgradcheck(info.op, [ta])


@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (3, 1, 2), (0, 3), (4, 1, 5)], ids=str)
@pytest.mark.parametrize("info", T.REDUCTIONS, ids=[o.name for o in T.REDUCTIONS])
def test_reduction_grad(info, shape):
    rng = rng_for("rg", info.name, shape)
    a = np.asarray(rng.standard_normal(shape))
    ta = pylucid.from_numpy(a, requires_grad=True)
    for axis in dims_for(shape):
        for keepdim in (False, True):
            y = info.op(ta, dim=axis, keepdim=keepdim)
            assert y.grad_fn.name() == info.node
            g = np.asarray(rng.standard_normal(y.shape))
            (ga,) = autograd.grad([y], [ta], grad_outputs=[g])
            assert ga.shape == shape and ga.dtype is pylucid.float64
            exp = info.grad_ref(g, a, axis, keepdim)[0]
            np.testing.assert_allclose(to_numpy(ga), exp, rtol=1e-12, atol=0)
            if a.size:
                fwd = lambda u: info.ref(u, axis, keepdim)  # noqa: E731
                np.testing.assert_allclose(fd_vjp(fwd, [a], 0, g), exp, rtol=1e-6, atol=1e-6)
    if a.size:
        for axis in dims_for(shape)[:3]:
            fn = lambda x: info.op(x, dim=axis, keepdim=False)  # noqa: E731
            assert autograd.gradcheck(fn, [ta])
            assert autograd.gradgradcheck(fn, [ta])


# ------------------------------------------------------------------ gradients in every float dtype


def grad_tolerance(dts, terms_abs):
    worst = max(T.eps(d) for d in dts)
    return 8 * worst * terms_abs + 1e-300


@pytest.mark.parametrize("db", T.FLOAT_NAMES)
@pytest.mark.parametrize("da", T.FLOAT_NAMES)
@pytest.mark.parametrize("info", T.BINARY, ids=[o.name for o in T.BINARY])
def test_binary_grad_dtypes(info, da, db):
    """Gradients come back in each input's dtype and shape, also for mixed
    dtypes, with values of the float64 reference up to the dtypes' rounding."""
    sa, sb = (4, 1, 5), (6, 1)
    a64, b64, g64 = binary_case(info, (sa, sb), ("gd", info.name, da, db))
    a = a64.astype(T.NP_OF[da])
    b = b64.astype(T.NP_OF[db])
    rd = info.result(T.promote(da, db))
    g = g64.astype(T.NP_OF[rd])
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    y = info.op(ta, tb)
    assert y.dtype is T.PL_OF[rd]
    ga, gb = autograd.grad([y], [ta, tb], grad_outputs=[g])
    assert ga.dtype is T.PL_OF[da] and ga.shape == sa
    assert gb.dtype is T.PL_OF[db] and gb.shape == sb
    av, bv, gv = a.astype(np.float64), b.astype(np.float64), g.astype(np.float64)
    ref = info.grad_ref(gv, av, bv)
    # magnitude of the summed terms (for the rounding tolerance); min/max
    # masks must come from the signed values
    if info.selection:
        ref_abs = info.grad_ref(np.abs(gv), av, bv)
    else:
        ref_abs = info.grad_ref(np.abs(gv), np.abs(av), np.abs(bv))
    for got, r, r_abs, x, dx in ((ga, ref[0], ref_abs[0], av, da), (gb, ref[1], ref_abs[1], bv, db)):
        exp = T.sum_to_shape(np.asarray(r, float), x.shape)
        mag = T.sum_to_shape(np.abs(np.asarray(r_abs, float)), x.shape)
        err = np.abs(to_numpy(got).astype(np.float64) - exp)
        tol = grad_tolerance([dx, rd], mag)
        assert (err <= tol).all(), (dx, rd, to_numpy(got), exp)
    # .backward gives the same, accumulated into .grad in the leaves' dtypes
    info.op(ta, tb).backward(g)
    assert ta.grad.dtype is T.PL_OF[da] and tb.grad.dtype is T.PL_OF[db]
    np.testing.assert_array_equal(T.bits(to_numpy(ta.grad)), T.bits(to_numpy(ga)))
    np.testing.assert_array_equal(T.bits(to_numpy(tb.grad)), T.bits(to_numpy(gb)))


@pytest.mark.parametrize("dt", T.FLOAT_NAMES)
@pytest.mark.parametrize("info", T.UNARY + T.REDUCTIONS, ids=[o.name for o in T.UNARY + T.REDUCTIONS])
def test_unary_and_reduction_grad_dtypes(info, dt):
    rng = rng_for("ugd", info.name, dt)
    a = rng.standard_normal((4, 1, 5)).astype(T.NP_OF[dt])
    ta = pylucid.from_numpy(a, requires_grad=True)
    kwargs = {} if info.kind == "unary" else {"dim": (0, 2), "keepdim": False}
    y = info.op(ta, **kwargs)
    assert y.dtype is T.PL_OF[dt]
    g = rng.standard_normal(y.shape).astype(T.NP_OF[dt])
    (ga,) = autograd.grad([y], [ta], grad_outputs=[g])
    assert ga.dtype is T.PL_OF[dt] and ga.shape == a.shape
    gv, av = g.astype(np.float64), a.astype(np.float64)
    if info.kind == "unary":
        exp = info.grad_ref(gv, av)[0]
    else:
        exp = info.grad_ref(gv, av, (0, 2), False)[0]
    np.testing.assert_allclose(to_numpy(ga).astype(np.float64), exp, rtol=2 * T.eps(dt), atol=0)


def test_integer_and_bool_inputs_cannot_require_grad():
    for name in T.INT_NAMES + ["bool"]:
        arr = np.ones(3, T.NP_OF[name])
        with pytest.raises((RuntimeError, TypeError)):
            pylucid.from_numpy(arr, requires_grad=True)
        with pytest.raises((RuntimeError, TypeError)):
            pylucid.tensor(arr).requires_grad_(True)


@pytest.mark.parametrize("info", T.BINARY, ids=[o.name for o in T.BINARY])
def test_binary_int_with_float_grad_flows_to_float_only(info):
    """An integer operand mixed with a float that requires grad: the float
    gets its gradient, the integer has no edge (next_functions None)."""
    a = np.array([[1.5, -2.0, 3.25]])
    b = np.array([[2], [-3]], dtype=np.int32)
    ta = pylucid.tensor(a, requires_grad=True)
    y = info.op(ta, b)
    assert y.dtype is pylucid.float64
    nf = y.grad_fn.next_functions
    assert len(nf) == 2 and nf[0][0] is not None and nf[0][0].name() == "AccumulateGrad" and nf[1][0] is None
    g = np.arange(6.0).reshape(2, 3) - 2.5
    (ga,) = autograd.grad([y], [ta], grad_outputs=[g])
    exp = T.sum_to_shape(np.asarray(info.grad_ref(g, a, b.astype(np.float64))[0], float), a.shape)
    np.testing.assert_allclose(to_numpy(ga), exp, rtol=1e-12)


def test_op_table_covers_every_public_op():
    """The table lists every op of pylucid.ops.__all__ (schemas of internal
    ops such as cast/route/select are not public callables)."""
    public = {n for n in ops.__all__ if isinstance(getattr(ops, n), ops.Op)}
    assert public == set(T.OPS_BY_NAME) | set(T.ALIASES)
    for alias, name in T.ALIASES.items():
        assert getattr(ops, alias) is T.OPS_BY_NAME[name].op
        assert getattr(ops, alias).schema.name == name
    registered = {s.name for s in ops.schemas()}
    assert set(T.OPS_BY_NAME) <= registered
    for info in T.OPS:
        assert info.op.schema.name == info.name


def test_every_exported_schema_has_a_row():
    """Every schema the library exports is a row of the op table or a listed
    internal op, and ids are positions in name order."""
    from pylucid._lib import ffi, lib

    needed = ffi.new("size_t*")
    assert lib.lucid_schemas(ffi.NULL, 0, needed) == 0
    buf = ffi.new("char[]", needed[0])
    assert lib.lucid_schemas(buf, needed[0], needed) == 0
    raw = json.loads(ffi.string(buf).decode())
    assert [s["id"] for s in raw] == list(range(len(raw)))
    assert [s["name"] for s in raw] == sorted(s["name"] for s in raw)
    for s in raw:
        assert s["name"] in T.OPS_BY_NAME or s["name"] in T.INTERNAL_OPS, s["name"]
        if s["name"] in T.OPS_BY_NAME:
            info = T.OPS_BY_NAME[s["name"]]
            assert s["kind"] == info.schema_kind
            assert s["arity"] == info.arity
            assert s["outputs"] == info.outputs
    assert set(T.INTERNAL_OPS) <= {s["name"] for s in raw}


def test_layouts_really_are_what_they_claim():
    """Guards the helpers: the layouts used above are strided as named."""
    x = np.arange(24.0).reshape(2, 3, 4)
    assert not T.layout(x, "transposed").flags.c_contiguous
    assert all(s < 0 for s in T.layout(x, "negative_stride").strides)
    assert 0 in T.layout(x, "zero_stride").strides
    assert not T.layout(x, "readonly").flags.writeable
    for lay in T.LAYOUTS:
        t = pylucid.from_numpy(T.layout(x, lay))
        np.testing.assert_array_equal(t.numpy(), T.layout(x, lay))


@pytest.mark.parametrize("pair", list(itertools.islice(T.BROADCAST_PAIRS, 2, None)), ids=PAIR_IDS[2:])
def test_broadcast_pairs_shapes_match_numpy(pair):
    sa, sb = pair
    for info in T.BINARY:
        y = info.op(np.ones(sa), np.ones(sb))
        assert y.shape == np.broadcast_shapes(sa, sb)
        y = info.op(np.ones(sb), np.ones(sa))
        assert y.shape == np.broadcast_shapes(sb, sa)


def test_gradgradcheck_detects_a_wrong_second_derivative():
    class Square(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return ops.mul(x, x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return ops.mul(ops.mul(g, x.detach()), 2.0)  # right to first order only

    x = pylucid.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    assert autograd.gradcheck(Square.apply, [x])
    assert autograd.gradgradcheck(Square.apply, [x], raise_exception=False) is False


# ------------------------------------------------------------------ conversions the tests above rely on


def test_bfloat16_numpy_has_bfloat16_dtype():
    a = np.array([1.5, -2.0], dtype=T.BF16)
    t = ops.add(a, a)
    assert t.numpy().dtype == T.BF16
    np.testing.assert_array_equal(t.numpy().astype(np.float32), [3.0, -4.0])
    assert ops.sum(a).item() == -0.5


@pytest.mark.parametrize("value", [1.5, 2, True, np.float64(2.0), np.array(3.0, np.float32)], ids=repr)
def test_tensor_of_a_scalar_is_0d(value):
    t = pylucid.tensor(value)
    assert t.shape == () and t.ndim == 0


# ================================================================== the min/max family
# docs/semantics.md: fmin/fmax (rows of BINARY above), clamp/clip, amin/amax,
# argmin/argmax, min/max over a dim. Every value is a winner's bits (NaN
# payloads included), every gradient goes whole to the winner.

FAMILY_EXTREMES = T.EXTREMES
EXTREME_SHAPES = [(), (5,), (2, 3), (3, 1, 2), (0, 3), (4, 1, 5), (37, 129)]


def fast_equal(actual, expected):
    """assert_array_equal for the many small comparisons of the family's
    forward tests (much cheaper; NaN never equals here: compare bits)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    nan = actual.dtype.kind == "f" and expected.dtype.kind == "f"
    if actual.shape != expected.shape or not np.array_equal(actual, expected, equal_nan=nan):
        np.testing.assert_array_equal(actual, expected)


def wrap(x, k):
    """Alternates plain NumPy arrays and pylucid.from_numpy views of them
    (zero-copy at any strides, zero strides included)."""
    return pylucid.from_numpy(x) if k % 2 else x


def layouts_for(shape, turn):
    """The layouts a family forward test runs (a sample, for the runtime):
    contiguous and one other, which rotates with ``turn`` (the dtype's and
    shape's positions), so each op sees every layout over the dtypes; the
    big shape, whose layouts cost most, gets the transposed/negative-stride ones."""
    if int(np.prod(shape, dtype=np.int64)) > 1000:
        return ["contiguous", T.LAYOUTS[1 + turn % 2]]
    return ["contiguous", T.LAYOUTS[1 + turn % (len(T.LAYOUTS) - 1)]]


def turn_of(dt, shape, shapes):
    return T.DTYPE_NAMES.index(dt) + shapes.index(shape)


# ------------------------------------------------------------------ clamp / clip: forward

#: (x shape, min, max): a shape is a tensor bound (broadcasting with x, maybe
#: up), "int"/"float" a Python scalar bound, None no bound
CLAMP_CASES = [
    ((3, 4), (4,), (3, 1)),
    ((2, 3), (), None),
    ((5,), None, (5,)),
    ((3, 1, 2), (1, 4, 1), (2,)),
    ((0, 3), (1, 3), None),
    ((), (), ()),
    ((2, 3), "int", "int"),
    ((2, 3), "float", None),
    ((4,), None, "float"),
    ((37, 129), (129,), (37, 1)),
]
CLAMP_IDS = ["%s-%s-%s" % c for c in CLAMP_CASES]


def clamp_bound(spec, dt, rng):
    if spec is None:
        return None
    if spec == "int":
        return int(rng.integers(0, 7))
    if spec == "float":
        return float(rng.choice([-1.5, 0.25, -0.0, 2.5, 7.0]))
    return family_data(spec, dt, rng)


def clamp_result_dtype(dt, lo, hi):
    rd = dt
    for b in (lo, hi):
        if isinstance(b, (int, float)):
            rd = T.promote_scalar(rd, b)
    return rd


def clamp_reference(x, lo, hi, rd):
    npd = T.NP_OF[rd]
    cast = [None if v is None else np.asarray(v).astype(npd) for v in (x, lo, hi)]
    return np.asarray(T.clamp_ref(*cast)).astype(npd)


@pytest.mark.parametrize("case", CLAMP_CASES, ids=CLAMP_IDS)
@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
def test_clamp_forward_layouts(dt, case):
    sx, slo, shi = case
    rng = rng_for("clamp", dt, case)
    lays = T.LAYOUTS if int(np.prod(sx)) < 1000 else ["contiguous", "transposed", "negative_stride"]
    for k, lay in enumerate(lays):
        x = T.layout(family_data(sx, dt, rng), lay)
        lo, hi = clamp_bound(slo, dt, rng), clamp_bound(shi, dt, rng)
        # the bounds in the next layouts (x, lo and hi in different layouts)
        lo = T.layout(lo, lays[(k + 1) % len(lays)]) if isinstance(lo, np.ndarray) else lo
        hi = T.layout(hi, lays[(k + 2) % len(lays)]) if isinstance(hi, np.ndarray) else hi
        before = [T.bits(v).copy() for v in (x, lo, hi) if isinstance(v, np.ndarray)]
        rd = clamp_result_dtype(dt, lo, hi)
        fn = ops.clamp if k % 2 else ops.clip
        y_t = fn(wrap(x, k), wrap(lo, k + 1) if isinstance(lo, np.ndarray) else lo,
                 wrap(hi, k) if isinstance(hi, np.ndarray) else hi)
        shape = np.broadcast_shapes(*[np.shape(v) for v in (x, lo, hi) if isinstance(v, np.ndarray)])
        assert y_t.dtype is T.PL_OF[rd] and y_t.shape == shape
        y = to_numpy(y_t)
        expected = clamp_reference(x, lo, hi, rd)
        if rd == dt:  # no cast: the winner's bits, NaN payloads included
            np.testing.assert_array_equal(T.bits(y), T.bits(expected))
        else:
            assert_same_values(y, expected, exact_bits=True)
        # NumPy's clip (= minimum(maximum(x, lo), hi)) in value; NaN as NaN
        wide = np.float64 if rd in T.FLOAT_NAMES else np.int64
        xs = [None if v is None else np.asarray(v).astype(T.NP_OF[rd]).astype(wide) for v in (x, lo, hi)]
        with np.errstate(invalid="ignore"):
            want = np.clip(xs[0], xs[1], xs[2]) if (lo is not None and hi is not None) else (
                np.maximum(xs[0], xs[1]) if hi is None else np.minimum(xs[0], xs[2]))
        np.testing.assert_array_equal(y.astype(wide), np.broadcast_to(want, shape))
        after = [T.bits(v) for v in (x, lo, hi) if isinstance(v, np.ndarray)]
        for b0, b1 in zip(before, after):
            np.testing.assert_array_equal(b0, b1)


@pytest.mark.parametrize("db", T.DTYPE_NAMES)
@pytest.mark.parametrize("dx", T.DTYPE_NAMES)
def test_clamp_mixed_dtypes(dx, db):
    """The three operands promote together (docs/dtypes.md)."""
    rng = rng_for("clamp-mixed", dx, db)
    x = T.layout(T.sample((2, 1, 3), dx, rng), "transposed")
    lo = T.sample((4, 1), db, rng)
    hi = T.sample((3,), dx, rng)
    rd = T.promote(T.promote(dx, db), dx)
    y = ops.clamp(x, lo, hi)
    assert y.dtype is T.PL_OF[rd] and y.shape == (2, 4, 3)
    assert_same_values(to_numpy(y), clamp_reference(x, lo, hi, rd), exact_bits=True)


def test_clamp_needs_a_bound_and_clip_is_clamp():
    x = np.arange(4.0)
    with pytest.raises(ValueError):
        ops.clamp(x)
    with pytest.raises(ValueError):
        ops.clip(x, None, None)
    assert ops.clip is ops.clamp and ops.clip.schema.name == "clamp"
    # min > max: every non-NaN element is max (NumPy, PyTorch); NaN x stays NaN
    y = to_numpy(ops.clamp(np.array([-5.0, 0.0, 5.0, np.nan]), 3.0, 1.0))
    np.testing.assert_array_equal(y, [1.0, 1.0, 1.0, np.nan])


# ------------------------------------------------------------------ clamp / clip: gradients

#: (x shape, lo, hi) for the gradient tests; "s" a Python scalar bound
CLAMP_GRAD_CASES = [
    ((3, 4), (4,), (3, 1)),
    ((2, 3), (), None),
    ((5,), None, (5,)),
    ((3, 1, 2), (1, 4, 1), (2,)),
    ((2, 3), "s", (3,)),
    ((4,), (4,), "s"),
]
CLAMP_GRAD_IDS = ["%s-%s-%s" % c for c in CLAMP_GRAD_CASES]


def clamp_grad_data(case, rng, ties):
    """float64 x, lo, hi: distinct values (tie-free: differentiable) or small
    integers (many ties: the gradient still goes whole to the winner)."""
    shapes = [s for s in case if isinstance(s, tuple)]
    n = sum(int(np.prod(s, dtype=np.int64)) for s in shapes)
    if ties:
        vals = rng.integers(-3, 4, size=n).astype(np.float64)
    else:
        vals = rng.choice(np.arange(-128, 128) * 0.0625, size=n, replace=False)
    out, k = [], 0
    for s in case:
        if isinstance(s, tuple):
            m = int(np.prod(s, dtype=np.int64))
            out.append(vals[k:k + m].reshape(s))
            k += m
        else:
            out.append(None if s is None else 0.3)
    return out


def clamp_fn(case, x_lo_hi):
    """fn(*tensors) -> clamp with the tensor operands as arguments (a Python
    scalar bound stays a constant)."""
    _, lo, hi = x_lo_hi
    lo_t, hi_t = isinstance(lo, np.ndarray), isinstance(hi, np.ndarray)

    def fn(x, *bounds):
        it = iter(bounds)
        return ops.clamp(x, next(it) if lo_t else lo, next(it) if hi_t else hi)

    return fn, [v for v in x_lo_hi if isinstance(v, np.ndarray)]


@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("case", CLAMP_GRAD_CASES, ids=CLAMP_GRAD_IDS)
def test_clamp_grad_float64(case, ties):
    rng = rng_for("clamp-grad", case, ties)
    data = clamp_grad_data(case, rng, ties)
    fn, arrays = clamp_fn(case, data)
    ts = [pylucid.from_numpy(a, requires_grad=True) for a in arrays]
    y = fn(*ts)
    assert y.grad_fn.name() == "ClampBackward"
    g = rng.integers(-4, 5, size=y.shape).astype(np.float64) if ties else rng.standard_normal(y.shape)
    got = autograd.grad([y], ts, grad_outputs=[g])
    x, lo, hi = data
    ref = T.clamp_grad_ref(g, x, None if lo is None else np.asarray(lo), None if hi is None else np.asarray(hi))
    exp = [T.sum_to_shape(r, a.shape) for r, a in zip([r for r, v in zip(ref, data) if isinstance(v, np.ndarray)],
                                                     arrays)]
    for gt, e, a in zip(got, exp, arrays):
        assert gt.dtype is pylucid.float64 and gt.shape == a.shape
        np.testing.assert_allclose(to_numpy(gt), e, rtol=1e-12, atol=1e-12)
    # equal to the composition minimum(maximum(x, lo), hi) in values and gradients
    def comp(xt, *bounds):
        it = iter(bounds)
        w = xt
        if data[1] is not None:
            w = ops.maximum(w, next(it) if isinstance(data[1], np.ndarray) else data[1])
        if data[2] is not None:
            w = ops.minimum(w, next(it) if isinstance(data[2], np.ndarray) else data[2])
        return w

    ts2 = [pylucid.from_numpy(a, requires_grad=True) for a in arrays]
    yc = comp(*ts2)
    np.testing.assert_array_equal(T.bits(to_numpy(yc)), T.bits(to_numpy(y)))
    for gt, gc in zip(got, autograd.grad([yc], ts2, grad_outputs=[g])):
        np.testing.assert_allclose(to_numpy(gc), to_numpy(gt), rtol=1e-12, atol=1e-12)
    if not ties:
        # the reference agrees with finite differences of the forward reference
        def fwd(*vals):
            it = iter(vals)
            return T.clamp_ref(next(it), *[next(it) if isinstance(v, np.ndarray) else v for v in data[1:]])

        for i, e in enumerate(exp):
            np.testing.assert_allclose(fd_vjp(fwd, [a.copy() for a in arrays], i, g), e, rtol=1e-6, atol=1e-6)
        assert autograd.gradcheck(fn, ts)
        assert autograd.gradgradcheck(fn, ts)


@pytest.mark.parametrize("dt", T.FLOAT_NAMES)
def test_clamp_grad_dtypes(dt):
    """Gradients in each operand's dtype and shape; exact (a selection of g)."""
    rng = rng_for("clamp-gd", dt)
    x, lo, hi = clamp_grad_data(((3, 4), (4,), (3, 1)), rng, ties=True)
    npd = T.NP_OF[dt]
    ts = [pylucid.from_numpy(a.astype(npd), requires_grad=True) for a in (x, lo, hi)]
    y = ops.clamp(*ts)
    g = rng.integers(-4, 5, size=y.shape).astype(npd)
    got = autograd.grad([y], ts, grad_outputs=[g])
    ref = T.clamp_grad_ref(g.astype(np.float64), x, lo, hi)
    for gt, r, a in zip(got, ref, (x, lo, hi)):
        assert gt.dtype is T.PL_OF[dt] and gt.shape == a.shape
        np.testing.assert_array_equal(to_numpy(gt).astype(np.float64), T.sum_to_shape(r, a.shape))


@pytest.mark.parametrize("which", ["x", "lo", "hi"])
def test_clamp_grad_flows_to_float_operands_only(which):
    """Integer operands and operands without requires_grad have no edge
    (next_functions None); the one that requires grad gets its selection of g."""
    x = np.array([0.5, 2.5, 7.0])
    lo = np.array([1.0, 1.0, 1.0])
    hi = np.array([3], np.int64)
    if which == "hi":
        hi = np.array([3.0, 2.0, 3.0])
    vals = {"x": x, "lo": lo, "hi": hi}
    t = pylucid.tensor(vals[which], requires_grad=True)
    args = [t if k == which else (v.astype(np.int32) if k == "lo" and which != "lo" else v) for k, v in vals.items()]
    y = ops.clamp(*args)
    assert y.dtype is pylucid.float64
    edges = [n is not None for n, _ in y.grad_fn.next_functions]
    assert edges == [k == which for k in vals]
    g = np.array([1.0, 2.0, 4.0])
    (gt,) = autograd.grad([y], [t], grad_outputs=[g])
    ref = T.clamp_grad_ref(g, *[np.asarray(a, np.float64) if not isinstance(a, pylucid.Tensor) else to_numpy(a)
                                for a in args])
    np.testing.assert_array_equal(to_numpy(gt), T.sum_to_shape(ref[list(vals).index(which)], t.shape))


# ------------------------------------------------------------------ amin/amax, argmin/argmax, min/max: forward


def extreme_dims(info, shape):
    if info.kind == "extreme":
        return dims_for(shape) + [()]
    return [None] + ([0, -1] if len(shape) >= 1 else []) + ([1] if len(shape) >= 2 else [])


def zero_size_slice(shape, dim):
    axes = T.norm_axes(len(shape), dim) if dim != () else ()
    return any(shape[d] == 0 for d in axes)


@pytest.mark.parametrize("shape", EXTREME_SHAPES, ids=str)
@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
@pytest.mark.parametrize("info", FAMILY_EXTREMES, ids=[o.name for o in FAMILY_EXTREMES])
def test_extreme_forward(info, dt, shape):
    rng = rng_for("extreme", info.name, dt, shape)
    turn = turn_of(dt, shape, EXTREME_SHAPES)
    for k, lay in enumerate(layouts_for(shape, turn)):
        x = T.layout(family_data(shape, dt, rng), lay)
        before = T.bits(x).copy()
        xin = wrap(x, k + turn // 4)
        for dim in extreme_dims(info, shape):
            for keepdim in (False, True):
                if info.kind == "minmax_dim" and dim is None and keepdim:
                    continue
                if zero_size_slice(shape, dim):
                    with pytest.raises(ValueError):
                        info.op(xin, dim, keepdim)
                    continue
                if info.refuses_all_nan and T.all_nan_slice(x, dim):
                    with pytest.raises(ValueError, match="All-NaN slice encountered"):
                        info.op(xin, dim, keepdim)
                    with pytest.raises(ValueError, match="All-NaN slice encountered"):
                        info.numpy_fn(T._order_key(x), axis=dim)  # NumPy refuses it too
                    continue
                r = info.op(xin, dim, keepdim)
                if info.kind == "arg":
                    assert r.dtype is pylucid.int64 and not r.requires_grad
                    want = info.ref(x, dim, keepdim)
                    got = to_numpy(r)
                    assert got.shape == want.shape, (got.shape, want.shape, dim, keepdim)
                    fast_equal(got, want)
                    # NumPy's own argmin / nanargmin exactly
                    with np.errstate(invalid="ignore"):
                        np_i = info.numpy_fn(T._order_key(x), axis=dim, keepdims=keepdim)
                    fast_equal(got, np_i)
                    continue
                if info.kind == "minmax_dim" and dim is not None:
                    assert isinstance(r, ops.MinMaxResult) and isinstance(r, tuple)
                    values, indices = r
                    assert values is r.values and indices is r.indices
                    assert indices.dtype is pylucid.int64 and not indices.requires_grad
                    want_i = T.arg_ref(info.wins)(x, dim, keepdim)
                    fast_equal(to_numpy(indices), want_i)
                    # NumPy's argmin/argmax exactly
                    with np.errstate(invalid="ignore"):
                        np_i = info.numpy_index_fn(T._order_key(x), axis=dim)
                    fast_equal(to_numpy(indices).reshape(np_i.shape), np_i)
                else:
                    assert isinstance(r, pylucid.Tensor)
                    values = r
                assert values.dtype is T.PL_OF[dt]
                want = info.ref(x, dim, keepdim)
                got = to_numpy(values)
                assert got.shape == want.shape, (got.shape, want.shape, dim, keepdim)
                fast_equal(T.bits(got), T.bits(want))  # the winner's bits
                # NumPy's amin/nanmax/... in value (NaN as NaN; NumPy's NaN and zero bits may differ)
                if dim != ():
                    wide = T._order_key(x)
                    with np.errstate(invalid="ignore"), warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)  # nanmin of an all-NaN slice
                        fast_equal(got.astype(wide.dtype), info.numpy_fn(wide, axis=dim, keepdims=keepdim))
        fast_equal(T.bits(x), before)


def test_extreme_first_nan_and_first_zero():
    """The fold picks the first NaN (its payload) and of -0.0/+0.0 the first."""
    n1, n2 = NAN_BITS["float64"]
    x = np.array([1.0, 0.0, 0.0, 0.0]).reshape(2, 2)
    x.reshape(-1).view(np.uint64)[[1, 3]] = [n2, n1]
    assert T.bits(to_numpy(ops.amin(x)))[()] == n2 and ops.argmin(x).item() == 1
    np.testing.assert_array_equal(T.bits(to_numpy(ops.amax(x, 0))), [T.bits(np.array(1.0))[()], n2])
    z = np.array([[-0.0, 0.0], [0.0, -0.0]])
    np.testing.assert_array_equal(np.signbit(to_numpy(ops.amin(z, 1))), [True, False])
    np.testing.assert_array_equal(np.signbit(to_numpy(ops.amax(z, 0))), [True, False])
    np.testing.assert_array_equal(to_numpy(ops.max(z, 1).indices), [0, 0])


@pytest.mark.parametrize("info", FAMILY_EXTREMES, ids=[o.name for o in FAMILY_EXTREMES])
def test_extreme_errors(info):
    x = np.zeros((2, 3))
    with pytest.raises((IndexError, ValueError)):
        info.op(x, 2)
    with pytest.raises((IndexError, ValueError)):
        info.op(x, -3)
    with pytest.raises((IndexError, ValueError)):
        info.op(np.zeros(()), 0)
    if info.kind == "extreme":
        with pytest.raises(ValueError):
            info.op(x, (0, -2))
        with pytest.raises((IndexError, ValueError)):
            info.op(x, (0, 2))
    else:
        with pytest.raises(TypeError):
            info.op(x, (0, 1))
    if info.kind == "minmax_dim":
        # min(x, None, keepdim=True) is amin(x, None, True) (docs/semantics.md;
        # it raised TypeError before)
        assert info.op(x, None, True).shape == (1, 1)


# ------------------------------------------------------------------ amin/amax, min/max: gradients

EXTREME_GRAD_SHAPES = [(), (5,), (2, 3), (3, 1, 2), (4, 1, 5)]
DIFF_EXTREMES = [o for o in FAMILY_EXTREMES if o.differentiable]


def extreme_call(info, dim, keepdim):
    """The op as a function of one tensor returning the values."""
    if info.kind == "minmax_dim" and dim is not None:
        return lambda t: info.op(t, dim, keepdim).values
    return lambda t: info.op(t, dim, keepdim)


@pytest.mark.parametrize("shape", EXTREME_GRAD_SHAPES, ids=str)
@pytest.mark.parametrize("info", DIFF_EXTREMES, ids=[o.name for o in DIFF_EXTREMES])
def test_extreme_grad(info, shape):
    rng = rng_for("eg", info.name, shape)
    n = int(np.prod(shape, dtype=np.int64))
    distinct = rng.choice(np.arange(-128, 128) * 0.0625, size=n, replace=False).reshape(shape)
    tied = with_specials(rng.integers(-2, 3, size=shape).astype(np.float64), "float64", rng)
    for data in (distinct, tied):
        ta = pylucid.from_numpy(data, requires_grad=True)
        for dim in extreme_dims(info, shape):
            for keepdim in (False, True):
                if info.kind == "minmax_dim" and dim is None and keepdim:
                    continue
                y = extreme_call(info, dim, keepdim)(ta)
                assert y.grad_fn.name() == (info.node if dim is not None or info.kind != "minmax_dim"
                                            else info.node.replace("Min", "Amin").replace("Max", "Amax"))
                g = rng.integers(-4, 5, size=y.shape).astype(np.float64)
                (ga,) = autograd.grad([y], [ta], grad_outputs=[g])
                assert ga.shape == shape and ga.dtype is pylucid.float64
                exp = info.grad_ref(g, data, dim, keepdim)[0]
                np.testing.assert_array_equal(to_numpy(ga), exp)  # g itself at the winners, 0 elsewhere
                if data is distinct and n:
                    fwd = lambda u: info.ref(u, dim, keepdim)  # noqa: E731
                    np.testing.assert_allclose(fd_vjp(fwd, [data], 0, g), exp, rtol=1e-6, atol=1e-6)
    ta = pylucid.from_numpy(distinct, requires_grad=True)
    for dim in extreme_dims(info, shape)[:3]:
        assert autograd.gradcheck(extreme_call(info, dim, False), [ta])
        assert autograd.gradgradcheck(extreme_call(info, dim, False), [ta])
    if info.kind == "minmax_dim" and len(shape):
        # the named tuple itself (its int64 indices have no gradient)
        assert autograd.gradcheck(lambda t: info.op(t, 0), [ta])


@pytest.mark.parametrize("dt", T.FLOAT_NAMES)
@pytest.mark.parametrize("info", DIFF_EXTREMES, ids=[o.name for o in DIFF_EXTREMES])
def test_extreme_grad_dtypes(info, dt):
    rng = rng_for("egd", info.name, dt)
    a = with_specials(rng.integers(-2, 3, size=(4, 1, 5)).astype(np.float64), dt, rng).astype(T.NP_OF[dt])
    dim = (0, 2) if info.kind == "extreme" else 2
    ta = pylucid.from_numpy(a, requires_grad=True)
    y = extreme_call(info, dim, False)(ta)
    assert y.dtype is T.PL_OF[dt]
    g = rng.integers(-4, 5, size=y.shape).astype(T.NP_OF[dt])
    (ga,) = autograd.grad([y], [ta], grad_outputs=[g])
    assert ga.dtype is T.PL_OF[dt] and ga.shape == a.shape
    np.testing.assert_array_equal(to_numpy(ga).astype(np.float64),
                                  info.grad_ref(g.astype(np.float64), a, dim, False)[0])


def test_argmin_argmax_and_indices_never_require_grad():
    t = pylucid.tensor(np.array([[1.0, 3.0], [2.0, 0.0]]), requires_grad=True)
    for r in (ops.argmin(t), ops.argmax(t, 1), ops.min(t, 0).indices, ops.max(t, 1, True).indices):
        assert r.dtype is pylucid.int64 and not r.requires_grad and r.grad_fn is None


# ------------------------------------------------------------------ forward mode (autograd.jvp), every op


def jvp_cases(info):
    """(id, fn, operand shapes): fn takes the operands as tensors (the
    primals) and calls the op; constants live in fn."""
    if info.kind == "binary":
        return [("bcast", info.op, [(3, 1, 2), (1, 3, 2)]), ("same", info.op, [(2, 3), (2, 3)]),
                ("b-const", lambda a: info.op(a, np.array([0.75, -1.5, 2.25])), [(2, 3)])]
    if info.kind == "unary":
        return [("2x3", info.op, [(2, 3)]), ("0d", info.op, [()])]
    if info.kind == "reduction":
        return [("d%s" % (d,), (lambda d: lambda x: info.op(x, d, False))(d), [(2, 3, 4)])
                for d in (None, 1, (0, 2))] + [("keep", lambda x: info.op(x, -1, True), [(2, 3, 4)])]
    if info.kind == "clamp":
        return [("tensors", ops.clamp, [(3, 4), (4,), (3, 1)]),
                ("lo-only", lambda x, lo: ops.clamp(x, lo), [(2, 3), (3,)]),
                ("hi-scalar", lambda x, lo: ops.clamp(x, lo, 0.3), [(2, 3), (2, 1)]),
                ("x-const", lambda lo, hi: ops.clamp(np.array([[0.1, -0.7, 1.9]]), lo, hi), [(2, 1), (3,)])]
    if info.kind == "extreme":
        return [("d%s" % (d,), (lambda d: lambda x: info.op(x, d, False))(d), [(2, 3, 4)])
                for d in (None, 1, (0, 2), (-1, 0), ())] + [("keep", lambda x: info.op(x, (0, 1), True), [(2, 3, 4)])]
    if info.kind == "minmax_dim":
        return [("d1", lambda x: info.op(x, 1), [(2, 3, 4)]), ("keep", lambda x: info.op(x, -1, True), [(2, 3, 4)]),
                ("all", lambda x: info.op(x), [(2, 3, 4)])]
    raise AssertionError(info.kind)


JVP_OPS = [o for o in T.OPS if o.differentiable]
JVP_CASES = [(o, cid, fn, shapes) for o in JVP_OPS for cid, fn, shapes in jvp_cases(o)]
JVP_IDS = ["%s-%s" % (o.name, cid) for o, cid, _, _ in JVP_CASES]


def outputs_of(r):
    return list(r) if isinstance(r, tuple) else [r]


def distinct_values(shapes, rng):
    """float64 operands, all values distinct and |v| >= 0.5 (no ties, smooth division)."""
    n = sum(int(np.prod(s, dtype=np.int64)) for s in shapes)
    grid = np.arange(-128, 128) * 0.0625
    vals = rng.choice(grid[np.abs(grid) >= 0.5], size=n, replace=False)
    out, k = [], 0
    for s in shapes:
        m = int(np.prod(s, dtype=np.int64))
        out.append(vals[k:k + m].reshape(s))
        k += m
    return out


@pytest.mark.parametrize("info, cid, fn, shapes", JVP_CASES, ids=JVP_IDS)
def test_jvp_matches_finite_differences(info, cid, fn, shapes):
    rng = rng_for("jvp-fd", info.name, cid)
    xs = distinct_values(shapes, rng)
    vs = [rng.standard_normal(s) for s in shapes]
    primals = tuple(pylucid.from_numpy(x) for x in xs)
    out, tan = autograd.jvp(fn, primals, tuple(vs))
    plain = fn(*primals)
    assert type(out) is type(plain) and type(tan) is type(plain)
    h = 1e-6
    plus = outputs_of(fn(*[x + h * v for x, v in zip(xs, vs)]))
    minus = outputs_of(fn(*[x - h * v for x, v in zip(xs, vs)]))
    for o, t, p, po, mi in zip(outputs_of(out), outputs_of(tan), outputs_of(plain), plus, minus):
        np.testing.assert_array_equal(T.bits(to_numpy(o)), T.bits(to_numpy(p)))  # the primal output
        assert t.shape == o.shape and t.dtype is o.dtype
        if o.dtype is pylucid.int64:  # indices: zero tangent
            assert not to_numpy(t).any()
            continue
        fd = (to_numpy(po) - to_numpy(mi)) / (2 * h)
        np.testing.assert_allclose(to_numpy(t), fd, rtol=1e-6, atol=1e-7)


def small_ints(shape, rng, nans=False):
    x = rng.integers(-3, 4, size=shape).astype(np.float64)
    return with_specials(x, "float64", rng) if nans else x


@pytest.mark.parametrize("info, cid, fn, shapes", JVP_CASES, ids=JVP_IDS)
def test_jvp_is_the_transpose_of_the_vjp(info, cid, fn, shapes):
    """<J v, u> == <v, Jᵀ u>: exactly for small-integer data (the family with
    ties, +-0, infinities and NaN among the primals: the same winner both
    ways), to rounding for mean and div."""
    exact = info.name not in ("mean", "div")
    for seed in range(3):
        rng = rng_for("jvp-t", info.name, cid, seed)
        xs = [small_ints(s, rng, nans=info.selection) for s in shapes]
        if info.name == "div":
            xs[-1] = np.where(xs[-1] == 0, 2.0, xs[-1])
        vs = [rng.integers(-4, 5, size=s).astype(np.float64) for s in shapes]
        out, tan = autograd.jvp(fn, tuple(pylucid.from_numpy(x) for x in xs), tuple(vs))
        ts = [pylucid.from_numpy(x, requires_grad=True) for x in xs]
        ys = outputs_of(fn(*ts))
        floats = [k for k, y in enumerate(ys) if y.dtype is not pylucid.int64]
        us = [rng.integers(-4, 5, size=ys[k].shape).astype(np.float64) for k in floats]
        jtu = autograd.grad([ys[k] for k in floats], ts, grad_outputs=us, allow_unused=True)
        lhs = sum(float(np.sum(to_numpy(outputs_of(tan)[k]) * u)) for k, u in zip(floats, us))
        rhs = sum(0.0 if g is None else float(np.sum(v * to_numpy(g))) for v, g in zip(vs, jtu))
        if exact:
            assert lhs == rhs, (lhs, rhs)
        else:
            assert abs(lhs - rhs) <= 1e-12 * max(1.0, abs(lhs)), (lhs, rhs)


def winner_tangent_ref(info, xs, vs, case_fn_kind):
    """The family's output tangent: its winner's tangent (np.where over the
    same selection as the values)."""
    if info.kind == "binary":
        a, b = np.broadcast_arrays(*xs)
        va, vb = np.broadcast_arrays(*vs)
        return [np.where(info.wins(a, b), va, vb)]
    if info.kind == "clamp":
        x, lo, hi = np.broadcast_arrays(*xs)
        vx, vlo, vhi = np.broadcast_arrays(*vs)
        keep = T.a_wins_max(x, lo)
        w, vw = np.where(keep, x, lo), np.where(keep, vx, vlo)
        return [np.where(T.a_wins_min(w, hi), vw, vhi)]
    x, v = xs[0], vs[0]
    dim, keepdim = case_fn_kind
    if dim == ():
        return [v]
    _, pos = T.extreme_index(x, dim, info.wins)
    axes = T.norm_axes(x.ndim, dim)
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(v, kept + list(axes)).reshape([x.shape[d] for d in kept] + [-1])
    sel = np.take_along_axis(moved, np.transpose(pos, kept + list(axes)).reshape(moved.shape[:-1] + (1,)), -1)
    return [T._squeeze(sel.reshape(pos.shape), x.ndim, dim, keepdim)]


FAMILY_JVP = [o for o in T.OPS if o.selection]
FAMILY_JVP_CALLS = {  # op kind -> (operand shapes, call, (dim, keepdim) for the reference)
    "binary": ([(3, 1, 2), (1, 3, 2)], lambda info: info.op, None),
    "clamp": ([(3, 4), (4,), (3, 1)], lambda info: info.op, None),
    "extreme": ([(2, 3, 4)], lambda info: lambda x: info.op(x, (0, 2)), ((0, 2), False)),
    "minmax_dim": ([(2, 3, 4)], lambda info: lambda x: info.op(x, 1, True), (1, True)),
}


@pytest.mark.parametrize("dt", T.FLOAT_NAMES)
@pytest.mark.parametrize("info", FAMILY_JVP, ids=[o.name for o in FAMILY_JVP])
def test_family_jvp_is_the_winners_tangent(info, dt):
    """In every floating dtype, with ties, +-0 and NaNs: each output tangent is
    its winner's tangent, bit for bit; and jvp with the primals as their own
    tangents gives the outputs."""
    shapes, call, dk = FAMILY_JVP_CALLS[info.kind]
    fn = call(info)
    rng = rng_for("jvp-w", info.name, dt)
    xs = [family_data(s, dt, rng) for s in shapes]
    vs = [T.sample(s, dt, rng) for s in shapes]
    primals = tuple(pylucid.from_numpy(x) for x in xs)
    out, tan = autograd.jvp(fn, primals, tuple(vs))
    t0 = outputs_of(tan)[0]
    assert t0.dtype is T.PL_OF[dt]
    np.testing.assert_array_equal(T.bits(to_numpy(t0)), T.bits(winner_tangent_ref(info, xs, vs, dk)[0]))
    if info.kind == "minmax_dim":
        assert isinstance(tan, ops.MinMaxResult) and tan.indices.dtype is pylucid.int64
        assert not to_numpy(tan.indices).any()
    _, self_tan = autograd.jvp(fn, primals, tuple(xs))
    np.testing.assert_array_equal(T.bits(to_numpy(outputs_of(self_tan)[0])), T.bits(to_numpy(outputs_of(out)[0])))


ARG_ROWS = [o for o in T.OPS if o.kind == "arg"]


@pytest.mark.parametrize("info", ARG_ROWS, ids=[o.name for o in ARG_ROWS])
def test_jvp_through_argmin_argmax(info):
    """argmin/argmax (nanargmin, ...) have a forward-mode rule: no tangent
    (int64 zeros), and a function mixing them with differentiable ops works
    under jvp."""
    x = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 5.0]])
    v = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    op = info.op
    out, tan = autograd.jvp(lambda t: op(t, 1), pylucid.tensor(x), v)
    np.testing.assert_array_equal(to_numpy(out), T.arg_ref(info.wins)(x, 1, False))
    assert tan.dtype is pylucid.int64 and not to_numpy(tan).any()
    (o1, o2), (t1, t2) = autograd.jvp(lambda t: (op(t), ops.mul(t, 2.0)), pylucid.tensor(x), v)
    assert o1.item() == T.arg_ref(info.wins)(x, None, False) and t1.item() == 0
    np.testing.assert_array_equal(to_numpy(t2), 2 * v)


# ------------------------------------------------------------------ out=, every op (docs/semantics.md)


def out_call(info, dt, rng):
    """(inputs, call(*inputs, out=...), in_place index or None): a call of the
    op on NumPy inputs of dtype dt; in_place names the input that may be
    passed as out (same shape and dtype as the result)."""
    if info.kind == "binary":
        a, b = T.sample((3, 4), dt, rng), T.sample((4,), dt, rng, nonzero=True)
        return [a, b], info.op, 0
    if info.kind == "unary":
        return [T.sample((3, 4), dt, rng)], info.op, 0
    if info.kind == "reduction":
        return [T.sample((3, 4), dt, rng)], lambda x, out: info.op(x, 1, out=out), None
    if info.kind == "clamp":
        return ([T.sample((3, 4), dt, rng), T.sample((4,), dt, rng)],
                lambda x, lo, out: info.op(x, lo, 2, out=out), 0)
    if info.kind == "extreme":
        return [T.sample((3, 4), dt, rng)], lambda x, out: info.op(x, 0, out=out), None
    if info.kind == "arg":
        return [T.sample((3, 4), dt, rng)], lambda x, out: info.op(x, 1, out=out), None
    if info.kind == "minmax_dim":
        return [T.sample((3, 4), dt, rng)], lambda x, out: info.op(x, 1, out=out), None
    raise AssertionError(info.kind)


def out_like(results, make):
    """make(shape, numpy dtype) for each result (a tuple for two results)."""
    outs = tuple(make(r.shape, T.NP_OF[r.dtype.name]) for r in results)
    return outs if len(outs) > 1 else outs[0]


def view_of(buf, shape, kind):
    """The non-contiguous window strided_out uses in a buffer."""
    if kind == "negative_step":
        return buf[tuple(slice(2 * n - 1, None, -2) for n in shape)]
    return buf[tuple(slice(1, 1 + n) for n in reversed(shape))].T


def strided_out(shape, npd, kind):
    """A non-contiguous writable view into a bigger buffer filled with 7s: every
    other element backwards ("negative_step"), or a transposed window
    ("transposed"). Returns (view, buffer)."""
    if kind == "negative_step":
        buf = np.full(tuple(2 * n + 1 for n in shape), 7, dtype=npd)
    else:
        buf = np.full(tuple(n + 2 for n in reversed(shape)), 7, dtype=npd)
    return view_of(buf, shape, kind), buf


def out_dtypes(info):
    return [d for d in ("float64", "bfloat16", "int32", "bool") if info.supported(d)]


OUT_CASES = [(o, d) for o in T.OPS for d in out_dtypes(o)]


def check_out_values(got, want):
    for g, w in zip(got, want):
        g = np.asarray(to_numpy(g) if isinstance(g, pylucid.Tensor) else g)
        if w.dtype is pylucid.bfloat16 and g.dtype != T.BF16:
            g = g.view(T.BF16)
        np.testing.assert_array_equal(T.bits(g), T.bits(to_numpy(w)))


@pytest.mark.parametrize("info, dt", OUT_CASES, ids=["%s-%s" % (o.name, d) for o, d in OUT_CASES])
def test_out_argument(info, dt):
    rng = rng_for("out", info.name, dt)
    ins, call, in_place = out_call(info, dt, rng)
    want = outputs_of(call(*ins, out=None))
    two = len(want) > 1
    # a Tensor out, a NumPy out: written, and returned itself
    for make in (lambda s, d: pylucid.zeros(s, T.PL_OF[np.dtype(d).name if d != T.BF16 else "bfloat16"]),
                 lambda s, d: np.zeros(s, d)):
        o = out_like(want, make)
        r = call(*ins, out=o)
        assert r is o if not two else (isinstance(r, ops.MinMaxResult) and r[0] is o[0] and r[1] is o[1])
        check_out_values(outputs_of(r), want)
    # non-contiguous NumPy outs: only the view's elements change
    for kind in ("negative_step", "transposed"):
        pairs = [strided_out(w.shape, T.NP_OF[w.dtype.name], kind) for w in want]
        views = tuple(p[0] for p in pairs)
        assert not any(v.flags.c_contiguous for v in views if kind == "negative_step" or v.ndim > 1)
        bufs_before = [p[1].copy() for p in pairs]
        r = call(*ins, out=views if two else views[0])
        assert (r[0] is views[0] and r[1] is views[1]) if two else r is views[0]
        check_out_values(views, want)
        for (v, buf), before in zip(pairs, bufs_before):
            # the elements outside the view are unchanged
            mark = np.zeros(buf.shape, bool)
            view_of(mark, v.shape, kind)[...] = True
            np.testing.assert_array_equal(T.bits(buf)[~mark], T.bits(before)[~mark])
    # wrong shape: ValueError; wrong dtype: TypeError; read-only: ValueError; out unchanged
    wrong_dt = "float32" if want[0].dtype is not pylucid.float32 else "float64"
    bad_cases = [
        (ValueError, [np.full(w.shape + (1,), 5, T.NP_OF[w.dtype.name]) for w in want]),
        (ValueError, [np.full((w.numel() + 1,), 5, T.NP_OF[w.dtype.name]) for w in want]),
        (TypeError, [np.full(w.shape, 5, T.NP_OF[wrong_dt]) for w in want]),
        (TypeError, [pylucid.tensor(np.full(w.shape, 5, T.NP_OF[wrong_dt])) for w in want]),
    ]
    ro = [np.full(w.shape, 5, T.NP_OF[w.dtype.name]) for w in want]
    for x in ro:
        x.flags.writeable = False
    bad_cases.append((ValueError, ro))
    # a writable zero-stride view (its elements share memory): ValueError
    bad_cases.append((ValueError, [np.lib.stride_tricks.as_strided(
        np.full((1,) * w.ndim, 5, T.NP_OF[w.dtype.name]), shape=w.shape, strides=(0,) * w.ndim, writeable=True)
        for w in want]))
    for exc, outs in bad_cases:
        before = [T.bits(np.asarray(to_numpy(o) if isinstance(o, pylucid.Tensor) else o)).copy() for o in outs]
        with pytest.raises(exc):
            call(*ins, out=tuple(outs) if two else outs[0])
        for o, b in zip(outs, before):
            np.testing.assert_array_equal(T.bits(np.asarray(to_numpy(o) if isinstance(o, pylucid.Tensor) else o)), b)
    if two:  # two results take a tuple of two
        with pytest.raises(TypeError):
            call(*ins, out=np.zeros(want[0].shape, T.NP_OF[dt]))
    # in place: out is an input (same memory and layout)
    if in_place is not None and want[0].dtype.name == dt:
        for as_tensor in (False, True):
            xs = [np.array(x, copy=True) for x in ins]
            if as_tensor:
                xs = [pylucid.tensor(x) for x in xs]
            target = xs[in_place]
            r = call(*xs, out=target)
            assert r is target
            check_out_values([target], want)
        # any other overlap with an input: ValueError, nothing written
        buf = np.zeros((ins[0].shape[0] + 1,) + ins[0].shape[1:], T.NP_OF[dt])
        buf[:-1] = ins[0]
        before = T.bits(buf).copy()
        with pytest.raises(ValueError):
            call(buf[:-1], *ins[1:], out=buf[1:])
        np.testing.assert_array_equal(T.bits(buf), before)
    if dt == "float64":
        # autograd: an input that requires grad, in grad mode: RuntimeError (out
        # unchanged) for a differentiable op; under no_grad() allowed
        tin = [pylucid.tensor(ins[0], requires_grad=True)] + ins[1:]
        o = out_like(want, lambda s, d: np.full(s, 5, d))
        if info.differentiable:
            with pytest.raises(RuntimeError):
                call(*tin, out=o)
            for x in outputs_of(o):
                assert (x == 5).all()
            # an out that requires grad: RuntimeError too
            og = pylucid.zeros(want[0].shape, pylucid.float64).requires_grad_()
            with pytest.raises(RuntimeError):
                call(*ins, out=(og, np.zeros(want[1].shape, np.int64)) if two else og)
            with autograd.no_grad():
                r = call(*tin, out=o)
        else:  # argmin/argmax never record a graph
            r = call(*tin, out=o)
        assert r is o or (two and r[0] is o[0])
        check_out_values(outputs_of(r), want)
        # forward mode: out= records no tangent, so an input with a tangent is
        # refused (RuntimeError, out unchanged) rather than given a wrong one
        o = out_like(want, lambda s, d: np.full(s, 5, d))
        fn = lambda x0: call(x0, *ins[1:], out=o)  # noqa: E731
        if info.differentiable:
            with pytest.raises(RuntimeError, match="forward-mode"):
                autograd.jvp(fn, pylucid.tensor(ins[0]), np.ones(ins[0].shape))
            for x in outputs_of(o):
                assert (x == 5).all()
        else:  # no tangent to lose: allowed (a Tensor out, as jvp's fn returns Tensors)
            ot = pylucid.zeros(want[0].shape, want[0].dtype)
            r, tan = autograd.jvp(lambda x0: call(x0, *ins[1:], out=ot), pylucid.tensor(ins[0]), np.ones(ins[0].shape))
            assert r is ot and not to_numpy(tan).any()
            check_out_values([ot], want)


def test_out_examples():
    """The documented forms: t.clamp_ in place, min over all dims with out."""
    x = np.array([[3.0, -1.0], [np.nan, 0.5]])
    t = pylucid.tensor(x)
    assert t.clamp_(0.0, 1.0) is t
    np.testing.assert_array_equal(to_numpy(t), [[1.0, 0.0], [np.nan, 0.5]])
    o = np.zeros(())
    assert ops.min(np.array([2.0, -3.0]), out=o) is o and o == -3.0
    o = np.zeros((), np.int64)
    assert ops.argmax(x, out=o) is o and o == 2  # the first NaN
    # amin over no dims may write in place (out is the input)
    y = np.array([1.0, -2.0])
    assert ops.amin(y, (), out=y) is y
    np.testing.assert_array_equal(y, [1.0, -2.0])
    # clamp_ whose bounds would broadcast x up: ValueError, t unchanged
    t = pylucid.tensor(np.array([1.0, 2.0]))
    with pytest.raises(ValueError):
        t.clamp_(np.zeros((3, 1)), None)
    np.testing.assert_array_equal(to_numpy(t), [1.0, 2.0])
    leaf = pylucid.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(RuntimeError):
        leaf.clamp_(0.0, 1.5)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0,), (2, 0, 4)])
def test_out_empty_ndarray(shape):
    # NumPy gives empty arrays zero strides (np.zeros((0, 3)).strides is
    # (0, 0)): an empty out has no elements to share, so it is taken, by
    # the C path (tensors a, b) and the Python path alike.
    a, b = np.zeros(shape, np.float32), np.ones(shape, np.float32)
    for x, y in ((a, b), (pylucid.from_numpy(a), pylucid.from_numpy(b))):
        o = np.zeros(shape, np.float32)
        assert ops.minimum(x, y, out=o) is o
        assert ops.clamp(x, 0.0, 1.0, out=o) is o
    if shape[0] == 0 and len(shape) > 1:  # a reduction to an empty result
        o = np.zeros(shape[:-1], np.float32)
        assert ops.amax(a, -1, out=o) is o


# ------------------------------------------------------------------ Tensor methods equal the functions


@pytest.mark.parametrize("dt", T.DTYPE_NAMES)
def test_tensor_methods_equal_the_functions(dt):
    rng = rng_for("methods", dt)
    x = family_data((3, 4), dt, rng)
    o = family_data((4,), dt, rng)
    lo, hi = family_data((4,), dt, rng), family_data((3, 1), dt, rng)
    t = pylucid.tensor(x)

    def same(got, want):
        got, want = outputs_of(got), outputs_of(want)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype is w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(T.bits(to_numpy(g)), T.bits(to_numpy(w)))

    for name in ("minimum", "maximum", "fmin", "fmax"):
        same(getattr(t, name)(o), getattr(ops, name)(x, o))
    same(t.clamp(lo, hi), ops.clamp(x, lo, hi))
    same(t.clamp(min=lo), ops.clamp(x, lo))
    same(t.clamp(max=hi), ops.clamp(x, None, hi))
    same(t.clip(lo, hi), ops.clip(x, lo, hi))
    same(t.amin(), ops.amin(x))
    same(t.amin(1), ops.amin(x, 1))
    same(t.amax((0, 1), keepdim=True), ops.amax(x, (0, 1), True))
    same(t.amax(-1), ops.amax(x, -1))
    same(t.argmin(), ops.argmin(x))
    same(t.argmax(1), ops.argmax(x, 1))
    same(t.argmax(0, keepdim=True), ops.argmax(x, 0, True))
    same(t.min(), ops.amin(x))
    same(t.max(), ops.amax(x))
    r = t.min(1)
    assert isinstance(r, ops.MinMaxResult)
    same(r, ops.min(x, 1))
    same(t.max(0, keepdim=True), ops.max(x, 0, True))
    same(t.sum(1), ops.sum(x, 1))
    if dt in T.FLOAT_NAMES:
        same(t.mean(), ops.mean(x))
    # clamp_ in place: the same tensor, holding clamp's values
    t2 = pylucid.tensor(x)
    assert t2.clamp_(lo, hi) is t2
    same(t2, ops.clamp(x, lo, hi))
    t3 = pylucid.tensor(x)
    assert t3.clamp_(max=hi) is t3
    same(t3, ops.clamp(x, None, hi))
