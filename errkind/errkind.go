// Package errkind holds the kinds of error that decide how a batchlake
// command exits: the library packages return them, and cmd/batchlake's
// exitCode maps each kind to its exit code. It imports nothing of the
// project, so every package can use it.
package errkind

import (
	"errors"
	"fmt"
	"strings"
)

// ErrBadInput marks errors a person must fix in the input (exit code 2).
var ErrBadInput = errors.New("bad input")

// ErrNotYet means a step may not run yet and should be tried again later
// (exit 75): reconcile of a job whose tracked batches are still running.
var ErrNotYet = errors.New("not yet")

// InputError is one problem with one line of an input file.
type InputError struct {
	File  string
	Line  int64
	Field string
	Msg   string
}

func (e *InputError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " field %s", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Is makes errors.Is(err, ErrBadInput) true.
func (e *InputError) Is(target error) bool { return target == ErrBadInput }

// UsageError is a missing or invalid flag (exit code 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string        { return e.Msg }
func (e *UsageError) Is(target error) bool { return target == ErrBadInput }
