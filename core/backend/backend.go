// Package backend defines IBackend, the small set of kernels every compute
// backend provides, the optional capabilities a backend may add (Selector,
// Reducer, Clamper: the min/max family's own kernels, found by type
// assertion as gonum finds a matrix's optional methods), the selection Rule
// they share, and a registry of backends by name with a default. A backend
// without a capability still runs every op: core/ops composes clamp from
// the selections, and takes the reference kernels (core/backend/ref) for the
// others.
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
//   - Selection (minimum/maximum forward, Route, Select) follows a Rule and
//     the selection rule of docs/semantics.md: for RuleMin a wins at i iff
//     a_i <= b_i or a_i is NaN (RuleMax: >=), and the result is the winner's
//     bits, NaN payload and the sign of zero included.
//   - Sum uses one fixed order (see SumBlock and SumLanes), so every backend
//     and every thread count gives bit-identical results.
//
// # Outputs given by the caller (out=)
//
// The contract above is today's; an out= argument will widen it without
// changing any kernel's signature. An output may then be a caller-provided
// tensor with any strides except zero strides (no two output elements share
// memory), and it may be identical to an input: the same storage, offset,
// shape and strides (an in-place update such as minimum(a, b, out=a)). It is
// never a partial overlap (the same memory reached with another layout, or
// overlapping ranges). What kernels must then guarantee: every elementwise
// kernel reads all input elements at index i before it writes output element
// i, and writes no output element other than i while computing i, so an
// identical input and output give the same result as fresh memory; Route and
// Select read a_i, b_i and the value operands at i before writing any output
// at i; reductions (Sum) never alias (their output has another shape). What
// the ops layer checks before calling a kernel: the output's shape is the
// broadcast result shape and its dtype is the result dtype (no implicit
// cast); the output has no zero strides; every input either is identical to
// the output or shares no memory with it (tensor storage and byte ranges),
// else an errs.Value error; and an output that requires grad, or a leaf that
// requires grad used in place, is refused as autograd demands. Kernels may
// keep their contiguous fast paths: a strided output goes through the
// iteration plan like a strided input.
//
// Errors: kernels return an error (never panic) for a dtype, op or rule they
// do not support; shape mismatches are the caller's contract and are also
// reported.
package backend

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// BinaryOp names an elementwise binary kernel.
type BinaryOp uint8

// The binary ops. Backends find each op's kernel in a table indexed by the
// op (binaryOps below says what each one is), never by the order of these
// constants.
const (
	Add BinaryOp = iota
	Sub
	Mul
	Div
	Minimum
	Maximum
	FMin // NumPy's fmin: RuleFMin
	FMax // NumPy's fmax: RuleFMax

	// NumBinaryOps is the number of binary ops: valid ops are 0 .. NumBinaryOps-1.
	NumBinaryOps
)

// binaryOps describes each binary op: its name and, for a selection, its
// rule; floatOnly ops (Div) have no integer kernel.
var binaryOps = [NumBinaryOps]struct {
	name      string
	selects   bool
	rule      Rule
	floatOnly bool
}{
	Add:     {name: "add"},
	Sub:     {name: "sub"},
	Mul:     {name: "mul"},
	Div:     {name: "div", floatOnly: true},
	Minimum: {name: "minimum", selects: true, rule: RuleMin},
	Maximum: {name: "maximum", selects: true, rule: RuleMax},
	FMin:    {name: "fmin", selects: true, rule: RuleFMin},
	FMax:    {name: "fmax", selects: true, rule: RuleFMax},
}

// Valid reports whether o is one of the binary ops.
func (o BinaryOp) Valid() bool { return o < NumBinaryOps }

// String returns the op's name ("add", "minimum", …).
func (o BinaryOp) String() string {
	if o.Valid() {
		return binaryOps[o].name
	}
	return fmt.Sprintf("BinaryOp(%d)", uint8(o))
}

// Rule returns the selection rule of a selecting op (Minimum: RuleMin,
// Maximum: RuleMax, FMin, FMax) and whether the op selects at all.
func (o BinaryOp) Rule() (Rule, bool) {
	if !o.Valid() || !binaryOps[o].selects {
		return 0, false
	}
	return binaryOps[o].rule, true
}

// FloatOnly reports whether the op has kernels for floating dtypes only
// (true division).
func (o BinaryOp) FloatOnly() bool { return o.Valid() && binaryOps[o].floatOnly }

// Rule is a selection rule: which of two values a selection keeps, as a
// comparison direction and a NaN policy (docs/semantics.md). "a wins" over
// b when
//
//	RuleMin:  a <= b or a is NaN   (minimum: NaN propagates)
//	RuleMax:  a >= b or a is NaN   (maximum)
//	RuleFMin: a <= b or b is NaN   (NumPy's fmin: NaN is ignored)
//	RuleFMax: a >= b or b is NaN   (NumPy's fmax)
//
// so ties (±0 included) go to a, and two NaNs give a under every rule. The
// winner's bits are the result. A running fold (amin, amax, argmin,
// argmax) applies the same rule with a the value kept so far and b the
// next element: the kept value stays iff it wins.
//
// The value is two bits, so a backend can decode it once outside its loops:
// bit 0 is the direction (set: greater wins), bit 1 the NaN policy (set: a
// NaN loses to a number).
type Rule uint8

// The selection rules.
const (
	RuleMin  Rule = 0
	RuleMax  Rule = ruleGreater
	RuleFMin Rule = ruleIgnoreNaN
	RuleFMax Rule = ruleGreater | ruleIgnoreNaN

	// NumRules is the number of rules: valid rules are 0 .. NumRules-1.
	NumRules = 4
)

const (
	ruleGreater   = 1 << 0
	ruleIgnoreNaN = 1 << 1
)

var ruleNames = [NumRules]string{"min", "max", "fmin", "fmax"}

// Valid reports whether r is one of the rules.
func (r Rule) Valid() bool { return r < NumRules }

// Greater reports whether the greater value wins (max, fmax).
func (r Rule) Greater() bool { return r&ruleGreater != 0 }

// IgnoresNaN reports whether a NaN loses to a number (fmin, fmax) rather
// than winning over it (min, max).
func (r Rule) IgnoresNaN() bool { return r&ruleIgnoreNaN != 0 }

// String returns the rule's name ("min", "fmax", …).
func (r Rule) String() string {
	if r.Valid() {
		return ruleNames[r]
	}
	return fmt.Sprintf("Rule(%d)", uint8(r))
}

// CheckRule returns an error unless r is a valid rule.
func CheckRule(r Rule) error {
	if !r.Valid() {
		return fmt.Errorf("selection needs a valid rule (min, max, fmin, fmax), got %v", r)
	}
	return nil
}

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

// IBackend is a compute backend: the kernels every backend has.
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
}

// Selector is an optional capability: the two halves of a selection's
// gradient (minimum, maximum, fmin, fmax), adjoint to each other.
type Selector interface {
	// Route splits g between the operands of a selection: ga gets g where a
	// wins by rule r and +0 elsewhere, gb the rest. a, b share a dtype; g,
	// ga, gb share another.
	Route(r Rule, ga, gb, a, b, g *tensor.Tensor) error
	// Select writes x where a wins by rule r and y elsewhere into out.
	Select(r Rule, out, a, b, x, y *tensor.Tensor) error
}

// Reducer is an optional capability: the reductions of the min/max family
// (amin, amax, argmin, argmax, min/max over dims, the NaN-ignoring nanmin
// and friends) and their gradients. Their layout is Sum's: idx, vals and g
// have a's shape with every reduced dim set to 1 (keepdim), and a slice is
// the elements of a that reduce into one output, taken in row-major order
// of the reduced dims. A position is an element's index in its slice (0 ..
// slice size - 1): for a reduction over every dim, the flat row-major
// index.
type Reducer interface {
	// ArgReduce folds each slice of a by rule r: the running winner w keeps
	// its place against the next element x_k iff w wins over x_k by r (so
	// the first NaN of the slice under RuleMin/RuleMax, else the first
	// smallest (largest) element; of -0.0 and +0.0 the first). idx (int64)
	// gets the winner's position; vals, unless nil, its bits (a's dtype).
	// idx may be nil when vals is not: then only the values are written
	// (the same bits), which lets a backend skip the positions' work.
	// Slices are never empty (the caller checks). The result is this fold's
	// whatever the blocking or thread count.
	ArgReduce(r Rule, vals, idx, a *tensor.Tensor) error
	// Scatter writes g at each slice's position idx and +0 at every other
	// position into out, which has the reduced tensor's shape and g's
	// dtype.
	Scatter(out, g, idx *tensor.Tensor) error
	// Gather writes the element at each slice's position idx of x (the
	// reduced tensor's shape) into out (g's layout, x's dtype). It is
	// Scatter's transpose.
	Gather(out, x, idx *tensor.Tensor) error
}

// Clamper is an optional capability: clamp's fused kernels. clamp(x, lo,
// hi) is minimum(maximum(x, lo), hi), i.e. RuleMax between x and lo, then
// RuleMin between that winner and hi, so exactly one of x, lo, hi wins at
// each element. All operands are broadcast to one shape; x, lo, hi share
// one dtype. Without it, core/ops runs that composition (Binary, Route and
// Select), which gives the same bits.
type Clamper interface {
	// Clamp writes the winner's bits into out (x's dtype).
	Clamp(out, x, lo, hi *tensor.Tensor) error
	// ClampRoute writes g into the winner's gradient (gx, glo or ghi) and
	// +0 into the other two (g's dtype).
	ClampRoute(gx, glo, ghi, x, lo, hi, g *tensor.Tensor) error
	// ClampSelect writes the winner's value operand (dx, dlo or dhi) into
	// out (their dtype): ClampRoute's transpose.
	ClampSelect(out, x, lo, hi, dx, dlo, dhi *tensor.Tensor) error
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

// InterruptibleArgReduce is Interruptible for ArgReduce: a selecting
// reduction (amin, amax, argmin, argmax, min, max) over a broadcast view
// can be as long as a sum.
type InterruptibleArgReduce interface {
	// ArgReduceUntil is ArgReduce that checks done as SumUntil does and,
	// once it is closed, stops early and returns ErrInterrupted (vals and
	// idx then hold garbage). Results that are not interrupted are
	// ArgReduce's, bit for bit.
	ArgReduceUntil(r Rule, vals, idx, a *tensor.Tensor, done <-chan struct{}) error
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
	fallback atomic.Value // holder: read on every call that names no backend
)

type holder struct{ b IBackend }

// Register adds a backend under its name, replacing any earlier one.
func Register(b IBackend) {
	mu.Lock()
	defer mu.Unlock()
	registry[b.Name()] = b
}

// SetDefault registers b and makes it the backend that callers without a
// backend of their own use (package cpu does so when it is linked in).
func SetDefault(b IBackend) {
	mu.Lock()
	defer mu.Unlock()
	registry[b.Name()] = b
	fallback.Store(holder{b})
}

// Default returns the default backend (see SetDefault), nil when none is
// set.
func Default() IBackend {
	h, _ := fallback.Load().(holder)
	return h.b
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

// Arith is the arithmetic op (Add, Sub, Mul, Div) applied to x and y in T:
// the one statement of it the backends' element-by-element paths share
// (Div is FloatOnly: an integer T never gets it). Other ops give 0.
func Arith[T ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64](
	op BinaryOp, x, y T) T {
	switch op {
	case Add:
		return x + y
	case Sub:
		return x - y
	case Mul:
		return x * y
	case Div:
		return x / y
	}
	return 0
}

// CheckUnary is CheckBinary for a unary op (Neg): the checks every
// backend's Unary makes first.
func CheckUnary(op UnaryOp, out, a *tensor.Tensor) error {
	if err := CheckSameShape(out, a); err != nil {
		return err
	}
	if err := CheckSameDtype(out, a); err != nil {
		return err
	}
	if op != Neg {
		return fmt.Errorf("unknown unary op %v", op)
	}
	return nil
}

// CheckBinary returns an error unless op is a binary op and out, a and b
// have one shape and one dtype, a floating one for a FloatOnly op: the
// checks every backend's Binary makes first.
func CheckBinary(op BinaryOp, out, a, b *tensor.Tensor) error {
	if err := CheckSameShape(out, a, b); err != nil {
		return err
	}
	if err := CheckSameDtype(out, a, b); err != nil {
		return err
	}
	switch dt := out.Dtype(); {
	case !op.Valid():
		return fmt.Errorf("unknown binary op %v", op)
	case op.FloatOnly() && !dt.IsFloat():
		return fmt.Errorf("%v kernel needs a floating dtype, got %v", op, dt)
	}
	return nil
}

// CheckScatter returns an error unless reduced is a keepdim reduction of
// full in full's dtype: the shapes of Scatter (full out, reduced g) and
// Gather (full x, reduced out).
func CheckScatter(full, reduced *tensor.Tensor) error {
	if err := CheckSumShape(reduced, full); err != nil {
		return err
	}
	return CheckSameDtype(full, reduced)
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

// CheckArgReduce returns an error unless ArgReduce's operands fit its
// contract: a valid rule, idx an int64 keepdim reduction of a, vals (unless
// nil) of idx's shape and a's dtype, and no empty slice.
func CheckArgReduce(r Rule, vals, idx, a *tensor.Tensor) error {
	if err := CheckRule(r); err != nil {
		return err
	}
	keep := idx
	if idx == nil {
		if vals == nil {
			return fmt.Errorf("argreduce needs an index or a value output")
		}
		keep = vals
	} else if idx.Dtype() != dtype.Int64 {
		return fmt.Errorf("argreduce index output must be int64, got %v", idx.Dtype())
	}
	if err := CheckSumShape(keep, a); err != nil {
		return err
	}
	if vals != nil {
		if err := CheckSameShape(keep, vals); err != nil {
			return err
		}
		if err := CheckSameDtype(a, vals); err != nil {
			return err
		}
	}
	if keep.Numel() > 0 && a.Numel() == 0 {
		return fmt.Errorf("argreduce over an empty slice")
	}
	return nil
}
