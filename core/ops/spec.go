package ops

import (
	"fmt"
	"slices"
	"sort"

	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// Kind says which trampoline runs an op.
type Kind uint8

// The kinds of op.
const (
	// Elementwise ops map one or two inputs to one output element by
	// element: binary ones promote and broadcast (applyElementwise), unary
	// ones keep the shape (applyUnary).
	Elementwise Kind = iota + 1
	// Reduction ops reduce one input over dims (applyReduction).
	Reduction
	// View ops change the shape and return a view when they can.
	View
	// Selection ops are the two halves of the minimum/maximum gradient
	// (route, select); hosts do not call them.
	Selection
)

var kindNames = [...]string{Elementwise: "elementwise", Reduction: "reduction", View: "view", Selection: "selection"}

// String returns the kind's name ("elementwise", "reduction", …).
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// OpSchema describes an op as hosts see it.
type OpSchema struct {
	Name          string     // the op's name, e.g. "minimum"
	Version       int        // bumped when the op's semantics change
	AmpPolicy     amp.Policy // how autocast casts the op's floating inputs
	Deterministic bool       // bit-identical results whatever the thread count

	ID      int      // the op's id for Call: its position in Schemas (ops sorted by name)
	Kind    Kind     // which trampoline runs it
	Arity   int      // number of tensor inputs
	Outputs int      // number of tensor outputs
	Attrs   []string // the attributes Call takes after the inputs, in order

	// What a host needs to offer the op, so that it names no op itself
	// (docs/adding-an-op.md): set in the op's record, exported with the
	// schemas (lucid_schemas).

	// Signature says how a host calls the op ("" for an internal op).
	Signature Signature
	// Node is the autograd node's name ("" when the op has none).
	Node string
	// Rule is the selection rule of a min/max family member ("min", "max",
	// "fmin", "fmax"; "" for others).
	Rule string
	// Whole names, for SigMinMax, the op that reduces every dim (min: amin).
	Whole string
	// Floating says the op takes floating inputs only.
	Floating bool
	// NumPy lists the NumPy ufuncs and functions the op is ("minimum",
	// "minimum.reduce" for a ufunc's reduction, "amin", "nanmin", ...):
	// hosts route NumPy's calls on their tensors through it.
	NumPy []string
	// Bridges lists the framework bridges that offer the op under its name
	// ("torch", "jax", "dask"), where the framework has the function.
	Bridges []string
	// Aliases are other names hosts give the op (clamp: clip).
	Aliases []string
	// Doc is the op's documentation: a summary line that states its tie and
	// NaN rule where it has one, then details.
	Doc string
	// Example is a Python doctest of the op (numpy as np and pylucid.ops
	// as ops imported): the Python docstring shows it and tests_py runs it.
	Example string
}

// Signature is how a host calls an op.
type Signature string

// The signatures.
const (
	SigBinary    Signature = "binary"    // op(a, b): broadcasting, Python numbers weak
	SigUnary     Signature = "unary"     // op(a)
	SigClamp     Signature = "clamp"     // op(x, min=None, max=None)
	SigReduction Signature = "reduction" // op(x, dim=None, keepdim=False): dim an int, a tuple, () or None
	SigArg       Signature = "arg"       // op(x, dim=None, keepdim=False): one dim or None; int64 positions
	SigMinMax    Signature = "minmax"    // op(x, dim=None, keepdim=False): Whole over None, (values, indices) over one dim
)

// String formats the schema as OpSchema("minimum", v1, Promote, deterministic=true).
func (s OpSchema) String() string {
	return fmt.Sprintf("OpSchema(%q, v%d, %v, deterministic=%v)", s.Name, s.Version, s.AmpPolicy, s.Deterministic)
}

// Saves says what an op's node keeps for its vjp.
type Saves uint8

const (
	savesNothing   Saves = iota
	savesInputs          // the inputs after promotion and casting
	savesOperands        // the compared operands a, b (route, select)
	savesPositions       // the winners' positions (the selecting reductions)
)

// toSave is what a node of s keeps for its vjp: of the (cast) inputs, or
// of what the forward computed besides its outputs (the positions).
func (s *spec) toSave(inputs []*tensor.Tensor, positions *tensor.Tensor) []*tensor.Tensor {
	switch s.saves {
	case savesInputs, savesOperands:
		return inputs
	case savesPositions:
		return []*tensor.Tensor{positions}
	}
	return nil
}

// A vjp maps the output gradients (nil: none arrived) and the saved tensors
// to one gradient per input, in any shape that sum-reduces to the input's
// shape: the node's Apply then reduces and casts each one. What else it
// needs it reads from the node (attr, inputs), so recording an op allocates
// no closure.
type vjp func(c *Context, n *node, grads, saved []*tensor.Tensor) ([]*tensor.Tensor, error)

// A jvp maps the input tangents (nil: zero) to the output tangents (nil:
// zero), for forward mode (CallJvp): k holds the call's inputs, outputs,
// attributes and what its forward left for it. An output tangent may have
// any shape that broadcasts to its output's and any floating dtype:
// CallJvp expands and casts it.
type jvp func(c *Context, k *jvpCall, tangents []*tensor.Tensor) ([]*tensor.Tensor, error)

// spec is the one record of an op: everything the trampolines, the node and
// the generic entry Call need to know about it.
type spec struct {
	OpSchema
	node string // the autograd node's name, e.g. "MinimumBackward"
	// dtype maps the (promoted) input dtype to the result dtype, or
	// rejects it with a Type error; nil keeps it.
	dtype func(dtype.Dtype) (dtype.Dtype, error)
	// The kernel: kernel for binary elementwise ops, unary for unary ones,
	// reduce for reductions.
	kernel backend.BinaryOp
	unary  func(be backend.IBackend, out, a *tensor.Tensor) error
	reduce reduceKernel
	// call runs a View op (or a unary elementwise op with attributes) for
	// Call.
	call func(c *Context, a *tensor.Tensor, attrs []int64) (*tensor.Tensor, error)
	// forward runs an op the generic trampolines do not cover (clamp, the
	// selecting reductions): the outputs, and aux, what its jvp needs
	// beyond inputs and outputs (the winners' positions).
	forward func(c *Context, s *spec, in []*tensor.Tensor, attrs []int64) (out []*tensor.Tensor, aux any, err error)
	// into, when not nil, is forward writing its one output into a given
	// tensor (out=) instead of a fresh one.
	into func(c *Context, s *spec, in []*tensor.Tensor, attrs []int64, out *tensor.Tensor) ([]*tensor.Tensor, any, error)
	// rule is the selection rule of the min/max family's members.
	rule  backend.Rule
	saves Saves
	vjp   vjp
	jvp   jvp
	// returns says what a selecting reduction returns (its winners, their
	// positions or both).
	returns extremeKind
	// check, when not nil, looks at a selecting reduction's winners before
	// they are returned (nanargmin refuses an all-NaN slice).
	check func(s *spec, x, vals, idx *tensor.Tensor) error
}

// A reduceKernel reduces a into a fresh tensor of dtype dt in the keepdim
// shape keep; count is the number of elements reduced into each output.
type reduceKernel func(c *Context, a *tensor.Tensor, keep []int, count int, dt dtype.Dtype) (*tensor.Tensor, error)

// ---- the registry ----

var (
	byName = map[string]*spec{}
	byID   []*spec // frozen in init: the specs sorted by name
)

// define registers an op's spec (at package initialisation; a name defined
// twice panics, a programming error).
func define(s *spec) *spec {
	if byID != nil {
		panic("ops: op defined after initialisation: " + s.Name)
	}
	if _, dup := byName[s.Name]; dup {
		panic("ops: op defined twice: " + s.Name)
	}
	s.OpSchema.Node = s.node
	byName[s.Name] = s
	return s
}

// init assigns the op ids: positions in name order, so they do not depend
// on the order of definition.
func init() {
	byID = make([]*spec, 0, len(byName))
	for _, s := range byName {
		byID = append(byID, s)
	}
	sort.Slice(byID, func(i, j int) bool { return byID[i].Name < byID[j].Name })
	for i, s := range byID {
		s.ID = i
	}
}

// Lookup returns the schema registered under name.
func Lookup(name string) (OpSchema, bool) {
	s, ok := byName[name]
	if !ok {
		return OpSchema{}, false
	}
	return s.OpSchema, true
}

// Schemas returns every registered schema, sorted by name (so schema i has
// ID i).
func Schemas() []OpSchema {
	out := make([]OpSchema, len(byID))
	for i, s := range byID {
		out[i] = s.OpSchema
	}
	return out
}

// Call runs the op with the given id (OpSchema.ID) on in (Arity tensors)
// with attrs (OpSchema.Attrs): the one generic entry hosts use.
//
//   - elementwise ops take no attributes (cast: the dtype code);
//   - reductions take keepdim (0 or 1), ndims, then ndims dims; ndims -1
//     reduces over all dims;
//   - view ops take the shape.
//
// Selection ops are not callable.
func Call(c *Context, id int, in []*tensor.Tensor, attrs []int64) (*tensor.Tensor, error) {
	if id < 0 || id >= len(byID) {
		return nil, errs.Valuef("unknown op id %d", id)
	}
	s := byID[id]
	if len(in) != s.Arity {
		return nil, errs.Valuef("%s takes %d inputs, got %d", s.Name, s.Arity, len(in))
	}
	if s.forward != nil {
		if s.Outputs != 1 {
			return nil, errs.Valuef("%s has %d outputs: use CallN", s.Name, s.Outputs)
		}
		// A copy of in: a function value's parameters leak, and in most
		// often lives on the caller's stack (the C API's lucid_op).
		out, _, err := s.forward(c, s, slices.Clone(in), attrs)
		if err != nil {
			return nil, err
		}
		return out[0], nil
	}
	switch {
	case s.Kind == Elementwise && s.call == nil:
		if len(attrs) != 0 {
			return nil, errs.Valuef("%s takes no attributes, got %d", s.Name, len(attrs))
		}
		if s.Arity == 2 {
			return applyElementwise(c, s, in[0], in[1])
		}
		return applyUnary(c, s, in[0], dtype.Invalid)
	case s.Kind == Reduction:
		dims, keepdim, err := reductionAttrs(s.Name, attrs)
		if err != nil {
			return nil, err
		}
		return applyReduction(c, s, in[0], dims, keepdim)
	case s.call != nil:
		return s.call(c, in[0], attrs)
	}
	return nil, errs.Valuef("%s is not callable (a part of another op's gradient)", s.Name)
}

// reductionAttrs decodes keepdim, ndims, dims... (ndims -1: all dims).
func reductionAttrs(name string, attrs []int64) (dims []int, keepdim bool, err error) {
	if len(attrs) < 2 || attrs[1] < -1 || attrs[1] != int64(len(attrs)-2) && attrs[1] != -1 ||
		attrs[1] == -1 && len(attrs) != 2 {
		return nil, false, errs.Valuef("%s: attributes must be keepdim, ndims (-1: all dims) and ndims dims; got %d values",
			name, len(attrs))
	}
	if attrs[1] >= 0 {
		dims = make([]int, attrs[1])
		for i := range dims {
			dims[i] = int(attrs[2+i])
		}
	}
	return dims, attrs[0] != 0, nil
}
