package reconcile

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	lakesql "github.com/batchlake/batchlake/sql"
)

// OpenSession starts a read-only DuckDB session over the lake's views: user
// SQL may only be one query, and can read nothing but the lake files the
// views use.
func OpenSession(ctx context.Context, l *lake.Lake, o EngineOptions, scope Scope) (*Engine, error) {
	e, err := OpenEngine(l, o)
	if err != nil {
		return nil, err
	}
	if scope.Query != "" {
		// A query refused by its syntax tree is refused before any file
		// is staged: the views it would get depend on that tree.
		scope.Query = strings.TrimSuffix(strings.TrimSpace(scope.Query), ";")
		if err := e.checkTree(ctx, scope.Query); err != nil {
			e.Close()
			return nil, err
		}
	}
	files, err := e.Views(ctx, scope, "TEMP VIEW", filepath.Join(e.tmp, "small"))
	if err != nil {
		e.Close()
		return nil, err
	}
	if err := e.lock(ctx, files, []string{filepath.Join(e.tmp, "spill")}); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// ErrNotReadOnly refuses user SQL that is not a single query.
var ErrNotReadOnly = fmt.Errorf("only a single SELECT statement is allowed: %w", errkind.ErrBadInput)

// Query runs user SQL after checking that it is a single query (checkSelect).
func (e *Engine) Query(ctx context.Context, q string) (*sql.Rows, error) {
	q = strings.TrimSuffix(strings.TrimSpace(q), ";")
	if err := e.checkSelect(ctx, q); err != nil {
		return nil, err
	}
	rows, err := e.DB.QueryContext(ctx, q)
	if outOfMemory(err) {
		// Not the query's fault: the same query fits under a higher limit.
		return nil, fmt.Errorf("sql: %v (raise --memory-limit, or give DuckDB a --tmp-dir with room to spill)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("sql: %v: %w", err, errkind.ErrBadInput)
	}
	return rows, nil
}

// pureTableFunctions are the table functions user SQL may call: generators
// of values that touch no file, setting or state. Every other table function
// is refused, whatever its name, so one added to DuckDB later is refused too
// (enable_logging, for one, is a table function that changes where the
// session writes, lock_configuration notwithstanding).
var pureTableFunctions = map[string]bool{"range": true, "generate_series": true, "unnest": true}

// checkSelect proves, before anything of q runs, that q is exactly one
// query: DuckDB's own parser lists q's statements without binding or running
// them (json_serialize_sql, which serializes nothing but queries), there must
// be one, and it may call no table function but the pure generators. Then
// the driver prepares it with Prepare, which refuses a string of several
// statements (PrepareContext would run all but the last), and its type must
// be SELECT. EXPLAIN is not a query and is refused: EXPLAIN ANALYZE runs the
// statement it explains.
//
// DuckDB's allowed_paths lets a listed file be written as well as read, so
// this check, not the lockdown settings, is what keeps the lake's files from
// being written through a session.
func (e *Engine) checkSelect(ctx context.Context, q string) error {
	if err := e.checkTree(ctx, q); err != nil {
		return err
	}
	return e.rawConn(ctx, func(c driver.Conn) error {
		st, err := c.Prepare(q)
		if err != nil {
			return fmt.Errorf("sql: %v: %w", err, errkind.ErrBadInput)
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
		if t != duckdb.STATEMENT_TYPE_SELECT {
			return refuseQuery("is not a SELECT")
		}
		return nil
	})
}

// refuseQuery is the error of a query checkSelect refuses.
func refuseQuery(why string) error {
	return fmt.Errorf("sql: the query %s; %w", why, ErrNotReadOnly)
}

// checkTree is the part of checkSelect that needs no view, so a session
// opened for one query runs it before staging any file: q's syntax tree
// holds one query that calls no table function but the pure generators.
func (e *Engine) checkTree(ctx context.Context, q string) error {
	refuse := refuseQuery
	if strings.ContainsRune(q, 0) {
		return refuse("contains a NUL byte")
	}
	tree, err := e.parseSQL(ctx, q)
	if err != nil {
		return err
	}
	if tree.Error {
		if tree.ErrorType == "not implemented" {
			return refuse("is not a SELECT (statements that write, attach, set, call, explain or load are refused)")
		}
		return fmt.Errorf("sql: %s: %w", tree.ErrorMessage, errkind.ErrBadInput)
	}
	if n := len(tree.Statements); n != 1 {
		return refuse(fmt.Sprintf("has %d statements", n))
	}
	if fn := tableFunction(tree.Statements[0].Node); fn != "" {
		return refuse(fmt.Sprintf("calls the table function %s(); only the views and range, generate_series and unnest can be read", fn))
	}
	return nil
}

// syntaxTree is json_serialize_sql's answer.
type syntaxTree struct {
	Error        bool   `json:"error"`
	ErrorType    string `json:"error_type"`
	ErrorMessage string `json:"error_message"`
	Statements   []struct {
		Node map[string]any `json:"node"`
	} `json:"statements"`
}

// parseSQL asks DuckDB's parser for q's syntax tree; nothing of q is bound or run.
func (e *Engine) parseSQL(ctx context.Context, q string) (*syntaxTree, error) {
	stmts, err := lakesql.Render("statement_tree.sql", nil)
	if err != nil {
		return nil, err
	}
	rows, err := e.DB.QueryContext(ctx, stmts[0], q)
	if err != nil {
		return nil, fmt.Errorf("sql statement_tree.sql: %w", err)
	}
	var js string
	if rows.Next() {
		err = rows.Scan(&js)
	}
	// Close before the next statement: the session has one connection.
	rows.Close()
	if err != nil {
		return nil, err
	}
	var t syntaxTree
	// Numbers stay as text: offsets are uint64 (no location is 2^64-1),
	// which a float64 would round, and a tree is printed back from them.
	d := json.NewDecoder(strings.NewReader(js))
	d.UseNumber()
	if err := d.Decode(&t); err != nil {
		return nil, fmt.Errorf("sql: parse tree: %w", err)
	}
	return &t, nil
}

// tableFunction returns the name of the first table function in a syntax
// tree that is not one of pureTableFunctions ("" if none).
func tableFunction(v any) string {
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "TABLE_FUNCTION" {
			f, _ := x["function"].(map[string]any)
			name, _ := f["function_name"].(string)
			schema, _ := f["schema"].(string)
			catalog, _ := f["catalog"].(string)
			if !pureTableFunctions[strings.ToLower(name)] || schema != "" || catalog != "" {
				if name == "" {
					return "(unnamed)"
				}
				return name
			}
		}
		for _, c := range x {
			if fn := tableFunction(c); fn != "" {
				return fn
			}
		}
	case []any:
		for _, c := range x {
			if fn := tableFunction(c); fn != "" {
				return fn
			}
		}
	}
	return ""
}
