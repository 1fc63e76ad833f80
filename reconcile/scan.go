package reconcile

import (
	"context"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/batchlake/batchlake/lake"
	lakesql "github.com/batchlake/batchlake/sql"
)

// A scanned row of an embedded query whose columns are all text, integers
// or amounts of money (never NULL): the shape of the outcomes, costs and
// retry-set queries.
type scanRow struct {
	s []string     // text columns, in query order
	n []int64      // integer columns, in query order
	m []lake.Money // DECIMAL(38, 18) columns, in query order
}

// colKinds lists each result column as 's' (text), 'n' (integer), 'h' (text
// read as its textHash, in the integer columns: for a comparison, without
// copying the text out) or 'm' (money: a DECIMAL(38, 18), read as its
// unscaled value rather than rendered as text by DuckDB and parsed back).
type colKinds string

// textSeed seeds textHash: hashes compare within one process only.
var textSeed = maphash.MakeSeed()

// textHash is a 64-bit hash of s, the value of an 'h' column.
func textHash(s string) int64 { return int64(maphash.String(textSeed, s)) }

// hashDest scans a text column of database/sql as its textHash.
type hashDest struct{ n *int64 }

func (d hashDest) Scan(src any) error {
	switch v := src.(type) {
	case string:
		*d.n = textHash(v)
	case []byte:
		*d.n = textHash(string(v))
	default:
		return fmt.Errorf("want text, have %T", src)
	}
	return nil
}

// eachRow runs one embedded query (rendered with data) and calls fn for every row, in order. With
// the duckdb_arrow build tag the rows come through DuckDB's Arrow interface in
// column batches (several times faster than database/sql at millions of rows);
// otherwise through database/sql. fn must not keep r.
func (e *Engine) eachRow(ctx context.Context, name string, data any, kinds colKinds, fn func(r *scanRow) error) error {
	stmts, err := lakesql.Render(name, data)
	if err != nil {
		return err
	}
	if len(stmts) != 1 {
		return fmt.Errorf("sql %s: want one statement, have %d", name, len(stmts))
	}
	start := time.Now()
	defer logTiming(name, "scan", start)
	if arrowScan {
		return e.eachRowArrow(ctx, name, stmts[0], kinds, fn)
	}
	return e.eachRowSQL(ctx, name, stmts[0], kinds, fn)
}

func newScanRow(kinds colKinds) *scanRow {
	var r scanRow
	for _, k := range kinds {
		switch k {
		case 's':
			r.s = append(r.s, "")
		case 'm':
			r.m = append(r.m, lake.Money{})
		default:
			r.n = append(r.n, 0)
		}
	}
	return &r
}

// moneyDest scans a DECIMAL(38, 18) of database/sql into Money.
type moneyDest struct{ m *lake.Money }

func (d moneyDest) Scan(src any) error {
	v, ok := src.(duckdb.Decimal)
	if !ok {
		return fmt.Errorf("want a DECIMAL, have %T", src)
	}
	if v.Scale != lake.MoneyScale {
		return fmt.Errorf("want a DECIMAL(38, %d), have DECIMAL(%d, %d)", lake.MoneyScale, v.Width, v.Scale)
	}
	m, err := lake.MoneyFromBig(v.Value)
	if err != nil {
		return err
	}
	*d.m = m
	return nil
}

func (e *Engine) eachRowSQL(ctx context.Context, name, q string, kinds colKinds, fn func(r *scanRow) error) error {
	rows, err := e.DB.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("sql %s: %w", name, err)
	}
	defer rows.Close()
	r := newScanRow(kinds)
	dest := make([]any, len(kinds))
	si, ni, mi := 0, 0, 0
	for i, k := range kinds {
		switch k {
		case 's':
			dest[i] = &r.s[si]
			si++
		case 'm':
			dest[i] = moneyDest{&r.m[mi]}
			mi++
		case 'h':
			dest[i] = hashDest{&r.n[ni]}
			ni++
		default:
			dest[i] = &r.n[ni]
			ni++
		}
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("sql %s: %w", name, err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sql %s: %w", name, err)
	}
	return nil
}
