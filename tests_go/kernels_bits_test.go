package tests_go

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// Every half-precision bit pattern (NaN payloads, ±0, ±Inf, subnormals)
// through the contiguous fast paths — SIMD when built with GOEXPERIMENT=simd
// — must give ref's bits: minimum/maximum forward, the routed gradients, and
// sums. float32/float64 get random bit patterns with many ties.
func TestFastPathsMatchRefOnBitPatterns(t *testing.T) {
	if cpu.SIMDEnabled() {
		t.Log("SIMD fast paths enabled")
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for _, dt := range []dtype.Dtype{dtype.Float16, dtype.BFloat16, dtype.Float32, dtype.Float64} {
		n := 1 << 16
		a, b, g := make([]uint64, n+13), make([]uint64, n+13), make([]uint64, n+13)
		for i := range a {
			if dt.Size() == 2 {
				a[i] = uint64(i % (1 << 16))
			} else {
				a[i] = rng.Uint64() >> (64 - 8*dt.Size())
			}
			b[i] = rng.Uint64() >> (64 - 8*dt.Size())
			if i%5 == 0 {
				b[i] = a[(i*7)%len(a)] // ties, including ±0 and NaN against themselves
			}
			g[i] = rng.Uint64() >> (64 - 8*dt.Size())
		}
		rng.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
		shape := []int{len(a)}
		ta, err := tensor.FromBits(dt, shape, a)
		require.NoError(t, err)
		tb, err := tensor.FromBits(dt, shape, b)
		require.NoError(t, err)
		tg, err := tensor.FromBits(dt, shape, g)
		require.NoError(t, err)
		// finite values of both signs (top exponent bit cleared): a sum with
		// no NaN, compared exactly.
		f := make([]uint64, len(g))
		for i, v := range g {
			f[i] = v &^ (1 << (8*dt.Size() - 2))
		}
		tf, err := tensor.FromBits(dt, shape, f)
		require.NoError(t, err)
		run := func(c *ops.Context) map[string][]uint64 {
			out := map[string][]uint64{}
			for name, f := range map[string]func(*ops.Context, *tensor.Tensor, *tensor.Tensor) (*tensor.Tensor, error){
				"minimum": ops.Minimum, "maximum": ops.Maximum,
			} {
				la, lb := ta.Detach(), tb.Detach()
				require.NoError(t, la.SetRequiresGrad(true))
				require.NoError(t, lb.SetRequiresGrad(true))
				y, err := f(c, la, lb)
				require.NoError(t, err)
				require.NoError(t, ops.Backward(c, []*tensor.Tensor{y}, []*tensor.Tensor{tg}, false, false))
				out[name] = y.Bits()
				out[name+" grad a"] = la.Grad().Bits()
				out[name+" grad b"] = lb.Grad().Bits()
				// through sum: the upstream gradient is one value seen everywhere
				la2, lb2 := ta.Detach(), tb.Detach()
				require.NoError(t, la2.SetRequiresGrad(true))
				require.NoError(t, lb2.SetRequiresGrad(true))
				y2, err := f(c, la2, lb2)
				require.NoError(t, err)
				s2, err := ops.Sum(c, y2, nil, false)
				require.NoError(t, err)
				require.NoError(t, ops.Backward(c, []*tensor.Tensor{s2}, nil, false, false))
				out[name+" sum grad a"] = la2.Grad().Bits()
				out[name+" sum grad b"] = lb2.Grad().Bits()
			}
			s, err := ops.Sum(c, tg, nil, false)
			require.NoError(t, err)
			out["sum"] = s.Bits()
			fs, err := ops.Sum(c, tf, nil, false)
			require.NoError(t, err)
			out["finite sum"] = fs.Bits()
			return out
		}
		want := run(&ops.Context{Backend: ref.Backend{}, GradEnabled: true})
		got := run(&ops.Context{Backend: cpu.New(2), GradEnabled: true})
		for k := range want {
			if k == "sum" && dt.IsFloat() {
				requireSameFloatBits(t, dt, want[k], got[k], "%v %s", dt, k)
				continue
			}
			require.Equal(t, want[k], got[k], "%v %s", dt, k)
		}
	}
}

// requireSameFloatBits compares bit patterns, letting two NaNs differ in
// payload (sums of NaNs propagate whichever payload the hardware picks).
func requireSameFloatBits(t *testing.T, dt dtype.Dtype, want, got []uint64, msg string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, _ := tensor.FromBits(dt, nil, []uint64{want[i]})
		g, _ := tensor.FromBits(dt, nil, []uint64{got[i]})
		wv, _ := w.Item()
		gv, _ := g.Item()
		if wv != wv && gv != gv {
			continue
		}
		require.Equal(t, want[i], got[i], append([]any{msg}, args...)...)
	}
}
