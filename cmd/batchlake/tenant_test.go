package main

import (
	"strings"
	"testing"
)

// TestTenantScope plans, ingests and reconciles the same records for tenants
// A and B in one lake, then proves `sql --tenant A` sees A's rows in every
// view and none of B's — not even when the query names B's partition files —
// and that a tenant scope with ../ or / is refused (exit 2).
func TestTenantScope(t *testing.T) {
	b := newBox(t)
	f := newFlowFiles(t)
	jobs := map[string]string{}
	for _, tenant := range []string{"tenantA", "tenantB"} {
		job := jobOf(t, b.want([]int{0}, "plan", "--input", f.input, "--tenant", tenant, "--prompt-version", "p1", "--shard-max-records", "5"))
		// One result file in two jobs is refused without --force (its lines
		// would count twice); here it stands for each tenant's own answers.
		b.want([]int{0}, "ingest", "--job", job, "--output", f.output, "--errors", f.errors, "--force")
		b.want([]int{exitReview}, "reconcile", "--job", job)
		jobs[tenant] = job
	}
	if jobs["tenantA"] == jobs["tenantB"] {
		t.Fatal("two tenants got one job key")
	}
	a, bj := jobs["tenantA"], jobs["tenantB"]
	for _, q := range []struct{ view, filter string }{
		{"manifests", "job_key"}, {"shards", "job_key"}, {"expected", "job_key"}, {"attempts", "job_key"},
		{"quarantine", "job_key"}, {"outcomes", "job_key"}, {"costs", "job_key"}, {"ledger", "job_key"}, {"records", "last_job_key"},
	} {
		all := b.sqlCount("SELECT count(*) FROM " + q.view + " WHERE " + q.filter + " = '" + bj + "'")
		seen := b.sqlCount("SELECT count(*) FROM "+q.view+" WHERE "+q.filter+" = '"+bj+"'", "--tenant", "tenantA")
		own := b.sqlCount("SELECT count(*) FROM "+q.view+" WHERE "+q.filter+" = '"+a+"'", "--tenant", "tenantA")
		if all == 0 || own == 0 {
			t.Errorf("view %s: %v rows of B unscoped, %v of A scoped: the check would prove nothing", q.view, all, own)
		}
		if seen != 0 {
			t.Errorf("view %s: sql --tenant tenantA sees %v of tenant B's rows", q.view, seen)
		}
	}
	// Reading B's partition directly must fail, scoped or not confined to the views.
	for _, q := range []string{
		"SELECT count(*) FROM read_parquet('" + b.lake + "/tables/attempts/tenant=tenantB/**/*.parquet')",
		"SELECT count(*) FROM '" + b.lake + "/tables/attempts/tenant=tenantB/**/*.parquet'",
	} {
		if r := b.do("sql", "--tenant", "tenantA", "--format", "json", q); r.code == 0 {
			t.Errorf("sql --tenant tenantA read tenant B's files: %s", r)
		}
	}
	for _, bad := range []string{"../tenantB", "tenantA/../tenantB", "tenantB/", ".."} {
		r := b.do("sql", "--tenant", bad, "SELECT 1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "tenant") {
			t.Errorf("sql --tenant %q: want exit 2 naming the tenant, got %s", bad, r)
		}
	}
	b.contained()
	record(t, "tenants", "sql --tenant A over a lake holding tenant B", !t.Failed(), 0)
}
