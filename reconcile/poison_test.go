package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// TestReconcileSurvivesLegacyPoisonRows: attempt rows an older ingest stored
// without today's usage checks (5e18 prompt tokens, which overflowed
// reconcile's DECIMAL(18, 0) cast on every run; cache writes above the
// prompt, which priced negative) are priced 0 and counted unpriced; the
// reconcile succeeds and no cost is negative.
func TestReconcileSurvivesLegacyPoisonRows(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	var input []string
	for _, id := range []string{"r0", "r1", "r2"} {
		input = append(input, `{"custom_id":"`+id+`","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"q"}]}}`)
	}
	res, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", TmpDir: dir, Tenant: "t1", PromptVersion: "p1", Input: writeLines(t, dir, "input.jsonl", input)})
	if err != nil {
		t.Fatal(err)
	}
	job, _ := lake.ParseDigest(res.JobKey)
	m, _ := l.GetManifest(ctx, job)
	// The rows as an ingest without the checks wrote them, committed as
	// ingest does: the raw file, the attempts file, the marker last.
	raw := []byte("legacy output file\n")
	rawD, err := l.PutObject(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	st := int32(200)
	row := func(id string, line, in, cached, write, out int64) lake.AttemptRow {
		return lake.AttemptRow{JobKey: m.JobKey, Tenant: m.Tenant, Provider: "openai", CustomID: id, Channel: ingest.ChannelOutput,
			RawSHA256: rawD.Hex(), LineNo: line, StatusCode: &st, Outcome: "success", ModelVersion: "gpt-4o-mini-2024-07-18",
			InputTokens: in, CachedInputTokens: cached, CacheWriteTokens: write, OutputTokens: out, FinishReason: "stop", HasOutput: true, OutputText: "a"}
	}
	akey, err := lake.WriteTable(ctx, l, dir, "attempts", m.Tenant, job, []lake.AttemptRow{
		row("r0", 1, 5_000_000_000_000_000_000, 0, 0, 1),
		row("r1", 2, 10, 0, 20, 1),
		row("r2", 3, 1000, 0, 0, 100),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.PutJSON(ctx, lake.IngestKey(job, ingest.ChannelOutput, rawD), lake.FormatIngest, lake.IngestRecord{
		Version: lake.IngestVersion, JobKey: m.JobKey, Provider: "openai", Channel: ingest.ChannelOutput, Raw: rawD, RawBytes: int64(len(raw)),
		FileName: "legacy.jsonl", Lines: 3, Rows: 3, AttemptsFile: akey, IngestedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatalf("reconcile over legacy poison rows: %v", err)
	}
	// Only r2 is priced: 1,000 × 0.15 + 100 × 0.60, × 0.5, per Mtok.
	if rep.UnpricedLines != 2 || string(rep.CostUSD["total"]) != "0.000105" || strings.Contains(string(rep.CostUSD["total"]), "-") {
		t.Errorf("unpriced %d, cost %v; want 2 unpriced and 0.000105 in all", rep.UnpricedLines, rep.CostUSD)
	}
}
