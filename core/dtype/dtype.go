// Package dtype defines pylucid's element types, their sizes and names, the
// type-promotion rules of docs/dtypes.md, and exact float16/bfloat16 conversions.
//
// Conventions:
//   - A Dtype is a small integer; its zero value is Invalid.
//   - Promotion follows PyTorch's categories bool < integer < float: within a
//     category the wider type wins, float16 with bfloat16 gives float32, an
//     integer with a float gives that float. Python scalars are "weak" and only
//     move the result to a higher category (see PromoteScalar).
//   - Conversions to float16/bfloat16 round to nearest, ties to even, overflow
//     to ±Inf, and keep NaN a NaN (quiet, sign kept).
//
// Errors: Parse returns an error naming the unknown dtype; nothing here panics
// on user input.
package dtype

import (
	"fmt"

	"github.com/pylucid/pylucid/core/errs"
)

// Dtype is an element type.
type Dtype uint8

// The supported element types. The order is not the promotion order.
const (
	Invalid Dtype = iota
	Bool
	Uint8
	Int8
	Int16
	Int32
	Int64
	Float16
	BFloat16
	Float32
	Float64
	numDtypes
)

// Default is the default floating dtype (PyTorch's torch.get_default_dtype).
const Default = Float32

var names = [numDtypes]string{
	Invalid:  "invalid",
	Bool:     "bool",
	Uint8:    "uint8",
	Int8:     "int8",
	Int16:    "int16",
	Int32:    "int32",
	Int64:    "int64",
	Float16:  "float16",
	BFloat16: "bfloat16",
	Float32:  "float32",
	Float64:  "float64",
}

var sizes = [numDtypes]int{
	Bool: 1, Uint8: 1, Int8: 1, Int16: 2, Int32: 4, Int64: 8,
	Float16: 2, BFloat16: 2, Float32: 4, Float64: 8,
}

// All lists every valid dtype, in declaration order.
func All() []Dtype {
	out := make([]Dtype, 0, numDtypes-1)
	for d := Bool; d < numDtypes; d++ {
		out = append(out, d)
	}
	return out
}

// Valid reports whether d is one of the supported dtypes.
func (d Dtype) Valid() bool { return d > Invalid && d < numDtypes }

// String returns the dtype's name ("float32", "bfloat16", …).
func (d Dtype) String() string {
	if d < numDtypes {
		return names[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size returns the size of one element in bytes (0 for Invalid).
func (d Dtype) Size() int {
	if d < numDtypes {
		return sizes[d]
	}
	return 0
}

// IsFloat reports whether d is a floating-point dtype.
func (d Dtype) IsFloat() bool {
	return d == Float16 || d == BFloat16 || d == Float32 || d == Float64
}

// IsInt reports whether d is an integer dtype (bool excluded).
func (d Dtype) IsInt() bool { return d >= Uint8 && d <= Int64 }

// IsSigned reports whether d is a signed integer or float dtype.
func (d Dtype) IsSigned() bool { return d != Bool && d != Uint8 && d.Valid() }

// Parse returns the dtype with the given name.
func Parse(name string) (Dtype, error) {
	for d := Bool; d < numDtypes; d++ {
		if names[d] == name {
			return d, nil
		}
	}
	return Invalid, errs.Typef("unsupported dtype %q", name)
}

// Category is a promotion category: bool < integer < float.
type Category uint8

// The promotion categories.
const (
	BoolCategory Category = iota
	IntCategory
	FloatCategory
)

// Category returns d's promotion category.
func (d Dtype) Category() Category {
	switch {
	case d.IsFloat():
		return FloatCategory
	case d.IsInt():
		return IntCategory
	default:
		return BoolCategory
	}
}

// Promote returns the result dtype of a binary op between tensors of dtypes a
// and b (docs/dtypes.md).
func Promote(a, b Dtype) Dtype {
	if a == b {
		return a
	}
	ca, cb := a.Category(), b.Category()
	if ca != cb {
		if ca > cb {
			return a
		}
		return b
	}
	switch ca {
	case FloatCategory:
		if (a == Float16 && b == BFloat16) || (a == BFloat16 && b == Float16) {
			return Float32
		}
		if a.Size() >= b.Size() {
			return a
		}
		return b
	case IntCategory:
		// uint8 mixed with a signed type needs the next signed width up.
		if a == Uint8 || b == Uint8 {
			other := b
			if b == Uint8 {
				other = a
			}
			if other == Int8 {
				return Int16
			}
			return other
		}
		if a.Size() >= b.Size() {
			return a
		}
		return b
	}
	return Bool
}

// PromoteScalar returns the result dtype of a binary op between a tensor of
// dtype t and a weak Python scalar of category c: the tensor's dtype wins
// unless the scalar is of a higher category, in which case the result is the
// default dtype of that category (int64 for integers, Default for floats).
func PromoteScalar(t Dtype, c Category) Dtype {
	if c <= t.Category() {
		return t
	}
	if c == FloatCategory {
		return Default
	}
	return Int64
}

// ScalarDtype is the dtype a lone Python scalar of category c takes.
func ScalarDtype(c Category) Dtype {
	switch c {
	case FloatCategory:
		return Default
	case IntCategory:
		return Int64
	}
	return Bool
}

// AccumulateDtype is the dtype in which sums over d are accumulated:
// float32 for float16/bfloat16/float32, float64 for float64, int64 for
// integers and bool.
func AccumulateDtype(d Dtype) Dtype {
	switch d {
	case Float16, BFloat16, Float32:
		return Float32
	case Float64:
		return Float64
	}
	return Int64
}

// SumDtype is the dtype of a sum over elements of dtype d: d for floats,
// int64 for integers and bool (as PyTorch and NumPy do).
func SumDtype(d Dtype) Dtype {
	if d.IsFloat() {
		return d
	}
	return Int64
}
