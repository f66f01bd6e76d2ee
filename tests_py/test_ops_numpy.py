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
"""

from __future__ import annotations

import itertools
import json
import zlib

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
    """minimum/maximum equal NumPy bit for bit except docs/semantics.md's signed-zero
    tie: there pylucid returns a's bits (NumPy may return b's); the values
    still compare equal."""
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
            if info.name in ("minimum", "maximum"):
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
    if info.name in ("minimum", "maximum"):
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


@pytest.mark.parametrize("pair", T.BROADCAST_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize(
    "info",
    T.BINARY,
    ids=[o.name for o in T.BINARY],
)
def test_binary_gradgradcheck(info, pair):
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
    rng = rng_for("gg", info.name, pair)
    a, b, _ = binary_case(info, pair, ("gg", info.name, pair))
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    analytical = second_order_check(info.op, [a, b], out_shape, rng)
    if info.name in ("minimum", "maximum", "add", "sub"):
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
    if info.name in ("minimum", "maximum"):
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
    assert public == set(T.OPS_BY_NAME)
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
            kind = T.OPS_BY_NAME[s["name"]].kind
            assert s["kind"] == ("reduction" if kind == "reduction" else "elementwise")
            assert s["arity"] == (2 if kind == "binary" else 1)
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
