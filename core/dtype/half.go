package dtype

import "math"

// Float16 and bfloat16 values are stored as their raw uint16 bit patterns.

const (
	f16Exp, f16Mant   = 5, 10
	bf16Exp, bf16Mant = 8, 7
)

// roundFloat64 rounds f to the binary format with expBits exponent and
// mantBits mantissa bits (nearest, ties to even), returning its bit pattern.
// Rounding straight from float64 avoids double rounding through float32.
func roundFloat64(f float64, expBits, mantBits uint) uint16 {
	b := math.Float64bits(f)
	sign := uint64(b>>63) << (expBits + mantBits)
	exp := int((b >> 52) & 0x7ff)
	mant := b & (1<<52 - 1)
	maxExp := uint64(1)<<expBits - 1
	if exp == 0x7ff {
		if mant == 0 {
			return uint16(sign | maxExp<<mantBits)
		}
		// NaN: keep the top payload bits and force the quiet bit.
		return uint16(sign | maxExp<<mantBits | 1<<(mantBits-1) | mant>>(52-mantBits))
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

// widen converts a bit pattern of the (expBits, mantBits) format to float64 exactly.
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
		if mant == 0 {
			return math.Inf(int(sign))
		}
		// Keep the sign and payload: place the mantissa at the top of float64's.
		bits := uint64(0x7ff)<<52 | mant<<(52-mantBits) | 1<<51
		if sign < 0 {
			bits |= 1 << 63
		}
		return math.Float64frombits(bits)
	case exp == 0:
		return sign * math.Ldexp(float64(mant), 1-bias-int(mantBits))
	}
	return sign * math.Ldexp(float64(mant|1<<mantBits), exp-bias-int(mantBits))
}

// Float64ToFloat16 rounds f to float16 (nearest, ties to even).
func Float64ToFloat16(f float64) uint16 { return roundFloat64(f, f16Exp, f16Mant) }

// Float32ToFloat16 rounds f to float16 (nearest, ties to even).
func Float32ToFloat16(f float32) uint16 { return roundFloat64(float64(f), f16Exp, f16Mant) }

// Float16ToFloat64 widens a float16 exactly.
func Float16ToFloat64(h uint16) float64 { return widen(h, f16Exp, f16Mant) }

// Float16ToFloat32 widens a float16 exactly, by table.
func Float16ToFloat32(h uint16) float32 { return f16Table[h] }

// Float64ToBFloat16 rounds f to bfloat16 (nearest, ties to even).
func Float64ToBFloat16(f float64) uint16 { return roundFloat64(f, bf16Exp, bf16Mant) }

// Float32ToBFloat16 rounds f to bfloat16 (nearest, ties to even).
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep sign and top payload, force quiet
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// BFloat16ToFloat32 widens a bfloat16 exactly (a NaN comes back quiet, as
// through float64, so every backend's widening gives the same bits).
func BFloat16ToFloat32(h uint16) float32 {
	if h&0x7fff > 0x7f80 {
		h |= 0x40
	}
	return math.Float32frombits(uint32(h) << 16)
}

// BFloat16ToFloat64 widens a bfloat16 exactly.
func BFloat16ToFloat64(h uint16) float64 { return float64(BFloat16ToFloat32(h)) }

var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = float32(widen(uint16(i), f16Exp, f16Mant))
	}
	return &t
}()

// Float16Table returns the shared float16 → float32 conversion table
// (read-only; kernels index it by bit pattern).
func Float16Table() *[1 << 16]float32 { return f16Table }
