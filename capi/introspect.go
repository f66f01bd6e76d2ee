// The runtime as hosts query it: release queues, stats, collection,
// threads, schemas, debugging hooks.

package main

/*
#define LUCID_NO_PROTOTYPES
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "lucid.h"
*/
import "C"

import (
	"encoding/json"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
	"unsafe"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/backend/cpu"
	"github.com/pylucid/pylucid/core/buildinfo"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

//export lucid_drain
func lucid_drain(q C.int32_t, items *C.int64_t, capacity C.int32_t, count *C.int32_t) C.int {
	return call(func() error {
		if count == nil || (capacity > 0 && items == nil) {
			return errs.Valuef("NULL output pointer")
		}
		var src *queue
		switch q {
		case C.LUCID_QUEUE_BUFFERS:
			src = &bufferQueue
		case C.LUCID_QUEUE_FUNCTIONS:
			src = &functionQueue
		default:
			return errs.Valuef("unknown queue %d", int(q))
		}
		got := src.pop(int(capacity))
		copy(unsafe.Slice(items, len(got)), unsafe.Slice((*C.int64_t)(unsafe.Pointer(unsafe.SliceData(got))), len(got)))
		*count = C.int32_t(len(got))
		return nil
	})
}

//export lucid_stats
func lucid_stats(out *C.int64_t, n C.int32_t) C.int {
	return call(func() error {
		if n > 0 && out == nil {
			return errs.Valuef("NULL output pointer")
		}
		vals := []int64{int64(handles.count()), borrowedCount.Load(), cBytes.Load(), cBlocks.Load(), dlpackLive(),
			jobsRunning.Load(), int64(tensor.PinnedInline())}
		dst := unsafe.Slice(out, int(n))
		for i := range dst {
			if i < len(vals) {
				dst[i] = C.int64_t(vals[i])
			}
		}
		return nil
	})
}

//export lucid_collect
func lucid_collect() C.int {
	return call(func() error {
		// Cleanups run on their own goroutine after a collection: repeat
		// until the counters settle.
		prev := int64(-1)
		for i := 0; i < 50; i++ {
			tensor.FlushYoung()
			runtime.GC()
			time.Sleep(2 * time.Millisecond)
			cur := cBlocks.Load()*1000003 + borrowedCount.Load()
			if cur == prev {
				break
			}
			prev = cur
		}
		baseline.Store(outstanding())
		return nil
	})
}

//export lucid_set_num_threads
func lucid_set_num_threads(n C.int32_t) C.int {
	return call(func() error {
		if n < 1 {
			return errs.Valuef("number of threads must be at least 1, got %d", int(n))
		}
		cpu.Default.SetThreads(int(n))
		return nil
	})
}

//export lucid_get_num_threads
func lucid_get_num_threads(n *C.int32_t) C.int {
	return call(func() error {
		if n == nil {
			return errs.Valuef("NULL output pointer")
		}
		*n = C.int32_t(cpu.Default.Threads())
		return nil
	})
}

type schemaJSON struct {
	Name          string   `json:"name"`
	Version       int      `json:"version"`
	AmpPolicy     string   `json:"amp_policy"`
	Deterministic bool     `json:"deterministic"`
	ID            int      `json:"id"`
	Kind          string   `json:"kind"`
	Arity         int      `json:"arity"`
	Outputs       int      `json:"outputs"`
	Attrs         []string `json:"attrs"`
	Signature     string   `json:"signature"`
	Node          string   `json:"node"`
	Rule          string   `json:"rule"`
	Whole         string   `json:"whole"`
	Floating      bool     `json:"floating"`
	NumPy         []string `json:"numpy"`
	Bridges       []string `json:"bridges"`
	Aliases       []string `json:"aliases"`
	Doc           string   `json:"doc"`
	Example       string   `json:"example"`
}

// orEmpty is s, or an empty list for nil (JSON [] rather than null).
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

//export lucid_schemas
func lucid_schemas(buf *C.char, n C.size_t, needed *C.size_t) C.int {
	return call(func() error {
		var out []schemaJSON
		for _, s := range ops.Schemas() {
			out = append(out, schemaJSON{s.Name, s.Version, s.AmpPolicy.String(), s.Deterministic,
				s.ID, s.Kind.String(), s.Arity, s.Outputs, orEmpty(s.Attrs), string(s.Signature), s.Node, s.Rule,
				s.Whole, s.Floating, orEmpty(s.NumPy), orEmpty(s.Bridges), orEmpty(s.Aliases), s.Doc, s.Example})
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		if needed != nil {
			*needed = C.size_t(len(b) + 1)
		}
		copyString(string(b), buf, n)
		return nil
	})
}

//export lucid_build_info
func lucid_build_info(buf *C.char, n C.size_t, needed *C.size_t) C.int {
	return call(func() error {
		b, err := json.Marshal(buildinfo.Get())
		if err != nil {
			return err
		}
		if needed != nil {
			*needed = C.size_t(len(b) + 1)
		}
		copyString(string(b), buf, n)
		return nil
	})
}

//export lucid_debug_gate
func lucid_debug_gate(want C.int32_t, waitMs C.int32_t, met, timedOut *C.int64_t) C.int {
	return call(func() error {
		if waitMs < 0 {
			return errs.Valuef("negative wait %d ms", int(waitMs))
		}
		old := setGate(int(want), time.Duration(waitMs)*time.Millisecond)
		var m, t int64
		if old != nil {
			m, t = old.counts()
		}
		if met != nil {
			*met = C.int64_t(m)
		}
		if timedOut != nil {
			*timedOut = C.int64_t(t)
		}
		return nil
	})
}

//export lucid_debug_panic
func lucid_debug_panic() C.int {
	return call(func() error {
		var b backend.IBackend
		return b.Binary(backend.Add, nil, nil, nil) // nil interface: a real Go runtime panic
	})
}

var profileFile *os.File

// lucid_debug_profile starts a Go CPU profile written to path, or stops the
// running one when path is NULL (a tool for performance work).
//
//export lucid_debug_profile
func lucid_debug_profile(path *C.char) C.int {
	return call(func() error {
		if path == nil {
			if profileFile != nil {
				pprof.StopCPUProfile()
				err := profileFile.Close()
				profileFile = nil
				return err
			}
			return nil
		}
		f, err := os.Create(C.GoString(path))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		profileFile = f
		return nil
	})
}
