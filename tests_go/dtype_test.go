package tests_go

// Black-box tests of core/dtype: the promotion table of docs/dtypes.md and the
// float16/bfloat16 conversions, checked against an independent reference
// written here (a decoder from the IEEE formulas and a nearest-value search
// over all 65,536 bit patterns, with exact big.Float arithmetic).

import (
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// ---------------------------------------------------------------- promotion

func TestDtypePromoteTable(t *testing.T) {
	D := struct {
		b, u8, i8, i16, i32, i64, f16, bf16, f32, f64 dtype.Dtype
	}{dtype.Bool, dtype.Uint8, dtype.Int8, dtype.Int16, dtype.Int32, dtype.Int64,
		dtype.Float16, dtype.BFloat16, dtype.Float32, dtype.Float64}
	cases := []struct{ a, b, want dtype.Dtype }{
		// same dtype
		{D.b, D.b, D.b}, {D.i32, D.i32, D.i32}, {D.f16, D.f16, D.f16}, {D.bf16, D.bf16, D.bf16},
		// bool < int < float
		{D.b, D.u8, D.u8}, {D.b, D.i8, D.i8}, {D.b, D.i32, D.i32}, {D.b, D.i64, D.i64},
		{D.b, D.f16, D.f16}, {D.b, D.bf16, D.bf16}, {D.b, D.f32, D.f32}, {D.b, D.f64, D.f64},
		// integers: wider wins; uint8 with int8 needs int16
		{D.u8, D.i8, D.i16}, {D.u8, D.i16, D.i16}, {D.u8, D.i32, D.i32}, {D.u8, D.i64, D.i64},
		{D.i8, D.i16, D.i16}, {D.i8, D.i32, D.i32}, {D.i16, D.i64, D.i64}, {D.i32, D.i64, D.i64},
		// an integer with a float gives that float, however wide the integer
		{D.i64, D.f16, D.f16}, {D.i64, D.bf16, D.bf16}, {D.i32, D.f16, D.f16}, {D.u8, D.bf16, D.bf16},
		{D.i64, D.f32, D.f32}, {D.i8, D.f64, D.f64},
		// floats: wider wins, float16 with bfloat16 gives float32
		{D.f16, D.bf16, D.f32}, {D.f16, D.f32, D.f32}, {D.bf16, D.f32, D.f32},
		{D.f16, D.f64, D.f64}, {D.bf16, D.f64, D.f64}, {D.f32, D.f64, D.f64},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, dtype.Promote(c.a, c.b), "Promote(%v, %v)", c.a, c.b)
		assert.Equal(t, c.want, dtype.Promote(c.b, c.a), "Promote(%v, %v)", c.b, c.a)
	}
}

// dtPromoteModel is an independent statement of docs/dtypes.md: category first,
// then width; the two 16-bit floats meet in float32, uint8 and int8 in int16.
func dtPromoteModel(a, b dtype.Dtype) dtype.Dtype {
	cat := func(d dtype.Dtype) int {
		switch d {
		case dtype.Bool:
			return 0
		case dtype.Float16, dtype.BFloat16, dtype.Float32, dtype.Float64:
			return 2
		}
		return 1
	}
	width := map[dtype.Dtype]int{dtype.Bool: 1, dtype.Uint8: 8, dtype.Int8: 8, dtype.Int16: 16,
		dtype.Int32: 32, dtype.Int64: 64, dtype.Float16: 16, dtype.BFloat16: 16, dtype.Float32: 32, dtype.Float64: 64}
	if a == b {
		return a
	}
	if cat(a) != cat(b) {
		if cat(a) > cat(b) {
			return a
		}
		return b
	}
	if width[a] == width[b] { // the two 16-bit floats, or uint8/int8
		if cat(a) == 2 {
			return dtype.Float32
		}
		return dtype.Int16
	}
	if width[a] > width[b] {
		return a
	}
	return b
}

func TestDtypePromoteMatrix(t *testing.T) {
	all := dtype.All()
	require.Len(t, all, 10)
	for _, a := range all {
		for _, b := range all {
			got := dtype.Promote(a, b)
			assert.Equal(t, dtPromoteModel(a, b), got, "Promote(%v, %v)", a, b)
			assert.Equal(t, dtype.Promote(b, a), got, "Promote is not symmetric for %v, %v", a, b)
			// the result can hold both: never a lower category than either input
			assert.GreaterOrEqual(t, got.Category(), a.Category())
			assert.GreaterOrEqual(t, got.Category(), b.Category())
		}
	}
	// associativity holds for these rules (the result is a least upper bound)
	for _, a := range all {
		for _, b := range all {
			for _, c := range all {
				assert.Equal(t, dtype.Promote(dtype.Promote(a, b), c), dtype.Promote(a, dtype.Promote(b, c)),
					"Promote not associative for %v, %v, %v", a, b, c)
			}
		}
	}
}

func TestDtypePromoteScalar(t *testing.T) {
	cases := []struct {
		t    dtype.Dtype
		c    dtype.Category
		want dtype.Dtype
	}{
		{dtype.Float16, dtype.FloatCategory, dtype.Float16}, // minimum(t_f16, 2.0) stays float16
		{dtype.BFloat16, dtype.FloatCategory, dtype.BFloat16},
		{dtype.Float64, dtype.FloatCategory, dtype.Float64},
		{dtype.Int32, dtype.FloatCategory, dtype.Float32}, // minimum(t_i32, 2.5) -> default float
		{dtype.Uint8, dtype.FloatCategory, dtype.Float32},
		{dtype.Bool, dtype.FloatCategory, dtype.Float32},
		{dtype.Int32, dtype.IntCategory, dtype.Int32}, // a weak int never widens an int tensor
		{dtype.Uint8, dtype.IntCategory, dtype.Uint8},
		{dtype.Int8, dtype.IntCategory, dtype.Int8},
		{dtype.Bool, dtype.IntCategory, dtype.Int64},
		{dtype.Float16, dtype.IntCategory, dtype.Float16},
		{dtype.Float16, dtype.BoolCategory, dtype.Float16},
		{dtype.Int16, dtype.BoolCategory, dtype.Int16},
		{dtype.Bool, dtype.BoolCategory, dtype.Bool},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, dtype.PromoteScalar(c.t, c.c), "PromoteScalar(%v, %v)", c.t, c.c)
	}
	assert.Equal(t, dtype.Float32, dtype.Default)
	assert.Equal(t, dtype.Float32, dtype.ScalarDtype(dtype.FloatCategory))
	assert.Equal(t, dtype.Int64, dtype.ScalarDtype(dtype.IntCategory))
	assert.Equal(t, dtype.Bool, dtype.ScalarDtype(dtype.BoolCategory))
}

// The weak-scalar rule seen through an op (docs/dtypes.md examples).
func TestDtypeWeakScalarThroughOps(t *testing.T) {
	h, err := tensor.FromFloat64s(dtype.Float16, []int{3}, []float64{1, 3, -1})
	require.NoError(t, err)
	two, err := tensor.WrappedScalar(dtype.Float64, 2.0)
	require.NoError(t, err)
	y, err := ops.Minimum(nil, h, two)
	require.NoError(t, err)
	assert.Equal(t, dtype.Float16, y.Dtype())
	assert.Equal(t, []float64{1, 2, -1}, y.Float64s())

	// the weak scalar on the left behaves the same
	y, err = ops.Maximum(nil, two, h)
	require.NoError(t, err)
	assert.Equal(t, dtype.Float16, y.Dtype())
	assert.Equal(t, []float64{2, 3, 2}, y.Float64s())

	i, err := tensor.FromInt64s(dtype.Int32, []int{3}, []int64{1, 3, -7})
	require.NoError(t, err)
	half, err := tensor.WrappedScalar(dtype.Float64, 2.5)
	require.NoError(t, err)
	y, err = ops.Minimum(nil, i, half)
	require.NoError(t, err)
	assert.Equal(t, dtype.Float32, y.Dtype())
	assert.Equal(t, []float64{1, 2.5, -7}, y.Float64s())

	// a non-wrapped float64 0-d tensor is not weak: it widens
	s64, err := tensor.Scalar(dtype.Float64, 2.0)
	require.NoError(t, err)
	y, err = ops.Minimum(nil, h, s64)
	require.NoError(t, err)
	assert.Equal(t, dtype.Float64, y.Dtype())
}

func TestDtypeNamesSizesParse(t *testing.T) {
	want := map[dtype.Dtype]struct {
		name string
		size int
	}{
		dtype.Bool: {"bool", 1}, dtype.Uint8: {"uint8", 1}, dtype.Int8: {"int8", 1}, dtype.Int16: {"int16", 2},
		dtype.Int32: {"int32", 4}, dtype.Int64: {"int64", 8}, dtype.Float16: {"float16", 2},
		dtype.BFloat16: {"bfloat16", 2}, dtype.Float32: {"float32", 4}, dtype.Float64: {"float64", 8},
	}
	for d, w := range want {
		assert.Equal(t, w.name, d.String())
		assert.Equal(t, w.size, d.Size())
		assert.True(t, d.Valid())
		p, err := dtype.Parse(w.name)
		require.NoError(t, err)
		assert.Equal(t, d, p)
	}
	for _, bad := range []string{"complex64", "complex128", "object", "str", "datetime64", "", "Float32"} {
		_, err := dtype.Parse(bad)
		require.Error(t, err, bad)
		assert.Equal(t, errs.Type, errs.KindOf(err), bad)
		assert.Contains(t, err.Error(), `"`+bad+`"`)
	}
	for _, d := range []dtype.Dtype{dtype.Invalid, dtype.Dtype(11), dtype.Dtype(200), dtype.Dtype(255)} {
		assert.False(t, d.Valid(), "%d", uint8(d))
		assert.Equal(t, 0, d.Size())
		assert.False(t, d.IsFloat())
		assert.False(t, d.IsInt())
	}
	assert.Equal(t, "dtype(200)", dtype.Dtype(200).String())
	assert.Equal(t, dtype.Float32, dtype.AccumulateDtype(dtype.Float16))
	assert.Equal(t, dtype.Float32, dtype.AccumulateDtype(dtype.BFloat16))
	assert.Equal(t, dtype.Float64, dtype.AccumulateDtype(dtype.Float64))
	assert.Equal(t, dtype.Int64, dtype.AccumulateDtype(dtype.Bool))
	assert.Equal(t, dtype.Int64, dtype.SumDtype(dtype.Uint8))
	assert.Equal(t, dtype.Float16, dtype.SumDtype(dtype.Float16))
}

// ------------------------------------------------- independent half reference

// dtHalfFmt describes a 16-bit binary float format.
type dtHalfFmt struct {
	name     string
	mant     uint   // stored mantissa bits
	minExp   int    // exponent of the smallest subnormal (value = m * 2^minExp)
	infBits  uint16 // +Inf
	toF64    func(uint16) float64
	fromF64  func(float64) uint16
	fromF32  func(float32) uint16
	toF32    func(uint16) float32
	finiteUp []float64 // values of patterns 0 .. infBits (Inf counted as the next binade's power of two)
}

// dtDecode computes a pattern's value from the format's definition.
func dtDecode(f *dtHalfFmt, h uint16) float64 {
	expMask := uint16(f.infBits >> f.mant)
	e := int((h >> f.mant) & expMask)
	m := int64(h & (1<<f.mant - 1))
	neg := h&0x8000 != 0
	var v float64
	switch {
	case e == int(expMask) && m == 0:
		v = math.Inf(1)
	case e == int(expMask):
		v = math.NaN()
	case e == 0:
		v = math.Ldexp(float64(m), f.minExp)
	default:
		v = math.Ldexp(float64(m|1<<f.mant), f.minExp+e-1)
	}
	if neg {
		v = -v
	}
	return v
}

var (
	dtF16 = &dtHalfFmt{name: "float16", mant: 10, minExp: -24, infBits: 0x7c00,
		toF64: dtype.Float16ToFloat64, fromF64: dtype.Float64ToFloat16, fromF32: dtype.Float32ToFloat16, toF32: dtype.Float16ToFloat32}
	dtBF16 = &dtHalfFmt{name: "bfloat16", mant: 7, minExp: -133, infBits: 0x7f80,
		toF64: dtype.BFloat16ToFloat64, fromF64: dtype.Float64ToBFloat16, fromF32: dtype.Float32ToBFloat16, toF32: dtype.BFloat16ToFloat32}
)

func init() {
	for _, f := range []*dtHalfFmt{dtF16, dtBF16} {
		f.finiteUp = make([]float64, int(f.infBits)+1)
		for h := 0; h < int(f.infBits); h++ {
			f.finiteUp[h] = dtDecode(f, uint16(h))
		}
		// The pattern after the largest finite one is +Inf; for rounding it
		// stands for 2^(emax+1), which makes "overflow to Inf" fall out of
		// round-to-nearest-even (its mantissa is even).
		f.finiteUp[f.infBits] = 2 * math.Ldexp(1, int(math.Floor(math.Log2(f.finiteUp[f.infBits-1]))))
	}
}

// dtRoundRef rounds x (not NaN) to the format: nearest, ties to the even
// pattern, |x| >= the Inf stand-in rounds to Inf. Exact arithmetic throughout.
func dtRoundRef(f *dtHalfFmt, x float64) uint16 {
	var sign uint16
	if math.Signbit(x) {
		sign = 0x8000
		x = -x
	}
	if math.IsInf(x, 0) || x >= f.finiteUp[f.infBits] {
		return sign | f.infBits
	}
	// largest pattern with value <= x
	lo := sort.Search(len(f.finiteUp), func(i int) bool { return f.finiteUp[i] > x }) - 1
	if f.finiteUp[lo] == x {
		return sign | uint16(lo)
	}
	hi := lo + 1
	var cmp int
	if lo > 0 {
		// lo <= x < hi <= 2*lo, so both differences are exact in float64
		// (Sterbenz): no rounding can hide a tie.
		dlo, dhi := x-f.finiteUp[lo], f.finiteUp[hi]-x
		switch {
		case dlo < dhi:
			cmp = -1
		case dlo > dhi:
			cmp = 1
		}
	} else {
		// between 0 and the smallest subnormal x may be a float64
		// subnormal: compute the differences exactly.
		bx := new(big.Float).SetPrec(2200).SetFloat64(x)
		dlo := new(big.Float).SetPrec(2200).Sub(bx, new(big.Float).SetFloat64(f.finiteUp[lo]))
		dhi := new(big.Float).SetPrec(2200).Sub(new(big.Float).SetFloat64(f.finiteUp[hi]), bx)
		cmp = dlo.Cmp(dhi)
	}
	switch cmp {
	case -1:
		return sign | uint16(lo)
	case 1:
		return sign | uint16(hi)
	}
	if lo%2 == 0 {
		return sign | uint16(lo)
	}
	return sign | uint16(hi)
}

func dtIsNaNBits(f *dtHalfFmt, h uint16) bool {
	return h&0x7fff > f.infBits
}

// NaN bits, restated from NumPy's halffloat.c (npy_floatbits_to_halfbits,
// npy_doublebits_to_halfbits, npy_halfbits_to_floatbits/_doublebits) and
// Eigen's bfloat16 (ml_dtypes): the exact patterns a conversion must give.
// TestHalfNaNBitsMatchNumPyAndMLDtypes checks them against those libraries'
// own output.
func dtNaNWiden(f *dtHalfFmt, h uint16) (uint32, uint64) {
	s := uint64(h >> 15)
	if f == dtF16 {
		m := uint64(h & 0x3ff)
		return uint32(s<<31 | 0xff<<23 | m<<13), s<<63 | 0x7ff<<52 | m<<42
	}
	return uint32(h) << 16, s<<63 | 0x7ff8<<48 | uint64(h&0x7f)<<45
}

func dtNaNFrom32(f *dtHalfFmt, b uint32) uint16 {
	s := uint16(b>>31) << 15
	if f == dtBF16 {
		return s | 0x7fc0
	}
	top := uint16((b & 0x7fffff) >> 13)
	if top == 0 {
		top = 1
	}
	return s | 0x7c00 | top
}

func dtNaNFrom64(f *dtHalfFmt, b uint64) uint16 {
	s := uint16(b>>63) << 15
	if f == dtBF16 {
		return s | 0x7fc0
	}
	top := uint16((b & (1<<52 - 1)) >> 42)
	if top == 0 {
		top = 1
	}
	return s | 0x7c00 | top
}

// --------------------------------------------------------------- conversions

func TestDtypeHalfWidenExhaustive(t *testing.T) {
	for _, f := range []*dtHalfFmt{dtF16, dtBF16} {
		t.Run(f.name, func(t *testing.T) {
			bad := 0
			for i := 0; i < 1<<16; i++ {
				h := uint16(i)
				want := dtDecode(f, h)
				w64, w32 := f.toF64(h), f.toF32(h)
				if math.IsNaN(want) {
					// sign and payload exactly as NumPy / ml_dtypes widen them
					r32, r64 := dtNaNWiden(f, h)
					if b32, b64 := math.Float32bits(w32), math.Float64bits(w64); b32 != r32 || b64 != r64 {
						bad++
						t.Errorf("%s NaN %#04x widened to %#08x / %#016x, want %#08x / %#016x", f.name, h, b32, b64, r32, r64)
					}
					continue
				}
				if math.Float64bits(w64) != math.Float64bits(want) || math.Float64bits(float64(w32)) != math.Float64bits(want) {
					bad++
					t.Errorf("%s %#04x: widened to %v / %v, want %v", f.name, h, w64, w32, want)
				}
				if bad > 20 {
					t.FailNow()
				}
			}
			if f == dtF16 {
				tab := dtype.Float16Table()
				for i := 0; i < 1<<16; i++ {
					require.Equal(t, math.Float32bits(dtype.Float16ToFloat32(uint16(i))), math.Float32bits(tab[i]))
				}
			}
		})
	}
}

func TestDtypeHalfRoundTripExhaustive(t *testing.T) {
	for _, f := range []*dtHalfFmt{dtF16, dtBF16} {
		t.Run(f.name, func(t *testing.T) {
			bad := 0
			for i := 0; i < 1<<16; i++ {
				h := uint16(i)
				back64 := f.fromF64(f.toF64(h))
				back32 := f.fromF32(f.toF32(h))
				if dtIsNaNBits(f, h) {
					// float16 NaNs come back bit for bit (NumPy keeps the
					// payload both ways); bfloat16 NaNs come back as ±0x7fc0
					// (ml_dtypes narrows every NaN to it)
					want := h
					if f == dtBF16 {
						want = h&0x8000 | 0x7fc0
					}
					if back64 != want || back32 != want {
						bad++
						t.Errorf("%s NaN %#04x came back as %#04x (f64) / %#04x (f32), want %#04x", f.name, h, back64, back32, want)
					}
				} else if back64 != h || back32 != h {
					bad++
					t.Errorf("%s %#04x round-tripped to %#04x (f64) / %#04x (f32)", f.name, h, back64, back32)
				}
				if bad > 20 {
					t.FailNow()
				}
			}
		})
	}
}

// Named edge values, checked by exact bit pattern.
func TestDtypeHalfRoundingEdges(t *testing.T) {
	sub := math.Ldexp(1, -24) // smallest float16 subnormal
	cases := []struct {
		x    float64
		want uint16
	}{
		{0, 0x0000}, {math.Copysign(0, -1), 0x8000},
		{1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800},
		{65504, 0x7bff}, {-65504, 0xfbff},
		{65519.99999999999, 0x7bff}, // just below the overflow threshold
		{65520, 0x7c00},             // tie between max finite (odd) and 2^16: to Inf
		{-65520, 0xfc00},
		{65536, 0x7c00}, {1e300, 0x7c00}, {math.Inf(1), 0x7c00}, {math.Inf(-1), 0xfc00},
		{sub, 0x0001}, {-sub, 0x8001},
		{sub / 2, 0x0000},                    // tie between 0 and 2^-24: to even 0
		{math.Nextafter(sub/2, 1), 0x0001},   // just above half: up
		{math.Copysign(sub/2, -1), 0x8000},   // -0 kept
		{1.5 * sub, 0x0002},                  // tie 1 (odd) / 2: to 2
		{2.5 * sub, 0x0002},                  // tie 2 (even) / 3: to 2
		{math.Ldexp(1, -14), 0x0400},         // smallest normal
		{math.Ldexp(1, -14) - sub, 0x03ff},   // largest subnormal
		{math.Ldexp(1, -14) - sub/2, 0x0400}, // tie between 0x3ff (odd) and 0x400: up
		{5e-324, 0x0000}, {-5e-324, 0x8000},  // float64 subnormals
		{1 + math.Ldexp(1, -11), 0x3c00},                      // tie 1.0 (even) / next: down
		{1 + 3*math.Ldexp(1, -11), 0x3c02},                    // tie 0x3c01 (odd) / 0x3c02: up
		{1 + math.Ldexp(1, -11) + math.Ldexp(1, -40), 0x3c01}, // just above the tie
		{2048, 0x6800}, {2049, 0x6800}, {2051, 0x6802}, {2050, 0x6801},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, dtype.Float64ToFloat16(c.x), "Float64ToFloat16(%v)", c.x)
		assert.Equal(t, c.want, dtRoundRef(dtF16, c.x), "reference disagrees for %v", c.x)
		if float64(float32(c.x)) == c.x {
			assert.Equal(t, c.want, dtype.Float32ToFloat16(float32(c.x)), "Float32ToFloat16(%v)", c.x)
		}
	}
	bfCases := []struct {
		x    float64
		want uint16
	}{
		{1, 0x3f80}, {-1, 0xbf80}, {0, 0}, {math.Copysign(0, -1), 0x8000},
		{1 + math.Ldexp(1, -8), 0x3f80},   // tie to even (down)
		{1 + 3*math.Ldexp(1, -8), 0x3f82}, // tie to even (up)
		{1 + math.Ldexp(1, -8) + math.Ldexp(1, -30), 0x3f81},
		{math.MaxFloat32, 0x7f80},       // rounds up past the largest finite bfloat16
		{3.3895313892515355e38, 0x7f7f}, // largest finite bfloat16
		{math.Ldexp(1, -133), 0x0001},   // smallest subnormal
		{math.Ldexp(1, -134), 0x0000},   // half of it: tie to 0
		{math.Ldexp(3, -135), 0x0001},   // 0.75 of it: up
		{math.Inf(-1), 0xff80},
	}
	for _, c := range bfCases {
		assert.Equal(t, c.want, dtype.Float64ToBFloat16(c.x), "Float64ToBFloat16(%v)", c.x)
		assert.Equal(t, c.want, dtRoundRef(dtBF16, c.x), "reference disagrees for %v", c.x)
		if float64(float32(c.x)) == c.x {
			assert.Equal(t, c.want, dtype.Float32ToBFloat16(float32(c.x)), "Float32ToBFloat16(%v)", c.x)
		}
	}
}

// Between every pair of adjacent finite half values: the tie point, the points
// one float64 ulp and one float32 ulp either side of it, and the interior
// quarter points. The float64 points next to a tie round to the same float32
// tie, so a conversion that goes float64 -> float32 -> half rounds them wrongly
// (double rounding); converting directly must not.
func TestDtypeHalfRoundingAllIntervals(t *testing.T) {
	for _, f := range []*dtHalfFmt{dtF16, dtBF16} {
		t.Run(f.name, func(t *testing.T) {
			bad := 0
			check64 := func(x float64, want uint16, what string) {
				for _, s := range []float64{1, -1} {
					w := want
					if s < 0 {
						w |= 0x8000
					}
					if got := f.fromF64(s * x); got != w {
						bad++
						t.Errorf("%s from float64 %s %v: got %#04x want %#04x", f.name, what, s*x, got, w)
					}
				}
			}
			check32 := func(x float32, want uint16, what string) {
				for _, s := range []float32{1, -1} {
					w := want
					if s < 0 {
						w |= 0x8000
					}
					if got := f.fromF32(s * x); got != w {
						bad++
						t.Errorf("%s from float32 %s %v: got %#04x want %#04x", f.name, what, s*x, got, w)
					}
				}
			}
			for lo := 0; lo < int(f.infBits); lo++ {
				hi := lo + 1
				a, b := f.finiteUp[lo], f.finiteUp[hi]
				mid := a + (b-a)/2 // exact: a and b differ by one half ulp step
				even := uint16(lo)
				if lo%2 == 1 {
					even = uint16(hi)
				}
				check64(a, uint16(lo), "exact")
				check64(mid, even, "tie")
				check64(math.Nextafter(mid, math.Inf(1)), uint16(hi), "tie+ulp64")
				check64(math.Nextafter(mid, 0), uint16(lo), "tie-ulp64")
				check64(a+(b-a)/4, uint16(lo), "quarter")
				check64(a+3*(b-a)/4, uint16(hi), "three-quarter")
				m32 := float32(mid)
				if float64(m32) == mid {
					check32(m32, even, "tie")
					check32(math.Nextafter32(m32, float32(math.Inf(1))), uint16(hi), "tie+ulp32")
					check32(math.Nextafter32(m32, 0), uint16(lo), "tie-ulp32")
				}
				if bad > 20 {
					t.FailNow()
				}
			}
		})
	}
}

// Random float64 and float32 inputs concentrated around the half formats'
// range, against the big.Float reference; the float32 path must also agree
// with the float64 path bit for bit (the cpu backend narrows from float32, the
// ref backend from float64), NaN included.
func TestDtypeHalfRoundingRandom(t *testing.T) {
	n := 60000
	if testing.Short() {
		n = 10000
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range []*dtHalfFmt{dtF16, dtBF16} {
		t.Run(f.name, func(t *testing.T) {
			lowE, highE := -30, 20
			if f == dtBF16 {
				lowE, highE = -140, 131
			}
			for i := 0; i < n; i++ {
				x := math.Ldexp(1+rng.Float64(), lowE+rng.IntN(highE-lowE))
				if rng.IntN(2) == 0 {
					x = -x
				}
				require.Equal(t, dtRoundRef(f, x), f.fromF64(x), "%s from float64 %v (%#x)", f.name, x, math.Float64bits(x))
				x32 := math.Float32frombits(rng.Uint32())
				v := float64(x32)
				if math.IsNaN(v) {
					b := math.Float32bits(x32)
					require.Equal(t, dtNaNFrom32(f, b), f.fromF32(x32), "%s from float32 NaN %#x", f.name, b)
					// float64(x32) is quiet (hardware conversion): the float64 rule applies to its bits
					require.Equal(t, dtNaNFrom64(f, math.Float64bits(v)), f.fromF64(v), "%s from float64 NaN %#x", f.name, math.Float64bits(v))
					b64 := rng.Uint64() | 0x7ff<<52 // any float64 NaN (or ±Inf when the mantissa is 0)
					if x := math.Float64frombits(b64); math.IsNaN(x) {
						require.Equal(t, dtNaNFrom64(f, b64), f.fromF64(x), "%s from float64 NaN %#x", f.name, b64)
					}
					continue
				}
				require.Equal(t, dtRoundRef(f, v), f.fromF32(x32), "%s from float32 %v (%#x)", f.name, x32, math.Float32bits(x32))
				require.Equal(t, f.fromF64(v), f.fromF32(x32))
			}
		})
	}
}

// Float32ToBFloat16 has its own bit-trick implementation: check it against
// the float64 path for every upper half and the decisive lower halves.
func TestDtypeBFloat16FromFloat32Structured(t *testing.T) {
	lows := []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff}
	for hi := uint32(0); hi < 1<<16; hi++ {
		for _, lo := range lows {
			b := hi<<16 | lo
			x := math.Float32frombits(b)
			got := dtype.Float32ToBFloat16(x)
			if math.IsNaN(float64(x)) {
				if want := dtNaNFrom32(dtBF16, b); got != want {
					t.Fatalf("NaN %#08x narrowed to %#04x, want %#04x", b, got, want)
				}
				continue
			}
			want := dtRoundRef(dtBF16, float64(x))
			if got != want {
				t.Fatalf("Float32ToBFloat16(%#08x = %v) = %#04x, want %#04x", b, x, got, want)
			}
			if g64 := dtype.Float64ToBFloat16(float64(x)); g64 != want {
				t.Fatalf("Float64ToBFloat16(%#08x = %v) = %#04x, want %#04x", b, x, g64, want)
			}
		}
	}
}

// The conversions used by tensors (FromFloat64s / Float64s) round the same way.
func TestDtypeHalfThroughTensors(t *testing.T) {
	vals := []float64{65520, 65519, 1e-8, math.Ldexp(1, -25), 1 + math.Ldexp(1, -11) + math.Ldexp(1, -40), -0.0, math.Inf(-1)}
	for _, dt := range []dtype.Dtype{dtype.Float16, dtype.BFloat16} {
		f := dtF16
		if dt == dtype.BFloat16 {
			f = dtBF16
		}
		x, err := tensor.FromFloat64s(dt, []int{len(vals)}, vals)
		require.NoError(t, err)
		bits := x.Bits()
		for i, v := range vals {
			assert.Equal(t, uint64(dtRoundRef(f, v)), bits[i], "%v %v", dt, v)
		}
	}
}
