package ops

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// The Tensor basics hosts build indexing and the shape methods from
// (docs/tensor.md): permute, slice and view return views sharing their
// input's memory; take gathers elements by position into a copy. Each is
// differentiable, its gradient op differentiable in turn (create_graph):
// slice's is slice_backward (zeros with the gradient written into the
// slice), take's is take_backward (zeros with the gradient added at the
// positions, repeated positions summed), and each of those has the forward
// op as its own gradient.

// PermuteBackward: y = a with its dims reordered (attribute dims: result
// dim i is a's dim dims[i]); the gradient is permuted back.
var permuteOp = define(&spec{
	OpSchema: OpSchema{Name: "permute", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: View, Arity: 1, Outputs: 1, Attrs: []string{"dims"}},
	node: "PermuteBackward",
})

// Permute returns the view of a whose dim i is a's dim dims[i] (negative
// dims count from the end).
func Permute(c *Context, a *tensor.Tensor, dims []int) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(permuteOp.Name, a); err != nil {
		return nil, err
	}
	out, err := a.Permute(dims...)
	if err != nil {
		return nil, errs.Valuef("permute: %w", err)
	}
	if n := record(c, permuteOp, []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil); n != nil {
		n.attr = normDims(dims)
	}
	return out, nil
}

// normDims maps a valid permutation's negative dims into [0, len(dims)).
func normDims(dims []int) []int {
	out := make([]int, len(dims))
	for i, d := range dims {
		if d < 0 {
			d += len(dims)
		}
		out[i] = d
	}
	return out
}

// inversePermutation returns the permutation that undoes perm.
func inversePermutation(perm []int) []int {
	inv := make([]int, len(perm))
	for i, d := range perm {
		inv[d] = i
	}
	return inv
}

// SliceBackward: y = a[..., start:stop:step, ...] along dim (Python's slice
// rules: negative bounds count from the end, out-of-range bounds clamp, a
// negative step walks backwards); the gradient is slice_backward.
var sliceOp = define(&spec{
	OpSchema: OpSchema{Name: "slice", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: View, Arity: 1, Outputs: 1, Attrs: []string{"dim", "start", "stop", "step"}},
	node: "SliceBackward",
})

// Slice returns the view a[..., start:stop:step, ...] along dim.
func Slice(c *Context, a *tensor.Tensor, dim, start, stop, step int) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(sliceOp.Name, a); err != nil {
		return nil, err
	}
	out, err := a.Slice(dim, start, stop, step)
	if err != nil {
		return nil, errs.Valuef("slice: %w", err)
	}
	if n := record(c, sliceOp, []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil); n != nil {
		n.attr = [4]int{dim, start, stop, step}
	}
	return out, nil
}

// SliceBackwardBackward: y = zeros of the shape attribute with g written
// into the slice (dim, start, stop, step) of them; the gradient is that
// slice of the output gradient.
var unsliceOp = define(&spec{
	OpSchema: OpSchema{Name: "slice_backward", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: View, Arity: 1, Outputs: 1, Attrs: []string{"dim", "start", "stop", "step", "shape"}},
	node: "SliceBackwardBackward",
})

// Unslice returns zeros of shape with g written into their slice (dim,
// start, stop, step), which must have g's shape: the gradient of Slice.
func Unslice(c *Context, g *tensor.Tensor, shape []int, dim, start, stop, step int) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(unsliceOp.Name, g); err != nil {
		return nil, err
	}
	out, err := tensor.New(g.Dtype(), shape)
	if err != nil {
		return nil, err
	}
	v, err := out.Slice(dim, start, stop, step)
	if err != nil {
		return nil, errs.Valuef("slice_backward: %w", err)
	}
	if !tensor.SameShape(v.ShapeRef(), g.ShapeRef()) {
		return nil, errs.Valuef("slice_backward: the slice has shape %s, the gradient %s",
			tensor.FormatShape(v.ShapeRef()), tensor.FormatShape(g.ShapeRef()))
	}
	if err := c.Backend.Cast(v, g); err != nil {
		return nil, err
	}
	if n := record(c, unsliceOp, []*tensor.Tensor{g}, []*tensor.Tensor{out}, nil); n != nil {
		n.attr = [4]int{dim, start, stop, step}
	}
	return out, nil
}

// ViewBackward: y = a with the shape attribute, sharing a's memory (never a
// copy: a layout that needs one is an error, as torch's view); the gradient
// is reshaped back.
var viewOp = define(&spec{
	OpSchema: OpSchema{Name: "view", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: View, Arity: 1, Outputs: 1, Attrs: []string{"shape"}},
	node: "ViewBackward",
})

// ViewAs returns a with a new shape of the same element count, sharing its
// memory, or a runtime error when a's strides do not allow that (Reshape
// copies then).
func ViewAs(c *Context, a *tensor.Tensor, shape []int) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(viewOp.Name, a); err != nil {
		return nil, err
	}
	out, err := a.Reshape(shape)
	if err != nil {
		n, nerr := tensor.Numel(shape)
		if nerr != nil || n != a.Numel() {
			return nil, err
		}
		return nil, fmt.Errorf("view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead")
	}
	record(c, viewOp, []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil)
	return out, nil
}

// TakeBackward: y[j] = a's element at row-major position index[j] (index:
// int64 positions in [0, a's size), any shape, which is y's); the gradient
// is take_backward, and index gets none.
var takeOp = define(&spec{
	OpSchema: OpSchema{Name: "take", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: View, Arity: 2, Outputs: 1},
	node: "TakeBackward", // forward: takeForward, attached in init (it records takeOp)
})

// Take returns a copy of a's elements at the row-major positions in index
// (int64, any shape; the result has index's shape): integer-array and
// boolean-mask indexing, once a host has turned the index into positions.
func Take(c *Context, a, index *tensor.Tensor) (*tensor.Tensor, error) {
	out, _, err := takeForward(ctxOr(c), takeOp, []*tensor.Tensor{a, index}, nil)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func takeForward(c *Context, s *spec, in []*tensor.Tensor, attrs []int64) ([]*tensor.Tensor, any, error) {
	if err := checkInputs(s.Name, in...); err != nil {
		return nil, nil, err
	}
	if len(attrs) != 0 {
		return nil, nil, errs.Valuef("take takes no attributes, got %d", len(attrs))
	}
	a, index := in[0], in[1]
	pos, err := positions("take", index, a.Numel())
	if err != nil {
		return nil, nil, err
	}
	out, err := tensor.Empty(a.Dtype(), index.Shape())
	if err != nil {
		return nil, nil, err
	}
	// Each position is read where a's strides put it: no contiguous copy of
	// a, whose size may be any at all for an expanded view (memory
	// proportional to the result, docs/tensor.md).
	size := a.Dtype().Size()
	from, to := a.DataPointer(), out.DataPointer()
	shape, strides, dense := a.ShapeRef(), a.StridesRef(), a.IsContiguous()
	for j, p := range pos {
		off := int(p)
		if !dense {
			off = stridedOffset(off, shape, strides)
		}
		copy(unsafe.Slice((*byte)(unsafe.Add(to, j*size)), size), unsafe.Slice((*byte)(unsafe.Add(from, off*size)), size))
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(out)
	record(c, takeOp, []*tensor.Tensor{a, index}, []*tensor.Tensor{out}, []*tensor.Tensor{index})
	return []*tensor.Tensor{out}, nil, nil
}

// TakeBackwardBackward: y = zeros of the shape attribute with g[j] added at
// row-major position index[j] (repeated positions summed, in index order);
// the gradient is take of the output gradient.
var untakeOp = define(&spec{
	OpSchema: OpSchema{Name: "take_backward", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: View, Arity: 2, Outputs: 1, Attrs: []string{"shape"}},
	node: "TakeBackwardBackward", // forward: untakeForward, attached in init
})

// Untake returns zeros of shape with g's elements added at the row-major
// positions in index (g and index of one shape): the gradient of Take.
func Untake(c *Context, g, index *tensor.Tensor, shape []int) (*tensor.Tensor, error) {
	attrs := make([]int64, len(shape))
	for i, d := range shape {
		attrs[i] = int64(d)
	}
	out, _, err := untakeForward(ctxOr(c), untakeOp, []*tensor.Tensor{g, index}, attrs)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func untakeForward(c *Context, s *spec, in []*tensor.Tensor, attrs []int64) ([]*tensor.Tensor, any, error) {
	if err := checkInputs(s.Name, in...); err != nil {
		return nil, nil, err
	}
	g, index := in[0], in[1]
	if !tensor.SameShape(g.ShapeRef(), index.ShapeRef()) {
		return nil, nil, errs.Valuef("take_backward: the gradient has shape %s, the index %s",
			tensor.FormatShape(g.ShapeRef()), tensor.FormatShape(index.ShapeRef()))
	}
	out, err := tensor.New(g.Dtype(), intsOf(attrs))
	if err != nil {
		return nil, nil, err
	}
	pos, err := positions("take_backward", index, out.Numel())
	if err != nil {
		return nil, nil, err
	}
	src, err := contiguous(c, g)
	if err != nil {
		return nil, nil, err
	}
	dt, size := g.Dtype(), g.Dtype().Size()
	from, to := src.DataPointer(), out.DataPointer()
	for j, p := range pos {
		dst, v := unsafe.Add(to, int(p)*size), unsafe.Add(from, j*size)
		if dt.IsFloat() {
			tensor.StoreFloat64(dt, dst, addRounded(dt, tensor.LoadFloat64(dt, dst), tensor.LoadFloat64(dt, v)))
		} else {
			tensor.StoreInt64(dt, dst, tensor.LoadInt64(dt, dst)+tensor.LoadInt64(dt, v))
		}
	}
	runtime.KeepAlive(src)
	runtime.KeepAlive(out)
	record(c, untakeOp, []*tensor.Tensor{g, index}, []*tensor.Tensor{out}, []*tensor.Tensor{index})
	return []*tensor.Tensor{out}, nil, nil
}

// addRounded is x+y rounded as dt's own addition rounds it: float32 adds in
// float32 (float64 would round twice differently only for float64 itself,
// which adds exactly so), the halves in float32 as the kernels do.
func addRounded(dt dtype.Dtype, x, y float64) float64 {
	if dt == dtype.Float64 {
		return x + y
	}
	return float64(float32(x) + float32(y))
}

// positions returns index's values as row-major positions into a tensor of
// n elements, or an error naming the first out of range.
func positions(name string, index *tensor.Tensor, n int) ([]int64, error) {
	if index.Dtype() != dtype.Int64 {
		return nil, errs.Typef("%s: the index must be int64, not %v", name, index.Dtype())
	}
	pos := index.Int64s()
	for _, p := range pos {
		if p < 0 || p >= int64(n) {
			return nil, errs.Valuef("%s: position %d is out of range for %d elements", name, p, n)
		}
	}
	return pos, nil
}

// stridedOffset is the memory offset, in elements from the data pointer,
// of the element at row-major position p of a tensor of shape and strides.
func stridedOffset(p int, shape, strides []int) int {
	off := 0
	for d := len(shape) - 1; d >= 0 && p > 0; d-- {
		n := shape[d]
		off += (p % n) * strides[d]
		p /= n
	}
	return off
}

// contiguous returns t itself when its elements are laid out row-major in
// memory, else a contiguous copy (recorded nowhere).
func contiguous(c *Context, t *tensor.Tensor) (*tensor.Tensor, error) {
	if t.IsContiguous() {
		return t, nil
	}
	return castPlain(c, t, t.Dtype())
}

func init() {
	permuteOp.call = func(c *Context, a *tensor.Tensor, attrs []int64) (*tensor.Tensor, error) {
		return Permute(c, a, intsOf(attrs))
	}
	permuteOp.vjp = func(c *Context, n *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if grads[0] == nil {
			return []*tensor.Tensor{nil}, nil
		}
		g, err := Permute(c, grads[0], inversePermutation(n.attr.([]int)))
		return []*tensor.Tensor{g}, err
	}
	permuteOp.jvp = unaryJVP(func(c *Context, t *tensor.Tensor, k *jvpCall) (*tensor.Tensor, error) {
		return Permute(c, t, intsOf(k.attrs))
	})

	// sliceAttrs decodes dim, start, stop, step (then slice_backward's shape).
	sliceAttrs := func(name string, attrs []int64, shaped bool) ([4]int, error) {
		if len(attrs) < 4 || !shaped && len(attrs) != 4 {
			return [4]int{}, errs.Valuef("%s: attributes must be dim, start, stop, step (then the shape for slice_backward); got %d values",
				name, len(attrs))
		}
		return [4]int{int(attrs[0]), int(attrs[1]), int(attrs[2]), int(attrs[3])}, nil
	}
	sliceOp.call = func(c *Context, a *tensor.Tensor, attrs []int64) (*tensor.Tensor, error) {
		k, err := sliceAttrs("slice", attrs, false)
		if err != nil {
			return nil, err
		}
		return Slice(c, a, k[0], k[1], k[2], k[3])
	}
	sliceOp.vjp = func(c *Context, n *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if grads[0] == nil {
			return []*tensor.Tensor{nil}, nil
		}
		k := n.attr.([4]int)
		g, err := Unslice(c, grads[0], n.inputs[0].Shape, k[0], k[1], k[2], k[3])
		return []*tensor.Tensor{g}, err
	}
	sliceOp.jvp = unaryJVP(func(c *Context, t *tensor.Tensor, k *jvpCall) (*tensor.Tensor, error) {
		return Slice(c, t, int(k.attrs[0]), int(k.attrs[1]), int(k.attrs[2]), int(k.attrs[3]))
	})
	unsliceOp.call = func(c *Context, g *tensor.Tensor, attrs []int64) (*tensor.Tensor, error) {
		k, err := sliceAttrs("slice_backward", attrs, true)
		if err != nil {
			return nil, err
		}
		return Unslice(c, g, intsOf(attrs[4:]), k[0], k[1], k[2], k[3])
	}
	unsliceOp.vjp = func(c *Context, n *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if grads[0] == nil {
			return []*tensor.Tensor{nil}, nil
		}
		k := n.attr.([4]int)
		g, err := Slice(c, grads[0], k[0], k[1], k[2], k[3])
		return []*tensor.Tensor{g}, err
	}
	unsliceOp.jvp = unaryJVP(func(c *Context, t *tensor.Tensor, k *jvpCall) (*tensor.Tensor, error) {
		return Unslice(c, t, intsOf(k.attrs[4:]), int(k.attrs[0]), int(k.attrs[1]), int(k.attrs[2]), int(k.attrs[3]))
	})

	viewOp.call = func(c *Context, a *tensor.Tensor, attrs []int64) (*tensor.Tensor, error) {
		return ViewAs(c, a, intsOf(attrs))
	}
	viewOp.vjp = reshapeOp.vjp
	viewOp.jvp = reshapeOp.jvp

	takeOp.forward, untakeOp.forward = takeForward, untakeForward
	takeOp.vjp = func(c *Context, n *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if grads[0] == nil {
			return []*tensor.Tensor{nil, nil}, nil
		}
		g, err := Untake(c, grads[0], saved[0], n.inputs[0].Shape)
		return []*tensor.Tensor{g, nil}, err
	}
	takeOp.jvp = func(c *Context, k *jvpCall, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if ts[0] == nil {
			return []*tensor.Tensor{nil}, nil
		}
		t, err := Take(c, ts[0], k.in[1])
		return []*tensor.Tensor{t}, err
	}
	untakeOp.vjp = func(c *Context, n *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if grads[0] == nil {
			return []*tensor.Tensor{nil, nil}, nil
		}
		g, err := Take(c, grads[0], saved[0])
		return []*tensor.Tensor{g, nil}, err
	}
	untakeOp.jvp = func(c *Context, k *jvpCall, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if ts[0] == nil {
			return []*tensor.Tensor{nil}, nil
		}
		t, err := Untake(c, ts[0], k.in[1], intsOf(k.attrs))
		return []*tensor.Tensor{t}, err
	}
}
