package reconcile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

func okLine(id, text string) string {
	return fmt.Sprintf(`{"id":"br_%s","custom_id":%q,"response":{"status_code":200,"request_id":"req_%s","body":{"object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":0}}}},"error":null}`, id, id, id, text)
}

func errLine(id string, status int, typ string) string {
	return fmt.Sprintf(`{"id":"br_%s","custom_id":%q,"response":{"status_code":%d,"request_id":"req_%s","body":{"error":{"message":"m","type":%q,"param":null,"code":null}}},"error":null}`, id, id, status, id, typ)
}

// lineageLake is a lake with one job and its retry child:
//
//	job 1: r0 succeeds, r1 fails with a 500 (retry), r2 fails with a 400
//	       (manual), r3 has no line (retry);
//	job 2: r1 and r3 succeed.
//
// It returns the lake, both manifests, the child's custom id of each retried
// business key, and a function that ingests more files and reconciles a job.
type lineageLake struct {
	l       *lake.Lake
	dir     string
	m1, m2  *lake.Manifest
	childID map[string]string
	n       int
}

func (x *lineageLake) ingestAndReconcile(t *testing.T, m *lake.Manifest, output, errors []string) *Report {
	t.Helper()
	ctx := context.Background()
	x.n++
	for _, f := range []struct {
		channel string
		lines   []string
	}{{ingest.ChannelOutput, output}, {ingest.ChannelError, errors}} {
		if len(f.lines) == 0 {
			continue
		}
		p := writeLines(t, x.dir, fmt.Sprintf("%s-%d.jsonl", f.channel, x.n), f.lines)
		if _, err := ingest.IngestFile(ctx, x.l, m, ingest.FileOptions{Path: p, Channel: f.channel, TmpDir: x.dir}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Run(ctx, x.l, Options{JobKey: m.JobKey, TmpDir: x.dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// requestLine is the OpenAI batch request of record r<i> (custom id r<i>).
func requestLine(i int) string {
	return fmt.Sprintf(`{"custom_id":"r%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"item %d"}]}}`, i, i)
}

// planFirst plans job 1 (x.m1) in a new lake: records r0 to r<n-1>, each
// custom id its business key.
func planFirst(t *testing.T, n int) *lineageLake {
	t.Helper()
	l, dir := testLake(t)
	x := &lineageLake{l: l, dir: dir}
	var input []string
	for i := range n {
		input = append(input, requestLine(i))
	}
	res, err := ingest.Plan(context.Background(), l, ingest.PlanOptions{Provider: "openai", Input: writeLines(t, dir, "input.jsonl", input),
		Tenant: "t1", PromptVersion: "p1", TmpDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	x.m1 = x.manifest(t, res.JobKey)
	return x
}

// retryFirst makes job 1's retry child, job 2 (x.m2).
func (x *lineageLake) retryFirst(t *testing.T) {
	t.Helper()
	d, _ := lake.ParseDigest(x.m1.JobKey)
	rr, err := Retry(context.Background(), x.l, d, x.dir)
	if err != nil || rr.Child == nil {
		t.Fatalf("retry: %v %+v", err, rr)
	}
	x.m2 = x.manifest(t, rr.Child.JobKey)
}

// manifest reads the manifest of job (its key in hex).
func (x *lineageLake) manifest(t *testing.T, job string) *lake.Manifest {
	t.Helper()
	d, _ := lake.ParseDigest(job)
	m, err := x.l.GetManifest(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newLineageLake(t *testing.T) *lineageLake {
	t.Helper()
	x := planFirst(t, 4)
	rep := x.ingestAndReconcile(t, x.m1, []string{okLine("r0", "first r0")}, []string{errLine("r1", 500, "server_error"), errLine("r2", 400, "invalid_request_error")})
	if rep.Succeeded != 1 || rep.RetryRecords != 2 || rep.ManualRecords != 1 {
		t.Fatalf("job 1: %+v", rep)
	}
	x.retryFirst(t)
	x.childID = map[string]string{}
	x.query(t, "SELECT business_key, custom_id FROM expected WHERE job_key = '"+x.m2.JobKey+"'", func(v []any) {
		x.childID[v[0].(string)] = v[1].(string)
	})
	if len(x.childID) != 2 || x.childID["r1"] == "" || x.childID["r3"] == "" {
		t.Fatalf("child custom ids %v", x.childID)
	}
	rep = x.ingestAndReconcile(t, x.m2, []string{okLine(x.childID["r1"], "second r1"), okLine(x.childID["r3"], "second r3")}, nil)
	if rep.Succeeded != 2 || rep.Attempt != 2 {
		t.Fatalf("job 2: %+v", rep)
	}
	return x
}

// session opens a fresh read-only session over the lake; the caller closes it.
func (x *lineageLake) session(t *testing.T) *Engine {
	t.Helper()
	return x.scoped(t, Scope{})
}

// scoped opens a fresh read-only session whose views scope limits; the
// caller closes it.
func (x *lineageLake) scoped(t *testing.T, scope Scope) *Engine {
	t.Helper()
	e, err := OpenSession(context.Background(), x.l, EngineOptions{Threads: 1, TempDir: x.dir}, scope)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// query runs q in a fresh read-only session and calls fn with each row.
func (x *lineageLake) query(t *testing.T, q string, fn func([]any)) {
	t.Helper()
	e := x.session(t)
	defer e.Close()
	queryIn(t, e, q, fn)
}

// queryIn runs q in session e and calls fn with each row.
func queryIn(t *testing.T, e *Engine, q string, fn func([]any)) {
	t.Helper()
	rows, err := e.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		v := make([]any, len(cols))
		p := make([]any, len(cols))
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			t.Fatal(err)
		}
		fn(v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// summarize is the report of job m and its retry descendants, from a fresh
// read-only session.
func (x *lineageLake) summarize(t *testing.T, m *lake.Manifest) *JobSummary {
	t.Helper()
	e := x.session(t)
	defer e.Close()
	d, _ := lake.ParseDigest(m.JobKey)
	s, err := e.Summarize(context.Background(), x.l, d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// acceptedRows maps business key -> "job attempt text raw line" of the accepted view.
func (x *lineageLake) acceptedRows(t *testing.T) map[string]string {
	t.Helper()
	got := map[string]string{}
	x.query(t, `SELECT business_key, job_key, attempt, output_text, raw_sha256, line_no, count(*) OVER (PARTITION BY record_id) FROM accepted`, func(v []any) {
		if v[6].(int64) != 1 {
			t.Errorf("record %v has %d accepted rows", v[0], v[6])
		}
		key := v[0].(string)
		if _, dup := got[key]; dup {
			t.Errorf("business key %s accepted twice", key)
		}
		got[key] = fmt.Sprintf("%s a%v %q %s:%v", v[1].(string)[:8], v[2], v[3], v[4].(string)[:8], v[5])
	})
	return got
}

// TestAcceptedOnePerRecordAcrossGenerations: the accepted view holds exactly
// one result per succeeded record across a job and its retry child, and late
// duplicates — a second output file of the same job repeating a success, and
// a success of attempt 1 arriving after attempt 2 was accepted — change none
// of them, even after both jobs are reconciled again. The manual view and the
// report agree with it throughout (checkSettled).
func TestAcceptedOnePerRecordAcrossGenerations(t *testing.T) {
	t.Parallel()
	x := newLineageLake(t)
	before := x.acceptedRows(t)
	checkSettled(t, x, x.m1, 3, 1)
	if len(before) != 3 || before["r2"] != "" {
		t.Fatalf("accepted %v: want r0, r1, r3", before)
	}
	for k, job := range map[string]*lake.Manifest{"r0": x.m1, "r1": x.m2, "r3": x.m2} {
		if before[k][:8] != job.JobKey[:8] {
			t.Errorf("%s accepted from %s, want job %s", k, before[k], job.JobKey[:8])
		}
	}

	// Late: job 1 gets another output file with r0 again (other text) and a
	// success of r1's attempt 1; job 2 gets a duplicate of r3.
	rep1 := x.ingestAndReconcile(t, x.m1, []string{okLine("r0", "late r0"), okLine("r1", "late r1 attempt 1")}, nil)
	if rep1.Succeeded != 2 || rep1.Duplicate != 2 { // r0 twice, r1 an error and a success
		t.Fatalf("job 1 again: succeeded %d duplicate %d, want 2 and 2", rep1.Succeeded, rep1.Duplicate)
	}
	rep2 := x.ingestAndReconcile(t, x.m2, []string{okLine(x.childID["r3"], "late r3")}, nil)
	if rep2.Duplicate != 1 {
		t.Fatalf("job 2 again: duplicate %d, want 1", rep2.Duplicate)
	}
	after := x.acceptedRows(t)
	checkSettled(t, x, x.m1, 3, 1)
	if len(after) != len(before) {
		t.Errorf("accepted has %d records after late duplicates, want %d", len(after), len(before))
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: accepted %s replaced by late duplicate %s", k, v, after[k])
		}
	}
}

// TestManualView: the manual queue holds the record whose last attempt ended
// in a permanent failure, with its reason, attempts and last job, and nothing
// that was accepted or is still being retried.
func TestManualView(t *testing.T) {
	x := newLineageLake(t)
	var got []string
	x.query(t, `SELECT business_key, outcome, reason, attempts, last_job_key FROM manual ORDER BY business_key`, func(v []any) {
		got = append(got, fmt.Sprintf("%s %s %s %v %s", v[0], v[1], v[2], v[3], v[4]))
	})
	want := []string{fmt.Sprintf("r2 failed_permanent invalid_request_error 1 %s", x.m1.JobKey)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("manual = %q, want %q", got, want)
	}
}

// settledByAccepted is the manual queue computed with the accepted view
// itself: records whose latest disposition (the records view's) is manual and
// that have no accepted row.
const settledByAccepted = `SELECT record_id FROM records WHERE disposition = 'manual' AND record_id NOT IN (SELECT record_id FROM accepted)`

// checkSettled checks that the manual view and the report of job m, which
// tell whether a record has an accepted result from the outcomes
// (accepted_outcome, part_candidates.sql), answer as if they read the
// accepted view: the manual view equals settledByAccepted, and the report's
// succeeded and manual counts equal the accepted view's records and the
// manual view's. want* are lower bounds, so that an empty lake cannot pass.
func checkSettled(t *testing.T, x *lineageLake, m *lake.Manifest, wantSucceeded, wantManual int64) {
	t.Helper()
	var queue, manual, both, succeeded int64
	x.query(t, `WITH q AS (`+settledByAccepted+`), v AS (SELECT record_id FROM manual)
		SELECT (SELECT count(*) FROM q), (SELECT count(*) FROM v), (SELECT count(*) FROM q JOIN v USING (record_id)),
		       (SELECT count(*) FROM accepted WHERE record_id IN (SELECT record_id FROM expected))`, func(v []any) {
		queue, manual, both, succeeded = v[0].(int64), v[1].(int64), v[2].(int64), v[3].(int64)
	})
	if manual != queue || both != queue || queue < wantManual {
		t.Errorf("manual view has %d records, the queue by the accepted view %d, in both %d (want equal sets of at least %d)", manual, queue, both, wantManual)
	}
	// A queued record's row is its records view row: the latest outcome, its
	// job and business key, its attempts and its whole cost.
	var rowsOf, differ int64
	x.query(t, `SELECT count(*), count(*) FILTER (WHERE q.outcome IS DISTINCT FROM r.final_state
		    OR q.last_job_key IS DISTINCT FROM r.last_job_key OR q.business_key IS DISTINCT FROM r.business_key
		    OR q.tenant IS DISTINCT FROM r.tenant OR q.attempts IS DISTINCT FROM r.attempts OR q.cost_usd IS DISTINCT FROM r.cost_usd)
		FROM manual q JOIN records r USING (record_id)`, func(v []any) {
		rowsOf, differ = v[0].(int64), v[1].(int64)
	})
	if rowsOf != manual || differ != 0 {
		t.Errorf("manual view: %d of its %d records found in the records view, %d of them with another latest row", rowsOf, manual, differ)
	}
	s := x.summarize(t, m)
	if s.Succeeded != succeeded || succeeded < wantSucceeded || s.Manual != manual {
		t.Errorf("report: succeeded %d, manual %d; the accepted view has %d records (want at least %d), the manual view %d",
			s.Succeeded, s.Manual, succeeded, wantSucceeded, manual)
	}
}

// TestSettledIsTheAcceptedRecords: on a generated job with every outcome,
// duplicates and unknown ids, at one attempt so that every failure is in the
// manual queue, the manual view and the report answer as the accepted view
// does (checkSettled; TestAcceptedOnePerRecordAcrossGenerations checks the
// same across generations and late duplicates).
func TestSettledIsTheAcceptedRecords(t *testing.T) {
	t.Parallel()
	l, dir := testLake(t)
	g := generate(rand.New(rand.NewPCG(7, 7)), 400, 5, 3)
	m := planAndIngest(t, l, dir, g, 150)
	if _, err := Run(context.Background(), l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	checkSettled(t, &lineageLake{l: l, dir: dir}, m, g.truth.counts["succeeded"], g.truth.counts["failed_permanent"]+g.truth.counts["failed_retryable"])
}

// TestManualQueueLeavesOnLateSuccess: a record whose retry failed for good is
// in the manual queue until a success of its first attempt arrives late; then
// it has an accepted result and leaves the queue (manual view and report),
// though its latest disposition is still manual.
func TestManualQueueLeavesOnLateSuccess(t *testing.T) {
	t.Parallel()
	x := planFirst(t, 2)
	if rep := x.ingestAndReconcile(t, x.m1, []string{okLine("r0", "first r0")}, []string{errLine("r1", 500, "server_error")}); rep.RetryRecords != 1 {
		t.Fatalf("job 1: %+v", rep)
	}
	x.retryFirst(t)
	var childR1 string
	x.query(t, "SELECT custom_id FROM expected WHERE job_key = '"+x.m2.JobKey+"'", func(v []any) { childR1 = v[0].(string) })
	if rep := x.ingestAndReconcile(t, x.m2, nil, []string{errLine(childR1, 400, "invalid_request_error")}); rep.ManualRecords != 1 {
		t.Fatalf("job 2: %+v", rep)
	}
	queue := func() (keys []string) {
		x.query(t, "SELECT business_key FROM manual ORDER BY 1", func(v []any) { keys = append(keys, v[0].(string)) })
		return keys
	}
	if got := queue(); fmt.Sprint(got) != "[r1]" {
		t.Fatalf("manual queue %v, want [r1]", got)
	}
	checkSettled(t, x, x.m1, 1, 1)

	x.ingestAndReconcile(t, x.m1, []string{okLine("r1", "late r1 attempt 1")}, nil)
	if got := queue(); len(got) != 0 {
		t.Errorf("manual queue %v after r1's late success, want none", got)
	}
	var latest string
	x.query(t, "SELECT arg_max(disposition, attempt) FROM outcomes WHERE business_key = 'r1'", func(v []any) { latest = v[0].(string) })
	if latest != "manual" {
		t.Errorf("r1's latest disposition %q, want manual (the queue must leave it for its accepted result)", latest)
	}
	if got := x.acceptedRows(t); got["r1"] == "" || got["r1"][:8] != x.m1.JobKey[:8] {
		t.Errorf("accepted %v: want r1 from job 1", got)
	}
	checkSettled(t, x, x.m1, 2, 0)
	if s := x.summarize(t, x.m1); s.Expected != 2 || s.Succeeded != 2 || s.Manual != 0 {
		t.Errorf("report: expected %d, succeeded %d, manual %d; want 2, 2, 0", s.Expected, s.Succeeded, s.Manual)
	}
}

// TestManualQueueTakesTheRecordsViewsLatest: a record in two jobs of one
// attempt (two inputs that share a request) has one latest outcome, the one
// the records view takes; the manual view and the report count the record as
// that outcome says. Here the latest job says retry and the other manual, so
// the record is not queued.
func TestManualQueueTakesTheRecordsViewsLatest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x := planFirst(t, 2) // r0, r1
	res, err := ingest.Plan(ctx, x.l, ingest.PlanOptions{Provider: "openai", Input: writeLines(t, x.dir, "input2.jsonl", []string{requestLine(1), requestLine(2)}),
		Tenant: "t1", PromptVersion: "p1", TmpDir: x.dir})
	if err != nil {
		t.Fatal(err)
	}
	mB := x.manifest(t, res.JobKey)
	// The job whose outcome for r1 is the latest: the greater hash of the
	// job key (both are attempt 1).
	var latestJob string
	x.query(t, "SELECT job_key FROM manifests ORDER BY hash(job_key) >> 32 DESC LIMIT 1", func(v []any) { latestJob = v[0].(string) })
	latest, other := x.m1, mB
	if latestJob == mB.JobKey {
		latest, other = mB, x.m1
	}
	x.ingestAndReconcile(t, latest, nil, []string{errLine("r1", 500, "server_error")})
	x.ingestAndReconcile(t, other, nil, []string{errLine("r1", 400, "invalid_request_error")})
	var got []string
	x.query(t, "SELECT disposition, last_job_key = '"+latest.JobKey+"' FROM records WHERE business_key = 'r1'", func(v []any) { got = append(got, fmt.Sprint(v...)) })
	if fmt.Sprint(got) != "[retrytrue]" {
		t.Fatalf("records view for r1: %v, want its latest job's retry", got)
	}
	var queued int64
	x.query(t, "SELECT count(*) FROM manual WHERE business_key = 'r1'", func(v []any) { queued = v[0].(int64) })
	if queued != 0 {
		t.Errorf("r1 in the manual queue from the job that is not its latest")
	}
	for _, m := range []*lake.Manifest{x.m1, mB} {
		checkSettled(t, x, m, 0, 0)
	}
}

// TestRecordsViewTakesTheLatestAttempt: the records view shows each record's
// latest attempt (its outcome, disposition and job) with the cost of all its
// attempts, one row per record.
func TestRecordsViewTakesTheLatestAttempt(t *testing.T) {
	t.Parallel()
	x := newLineageLake(t)
	var got []string
	x.query(t, "SELECT business_key, final_state, disposition, attempts, last_job_key, cost_usd > 0 FROM records ORDER BY 1", func(v []any) {
		job := map[string]string{x.m1.JobKey: "job1", x.m2.JobKey: "job2"}[v[4].(string)]
		got = append(got, fmt.Sprint(v[0], " ", v[1], " ", v[2], " ", v[3], " ", job, " ", v[5]))
	})
	want := fmt.Sprint([]string{
		"r0 succeeded accepted 1 job1 true",
		"r1 succeeded accepted 2 job2 true",
		"r2 failed_permanent manual 1 job1 false",
		"r3 succeeded accepted 2 job2 true",
	})
	if fmt.Sprint(got) != want {
		t.Errorf("records %v, want %v", got, want)
	}
}
