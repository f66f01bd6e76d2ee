package tensor

// IterOperands is the most operands an Iter iterates together.
const IterOperands = 8

// iterInline is how many coalesced dims an Iter (and a RowCursor) holds
// without allocating; more (rare: dims that survive coalescing) spill to the
// heap.
const iterInline = 8

// iterDim is one coalesced dim: its size and each operand's stride.
type iterDim struct {
	n  int
	st [IterOperands]int
}

// Iter is a loop over an index space shared by up to IterOperands operands
// (for example an output and its broadcast inputs), with dims of size 1
// dropped and neighbouring dims merged wherever every operand's strides
// chain, so the innermost loop is as long as possible. The index space is
// split into rows: all dims but the last are "outer". It is held inline, so
// an Iter on the stack costs no allocation. Build it with Reset; walk its
// rows with a RowCursor.
// An Iter is read-only once built and may be shared between goroutines.
type Iter struct {
	nops, nd int
	offs     [IterOperands]int
	dims     [iterInline]iterDim
	spill    []iterDim // dims iterInline and up
}

// Reset makes it the loop over shape for operands with the given base
// offsets and strides (one stride slice per operand, each len(shape)); the
// coalesced dims keep shape's order (at least one dim). If perm is not nil, dim j of the index space
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
