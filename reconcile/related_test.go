package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

func TestRelated(t *testing.T) {
	t.Parallel()
	m := func(source, prompt string, cfgs ...string) *lake.Manifest {
		return &lake.Manifest{SourceVersion: source, PromptVersion: prompt, ModelConfigHashes: cfgs}
	}
	keys := func(first, last string, m *lake.Manifest) *lake.Manifest {
		m.BusinessKeys = &lake.KeyRange{First: first, Last: last}
		return m
	}
	for _, c := range []struct {
		name string
		a, b *lake.Manifest
		want bool
	}{
		{"the same versions and config", m("s", "p", "c1"), m("s", "p", "c1"), true},
		{"a config in common", m("s", "p", "c1", "c2"), m("s", "p", "c0", "c2"), true},
		{"no config in common", m("s", "p", "c1"), m("s", "p", "c2"), false},
		{"another source version", m("s", "p", "c1"), m("s2", "p", "c1"), false},
		{"another prompt version", m("s", "p", "c1"), m("s", "p2", "c1"), false},
		{"no configs listed", m("s", "p"), m("s", "p", "c2"), true},
		{"a first attempt unknown", nil, m("s", "p", "c2"), true},
		{"both unknown", nil, nil, true},
		{"business keys in ranges that meet", keys("a", "k", m("s", "p", "c1")), keys("k", "z", m("s", "p", "c1")), true},
		{"one range within the other", keys("a", "z", m("s", "p", "c1")), keys("k", "k", m("s", "p", "c1")), true},
		{"business keys in ranges apart", keys("a", "j", m("s", "p", "c1")), keys("k", "z", m("s", "p", "c1")), false},
		{"ranges apart in byte order", keys("job-10", "job-19", m("s", "p", "c1")), keys("job-2", "job-9", m("s", "p", "c1")), false},
		{"no range listed", m("s", "p", "c1"), keys("k", "z", m("s", "p", "c1")), true},
		{"ranges apart, no configs listed", keys("a", "j", m("s", "p")), keys("k", "z", m("s", "p", "c1")), false},
	} {
		if got := related(c.a, c.b); got != c.want {
			t.Errorf("%s: related %v, want %v", c.name, got, c.want)
		}
		if got := related(c.b, c.a); got != c.want {
			t.Errorf("%s, the other way round: related %v, want %v", c.name, got, c.want)
		}
	}
}

// TestJobSessionReadsRelatedJobs: a session about one job's family reads
// the jobs that can hold its records and no other, and its report is the
// one a session over the whole lake gives.
func TestJobSessionReadsRelatedJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x := newLineageLake(t) // t1, prompt p1: r2 failed for good in job 1, r0, r1, r3 succeeded
	plan := func(name, tenant, prompt, dataset string, lines []string, answer string) *lake.Manifest {
		t.Helper()
		res, err := ingest.Plan(ctx, x.l, ingest.PlanOptions{Provider: "openai", Input: writeLines(t, x.dir, name+".jsonl", lines),
			Tenant: tenant, PromptVersion: prompt, DatasetVersion: dataset, TmpDir: x.dir})
		if err != nil {
			t.Fatal(err)
		}
		m := x.manifest(t, res.JobKey)
		x.ingestAndReconcile(t, m, []string{okLine(answer, answer+" in "+name)}, nil)
		return m
	}
	same := []string{requestLine(2), requestLine(5)}
	otherConfig := []string{strings.Replace(requestLine(2), `"model":"gpt-4o-mini"`, `"model":"gpt-4o-mini","temperature":0`, 1)}
	// The same records planned again (another dataset version): the same
	// record ids, so its answer for r2 is the family's r2 accepted.
	again := plan("again", "t1", "p1", "again", same, "r2")
	for _, u := range []struct{ name, tenant, prompt string }{{"other-tenant", "t2", "p1"}, {"other-prompt", "t1", "p2"}} {
		plan(u.name, u.tenant, u.prompt, "", same, "r2")
	}
	plan("other-config", "t1", "p1", "", otherConfig, "r2")
	// Records of the same tenant, versions and config whose business keys
	// (r5, r6) lie past the family's (r0 to r3): a daily job of new
	// records, which shares no record id with the family.
	if later := plan("later-keys", "t1", "p1", "", []string{requestLine(5), requestLine(6)}, "r5"); later.BusinessKeys == nil || *later.BusinessKeys != (lake.KeyRange{First: "r5", Last: "r6"}) {
		t.Fatalf("the later job's manifest keeps business keys %+v, want r5 to r6", later.BusinessKeys)
	}
	if x.m1.BusinessKeys == nil || *x.m1.BusinessKeys != (lake.KeyRange{First: "r0", Last: "r3"}) {
		t.Fatalf("job 1's manifest keeps business keys %+v, want r0 to r3", x.m1.BusinessKeys)
	}

	summaryJSON := func(e *Engine, job string) string {
		t.Helper()
		d, _ := lake.ParseDigest(job)
		s, err := e.Summarize(ctx, x.l, d)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(s)
		return string(b)
	}
	whole := x.session(t)
	defer whole.Close()
	want := []string{x.m1.JobKey, x.m2.JobKey, again.JobKey}
	slices.Sort(want)
	for _, job := range []string{x.m1.JobKey, x.m2.JobKey} {
		e := x.scoped(t, Scope{Job: job})
		var jobs []string
		queryIn(t, e, "SELECT job_key FROM manifests ORDER BY 1", func(v []any) { jobs = append(jobs, v[0].(string)) })
		if !slices.Equal(jobs, want) {
			t.Errorf("job %.12s: the session reads jobs %.12v, want its family and the job of the same records %.12v", job, jobs, want)
		}
		got, all := summaryJSON(e, job), summaryJSON(whole, job)
		if got != all {
			t.Errorf("job %.12s: the report\n%s\nthe report over the whole lake\n%s", job, got, all)
		}
		e.Close()
	}
	s := x.summarize(t, x.m1)
	if s.Expected != 4 || s.Succeeded != 4 || s.Manual != 0 {
		t.Errorf("the family's report: expected %d succeeded %d manual %d, want 4, 4 and 0 (r2 accepted in the job of the same records)", s.Expected, s.Succeeded, s.Manual)
	}

	// A job the lake does not have: the session reads the lake, the report
	// says so.
	missing := fmt.Sprintf("%064x", 7)
	e := x.scoped(t, Scope{Job: missing})
	defer e.Close()
	d, _ := lake.ParseDigest(missing)
	if _, err := e.Summarize(ctx, x.l, d); !errors.Is(err, lake.ErrNotFound) {
		t.Errorf("the report of a job the lake does not have: %v, want not found", err)
	}
}
