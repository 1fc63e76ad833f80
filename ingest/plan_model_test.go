package ingest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// TestPlanModelFromJob: Bedrock and Gemini lines name no model, so plan takes
// --model (PlanOptions.Model), and the model is part of the records' config:
// the same file planned for two models gives two jobs with different config
// hashes (so different record ids).
func TestPlanModelFromJob(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ provider, example string }{
		{"bedrock", "bedrock_input_converse.jsonl"},
		{"gemini", "gemini_input.jsonl"},
	} {
		t.Run(c.provider, func(t *testing.T) {
			l, err := lake.Open(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			input, err := filepath.Abs(filepath.Join("testdata/examples", c.example))
			if err != nil {
				t.Fatal(err)
			}
			plan := func(model string) *lake.Manifest {
				t.Helper()
				res, err := Plan(ctx, l, PlanOptions{Provider: c.provider, Input: input, Tenant: "acme", PromptVersion: "p1",
					Model: model, TmpDir: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				job, err := lake.ParseDigest(res.JobKey)
				if err != nil {
					t.Fatal(err)
				}
				m, err := l.GetManifest(ctx, job)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			a, b := plan("model-a"), plan("model-b")
			eq(t, "manifest model", a.Model, "model-a")
			eq(t, "provider", a.Provider, c.provider)
			if a.JobKey == b.JobKey {
				t.Error("two models, one job key")
			}
			if a.GenerationConfigHash == b.GenerationConfigHash {
				t.Error("the model is not part of the config hash: record ids would not change with it")
			}
			again := plan("model-a")
			eq(t, "job key planned twice", again.JobKey, a.JobKey)
		})
	}
}
