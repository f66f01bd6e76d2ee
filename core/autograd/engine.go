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

// nodeState is what a run knows about one node of the graph.
type nodeState struct {
	node      Node
	seen      bool // need is known
	visiting  bool
	need      bool // the node leads to something the run wants
	counted   bool
	inReady   bool
	hasBuffer bool
	ran       bool
	deps      int              // gradients still to arrive from nodes that run
	buf       []*tensor.Tensor // gradients of the node's outputs (nil = none yet)
	one       [1]*tensor.Tensor
}

// linearMax is the graph size up to which node states are found by a linear
// scan: small graphs (one call's worth of ops) then cost no map at all.
const linearMax = 16

// Run is one backward pass in progress.
type Run struct {
	opts     Options
	states   []nodeState
	index    map[Node]int32 // built once the graph outgrows linearMax
	ready    []int32
	captures map[captureKey][]int            // key → indices into results (an input may be listed twice); Grad only
	retains  map[captureKey][]*tensor.Tensor // non-leaves that keep their gradient (RetainGrad); backward only
	results  []*tensor.Tensor
	owned    []*tensor.Storage        // memory already held as a .grad or given by the caller
	ownedSet map[*tensor.Storage]bool // owned, once it outgrows linearMax
	// holds are the storages this run put in .grad slots: held until the run
	// ends, because the same gradient may still sit in other nodes' input
	// buffers when a later accumulation replaces it in its slot.
	holds   []*tensor.Storage
	pending *ExternalNode
	// claimed is the pending node's claim (see Claimer), given back if the
	// host abandons the run before resuming it.
	claimed Claimer
	done    bool

	statesBuf [8]nodeState
	readyBuf  [8]int32
	ownedBuf  [4]*tensor.Storage
	holdsBuf  [4]*tensor.Storage
}

// find returns the index of n's state, or -1.
func (r *Run) find(n Node) int {
	if r.index != nil {
		if i, ok := r.index[n]; ok {
			return int(i)
		}
		return -1
	}
	for i := range r.states {
		if r.states[i].node == n {
			return i
		}
	}
	return -1
}

// stateOf returns the index of n's state, adding one if needed. Indices stay
// valid; pointers into r.states do not survive the next call.
func (r *Run) stateOf(n Node) int {
	if i := r.find(n); i >= 0 {
		return i
	}
	r.states = append(r.states, nodeState{node: n})
	i := len(r.states) - 1
	if r.index != nil {
		r.index[n] = int32(i)
	} else if len(r.states) > linearMax {
		r.index = make(map[Node]int32, 2*len(r.states))
		for j := range r.states {
			r.index[r.states[j].node] = int32(j)
		}
	}
	return i
}

func (r *Run) needed(n Node) bool {
	i := r.find(n)
	return i >= 0 && r.states[i].need
}

func (r *Run) isOwned(s *tensor.Storage) bool {
	if r.ownedSet != nil {
		return r.ownedSet[s]
	}
	for _, o := range r.owned {
		if o == s {
			return true
		}
	}
	return false
}

func (r *Run) own(s *tensor.Storage) {
	if r.isOwned(s) {
		return
	}
	if r.ownedSet != nil {
		r.ownedSet[s] = true
		return
	}
	r.owned = append(r.owned, s)
	if len(r.owned) > linearMax { // many leaves: a set, not a quadratic scan
		r.ownedSet = make(map[*tensor.Storage]bool, 2*len(r.owned))
		for _, o := range r.owned {
			r.ownedSet[o] = true
		}
	}
}

// Close gives back the holds the run took on gradients it stored (see
// holds). Next and Resume call it when the run ends or fails; a host that
// abandons a paused run calls it. Calling it again does nothing.
func (r *Run) Close() {
	if r.claimed != nil {
		r.claimed.Unclaim()
		r.claimed = nil
	}
	for _, s := range r.holds {
		s.ReleaseHandle()
	}
	r.holds = nil
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
	r := &Run{opts: opts}
	r.states, r.ready, r.owned, r.holds = r.statesBuf[:0], r.readyBuf[:0], r.ownedBuf[:0], r.holdsBuf[:0]
	var edgeBuf [1]Edge
	var gradBuf [1]*tensor.Tensor
	rootEdges, rootGrads := edgeBuf[:0], gradBuf[:0]
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
					i, tensor.FormatShape(t.ShapeRef()))
			}
			var err error
			if g, err = opts.Math.OnesLike(t); err != nil {
				return nil, err
			}
		} else {
			if !tensor.SameShape(g.ShapeRef(), t.ShapeRef()) {
				return nil, fmt.Errorf("Mismatch in shape: grad_output[%d] has a shape of %s and output[%d] has a shape of %s",
					i, tensor.FormatShape(g.ShapeRef()), i, tensor.FormatShape(t.ShapeRef()))
			}
			if g.Dtype() != t.Dtype() {
				var err error
				if g, err = opts.Math.Adapt(g, t.ShapeRef(), t.Dtype(), opts.CreateGraph); err != nil {
					return nil, err
				}
			}
			r.own(g.Storage())
		}
		rootEdges, rootGrads = append(rootEdges, e), append(rootGrads, g)
	}
	if opts.Inputs == nil {
		r.retains = retainedIn()
	} else {
		r.captures = map[captureKey][]int{}
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
	for _, e := range rootEdges {
		r.visit(e.Node)
	}
	// Count dependencies among needed nodes that will actually run.
	for _, e := range rootEdges {
		r.count(e.Node)
	}
	for i, e := range rootEdges {
		if !r.needed(e.Node) {
			continue
		}
		if err := r.deliver(e, rootGrads[i]); err != nil {
			return nil, err
		}
	}
	// Roots are ready once all their in-graph dependencies are met.
	for _, e := range rootEdges {
		if i := r.find(e.Node); i >= 0 {
			r.maybeReady(i)
		}
	}
	return r, nil
}

// visit computes whether n leads to something the run wants.
func (r *Run) visit(n Node) bool {
	i := r.stateOf(n)
	if st := &r.states[i]; st.seen || st.visiting {
		return st.need
	}
	r.states[i].visiting = true
	need := false
	if acc, ok := n.(*AccumulateGrad); ok {
		_, captured := r.captures[captureKey{leaf: acc.Leaf}]
		need = r.opts.Inputs == nil || captured
	}
	for _, e := range n.Next() {
		if e.Node != nil && r.visit(e.Node) {
			need = true
		}
	}
	if r.opts.Inputs != nil {
		for out := 0; out < n.NumOutputs(); out++ {
			if _, ok := r.captures[captureKey{node: n, out: out}]; ok {
				need = true
			}
		}
	}
	st := &r.states[i] // visits above may have moved the table
	st.seen, st.visiting, st.need = true, false, need
	return need
}

// count adds n's dependencies on the needed nodes it feeds.
func (r *Run) count(n Node) {
	i := r.find(n)
	if i < 0 || r.states[i].counted || !r.states[i].need {
		return
	}
	r.states[i].counted = true
	if !r.runs(n) {
		return
	}
	for _, e := range n.Next() {
		if e.Node == nil {
			continue
		}
		if j := r.find(e.Node); j >= 0 && r.states[j].need {
			r.states[j].deps++
			r.count(e.Node)
		}
	}
}

// runs reports whether node n must execute (rather than only be captured).
func (r *Run) runs(n Node) bool {
	if r.opts.Inputs == nil {
		return true
	}
	for _, e := range n.Next() {
		if e.Node != nil && r.needed(e.Node) {
			return true
		}
	}
	return false
}

func (r *Run) maybeReady(i int) {
	st := &r.states[i]
	if !st.need || st.deps != 0 || !st.hasBuffer || st.inReady {
		return
	}
	st.inReady = true
	r.ready = append(r.ready, int32(i))
}

// deliver adds gradient g to the input buffer of edge e.
func (r *Run) deliver(e Edge, g *tensor.Tensor) error {
	i := r.stateOf(e.Node)
	st := &r.states[i]
	if !st.hasBuffer {
		st.hasBuffer = true
		// A node that already ran never reuses its inline buffer: the
		// gradients it ran with may still be in use (Pending.Grads).
		if n := max(e.Node.NumOutputs(), 1); n == 1 && !st.ran {
			st.one[0] = nil
			st.buf = st.one[:]
		} else {
			st.buf = make([]*tensor.Tensor, n)
		}
	}
	if g == nil {
		return nil
	}
	buf := st.buf
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
	p, err := r.next()
	if err != nil || p == nil {
		r.Close() // finished or failed: the run's holds go
	}
	return p, err
}

func (r *Run) next() (*Pending, error) {
	for len(r.ready) > 0 {
		i := r.ready[len(r.ready)-1]
		r.ready = r.ready[:len(r.ready)-1]
		st := &r.states[i]
		n, grads := st.node, st.buf
		st.buf, st.hasBuffer, st.inReady, st.ran = nil, false, false, true
		runs := r.runs(n)
		acc, isLeaf := n.(*AccumulateGrad)
		var claim Claimer
		if runs && !isLeaf {
			// Claimed before anything of the node's is used: a run that
			// loses the claim must not have added its gradient to a
			// retained non-leaf's .grad either (capture).
			var err error
			if claim, err = r.claim(n); err != nil {
				return nil, err
			}
		}
		if err := r.capture(n, grads); err != nil {
			r.unclaim(claim)
			return nil, err
		}
		if !runs {
			continue
		}
		if isLeaf {
			if err := r.accumulate(acc.Leaf, grads[0]); err != nil {
				return nil, err
			}
			continue
		}
		if ext, ok := n.(*ExternalNode); ok {
			if _, err := ext.Tensors(); err != nil {
				r.unclaim(claim)
				return nil, err
			}
			r.pending, r.claimed = ext, claim
			return &Pending{Node: ext, Grads: grads, Release: !r.opts.RetainGraph}, nil
		}
		out, err := r.apply(n, grads, claim)
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

// claim reserves n's saved state for this run when the run will release it
// (no retain_graph): the second of two runs over one graph then fails with
// ErrGraphFreed instead of using the state the first is about to free. It
// returns the claim to give back should n fail (nil when none was taken).
func (r *Run) claim(n Node) (Claimer, error) {
	if r.opts.RetainGraph {
		return nil, nil
	}
	c, ok := n.(Claimer)
	if !ok {
		return nil, nil
	}
	if err := c.Claim(); err != nil {
		return nil, err
	}
	return c, nil
}

func (r *Run) unclaim(c Claimer) {
	if c != nil {
		c.Unclaim()
	}
}

// apply runs node n, giving its claim back when it fails or panics (the
// host's boundary recovers a panic; the node then stays runnable).
func (r *Run) apply(n Node, grads []*tensor.Tensor, claim Claimer) (out []*tensor.Tensor, err error) {
	ok := false
	defer func() {
		if !ok {
			r.unclaim(claim)
		}
	}()
	out, err = n.Apply(grads, r.opts.CreateGraph)
	ok = err == nil
	return out, err
}

// Resume gives the gradients computed by the host for the pending node.
func (r *Run) Resume(grads []*tensor.Tensor) error {
	if r.pending == nil {
		return errors.New("autograd: no external node is pending")
	}
	err := r.resume(grads)
	if err != nil {
		r.Close()
	}
	return err
}

func (r *Run) resume(grads []*tensor.Tensor) error {
	ext := r.pending
	r.pending = nil
	claim := r.claimed
	r.claimed = nil
	if err := r.finishExternal(ext, grads); err != nil {
		r.unclaim(claim)
		return err
	}
	return nil
}

// finishExternal checks and adapts the host's gradients for ext, releases
// ext's state when the run does not retain the graph, and propagates.
func (r *Run) finishExternal(ext *ExternalNode, grads []*tensor.Tensor) error {
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
	for k, e := range edges {
		if e.Node == nil {
			continue
		}
		i := r.find(e.Node)
		if i < 0 || !r.states[i].need {
			continue
		}
		if err := r.deliver(e, grads[k]); err != nil {
			return err
		}
		r.states[i].deps--
		r.maybeReady(i)
	}
	return nil
}

// capture stores gradients flowing into a node's outputs that Grad asked for.
func (r *Run) capture(n Node, grads []*tensor.Tensor) error {
	if r.retains != nil {
		for out, g := range grads {
			for _, t := range r.retains[captureKey{node: n, out: out}] {
				if err := r.accumulate(t, g); err != nil {
					return err
				}
			}
		}
	}
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
		old := leaf.HoldGrad() // held: clearing .grad meanwhile must not free it under Add
		next := fresh
		if old != nil {
			next, err = r.opts.Math.Add(old, g, r.opts.CreateGraph)
		}
		var hold *tensor.Storage
		if err == nil {
			// Held before it enters the slot, so that no moment exists in
			// which only the slot holds it (see holds).
			hold = next.Storage()
			hold.AddHandle()
		}
		swapped := err == nil && leaf.CompareAndSwapGrad(old, next)
		if old != nil {
			old.Storage().ReleaseHandle()
		}
		if err != nil {
			return err
		}
		if swapped {
			MarkKept(next) // a host function's output now sits in a .grad slot
			r.holds = append(r.holds, hold)
			r.own(hold)
			return nil
		}
		hold.ReleaseHandle() // lost the race: next is dropped (never in a slot)
	}
}

// ownGradient returns g as a leaf may keep it: detached unless create_graph,
// and copied when its memory already sits in another .grad (or is the
// caller's) or it is a broadcast view.
func (r *Run) ownGradient(g *tensor.Tensor) (*tensor.Tensor, error) {
	if r.isOwned(g.Storage()) || !g.IsContiguous() {
		c, err := r.opts.Math.Clone(g, r.opts.CreateGraph)
		if err != nil {
			return nil, err
		}
		g = c
	}
	if !r.opts.CreateGraph {
		// The leaf gets a tensor object of its own, outside any graph, over
		// the same memory (not marked shared: the run and the slot hold it,
		// so it can still be freed early once the slot lets go) — unless g is
		// already one: graph-free, and nothing outside the engine holds it (a
		// backward formula's fresh result).
		if fn, _ := g.GradFn(); fn != nil || g.RequiresGrad() || g.Storage().Held() {
			g = g.Alias()
		}
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
