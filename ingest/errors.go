package ingest

import (
	"errors"
	"fmt"
	"strings"
)

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

// ErrBadInput marks errors a person must fix in the input (exit code 2).
var ErrBadInput = errors.New("bad input")

// InputErrors is every problem found in an input file (the first maxListed are kept).
type InputErrors struct {
	Errs  []*InputError
	Total int
}

const maxListed = 50

func (e *InputErrors) add(ie *InputError) {
	e.Total++
	if len(e.Errs) < maxListed {
		e.Errs = append(e.Errs, ie)
	}
}

func (e *InputErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problem(s) in input", e.Total)
	for _, ie := range e.Errs {
		b.WriteString("\n  ")
		b.WriteString(ie.Error())
	}
	if e.Total > len(e.Errs) {
		fmt.Fprintf(&b, "\n  … and %d more", e.Total-len(e.Errs))
	}
	return b.String()
}

// Is makes errors.Is(err, ErrBadInput) true.
func (e *InputErrors) Is(target error) bool { return target == ErrBadInput }

// Is makes errors.Is(err, ErrBadInput) true.
func (e *InputError) Is(target error) bool { return target == ErrBadInput }

// UsageError is a missing or invalid flag (exit code 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string        { return e.Msg }
func (e *UsageError) Is(target error) bool { return target == ErrBadInput }
