//go:build duckdb_arrow

package reconcile

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/duckdb/duckdb-go/v2"
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
	conn, err := e.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		ar, err := duckdb.NewArrowFromConn(dc.(driver.Conn))
		if err != nil {
			return err
		}
		rr, err := ar.QueryContext(ctx, q)
		if err != nil {
			return fmt.Errorf("sql: %w", err)
		}
		defer rr.Release()
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
