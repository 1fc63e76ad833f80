package reconcile

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// TestHexDigestPagesReadByDuckDB: table pages of hex digests are written as
// Huffman-coded zstd frames of their own (lake's codec, not the zstd
// encoder's), and DuckDB's zstd reads them back to the same strings, in
// order, page after page, with the other columns beside them.
func TestHexDigestPagesReadByDuckDB(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	type row struct {
		RecordID string `parquet:"record_id"`
		N        int64  `parquet:"n"`
		Key      string `parquet:"key"`
	}
	rows := make([]row, 20000)
	var all strings.Builder
	for i := range rows {
		d := lake.HashFields(fmt.Sprint(i))
		rows[i] = row{RecordID: d.Hex(), N: int64(i), Key: fmt.Sprintf("key-%d", i)}
		all.WriteString(rows[i].RecordID)
	}
	rel, err := lake.WriteTable(ctx, l, dir, "expected", "t", lake.HashFields("job"), rows)
	if err != nil {
		t.Fatal(err)
	}
	file := quote(filepath.Join(dir, "lake", rel))
	var n, ordered int64
	var joined string
	queryOne(t, fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE key = 'key-' || n),
		string_agg(record_id, '' ORDER BY n) FROM read_parquet(%s)`, file), &n, &ordered, &joined)
	if n != int64(len(rows)) || ordered != n || joined != all.String() {
		t.Fatalf("DuckDB read %d rows (%d with their key), the digests equal: %v", n, ordered, joined == all.String())
	}
	var compressed, raw int64
	queryOne(t, fmt.Sprintf(`SELECT sum(total_compressed_size), sum(total_uncompressed_size)
		FROM parquet_metadata(%s) WHERE path_in_schema = 'record_id'`, file), &compressed, &raw)
	if compressed*100 > raw*51 {
		t.Errorf("record_id: %d bytes compressed to %d, want about half", raw, compressed)
	}
}
