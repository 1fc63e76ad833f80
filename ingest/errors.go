package ingest

import (
	"fmt"
	"strings"

	"github.com/batchlake/batchlake/errkind"
)

// InputErrors is every problem found in an input file (the first maxListed are kept).
type InputErrors struct {
	Errs  []*errkind.InputError
	Total int
}

const maxListed = 50

func (e *InputErrors) add(ie *errkind.InputError) {
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

// Is makes errors.Is(err, errkind.ErrBadInput) true.
func (e *InputErrors) Is(target error) bool { return target == errkind.ErrBadInput }
