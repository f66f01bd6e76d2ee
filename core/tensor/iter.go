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

// IterOperands is the most operands an Iter iterates together.
const IterOperands = 6

// iterInline is how many coalesced dims an Iter (and a RowCursor) holds
// without allocating; more (rare: dims that survive coalescing) spill to the
// heap.
const iterInline = 8

// iterDim is one coalesced dim: its size and each operand's stride.
type iterDim struct {
	n  int
	st [IterOperands]int
}

// Iter is the allocation-free form of Plan for up to IterOperands operands:
// the same coalesced index space, held inline so that an Iter on the stack
// costs no allocation. Build it with Reset; walk its rows with a RowCursor.
// An Iter is read-only once built and may be shared between goroutines.
type Iter struct {
	nops, nd int
	offs     [IterOperands]int
	dims     [iterInline]iterDim
	spill    []iterDim // dims iterInline and up
}

// Reset makes it the plan NewPlan(shape, offsets, strides...) builds (same
// coalesced dims, same order). If perm is not nil, dim j of the index space
// is dim perm[j] of shape and of every stride slice: the layout of the view
// Permute(perm...), without building the view. Reset panics when given more
// than IterOperands operands.
func (it *Iter) Reset(shape, perm, offsets []int, strides ...[]int) {
	nops := len(strides)
	if nops > IterOperands || len(offsets) != nops {
		panic("tensor.Iter: bad operand count")
	}
	it.nops, it.nd = nops, 0
	it.spill = it.spill[:0]
	copy(it.offs[:], offsets)
	for j := range shape {
		i := j
		if perm != nil {
			i = perm[j]
		}
		n := shape[i]
		if n == 1 {
			continue
		}
		// Merge into the previous dim when every operand's strides chain.
		if it.nd > 0 {
			d := it.dim(it.nd - 1)
			chain := true
			for o := 0; o < nops; o++ {
				if d.st[o] != strides[o][i]*n {
					chain = false
					break
				}
			}
			if chain {
				for o := 0; o < nops; o++ {
					d.st[o] = strides[o][i]
				}
				d.n *= n
				continue
			}
		}
		var d iterDim
		d.n = n
		for o := 0; o < nops; o++ {
			d.st[o] = strides[o][i]
		}
		it.push(d)
	}
	if it.nd == 0 {
		it.push(iterDim{n: 1})
	}
}

func (it *Iter) push(d iterDim) {
	if it.nd < iterInline {
		it.dims[it.nd] = d
	} else {
		it.spill = append(it.spill, d)
	}
	it.nd++
}

func (it *Iter) dim(i int) *iterDim {
	if i < iterInline {
		return &it.dims[i]
	}
	return &it.spill[i-iterInline]
}

// NumOperands returns the number of operands.
func (it *Iter) NumOperands() int { return it.nops }

// Ndim returns the number of coalesced dims (at least one).
func (it *Iter) Ndim() int { return it.nd }

// Dim returns the size of coalesced dim i.
func (it *Iter) Dim(i int) int { return it.dim(i).n }

// Stride returns operand o's stride (in elements) along coalesced dim i.
func (it *Iter) Stride(o, i int) int { return it.dim(i).st[o] }

// Offset returns operand o's element offset of index [0,…,0].
func (it *Iter) Offset(o int) int { return it.offs[o] }

// Inner returns the length of the innermost loop.
func (it *Iter) Inner() int { return it.dim(it.nd - 1).n }

// InnerStride returns operand o's stride along the innermost loop.
func (it *Iter) InnerStride(o int) int { return it.dim(it.nd - 1).st[o] }

// Rows returns the number of inner loops (the product of the outer dims).
func (it *Iter) Rows() int {
	n := 1
	for i := 0; i < it.nd-1; i++ {
		n *= it.dim(i).n
	}
	return n
}

// Numel returns the number of indices.
func (it *Iter) Numel() int { return it.Rows() * it.Inner() }

// RowCursor walks the rows of an Iter in row-major order. Offs holds, for
// each operand, the element offset of the current row's first index. The
// cursor does not keep the Iter: pass the same one to Seek and Next.
type RowCursor struct {
	Offs  [IterOperands]int
	idx   [iterInline]int
	spill []int // odometer digits iterInline and up
}

func (c *RowCursor) digit(i int) *int {
	if i < iterInline {
		return &c.idx[i]
	}
	return &c.spill[i-iterInline]
}

// Seek positions c at row r of it (0 <= r < it.Rows()).
func (c *RowCursor) Seek(it *Iter, r int) {
	outer := it.nd - 1
	if outer > iterInline {
		c.spill = append(c.spill[:0], make([]int, outer-iterInline)...)
	}
	c.Offs = it.offs
	for i := outer - 1; i >= 0; i-- {
		d := it.dim(i)
		x := r % d.n
		r /= d.n
		*c.digit(i) = x
		for o := 0; o < it.nops; o++ {
			c.Offs[o] += x * d.st[o]
		}
	}
}

// Next advances c to the next row of it (after the last row it wraps to the
// first).
func (c *RowCursor) Next(it *Iter) {
	for i := it.nd - 2; i >= 0; i-- {
		d, x := it.dim(i), c.digit(i)
		*x++
		if *x < d.n {
			for o := 0; o < it.nops; o++ {
				c.Offs[o] += d.st[o]
			}
			return
		}
		*x = 0
		for o := 0; o < it.nops; o++ {
			c.Offs[o] -= (d.n - 1) * d.st[o]
		}
	}
}
