// Sum: the reduction by addition, with fixed lanes and blocks so that
// results never depend on the thread count.

package cpu

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

type accum interface{ ~float32 | ~float64 | ~int64 }

// addLanes adds elements [i, s.n) of operand 0 (of type T) to the lanes,
// the first to lane k mod SumLanes, and returns k advanced past them.
func addLanes[T native, A accum](lanes *[backend.SumLanes]A, k int, s *seg, i int) int {
	for ; i < s.n; i++ {
		lanes[k%backend.SumLanes] += A(*(*T)(s.at(0, i)))
		k++
	}
	return k
}

// addHalf is addLanes for float16/bfloat16, widened exactly to float32.
func addHalf[A accum](lanes *[backend.SumLanes]A, k int, s *seg, i int, widen func(uint16) float32) int {
	for ; i < s.n; i++ {
		lanes[k%backend.SumLanes] += A(widen(*(*uint16)(s.at(0, i))))
		k++
	}
	return k
}

// addSeg adds the elements of segment s (operand 0, of dtype dt) to the
// summation lanes in the canonical order, element k of the block going to
// lane k mod SumLanes, and returns k advanced past them. A is dt's
// accumulation type (float32 for float32 and the half types, float64 for
// float64, int64 for the integers and bool).
func addSeg[A accum](lanes *[backend.SumLanes]A, k int, dt dtype.Dtype, s *seg) int {
	i := 0
	if s.s[0] == dt.Size() && k%backend.SumLanes == 0 { // contiguous, lanes aligned: SIMD
		switch dt {
		case dtype.Float32:
			i = simdLanes32((*[backend.SumLanes]float32)(unsafe.Pointer(lanes)), s.p[0], s.n)
		case dtype.Float64:
			i = simdLanes64((*[backend.SumLanes]float64)(unsafe.Pointer(lanes)), s.p[0], s.n)
		case dtype.Float16:
			i = simdLanesF16((*[backend.SumLanes]float32)(unsafe.Pointer(lanes)), s.p[0], s.n)
		case dtype.BFloat16:
			i = simdLanesBF16((*[backend.SumLanes]float32)(unsafe.Pointer(lanes)), s.p[0], s.n)
		}
		k += i
	}
	switch dt {
	case dtype.Float32:
		return addLanes[float32](lanes, k, s, i)
	case dtype.Float64:
		return addLanes[float64](lanes, k, s, i)
	case dtype.Float16:
		return addHalf(lanes, k, s, i, dtype.Float16ToFloat32)
	case dtype.BFloat16:
		return addHalf(lanes, k, s, i, dtype.BFloat16ToFloat32)
	case dtype.Bool, dtype.Uint8:
		return addLanes[uint8](lanes, k, s, i)
	case dtype.Int8:
		return addLanes[int8](lanes, k, s, i)
	case dtype.Int16:
		return addLanes[int16](lanes, k, s, i)
	case dtype.Int32:
		return addLanes[int32](lanes, k, s, i)
	}
	return addLanes[int64](lanes, k, s, i)
}

// blockSum sums flat indices [start, end) of it (one operand, of dtype dt)
// in the canonical lane order.
func blockSum[A accum](it *tensor.Iter, ops *operands, dt dtype.Dtype, start, end int, nz A) A {
	var lanes [backend.SumLanes]A
	for j := range lanes {
		lanes[j] = nz
	}
	k := 0
	segments(it, ops, start, end, func(s seg) { k = addSeg(&lanes, k, dt, &s) })
	return combineLanes(&lanes)
}

// combineLanes adds the lanes in the canonical tree order.
func combineLanes[A accum](l *[backend.SumLanes]A) A {
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

func storeF32(dt dtype.Dtype, p unsafe.Pointer, v float32) { tensor.StoreFloat64(dt, p, float64(v)) }
func storeF64(dt dtype.Dtype, p unsafe.Pointer, v float64) { tensor.StoreFloat64(dt, p, v) }
func storeI64(dt dtype.Dtype, p unsafe.Pointer, v int64)   { tensor.StoreInt64(dt, p, v) }

// pollBlocks is how many blocks of backend.SumBlock elements a sequential
// sum adds between two looks at its done channel (a quarter of a million
// elements: well under a millisecond).
const pollBlocks = 256

// sumAll writes the canonical sums of a into out; with a non-nil done it
// looks at done between pieces of work and returns false, leaving out partly
// written, once it is closed (backend.Interruptible).
func sumAll[A accum](b *Backend, out, a *tensor.Tensor, nz A, store func(dtype.Dtype, unsafe.Pointer, A), done <-chan struct{}) bool {
	nOut := out.Numel()
	if nOut == 0 {
		return true
	}
	n := a.Numel()
	r := 0
	if n > 0 {
		r = n / nOut
	}
	par := b.split(n)
	if !par && a.IsContiguous() && reducedLast(out, a) {
		return sumFlat(out, a, r, nz, store, done)
	}
	// Visit a's dims kept first, reduced last (Sum reduces the dims where out
	// is 1 and a is not), so each output's elements are one contiguous range
	// of the iteration in row-major order.
	var permBuf [tensor.MaxDims]int
	perm := keptFirst(&permBuf, out, a)
	var it tensor.Iter
	ops := plan(&it, perm, a)
	dt := a.Dtype()
	nb := (r + backend.SumBlock - 1) / backend.SumBlock
	// out is contiguous and fresh: write its elements in row-major order,
	// each the blocks' values added left to right.
	odt, osz, dst := out.Dtype(), out.Dtype().Size(), out.DataPointer()
	finished := true
	if par && nb > 0 {
		finished = sumParallel(b, it, ops, dt, nOut, nb, r, nz, done,
			func(o int, total A) { store(odt, unsafe.Add(dst, o*osz), total) })
	} else {
		polled := 0 // blocks added since done was last looked at
	outputs:
		for o := 0; o < nOut; o++ {
			total := nz
			if r == 0 {
				total = 0
			}
			for blk := 0; blk < nb; blk++ {
				if done != nil {
					if polled--; polled <= 0 {
						if backend.Stopped(done) {
							finished = false
							break outputs
						}
						polled = pollBlocks
					}
				}
				start := o*r + blk*backend.SumBlock
				total += blockSum(&it, &ops, dt, start, min(start+backend.SumBlock, (o+1)*r), nz)
			}
			store(odt, unsafe.Add(dst, o*osz), total)
		}
	}
	runtime.KeepAlive(a) // read through raw pointers above (see elementwise)
	runtime.KeepAlive(out)
	return finished
}

// reducedLast reports whether every reduced dim of a (out is 1, a is not)
// comes after every kept dim of size above 1.
func reducedLast(out, a *tensor.Tensor) bool {
	seen := false
	for d := 0; d < a.Ndim(); d++ {
		switch {
		case out.Dim(d) == 1 && a.Dim(d) != 1:
			seen = true
		case seen && a.Dim(d) != 1:
			return false
		}
	}
	return true
}

// sumFlat is sumAll for a contiguous a whose reduced dims come last: output
// o's r elements are the contiguous range [o*r, (o+1)*r) of a's memory.
func sumFlat[A accum](out, a *tensor.Tensor, r int, nz A, store func(dtype.Dtype, unsafe.Pointer, A), done <-chan struct{}) bool {
	dt, sz, src := a.Dtype(), a.Dtype().Size(), a.DataPointer()
	odt, osz, dst := out.Dtype(), out.Dtype().Size(), out.DataPointer()
	polled := 0 // blocks added since done was last looked at
	for o := 0; o < out.Numel(); o++ {
		total := nz
		if r == 0 {
			total = 0
		}
		for start := o * r; start < (o+1)*r; start += backend.SumBlock {
			if done != nil {
				if polled--; polled <= 0 {
					if backend.Stopped(done) {
						return false
					}
					polled = pollBlocks
				}
			}
			var lanes [backend.SumLanes]A
			for j := range lanes {
				lanes[j] = nz
			}
			var s seg
			s.p[0], s.s[0], s.n = unsafe.Add(src, start*sz), sz, min(backend.SumBlock, (o+1)*r-start)
			addSeg(&lanes, 0, dt, &s)
			total += combineLanes(&lanes)
		}
		store(odt, unsafe.Add(dst, o*osz), total)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(out)
	return true
}

// sumWindow is the most block values sumParallel holds at once: its scratch
// is bounded (at most 512 KB) whatever the number of elements reduced, which
// only follows from the input (a broadcast view of 2**44 elements needs no
// memory of its own). A variable only so that tests can make it small.
var sumWindow = 1 << 16

// sumParallel computes the block values (output o's block blk is unit
// o*nb+blk, of nOut*nb) on the backend's goroutines, in tasks of fixed size,
// one window of sumWindow units at a time, and adds each output's values
// left to right (nb > 0), handing every total to store in output order.
// With a non-nil done, every task first looks at done and skips its work
// once it is closed; then sumParallel returns false before using the window.
func sumParallel[A accum](b *Backend, it tensor.Iter, ops operands, dt dtype.Dtype, nOut, nb, r int, nz A,
	done <-chan struct{}, store func(o int, total A)) bool {
	units := nOut * nb // at most the element count: every block holds one
	partial := make([]A, min(units, sumWindow))
	const unitsPerTask = 32
	total := nz
	var w, wn int // the window: units [w, w+wn)
	task := func(t int) {
		if done != nil && backend.Stopped(done) {
			return
		}
		for u := w + t*unitsPerTask; u < min(w+wn, w+(t+1)*unitsPerTask); u++ {
			o, blk := u/nb, u%nb
			start := o*r + blk*backend.SumBlock
			partial[u-w] = blockSum(&it, &ops, dt, start, min(start+backend.SumBlock, (o+1)*r), nz)
		}
	}
	for ; w < units; w += len(partial) {
		wn = min(len(partial), units-w)
		b.parallel(min(wn*backend.SumBlock, wn*r), (wn+unitsPerTask-1)/unitsPerTask, task)
		if done != nil && backend.Stopped(done) { // closed for good: some tasks may have skipped
			return false
		}
		for u := w; u < w+wn; u++ {
			total += partial[u-w]
			if u%nb == nb-1 {
				store(u/nb, total)
				total = nz
			}
		}
	}
	return true
}

// Sum implements backend.IBackend.
func (b *Backend) Sum(out, a *tensor.Tensor) error { return b.SumUntil(out, a, nil) }

// SumUntil implements backend.Interruptible: the sequential paths look at
// done every pollBlocks blocks, the parallel one in every task (32 blocks).
func (b *Backend) SumUntil(out, a *tensor.Tensor, done <-chan struct{}) error {
	if err := backend.CheckSumShape(out, a); err != nil {
		return err
	}
	if !out.IsContiguous() {
		return fmt.Errorf("sum output must be contiguous")
	}
	nz32, nz64 := float32(math.Copysign(0, -1)), math.Copysign(0, -1)
	var finished bool
	switch dt := a.Dtype(); dt {
	case dtype.Float32, dtype.Float16, dtype.BFloat16:
		finished = sumAll(b, out, a, nz32, storeF32, done)
	case dtype.Float64:
		finished = sumAll(b, out, a, nz64, storeF64, done)
	case dtype.Bool, dtype.Uint8, dtype.Int8, dtype.Int16, dtype.Int32, dtype.Int64:
		finished = sumAll(b, out, a, int64(0), storeI64, done)
	default:
		return fmt.Errorf("unsupported dtype %v", dt)
	}
	if !finished {
		return backend.ErrInterrupted
	}
	return nil
}
