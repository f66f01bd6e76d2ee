package tests_go

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// Benchmarks of the min/max family's kernels: go test -run x -bench MinMax
// ./tests_go (add GOEXPERIMENT=simd for the AVX2 paths). SetBytes counts the
// bytes each kernel must read and write, so MB/s compares with the memory
// bandwidth. "loop" is a plain sequential Go loop doing the same work, for
// comparison.

func benchRandom(b *testing.B, dt dtype.Dtype, shape []int) *tensor.Tensor {
	t, err := tensor.Empty(dt, shape)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	if dt == dtype.Float32 {
		for i, p := 0, f32view(t); i < len(p); i++ {
			p[i] = float32(r.NormFloat64())
		}
	}
	return t
}

func BenchmarkMinMaxArgReduce(b *testing.B) {
	const n = 4096
	a := benchRandom(b, dtype.Float32, []int{n, n})
	at := must(b)(a.Transpose(0, 1)) // dim 1 of the transpose is dim 0 of a
	for _, threads := range []int{1, 2} {
		be := cpu.New(threads)
		for _, c := range []struct {
			name string
			keep []int
			a    *tensor.Tensor
		}{{"dim1", []int{n, 1}, a}, {"dim0", []int{1, n}, a}, {"all", []int{1, 1}, a}, {"transposed-dim1", []int{n, 1}, at}} {
			b.Run(fmt.Sprintf("argmax/%s/float32/%dx%d/threads=%d", c.name, n, n, threads), func(b *testing.B) {
				idx := must(b)(tensor.Empty(dtype.Int64, c.keep))
				vals := must(b)(tensor.Empty(dtype.Float32, c.keep))
				b.SetBytes(4 * n * n)
				for i := 0; i < b.N; i++ {
					if err := be.ArgReduce(backend.RuleMax, vals, idx, c.a); err != nil {
						b.Fatal(err)
					}
				}
			})
			// amax without a gradient: values only (no positions)
			b.Run(fmt.Sprintf("amax/%s/float32/%dx%d/threads=%d", c.name, n, n, threads), func(b *testing.B) {
				vals := must(b)(tensor.Empty(dtype.Float32, c.keep))
				b.SetBytes(4 * n * n)
				for i := 0; i < b.N; i++ {
					if err := be.ArgReduce(backend.RuleMax, vals, nil, c.a); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.Run(fmt.Sprintf("loop/argmax/all/float32/%dx%d", n, n), func(b *testing.B) {
		x := f32view(a)
		b.SetBytes(4 * n * n)
		for i := 0; i < b.N; i++ {
			best, pos := x[0], 0
			for j, v := range x {
				if v > best || v != v {
					best, pos = v, j
					if v != v {
						break
					}
				}
			}
			sinkInt = pos
		}
	})
}

var sinkInt int

// f32view is the float32 memory of a contiguous tensor.
func f32view(t *tensor.Tensor) []float32 { return unsafe.Slice((*float32)(t.DataPointer()), t.Numel()) }

func BenchmarkMinMaxClamp(b *testing.B) {
	const n = 1 << 24
	x := benchRandom(b, dtype.Float32, []int{n})
	g := benchRandom(b, dtype.Float32, []int{n})
	lo := must(b)(must(b)(tensor.Scalar(dtype.Float32, -0.5)).BroadcastTo([]int{n}))
	hi := must(b)(must(b)(tensor.Scalar(dtype.Float32, 0.5)).BroadcastTo([]int{n}))
	for _, threads := range []int{1, 2} {
		be := cpu.New(threads)
		b.Run(fmt.Sprintf("clamp/float32/n=%d/threads=%d", n, threads), func(b *testing.B) {
			out := must(b)(tensor.Empty(dtype.Float32, []int{n}))
			b.SetBytes(8 * n)
			for i := 0; i < b.N; i++ {
				if err := be.Clamp(out, x, lo, hi); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("clamproute/float32/n=%d/threads=%d", n, threads), func(b *testing.B) {
			gx := must(b)(tensor.Empty(dtype.Float32, []int{n}))
			glo := must(b)(tensor.Empty(dtype.Float32, []int{n}))
			ghi := must(b)(tensor.Empty(dtype.Float32, []int{n}))
			b.SetBytes(20 * n)
			for i := 0; i < b.N; i++ {
				if err := be.ClampRoute(gx, glo, ghi, x, lo, hi, g); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run(fmt.Sprintf("loop/clamp/float32/n=%d", n), func(b *testing.B) {
		out := f32view(must(b)(tensor.Empty(dtype.Float32, []int{n})))
		xs := f32view(x)
		b.SetBytes(8 * n)
		for i := 0; i < b.N; i++ {
			for j, v := range xs {
				if v < -0.5 {
					v = -0.5
				}
				if v > 0.5 {
					v = 0.5
				}
				out[j] = v
			}
		}
	})
}
