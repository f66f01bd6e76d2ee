package tests_go

import (
	"fmt"

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
