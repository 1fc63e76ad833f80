//go:build duckdb_arrow

package reconcile

import (
	"context"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// ArrowBuilt reports whether this binary can stream Arrow IPC.
const ArrowBuilt = true

// QueryArrow runs checked user SQL and streams the result to w as an Arrow
// IPC stream, straight from DuckDB's Arrow interface.
func (e *Engine) QueryArrow(ctx context.Context, q string, w io.Writer) error {
	q = strings.TrimSuffix(strings.TrimSpace(q), ";")
	if err := e.checkSelect(ctx, q); err != nil {
		return err
	}
	return e.arrowQuery(ctx, "user query", q, func(rr array.RecordReader) error {
		iw := ipc.NewWriter(w, ipc.WithSchema(rr.Schema()))
		for rr.Next() {
			if err := iw.Write(rr.RecordBatch()); err != nil {
				return err
			}
		}
		if err := rr.Err(); err != nil {
			return err
		}
		return iw.Close()
	})
}
