package tests_go

// Shared helpers for the black-box tests: backends and contexts, seeded data
// generators, tensors in several memory layouts, bit-level comparisons, a
// NumPy-style broadcasting oracle and central finite differences.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// ---- backends and contexts ----

var (
	cpuBackend kernels = splitting(4)
	refBackend kernels = ref.Backend{}
)

// splitting returns a cpu backend with n threads that splits all work of
// cpu.MinParallel elements or more (by default mid-size work is split only
// while a helper is awake, which depends on timing): tests then always take
// the parallel paths above the threshold.
func splitting(n int) *cpu.Backend {
	b := cpu.New(n)
	b.SetAlwaysSplit(true)
	return b
}

// kernels is a backend with every optional capability of the min/max
// family (backend.Selector, Reducer, Clamper), as the cpu and ref backends
// have: the tests call those kernels directly.
type kernels interface {
	backend.IBackend
	backend.Selector
	backend.Reducer
	backend.Clamper
}

// ctxFor returns a context recording gradients on backend b.
func ctxFor(b backend.IBackend) *ops.Context {
	return &ops.Context{Backend: b, GradEnabled: true}
}

// allDtypes lists every dtype the table sweeps.
var allDtypes = []dtype.Dtype{
	dtype.Bool, dtype.Uint8, dtype.Int8, dtype.Int16, dtype.Int32, dtype.Int64,
	dtype.Float16, dtype.BFloat16, dtype.Float32, dtype.Float64,
}

// floatDtypes lists the floating dtypes.
var floatDtypes = []dtype.Dtype{dtype.Float16, dtype.BFloat16, dtype.Float32, dtype.Float64}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// ---- raw bits ----

// putBits writes the raw bit pattern b to the element of dtype dt at p.
func putBits(dt dtype.Dtype, p unsafe.Pointer, b uint64) {
	switch dt.Size() {
	case 1:
		*(*uint8)(p) = uint8(b)
	case 2:
		*(*uint16)(p) = uint16(b)
	case 4:
		*(*uint32)(p) = uint32(b)
	default:
		*(*uint64)(p) = b
	}
}

// fillBits writes bits (row-major logical order) into every element of t,
// which may be any view (not zero-stride) of memory the test owns.
func fillBits(t *tensor.Tensor, bits []uint64) {
	if len(bits) != t.Numel() {
		panic(fmt.Sprintf("fillBits: %d values for %d elements", len(bits), t.Numel()))
	}
	for i, b := range bits {
		putBits(t.Dtype(), t.ElementPointer(i), b)
	}
}

// isNaNBits reports whether b is a NaN of floating dtype dt.
func isNaNBits(dt dtype.Dtype, b uint64) bool {
	switch dt {
	case dtype.Float16:
		return b&0x7c00 == 0x7c00 && b&0x03ff != 0
	case dtype.BFloat16:
		return b&0x7f80 == 0x7f80 && b&0x007f != 0
	case dtype.Float32:
		return math.IsNaN(float64(math.Float32frombits(uint32(b))))
	case dtype.Float64:
		return math.IsNaN(math.Float64frombits(b))
	}
	return false
}

// bitsOfFloat returns the bits of f rounded to floating dtype dt.
func bitsOfFloat(dt dtype.Dtype, f float64) uint64 {
	switch dt {
	case dtype.Float16:
		return uint64(dtype.Float64ToFloat16(f))
	case dtype.BFloat16:
		return uint64(dtype.Float64ToBFloat16(f))
	case dtype.Float32:
		return uint64(math.Float32bits(float32(f)))
	case dtype.Float64:
		return math.Float64bits(f)
	}
	panic("bitsOfFloat: not a float dtype " + dt.String())
}

// nanBits returns a quiet NaN of dt with the given small payload and sign.
func nanBits(dt dtype.Dtype, payload uint64, negative bool) uint64 {
	var b uint64
	switch dt {
	case dtype.Float16:
		b = 0x7e00 | (payload & 0x1ff)
		if negative {
			b |= 0x8000
		}
	case dtype.BFloat16:
		b = 0x7fc0 | (payload & 0x3f)
		if negative {
			b |= 0x8000
		}
	case dtype.Float32:
		b = 0x7fc00000 | (payload & 0x3fffff)
		if negative {
			b |= 0x80000000
		}
	case dtype.Float64:
		b = 0x7ff8000000000000 | (payload & 0x7ffffffffffff)
		if negative {
			b |= 1 << 63
		}
	default:
		panic("nanBits: not a float dtype")
	}
	return b
}

// ---- data generators ----

// genKind selects the distribution of generated values.
type genKind int

const (
	// genSpecial mixes ties, ±0, NaN (various payloads), ±Inf, random bit
	// patterns and ordinary values.
	genSpecial genKind = iota
	// genNormal gives finite ordinary values (no NaN/Inf), with some ties.
	genNormal
	// genSmooth gives float values in [-2, 2] (for finite differences).
	genSmooth
	// genAwayFromZero gives float values with 0.5 <= |x| <= 2 (denominators).
	genAwayFromZero
)

var tiePool = []float64{-2, -1, math.Copysign(0, -1), 0, 0.5, 1, 3}

// genBits returns n raw element patterns of dtype dt.
func genBits(r *rand.Rand, dt dtype.Dtype, n int, kind genKind) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = genOne(r, dt, kind)
	}
	return out
}

func genOne(r *rand.Rand, dt dtype.Dtype, kind genKind) uint64 {
	if !dt.IsFloat() {
		return genInt(r, dt, kind)
	}
	switch kind {
	case genSmooth:
		return bitsOfFloat(dt, r.Float64()*4-2)
	case genAwayFromZero:
		v := 0.5 + 1.5*r.Float64()
		if r.IntN(2) == 0 {
			v = -v
		}
		return bitsOfFloat(dt, v)
	case genNormal:
		if r.IntN(4) == 0 {
			return bitsOfFloat(dt, tiePool[r.IntN(len(tiePool))])
		}
		return bitsOfFloat(dt, r.NormFloat64()*3)
	}
	switch p := r.IntN(100); {
	case p < 25:
		return bitsOfFloat(dt, tiePool[r.IntN(len(tiePool))])
	case p < 32:
		return nanBits(dt, uint64(r.IntN(7)), r.IntN(2) == 0)
	case p < 37:
		return bitsOfFloat(dt, math.Inf(1-2*r.IntN(2)))
	case p < 42:
		return r.Uint64() // any pattern (subnormals, payloads): putBits truncates
	}
	return bitsOfFloat(dt, r.NormFloat64()*3)
}

func genInt(r *rand.Rand, dt dtype.Dtype, kind genKind) uint64 {
	if dt == dtype.Bool {
		return uint64(r.IntN(2))
	}
	if kind != genSpecial || r.IntN(3) == 0 {
		return uint64(int64(r.IntN(7) - 3)) // small values: ties, wrap-free
	}
	return r.Uint64() // any pattern: truncated to the dtype's width by putBits
}

// ---- layouts ----

// layout is how a test tensor's elements are placed in memory.
type layout int

const (
	contiguous layout = iota
	permuted          // a transposed view of a larger tensor (offset, interleaved strides)
	negStep           // reversed views (step -2 on the last dim, -1 on the first)
	zeroStride        // BroadcastTo of a smaller tensor
)

var allLayouts = []layout{contiguous, permuted, negStep, zeroStride}

func (l layout) String() string {
	return [...]string{"contiguous", "permuted", "negstep", "zerostride"}[l]
}

// makeTensor returns a tensor of logical shape shape and dtype dt laid out as
// l, filled from gen (called with the number of distinct elements needed).
func makeTensor(t testing.TB, dt dtype.Dtype, shape []int, l layout, gen func(n int) []uint64) *tensor.Tensor {
	t.Helper()
	nd := len(shape)
	if nd == 0 {
		l = contiguous
	}
	switch l {
	case permuted:
		// base has shape (reversed shape..., 2); view it as (2, shape...) by
		// reversing all dims, take index 1 of the leading dim, drop it.
		base := make([]int, 0, nd+1)
		for i := nd - 1; i >= 0; i-- {
			base = append(base, shape[i])
		}
		base = append(base, 2)
		bt, err := tensor.New(dt, base)
		require.NoError(t, err)
		perm := make([]int, nd+1)
		for i := range perm {
			perm[i] = nd - i
		}
		v, err := bt.Permute(perm...)
		require.NoError(t, err)
		v, err = v.Slice(0, 1, 2, 1)
		require.NoError(t, err)
		v, err = v.Reshape(shape)
		require.NoError(t, err)
		fillBits(v, gen(v.Numel()))
		return v
	case negStep:
		base := append([]int(nil), shape...)
		base[nd-1] *= 2
		bt, err := tensor.New(dt, base)
		require.NoError(t, err)
		v, err := bt.Slice(nd-1, -1, -base[nd-1]-1, -2)
		require.NoError(t, err)
		if nd >= 2 {
			v, err = v.Slice(0, -1, -base[0]-1, -1)
			require.NoError(t, err)
		}
		require.Equal(t, shape, v.Shape())
		fillBits(v, gen(v.Numel()))
		return v
	case zeroStride:
		small := append([]int(nil), shape...)
		k := 0
		for k < nd && small[k] == 1 {
			k++
		}
		if k == nd {
			small = small[1:] // (1,) from (): a zero stride on a size-1 dim
		} else {
			small[k] = 1
		}
		st, err := tensor.New(dt, small)
		require.NoError(t, err)
		fillBits(st, gen(st.Numel()))
		v, err := st.BroadcastTo(shape)
		require.NoError(t, err)
		return v
	}
	c, err := tensor.New(dt, shape)
	require.NoError(t, err)
	fillBits(c, gen(c.Numel()))
	return c
}

// contiguousCopy returns a contiguous clone of t's logical elements.
func contiguousCopy(t testing.TB, x *tensor.Tensor) *tensor.Tensor {
	t.Helper()
	c, err := x.Clone()
	require.NoError(t, err)
	require.True(t, c.IsContiguous())
	return c
}

// leaf returns x marked as requiring grad.
func leaf(t testing.TB, x *tensor.Tensor) *tensor.Tensor {
	t.Helper()
	require.NoError(t, x.SetRequiresGrad(true))
	return x
}

// f64 returns a contiguous float64 tensor.
func f64(t testing.TB, shape []int, vals ...float64) *tensor.Tensor {
	t.Helper()
	x, err := tensor.FromFloat64s(dtype.Float64, shape, vals)
	require.NoError(t, err)
	return x
}

// fromVals returns a contiguous tensor of dt holding vals.
func fromVals(t testing.TB, dt dtype.Dtype, shape []int, vals ...float64) *tensor.Tensor {
	t.Helper()
	x, err := tensor.FromFloat64s(dt, shape, vals)
	require.NoError(t, err)
	return x
}

// ---- comparisons ----

// bitsEqual compares two tensors element by element. With nanAny, two NaNs
// are equal whatever their payloads. It returns "" or a description of the
// first difference.
func bitsEqual(want, got *tensor.Tensor, nanAny bool) string {
	if want.Dtype() != got.Dtype() {
		return fmt.Sprintf("dtype %v != %v", got.Dtype(), want.Dtype())
	}
	if !tensor.SameShape(want.Shape(), got.Shape()) {
		return fmt.Sprintf("shape %v != %v", got.Shape(), want.Shape())
	}
	wb, gb := want.Bits(), got.Bits()
	for i := range wb {
		if wb[i] == gb[i] {
			continue
		}
		if nanAny && isNaNBits(want.Dtype(), wb[i]) && isNaNBits(want.Dtype(), gb[i]) {
			continue
		}
		return fmt.Sprintf("element %d: bits %#x != %#x (values %v vs %v)", i, gb[i], wb[i],
			tensor.LoadFloat64(got.Dtype(), got.ElementPointer(i)), tensor.LoadFloat64(want.Dtype(), want.ElementPointer(i)))
	}
	return ""
}

// requireBitsEqual fails unless got equals want bit for bit (NaN payloads
// may differ when nanAny).
func requireBitsEqual(t testing.TB, want, got *tensor.Tensor, nanAny bool, msgAndArgs ...any) {
	t.Helper()
	require.NotNil(t, got, msgAndArgs...)
	if d := bitsEqual(want, got, nanAny); d != "" {
		require.Fail(t, "tensors differ: "+d, msgAndArgs...)
	}
}

// requireShape fails unless got equals want (nil and empty both mean 0-d).
func requireShape(t testing.TB, want, got []int, msgAndArgs ...any) {
	t.Helper()
	if !slices.Equal(want, got) {
		require.Failf(t, "shapes differ", "got %v, want %v %s", got, want, fmt.Sprint(msgAndArgs...))
	}
}

// requireClose fails unless |got-want| <= atol + rtol*|want| elementwise.
func requireClose(t testing.TB, want, got []float64, atol, rtol float64, msgAndArgs ...any) {
	t.Helper()
	require.Len(t, got, len(want), msgAndArgs...)
	for i := range want {
		if math.IsNaN(want[i]) && math.IsNaN(got[i]) {
			continue
		}
		if want[i] == got[i] {
			continue
		}
		if math.Abs(got[i]-want[i]) > atol+rtol*math.Abs(want[i]) {
			require.Failf(t, "values differ", "element %d: got %v, want %v (atol %g, rtol %g) %s",
				i, got[i], want[i], atol, rtol, fmt.Sprint(msgAndArgs...))
		}
	}
}

// ---- broadcasting oracle ----

// npBroadcast is NumPy's broadcast of two shapes, written independently of
// the library (ok false when they do not broadcast).
func npBroadcast(a, b []int) ([]int, bool) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db:
			out[i] = da
		case da == 1:
			out[i] = db
		case db == 1:
			out[i] = da
		default:
			return nil, false
		}
	}
	return out, true
}

// srcIndex maps the row-major index i of shape out to the row-major index of
// the element of in (broadcast to out) that it reads.
func srcIndex(out, in []int, i int) int {
	lead := len(out) - len(in)
	idx, mul := 0, 1
	for d := len(out) - 1; d >= 0; d-- {
		c := i % out[d]
		i /= out[d]
		if d >= lead {
			k := d - lead
			if in[k] != 1 {
				idx += c * mul
			}
			mul *= in[k]
		}
	}
	return idx
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// ---- finite differences ----

// centralDiff returns dL/dx_k of the scalar function L for every element of
// the float64 vectors in xs, by central differences with step eps.
func centralDiff(xs [][]float64, eps float64, L func(xs [][]float64) float64) [][]float64 {
	out := make([][]float64, len(xs))
	for j, x := range xs {
		out[j] = make([]float64, len(x))
		for k := range x {
			orig := x[k]
			x[k] = orig + eps
			hi := L(xs)
			x[k] = orig - eps
			lo := L(xs)
			x[k] = orig
			out[j][k] = (hi - lo) / (2 * eps)
		}
	}
	return out
}

// dot returns sum_i a_i*b_i.
func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// sumT returns the sum of all elements of x as a 0-d tensor (recorded).
func sumT(t testing.TB, c *ops.Context, x *tensor.Tensor) *tensor.Tensor {
	t.Helper()
	s, err := ops.Sum(c, x, nil, false)
	require.NoError(t, err)
	return s
}

// must returns a function that checks err and returns x, so that
// must(t)(ops.Minimum(c, a, b)) reads like a plain call.
func must(t testing.TB) func(x *tensor.Tensor, err error) *tensor.Tensor {
	return func(x *tensor.Tensor, err error) *tensor.Tensor {
		t.Helper()
		require.NoError(t, err)
		require.NotNil(t, x)
		return x
	}
}

func ts(xs ...*tensor.Tensor) []*tensor.Tensor { return xs }
