"""Regenerates nan_bits.bin: what NumPy (float16) and ml_dtypes (bfloat16)
give for half-precision NaN conversions, for TestHalfNaNBitsMatchNumPyAndMLDtypes.

    python3 tests_go/testdata/nan_bits_gen.py   # NumPy 2.x, ml_dtypes 0.5+

Layout (little-endian), four sections, each a uint32 count then records:
  1. every float16 NaN h:   h u16, float32 u32, float64 u64, bfloat16 u16
  2. every bfloat16 NaN h:  h u16, float32 u32, float64 u64, float16 u16
  3. float32 patterns x:    x u32, float16 u16, bfloat16 u16
  4. float64 patterns x:    x u64, float16 u16, bfloat16 u16 (ml_dtypes: through float32)
Sections 3 and 4: every NaN boundary pattern, then seeded random patterns
(NaNs, values near the half formats' ranges and any bits).
"""

import pathlib
import struct
import warnings

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
OUT = pathlib.Path(__file__).with_name("nan_bits.bin")


def bits(a: np.ndarray, ut: type) -> np.ndarray:
    return a.view(ut)


def main() -> None:
    warnings.simplefilter("ignore")  # "invalid value encountered in cast"
    rng = np.random.default_rng(20240610)
    out = bytearray()

    h = np.arange(1 << 16, dtype=np.uint16)
    f16 = h[(h & 0x7FFF) > 0x7C00]
    v = f16.view(np.float16)
    out += struct.pack("<I", len(f16))
    for row in zip(f16, bits(v.astype(np.float32), np.uint32), bits(v.astype(np.float64), np.uint64),
                   bits(v.astype(BF16), np.uint16)):
        out += struct.pack("<HIQH", *map(int, row))

    bf = h[(h & 0x7FFF) > 0x7F80]
    v = bf.view(BF16)
    out += struct.pack("<I", len(bf))
    for row in zip(bf, bits(v.astype(np.float32), np.uint32), bits(v.astype(np.float64), np.uint64),
                   bits(v.astype(np.float16), np.uint16)):
        out += struct.pack("<HIQH", *map(int, row))

    f32 = []
    for sign in (0, 1 << 31):
        for m in (1, 2, 0x1000, 0x1FFF, 0x2000, 0x2001, 0x3FFF, 0x10000, 0x3FFFFF, 0x400000, 0x400001,
                  0x401FFF, 0x402000, 0x7FE000, 0x7FFFFF):
            f32.append(sign | 0x7F800000 | m)
        for x in (0, 0x7F800000, 0x7F7FFFFF, 0x477FEFFF, 0x477FF000, 0x38800000, 0x33800000, 0x33000000,
                  0x00000001, 0x7F7F8000, 0x7F7F7FFF):
            f32.append(sign | x)
    f32 += list(rng.integers(0, 1 << 32, 3000, dtype=np.uint64))
    f32 += list((rng.integers(0, 1 << 23, 1000, dtype=np.uint64) | 0x7F800000
                 | (rng.integers(0, 2, 1000, dtype=np.uint64) << 31)))
    x32 = np.array(f32, dtype=np.uint32)
    v = x32.view(np.float32)
    out += struct.pack("<I", len(x32))
    for row in zip(x32, bits(v.astype(np.float16), np.uint16), bits(v.astype(BF16), np.uint16)):
        out += struct.pack("<IHH", *map(int, row))

    f64 = []
    for sign in (0, 1 << 63):
        for m in (1, 2, 1 << 41, (1 << 42) - 1, 1 << 42, (1 << 42) + 1, 1 << 51, (1 << 51) + 1,
                  (1 << 51) + (1 << 42), (1 << 52) - 1, 1 << 29, 1 << 45):
            f64.append(sign | (0x7FF << 52) | m)
        for x in (0, 0x7FF << 52, 0x40EFFE0000000000, 0x40EFFDFFFFFFFFFF, 0x3E70000000000000, 1):
            f64.append(sign | x)
    f64 += list(rng.integers(0, 1 << 63, 2000, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, 2000, dtype=np.uint64))
    f64 += list((rng.integers(0, 1 << 52, 1000, dtype=np.uint64) | np.uint64(0x7FF << 52)
                 | (rng.integers(0, 2, 1000, dtype=np.uint64) << np.uint64(63))))
    # values near the half formats' ranges
    e = rng.integers(-40, 20, 1000)
    f64 += list(np.ldexp(1 + rng.random(1000), e).view(np.uint64))
    x64 = np.array(f64, dtype=np.uint64)
    v = x64.view(np.float64)
    out += struct.pack("<I", len(x64))
    for row in zip(x64, bits(v.astype(np.float16), np.uint16), bits(v.astype(BF16), np.uint16)):
        out += struct.pack("<QHH", *map(int, row))
    OUT.write_bytes(bytes(out))
    print("wrote %s (%d bytes) with NumPy %s, ml_dtypes %s" % (OUT, len(out), np.__version__, ml_dtypes.__version__))


if __name__ == "__main__":
    main()
