package ops

import (
	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/backend"
	_ "github.com/pylucid/pylucid/core/backend/cpu" // registers "cpu", the default backend
	_ "github.com/pylucid/pylucid/core/backend/ref" // registers "ref"
)

// Context is the state one op call runs under. It is a plain value: hosts
// keep one per thread (grad mode and autocast are thread-local in Python).
type Context struct {
	Backend     backend.IBackend
	GradEnabled bool
	Autocast    amp.State
	// Done, when not nil, lets a caller give up on a long reduction: once
	// it is closed, Sum and Mean stop within a fraction of a millisecond of
	// work and return an error wrapping ErrInterrupted, having allocated
	// nothing that outlives the call. A broadcast view can make a reduction
	// last for hours in bounded memory (docs/errors.md). Pass ctx.Done() of a
	// context.Context, or a channel of your own. Backends honour it through
	// backend.Interruptible; with one that lacks it, Done is only looked at
	// before the work starts.
	Done <-chan struct{}

	// forwardMode is set on the context CallJvp runs an op's forward
	// with: the op's jvp will want what the forward leaves it (the
	// selecting reductions' winner positions), even with no graph.
	forwardMode bool
}

// ErrInterrupted is wrapped by the error of an op stopped by Context.Done.
var ErrInterrupted = backend.ErrInterrupted

// Default returns the default context: the default backend
// (backend.Default, "cpu"), gradients recorded, autocast off.
func Default() *Context { return &Context{Backend: backend.Default(), GradEnabled: true} }

// NoGrad returns a copy of c that records nothing.
func (c *Context) NoGrad() *Context {
	d := *c
	d.GradEnabled = false
	return &d
}

// WithGrad returns a copy of c with grad recording set to on.
func (c *Context) WithGrad(on bool) *Context {
	d := *c
	d.GradEnabled = on
	return &d
}

func ctxOr(c *Context) *Context {
	if c == nil {
		return Default()
	}
	if c.Backend == nil {
		d := *c
		d.Backend = backend.Default()
		return &d
	}
	return c
}
