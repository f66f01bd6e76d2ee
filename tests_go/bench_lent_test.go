package tests_go

import (
	"testing"
	"unsafe"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

// The Go side of one framework call at 1,000 elements (lucid_op_lent, what
// pylucid.torch's kernels pay per call besides reading the tensors): lend
// three buffers as views (fresh ones, or in reused tensor.Lent room) and
// run minimum into the given output; and the op alone on tensors made once. go test -run x -bench LentCall -benchmem
// ./tests_go
func BenchmarkLentCall(b *testing.B) {
	const n = 1000
	bufs := make([][]float32, 3)
	for i := range bufs {
		bufs[i] = make([]float32, n)
	}
	lend := func(buf []float32, readOnly bool) *tensor.Tensor {
		data := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 4*n)
		t, err := tensor.NewView(tensor.BorrowStorage(data, readOnly, nil), dtype.Float32, []int{n}, []int{1}, 0)
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	id := opID("minimum")
	b.Run("lend+call", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			in := []*tensor.Tensor{lend(bufs[0], true), lend(bufs[1], true)}
			if _, err := ops.CallN(nil, id, in, nil, []*tensor.Tensor{lend(bufs[2], false)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	var room [3]tensor.Lent
	b.Run("lent room+call", func(b *testing.B) { // lucid_op_lent's way
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var ts [3]*tensor.Tensor
			for k := range ts {
				data := unsafe.Slice((*byte)(unsafe.Pointer(&bufs[k][0])), 4*n)
				t, err := room[k].Lend(data, k < 2, dtype.Float32, []int{n}, []int{1}, 0)
				if err != nil {
					b.Fatal(err)
				}
				ts[k] = t
			}
			if _, err := ops.CallN(nil, id, ts[:2], nil, ts[2:]); err != nil {
				b.Fatal(err)
			}
		}
	})
	in := []*tensor.Tensor{lend(bufs[0], true), lend(bufs[1], true)}
	out := []*tensor.Tensor{lend(bufs[2], false)}
	b.Run("call", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := ops.CallN(nil, id, in, nil, out); err != nil {
				b.Fatal(err)
			}
		}
	})
	mask, err := tensor.New(dtype.Bool, []int{n})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("winners", func(b *testing.B) { // form 1: the values and the mask
		b.ReportAllocs()
		outs := []*tensor.Tensor{out[0], mask}
		for i := 0; i < b.N; i++ {
			if _, err := ops.Winners(nil, id, in, nil, outs); err != nil {
				b.Fatal(err)
			}
		}
	})
	zero, err := tensor.New(dtype.Float32, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("clamp winners", func(b *testing.B) { // clamp(x, min=0) into a bool mask: a model's clamp
		b.ReportAllocs()
		outs := []*tensor.Tensor{out[0], mask}
		clamp := opID("clamp")
		for i := 0; i < b.N; i++ {
			if _, err := ops.Winners(nil, clamp, []*tensor.Tensor{in[0], zero, nil}, nil, outs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
