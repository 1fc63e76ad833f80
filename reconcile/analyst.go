package reconcile

import (
	"context"
	"encoding/json"
	"fmt"

	lakesql "github.com/batchlake/batchlake/sql"
)

// ManualRow is one record of the manual queue: what a person has to look at
// and why (the outcome and reason of its last attempt).
type ManualRow struct {
	RecordID    string `json:"record_id"`
	Tenant      string `json:"tenant"`
	BusinessKey string `json:"business_key"`
	Outcome     string `json:"outcome"`
	Reason      string `json:"reason"`
	Attempts    int64  `json:"attempts"`
	LastJobKey  string `json:"last_job_key"`
	// Exact decimal, a JSON number.
	CostUSD json.Number `json:"cost_usd"`
}

// ManualViews are the views ManualQueue reads.
var ManualViews = []string{"manual", "manifests"}

// ManualQueue returns the manual view's rows for a job and its retry
// descendants ("" for every job) and a tenant ("" for all), calling fn for
// each so that a large queue is streamed, not held.
func (e *Engine) ManualQueue(ctx context.Context, job, tenant string, fn func(ManualRow) error) error {
	stmts, err := lakesql.Render("manual_queue.sql", nil)
	if err != nil {
		return err
	}
	rows, err := e.DB.QueryContext(ctx, stmts[0], job, job, tenant, tenant)
	if err != nil {
		return fmt.Errorf("sql manual_queue.sql: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r ManualRow
		var cost *string
		if err := rows.Scan(&r.RecordID, &r.Tenant, &r.BusinessKey, &r.Outcome, &r.Reason, &r.Attempts, &r.LastJobKey, &cost); err != nil {
			return err
		}
		r.CostUSD = "0"
		if cost != nil {
			r.CostUSD = json.Number(trimDecimal(*cost))
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}
