//go:build !duckdb_arrow

package reconcile

import (
	"context"
	"fmt"
)

const arrowScan = false

func (e *Engine) eachRowArrow(ctx context.Context, name, q string, kinds colKinds, fn func(r *scanRow) error) error {
	return fmt.Errorf("sql %s: built without the duckdb_arrow tag", name)
}
