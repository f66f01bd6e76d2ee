"""NaN bits and exact copies (docs/dtypes.md, docs/interop.md): a NaN
converts to exactly the bits NumPy's float16 and ml_dtypes' bfloat16
conversions give it, from float32 and float64 alike; other values round once,
to nearest even, from the exact value; copy, deepcopy and pickle keep every
bit of every value."""

import copy
import pickle
import subprocess
import sys
import textwrap
import warnings

import ml_dtypes
import numpy as np
import pytest

import pylucid

BF16 = np.dtype(ml_dtypes.bfloat16)
ALL16 = np.arange(1 << 16, dtype=np.uint16)


def _cast(arr: np.ndarray, dtype: str) -> np.ndarray:
    """arr converted by pylucid, as raw bits."""
    out = pylucid.from_numpy(arr).to(dtype)
    return pylucid.tensor(out).numpy().view("u%d" % out.dtype.itemsize)


def _np_cast(arr: np.ndarray, dt: "np.dtype | type") -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "invalid value encountered in cast"
        out = arr.astype(dt)
    return out.view("u%d" % out.itemsize)


def _assert_bits(got: np.ndarray, want: np.ndarray, src: np.ndarray, what: str) -> None:
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, "%s: %d differ, first %s -> %s, want %s" % (
        what, bad.size, hex(int(src.view("u%d" % src.itemsize)[bad[0]])), hex(int(got[bad[0]])), hex(int(want[bad[0]])))


@pytest.mark.parametrize("target", ["float32", "float64", "bfloat16"])
def test_every_float16_pattern_widens_and_comes_back_as_numpy_gives(target: str) -> None:
    h = ALL16.view(np.float16)
    want_dt = BF16 if target == "bfloat16" else np.dtype(target)
    wide = _cast(h, target)
    _assert_bits(wide, _np_cast(h, want_dt), h, "float16 -> " + target)
    # and back: NumPy's own widened values narrowed by pylucid
    src = h.astype(want_dt) if target != "bfloat16" else h.astype(np.float32)
    _assert_bits(_cast(src, "float16"), _np_cast(src, np.float16), src, "%s -> float16" % src.dtype)
    if target != "bfloat16":  # float16 -> float32/float64 -> float16 keeps every bit, NaN payloads too
        _assert_bits(_cast(src, "float16"), ALL16, src, "round trip through " + target)


@pytest.mark.parametrize("target", ["float32", "float64", "float16"])
def test_every_bfloat16_pattern_widens_and_comes_back_as_ml_dtypes_gives(target: str) -> None:
    b = ALL16.view(BF16)
    wide = _cast(b, target)
    _assert_bits(wide, _np_cast(b, np.dtype(target)), b, "bfloat16 -> " + target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "invalid value encountered in cast"
        src = b.astype(np.dtype(target)) if target != "float16" else b.astype(np.float32)
    _assert_bits(_cast(src, "bfloat16"), _np_cast(src, BF16), src, "%s -> bfloat16" % src.dtype)
    nan = (ALL16 & 0x7FFF) > 0x7F80
    if target == "float32":  # exact, so the round trip keeps every non-NaN bit
        _assert_bits(_cast(src, "bfloat16")[~nan], ALL16[~nan], src[~nan], "round trip through float32")


def _float32_patterns() -> np.ndarray:
    rng = np.random.default_rng(4)
    sig = np.concatenate([np.arange(1, 1 << 14, dtype=np.uint32),  # every low payload, the 0x7c01 case
                          np.arange(1, 1 << 23, 1 << 9, dtype=np.uint32),
                          rng.integers(1, 1 << 23, 20000, dtype=np.uint32)])
    nans = np.concatenate([0x7F800000 | sig, 0xFF800000 | sig]).astype(np.uint32)
    boundary = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0x477FEFFF, 0x477FF000, 0x477FE000,
                         0x33000000, 0x33000001, 0x387FC000, 0x38800000, 0x7F7F8000, 0x7F7F7FFF, 1, 0x00400000],
                        dtype=np.uint32)
    rand = rng.integers(0, 1 << 32, 200000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([nans, boundary, boundary | 0x80000000, rand]).view(np.float32)


def test_float32_nan_boundary_and_random_patterns_narrow_as_numpy_and_ml_dtypes() -> None:
    x = _float32_patterns()
    _assert_bits(_cast(x, "float16"), _np_cast(x, np.float16), x, "float32 -> float16")
    _assert_bits(_cast(x, "bfloat16"), _np_cast(x, BF16), x, "float32 -> bfloat16")
    # the two examples
    assert _cast(np.array([0x7F810000], np.uint32).view(np.float32), "bfloat16")[0] == 0x7FC0
    assert _cast(np.array([0x7F800001], np.uint32).view(np.float32), "float16")[0] == 0x7C01
    # pylucid.tensor(..., dtype=) converts the same way
    got = pylucid.tensor(x, dtype="bfloat16").to("float32").numpy().view(np.uint32) >> 16
    _assert_bits(got.astype(np.uint16), _np_cast(x, BF16), x, "tensor(float32, dtype=bfloat16)")


def _bf16_exact(x: np.ndarray) -> np.ndarray:
    """float64 -> bfloat16 rounded once from the exact value (not NaN): through
    float32, except where float32 rounding lands on a bfloat16 tie, which the
    exact value decides (ml_dtypes rounds that tie again, to even)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overflow encountered in cast"
        f = x.astype(np.float32)
    b = f.view(np.uint32)
    hi = (b >> 16).astype(np.uint16)
    tie = ((b & 0xFFFF) == 0x8000) & (f.astype(np.float64) != x)
    up = np.abs(x) > np.abs(f.astype(np.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = _np_cast(f, BF16).copy()
    res[tie] = hi[tie] + up[tie].astype(np.uint16)
    return res


# ml_dtypes rounds float64 to bfloat16 through float32 (twice) before 0.7,
# and once from 0.7 on, as pylucid does (docs/dtypes.md).
_ML_DTYPES_ROUNDS_ONCE = tuple(int(p) for p in ml_dtypes.__version__.split(".")[:2]) >= (0, 7)


def test_float64_patterns_narrow_as_numpy_and_ml_dtypes_rounding_once() -> None:
    rng = np.random.default_rng(5)
    sig = np.concatenate([np.arange(1, 1 << 12, dtype=np.uint64) << np.uint64(30),
                          np.arange(1, 1 << 12, dtype=np.uint64), np.uint64(1) << np.arange(52, dtype=np.uint64),
                          rng.integers(1, 1 << 52, 20000, dtype=np.uint64)])
    nans = np.concatenate([sig | np.uint64(0x7FF << 52), sig | np.uint64(0xFFF << 52)])
    near = np.ldexp(1 + rng.random(200000), rng.integers(-150, 130, 200000)) * rng.choice([-1, 1], 200000)
    # float64 points next to half-format ties: where rounding through float32 goes wrong
    ties = (np.arange(1, 1 << 16, dtype=np.uint64) << np.uint64(36)) | np.uint64(0x3FF0_0000_0000_0000)
    ties = np.concatenate([ties + np.uint64(1), ties - np.uint64(1)]).view(np.float64)
    x = np.concatenate([nans.view(np.float64), near, ties, rng.integers(0, 1 << 63, 100000, dtype=np.uint64).view(np.float64)])
    _assert_bits(_cast(x, "float16"), _np_cast(x, np.float16), x, "float64 -> float16")
    got = _cast(x, "bfloat16")
    isnan = np.isnan(x)
    _assert_bits(got[isnan], _np_cast(x[isnan], BF16), x[isnan], "float64 NaN -> bfloat16")
    _assert_bits(got[~isnan], _bf16_exact(x[~isnan]), x[~isnan], "float64 -> bfloat16")
    peer = _np_cast(x[~isnan], BF16)
    if _ML_DTYPES_ROUNDS_ONCE:
        _assert_bits(got[~isnan], peer, x[~isnan], "float64 -> bfloat16 (ml_dtypes >= 0.7)")
    else:
        assert (got[~isnan] != peer).any()  # older ml_dtypes' double rounding does differ here
    # Python floats, through pylucid.tensor
    one = float(np.array([0x7FF0_0000_0000_0001], np.uint64).view(np.float64)[0])
    assert pylucid.tensor([one], dtype="float16").numpy().view(np.uint16)[0] == 0x7C01


def _payload_values(dt: str) -> np.ndarray:
    """Values of dt with NaN payloads, signed zeros, infinities and extremes, as raw bits."""
    if dt == "bool":
        return np.array([0, 1, 1, 0], dtype=np.uint8)
    if dt in ("float16", "bfloat16"):
        return np.array([0x7C01, 0xFE3F, 0x7DFF, 0x8000, 0x0000, 0x7C00, 0xFC00, 0x0001, 0x7F81, 0xFFC1, 0x7FFF,
                         0x3C00], dtype=np.uint16)
    if dt == "float32":
        return np.array([0x7F800001, 0xFFC00123, 0x7FBFFFFF, 0x80000000, 0, 0x7F800000, 1, 0x3F800000], np.uint32)
    if dt == "float64":
        return np.array([0x7FF0000000000001, 0xFFF8000000000123, 0x7FF7FFFFFFFFFFFF, 1 << 63, 0, 0x7FF << 52, 1],
                        dtype=np.uint64)
    info = np.iinfo(dt)
    return np.array([info.min, info.max, 0, -1 if info.min < 0 else 1], dtype=dt).view("u%d" % np.dtype(dt).itemsize)


def _bits_of(t: pylucid.Tensor) -> np.ndarray:
    if t.dtype is pylucid.bfloat16:  # widening to float32 is a 16-bit shift: exact, NaN included
        return (t.detach().to("float32").numpy().view(np.uint32) >> 16).astype(np.uint16)
    return t.detach().numpy().view("u%d" % t.dtype.itemsize)


@pytest.mark.parametrize("dt", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                                "float32", "float64"])
def test_copy_deepcopy_and_pickle_keep_every_bit(dt: str) -> None:
    bits = _payload_values(dt)
    npd = BF16 if dt == "bfloat16" else np.dtype(dt)
    t = pylucid.tensor(np.ascontiguousarray(bits).view(npd).reshape(1, -1)[:, ::-1])  # non-contiguous source
    want = bits[::-1]
    rg = t.dtype.is_floating_point
    if rg:
        t.requires_grad_(True)
    for c in (copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t)),
              pickle.loads(pickle.dumps(t, protocol=2))):
        assert c.dtype is t.dtype and c.shape == t.shape and c.requires_grad == rg
        np.testing.assert_array_equal(_bits_of(c).ravel(), want)


def test_bfloat16_pickle_and_repr_need_no_ml_dtypes() -> None:
    # pickled here (with ml_dtypes), loaded, pickled again and loaded in a
    # process without it: every bit survives both ways
    src = np.array([0x7F81, 0xFFC1, 0x8000, 0x3F80, 0x3DCD], np.uint16)
    blob = pickle.dumps(pylucid.tensor(src.view(BF16)))
    code = textwrap.dedent("""
        import sys
        sys.modules["ml_dtypes"] = None  # import ml_dtypes raises ImportError
        import pickle, numpy as np, pylucid
        assert pylucid.bfloat16._np is None
        back = pickle.loads(pickle.loads(pickle.dumps(pickle.loads(bytes.fromhex(sys.argv[1])))))
        got = back.to("float32").numpy().view(np.uint32) >> 16
        print(repr(back))
        print(" ".join(hex(v) for v in got))
    """)
    out = subprocess.run([sys.executable, "-c", code, pickle.dumps(blob).hex()], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "tensor([        nan,         nan, -0.        ,  1.        ,  0.10009766],",
        "       dtype=pylucid.bfloat16)",
        "0x7f81 0xffc1 0x8000 0x3f80 0x3dcd",
    ], out.stdout


def test_old_pickles_of_bfloat16_as_float32_values_still_load() -> None:
    from pylucid.tensor import _rebuild

    t = _rebuild(np.array([1.5, -0.0], np.float32), "bfloat16", False)
    assert t.dtype is pylucid.bfloat16 and _bits_of(t).tolist() == [0x3FC0, 0x8000]
