// Package ops holds pylucid's operators: the OpSchema registry, the apply
// trampoline every differentiable op goes through, and the ops themselves.
//
// # Calling an op
//
// Every op takes a *Context first (nil means Default: the "cpu" backend,
// gradients recorded, autocast off) and returns a new tensor and an error:
//
//	y, err := ops.Minimum(nil, a, b)
//
// Inputs may have any dtype, strides and broadcastable shapes. The results of
// the arithmetic ops and reductions are fresh tensors that never alias an
// input (Cast to the input's own dtype returns the input, and Reshape and
// Expand may return views of it).
//
// The ops: Add, Sub, Mul, Div, Minimum, Maximum (broadcasting binary ops);
// Neg; Sum and Mean (reductions over dims, nil for all); Cast, Expand,
// Reshape and SumToShape (dtype and shape plumbing, all differentiable).
//
// # Dtypes and promotion
//
// The result dtype of a binary op follows SPEC §3 (package dtype): bool <
// integers < floats; within a category the wider type wins; float16 with
// bfloat16 gives float32; an integer with a float gives that float. A tensor
// marked as a wrapped number (tensor.WrappedScalar, a host-language scalar)
// is weak: it only lifts the result to a higher category, so
// Minimum(float16 tensor, wrapped 2.0) stays float16 and Minimum(int32
// tensor, wrapped 2.5) gives dtype.Default (float32). Div of integers gives
// dtype.Default. Sum of integers and bools gives int64; float16 and bfloat16
// reductions accumulate in float32.
//
// # Autocast
//
// Context.Autocast (see package amp) switches on mixed precision for one
// call. Each op's schema carries an amp.Policy that decides how its floating
// inputs are cast before promotion: Promote (every op in this package) casts
// them to the widest floating dtype among them, which never produces float64
// unless an input is float64; LowerPrecision casts them (float64 excepted)
// to the autocast dtype; FP32 to float32. With autocast off the policies have
// no effect. Gradients always come back in each input's own dtype.
//
//	st, _ := amp.NewState(dtype.Float16)
//	y, err := ops.Minimum(&ops.Context{GradEnabled: true, Autocast: st}, a16, b32) // float32
//
// # The trampoline
//
// Apply-time work common to all ops happens in one place, in this order:
// type promotion (wrapped numbers are weak), autocast by the op's AmpPolicy,
// casting inputs to the result dtype, NumPy broadcasting, backend dispatch,
// and, when the context records gradients and an input requires grad,
// creating the node. On backward the node runs the op's grad formula, then
// reduces each gradient to its input's shape (SumToShape) and casts it to its
// input's dtype. Ops therefore state only their forward dispatch and their
// formula (see minimum.go).
//
// # Minimum and maximum
//
// Minimum(a, b) selects a at i iff a_i <= b_i or a_i is NaN (Maximum: >=),
// taking the winner's bits. The gradient goes to the winner: ties and NaN in
// a go to a. The masks come from the saved inputs and partition every index,
// so grad_a + grad_b == grad_out everywhere. PyTorch splits ties 50/50 and
// gives NaN positions the full gradient on both sides; JAX splits ties and
// gives NaN positions 0. Higher-order gradients (create_graph) work: the
// masks are constants of every pass.
//
// # Schemas
//
// Every op registers one OpSchema (name, version, AMP policy, determinism)
// with Register at init; Lookup and Schemas read the registry, which the C
// ABI exports to Python as JSON (pylucid.ops.schemas()).
//
// # Autograd
//
// Tensors that require grad (tensor.Tensor.SetRequiresGrad) record nodes as
// ops run. Backward accumulates gradients into the leaves' Grad; Grad returns
// the gradients of outputs with respect to chosen inputs without touching any
// Grad. Hosts that drive the engine step by step (the C ABI, for nodes
// defined in Python) call autograd.Start with EngineMath. Gradient reductions
// are deterministic: the same inputs give the same bits for any thread count.
//
// # Errors
//
// Errors are classified with package errs: shapes that do not broadcast,
// bad dims and sizes are Value errors (naming the shapes); unsupported dtypes
// are Type errors; a second backward through a freed graph and other
// failures are Runtime errors. Ops never panic on bad input.
package ops

import (
	"fmt"
	"sort"
	"sync"

	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/backend"
	_ "github.com/pylucid/pylucid/core/backend/cpu" // registers "cpu", the default backend
	_ "github.com/pylucid/pylucid/core/backend/ref" // registers "ref"
)

// OpSchema describes an op: its name, version, AMP policy and whether it is
// deterministic (bit-identical results for any thread count).
type OpSchema struct {
	Name          string     // the op's name, e.g. "minimum"
	Version       int        // bumped when the op's semantics change
	AmpPolicy     amp.Policy // how autocast casts the op's floating inputs
	Deterministic bool       // bit-identical results whatever the thread count
}

// String formats the schema as OpSchema("minimum", v1, Promote, deterministic=true).
func (s OpSchema) String() string {
	return fmt.Sprintf("OpSchema(%q, v%d, %v, deterministic=%v)", s.Name, s.Version, s.AmpPolicy, s.Deterministic)
}

var (
	schemaMu sync.RWMutex
	schemas  = map[string]OpSchema{}
)

// Register adds an op schema; it returns the schema so ops can write
// `var minimumSchema = ops.Register(...)`. Registering a name twice panics
// at init time (a programming error, not user input).
func Register(s OpSchema) OpSchema {
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if _, dup := schemas[s.Name]; dup {
		panic("ops: schema registered twice: " + s.Name)
	}
	schemas[s.Name] = s
	return s
}

// Lookup returns the schema registered under name.
func Lookup(name string) (OpSchema, bool) {
	schemaMu.RLock()
	defer schemaMu.RUnlock()
	s, ok := schemas[name]
	return s, ok
}

// Schemas returns every registered schema, sorted by name.
func Schemas() []OpSchema {
	schemaMu.RLock()
	defer schemaMu.RUnlock()
	out := make([]OpSchema, 0, len(schemas))
	for _, s := range schemas {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Context is the state one op call runs under. It is a plain value: hosts
// keep one per thread (grad mode and autocast are thread-local in Python).
type Context struct {
	Backend     backend.IBackend
	GradEnabled bool
	Autocast    amp.State
}

// Default returns the default context: the default backend
// (backend.Default, "cpu"), gradients recorded, autocast off.
func Default() *Context { return &Context{Backend: backend.Default(), GradEnabled: true} }

// NoGrad returns a copy of c that records nothing.
func (c *Context) NoGrad() *Context {
	d := *c
	d.GradEnabled = false
	return &d
}

// WithGrad returns a copy of c with grad recording set to on.
func (c *Context) WithGrad(on bool) *Context {
	d := *c
	d.GradEnabled = on
	return &d
}

func ctxOr(c *Context) *Context {
	if c == nil {
		return Default()
	}
	if c.Backend == nil {
		d := *c
		d.Backend = backend.Default()
		return &d
	}
	return c
}
