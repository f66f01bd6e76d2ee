package tensor

import (
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/pylucid/pylucid/core/dtype"
)

// formatEdge is how many leading and trailing entries of a dim String
// shows when the tensor has more than formatThreshold elements (NumPy's
// and torch's summarisation).
const (
	formatThreshold = 1000
	formatEdge      = 3
)

// String prints the tensor as its Python repr does: tensor([[1., 2.], [3.,
// 4.]]) with the dtype named unless it is float32, integral floats with a
// trailing dot, NaN as nan, and large tensors summarised with "...".
func (t *Tensor) String() string {
	var b strings.Builder
	b.WriteString("tensor(")
	summarise := t.Numel() > formatThreshold
	idx := make([]int, len(t.shape))
	t.formatDim(&b, 0, idx, summarise)
	if t.dtype != dtype.Float32 {
		b.WriteString(", dtype=")
		b.WriteString(t.dtype.String())
	}
	b.WriteString(")")
	return b.String()
}

func (t *Tensor) formatDim(b *strings.Builder, d int, idx []int, summarise bool) {
	if d == len(t.shape) {
		b.WriteString(t.formatElement(idx))
		return
	}
	b.WriteByte('[')
	n := t.shape[d]
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		if summarise && n > 2*formatEdge && i == formatEdge {
			b.WriteString("..., ")
			i = n - formatEdge
		}
		idx[d] = i
		t.formatDim(b, d+1, idx, summarise)
	}
	b.WriteByte(']')
}

func (t *Tensor) formatElement(idx []int) string {
	off := t.offset
	for i, k := range idx {
		off += k * t.strides[i]
	}
	p := elementAt(t, off)
	switch {
	case t.dtype == dtype.Bool:
		if LoadInt64(t.dtype, p) != 0 {
			return "True"
		}
		return "False"
	case t.dtype.IsFloat():
		v := LoadFloat64(t.dtype, p)
		switch {
		case math.IsNaN(v):
			return "nan"
		case math.IsInf(v, 1):
			return "inf"
		case math.IsInf(v, -1):
			return "-inf"
		}
		bits := 32
		if t.dtype == dtype.Float64 {
			bits = 64
		}
		s := strconv.FormatFloat(v, 'g', -1, bits)
		if !strings.ContainsAny(s, ".en") {
			s += "."
		}
		return s
	}
	return strconv.FormatInt(LoadInt64(t.dtype, p), 10)
}

// elementAt is the address of the element at storage offset off.
func elementAt(t *Tensor, off int) unsafe.Pointer {
	return unsafe.Add(t.storage.Pointer(), off*t.dtype.Size())
}
