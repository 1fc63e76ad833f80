package reconcile

import "context"

// classify runs reconcile.sql (every line classified and priced, each
// record's outcome) and stores the outcomes table in record_id order: sorted
// at once when the job has up to sortRows records, else in steps
// (outcome_sort.sql), so that the sort's memory does not grow with the job.
func classify(ctx context.Context, e *Engine, gate string, maxAttempts int, expected int64) error {
	ranges := recordRanges(expected, sortRows)
	if err := e.ExecFile(ctx, "reconcile.sql", map[string]any{"Gate": gate, "MaxAttempts": maxAttempts, "Sorted": len(ranges) == 1}); err != nil {
		return err
	}
	if len(ranges) == 1 {
		return nil
	}
	return e.ExecFile(ctx, "outcome_sort.sql", map[string]any{"Ranges": ranges})
}

// costLines runs line_costs.sql (each line's cost category, once the
// dispositions are settled) and stores the lines in the costs table's order.
func costLines(ctx context.Context, e *Engine) error {
	if err := e.ExecFile(ctx, "line_costs.sql", nil); err != nil {
		return err
	}
	ranges, err := costRanges(ctx, e, "costed_u", sortRows)
	if err != nil {
		return err
	}
	return e.ExecFile(ctx, "cost_sort.sql", map[string]any{"Ranges": ranges})
}
