package reconcile

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// No view may join two of the lake's tables by job (or tenant) alone: such a
// join pairs each row of a job with every other row of it, which at a million
// records is 10^12 rows (the accepted view once spilled 18 GiB that way and
// failed, before its costs join named the record). DuckDB chooses the join
// order, and a join of two tables that meet only through a third is keyed by
// whatever their conditions share; so every view's plan is checked, in a
// session and in a live catalog, over a small lake whose job has been
// reconciled (the plan is the same at any size). A join by job of the small
// tables built from the markers (a job's manifest, its report's files) is
// fine: only joins of Parquet tables on both sides count.
func TestViewsJoinNoTablesByJobAlone(t *testing.T) {
	t.Parallel()
	e, l, dir := reconciledSession(t)
	checkViewJoins(t, "session", e.DB)

	out := filepath.Join(dir, "analytics.duckdb")
	if _, err := Catalog(context.Background(), l, out, EngineOptions{Threads: 1, TempDir: t.TempDir()}, CatalogOptions{}); err != nil {
		t.Fatal(err)
	}
	// A live catalog's paths are relative to its folder: DuckDB resolves
	// them against the current directory, so they are planned from there.
	db, err := sql.Open("duckdb", out+"?access_mode=READ_ONLY&file_search_path="+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkViewJoins(t, "live catalog", db)
}

// checkViewJoins explains each catalog view in db and reports every join of
// Parquet tables keyed by job or tenant alone.
func checkViewJoins(t *testing.T, where string, db *sql.DB) {
	t.Helper()
	for _, v := range catalogViews {
		var plan string
		if err := db.QueryRow("EXPLAIN (FORMAT json) SELECT * FROM "+v).Scan(new(string), &plan); err != nil {
			t.Fatalf("%s: explain %s: %v", where, v, err)
		}
		var nodes []planNode
		if err := json.Unmarshal([]byte(plan), &nodes); err != nil {
			t.Fatalf("%s: explain %s: %v", where, v, err)
		}
		joins := 0
		var walk func(n planNode)
		walk = func(n planNode) {
			if conds := n.conditions(); conds != nil && len(n.Children) == 2 && n.Children[0].readsParquet() && n.Children[1].readsParquet() {
				joins++
				weak := true
				for _, c := range conds {
					if !strings.HasPrefix(c, "job_key = ") && !strings.HasPrefix(c, "tenant = ") {
						weak = false
					}
				}
				if weak {
					t.Errorf("%s: view %s: %s of two lake tables on %v alone pairs every row of a job with every other", where, v, n.Name, conds)
				}
			}
			for _, c := range n.Children {
				walk(c)
			}
		}
		for _, n := range nodes {
			walk(n)
		}
		if v == "accepted" && joins == 0 {
			t.Errorf("%s: view accepted: no join of lake tables in its plan; the check proves nothing", where)
		}
	}
}

// planNode is an operator of DuckDB's EXPLAIN (FORMAT json).
type planNode struct {
	Name      string         `json:"name"`
	ExtraInfo map[string]any `json:"extra_info"`
	Children  []planNode     `json:"children"`
}

// conditions are a join's conditions (nil for an operator that is not one).
func (n planNode) conditions() []string {
	switch c := n.ExtraInfo["Conditions"].(type) {
	case string:
		return []string{c}
	case []any:
		out := make([]string, 0, len(c))
		for _, x := range c {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

// readsParquet reports whether the operator's subtree reads Parquet files.
func (n planNode) readsParquet() bool {
	if strings.Contains(strings.ToUpper(n.Name), "PARQUET") || strings.Contains(strings.ToUpper(fmt.Sprint(n.ExtraInfo["Function"])), "PARQUET") {
		return true
	}
	for _, c := range n.Children {
		if c.readsParquet() {
			return true
		}
	}
	return false
}
