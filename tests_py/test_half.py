"""float16 and bfloat16 at the NumPy boundary: conversions are bit-exact
against NumPy's float16 and ml_dtypes.bfloat16 over all 65,536 bit patterns
(NaN payloads may differ; NaN stays NaN), narrowing rounds once to nearest,
ties to even, and bfloat16 arrays cross the boundary with or without
ml_dtypes installed."""

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pylucid

ml_dtypes = pytest.importorskip("ml_dtypes")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy warns when it casts NaN/overflows
BF16 = np.dtype(ml_dtypes.bfloat16)

ALL_BITS = np.arange(65536, dtype=np.uint32).astype(np.uint16)
HALVES = {
    "float16": (pylucid.float16, np.dtype(np.float16)),
    "bfloat16": (pylucid.bfloat16, BF16),
}
# (significant bits, exponent of the smallest normal as frexp gives it, overflow threshold)
FORMATS = {"float16": (11, -13, 2.0**16), "bfloat16": (8, -125, 2.0**128)}


def assert_bits_equal(got, want):
    """Bit for bit, except that any NaN matches any NaN."""
    assert got.dtype == want.dtype and got.shape == want.shape
    gn = np.isnan(got.astype(np.float64))
    wn = np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(gn, wn)
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    gb, wb = got.view(u)[~gn], want.view(u)[~wn]
    bad = np.flatnonzero(gb != wb)
    assert bad.size == 0, "%d differences, first: got %#x want %#x (value %r)" % (
        bad.size, gb[bad[0]], wb[bad[0]], want[~wn][bad[0]])


def round_reference(x, name):
    """Correct rounding of float64 values to the 16-bit format, ties to even,
    by exact float arithmetic (an oracle independent of NumPy/ml_dtypes)."""
    bits, emin, overflow = FORMATS[name]
    out = np.empty(x.shape, np.float64)
    for i, v in enumerate(x.tolist()):
        if math.isnan(v) or math.isinf(v) or v == 0:
            out[i] = v
            continue
        _, e = math.frexp(v)
        q = math.ldexp(1.0, max(e, emin) - bits)  # the quantum at v's binade
        r = round(v / q) * q  # v / q is exact; round() is half-to-even
        out[i] = math.copysign(math.inf, v) if abs(r) >= overflow else math.copysign(r, v)
    return out.astype(HALVES[name][1])  # exact: r is representable


@pytest.mark.parametrize("name", HALVES)
def test_widening_all_bit_patterns(name):
    pdt, npdt = HALVES[name]
    h = ALL_BITS.view(npdt)
    t = pylucid.from_numpy(h)
    assert t.dtype is pdt
    assert_bits_equal(t.numpy(), h)  # the boundary itself: same bits, shared
    for wide in (np.float32, np.float64):
        got = t.to(wide).numpy()
        assert_bits_equal(got, h.astype(wide))


@pytest.mark.parametrize("name", HALVES)
def test_round_trip_all_bit_patterns(name):
    pdt, npdt = HALVES[name]
    h = ALL_BITS.view(npdt)
    for wide in (np.float32, np.float64):
        back = pylucid.from_numpy(h.astype(wide)).to(pdt).numpy()
        assert_bits_equal(back, h)
        nan = np.isnan(h.astype(np.float32))
        assert np.isnan(back[nan].astype(np.float32)).all()  # NaN stays NaN
        # the sign of NaN is kept too
        np.testing.assert_array_equal(np.signbit(back[nan].astype(np.float32)), np.signbit(h[nan].astype(np.float32)))
    # pylucid.tensor(..., dtype=...) rounds the same way
    assert_bits_equal(pylucid.tensor(h.astype(np.float64), dtype=pdt).numpy(), h)


def test_float16_bfloat16_cross_conversion():
    h = ALL_BITS.view(np.float16)
    assert_bits_equal(pylucid.from_numpy(h).to(pylucid.bfloat16).numpy(), h.astype(BF16))
    b = ALL_BITS.view(BF16)
    assert_bits_equal(pylucid.from_numpy(b).to(pylucid.float16).numpy(), b.astype(np.float16))


def _tricky_values(name):
    """Every midpoint between neighbouring finite values, the midpoints moved
    by a hair either way, and the overflow boundary."""
    npdt = HALVES[name][1]
    v = np.unique(ALL_BITS.view(npdt).astype(np.float64))
    v = v[np.isfinite(v)]
    mid = (v[:-1] + v[1:]) / 2  # exact in float64
    hair = np.abs(mid) * 2.0**-30 + 2.0**-1074
    big = FORMATS[name][2]
    edge = np.array([big, -big, big * (1 - 2.0**-(FORMATS[name][0] + 1)), 1e300, -1e-300, 5e-324])
    return np.concatenate([mid, mid + hair, mid - hair, edge])


@pytest.mark.parametrize("name", HALVES)
def test_narrowing_from_float64_rounds_once(name):
    pdt, npdt = HALVES[name]
    x = _tricky_values(name)
    want = round_reference(x, name)
    assert_bits_equal(pylucid.from_numpy(x).to(pdt).numpy(), want)
    if name == "float16":  # NumPy converts float64 -> float16 directly, correctly rounded
        assert_bits_equal(x.astype(np.float16), want)


@pytest.mark.parametrize("name", HALVES)
def test_narrowing_from_float32(name):
    pdt, npdt = HALVES[name]
    x = _tricky_values(name).astype(np.float32)  # midpoints are exact in float32 too
    x = np.concatenate([x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))])
    assert_bits_equal(pylucid.from_numpy(x).to(pdt).numpy(), x.astype(npdt))


def test_bfloat16_arrays_cross_the_boundary():
    a = np.array([[1.5, -2.25], [3.0, 65280.0]], dtype=BF16)[:, ::-1]
    t = pylucid.from_numpy(a)
    assert t.dtype is pylucid.bfloat16
    out = t.numpy()
    assert out.dtype == BF16
    assert out.__array_interface__["data"][0] == a.__array_interface__["data"][0]  # shared, no copy
    assert_bits_equal(out, a)
    assert_bits_equal(np.asarray(t), a)
    # mixed with float32 by the promotion rules
    y = pylucid.ops.minimum(t, np.float32(2.0))
    assert y.dtype is pylucid.float32
    np.testing.assert_array_equal(y.numpy(), np.minimum(a.astype(np.float32), 2.0))
    # tensor(dtype=bfloat16) from Python floats, NumPy arrays and ml_dtypes arrays
    assert pylucid.tensor([1.0, 2.5], dtype=pylucid.bfloat16).numpy().dtype == BF16
    assert_bits_equal(pylucid.tensor(a).numpy(), a)
    assert pylucid.tensor(a, dtype=pylucid.float32).dtype is pylucid.float32
    # Python floats with a dtype convert straight to it, rounding once
    assert pylucid.tensor([0.1], dtype=pylucid.float64).item() == 0.1
    x = 1 + 2.0**-8 + 2.0**-40  # above the midpoint of 1 and 1 + 2**-7; float32 would make it a tie
    assert pylucid.tensor([x], dtype=pylucid.bfloat16).numpy().view(np.uint16)[0] == 0x3F81
    assert pylucid.tensor([x]).dtype is pylucid.float32  # the default float without dtype


def test_without_ml_dtypes():
    """In a process where ml_dtypes cannot be imported: bfloat16 tensors still
    work (docs/dtypes.md: only a bfloat16 NumPy array needs it), numpy()
    raises a TypeError that names ml_dtypes. tolist(), comparisons,
    t[i] = v, fill_ and zero_ raised that TypeError too before."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["ml_dtypes"] = None  # import ml_dtypes now raises ImportError
        import numpy as np, pylucid
        bf = pylucid.bfloat16
        t = pylucid.tensor([1.0, 2.5, 1e10], dtype=bf)
        assert t.dtype is pylucid.bfloat16
        f = t.to(pylucid.float32).numpy()
        assert f.tolist() == [1.0, 2.5, 9999220736.0], f.tolist()
        assert pylucid.ops.maximum(t, 2.0).dtype is pylucid.bfloat16
        assert t.tolist() == [1.0, 2.5, 9999220736.0] and t[1].tolist() == 2.5
        assert (t < 2).tolist() == [True, False, False] and (t == t).tolist() == [True] * 3
        assert (t == 2.5).tolist() == [False, True, False] and (t != 1).tolist() == [False, True, True]
        assert (t >= pylucid.tensor([1.0, 3.0, 0.0])).tolist() == [True, False, True]
        assert (t == 2.501).tolist() == [False, True, False]  # the float rounded to bfloat16 first (NumPy's weak rule)
        assert t[t > 2].tolist() == [2.5, 9999220736.0]
        t[0] = 1 + 2.0**-8 + 2.0**-40  # rounded once: up, not to the float32 tie
        assert t.tolist()[0] == 1.0078125, t.tolist()
        t[1:] = pylucid.tensor([[3.0, 4.0]])
        assert t.tolist() == [1.0078125, 3.0, 4.0]
        t[[2, 0]] = pylucid.tensor([5.0, 6.0], dtype=bf)
        assert t.tolist() == [6.0, 3.0, 5.0]
        assert t.fill_(-0.5).tolist() == [-0.5] * 3 and t.zero_().tolist() == [0.0] * 3
        g = pylucid.tensor([1.0, 2.0])
        g[:] = pylucid.tensor([7.0, 8.0], dtype=bf)  # a bfloat16 value into float32
        assert g.tolist() == [7.0, 8.0]
        for fn in (t.numpy, lambda: np.asarray(t)):
            try:
                fn()
            except TypeError as e:
                assert "ml_dtypes" in str(e), e
            else:
                raise AssertionError("numpy() of a bfloat16 tensor must raise")
        print("ok")
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
