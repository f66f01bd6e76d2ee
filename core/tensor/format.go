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

// String prints the tensor in the layout of its Python repr: tensor([[1.,
// 2.], [3., 4.]]) with the dtype named unless it is float32, an empty
// tensor's size unless it is 1-d, integral floats with a trailing dot, NaN
// as nan, and large tensors summarised with "...". Each value is the
// shortest decimal that reads back as it in its dtype (0.1 in float16);
// the Python repr instead lines values up in one notation, as torch's.
func (t *Tensor) String() string {
	var b strings.Builder
	b.WriteString("tensor(")
	summarise := t.Numel() > formatThreshold
	idx := make([]int, len(t.shape))
	t.formatDim(&b, 0, idx, summarise)
	if t.Numel() == 0 && len(t.shape) != 1 { // [] alone does not say the shape
		b.WriteString(", size=")
		b.WriteString(FormatShape(t.shape))
	}
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
		var s string
		switch t.dtype {
		case dtype.Float64:
			s = strconv.FormatFloat(v, 'g', -1, 64)
		case dtype.Float16, dtype.BFloat16:
			s = shortestHalf(v, t.dtype)
		default:
			s = strconv.FormatFloat(v, 'g', -1, 32)
		}
		if !strings.ContainsAny(s, ".en") {
			s += "."
		}
		return s
	}
	return strconv.FormatInt(LoadInt64(t.dtype, p), 10)
}

// shortestHalf is the float16 or bfloat16 value v in the fewest
// significant digits that read back as v in dt (as NumPy prints float16:
// 0.1, not float32's 0.099975586), positionally unless its exponent is
// far from zero.
func shortestHalf(v float64, dt dtype.Dtype) string {
	round := dtype.Float64ToFloat16
	if dt == dtype.BFloat16 {
		round = dtype.Float64ToBFloat16
	}
	want := round(v)
	for p := 1; p < 17; p++ {
		e := strconv.FormatFloat(v, 'e', p-1, 64)
		f, err := strconv.ParseFloat(e, 64)
		if err != nil || round(f) != want {
			continue
		}
		exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
		if exp < -4 || exp >= 16 {
			return e
		}
		if p-1-exp <= 0 { // a whole number: all its digits (65504, not 65500)
			return strconv.FormatFloat(v, 'f', 0, 64)
		}
		return strconv.FormatFloat(f, 'f', p-1-exp, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// elementAt is the address of the element at storage offset off.
func elementAt(t *Tensor, off int) unsafe.Pointer {
	return unsafe.Add(t.storage.Pointer(), off*t.dtype.Size())
}
