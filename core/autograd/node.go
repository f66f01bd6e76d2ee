// Package autograd is the reverse-mode engine: the Node interface, leaf
// accumulation, and a dependency-counted executor that can pause at nodes
// whose backward runs outside Go (Python autograd.Functions) and resume when
// their results are handed back.
//
// Conventions:
//   - A Node is one recorded op. Next returns one Edge per op input: the node
//     that produced that input and which of its outputs it was (nil Node for
//     inputs that need no gradient). Leaves are reached through
//     AccumulateGrad nodes.
//   - Apply gets one gradient per output (nil where none arrived) and returns
//     one per input, already reduced to each input's shape and dtype (ops do
//     that in their trampoline; external nodes are adapted by the engine).
//   - The engine never calls into a host language. An ExternalNode stops it:
//     Run.Next returns the node and its gradients, the host computes the
//     input gradients and passes them to Run.Resume.
//   - Tensor maths the engine itself needs (adding gradients, reducing an
//     external node's results) comes from the Math given in Options, so this
//     package does not depend on core/ops.
//
// Errors: every failure is returned as an error; a second backward through a
// freed graph returns ErrGraphFreed, whose message says retain_graph=True.
package autograd

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// Node is a recorded operation in the graph.
type Node interface {
	// Name is the node's class name, e.g. "MinimumBackward".
	Name() string
	// Next returns one edge per input of the recorded op.
	Next() []Edge
	// NumOutputs is the number of tensors the op produced.
	NumOutputs() int
	// Apply maps output gradients (nil = none arrived) to input gradients
	// (nil = none). With createGraph the computation is itself recorded.
	Apply(grads []*tensor.Tensor, createGraph bool) ([]*tensor.Tensor, error)
	// Release frees saved tensors; later Apply calls return ErrGraphFreed.
	Release()
}

// Claimer is the optional capability of a node with saved state: a run that
// will release the state claims it first (Saved.Claim), so exactly one such
// run uses it.
type Claimer interface {
	Claim() error
	Unclaim()
}

// Edge points at output Output of Node. A nil Node means "no gradient".
type Edge struct {
	Node   Node
	Output int
}

// ErrGraphFreed is returned when a graph is run again after its saved tensors
// were freed.
var ErrGraphFreed = errors.New("Trying to backward through the graph a second time " +
	"(or directly access saved tensors after they have already been freed). Saved intermediate " +
	"values of the graph are freed when you call .backward() or autograd.grad(). Specify " +
	"retain_graph=True if you need to backward through the graph a second time or if you need " +
	"to access saved tensors after calling backward.")

// Saved holds a node's saved tensors, the version of each at save time
// (tensor.Version), and whether they were released. Op nodes embed it.
type Saved struct {
	mu       sync.Mutex
	tensors  []*tensor.Tensor
	versions []uint32
	released bool
	claimed  bool              // a run that does not retain the graph is running the node (Claim)
	buf      [2]*tensor.Tensor // room for the common case, so Save copies without allocating
	vbuf     [2]uint32
}

// Save records tensors for the backward pass (a copy of the list: ts may be
// reused by the caller) with their versions.
func (s *Saved) Save(ts ...*tensor.Tensor) {
	for _, t := range ts {
		if t != nil {
			t.Storage().MarkShared() // kept beyond the call: never freed early
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ts) == 0 {
		s.tensors, s.versions = nil, nil
		return
	}
	s.tensors = append(s.buf[:0:len(s.buf)], ts...)
	s.versions = s.vbuf[:0:len(s.vbuf)]
	for _, t := range ts {
		var v uint32
		if t != nil {
			v = t.Version()
		}
		s.versions = append(s.versions, v)
	}
}

// Tensors returns the saved tensors, ErrGraphFreed after Release, or a
// *ModifiedError when one was written in place since it was saved.
func (s *Saved) Tensors() ([]*tensor.Tensor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil, ErrGraphFreed
	}
	for i, t := range s.tensors {
		if t != nil && t.Version() != s.versions[i] {
			return nil, &ModifiedError{Index: i, Dtype: t.Dtype(), Shape: t.Shape(), Version: t.Version(),
				Expected: s.versions[i]}
		}
	}
	return s.tensors, nil
}

// Claim reserves the saved tensors for the one run that will free them
// after using them (a backward without retain_graph): it returns
// ErrGraphFreed when they were released or another such run holds them, so
// two threads running one graph without retain_graph never both succeed
// (docs/autograd.md). Checking and marking happen under one lock; a run
// whose node then fails gives its claim back (Unclaim).
func (s *Saved) Claim() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released || s.claimed {
		return ErrGraphFreed
	}
	s.claimed = true
	return nil
}

// Unclaim gives back a claim whose node did not run to the end (an error,
// or a host that abandoned the run), so a later backward sees the same
// state the failed one saw.
func (s *Saved) Unclaim() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claimed = false
}

// Release drops the saved tensors.
func (s *Saved) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tensors, s.versions, s.released, s.buf, s.vbuf = nil, nil, true, [2]*tensor.Tensor{}, [2]uint32{}
}

// ModifiedError says that a tensor a node saved was written in place (out=,
// an in-place method) after it was saved, so the node's gradient would be
// computed from other values than the forward pass used. Node names the
// node once the engine knows it (WithNode).
type ModifiedError struct {
	Node              string
	Index             int // which saved tensor
	Dtype             dtype.Dtype
	Shape             []int
	Version, Expected uint32
}

// WithNode returns a copy of e naming the node that saved the tensor.
func (e *ModifiedError) WithNode(name string) *ModifiedError {
	c := *e
	c.Node = name
	return &c
}

// Error says which tensor changed, from which version to which, as
// PyTorch's "modified by an inplace operation" does.
func (e *ModifiedError) Error() string {
	by := "a node"
	if e.Node != "" {
		by = e.Node
	}
	return fmt.Sprintf("one of the variables needed for gradient computation has been modified by an inplace "+
		"operation: the %v tensor of shape %s that %s saved (saved tensor %d) is at version %d; expected version "+
		"%d instead. Hint: an in-place write (out=, t[...] = v, or a method ending in _) changed it after the forward pass; "+
		"write into a copy instead, or make the in-place change after backward.",
		e.Dtype, tensor.FormatShape(e.Shape), by, e.Index, e.Version, e.Expected)
}

// AccumulateGrad is the node through which gradients reach a leaf tensor.
type AccumulateGrad struct {
	Leaf *tensor.Tensor
}

// Name returns "AccumulateGrad".
func (*AccumulateGrad) Name() string { return "AccumulateGrad" }

// Next returns no edges.
func (*AccumulateGrad) Next() []Edge { return nil }

// NumOutputs is 1: the leaf itself.
func (*AccumulateGrad) NumOutputs() int { return 1 }

// Apply is never called: the engine accumulates into the leaf itself.
func (*AccumulateGrad) Apply([]*tensor.Tensor, bool) ([]*tensor.Tensor, error) { return nil, nil }

// Release does nothing: a leaf has no saved state.
func (*AccumulateGrad) Release() {}

// EdgeOf returns the edge through which a gradient for t flows: its grad_fn
// output, an AccumulateGrad for a leaf that requires grad, or a nil edge.
func EdgeOf(t *tensor.Tensor) Edge {
	if t == nil {
		return Edge{} // a nil tensor is not part of any graph
	}
	if fn, nr := t.GradFn(); fn != nil {
		if n := NodeOf(fn); n != nil {
			return Edge{Node: n, Output: nr}
		}
	}
	if t.RequiresGrad() {
		return Edge{Node: &AccumulateGrad{Leaf: t}}
	}
	return Edge{}
}

// InputMeta is the shape and dtype an input gradient must have.
type InputMeta struct {
	Shape []int
	Dtype dtype.Dtype
}

// ExternalNode is a node whose backward runs outside Go. The engine stops at
// it (see Run.Next) instead of calling Apply. Its data is an ExternalFn,
// which may outlive it (see ExternalFn).
type ExternalNode struct {
	*ExternalFn
}

// ExternalFn is a host function call: the name, the host's id, the input
// edges and metas. NewExternal gives a node that is its own graph identity.
// A host that must know whether anything besides its outputs still refers
// to the call (to let its own collector free a reference cycle through the
// call's state) makes the outputs' grad_fn the ExternalFn itself
// (NewExternalFn): graph edges, node handles and runs then refer to an
// ExternalNode made on demand (Node), which the ExternalFn holds only
// weakly, so InGraph says whether any of them is still reachable.
type ExternalFn struct {
	name    string
	ID      int64 // the host's identifier for its backward function
	edges   []Edge
	inputs  []InputMeta
	outputs int
	Saved
	// Owners are the host's handles of the outputs at record time, for the
	// host's bookkeeping; the engine never reads them.
	Owners []int64

	mu      sync.Mutex
	node    weak.Pointer[ExternalNode]
	escaped atomic.Bool
}

// NewExternal returns an external node named name with the host's id, one
// edge and meta per input, and nOutputs outputs.
func NewExternal(name string, id int64, edges []Edge, inputs []InputMeta, nOutputs int) *ExternalNode {
	return &ExternalNode{NewExternalFn(name, id, edges, inputs, nOutputs)}
}

// NewExternalFn returns the data of an external call, to be the grad_fn of
// its outputs (see ExternalFn).
func NewExternalFn(name string, id int64, edges []Edge, inputs []InputMeta, nOutputs int) *ExternalFn {
	return &ExternalFn{name: name, ID: id, edges: edges, inputs: inputs, outputs: nOutputs}
}

// Name returns the node's name (the Python class name plus "Backward").
func (f *ExternalFn) Name() string { return f.name }

// Next returns the node's input edges.
func (f *ExternalFn) Next() []Edge { return f.edges }

// NumOutputs returns the number of outputs of the forward call.
func (f *ExternalFn) NumOutputs() int { return f.outputs }

// Inputs returns the shape and dtype of every input.
func (f *ExternalFn) Inputs() []InputMeta { return f.inputs }

// Node returns the call's graph node: the live one, or a new one when none
// is reachable any more.
func (f *ExternalFn) Node() *ExternalNode {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.node.Value(); n != nil {
		return n
	}
	n := &ExternalNode{f}
	f.node = weak.Make(n)
	return n
}

// InGraph reports whether the call's graph node may still be reachable (from
// another node's edge, a node handle or a run). It turns false only after a
// collection found the node unreachable.
func (f *ExternalFn) InGraph() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.node.Value() != nil
}

// Escaped reports whether an output was ever kept by Go beyond the handles
// it was recorded with (see MarkKept).
func (f *ExternalFn) Escaped() bool { return f.escaped.Load() }

// MarkKept notes that t is kept somewhere other than its handles (a .grad
// slot, a run's buffers) or handed out again: if t is the output of an
// external call, that call's state must then stay with Go (Escaped).
func MarkKept(t *tensor.Tensor) {
	if t == nil {
		return
	}
	t.MarkKept()
	if fn, _ := t.GradFn(); fn != nil {
		if f, ok := fn.(*ExternalFn); ok {
			f.escaped.Store(true)
		}
	}
}

// retaining lists the tensors RetainGrad marked, weakly: a run looks up
// the live ones that belong to its graph (a handful, typically).
var retaining struct {
	sync.Mutex
	ts []weak.Pointer[tensor.Tensor]
}

// RetainGrad makes later backward runs store the gradient reaching the
// non-leaf t in its grad slot, as they do for leaves (a leaf is left as it
// is). A tensor that does not require grad is an error.
func RetainGrad(t *tensor.Tensor) error {
	if !t.RequiresGrad() {
		return errors.New("can't retain_grad on Tensor that has requires_grad=False")
	}
	if t.IsLeaf() || t.RetainsGrad() {
		return nil
	}
	t.SetRetainsGrad()
	retaining.Lock()
	defer retaining.Unlock()
	live := retaining.ts[:0]
	for _, w := range retaining.ts {
		if w.Value() != nil {
			live = append(live, w)
		}
	}
	retaining.ts = append(live, weak.Make(t))
	return nil
}

// retainedIn returns the live retaining tensors by the graph edge their
// gradient arrives through.
func retainedIn() map[captureKey][]*tensor.Tensor {
	retaining.Lock()
	defer retaining.Unlock()
	var out map[captureKey][]*tensor.Tensor
	for _, w := range retaining.ts {
		t := w.Value()
		if t == nil {
			continue
		}
		if e := EdgeOf(t); e.Node != nil {
			if _, acc := e.Node.(*AccumulateGrad); !acc {
				if out == nil {
					out = map[captureKey][]*tensor.Tensor{}
				}
				k := captureKey{node: e.Node, out: e.Output}
				out[k] = append(out[k], t)
			}
		}
	}
	return out
}

// NodeOf returns the graph node of a tensor's grad_fn (nil for none).
func NodeOf(fn tensor.GradNode) Node {
	switch n := fn.(type) {
	case nil:
		return nil
	case *ExternalFn:
		return n.Node()
	case Node:
		return n
	}
	return nil
}

// Apply returns an error: external nodes are run by the host.
func (n *ExternalNode) Apply([]*tensor.Tensor, bool) ([]*tensor.Tensor, error) {
	return nil, errors.New("autograd: external node " + n.name + " must be run by its host")
}
