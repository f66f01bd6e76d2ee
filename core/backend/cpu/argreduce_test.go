package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// Internal tests of ArgReduce's bounded scratch: with tiny windows, so that
// windows end inside a slice's blocks (of positions, or of rows in column
// mode) and between outputs, results equal the ref backend's for every
// thread count.
func TestArgReduceSmallWindows(t *testing.T) {
	oldA, oldC := argWindow, colScratchBytes
	argWindow, colScratchBytes = 3, 1
	t.Cleanup(func() { argWindow, colScratchBytes = oldA, oldC })
	r := rand.New(rand.NewPCG(3, 5))
	for _, c := range []struct{ shape, keep []int }{
		{[]int{3, 3*argBlock + 5}, []int{3, 1}},           // long rows: blocks of positions
		{[]int{2, 2*colWork/40 + 7, 40}, []int{2, 1, 40}}, // column mode: blocks of rows
	} {
		for _, dt := range []dtype.Dtype{dtype.Float32, dtype.BFloat16} {
			if raceEnabled && dt != dtype.Float32 {
				continue
			}
			a, err := tensor.Empty(dt, c.shape)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < a.Numel(); i++ {
				tensor.StoreFloat64(dt, a.ElementPointer(i), float64(r.IntN(5)))
			}
			for rule := range backend.Rule(backend.NumRules) {
				if raceEnabled && rule != backend.RuleMin && rule != backend.RuleFMax {
					continue
				}
				want, _ := tensor.Empty(dtype.Int64, c.keep)
				if err := (ref.Backend{}).ArgReduce(rule, nil, want, a); err != nil {
					t.Fatal(err)
				}
				for _, threads := range []int{1, 2, 3} {
					b := New(threads)
					b.SetAlwaysSplit(true)
					got, _ := tensor.Empty(dtype.Int64, c.keep)
					if err := b.ArgReduce(rule, nil, got, a); err != nil {
						t.Fatal(err)
					}
					w, g := want.Int64s(), got.Int64s()
					for o := range w {
						if w[o] != g[o] {
							t.Fatalf("%v %v %v threads=%d: output %d: position %d, want %d", c.shape, dt, rule, threads, o, g[o], w[o])
						}
					}
				}
			}
		}
	}
}
