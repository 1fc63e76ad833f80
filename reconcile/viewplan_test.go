package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// No view may join two of the lake's tables by job (or tenant) alone: such a
// join pairs each row of a job with every other row of it, which at a million
// records is 10^12 rows (the accepted view once spilled 18 GiB that way and
// failed, before its costs join named the record). DuckDB chooses the join
// order, and a join of two tables that meet only through a third is keyed by
// whatever their conditions share; so every view's plan is checked, over a
// small lake whose job has been reconciled (the plan is the same at any size).
func TestViewsJoinNoTablesByJobAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, m, dir := smallLake(t)
	if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}); err != nil {
		t.Fatal(err)
	}
	e, err := OpenSession(ctx, l, EngineOptions{Threads: 1, TempDir: dir}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, v := range catalogViews {
		var plan string
		if err := e.DB.QueryRowContext(ctx, "EXPLAIN (FORMAT json) SELECT * FROM "+v).Scan(new(string), &plan); err != nil {
			t.Fatalf("explain %s: %v", v, err)
		}
		var nodes []planNode
		if err := json.Unmarshal([]byte(plan), &nodes); err != nil {
			t.Fatalf("explain %s: %v", v, err)
		}
		joins := 0
		var walk func(n planNode)
		walk = func(n planNode) {
			if conds := n.conditions(); conds != nil {
				joins++
				weak := true
				for _, c := range conds {
					if !strings.HasPrefix(c, "job_key = ") && !strings.HasPrefix(c, "tenant = ") {
						weak = false
					}
				}
				if weak {
					t.Errorf("view %s: %s on %v alone pairs every row of a job with every other", v, n.Name, conds)
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
			t.Errorf("view accepted: no join in its plan; the check proves nothing")
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
