//go:build duckdb_arrow

package reconcile

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// TestQueryArrow: the sql command's Arrow IPC stream reads back with arrow-go
// and holds the same rows as the query; a write is still refused.
func TestQueryArrow(t *testing.T) {
	ctx := context.Background()
	e, _, dir := reconciledSession(t)
	var want int64
	if err := e.DB.QueryRowContext(ctx, "SELECT count(*) FROM records").Scan(&want); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := e.QueryArrow(ctx, "SELECT record_id, final_state, cost_usd FROM records", &buf); err != nil {
		t.Fatal(err)
	}
	r, err := ipc.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var got int64
	for r.Next() {
		got += r.RecordBatch().NumRows()
	}
	if got != want || want == 0 || r.Schema().NumFields() != 3 {
		t.Fatalf("arrow stream has %d rows and %d columns, want %d rows and 3", got, r.Schema().NumFields(), want)
	}
	if err := e.QueryArrow(ctx, "COPY (SELECT 1) TO '"+dir+"/x.csv'", &buf); err == nil {
		t.Fatal("arrow path accepted a COPY")
	}
}
