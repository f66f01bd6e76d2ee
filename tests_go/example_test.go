package tests_go

import (
	"fmt"
	"math"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// Minimum forward and backward: the gradient goes to the operand that won,
// ties (including +0.0 vs -0.0) and NaN in a go to a.
func Example_minimum() {
	a, _ := tensor.FromFloat64s(dtype.Float64, []int{4}, []float64{1, 5, 2, 0})
	b, _ := tensor.FromFloat64s(dtype.Float64, []int{4}, []float64{3, 4, 2, -0.0})
	_ = a.SetRequiresGrad(true)
	_ = b.SetRequiresGrad(true)

	y, _ := ops.Minimum(nil, a, b)
	loss, _ := ops.Sum(nil, y, nil, false)
	_ = ops.Backward(nil, []*tensor.Tensor{loss}, nil, false, false)

	fn, _ := y.GradFn()
	fmt.Println(fn.Name())
	fmt.Println(y.Float64s())
	fmt.Println(a.Grad().Float64s(), b.Grad().Float64s())
	// Output:
	// MinimumBackward
	// [1 4 2 0]
	// [1 0 1 1] [0 1 0 0]
}

// Broadcasting: a (2,1) column against a (3,) row gives (2,3); the backward
// sums each gradient back to its input's shape.
func Example_broadcasting() {
	a, _ := tensor.FromFloat64s(dtype.Float32, []int{2, 1}, []float64{0, 10})
	b, _ := tensor.FromFloat64s(dtype.Float32, []int{3}, []float64{-1, 5, 20})
	_ = a.SetRequiresGrad(true)
	_ = b.SetRequiresGrad(true)

	y, _ := ops.Maximum(nil, a, b)
	loss, _ := ops.Sum(nil, y, nil, false)
	_ = ops.Backward(nil, []*tensor.Tensor{loss}, nil, false, false)

	fmt.Println(y.Shape(), y.Float64s())
	fmt.Println(a.Grad().Shape(), a.Grad().Float64s())
	fmt.Println(b.Grad().Shape(), b.Grad().Float64s())
	// Output:
	// [2 3] [0 5 20 10 10 20]
	// [2 1] [1 2]
	// [3] [0 1 2]
}

// Amax over a dim: each row's first largest element wins (the first NaN
// where there is one) and gets the whole gradient, however many tie.
func Example_amax() {
	x, _ := tensor.FromFloat64s(dtype.Float64, []int{2, 3}, []float64{2, 7, 7, 1, math.NaN(), math.NaN()})
	_ = x.SetRequiresGrad(true)

	y, _ := ops.Amax(nil, x, []int{1}, false)
	i, _ := ops.Argmax(nil, x, ptr(1), false)
	loss, _ := ops.Sum(nil, y, nil, false)
	_ = ops.Backward(nil, []*tensor.Tensor{loss}, nil, false, false)

	fn, _ := y.GradFn()
	fmt.Println(fn.Name())
	fmt.Println(y.Float64s(), i.Int64s())
	fmt.Println(x.Grad().Float64s())
	// Output:
	// AmaxBackward
	// [7 NaN] [1 1]
	// [0 1 0 0 1 0]
}

// Clamp is minimum(maximum(x, lo), hi) in one op: at x == bound the
// gradient goes to x; a tensor bound gets the gradient where it wins; a nil
// bound is skipped.
func Example_clamp() {
	x, _ := tensor.FromFloat64s(dtype.Float64, []int{4}, []float64{-3, 0, 0.5, 9})
	lo, _ := tensor.FromFloat64s(dtype.Float64, []int{4}, []float64{-1, 0, 0, 0})
	hi, _ := tensor.Scalar(dtype.Float64, 1)
	_ = x.SetRequiresGrad(true)
	_ = lo.SetRequiresGrad(true)

	y, _ := ops.Clamp(nil, x, lo, hi)
	loss, _ := ops.Sum(nil, y, nil, false)
	_ = ops.Backward(nil, []*tensor.Tensor{loss}, nil, false, false)

	fn, _ := y.GradFn()
	fmt.Println(fn.Name())
	fmt.Println(y.Float64s())
	fmt.Println(x.Grad().Float64s(), lo.Grad().Float64s())
	// Output:
	// ClampBackward
	// [-1 0 0.5 1]
	// [0 1 1 0] [1 0 0 0]
}

func ptr(i int) *int { return &i }
