package tests_go

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// Small and boundary sizes straight through the backend interface, cpu vs
// ref bit for bit: every length up to a few SIMD vectors (so every SIMD
// tail length), the segment boundary (2048), with special values (NaN
// payloads, ±0, ±Inf, ties), contiguous or broadcast (0-d expanded) inputs
// and gradients, and strided layouts.
func TestBackendSmallSizesMatchRef(t *testing.T) {
	sizes := []int{0, 1, 2, 3}
	for n := 4; n <= 40; n++ {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, 2047, 2048, 2049, 2048+17)
	rb := ref.Backend{}
	for _, threads := range []int{1, 3} {
		cb := cpu.New(threads)
		for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float64, dtype.Float16, dtype.BFloat16, dtype.Int16, dtype.Bool} {
			r := newRand(seedOf("small", dt.String()))
			gen := func(n int) []uint64 { return genBits(r, dt, n, genSpecial) }
			for _, n := range sizes {
				for _, lb := range []layout{contiguous, zeroStride} {
					for _, lg := range []layout{contiguous, zeroStride} {
						shape := []int{n}
						a := makeTensor(t, dt, shape, contiguous, gen)
						b := makeTensor(t, dt, shape, lb, gen)
						if lb == zeroStride && n > 0 { // one 0-d value seen everywhere
							b = must(t)(makeTensor(t, dt, nil, contiguous, gen).BroadcastTo(shape))
						}
						g := makeTensor(t, dt, shape, lg, gen)
						if lg == zeroStride && n > 0 {
							g = must(t)(makeTensor(t, dt, nil, contiguous, gen).BroadcastTo(shape))
						}
						if n > 3 { // ties, including NaN and ±0 against themselves
							fillBits(b, append(a.Bits()[:n/3], b.Bits()[n/3:]...))
						}
						name := fmt.Sprintf("%v n=%d b=%v g=%v threads=%d", dt, n, lb, lg, threads)
						compareBackends(t, rb, cb, a, b, g, name)
					}
				}
			}
			// strided layouts of a few shapes
			for _, shape := range [][]int{{5, 7}, {3, 1, 9}, {2, 3, 2, 5}} {
				for _, la := range allLayouts {
					for _, lb := range allLayouts {
						a := makeTensor(t, dt, shape, la, gen)
						b := makeTensor(t, dt, shape, lb, gen)
						g := makeTensor(t, dt, shape, allLayouts[(int(la)+int(lb))%len(allLayouts)], gen)
						name := fmt.Sprintf("%v %v a=%v b=%v threads=%d", dt, shape, la, lb, threads)
						compareBackends(t, rb, cb, a, b, g, name)
					}
				}
			}
		}
	}
}

func compareBackends(t *testing.T, rb, cb kernels, a, b, g *tensor.Tensor, name string) {
	t.Helper()
	dt, shape := a.Dtype(), a.Shape()
	fresh := func(dt dtype.Dtype, shape []int) *tensor.Tensor { return must(t)(tensor.Empty(dt, shape)) }
	for _, op := range []backend.BinaryOp{backend.Minimum, backend.Maximum, backend.Add} {
		want, got := fresh(dt, shape), fresh(dt, shape)
		require.NoError(t, rb.Binary(op, want, a, b))
		require.NoError(t, cb.Binary(op, got, a, b))
		requireBitsEqual(t, want, got, op == backend.Add, "%s: %v", name, op)
	}
	for r := range backend.Rule(backend.NumRules) { // min, max, fmin, fmax
		want, got := fresh(dt, shape), fresh(dt, shape)
		wa, wb, ga, gb := fresh(dt, shape), fresh(dt, shape), fresh(dt, shape), fresh(dt, shape)
		require.NoError(t, rb.Route(r, wa, wb, a, b, g))
		require.NoError(t, cb.Route(r, ga, gb, a, b, g))
		requireBitsEqual(t, wa, ga, false, "%s: route %v grad a", name, r)
		requireBitsEqual(t, wb, gb, false, "%s: route %v grad b", name, r)
		require.NoError(t, rb.Select(r, want, a, b, g, a))
		require.NoError(t, cb.Select(r, got, a, b, g, a))
		requireBitsEqual(t, want, got, false, "%s: select %v", name, r)
	}
	// sums over every subset of dims (keepdim layout)
	sdt := dtype.SumDtype(dt)
	for mask := 0; mask < 1<<len(shape); mask++ {
		os := append([]int(nil), shape...)
		for d := range os {
			if mask&(1<<d) != 0 {
				os[d] = 1
			}
		}
		want, got := fresh(sdt, os), fresh(sdt, os)
		require.NoError(t, rb.Sum(want, a))
		require.NoError(t, cb.Sum(got, a))
		requireBitsEqual(t, want, got, true, "%s: sum to %v", name, os)
	}
}

// An Iter built with perm is the Iter of the permuted view: the same
// coalesced dims, and row by row, from any row on, the offsets of the view's
// elements in row-major order (checked element by element).
func TestTensorIterWithPermMatchesThePermutedView(t *testing.T) {
	r := newRand(12345)
	for it := 0; it < 3000; it++ {
		nd := r.IntN(13) // beyond the inline capacity too
		shape := make([]int, nd)
		for i := range shape {
			shape[i] = []int{1, 1, 2, 3, 4}[r.IntN(5)]
			if it%97 == 0 {
				shape[i] = r.IntN(2)
			}
		}
		nops := 1 + r.IntN(tensor.IterOperands)
		offs := make([]int, nops)
		strides := make([][]int, nops)
		for o := range strides {
			offs[o] = r.IntN(50)
			strides[o] = make([]int, nd)
			cs := tensor.ContiguousStrides(shape)
			for i := range strides[o] {
				switch r.IntN(4) {
				case 0:
					strides[o][i] = 0
				case 1:
					strides[o][i] = r.IntN(21) - 10
				default:
					strides[o][i] = cs[i]
				}
			}
		}
		var perm []int
		pshape, pstrides := shape, strides
		if r.IntN(2) == 0 {
			perm = r.Perm(nd)
			pshape = make([]int, nd)
			pstrides = make([][]int, nops)
			for o := range pstrides {
				pstrides[o] = make([]int, nd)
			}
			for j, i := range perm {
				pshape[j] = shape[i]
				for o := range pstrides {
					pstrides[o][j] = strides[o][i]
				}
			}
		}
		var view, iter tensor.Iter
		view.Reset(pshape, nil, offs, pstrides...)
		iter.Reset(shape, perm, offs, strides...)
		msg := fmt.Sprintf("shape %v perm %v offs %v strides %v", shape, perm, offs, strides)
		vs, vst := tvIterShape(&view)
		is, ist := tvIterShape(&iter)
		require.Equal(t, vs, is, msg)
		require.Equal(t, vst, ist, msg)
		numel := 1
		for _, d := range pshape {
			numel *= d
		}
		require.Equal(t, numel, iter.Numel(), msg)
		if numel == 0 {
			continue
		}
		start := r.IntN(iter.Rows())
		var cur tensor.RowCursor
		cur.Seek(&iter, start)
		for row := start; row < min(iter.Rows(), start+64); row++ {
			for k := 0; k < iter.Inner(); k++ {
				e := row*iter.Inner() + k
				for o := 0; o < nops; o++ {
					want, rest := offs[o], e // the view's element e, unravelled row-major
					for i := len(pshape) - 1; i >= 0; i-- {
						want += rest % pshape[i] * pstrides[o][i]
						rest /= pshape[i]
					}
					require.Equal(t, want, cur.Offs[o]+k*iter.InnerStride(o), "element %d operand %d: %s", e, o, msg)
				}
			}
			cur.Next(&iter)
		}
	}
}

// Bool Add, Mul and Sub on bytes of any value (a NumPy bool view of uint8
// memory can hold 2 or 255): cpu (eight bytes a word where contiguous)
// against ref and against the rule restated, "the integer op on the bytes
// is not zero", at every word tail length, past a segment, on strided
// layouts and with the output aliasing an input (a winner mask ANDed in
// place).
func TestBoolArithMatchesRefOnAnyBytes(t *testing.T) {
	r := newRand(seedOf("boolarith"))
	anyByte := func(n int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			if r.IntN(2) == 1 {
				out[i] = uint64(1 + r.IntN(255))
			}
		}
		return out
	}
	rule := map[backend.BinaryOp]func(x, y uint64) bool{
		backend.Add: func(x, y uint64) bool { return x+y != 0 },
		backend.Mul: func(x, y uint64) bool { return x*y != 0 },
		backend.Sub: func(x, y uint64) bool { return x != y },
	}
	sizes := []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 2047, 2048, 2049, 100003}
	rb := ref.Backend{}
	for _, threads := range []int{1, 3} {
		cb := cpu.New(threads)
		for _, n := range sizes {
			for _, la := range []layout{contiguous, permuted, negStep} {
				shape := []int{n}
				if la != contiguous {
					shape = []int{3, (n + 2) / 3}
				}
				for op, holds := range rule {
					a := makeTensor(t, dtype.Bool, shape, la, anyByte)
					b := makeTensor(t, dtype.Bool, shape, contiguous, anyByte)
					want := must(t)(tensor.Empty(dtype.Bool, shape))
					require.NoError(t, rb.Binary(op, want, a, b))
					ab, bb := a.Bits(), b.Bits()
					for i, w := range want.Bits() {
						require.Equal(t, boolBits(holds(ab[i], bb[i])), w, "ref %v at %d", op, i)
					}
					got := must(t)(tensor.Empty(dtype.Bool, shape))
					require.NoError(t, cb.Binary(op, got, a, b))
					requireBitsEqual(t, want, got, false, "%v n=%d %v threads=%d", op, n, la, threads)
					require.NoError(t, cb.Binary(op, a, a, b)) // in place
					requireBitsEqual(t, want, a, false, "%v in place n=%d %v threads=%d", op, n, la, threads)
				}
			}
		}
	}
}

func boolBits(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// Bool arithmetic on contiguous views at every byte offset (the word path
// reads unaligned words) and lengths around a word, cpu against ref; under
// -race, checkptr also checks the kernel makes no pointer past a storage.
func TestBoolArithAtEveryOffset(t *testing.T) {
	r := newRand(seedOf("boolarith offsets"))
	for _, n := range []int{1, 3, 7, 8, 9, 17, 100, 2049, 70001} {
		for off := 0; off < 9; off++ {
			bits, bits2 := make([]uint64, n+16), make([]uint64, n+16)
			for i := range bits {
				bits[i] = uint64(r.IntN(3)) * uint64(r.IntN(200))
				bits2[i] = uint64(r.IntN(2)) * uint64(r.IntN(256))
			}
			A := must(t)(tensor.FromBits(dtype.Bool, []int{n + 16}, bits))
			B := must(t)(tensor.FromBits(dtype.Bool, []int{n + 16}, bits2))
			a := must(t)(tensor.NewView(A.Storage(), dtype.Bool, []int{n}, []int{1}, off))
			b := must(t)(tensor.NewView(B.Storage(), dtype.Bool, []int{n}, []int{1}, (off*3)%7))
			for _, op := range []backend.BinaryOp{backend.Add, backend.Mul, backend.Sub} {
				want := must(t)(tensor.Empty(dtype.Bool, []int{n}))
				require.NoError(t, ref.Backend{}.Binary(op, want, a, b))
				O := must(t)(tensor.Empty(dtype.Bool, []int{n + 16}))
				o := must(t)(tensor.NewView(O.Storage(), dtype.Bool, []int{n}, []int{1}, (off*5)%9))
				require.NoError(t, cpu.New(3).Binary(op, o, a, b))
				requireBitsEqual(t, want, o, false, "op %v n %d off %d", op, n, off)
				exact := must(t)(tensor.New(dtype.Bool, []int{n})) // a storage of exactly n bytes
				require.NoError(t, cpu.Default.Binary(op, exact, a, b))
				requireBitsEqual(t, want, exact, false, "op %v n %d off %d (exact storage)", op, n, off)
			}
		}
	}
}
