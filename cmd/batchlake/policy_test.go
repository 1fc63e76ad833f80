package main

import (
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/internal/fakeopenai"
)

// TestProviderTotalsAndNotBefore runs a job against the fake OpenAI server
// (spoken to by the real SDK client) whose batch objects carry aggregate
// usage skewed by 7 input tokens: status records the usage in the ledger and
// reconcile reports, per batch, the provider's total beside the ingested
// lines' sum and the difference of 7, which the lines themselves confirm.
// The reconcile's --retry-not-before puts a time in the retry child's
// manifest; submit refuses the child before it with exit 75, creating
// nothing at the provider. (That submit binds the child once the time has
// passed is lifecycle's TestSubmitWaitsForNotBefore, on a clock moved past
// the window rather than a process sleeping through it.)
func TestProviderTotalsAndNotBefore(t *testing.T) {
	h := newHarness(t, fakeopenai.Options{Seed: 5, Faults: fakeopenai.Faults{UsageSkew: 7}})
	p := h.plan(40, 20)
	h.submitUntilBound(p.JobKey, "1m")
	h.statusUntilTerminal(p.JobKey)
	h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
	window := 20 * time.Second
	r := h.must([]int{exitPartial, exitReview}, "reconcile", "--job", p.JobKey, "--retry-not-before", window.String())
	var rep struct {
		RetryRecords   int64     `json:"retry_records"`
		ReconciledAt   time.Time `json:"reconciled_at"`
		RetryNotBefore time.Time `json:"retry_not_before"`
		ProviderTotals []struct {
			Source        string `json:"source"`
			ShardID       string `json:"shard_id"`
			ProviderJobID string `json:"provider_job_id"`
			Provider      struct{ InputTokens, OutputTokens int64 }
			Lines         struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"lines"`
			Difference struct {
				InputTokens       int64  `json:"input_tokens"`
				CachedInputTokens *int64 `json:"cached_input_tokens"`
				OutputTokens      int64  `json:"output_tokens"`
			} `json:"difference"`
			Agree bool `json:"agree"`
		} `json:"provider_totals"`
	}
	decode(t, r, &rep)
	if len(rep.ProviderTotals) != len(p.Shards) {
		t.Fatalf("provider_totals has %d entries, want one per shard (%d): %s", len(rep.ProviderTotals), len(p.Shards), r.stdout)
	}
	for _, pt := range rep.ProviderTotals {
		var lines []struct {
			In  int64 `json:"input_tokens"`
			Out int64 `json:"output_tokens"`
		}
		h.query("SELECT coalesce(sum(input_tokens), 0)::BIGINT AS input_tokens, coalesce(sum(output_tokens), 0)::BIGINT AS output_tokens FROM attempts WHERE provider_job_id = '"+pt.ProviderJobID+"'", &lines)
		if pt.Source != "openai_batch_usage" || pt.Difference.InputTokens != 7 || pt.Difference.OutputTokens != 0 ||
			pt.Difference.CachedInputTokens == nil || *pt.Difference.CachedInputTokens != 0 || pt.Agree {
			t.Errorf("shard %s: %+v, want the skew of 7 input tokens and nothing else", pt.ShardID, pt)
		}
		if len(lines) != 1 || lines[0].In != pt.Lines.InputTokens || lines[0].Out != pt.Lines.OutputTokens || lines[0].In == 0 {
			t.Errorf("shard %s: report says the lines add up to %d/%d, the attempts view %+v", pt.ShardID, pt.Lines.InputTokens, pt.Lines.OutputTokens, lines)
		}
	}
	if rep.RetryRecords == 0 {
		t.Fatalf("no records to retry: the not-before window is not exercised: %s", r.stdout)
	}
	if want := rep.ReconciledAt.Add(window).Truncate(time.Second); !rep.RetryNotBefore.Equal(want) {
		t.Errorf("retry_not_before %v, want %v", rep.RetryNotBefore, want)
	}

	var rr struct {
		Child struct {
			JobKey string `json:"job_key"`
		} `json:"child"`
		NotBefore time.Time `json:"not_before"`
	}
	decode(t, h.must([]int{0}, "retry", "--job", p.JobKey), &rr)
	if !rr.NotBefore.Equal(rep.RetryNotBefore) {
		t.Errorf("child not_before %v, want the report's %v", rr.NotBefore, rep.RetryNotBefore)
	}
	creates := h.creates()
	if time.Now().After(rr.NotBefore) {
		t.Fatalf("the machine took longer than the %s window to get here; nothing to test", window)
	}
	r = h.must([]int{exitTempFail}, lifecycleArgs("submit", rr.Child.JobKey)...)
	var s stepOut
	decode(t, r, &s)
	if !s.Pending || len(s.Shards) == 0 || s.Shards[0].Action != "not_before" || !strings.Contains(s.Shards[0].Detail, rr.NotBefore.Format(time.RFC3339)) {
		t.Errorf("submit before the window: %s", r)
	}
	if h.creates() != creates {
		t.Errorf("submit before the window created %d batches", h.creates()-creates)
	}
}
