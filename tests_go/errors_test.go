package tests_go

// Bad input never panics (docs/errors.md): every case here must return an error of
// the right kind (errs.Value / errs.Type / Runtime) whose message names the
// problem, and no panic may escape.

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/backend/ref"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// erCase is one bad call: it must fail with kind, and the message must
// contain every string in msg.
type erCase struct {
	name string
	call func() error
	kind errs.Kind
	msg  []string
}

func erRun(t *testing.T, cases []erCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = c.call() })
			require.Error(t, err)
			assert.Equal(t, c.kind, errs.KindOf(err), "kind of %q", err)
			for _, m := range c.msg {
				assert.Contains(t, err.Error(), m)
			}
		})
	}
}

func erF32(t *testing.T, shape ...int) *tensor.Tensor {
	t.Helper()
	x, err := tensor.New(dtype.Float32, shape)
	require.NoError(t, err)
	return x
}

// each op under both backends
func erContexts() map[string]*ops.Context {
	return map[string]*ops.Context{
		"cpu": {Backend: cpu.New(2), GradEnabled: true},
		"ref": {Backend: ref.Backend{}, GradEnabled: true},
		"nil": nil,
	}
}

type erBinary struct {
	name string
	fn   func(*ops.Context, *tensor.Tensor, *tensor.Tensor) (*tensor.Tensor, error)
}

var erBinaries = []erBinary{
	{"minimum", ops.Minimum}, {"maximum", ops.Maximum}, {"add", ops.Add},
	{"sub", ops.Sub}, {"mul", ops.Mul}, {"div", ops.Div},
}

func TestErrorsBroadcastShapes(t *testing.T) {
	pairs := [][2][]int{
		{{2, 3}, {4}},
		{{3}, {4}},
		{{2, 1, 5}, {3, 4}},
		{{0}, {2}},
		{{4, 0}, {1, 3}},
		{{1, 2, 3}, {2, 3, 3}},
	}
	var cases []erCase
	for _, p := range pairs {
		a, b := p[0], p[1]
		sa, sb := tensor.FormatShape(a), tensor.FormatShape(b)
		cases = append(cases, erCase{"BroadcastShapes" + sa + sb, func() error {
			_, err := tensor.BroadcastShapes(a, b)
			return err
		}, errs.Value, []string{sa, sb}})
		for _, op := range erBinaries {
			for cn, c := range erContexts() {
				cases = append(cases, erCase{op.name + "/" + cn + sa + sb, func() error {
					_, err := op.fn(c, erF32(t, a...), erF32(t, b...))
					return err
				}, errs.Value, []string{sa, sb, op.name}})
			}
		}
		cases = append(cases, erCase{"BroadcastTo" + sa + sb, func() error {
			_, err := erF32(t, a...).BroadcastTo(b)
			return err
		}, errs.Value, []string{sa, sb}})
		cases = append(cases, erCase{"Expand" + sa + sb, func() error {
			_, err := ops.Expand(nil, erF32(t, a...), b)
			return err
		}, errs.Value, []string{sa, sb}})
	}
	erRun(t, cases)
	// the formatted shapes are Python tuples
	assert.Equal(t, "(2, 3)", tensor.FormatShape([]int{2, 3}))
	assert.Equal(t, "(4,)", tensor.FormatShape([]int{4}))
	assert.Equal(t, "()", tensor.FormatShape(nil))
}

func TestErrorsNegativeAndOverflowingShapes(t *testing.T) {
	huge := 1 << 62
	x := erF32(t, 2, 3)
	erRun(t, []erCase{
		{"New negative", func() error { _, err := tensor.New(dtype.Float32, []int{2, -1}); return err }, errs.Value, []string{"negative", "-1"}},
		{"New MinInt", func() error { _, err := tensor.New(dtype.Float32, []int{math.MinInt}); return err }, errs.Value, []string{"negative"}},
		{"Numel negative", func() error { _, err := tensor.Numel([]int{-3}); return err }, errs.Value, []string{"negative", "-3"}},
		{"FromFloat64s negative", func() error { _, err := tensor.FromFloat64s(dtype.Float64, []int{-1}, nil); return err }, errs.Value, []string{"negative"}},
		{"Full negative", func() error { _, err := tensor.Full(dtype.Float64, []int{3, -2}, 1); return err }, errs.Value, []string{"-2"}},
		{"BroadcastShapes negative", func() error { _, err := tensor.BroadcastShapes([]int{-1}, []int{2}); return err }, errs.Value, []string{"negative", "-1"}},
		{"BroadcastShapes negative lead", func() error { _, err := tensor.BroadcastShapes([]int{-4, 2}, []int{2}); return err }, errs.Value, []string{"negative", "-4"}},
		{"BroadcastTo negative", func() error { _, err := x.BroadcastTo([]int{-2, 3}); return err }, errs.Value, []string{"-2"}},
		{"Reshape negative", func() error { _, err := x.Reshape([]int{-1, 6}); return err }, errs.Value, []string{"negative", "-1"}},
		{"ops.Reshape negative", func() error { _, err := ops.Reshape(nil, x, []int{-6}); return err }, errs.Value, []string{"-6"}},
		{"Expand negative", func() error { _, err := ops.Expand(nil, x, []int{-2, 3}); return err }, errs.Value, []string{"-2"}},
		{"SumToShape negative", func() error { _, err := ops.SumToShape(nil, x, []int{-2, 3}); return err }, errs.Value, []string{"-2"}},

		{"Numel overflow", func() error { _, err := tensor.Numel([]int{huge, 2}); return err }, errs.Value, []string{"int64"}},
		{"Numel 2^64", func() error { _, err := tensor.Numel([]int{1 << 32, 1 << 32}); return err }, errs.Value, []string{"int64"}},
		{"New overflow", func() error { _, err := tensor.New(dtype.Float32, []int{huge, 4}); return err }, errs.Value, []string{"int64"}},
		{"New byte overflow", func() error { _, err := tensor.New(dtype.Float64, []int{huge}); return err }, errs.Value, []string{"bytes"}},
		{"Full overflow", func() error { _, err := tensor.Full(dtype.Float32, []int{huge, 4}, 1); return err }, errs.Value, []string{"int64"}},
		{"BroadcastShapes overflow", func() error {
			_, err := tensor.BroadcastShapes([]int{huge, 1}, []int{1, 4})
			return err
		}, errs.Value, []string{"int64"}},
		{"BroadcastTo overflow", func() error {
			s, err := tensor.Scalar(dtype.Float32, 1)
			if err != nil {
				return nil
			}
			_, err = s.BroadcastTo([]int{1 << 32, 1 << 32})
			return err
		}, errs.Value, []string{"int64"}},
		{"Expand overflow", func() error {
			s, _ := tensor.Scalar(dtype.Float32, 1)
			_, err := ops.Expand(nil, s, []int{huge, 2})
			return err
		}, errs.Value, []string{"int64"}},
		{"minimum overflowing broadcast", func() error {
			a, _ := tensor.Scalar(dtype.Float32, 1)
			av, err := a.BroadcastTo([]int{1 << 31, 1})
			if err != nil {
				return nil
			}
			bv, err := a.BroadcastTo([]int{1, 1 << 33})
			if err != nil {
				return nil
			}
			_, err = ops.Minimum(nil, av, bv)
			return err
		}, errs.Value, []string{"int64"}},
		{"too many dims", func() error { _, err := tensor.New(dtype.Float32, make([]int, 65)); return err }, errs.Value, []string{"65 dims"}},
	})
}

// A shape that fits int64 but not the address space: an error, not a
// runtime panic from make (the host maps it to an exception).
func TestErrorsAllocationTooLarge(t *testing.T) {
	for _, shape := range [][]int{{1 << 50}, {1 << 30, 1 << 30, 4}} {
		var err error
		require.NotPanics(t, func() { _, err = tensor.New(dtype.Bool, shape) }, "%v", shape)
		require.Error(t, err, "%v", shape)
		require.NotPanics(t, func() { _, err = tensor.Full(dtype.Bool, shape, 1) }, "%v", shape)
		require.Error(t, err, "%v", shape)
	}
}

func TestErrorsNewView(t *testing.T) {
	st := tensor.BorrowStorage(make([]byte, 40), false, nil) // 10 float32, 5 float64
	view := func(dt dtype.Dtype, shape, strides []int, off int) func() error {
		return func() error { _, err := tensor.NewView(st, dt, shape, strides, off); return err }
	}
	erRun(t, []erCase{
		{"past the end", view(dtype.Float32, []int{11}, []int{1}, 0), errs.Value, []string{"outside", "storage"}},
		{"offset past the end", view(dtype.Float32, []int{1}, []int{1}, 10), errs.Value, []string{"outside", "offset 10"}},
		{"negative offset", view(dtype.Float32, []int{2}, []int{1}, -1), errs.Value, []string{"outside", "offset -1"}},
		{"negative stride before start", view(dtype.Float32, []int{3}, []int{-2}, 3), errs.Value, []string{"outside"}},
		{"wide dtype", view(dtype.Float64, []int{6}, []int{1}, 0), errs.Value, []string{"outside", "float64"}},
		{"2-d corner", view(dtype.Float32, []int{3, 4}, []int{4, 1}, 0), errs.Value, []string{"outside"}},
		{"stride overflow", view(dtype.Float32, []int{3}, []int{math.MaxInt/2 + 1}, 0), errs.Value, []string{"overflow"}},
		{"MinInt stride", view(dtype.Float32, []int{2}, []int{math.MinInt}, 0), errs.Value, []string{"overflow"}},
		{"extent sum overflow", view(dtype.Float32, []int{2, 2}, []int{math.MaxInt / 2, math.MaxInt / 2}, 5), errs.Value, []string{"overflow"}},
		{"offset plus extent overflow", view(dtype.Float32, []int{2}, []int{2}, math.MaxInt-1), errs.Value, []string{"overflow"}},
		{"negative extent underflow", view(dtype.Float32, []int{2}, []int{-math.MaxInt}, -5), errs.Value, []string{"overflow"}},
		{"strides length", view(dtype.Float32, []int{2, 2}, []int{1}, 0), errs.Value, []string{"strides", "shape"}},
		{"negative dim", view(dtype.Float32, []int{-2}, []int{1}, 0), errs.Value, []string{"negative"}},
		{"invalid dtype", view(dtype.Dtype(200), []int{2}, []int{1}, 0), errs.Type, []string{"dtype(200)"}},
		{"nil storage", func() error {
			_, err := tensor.NewView(nil, dtype.Float32, []int{2}, []int{1}, 0)
			return err
		}, errs.Value, []string{"storage"}},
		{"nil storage, empty", func() error {
			_, err := tensor.NewView(nil, dtype.Float32, []int{0, 3}, []int{3, 1}, 0)
			return err
		}, errs.Value, []string{"storage"}},
	})
	// the largest in-bounds views are accepted
	for _, c := range []struct {
		shape, strides []int
		off            int
	}{
		{[]int{10}, []int{1}, 0}, {[]int{10}, []int{-1}, 9}, {[]int{5, 2}, []int{2, 1}, 0},
		{[]int{4, 7}, []int{3, 0}, 0}, {[]int{1}, []int{math.MinInt}, 9}, {[]int{0}, []int{1}, -50},
	} {
		_, err := tensor.NewView(st, dtype.Float32, c.shape, c.strides, c.off)
		assert.NoError(t, err, "%v %v %d", c.shape, c.strides, c.off)
	}
}

func TestErrorsBadDims(t *testing.T) {
	x := erF32(t, 2, 3)
	s, err := tensor.Scalar(dtype.Float32, 1)
	require.NoError(t, err)
	sum := func(a *tensor.Tensor, dims ...int) func() error {
		return func() error { _, err := ops.Sum(nil, a, dims, false); return err }
	}
	mean := func(a *tensor.Tensor, dims ...int) func() error {
		return func() error { _, err := ops.Mean(nil, a, dims, true); return err }
	}
	erRun(t, []erCase{
		{"sum dim 2", sum(x, 2), errs.Value, []string{"sum", "dimension 2", "out of range"}},
		{"sum dim -3", sum(x, -3), errs.Value, []string{"sum", "-3", "out of range"}},
		{"sum dim MinInt", sum(x, math.MinInt), errs.Value, []string{"sum", "out of range"}},
		{"sum dim MaxInt", sum(x, math.MaxInt), errs.Value, []string{"sum", "out of range"}},
		{"sum repeated dim", sum(x, 0, 0), errs.Value, []string{"sum", "multiple times"}},
		{"sum repeated dim negative", sum(x, 1, -1), errs.Value, []string{"sum", "multiple times"}},
		{"sum 0-d dim 1", sum(s, 1), errs.Value, []string{"sum", "out of range"}},
		{"mean dim 5", mean(x, 5), errs.Value, []string{"mean", "5", "out of range"}},
		{"mean repeated", mean(x, -2, 0), errs.Value, []string{"mean", "multiple times"}},
		{"transpose out of range", func() error { _, err := x.Transpose(0, 2); return err }, errs.Value, []string{"dimension 2"}},
		{"transpose negative", func() error { _, err := x.Transpose(-3, 0); return err }, errs.Value, []string{"dimension -3"}},
		{"permute too few", func() error { _, err := x.Permute(0); return err }, errs.Value, []string{"permute", "2 dims"}},
		{"permute too many", func() error { _, err := x.Permute(0, 1, 2); return err }, errs.Value, []string{"permute"}},
		{"permute repeated", func() error { _, err := x.Permute(1, 1); return err }, errs.Value, []string{"permutation", "[1 1]"}},
		{"permute repeated negative", func() error { _, err := x.Permute(0, -2); return err }, errs.Value, []string{"permutation"}},
		{"permute out of range", func() error { _, err := x.Permute(0, 2); return err }, errs.Value, []string{"permutation"}},
		{"permute far negative", func() error { _, err := x.Permute(-100, 0); return err }, errs.Value, []string{"permutation"}},
		{"slice step 0", func() error { _, err := x.Slice(0, 0, 1, 0); return err }, errs.Value, []string{"step", "zero"}},
		{"slice dim out of range", func() error { _, err := x.Slice(2, 0, 1, 1); return err }, errs.Value, []string{"dimension 2"}},
		{"slice dim negative", func() error { _, err := x.Slice(-3, 0, 1, 1); return err }, errs.Value, []string{"dimension -3"}},
		{"slice 0-d", func() error { _, err := s.Slice(0, 0, 1, 1); return err }, errs.Value, []string{"0-d"}},
		{"reshape count", func() error { _, err := x.Reshape([]int{4, 2}); return err }, errs.Value, []string{"(2, 3)", "(4, 2)"}},
		{"reshape count ops", func() error { _, err := ops.Reshape(nil, x, []int{7}); return err }, errs.Value, []string{"(2, 3)", "(7,)"}},
		{"sum_to_shape incompatible", func() error { _, err := ops.SumToShape(nil, x, []int{5}); return err }, errs.Value, []string{"(2, 3)", "(5,)"}},
		{"sum_to_shape more dims", func() error { _, err := ops.SumToShape(nil, x, []int{1, 2, 3}); return err }, errs.Value, []string{"(1, 2, 3)"}},
		{"item of many", func() error { _, err := x.Item(); return err }, errs.Value, []string{"one element", "(2, 3)"}},
		{"wrapped number of 2-d", func() error { _, err := x.AsWrappedNumber(); return err }, errs.Value, []string{"0-d", "(2, 3)"}},
		{"FromFloat64s count", func() error {
			_, err := tensor.FromFloat64s(dtype.Float32, []int{2, 2}, []float64{1, 2, 3})
			return err
		}, errs.Value, []string{"3 values", "(2, 2)"}},
		{"FromInt64s count", func() error {
			_, err := tensor.FromInt64s(dtype.Int32, []int{2}, []int64{1, 2, 3})
			return err
		}, errs.Value, []string{"3 values", "(2,)"}},
		{"FromBits count", func() error {
			_, err := tensor.FromBits(dtype.Float16, nil, []uint64{})
			return err
		}, errs.Value, []string{"0 values", "()"}},
	})
	// Dims of a 0-d tensor (0 and -1): either accepted as PyTorch does or a
	// Value error, never a panic.
	for _, d := range []int{0, -1} {
		for _, f := range []func() error{sum(s, d), mean(s, d), func() error { _, err := s.Transpose(d, d); return err }} {
			var err error
			require.NotPanics(t, func() { err = f() })
			if err != nil {
				assert.Equal(t, errs.Value, errs.KindOf(err))
			}
		}
	}
}

func TestErrorsUnsupportedDtype(t *testing.T) {
	x := erF32(t, 2)
	var cases []erCase
	for _, d := range []dtype.Dtype{dtype.Invalid, dtype.Dtype(11), dtype.Dtype(200), dtype.Dtype(255)} {
		name := d.String()
		cases = append(cases,
			erCase{"New " + name, func() error { _, err := tensor.New(d, []int{2}); return err }, errs.Type, []string{"dtype", name}},
			erCase{"Scalar " + name, func() error { _, err := tensor.Scalar(d, 1); return err }, errs.Type, []string{name}},
			erCase{"Full " + name, func() error { _, err := tensor.Full(d, []int{3}, 1); return err }, errs.Type, []string{name}},
			erCase{"FromBits " + name, func() error { _, err := tensor.FromBits(d, []int{1}, []uint64{1}); return err }, errs.Type, []string{name}},
			erCase{"FromInt64s " + name, func() error { _, err := tensor.FromInt64s(d, []int{1}, []int64{1}); return err }, errs.Type, []string{name}},
			erCase{"WrappedScalar " + name, func() error { _, err := tensor.WrappedScalar(d, 1); return err }, errs.Type, []string{name}},
			erCase{"Cast " + name, func() error { _, err := ops.Cast(nil, x, d); return err }, errs.Type, []string{"cast", name}},
		)
	}
	cases = append(cases, erCase{"Parse complex64", func() error { _, err := dtype.Parse("complex64"); return err }, errs.Type, []string{"complex64"}})
	erRun(t, cases)
	assert.Equal(t, "dtype(200)", dtype.Dtype(200).String())
}

// Kernels called directly with operands they do not support return errors.
func TestErrorsBackendContracts(t *testing.T) {
	f := erF32(t, 2, 3)
	g := erF32(t, 3, 2)
	i32, err := tensor.New(dtype.Int32, []int{2, 3})
	require.NoError(t, err)
	out, err := tensor.New(dtype.Float32, []int{2, 3})
	require.NoError(t, err)
	for _, b := range []kernels{cpu.New(1), cpu.New(4), ref.Backend{}} {
		for _, c := range []struct {
			name string
			call func() error
			msg  string
		}{
			{"shape", func() error { return b.Binary(backend.Add, out, f, g) }, "shape"},
			{"dtype", func() error { return b.Binary(backend.Add, out, f, i32) }, "dtype"},
			{"int div", func() error {
				o, _ := tensor.New(dtype.Int32, []int{2, 3})
				return b.Binary(backend.Div, o, i32, i32)
			}, "div"},
			{"unknown op", func() error { return b.Binary(backend.BinaryOp(99), out, f, f) }, "BinaryOp(99)"},
			{"unknown unary", func() error { return b.Unary(backend.UnaryOp(7), out, f) }, "UnaryOp(7)"},
			{"route rule", func() error { return b.Route(backend.Rule(9), out, out, f, f, f) }, "Rule(9)"},
			{"select rule", func() error { return b.Select(backend.NumRules, out, f, f, f, f) }, "Rule(4)"},
			{"sum shape", func() error {
				o, _ := tensor.New(dtype.Float32, []int{3})
				return b.Sum(o, f)
			}, "sum"},
			{"cast shape", func() error { return b.Cast(out, g) }, "shape"},
		} {
			var err error
			require.NotPanics(t, func() { err = c.call() }, "%s %s", b.Name(), c.name)
			require.Error(t, err, "%s %s", b.Name(), c.name)
			assert.Contains(t, err.Error(), c.msg, "%s %s", b.Name(), c.name)
		}
	}
}

func TestErrorsMeanOfNonFloat(t *testing.T) {
	for _, d := range []dtype.Dtype{dtype.Bool, dtype.Uint8, dtype.Int8, dtype.Int16, dtype.Int32, dtype.Int64} {
		x, err := tensor.New(d, []int{2, 2})
		require.NoError(t, err)
		for _, dims := range [][]int{nil, {0}} {
			var err error
			require.NotPanics(t, func() { _, err = ops.Mean(nil, x, dims, false) })
			require.Error(t, err, "%v", d)
			assert.Equal(t, errs.Type, errs.KindOf(err))
			assert.Contains(t, err.Error(), "mean")
			assert.Contains(t, err.Error(), "floating")
			assert.Contains(t, err.Error(), d.String())
		}
		// sum of the same tensor is fine (int64)
		s, err := ops.Sum(nil, x, nil, false)
		require.NoError(t, err)
		assert.Equal(t, dtype.Int64, s.Dtype())
	}
	// bool arithmetic that has no meaning
	b, err := tensor.New(dtype.Bool, []int{2})
	require.NoError(t, err)
	_, err = ops.Sub(nil, b, b)
	require.Error(t, err)
	assert.Equal(t, errs.Type, errs.KindOf(err))
	assert.Contains(t, err.Error(), "bool")
	_, err = ops.Neg(nil, b)
	require.Error(t, err)
	assert.Equal(t, errs.Type, errs.KindOf(err))
	assert.Contains(t, err.Error(), "bool")
}

func TestErrorsNilTensors(t *testing.T) {
	x := erF32(t, 2)
	var cases []erCase
	for _, op := range erBinaries {
		for cn, c := range erContexts() {
			cases = append(cases,
				erCase{op.name + "/" + cn + "(nil, x)", func() error { _, err := op.fn(c, nil, x); return err }, errs.Value, []string{op.name, "nil", "input 0"}},
				erCase{op.name + "/" + cn + "(x, nil)", func() error { _, err := op.fn(c, x, nil); return err }, errs.Value, []string{op.name, "nil", "input 1"}},
				erCase{op.name + "/" + cn + "(nil, nil)", func() error { _, err := op.fn(c, nil, nil); return err }, errs.Value, []string{"nil"}},
			)
		}
	}
	cases = append(cases,
		erCase{"neg", func() error { _, err := ops.Neg(nil, nil); return err }, errs.Value, []string{"neg", "nil"}},
		erCase{"sum", func() error { _, err := ops.Sum(nil, nil, nil, false); return err }, errs.Value, []string{"sum", "nil"}},
		erCase{"mean", func() error { _, err := ops.Mean(nil, nil, []int{0}, false); return err }, errs.Value, []string{"mean", "nil"}},
		erCase{"cast", func() error { _, err := ops.Cast(nil, nil, dtype.Float64); return err }, errs.Value, []string{"cast", "nil"}},
		erCase{"expand", func() error { _, err := ops.Expand(nil, nil, []int{2}); return err }, errs.Value, []string{"expand", "nil"}},
		erCase{"reshape", func() error { _, err := ops.Reshape(nil, nil, []int{2}); return err }, errs.Value, []string{"reshape", "nil"}},
		erCase{"sum_to_shape", func() error { _, err := ops.SumToShape(nil, nil, []int{2}); return err }, errs.Value, []string{"nil"}},
		// autograd entry points: a nil output or input is not part of any graph
		erCase{"backward nil root", func() error {
			return ops.Backward(nil, []*tensor.Tensor{nil}, nil, false, false)
		}, errs.Runtime, []string{"element 0", "grad"}},
		erCase{"grad nil input", func() error {
			a, err := tensor.FromFloat64s(dtype.Float32, []int{1}, []float64{1})
			if err != nil {
				return nil
			}
			if err := a.SetRequiresGrad(true); err != nil {
				return nil
			}
			y, err := ops.Sum(nil, a, nil, false)
			if err != nil {
				return nil
			}
			_, err = ops.Grad(nil, []*tensor.Tensor{y}, []*tensor.Tensor{nil}, nil, nil, false, false)
			return err
		}, errs.Runtime, []string{"input 0", "grad"}},
		erCase{"grad nil output", func() error {
			_, err := ops.Grad(nil, []*tensor.Tensor{nil}, []*tensor.Tensor{x}, nil, nil, false, false)
			return err
		}, errs.Runtime, []string{"element 0"}},
	)
	erRun(t, cases)
	assert.Equal(t, autograd.Edge{}, autograd.EdgeOf(nil))
}

func TestErrorsRequiresGradOnNonFloat(t *testing.T) {
	for _, d := range dtype.All() {
		x, err := tensor.New(d, []int{2})
		require.NoError(t, err)
		err = x.SetRequiresGrad(true)
		if d.IsFloat() {
			require.NoError(t, err, "%v", d)
			assert.True(t, x.RequiresGrad())
			require.NoError(t, x.SetRequiresGrad(false))
			assert.False(t, x.RequiresGrad())
			continue
		}
		require.Error(t, err, "%v", d)
		assert.Contains(t, []errs.Kind{errs.Type, errs.Runtime}, errs.KindOf(err))
		assert.Contains(t, err.Error(), d.String())
		assert.True(t, strings.Contains(err.Error(), "floating") || strings.Contains(err.Error(), "float"), err.Error())
		assert.False(t, x.RequiresGrad(), "a failed SetRequiresGrad must leave the flag off")
		assert.NoError(t, x.SetRequiresGrad(false), "turning it off is always allowed")
	}
	// non-leaf: changing requires_grad is refused with a message pointing to detach()
	a, err := tensor.FromFloat64s(dtype.Float32, []int{2}, []float64{1, 2})
	require.NoError(t, err)
	require.NoError(t, a.SetRequiresGrad(true))
	y, err := ops.Mul(nil, a, a)
	require.NoError(t, err)
	err = y.SetRequiresGrad(false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "detach")
	assert.True(t, y.RequiresGrad())
}

// Ops on integer tensors never record a graph, so gradients cannot reach them.
func TestErrorsIntegerOpsRecordNothing(t *testing.T) {
	a, err := tensor.FromInt64s(dtype.Int32, []int{2}, []int64{1, 5})
	require.NoError(t, err)
	b, err := tensor.FromInt64s(dtype.Int32, []int{2}, []int64{3, 2})
	require.NoError(t, err)
	y, err := ops.Minimum(nil, a, b)
	require.NoError(t, err)
	assert.False(t, y.RequiresGrad())
	fn, _ := y.GradFn()
	assert.Nil(t, fn)
	err = ops.Backward(nil, []*tensor.Tensor{y}, nil, false, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not require grad")
}
