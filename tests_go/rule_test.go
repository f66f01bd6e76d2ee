package tests_go

import (
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// The selection rules (min, max, fmin, fmax) by table: every rule × every
// dtype × every pair of special values (NaN of both signs and several
// payloads, ±0, ±Inf, subnormals, extremes, ties) × layouts (contiguous:
// the SIMD paths when built with GOEXPERIMENT=simd; permuted and reversed:
// the scalar paths; broadcast). Select with x=a, y=b is the forward
// selection; Route and Select with value operands of another dtype take the
// mask paths. cpu (one and three threads) and ref must give the same bits,
// and both must agree with keepsA, a third statement of the rules written
// from NumPy's definitions.

// keepsA is the oracle: whether rule r on (a, b) gives a. minimum/maximum
// propagate NaN (the first operand's when both are NaN); fmin/fmax ignore
// NaN (the other operand; the first when both are NaN); otherwise the
// smaller (larger) value, and on a tie (-0 == +0 included) the first.
// cmp is the order of a and b when neither is NaN: -1, 0 or 1.
func keepsA(r backend.Rule, aNaN, bNaN bool, cmp int) bool {
	switch r {
	case backend.RuleMin:
		if aNaN || bNaN {
			return aNaN
		}
		return cmp != 1
	case backend.RuleMax:
		if aNaN || bNaN {
			return aNaN
		}
		return cmp != -1
	case backend.RuleFMin:
		if aNaN || bNaN {
			return bNaN
		}
		return cmp != 1
	case backend.RuleFMax:
		if aNaN || bNaN {
			return bNaN
		}
		return cmp != -1
	}
	panic(fmt.Sprintf("no rule %v", r))
}

// oracleKeepsA applies keepsA to element bit patterns of dtype dt.
func oracleKeepsA(r backend.Rule, dt dtype.Dtype, a, b uint64) bool {
	if dt.IsFloat() {
		x, y := tensor.LoadFloat64(dt, unsafe.Pointer(&a)), tensor.LoadFloat64(dt, unsafe.Pointer(&b))
		cmp := 0
		if x < y {
			cmp = -1
		} else if x > y {
			cmp = 1
		}
		return keepsA(r, math.IsNaN(x), math.IsNaN(y), cmp)
	}
	x, y := tensor.LoadInt64(dt, unsafe.Pointer(&a)), tensor.LoadInt64(dt, unsafe.Pointer(&b))
	cmp := 0
	if x < y {
		cmp = -1
	} else if x > y {
		cmp = 1
	}
	return keepsA(r, false, false, cmp)
}

// ruleSpecials returns special element bit patterns of dt: 17 for the
// floating dtypes, so that the 289 pairs end in a one-element tail for every
// SIMD vector width.
func ruleSpecials(dt dtype.Dtype) []uint64 {
	if !dt.IsFloat() {
		if dt == dtype.Bool {
			return []uint64{0, 1}
		}
		bits := uint(8 * dt.Size())
		lo := uint64(1) << (bits - 1) // the most negative value
		hi := lo - 1
		if dt == dtype.Uint8 {
			lo, hi = 0, 0xff
		}
		return []uint64{lo, lo + 1, math.MaxUint64, 0, 1, 2, hi - 1, hi}
	}
	negZero := math.Copysign(0, -1)
	vals := []float64{math.Inf(-1), -math.MaxFloat64, -3, -1, negZero, 0, 0.5, 1, 3, math.MaxFloat64, math.Inf(1)}
	out := make([]uint64, 0, 20)
	for _, v := range vals {
		out = append(out, bitsOfFloat(dt, v))
	}
	out = append(out,
		1,                           // the smallest positive subnormal
		1<<(8*dt.Size()-1)|1,        // the smallest negative subnormal
		nanBits(dt, 0, false),       // the default quiet NaN
		nanBits(dt, 5, true),        // a negative NaN with a payload
		nanBits(dt, 1, false),       // another payload
		bitsOfFloat(dt, math.NaN())) // Go's NaN, rounded to dt
	return out
}

// pairTensors returns a and b of shape (k, k), laid out as la and lb, that
// hold every ordered pair of specials: a[i][j] = v[i], b[i][j] = v[j]
// (zeroStride layouts repeat some values instead).
func pairTensors(t *testing.T, dt dtype.Dtype, v []uint64, la, lb layout) (*tensor.Tensor, *tensor.Tensor) {
	k := len(v)
	shape := []int{k, k}
	gen := func(col bool) func(n int) []uint64 {
		return func(n int) []uint64 {
			out := make([]uint64, n)
			for i := range out {
				if col {
					out[i] = v[i%k]
				} else {
					out[i] = v[(i/k)%k]
				}
			}
			return out
		}
	}
	return makeTensor(t, dt, shape, la, gen(false)), makeTensor(t, dt, shape, lb, gen(true))
}

func TestSelectionRulesTable(t *testing.T) {
	backends := []kernels{ref.Backend{}, cpu.New(1), splitting(3)}
	for _, dt := range dtype.All() {
		v := ruleSpecials(dt)
		// value operands of another dtype (the generic mask path of Route and
		// Select) and of the compared dtype (the fused paths)
		other := dtype.Float64
		if dt == dtype.Float64 {
			other = dtype.Int16
		}
		for _, la := range allLayouts {
			for _, lb := range allLayouts {
				a, b := pairTensors(t, dt, v, la, lb)
				shape := a.Shape()
				ab, bb := a.Bits(), b.Bits()
				r := newRand(seedOf("rules", dt.String()))
				gen := func(n int) []uint64 { return genBits(r, dt, n, genSpecial) }
				gs := []*tensor.Tensor{makeTensor(t, dt, shape, contiguous, gen), makeTensor(t, dt, shape, allLayouts[(int(la)+1)%len(allLayouts)], gen)}
				x := makeTensor(t, other, shape, contiguous, func(n int) []uint64 { return genBits(r, other, n, genSpecial) })
				y := makeTensor(t, other, shape, negStep, func(n int) []uint64 { return genBits(r, other, n, genSpecial) })
				xbits, ybits := x.Bits(), y.Bits()
				for rule := range backend.Rule(backend.NumRules) {
					keep := make([]bool, len(ab))
					for i := range ab {
						keep[i] = oracleKeepsA(rule, dt, ab[i], bb[i])
					}
					pick := func(m []bool, x, y []uint64) []uint64 {
						out := make([]uint64, len(m))
						for i := range m {
							out[i] = y[i]
							if m[i] {
								out[i] = x[i]
							}
						}
						return out
					}
					zeros := make([]uint64, len(ab))
					for _, be := range backends {
						name := fmt.Sprintf("%v %v a=%v b=%v %s threads=%v", rule, dt, la, lb, be.Name(), threadsOf(be))
						fresh := func(dt dtype.Dtype) *tensor.Tensor { return must(t)(tensor.Empty(dt, shape)) }

						fwd := fresh(dt)
						require.NoError(t, be.Select(rule, fwd, a, b, a, b), name)
						require.Equal(t, pick(keep, ab, bb), fwd.Bits(), "%s: forward selection", name)

						for _, g := range gs {
							ga, gb := fresh(dt), fresh(dt)
							require.NoError(t, be.Route(rule, ga, gb, a, b, g), name)
							require.Equal(t, pick(keep, g.Bits(), zeros), ga.Bits(), "%s: route grad a", name)
							require.Equal(t, pick(keep, zeros, g.Bits()), gb.Bits(), "%s: route grad b", name)
						}

						xa, xb := fresh(other), fresh(other)
						require.NoError(t, be.Route(rule, xa, xb, a, b, x), name)
						require.Equal(t, pick(keep, xbits, zeros), xa.Bits(), "%s: route %v grad a", name, other)
						require.Equal(t, pick(keep, zeros, xbits), xb.Bits(), "%s: route %v grad b", name, other)

						sel := fresh(other)
						require.NoError(t, be.Select(rule, sel, a, b, x, y), name)
						require.Equal(t, pick(keep, xbits, ybits), sel.Bits(), "%s: select %v", name, other)

						// minimum and maximum forward through Binary: the same rule
						for _, op := range []backend.BinaryOp{backend.Minimum, backend.Maximum} {
							if opRule, _ := op.Rule(); opRule == rule {
								out := fresh(dt)
								require.NoError(t, be.Binary(op, out, a, b), name)
								require.Equal(t, pick(keep, ab, bb), out.Bits(), "%s: %v", name, op)
							}
						}
					}
				}
			}
		}
	}
}

func threadsOf(be kernels) any {
	if th, ok := be.(backend.Threaded); ok {
		return th.Threads()
	}
	return "-"
}

// The rule values: two bits, direction and NaN policy, with their names.
func TestRuleValues(t *testing.T) {
	for _, c := range []struct {
		r               backend.Rule
		name            string
		greater, ignore bool
	}{
		{backend.RuleMin, "min", false, false},
		{backend.RuleMax, "max", true, false},
		{backend.RuleFMin, "fmin", false, true},
		{backend.RuleFMax, "fmax", true, true},
	} {
		require.True(t, c.r.Valid(), c.name)
		require.Equal(t, c.name, c.r.String())
		require.Equal(t, c.greater, c.r.Greater(), c.name)
		require.Equal(t, c.ignore, c.r.IgnoresNaN(), c.name)
		require.NoError(t, backend.CheckRule(c.r), c.name)
	}
	require.False(t, backend.Rule(backend.NumRules).Valid())
	require.Equal(t, "Rule(4)", backend.Rule(4).String())
	require.Error(t, backend.CheckRule(4))
	for op, want := range map[backend.BinaryOp]backend.Rule{backend.Minimum: backend.RuleMin, backend.Maximum: backend.RuleMax} {
		r, ok := op.Rule()
		require.True(t, ok, "%v", op)
		require.Equal(t, want, r, "%v", op)
	}
	for _, op := range []backend.BinaryOp{backend.Add, backend.Sub, backend.Mul, backend.Div, backend.BinaryOp(99)} {
		_, ok := op.Rule()
		require.False(t, ok, "%v", op)
	}
}

// The default backend comes from the registry: package cpu sets it when
// linked in, and ops with a nil context use it.
func TestDefaultBackendIsRegisteredCPU(t *testing.T) {
	d := backend.Default()
	require.NotNil(t, d)
	require.Same(t, cpu.Default, d)
	got, err := backend.Get("cpu")
	require.NoError(t, err)
	require.Same(t, cpu.Default, got)
}
