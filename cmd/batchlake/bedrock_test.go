package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"

	"github.com/batchlake/batchlake/internal/fakebedrock"
	"github.com/batchlake/batchlake/internal/fakeopenai"
)

// TestBedrockProcess runs the binary as an orchestrator would against an
// s3:// lake on the S3 test server and the fake Bedrock control plane:
// plan --provider bedrock → submit (twice, the first losing a create
// response) → status --wait → collect → reconcile, and checks one job per
// shard, the exact report against the fake's outcomes, the manifest
// cross-check in collect's result, and that the AWS secret key appears in
// no output.
func TestBedrockProcess(t *testing.T) {
	bin := binary(t)
	faker := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	s3srv := httptest.NewServer(faker.Server())
	defer s3srv.Close()
	q := url.Values{"region": {"us-east-1"}, "endpoint": {s3srv.URL}, "use_path_style": {"true"}, "disable_https": {"true"},
		"response_checksum_validation": {"when_required"}, "request_checksum_calculation": {"when_required"}}
	secret := "aws-SECRET-" + secretKey(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIATESTBATCHLAKE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	fake := fakebedrock.New(fakebedrock.Options{Seed: 5, Rates: &fakebedrock.Rates{BadRequest: 0.2, Throttled: 0.05, ServerError: 0.05, Empty: 0.05},
		Faults: fakebedrock.Faults{CreateLost: 1, Partial: 1},
		OpenBucket: func(ctx context.Context, name string) (*blob.Bucket, error) {
			return blob.OpenBucket(ctx, "s3://"+name+"?"+q.Encode())
		}})
	brk := httptest.NewServer(fake.Handler())
	defer brk.Close()

	lakeURL := "s3://lake?" + q.Encode()
	tmp := t.TempDir()
	var outputs [][]byte
	env := []string{"AWS_ACCESS_KEY_ID=AKIATESTBATCHLAKE", "AWS_SECRET_ACCESS_KEY=" + secret, "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull, "AWS_EC2_METADATA_DISABLED=true",
		"BATCHLAKE_BEDROCK_ENDPOINT=" + brk.URL, "AWS_MAX_ATTEMPTS=1",
		// A lost create is left to the next run (no lookups of its own), which
		// may look after a short settle time.
		"BATCHLAKE_LOST_LOOKUP=0s", "BATCHLAKE_SETTLE=500ms", "BATCHLAKE_TAKEOVER_MARGIN=200ms"}
	run := func(extraEnv []string, args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		full := append([]string{args[0], "--lake", lakeURL, "--tmp-dir", tmp, "--progress", "never", "--log-format", "json", "--threads", "1"}, args[1:]...)
		cmd := exec.CommandContext(ctx, bin, full...)
		cmd.Env = append(append(environWithout("AWS_", "BATCHLAKE_", "OPENAI_"), env...), extraEnv...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
		outputs = append(outputs, stdout.Bytes(), stderr.Bytes())
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return r
	}
	must := func(code int, args ...string) result {
		t.Helper()
		r := run([]string{"BATCHLAKE_BEDROCK_ROLE_ARN=arn:aws:iam::123456789012:role/batchlake-bedrock"}, args...)
		if r.code != code {
			t.Fatalf("want exit %d, got %s", code, r)
		}
		return r
	}

	var in strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, `{"recordId":"CALL%07d","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"summarise call %d"}]}]}}`+"\n", i, i)
	}
	input := filepath.Join(t.TempDir(), "bedrock.jsonl")
	if err := os.WriteFile(input, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// 300 at 120 filled in turn would leave a job of 60, below Bedrock's
	// minimum of 100 (the fake fails it as Bedrock does): plan balances.
	var p struct {
		planOut
		MinRecords int `json:"min_records"`
	}
	decode(t, must(0, "plan", "--provider", "bedrock", "--model", "anthropic.claude-3-haiku-20240307-v1:0", "--input", input,
		"--tenant", "acme", "--prompt-version", "p1", "--shard-max-records", "120"), &p)
	if len(p.Shards) != 3 || p.MinRecords != 100 {
		t.Fatalf("plan made %d shards, min_records %d; want 3 and 100", len(p.Shards), p.MinRecords)
	}
	for _, s := range p.Shards {
		if s.Records != 100 {
			t.Fatalf("plan shards %+v, want 3 × 100", p.Shards)
		}
	}
	lc := func(step string, extra ...string) []string {
		return append([]string{step, "--provider", "bedrock", "--job", p.JobKey}, extra...)
	}

	// No role: submit is a usage error and creates nothing.
	if r := run(nil, lc("submit")...); r.code != exitUsage || !strings.Contains(r.stderr, "bedrock-role-arn") {
		t.Fatalf("submit without a role: %s", r)
	}
	// The first create's response is lost (SDK retries off): that shard is
	// unknown, the run exits 75 and releases the shard with a settle time;
	// once it lapses the next run finds the job and binds it.
	var s stepOut
	decode(t, must(exitTempFail, lc("submit", "--lease", "1s")...), &s)
	if actions(s)[p.Shards[0].ShardID] != "unknown" {
		t.Fatalf("first submit: %+v", s)
	}
	time.Sleep(1100 * time.Millisecond)
	decode(t, must(0, lc("submit", "--lease", "1s")...), &s)
	if actions(s)[p.Shards[0].ShardID] != "found" {
		t.Fatalf("second submit: %+v", s)
	}
	must(0, lc("submit")...)
	jobs := fake.Jobs()
	if len(jobs) != len(p.Shards) {
		t.Fatalf("the fake holds %d jobs for %d shards", len(jobs), len(p.Shards))
	}

	must(0, lc("status", "--wait", "--poll", "10ms")...)
	var col struct {
		Shards []struct {
			ShardID string `json:"shard_id"`
			Action  string `json:"action"`
			Summary *struct {
				Differences []json.RawMessage `json:"differences"`
			} `json:"summary_check"`
		} `json:"shards"`
	}
	decode(t, must(0, lc("collect")...), &col)
	for _, sh := range col.Shards {
		if sh.Action != "collected" || sh.Summary == nil || len(sh.Summary.Differences) != 0 {
			t.Errorf("collect shard %+v", sh)
		}
	}

	truth := map[string]int64{}
	for _, j := range fake.Jobs() {
		for _, class := range fake.Outcomes(j.JobArn) {
			truth[class]++
		}
	}
	var rep report
	r := must(exitPartial, "reconcile", "--job", p.JobKey)
	decode(t, r, &rep)
	want := fmt.Sprintf("expected=300 succeeded=%d quality_failed=%d failed_retryable=%d failed_permanent=%d missing=%d unknown=0 duplicate=0 quarantined=0",
		truth["succeeded"], truth["quality_failed"], truth["failed_retryable"], truth["failed_permanent"], truth["missing"])
	if got := rep.counts(); !strings.HasPrefix(got, want) {
		t.Errorf("report %s\nwant    %s", got, want)
	}
	// Each collected manifest.json.out is reported beside the lines of its
	// job (reconcile's provider_totals), and agrees with them.
	var totals struct {
		ProviderTotals []struct {
			Source        string `json:"source"`
			ProviderJobID string `json:"provider_job_id"`
			Provider      struct {
				InputTokens int64 `json:"input_tokens"`
			} `json:"provider"`
			Agree bool `json:"agree"`
		} `json:"provider_totals"`
	}
	decode(t, r, &totals)
	if len(totals.ProviderTotals) != len(p.Shards) {
		t.Errorf("provider_totals %+v, want one per shard (%d)", totals.ProviderTotals, len(p.Shards))
	}
	for _, pt := range totals.ProviderTotals {
		if pt.Source != "bedrock_manifest" || pt.ProviderJobID == "" || !pt.Agree || pt.Provider.InputTokens == 0 {
			t.Errorf("provider total %+v: want the job's manifest.json.out, agreeing with its lines", pt)
		}
	}
	if truth["missing"] == 0 || truth["failed_permanent"] == 0 {
		t.Errorf("fake outcomes %v: the partially completed job or the permanent failures are missing", truth)
	}
	must(0, "verify")
	for _, o := range outputs {
		if bytes.Contains(o, []byte(secret)) {
			t.Fatalf("the AWS secret key appears in batchlake's output")
		}
	}
}

// TestBedrockMinimumRecords: plan refuses a Bedrock input below the minimum
// records per batch job (exit 2, naming it) unless told --below-min allow,
// and shows the minimum; a retry child below it is planned but held, and
// submit refuses to send it as a batch (exit 2, naming the minimum) unless
// told --below-min allow; retry --mode auto sends it through InvokeModel.
func TestBedrockMinimumRecords(t *testing.T) {
	const bedrockModel = "anthropic.claude-haiku-4-5-20251001-v1:0"
	h := newHarness(t, fakeopenai.Options{})
	write := func(name string, n int, line func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(line(i) + "\n")
		}
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	input := func(i int) string {
		return fmt.Sprintf(`{"recordId":"CALL%07d","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"summarise call %d"}]}]}}`, i, i)
	}
	plan := func(in string, extra ...string) []string {
		return append([]string{"plan", "--provider", "bedrock", "--model", bedrockModel, "--input", in,
			"--tenant", "acme", "--prompt-version", "p1"}, extra...)
	}
	type planJSON struct {
		planOut
		MinRecords int    `json:"min_records"`
		Held       string `json:"held"`
	}

	small := write("small.jsonl", 50, input)
	if r := h.run(plan(small)...); r.code != exitUsage || !strings.Contains(r.stderr, "minimum of 100") || !strings.Contains(r.stderr, "--below-min allow") {
		t.Fatalf("plan of 50 Bedrock records: %s; want exit 2 naming the minimum", r)
	}
	var p planJSON
	decode(t, h.must([]int{0}, plan(small, "--below-min", "allow")...), &p)
	if p.Records != 50 || p.MinRecords != 100 || p.Held != "" {
		t.Fatalf("plan --below-min allow: %+v", p)
	}

	// 210 at 200: filled in turn 200 + 10; balanced 105 + 105.
	in := write("in.jsonl", 210, input)
	decode(t, h.must([]int{0}, plan(in, "--shard-max-records", "200")...), &p)
	if len(p.Shards) != 2 || p.Shards[0].Records != 105 || p.Shards[1].Records != 105 {
		t.Fatalf("plan of 210 at 200: %+v, want 105 + 105", p.Shards)
	}
	// Results for all but 10 records: those 10 are missing and retried.
	out := write("out.jsonl.out", 200, func(i int) string {
		return fmt.Sprintf(`{"recordId":"CALL%07d","modelInput":{},"modelOutput":{"id":"msg_%d","type":"message","role":"assistant","model":"claude-3-haiku-20240307","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}}`, i, i)
	})
	h.must([]int{0}, "ingest", "--job", p.JobKey, "--output", out)
	h.must([]int{exitPartial}, "reconcile", "--job", p.JobKey)
	var rr struct {
		Child   planJSON `json:"child"`
		Message string   `json:"message"`
	}
	decode(t, h.must([]int{0}, "retry", "--job", p.JobKey, "--mode", "batch"), &rr)
	if rr.Child.Records != 10 || rr.Child.MinRecords != 100 || !strings.Contains(rr.Child.Held, "10 records") || !strings.Contains(rr.Message, "held") {
		t.Fatalf("retry of 10 records: %+v; want a child held below the minimum", rr)
	}
	submit := []string{"submit", "--provider", "bedrock", "--job", rr.Child.JobKey}
	if r := h.run(submit...); r.code != exitUsage || !strings.Contains(r.stderr, "is held") || !strings.Contains(r.stderr, "minimum of 100") || !strings.Contains(r.stderr, "--mode sync") {
		t.Fatalf("submit of a held child: %s; want exit 2 naming the minimum", r)
	}
	// Allowed, submit goes on to Bedrock's own settings (here: no role).
	if r := h.run(append(submit, "--below-min", "allow")...); r.code != exitUsage || strings.Contains(r.stderr, "is held") || !strings.Contains(r.stderr, "bedrock-role-arn") {
		t.Fatalf("submit --below-min allow of a held child: %s; want it past the hold", r)
	}

	// Under --mode auto (the default) the held child goes through the
	// runtime's InvokeModel instead, past a throttle and a 503, priced on
	// demand (claude-haiku-4-5: 1.00 input, 5.00 output per million tokens,
	// no batch multiplier).
	fake := fakebedrock.New(fakebedrock.Options{RealTime: fakebedrock.RealTimeFaults{RateLimited: 1, Unavailable: 1}})
	brk := httptest.NewServer(fake.Handler())
	defer brk.Close()
	aws := []string{"AWS_ACCESS_KEY_ID=AKIATESTBATCHLAKE", "AWS_SECRET_ACCESS_KEY=test", "AWS_SESSION_TOKEN=", "AWS_PROFILE=", "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull, "AWS_EC2_METADATA_DISABLED=true",
		"BATCHLAKE_BEDROCK_RUNTIME_ENDPOINT=" + brk.URL}
	r := h.runEnv(aws, "retry", "--job", p.JobKey)
	var sr syncRetryOut
	decode(t, r, &sr)
	if r.code != 0 || sr.Mode != "sync" || sr.Child.JobKey != rr.Child.JobKey || len(sr.Sync.Shards) != 1 || sr.Sync.Shards[0].Answered != 10 || sr.Sync.Shards[0].Calls != 12 {
		t.Fatalf("retry --mode auto of a held Bedrock child: %s", r)
	}
	calls := fake.RealTimeCalls()
	if len(calls) != 10 || calls[0].Model != bedrockModel {
		t.Fatalf("InvokeModel processed %d calls (%+v), want 10 to %s", len(calls), calls, bedrockModel)
	}
	if rep := h.reconcile(sr.Child.JobKey, 10); rep.State != "COMPLETED" || rep.Succeeded != 10 || rep.Duplicate != 0 {
		t.Fatalf("child: %s", rep.counts())
	}
	var rows []struct {
		Mode string `json:"mode"`
		Cost string `json:"cost"`
		In   int64  `json:"input_tokens"`
		Out  int64  `json:"output_tokens"`
	}
	h.query(fmt.Sprintf(`SELECT c.mode, CAST(c.cost_usd AS VARCHAR) AS cost, a.input_tokens, a.output_tokens
		FROM costs c JOIN attempts a ON a.job_key = c.job_key AND a.raw_sha256 = c.raw_sha256 AND a.line_no = c.line_no
		WHERE c.job_key = '%s'`, sr.Child.JobKey), &rows)
	if len(rows) != 10 {
		t.Fatalf("want 10 cost rows of the child, got %d", len(rows))
	}
	for _, r := range rows {
		want := new(big.Rat).SetFrac64(r.In*1000+r.Out*5000, 1_000_000_000)
		got, ok := new(big.Rat).SetString(r.Cost)
		if r.Mode != "sync" || r.In == 0 || !ok || got.Cmp(want) != 0 {
			t.Errorf("cost row: mode %s cost %s (%d in, %d out), want sync %s", r.Mode, r.Cost, r.In, r.Out, want.FloatString(18))
		}
	}
}
