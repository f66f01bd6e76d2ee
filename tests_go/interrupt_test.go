package tests_go

// Interrupting long reductions through the Go API (ops.Context.Done,
// docs/errors.md): a sum over a broadcast view of 2**44 elements needs no
// memory but hours of work; closing Done stops it with an error wrapping
// ops.ErrInterrupted, on every path of every backend. An open Done changes
// no bit of any result. Nothing here asserts on time: an op that ignored
// Done would hang the test until go test's own timeout.

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/ops"
	"github.com/pylucid/pylucid/core/tensor"
)

type reduction struct {
	name, op string // the test's name, the op's (in its errors)
	huge     []int  // a shape over which it takes hours, in little memory
	run      func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error)
}

var reductions = []reduction{
	{"sum", "sum", []int{1 << 44}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
		return ops.Sum(c, x, nil, false)
	}},
	{"mean", "mean", []int{1 << 22, 1 << 22}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
		return ops.Mean(c, x, nil, false)
	}},
	{"sum_dim0", "sum", []int{1 << 40, 16}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
		return ops.Sum(c, x, []int{0}, true)
	}},
	{"mean_dim1", "mean", []int{16, 1 << 40}, func(c *ops.Context, x *tensor.Tensor) (*tensor.Tensor, error) {
		return ops.Mean(c, x, []int{-1}, false)
	}},
}

func TestLongSumStopsWhenDoneCloses(t *testing.T) {
	backends := map[string]kernels{"cpu1": splitting(1), "cpu4": splitting(4), "ref": refBackend}
	for bname, be := range backends {
		for _, dt := range []dtype.Dtype{dtype.Float32, dtype.Float16, dtype.Float64} {
			for _, r := range reductions {
				x := broadcastOne(t, dt, r.huge)
				t.Run(bname+"/"+dt.String()+"/"+r.name, func(t *testing.T) {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					// Some work gets done first; the result does not depend on when.
					stop := time.AfterFunc(10*time.Millisecond, cancel)
					defer stop.Stop()
					y, err := r.run(&ops.Context{Backend: be, Done: ctx.Done()}, x)
					require.Error(t, err)
					assert.Nil(t, y)
					assert.True(t, errors.Is(err, ops.ErrInterrupted), "%v", err)
					assert.Equal(t, errs.Runtime, errs.KindOf(err))
					assert.Equal(t, r.op+": interrupted", err.Error())
				})
			}
		}
	}
}

func TestClosedDoneStopsBeforeAnyWork(t *testing.T) {
	done := make(chan struct{})
	close(done)
	x := broadcastOne(t, dtype.Float32, []int{1 << 44})
	for _, be := range []kernels{splitting(1), splitting(4), refBackend} {
		_, err := ops.Sum(&ops.Context{Backend: be, Done: done}, x, nil, false)
		require.ErrorIs(t, err, ops.ErrInterrupted, be.Name())
	}
	// A backend without backend.Interruptible looks at Done before the work.
	_, err := ops.Sum(&ops.Context{Backend: plainBackend{refBackend}, Done: done}, x, nil, false)
	require.ErrorIs(t, err, ops.ErrInterrupted)
}

// plainBackend hides every optional capability of the backend it wraps.
type plainBackend struct{ backend.IBackend }

// An open Done changes nothing: the interruptible paths add the same values
// in the same order, for every layout, reduction and thread count.
func TestOpenDoneGivesIdenticalBits(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	vals := make([]float64, 130*300) // above cpu.MinParallel: the parallel path too
	for i := range vals {
		vals[i] = r.NormFloat64() * float64(1+i%7)
	}
	done := make(chan struct{}) // never closed
	for _, dt := range []dtype.Dtype{dtype.Float32, dtype.BFloat16, dtype.Float64} {
		a, err := tensor.FromFloat64s(dt, []int{130, 300}, vals)
		require.NoError(t, err)
		at, err := a.Transpose(0, 1)
		require.NoError(t, err)
		for _, x := range []*tensor.Tensor{a, at} {
			for _, be := range []kernels{splitting(1), splitting(3), refBackend} {
				for _, red := range reductions {
					want, err := red.run(&ops.Context{Backend: be}, x)
					require.NoError(t, err)
					got, err := red.run(&ops.Context{Backend: be, Done: done}, x)
					require.NoError(t, err)
					require.True(t, slices.Equal(want.Bits(), got.Bits()), "%v %s %s", dt, be.Name(), red.name)
				}
			}
		}
	}
}
