// Package tensor provides Storage and Tensor: a dtype, a shape, strides and an
// offset (both in elements) over a Storage, plus views, broadcasting and
// strided iteration.
//
// Conventions:
//   - Shapes are []int with every dim >= 0; a 0-d tensor has shape [] and one
//     element. Element counts and byte sizes are overflow-checked.
//   - Strides are in elements and may be zero (broadcast) or negative
//     (reversed views). Offset is in elements from the storage start.
//   - Bool elements are the bytes 0 and 1; hosts lending memory normalise
//     other bytes first (the Python layer does).
//   - Views share storage; no function here writes into a tensor's memory
//     except Set on a tensor created by New, which the caller owns.
//   - A Tensor's dtype, shape, strides and offset never change after creation.
//     Its autograd fields (requires_grad, grad, grad_fn) are managed by
//     core/autograd and are safe to use from several goroutines.
//
// Errors: every function taking user-controlled shapes, dims or indices
// returns an error (never panics) when they are out of range; broadcasting
// errors name both shapes.
package tensor

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
)

// GradNode is the part of an autograd node the tensor package needs: a name.
// core/autograd defines the full Node interface.
type GradNode interface{ Name() string }

// Tensor is a strided view of a Storage.
type Tensor struct {
	// Fields ordered so the small ones share words: an op result is one
	// allocation of the tensor and its inline dims (freshTensor), and
	// every word of it costs the allocator and the collector.
	storage *Storage
	shape   []int
	strides []int
	offset  int

	grad   *Tensor
	gradFn GradNode
	mu     sync.Mutex
	// flags holds flagRequiresGrad, written under mu with gradFn and read
	// without it (every op reads its inputs'; a lock would cost two atomic
	// updates), and flagKept (see Recycle).
	flags   atomic.Uint32
	dtype   dtype.Dtype
	wrapped bool // a Python number: "weak" in type promotion
	// fresh: the tensor is a freshTensor (soleView), which Recycle may reuse.
	fresh    bool
	wrapExp  int32 // a wrapped integer's value is its element · 2**wrapExp (see WrappedInt)
	outputNr int32 // of gradFn's outputs (an op has a handful)
}

const (
	flagRequiresGrad = 1 << iota
	// flagKept: something besides host handles may refer to this tensor
	// object (see MarkKept); it is never reused.
	flagKept
	// flagRetainsGrad: backward() stores the gradient reaching this
	// non-leaf in its grad slot (autograd.RetainGrad).
	flagRetainsGrad
)

// RetainsGrad reports whether backward() keeps t's gradient although t is
// not a leaf (set by autograd.RetainGrad).
func (t *Tensor) RetainsGrad() bool { return t.flags.Load()&flagRetainsGrad != 0 }

// SetRetainsGrad marks t as keeping its gradient (and as kept: a host
// handle is not its only reference any more).
func (t *Tensor) SetRetainsGrad() { t.flags.Or(flagRetainsGrad | flagKept) }

// Version returns the number of in-place writes into t's storage through
// the library so far (BumpVersion); views of one storage share it.
func (t *Tensor) Version() uint32 { return t.storage.version.Load() }

// BumpVersion records an in-place write into t's elements (out=, an
// in-place method), so that a node that saved a view of the same storage
// sees it changed (autograd.Saved).
func (t *Tensor) BumpVersion() { t.storage.version.Add(1) }

// MaxDims is the largest supported number of dimensions.
const MaxDims = 64

// Numel returns the number of elements of shape, or an error for a negative
// dim or a count that overflows int64.
func Numel(shape []int) (int, error) {
	// Error messages format a copy: formatting shape itself would make it
	// escape, and every caller's shape buffer with it.
	if len(shape) > MaxDims {
		return 0, errs.Valuef("shape %v has %d dims; at most %d are supported", slices.Clone(shape), len(shape), MaxDims)
	}
	n := uint64(1)
	overflow := false
	for _, d := range shape {
		if d < 0 {
			return 0, errs.Valuef("negative dimension %d in shape %v", d, slices.Clone(shape))
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			overflow = true
		}
		n = lo
	}
	for _, d := range shape {
		if d == 0 {
			return 0, nil
		}
	}
	if overflow {
		return 0, errs.Valuef("shape %v has more elements than fit in int64", slices.Clone(shape))
	}
	return int(n), nil
}

// ContiguousStrides returns the row-major strides of shape (in elements).
func ContiguousStrides(shape []int) []int {
	st := make([]int, len(shape))
	contiguousStrides(shape, st)
	return st
}

func contiguousStrides(shape, st []int) {
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		if shape[i] > 1 {
			s *= shape[i]
		}
	}
}

// New returns a zero-filled contiguous tensor.
func New(dt dtype.Dtype, shape []int) (*Tensor, error) { return alloc(dt, shape, true) }

// Empty returns a contiguous tensor whose elements are undefined: for outputs
// that a kernel writes entirely (skipping the zero-fill halves the memory
// traffic of a fresh result).
func Empty(dt dtype.Dtype, shape []int) (*Tensor, error) { return alloc(dt, shape, false) }

func alloc(dt dtype.Dtype, shape []int, zeroed bool) (*Tensor, error) {
	if !dt.Valid() {
		return nil, errs.Typef("unsupported dtype %v", dt)
	}
	n, err := Numel(shape)
	if err != nil {
		return nil, err
	}
	// n * size without a division (this runs for every op result).
	hi, nbytes := bits.Mul64(uint64(n), uint64(dt.Size()))
	if hi != 0 || nbytes > math.MaxInt64 {
		return nil, errs.Valuef("shape %v of %v needs more bytes than fit in int64", slices.Clone(shape), dt)
	}
	s, err := newStorage(int(nbytes), zeroed)
	if err != nil {
		return nil, err
	}
	// One allocation holds the tensor and (up to inlineDims dims) its shape
	// and strides. The storage stays an object of its own: views and
	// detached tensors keep it alive, and must not keep this tensor's graph.
	t := soleView(s, dt, len(shape), 0)
	copy(t.shape, shape)
	contiguousStrides(t.shape, t.strides)
	return t, nil
}

const inlineDims = 4

// soleView is a tensor over s, which nothing else uses, with room for ndim
// dims: a freshTensor, so that Recycle can reuse it as it does an op
// result (a NumPy operand is lent as one for every call that takes it).
func soleView(s *Storage, dt dtype.Dtype, ndim, offset int) *Tensor {
	f := newFreshTensor()
	var meta []int
	if ndim <= inlineDims {
		meta = f.meta[:2*ndim]
	} else {
		meta = make([]int, 2*ndim)
	}
	// Field by field: the object is zeroed, and a whole-struct literal
	// would store every field (the mutex, the nil graph fields) again.
	t := &f.t
	t.storage, t.dtype, t.shape, t.strides, t.offset, t.fresh = s, dt, meta[:ndim:ndim], meta[ndim:], offset, true
	return t
}

type freshTensor struct {
	t    Tensor
	meta [2 * inlineDims]int
}

// NewView returns a tensor over s. Every element it can address must lie
// inside the storage. It marks s shared (see Storage).
func NewView(s *Storage, dt dtype.Dtype, shape, strides []int, offset int) (*Tensor, error) {
	return viewOfStorage(s, dt, shape, strides, offset, true)
}

// NewSoleView is NewView for the first tensor over a storage just made (a
// borrowed buffer): s is not marked shared, so that, like a fresh result,
// it can go back as soon as the last handle to this tensor goes.
func NewSoleView(s *Storage, dt dtype.Dtype, shape, strides []int, offset int) (*Tensor, error) {
	return viewOfStorage(s, dt, shape, strides, offset, false)
}

func viewOfStorage(s *Storage, dt dtype.Dtype, shape, strides []int, offset int, share bool) (*Tensor, error) {
	if err := checkViewArgs(s, dt, shape, strides); err != nil {
		return nil, err
	}
	var t *Tensor
	if share {
		s.MarkShared()
		base := Tensor{storage: s, dtype: dt}
		t = base.newViewUnshared(len(shape), offset) // one allocation with the shape and strides
	} else {
		t = soleView(s, dt, len(shape), offset)
	}
	copy(t.shape, shape)
	copy(t.strides, strides)
	if err := t.checkInStorage(); err != nil {
		return nil, err
	}
	return t, nil
}

// checkViewArgs checks what every view's arguments must satisfy.
func checkViewArgs(s *Storage, dt dtype.Dtype, shape, strides []int) error {
	if !dt.Valid() {
		return errs.Typef("unsupported dtype %v", dt)
	}
	if len(strides) != len(shape) {
		return errs.Valuef("strides %v do not match shape %v", slices.Clone(strides), slices.Clone(shape))
	}
	if s == nil {
		return errs.Valuef("view (shape %v) has no storage", slices.Clone(shape))
	}
	_, err := Numel(shape)
	return err
}

// checkInStorage checks that every element t addresses lies inside its
// storage.
func (t *Tensor) checkInStorage() error {
	if n, _ := Numel(t.shape); n == 0 {
		return nil
	}
	lo, hi, err := t.span()
	if err != nil {
		return err
	}
	if s, dt := t.storage, t.dtype; lo < 0 || hi >= s.Len()/dt.Size() {
		return errs.Valuef("view (shape %v, strides %v, offset %d) reaches outside its storage of %d %v elements",
			slices.Clone(t.shape), slices.Clone(t.strides), t.offset, s.Len()/dt.Size(), dt)
	}
	return nil
}

// Lent is room for one tensor over memory borrowed for a single call (a
// framework's buffer, lent to lucid_op_lent): Lend fills it where
// NewView(BorrowStorage(data, readOnly, nil), ...) would allocate, so a
// call lends its operands without allocating. The tensor is valid until l
// is lent again: the caller keeps nothing of it past the call (a graph, a
// result), which is why only calls that record nothing may use one.
type Lent struct {
	t    Tensor
	s    Storage
	meta [2 * MaxDims]int
}

// Lend makes l's tensor a view of data, as NewView of a borrowed storage,
// and returns it.
func (l *Lent) Lend(data []byte, readOnly bool, dt dtype.Dtype, shape, strides []int, offset int) (*Tensor, error) {
	l.s = Storage{data: data, readOnly: readOnly}
	if err := checkViewArgs(&l.s, dt, shape, strides); err != nil {
		return nil, err
	}
	if len(shape) > MaxDims {
		return nil, errs.Valuef("%d dims (at most %d)", len(shape), MaxDims)
	}
	l.s.MarkShared()
	nd := len(shape)
	meta := l.meta[:2*nd]
	l.t = Tensor{storage: &l.s, dtype: dt, shape: meta[:nd:nd], strides: meta[nd:], offset: offset}
	copy(l.t.shape, shape)
	copy(l.t.strides, strides)
	if err := l.t.checkInStorage(); err != nil {
		return nil, err
	}
	return &l.t, nil
}

// span returns the lowest and highest element offsets the view addresses.
func (t *Tensor) span() (lo, hi int, err error) {
	lo, hi = t.offset, t.offset
	for i, d := range t.shape {
		s := t.strides[i]
		if d <= 1 || s == 0 {
			continue
		}
		if s == math.MinInt || abs(s) > math.MaxInt/(d-1) {
			return 0, 0, errs.Valuef("strides %v overflow for shape %v", t.strides, t.shape)
		}
		ext := (d - 1) * s
		if ext < 0 {
			if lo < math.MinInt-ext {
				return 0, 0, errs.Valuef("strides %v overflow for shape %v", t.strides, t.shape)
			}
			lo += ext
		} else {
			if hi > math.MaxInt-ext {
				return 0, 0, errs.Valuef("strides %v overflow for shape %v", t.strides, t.shape)
			}
			hi += ext
		}
	}
	return lo, hi, nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func clone(s []int) []int { return append([]int(nil), s...) }

// Dtype returns the element type.
func (t *Tensor) Dtype() dtype.Dtype { return t.dtype }

// Shape returns a copy of the shape.
func (t *Tensor) Shape() []int { return clone(t.shape) }

// ShapeRef returns the shape without copying it. Callers must not modify it
// (hot paths use it to avoid an allocation per call).
func (t *Tensor) ShapeRef() []int { return t.shape }

// StridesRef returns the strides without copying them; callers must not
// modify them.
func (t *Tensor) StridesRef() []int { return t.strides }

// Strides returns a copy of the strides (in elements).
func (t *Tensor) Strides() []int { return clone(t.strides) }

// Offset returns the offset of element [0,…,0] in elements.
func (t *Tensor) Offset() int { return t.offset }

// Storage returns the underlying storage.
func (t *Tensor) Storage() *Storage { return t.storage }

// Ndim returns the number of dimensions.
func (t *Tensor) Ndim() int { return len(t.shape) }

// Dim returns the size of dimension i.
func (t *Tensor) Dim(i int) int { return t.shape[i] }

// Numel returns the number of elements.
func (t *Tensor) Numel() int {
	n := 1
	for _, d := range t.shape {
		n *= d
	}
	return n
}

// DataPointer returns the address of element [0,…,0] (nil when empty), for
// use inside Go.
func (t *Tensor) DataPointer() unsafe.Pointer { return t.dataPointer(t.storage.Pointer()) }

// ExportDataPointer is DataPointer for an address handed to foreign code: Go
// heap memory is pinned first (Storage.PinnedPointer).
func (t *Tensor) ExportDataPointer() unsafe.Pointer { return t.dataPointer(t.storage.PinnedPointer()) }

func (t *Tensor) dataPointer(p unsafe.Pointer) unsafe.Pointer {
	if p == nil || t.Numel() == 0 {
		return nil
	}
	return unsafe.Add(p, t.offset*t.dtype.Size())
}

// FlatLayout says how t lies under a flat loop over n > 0 elements (the
// elementwise kernels' fast path): its data pointer and element stride in
// bytes, which is the dtype's size when t is contiguous with n elements and
// 0 when it is one element seen everywhere (every stride 0 or dim 1); ok is
// false for any other layout. One pass over the dims, for every op: it is
// Numel, IsContiguous and DataPointer together.
func (t *Tensor) FlatLayout(n int) (p unsafe.Pointer, stride int, ok bool) {
	count, want, contiguous, scalar := 1, 1, true, true
	for i := len(t.shape) - 1; i >= 0; i-- {
		d, st := t.shape[i], t.strides[i]
		count *= d
		if d != 1 {
			contiguous = contiguous && st == want
			scalar = scalar && st == 0
			want *= d
		}
	}
	size := t.dtype.Size()
	switch {
	case count == n && contiguous:
		stride = size
	case scalar:
	default:
		return nil, 0, false
	}
	if count == 0 || len(t.storage.data) == 0 {
		return nil, stride, true
	}
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.storage.data)), t.offset*size), stride, true
}

// IsContiguous reports whether the tensor is row-major contiguous.
func (t *Tensor) IsContiguous() bool {
	if t.Numel() == 0 {
		return true // whatever the strides, as the loop below means to say
	}
	want := 1
	for i := len(t.shape) - 1; i >= 0; i-- {
		if t.shape[i] == 1 {
			continue
		}
		if t.shape[i] == 0 {
			return true
		}
		if t.strides[i] != want {
			return false
		}
		want *= t.shape[i]
	}
	return true
}

// SameShape reports whether two shapes are equal.
func SameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// RequiresGrad reports whether gradients flow to this tensor.
func (t *Tensor) RequiresGrad() bool { return t.flags.Load()&flagRequiresGrad != 0 }

// SetRequiresGrad marks a leaf as requiring gradients. Only floating tensors
// can require gradients, and only leaves can be changed.
func (t *Tensor) SetRequiresGrad(v bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v && !t.dtype.IsFloat() {
		return errs.Typef("only floating point tensors can require gradients, got %v", t.dtype)
	}
	if t.gradFn != nil {
		return fmt.Errorf("requires_grad can only be changed on leaf tensors; use detach() for a non-leaf")
	}
	if v {
		// An AccumulateGrad node will refer to t, whatever v is later.
		t.flags.Or(flagRequiresGrad | flagKept)
	} else {
		t.flags.And(^uint32(flagRequiresGrad))
	}
	return nil
}

// GradFn returns the node that produced the tensor (nil for a leaf) and the
// index of the tensor among that node's outputs.
func (t *Tensor) GradFn() (GradNode, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gradFn, int(t.outputNr)
}

// SetGradFn records the producing node; it marks the tensor as requiring grad.
// Only core/autograd and op implementations call it. A node refers to its
// inputs, never to its outputs, so this does not keep the storage alive: an
// op result whose only handle goes is freed at once, graph or no graph
// (anything that keeps it, such as a node saving it, marks it shared).
func (t *Tensor) SetGradFn(n GradNode, outputNr int) {
	if outputNr < 0 || outputNr > math.MaxInt32 {
		panic(fmt.Sprintf("tensor: output number %d out of range", outputNr))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gradFn, t.outputNr = n, int32(outputNr)
	if n != nil {
		t.flags.Or(flagRequiresGrad | flagKept)
	} else {
		t.flags.And(^uint32(flagRequiresGrad))
	}
}

// IsLeaf reports whether the tensor was not produced by a recorded op.
func (t *Tensor) IsLeaf() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gradFn == nil
}

// Grad returns the accumulated gradient (nil if none). The gradient slot
// holds its storage like a host handle does (Storage.AddHandle): a caller
// that uses the gradient beyond a moment in which the slot may be cleared
// takes its own hold with HoldGrad.
func (t *Tensor) Grad() *Tensor {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.grad
}

// HoldGrad returns the gradient with a hold on its storage (AddHandle),
// taken under the lock, so that clearing the slot meanwhile cannot free it;
// the caller gives the hold back with Storage.ReleaseHandle.
func (t *Tensor) HoldGrad() *Tensor {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.grad != nil {
		t.grad.storage.AddHandle()
	}
	return t.grad
}

// SetGrad replaces the accumulated gradient (nil clears it). The slot holds
// the new gradient's storage and lets go of the old one's, which is freed at
// once if nothing else holds it (see Storage.ReleaseHandle).
func (t *Tensor) SetGrad(g *Tensor) {
	if g != nil {
		g.storage.AddHandle()
		t.MarkKept() // its slot refers to g: t must not be reused with it
	}
	t.mu.Lock()
	old := t.grad
	t.grad = g
	t.mu.Unlock()
	if old != nil {
		old.storage.ReleaseHandle()
	}
}

// CompareAndSwapGrad sets the gradient to new if it is still old, and
// reports whether it did. Accumulation computes new outside any lock (the
// maths may itself touch this tensor) and retries when another goroutine
// got there first. The slot's hold moves from old to new as in SetGrad.
func (t *Tensor) CompareAndSwapGrad(old, new *Tensor) bool {
	t.mu.Lock()
	if t.grad != old {
		t.mu.Unlock()
		return false
	}
	if new != nil {
		new.storage.AddHandle()
		t.MarkKept()
	}
	t.grad = new
	t.mu.Unlock()
	if old != nil {
		old.storage.ReleaseHandle()
	}
	return true
}

// WrappedScalar returns a 0-d tensor for a host-language number (a Python
// float, int or bool). Such a tensor is "weak" in type promotion, as
// PyTorch's wrapped numbers are: it never widens a tensor operand's dtype
// within a category.
func WrappedScalar(dt dtype.Dtype, v float64) (*Tensor, error) {
	t, err := Scalar(dt, v)
	if err != nil {
		return nil, err
	}
	t.wrapped = true
	return t, nil
}

// AsWrappedNumber returns a view of a 0-d tensor marked as a wrapped number
// (for integers that need all 64 bits, made with FromInt64s).
func (t *Tensor) AsWrappedNumber() (*Tensor, error) {
	if len(t.shape) != 0 {
		return nil, errs.Valuef("only 0-d tensors can be wrapped numbers, got shape %s", fmtShape(t.shape))
	}
	v := t.view(nil, nil, t.offset)
	v.wrapped = true
	return v, nil
}

// IsWrappedNumber reports whether t was made by WrappedScalar.
func (t *Tensor) IsWrappedNumber() bool { return t.wrapped }

// Alias returns a new tensor object over t's storage, shape and strides,
// outside any graph, like Detach, but without marking the storage shared:
// for callers that make sure everything using the storage holds it
// (Storage.AddHandle), as the autograd engine does for gradients it puts in
// a .grad slot.
func (t *Tensor) Alias() *Tensor {
	v := t.newViewUnshared(len(t.shape), t.offset)
	copy(v.shape, t.shape)
	copy(v.strides, t.strides)
	return v
}

// Detach returns a view of the same data that is not part of any graph.
func (t *Tensor) Detach() *Tensor {
	// A copy of the shape, not a reference: t's may live inside t's own
	// allocation, which holds t's graph.
	return t.view(t.shape, t.strides, t.offset)
}

// Aliasing says how two tensors' memory relates (see Alias).
type Aliasing uint8

// The relations Alias reports.
const (
	Disjoint  Aliasing = iota // no byte in common
	Identical                 // the same elements: address, dtype, shape and strides (one element's worth of bytes, for 0-d)
	Partial                   // some bytes in common, laid out differently
)

// Alias reports whether a and b address the same memory: by address, so
// two tensors borrowing one host buffer separately are seen to alias. An
// in-place update may write a tensor that is Identical to an input; a
// Partial overlap would read elements already overwritten.
func Alias(a, b *Tensor) (Aliasing, error) {
	if a.Numel() == 0 || b.Numel() == 0 {
		return Disjoint, nil
	}
	alo, ahi, err := a.span()
	if err != nil {
		return Partial, err
	}
	blo, bhi, err := b.span()
	if err != nil {
		return Partial, err
	}
	pa, pb := uintptr(a.storage.Pointer()), uintptr(b.storage.Pointer())
	asz, bsz := uintptr(a.dtype.Size()), uintptr(b.dtype.Size())
	aStart, aEnd := pa+uintptr(alo)*asz, pa+uintptr(ahi)*asz+asz
	bStart, bEnd := pb+uintptr(blo)*bsz, pb+uintptr(bhi)*bsz+bsz
	if aEnd <= bStart || bEnd <= aStart {
		return Disjoint, nil
	}
	if a.dtype == b.dtype && a.DataPointer() == b.DataPointer() && SameShape(a.shape, b.shape) &&
		SameShape(a.strides, b.strides) {
		return Identical, nil
	}
	return Partial, nil
}

// ReadOnly reports whether t's memory was borrowed read-only.
func (t *Tensor) ReadOnly() bool { return t.storage.ReadOnly() }
