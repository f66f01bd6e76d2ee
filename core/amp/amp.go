// Package amp defines automatic mixed precision: each op's AmpPolicy and the
// autocast State an op call runs under.
//
// Conventions: State is a plain value passed explicitly with each call (the
// Python layer keeps one per thread); there is no global mutable state. Outside
// autocast (State.Enabled false) policies have no effect.
//
// Errors: NewState rejects a non-float16/bfloat16 autocast dtype.
package amp

import (
	"fmt"

	"github.com/pylucid/pylucid/core/dtype"
)

// Policy says how an op's floating inputs are cast under autocast.
type Policy uint8

// The policies (docs/semantics.md, autocast).
const (
	// Promote casts floating inputs to the widest floating dtype among them.
	// Autocast never produces float64: it stays only if an input is float64.
	Promote Policy = iota
	// LowerPrecision casts floating inputs other than float64 to the
	// autocast dtype (float64 inputs are left alone, as in PyTorch).
	LowerPrecision
	// FP32 casts floating inputs other than float64 to float32.
	FP32
)

// String returns the policy's name as schemas print it: "Promote",
// "LowerPrecision" or "FP32".
func (p Policy) String() string {
	switch p {
	case Promote:
		return "Promote"
	case LowerPrecision:
		return "LowerPrecision"
	case FP32:
		return "FP32"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// State is the autocast state of one call. The zero value is autocast off.
type State struct {
	Enabled bool        // whether autocast applies to the call
	Dtype   dtype.Dtype // the lower-precision dtype: float16 or bfloat16 when Enabled
}

// NewState returns an enabled autocast state for dt (float16 or bfloat16).
func NewState(dt dtype.Dtype) (State, error) {
	if dt != dtype.Float16 && dt != dtype.BFloat16 {
		return State{}, fmt.Errorf("autocast dtype must be float16 or bfloat16, got %v", dt)
	}
	return State{Enabled: true, Dtype: dt}, nil
}

// CastDtype returns the dtype a floating input of dtype in is cast to under s
// for an op whose floating inputs have dtypes floats and whose policy is p.
// Non-floating inputs and a disabled state leave in unchanged.
func (s State) CastDtype(p Policy, in dtype.Dtype, floats []dtype.Dtype) dtype.Dtype {
	if !s.Enabled || !in.IsFloat() {
		return in
	}
	switch p {
	case LowerPrecision:
		if in == dtype.Float64 {
			return in
		}
		return s.Dtype
	case FP32:
		if in == dtype.Float64 {
			return in
		}
		return dtype.Float32
	}
	widest := in
	for _, f := range floats {
		widest = dtype.Promote(widest, f)
	}
	return widest
}
