package lake

import (
	"context"
	"fmt"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

// Parquet files are written deterministically: the same rows give the same
// bytes whatever the library version, so a table file's name (its sha256) is
// stable across re-runs and upgrades. created_by names the table format
// (TableVersion), not the library.
const (
	createdBy    = "batchlake"
	rowGroupRows = 128 * 1024
)

var createdByVer = strconv.Itoa(TableVersion)

// TableWriter streams rows of one table into a local temporary Parquet file;
// Commit uploads it under its content digest.
type TableWriter[T any] struct {
	lake   *Lake
	table  string
	tenant string
	job    Digest
	o      *ObjectWriter
	w      *parquet.GenericWriter[T]
	rows   int64
}

// NewTableWriter starts a table file in tmpDir ("" for the system default).
func NewTableWriter[T any](l *Lake, tmpDir, table, tenant string, job Digest) (*TableWriter[T], error) {
	o, err := NewObjectWriter(tmpDir, "batchlake-"+table+"-*.parquet")
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", table, err)
	}
	w := parquet.NewGenericWriter[T](o,
		parquet.CreatedBy(createdBy, createdByVer, ""),
		parquet.Compression(tableCodec),
		parquet.MaxRowsPerRowGroup(rowGroupRows),
		parquet.PageBufferSize(256*1024),
	)
	return &TableWriter[T]{lake: l, table: table, tenant: tenant, job: job, o: o, w: w}, nil
}

// Write appends rows.
func (t *TableWriter[T]) Write(rows ...T) error {
	if _, err := t.w.Write(rows); err != nil {
		return fmt.Errorf("table %s: %w", t.table, err)
	}
	t.rows += int64(len(rows))
	return nil
}

// Rows is the number of rows written so far.
func (t *TableWriter[T]) Rows() int64 { return t.rows }

// Commit finishes the file and stores it write-once under its digest (in a
// local lake the file itself, see PutTempFile). It returns the lake key (""
// if no rows were written: empty tables are not stored).
func (t *TableWriter[T]) Commit(ctx context.Context) (string, error) {
	defer t.Abort()
	if err := t.w.Close(); err != nil {
		return "", fmt.Errorf("table %s: %w", t.table, err)
	}
	if t.rows == 0 {
		return "", nil
	}
	key, _, err := t.o.Commit(ctx, t.lake, func(d Digest) string { return TableFileKey(t.table, t.tenant, t.job, d) })
	if err != nil {
		return "", fmt.Errorf("table %s: %w", t.table, err)
	}
	return key, nil
}

// Abort removes the temporary file; safe after Commit.
func (t *TableWriter[T]) Abort() { t.o.Abort() }

// WriteTable writes rows as one table file and commits it.
func WriteTable[T any](ctx context.Context, l *Lake, tmpDir, table, tenant string, job Digest, rows []T) (string, error) {
	w, err := NewTableWriter[T](l, tmpDir, table, tenant, job)
	if err != nil {
		return "", err
	}
	for i := 0; i < len(rows); i += 4096 {
		end := min(i+4096, len(rows))
		if err := w.Write(rows[i:end]...); err != nil {
			w.Abort()
			return "", err
		}
	}
	return w.Commit(ctx)
}
