package tensor

import (
	"fmt"

	"github.com/pylucid/pylucid/core/errs"
)

// BroadcastShapes returns the NumPy broadcast of shapes a and b, or an error
// naming both shapes.
func BroadcastShapes(a, b []int) ([]int, error) {
	return BroadcastShapesInto(make([]int, max(len(a), len(b))), a, b)
}

// BroadcastShapesInto is BroadcastShapes writing into out, which must have
// room for max(len(a), len(b)) dims; it returns out resliced to them. With a
// stack buffer, an op's result shape costs no allocation.
func BroadcastShapesInto(out, a, b []int) ([]int, error) {
	n := max(len(a), len(b))
	out = out[:n]
	for i := 1; i <= n; i++ {
		da, db := 1, 1
		if i <= len(a) {
			da = a[len(a)-i]
		}
		if i <= len(b) {
			db = b[len(b)-i]
		}
		if da < 0 || db < 0 {
			return nil, errs.Valuef("negative dimension in shapes %v and %v", a, b)
		}
		switch {
		case da == db || db == 1:
			out[n-i] = da
		case da == 1:
			out[n-i] = db
		default:
			return nil, errs.Valuef("shapes %v and %v cannot be broadcast together (dim %d: %d vs %d)",
				fmtShape(a), fmtShape(b), n-i, da, db)
		}
	}
	if _, err := Numel(out); err != nil {
		return nil, err
	}
	return out, nil
}

func fmtShape(s []int) string {
	out := "("
	for i, d := range s {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprint(d)
	}
	if len(s) == 1 {
		out += ","
	}
	return out + ")"
}

// FormatShape writes a shape the way Python prints a tuple: (2, 3), (4,), ().
func FormatShape(s []int) string { return fmtShape(s) }

// BroadcastStrides returns t's strides for a view of shape out (zero on
// stretched and added dims), or an error if t does not broadcast to out.
func (t *Tensor) BroadcastStrides(out []int) ([]int, error) {
	if len(out) < len(t.shape) {
		return nil, errs.Valuef("cannot broadcast shape %v to %v", fmtShape(t.shape), fmtShape(out))
	}
	st := make([]int, len(out))
	return st, t.broadcastStridesInto(out, st)
}

// broadcastStridesInto is BroadcastStrides writing into st (len(out) long).
func (t *Tensor) broadcastStridesInto(out, st []int) error {
	if len(out) < len(t.shape) {
		return errs.Valuef("cannot broadcast shape %v to %v", fmtShape(t.shape), fmtShape(out))
	}
	clear(st)
	lead := len(out) - len(t.shape)
	for i := range t.shape {
		switch d := t.shape[i]; {
		case d == out[lead+i]:
			st[lead+i] = t.strides[i]
		case d == 1:
			st[lead+i] = 0
		default:
			return errs.Valuef("cannot broadcast shape %v to %v", fmtShape(t.shape), fmtShape(out))
		}
	}
	return nil
}

// BroadcastTo returns a read-only view of t with shape out.
func (t *Tensor) BroadcastTo(out []int) (*Tensor, error) {
	if _, err := Numel(out); err != nil {
		return nil, err
	}
	var buf [inlineDims]int
	st := buf[:0]
	if len(out) <= inlineDims {
		st = buf[:len(out)]
	} else {
		st = make([]int, len(out))
	}
	if err := t.broadcastStridesInto(out, st); err != nil {
		return nil, err
	}
	return t.view(out, st, t.offset), nil
}

// viewTensor is a view with room for its shape and strides: one allocation.
type viewTensor struct {
	t    Tensor
	meta [2 * inlineDims]int
}

// newView returns a view of t's storage with ndim dims, whose shape and
// strides the caller fills in.
func (t *Tensor) newView(ndim, offset int) *Tensor {
	t.storage.MarkShared()
	return t.newViewUnshared(ndim, offset)
}

// newViewUnshared is newView without marking the storage shared (see Alias).
func (t *Tensor) newViewUnshared(ndim, offset int) *Tensor {
	var meta []int
	v := new(viewTensor)
	if ndim <= inlineDims {
		meta = v.meta[:2*ndim]
	} else {
		meta = make([]int, 2*ndim)
	}
	v.t = Tensor{storage: t.storage, dtype: t.dtype, shape: meta[:ndim:ndim], strides: meta[ndim:], offset: offset}
	return &v.t
}

// view returns a view of t's storage with copies of shape and strides.
func (t *Tensor) view(shape, strides []int, offset int) *Tensor {
	v := t.newView(len(shape), offset)
	copy(v.shape, shape)
	copy(v.strides, strides)
	return v
}

// Permute returns a view with dims reordered: result dim i is t's dim dims[i].
func (t *Tensor) Permute(dims ...int) (*Tensor, error) {
	if len(dims) != len(t.shape) {
		return nil, errs.Valuef("permute needs %d dims, got %v", len(t.shape), dims)
	}
	seen := make([]bool, len(dims))
	shape, st := make([]int, len(dims)), make([]int, len(dims))
	for i, d := range dims {
		if d < 0 {
			d += len(dims)
		}
		if d < 0 || d >= len(dims) || seen[d] {
			return nil, errs.Valuef("invalid permutation %v of %d dims", dims, len(dims))
		}
		seen[d] = true
		shape[i], st[i] = t.shape[d], t.strides[d]
	}
	return t.view(shape, st, t.offset), nil
}

// Transpose swaps dims i and j (negative dims count from the end).
func (t *Tensor) Transpose(i, j int) (*Tensor, error) {
	n := len(t.shape)
	perm := make([]int, n)
	for k := range perm {
		perm[k] = k
	}
	ni, err := NormDim(i, n)
	if err != nil {
		return nil, err
	}
	nj, err := NormDim(j, n)
	if err != nil {
		return nil, err
	}
	perm[ni], perm[nj] = nj, ni
	return t.Permute(perm...)
}

// NormDim maps a possibly negative dim into [0, n), or returns an error.
func NormDim(d, n int) (int, error) {
	if d < -n || d >= n || (n == 0 && d != 0 && d != -1) {
		return 0, errs.Valuef("dimension %d out of range for a %d-d tensor", d, n)
	}
	if d < 0 {
		d += n
	}
	return d, nil
}

// Slice returns the view t[..., start:stop:step, ...] along dim, with Python
// semantics: negative indices count from the end, out-of-range bounds clamp,
// step may be negative but not zero.
func (t *Tensor) Slice(dim, start, stop, step int) (*Tensor, error) {
	d, err := NormDim(dim, len(t.shape))
	if err != nil {
		return nil, err
	}
	if len(t.shape) == 0 {
		return nil, errs.Valuef("cannot slice a 0-d tensor")
	}
	if step == 0 {
		return nil, errs.Valuef("slice step cannot be zero")
	}
	n := t.shape[d]
	norm := func(i, lo, hi int) int {
		if i < 0 {
			i += n
		}
		return min(max(i, lo), hi)
	}
	var count int
	if step > 0 {
		start, stop = norm(start, 0, n), norm(stop, 0, n)
		if stop > start {
			count = (stop-start-1)/step + 1 // no overflow for huge steps
		}
	} else {
		start, stop = norm(start, -1, n-1), norm(stop, -1, n-1)
		if start > stop {
			count = (start-stop-1)/(-step) + 1 // step == MinInt: -step is MinInt, the quotient 0
		}
	}
	shape, st := t.Shape(), t.Strides()
	shape[d] = count
	st[d] = t.strides[d] * step
	off := t.offset
	if count > 0 {
		off += start * t.strides[d]
	}
	return t.view(shape, st, off), nil
}

// Reshape returns a view with a new shape when the layout allows it without a
// copy (contiguous tensors always do), or an error otherwise.
func (t *Tensor) Reshape(shape []int) (*Tensor, error) {
	n, err := Numel(shape)
	if err != nil {
		return nil, err
	}
	if n != t.Numel() {
		return nil, errs.Valuef("cannot reshape %v (%d elements) to %v", fmtShape(t.shape), t.Numel(), fmtShape(shape))
	}
	if t.IsContiguous() {
		v := t.newView(len(shape), t.offset)
		copy(v.shape, shape)
		contiguousStrides(v.shape, v.strides)
		return v, nil
	}
	// Drop size-1 dims and insert size-1 dims: a view whatever the strides.
	var src, srcSt, dst []int
	for i, d := range t.shape {
		if d != 1 {
			src, srcSt = append(src, d), append(srcSt, t.strides[i])
		}
	}
	for _, d := range shape {
		if d != 1 {
			dst = append(dst, d)
		}
	}
	if !SameShape(src, dst) {
		return nil, errs.Valuef("cannot reshape a non-contiguous %v view to %v without a copy", fmtShape(t.shape), fmtShape(shape))
	}
	st := make([]int, len(shape))
	k := 0
	for i, d := range shape {
		if d != 1 {
			st[i] = srcSt[k]
			k++
		}
	}
	return t.view(shape, st, t.offset), nil
}
