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
	"sync"

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

// Saved holds a node's saved tensors and whether they were released. Op
// nodes embed it.
type Saved struct {
	mu       sync.Mutex
	tensors  []*tensor.Tensor
	released bool
	buf      [2]*tensor.Tensor // room for the common case, so Save copies without allocating
}

// Save records tensors for the backward pass (a copy of the list: ts may be
// reused by the caller).
func (s *Saved) Save(ts ...*tensor.Tensor) {
	for _, t := range ts {
		if t != nil {
			t.Storage().MarkShared() // kept beyond the call: never freed early
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ts) == 0 {
		s.tensors = nil
		return
	}
	s.tensors = append(s.buf[:0:len(s.buf)], ts...)
}

// Tensors returns the saved tensors, or ErrGraphFreed after Release.
func (s *Saved) Tensors() ([]*tensor.Tensor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil, ErrGraphFreed
	}
	return s.tensors, nil
}

// Release drops the saved tensors.
func (s *Saved) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tensors, s.released, s.buf = nil, true, [2]*tensor.Tensor{}
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
		if n, ok := fn.(Node); ok {
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
// it (see Run.Next) instead of calling Apply.
type ExternalNode struct {
	name    string
	ID      int64 // the host's identifier for its backward function
	edges   []Edge
	inputs  []InputMeta
	outputs int
	Saved
}

// NewExternal returns an external node named name with the host's id, one
// edge and meta per input, and nOutputs outputs.
func NewExternal(name string, id int64, edges []Edge, inputs []InputMeta, nOutputs int) *ExternalNode {
	return &ExternalNode{name: name, ID: id, edges: edges, inputs: inputs, outputs: nOutputs}
}

// Name returns the node's name (the Python class name plus "Backward").
func (n *ExternalNode) Name() string { return n.name }

// Next returns the node's input edges.
func (n *ExternalNode) Next() []Edge { return n.edges }

// NumOutputs returns the number of outputs of the forward call.
func (n *ExternalNode) NumOutputs() int { return n.outputs }

// Inputs returns the shape and dtype of every input.
func (n *ExternalNode) Inputs() []InputMeta { return n.inputs }

// Apply returns an error: external nodes are run by the host.
func (n *ExternalNode) Apply([]*tensor.Tensor, bool) ([]*tensor.Tensor, error) {
	return nil, errors.New("autograd: external node " + n.name + " must be run by its host")
}
