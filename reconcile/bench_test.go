package reconcile

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchlake/batchlake/bench/gen"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// BenchmarkReconcileQueries runs reconcile's DuckDB work — reconcile.sql, lines.sql, outcomes.sql, the
// report counts, cost per category and the scans of every outcome and cost
// row — over a generated 100k-record job (plan and ingest are set up once,
// outside the timing). Run with: go test -run '^$' -bench Reconcile ./reconcile/
func BenchmarkReconcileQueries(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	files := map[string]*os.File{}
	for _, n := range []string{"input", "output", "errors"} {
		f, err := os.Create(filepath.Join(dir, n+".jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		files[n] = f
	}
	if _, err := gen.Generate(ctx, gen.Writers{Input: files["input"], Output: files["output"], Errors: files["errors"]}, gen.DefaultOptions(100_000, 1)); err != nil {
		b.Fatal(err)
	}
	for _, f := range files {
		f.Close()
	}
	l, err := lake.Open(ctx, filepath.Join(dir, "lake"))
	if err != nil {
		b.Fatal(err)
	}
	p, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", Input: files["input"].Name(), Tenant: "bench", PromptVersion: "v1", TmpDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	job, _ := lake.ParseDigest(p.JobKey)
	m, err := l.GetManifest(ctx, job)
	if err != nil {
		b.Fatal(err)
	}
	var attempts, quarantine []string
	for _, c := range []struct{ path, ch string }{{files["output"].Name(), ingest.ChannelOutput}, {files["errors"].Name(), ingest.ChannelError}} {
		if _, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: c.path, Channel: c.ch, TmpDir: dir}); err != nil {
			b.Fatal(err)
		}
	}
	recs, err := l.IngestRecords(ctx, job)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range recs {
		attempts = append(attempts, r.AttemptKeys()...)
		if r.QuarantineFile != "" {
			quarantine = append(quarantine, r.QuarantineFile)
		}
	}
	rules, _ := ParseRules(nil)
	prices, err := LoadPrices("", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		e, err := OpenEngine(l, EngineOptions{TempDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		src := map[string]string{}
		for name, keys := range map[string][]string{"Expected": m.ExpectedFiles, "Attempts": attempts, "Quarantine": quarantine} {
			var paths []string
			switch name {
			case "Expected":
				paths, err = LocalFiles[lake.ExpectedRow](ctx, e, keys)
			case "Attempts":
				paths, err = LocalFiles[lake.AttemptRow](ctx, e, keys)
			default:
				paths, err = LocalFiles[lake.QuarantineRow](ctx, e, keys)
			}
			if err != nil {
				b.Fatal(err)
			}
			src[name] = sqlList(paths)
			if name == "Expected" {
				nos := make([]int, len(paths)) // 0 for the empty file, then 1, 2, …
				for i := range nos {
					nos[i] = i
				}
				src["ExpectedNos"] = sqlInts(nos)
			}
		}
		must := func(err error) {
			if err != nil {
				b.Fatal(err)
			}
		}
		must(e.ExecFile(ctx, "sources.sql", src))
		must(rules.load(ctx, e))
		must(prices.load(ctx, e, nil, m))
		must(e.ExecFile(ctx, "schema.sql", nil))
		must(classify(ctx, e, "true", false, 3, nil))
		must(settle(ctx, e, Caps{}))
		var rep Report
		must(counts(ctx, e, &rep))
		if rep.Expected != 100_000 || rep.Succeeded+rep.QualityFailed+rep.FailedRetryable+rep.FailedPermanent+rep.Missing != rep.Expected {
			b.Fatalf("counts: %+v", rep)
		}
		_, err = costs(ctx, e)
		must(err)
		n := 0
		files, err := outcomeFiles(ctx, e, int64(len(m.ExpectedFiles)), false)
		must(err)
		var c outcomeCols
		for _, f := range files {
			must(c.read(ctx, e, f.file<<40, f.file<<40|f.n, false))
			n += len(c.pos)
		}
		must(e.eachRow(ctx, "cost_scan.sql", costRange{}, "nnnmnnn", func(*scanRow) error { n++; return nil }))
		e.Close()
	}
}

// BenchmarkReconcileSmallJob is the fixed cost of one reconcile: a 20-record
// job, planned and ingested into a lake of its own outside the timing, then
// reconciled. A retry generation is a small job, and a lake of many jobs is
// reconciled one small job at a time. Run with:
// go test -run '^$' -bench SmallJob ./reconcile/
func BenchmarkReconcileSmallJob(b *testing.B) {
	ctx := context.Background()
	g := generate(rand.New(rand.NewPCG(5, 5)), 20, 1, 1)
	for b.Loop() {
		b.StopTimer()
		l, dir := testLake(b)
		m := planAndIngest(b, l, dir, g, 0)
		b.StartTimer()
		if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}); err != nil {
			b.Fatal(err)
		}
	}
}
