package tests_go

// The min/max family's backend kernels (docs/semantics.md): ArgReduce,
// Scatter, Gather, Clamp, ClampRoute, ClampSelect, and fmin/fmax through
// Binary. The cpu backend (one thread, and two and three threads splitting
// all work) must give the ref backend's bits for every dtype, layout
// (contiguous: the SIMD and column paths; transposed, reversed, broadcast)
// and set of reduced dims; ArgReduce must also agree with an oracle written
// from NumPy's definitions (first occurrence of the extreme, the first NaN
// under min/max, NaNs ignored under fmin/fmax); Scatter and Gather must be
// transposes; the clamp kernels must equal their compositions of two
// selections.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// familyBackends are the backends compared with ref.
func familyBackends() []kernels {
	return []kernels{cpu.New(1), splitting(2), splitting(3)}
}

// tieBits returns n values of dt with many ties: a small pool (±0, small
// integers), NaNs with payloads and both signs, infinities, and genSpecial.
func tieBits(r *rand.Rand, dt dtype.Dtype, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		switch p := r.IntN(100); {
		case !dt.IsFloat():
			if p < 60 {
				out[i] = uint64(int64(r.IntN(5) - 2))
			} else {
				out[i] = genOne(r, dt, genSpecial)
			}
		case p < 45:
			out[i] = bitsOfFloat(dt, tiePool[r.IntN(len(tiePool))])
		case p < 52:
			out[i] = nanBits(dt, uint64(r.IntN(5)), r.IntN(2) == 0)
		case p < 56:
			out[i] = bitsOfFloat(dt, math.Inf(1-2*r.IntN(2)))
		default:
			out[i] = genOne(r, dt, genSpecial)
		}
	}
	return out
}

// underRace thins a table under the race detector (which makes the scalar
// kernels, and ref, tens of times slower): it keeps every k-th combination
// counted by *n. Without the race detector every combination runs.
func underRace(n *int, k int) bool {
	*n++
	return !raceEnabled || *n%k == 0
}

// keepShape returns shape with the dims in red set to 1.
func keepShape(shape []int, red []int) []int {
	k := append([]int(nil), shape...)
	for _, d := range red {
		k[d] = 1
	}
	return k
}

// reducedSets returns the sets of dims to reduce for an nd-dim shape: none,
// first, last, middle, first and last, all.
func reducedSets(nd int) [][]int {
	sets := [][]int{{}}
	if nd == 0 {
		return sets
	}
	all := make([]int, nd)
	for i := range all {
		all[i] = i
	}
	sets = append(sets, []int{0}, []int{nd - 1}, all)
	if nd >= 3 {
		sets = append(sets, []int{nd / 2}, []int{0, nd - 1})
	}
	return sets
}

// sliceIndices returns, for each output of shape reduced over red (in
// row-major order), the flat indices of its slice's elements in position
// order: the oracle's reading of the layout, written independently of both
// backends.
func sliceIndices(shape []int, red []int) [][]int {
	isRed := make([]bool, len(shape))
	for _, d := range red {
		isRed[d] = true
	}
	keep := keepShape(shape, red)
	nOut := numel(keep)
	out := make([][]int, nOut)
	ix := make([]int, len(shape))
	for i := 0; i < numel(shape); i++ {
		o := 0
		for d := range shape {
			if isRed[d] {
				o *= 1
			} else {
				o = o*shape[d] + ix[d]
			}
		}
		out[o] = append(out[o], i) // row-major order of a is position order
		for d := len(shape) - 1; d >= 0; d-- {
			if ix[d]++; ix[d] < shape[d] {
				break
			}
			ix[d] = 0
		}
	}
	return out
}

// key is an element's value for the oracle: a float64 (exact for every
// dtype's values the tests use) and whether it is NaN.
type key struct {
	v   float64
	nan bool
}

func keysOf(dt dtype.Dtype, bits []uint64) []key {
	out := make([]key, len(bits))
	for i := range bits {
		p := unsafe.Pointer(&bits[i])
		if dt.IsFloat() {
			out[i].v = tensor.LoadFloat64(dt, p)
			out[i].nan = math.IsNaN(out[i].v)
		} else {
			out[i].v = float64(tensor.LoadInt64(dt, p))
		}
	}
	return out
}

// better reports whether a is strictly better than b under rule r in the
// order a fold keeps (NumPy's definitions): under min/max a NaN is best,
// under fmin/fmax worst; otherwise smaller (min) or larger (max) is better;
// -0 == +0.
func better(r backend.Rule, a, b key) bool {
	if a.nan || b.nan {
		if r.IgnoresNaN() {
			return b.nan && !a.nan
		}
		return a.nan && !b.nan
	}
	if r.Greater() {
		return a.v > b.v
	}
	return a.v < b.v
}

// oracleArg returns the position of the first best element of each slice.
func oracleArg(r backend.Rule, keys []key, slices [][]int) []int64 {
	out := make([]int64, len(slices))
	for o, s := range slices {
		best := 0
		for k := 1; k < len(s); k++ {
			if better(r, keys[s[k]], keys[s[best]]) {
				best = k
			}
		}
		out[o] = int64(best)
	}
	return out
}

// winnerBits returns, for each slice, the bits of its element at pos.
func winnerBits(bits []uint64, slices [][]int, pos []int64) []uint64 {
	out := make([]uint64, len(slices))
	for o, s := range slices {
		out[o] = bits[s[pos[o]]]
	}
	return out
}

// transposed is a layout beyond allLayouts: a plain transpose (all dims
// reversed) of a contiguous tensor, so the first dim has unit stride.
const transposed layout = -1

// argInput returns a tensor of shape laid out as l (transposed included).
func argInput(t *testing.T, dt dtype.Dtype, shape []int, l layout, gen func(n int) []uint64) *tensor.Tensor {
	if l != transposed || len(shape) < 2 {
		if l == transposed {
			l = contiguous
		}
		return makeTensor(t, dt, shape, l, gen)
	}
	nd := len(shape)
	rev, perm := make([]int, nd), make([]int, nd)
	for i := range shape {
		rev[i], perm[i] = shape[nd-1-i], nd-1-i
	}
	v := must(t)(must(t)(tensor.New(dt, rev)).Permute(perm...))
	fillBits(v, gen(v.Numel()))
	return v
}

func layoutName(l layout) string {
	if l == transposed {
		return "transposed"
	}
	return l.String()
}

type reduceCase struct {
	shape []int
	red   []int
}

func reduceCases() []reduceCase {
	var cs []reduceCase
	// (6,5,40): a kept last dim of 40 (column mode when contiguous);
	// (3,7,5): short rows; (70,): one long row; (): a 0-d tensor;
	// (1,9,1): size-1 dims; (20,3,17): transposed, a first dim of unit stride
	// (column mode on dim 0).
	for _, shape := range [][]int{{6, 5, 40}, {3, 7, 5}, {70}, {}, {1, 9, 1}, {4, 33}, {20, 3, 17}} {
		for _, red := range reducedSets(len(shape)) {
			cs = append(cs, reduceCase{shape, red})
		}
	}
	return cs
}

func TestArgReduceMatchesRefAndOracle(t *testing.T) {
	count := 0
	for _, dt := range allDtypes {
		for _, c := range reduceCases() {
			for _, l := range append(allLayouts, transposed) {
				if !underRace(&count, 3) {
					continue
				}
				r := newRand(seedOf("argreduce", dt.String(), fmt.Sprint(c.shape, c.red), layoutName(l)))
				a := argInput(t, dt, c.shape, l, func(n int) []uint64 { return tieBits(r, dt, n) })
				bits := a.Bits()
				keep := keepShape(c.shape, c.red)
				slices := sliceIndices(c.shape, c.red)
				keys := keysOf(dt, bits)
				for rule := range backend.Rule(backend.NumRules) {
					name := fmt.Sprintf("%v %v shape=%v red=%v %v", rule, dt, c.shape, c.red, layoutName(l))
					wantIdx := must(t)(tensor.Empty(dtype.Int64, keep))
					wantVals := must(t)(tensor.Empty(dt, keep))
					require.NoError(t, ref.Backend{}.ArgReduce(rule, wantVals, wantIdx, a), name)
					pos := wantIdx.Int64s()
					require.Equal(t, oracleArg(rule, keys, slices), pos, "%s: ref vs oracle", name)
					require.Equal(t, winnerBits(bits, slices, pos), wantVals.Bits(), "%s: ref values", name)
					for _, be := range familyBackends() {
						bn := fmt.Sprintf("%s threads=%v", name, threadsOf(be))
						idx := must(t)(tensor.Empty(dtype.Int64, keep))
						vals := must(t)(tensor.Empty(dt, keep))
						require.NoError(t, be.ArgReduce(rule, vals, idx, a), bn)
						require.Equal(t, wantIdx.Int64s(), idx.Int64s(), "%s: positions", bn)
						require.Equal(t, wantVals.Bits(), vals.Bits(), "%s: values", bn)
						idx2 := must(t)(tensor.Empty(dtype.Int64, keep))
						require.NoError(t, be.ArgReduce(rule, nil, idx2, a), bn)
						require.Equal(t, wantIdx.Int64s(), idx2.Int64s(), "%s: positions without values", bn)
						vals2 := must(t)(tensor.Empty(dt, keep))
						require.NoError(t, be.ArgReduce(rule, vals2, nil, a), bn)
						require.Equal(t, wantVals.Bits(), vals2.Bits(), "%s: values without positions", bn)
					}
					refVals := must(t)(tensor.Empty(dt, keep))
					require.NoError(t, ref.Backend{}.ArgReduce(rule, refVals, nil, a), name)
					require.Equal(t, wantVals.Bits(), refVals.Bits(), "%s: ref values without positions", name)
				}
			}
		}
	}
}

// Slices longer than the cpu backend's blocks (of positions, and of rows in
// column mode), with many ties and rare NaNs so that winners and their ties
// fall in different blocks, and sizes that engage the parallel paths; also
// a (300, 256) tensor reduced over each dim (rows and columns).
func TestArgReduceLargeDeterministic(t *testing.T) {
	all := []layout{contiguous, negStep, permuted, zeroStride, transposed}
	cases := []struct {
		reduceCase
		layouts []layout
		race    bool // also run under the race detector (slow)
	}{
		{reduceCase{[]int{300, 256}, []int{0}}, all, true},
		{reduceCase{[]int{300, 256}, []int{1}}, all, true},
		{reduceCase{[]int{300, 256}, []int{0, 1}}, all, true},
		{reduceCase{[]int{200000}, []int{0}}, []layout{contiguous, negStep}, false},        // blocks of positions
		{reduceCase{[]int{3, 70000}, []int{1}}, []layout{contiguous, permuted}, false},     // blocks of positions
		{reduceCase{[]int{70000, 16}, []int{0}}, []layout{contiguous, zeroStride}, false},  // column mode, blocks of rows
		{reduceCase{[]int{1100, 1000}, []int{0}}, []layout{contiguous, zeroStride}, false}, // column mode, blocks of rows
		{reduceCase{[]int{2, 1100, 1000}, []int{1}}, []layout{contiguous}, false},          // column mode, two output rows
	}
	for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float64, dtype.Float16, dtype.BFloat16, dtype.Int16} {
		for _, c := range cases {
			if raceEnabled && !c.race {
				continue
			}
			for _, l := range c.layouts {
				r := newRand(seedOf("argreduce-large", dt.String(), fmt.Sprint(c.shape, c.red), layoutName(l)))
				a := argInput(t, dt, c.shape, l, func(n int) []uint64 {
					out := make([]uint64, n)
					for i := range out { // few distinct values: many ties
						out[i] = uint64(int64(r.IntN(7) - 3))
						if dt.IsFloat() {
							out[i] = bitsOfFloat(dt, float64(r.IntN(7)-3))
						}
						if dt.IsFloat() && r.IntN(20000) == 0 {
							out[i] = nanBits(dt, uint64(r.IntN(3)), r.IntN(2) == 0)
						}
					}
					return out
				})
				keep := keepShape(c.shape, c.red)
				slices := sliceIndices(c.shape, c.red)
				bits := a.Bits()
				keys := keysOf(dt, bits)
				for rule := range backend.Rule(backend.NumRules) {
					name := fmt.Sprintf("%v %v shape=%v red=%v %v", rule, dt, c.shape, c.red, layoutName(l))
					want := oracleArg(rule, keys, slices)
					wantVals := winnerBits(bits, slices, want)
					for _, be := range familyBackends() {
						idx := must(t)(tensor.Empty(dtype.Int64, keep))
						vals := must(t)(tensor.Empty(dt, keep))
						require.NoError(t, be.ArgReduce(rule, vals, idx, a), name)
						require.Equal(t, want, idx.Int64s(), "%s threads=%v", name, threadsOf(be))
						require.Equal(t, wantVals, vals.Bits(), "%s: values", name)
						vals2 := must(t)(tensor.Empty(dt, keep))
						require.NoError(t, be.ArgReduce(rule, vals2, nil, a), name)
						require.Equal(t, wantVals, vals2.Bits(), "%s: values without positions", name)
					}
				}
			}
		}
	}
}

// Values without positions (ArgReduce with a nil idx): the cpu backend
// folds contiguous rows with plain SIMD minimum/maximum lanes where that
// settles the winner's bits (no NaN, a non-zero best), and with positions
// where it does not. The data make both happen in one tensor: ordinary
// values in most slices, and slices whose best is a zero of either sign
// (first -0 or first +0), a NaN (payloads and signs), or an infinity, plus
// the tie-heavy data of TestArgReduceMatchesRefAndOracle.
func TestArgReduceValuesOnly(t *testing.T) {
	cases := []reduceCase{
		{[]int{64, 300}, []int{1}},  // short rows, each one contiguous run
		{[]int{9, 1000}, []int{1}},  // rows with a tail after the SIMD prefix
		{[]int{3, 70000}, []int{1}}, // rows cut into blocks of positions
		{[]int{200000}, []int{0}},   // one long row
		{[]int{300, 256}, []int{0}}, // column mode
		{[]int{300, 256}, []int{0, 1}},
		{[]int{40, 7, 96}, []int{0, 2}},
	}
	special := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1)}
	for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float64, dtype.Float16, dtype.BFloat16, dtype.Int32, dtype.Int64} {
		for _, c := range cases {
			if raceEnabled && len(c.shape) == 1 {
				continue
			}
			for _, l := range []layout{contiguous, negStep, transposed} {
				for _, kind := range []string{"ordinary", "specials", "ties"} {
					r := newRand(seedOf("argreduce-values", dt.String(), fmt.Sprint(c.shape, c.red), layoutName(l), kind))
					slices := sliceIndices(c.shape, c.red)
					a := argInput(t, dt, c.shape, l, func(n int) []uint64 {
						if kind == "ties" {
							return tieBits(r, dt, n)
						}
						out := make([]uint64, n)
						for i := range out {
							out[i] = genOne(r, dt, genNormal)
						}
						if kind == "specials" && dt.IsFloat() {
							// a few slices' best is a zero (all others negative for
							// max, positive for min: both rules see it), a NaN or
							// an infinity
							for _, sl := range slices {
								switch r.IntN(4) {
								case 0:
									sign := float64(r.IntN(2)*2 - 1) // max sees the zero best if -1, min if +1
									for _, i := range sl {
										out[i] = bitsOfFloat(dt, sign*float64(1+r.IntN(3)))
									}
									for k := 0; k < 3; k++ {
										out[sl[r.IntN(len(sl))]] = bitsOfFloat(dt, special[r.IntN(2)])
									}
								case 1:
									out[sl[r.IntN(len(sl))]] = nanBits(dt, uint64(r.IntN(3)), r.IntN(2) == 0)
									out[sl[r.IntN(len(sl))]] = nanBits(dt, uint64(r.IntN(3)), r.IntN(2) == 0)
								case 2:
									out[sl[r.IntN(len(sl))]] = bitsOfFloat(dt, special[2+r.IntN(2)])
								}
							}
						}
						return out
					})
					keep := keepShape(c.shape, c.red)
					bits := a.Bits()
					keys := keysOf(dt, bits)
					for rule := range backend.Rule(backend.NumRules) {
						name := fmt.Sprintf("%v %v shape=%v red=%v %v %s", rule, dt, c.shape, c.red, layoutName(l), kind)
						want := winnerBits(bits, slices, oracleArg(rule, keys, slices))
						for _, be := range append(familyBackends(), ref.Backend{}) {
							vals := must(t)(tensor.Empty(dt, keep))
							require.NoError(t, be.ArgReduce(rule, vals, nil, a), name)
							require.Equal(t, want, vals.Bits(), "%s %s threads=%v", name, be.Name(), threadsOf(be))
						}
					}
				}
			}
		}
	}
}

// Rows that start anywhere relative to a 32-byte boundary (NumPy's arrays
// often start 16 bytes off one): views at every offset of 0..8 elements,
// with the winner (and a tie of it) at the start, inside and after the
// SIMD part of each row in turn.
func TestArgReduceUnalignedRows(t *testing.T) {
	const rows, cols = 6, 200
	for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float64} {
		for off := 0; off <= 8; off++ {
			for _, at := range []int{0, 3, 7, 100, 199} { // where each row's best goes
				r := newRand(seedOf("argreduce-unaligned", dt.String(), fmt.Sprint(off, at)))
				base := must(t)(tensor.Empty(dt, []int{rows*cols + 8}))
				bits := make([]uint64, rows*cols+8)
				for i := range bits {
					bits[i] = genOne(r, dt, genNormal)
				}
				for row := 0; row < rows; row++ {
					for _, c := range []int{at, (at + 1 + row) % cols} { // the best twice: a tie
						bits[off+row*cols+c] = bitsOfFloat(dt, float64(100+row))
					}
				}
				fillBits(base, bits)
				a := must(t)(must(t)(base.Slice(0, off, off+rows*cols, 1)).Reshape([]int{rows, cols}))
				for _, red := range [][]int{{1}, {0, 1}} {
					keep := keepShape([]int{rows, cols}, red)
					slices := sliceIndices([]int{rows, cols}, red)
					abits := a.Bits()
					keys := keysOf(dt, abits)
					for _, rule := range []backend.Rule{backend.RuleMin, backend.RuleMax} {
						name := fmt.Sprintf("%v %v off=%d at=%d red=%v", rule, dt, off, at, red)
						want := oracleArg(rule, keys, slices)
						for _, be := range familyBackends() {
							idx := must(t)(tensor.Empty(dtype.Int64, keep))
							vals := must(t)(tensor.Empty(dt, keep))
							require.NoError(t, be.ArgReduce(rule, vals, idx, a), name)
							require.Equal(t, want, idx.Int64s(), name)
							require.Equal(t, winnerBits(abits, slices, want), vals.Bits(), name)
							vals2 := must(t)(tensor.Empty(dt, keep))
							require.NoError(t, be.ArgReduce(rule, vals2, nil, a), name)
							require.Equal(t, vals.Bits(), vals2.Bits(), "%s: values only", name)
						}
					}
				}
			}
		}
	}
}

// NumPy's argmin/argmax on small examples: the first occurrence, the first
// NaN, -0 and +0 equal, NaN ignored by fmin/fmax (all NaN: position 0).
func TestArgReduceNumPyExamples(t *testing.T) {
	nan, nz := math.NaN(), math.Copysign(0, -1)
	for _, c := range []struct {
		vals                   []float64
		amin, amax, fmin, fmax int64
	}{
		{[]float64{3, 1, 2, 1, 3}, 1, 0, 1, 0},
		{[]float64{0, nz, 0}, 0, 0, 0, 0},
		{[]float64{nz, 0, nz}, 0, 0, 0, 0},
		{[]float64{2, nan, 1, nan}, 1, 1, 2, 0},
		{[]float64{nan, nan}, 0, 0, 0, 0},
		{[]float64{nan, 5, -1}, 0, 0, 2, 1},
		{[]float64{math.Inf(1), math.Inf(-1), math.Inf(-1)}, 1, 0, 1, 0},
	} {
		for _, dt := range floatDtypes {
			a := fromVals(t, dt, []int{len(c.vals)}, c.vals...)
			for _, be := range append(familyBackends(), ref.Backend{}) {
				for rule, want := range map[backend.Rule]int64{backend.RuleMin: c.amin, backend.RuleMax: c.amax,
					backend.RuleFMin: c.fmin, backend.RuleFMax: c.fmax} {
					idx := must(t)(tensor.Empty(dtype.Int64, []int{1}))
					require.NoError(t, be.ArgReduce(rule, nil, idx, a))
					require.Equal(t, []int64{want}, idx.Int64s(), "%v %v %v %s", c.vals, rule, dt, be.Name())
				}
			}
		}
	}
}

func TestArgReduceErrors(t *testing.T) {
	a := fromVals(t, dtype.Float32, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	empty := must(t)(tensor.Empty(dtype.Float32, []int{2, 0}))
	for _, be := range append(familyBackends(), ref.Backend{}) {
		idx := must(t)(tensor.Empty(dtype.Int64, []int{2, 1}))
		require.Error(t, be.ArgReduce(backend.Rule(7), nil, idx, a), be.Name())
		require.Error(t, be.ArgReduce(backend.RuleMin, nil, must(t)(tensor.Empty(dtype.Int32, []int{2, 1})), a), be.Name())
		require.Error(t, be.ArgReduce(backend.RuleMin, nil, must(t)(tensor.Empty(dtype.Int64, []int{3, 1})), a), be.Name())
		require.Error(t, be.ArgReduce(backend.RuleMin, must(t)(tensor.Empty(dtype.Float64, []int{2, 1})), idx, a), be.Name())
		require.Error(t, be.ArgReduce(backend.RuleMin, nil, idx, empty), be.Name())
		bad := fromVals(t, dtype.Int64, []int{2, 1}, 0, 3)
		require.Error(t, be.Scatter(must(t)(tensor.Empty(dtype.Float32, []int{2, 3})), fromVals(t, dtype.Float32, []int{2, 1}, 1, 2), bad), be.Name())
		require.Error(t, be.Gather(must(t)(tensor.Empty(dtype.Float32, []int{2, 1})), a, bad), be.Name())
	}
}

// Scatter and Gather: cpu equals ref bit for bit over layouts and reduced
// dims, every dtype; and they are transposes: sum <Scatter(g), x> equals
// sum <g, Gather(x)> exactly on small integer-valued floats.
func TestScatterGather(t *testing.T) {
	count := 0
	for _, dt := range allDtypes {
		for _, c := range reduceCases() {
			for _, l := range allLayouts {
				if !underRace(&count, 3) {
					continue
				}
				r := newRand(seedOf("scatter", dt.String(), fmt.Sprint(c.shape, c.red), l.String()))
				keep := keepShape(c.shape, c.red)
				rlen := numel(c.shape) / max(1, numel(keep))
				gen := func(n int) []uint64 { return tieBits(r, dt, n) }
				g := makeTensor(t, dt, keep, l, gen)
				x := makeTensor(t, dt, c.shape, allLayouts[(int(l)+1)%len(allLayouts)], gen)
				idx := makeTensor(t, dtype.Int64, keep, allLayouts[(int(l)+2)%len(allLayouts)], func(n int) []uint64 {
					out := make([]uint64, n)
					for i := range out {
						out[i] = uint64(r.IntN(rlen))
					}
					return out
				})
				name := fmt.Sprintf("%v shape=%v red=%v %v", dt, c.shape, c.red, l)
				wantS := must(t)(tensor.Empty(dt, c.shape))
				require.NoError(t, ref.Backend{}.Scatter(wantS, g, idx), name)
				wantG := must(t)(tensor.Empty(dt, keep))
				require.NoError(t, ref.Backend{}.Gather(wantG, x, idx), name)
				// the oracle: position idx[o] of slice o
				slices := sliceIndices(c.shape, c.red)
				gb, xb, ib := g.Bits(), x.Bits(), idx.Int64s()
				require.Equal(t, winnerBits(xb, slices, ib), wantG.Bits(), "%s: ref gather", name)
				scattered := make([]uint64, len(xb))
				for o, s := range slices {
					scattered[s[ib[o]]] = gb[o]
				}
				require.Equal(t, scattered, wantS.Bits(), "%s: ref scatter", name)
				for _, be := range familyBackends() {
					bn := fmt.Sprintf("%s threads=%v", name, threadsOf(be))
					s := must(t)(tensor.Empty(dt, c.shape))
					require.NoError(t, be.Scatter(s, g, idx), bn)
					require.Equal(t, wantS.Bits(), s.Bits(), "%s: scatter", bn)
					gg := must(t)(tensor.Empty(dt, keep))
					require.NoError(t, be.Gather(gg, x, idx), bn)
					require.Equal(t, wantG.Bits(), gg.Bits(), "%s: gather", bn)
				}
			}
		}
	}
	// transposes, on small integers (exact in every float dtype)
	for _, dt := range floatDtypes {
		for _, c := range reduceCases() {
			r := newRand(seedOf("transpose", dt.String(), fmt.Sprint(c.shape, c.red)))
			keep := keepShape(c.shape, c.red)
			rlen := numel(c.shape) / max(1, numel(keep))
			small := func(n int) []uint64 {
				out := make([]uint64, n)
				for i := range out {
					out[i] = bitsOfFloat(dt, float64(r.IntN(9)-4))
				}
				return out
			}
			g := makeTensor(t, dt, keep, negStep, small)
			x := makeTensor(t, dt, c.shape, permuted, small)
			idx := makeTensor(t, dtype.Int64, keep, contiguous, func(n int) []uint64 {
				out := make([]uint64, n)
				for i := range out {
					out[i] = uint64(r.IntN(rlen))
				}
				return out
			})
			for _, be := range append(familyBackends(), ref.Backend{}) {
				s := must(t)(tensor.Empty(dt, c.shape))
				require.NoError(t, be.Scatter(s, g, idx))
				gx := must(t)(tensor.Empty(dt, keep))
				require.NoError(t, be.Gather(gx, x, idx))
				require.Equal(t, dot(s.Float64s(), x.Float64s()), dot(g.Float64s(), gx.Float64s()),
					"%v shape=%v red=%v %s", dt, c.shape, c.red, be.Name())
			}
		}
	}
}

// clampOperands returns x, lo, hi of shape shape laid out as given, with
// values drawn so that each of the three wins often (and ties, NaNs, ±0).
func clampOperands(t *testing.T, r *rand.Rand, dt dtype.Dtype, shape []int, lx, llo, lhi layout) (x, lo, hi *tensor.Tensor) {
	gen := func(n int) []uint64 { return tieBits(r, dt, n) }
	return makeTensor(t, dt, shape, lx, gen), makeTensor(t, dt, shape, llo, gen), makeTensor(t, dt, shape, lhi, gen)
}

// Clamp equals Binary(Maximum) then Binary(Minimum); ClampRoute the
// composition of two Routes; ClampSelect of two Selects — on ref, and cpu
// equals ref bit for bit.
func TestClampKernels(t *testing.T) {
	shapes := [][]int{{3, 50}, {37}, {}, {2, 1, 5}}
	count := 0
	for _, dt := range allDtypes {
		other := dtype.Float64
		if dt == dtype.Float64 {
			other = dtype.Int16
		}
		for _, shape := range shapes {
			for li, lx := range allLayouts {
				for _, llo := range allLayouts {
					if !underRace(&count, 3) {
						continue
					}
					lhi := allLayouts[(li+int(llo))%len(allLayouts)]
					r := newRand(seedOf("clamp", dt.String(), fmt.Sprint(shape), lx.String(), llo.String()))
					x, lo, hi := clampOperands(t, r, dt, shape, lx, llo, lhi)
					name := fmt.Sprintf("%v shape=%v x=%v lo=%v hi=%v", dt, shape, lx, llo, lhi)
					fresh := func(d dtype.Dtype) *tensor.Tensor { return must(t)(tensor.Empty(d, shape)) }
					var rb ref.Backend
					// the compositions, on ref
					w := fresh(dt)
					require.NoError(t, rb.Binary(backend.Maximum, w, x, lo), name)
					wantC := fresh(dt)
					require.NoError(t, rb.Binary(backend.Minimum, wantC, w, hi), name)
					gotC := fresh(dt)
					require.NoError(t, rb.Clamp(gotC, x, lo, hi), name)
					require.Equal(t, wantC.Bits(), gotC.Bits(), "%s: ref clamp", name)
					for _, vd := range []dtype.Dtype{dt, other} {
						vgen := func(n int) []uint64 { return genBits(r, vd, n, genSpecial) }
						g := makeTensor(t, vd, shape, allLayouts[(li+1)%len(allLayouts)], vgen)
						dx := makeTensor(t, vd, shape, contiguous, vgen)
						dlo := makeTensor(t, vd, shape, negStep, vgen)
						dhi := makeTensor(t, vd, shape, zeroStride, vgen)
						gw, ghi, gx, glo := fresh(vd), fresh(vd), fresh(vd), fresh(vd)
						require.NoError(t, rb.Route(backend.RuleMin, gw, ghi, w, hi, g), name)
						require.NoError(t, rb.Route(backend.RuleMax, gx, glo, x, lo, gw), name)
						rx, rlo, rhi := fresh(vd), fresh(vd), fresh(vd)
						require.NoError(t, rb.ClampRoute(rx, rlo, rhi, x, lo, hi, g), name)
						require.Equal(t, [][]uint64{gx.Bits(), glo.Bits(), ghi.Bits()}, [][]uint64{rx.Bits(), rlo.Bits(), rhi.Bits()}, "%s: ref route %v", name, vd)
						s1, wantS := fresh(vd), fresh(vd)
						require.NoError(t, rb.Select(backend.RuleMax, s1, x, lo, dx, dlo), name)
						require.NoError(t, rb.Select(backend.RuleMin, wantS, w, hi, s1, dhi), name)
						gotS := fresh(vd)
						require.NoError(t, rb.ClampSelect(gotS, x, lo, hi, dx, dlo, dhi), name)
						require.Equal(t, wantS.Bits(), gotS.Bits(), "%s: ref select %v", name, vd)
						for _, be := range familyBackends() {
							bn := fmt.Sprintf("%s %v threads=%v", name, vd, threadsOf(be))
							cx, clo, chi := fresh(vd), fresh(vd), fresh(vd)
							require.NoError(t, be.ClampRoute(cx, clo, chi, x, lo, hi, g), bn)
							require.Equal(t, [][]uint64{gx.Bits(), glo.Bits(), ghi.Bits()}, [][]uint64{cx.Bits(), clo.Bits(), chi.Bits()}, "%s: route", bn)
							cs := fresh(vd)
							require.NoError(t, be.ClampSelect(cs, x, lo, hi, dx, dlo, dhi), bn)
							require.Equal(t, wantS.Bits(), cs.Bits(), "%s: select", bn)
						}
					}
					for _, be := range familyBackends() {
						c := fresh(dt)
						require.NoError(t, be.Clamp(c, x, lo, hi), name)
						require.Equal(t, wantC.Bits(), c.Bits(), "%s: clamp threads=%v", name, threadsOf(be))
					}
				}
			}
		}
	}
}

// Large clamps (parallel, SIMD bodies and tails) with scalar bounds (zero
// strides) and tensor bounds: cpu equals ref.
func TestClampLarge(t *testing.T) {
	n := 3*cpu.Chunk + 13
	count := 0
	for _, dt := range floatDtypes {
		if !underRace(&count, 2) {
			continue
		}
		r := newRand(seedOf("clamp-large", dt.String()))
		gen := func(n int) []uint64 { return tieBits(r, dt, n) }
		x := makeTensor(t, dt, []int{n}, contiguous, gen)
		for _, bounds := range []layout{zeroStride, contiguous} {
			lo, hi := makeTensor(t, dt, []int{n}, bounds, gen), makeTensor(t, dt, []int{n}, bounds, gen)
			g := makeTensor(t, dt, []int{n}, contiguous, gen)
			want := must(t)(tensor.Empty(dt, []int{n}))
			require.NoError(t, ref.Backend{}.Clamp(want, x, lo, hi))
			wr := [3]*tensor.Tensor{}
			for i := range wr {
				wr[i] = must(t)(tensor.Empty(dt, []int{n}))
			}
			require.NoError(t, ref.Backend{}.ClampRoute(wr[0], wr[1], wr[2], x, lo, hi, g))
			for _, be := range familyBackends() {
				got := must(t)(tensor.Empty(dt, []int{n}))
				require.NoError(t, be.Clamp(got, x, lo, hi))
				require.Equal(t, want.Bits(), got.Bits(), "%v %v %v", dt, bounds, threadsOf(be))
				var gr [3]*tensor.Tensor
				for i := range gr {
					gr[i] = must(t)(tensor.Empty(dt, []int{n}))
				}
				require.NoError(t, be.ClampRoute(gr[0], gr[1], gr[2], x, lo, hi, g))
				for i := range gr {
					require.Equal(t, wr[i].Bits(), gr[i].Bits(), "%v %v %v route %d", dt, bounds, threadsOf(be), i)
				}
			}
		}
	}
}

// fmin and fmax through Binary: cpu equals ref, and ref follows the rule.
func TestBinaryFMinFMax(t *testing.T) {
	for _, dt := range allDtypes {
		for _, la := range allLayouts {
			r := newRand(seedOf("fminmax", dt.String(), la.String()))
			gen := func(n int) []uint64 { return tieBits(r, dt, n) }
			a := makeTensor(t, dt, []int{5, 41}, la, gen)
			b := makeTensor(t, dt, []int{5, 41}, contiguous, gen)
			ab, bb := a.Bits(), b.Bits()
			for _, op := range []backend.BinaryOp{backend.FMin, backend.FMax} {
				rule, ok := op.Rule()
				require.True(t, ok)
				want := make([]uint64, len(ab))
				for i := range ab {
					want[i] = bb[i]
					if oracleKeepsA(rule, dt, ab[i], bb[i]) {
						want[i] = ab[i]
					}
				}
				for _, be := range append(familyBackends(), ref.Backend{}) {
					out := must(t)(tensor.Empty(dt, []int{5, 41}))
					require.NoError(t, be.Binary(op, out, a, b))
					require.Equal(t, want, out.Bits(), "%v %v %v %s", op, dt, la, be.Name())
				}
			}
		}
	}
}

// Outputs with strides (out= will pass such views): the results equal those
// written into fresh contiguous tensors.
func TestFamilyStridedOutputs(t *testing.T) {
	for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float16, dtype.Int64} {
		r := newRand(seedOf("strided-out", dt.String()))
		gen := func(n int) []uint64 { return tieBits(r, dt, n) }
		shape, red := []int{6, 5, 40}, []int{1}
		keep := keepShape(shape, red)
		a := makeTensor(t, dt, shape, contiguous, gen)
		g := makeTensor(t, dt, keep, contiguous, gen)
		lo, hi := makeTensor(t, dt, shape, zeroStride, gen), makeTensor(t, dt, shape, negStep, gen)
		zeros := func(n int) []uint64 { return make([]uint64, n) }
		for _, be := range append(familyBackends(), ref.Backend{}) {
			name := fmt.Sprintf("%v %s threads=%v", dt, be.Name(), threadsOf(be))
			idx, vals := must(t)(tensor.Empty(dtype.Int64, keep)), must(t)(tensor.Empty(dt, keep))
			require.NoError(t, be.ArgReduce(backend.RuleMax, vals, idx, a), name)
			sidx, svals := makeTensor(t, dtype.Int64, keep, permuted, zeros), makeTensor(t, dt, keep, negStep, zeros)
			require.NoError(t, be.ArgReduce(backend.RuleMax, svals, sidx, a), name)
			require.Equal(t, idx.Bits(), sidx.Bits(), "%s: argreduce positions", name)
			require.Equal(t, vals.Bits(), svals.Bits(), "%s: argreduce values", name)

			s, ss := must(t)(tensor.Empty(dt, shape)), makeTensor(t, dt, shape, permuted, zeros)
			require.NoError(t, be.Scatter(s, g, idx), name)
			require.NoError(t, be.Scatter(ss, g, idx), name)
			require.Equal(t, s.Bits(), ss.Bits(), "%s: scatter", name)
			gg, sg := must(t)(tensor.Empty(dt, keep)), makeTensor(t, dt, keep, negStep, zeros)
			require.NoError(t, be.Gather(gg, a, idx), name)
			require.NoError(t, be.Gather(sg, a, idx), name)
			require.Equal(t, gg.Bits(), sg.Bits(), "%s: gather", name)

			c, sc := must(t)(tensor.Empty(dt, shape)), makeTensor(t, dt, shape, permuted, zeros)
			require.NoError(t, be.Clamp(c, a, lo, hi), name)
			require.NoError(t, be.Clamp(sc, a, lo, hi), name)
			require.Equal(t, c.Bits(), sc.Bits(), "%s: clamp", name)
			// in place: out is x itself
			x := contiguousCopy(t, a)
			require.NoError(t, be.Clamp(x, x, lo, hi), name)
			require.Equal(t, c.Bits(), x.Bits(), "%s: clamp in place", name)
		}
	}
}
