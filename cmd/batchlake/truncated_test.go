package main

import (
	"strings"
	"testing"
)

// TestTruncatedAndUnpricedCLI: through the CLI, an answer cut at its token
// limit makes the job PARTIAL (exit 10, quality_failed, truncated 1) until
// reconcile --accept-truncated (exit 0); the records view says which record
// was cut; a 6-column --prices table without the job's model leaves its lines
// unpriced, listed in the report, and cost warns about them on stderr.
func TestTruncatedAndUnpricedCLI(t *testing.T) {
	b := newBox(t)
	in := writeFile(t, "input.jsonl", lines(requestLine("cut", "q"), requestLine("whole", "q")))
	job := jobOf(t, b.want([]int{0}, "plan", "--input", in, "--tenant", "acme", "--prompt-version", "p1"))
	cut := strings.Replace(successLine("cut", 10, 64, "The answer is"), `"finish_reason":"stop"`, `"finish_reason":"length"`, 1)
	if !strings.Contains(cut, `"length"`) {
		t.Fatalf("no finish_reason in %s", cut)
	}
	b.want([]int{0}, "ingest", "--job", job, "--output", writeFile(t, "output.jsonl", lines(cut, successLine("whole", 10, 5, "Paris."))))

	type rep struct {
		report
		Truncated       int64 `json:"truncated"`
		AcceptTruncated bool  `json:"accept_truncated"`
		UnpricedLines   int64 `json:"unpriced_lines"`
		UnpricedModels  []struct {
			Provider, Model string
			Lines           int64
		} `json:"unpriced_models"`
	}
	var r1 rep
	decode(t, b.want([]int{exitPartial}, "reconcile", "--job", job), &r1)
	if r1.QualityFailed != 1 || r1.Succeeded != 1 || r1.Truncated != 1 || r1.RetryRecords != 1 || r1.AcceptTruncated {
		t.Errorf("default: %s truncated %d; want the cut answer quality_failed and retried", r1.counts(), r1.Truncated)
	}
	var r2 rep
	decode(t, b.want([]int{0}, "reconcile", "--job", job, "--accept-truncated"), &r2)
	if r2.State != "COMPLETED" || r2.Succeeded != 2 || r2.Truncated != 1 || !r2.AcceptTruncated {
		t.Errorf("--accept-truncated: %s truncated %d", r2.counts(), r2.Truncated)
	}
	if n := b.sqlCount("SELECT count(*) FROM records WHERE truncated AND business_key = 'cut'"); n != 1 {
		t.Errorf("records view: %v truncated records named cut, want 1", n)
	}

	six := writeFile(t, "six.csv", []byte("provider,model,input_usd_per_mtok,cached_input_usd_per_mtok,output_usd_per_mtok,batch_multiplier\nopenai,gpt-4.1,2,0.5,8,0.5\n"))
	var r3 rep
	decode(t, b.want([]int{0}, "reconcile", "--job", job, "--accept-truncated", "--prices", six), &r3)
	if r3.UnpricedLines != 2 || len(r3.UnpricedModels) != 1 || r3.UnpricedModels[0].Model != "gpt-4o-mini-2024-07-18" || r3.UnpricedModels[0].Lines != 2 {
		t.Errorf("report with a table lacking the model: unpriced %d %+v", r3.UnpricedLines, r3.UnpricedModels)
	}
	c := b.want([]int{0}, "cost", "--job", job)
	if !strings.Contains(c.stderr, `2 openai lines of model "gpt-4o-mini-2024-07-18" have no price`) {
		t.Errorf("cost does not warn about the unpriced lines: %s", c.stderr)
	}
	b.verify()
	b.contained()
}
