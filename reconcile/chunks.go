package reconcile

import (
	"context"
	"fmt"
)

// defaultChunkRows is about how many rows one range query of the outcomes or costs
// table returns. DuckDB materialises a query's result before handing out the
// first row, so this (times ~0.3 KB a row) bounds that memory instead of the
// table's size. The sources are stored in the ranges' order (the expected
// files, the costed table: line_costs.sql), so a range reads only its own
// row groups and smaller ranges cost little more. Tests cut small tables
// into many ranges (EngineOptions.ChunkRows).
const defaultChunkRows = 1 << 16

// defaultGroupRecords is about how many records reconcile classifies at a
// time in a job split into buckets (EngineOptions.GroupRecords): at 10M
// records, 8 groups took about a sixth less cpu than the job whole, most of
// it in outcomes.sql (docs/performance.md), and peaked lower than 16.
const defaultGroupRecords = 1_250_000

// defaultSortRows is about how many rows one statement of cost_sort.sql sorts, when a table's one sort ran out of memory (sort.go):
// DuckDB's sort of every row of a 10M-record job at once does not fit in a
// 256MB --memory-limit with two threads (it fails instead of spilling); a
// million rows at a time does. Each step scans the whole unsorted table for
// its rows, so the steps are slower than one sort: the fallback, not the
// rule. Tests sort small tables in many steps (EngineOptions.SortRows).
const defaultSortRows = 1 << 20

// costRange is one range of cost_scan.sql or cost_sort.sql: with Files, the
// result files OutLo..OutHi; with Lines as well (one file), lines
// LineLo <= line_no < LineHi.
type costRange struct {
	Files          bool
	OutLo, OutHi   int64
	Lines          bool
	LineLo, LineHi int64
}

// costRanges cuts the lines of table (costed, or costed_u before it is
// sorted), ordered by (out_no, line_no), into ranges of about per lines: runs
// of consecutive small files, and a file with more lines than that in even
// spans of its line numbers.
func costRanges(ctx context.Context, e *Engine, table string, per int64) ([]costRange, error) {
	rows, err := e.QueryFile(ctx, "cost_ranges.sql", map[string]string{"Table": table})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		out  []costRange
		cur  *costRange
		curN int64
	)
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur, curN = nil, 0
		}
	}
	for rows.Next() {
		var file, n, first, last int64
		if err := rows.Scan(&file, &n, &first, &last); err != nil {
			return nil, fmt.Errorf("sql cost_ranges.sql: %w", err)
		}
		if n > per {
			flush()
			k := (n + per - 1) / per
			span := last - first + 1
			for j := range k {
				out = append(out, costRange{Files: true, OutLo: file, OutHi: file, Lines: true,
					LineLo: first + span*j/k, LineHi: first + span*(j+1)/k})
			}
			continue
		}
		if cur == nil {
			cur = &costRange{Files: true, OutLo: file}
		}
		cur.OutHi = file
		curN += n
		if curN >= per {
			flush()
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sql cost_ranges.sql: %w", err)
	}
	flush()
	if len(out) == 0 {
		out = []costRange{{}} // no lines: one query, an empty result
	}
	return out, nil
}
