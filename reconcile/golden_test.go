package reconcile

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGoldenOpenAIExamples plans, ingests and reconciles the OpenAI examples
// of the provider reference and compares the report with a golden file.
func TestGoldenOpenAIExamples(t *testing.T) {
	cases := []struct{ name, input, output, errors string }{
		{"chat", "openai_input.jsonl", "openai_output.jsonl", "openai_error.jsonl"},
		{"responses", "openai_input_responses.jsonl", "openai_output_responses.jsonl", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			l, dir := testLake(t)
			ex := filepath.Join("testdata", "examples")
			p, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", Input: filepath.Join(ex, c.input), Tenant: "examples",
				PromptVersion: "v1", TmpDir: dir, Now: func() time.Time { return time.Unix(0, 0).UTC() }})
			if err != nil {
				t.Fatal(err)
			}
			d, _ := lake.ParseDigest(p.JobKey)
			m, err := l.GetManifest(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct{ name, channel string }{{c.output, ingest.ChannelOutput}, {c.errors, ingest.ChannelError}} {
				if f.name == "" {
					continue
				}
				if _, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: filepath.Join(ex, f.name), Channel: f.channel, TmpDir: dir}); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := Run(ctx, l, Options{JobKey: p.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
			if err != nil {
				t.Fatal(err)
			}
			rep.ReconciledAt = time.Time{}
			got, _ := json.MarshalIndent(rep, "", "  ")
			golden := filepath.Join("testdata", "golden", c.name+".report.json")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if string(want) != string(got)+"\n" {
				t.Errorf("report differs from %s:\n%s", golden, got)
			}
		})
	}
}
