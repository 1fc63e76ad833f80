package lakegen

import (
	"context"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// The generated lake is a real one: verify finds no problem, every job has
// a manifest, and the inputs are spread over the tenants.
func TestGeneratedLakeVerifies(t *testing.T) {
	ctx := context.Background()
	l, err := lake.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g, err := New(l, Options{TmpDir: t.TempDir(), Tenants: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var keys []string
	for i := range 3 {
		k, err := g.Job(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k...)
	}
	tenants := map[string]bool{}
	for _, k := range keys {
		d, _ := lake.ParseDigest(k)
		m, err := l.GetManifest(ctx, d)
		if err != nil {
			t.Fatalf("job %s: %v", k, err)
		}
		tenants[m.Tenant] = true
	}
	if len(tenants) != 2 {
		t.Errorf("tenants %v, want 2", tenants)
	}
	ms, err := l.List(ctx, lake.ManifestPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != len(keys) || len(keys) < 3 {
		t.Errorf("%d manifests for %d job keys (3 inputs)", len(ms), len(keys))
	}
	// Each job's simulator keeps its state in memory: nothing of it lands
	// in the lake, so a job's submit lists only its own batches.
	if sk, err := l.List(ctx, lake.SimStatePrefix); err != nil || len(sk) > 0 {
		t.Errorf("simulator state in the lake: %d keys (%v), want none", len(sk), err)
	}
	rep, err := lake.Verify(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 || rep.Reports < 3 {
		t.Errorf("verify: %d reports, problems %+v", rep.Reports, rep.Problems)
	}
}
