package lifecycle_test

// Bedrock's whole batch flow (plan → submit → status → collect → reconcile,
// and cancel) through the real adapter against fakebedrock and its S3
// (gofakes3), the lake in the same S3. These end in reconcile, so they live
// here (this package links DuckDB already) rather than in
// providers/bedrockbatch, whose tests then need no DuckDB.

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakebedrock"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers/bedrockbatch"
	"github.com/batchlake/batchlake/reconcile"
)

// bedrockFlow is a lake on the S3 server with a lifecycle driver for
// Bedrock whose staging defaults under the lake's bucket.
type bedrockFlow struct {
	fake   *fakebedrock.Server
	l      *lake.Lake
	dir    string
	client *bedrockbatch.Client
}

func newBedrockFlow(t *testing.T, opts fakebedrock.Options) *bedrockFlow {
	t.Helper()
	faker := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	s3 := httptest.NewServer(faker.Server())
	t.Cleanup(s3.Close)
	q := url.Values{"region": {"us-east-1"}, "endpoint": {s3.URL}, "use_path_style": {"true"}, "disable_https": {"true"},
		"response_checksum_validation": {"when_required"}, "request_checksum_calculation": {"when_required"}}
	opts.OpenBucket = func(ctx context.Context, name string) (*blob.Bucket, error) {
		return blob.OpenBucket(ctx, "s3://"+name+"?"+q.Encode())
	}
	fake := fakebedrock.New(opts)
	brk := httptest.NewServer(fake.Handler())
	t.Cleanup(brk.Close)

	ctx := context.Background()
	lakeURL := "s3://lake?" + q.Encode()
	l, err := lake.Open(ctx, lakeURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	in, out, ok := bedrockbatch.DefaultLocations(lakeURL)
	if !ok {
		t.Fatal("no default staging for an s3 lake")
	}
	c, err := bedrockbatch.New(ctx, bedrockbatch.Config{Endpoint: brk.URL, RoleARN: "arn:aws:iam::123456789012:role/batchlake-bedrock", Input: in, Output: out,
		Model: func(ctx context.Context, jobKey string) (string, error) {
			d, err := lake.ParseDigest(jobKey)
			if err != nil {
				return "", err
			}
			m, err := l.GetManifest(ctx, d)
			if err != nil {
				return "", err
			}
			return m.Model, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &bedrockFlow{fake: fake, l: l, dir: t.TempDir(), client: c}
}

func (f *bedrockFlow) driver() *lifecycle.Driver {
	return &lifecycle.Driver{Lake: f.l, Ledger: lake.NewLedger(f.l, ""), Client: f.client, Target: "bedrock", Lease: time.Minute, TmpDir: f.dir}
}

// plan writes a Bedrock input of n records and plans it.
func (f *bedrockFlow) plan(t *testing.T, n, shardMax int, converse bool) lake.Digest {
	t.Helper()
	var b strings.Builder
	for i := range n {
		if converse {
			fmt.Fprintf(&b, `{"recordId":"rec-%05d","modelInput":{"messages":[{"role":"user","content":[{"text":"classify %d"}]}],"inferenceConfig":{"maxTokens":32}}}`+"\n", i, i)
		} else {
			fmt.Fprintf(&b, `{"recordId":"CALL%07d","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"summarise call %d"}]}]}}`+"\n", i, i)
		}
	}
	p := filepath.Join(f.dir, fmt.Sprintf("input-%d.jsonl", n))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The shards are balanced to Bedrock's minimum; the small job of the
	// cancel test is allowed (its fake has no minimum).
	res, err := ingest.Plan(context.Background(), f.l, ingest.PlanOptions{Provider: "bedrock", Input: p, Tenant: "t1", PromptVersion: "p1",
		Model: "anthropic.claude-3-haiku-20240307-v1:0", ShardMaxRecords: shardMax, TmpDir: f.dir, MinRecords: ingest.BedrockMinRecords, BelowMin: ingest.BelowMinAllow})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := lake.ParseDigest(res.JobKey)
	return d
}

// TestBedrockFlow runs plan (Bedrock input) → submit → status → collect →
// reconcile against the fakes and checks that the report matches, count
// for count, the outcomes the fake drew — including a job that ends
// PartiallyCompleted (its unprocessed records are missing) and a
// manifest.json.out that disagrees with the lines (reported by collect).
func TestBedrockFlow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		converse bool
		faults   fakebedrock.Faults
		records  int
		shardMax int
		// shards whose summary check must report a difference
		skewed int
	}{
		// 300 at 120 filled in turn would leave a job of 60, which the
		// fake (like Bedrock) fails below its minimum of 100: balanced, 3 × 100.
		{name: "InvokeModel, one job partially completed", faults: fakebedrock.Faults{Partial: 1}, records: 300, shardMax: 120},
		{name: "Converse, a manifest that disagrees", converse: true, faults: fakebedrock.Faults{ManifestSkew: 1}, records: 200, shardMax: 100, skewed: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newBedrockFlow(t, fakebedrock.Options{Seed: 11, Faults: tc.faults, PollsPerStep: 2, MinRecords: ingest.BedrockMinRecords})
			job := f.plan(t, tc.records, tc.shardMax, tc.converse)
			d := f.driver()
			m, err := f.l.GetManifest(ctx, job)
			if err != nil {
				t.Fatal(err)
			}

			sub, err := d.Submit(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range sub.Shards {
				if s.Action != "created" || s.State != lake.Submitted {
					t.Fatalf("submit shard %+v", s)
				}
			}
			again, err := d.Submit(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range again.Shards {
				if s.Action != "already_bound" {
					t.Fatalf("second submit shard %+v", s)
				}
			}
			jobs := f.fake.Jobs()
			if len(jobs) != len(m.Shards) {
				t.Fatalf("the fake holds %d jobs for %d shards", len(jobs), len(m.Shards))
			}

			var st *lifecycle.Result
			for range 40 {
				if st, err = d.Status(ctx, job); err != nil {
					t.Fatal(err)
				}
				if !st.Pending {
					break
				}
			}
			if st.Pending {
				t.Fatalf("status still pending: %+v", st)
			}
			col, err := d.Collect(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			skewed := 0
			for _, s := range col.Shards {
				if s.Action != "collected" || s.Summary == nil {
					t.Fatalf("collect shard %+v", s)
				}
				if len(s.Summary.Differences) > 0 {
					skewed++
					if !strings.Contains(s.Detail, "successRecordCount") {
						t.Errorf("shard %s: the difference is not in the detail: %q", s.ShardID, s.Detail)
					}
				}
			}
			if skewed != tc.skewed {
				t.Errorf("%d shards with a manifest.json.out that disagrees, want %d", skewed, tc.skewed)
			}
			col2, err := d.Collect(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range col2.Shards {
				if s.Action != "already_collected" {
					t.Errorf("second collect shard %+v", s)
				}
			}

			// The truth: what the fake decided for every record.
			truth := map[string]int64{}
			statuses := map[string]int{}
			for _, j := range f.fake.Jobs() {
				statuses[j.Status]++
				for _, class := range f.fake.Outcomes(j.JobArn) {
					truth[class]++
				}
			}
			if tc.faults.Partial > 0 && statuses["PartiallyCompleted"] != 1 {
				t.Errorf("job statuses %v, want one PartiallyCompleted", statuses)
			}
			rep, err := reconcile.Run(ctx, f.l, reconcile.Options{JobKey: m.JobKey, TmpDir: f.dir, Engine: reconcile.EngineOptions{Threads: 1}})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{"succeeded": rep.Succeeded, "quality_failed": rep.QualityFailed, "failed_retryable": rep.FailedRetryable,
				"failed_permanent": rep.FailedPermanent, "missing": rep.Missing}
			for class, n := range got {
				if truth[class] != n {
					t.Errorf("%s: report %d, fake %d", class, n, truth[class])
				}
			}
			if rep.Expected != int64(tc.records) || rep.Unknown != 0 || rep.Duplicate != 0 || rep.Quarantined != 0 {
				t.Errorf("report %+v", rep)
			}
			if truth["succeeded"] == 0 || truth["failed_retryable"] == 0 || truth["failed_permanent"] == 0 || truth["quality_failed"] == 0 {
				t.Errorf("the fake's outcomes %v lack a class: the test would not catch a misclassification", truth)
			}
			if tc.faults.Partial > 0 && truth["missing"] == 0 {
				t.Error("a partially completed job left no record missing")
			}
			if len(rep.Files.Output) != len(m.Shards) {
				t.Errorf("report accounts for %d output files, want %d", len(rep.Files.Output), len(m.Shards))
			}
			vr, err := lake.Verify(ctx, f.l)
			if err != nil {
				t.Fatal(err)
			}
			if !vr.OK() || vr.Warnings() != 0 {
				t.Errorf("verify after the flow: %+v", vr.Problems)
			}
		})
	}
}

// TestBedrockCancelFlow: cancel stops the running jobs; status records them
// CANCELLED (Stopped), collect keeps the records they processed, and
// reconcile counts the rest as missing — exactly as the fake decided.
func TestBedrockCancelFlow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Jobs of 30 records: an account whose quota allows them.
	f := newBedrockFlow(t, fakebedrock.Options{Seed: 4, PollsPerStep: 1, MinRecords: -1})
	job := f.plan(t, 60, 30, false)
	d := f.driver()
	if _, err := d.Submit(ctx, job); err != nil {
		t.Fatal(err)
	}
	// Three polls: Validating, Scheduled, InProgress.
	for range 3 {
		if _, err := d.Status(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	res, err := d.Cancel(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Shards {
		if s.Action != "cancel_requested" {
			t.Fatalf("cancel shard %+v", s)
		}
	}
	st, err := d.Status(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Shards {
		if s.State != lake.Cancelled || s.ProviderStatus != "Stopped" {
			t.Fatalf("status after cancel: shard %+v", s)
		}
	}
	if st.Pending {
		t.Fatal("status after cancel still pending")
	}
	col, err := d.Collect(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range col.Shards {
		if s.Action != "collected" {
			t.Fatalf("collect shard %+v", s)
		}
	}
	truth := map[string]int64{}
	for _, j := range f.fake.Jobs() {
		for _, class := range f.fake.Outcomes(j.JobArn) {
			truth[class]++
		}
	}
	m, _ := f.l.GetManifest(ctx, job)
	rep, err := reconcile.Run(ctx, f.l, reconcile.Options{JobKey: m.JobKey, TmpDir: f.dir, Engine: reconcile.EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != 30 || truth["missing"] != 30 || rep.Succeeded != truth["succeeded"] || rep.FailedPermanent != truth["failed_permanent"] ||
		rep.FailedRetryable != truth["failed_retryable"] || rep.QualityFailed != truth["quality_failed"] {
		t.Fatalf("report %+v, fake %v (half of each job stopped unprocessed)", rep, truth)
	}
}
