package tests_go

import (
	"fmt"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// The README's Go example, line for line (tests_py/test_readme.py checks
// that the README shows exactly these lines).
func Example_readme() {
	a, _ := tensor.FromFloat64s(dtype.Float64, []int{3}, []float64{1, 5, 2})
	b, _ := tensor.FromFloat64s(dtype.Float64, []int{3}, []float64{3, 4, 2})
	_ = a.SetRequiresGrad(true)
	y, _ := ops.Minimum(nil, a, b)
	loss, _ := ops.Sum(nil, y, nil, false)
	_ = ops.Backward(nil, []*tensor.Tensor{loss}, nil, false, false)
	fmt.Println(a.Grad().Float64s()) // [1 0 1]
	// Output:
	// [1 0 1]
}
