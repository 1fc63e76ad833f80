package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// CheckPredicate refuses a --quality-gate that is anything but a predicate
// over the normalised result row, and returns the text the reconcile runs:
// the predicate as DuckDB prints it back from the syntax tree that was
// checked, never the text as given. DuckDB's own parser turns the predicate
// into a tree, which must be one plain SELECT whose only addition is the
// WHERE clause, with no subqueries and no function that reaches files,
// settings or the environment. The printed text must then parse, alone and
// in parentheses, to one same tree that prints back to itself, so that
// wherever the reconcile puts it in parentheses it is that one expression
// ("true) OR (true" is checked as, and runs as, (true OR true)).
func CheckPredicate(ctx context.Context, e *Engine, pred string) (string, error) {
	bad := func(why string) error {
		return &errkind.UsageError{Msg: fmt.Sprintf("--quality-gate %q: %s; want a predicate over the result row, e.g. \"finish_reason <> 'length'\"", pred, why)}
	}
	if strings.ContainsAny(pred, ";\x00") {
		return "", bad("contains ';' or a NUL byte")
	}
	if strings.Contains(pred, "--") || strings.Contains(pred, "/*") {
		return "", bad("contains a comment")
	}
	where, why, err := gateTree(ctx, e, "SELECT * FROM attempts_raw WHERE ("+pred+"\n)")
	if err != nil {
		return "", err
	}
	if why != "" {
		return "", bad(why)
	}
	canon, err := printExpr(ctx, e, where)
	if err != nil {
		return "", err
	}
	var first any
	for i, text := range []string{canon, "(" + canon + ")"} {
		w, why, err := gateTree(ctx, e, "SELECT * FROM attempts_raw WHERE "+text)
		if err != nil {
			return "", err
		}
		if why != "" {
			return "", bad("printed back as " + canon + ", " + why)
		}
		stripLocations(w)
		if i == 0 {
			first = w
			again, err := printExpr(ctx, e, w)
			if err != nil {
				return "", err
			}
			if again != canon {
				return "", bad("does not print back to itself: " + canon + " then " + again)
			}
		} else if !reflect.DeepEqual(first, w) {
			return "", bad("printed back as " + canon + ", which reads differently in parentheses")
		}
	}
	// Finally it must bind: known columns, boolean result.
	if err := e.ExecFile(ctx, "gate_bind.sql", map[string]string{"Gate": canon}); err != nil {
		return "", bad("does not bind: " + err.Error())
	}
	return canon, nil
}

// CheckGate refuses a --quality-gate that a reconcile would refuse, before
// any job has lines: the predicate is checked (CheckPredicate) against an
// empty result table of the lake's schema, in a session of its own. A run
// checks its gate so before it plans and sends anything, where the first
// reconcile would find it wrong once the batch was paid and done.
func CheckGate(ctx context.Context, l *lake.Lake, o EngineOptions, pred string) error {
	e, err := OpenEngine(l, o)
	if err != nil {
		return err
	}
	defer e.Close()
	src := map[string]any{"ExpectedNos": sqlInts([]int{0})}
	for name, empty := range map[string]func(string) (string, error){
		"Expected": emptyFile[lake.ExpectedRow], "Attempts": emptyFile[lake.AttemptRow], "Quarantine": emptyFile[lake.QuarantineRow],
	} {
		f, err := empty(e.tmp)
		if err != nil {
			return err
		}
		src[name] = sqlList([]string{f})
	}
	if err := e.ExecFile(ctx, "sources.sql", src); err != nil {
		return err
	}
	_, err = CheckPredicate(ctx, e, pred)
	return err
}

// gateTree parses a candidate quality-gate query and returns its WHERE
// clause's tree, or why it is not a plain predicate over attempts_raw.
func gateTree(ctx context.Context, e *Engine, q string) (any, string, error) {
	tree, err := e.parseSQL(ctx, q)
	if err != nil {
		return nil, "", err
	}
	if tree.Error {
		return nil, "does not parse: " + tree.ErrorMessage, nil
	}
	if len(tree.Statements) != 1 {
		return nil, "more than one statement", nil
	}
	n := tree.Statements[0].Node
	if n["type"] != "SELECT_NODE" {
		return nil, "not a plain predicate", nil
	}
	if mods, _ := n["modifiers"].([]any); len(mods) > 0 {
		return nil, "adds ORDER BY, LIMIT or DISTINCT", nil
	}
	if g, _ := n["group_expressions"].([]any); len(g) > 0 {
		return nil, "adds GROUP BY", nil
	}
	for _, k := range []string{"having", "qualify", "sample"} {
		if v, ok := n[k]; ok && v != nil {
			return nil, "adds " + strings.ToUpper(k), nil
		}
	}
	if cte, _ := n["cte_map"].(map[string]any); cte != nil {
		if m, _ := cte["map"].([]any); len(m) > 0 {
			return nil, "adds a WITH clause", nil
		}
	}
	if sel, _ := n["select_list"].([]any); len(sel) != 1 {
		return nil, "changes the select list", nil
	} else if s, _ := sel[0].(map[string]any); s["class"] != "STAR" || s["expr"] != nil {
		return nil, "changes the select list", nil
	}
	from, _ := n["from_table"].(map[string]any)
	if from == nil || from["type"] != "BASE_TABLE" || from["table_name"] != "attempts_raw" || from["schema_name"] != "" || from["catalog_name"] != "" || from["alias"] != "" {
		return nil, "changes the FROM clause", nil
	}
	w := n["where_clause"]
	if w == nil {
		return nil, "is empty", nil
	}
	if why := walkExpr(w); why != "" {
		return nil, why, nil
	}
	return w, "", nil
}

// printExpr prints an expression tree back as SQL text, with DuckDB's own
// printer: the tree goes in as the select list of a query over attempts_raw.
func printExpr(ctx context.Context, e *Engine, expr any) (string, error) {
	const prefix, suffix = "SELECT ", " FROM attempts_raw"
	tree := map[string]any{"error": false, "statements": []any{map[string]any{
		"node": map[string]any{
			"type": "SELECT_NODE", "modifiers": []any{}, "cte_map": map[string]any{"map": []any{}},
			"select_list": []any{expr},
			"from_table": map[string]any{"type": "BASE_TABLE", "alias": "", "sample": nil, "query_location": json.Number("18446744073709551615"),
				"schema_name": "", "table_name": "attempts_raw", "column_name_alias": []any{}, "catalog_name": "", "at_clause": nil},
			"where_clause": nil, "group_expressions": []any{}, "group_sets": []any{}, "aggregate_handling": "STANDARD_HANDLING",
			"having": nil, "sample": nil, "qualify": nil},
		"named_param_map": []any{}}}}
	js, err := json.Marshal(tree)
	if err != nil {
		return "", err
	}
	rows, err := e.QueryFile(ctx, "statement_print.sql", map[string]string{"Tree": quote(string(js))})
	if err != nil {
		return "", err
	}
	var text string
	if rows.Next() {
		err = rows.Scan(&text)
	}
	rows.Close()
	if err != nil {
		return "", fmt.Errorf("--quality-gate: print: %w", err)
	}
	if !strings.HasPrefix(text, prefix) || !strings.HasSuffix(text, suffix) || len(text) <= len(prefix)+len(suffix) {
		return "", fmt.Errorf("--quality-gate: DuckDB printed %q, not a query over attempts_raw", text)
	}
	return text[len(prefix) : len(text)-len(suffix)], nil
}

// stripLocations sets the parser's character offsets in a tree to "none",
// so that trees of differently spaced texts compare equal.
func stripLocations(v any) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["query_location"]; ok {
			x["query_location"] = json.Number("18446744073709551615")
		}
		for _, c := range x {
			stripLocations(c)
		}
	case []any:
		for _, c := range x {
			stripLocations(c)
		}
	}
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
