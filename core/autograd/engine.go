package autograd

import (
	"errors"
	"fmt"

	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// Math is the tensor arithmetic the engine needs. core/ops provides it.
type Math interface {
	// Add returns a+b (same shape and dtype); record says whether to record
	// the addition in the graph (create_graph).
	Add(a, b *tensor.Tensor, record bool) (*tensor.Tensor, error)
	// Adapt reduces g to shape (sum_to_shape) and casts it to dt.
	Adapt(g *tensor.Tensor, shape []int, dt dtype.Dtype, record bool) (*tensor.Tensor, error)
	// OnesLike returns a tensor of ones with t's shape and dtype.
	OnesLike(t *tensor.Tensor) (*tensor.Tensor, error)
	// Clone returns a contiguous bit-exact copy of t (recorded when record).
	Clone(t *tensor.Tensor, record bool) (*tensor.Tensor, error)
}

// Options controls one backward run.
type Options struct {
	RetainGraph bool
	CreateGraph bool
	// Inputs, when not nil, makes the run a Grad call: gradients with
	// respect to these tensors are returned by Run.Result instead of being
	// accumulated into leaves' .grad.
	Inputs      []*tensor.Tensor
	AllowUnused bool
	Math        Math
}

// Pending is an external node the host must run: it gets the gradients of
// the node's outputs (nil where none arrived) and must return one gradient
// per input (nil allowed) through Run.Resume.
type Pending struct {
	Node  *ExternalNode
	Grads []*tensor.Tensor
	// Release says the host should free the node's saved state after running
	// it (the run does not retain the graph).
	Release bool
}

type captureKey struct {
	node Node
	leaf *tensor.Tensor
	out  int
}

// Run is one backward pass in progress.
type Run struct {
	opts     Options
	deps     map[Node]int
	buffers  map[Node][]*tensor.Tensor
	ready    []Node
	needed   map[Node]bool
	captures map[captureKey][]int // key → indices into results (an input may be listed twice)
	results  []*tensor.Tensor
	owned    map[*tensor.Storage]bool // memory already held as a .grad or given by the caller
	pending  *ExternalNode
	done     bool
}

func keyOf(e Edge) captureKey {
	if acc, ok := e.Node.(*AccumulateGrad); ok {
		return captureKey{leaf: acc.Leaf}
	}
	return captureKey{node: e.Node, out: e.Output}
}

// Start prepares a backward pass from roots with the given root gradients
// (nil entries mean ones, allowed only for one-element roots).
func Start(roots, grads []*tensor.Tensor, opts Options) (*Run, error) {
	if opts.Math == nil {
		return nil, errors.New("autograd: Options.Math is required")
	}
	if len(grads) != 0 && len(grads) != len(roots) {
		return nil, fmt.Errorf("got %d gradients for %d outputs", len(grads), len(roots))
	}
	r := &Run{opts: opts, deps: map[Node]int{}, buffers: map[Node][]*tensor.Tensor{},
		needed: map[Node]bool{}, captures: map[captureKey][]int{}, owned: map[*tensor.Storage]bool{}}
	rootEdges := make([]Edge, len(roots))
	rootGrads := make([]*tensor.Tensor, len(roots))
	for i, t := range roots {
		e := EdgeOf(t)
		if e.Node == nil {
			return nil, fmt.Errorf("element %d of tensors does not require grad and does not have a grad_fn", i)
		}
		var g *tensor.Tensor
		if len(grads) > 0 {
			g = grads[i]
		}
		if g == nil {
			if t.Numel() != 1 {
				return nil, fmt.Errorf("grad can be implicitly created only for scalar outputs (output %d has shape %s); pass a gradient",
					i, tensor.FormatShape(t.Shape()))
			}
			var err error
			if g, err = opts.Math.OnesLike(t); err != nil {
				return nil, err
			}
		} else {
			if !tensor.SameShape(g.Shape(), t.Shape()) {
				return nil, fmt.Errorf("Mismatch in shape: grad_output[%d] has a shape of %s and output[%d] has a shape of %s",
					i, tensor.FormatShape(g.Shape()), i, tensor.FormatShape(t.Shape()))
			}
			if g.Dtype() != t.Dtype() {
				var err error
				if g, err = opts.Math.Adapt(g, t.Shape(), t.Dtype(), opts.CreateGraph); err != nil {
					return nil, err
				}
			}
			r.owned[g.Storage()] = true
		}
		rootEdges[i], rootGrads[i] = e, g
	}
	if opts.Inputs != nil {
		r.results = make([]*tensor.Tensor, len(opts.Inputs))
		for i, in := range opts.Inputs {
			e := EdgeOf(in)
			if e.Node == nil {
				return nil, fmt.Errorf("input %d of grad() does not require grad", i)
			}
			r.captures[keyOf(e)] = append(r.captures[keyOf(e)], i)
		}
	}
	// Discover the graph and which nodes lead to something wanted.
	visiting := map[Node]bool{}
	var visit func(n Node) bool
	visit = func(n Node) bool {
		if need, seen := r.needed[n]; seen {
			return need
		}
		if visiting[n] {
			return false
		}
		visiting[n] = true
		need := false
		if acc, ok := n.(*AccumulateGrad); ok {
			_, captured := r.captures[captureKey{leaf: acc.Leaf}]
			need = opts.Inputs == nil || captured
		}
		for _, e := range n.Next() {
			if e.Node != nil && visit(e.Node) {
				need = true
			}
		}
		if opts.Inputs != nil {
			for out := 0; out < n.NumOutputs(); out++ {
				if _, ok := r.captures[captureKey{node: n, out: out}]; ok {
					need = true
				}
			}
		}
		r.needed[n] = need
		return need
	}
	for _, e := range rootEdges {
		visit(e.Node)
	}
	// Count dependencies among needed nodes that will actually run.
	counted := map[Node]bool{}
	var count func(n Node)
	count = func(n Node) {
		if counted[n] || !r.needed[n] {
			return
		}
		counted[n] = true
		if !r.runs(n) {
			return
		}
		for _, e := range n.Next() {
			if e.Node != nil && r.needed[e.Node] {
				r.deps[e.Node]++
				count(e.Node)
			}
		}
	}
	for _, e := range rootEdges {
		count(e.Node)
	}
	for i, e := range rootEdges {
		if !r.needed[e.Node] {
			continue
		}
		if err := r.deliver(e, rootGrads[i]); err != nil {
			return nil, err
		}
	}
	// Roots are ready once all their in-graph dependencies are met.
	for _, e := range rootEdges {
		r.maybeReady(e.Node)
	}
	return r, nil
}

// runs reports whether node n must execute (rather than only be captured).
func (r *Run) runs(n Node) bool {
	if r.opts.Inputs == nil {
		return true
	}
	for _, e := range n.Next() {
		if e.Node != nil && r.needed[e.Node] {
			return true
		}
	}
	return false
}

func (r *Run) maybeReady(n Node) {
	if !r.needed[n] || r.deps[n] != 0 {
		return
	}
	if _, queued := r.buffers[n]; !queued {
		return
	}
	for _, q := range r.ready {
		if q == n {
			return
		}
	}
	r.ready = append(r.ready, n)
}

// deliver adds gradient g to the input buffer of edge e.
func (r *Run) deliver(e Edge, g *tensor.Tensor) error {
	buf, ok := r.buffers[e.Node]
	if !ok {
		buf = make([]*tensor.Tensor, max(e.Node.NumOutputs(), 1))
		r.buffers[e.Node] = buf
	}
	if g == nil {
		return nil
	}
	if e.Output >= len(buf) {
		return fmt.Errorf("autograd: edge to output %d of %s, which has %d outputs", e.Output, e.Node.Name(), len(buf))
	}
	if buf[e.Output] == nil {
		buf[e.Output] = g
		return nil
	}
	sum, err := r.opts.Math.Add(buf[e.Output], g, r.opts.CreateGraph)
	if err != nil {
		return err
	}
	buf[e.Output] = sum
	return nil
}

// Next runs native nodes until the pass finishes (nil, nil) or an external
// node must be run by the host.
func (r *Run) Next() (*Pending, error) {
	if r.pending != nil {
		return nil, errors.New("autograd: Resume must be called before Next")
	}
	for len(r.ready) > 0 {
		n := r.ready[len(r.ready)-1]
		r.ready = r.ready[:len(r.ready)-1]
		grads := r.buffers[n]
		delete(r.buffers, n)
		if err := r.capture(n, grads); err != nil {
			return nil, err
		}
		if !r.runs(n) {
			continue
		}
		if acc, ok := n.(*AccumulateGrad); ok {
			if err := r.accumulate(acc.Leaf, grads[0]); err != nil {
				return nil, err
			}
			continue
		}
		if ext, ok := n.(*ExternalNode); ok {
			if _, err := ext.Tensors(); err != nil {
				return nil, err
			}
			r.pending = ext
			return &Pending{Node: ext, Grads: grads, Release: !r.opts.RetainGraph}, nil
		}
		out, err := n.Apply(grads, r.opts.CreateGraph)
		if err != nil {
			return nil, err
		}
		if !r.opts.RetainGraph {
			n.Release()
		}
		if err := r.propagate(n, out); err != nil {
			return nil, err
		}
	}
	if !r.done {
		r.done = true
		for i, g := range r.results {
			if g == nil {
				if !r.opts.AllowUnused {
					return nil, fmt.Errorf("One of the differentiated Tensors (input %d) appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior", i)
				}
				continue
			}
			if !r.opts.CreateGraph && !g.IsContiguous() {
				// Broadcast views stay inside the engine; callers get memory of their own.
				c, err := r.opts.Math.Clone(g, false)
				if err != nil {
					return nil, err
				}
				r.results[i] = c
			}
		}
	}
	return nil, nil
}

// Resume gives the gradients computed by the host for the pending node.
func (r *Run) Resume(grads []*tensor.Tensor) error {
	ext := r.pending
	if ext == nil {
		return errors.New("autograd: no external node is pending")
	}
	r.pending = nil
	if len(grads) != len(ext.inputs) {
		return fmt.Errorf("function %s returned %d gradients, expected %d (one per forward input)", ext.name, len(grads), len(ext.inputs))
	}
	out := make([]*tensor.Tensor, len(grads))
	for i, g := range grads {
		if g == nil || ext.edges[i].Node == nil {
			continue
		}
		want := ext.inputs[i]
		if !tensor.SameShape(g.Shape(), want.Shape) {
			if _, err := tensor.BroadcastShapes(g.Shape(), want.Shape); err != nil || len(g.Shape()) < len(want.Shape) {
				return fmt.Errorf("function %s returned an invalid gradient at index %d - got %s but expected shape compatible with %s",
					ext.name, i, tensor.FormatShape(g.Shape()), tensor.FormatShape(want.Shape))
			}
		}
		if !tensor.SameShape(g.Shape(), want.Shape) || g.Dtype() != want.Dtype {
			a, err := r.opts.Math.Adapt(g, want.Shape, want.Dtype, r.opts.CreateGraph)
			if err != nil {
				return fmt.Errorf("function %s gradient %d: %w", ext.name, i, err)
			}
			g = a
		}
		out[i] = g
	}
	if !r.opts.RetainGraph {
		ext.Release()
	}
	return r.propagate(ext, out)
}

func (r *Run) propagate(n Node, grads []*tensor.Tensor) error {
	edges := n.Next()
	if len(grads) != len(edges) {
		return fmt.Errorf("autograd: %s returned %d gradients for %d inputs", n.Name(), len(grads), len(edges))
	}
	for i, e := range edges {
		if e.Node == nil || !r.needed[e.Node] {
			continue
		}
		if err := r.deliver(e, grads[i]); err != nil {
			return err
		}
		r.deps[e.Node]--
		r.maybeReady(e.Node)
	}
	return nil
}

// capture stores gradients flowing into a node's outputs that Grad asked for.
func (r *Run) capture(n Node, grads []*tensor.Tensor) error {
	if r.opts.Inputs == nil {
		return nil
	}
	if acc, ok := n.(*AccumulateGrad); ok {
		// Every use of a leaf has its own AccumulateGrad node (EdgeOf makes
		// a new one per use), so a leaf used twice is reached twice: sum.
		for _, i := range r.captures[captureKey{leaf: acc.Leaf}] {
			if grads[0] == nil {
				continue
			}
			if r.results[i] == nil {
				r.results[i] = grads[0]
				continue
			}
			sum, err := r.opts.Math.Add(r.results[i], grads[0], r.opts.CreateGraph)
			if err != nil {
				return err
			}
			r.results[i] = sum
		}
		return nil
	}
	for out, g := range grads {
		for _, i := range r.captures[captureKey{node: n, out: out}] {
			r.results[i] = g
		}
	}
	return nil
}

// accumulate adds g into leaf.grad (a fresh tensor unless it is owned by
// nobody else, so that two leaves never share one gradient buffer). The maths
// runs outside the leaf's lock (it may read the leaf itself, e.g. when a leaf
// is its own gradient); the swap retries if another backward got in first.
func (r *Run) accumulate(leaf *tensor.Tensor, g *tensor.Tensor) error {
	if g == nil {
		return nil
	}
	fresh, err := r.ownGradient(g)
	if err != nil {
		return err
	}
	for {
		old := leaf.Grad()
		next := fresh
		if old != nil {
			if next, err = r.opts.Math.Add(old, g, r.opts.CreateGraph); err != nil {
				return err
			}
		}
		if leaf.CompareAndSwapGrad(old, next) {
			r.owned[next.Storage()] = true
			return nil
		}
	}
}

// ownGradient returns g as a leaf may keep it: detached unless create_graph,
// and copied when its memory already sits in another .grad (or is the
// caller's) or it is a broadcast view.
func (r *Run) ownGradient(g *tensor.Tensor) (*tensor.Tensor, error) {
	if r.owned[g.Storage()] || !g.IsContiguous() {
		c, err := r.opts.Math.Clone(g, r.opts.CreateGraph)
		if err != nil {
			return nil, err
		}
		g = c
	}
	if !r.opts.CreateGraph {
		g = g.Detach()
	}
	return g, nil
}

// Result returns the gradients captured for Options.Inputs (after the run).
func (r *Run) Result() []*tensor.Tensor { return r.results }

// Backward runs a whole pass. External nodes are run by external, which may
// be nil when the graph has none.
func Backward(roots, grads []*tensor.Tensor, opts Options,
	external func(p *Pending) ([]*tensor.Tensor, error)) ([]*tensor.Tensor, error) {
	r, err := Start(roots, grads, opts)
	if err != nil {
		return nil, err
	}
	for {
		p, err := r.Next()
		if err != nil {
			return nil, err
		}
		if p == nil {
			return r.Result(), nil
		}
		if external == nil {
			return nil, fmt.Errorf("autograd: graph contains external node %s but no runner was given", p.Node.Name())
		}
		gs, err := external(p)
		if err != nil {
			return nil, err
		}
		if err := r.Resume(gs); err != nil {
			return nil, err
		}
	}
}
