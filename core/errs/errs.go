// Package errs classifies the core's errors so that hosts can map them to
// their own exception types: Value (bad shapes, sizes, indices: Python's
// ValueError), Type (unsupported dtypes: TypeError), Overflow (a host
// integer out of range for the result dtype: OverflowError), Memory (an
// allocation the machine cannot satisfy: MemoryError) and everything else
// (RuntimeError).
//
// Conventions: constructors take a fmt format; wrapping with %w keeps the
// kind (KindOf looks through wrapped errors).
package errs

import (
	"errors"
	"fmt"
)

// Kind is an error class.
type Kind uint8

// The error kinds.
const (
	Runtime Kind = iota
	Value
	Type
	Overflow
	Memory
)

// String returns the name of the Python exception the kind maps to:
// "ValueError", "TypeError", "OverflowError", "MemoryError" or "RuntimeError".
func (k Kind) String() string {
	switch k {
	case Value:
		return "ValueError"
	case Type:
		return "TypeError"
	case Overflow:
		return "OverflowError"
	case Memory:
		return "MemoryError"
	}
	return "RuntimeError"
}

// Error is an error with a Kind.
type Error struct {
	Kind Kind  // the class of the error
	Err  error // the underlying error, whose message is the Error's
}

// Error returns the underlying error's message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error (for errors.Is and errors.As).
func (e *Error) Unwrap() error { return e.Err }

// Valuef returns a Value error.
func Valuef(format string, args ...any) error {
	return &Error{Kind: Value, Err: fmt.Errorf(format, args...)}
}

// Typef returns a Type error.
func Typef(format string, args ...any) error {
	return &Error{Kind: Type, Err: fmt.Errorf(format, args...)}
}

// Overflowf returns an Overflow error.
func Overflowf(format string, args ...any) error {
	return &Error{Kind: Overflow, Err: fmt.Errorf(format, args...)}
}

// Memoryf returns a Memory error: an allocation that cannot be satisfied,
// refused before anything was allocated or computed.
func Memoryf(format string, args ...any) error {
	return &Error{Kind: Memory, Err: fmt.Errorf(format, args...)}
}

// KindOf returns the kind of err (Runtime when unclassified).
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Runtime
}
