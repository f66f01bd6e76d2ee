// Package backend defines IBackend, the small set of kernels every compute
// backend provides, and a registry of backends by name.
//
// Conventions every backend follows (and core/ops relies on):
//   - Outputs are fresh, contiguous tensors allocated by the caller, possibly
//     uninitialised (tensor.Empty): every kernel writes every output element.
//     Kernels never write into an input. Inputs may have any strides: zero
//     (broadcast), negative (reversed) or permuted.
//   - Binary, Route and Select receive inputs already broadcast to the output
//     shape. Binary's inputs and output share one dtype; Cast converts.
//   - Floating arithmetic is correctly rounded in the output dtype (float16
//     and bfloat16 compute in float32, which rounds identically); integers
//     wrap around; bool add is "or", bool mul is "and".
//   - Minimum/maximum follow SPEC §1: a wins at i iff a_i <= b_i (>= for
//     maximum) or a_i is NaN, and the result is the winner's bits.
//   - Sum uses one fixed order (see SumBlock and SumLanes), so every backend
//     and every thread count gives bit-identical results.
//
// Errors: kernels return an error (never panic) for a dtype or op they do not
// support; shape mismatches are the caller's contract and are also reported.
package backend

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/pylucid/pylucid/core/tensor"
)

// BinaryOp names an elementwise binary kernel.
type BinaryOp uint8

// The binary ops.
const (
	Add BinaryOp = iota
	Sub
	Mul
	Div
	Minimum
	Maximum
)

var binaryNames = [...]string{"add", "sub", "mul", "div", "minimum", "maximum"}

// String returns the op's name ("add", "minimum", …).
func (o BinaryOp) String() string {
	if int(o) < len(binaryNames) {
		return binaryNames[o]
	}
	return fmt.Sprintf("BinaryOp(%d)", uint8(o))
}

// IsMinMax reports whether the op is Minimum or Maximum.
func (o BinaryOp) IsMinMax() bool { return o == Minimum || o == Maximum }

// UnaryOp names an elementwise unary kernel.
type UnaryOp uint8

// The unary ops.
const (
	Neg UnaryOp = iota
)

// String returns the op's name ("neg").
func (o UnaryOp) String() string {
	if o == Neg {
		return "neg"
	}
	return fmt.Sprintf("UnaryOp(%d)", uint8(o))
}

// The canonical summation order: the elements reduced into one output, taken
// in row-major order of the reduced dims, are cut into blocks of SumBlock;
// inside a block element k is added to lane k mod SumLanes, lanes start at
// -0.0 and are combined as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)); block values
// are added left to right to a total that starts at -0.0. Accumulation is in
// dtype.AccumulateDtype of the input; the total is then rounded to the
// output's dtype.
const (
	SumBlock = 1024
	SumLanes = 8
)

// IBackend is a compute backend.
type IBackend interface {
	// Name identifies the backend in the registry ("cpu", "ref").
	Name() string
	// Binary writes op(a, b) into out.
	Binary(op BinaryOp, out, a, b *tensor.Tensor) error
	// Unary writes op(a) into out.
	Unary(op UnaryOp, out, a *tensor.Tensor) error
	// Cast converts a into out's dtype (same shape).
	Cast(out, a *tensor.Tensor) error
	// Sum reduces a into out, whose shape is a's with every reduced dim set
	// to 1 (keepdim layout), in the canonical order.
	Sum(out, a *tensor.Tensor) error
	// Route splits g between the operands of a minimum/maximum: ga gets g
	// where a wins and +0 elsewhere, gb the rest. a, b share a dtype; g, ga, gb
	// share another.
	Route(op BinaryOp, ga, gb, a, b, g *tensor.Tensor) error
	// Select writes x where a wins (for op) and y elsewhere into out.
	Select(op BinaryOp, out, a, b, x, y *tensor.Tensor) error
}

// Threaded is an optional capability: a backend whose kernels use goroutines.
type Threaded interface {
	SetThreads(n int)
	Threads() int
}

// Interruptible is an optional capability: a backend whose Sum can stop part
// way through. The time a sum takes follows from its input's element count,
// which a broadcast view makes as large as it likes (2**44 elements need no
// memory), so a caller that may want to give up (Ctrl-C in a host language)
// passes a done channel.
type Interruptible interface {
	// SumUntil is Sum that checks done between pieces of work (well under a
	// millisecond of work apart, on each goroutine) and, once done is
	// closed, stops early and returns ErrInterrupted, out then holding
	// garbage. A nil done never closes. Results that are not interrupted are
	// Sum's, bit for bit.
	SumUntil(out, a *tensor.Tensor, done <-chan struct{}) error
}

// ErrInterrupted is the error of a kernel stopped by its done channel.
var ErrInterrupted = errors.New("interrupted")

// Stopped reports whether done is closed (never, for a nil done).
func Stopped(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

var (
	mu       sync.RWMutex
	registry = map[string]IBackend{}
)

// Register adds a backend under its name, replacing any earlier one.
func Register(b IBackend) {
	mu.Lock()
	defer mu.Unlock()
	registry[b.Name()] = b
}

// Get returns the backend registered under name.
func Get(name string) (IBackend, error) {
	mu.RLock()
	defer mu.RUnlock()
	if b, ok := registry[name]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("unknown backend %q (have %v)", name, namesLocked())
}

// Names lists the registered backends, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return namesLocked()
}

func namesLocked() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// CheckSameShape returns an error unless every tensor has out's shape.
func CheckSameShape(out *tensor.Tensor, ins ...*tensor.Tensor) error {
	for _, t := range ins {
		if !tensor.SameShape(out.ShapeRef(), t.ShapeRef()) {
			return fmt.Errorf("kernel operand shape %v does not match output shape %v", t.Shape(), out.Shape())
		}
	}
	return nil
}

// CheckSameDtype returns an error unless every tensor has the first one's dtype.
func CheckSameDtype(ts ...*tensor.Tensor) error {
	for _, t := range ts[1:] {
		if t.Dtype() != ts[0].Dtype() {
			return fmt.Errorf("kernel operand dtype %v does not match %v", t.Dtype(), ts[0].Dtype())
		}
	}
	return nil
}

// CheckSumShape returns an error unless out is a keepdim reduction of a.
func CheckSumShape(out, a *tensor.Tensor) error {
	if out.Ndim() != a.Ndim() {
		return fmt.Errorf("sum output shape %v is not a keepdim reduction of %v", out.Shape(), a.Shape())
	}
	for i := 0; i < a.Ndim(); i++ {
		if d := out.Dim(i); d != a.Dim(i) && d != 1 {
			return fmt.Errorf("sum output shape %v is not a keepdim reduction of %v", out.Shape(), a.Shape())
		}
	}
	return nil
}

// ReducedDims returns the dims Sum reduces: those where out is 1 and a is not.
// Dims where both are 1 count as kept.
func ReducedDims(out, a *tensor.Tensor) []bool {
	red := make([]bool, a.Ndim())
	for i := range red {
		red[i] = out.Dim(i) == 1 && a.Dim(i) != 1
	}
	return red
}
