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
// Inputs may have any dtype, strides and broadcastable shapes. Results are
// fresh contiguous tensors that never alias an input.
//
// # The trampoline
//
// Apply-time work common to all ops happens in one place, in this order:
// type promotion (SPEC §3, wrapped numbers are weak), autocast by the op's
// AmpPolicy, casting inputs to the result dtype, NumPy broadcasting, backend
// dispatch, and, when the context records gradients and an input requires
// grad, creating the node. On backward the node runs the op's grad formula,
// then reduces each gradient to its input's shape (SumToShape) and casts it
// to its input's dtype. Ops therefore state only their forward dispatch and
// their formula (see minimum.go).
//
// # Minimum and maximum
//
// Minimum(a, b) selects a at i iff a_i <= b_i or a_i is NaN (Maximum: >=),
// taking the winner's bits. The gradient goes to the winner: ties and NaN in
// a go to a. The masks come from the saved inputs and partition every index.
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
	"github.com/pylucid/pylucid/core/backend/cpu"
	_ "github.com/pylucid/pylucid/core/backend/ref" // registers "ref"
)

// OpSchema describes an op: its name, version, AMP policy and whether it is
// deterministic (bit-identical results for any thread count).
type OpSchema struct {
	Name          string
	Version       int
	AmpPolicy     amp.Policy
	Deterministic bool
}

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

// Default returns the default context: the cpu backend, gradients recorded,
// autocast off.
func Default() *Context { return &Context{Backend: cpu.Default, GradEnabled: true} }

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
		d.Backend = cpu.Default
		return &d
	}
	return c
}
