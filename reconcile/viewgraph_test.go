package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/batchlake/batchlake/lake"
)

// TestSessionForAQueryReadsOnlyItsViews: a session opened for one query
// creates the views the query reads and the views those read, and stages
// only their tables' files (a query of costs hashes no attempts file); its
// answer is the answer of a session with every view. A query that lists
// the catalog gets every view.
func TestSessionForAQueryReadsOnlyItsViews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, m, dir := smallLake(t)
	if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}); err != nil {
		t.Fatal(err)
	}
	open := func(t *testing.T, q string) (*Engine, map[string]bool) {
		return stagingSession(t, l, dir, Scope{Query: q})
	}
	views := func(t *testing.T, e *Engine) []string {
		t.Helper()
		rows, err := e.DB.QueryContext(ctx, "SELECT view_name FROM duckdb_views() WHERE temporary AND NOT internal ORDER BY view_name")
		if err != nil {
			t.Fatal(err)
		}
		return scanRows(t, rows)
	}
	answer := func(t *testing.T, e *Engine, q string) []string {
		t.Helper()
		rows, err := e.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return scanRows(t, rows)
	}
	full, fullStaged := open(t, "")
	every := views(t, full)
	if len(every) != 15 || !fullStaged["attempts"] || !fullStaged["costs"] {
		t.Fatalf("a session with every view has views %v and staged %v", every, fullStaged)
	}
	for _, c := range []struct {
		name, q string
		views   []string // nil: every view
		staged  []string
	}{
		{"costs", "SELECT category, sum(cost_usd) AS usd FROM costs GROUP BY ALL ORDER BY ALL",
			[]string{"costs", "ingests"}, []string{"costs"}},
		{"records", "SELECT final_state, count(*) FROM records GROUP BY ALL ORDER BY ALL",
			[]string{"manifests", "outcomes", "records"}, []string{"outcomes"}},
		{"a CTE and upper case", "WITH r AS (SELECT * FROM Records) SELECT final_state, count(*) FROM r GROUP BY ALL ORDER BY ALL",
			[]string{"manifests", "outcomes", "records"}, []string{"outcomes"}},
		{"a subquery", "SELECT count(*) FROM costs WHERE job_key IN (SELECT job_key FROM manifests)",
			[]string{"costs", "ingests", "manifests"}, []string{"costs"}},
		{"accepted", "SELECT count(*), count(DISTINCT record_id) FROM accepted",
			[]string{"accepted", "attempts_raw", "costs", "ingests", "outcomes", "report_files"},
			[]string{"attempts", "costs", "outcomes"}},
		{"no view", "SELECT 42", []string{}, nil},
		{"show tables", "SHOW TABLES", nil, nil},
		{"describe", "DESCRIBE costs", nil, nil},
		{"information_schema", "SELECT table_name FROM information_schema.tables ORDER BY ALL", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, staged := open(t, c.q)
			got := views(t, e)
			want, wantStaged := c.views, c.staged
			if want == nil {
				want, wantStaged = every, slices.Sorted(maps.Keys(fullStaged))
			}
			if !slices.Equal(got, want) {
				t.Errorf("views %v, want %v", got, want)
			}
			var gotStaged []string
			for tb := range staged {
				gotStaged = append(gotStaged, tb)
			}
			slices.Sort(gotStaged)
			if !slices.Equal(gotStaged, wantStaged) {
				t.Errorf("staged the files of %v, want %v", gotStaged, wantStaged)
			}
			if a, b := answer(t, e, c.q), answer(t, full, c.q); !slices.Equal(a, b) || len(a) == 0 {
				t.Errorf("answer %v, with every view %v", a, b)
			}
		})
	}
}

// stagingSession opens a session for scope and the set of tables whose
// files it staged (filled as it opens).
func stagingSession(t *testing.T, l *lake.Lake, dir string, scope Scope) (*Engine, map[string]bool) {
	t.Helper()
	var mu sync.Mutex
	staged := map[string]bool{}
	e, err := OpenSession(context.Background(), l, EngineOptions{Threads: 1, TempDir: dir, OnStage: func(key string, _ int64) {
		mu.Lock()
		defer mu.Unlock()
		if table, _, _, _, ok := lake.ParseTableFileKey(key); ok {
			staged[table] = true
		}
	}}, scope)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, staged
}

// scanRows reads every row as one line of text.
func scanRows(t *testing.T, rows *sql.Rows) []string {
	t.Helper()
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for rows.Next() {
		v := make([]any, len(cols))
		p := make([]any, len(cols))
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			t.Fatal(err)
		}
		for i, x := range v {
			if d, ok := x.(duckdb.Decimal); ok {
				v[i] = FormatDecimal(d)
			}
		}
		out = append(out, fmt.Sprint(v...))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCommandViewsSuffice: the cost, manual and estimate commands open
// sessions with only the views their SQL reads (CostViews, ManualViews,
// SettledViews); every query they run works there and answers as with every
// view, and the cost session stages no file but the costs table's.
func TestCommandViewsSuffice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, m, dir := smallLake(t)
	if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}); err != nil {
		t.Fatal(err)
	}
	dims := slices.Sorted(maps.Keys(costDimensions))
	ask := func(t *testing.T, e *Engine, what string) string {
		t.Helper()
		switch what {
		case "cost":
			rows, err := e.CostQueryFamily(ctx, dims, m.JobKey, "", true)
			if err != nil {
				t.Fatal(err)
			}
			got := scanRows(t, rows)
			if len(got) == 0 {
				t.Fatal("no cost rows")
			}
			return fmt.Sprint(got)
		case "unpriced":
			u, err := e.UnpricedCosts(ctx, "", "")
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprint(u)
		case "manual":
			var got []ManualRow
			if err := e.ManualQueue(ctx, "", "", func(r ManualRow) error { got = append(got, r); return nil }); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprint(got)
		default:
			s, err := e.SettledNotBilled(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprint(s)
		}
	}
	full, err := OpenSession(ctx, l, EngineOptions{Threads: 1, TempDir: dir}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	for _, c := range []struct {
		views  []string
		asks   []string
		staged []string
	}{
		{CostViews, []string{"cost", "unpriced"}, []string{"costs"}},
		{ManualViews, []string{"manual"}, []string{"outcomes"}},
		{SettledViews, []string{"settled"}, []string{"expected", "outcomes"}},
	} {
		t.Run(strings.Join(c.views, ","), func(t *testing.T) {
			e, staged := stagingSession(t, l, dir, Scope{Views: c.views})
			if got := slices.Sorted(maps.Keys(staged)); !slices.Equal(got, c.staged) {
				t.Errorf("staged the files of %v, want %v", got, c.staged)
			}
			for _, a := range c.asks {
				if got, want := ask(t, e, a), ask(t, full, a); got != want {
					t.Errorf("%s: %s, with every view %s", a, got, want)
				}
			}
		})
	}
}
