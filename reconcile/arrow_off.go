//go:build !duckdb_arrow

package reconcile

import (
	"context"
	"fmt"
	"io"
)

// ArrowBuilt reports whether this binary can stream Arrow IPC.
const ArrowBuilt = false

// QueryArrow needs the duckdb_arrow build tag (the Makefile sets it).
func (e *Engine) QueryArrow(ctx context.Context, q string, w io.Writer) error {
	return fmt.Errorf("--format arrow: this binary was built without the duckdb_arrow tag; build with make")
}
