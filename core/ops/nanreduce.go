package ops

import (
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// NanminBackward, NanmaxBackward: "nanmin", "nanmax", "nanargmin",
// "nanargmax" are the same reductions folded by the NaN-ignoring rules
// (backend.RuleFMin, RuleFMax; NumPy's nanmin and friends): the running
// winner w keeps its place against x_k iff w <= x_k (nanmax >=) or x_k is
// NaN. So the first smallest non-NaN element wins, and an all-NaN slice
// gives its first element's NaN, with the whole gradient at its first
// position; nanargmin/nanargmax raise on an all-NaN slice, as NumPy does.
var (
	nanminOp = defineExtreme(extremeRecord{name: "nanmin", node: "NanminBackward", rule: backend.RuleFMin,
		returns: extremeValues, numpy: []string{"nanmin", "fmin.reduce"}, bridges: []string{"jax", "dask"},
		doc: `The smallest element over dim, NaN ignored (NumPy's nanmin): the first smallest non-NaN.

The result is each slice's first smallest non-NaN element (bits
included: fmin's rule folded), whose position gets the whole gradient;
an all-NaN slice gives its first element's NaN, the gradient to its
first position.`,
		example: `>>> ops.nanmin([[3.0, np.nan], [np.nan, np.nan]], dim=1)
tensor([ 3., nan])`})
	nanmaxOp = defineExtreme(extremeRecord{name: "nanmax", node: "NanmaxBackward", rule: backend.RuleFMax,
		returns: extremeValues, numpy: []string{"nanmax", "fmax.reduce"}, bridges: []string{"jax", "dask"},
		doc: `The largest element over dim, NaN ignored (NumPy's nanmax): the first largest non-NaN.

The result is each slice's first largest non-NaN element (bits
included: fmax's rule folded), whose position gets the whole gradient;
an all-NaN slice gives its first element's NaN, the gradient to its
first position. The mirror of nanmin.`,
		example: `>>> ops.nanmax([[3.0, np.nan], [np.nan, np.nan]], dim=1)
tensor([ 3., nan])`})
	nanargminOp = defineExtreme(extremeRecord{name: "nanargmin", rule: backend.RuleFMin, returns: extremeIndex,
		numpy: []string{"nanargmin"}, bridges: []string{"jax", "dask"}, check: allNaNRefused,
		doc: `The int64 position of nanmin's winner along dim (flat index when None): NaN ignored, the first smallest.

Equal to NumPy's nanargmin; an all-NaN slice raises ValueError. No gradient.`,
		example: `>>> ops.nanargmin([[np.nan, 3.0, 1.0], [2.0, np.nan, 2.0]], dim=1)
tensor([2, 0])`})
	nanargmaxOp = defineExtreme(extremeRecord{name: "nanargmax", rule: backend.RuleFMax, returns: extremeIndex,
		numpy: []string{"nanargmax"}, bridges: []string{"jax", "dask"}, check: allNaNRefused,
		doc: `The int64 position of nanmax's winner along dim (flat index when None): NaN ignored, the first largest.

Equal to NumPy's nanargmax; an all-NaN slice raises ValueError. No gradient.`,
		example: `>>> ops.nanargmax([[np.nan, 3.0, 1.0], [2.0, np.nan, 2.0]], dim=1)
tensor([1, 0])`})
)

// allNaNRefused is the check of nanargmin and nanargmax: a winner that is
// NaN means its whole slice is (the rule ignores NaN), which has no
// position to give (NumPy raises too).
func allNaNRefused(s *spec, x, vals, _ *tensor.Tensor) error {
	if !x.Dtype().IsFloat() {
		return nil
	}
	for i := range vals.Numel() {
		if v := tensor.LoadFloat64(vals.Dtype(), vals.ElementPointer(i)); v != v {
			return errs.Valuef("%s: All-NaN slice encountered", s.Name)
		}
	}
	return nil
}

// Nanmin returns the smallest non-NaN element of each slice of x over dims
// (nil: all dims); an all-NaN slice gives its first element's NaN. Its
// gradient goes whole to the winner's position (NumPy's nanmin).
func Nanmin(c *Context, x *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error) {
	return one(c, nanminOp, x, dims, keepdim)
}

// Nanmax is Nanmin's mirror: the largest non-NaN element.
func Nanmax(c *Context, x *tensor.Tensor, dims []int, keepdim bool) (*tensor.Tensor, error) {
	return one(c, nanmaxOp, x, dims, keepdim)
}

// Nanargmin returns the int64 position of Nanmin's winner along dim, or its
// flat index when dim is nil (NumPy's nanargmin); an all-NaN slice is a
// Value error.
func Nanargmin(c *Context, x *tensor.Tensor, dim *int, keepdim bool) (*tensor.Tensor, error) {
	return one(c, nanargminOp, x, dimList(dim), keepdim)
}

// Nanargmax returns the int64 position of Nanmax's winner (see Nanargmin).
func Nanargmax(c *Context, x *tensor.Tensor, dim *int, keepdim bool) (*tensor.Tensor, error) {
	return one(c, nanargmaxOp, x, dimList(dim), keepdim)
}
