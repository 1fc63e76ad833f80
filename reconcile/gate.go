package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/batchlake/batchlake/ingest"
)

// CheckPredicate refuses a --quality-gate that is anything but a predicate
// over the normalised result row: DuckDB's own parser turns it into a syntax
// tree, which must be one plain SELECT whose only addition is the WHERE
// clause, with no subqueries and no function that reaches files, settings or
// the environment.
func CheckPredicate(ctx context.Context, e *Engine, pred string) error {
	bad := func(why string) error {
		return &ingest.UsageError{Msg: fmt.Sprintf("--quality-gate %q: %s; want a predicate over the result row, e.g. \"finish_reason <> 'length'\"", pred, why)}
	}
	if strings.ContainsAny(pred, ";") {
		return bad("contains ';'")
	}
	if strings.Contains(pred, "--") || strings.Contains(pred, "/*") {
		return bad("contains a comment")
	}
	rows, err := e.QueryFile(ctx, "gate_parse.sql", map[string]string{"Query": quote("SELECT * FROM attempts_raw WHERE (" + pred + "\n)")})
	if err != nil {
		return err
	}
	var js string
	if rows.Next() {
		err = rows.Scan(&js)
	}
	// Close before the next statement: the session has one connection.
	rows.Close()
	if err != nil {
		return err
	}
	var tree struct {
		Error        bool   `json:"error"`
		ErrorMessage string `json:"error_message"`
		Statements   []struct {
			Node map[string]any `json:"node"`
		} `json:"statements"`
	}
	if err := json.Unmarshal([]byte(js), &tree); err != nil {
		return bad("cannot be parsed")
	}
	if tree.Error {
		return bad("does not parse: " + tree.ErrorMessage)
	}
	if len(tree.Statements) != 1 {
		return bad("more than one statement")
	}
	n := tree.Statements[0].Node
	if n["type"] != "SELECT_NODE" {
		return bad("not a plain predicate")
	}
	if mods, _ := n["modifiers"].([]any); len(mods) > 0 {
		return bad("adds ORDER BY, LIMIT or DISTINCT")
	}
	if g, _ := n["group_expressions"].([]any); len(g) > 0 {
		return bad("adds GROUP BY")
	}
	for _, k := range []string{"having", "qualify", "sample"} {
		if v, ok := n[k]; ok && v != nil {
			return bad("adds " + strings.ToUpper(k))
		}
	}
	if cte, _ := n["cte_map"].(map[string]any); cte != nil {
		if m, _ := cte["map"].([]any); len(m) > 0 {
			return bad("adds a WITH clause")
		}
	}
	from, _ := n["from_table"].(map[string]any)
	if from == nil || from["type"] != "BASE_TABLE" || from["table_name"] != "attempts_raw" {
		return bad("changes the FROM clause")
	}
	if why := walkExpr(n["where_clause"]); why != "" {
		return bad(why)
	}
	// Finally it must bind: known columns, boolean result.
	if err := e.ExecFile(ctx, "gate_bind.sql", map[string]string{"Gate": pred}); err != nil {
		return bad("does not bind: " + err.Error())
	}
	return nil
}

// Functions a predicate may not call: they read files, settings or the environment.
var deniedFunctions = []string{"read_", "parquet_", "glob", "getenv", "current_setting", "query", "sniff_",
	"duckdb_", "pragma_", "json_execute", "sqlite_", "postgres_", "mysql_", "iceberg_", "delta_", "load", "install", "attach", "checkpoint", "export", "import", "copy", "system", "shell"}

func walkExpr(v any) string {
	switch x := v.(type) {
	case map[string]any:
		if c, _ := x["class"].(string); c == "SUBQUERY" {
			return "contains a subquery"
		}
		if t, _ := x["type"].(string); t == "SUBQUERY" || strings.HasSuffix(t, "TABLE_FUNCTION") {
			return "contains a subquery or table function"
		}
		if fn, ok := x["function_name"].(string); ok {
			l := strings.ToLower(fn)
			for _, d := range deniedFunctions {
				if strings.HasPrefix(l, d) {
					return fmt.Sprintf("calls %s(), which is not allowed in a predicate", fn)
				}
			}
			if s, _ := x["schema"].(string); s != "" && s != "main" {
				return fmt.Sprintf("calls %s.%s(), which is not allowed in a predicate", s, fn)
			}
		}
		for _, c := range x {
			if why := walkExpr(c); why != "" {
				return why
			}
		}
	case []any:
		for _, c := range x {
			if why := walkExpr(c); why != "" {
				return why
			}
		}
	}
	return ""
}
