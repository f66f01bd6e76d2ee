package tensor

import (
	"testing"
	"unsafe"

	"github.com/pylucid/pylucid/core/dtype"
)

// FlatLayout must say exactly what Numel, IsContiguous and DataPointer say
// together (it replaced them on the elementwise fast path), for every kind
// of layout: contiguous, size-1 dims with any stride, broadcast scalars,
// transposed, sliced, expanded and empty tensors.
func TestFlatLayoutAgreesWithNumelContiguousDataPointer(t *testing.T) {
	mk := func(shape ...int) *Tensor {
		x, err := New(dtype.Float32, shape)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	must := func(x *Tensor, err error) *Tensor {
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	m := mk(3, 4)
	one := mk(1)
	cases := map[string]*Tensor{
		"contiguous 2-d":      m,
		"0-d":                 mk(),
		"one element":         one,
		"transposed":          must(m.Transpose(0, 1)),
		"row slice":           must(m.Slice(0, 1, 2, 1)), // (1, 4) at an offset: contiguous
		"column slice":        must(m.Slice(1, 1, 2, 1)), // (3, 1): strided
		"step slice":          must(m.Slice(1, 0, 4, 2)),
		"scalar broadcast":    must(one.BroadcastTo([]int{5, 2})),
		"row broadcast":       must(must(m.Slice(0, 2, 3, 1)).BroadcastTo([]int{3, 4})),
		"empty":               mk(0, 3),
		"size-1 dims strided": must(must(mk(2, 1, 3).Permute(1, 0, 2)).Reshape([]int{1, 2, 3})),
	}
	for name, x := range cases {
		for _, n := range []int{1, 2, 4, 10, 12, 0} {
			p, stride, ok := x.FlatLayout(n)
			numel := x.Numel()
			contiguous := numel == n && x.IsContiguous()
			scalar := true
			for i, st := range x.StridesRef() {
				if st != 0 && x.ShapeRef()[i] != 1 {
					scalar = false
				}
			}
			if numel == 0 && n == 0 {
				contiguous = true
			}
			switch {
			case contiguous:
				if !ok || stride != 4 || p != x.DataPointer() {
					t.Errorf("%s, n=%d: got (%p, %d, %v), want (%p, 4, true)", name, n, p, stride, ok, x.DataPointer())
				}
			case scalar:
				if !ok || stride != 0 || p != x.DataPointer() {
					t.Errorf("%s, n=%d: got (%p, %d, %v), want (%p, 0, true)", name, n, p, stride, ok, x.DataPointer())
				}
			default:
				if ok {
					t.Errorf("%s, n=%d: flat (%p, %d), want not flat", name, n, p, stride)
				}
			}
		}
	}
	// The pointer includes the view's offset.
	row := must(m.Slice(0, 2, 3, 1))
	p, _, _ := row.FlatLayout(4)
	if want := unsafe.Add(m.DataPointer(), 8*4); p != want {
		t.Fatalf("row 2 at %p, want %p", p, want)
	}
}
