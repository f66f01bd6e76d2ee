package tests_go

import (
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// nanGolden is testdata/nan_bits.bin: the bits NumPy (float16) and ml_dtypes
// (bfloat16) give, written by testdata/nan_bits_gen.py.
type nanGolden struct {
	f16, bf16 []halfRow // every NaN pattern: its float32, float64 and other-half bits
	f32       []narrowRow
	f64       []narrowRow
}

type halfRow struct {
	h, other uint16
	f32      uint32
	f64      uint64
}

type narrowRow struct {
	x        uint64
	f16, b16 uint16
}

func loadNaNGolden(t *testing.T) *nanGolden {
	raw, err := os.ReadFile("testdata/nan_bits.bin")
	require.NoError(t, err)
	le := binary.LittleEndian
	take := func(n int) []byte {
		require.GreaterOrEqual(t, len(raw), n, "nan_bits.bin is truncated")
		b := raw[:n]
		raw = raw[n:]
		return b
	}
	count := func() int { return int(le.Uint32(take(4))) }
	g := &nanGolden{}
	for _, dst := range []*[]halfRow{&g.f16, &g.bf16} {
		for i, n := 0, count(); i < n; i++ {
			b := take(16)
			*dst = append(*dst, halfRow{h: le.Uint16(b), f32: le.Uint32(b[2:]), f64: le.Uint64(b[6:]), other: le.Uint16(b[14:])})
		}
	}
	for i, n := 0, count(); i < n; i++ {
		b := take(8)
		g.f32 = append(g.f32, narrowRow{x: uint64(le.Uint32(b)), f16: le.Uint16(b[4:]), b16: le.Uint16(b[6:])})
	}
	for i, n := 0, count(); i < n; i++ {
		b := take(12)
		g.f64 = append(g.f64, narrowRow{x: le.Uint64(b), f16: le.Uint16(b[8:]), b16: le.Uint16(b[10:])})
	}
	require.Empty(t, raw, "nan_bits.bin has trailing bytes")
	require.Len(t, g.f16, 2046)
	require.Len(t, g.bf16, 254)
	return g
}

// Conversions of NaNs give exactly NumPy's (float16) and ml_dtypes' (bfloat16)
// bits, from float32 and float64 alike; other values round once from the
// exact value (ml_dtypes rounds float64 through float32, so non-NaN float64
// → bfloat16 is checked against the exact reference instead).
func TestHalfNaNBitsMatchNumPyAndMLDtypes(t *testing.T) {
	g := loadNaNGolden(t)
	for _, r := range g.f16 {
		require.Equal(t, r.f32, math.Float32bits(dtype.Float16ToFloat32(r.h)), "float16 %#04x → float32", r.h)
		require.Equal(t, r.f64, math.Float64bits(dtype.Float16ToFloat64(r.h)), "float16 %#04x → float64", r.h)
		require.Equal(t, r.other, dtype.Float16ToBFloat16(r.h), "float16 %#04x → bfloat16", r.h)
		require.Equal(t, r.h, dtype.Float32ToFloat16(dtype.Float16ToFloat32(r.h)), "float16 %#04x → float32 → back", r.h)
		require.Equal(t, r.h, dtype.Float64ToFloat16(dtype.Float16ToFloat64(r.h)), "float16 %#04x → float64 → back", r.h)
	}
	for _, r := range g.bf16 {
		require.Equal(t, r.f32, math.Float32bits(dtype.BFloat16ToFloat32(r.h)), "bfloat16 %#04x → float32", r.h)
		require.Equal(t, r.f64, math.Float64bits(dtype.BFloat16ToFloat64(r.h)), "bfloat16 %#04x → float64", r.h)
		require.Equal(t, r.other, dtype.BFloat16ToFloat16(r.h), "bfloat16 %#04x → float16", r.h)
	}
	nan32 := 0
	for _, r := range g.f32 {
		x := math.Float32frombits(uint32(r.x))
		require.Equal(t, r.f16, dtype.Float32ToFloat16(x), "float32 %#08x → float16", r.x)
		require.Equal(t, r.b16, dtype.Float32ToBFloat16(x), "float32 %#08x → bfloat16", r.x)
		if x != x {
			nan32++
		}
	}
	nan64 := 0
	for _, r := range g.f64 {
		x := math.Float64frombits(r.x)
		require.Equal(t, r.f16, dtype.Float64ToFloat16(x), "float64 %#016x → float16", r.x)
		if x != x {
			nan64++
			require.Equal(t, r.b16, dtype.Float64ToBFloat16(x), "float64 %#016x → bfloat16", r.x)
		} else {
			require.Equal(t, dtRoundRef(dtBF16, x), dtype.Float64ToBFloat16(x), "float64 %#016x → bfloat16", r.x)
		}
	}
	require.Greater(t, nan32, 1000)
	require.Greater(t, nan64, 1000)
}

// Both backends' Cast give the same NumPy/ml_dtypes bits, contiguous and
// strided (the cpu backend's table-driven and element paths).
func TestCastNaNBitsMatchNumPyAndMLDtypesOnBothBackends(t *testing.T) {
	g := loadNaNGolden(t)
	type cas struct {
		from, to dtype.Dtype
		src      []uint64
		want     []uint64
	}
	var cases []cas
	add := func(from, to dtype.Dtype, src, want uint64) {
		for i := range cases {
			if cases[i].from == from && cases[i].to == to {
				cases[i].src = append(cases[i].src, src)
				cases[i].want = append(cases[i].want, want)
				return
			}
		}
		cases = append(cases, cas{from, to, []uint64{src}, []uint64{want}})
	}
	for _, r := range g.f16 {
		add(dtype.Float16, dtype.Float32, uint64(r.h), uint64(r.f32))
		add(dtype.Float16, dtype.Float64, uint64(r.h), r.f64)
		add(dtype.Float16, dtype.BFloat16, uint64(r.h), uint64(r.other))
	}
	for _, r := range g.bf16 {
		add(dtype.BFloat16, dtype.Float32, uint64(r.h), uint64(r.f32))
		add(dtype.BFloat16, dtype.Float64, uint64(r.h), r.f64)
		add(dtype.BFloat16, dtype.Float16, uint64(r.h), uint64(r.other))
	}
	for _, r := range g.f32 {
		add(dtype.Float32, dtype.Float16, r.x, uint64(r.f16))
		add(dtype.Float32, dtype.BFloat16, r.x, uint64(r.b16))
	}
	for _, r := range g.f64 {
		add(dtype.Float64, dtype.Float16, r.x, uint64(r.f16))
		if x := math.Float64frombits(r.x); x != x {
			add(dtype.Float64, dtype.BFloat16, r.x, uint64(r.b16))
		}
	}
	require.Len(t, cases, 10)
	for _, be := range []*ops.Context{{Backend: ref.Backend{}}, {Backend: cpu.New(2)}} {
		for _, c := range cases {
			// every value twice, so that a step-2 slice is a strided copy of it
			twice := make([]uint64, 2*len(c.src))
			for i, v := range c.src {
				twice[2*i], twice[2*i+1] = v, v
			}
			src, err := tensor.FromBits(c.from, []int{len(twice)}, twice)
			require.NoError(t, err)
			strided, err := src.Slice(0, 0, len(twice), 2)
			require.NoError(t, err)
			contiguous, err := tensor.FromBits(c.from, []int{len(c.src)}, c.src)
			require.NoError(t, err)
			for _, in := range []*tensor.Tensor{contiguous, strided} {
				out, err := ops.Cast(be, in, c.to)
				require.NoError(t, err)
				got := out.Bits()
				for i := range c.src {
					require.Equal(t, c.want[i], got[i], "%s: %v %#x → %v (contiguous %v)",
						be.Backend.Name(), c.from, c.src[i], c.to, in.IsContiguous())
				}
			}
		}
	}
}
