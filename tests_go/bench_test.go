package tests_go

import (
	"fmt"
	"testing"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// Kernel benchmarks: go test -run x -bench . ./tests_go (add
// GOEXPERIMENT=simd for the AVX2 paths). SetBytes counts the bytes each
// kernel must move, so MB/s compares with the memory bandwidth.

func benchTensors(b *testing.B, dt dtype.Dtype, n int, k int) []*tensor.Tensor {
	ts := make([]*tensor.Tensor, k)
	for i := range ts {
		t, err := tensor.New(dt, []int{n})
		if err != nil {
			b.Fatal(err)
		}
		ts[i] = t
	}
	return ts
}

func BenchmarkKernels(b *testing.B) {
	for _, threads := range []int{1, 2} {
		be := cpu.New(threads)
		for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float64, dtype.Float16, dtype.BFloat16} {
			for _, n := range []int{1 << 16, 1 << 22} {
				sz := int64(dt.Size())
				name := func(op string) string { return fmt.Sprintf("%s/%v/n=%d/threads=%d", op, dt, n, threads) }
				b.Run(name("minimum"), func(b *testing.B) {
					ts := benchTensors(b, dt, n, 3)
					b.SetBytes(3 * sz * int64(n))
					for i := 0; i < b.N; i++ {
						if err := be.Binary(backend.Minimum, ts[0], ts[1], ts[2]); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(name("route"), func(b *testing.B) {
					ts := benchTensors(b, dt, n, 5)
					b.SetBytes(5 * sz * int64(n))
					for i := 0; i < b.N; i++ {
						if err := be.Route(backend.RuleMin, ts[0], ts[1], ts[2], ts[3], ts[4]); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(name("sum"), func(b *testing.B) {
					ts := benchTensors(b, dt, n, 1)
					out, err := tensor.New(dtype.SumDtype(dt), []int{1})
					if err != nil {
						b.Fatal(err)
					}
					b.SetBytes(sz * int64(n))
					for i := 0; i < b.N; i++ {
						if err := be.Sum(out, ts[0]); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
