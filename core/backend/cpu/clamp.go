// The clamp kernels: Clamp, ClampRoute, ClampSelect.

package cpu

import (
	"fmt"
	"sync"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// choiceFunc writes, for the n elements of segment s, which of x (operand
// ix), lo (ix+1) and hi (ix+2) clamp selects: 0, 1 or 2.
type choiceFunc func(c []uint8, s seg, ix int)

// clampPick is clamp's selection on one element: RuleMax between x and lo,
// then RuleMin between that winner and hi; it returns 0 (x), 1 (lo) or 2
// (hi).
func clampPick[T native](x, lo, hi T) uint8 {
	w, k := x, uint8(0)
	if !wins[ruleMax](x, lo) {
		w, k = lo, 1
	}
	if !wins[ruleMin](w, hi) {
		k = 2
	}
	return k
}

func choiceNative[T native](c []uint8, s seg, ix int) {
	for i := 0; i < s.n; i++ {
		c[i] = clampPick(*(*T)(s.at(ix, i)), *(*T)(s.at(ix+1, i)), *(*T)(s.at(ix+2, i)))
	}
}

func choiceHalf(c []uint8, s seg, ix int, bf bool) {
	for i := 0; i < s.n; i++ {
		c[i] = clampPick(widenHalf(*(*uint16)(s.at(ix, i)), bf), widenHalf(*(*uint16)(s.at(ix+1, i)), bf),
			widenHalf(*(*uint16)(s.at(ix+2, i)), bf))
	}
}

func choiceFor(dt dtype.Dtype) choiceFunc {
	switch dt {
	case dtype.Bool, dtype.Uint8:
		return choiceNative[uint8]
	case dtype.Int8:
		return choiceNative[int8]
	case dtype.Int16:
		return choiceNative[int16]
	case dtype.Int32:
		return choiceNative[int32]
	case dtype.Int64:
		return choiceNative[int64]
	case dtype.Float32:
		return choiceNative[float32]
	case dtype.Float64:
		return choiceNative[float64]
	case dtype.Float16:
		return func(c []uint8, s seg, ix int) { choiceHalf(c, s, ix, false) }
	case dtype.BFloat16:
		return func(c []uint8, s seg, ix int) { choiceHalf(c, s, ix, true) }
	}
	return nil
}

// pickBits writes operand first+c[i]'s bits into operand io.
func pickBits[B rawBits](c []uint8, s seg, io, first int) {
	for i := 0; i < s.n; i++ {
		*(*B)(s.at(io, i)) = *(*B)(s.at(first+int(c[i]), i))
	}
}

// routeBits3 writes g (operand 6) into operand c[i] of 0..2 and zero into
// the other two.
func routeBits3[B rawBits](c []uint8, s seg) {
	for i := 0; i < s.n; i++ {
		g := *(*B)(s.at(6, i))
		*(*B)(s.at(0, i)), *(*B)(s.at(1, i)), *(*B)(s.at(2, i)) = 0, 0, 0
		*(*B)(s.at(int(c[i]), i)) = g
	}
}

var choiceBufs = sync.Pool{New: func() any { return new([maxSeg]uint8) }}

// choiceKernel is a clamp kernel over nops operands: the scratch is cf's
// choice (x at operand ix), as maskedKernel's is a mask.
func choiceKernel(nops int, cf choiceFunc, ix int, fast func(seg) int, k func(c []uint8, s seg)) segFunc {
	return scratchKernel(&choiceBufs, nops, fast, func(c []uint8, s seg) { cf(c, s, ix) }, k)
}

var (
	clampKernels       [16]segFunc     // [dtype]: out, x, lo, hi
	clampRouteKernels  [16][16]segFunc // [compared dtype][gradient dtype]: gx, glo, ghi, x, lo, hi, g
	clampSelectKernels [16][16]segFunc // [compared dtype][value dtype]: out, x, lo, hi, dx, dlo, dhi
)

func init() {
	for _, cd := range dtype.All() {
		cf := choiceFor(cd)
		if cf == nil {
			continue
		}
		clampKernels[cd] = buildClamp(cd, cf)
		for _, vd := range dtype.All() {
			clampRouteKernels[cd][vd] = buildClampRoute(cd, vd, cf)
			clampSelectKernels[cd][vd] = buildClampSelect(cd, vd, cf)
		}
	}
}

func pickFor(dt dtype.Dtype) func(c []uint8, s seg, io, first int) {
	switch dt.Size() {
	case 1:
		return pickBits[uint8]
	case 2:
		return pickBits[uint16]
	case 4:
		return pickBits[uint32]
	}
	return pickBits[uint64]
}

func route3For(dt dtype.Dtype) func(c []uint8, s seg) {
	switch dt.Size() {
	case 1:
		return routeBits3[uint8]
	case 2:
		return routeBits3[uint16]
	case 4:
		return routeBits3[uint32]
	}
	return routeBits3[uint64]
}

func buildClamp(dt dtype.Dtype, cf choiceFunc) segFunc {
	pick := pickFor(dt)
	var fast func(seg) int
	if sz := simdSize(dt); sz != 0 {
		fast = func(s seg) int { return simdClamp(&s, sz) }
	} else if isHalf(dt) {
		fast = func(s seg) int { return simdClampHalf(&s, dt) }
	}
	return choiceKernel(4, cf, 1, fast, func(c []uint8, s seg) { pick(c, s, 0, 1) })
}

func buildClampRoute(cd, gd dtype.Dtype, cf choiceFunc) segFunc {
	var fast func(seg) int
	if sz := simdSize(cd); sz != 0 && cd == gd {
		fast = func(s seg) int { return simdClampRoute(&s, sz) }
	} else if isHalf(cd) && cd == gd {
		fast = func(s seg) int { return simdClampRouteHalf(&s, cd) }
	}
	return choiceKernel(7, cf, 3, fast, route3For(gd))
}

func buildClampSelect(cd, vd dtype.Dtype, cf choiceFunc) segFunc {
	pick := pickFor(vd)
	var fast func(seg) int
	if sz := simdSize(cd); sz != 0 && cd == vd {
		fast = func(s seg) int { return simdClampSelect(&s, sz) }
	} else if isHalf(cd) && cd == vd {
		fast = func(s seg) int { return simdClampSelectHalf(&s, cd) }
	}
	return choiceKernel(7, cf, 1, fast, func(c []uint8, s seg) { pick(c, s, 0, 4) })
}

// clampKernel checks what the clamp kernels share — x, lo, hi and the
// outputs or values vs of one shape; x, lo, hi of one dtype; vs of one
// dtype — and returns the kernel from table for it.
func clampKernel(table *[16][16]segFunc, x, lo, hi *tensor.Tensor, vs ...*tensor.Tensor) (segFunc, error) {
	if err := backend.CheckSameShape(vs[0], x, lo, hi); err != nil {
		return nil, err
	}
	if err := backend.CheckSameShape(vs[0], vs[1:]...); err != nil {
		return nil, err
	}
	if err := backend.CheckSameDtype(x, lo, hi); err != nil {
		return nil, err
	}
	if err := backend.CheckSameDtype(vs...); err != nil {
		return nil, err
	}
	var k segFunc
	if x.Dtype().Valid() && vs[0].Dtype().Valid() {
		k = table[x.Dtype()][vs[0].Dtype()]
	}
	if k == nil {
		return nil, fmt.Errorf("unsupported dtype %v", x.Dtype())
	}
	return k, nil
}

// Clamp implements backend.IBackend.
func (b *Backend) Clamp(out, x, lo, hi *tensor.Tensor) error {
	if err := backend.CheckSameShape(out, x, lo, hi); err != nil {
		return err
	}
	if err := backend.CheckSameDtype(out, x, lo, hi); err != nil {
		return err
	}
	var k segFunc
	if dt := out.Dtype(); dt.Valid() {
		k = clampKernels[dt]
	}
	if k == nil {
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	b.elementwise(k, out, x, lo, hi)
	return nil
}

// ClampRoute implements backend.IBackend.
func (b *Backend) ClampRoute(gx, glo, ghi, x, lo, hi, g *tensor.Tensor) error {
	k, err := clampKernel(&clampRouteKernels, x, lo, hi, g, gx, glo, ghi)
	if err != nil {
		return err
	}
	b.elementwise(k, gx, glo, ghi, x, lo, hi, g)
	return nil
}

// ClampSelect implements backend.IBackend.
func (b *Backend) ClampSelect(out, x, lo, hi, dx, dlo, dhi *tensor.Tensor) error {
	k, err := clampKernel(&clampSelectKernels, x, lo, hi, out, dx, dlo, dhi)
	if err != nil {
		return err
	}
	b.elementwise(k, out, x, lo, hi, dx, dlo, dhi)
	return nil
}
