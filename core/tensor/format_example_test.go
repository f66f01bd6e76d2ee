package tensor_test

import (
	"fmt"
	"math"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// A tensor prints its values in the layout of its Python repr, each in
// the fewest digits that read back as it in its dtype.
func ExampleTensor_String() {
	x, _ := tensor.FromFloat64s(dtype.Float32, []int{2, 3}, []float64{1, 2.5, math.Copysign(0, -1), math.NaN(), math.Inf(1), 1e-8})
	fmt.Println(x)
	xt, _ := x.Transpose(0, 1) // a view prints in its own order
	fmt.Println(xt)
	i, _ := tensor.FromInt64s(dtype.Int64, []int{3}, []int64{7, -1, 0})
	fmt.Println(i)
	b, _ := tensor.FromInt64s(dtype.Bool, []int{2}, []int64{1, 0})
	fmt.Println(b)
	s, _ := tensor.FromFloat64s(dtype.Float64, nil, []float64{0.1})
	fmt.Println(s)
	big, _ := tensor.Full(dtype.Float16, []int{2000}, 0.5)
	fmt.Println(big)
	h, _ := tensor.FromFloat64s(dtype.Float16, []int{3}, []float64{0.1, 1.0 / 3, 65504})
	fmt.Println(h)
	bf, _ := tensor.FromFloat64s(dtype.BFloat16, []int{2}, []float64{0.1, 3e38}) // each the bfloat16 nearest
	fmt.Println(bf)
	empty, _ := tensor.New(dtype.Float32, []int{0, 3})
	fmt.Println(empty)
	// Output:
	// tensor([[1., 2.5, -0.], [nan, inf, 1e-08]])
	// tensor([[1., nan], [2.5, inf], [-0., 1e-08]])
	// tensor([7, -1, 0], dtype=int64)
	// tensor([True, False], dtype=bool)
	// tensor(0.1, dtype=float64)
	// tensor([0.5, 0.5, 0.5, ..., 0.5, 0.5, 0.5], dtype=float16)
	// tensor([0.1, 0.3333, 65504.], dtype=float16)
	// tensor([0.1, 3e+38], dtype=bfloat16)
	// tensor([], size=(0, 3))
}
