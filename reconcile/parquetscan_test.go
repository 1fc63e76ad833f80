package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

type scanRowA struct {
	X int64  `parquet:"x"`
	Y string `parquet:"y"`
}

type scanRowB struct {
	X int64 `parquet:"x"`
}

// Many files of two schemas, in folders named key=value: parquetScan reads
// them in two groups without union_by_name and gives the rows, and only the
// columns, that one read_parquet with union_by_name gives.
func TestParquetScanGroupsBySchema(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var paths []string
	rows := 0
	for i := range groupedScanFiles + 6 {
		p := filepath.Join(dir, fmt.Sprintf("tenant=t%d", i%2), fmt.Sprintf("job=%d", i), "f.parquet")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if i%3 == 0 {
			err = parquet.WriteFile(p, []scanRowB{{X: int64(i)}})
			rows++
		} else {
			err = parquet.WriteFile(p, []scanRowA{{X: int64(i), Y: fmt.Sprint("y", i)}, {X: 1000 + int64(i)}})
			rows += 2
		}
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	expr, err := parquetScan(ctx, paths)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(expr, "union_by_name") || strings.Count(expr, "read_parquet(") != 2 {
		t.Fatalf("not read in two groups of one schema: %.300s", expr)
	}
	l, _ := testLake(t)
	e, err := OpenEngine(l, EngineOptions{Threads: 1, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	dump := func(from string) string {
		t.Helper()
		rows, err := e.DB.QueryContext(ctx, "SELECT * FROM "+from+" ORDER BY ALL")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var b strings.Builder
		fmt.Fprintln(&b, cols)
		for rows.Next() {
			var x int64
			var y *string
			if err := rows.Scan(&x, &y); err != nil {
				t.Fatal(err)
			}
			if y == nil {
				fmt.Fprintln(&b, x, "NULL")
			} else {
				fmt.Fprintln(&b, x, *y)
			}
		}
		return b.String()
	}
	want := dump("read_parquet(" + sqlList(paths) + ", union_by_name = true, hive_partitioning = false)")
	if got := dump(expr); got != want {
		t.Errorf("grouped scan:\n%.400s\nwant\n%.400s", got, want)
	}
	if !strings.HasPrefix(want, "[x y]\n") || strings.Count(want, "\n") != 1+rows {
		t.Errorf("unexpected rows read with union_by_name:\n%.400s", want)
	}
	// Few files: as before, one read_parquet with union_by_name.
	if expr, err := parquetScan(ctx, paths[:3]); err != nil || !strings.Contains(expr, "union_by_name = true") {
		t.Errorf("3 files: %s, %v", expr, err)
	}
}
