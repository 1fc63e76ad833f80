package reconcile

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	lakesql "github.com/batchlake/batchlake/sql"
)

// viewGraph is views.sql read as a graph: for each view, the table sources
// (views.sql's template fields) and the other views its query reads. A
// session opened for one query creates only the views that query reads and
// the views those read, and stages (hashes, or fetches from a remote lake)
// only their files: a query of costs does not read the attempts.
type viewGraph struct {
	views   map[string]bool     // every view's name
	sources map[string][]string // view name: the template fields it reads
	reads   map[string][]string // view name: the views it reads
}

var (
	viewGraphMu    sync.Mutex
	viewGraphCache *viewGraph
)

var viewStatement = regexp.MustCompile(`(?is)^(?:\s*--[^\n]*\n)*\s*CREATE OR REPLACE TEMP VIEW (\w+) AS\s(.*)$`)

// viewName is the name of the view a statement of views.sql creates.
func viewName(stmt string) string {
	if m := viewStatement.FindStringSubmatch(stmt); m != nil {
		return strings.ToLower(m[1])
	}
	return ""
}

// sourceMarker stands for a template field when views.sql is read as a graph.
func sourceMarker(field string) string { return "batchlake_source_" + field }

// graph reads views.sql once per process: each view's query, rendered with
// a marker table for each source, goes through DuckDB's parser (nothing is
// bound or run), whose syntax tree names the tables it reads.
func (e *Engine) graph(ctx context.Context, fields []string) (*viewGraph, error) {
	viewGraphMu.Lock()
	defer viewGraphMu.Unlock()
	if viewGraphCache != nil {
		return viewGraphCache, nil
	}
	data := map[string]string{"Kind": "TEMP VIEW"}
	markers := map[string]string{}
	for _, f := range fields {
		data[f] = sourceMarker(f)
		markers[strings.ToLower(sourceMarker(f))] = f
	}
	stmts, err := lakesql.Render("views.sql", data)
	if err != nil {
		return nil, err
	}
	g := &viewGraph{views: map[string]bool{}, sources: map[string][]string{}, reads: map[string][]string{}}
	for _, s := range stmts {
		m := viewStatement.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("views.sql: a statement that creates no view: %.60s", s)
		}
		name := strings.ToLower(m[1])
		g.views[name] = true
		tables, ok, err := e.queryTables(ctx, strings.TrimSuffix(strings.TrimSpace(m[2]), ";"))
		if err != nil {
			return nil, fmt.Errorf("views.sql view %s: %w", name, err)
		}
		if !ok {
			return nil, fmt.Errorf("views.sql view %s: its tables cannot be listed", name)
		}
		for _, t := range tables {
			if f, ok := markers[t]; ok {
				g.sources[name] = append(g.sources[name], f)
			} else {
				g.reads[name] = append(g.reads[name], t)
			}
		}
	}
	viewGraphCache = g
	return g, nil
}

// closure is the set of views to create for a query reading tables: those
// of them that are views, and every view they read, transitively.
func (g *viewGraph) closure(tables []string) map[string]bool {
	need := map[string]bool{}
	var visit func(string)
	visit = func(v string) {
		if need[v] || !g.views[v] {
			return // seen, or a CTE's name or no view at all
		}
		need[v] = true
		for _, r := range g.reads[v] {
			visit(r)
		}
	}
	for _, t := range tables {
		visit(t)
	}
	return need
}

// queryTables lists the tables a query reads, lower-cased, from DuckDB's
// syntax tree. ok is false when the list cannot be trusted to be complete:
// the query does not parse, lists the catalog (SHOW, DESCRIBE of the
// session, information_schema) or names a table by schema or catalog.
func (e *Engine) queryTables(ctx context.Context, q string) (tables []string, ok bool, err error) {
	tree, err := e.parseSQL(ctx, q)
	if err != nil {
		return nil, false, err
	}
	if tree.Error || len(tree.Statements) != 1 {
		return nil, false, nil
	}
	ok = true
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			switch x["type"] {
			case "SHOW_REF":
				ok = false
			case "BASE_TABLE":
				schema, _ := x["schema_name"].(string)
				catalog, _ := x["catalog_name"].(string)
				name, _ := x["table_name"].(string)
				if schema != "" || catalog != "" {
					ok = false
				}
				if n := strings.ToLower(name); n != "" && !seen[n] {
					seen[n] = true
					tables = append(tables, n)
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(tree.Statements[0].Node)
	return tables, ok, nil
}
