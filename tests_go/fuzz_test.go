package tests_go

// Native Go fuzz targets for broadcasting and the strided kernels.
//
//	FuzzBinaryStrided   minimum/maximum/add/sub/mul/div over random dtypes,
//	                    shapes, layouts (permute, negative/2-step slices,
//	                    zero strides, raw NewView strides) and raw element bits:
//	                    the cpu backend (several thread counts) must match the
//	                    ref backend bit for bit, and both must match an
//	                    oracle written here for same-dtype inputs.
//	FuzzSumDims         Sum/Mean over random dims and layouts, against ref and
//	                    an oracle of the documented canonical summation order.
//	FuzzBroadcastShapes tensor.BroadcastShapes against an independent
//	                    implementation (math/big for the element count).
//
// Plain `go test` runs the f.Add seeds and testdata/fuzz/<Name>/*; fuzz with
//
//	go test -run=XXX -fuzz=FuzzBinaryStrided -fuzztime=60s ./tests_go/

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// ------------------------------------------------------------------ decoding

// fzBits hands out the bits of a fuzz integer, low bits first.
type fzBits struct{ v uint64 }

func (b *fzBits) take(n uint) int {
	x := int(b.v & (1<<n - 1))
	b.v >>= n
	return x
}

var fzDtypes = []dtype.Dtype{dtype.Bool, dtype.Uint8, dtype.Int8, dtype.Int16, dtype.Int32, dtype.Int64,
	dtype.Float16, dtype.BFloat16, dtype.Float32, dtype.Float64}

// fzDims maps 3 bits to a dim size; 1 and small sizes are the interesting ones.
var fzDims = [8]int{1, 2, 3, 4, 0, 1, 2, 3}

// fzBigDim is a leading dim large enough that elementwise kernels cross
// cpu.Chunk (parallel blocks) and maxSeg, and sums cross backend.SumBlock.
const fzBigDim = 2100

// fzDict holds interesting bit patterns per dtype: ±0, ±1, ties, ±Inf, NaNs
// with payloads and signs (quiet and signalling), extremes, subnormals.
var fzDict = map[dtype.Dtype][]uint64{
	dtype.Float64: {0, 1 << 63, 0x3ff0000000000000, 0xbff0000000000000, 0x4000000000000000, 0x3fe0000000000000,
		0xc004000000000000, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000, 0x7ff8000000000123,
		0xfff8000000000001, 0x7ff0000000000001, 0x7fefffffffffffff, 1, 0x0000b8157268fdaf, 0x4008000000000000, 0xbfe8000000000000},
	dtype.Float32: {0, 1 << 31, 0x3f800000, 0xbf800000, 0x40000000, 0x3f000000, 0xc0200000, 0x7f800000, 0xff800000,
		0x7fc00000, 0x7fc00123, 0xffc00001, 0x7f800001, 0x7f7fffff, 1, 0x007fffff, 0x40400000, 0xbf400000},
	dtype.Float16: {0, 0x8000, 0x3c00, 0xbc00, 0x4000, 0x3800, 0xc100, 0x7c00, 0xfc00,
		0x7e00, 0x7e01, 0xfe00, 0x7c01, 0x7bff, 0x0001, 0x03ff, 0x4200, 0xba00},
	dtype.BFloat16: {0, 0x8000, 0x3f80, 0xbf80, 0x4000, 0x3f00, 0xc020, 0x7f80, 0xff80,
		0x7fc0, 0x7fc1, 0xffc0, 0x7f81, 0x7f7f, 0x0001, 0x007f, 0x4040, 0xbf40},
	dtype.Int64: {0, 1, math.MaxUint64, 2, math.MaxUint64 - 1, 3, 1 << 63, 1<<63 - 1, 1<<63 + 1, 100, math.MaxUint64 - 99},
	dtype.Int32: {0, 1, 0xffffffff, 2, 0xfffffffe, 3, 1 << 31, 1<<31 - 1, 1<<31 + 1, 100, 0xffffff9c},
	dtype.Int16: {0, 1, 0xffff, 2, 0xfffe, 3, 0x8000, 0x7fff, 0x8001, 100, 0xff9c},
	dtype.Int8:  {0, 1, 0xff, 2, 0xfe, 3, 0x80, 0x7f, 0x81, 100, 0x9c},
	dtype.Uint8: {0, 1, 2, 3, 254, 255, 127, 128, 100},
	dtype.Bool:  {0, 1},
}

// fzGen returns n element bit patterns drawn from the fuzz bytes: raw
// little-endian bytes, or (dict) one dictionary entry per byte. Bool
// elements are kept to 0 or 1: a bool byte of 2..255 is not a valid bool
// (with such bytes cpu's add/mul, computed in uint8, can wrap to 0 where
// ref gives 1: 128+128; reported, not tested).
func fzGen(dt dtype.Dtype, elems []byte, dict bool, salt int) func(n int) []uint64 {
	return func(n int) []uint64 {
		out := make([]uint64, n)
		if len(elems) == 0 {
			return out
		}
		sz := dt.Size()
		for i := range out {
			if dict {
				d := fzDict[dt]
				out[i] = d[int(elems[(i+salt)%len(elems)])%len(d)]
				continue
			}
			var v uint64
			for j := 0; j < sz; j++ {
				v |= uint64(elems[(i*sz+j+salt)%len(elems)]) << (8 * j)
			}
			if dt == dtype.Bool {
				v &= 1
			}
			out[i] = v
		}
		return out
	}
}

func fzNumel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// fzPerm returns the idx-th permutation of n items (Lehmer code).
func fzPerm(idx, n int) []int {
	items := make([]int, n)
	for i := range items {
		items[i] = i
	}
	out := make([]int, 0, n)
	for k := n; k > 0; k-- {
		f := 1
		for i := 2; i < k; i++ {
			f *= i
		}
		j := (idx / f) % k
		out = append(out, items[j])
		items = append(items[:j], items[j+1:]...)
	}
	return out
}

// fzView builds a tensor of logical shape S whose layout the bits of lay
// decide, reading its elements from gen. Either a chain of view calls on a
// fresh base tensor — slices with steps ±1/±2, offsets and negative index
// spellings, a permutation, and a broadcast that stretches some dims and
// adds leading ones — or (low bit set) NewView with raw strides (zero,
// negative, overlapping) over a padded storage. small restricts steps to
// ±1 (for the big leading dim). It fails the test if the view calls
// misbehave (wrong shape or an error).
func fzView(t *testing.T, dt dtype.Dtype, S []int, lay uint64, gen func(int) []uint64, small bool) *tensor.Tensor {
	r := &fzBits{lay}
	k := len(S)
	if r.take(1) == 1 {
		strides := make([]int, k)
		lo, hi := 0, 0
		for d := k - 1; d >= 0; d-- {
			row := fzNumel(S[d+1:])
			st := [8]int{0, 1, -1, 2, -2, 3, row, -row}[r.take(3)]
			strides[d] = st
			if S[d] > 1 {
				if st < 0 {
					lo += (S[d] - 1) * st
				} else {
					hi += (S[d] - 1) * st
				}
			}
		}
		front, back := r.take(2), r.take(2)
		total := hi - lo + 1 + front + back
		base, err := tensor.FromBits(dt, []int{total}, gen(total))
		require.NoError(t, err)
		v, err := tensor.NewView(base.Storage(), dt, S, strides, front-lo)
		require.NoError(t, err, "NewView shape %v strides %v offset %d over %d", S, strides, front-lo, total)
		return v
	}
	lead := r.take(2) % (k + 1)
	P := append([]int(nil), S[lead:]...)
	for d := range 4 {
		if r.take(1) == 1 && d < len(P) {
			P[d] = 1 // a zero-stride dim once broadcast back to S
		}
	}
	perm := fzPerm(r.take(5), len(P))
	Q := make([]int, len(P))
	for i, p := range perm {
		Q[p] = P[i]
	}
	R := make([]int, len(Q))
	type sl struct{ start, stop, step int }
	slices := make([]sl, len(Q))
	for j, q := range Q {
		step := [4]int{1, -1, 2, -2}[r.take(2)]
		off0, neg, pad := r.take(1), r.take(1) == 1, r.take(1)
		if small {
			step = step / max(1, fzAbs(step)) // ±1
		}
		as := fzAbs(step)
		n := q*as + off0 + pad
		R[j] = n
		var s sl
		switch {
		case q == 0:
			s = sl{off0, off0, step} // start == stop: empty, either direction
		case step > 0:
			s = sl{off0, off0 + (q-1)*as + 1, step}
		default:
			s = sl{n - 1 - off0, n - 1 - off0 - (q-1)*as - 1, step}
			if s.stop < 0 {
				s.stop -= n // "before index 0" must be spelled below -n
			}
		}
		if neg {
			if s.start >= 0 && s.start < n {
				s.start -= n
			}
			if s.stop >= 0 && s.stop < n {
				s.stop -= n
			}
		}
		slices[j] = s
	}
	base, err := tensor.FromBits(dt, R, gen(fzNumel(R)))
	require.NoError(t, err)
	v := base
	for j, s := range slices {
		v, err = v.Slice(j, s.start, s.stop, s.step)
		require.NoError(t, err, "Slice(%d, %d, %d, %d) of %v", j, s.start, s.stop, s.step, R)
	}
	require.True(t, tensor.SameShape(Q, v.Shape()), "slices of %v gave %v, want %v (%+v)", R, v.Shape(), Q, slices)
	v, err = v.Permute(perm...)
	require.NoError(t, err)
	require.True(t, tensor.SameShape(P, v.Shape()), "Permute%v gave %v, want %v", perm, v.Shape(), P)
	v, err = v.BroadcastTo(S)
	require.NoError(t, err, "BroadcastTo %v from %v", S, P)
	require.True(t, tensor.SameShape(S, v.Shape()))
	return v
}

func fzAbs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// ------------------------------------------------------------ element model

func fzIsNaN(dt dtype.Dtype, b uint64) bool {
	switch dt {
	case dtype.Float16:
		return b&0x7fff > 0x7c00
	case dtype.BFloat16:
		return b&0x7fff > 0x7f80
	case dtype.Float32:
		return b&0x7fffffff > 0x7f800000
	case dtype.Float64:
		return b&(1<<63-1) > 0x7ff0000000000000
	}
	return false
}

// fzFloat decodes float bits (half formats by the dtype_test decoder).
func fzFloat(dt dtype.Dtype, b uint64) float64 {
	switch dt {
	case dtype.Float16:
		return dtDecode(dtF16, uint16(b))
	case dtype.BFloat16:
		return dtDecode(dtBF16, uint16(b))
	case dtype.Float32:
		return float64(math.Float32frombits(uint32(b)))
	}
	return math.Float64frombits(b)
}

// fzInt decodes integer/bool bits (sign-extending signed types).
func fzInt(dt dtype.Dtype, b uint64) int64 {
	switch dt {
	case dtype.Int8:
		return int64(int8(b))
	case dtype.Int16:
		return int64(int16(b))
	case dtype.Int32:
		return int64(int32(b))
	case dtype.Int64:
		return int64(b)
	}
	return int64(b & 0xff)
}

// fzEncode rounds v to dt's bits (floats only), by the independent
// references: Go's float32 conversion, dtRoundRef for halves.
func fzEncode(dt dtype.Dtype, v float64) uint64 {
	switch dt {
	case dtype.Float16:
		if math.IsNaN(v) {
			return 0x7e00
		}
		return uint64(dtRoundRef(dtF16, v))
	case dtype.BFloat16:
		if math.IsNaN(v) {
			return 0x7fc0
		}
		return uint64(dtRoundRef(dtBF16, v))
	case dtype.Float32:
		return uint64(math.Float32bits(float32(v)))
	}
	return math.Float64bits(v)
}

func fzWidthMask(dt dtype.Dtype) uint64 {
	if dt.Size() == 8 {
		return math.MaxUint64
	}
	return 1<<(8*dt.Size()) - 1
}

// fzAWins is docs/semantics.md's selection rule on bits.
func fzAWins(dt dtype.Dtype, maximum bool, a, b uint64) bool {
	if dt.IsFloat() {
		x, y := fzFloat(dt, a), fzFloat(dt, b)
		if math.IsNaN(x) {
			return true
		}
		if maximum {
			return x >= y
		}
		return x <= y
	}
	x, y := fzInt(dt, a), fzInt(dt, b)
	if maximum {
		return x >= y
	}
	return x <= y
}

// fzArith is the expected result bits of a op b for one same-dtype element
// pair (never asked for div of integers, nor bool sub).
func fzArith(op string, dt dtype.Dtype, a, b uint64) uint64 {
	if dt.IsFloat() {
		if dt == dtype.Float32 {
			x, y := math.Float32frombits(uint32(a)), math.Float32frombits(uint32(b))
			var r float32
			switch op {
			case "add":
				r = x + y
			case "sub":
				r = x - y
			case "mul":
				r = x * y
			case "div":
				r = x / y
			}
			return uint64(math.Float32bits(r))
		}
		// float64 arithmetic is exact or, for the half formats, an innocuous
		// double rounding (53 >= 2*11+2): one rounding to dt follows.
		x, y := fzFloat(dt, a), fzFloat(dt, b)
		var r float64
		switch op {
		case "add":
			r = x + y
		case "sub":
			r = x - y
		case "mul":
			r = x * y
		case "div":
			r = x / y
		}
		return fzEncode(dt, r)
	}
	x, y := fzInt(dt, a), fzInt(dt, b)
	if dt == dtype.Bool {
		t := false
		switch op {
		case "add":
			t = x != 0 || y != 0
		case "mul":
			t = x != 0 && y != 0
		}
		if t {
			return 1
		}
		return 0
	}
	var r int64
	switch op {
	case "add":
		r = x + y
	case "sub":
		r = x - y
	case "mul":
		r = x * y
	}
	return uint64(r) & fzWidthMask(dt)
}

// fzBroadcastIndex maps a row-major output index to the row-major index of
// an operand of shape in, broadcast to out.
func fzBroadcastIndex(out, in []int, flat int) int {
	pos := make([]int, len(out))
	for d := len(out) - 1; d >= 0; d-- {
		pos[d] = flat % out[d]
		flat /= out[d]
	}
	idx, lead := 0, len(out)-len(in)
	for d, n := range in {
		p := 0
		if n != 1 {
			p = pos[lead+d]
		}
		idx = idx*n + p
	}
	return idx
}

// fzSame requires equal dtype, shape and element bits; with nanOK two NaNs
// of any payload count as equal.
func fzSame(t *testing.T, want, got *tensor.Tensor, nanOK bool, msg string) {
	t.Helper()
	require.Equal(t, want.Dtype(), got.Dtype(), msg)
	require.True(t, tensor.SameShape(want.Shape(), got.Shape()), "shape %v vs %v: %s", want.Shape(), got.Shape(), msg)
	fzSameBits(t, got.Dtype(), want.Bits(), got.Bits(), nanOK, msg)
}

func fzSameBits(t *testing.T, dt dtype.Dtype, want, got []uint64, nanOK bool, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		if want[i] == got[i] || (nanOK && fzIsNaN(dt, want[i]) && fzIsNaN(dt, got[i])) {
			continue
		}
		require.Failf(t, "element differs", "element %d of %d: want %#x got %#x (%s)", i, len(want), want[i], got[i], msg)
	}
}

// ------------------------------------------------------------ binary target

type fzOp struct {
	name   string
	fn     func(*ops.Context, *tensor.Tensor, *tensor.Tensor) (*tensor.Tensor, error)
	minmax bool
}

var fzOps = []fzOp{
	{"minimum", ops.Minimum, true}, {"maximum", ops.Maximum, true},
	{"add", ops.Add, false}, {"sub", ops.Sub, false}, {"mul", ops.Mul, false}, {"div", ops.Div, false},
}

var (
	fzCPUs         = []*cpu.Backend{cpu.New(1), splitting(3), splitting(16)}
	fzRef  kernels = ref.Backend{}
)

// fzShapes decodes two shapes from 32 bits: [len a:3][len b:3][a's dims:
// 3 each][b's dims: a 2-bit code each]. Code 0 copies a's aligned dim, 1 is
// 1, 2 takes 3 more bits for an independent size, 3 is a's dim + 1 (which
// does not broadcast unless a's dim is 0).
func fzShapes(s uint32) (a, b []int) {
	r := &fzBits{uint64(s)}
	na, nb := r.take(3)%5, r.take(3)%5
	for range na {
		a = append(a, fzDims[r.take(3)])
	}
	for i := range nb {
		ad := 2
		if j := len(a) - nb + i; j >= 0 {
			ad = a[j]
		}
		switch r.take(2) {
		case 0:
			b = append(b, ad)
		case 1:
			b = append(b, 1)
		case 2:
			b = append(b, fzDims[r.take(3)])
		case 3:
			b = append(b, ad+1)
		}
	}
	return a, b
}

// fzBroadcastModel is an independent NumPy broadcast of two shapes (nil,
// false when they do not broadcast or a dim is negative).
func fzBroadcastModel(a, b []int) ([]int, bool) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if k := len(a) - n + i; k >= 0 {
			da = a[k]
		}
		if k := len(b) - n + i; k >= 0 {
			db = b[k]
		}
		switch {
		case da < 0 || db < 0:
			return nil, false
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, false
		}
	}
	return out, true
}

// FuzzBinaryStrided: op, dtypes, shapes, two layouts, flags and element bytes.
//
//	op     % 6: minimum maximum add sub mul div
//	dts    low nibble: a's dtype (% 10); high nibble: b's (>= 10: same as a)
//	flags  bit0 dictionary elements; bit1 b is a wrapped (weak) 0-d scalar;
//	       bit2 a gets a leading dim of 2100; bit3 also run backward of
//	       sum(op(a, b)) and compare gradients; bit4 a is wrapped instead
func FuzzBinaryStrided(f *testing.F) {
	f.Add(uint8(0), uint8(0xf9), uint8(1), uint32(0x1234567), uint64(0), uint64(0), []byte{9, 10, 11, 0, 1, 12, 2, 3})
	f.Add(uint8(1), uint8(0xf6), uint8(9), uint32(0x0abcdef1), uint64(0x5a5a5), uint64(1), []byte{9, 10, 11, 12, 13, 7, 8, 1})
	f.Add(uint8(2), uint8(0x55), uint8(0), uint32(0x33333333), uint64(0xffff), uint64(0x12345), []byte("\x7f\xff\x80\x00\x01"))
	f.Add(uint8(3), uint8(0x79), uint8(2), uint32(0x0000c92d), uint64(3), uint64(0), []byte{1, 2, 3, 4})
	f.Add(uint8(5), uint8(0x44), uint8(1), uint32(0x00c92d49), uint64(0x1e), uint64(0x3f), []byte{0, 3, 5})
	f.Add(uint8(0), uint8(0xf7), uint8(13), uint32(0x0002492d), uint64(0x40000), uint64(0x7), []byte{9, 1, 0, 10, 15, 16})
	f.Add(uint8(4), uint8(0xf0), uint8(1), uint32(0x00049249), uint64(0x8421), uint64(0x1248), []byte{0, 1, 1})
	f.Add(uint8(1), uint8(0x86), uint8(17), uint32(0x00012492), uint64(0xfffff), uint64(0), []byte{0x7e, 0x01, 0x00, 0x3c})
	f.Fuzz(func(t *testing.T, opSel, dts, flags uint8, shapes uint32, layA, layB uint64, elems []byte) {
		op := fzOps[int(opSel)%len(fzOps)]
		dtA := fzDtypes[int(dts&15)%len(fzDtypes)]
		dtB := dtA
		if hi := int(dts >> 4); hi < len(fzDtypes) {
			dtB = fzDtypes[hi]
		}
		dict := flags&1 != 0
		wrapB, wrapA := flags&2 != 0, flags&16 != 0 && flags&2 == 0
		big := flags&4 != 0
		withGrad := flags&8 != 0

		sa, sb := fzShapes(shapes)
		if wrapB {
			sb = nil
		}
		if wrapA {
			sa = nil
		} else if big {
			sa = append([]int{fzBigDim}, sa...)
		}
		a := fzView(t, dtA, sa, layA, fzGen(dtA, elems, dict, 0), big)
		b := fzView(t, dtB, sb, layB, fzGen(dtB, elems, dict, 3), false)
		var err error
		if wrapA {
			a, err = a.AsWrappedNumber()
			require.NoError(t, err)
		}
		if wrapB {
			b, err = b.AsWrappedNumber()
			require.NoError(t, err)
		}
		aBits, bBits := a.Bits(), b.Bits()
		msg := fmt.Sprintf("%s(%v%v strides %v off %d, %v%v strides %v off %d) wrap a=%v b=%v",
			op.name, dtA, sa, a.Strides(), a.Offset(), dtB, sb, b.Strides(), b.Offset(), wrapA, wrapB)
		t.Log(msg)

		// independent expectations: result dtype, shape, error
		var rd dtype.Dtype
		switch {
		case wrapB:
			rd = dtype.PromoteScalar(dtA, dtB.Category())
		case wrapA:
			rd = dtype.PromoteScalar(dtB, dtA.Category())
		default:
			rd = dtype.Promote(dtA, dtB)
		}
		if op.name == "div" && !rd.IsFloat() {
			rd = dtype.Float32
		}
		outShape, ok := fzBroadcastModel(sa, sb)
		boolSub := op.name == "sub" && rd == dtype.Bool
		wantErr := !ok || boolSub

		want, refErr := op.fn(&ops.Context{Backend: fzRef}, a, b)
		if wantErr {
			require.Error(t, refErr, msg)
			if !ok && !(boolSub && errs.KindOf(refErr) == errs.Type) { // either problem may be reported
				require.Equal(t, errs.Value, errs.KindOf(refErr), msg)
				require.Contains(t, refErr.Error(), tensor.FormatShape(sa), msg)
				require.Contains(t, refErr.Error(), tensor.FormatShape(sb), msg)
			} else {
				require.Equal(t, errs.Type, errs.KindOf(refErr), msg)
			}
		} else {
			require.NoError(t, refErr, msg)
			require.Equal(t, rd, want.Dtype(), msg)
			require.True(t, tensor.SameShape(outShape, want.Shape()), "shape %v, want %v: %s", want.Shape(), outShape, msg)
			require.True(t, want.IsContiguous(), msg)
		}
		for _, cb := range fzCPUs {
			got, err := op.fn(&ops.Context{Backend: cb}, a, b)
			if refErr != nil {
				require.Error(t, err, "cpu(%d) succeeds where ref fails with %v: %s", cb.Threads(), refErr, msg)
				require.Equal(t, errs.KindOf(refErr), errs.KindOf(err), msg)
				continue
			}
			require.NoError(t, err, "cpu(%d): %s", cb.Threads(), msg)
			fzSame(t, want, got, !op.minmax, fmt.Sprintf("cpu(%d) vs ref: %s", cb.Threads(), msg))
		}
		if refErr != nil {
			return
		}

		// Same-dtype oracle, from the element bits of the views themselves.
		if dtA == dtB && !(op.name == "div" && !dtA.IsFloat()) {
			ab, bb := a.Bits(), b.Bits()
			exp := make([]uint64, fzNumel(outShape))
			for i := range exp {
				x, y := ab[fzBroadcastIndex(outShape, sa, i)], bb[fzBroadcastIndex(outShape, sb, i)]
				if op.minmax {
					if fzAWins(dtA, op.name == "maximum", x, y) {
						exp[i] = x
					} else {
						exp[i] = y
					}
				} else {
					exp[i] = fzArith(op.name, dtA, x, y)
				}
			}
			fzSameBits(t, rd, exp, want.Bits(), !op.minmax, "oracle vs ref: "+msg)
		}

		if withGrad && rd.IsFloat() {
			fzCheckGrads(t, op, a, b, sa, sb, outShape, msg)
		}
		// inputs are never written
		require.Equal(t, aBits, a.Bits(), "input a changed: "+msg)
		require.Equal(t, bBits, b.Bits(), "input b changed: "+msg)
	})
}

// fzCheckGrads runs sum(op(a, b)).backward() on cpu and on ref and compares
// the gradients of the floating inputs; for minimum/maximum of one dtype the
// gradient is also the rounded count of output positions each element won.
func fzCheckGrads(t *testing.T, op fzOp, a, b *tensor.Tensor, sa, sb, outShape []int, msg string) {
	var leaves []*tensor.Tensor
	for _, x := range []*tensor.Tensor{a, b} {
		if x.Dtype().IsFloat() {
			require.NoError(t, x.SetRequiresGrad(true))
			leaves = append(leaves, x)
		}
	}
	if len(leaves) == 0 {
		return
	}
	run := func(be kernels) []*tensor.Tensor {
		c := &ops.Context{Backend: be, GradEnabled: true}
		for _, l := range leaves {
			l.SetGrad(nil)
		}
		y, err := op.fn(c, a, b)
		require.NoError(t, err, msg)
		loss, err := ops.Sum(c, y, nil, false)
		require.NoError(t, err, msg)
		require.NoError(t, ops.Backward(c, []*tensor.Tensor{loss}, nil, false, false), msg)
		gs := make([]*tensor.Tensor, len(leaves))
		for i, l := range leaves {
			gs[i] = l.Grad()
			require.NotNil(t, gs[i], "no gradient reached input %d: %s", i, msg)
			require.Equal(t, l.Dtype(), gs[i].Dtype(), "gradient dtype: %s", msg)
			require.True(t, tensor.SameShape(l.Shape(), gs[i].Shape()), "gradient shape %v for input %v: %s", gs[i].Shape(), l.Shape(), msg)
		}
		return gs
	}
	want := run(fzRef)
	for _, cb := range fzCPUs[:2] {
		got := run(cb)
		for i := range want {
			fzSame(t, want[i], got[i], !op.minmax, fmt.Sprintf("grad %d cpu(%d) vs ref: %s", i, cb.Threads(), msg))
		}
	}
	if !op.minmax || a.Dtype() != b.Dtype() || len(leaves) != 2 {
		return
	}
	dt := a.Dtype()
	ab, bb := a.Bits(), b.Bits()
	winsA, winsB := make([]float64, fzNumel(sa)), make([]float64, fzNumel(sb))
	for i := 0; i < fzNumel(outShape); i++ {
		ia, ib := fzBroadcastIndex(outShape, sa, i), fzBroadcastIndex(outShape, sb, i)
		if fzAWins(dt, op.name == "maximum", ab[ia], bb[ib]) {
			winsA[ia]++
		} else {
			winsB[ib]++
		}
	}
	for k, wins := range [][]float64{winsA, winsB} {
		exp := make([]uint64, len(wins))
		for i, w := range wins {
			exp[i] = fzEncode(dt, w)
		}
		fzSameBits(t, dt, exp, want[k].Bits(), false, fmt.Sprintf("gradient %d = win counts: %s", k, msg))
	}
}

// --------------------------------------------------------------- sum target

// fzSumModel sums a over the reduced dims red in the canonical order that
// package backend documents (blocks of SumBlock, SumLanes lanes from -0.0,
// pairwise lane combination, blocks added left to right to a total from
// -0.0; an empty sum is +0), accumulating in float32 or float64.
func fzSumModel(dt dtype.Dtype, bits []uint64, shape []int, red []bool, f32 bool) []float64 {
	outShape := make([]int, len(shape))
	for i, d := range shape {
		outShape[i] = d
		if red[i] {
			outShape[i] = 1
		}
	}
	nOut := fzNumel(outShape)
	groups := make([][]float64, nOut)
	pos := make([]int, len(shape))
	for flat := range fzNumel(shape) {
		o := 0
		for i := range shape {
			p := pos[i]
			if red[i] {
				p = 0
			}
			o = o*outShape[i] + p
		}
		groups[o] = append(groups[o], fzFloat(dt, bits[flat]))
		for i := len(pos) - 1; i >= 0; i-- {
			pos[i]++
			if pos[i] < shape[i] {
				break
			}
			pos[i] = 0
		}
	}
	out := make([]float64, nOut)
	negZero := math.Copysign(0, -1)
	for o, g := range groups {
		if len(g) == 0 {
			continue // +0
		}
		if f32 {
			total := float32(negZero)
			for s := 0; s < len(g); s += backend.SumBlock {
				var l [backend.SumLanes]float32
				for j := range l {
					l[j] = float32(negZero)
				}
				for k, v := range g[s:min(len(g), s+backend.SumBlock)] {
					l[k%backend.SumLanes] += float32(v)
				}
				total += ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
			}
			out[o] = float64(total)
			continue
		}
		total := negZero
		for s := 0; s < len(g); s += backend.SumBlock {
			var l [backend.SumLanes]float64
			for j := range l {
				l[j] = negZero
			}
			for k, v := range g[s:min(len(g), s+backend.SumBlock)] {
				l[k%backend.SumLanes] += v
			}
			total += ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
		}
		out[o] = total
	}
	return out
}

// FuzzSumDims: Sum or Mean over random dims of a random view.
//
//	dims   for each of 4 dims: bit 4i includes dim i, bit 4i+1 spells it
//	       negative; bit 16 repeats the first dim, bit 17 adds an
//	       out-of-range dim (both errors)
//	flags  bit0 all dims (dims = nil); bit1 keepdim; bit2 Mean; bit3
//	       dictionary elements; bit4 leading dim of 2100 (crosses SumBlock)
func FuzzSumDims(f *testing.F) {
	f.Add(uint8(8), uint32(0x0249), uint64(0), uint32(0x1), uint8(8), []byte{0, 1, 3, 9, 10})
	f.Add(uint8(9), uint32(0x2d4b), uint64(0x2d), uint32(0x11), uint8(2), []byte{1, 2, 3})
	f.Add(uint8(6), uint32(0x0cb2), uint64(0x7), uint32(0x3), uint8(0x1c), []byte{2, 4, 1})
	f.Add(uint8(5), uint32(0x049a), uint64(0x1234), uint32(0x101), uint8(0x11), []byte{0xff, 0x7f, 0x80})
	f.Add(uint8(7), uint32(0x6dad), uint64(0xf1), uint32(0x10005), uint8(0), []byte{1})
	f.Add(uint8(0), uint32(0x0049), uint64(0), uint32(0x20000), uint8(0), []byte{1, 0})
	f.Add(uint8(9), uint32(0x0004), uint64(0x3), uint32(0x1), uint8(0x1d), []byte{9, 10, 13})
	f.Fuzz(func(t *testing.T, dtSel uint8, shapeBits uint32, lay uint64, dimBits uint32, flags uint8, elems []byte) {
		dt := fzDtypes[int(dtSel)%len(fzDtypes)]
		r := &fzBits{uint64(shapeBits)}
		nd := r.take(3) % 5
		var shape []int
		for range nd {
			shape = append(shape, fzDims[r.take(3)])
		}
		big := flags&16 != 0
		if big {
			shape = append([]int{fzBigDim}, shape...)
		}
		x := fzView(t, dt, shape, lay, fzGen(dt, elems, flags&8 != 0, 0), big)
		n := len(shape)

		var dims []int
		red := make([]bool, n)
		wantErr := false
		if flags&1 != 0 {
			for i := range red {
				red[i] = true
			}
		} else {
			dims = []int{}
			db := &fzBits{uint64(dimBits)}
			for i := 0; i < 4; i++ {
				inc, neg := db.take(1) == 1, db.take(1) == 1
				db.take(2)
				if inc && i < n {
					d := i
					if neg {
						d -= n
					}
					dims = append(dims, d)
					red[i] = true
				}
			}
			if db.take(1) == 1 && len(dims) > 0 {
				dims = append(dims, dims[0]-n*fzSign(dims[0]))
				wantErr = true
			}
			if db.take(1) == 1 {
				dims = append(dims, n+int(dimBits>>20)%3)
				wantErr = true
			}
		}
		keepdim := flags&2 != 0
		mean := flags&4 != 0
		if mean && !dt.IsFloat() {
			wantErr = true
		}
		opName := "sum"
		call := func(be kernels) (*tensor.Tensor, error) {
			if mean {
				return ops.Mean(&ops.Context{Backend: be}, x, dims, keepdim)
			}
			return ops.Sum(&ops.Context{Backend: be}, x, dims, keepdim)
		}
		if mean {
			opName = "mean"
		}
		msg := fmt.Sprintf("%s(%v%v strides %v off %d, dims %v, keepdim %v)", opName, dt, shape, x.Strides(), x.Offset(), dims, keepdim)
		t.Log(msg)

		want, refErr := call(fzRef)
		if wantErr {
			require.Error(t, refErr, msg)
			if mean && !dt.IsFloat() {
				require.Equal(t, errs.Type, errs.KindOf(refErr), msg)
			} else {
				require.Equal(t, errs.Value, errs.KindOf(refErr), msg)
			}
		} else {
			require.NoError(t, refErr, msg)
		}
		for _, cb := range []*cpu.Backend{fzCPUs[0], fzCPUs[1], splitting(7)} {
			got, err := call(cb)
			if refErr != nil {
				require.Error(t, err, "cpu(%d): %s", cb.Threads(), msg)
				require.Equal(t, errs.KindOf(refErr), errs.KindOf(err), msg)
				continue
			}
			require.NoError(t, err, "cpu(%d): %s", cb.Threads(), msg)
			// the canonical order makes sums bit-identical; only NaN
			// payloads may depend on operand order inside one addition
			fzSame(t, want, got, true, fmt.Sprintf("cpu(%d) vs ref: %s", cb.Threads(), msg))
		}
		if refErr != nil {
			return
		}

		// independent expectations
		var outShape []int
		count := 1
		for i, d := range shape {
			if red[i] {
				count *= d
				if keepdim {
					outShape = append(outShape, 1)
				}
			} else {
				outShape = append(outShape, d)
			}
		}
		require.True(t, tensor.SameShape(outShape, want.Shape()), "shape %v, want %v: %s", want.Shape(), outShape, msg)
		bits := x.Bits()
		switch {
		case !dt.IsFloat():
			require.Equal(t, dtype.Int64, want.Dtype(), msg)
			exp := make([]uint64, fzNumel(outShape))
			outIdx := fzReduceIndex(shape, red)
			for i, b := range bits {
				exp[outIdx(i)] += uint64(fzInt(dt, b)) // wrapping int64 sum, any order
			}
			fzSameBits(t, dtype.Int64, exp, want.Bits(), false, "int sum oracle: "+msg)
		default:
			require.Equal(t, dt, want.Dtype(), msg)
			f32 := dt != dtype.Float64
			sums := fzSumModel(dt, bits, shape, red, f32)
			exp := make([]uint64, len(sums))
			for i, s := range sums {
				if mean {
					if f32 {
						s = float64(float32(s) / float32(count))
					} else {
						s /= float64(count)
					}
				}
				exp[i] = fzEncode(dt, s)
			}
			fzSameBits(t, dt, exp, want.Bits(), true, "canonical-order oracle: "+msg)
		}
	})
}

func fzSign(x int) int {
	if x < 0 {
		return -1
	}
	return 1
}

// fzReduceIndex maps a row-major input index to its output's index.
func fzReduceIndex(shape []int, red []bool) func(int) int {
	return func(flat int) int {
		pos := make([]int, len(shape))
		for d := len(shape) - 1; d >= 0; d-- {
			pos[d] = flat % shape[d]
			flat /= shape[d]
		}
		o := 0
		for d, n := range shape {
			if red[d] {
				continue
			}
			o = o*n + pos[d]
		}
		return o
	}
}

// --------------------------------------------------------- broadcast shapes

// fzShapeDim decodes one dim: small sizes mostly, then negatives and huge
// powers of two (for int64 overflow of the element count).
func fzShapeDim(c byte) int {
	switch {
	case c < 200:
		return []int{0, 1, 1, 2, 3, 4, 5, 1}[c%8]
	case c < 215:
		return -int(c - 199)
	case c < 225:
		return math.MinInt + int(c-215)
	case c < 250:
		return 1 << (20 + 2*int(c-225)%43)
	}
	return math.MaxInt - int(c-250)
}

// FuzzBroadcastShapes: data = [len a][len b][dims of a...][dims of b...];
// a length byte >= 200 adds 60 extra leading ones (toward MaxDims).
func FuzzBroadcastShapes(f *testing.F) {
	f.Add([]byte{2, 1, 3, 4, 4})
	f.Add([]byte{2, 2, 3, 4, 5, 4})
	f.Add([]byte{3, 2, 0, 1, 5, 1, 5})
	f.Add([]byte{2, 2, 250, 1, 1, 3})
	f.Add([]byte{1, 2, 245, 1, 245})
	f.Add([]byte{1, 1, 201, 3})
	f.Add([]byte{0, 0})
	f.Add([]byte{203, 3, 2, 1, 1, 2, 2})
	f.Add([]byte{2, 2, 0, 250, 250, 1})
	f.Add([]byte{1, 2, 216, 3, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		na, nb := int(data[0]), int(data[1])
		extraA, extraB := na >= 200, nb >= 200
		na, nb = na%7, nb%7
		rest := data[2:]
		dim := func(i int) int {
			if i < len(rest) {
				return fzShapeDim(rest[i])
			}
			return 1
		}
		var a, b []int
		if extraA {
			a = make([]int, 60)
			for i := range a {
				a[i] = 1
			}
		}
		if extraB {
			b = make([]int, 60)
			for i := range b {
				b[i] = 1
			}
		}
		for i := 0; i < na; i++ {
			a = append(a, dim(i))
		}
		for i := 0; i < nb; i++ {
			b = append(b, dim(na+i))
		}
		a0, b0 := append([]int(nil), a...), append([]int(nil), b...)

		var got []int
		var err error
		require.NotPanics(t, func() { got, err = tensor.BroadcastShapes(a, b) })
		require.Equal(t, a0, a, "BroadcastShapes modified its input")
		require.Equal(t, b0, b, "BroadcastShapes modified its input")
		var got2 []int
		var err2 error
		require.NotPanics(t, func() { got2, err2 = tensor.BroadcastShapes(b, a) })

		negative := false
		for _, d := range append(append([]int(nil), a...), b...) {
			negative = negative || d < 0
		}
		out, compatible := fzBroadcastModel(a, b)
		var tooBig bool
		if compatible {
			count, zero := big.NewInt(1), false
			for _, d := range out {
				zero = zero || d == 0
				count.Mul(count, big.NewInt(int64(d)))
			}
			tooBig = len(out) > tensor.MaxDims || (!zero && !count.IsInt64())
		}
		msg := fmt.Sprintf("BroadcastShapes(%v, %v)", a, b)
		if compatible && !tooBig {
			require.NoError(t, err, msg)
			require.NoError(t, err2, msg)
			require.True(t, tensor.SameShape(out, got), "%s = %v, want %v", msg, got, out)
			require.True(t, tensor.SameShape(out, got2), "reversed %s = %v, want %v", msg, got2, out)
			return
		}
		require.Error(t, err, "%s = %v, want an error", msg, got)
		require.Error(t, err2, "reversed %s = %v, want an error", msg, got2)
		for _, e := range []error{err, err2} {
			require.Equal(t, errs.Value, errs.KindOf(e), msg)
			text := e.Error()
			switch {
			case negative || !compatible:
				// both shapes named, as Python tuples or Go slices
				for _, s := range [][]int{a, b} {
					require.True(t, strings.Contains(text, tensor.FormatShape(s)) || strings.Contains(text, fmt.Sprint(s)),
						"error %q does not name shape %v", text, s)
				}
				require.True(t, strings.Contains(text, "negative") || strings.Contains(text, "broadcast"), "error %q: %s", text, msg)
			default:
				require.True(t, strings.Contains(text, "int64") || strings.Contains(text, "dims"), "overflow error %q: %s", text, msg)
			}
		}
	})
}
