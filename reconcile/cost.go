package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/batchlake/batchlake/ingest"
	lakesql "github.com/batchlake/batchlake/sql"
)

// costDimensions maps a --by name to its column in the costs view.
var costDimensions = map[string]string{
	"tenant": "tenant", "job": "job_key", "model": "model_version", "category": "category",
	"attempt": "attempt", "provider": "provider", "record": "record_id",
}

// CostQuery runs the cost attribution of the costs view grouped by dims, for
// one job and/or tenant ("" for all).
func (e *Engine) CostQuery(ctx context.Context, dims []string, job, tenant string) (*sql.Rows, error) {
	var sel, group []string
	for _, d := range dims {
		d = strings.TrimSpace(d)
		col, ok := costDimensions[d]
		if !ok {
			return nil, &ingest.UsageError{Msg: fmt.Sprintf("--by %q: want some of tenant, job, model, category, attempt, provider, record", d)}
		}
		sel = append(sel, col+" AS "+d)
		group = append(group, col)
	}
	data := map[string]string{"Select": "", "GroupBy": "", "OrderBy": "cost_usd DESC"}
	if len(sel) > 0 {
		data["Select"] = strings.Join(sel, ", ") + ","
		data["GroupBy"] = "GROUP BY " + strings.Join(group, ", ")
		data["OrderBy"] = strings.Join(group, ", ")
	}
	stmts, err := lakesql.Render("cost_by.sql", data)
	if err != nil {
		return nil, err
	}
	return e.DB.QueryContext(ctx, stmts[0], job, job, tenant, tenant)
}
