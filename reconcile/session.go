package reconcile

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// OpenSession starts a read-only DuckDB session over the lake's views: user
// SQL may only SELECT, and can read nothing but the lake files the views use.
func OpenSession(ctx context.Context, l *lake.Lake, o EngineOptions, scope Scope) (*Engine, error) {
	e, err := OpenEngine(l, o)
	if err != nil {
		return nil, err
	}
	files, err := e.Views(ctx, scope, "TEMP VIEW", filepath.Join(e.tmp, "small"))
	if err != nil {
		e.Close()
		return nil, err
	}
	if err := e.ExecFile(ctx, "lockdown.sql", map[string]string{"Paths": sqlList(files), "Dirs": sqlList([]string{filepath.Join(e.tmp, "spill")})}); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// ErrNotReadOnly refuses user SQL that is not a single SELECT.
var ErrNotReadOnly = fmt.Errorf("only a single SELECT statement is allowed: %w", ingest.ErrBadInput)

// Query runs user SQL after checking, with DuckDB's own parser, that it is a
// single SELECT (or EXPLAIN of one).
func (e *Engine) Query(ctx context.Context, q string) (*sql.Rows, error) {
	q = strings.TrimSuffix(strings.TrimSpace(q), ";")
	if err := e.checkSelect(ctx, q); err != nil {
		return nil, err
	}
	rows, err := e.DB.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("sql: %v: %w", err, ingest.ErrBadInput)
	}
	return rows, nil
}

// checkSelect prepares q on the session's one connection and checks its type.
func (e *Engine) checkSelect(ctx context.Context, q string) error {
	conn, err := e.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("duckdb driver cannot prepare")
		}
		st, err := pc.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("sql: %v: %w", err, ingest.ErrBadInput)
		}
		defer st.Close()
		ds, ok := st.(*duckdb.Stmt)
		if !ok {
			return fmt.Errorf("unexpected statement type %T", st)
		}
		t, err := ds.StatementType()
		if err != nil {
			return err
		}
		if t != duckdb.STATEMENT_TYPE_SELECT && t != duckdb.STATEMENT_TYPE_EXPLAIN {
			return ErrNotReadOnly
		}
		return nil
	})
}
