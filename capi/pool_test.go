package main

import (
	"math"
	"testing"
	"unsafe"
)

// The block pool: blocks come back by size class, last in first out, small
// classes stop at smallClassBytes, and the byte count follows.
func TestBlockPoolClasses(t *testing.T) {
	p := blockPool{free: map[int][]unsafe.Pointer{}}
	var mem [4]byte
	b := func(i int) unsafe.Pointer { return unsafe.Pointer(&mem[i]) }
	sizes := []int{roundSize(1), roundSize(1000), roundSize(40000), roundSize(100000), roundSize(5 << 20)}
	for i, size := range sizes[:4] {
		if !p.put(b(i), size) {
			t.Fatalf("put of a %d-byte block refused", size)
		}
	}
	if !p.put(b(3), sizes[1]) {
		t.Fatal("second block of a class refused")
	}
	if want := 2*sizes[1] + sizes[0] + sizes[2] + sizes[3]; p.bytes != want {
		t.Fatalf("pool holds %d bytes, want %d", p.bytes, want)
	}
	if got := p.get(sizes[1]); got != b(3) {
		t.Fatal("not last in, first out")
	}
	for i, size := range sizes[:4] {
		if got := p.get(size); got != b(i) {
			t.Fatalf("class %d: got another class's block", size)
		}
		if p.get(size) != nil {
			t.Fatalf("class %d: a block came back twice", size)
		}
	}
	if p.get(sizes[4]) != nil || p.bytes != 0 {
		t.Fatalf("empty pool: bytes %d", p.bytes)
	}
	small := roundSize(1 << 14)
	n := 0
	for p.put(b(0), small) {
		n++
	}
	if n != smallClassBytes/small {
		t.Fatalf("small class took %d blocks, want %d", n, smallClassBytes/small)
	}
}

// A request too large for any size class is out of memory, not a panic: its
// rounded size would overflow to a negative class (found by review).
func TestHugeRequestsAreOutOfMemory(t *testing.T) {
	for _, n := range []int{math.MaxInt, math.MaxInt - 100, math.MaxInt - hugeAlign + 1} {
		data, goHeap, err := cAllocator{}.AllocBlock(n, false)
		if err == nil || data != nil || goHeap {
			t.Fatalf("AllocBlock(%d) = %d bytes, %v, %v; want out of memory", n, len(data), goHeap, err)
		}
	}
}
