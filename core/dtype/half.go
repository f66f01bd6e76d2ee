package dtype

import "math"

// Float16 and bfloat16 values are stored as their raw uint16 bit patterns.
//
// Finite values and infinities convert exactly when widening and round once,
// to nearest even, from the exact value when narrowing (float64 too: no
// double rounding through float32).
//
// NaN bits follow NumPy (float16) and ml_dtypes (bfloat16) exactly, as
// docs/dtypes.md states:
//   - float32/float64 → float16: the sign, an all-ones exponent and the top 10
//     payload bits, nothing forced quiet; a payload whose top bits are all
//     zero becomes 1, so a NaN stays a NaN (NumPy's npy_floatbits_to_halfbits
//     and npy_doublebits_to_halfbits).
//   - float16 → float32/float64: the payload moves to the top of the wider
//     mantissa, nothing else changes (npy_halfbits_to_floatbits/_doublebits).
//   - anything → bfloat16: the quiet NaN 0x7fc0 with the sign (ml_dtypes'
//     float_to_bfloat16_rtne; from float64 it goes through float32).
//   - bfloat16 → float32: the bits shifted up by 16 (exact); → float64: as
//     float32 → float64 in hardware, payload kept and the quiet bit set.
//   - bfloat16 → float16: the quiet NaN 0x7e00 with the sign (ml_dtypes casts
//     through float32 with Eigen's half conversion).

const (
	f16Exp, f16Mant   = 5, 10
	bf16Exp, bf16Mant = 8, 7

	bf16QuietNaN = 0x7fc0
	f16QuietNaN  = 0x7e00
)

// roundFloat64 rounds f (not NaN) to the binary format with expBits exponent
// and mantBits mantissa bits (nearest, ties to even), returning its bit
// pattern. Rounding straight from float64 avoids double rounding through
// float32.
func roundFloat64(f float64, expBits, mantBits uint) uint16 {
	b := math.Float64bits(f)
	sign := uint64(b>>63) << (expBits + mantBits)
	exp := int((b >> 52) & 0x7ff)
	mant := b & (1<<52 - 1)
	maxExp := uint64(1)<<expBits - 1
	if exp == 0x7ff { // ±Inf (callers handle NaN)
		return uint16(sign | maxExp<<mantBits)
	}
	if exp == 0 {
		// float64 subnormals are far below the smallest target subnormal.
		return uint16(sign)
	}
	bias := 1<<(expBits-1) - 1
	te := exp - 1023 + bias // target biased exponent
	if te >= int(maxExp) {
		return uint16(sign | maxExp<<mantBits)
	}
	sig := uint64(1)<<52 | mant
	var v uint64
	var shift uint
	if te > 0 {
		shift = 52 - mantBits
		v = uint64(te)<<mantBits | (mant >> shift)
	} else {
		shift = uint(52-int(mantBits)) + uint(1-te)
		if shift > 60 {
			return uint16(sign)
		}
		v = sig >> shift
	}
	rem := sig & (1<<shift - 1)
	half := uint64(1) << (shift - 1)
	if rem > half || (rem == half && v&1 == 1) {
		v++ // a carry into the exponent field is the right answer, up to ±Inf
	}
	return uint16(sign | v)
}

// widen converts a finite or infinite bit pattern of the (expBits, mantBits)
// format to float64 exactly (callers handle NaN).
func widen(h uint16, expBits, mantBits uint) float64 {
	sign := 1.0
	if h>>(expBits+mantBits) != 0 {
		sign = -1
	}
	exp := int(h>>mantBits) & (1<<expBits - 1)
	mant := uint64(h) & (1<<mantBits - 1)
	bias := 1<<(expBits-1) - 1
	switch {
	case exp == 1<<expBits-1:
		return math.Inf(int(sign))
	case exp == 0:
		return sign * math.Ldexp(float64(mant), 1-bias-int(mantBits))
	}
	return sign * math.Ldexp(float64(mant|1<<mantBits), exp-bias-int(mantBits))
}

func f16IsNaN(h uint16) bool  { return h&0x7fff > 0x7c00 }
func bf16IsNaN(h uint16) bool { return h&0x7fff > 0x7f80 }

// f16NaN is NumPy's float16 NaN for a sign bit and the payload's top 10 bits.
func f16NaN(sign, top uint64) uint16 {
	if top == 0 {
		top = 1 // keep it a NaN, not an infinity
	}
	return uint16(sign<<15 | 0x7c00 | top)
}

// Float64ToFloat16 rounds f to float16 (nearest, ties to even; NaN as NumPy).
func Float64ToFloat16(f float64) uint16 {
	if f != f {
		b := math.Float64bits(f)
		return f16NaN(b>>63, (b&(1<<52-1))>>42)
	}
	return roundFloat64(f, f16Exp, f16Mant)
}

// Float32ToFloat16 rounds f to float16 (nearest, ties to even; NaN as NumPy).
// A NaN is read from its bits: float64(f) would set a signaling NaN's quiet bit.
func Float32ToFloat16(f float32) uint16 {
	if f != f {
		b := math.Float32bits(f)
		return f16NaN(uint64(b>>31), uint64(b&(1<<23-1))>>13)
	}
	return roundFloat64(float64(f), f16Exp, f16Mant)
}

// Float16ToFloat64 widens a float16 exactly (a NaN keeps its sign and payload, as NumPy).
func Float16ToFloat64(h uint16) float64 {
	if f16IsNaN(h) {
		return math.Float64frombits(uint64(h>>15)<<63 | 0x7ff<<52 | uint64(h&0x3ff)<<42)
	}
	return widen(h, f16Exp, f16Mant)
}

// Float16ToFloat32 widens a float16 exactly (a NaN keeps its sign and payload,
// as NumPy), by table.
func Float16ToFloat32(h uint16) float32 { return f16Table[h] }

// Float64ToBFloat16 rounds f to bfloat16 (nearest, ties to even; a NaN
// becomes ±0x7fc0, as ml_dtypes).
func Float64ToBFloat16(f float64) uint16 {
	if f != f {
		return uint16(math.Float64bits(f)>>63)<<15 | bf16QuietNaN
	}
	return roundFloat64(f, bf16Exp, bf16Mant)
}

// Float32ToBFloat16 rounds f to bfloat16 (nearest, ties to even; a NaN
// becomes ±0x7fc0, as ml_dtypes).
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16)&0x8000 | bf16QuietNaN
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// BFloat16ToFloat32 widens a bfloat16 exactly: its bits are float32's top
// half (a NaN keeps every bit, as ml_dtypes).
func BFloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// BFloat16ToFloat64 widens a bfloat16 exactly; a NaN keeps its sign and
// payload and comes back quiet, as ml_dtypes gives it (through float32).
func BFloat16ToFloat64(h uint16) float64 {
	if bf16IsNaN(h) {
		return math.Float64frombits(uint64(h>>15)<<63 | 0x7ff8<<48 | uint64(h&0x7f)<<45)
	}
	return float64(BFloat16ToFloat32(h))
}

// Float16ToBFloat16 rounds a float16 to bfloat16 (once; a NaN becomes ±0x7fc0).
func Float16ToBFloat16(h uint16) uint16 {
	if f16IsNaN(h) {
		return h&0x8000 | bf16QuietNaN
	}
	return Float64ToBFloat16(widen(h, f16Exp, f16Mant))
}

// BFloat16ToFloat16 rounds a bfloat16 to float16 (once; a NaN becomes
// ±0x7e00, as ml_dtypes).
func BFloat16ToFloat16(h uint16) uint16 {
	if bf16IsNaN(h) {
		return h&0x8000 | f16QuietNaN
	}
	return roundFloat64(float64(BFloat16ToFloat32(h)), f16Exp, f16Mant)
}

var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		h := uint16(i)
		if f16IsNaN(h) { // by bits: float32(float64 NaN) would set the quiet bit
			t[i] = math.Float32frombits(uint32(h>>15)<<31 | 0xff<<23 | uint32(h&0x3ff)<<13)
		} else {
			t[i] = float32(widen(h, f16Exp, f16Mant))
		}
	}
	return &t
}()

// Float16Table returns the shared float16 → float32 conversion table
// (read-only; kernels index it by bit pattern).
func Float16Table() *[1 << 16]float32 { return f16Table }
