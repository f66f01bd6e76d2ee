package main

import "testing"

func benchCall(b *testing.B, n int, grad bool) {
	b.ReportAllocs()
	if err := callLoop(n, b.N, grad); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkCallMinimum1(b *testing.B)     { benchCall(b, 1, false) }
func BenchmarkCallMinimum1Grad(b *testing.B) { benchCall(b, 1, true) }
func BenchmarkCallMinimum1000(b *testing.B)  { benchCall(b, 1000, false) }

// The loop itself must work: handles are released and the counters settle.
func TestCallLoopReleasesHandles(t *testing.T) {
	before := handles.count()
	if err := callLoop(10, 100, true); err != nil {
		t.Fatal(err)
	}
	if got := handles.count(); got != before {
		t.Fatalf("live handles %d, want %d", got, before)
	}
}

func BenchmarkStep1(b *testing.B) {
	b.ReportAllocs()
	if err := stepLoop(1, b.N); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkStep1000(b *testing.B) {
	b.ReportAllocs()
	if err := stepLoop(1000, b.N); err != nil {
		b.Fatal(err)
	}
}

func benchForm(b *testing.B, n int, form string) {
	b.ReportAllocs()
	if err := stepLoopForm(n, b.N, form); err != nil {
		b.Fatal(err)
	}
}

// y.backward(g) and autograd.grad(y, (a, b), g) from C (_hot.c's calls).
func BenchmarkStepGrad1(b *testing.B)    { benchForm(b, 1, "grad") }
func BenchmarkStepGrad1000(b *testing.B) { benchForm(b, 1000, "grad") }
func BenchmarkAutograd1(b *testing.B)    { benchForm(b, 1, "autograd") }
func BenchmarkAutograd1000(b *testing.B) { benchForm(b, 1000, "autograd") }

func TestStepLoopReleasesHandles(t *testing.T) {
	for _, form := range []string{"sum", "grad", "autograd"} {
		before := handles.count()
		if err := stepLoopForm(10, 50, form); err != nil {
			t.Fatal(form, err)
		}
		if got := handles.count(); got != before {
			t.Fatalf("%s: live handles %d, want %d", form, got, before)
		}
	}
}

// A released handle stays invalid after its slot is reused: handles carry
// the slot's generation.
func TestStaleHandleAfterSlotReuse(t *testing.T) {
	first := handles.put("first")
	if err := handles.release(first); err != nil {
		t.Fatal(err)
	}
	second := handles.put("second")
	defer handles.release(second)
	if uint32(first) != uint32(second) {
		t.Fatalf("slot not reused: %x then %x", first, second)
	}
	if _, ok := handles.get(first); ok {
		t.Fatalf("stale handle %x still resolves", first)
	}
	if err := handles.release(first); err == nil {
		t.Fatalf("releasing stale handle %x twice succeeded", first)
	}
	if o, ok := handles.get(second); !ok || o != "second" {
		t.Fatalf("live handle %x resolves to %v, %v", second, o, ok)
	}
	for _, bad := range []int64{0, -1, 1 << 40} {
		if _, ok := handles.get(bad); ok {
			t.Fatalf("handle %x resolves", bad)
		}
	}
}

func BenchmarkCallMinimum65536(b *testing.B) { benchCall(b, 65536, false) }

// Generations wrap within 31 bits: a slot reused 2^31 times still gives
// positive, valid handles (found by review).
func TestHandleGenerationsStayPositive(t *testing.T) {
	id := handles.put("probe")
	handles.mu.Lock()
	handles.slots[uint32(id)-1].gen = 1<<31 - 1
	handles.mu.Unlock()
	handles.mu.Lock()
	sl := &handles.slots[uint32(id)-1]
	stale := int64(sl.gen)<<32 | int64(uint32(id))
	handles.mu.Unlock()
	if err := handles.release(stale); err != nil {
		t.Fatal(err)
	}
	fresh := handles.put("again")
	defer handles.release(fresh)
	if fresh <= 0 {
		t.Fatalf("handle %x is not positive", fresh)
	}
	if o, ok := handles.get(fresh); !ok || o != "again" {
		t.Fatalf("handle %x resolves to %v, %v", fresh, o, ok)
	}
}

// The Go side of lending a NumPy buffer for one call (_hot.c's operands,
// from_numpy).
func BenchmarkBorrow1(b *testing.B) {
	b.ReportAllocs()
	if err := borrowLoop(1, b.N); err != nil {
		b.Fatal(err)
	}
}

// minimum(t, 0.5) from Python: the number's weak scalar, the op, and both
// releases.
func BenchmarkCallMinimumScalar1(b *testing.B) {
	b.ReportAllocs()
	if err := scalarLoop(1, b.N); err != nil {
		b.Fatal(err)
	}
}
