package tests_go

// The op table (PyTorch OpInfo style): one row per op, and every test in this
// file is driven from it. Each row says how to call the op under a given
// *ops.Context, which dtypes it rejects, whether it is differentiable, its
// result dtype and shape, an independent oracle for its values, and the
// input data finite differences need.
//
// For every row × dtype × broadcast pair (both orders) × memory layout of
// each input (contiguous, permuted, negative step, zero stride):
//   - rejected dtypes return a TypeError-kind error on both backends, and
//     a zero-size reduced slice (amin, argmax, ...) a ValueError-kind one;
//   - the cpu backend equals the ref backend bit for bit, every output
//     (arithmetic ops may differ only in NaN payloads; the min/max family
//     may not differ at all);
//   - the result has NumPy's broadcast shape and the promoted dtype;
//   - the result does not depend on the layout of the inputs;
//   - the values match an oracle written in the test (Go arithmetic, the
//     selection rule of docs/semantics.md, float64 sums);
//   - for floating dtypes and differentiable ops: gradients on cpu equal
//     gradients on ref bit for bit, have each input's shape and dtype, and
//     do not depend on layout;
//   - forward mode (ops.CallJvp): the same outputs, tangents of the
//     outputs' shapes and dtypes, cpu equal to ref and independent of layout;
//     integer inputs cannot carry tangents (a Type error).
// Float64 gradients and forward-mode tangents are compared with central
// finite differences, and mixed dtype pairs (triples for clamp) check that
// gradients come back in each input's dtype. For every row, out= through
// ops.CallN (TestOpTableOut). For the min/max family's rows, forward mode is
// the exact transpose of the backward (TestOpTableJvpTranspose) and double
// backward with create_graph is checked against forward mode and finite
// differences (TestOpTableDoubleBackward). The family's rows are in
// optable_family_test.go.

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// opInfo is one row of the table.
type opInfo struct {
	name   string
	node   string // grad_fn name of the result
	arity  int    // tensor inputs the row makes: 1 (unary, reductions), 2 (binary, clamp with one bound) or 3 (clamp)
	minmax bool   // the min/max family: results must match ref exactly, NaN payloads included
	diff   bool   // differentiable for floating dtypes
	// rejects reports whether the op refuses inputs of dtype dt.
	rejects func(dt dtype.Dtype) bool
	// call returns the op's first output (the differentiable one).
	call func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error)
	// callN returns every output (min and max over a dim: values and
	// indices); nil when the op has one output (call).
	callN func(c *ops.Context, in []*tensor.Tensor) ([]*tensor.Tensor, error)
	// result returns the expected shape and dtype of the first output for
	// the given inputs.
	result func(shapes [][]int, dts []dtype.Dtype) ([]int, dtype.Dtype)
	// oracle checks the outputs' values against the inputs, independently
	// of the library's kernels.
	oracle func(t *testing.T, in []*tensor.Tensor, outs []*tensor.Tensor, msg string)
	// fdData is the distribution of input k for finite differences.
	fdData func(k int) genKind
	// fdValid rejects finite-difference data too close to a kink.
	fdValid func(in [][]float64, shapes [][]int) bool
	// schema is the registered op the row calls ("" means name);
	// schemaArity its arity when it differs from arity (clamp with an
	// absent bound).
	schema      string
	schemaArity int
	// covers lists the registered ops the row runs through its gradient,
	// double backward or forward mode (route and select, the halves of the
	// minimum/maximum gradient; scatter and gather; clamp_route and
	// clamp_select).
	covers []string
	// generic is the row as the generic entries see it (ops.CallN with
	// out=, ops.CallJvp): the op's inputs (nil for an absent clamp bound)
	// and attributes. Forward mode and out= are checked for every row
	// through it (TestOpTableJvp*, TestOpTableOut).
	generic func(in []*tensor.Tensor) (args []*tensor.Tensor, attrs []int64)
	// fails reports input shapes the op must refuse with a Value error on
	// both backends (a zero-size reduced slice of amin, argmax, ...);
	// failsOn inputs whose values it must refuse (an all-NaN slice of
	// nanargmin).
	fails   func(shapes [][]int) bool
	failsOn func(in []*tensor.Tensor) bool
	// skip reports input shapes the row does not run on (0-d inputs of
	// ops that need a dim).
	skip func(shapes [][]int) bool
}

// outputs runs the row and returns all its outputs.
func (op opInfo) outputs(c *ops.Context, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if op.callN != nil {
		return op.callN(c, in)
	}
	y, err := op.call(c, in)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{y}, nil
}

// refuses reports whether the op must refuse inputs in with a Value error.
func (op opInfo) refuses(in []*tensor.Tensor) bool {
	shapes := make([][]int, len(in))
	for k, x := range in {
		shapes[k] = x.Shape()
	}
	return op.fails != nil && op.fails(shapes) || op.failsOn != nil && op.failsOn(in)
}

// id returns the id of the registered op the row calls.
func (op opInfo) id() int {
	name := op.schema
	if name == "" {
		name = op.name
	}
	s, ok := ops.Lookup(name)
	if !ok {
		panic("row " + op.name + " names no registered op")
	}
	return s.ID
}

// single adapts an oracle of one output.
func single(f func(t *testing.T, in []*tensor.Tensor, out *tensor.Tensor, msg string)) func(t *testing.T, in, outs []*tensor.Tensor, msg string) {
	return func(t *testing.T, in, outs []*tensor.Tensor, msg string) { f(t, in, outs[0], msg) }
}

// identity is the generic form of an op that takes its inputs as they are
// and no attributes.
func identity(in []*tensor.Tensor) ([]*tensor.Tensor, []int64) { return in, nil }

// reductionAttrs encodes dims and keepdim as the generic entries take them.
func reductionAttrs(dims []int, keep bool) []int64 {
	k := int64(0)
	if keep {
		k = 1
	}
	if dims == nil {
		return []int64{k, -1}
	}
	attrs := []int64{k, int64(len(dims))}
	for _, d := range dims {
		attrs = append(attrs, int64(d))
	}
	return attrs
}

// ---- rows ----

func binaryRow(name, node string, minmax bool, call func(*ops.Context, *tensor.Tensor, *tensor.Tensor) (*tensor.Tensor, error),
	rejects func(dtype.Dtype) bool, oracle func(t *testing.T, in []*tensor.Tensor, out *tensor.Tensor, msg string)) opInfo {
	row := opInfo{
		name: name, node: node, arity: 2, minmax: minmax, diff: true, rejects: rejects,
		call: func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return call(c, in[0], in[1]) },
		result: func(shapes [][]int, dts []dtype.Dtype) ([]int, dtype.Dtype) {
			s, ok := npBroadcast(shapes[0], shapes[1])
			if !ok {
				panic("table shapes must broadcast")
			}
			return s, expectedPromote(dts[0], dts[1])
		},
		oracle:  single(oracle),
		fdData:  func(int) genKind { return genSmooth },
		generic: identity,
	}
	if minmax {
		row.fdValid = func(in [][]float64, shapes [][]int) bool {
			out, _ := npBroadcast(shapes[0], shapes[1])
			for i := 0; i < numel(out); i++ {
				a, b := in[0][srcIndex(out, shapes[0], i)], in[1][srcIndex(out, shapes[1], i)]
				if math.Abs(a-b) <= 1e-3 {
					return false
				}
			}
			return true
		}
	}
	return row
}

// trueDivision is a binary row whose integer inputs give the default float
// (div), and whose divisor's finite-difference data stays away from zero.
func trueDivision(row opInfo) opInfo {
	result := row.result
	row.result = func(shapes [][]int, dts []dtype.Dtype) ([]int, dtype.Dtype) {
		s, rd := result(shapes, dts)
		if !rd.IsFloat() {
			rd = dtype.Float32
		}
		return s, rd
	}
	row.fdData = func(k int) genKind {
		if k == 1 {
			return genAwayFromZero
		}
		return genSmooth
	}
	return row
}

// reductionRow describes sum/mean over dims chosen from the input's rank.
func reductionRow(name, node string, mean bool, dimsFor func(nd int) ([]int, bool)) opInfo {
	schema := "sum"
	if mean {
		schema = "mean"
	}
	return opInfo{
		name: name, schema: schema, node: node, arity: 1, diff: true,
		covers:  []string{"expand", "reshape"}, // the vjp reshapes and expands g
		rejects: func(dt dtype.Dtype) bool { return mean && !dt.IsFloat() },
		call: func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) {
			dims, keep := dimsFor(in[0].Ndim())
			if mean {
				return ops.Mean(c, in[0], dims, keep)
			}
			return ops.Sum(c, in[0], dims, keep)
		},
		result: func(shapes [][]int, dts []dtype.Dtype) ([]int, dtype.Dtype) {
			dims, keep := dimsFor(len(shapes[0]))
			red := reducedSet(len(shapes[0]), dims)
			var out []int
			for d, n := range shapes[0] {
				switch {
				case !red[d]:
					out = append(out, n)
				case keep:
					out = append(out, 1)
				}
			}
			rd := dts[0]
			if !rd.IsFloat() {
				rd = dtype.Int64 // integer and bool sums are int64
			}
			return out, rd
		},
		oracle: single(func(t *testing.T, in []*tensor.Tensor, out *tensor.Tensor, msg string) {
			dims, _ := dimsFor(in[0].Ndim())
			reductionOracle(t, in[0], reducedSet(in[0].Ndim(), dims), mean, out, msg)
		}),
		fdData: func(int) genKind { return genSmooth },
		generic: func(in []*tensor.Tensor) ([]*tensor.Tensor, []int64) {
			return in, reductionAttrs(dimsFor(in[0].Ndim()))
		},
	}
}

// reducedSet returns which of nd dims are reduced by dims (nil: all).
func reducedSet(nd int, dims []int) []bool {
	red := make([]bool, nd)
	for i := range red {
		red[i] = dims == nil
	}
	for _, d := range dims {
		if d < 0 {
			d += nd
		}
		red[d] = true
	}
	return red
}

// withCovers returns row with covers set.
func withCovers(row opInfo, covers ...string) opInfo {
	row.covers = covers
	return row
}

var opTable = append(baseRows, familyRows...)

// baseRows are the arithmetic, copy and summing rows and minimum/maximum.
var baseRows = []opInfo{
	withCovers(binaryRow("minimum", "MinimumBackward", true, ops.Minimum, func(dtype.Dtype) bool { return false }, minmaxOracle(false)),
		"route", "select"),
	withCovers(binaryRow("maximum", "MaximumBackward", true, ops.Maximum, func(dtype.Dtype) bool { return false }, minmaxOracle(true)),
		"route", "select"),
	binaryRow("add", "AddBackward", false, ops.Add, func(dtype.Dtype) bool { return false }, arithOracle('+')),
	binaryRow("sub", "SubBackward", false, ops.Sub, func(dt dtype.Dtype) bool { return dt == dtype.Bool }, arithOracle('-')),
	binaryRow("mul", "MulBackward", false, ops.Mul, func(dtype.Dtype) bool { return false }, arithOracle('*')),
	trueDivision(binaryRow("div", "DivBackward", false, ops.Div, func(dtype.Dtype) bool { return false }, arithOracle('/'))),
	{
		name: "neg", node: "NegBackward", arity: 1, diff: true,
		rejects: func(dt dtype.Dtype) bool { return dt == dtype.Bool },
		call:    func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return ops.Neg(c, in[0]) },
		result: func(shapes [][]int, dts []dtype.Dtype) ([]int, dtype.Dtype) {
			return shapes[0], dts[0]
		},
		oracle:  single(negOracle),
		fdData:  func(int) genKind { return genSmooth },
		generic: identity,
	},
	{
		name: "copy", node: "CopyBackward", arity: 1, diff: true,
		rejects: func(dtype.Dtype) bool { return false },
		call:    func(c *ops.Context, in []*tensor.Tensor) (*tensor.Tensor, error) { return ops.Copy(c, in[0]) },
		result: func(shapes [][]int, dts []dtype.Dtype) ([]int, dtype.Dtype) {
			return shapes[0], dts[0]
		},
		oracle: single(func(t *testing.T, in []*tensor.Tensor, out *tensor.Tensor, msg string) {
			require.Equal(t, in[0].Bits(), out.Bits(), "%s: copy keeps every bit", msg)
		}),
		fdData:  func(int) genKind { return genSmooth },
		generic: identity,
	},
	reductionRow("sum", "SumBackward", false, func(int) ([]int, bool) { return nil, false }),
	reductionRow("sum_dim0", "SumBackward", false, func(nd int) ([]int, bool) {
		if nd == 0 {
			return nil, false
		}
		return []int{0}, false
	}),
	reductionRow("sum_last_keepdim", "SumBackward", false, func(nd int) ([]int, bool) {
		if nd == 0 {
			return nil, true
		}
		return []int{-1}, true
	}),
	reductionRow("sum_first_last", "SumBackward", false, func(nd int) ([]int, bool) {
		if nd < 2 {
			return nil, false
		}
		return []int{-1, 0}, false
	}),
	reductionRow("sum_all_keepdim", "SumBackward", false, func(nd int) ([]int, bool) { return nil, true }),
	reductionRow("mean", "MeanBackward", true, func(int) ([]int, bool) { return nil, false }),
	reductionRow("mean_last_keepdim", "MeanBackward", true, func(nd int) ([]int, bool) {
		if nd == 0 {
			return nil, true
		}
		return []int{-1}, true
	}),
}

// broadcastPairs are the shape pairs every binary op runs on (in both orders).
var broadcastPairs = [][2][]int{
	{{}, {}},
	{{1}, {}},
	{{2, 1}, {2}},
	{{3, 1, 2}, {1, 3, 2}},
	{{0, 3}, {1, 3}},
	{{4, 1, 5}, {6, 1}},
}

// shapeSets returns the input shapes a row runs on.
func (op opInfo) shapeSets() [][][]int {
	var out [][][]int
	add := func(s [][]int) {
		if op.skip == nil || !op.skip(s) {
			out = append(out, s)
		}
	}
	switch op.arity {
	case 3:
		for _, p := range broadcastTriples {
			add([][]int{p[0], p[1], p[2]})
		}
		return out
	case 2:
		for _, p := range broadcastPairs {
			add([][]int{p[0], p[1]})
			if !slices.Equal(p[0], p[1]) {
				add([][]int{p[1], p[0]})
			}
		}
		return out
	}
	seen := map[string]bool{}
	for _, p := range broadcastPairs {
		for _, s := range p {
			if k := fmt.Sprint(s); !seen[k] {
				seen[k] = true
				add([][]int{s})
			}
		}
	}
	add([][]int{{2, 3, 4}})
	return out
}

// layoutCombos returns the layouts of the inputs to run: every layout for
// one input, every pair for two, and for three a Latin square (16 combos
// holding every pair of layouts for every pair of inputs).
func layoutCombos(arity int) [][]layout {
	var out [][]layout
	for _, l := range allLayouts {
		if arity == 1 {
			out = append(out, []layout{l})
			continue
		}
		for _, m := range allLayouts {
			if arity == 2 {
				out = append(out, []layout{l, m})
			} else {
				out = append(out, []layout{l, m, allLayouts[(int(l)+int(m))%len(allLayouts)]})
			}
		}
	}
	return out
}

// tableDtypes are the dtypes TestOpTable and TestOpTableOut sweep: all of
// them, or under the race detector (about ten times slower, and the table's
// inputs are far below cpu.MinParallel: what it can catch here is shared
// state between the parallel subtests) one integer, one half and one full
// float dtype.
func tableDtypes() []dtype.Dtype {
	if raceEnabled {
		return []dtype.Dtype{dtype.Int32, dtype.BFloat16, dtype.Float64}
	}
	return allDtypes
}

// sweepLayouts are the layout combos TestOpTable runs: all of them, or
// under the race detector (see tableDtypes) the combos with every input
// alike and with each input one layout further than the previous.
func sweepLayouts(arity int) [][]layout {
	all := layoutCombos(arity)
	if !raceEnabled || arity == 1 {
		return all
	}
	var out [][]layout
	for _, c := range all {
		alike, shifted := true, true
		for k := range c {
			alike = alike && c[k] == c[0]
			shifted = shifted && int(c[k]) == (int(c[0])+k)%len(allLayouts)
		}
		if alike || shifted {
			out = append(out, c)
		}
	}
	return out
}

func seedOf(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// expectedPromote is the promotion of docs/dtypes.md, written out independently of
// package dtype: bool < integers < floats; the wider type wins inside a
// category; float16 with bfloat16 gives float32; uint8 with int8 gives int16.
func expectedPromote(a, b dtype.Dtype) dtype.Dtype {
	rank := func(d dtype.Dtype) (cat, width int) {
		switch d {
		case dtype.Bool:
			return 0, 1
		case dtype.Uint8, dtype.Int8:
			return 1, 1
		case dtype.Int16:
			return 1, 2
		case dtype.Int32:
			return 1, 4
		case dtype.Int64:
			return 1, 8
		case dtype.Float16, dtype.BFloat16:
			return 2, 2
		case dtype.Float32:
			return 2, 4
		}
		return 2, 8
	}
	if a == b {
		return a
	}
	ca, wa := rank(a)
	cb, wb := rank(b)
	switch {
	case ca > cb:
		return a
	case cb > ca:
		return b
	case wa > wb:
		return a
	case wb > wa:
		return b
	}
	// same category and width, different dtypes
	if ca == 2 {
		return dtype.Float32 // float16 with bfloat16
	}
	return dtype.Int16 // uint8 with int8
}

// ---- oracles ----

// wrapInt truncates v to integer dtype dt (two's complement wrap-around).
func wrapInt(dt dtype.Dtype, v int64) int64 {
	switch dt {
	case dtype.Bool:
		if v != 0 {
			return 1
		}
		return 0
	case dtype.Uint8:
		return int64(uint8(v))
	case dtype.Int8:
		return int64(int8(v))
	case dtype.Int16:
		return int64(int16(v))
	case dtype.Int32:
		return int64(int32(v))
	}
	return v
}

// selRule is a selection rule of docs/semantics.md, written out in the test
// (independently of backend.Rule).
type selRule int

const (
	selMin  selRule = iota // a wins iff a <= b or a is NaN
	selMax                 // a wins iff a >= b or a is NaN
	selFMin                // a wins iff a <= b or b is NaN
	selFMax                // a wins iff a >= b or b is NaN
)

// winsF reports whether x wins against y under rule r (floats).
func winsF(r selRule, x, y float64) bool {
	switch r {
	case selMin:
		return math.IsNaN(x) || x <= y
	case selMax:
		return math.IsNaN(x) || x >= y
	case selFMin:
		return math.IsNaN(y) || x <= y
	}
	return math.IsNaN(y) || x >= y
}

// ignoresNaN reports whether a NaN loses to a number under r (fmin, fmax).
func (r selRule) ignoresNaN() bool { return r == selFMin || r == selFMax }

// winsI reports whether x wins against y under rule r (integers, bool).
func winsI(r selRule, x, y int64) bool {
	if r == selMin || r == selFMin {
		return x <= y
	}
	return x >= y
}

// winsAt reports whether element ia of a wins against element ib of b
// (same dtype) under rule r.
func winsAt(r selRule, a *tensor.Tensor, ia int, b *tensor.Tensor, ib int) bool {
	if a.Dtype().IsFloat() {
		return winsF(r, tensor.LoadFloat64(a.Dtype(), a.ElementPointer(ia)), tensor.LoadFloat64(b.Dtype(), b.ElementPointer(ib)))
	}
	return winsI(r, tensor.LoadInt64(a.Dtype(), a.ElementPointer(ia)), tensor.LoadInt64(b.Dtype(), b.ElementPointer(ib)))
}

// minmaxOracle checks out against the selection rule (docs/semantics.md): y_i is a_i's bits when a wins
// (a <= b, or >= for maximum, or a is NaN), else b_i's bits.
func minmaxOracle(maximum bool) func(t *testing.T, in []*tensor.Tensor, out *tensor.Tensor, msg string) {
	if maximum {
		return selectionOracle(selMax)
	}
	return selectionOracle(selMin)
}

// selectionOracle checks a binary selection by rule r: y_i is the winner's
// bits (minimum, maximum, fmin, fmax).
func selectionOracle(r selRule) func(t *testing.T, in []*tensor.Tensor, out *tensor.Tensor, msg string) {
	return func(t *testing.T, in []*tensor.Tensor, out *tensor.Tensor, msg string) {
		a, b := in[0], in[1]
		require.Equal(t, a.Dtype(), b.Dtype(), "oracle needs one dtype")
		os := out.Shape()
		ab, bb, ob := a.Bits(), b.Bits(), out.Bits()
		for i := range ob {
			ia, ib := srcIndex(os, a.Shape(), i), srcIndex(os, b.Shape(), i)
			aWins := winsAt(r, a, ia, b, ib)
			want := bb[ib]
			if aWins {
				want = ab[ia]
			}
			if ob[i] != want {
				require.Failf(t, "selection rule violated", "%s: element %d: got bits %#x, want %#x (a %#x, b %#x, a wins %v)",
					msg, i, ob[i], want, ab[ia], bb[ib], aWins)
			}
		}
	}
}

// arithOracle checks + - * / against Go arithmetic: float64 and float32
// natively, float16/bfloat16 as the float64 result rounded once, integers in
// int64 wrapped to the dtype, bool + as or and * as and. Integer division
// is true division in float32 (checked where the operands convert exactly).
func arithOracle(op byte) func(t *testing.T, in []*tensor.Tensor, out *tensor.Tensor, msg string) {
	return func(t *testing.T, in []*tensor.Tensor, out *tensor.Tensor, msg string) {
		a, b := in[0], in[1]
		dt, odt := a.Dtype(), out.Dtype()
		os := out.Shape()
		ob := out.Bits()
		for i := range ob {
			pa := a.ElementPointer(srcIndex(os, a.Shape(), i))
			pb := b.ElementPointer(srcIndex(os, b.Shape(), i))
			var want uint64
			switch {
			case dt == dtype.Float64:
				x, y := tensor.LoadFloat64(dt, pa), tensor.LoadFloat64(dt, pb)
				want = math.Float64bits(f64op(op, x, y))
			case dt == dtype.Float32:
				x, y := float32(tensor.LoadFloat64(dt, pa)), float32(tensor.LoadFloat64(dt, pb))
				want = uint64(math.Float32bits(f32op(op, x, y)))
			case dt.IsFloat():
				x, y := tensor.LoadFloat64(dt, pa), tensor.LoadFloat64(dt, pb)
				want = bitsOfFloat(dt, f64op(op, x, y))
			case op == '/':
				x, y := tensor.LoadInt64(dt, pa), tensor.LoadInt64(dt, pb)
				if x > 1<<24 || x < -(1<<24) || y > 1<<24 || y < -(1<<24) {
					continue // conversion to float32 not exact: covered by cpu == ref
				}
				want = uint64(math.Float32bits(float32(x) / float32(y)))
			default:
				x, y := tensor.LoadInt64(dt, pa), tensor.LoadInt64(dt, pb)
				var v int64
				switch {
				case dt == dtype.Bool && op == '+':
					v = x | y
				case dt == dtype.Bool && op == '*':
					v = x & y
				case op == '+':
					v = x + y
				case op == '-':
					v = x - y
				case op == '*':
					v = x * y
				}
				want = uint64(wrapInt(dt, v)) & (1<<(8*odt.Size()) - 1)
			}
			if ob[i] != want && !(isNaNBits(odt, want) && isNaNBits(odt, ob[i])) {
				require.Failf(t, "arithmetic differs from oracle", "%s: element %d: got %#x (%v), want %#x",
					msg, i, ob[i], tensor.LoadFloat64(odt, out.ElementPointer(i)), want)
			}
		}
	}
}

func f64op(op byte, x, y float64) float64 {
	switch op {
	case '+':
		return x + y
	case '-':
		return x - y
	case '*':
		return x * y
	}
	return x / y
}

func f32op(op byte, x, y float32) float32 {
	switch op {
	case '+':
		return x + y
	case '-':
		return x - y
	case '*':
		return x * y
	}
	return x / y
}

func negOracle(t *testing.T, in []*tensor.Tensor, out *tensor.Tensor, msg string) {
	a := in[0]
	dt := a.Dtype()
	ab, ob := a.Bits(), out.Bits()
	for i := range ob {
		var want uint64
		if dt.IsFloat() {
			want = ab[i] ^ 1<<(8*dt.Size()-1) // negation flips the sign bit, NaN included
			if isNaNBits(dt, ab[i]) && isNaNBits(dt, ob[i]) {
				continue
			}
		} else {
			want = uint64(wrapInt(dt, -tensor.LoadInt64(dt, a.ElementPointer(i)))) & (1<<(8*dt.Size()) - 1)
		}
		require.Equalf(t, want, ob[i], "%s: neg element %d", msg, i)
	}
}

// reductionOracle checks a sum or mean over the reduced dims: integers
// exactly (int64 wrap-around), floats against a float64 sum within the
// error bound of float32 (or float64) accumulation.
func reductionOracle(t *testing.T, a *tensor.Tensor, red []bool, mean bool, out *tensor.Tensor, msg string) {
	shape := a.Shape()
	keep := make([]int, len(shape))
	for d := range shape {
		keep[d] = shape[d]
		if red[d] {
			keep[d] = 1
		}
	}
	nOut := numel(keep)
	require.Equal(t, nOut, out.Numel(), msg)
	count := 1
	if nOut > 0 {
		count = a.Numel() / nOut
	} else {
		count = 0
	}
	if !a.Dtype().IsFloat() {
		sums := make([]int64, nOut)
		for i := 0; i < a.Numel(); i++ {
			sums[keepIndex(shape, keep, i)] += tensor.LoadInt64(a.Dtype(), a.ElementPointer(i))
		}
		assert.Equal(t, sums, out.Int64s(), msg)
		return
	}
	sums, abs := make([]float64, nOut), make([]float64, nOut)
	for i := 0; i < a.Numel(); i++ {
		v := tensor.LoadFloat64(a.Dtype(), a.ElementPointer(i))
		o := keepIndex(shape, keep, i)
		sums[o] += v
		abs[o] += math.Abs(v)
	}
	acc := dtype.AccumulateDtype(a.Dtype())
	accEps, accMax := 0x1p-24, float64(math.MaxFloat32)
	if acc == dtype.Float64 {
		accEps, accMax = 0x1p-53, math.MaxFloat64
	}
	outMax := map[dtype.Dtype]float64{dtype.Float16: 65504, dtype.BFloat16: 3.38e38, dtype.Float32: math.MaxFloat32, dtype.Float64: math.MaxFloat64}[out.Dtype()]
	outEps := map[dtype.Dtype]float64{dtype.Float16: 0x1p-11, dtype.BFloat16: 0x1p-8, dtype.Float32: 0x1p-24, dtype.Float64: 0x1p-53}[out.Dtype()]
	got := out.Float64s()
	for o := range sums {
		want, bound := sums[o], abs[o]*float64(count+2)*accEps
		if mean {
			want, bound = want/float64(count), bound/float64(count)
		}
		switch {
		case math.IsNaN(want):
			assert.Truef(t, math.IsNaN(got[o]), "%s: output %d: got %v, want NaN", msg, o, got[o])
		case math.IsInf(want, 0):
			assert.Equalf(t, want, got[o], "%s: output %d", msg, o)
		case abs[o] >= accMax/4 || math.Abs(want) >= outMax/2:
			// partial sums may overflow the accumulator or the output: ref decides
		default:
			diff := math.Abs(got[o] - want)
			tol := bound + 2*outEps*math.Abs(want) + 1e-300
			assert.LessOrEqualf(t, diff, tol, "%s: output %d: got %v, want %v", msg, o, got[o], want)
		}
	}
}

// keepIndex maps row-major index i of shape to the row-major index of its
// reduction output in the keepdim shape keep.
func keepIndex(shape, keep []int, i int) int {
	o, mul := 0, 1
	for d := len(shape) - 1; d >= 0; d-- {
		c := i % shape[d]
		i /= shape[d]
		if keep[d] != 1 {
			o += c * mul
		}
		mul *= keep[d]
	}
	return o
}

// notInTable are the registered ops the sweep cannot run as rows (cast
// returns its input for its own dtype, and its dtype is an attribute), with
// the tests that cover them instead.
var notInTable = map[string]string{
	"cast": "cast_test.go",
	// The view and indexing ops (linear maps: adjoint and double-backward
	// identities, values by position).
	"permute": "views_test.go", "slice": "views_test.go", "slice_backward": "views_test.go",
	"view": "views_test.go", "take": "views_test.go", "take_backward": "views_test.go",
}

// Every registered op has a row (or is covered by a row's gradient), and
// every row names a registered op: a new op cannot skip the table.
func TestOpTableCoversEverySchema(t *testing.T) {
	covered := map[string]bool{}
	for _, op := range opTable {
		name := op.schema
		if name == "" {
			name = op.name
		}
		s, ok := ops.Lookup(name)
		require.True(t, ok, "row %s names no registered op %q", op.name, name)
		arity := op.arity
		if op.schemaArity != 0 {
			arity = op.schemaArity
		}
		require.Equal(t, arity, s.Arity, "row %s: arity", op.name)
		require.Equal(t, s.Outputs > 1, op.callN != nil, "row %s: outputs", op.name)
		covered[name] = true
		for _, c := range op.covers {
			_, ok := ops.Lookup(c)
			require.True(t, ok, "row %s covers no registered op %q", op.name, c)
			covered[c] = true
		}
	}
	for name := range notInTable {
		_, ok := ops.Lookup(name)
		require.True(t, ok, "notInTable lists no registered op %q", name)
		require.False(t, covered[name], "%s has a row: drop it from notInTable", name)
	}
	for i, s := range ops.Schemas() {
		require.Equal(t, i, s.ID, "%s: ids are positions in name order", s.Name)
		_, elsewhere := notInTable[s.Name]
		require.True(t, covered[s.Name] || elsewhere, "registered op %q has no row in opTable", s.Name)
	}
}

// ---- the sweep ----

func TestOpTable(t *testing.T) {
	for _, op := range opTable {
		for _, dt := range tableDtypes() {
			t.Run(op.name+"/"+dt.String(), func(t *testing.T) {
				t.Parallel()
				r := newRand(seedOf(op.name, dt.String()))
				combos := 0
				for _, shapes := range op.shapeSets() {
					for _, lays := range sweepLayouts(op.arity) {
						runCombo(t, r, op, dt, shapes, lays)
						combos++
					}
				}
				require.Positive(t, combos)
			})
		}
	}
}

// runCombo runs every check of the table on one input configuration.
func runCombo(t *testing.T, r *rand.Rand, op opInfo, dt dtype.Dtype, shapes [][]int, lays []layout) {
	msg := fmt.Sprintf("%s %v shapes %v layouts %v", op.name, dt, shapes, lays)
	in := make([]*tensor.Tensor, op.arity)
	dts := make([]dtype.Dtype, op.arity)
	for k := range in {
		in[k] = makeTensor(t, dt, shapes[k], lays[k], func(n int) []uint64 { return genBits(r, dt, n, genSpecial) })
		dts[k] = dt
	}
	cpuCtx, refCtx := ctxFor(cpuBackend), ctxFor(refBackend)

	if op.rejects(dt) || op.refuses(in) {
		kind := errs.Type
		if !op.rejects(dt) {
			kind = errs.Value
		}
		for _, c := range []*ops.Context{cpuCtx, refCtx} {
			out, err := op.outputs(c, in)
			require.Error(t, err, msg)
			assert.Nil(t, out, msg)
			assert.Equal(t, kind, errs.KindOf(err), "%s: %v", msg, err)
		}
		return
	}

	gots, err := op.outputs(cpuCtx, in)
	require.NoError(t, err, msg)
	wants, err := op.outputs(refCtx, in)
	require.NoError(t, err, msg)
	require.Len(t, wants, len(gots), msg)
	for i := range gots {
		requireBitsEqual(t, wants[i], gots[i], !op.minmax, "%s: output %d cpu vs ref", msg, i)
		require.True(t, gots[i].IsContiguous(), msg)
		// Inputs that do not require grad give results without a grad_fn.
		fn, _ := gots[i].GradFn()
		require.Nil(t, fn, msg)
		require.False(t, gots[i].RequiresGrad(), msg)
	}
	got := gots[0]

	wantShape, wantDt := op.result(shapes, dts)
	requireShape(t, wantShape, got.Shape(), msg+": result shape")
	require.Equal(t, wantDt, got.Dtype(), msg+": result dtype")

	// The layout of the inputs does not change the result.
	cont := make([]*tensor.Tensor, len(in))
	for k := range in {
		cont[k] = contiguousCopy(t, in[k])
	}
	gotCs, err := op.outputs(cpuCtx, cont)
	require.NoError(t, err, msg)
	for i := range gots {
		requireBitsEqual(t, gotCs[i], gots[i], !op.minmax, "%s: output %d layout vs contiguous", msg, i)
	}

	op.oracle(t, in, gots, msg)

	// Forward mode: an input of an integer dtype has no tangent; floating
	// tangents give the same outputs and tangents on both backends and for
	// any layout.
	args, attrs := op.generic(in)
	tangents := make([]*tensor.Tensor, len(in))
	for k := range in {
		tangents[k] = makeTensor(t, dt, shapes[k], lays[k], func(n int) []uint64 { return genBits(r, dt, n, genNormal) })
	}
	targs, _ := op.generic(tangents)
	if !dt.IsFloat() {
		_, _, err := ops.CallJvp(cpuCtx, op.id(), args, targs, attrs)
		require.Error(t, err, msg)
		assert.Equal(t, errs.Type, errs.KindOf(err), "%s: jvp of an integer input: %v", msg, err)
	} else {
		jvpOn := func(c *ops.Context, ins []*tensor.Tensor) ([]*tensor.Tensor, []*tensor.Tensor) {
			a, at := op.generic(ins)
			outs, touts, err := ops.CallJvp(c, op.id(), a, targs, at)
			require.NoError(t, err, msg)
			require.Len(t, outs, len(gots), msg)
			require.Len(t, touts, len(gots), msg)
			for i := range outs {
				requireBitsEqual(t, gots[i], outs[i], !op.minmax, "%s: jvp output %d", msg, i)
				if !op.diff || !outs[i].Dtype().IsFloat() {
					assert.Nil(t, touts[i], "%s: output %d has no tangent", msg, i)
					continue
				}
				require.NotNil(t, touts[i], msg)
				requireShape(t, outs[i].Shape(), touts[i].Shape(), msg+": tangent shape")
				require.Equal(t, outs[i].Dtype(), touts[i].Dtype(), msg+": tangent dtype")
			}
			return outs, touts
		}
		_, tCPU := jvpOn(cpuCtx, in)
		_, tRef := jvpOn(refCtx, in)
		_, tCont := jvpOn(cpuCtx, cont)
		for i := range tCPU {
			if tCPU[i] != nil {
				requireBitsEqual(t, tRef[i], tCPU[i], !op.minmax, "%s: tangent %d cpu vs ref", msg, i)
				requireBitsEqual(t, tCont[i], tCPU[i], !op.minmax, "%s: tangent %d layout vs contiguous", msg, i)
			}
		}
	}

	if !op.diff || !dt.IsFloat() {
		return
	}
	up := makeTensor(t, got.Dtype(), got.Shape(), contiguous, func(n int) []uint64 { return genBits(r, got.Dtype(), n, genNormal) })
	gradsOf := func(c *ops.Context, src []*tensor.Tensor) []*tensor.Tensor {
		leaves := make([]*tensor.Tensor, len(src))
		for k := range src {
			leaves[k] = leaf(t, src[k].Detach())
		}
		ys, err := op.outputs(c, leaves)
		require.NoError(t, err, msg)
		y := ys[0]
		fn, nr := y.GradFn()
		require.NotNil(t, fn, msg)
		assert.Equal(t, op.node, fn.Name(), msg)
		assert.Equal(t, 0, nr, msg)
		assert.False(t, y.IsLeaf(), msg)
		for _, extra := range ys[1:] { // indices never require grad
			assert.False(t, extra.RequiresGrad(), msg)
			fn, _ := extra.GradFn()
			assert.Nil(t, fn, msg)
		}
		require.NoError(t, ops.Backward(c, ts(y), ts(up), false, false), msg)
		gs := make([]*tensor.Tensor, len(leaves))
		for k, l := range leaves {
			gs[k] = l.Grad()
			require.NotNil(t, gs[k], "%s: input %d has no grad", msg, k)
			requireShape(t, l.Shape(), gs[k].Shape(), fmt.Sprintf("%s: grad %d shape", msg, k))
			require.Equal(t, l.Dtype(), gs[k].Dtype(), "%s: grad %d dtype", msg, k)
		}
		return gs
	}
	gCPU := gradsOf(cpuCtx, in)
	gRef := gradsOf(refCtx, in)
	gCont := gradsOf(cpuCtx, cont)
	for k := range gCPU {
		requireBitsEqual(t, gRef[k], gCPU[k], !op.minmax, "%s: grad %d cpu vs ref", msg, k)
		requireBitsEqual(t, gCont[k], gCPU[k], !op.minmax, "%s: grad %d layout vs contiguous", msg, k)
	}
}

// TestOpTableGradcheck compares float64 gradients of every differentiable
// row with central finite differences, for contiguous and permuted inputs,
// with a random (non-uniform) upstream gradient; and the forward-mode
// tangent (ops.CallJvp) along random directions with the directional
// central difference.
func TestOpTableGradcheck(t *testing.T) {
	const eps, atol, rtol = 1e-6, 1e-6, 1e-5
	for _, op := range opTable {
		if !op.diff {
			continue
		}
		t.Run(op.name, func(t *testing.T) {
			r := newRand(seedOf("gradcheck", op.name))
			for _, shapes := range op.shapeSets() {
				if op.fails != nil && op.fails(shapes) {
					continue // an error: checked by TestOpTable
				}
				for _, lay := range []layout{contiguous, permuted, negStep} {
					msg := fmt.Sprintf("%s shapes %v layout %v", op.name, shapes, lay)
					// Draw data away from kinks (min/max ties) and poles.
					var vals [][]float64
					for try := 0; ; try++ {
						require.Less(t, try, 1000, msg+": no valid data")
						vals = make([][]float64, op.arity)
						for k := range vals {
							bits := genBits(r, dtype.Float64, numel(shapes[k]), op.fdData(k))
							vals[k] = make([]float64, len(bits))
							for i, b := range bits {
								vals[k][i] = math.Float64frombits(b)
							}
						}
						if op.fdValid == nil || op.fdValid(vals, shapes) {
							break
						}
					}
					// The forward as a float64 function of the logical values.
					eval := func(xs [][]float64) *tensor.Tensor {
						in := make([]*tensor.Tensor, len(xs))
						for k := range xs {
							in[k] = f64(t, shapes[k], xs[k]...)
						}
						y, err := op.call(ctxFor(cpuBackend).NoGrad(), in)
						require.NoError(t, err, msg)
						return y
					}
					y0 := eval(vals)
					w := genBits(r, dtype.Float64, y0.Numel(), genSmooth)
					wv := make([]float64, len(w))
					for i, b := range w {
						wv[i] = math.Float64frombits(b)
					}
					numeric := centralDiff(vals, eps, func(xs [][]float64) float64 { return dot(eval(xs).Float64s(), wv) })

					// Analytic, through leaves laid out as lay.
					leaves := make([]*tensor.Tensor, op.arity)
					for k := range leaves {
						bits := make([]uint64, len(vals[k]))
						for i, v := range vals[k] {
							bits[i] = math.Float64bits(v)
						}
						l := lay
						leaves[k] = makeTensor(t, dtype.Float64, shapes[k], l, func(n int) []uint64 { return bits })
						require.Equal(t, vals[k], leaves[k].Float64s(), msg)
						leaf(t, leaves[k])
					}
					y, err := op.call(ctxFor(cpuBackend), leaves)
					require.NoError(t, err, msg)
					require.NoError(t, ops.Backward(nil, ts(y), ts(f64(t, y.Shape(), wv...)), false, false), msg)
					for k, l := range leaves {
						g := l.Grad()
						require.NotNil(t, g, msg)
						require.Equal(t, dtype.Float64, g.Dtype(), msg)
						requireShape(t, shapes[k], g.Shape(), msg)
						requireClose(t, numeric[k], g.Float64s(), atol, rtol, msg, " input ", k)
					}

					// Forward mode: the tangent along random directions
					// (laid out as lay) is the directional difference.
					dirs := make([][]float64, op.arity)
					tangents := make([]*tensor.Tensor, op.arity)
					for k := range dirs {
						bits := genBits(r, dtype.Float64, numel(shapes[k]), genSmooth)
						tangents[k] = makeTensor(t, dtype.Float64, shapes[k], lay, func(n int) []uint64 { return bits })
						dirs[k] = tangents[k].Float64s()
					}
					args, attrs := op.generic(leaves)
					targs, _ := op.generic(tangents)
					_, touts, err := ops.CallJvp(ctxFor(cpuBackend).NoGrad(), op.id(), args, targs, attrs)
					require.NoError(t, err, msg)
					require.NotNil(t, touts[0], msg)
					step := func(sign float64) []float64 {
						xs := make([][]float64, len(vals))
						for k := range vals {
							xs[k] = make([]float64, len(vals[k]))
							for i := range xs[k] {
								xs[k][i] = vals[k][i] + sign*eps*dirs[k][i]
							}
						}
						return eval(xs).Float64s()
					}
					hi, lo := step(1), step(-1)
					fd := make([]float64, len(hi))
					for i := range fd {
						fd[i] = (hi[i] - lo[i]) / (2 * eps)
					}
					requireShape(t, y.Shape(), touts[0].Shape(), msg)
					requireClose(t, fd, touts[0].Float64s(), atol, rtol, msg, " jvp")
				}
			}
		})
	}
}

// TestOpTableMixedDtypes runs the binary rows on pairs of different dtypes:
// the result has the promoted dtype, cpu equals ref, and each gradient comes
// back in its own input's dtype and shape, equal to the gradient computed in
// the promoted dtype and then cast.
func TestOpTableMixedDtypes(t *testing.T) {
	pairs := [][2]dtype.Dtype{
		{dtype.Float16, dtype.Float32},
		{dtype.Float32, dtype.Float16},
		{dtype.BFloat16, dtype.Float32},
		{dtype.Float16, dtype.BFloat16},
		{dtype.BFloat16, dtype.Float16},
		{dtype.Float32, dtype.Float64},
		{dtype.BFloat16, dtype.Float64},
		{dtype.Int32, dtype.Float32},
		{dtype.Float16, dtype.Int64},
		{dtype.Bool, dtype.Float16},
		{dtype.Uint8, dtype.Int8},
		{dtype.Int8, dtype.Int32},
		{dtype.Bool, dtype.Int16},
		{dtype.Uint8, dtype.BFloat16},
	}
	shapeSets := [][][]int{{{3, 1, 2}, {1, 3, 2}, {2}}, {{4, 1, 5}, {6, 1}, {1, 5}}, {{2, 1}, {}, {2}}}
	layouts := []layout{permuted, contiguous, negStep}
	for _, op := range opTable {
		if op.arity < 2 {
			continue
		}
		for pi, pair := range pairs {
			// Three inputs (clamp) add the second dtype of the next pair.
			p := append(pair[:], pairs[(pi+1)%len(pairs)][1])[:op.arity]
			t.Run(fmt.Sprintf("%s/%v", op.name, p), func(t *testing.T) {
				r := newRand(seedOf("mixed", op.name, fmt.Sprint(p)))
				for _, set := range shapeSets {
					sp := set[:op.arity]
					msg := fmt.Sprintf("%s %v %v", op.name, p, sp)
					in := make([]*tensor.Tensor, op.arity)
					for k := range in {
						in[k] = makeTensor(t, p[k], sp[k], layouts[k], func(n int) []uint64 { return genBits(r, p[k], n, genNormal) })
					}
					wantShape, wantDt := op.result(sp, p)
					got, err := op.call(ctxFor(cpuBackend), in)
					if op.rejects(wantDt) {
						require.Error(t, err, msg)
						continue
					}
					require.NoError(t, err, msg)
					want, err := op.call(ctxFor(refBackend), in)
					require.NoError(t, err, msg)
					requireShape(t, wantShape, got.Shape(), msg)
					require.Equal(t, wantDt, got.Dtype(), msg)
					requireBitsEqual(t, want, got, !op.minmax, msg+": cpu vs ref")

					// Same values computed from inputs cast up front.
					pre := make([]*tensor.Tensor, op.arity)
					for k := range pre {
						pre[k], err = ops.Cast(ctxFor(cpuBackend).NoGrad(), in[k], wantDt)
						require.NoError(t, err, msg)
					}
					gotPre, err := op.call(ctxFor(cpuBackend), pre)
					require.NoError(t, err, msg)
					requireBitsEqual(t, gotPre, got, !op.minmax, msg+": vs pre-cast")

					if !slices.ContainsFunc(p, dtype.Dtype.IsFloat) {
						continue // integer division gives floats but nothing can require grad
					}
					up := makeTensor(t, wantDt, wantShape, contiguous, func(n int) []uint64 { return genBits(r, wantDt, n, genNormal) })
					grads := func(c *ops.Context, src []*tensor.Tensor) []*tensor.Tensor {
						leaves := make([]*tensor.Tensor, op.arity)
						for k := range src {
							leaves[k] = src[k].Detach()
							if leaves[k].Dtype().IsFloat() {
								leaf(t, leaves[k])
							} else {
								require.Error(t, leaves[k].SetRequiresGrad(true), msg)
							}
						}
						y, err := op.call(c, leaves)
						require.NoError(t, err, msg)
						require.NoError(t, ops.Backward(c, ts(y), ts(up), false, false), msg)
						out := make([]*tensor.Tensor, op.arity)
						for k, l := range leaves {
							out[k] = l.Grad()
							if !l.Dtype().IsFloat() {
								require.Nil(t, out[k], msg)
								continue
							}
							require.NotNil(t, out[k], msg)
							require.Equal(t, l.Dtype(), out[k].Dtype(), "%s: grad %d dtype", msg, k)
							requireShape(t, l.Shape(), out[k].Shape(), fmt.Sprintf("%s: grad %d shape", msg, k))
						}
						return out
					}
					gCPU, gRef, gPre := grads(ctxFor(cpuBackend), in), grads(ctxFor(refBackend), in), grads(ctxFor(cpuBackend), pre)
					for k := range gCPU {
						if gCPU[k] == nil {
							continue
						}
						requireBitsEqual(t, gRef[k], gCPU[k], !op.minmax, "%s: grad %d cpu vs ref", msg, k)
						castBack, err := ops.Cast(ctxFor(cpuBackend).NoGrad(), gPre[k], in[k].Dtype())
						require.NoError(t, err, msg)
						requireBitsEqual(t, castBack, gCPU[k], !op.minmax, "%s: grad %d vs promoted grad cast back", msg, k)
					}
				}
			})
		}
	}
}

// TestOpTableGradFnsAndNoGrad: with a no-grad context nothing is recorded,
// and integer inputs never produce a grad_fn.
func TestOpTableGradFnsAndNoGrad(t *testing.T) {
	r := newRand(7)
	for _, op := range opTable {
		shapes := op.shapeSets()[3]
		in := make([]*tensor.Tensor, op.arity)
		for k := range in {
			in[k] = leaf(t, makeTensor(t, dtype.Float32, shapes[k], contiguous, func(n int) []uint64 { return genBits(r, dtype.Float32, n, genNormal) }))
		}
		ys, err := op.outputs(ctxFor(cpuBackend).NoGrad(), in)
		require.NoError(t, err, op.name)
		for _, y := range ys {
			fn, _ := y.GradFn()
			assert.Nil(t, fn, op.name)
			assert.False(t, y.RequiresGrad(), op.name)
		}

		ys, err = op.outputs(nil, in) // nil context: cpu default, recording
		require.NoError(t, err, op.name)
		for i, y := range ys {
			fn, _ := y.GradFn()
			if i > 0 || !op.diff { // argmin, argmax and indices never require grad
				assert.Nil(t, fn, op.name)
				assert.False(t, y.RequiresGrad(), op.name)
				continue
			}
			require.NotNil(t, fn, op.name)
			assert.Equal(t, op.node, fn.Name())
			assert.True(t, y.RequiresGrad(), op.name)
		}
	}
}

// TestLayoutsAreWhatTheyClaim guards the sweep: each layout really has the
// memory pattern it is named after, with the logical values written.
func TestLayoutsAreWhatTheyClaim(t *testing.T) {
	shape := []int{3, 1, 4}
	vals := make([]uint64, numel(shape))
	for i := range vals {
		vals[i] = math.Float64bits(float64(i + 1))
	}
	for _, l := range allLayouts {
		x := makeTensor(t, dtype.Float64, shape, l, func(n int) []uint64 { return vals[:n] })
		requireShape(t, shape, x.Shape(), l.String())
		st := x.Strides()
		switch l {
		case contiguous:
			assert.True(t, x.IsContiguous(), l.String())
			assert.Equal(t, vals, x.Bits(), l.String())
		case permuted:
			assert.False(t, x.IsContiguous(), l.String())
			assert.Positive(t, x.Offset(), l.String())
			assert.Greater(t, st[2], st[0], "%v: the last dim has the largest stride", l)
			assert.Equal(t, vals, x.Bits(), l.String())
		case negStep:
			assert.Negative(t, st[0], l.String())
			assert.Equal(t, -2, st[2], l.String())
			assert.Equal(t, vals, x.Bits(), l.String())
		case zeroStride:
			assert.Equal(t, 0, st[0], l.String())
			b := x.Bits()
			assert.Equal(t, b[:4], b[4:8], "%v: rows repeat", l)
			assert.Equal(t, vals[:4], b[:4], l.String())
		}
	}
}

// otherDtype returns a dtype different from dt (for out= dtype errors).
func otherDtype(dt dtype.Dtype) dtype.Dtype {
	switch dt {
	case dtype.Float64:
		return dtype.Float32
	case dtype.Int64:
		return dtype.Int32
	}
	return dtype.Float64
}

// TestOpTableOut runs every row through ops.CallN with out= tensors: for
// each dtype and input shapes, out (contiguous, permuted or negative-step,
// filled with garbage) ends up equal to the fresh result bit for bit and
// is returned itself, for all outputs at once and (min, max) each one
// alone; an out of the wrong shape is a Value error and of the wrong dtype
// a Type error, with every out untouched; out may be the first input itself
// (in place); and a call that would record a graph is refused (Runtime),
// except for argmin/argmax, which never record.
func TestOpTableOut(t *testing.T) {
	for _, op := range opTable {
		for _, dt := range tableDtypes() {
			if op.rejects(dt) {
				continue
			}
			t.Run(op.name+"/"+dt.String(), func(t *testing.T) {
				t.Parallel()
				r := newRand(seedOf("out", op.name, dt.String()))
				noGrad := ctxFor(cpuBackend).NoGrad()
				for si, shapes := range op.shapeSets() {
					if op.fails != nil && op.fails(shapes) {
						continue
					}
					msg := fmt.Sprintf("%s %v shapes %v", op.name, dt, shapes)
					in := make([]*tensor.Tensor, op.arity)
					for k := range in {
						in[k] = makeTensor(t, dt, shapes[k], allLayouts[(si+k)%3], func(n int) []uint64 { return genBits(r, dt, n, genSpecial) })
					}
					if op.refuses(in) {
						continue // an error: checked by TestOpTable
					}
					args, attrs := op.generic(in)
					fresh, err := ops.CallN(noGrad, op.id(), args, attrs, nil)
					require.NoError(t, err, msg)
					typed, err := op.outputs(noGrad, in)
					require.NoError(t, err, msg)
					require.Len(t, fresh, len(typed), msg)
					for i := range fresh {
						requireBitsEqual(t, typed[i], fresh[i], !op.minmax, "%s: output %d generic vs typed entry", msg, i)
					}
					garbage := func(l layout, shape []int, dt dtype.Dtype) *tensor.Tensor {
						return makeTensor(t, dt, shape, l, func(n int) []uint64 { return genBits(r, dt, n, genSpecial) })
					}
					subsets := [][]bool{slices.Repeat([]bool{true}, len(fresh))}
					if len(fresh) == 2 {
						subsets = append(subsets, []bool{true, false}, []bool{false, true})
					}
					for _, l := range []layout{contiguous, permuted, negStep} {
						for _, sub := range subsets {
							outs := make([]*tensor.Tensor, len(fresh))
							for i, f := range fresh {
								if sub[i] {
									outs[i] = garbage(l, f.Shape(), f.Dtype())
								}
							}
							res, err := ops.CallN(noGrad, op.id(), args, attrs, outs)
							require.NoError(t, err, "%s: out %v %v", msg, l, sub)
							require.Len(t, res, len(fresh), msg)
							for i := range res {
								if outs[i] != nil {
									assert.Same(t, outs[i], res[i], "%s: out %d is returned itself", msg, i)
								}
								requireBitsEqual(t, fresh[i], res[i], !op.minmax, "%s: out %d (%v, subset %v) vs fresh", msg, i, l, sub)
							}
						}
					}
					// Wrong shape or dtype of any one out: an error, every out untouched.
					for i, f := range fresh {
						for _, bad := range []struct {
							shape []int
							dt    dtype.Dtype
							kind  errs.Kind
						}{
							{append([]int{2}, f.Shape()...), f.Dtype(), errs.Value},
							{f.Shape(), otherDtype(f.Dtype()), errs.Type},
						} {
							outs := make([]*tensor.Tensor, len(fresh))
							before := make([][]uint64, len(fresh))
							for j, g := range fresh {
								if j == i {
									outs[j] = garbage(permuted, bad.shape, bad.dt)
								} else {
									outs[j] = garbage(contiguous, g.Shape(), g.Dtype())
								}
								before[j] = outs[j].Bits()
							}
							res, err := ops.CallN(noGrad, op.id(), args, attrs, outs)
							require.Error(t, err, "%s: out %d of shape %v dtype %v", msg, i, bad.shape, bad.dt)
							assert.Nil(t, res, msg)
							assert.Equal(t, bad.kind, errs.KindOf(err), "%s: %v", msg, err)
							for j := range outs {
								require.Equal(t, before[j], outs[j].Bits(), "%s: out %d touched by a failed call", msg, j)
							}
						}
					}
					// In place: out is the first input (same memory and layout).
					if len(fresh) == 1 && fresh[0].Dtype() == dt && slices.Equal(fresh[0].Shape(), shapes[0]) {
						x := contiguousCopy(t, in[0])
						inPlace := slices.Clone(in)
						inPlace[0] = x
						a, at := op.generic(inPlace)
						res, err := ops.CallN(noGrad, op.id(), a, at, ts(x))
						require.NoError(t, err, msg+": in place")
						assert.Same(t, x, res[0], msg)
						requireBitsEqual(t, fresh[0], x, !op.minmax, msg+": in place vs fresh")
					}
					// Grad mode with an input that requires grad.
					if !dt.IsFloat() {
						continue
					}
					leaves := make([]*tensor.Tensor, len(in))
					for k := range in {
						leaves[k] = leaf(t, in[k].Detach())
					}
					a, at := op.generic(leaves)
					outs := make([]*tensor.Tensor, len(fresh))
					before := make([][]uint64, len(fresh))
					for i, f := range fresh {
						outs[i] = garbage(contiguous, f.Shape(), f.Dtype())
						before[i] = outs[i].Bits()
					}
					res, err := ops.CallN(ctxFor(cpuBackend), op.id(), a, at, outs)
					if !op.diff {
						require.NoError(t, err, msg+": argmin/argmax never record")
						requireBitsEqual(t, fresh[0], res[0], false, msg)
						continue
					}
					require.Error(t, err, msg+": out= would record a graph")
					assert.Equal(t, errs.Runtime, errs.KindOf(err), "%s: %v", msg, err)
					for i := range outs {
						require.Equal(t, before[i], outs[i].Bits(), "%s: out %d touched by a refused call", msg, i)
					}
				}
			})
		}
	}
}

// familyInts returns a float tensor of dt with small integers (-3..3, many
// ties; every sum of products stays exact), laid out as l.
func familyInts(t *testing.T, r *rand.Rand, dt dtype.Dtype, shape []int, l layout) *tensor.Tensor {
	return makeTensor(t, dt, shape, l, func(n int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = bitsOfFloat(dt, float64(r.IntN(7)-3))
		}
		return out
	})
}

// TestOpTableJvpTranspose: for the family's differentiable rows, forward
// mode is the exact transpose of the backward on small-integer data full
// of ties, <J v, u> == <v, Jᵀ u> with no rounding allowed, on both
// backends, float64 and float32, contiguous and permuted.
func TestOpTableJvpTranspose(t *testing.T) {
	for _, op := range opTable {
		if !op.minmax || !op.diff {
			continue
		}
		t.Run(op.name, func(t *testing.T) {
			t.Parallel()
			r := newRand(seedOf("jvp-transpose", op.name))
			for _, be := range []kernels{cpuBackend, refBackend} {
				c := ctxFor(be)
				for _, dt := range []dtype.Dtype{dtype.Float64, dtype.Float32} {
					for si, shapes := range op.shapeSets() {
						if op.fails != nil && op.fails(shapes) {
							continue
						}
						msg := fmt.Sprintf("%s %s %v shapes %v", op.name, be.Name(), dt, shapes)
						l := []layout{contiguous, permuted}[si%2]
						in := make([]*tensor.Tensor, op.arity)
						vs := make([]*tensor.Tensor, op.arity)
						for k := range in {
							in[k] = leaf(t, familyInts(t, r, dt, shapes[k], l))
							vs[k] = familyInts(t, r, dt, shapes[k], contiguous)
						}
						args, attrs := op.generic(in)
						targs, _ := op.generic(vs)
						outs, touts, err := ops.CallJvp(c.NoGrad(), op.id(), args, targs, attrs)
						require.NoError(t, err, msg)
						y, err := op.call(c, in)
						require.NoError(t, err, msg)
						requireBitsEqual(t, y.Detach(), outs[0], false, msg+": jvp's primal")
						u := familyInts(t, r, dt, y.Shape(), contiguous)
						jtu, err := ops.Grad(c, ts(y), in, ts(u), nil, false, false)
						require.NoError(t, err, msg)
						lhs := dot(touts[0].Float64s(), u.Float64s())
						rhs := 0.0
						for k := range in {
							rhs += dot(vs[k].Float64s(), jtu[k].Float64s())
						}
						require.Equal(t, lhs, rhs, "%s: <J v, u> == <v, Jᵀ u>", msg)
					}
				}
			}
		})
	}
}

// TestOpTableDoubleBackward is gradgradcheck for the family's
// differentiable rows: with create_graph, the gradient g = Jᵀ u (equal to
// the plain backward's, bit for bit) is differentiable in u, and the
// gradient of <g, w> with respect to u is J w, which is
//   - the forward-mode tangent along w, bit for bit, on tie-heavy
//     small-integer data (both backends, cpu equal to ref);
//   - the directional central difference of the op along w on float64
//     data away from ties.
//
// The masks are constants: <g, w> does not depend on the inputs.
func TestOpTableDoubleBackward(t *testing.T) {
	for _, op := range opTable {
		if !op.minmax || !op.diff {
			continue
		}
		t.Run(op.name, func(t *testing.T) {
			t.Parallel()
			r := newRand(seedOf("gradgrad", op.name))
			for si, shapes := range op.shapeSets() {
				if op.fails != nil && op.fails(shapes) {
					continue
				}
				l := []layout{contiguous, permuted, negStep}[si%3]
				msg := fmt.Sprintf("%s shapes %v layout %v", op.name, shapes, l)
				// gg returns d<g, w>/du and d<g, w>/d(inputs) (nil or zero).
				gg := func(c *ops.Context, in, ws []*tensor.Tensor, uT *tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
					leaves := make([]*tensor.Tensor, len(in))
					for k := range in {
						leaves[k] = leaf(t, in[k].Detach())
					}
					y, err := op.call(c, leaves)
					require.NoError(t, err, msg)
					u := leaf(t, uT.Detach())
					g, err := ops.Grad(c, ts(y), leaves, ts(u), nil, true, false)
					require.NoError(t, err, msg)
					plain, err := ops.Grad(c, ts(must(t)(op.call(c, leaves))), leaves, ts(uT), nil, false, false)
					require.NoError(t, err, msg)
					var s *tensor.Tensor
					for k := range g {
						requireBitsEqual(t, plain[k], g[k].Detach(), false, "%s: create_graph grad %d vs plain", msg, k)
						require.True(t, g[k].RequiresGrad(), "%s: grad %d is recorded", msg, k)
						p := sumT(t, c, must(t)(ops.Mul(c, g[k], ws[k])))
						if s == nil {
							s = p
						} else {
							s = must(t)(ops.Add(c, s, p))
						}
					}
					second, err := ops.Grad(c, ts(s), append([]*tensor.Tensor{u}, leaves...), nil, nil, false, true)
					require.NoError(t, err, msg)
					require.NotNil(t, second[0], msg)
					requireShape(t, u.Shape(), second[0].Shape(), msg)
					return second[0], second[1:]
				}
				zeroOrNil := func(gs []*tensor.Tensor, what string) {
					for k, g := range gs {
						if g != nil {
							for _, v := range g.Float64s() {
								require.Zero(t, v, "%s: %s: d<g, w>/d input %d", msg, what, k)
							}
						}
					}
				}

				// Exact, on ties.
				in := make([]*tensor.Tensor, op.arity)
				ws := make([]*tensor.Tensor, op.arity)
				for k := range in {
					in[k] = familyInts(t, r, dtype.Float64, shapes[k], l)
					ws[k] = familyInts(t, r, dtype.Float64, shapes[k], contiguous)
				}
				args, attrs := op.generic(in)
				targs, _ := op.generic(ws)
				outs, touts, err := ops.CallJvp(nil, op.id(), args, targs, attrs)
				require.NoError(t, err, msg)
				u := familyInts(t, r, dtype.Float64, outs[0].Shape(), contiguous)
				gCPU, dCPU := gg(ctxFor(cpuBackend), in, ws, u)
				gRef, dRef := gg(ctxFor(refBackend), in, ws, u)
				requireBitsEqual(t, touts[0], gCPU, false, msg+": d<g, w>/du == J w (forward mode)")
				requireBitsEqual(t, gRef, gCPU, false, msg+": cpu vs ref")
				zeroOrNil(dCPU, "cpu")
				zeroOrNil(dRef, "ref")

				// Against finite differences, away from ties.
				var vals [][]float64
				for try := 0; ; try++ {
					require.Less(t, try, 1000, msg+": no valid data")
					vals = make([][]float64, op.arity)
					for k := range vals {
						for _, b := range genBits(r, dtype.Float64, numel(shapes[k]), genSmooth) {
							vals[k] = append(vals[k], math.Float64frombits(b))
						}
					}
					if op.fdValid == nil || op.fdValid(vals, shapes) {
						break
					}
				}
				const eps = 1e-6
				eval := func(sign float64) []float64 {
					xs := make([]*tensor.Tensor, op.arity)
					for k := range xs {
						v := slices.Clone(vals[k])
						w := ws[k].Float64s()
						for i := range v {
							v[i] += sign * eps * w[i]
						}
						xs[k] = f64(t, shapes[k], v...)
					}
					return must(t)(op.call(ctxFor(cpuBackend).NoGrad(), xs)).Float64s()
				}
				hi, lo := eval(1), eval(-1)
				fd := make([]float64, len(hi))
				for i := range fd {
					fd[i] = (hi[i] - lo[i]) / (2 * eps)
				}
				for k := range in {
					in[k] = makeTensor(t, dtype.Float64, shapes[k], l, func(n int) []uint64 {
						out := make([]uint64, n)
						for i, v := range vals[k] {
							out[i] = math.Float64bits(v)
						}
						return out
					})
				}
				got, d := gg(ctxFor(cpuBackend), in, ws, u)
				requireClose(t, fd, got.Float64s(), 1e-6, 1e-5, msg, " d<g, w>/du vs finite differences")
				zeroOrNil(d, "smooth")
			}
		})
	}
}

// Every op a host offers (a Signature) documents itself: a summary line
// ending in a period, details after a blank line if any, and an example the
// Python docstring shows (tests_py runs it as a doctest).
func TestPublicOpsHaveDocsAndExamples(t *testing.T) {
	public := 0
	for _, s := range ops.Schemas() {
		if s.Signature == "" {
			continue
		}
		public++
		summary, rest, _ := strings.Cut(s.Doc, "\n")
		require.True(t, strings.HasSuffix(summary, "."), "%s: summary line %q", s.Name, summary)
		require.True(t, rest == "" || strings.HasPrefix(rest, "\n"), "%s: a blank line after the summary", s.Name)
		require.True(t, strings.HasPrefix(s.Example, ">>> "), "%s: example %q", s.Name, s.Example)
		require.Contains(t, s.Example, "ops."+s.Name+"(", "%s: the example calls the op", s.Name)
	}
	require.Greater(t, public, 20)
}
