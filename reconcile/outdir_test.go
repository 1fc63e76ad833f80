package reconcile

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestOutDirHoldsOnlyThisReconcile: reconcile --out DIR leaves no retry file
// of an earlier reconcile beside its report (a step sending DIR's retry
// files would send those records again, succeeded ones among them), and
// touches no other file.
func TestOutDirHoldsOnlyThisReconcile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := localLake(t, dir)
	g := generate(rand.New(rand.NewPCG(7, 7)), 120, 0, 0)
	m := planAndIngest(t, l, dir, g, 200)
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	// An earlier reconcile's second shard, and files that are not
	// batchlake's.
	for _, name := range []string{"retry-00001.jsonl", "retry-abcde.jsonl", "retry-+0001.jsonl", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(out, name), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := func() []string {
		t.Helper()
		es, err := os.ReadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, e := range es {
			ns = append(ns, e.Name())
		}
		return ns
	}
	o := Options{JobKey: m.JobKey, OutDir: out, TmpDir: dir, Engine: EngineOptions{Threads: 1}}
	rep, err := Run(ctx, l, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.RetryShards) != 1 {
		t.Fatalf("%d retry shards, want 1 (the generator's failures in one shard)", len(rep.RetryShards))
	}
	if got, want := names(), []string{"notes.txt", "report.json", "retry-+0001.jsonl", "retry-00000.jsonl", "retry-abcde.jsonl", "retry-lineage.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("out after a reconcile with a retry shard: %v, want %v", got, want)
	}
	// Reconciled with no retry (one attempt each): the retry files go.
	o.MaxAttempts = 1
	if rep, err = Run(ctx, l, o); err != nil {
		t.Fatal(err)
	}
	if len(rep.RetryShards) != 0 {
		t.Fatalf("%d retry shards with --max-attempts 1", len(rep.RetryShards))
	}
	if got, want := names(), []string{"notes.txt", "report.json", "retry-+0001.jsonl", "retry-abcde.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("out after a reconcile with no retry: %v, want %v", got, want)
	}
}
