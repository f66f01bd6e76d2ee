package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// Internal tests of the selection kernels by rule: each rule type carries
// its backend.Rule, every table row is built, and the forward selection
// kernel of every rule (fmin and fmax have no op yet, so only this test
// reaches their forward kernels) gives ref's bits for every dtype, every
// length up to a few vectors (every SIMD tail), contiguous, broadcast and
// strided operands, with the SIMD paths on and off.

func TestRuleTypes(t *testing.T) {
	got := []backend.Rule{ruleOf[ruleMin](), ruleOf[ruleMax](), ruleOf[ruleFMin](), ruleOf[ruleFMax]()}
	want := []backend.Rule{backend.RuleMin, backend.RuleMax, backend.RuleFMin, backend.RuleFMax}
	if !slices.Equal(got, want) {
		t.Fatalf("rule types carry %v, want %v", got, want)
	}
	for r := range backend.Rule(backend.NumRules) {
		for _, dt := range dtype.All() {
			if selectKernels[r][dt] == nil || routeKernels[r][dt][dt] == nil || whereKernels[r][dt][dtype.Float32] == nil {
				t.Fatalf("rule %v dtype %v: selection kernel missing", r, dt)
			}
		}
	}
}

// wins on a few scalars, per rule: the scalar form every path shares.
func TestWinsScalar(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	negZero := math.Copysign(0, -1)
	type row struct{ a, b float64 }
	cases := []struct {
		r    backend.Rule
		f    func(a, b float64) bool
		wins []row // a wins
		lose []row // b wins
	}{
		{backend.RuleMin, wins[ruleMin, float64],
			[]row{{1, 2}, {1, 1}, {negZero, 0}, {0, negZero}, {nan, 1}, {nan, nan}, {inf, inf}},
			[]row{{2, 1}, {1, nan}, {inf, -inf}}},
		{backend.RuleMax, wins[ruleMax, float64],
			[]row{{2, 1}, {1, 1}, {negZero, 0}, {0, negZero}, {nan, 1}, {nan, nan}},
			[]row{{1, 2}, {1, nan}, {-inf, inf}}},
		{backend.RuleFMin, wins[ruleFMin, float64],
			[]row{{1, 2}, {1, 1}, {negZero, 0}, {0, negZero}, {1, nan}, {nan, nan}},
			[]row{{2, 1}, {nan, 1}, {nan, -inf}}},
		{backend.RuleFMax, wins[ruleFMax, float64],
			[]row{{2, 1}, {1, 1}, {negZero, 0}, {0, negZero}, {1, nan}, {nan, nan}},
			[]row{{1, 2}, {nan, 1}, {nan, inf}}},
	}
	for _, c := range cases {
		for _, p := range c.wins {
			if !c.f(p.a, p.b) {
				t.Errorf("%v: %v should win over %v", c.r, p.a, p.b)
			}
		}
		for _, p := range c.lose {
			if c.f(p.a, p.b) {
				t.Errorf("%v: %v should lose to %v", c.r, p.a, p.b)
			}
		}
	}
	if !wins[ruleMin, int8](-128, 127) || wins[ruleMin, int8](127, -128) || !wins[ruleFMax, uint8](255, 0) || !wins[ruleMax, int64](7, 7) {
		t.Error("integer comparisons")
	}
}

// ruleBits returns n element patterns of dt, a third of them special
// (NaNs of both signs and two payloads, ±0, ±Inf, a subnormal).
func ruleBits(r *rand.Rand, dt dtype.Dtype, n int) []uint64 {
	var special []uint64
	switch dt {
	case dtype.Float16:
		special = []uint64{0x7e00, 0xfe01, 0x7c01, 0x0000, 0x8000, 0x7c00, 0xfc00, 0x0001, 0x3c00}
	case dtype.BFloat16:
		special = []uint64{0x7fc0, 0xffc1, 0x7f81, 0x0000, 0x8000, 0x7f80, 0xff80, 0x0001, 0x3f80}
	case dtype.Float32:
		special = []uint64{0x7fc00000, 0xffc00001, 0x7f800001, 0, 0x80000000, 0x7f800000, 0xff800000, 1, 0x3f800000}
	case dtype.Float64:
		special = []uint64{0x7ff8000000000000, 0xfff8000000000001, 0x7ff0000000000001, 0, 1 << 63, 0x7ff0000000000000, 0xfff0000000000000, 1, 0x3ff0000000000000}
	default:
		special = []uint64{0, 1, math.MaxUint64, 1 << (8*dt.Size() - 1)}
	}
	out := make([]uint64, n)
	for i := range out {
		switch r.IntN(3) {
		case 0:
			out[i] = special[r.IntN(len(special))]
		case 1:
			out[i] = uint64(r.IntN(5)) << (8*dt.Size() - 8) // few values: ties
		default:
			out[i] = r.Uint64()
		}
		if dt == dtype.Bool {
			out[i] &= 1
		}
	}
	return out
}

func ruleTensor(t *testing.T, dt dtype.Dtype, shape []int, bits []uint64) *tensor.Tensor {
	x, err := tensor.FromBits(dt, shape, bits)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestForwardSelectionByRuleMatchesRef(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	// Around every step of the SIMD loops: one vector, the 4-vector rounds
	// (16 float64, 32 float32 elements), the leftover whole vectors, the tail.
	sizes := []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 47, 48, 63, 64, 65, 95, 97, maxSeg + 21}
	for _, simd := range []bool{true, false} {
		withSIMD(t, simd)
		b := New(1)
		for r := range backend.Rule(backend.NumRules) {
			for _, dt := range dtype.All() {
				for _, n := range sizes {
					a := ruleTensor(t, dt, []int{n}, ruleBits(rng, dt, n))
					bc := ruleTensor(t, dt, []int{n}, ruleBits(rng, dt, n))
					if n > 3 { // ties, NaN and ±0 against themselves
						bb := bc.Bits()
						copy(bb, a.Bits()[:n/3])
						bc = ruleTensor(t, dt, []int{n}, bb)
					}
					one := ruleTensor(t, dt, nil, ruleBits(rng, dt, 1))
					bcast, err := one.BroadcastTo([]int{n})
					if err != nil {
						t.Fatal(err)
					}
					// a strided view: every other element of a reversed 2n buffer
					wide := ruleTensor(t, dt, []int{2 * n}, ruleBits(rng, dt, 2*n))
					strided, err := wide.Slice(0, -1, -2*n-1, -2)
					if err != nil {
						t.Fatal(err)
					}
					for _, pair := range [][2]*tensor.Tensor{{a, bc}, {a, bcast}, {bcast, a}, {strided, a}, {a, strided}} {
						name := fmt.Sprintf("simd=%v %v %v n=%d a=%v b=%v", simd, r, dt, n, pair[0].Strides(), pair[1].Strides())
						want, err := tensor.Empty(dt, []int{n})
						if err != nil {
							t.Fatal(err)
						}
						if err := (ref.Backend{}).Select(r, want, pair[0], pair[1], pair[0], pair[1]); err != nil {
							t.Fatal(name, err)
						}
						got, err := tensor.Empty(dt, []int{n})
						if err != nil {
							t.Fatal(err)
						}
						b.elementwise(selectKernels[r][dt], got, pair[0], pair[1])
						if w, g := want.Bits(), got.Bits(); !slices.Equal(w, g) {
							for i := range w {
								if w[i] != g[i] {
									t.Fatalf("%s: element %d: got %#x, want %#x (a %#x, b %#x)", name, i, g[i], w[i],
										pair[0].Bits()[i], pair[1].Bits()[i])
								}
							}
						}
						// The winner mask into a bool out (maskInto and its SIMD path).
						wantM, gotM := boolOut(t, n), boolOut(t, n)
						yes, no := boolConst(t, n, 1), boolConst(t, n, 0)
						if err := (ref.Backend{}).Select(r, wantM, pair[0], pair[1], yes, no); err != nil {
							t.Fatal(name, err)
						}
						if err := b.Select(r, gotM, pair[0], pair[1], yes, no); err != nil {
							t.Fatal(name, err)
						}
						if w, g := wantM.Bits(), gotM.Bits(); !slices.Equal(w, g) {
							t.Fatalf("%s: mask %v, want %v", name, g, w)
						}
					}
				}
			}
		}
	}
}

func boolOut(t *testing.T, n int) *tensor.Tensor {
	t.Helper()
	x, err := tensor.Empty(dtype.Bool, []int{n})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// boolConst is the constant v broadcast to n elements (stride 0), as
// ops.Winners passes its true and false.
func boolConst(t *testing.T, n int, v int64) *tensor.Tensor {
	t.Helper()
	c, err := tensor.FromInt64s(dtype.Bool, nil, []int64{v})
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.BroadcastTo([]int{n})
	if err != nil {
		t.Fatal(err)
	}
	return x
}
