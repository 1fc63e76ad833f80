package reconcile

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// TestBedrockSummaryTotals: a manifest.json.out recorded for a Bedrock job
// (ingest --summary) is reported beside what the job's lines add up to, with
// the difference; it is not a result file, it changes the reconcile's
// identity, and recording it again writes nothing.
func TestBedrockSummaryTotals(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	ex := filepath.Join("..", "ingest", "testdata", "examples")
	p, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "bedrock", Model: "anthropic.claude-3-haiku-20240307-v1:0",
		Input: filepath.Join(ex, "bedrock_input.jsonl"), Tenant: "t1", PromptVersion: "p1", TmpDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := lake.ParseDigest(p.JobKey)
	m, _ := l.GetManifest(ctx, d)
	if _, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: filepath.Join(ex, "bedrock_output.jsonl"), Channel: ingest.ChannelOutput, TmpDir: dir}); err != nil {
		t.Fatal(err)
	}
	before, err := Run(ctx, l, Options{JobKey: p.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(before.ProviderTotals) != 0 {
		t.Fatalf("provider totals without a summary: %+v", before.ProviderTotals)
	}
	var in, out int64
	(&lineageLake{l: l, dir: dir}).query(t, "SELECT sum(input_tokens)::BIGINT, sum(output_tokens)::BIGINT FROM attempts WHERE job_key = '"+p.JobKey+"'", func(v []any) {
		in, out = v[0].(int64), v[1].(int64)
	})
	if in == 0 || out == 0 {
		t.Fatalf("example lines have no tokens (%d/%d): nothing to compare", in, out)
	}
	summary := []byte(fmt.Sprintf(`{"totalRecordCount":3,"processedRecordCount":3,"successRecordCount":3,"errorRecordCount":0,"inputTokenCount":%d,"outputTokenCount":%d}`, in+5, out))
	for range 2 {
		if err := ingest.RecordSummary(ctx, l, m, "manifest.json.out", "", summary, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if recs, _ := l.IngestRecords(ctx, d); len(recs) != 2 {
		t.Errorf("%d ingest records after recording the summary twice, want 2 (output, summary)", len(recs))
	}
	rep, err := Run(ctx, l, Options{JobKey: p.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Report == before.Report || rep.Unchanged {
		t.Errorf("a new summary did not change the reconcile's identity")
	}
	if len(rep.Files.Output) != 1 || len(rep.Files.Error) != 0 {
		t.Errorf("summary counted as a result file: %+v", rep.Files)
	}
	if len(rep.ProviderTotals) != 1 {
		t.Fatalf("provider totals %+v, want the summary", rep.ProviderTotals)
	}
	pt := rep.ProviderTotals[0]
	if pt.Source != "bedrock_manifest" || pt.Provider.InputTokens != in+5 || pt.Lines.InputTokens != in || pt.Lines.OutputTokens != out ||
		pt.Difference.InputTokens != 5 || pt.Difference.OutputTokens != 0 || pt.Difference.CachedInputTokens != nil || pt.Agree {
		t.Errorf("bedrock total %+v, want provider %d/%d, lines %d/%d, difference 5/0", pt, in+5, out, in, out)
	}
}
