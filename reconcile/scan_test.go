package reconcile

import (
	"context"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// TestScanMoney: a DECIMAL(38, 18) column scanned as money ('m') is the
// amount DuckDB renders as text, through database/sql and through Arrow
// alike, and a column of another type is refused.
func TestScanMoney(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, _ := reconciledSession(t)
	// Amounts of every size the column holds, beside the job's own costs.
	q := `SELECT record_id, cost_usd, CAST(cost_usd AS VARCHAR) FROM costs
	      UNION ALL SELECT 'x' || i, v, CAST(v AS VARCHAR) FROM (VALUES
	          (1, CAST('0' AS DECIMAL(38, 18))), (2, CAST('0.000000000000000001' AS DECIMAL(38, 18))),
	          (3, CAST('18446744073.709551616' AS DECIMAL(38, 18))),
	          (4, CAST('99999999999999999999.999999999999999999' AS DECIMAL(38, 18)))) t(i, v)
	      ORDER BY 1`
	type row struct {
		id   string
		cost lake.Money
	}
	read := func(scan func(context.Context, string, string, colKinds, func(*scanRow) error) error) []row {
		var rows []row
		err := scan(ctx, "test", q, "sms", func(r *scanRow) error {
			want, err := lake.ParseMoney(r.s[1])
			if err != nil {
				t.Fatal(err)
			}
			if r.m[0] != want {
				t.Errorf("%s: scanned %s, DuckDB renders %s", r.s[0], r.m[0], r.s[1])
			}
			rows = append(rows, row{r.s[0], r.m[0]})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	viaSQL := read(e.eachRowSQL)
	if len(viaSQL) < 5 {
		t.Fatalf("%d rows, want the job's costs and 4 more", len(viaSQL))
	}
	if arrowScan {
		viaArrow := read(e.eachRowArrow)
		if len(viaArrow) != len(viaSQL) {
			t.Fatalf("%d rows through Arrow, %d through database/sql", len(viaArrow), len(viaSQL))
		}
		for i := range viaSQL {
			if viaArrow[i] != viaSQL[i] {
				t.Errorf("row %d: %v through Arrow, %v through database/sql", i, viaArrow[i], viaSQL[i])
			}
		}
	}
	// A negative amount is refused, and through Arrow the error names the row.
	neg := "SELECT 'r1' AS record_id, CAST(-1 AS DECIMAL(38, 18)) AS cost_usd"
	if err := e.eachRowSQL(ctx, "test", neg, "sm", func(*scanRow) error { return nil }); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("a negative amount through database/sql: %v, want an error saying negative", err)
	}
	if arrowScan {
		if err := e.eachRowArrow(ctx, "test", neg, "sm", func(*scanRow) error { return nil }); err == nil || !strings.Contains(err.Error(), `record_id "r1"`) {
			t.Errorf("a negative amount through Arrow: %v, want an error naming record_id \"r1\"", err)
		}
	}
	for _, bad := range []string{"SELECT 0.5::DOUBLE", "SELECT CAST(1 AS DECIMAL(38, 6))", "SELECT '1'"} {
		if err := e.eachRowSQL(ctx, "test", bad, "m", func(*scanRow) error { return nil }); err == nil {
			t.Errorf("%s scanned as money through database/sql", bad)
		}
		if arrowScan {
			if err := e.eachRowArrow(ctx, "test", bad, "m", func(*scanRow) error { return nil }); err == nil {
				t.Errorf("%s scanned as money through Arrow", bad)
			}
		}
	}
}

// TestScanIntegers: every integer type the SQL hands the Go side (the cost
// category is a UTINYINT) scans as the same number through database/sql and
// through Arrow.
func TestScanIntegers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, _ := reconciledSession(t)
	q := `SELECT CAST(-3 AS TINYINT), CAST(-300 AS SMALLINT), CAST(-70000 AS INTEGER), CAST(-5000000000 AS BIGINT),
	             CAST(255 AS UTINYINT), CAST(65535 AS USMALLINT), CAST(4294967295 AS UINTEGER)`
	want := []int64{-3, -300, -70000, -5000000000, 255, 65535, 4294967295}
	scans := map[string]func(context.Context, string, string, colKinds, func(*scanRow) error) error{"database/sql": e.eachRowSQL}
	if arrowScan {
		scans["Arrow"] = e.eachRowArrow
	}
	for name, scan := range scans {
		rows := 0
		err := scan(ctx, "test", q, "nnnnnnn", func(r *scanRow) error {
			rows++
			for i, w := range want {
				if r.n[i] != w {
					t.Errorf("%s: column %d scanned as %d, want %d", name, i, r.n[i], w)
				}
			}
			return nil
		})
		if err != nil || rows != 1 {
			t.Errorf("%s: %d rows, %v", name, rows, err)
		}
	}
}
