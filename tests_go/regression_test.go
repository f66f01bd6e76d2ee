package tests_go

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// A leaf that is its own upstream gradient, with create_graph: accumulation
// must not take the leaf's lock and then need it again (it hung once).
func TestBackwardWithLeafAsItsOwnGradient(t *testing.T) {
	x, err := tensor.FromFloat64s(dtype.Float64, []int{2}, []float64{1, 2})
	require.NoError(t, err)
	require.NoError(t, x.SetRequiresGrad(true))
	done := make(chan error, 1)
	go func() {
		err := ops.Backward(nil, []*tensor.Tensor{x}, []*tensor.Tensor{x}, false, true)
		if err == nil {
			err = ops.Backward(nil, []*tensor.Tensor{x}, []*tensor.Tensor{x}, false, true) // accumulate: old != nil
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("backward hung")
	}
	require.Equal(t, []float64{2, 4}, x.Grad().Float64s())
}

// Copies keep every bit: -0.0 and NaN payloads survive ops.Copy, and the
// engine's copy of a shared gradient.
func TestCopyKeepsBits(t *testing.T) {
	nan := math.Float32bits(float32(math.NaN())) | 0x1234
	bits := []uint64{uint64(math.Float32bits(float32(math.Copysign(0, -1)))), uint64(nan), 0x3f800000}
	x, err := tensor.FromBits(dtype.Float32, []int{3}, bits)
	require.NoError(t, err)
	c, err := ops.Copy(nil, x)
	require.NoError(t, err)
	require.Equal(t, bits, c.Bits())
	require.NotSame(t, x.Storage(), c.Storage())

	// Two leaves fed the caller's own gradient tensor each get a private copy
	// of it, bit for bit.
	a, err := tensor.FromFloat64s(dtype.Float32, []int{3}, []float64{1, 2, 3})
	require.NoError(t, err)
	b, err := tensor.FromFloat64s(dtype.Float32, []int{3}, []float64{4, 5, 6})
	require.NoError(t, err)
	require.NoError(t, a.SetRequiresGrad(true))
	require.NoError(t, b.SetRequiresGrad(true))
	y, err := ops.Add(nil, a, b)
	require.NoError(t, err)
	require.NoError(t, ops.Backward(nil, []*tensor.Tensor{y}, []*tensor.Tensor{x}, false, false))
	require.Equal(t, bits, a.Grad().Bits())
	require.Equal(t, bits, b.Grad().Bits())
	require.NotSame(t, a.Grad().Storage(), b.Grad().Storage())
	require.NotSame(t, x.Storage(), a.Grad().Storage())
}

// Full fills every element with the value rounded to the dtype.
func TestFullFillsEveryElement(t *testing.T) {
	for _, dt := range dtype.All() {
		for _, shape := range [][]int{nil, {0}, {1}, {3, 5}, {2, 1, 70}} {
			f, err := tensor.Full(dt, shape, 3)
			require.NoError(t, err)
			require.Equal(t, shape, nilIfEmpty(f.Shape()))
			want := 3.0
			if dt == dtype.Bool {
				want = 1
			}
			for i, v := range f.Float64s() {
				require.Equal(t, want, v, "%v %v element %d", dt, shape, i)
			}
		}
	}
	h, err := tensor.Full(dtype.Float16, []int{4}, 0.1)
	require.NoError(t, err)
	require.Equal(t, []uint64{0x2e66, 0x2e66, 0x2e66, 0x2e66}, h.Bits()) // 0.1 to float16, nearest even
}

func nilIfEmpty(s []int) []int {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Forward mode through argmin/argmax (no jvp of their own: their output is
// int64) gives the positions and a nil tangent; it used to fail with "has
// no forward-mode derivative", so autograd.jvp of any function calling
// argmax on an input with a tangent raised.
func TestJvpThroughArgminGivesNoTangent(t *testing.T) {
	x := f64(t, []int{2, 3}, 1, 5, 3, -1, 0, 7)
	v := f64(t, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	for name, want := range map[string][]int64{"argmin": {1, 1, 0}, "argmax": {0, 0, 1}} {
		s, ok := ops.Lookup(name)
		require.True(t, ok)
		outs, touts, err := ops.CallJvp(nil, s.ID, ts(x), ts(v), []int64{0, 1, 0})
		require.NoError(t, err, name)
		require.Len(t, outs, 1)
		require.Equal(t, want, outs[0].Int64s(), name)
		require.Len(t, touts, 1)
		require.Nil(t, touts[0], name)
	}
	// An op with a floating output still needs a jvp: every op has one, so
	// this is checked through an integer input instead (a Type error).
	xi, err := tensor.FromInt64s(dtype.Int32, []int{2}, []int64{1, 2})
	require.NoError(t, err)
	s, _ := ops.Lookup("argmax")
	_, _, err = ops.CallJvp(nil, s.ID, ts(xi), ts(f64(t, []int{2}, 1, 1)), []int64{0, -1})
	require.Error(t, err)
}
