package tests_go

import (
	"fmt"
	"testing"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// Per-call cost of the CPU kernels on small tensors (below cpu.MinParallel),
// where the fixed cost of a call dominates: go test -run x -bench
// KernelsSmall -benchmem ./tests_go (GOEXPERIMENT=simd for the AVX2 paths).
// "strided" is a transposed 2-d view (the iteration-plan path).
func BenchmarkKernelsSmall(b *testing.B) {
	be := cpu.New(0)
	for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float16} {
		for _, n := range []int{1, 1000} {
			for _, strided := range []bool{false, true} {
				shape := []int{n}
				if strided {
					shape = []int{n / 8, 8}
					if n < 8 {
						continue
					}
				}
				ts := make([]*tensor.Tensor, 5)
				for i := range ts {
					t, err := tensor.New(dt, shape)
					if err != nil {
						b.Fatal(err)
					}
					ts[i] = t
				}
				in := ts[2]
				if strided {
					v, err := tensor.New(dt, []int{8, n / 8})
					if err != nil {
						b.Fatal(err)
					}
					if in, err = v.Transpose(0, 1); err != nil {
						b.Fatal(err)
					}
				}
				sum, err := tensor.New(dtype.SumDtype(dt), ones(len(shape)))
				if err != nil {
					b.Fatal(err)
				}
				name := func(op string) string { return fmt.Sprintf("%s/%v/n=%d/strided=%v", op, dt, n, strided) }
				b.Run(name("minimum"), func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						if err := be.Binary(backend.Minimum, ts[0], ts[1], in); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(name("route"), func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						if err := be.Route(backend.RuleMin, ts[0], ts[1], in, ts[3], ts[4]); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(name("sum"), func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						if err := be.Sum(sum, in); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
