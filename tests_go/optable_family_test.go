package tests_go

// The op table's rows for the min/max family (docs/semantics.md): fmin,
// fmax, clamp (both bounds, or one), amin and amax over several dims
// choices, argmin and argmax, min and max over a dim (values and indices).
// Their oracles restate the selection rule in the test: the winner's bits,
// ties to the first operand (or the first position), NaN by the rule.

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

var never = func(dtype.Dtype) bool { return false }

var familyRows = concatRows(
	[]opInfo{
		withCovers(binaryRow("fmin", "FminBackward", true, ops.Fmin, never, selectionOracle(selFMin)), "route", "select"),
		withCovers(binaryRow("fmax", "FmaxBackward", true, ops.Fmax, never, selectionOracle(selFMax)), "route", "select"),
		clampRow("clamp", true, true),
		clampRow("clamp_min", true, false),
		clampRow("clamp_max", false, true),
	},
	extremeRows("amin", "AminBackward", selMin, extremeCall{values: ops.Amin}),
	extremeRows("amax", "AmaxBackward", selMax, extremeCall{values: ops.Amax}),
	extremeRows("argmin", "", selMin, extremeCall{index: ops.Argmin}),
	extremeRows("argmax", "", selMax, extremeCall{index: ops.Argmax}),
	extremeRows("min", "MinBackward", selMin, extremeCall{both: ops.MinDim}),
	extremeRows("max", "MaxBackward", selMax, extremeCall{both: ops.MaxDim}),
	extremeRows("nanmin", "NanminBackward", selFMin, extremeCall{values: ops.Nanmin}),
	extremeRows("nanmax", "NanmaxBackward", selFMax, extremeCall{values: ops.Nanmax}),
	extremeRows("nanargmin", "", selFMin, extremeCall{index: ops.Nanargmin}),
	extremeRows("nanargmax", "", selFMax, extremeCall{index: ops.Nanargmax}),
)

func concatRows(parts ...[]opInfo) []opInfo {
	var out []opInfo
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// broadcastTriples are the (x, min, max) shapes clamp runs on.
var broadcastTriples = [][3][]int{
	{{}, {}, {}},
	{{2, 1}, {2}, {}},
	{{3, 1, 2}, {1, 3, 2}, {2}},
	{{0, 3}, {1, 3}, {}},
	{{4, 1, 5}, {6, 1}, {1, 5}},
	{{3}, {2, 3}, {2, 1}}, // the bounds broadcast x up
	{{1}, {}, {2, 1}},
}

// broadcastShapes is npBroadcast of any number of shapes.
func broadcastShapes(shapes [][]int) []int {
	out := []int{}
	for _, s := range shapes {
		var ok bool
		if out, ok = npBroadcast(out, s); !ok {
			panic("table shapes must broadcast")
		}
	}
	return out
}

// clampRow is clamp with both bounds, or only one (the other nil).
func clampRow(name string, lo, hi bool) opInfo {
	arity := 1
	if lo {
		arity++
	}
	if hi {
		arity++
	}
	// split maps the row's inputs to clamp's (x, min, max).
	split := func(in []*tensor.Tensor) []*tensor.Tensor {
		args, k := []*tensor.Tensor{in[0], nil, nil}, 1
		if lo {
			args[1], k = in[k], k+1
		}
		if hi {
			args[2] = in[k]
		}
		return args
	}
	return opInfo{
		name: name, schema: "clamp", schemaArity: 3, node: "ClampBackward", arity: arity, minmax: true, diff: true,
		covers:  []string{"clamp_route", "clamp_select"},
		rejects: never,
		call: func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) {
			a := split(in)
			return ops.Clamp(c, a[0], a[1], a[2])
		},
		result: func(shapes [][]int, dts []dtype.Dtype) ([]int, dtype.Dtype) {
			rd := dts[0] // the composition: maximum(x, min), then with max
			for _, d := range dts[1:] {
				rd = expectedPromote(rd, d)
			}
			return broadcastShapes(shapes), rd
		},
		oracle: func(t *testing.T, in, outs []*tensor.Tensor, msg string) {
			clampOracle(t, split(in), outs[0], msg)
		},
		fdData:  func(int) genKind { return genSmooth },
		fdValid: apartValid,
		generic: func(in []*tensor.Tensor) ([]*tensor.Tensor, []int64) { return split(in), nil },
	}
}

// clampOracle checks clamp by the rule: x against min by maximum's rule,
// the winner against max by minimum's; the result is the final winner's
// bits. args are (x, min, max), nil where absent, all of out's dtype.
func clampOracle(t *testing.T, args []*tensor.Tensor, out *tensor.Tensor, msg string) {
	os := out.Shape()
	bits := make([][]uint64, 3)
	for k, a := range args {
		if a != nil {
			require.Equal(t, out.Dtype(), a.Dtype(), "oracle needs one dtype")
			bits[k] = a.Bits()
		}
	}
	ob := out.Bits()
	for i := range ob {
		w := 0
		wi := srcIndex(os, args[0].Shape(), i)
		for _, step := range []struct {
			k int
			r selRule
		}{{1, selMax}, {2, selMin}} {
			b := args[step.k]
			if b == nil {
				continue
			}
			bi := srcIndex(os, b.Shape(), i)
			if !winsAt(step.r, args[w], wi, b, bi) {
				w, wi = step.k, bi
			}
		}
		if want := bits[w][wi]; ob[i] != want {
			require.Failf(t, "clamp rule violated", "%s: element %d: got bits %#x, want %#x (operand %d wins)", msg, i, ob[i], want, w)
		}
	}
}

// apartValid accepts finite-difference data whose operands differ by more
// than 1e-3 at every output element (no ties within the step).
func apartValid(in [][]float64, shapes [][]int) bool {
	out := broadcastShapes(shapes)
	for i := 0; i < numel(out); i++ {
		for j := range in {
			for k := j + 1; k < len(in); k++ {
				if math.Abs(in[j][srcIndex(out, shapes[j], i)]-in[k][srcIndex(out, shapes[k], i)]) <= 1e-3 {
					return false
				}
			}
		}
	}
	return true
}

// What a selecting reduction row returns.
type exKind int

const (
	exValues exKind = iota // amin, amax, nanmin, nanmax
	exIndex                // argmin, argmax, nanargmin, nanargmax
	exBoth                 // min, max over a dim
)

// extremeCall is a selecting reduction's typed Go entry, one of three
// forms: the winners over dims, their positions along a dim (or flat), or
// both over one dim.
type extremeCall struct {
	values func(c *ops.Context, x *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error)
	index  func(c *ops.Context, x *tensor.Tensor, dim *int, keepdim bool) (*tensor.Tensor, error)
	both   func(c *ops.Context, x *tensor.Tensor, dim int, keepdim bool) (values, indices *tensor.Tensor, err error)
}

func (e extremeCall) kind() exKind {
	switch {
	case e.index != nil:
		return exIndex
	case e.both != nil:
		return exBoth
	}
	return exValues
}

// call runs the entry over dims (as dimsFor chose them).
func (e extremeCall) call(c *ops.Context, x *tensor.Tensor, dims []int, keep bool) ([]*tensor.Tensor, error) {
	switch e.kind() {
	case exIndex:
		var dim *int
		if dims != nil {
			dim = &dims[0]
		}
		y, err := e.index(c, x, dim, keep)
		return []*tensor.Tensor{y}, err
	case exBoth:
		v, i, err := e.both(c, x, dims[0], keep)
		return []*tensor.Tensor{v, i}, err
	}
	y, err := e.values(c, x, dims, keep)
	return []*tensor.Tensor{y}, err
}

// extremeRows returns the rows of one selecting reduction over several dims
// choices: all, one, several, none (()), with and without keepdim: the op
// registered as name, its node, the rule its fold follows and its typed
// entry.
func extremeRows(name, node string, r selRule, entry extremeCall) []opInfo {
	kind := entry.kind()
	type variant struct {
		suffix  string
		dimsFor func(nd int) ([]int, bool)
	}
	dim0 := func(nd int) ([]int, bool) {
		if nd == 0 {
			return nil, false
		}
		return []int{0}, false
	}
	lastKeep := func(nd int) ([]int, bool) {
		if nd == 0 {
			return nil, true
		}
		return []int{-1}, true
	}
	var vs []variant
	switch kind {
	case exValues:
		vs = []variant{
			{"", func(int) ([]int, bool) { return nil, false }},
			{"_dim0", dim0},
			{"_last_keepdim", lastKeep},
			{"_first_last", func(nd int) ([]int, bool) {
				if nd < 2 {
					return nil, false
				}
				return []int{-1, 0}, false
			}},
			{"_nodims", func(int) ([]int, bool) { return []int{}, false }},
			{"_all_keepdim", func(int) ([]int, bool) { return nil, true }},
		}
	case exIndex:
		vs = []variant{
			{"", func(int) ([]int, bool) { return nil, false }},
			{"_all_keepdim", func(int) ([]int, bool) { return nil, true }},
			{"_dim0", dim0},
			{"_last_keepdim", lastKeep},
		}
	case exBoth:
		vs = []variant{{"_dim0", dim0}, {"_last_keepdim", lastKeep}}
	}
	var rows []opInfo
	for _, v := range vs {
		rows = append(rows, extremeRow(name+v.suffix, name, node, r, entry, v.dimsFor))
	}
	return rows
}

func extremeRow(name, schema, node string, r selRule, entry extremeCall, dimsFor func(nd int) ([]int, bool)) opInfo {
	kind := entry.kind()
	callN := func(c *ops.Context, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		dims, keep := dimsFor(in[0].Ndim())
		outs, err := entry.call(c, in[0], dims, keep)
		if err != nil {
			return nil, err
		}
		return outs, nil
	}
	row := opInfo{
		name: name, schema: schema, node: node, arity: 1, minmax: true, diff: kind != exIndex,
		rejects: never,
		call: func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) {
			outs, err := callN(c, in)
			if err != nil {
				return nil, err
			}
			return outs[0], nil
		},
		result: func(shapes [][]int, dts []dtype.Dtype) ([]int, dtype.Dtype) {
			dims, keep := dimsFor(len(shapes[0]))
			red := reducedSet(len(shapes[0]), dims)
			out := []int{}
			for d, n := range shapes[0] {
				switch {
				case !red[d]:
					out = append(out, n)
				case keep:
					out = append(out, 1)
				}
			}
			if kind == exIndex {
				return out, dtype.Int64
			}
			return out, dts[0]
		},
		oracle: func(t *testing.T, in, outs []*tensor.Tensor, msg string) {
			dims, _ := dimsFor(in[0].Ndim())
			extremeOracle(t, r, kind, in[0], reducedSet(in[0].Ndim(), dims), outs, msg)
		},
		fdData: func(int) genKind { return genSmooth },
		fdValid: func(in [][]float64, shapes [][]int) bool {
			dims, _ := dimsFor(len(shapes[0]))
			return uniqueWinners(r, in[0], shapes[0], reducedSet(len(shapes[0]), dims))
		},
		generic: func(in []*tensor.Tensor) ([]*tensor.Tensor, []int64) {
			return in, reductionAttrs(dimsFor(in[0].Ndim()))
		},
		fails: func(shapes [][]int) bool {
			dims, _ := dimsFor(len(shapes[0]))
			red := reducedSet(len(shapes[0]), dims)
			for d, n := range shapes[0] {
				if red[d] && n == 0 {
					return true // a zero-size slice has no winner
				}
			}
			return false
		},
	}
	if kind == exIndex && r.ignoresNaN() {
		// The position of an all-NaN slice's winner is refused (NumPy's
		// nanargmin raises): a Value error, as for a zero-size slice.
		row.failsOn = func(in []*tensor.Tensor) bool {
			dims, _ := dimsFor(in[0].Ndim())
			win, _ := sliceWinners(r, in[0], reducedSet(in[0].Ndim(), dims))
			for _, w := range win {
				if isNaNBits(in[0].Dtype(), in[0].Bits()[w]) {
					return true
				}
			}
			return false
		}
	}
	if kind == exBoth {
		row.callN = callN
		row.skip = func(shapes [][]int) bool { return len(shapes[0]) == 0 } // needs a dim
	}
	if kind != exIndex {
		row.covers = []string{"scatter", "gather"}
	}
	return row
}

// sliceWinners folds each reduced slice of x (row-major order of the
// reduced dims) with rule r: the winner keeps its place iff it wins against
// the next element. It returns, per output (keepdim row-major order), the
// winner's row-major index in x and its position in its slice.
func sliceWinners(r selRule, x *tensor.Tensor, red []bool) (win, pos []int) {
	shape := x.Shape()
	keep := make([]int, len(shape))
	for d := range shape {
		keep[d] = shape[d]
		if red[d] {
			keep[d] = 1
		}
	}
	n := numel(keep)
	win, pos = make([]int, n), make([]int, n)
	seen := make([]int, n)
	for i := 0; i < x.Numel(); i++ {
		o := keepIndex(shape, keep, i)
		if seen[o] == 0 || !winsAt(r, x, win[o], x, i) {
			win[o], pos[o] = i, seen[o]
		}
		seen[o]++
	}
	return win, pos
}

// extremeOracle checks a selecting reduction: values are the winners' bits
// (the first NaN, else the first best), indices their positions.
func extremeOracle(t *testing.T, r selRule, kind exKind, x *tensor.Tensor, red []bool, outs []*tensor.Tensor, msg string) {
	win, pos := sliceWinners(r, x, red)
	k := 0
	if kind != exIndex {
		vals := outs[0]
		require.Equal(t, len(win), vals.Numel(), msg)
		xb, vb := x.Bits(), vals.Bits()
		for o := range win {
			if vb[o] != xb[win[o]] {
				require.Failf(t, "selecting reduction: wrong winner", "%s: output %d: got bits %#x, want %#x (element %d)",
					msg, o, vb[o], xb[win[o]], win[o])
			}
		}
		k = 1
	}
	if kind == exValues {
		require.Len(t, outs, 1, msg)
		return
	}
	require.Len(t, outs, k+1, msg)
	idx := outs[k]
	require.Equal(t, dtype.Int64, idx.Dtype(), msg)
	requireShape(t, outs[0].Shape(), idx.Shape(), msg+": indices shape")
	got := idx.Int64s()
	for o := range pos {
		if got[o] != int64(pos[o]) {
			require.Failf(t, "selecting reduction: wrong position", "%s: output %d: got %d, want %d", msg, o, got[o], pos[o])
		}
	}
}

// uniqueWinners accepts finite-difference data whose slices each have one
// winner, more than 1e-3 better than every other element.
func uniqueWinners(r selRule, vals []float64, shape []int, red []bool) bool {
	x, err := tensor.FromFloat64s(dtype.Float64, shape, vals)
	if err != nil {
		panic(err)
	}
	win, _ := sliceWinners(r, x, red)
	keep := make([]int, len(shape))
	for d := range shape {
		keep[d] = shape[d]
		if red[d] {
			keep[d] = 1
		}
	}
	for i, v := range vals {
		w := win[keepIndex(shape, keep, i)]
		if i != w && math.Abs(v-vals[w]) <= 1e-3 {
			return false
		}
	}
	return true
}
