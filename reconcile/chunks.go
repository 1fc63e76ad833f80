package reconcile

import (
	"context"
	"fmt"
	"math"
	"slices"
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

// costRange is one range of the costs table's order, for cost_scan.sql,
// cost_rows.sql or cost_sort.sql. With Known, the lines of the expected
// records at PosLo <= pos < PosHi (rows of one expected file); with Unknown,
// lines of no record: with Files, of the result files OutLo..OutHi, with
// Lines as well (one file), lines LineLo <= line_no < LineHi. The zero
// range is every line.
type costRange struct {
	Known          bool
	PosLo, PosHi   int64
	Unknown        bool
	Files          bool
	OutLo, OutHi   int64
	Lines          bool
	LineLo, LineHi int64
}

// posRows is the mask of a pos's row number in its expected file (sources.sql).
const posRows = 1<<40 - 1

// costRanges cuts the lines of table (costed, or costed_u before it is
// sorted; line_costs in a merge), in the costs table's order, into ranges of
// about per lines: first the lines of each expected file's records, in even
// spans of its rows, never two files in one range; then the lines of no
// record, runs of consecutive small result files and a file with more lines
// than per in even spans of its line numbers. known is how many lines of
// expected records the table holds.
func costRanges(ctx context.Context, e *Engine, table string, per int64) (ranges []costRange, known int64, err error) {
	rows, err := e.QueryFile(ctx, "cost_ranges.sql", map[string]string{"Table": table})
	if err != nil {
		return nil, 0, err
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
		var unknown bool
		var part, n, first, last int64
		if err := rows.Scan(&unknown, &part, &n, &first, &last); err != nil {
			return nil, 0, fmt.Errorf("sql cost_ranges.sql: %w", err)
		}
		k := (n + per - 1) / per
		span := last - first + 1
		if !unknown {
			k = min(k, span) // at most one range a row: none empty (a record has many lines at one pos)
			for j := range k {
				out = append(out, costRange{Known: true,
					PosLo: part<<40 | (first + span*j/k), PosHi: part<<40 | (first + span*(j+1)/k)})
			}
			known += n
			continue
		}
		if n > per {
			flush()
			for j := range k {
				out = append(out, costRange{Unknown: true, Files: true, OutLo: part, OutHi: part, Lines: true,
					LineLo: first + span*j/k, LineHi: first + span*(j+1)/k})
			}
			continue
		}
		if cur == nil {
			cur = &costRange{Unknown: true, Files: true, OutLo: part}
		}
		cur.OutHi = part
		curN += n
		if curN >= per {
			flush()
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sql cost_ranges.sql: %w", err)
	}
	flush()
	if len(out) == 0 {
		out = []costRange{{}} // no lines: one query, an empty result
	}
	return out, known, nil
}

// costOrder checks that cost rows come in the costs table's order: by the
// record's pos (lines of no record, pos < 0, after every other), then by
// (out_no, line_no), each row after the one before.
type costOrder struct {
	last    [3]int64
	started bool
}

func (o *costOrder) next(pos, out, line int64) error {
	k := [3]int64{pos, out, line}
	if pos < 0 {
		k[0] = math.MaxInt64
	}
	if o.started && slices.Compare(k[:], o.last[:]) <= 0 {
		return fmt.Errorf("reconcile: cost rows out of order: %s after %s", costAt(k), costAt(o.last))
	}
	o.last, o.started = k, true
	return nil
}

func costAt(k [3]int64) string {
	if k[0] == math.MaxInt64 {
		return fmt.Sprintf("file %d line %d (no record)", k[1], k[2])
	}
	return fmt.Sprintf("file %d line %d (expected file %d row %d)", k[1], k[2], k[0]>>40, k[0]&posRows)
}
