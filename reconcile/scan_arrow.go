//go:build duckdb_arrow

package reconcile

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"

	"github.com/batchlake/batchlake/lake"
)

const arrowScan = true

// eachRowArrow reads the query's result as Arrow record batches and hands
// the rows to fn one by one.
func (e *Engine) eachRowArrow(ctx context.Context, name, q string, kinds colKinds, fn func(r *scanRow) error) error {
	return e.arrowQuery(ctx, name, q, func(rr array.RecordReader) error {
		r := newScanRow(kinds)
		for rr.Next() {
			rec := rr.RecordBatch()
			if int(rec.NumCols()) != len(kinds) {
				return fmt.Errorf("sql %s: %d columns, want %d", name, rec.NumCols(), len(kinds))
			}
			strs := make([]func(int) string, 0, len(r.s))
			ints := make([]func(int) int64, 0, len(r.n))
			moneys := make([]*array.Decimal128, 0, len(r.m))
			for c, k := range kinds {
				col := rec.Column(c)
				if col.NullN() > 0 {
					return fmt.Errorf("sql %s: column %s has NULLs", name, rec.ColumnName(c))
				}
				var err error
				switch k {
				case 's':
					var get func(int) string
					get, err = arrowStrings(col)
					strs = append(strs, get)
				case 'm':
					var d *array.Decimal128
					d, err = arrowMoney(col)
					moneys = append(moneys, d)
				case 'h':
					var get func(int) int64
					get, err = arrowHashes(col)
					ints = append(ints, get)
				default:
					var get func(int) int64
					get, err = arrowInts(col)
					ints = append(ints, get)
				}
				if err != nil {
					return fmt.Errorf("sql %s: column %s: %w", name, rec.ColumnName(c), err)
				}
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				for c, get := range strs {
					r.s[c] = get(i)
				}
				for c, get := range ints {
					r.n[c] = get(i)
				}
				for c, d := range moneys {
					v := d.Value(i)
					m, err := lake.MoneyFromUnscaled(v.HighBits(), v.LowBits())
					if err != nil {
						return fmt.Errorf("sql %s: %s: %w", name, rowName(rec, kinds, r), err)
					}
					r.m[c] = m
				}
				if err := fn(r); err != nil {
					return err
				}
			}
		}
		if err := rr.Err(); err != nil {
			return fmt.Errorf("sql %s: %w", name, err)
		}
		return nil
	})
}

// arrowStrings returns a getter of a text column. Values are copied out of
// the batch (Value returns views into Arrow buffers that are released).
// A run of equal values (job_key, tenant, categories) shares one copy.
func arrowStrings(a arrow.Array) (func(int) string, error) {
	var last string
	return arrowText(a, func(v string) string {
		if v != last {
			last = clone(v)
		}
		return last
	})
}

// arrowHashes returns a getter of a text column's values' textHash, which
// reads each value where it lies.
func arrowHashes(a arrow.Array) (func(int) int64, error) {
	return arrowText(a, textHash)
}

// arrowText returns a getter of f of a text column's values, each a view
// into the batch that f must not keep.
func arrowText[T any](a arrow.Array, f func(string) T) (func(int) T, error) {
	switch c := a.(type) {
	case *array.String:
		return func(i int) T { return f(c.Value(i)) }, nil
	case *array.LargeString:
		return func(i int) T { return f(c.Value(i)) }, nil
	case *array.StringView:
		return func(i int) T { return f(c.Value(i)) }, nil
	case *array.Dictionary:
		d, err := arrowText(c.Dictionary(), f)
		if err != nil {
			return nil, err
		}
		return func(i int) T { return d(c.GetValueIndex(i)) }, nil
	}
	return nil, fmt.Errorf("want text, have Arrow %s", a.DataType())
}

func clone(s string) string { return string([]byte(s)) }

// rowName names a row of rec in an error: by its first text column (the
// record or line it is about, in the queries that scan money).
func rowName(rec arrow.RecordBatch, kinds colKinds, r *scanRow) string {
	for c, k := range kinds {
		if k == 's' {
			return fmt.Sprintf("the row with %s %q", rec.ColumnName(c), r.s[0])
		}
	}
	return "a row"
}

// arrowMoney checks that a is a DECIMAL(38, 18) column (lake.Money) and
// returns it.
func arrowMoney(a arrow.Array) (*array.Decimal128, error) {
	d, ok := a.(*array.Decimal128)
	if !ok {
		return nil, fmt.Errorf("want a DECIMAL(38, %d), have Arrow %s", lake.MoneyScale, a.DataType())
	}
	if s := d.DataType().(*arrow.Decimal128Type).Scale; s != lake.MoneyScale {
		return nil, fmt.Errorf("want a DECIMAL(38, %d), have Arrow %s", lake.MoneyScale, a.DataType())
	}
	return d, nil
}

// arrowInts returns a getter of an integer column (any type but UBIGINT,
// whose values need not fit an int64).
func arrowInts(a arrow.Array) (func(int) int64, error) {
	switch c := a.(type) {
	case *array.Int64:
		return c.Value, nil
	case *array.Int32:
		return widen(c.Value), nil
	case *array.Int16:
		return widen(c.Value), nil
	case *array.Int8:
		return widen(c.Value), nil
	case *array.Uint32:
		return widen(c.Value), nil
	case *array.Uint16:
		return widen(c.Value), nil
	case *array.Uint8:
		return widen(c.Value), nil
	}
	return nil, fmt.Errorf("want an integer, have Arrow %s", a.DataType())
}

// widen turns a getter of a narrower integer into one of int64.
func widen[T int8 | int16 | int32 | uint8 | uint16 | uint32](get func(int) T) func(int) int64 {
	return func(i int) int64 { return int64(get(i)) }
}

// arrowQuery runs q on the session's connection through DuckDB's Arrow
// interface and hands fn the record reader.
func (e *Engine) arrowQuery(ctx context.Context, name, q string, fn func(array.RecordReader) error) error {
	return e.rawConn(ctx, func(c driver.Conn) error {
		ar, err := duckdb.NewArrowFromConn(c)
		if err != nil {
			return err
		}
		rr, err := ar.QueryContext(ctx, q)
		if err != nil {
			return fmt.Errorf("sql %s: %w", name, err)
		}
		defer rr.Release()
		return fn(rr)
	})
}
