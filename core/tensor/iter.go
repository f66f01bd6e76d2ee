package tensor

// Plan is a loop over an index space shared by several operands (for example
// an output and its broadcast inputs), with dims coalesced where every
// operand's layout allows, so the innermost loop is as long as possible.
// The index space is split into rows: all dims but the last are "outer".
type Plan struct {
	Shape   []int   // coalesced shape (at least one dim)
	Strides [][]int // per operand, in elements, aligned with Shape
	Offsets []int   // per operand, element offset of index [0,…,0]
}

// NewPlan builds a plan for iterating shape over operands with the given
// base offsets and strides (one stride slice per operand, each len(shape)).
func NewPlan(shape []int, offsets []int, strides ...[]int) Plan {
	p := Plan{Offsets: append([]int(nil), offsets...), Strides: make([][]int, len(strides))}
	// Keep dims of size != 1, then merge neighbours whose strides chain.
	var keep []int
	for i, d := range shape {
		if d != 1 {
			keep = append(keep, i)
		}
	}
	for _, i := range keep {
		if k := len(p.Shape) - 1; k >= 0 && chains(strides, p, k, i, shape) {
			for o := range strides {
				p.Strides[o][k] = strides[o][i]
			}
			p.Shape[k] *= shape[i]
			continue
		}
		p.Shape = append(p.Shape, shape[i])
		for o := range strides {
			p.Strides[o] = append(p.Strides[o], strides[o][i])
		}
	}
	if len(p.Shape) == 0 {
		p.Shape = []int{1}
		for o := range strides {
			p.Strides[o] = []int{0}
		}
	}
	return p
}

// chains reports whether plan dim k can absorb original dim i for every operand.
func chains(strides [][]int, p Plan, k, i int, shape []int) bool {
	for o := range strides {
		if p.Strides[o][k] != strides[o][i]*shape[i] {
			return false
		}
	}
	return true
}

// Inner returns the length of the innermost loop.
func (p Plan) Inner() int { return p.Shape[len(p.Shape)-1] }

// Rows returns the number of inner loops (the product of the outer dims).
func (p Plan) Rows() int {
	n := 1
	for _, d := range p.Shape[:len(p.Shape)-1] {
		n *= d
	}
	return n
}

// Numel returns the number of indices in the plan.
func (p Plan) Numel() int { return p.Rows() * p.Inner() }

// InnerStride returns operand o's stride along the innermost loop.
func (p Plan) InnerStride(o int) int { return p.Strides[o][len(p.Shape)-1] }

// ForRows calls fn once per row in [start, end) (row-major order) with the
// element offset of the row's first index for each operand. offs is reused
// between calls.
func (p Plan) ForRows(start, end int, fn func(offs []int)) {
	if start >= end {
		return
	}
	outer := p.Shape[:len(p.Shape)-1]
	idx := make([]int, len(outer))
	offs := make([]int, len(p.Offsets))
	// Position the odometer at row start.
	r := start
	for i := len(outer) - 1; i >= 0; i-- {
		idx[i] = r % outer[i]
		r /= outer[i]
	}
	for o := range offs {
		offs[o] = p.Offsets[o]
		for i := range outer {
			offs[o] += idx[i] * p.Strides[o][i]
		}
	}
	for row := start; row < end; row++ {
		fn(offs)
		for i := len(outer) - 1; i >= 0; i-- {
			idx[i]++
			for o := range offs {
				offs[o] += p.Strides[o][i]
			}
			if idx[i] < outer[i] {
				break
			}
			for o := range offs {
				offs[o] -= outer[i] * p.Strides[o][i]
			}
			idx[i] = 0
		}
	}
}
