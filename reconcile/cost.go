package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/batchlake/batchlake/errkind"
	lakesql "github.com/batchlake/batchlake/sql"
)

// costDimensions maps a --by name to its column in the costs view: model is
// the model's family (the costs view's model_family), model_version the exact
// version the provider answered with.
var costDimensions = map[string]string{
	"tenant": "tenant", "job": "job_key", "model": "model_family", "model_version": "model_version", "category": "category",
	"attempt": "attempt", "provider": "provider", "record": "record_id",
	// mode: batch, or sync for the real-time tail (retry --mode sync).
	"mode": "mode",
}

// CostViews are the views CostQuery and UnpricedCosts read: a session for
// them (Scope.Views) reads no attempts, expected or outcomes file.
var CostViews = []string{"costs", "manifests"}

// CostQuery runs the cost attribution of the costs view grouped by dims, for
// one job and/or tenant ("" for all).
func (e *Engine) CostQuery(ctx context.Context, dims []string, job, tenant string) (*sql.Rows, error) {
	return e.CostQueryFamily(ctx, dims, job, tenant, false)
}

// CostQueryFamily is CostQuery; with family, job stands for the job and its
// retry descendants (a fallback's children on other providers too).
func (e *Engine) CostQueryFamily(ctx context.Context, dims []string, job, tenant string, family bool) (*sql.Rows, error) {
	var sel, group []string
	for _, d := range dims {
		d = strings.TrimSpace(d)
		col, ok := costDimensions[d]
		if !ok {
			return nil, &errkind.UsageError{Msg: fmt.Sprintf("--by %q: want some of tenant, job, model, model_version, category, attempt, provider, record, mode", d)}
		}
		sel = append(sel, col+" AS "+d)
		group = append(group, col)
	}
	data := map[string]any{"Select": "", "GroupBy": "", "OrderBy": "cost_usd DESC", "Family": family}
	if len(sel) > 0 {
		data["Select"] = strings.Join(sel, ", ") + ","
		data["GroupBy"] = "GROUP BY " + strings.Join(group, ", ")
		data["OrderBy"] = strings.Join(group, ", ")
	}
	stmts, err := lakesql.Render("cost_by.sql", data)
	if err != nil {
		return nil, err
	}
	// The family's query binds the job in its CTE where the other compares it.
	return e.DB.QueryContext(ctx, stmts[0], job, job, tenant, tenant)
}

// UnpricedCosts lists, by provider and model, the lines of the costs view
// (for one job and tenant, "" for all) that were priced 0 for want of a row
// of the price table: what the cost command warns about.
func (e *Engine) UnpricedCosts(ctx context.Context, job, tenant string) ([]UnpricedModel, error) {
	stmts, err := lakesql.Render("cost_unpriced.sql", nil)
	if err != nil {
		return nil, err
	}
	rows, err := e.DB.QueryContext(ctx, stmts[0], job, job, tenant, tenant)
	if err != nil {
		return nil, fmt.Errorf("sql cost_unpriced.sql: %w", err)
	}
	defer rows.Close()
	var out []UnpricedModel
	for rows.Next() {
		var u UnpricedModel
		if err := rows.Scan(&u.Provider, &u.Model, &u.Lines); err != nil {
			return nil, fmt.Errorf("sql cost_unpriced.sql: %w", err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}
