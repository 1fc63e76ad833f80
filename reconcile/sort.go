package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/duckdb/duckdb-go/v2"
)

// The costed table is stored sorted, so that its range reads (cost_scan.sql)
// touch only their own row groups and keep the stored order. It is first
// sorted in one statement, the fastest way while it fits; DuckDB's sort of
// every row at once needs memory that grows with the job and fails rather
// than spills when it does not fit (at 10M records under --memory-limit
// 256MB). Then the table is stored unsorted and sorted in steps of about
// EngineOptions.SortRows rows, whose memory does not grow with the job (at
// 10M under 256MB they fit). EngineOptions.SortInSteps makes tests take the
// steps. The outcomes table needs no such sort (outcomes.sql).

// classify runs reconcile.sql (the result files numbered and priced),
// lines.sql (every line classified and priced, each record's best line) and
// outcomes.sql (each record's outcome). With groups (sourceGroups), the last
// of which is the whole job's sources, lines.sql and outcomes.sql run once
// per group of buckets over that group's sources, and the whole job's are in
// view again at the end.
func classify(ctx context.Context, e *Engine, gate string, acceptTruncated bool, maxAttempts int, groups []sourceSet) error {
	if err := e.ExecFile(ctx, "reconcile.sql", struct{ SnapshotSuffix string }{SnapshotSuffix}); err != nil {
		return err
	}
	narrow, err := narrowPrices(ctx, e)
	if err != nil {
		return err
	}
	group := func(g int) error {
		if err := e.ExecFile(ctx, "lines.sql", map[string]any{"Gate": gate, "AcceptTruncated": acceptTruncated, "Narrow": narrow, "Group": g, "Insert": g > 0}); err != nil {
			return err
		}
		return e.ExecFile(ctx, "outcomes.sql", map[string]any{"MaxAttempts": maxAttempts, "Group": g, "Insert": g > 0})
	}
	if len(groups) == 0 {
		return group(0)
	}
	all := groups[len(groups)-1]
	e.groups = len(groups) - 1
	for g, s := range groups[:len(groups)-1] {
		if err := e.ExecFile(ctx, s.file, s.params); err != nil {
			return err
		}
		if err := group(g); err != nil {
			return err
		}
	}
	return e.ExecFile(ctx, all.file, all.params)
}

// narrowPrices tells whether lines.sql may price the job's lines in
// DECIMAL(18, 12) (narrow_prices.sql, over model_prices).
func narrowPrices(ctx context.Context, e *Engine) (bool, error) {
	rows, err := e.QueryFile(ctx, "narrow_prices.sql", nil)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return false, errors.Join(errors.New("narrow_prices.sql: no row"), rows.Err())
	}
	var narrow bool
	if err := rows.Scan(&narrow); err != nil {
		return false, fmt.Errorf("narrow_prices.sql: %w", err)
	}
	return narrow, rows.Close()
}

// costLines runs line_costs.sql (each line's cost category, once the
// dispositions are settled), stored in the costs table's order, and the
// views over it (cost_views.sql).
func costLines(ctx context.Context, e *Engine) error {
	err := e.sortOnceOrInSteps("lines' costs",
		func() error {
			groups := max(e.groups, 1)
			for g := range groups {
				err := e.ExecFile(ctx, "line_costs.sql", map[string]any{"Sorted": true, "Grouped": e.groups > 0, "Group": g,
					"Insert": g > 0, "Last": g == groups-1})
				if err != nil {
					return err
				}
			}
			return nil
		},
		func() error {
			if err := e.ExecFile(ctx, "line_costs.sql", map[string]any{"Sorted": false, "Grouped": false, "Group": 0, "Insert": false, "Last": true}); err != nil {
				return err
			}
			ranges, _, err := costRanges(ctx, e, "costed_u", e.sortRows)
			if err != nil {
				return err
			}
			return e.ExecFile(ctx, "cost_sort.sql", map[string]any{"Ranges": ranges})
		})
	if err != nil {
		return err
	}
	return e.ExecFile(ctx, "cost_views.sql", nil)
}

// sortOnceOrInSteps runs once (the table in one sorted statement) and, if
// DuckDB ran out of memory there, says so and runs steps (the table stored
// unsorted, then sorted a range at a time). EngineOptions.SortInSteps goes
// straight to the steps.
func (e *Engine) sortOnceOrInSteps(what string, once, steps func() error) error {
	if !e.sortInSteps {
		err := once()
		if !outOfMemory(err) {
			return err
		}
		slog.Warn("reconcile: the "+what+" did not fit in DuckDB's memory limit in one sort; sorting them in steps", "err", err)
	}
	return steps()
}

// outOfMemory reports whether err is DuckDB's out-of-memory error.
func outOfMemory(err error) bool {
	var de *duckdb.Error
	return errors.As(err, &de) && de.Type == duckdb.ErrorTypeOutOfMemory
}
