package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/bench/lakegen"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

// viewNames are every view a session makes.
var viewNames = []string{"manifests", "shards", "expected", "attempts", "quarantine", "outcomes", "records", "costs",
	"ledger", "ingests", "batches", "report_files", "accepted", "manual"}

// dumpViews renders every row of every view (sorted) and the two analyst
// queries, as one string per view.
func dumpViews(t *testing.T, ctx context.Context, l *lake.Lake, scope reconcile.Scope) map[string]string {
	t.Helper()
	e, err := reconcile.OpenSession(ctx, l, reconcile.EngineOptions{Threads: 1, TempDir: t.TempDir(), CacheDir: t.TempDir()}, scope)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	out := map[string]string{}
	qs := map[string]string{
		"q:costs":   "SELECT tenant, sum(cost_usd) FROM costs GROUP BY 1 ORDER BY 1",
		"q:records": "SELECT tenant, final_state, count(*), sum(cost_usd) FROM records GROUP BY ALL ORDER BY ALL",
	}
	for _, v := range viewNames {
		qs[v] = "SELECT * FROM " + v + " ORDER BY ALL"
	}
	for name, q := range qs {
		rows, err := e.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cols, _ := rows.Columns()
		var b strings.Builder
		fmt.Fprintln(&b, strings.Join(cols, ","))
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%v\n", vals)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		out[name] = b.String()
	}
	return out
}

// copyLake copies a local lake without its compactions: the same lake as
// read with no compaction.
func copyLake(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if strings.HasPrefix(rel, "compactions") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

func sameViews(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: view %s differs with the compaction:\n got %.600s\nwant %.600s", what, name, got[name], w)
		}
	}
}

func openLake(t *testing.T, ctx context.Context, dir string) *lake.Lake {
	l, err := lake.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// lakeOfJobs is a local lake (its folder, open) of n simulated jobs over two
// tenants, their generator (closed with the test) and the job keys made
// (first attempts and their retry children).
func lakeOfJobs(t *testing.T, ctx context.Context, n int) (string, *lake.Lake, *lakegen.Generator, []string) {
	t.Helper()
	dir := t.TempDir()
	l := openLake(t, ctx, dir)
	g, err := lakegen.New(l, lakegen.Options{TmpDir: t.TempDir(), Tenants: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	var keys []string
	for i := range n {
		k, err := g.Job(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k...)
	}
	return dir, l, g, keys
}

func TestCompactionGivesTheSameViews(t *testing.T) {
	if testing.Short() {
		t.Skip("makes simulated jobs end to end")
	}
	ctx := context.Background()
	dir, l, g, first := lakeOfJobs(t, ctx, 3)
	eo := reconcile.EngineOptions{Threads: 1, TempDir: t.TempDir()}
	all := reconcile.Scope{}
	one := reconcile.Scope{Tenant: g.Tenant(1)}
	before, beforeOne := dumpViews(t, ctx, l, all), dumpViews(t, ctx, l, one)
	clock := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	res, err := reconcile.Compact(ctx, l, eo, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	if res.Jobs != len(first) {
		t.Fatalf("compaction covers %d jobs, want %d", res.Jobs, len(first))
	}

	t.Run("same rows with and without it", func(t *testing.T) {
		sameViews(t, "whole lake", dumpViews(t, ctx, l, all), before)
		sameViews(t, "one tenant", dumpViews(t, ctx, l, one), beforeOne)
	})
	t.Run("the session reads the compaction, not the jobs' files", func(t *testing.T) {
		e, err := reconcile.OpenEngine(l, eo)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		files, err := e.Views(ctx, all, "TEMP VIEW", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.Contains(f, string(filepath.Separator)+"tables"+string(filepath.Separator)) {
				t.Errorf("a covered job's table file is read: %s", f)
			}
		}
	})
	t.Run("verify finds it true", func(t *testing.T) {
		ps, err := reconcile.VerifyCompactions(ctx, l, eo)
		if err != nil || len(ps) > 0 {
			t.Fatalf("problems %+v, err %v", ps, err)
		}
		rep, err := lake.Verify(ctx, l)
		if err != nil || !rep.OK() {
			t.Fatalf("lake.Verify: %+v, %v", rep.Problems, err)
		}
	})

	// A new job, and a covered job that changes (reconciled again with
	// other settings: a new report and new ledger events), after the
	// compaction.
	if _, err := g.Job(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := reconcile.Run(ctx, l, reconcile.Options{JobKey: first[0], MaxAttempts: 5, TmpDir: t.TempDir(), Engine: eo}); err != nil {
		t.Fatal(err)
	}
	plain := openLake(t, ctx, copyLake(t, dir))
	t.Run("new and changed jobs are read live", func(t *testing.T) {
		want := dumpViews(t, ctx, plain, all)
		if want["ledger"] == before["ledger"] || want["manifests"] == before["manifests"] {
			t.Fatal("the lake did not change")
		}
		sameViews(t, "after new jobs", dumpViews(t, ctx, l, all), want)
		sameViews(t, "one tenant after new jobs", dumpViews(t, ctx, l, one), dumpViews(t, ctx, plain, one))
	})

	t.Run("compacting again reads the new and changed jobs", func(t *testing.T) {
		again, err := reconcile.Compact(ctx, l, eo, func() time.Time { return clock.Add(time.Minute) })
		if err != nil {
			t.Fatal(err)
		}
		ms, err := plain.List(ctx, lake.ManifestPrefix)
		if err != nil {
			t.Fatal(err)
		}
		if again.Jobs != len(ms) || again.Key == res.Key {
			t.Errorf("second compaction %s covers %d jobs, want %d (first %s)", again.Key, again.Jobs, len(ms), res.Key)
		}
		sameViews(t, "second compaction", dumpViews(t, ctx, l, all), dumpViews(t, ctx, plain, all))
		if ps, err := reconcile.VerifyCompactions(ctx, l, eo); err != nil || len(ps) > 0 {
			t.Fatalf("verify: problems %+v, err %v", ps, err)
		}
	})

	// A compaction that claims the jobs' current markers but holds the old
	// rows (a bug, or a forged marker): it is the newest, so a session
	// would trust it; verify must refuse it.
	var old lake.Compaction
	if err := l.GetJSON(ctx, res.Key, lake.FormatCompaction, &old); err != nil {
		t.Fatal(err)
	}
	marks, err := l.JobMarkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	forged := lake.Compaction{CreatedAt: clock.Add(time.Hour), Segments: old.Segments}
	// (old is the first compaction: from before the new and changed jobs.)
	for _, j := range old.Jobs {
		j.Markers = marks[j.JobKey]
		forged.Jobs = append(forged.Jobs, j)
	}
	if _, err := l.PutCompaction(ctx, &forged); err != nil {
		t.Fatal(err)
	}
	t.Run("verify refuses a compaction that differs from its sources", func(t *testing.T) {
		ps, err := reconcile.VerifyCompactions(ctx, l, eo)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range ps {
			if strings.Contains(p.Message, "ledger") && strings.Contains(p.Message, "differ") {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem with the forged compaction's ledger: %+v", ps)
		}
	})

	// Damaged bytes: a session reads a compacted file only after checking
	// it against its digest, and verify re-hashes the covered jobs' own
	// files, which a session does not read.
	tamper := func(t *testing.T, key string) {
		t.Helper()
		p := l.LocalPath(key)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("a session refuses a damaged compacted file", func(t *testing.T) {
		tamper(t, old.Segments[0].Tables["costs"])
		e, err := reconcile.OpenSession(ctx, l, reconcile.EngineOptions{Threads: 1, TempDir: t.TempDir()}, all)
		if err == nil {
			e.Close()
			t.Fatal("the session opened over a damaged compacted file")
		}
		if !errors.Is(err, lake.ErrCorrupt) {
			t.Errorf("err %v, want lake.ErrCorrupt", err)
		}
	})
	t.Run("verify finds a damaged source of a covered job", func(t *testing.T) {
		m, err := l.GetManifest(ctx, mustDigest(t, first[1]))
		if err != nil {
			t.Fatal(err)
		}
		tamper(t, m.ExpectedFiles[0])
		rep, err := lake.Verify(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range rep.Problems {
			found = found || p.Key == m.ExpectedFiles[0]
		}
		if !found {
			t.Errorf("no problem names the damaged file %s: %+v", m.ExpectedFiles[0], rep.Problems)
		}
	})
}

func mustDigest(t *testing.T, s string) lake.Digest {
	t.Helper()
	d, err := lake.ParseDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Compacting again keeps the segments of unchanged jobs as they are (their
// objects named again, nothing written), writes one new segment for new
// and changed jobs, writes nothing when no job changed, and verify holds a
// segment to the jobs its marker places in it.
func TestCompactingAgainKeepsUnchangedSegments(t *testing.T) {
	if testing.Short() {
		t.Skip("makes simulated jobs end to end")
	}
	ctx := context.Background()
	dir, l, g, first := lakeOfJobs(t, ctx, 3)
	eo := reconcile.EngineOptions{Threads: 1, TempDir: t.TempDir()}
	clock := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	compact := func(t *testing.T, step int) (*reconcile.CompactResult, *lake.Compaction) {
		t.Helper()
		res, err := reconcile.Compact(ctx, l, eo, func() time.Time { return clock.Add(time.Duration(step) * time.Minute) })
		if err != nil {
			t.Fatal(err)
		}
		var c lake.Compaction
		if err := l.GetJSON(ctx, res.Key, lake.FormatCompaction, &c); err != nil {
			t.Fatal(err)
		}
		return res, &c
	}
	checkViews := func(t *testing.T) {
		t.Helper()
		plain := openLake(t, ctx, copyLake(t, dir))
		sameViews(t, "compacted", dumpViews(t, ctx, l, reconcile.Scope{}), dumpViews(t, ctx, plain, reconcile.Scope{}))
		if ps, err := reconcile.VerifyCompactions(ctx, l, eo); err != nil || len(ps) > 0 {
			t.Fatalf("verify: problems %+v, err %v", ps, err)
		}
	}
	markers := func(t *testing.T) int {
		t.Helper()
		ks, err := l.List(ctx, lake.CompactionArea)
		if err != nil {
			t.Fatal(err)
		}
		return len(ks)
	}

	r1, c1 := compact(t, 1)
	if r1.Segments != 1 || r1.JobsWritten != len(first) {
		t.Fatalf("first compaction: %d segments, %d jobs written; want 1 and %d", r1.Segments, r1.JobsWritten, len(first))
	}
	t.Run("nothing changed: nothing written", func(t *testing.T) {
		r, _ := compact(t, 2)
		if r.Key != r1.Key || r.JobsWritten != 0 || len(r.Tables) != 0 || markers(t) != 1 {
			t.Errorf("compacting an unchanged lake: key %s (first %s), %d jobs written, %d objects, %d markers", r.Key, r1.Key, r.JobsWritten, len(r.Tables), markers(t))
		}
	})

	// The same compaction as a marker of version 1 (one object per view
	// source, from before segments), the newest: sessions and verify read
	// it as one segment, and compacting again keeps it.
	v1 := lake.Compaction{Version: 1, CreatedAt: clock.Add(150 * time.Second), Jobs: c1.Jobs, Tables: c1.Segments[0].Tables}
	v1Key, err := l.PutCompaction(ctx, &v1)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a version 1 marker is read as one segment", func(t *testing.T) {
		if _, k, err := l.LatestCompaction(ctx); err != nil || k != v1Key {
			t.Fatalf("latest compaction %s, %v; want the version 1 marker %s", k, err, v1Key)
		}
		checkViews(t)
	})

	added, err := g.Job(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) >= len(first) {
		t.Fatalf("the new job has %d jobs with its retries, the first segment %d: the test needs fewer", len(added), len(first))
	}
	r2, c2 := compact(t, 3)
	t.Run("a new job: the old segment kept, a new one written", func(t *testing.T) {
		if r2.Segments != 2 || r2.JobsWritten != len(added) || r2.Jobs != len(first)+len(added) {
			t.Fatalf("%d segments, %d jobs written, %d covered; want 2, %d, %d", r2.Segments, r2.JobsWritten, r2.Jobs, len(added), len(first)+len(added))
		}
		if !reflect.DeepEqual(c2.Segments[0].Tables, c1.Segments[0].Tables) {
			t.Errorf("the first segment's objects were written again:\n got %v\nwant %v", c2.Segments[0].Tables, c1.Segments[0].Tables)
		}
		for _, j := range c2.Jobs {
			if want := slices.Contains(added, j.JobKey); (j.Segment == 1) != want {
				t.Errorf("job %s in segment %d", j.JobKey, j.Segment)
			}
		}
		checkViews(t)
	})

	// A job of the first segment changes: that segment is written again,
	// with the new job's segment (no larger than what it gathers).
	if _, err := reconcile.Run(ctx, l, reconcile.Options{JobKey: first[0], MaxAttempts: 5, TmpDir: t.TempDir(), Engine: eo}); err != nil {
		t.Fatal(err)
	}
	r3, _ := compact(t, 4)
	t.Run("a changed job: its segment written again", func(t *testing.T) {
		if r3.Segments != 1 || r3.JobsWritten != r2.Jobs {
			t.Fatalf("%d segments, %d jobs written; want 1 and %d", r3.Segments, r3.JobsWritten, r2.Jobs)
		}
		checkViews(t)
	})

	t.Run("verify refuses rows in another segment than the marker says", func(t *testing.T) {
		// c2's two segments, and the marker moving one of the first
		// segment's jobs into the second (its markers as they are now).
		marks, err := l.JobMarkers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		forged := lake.Compaction{CreatedAt: clock.Add(time.Hour), Segments: c2.Segments}
		moved := ""
		for _, j := range c2.Jobs {
			j.Markers = marks[j.JobKey]
			if j.Segment == 0 && moved == "" && j.JobKey != first[0] {
				j.Segment, moved = 1, j.JobKey
			}
			forged.Jobs = append(forged.Jobs, j)
		}
		if _, err := l.PutCompaction(ctx, &forged); err != nil {
			t.Fatal(err)
		}
		ps, err := reconcile.VerifyCompactions(ctx, l, eo)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range ps {
			found = found || strings.Contains(p.Message, "does not name in that segment")
		}
		if !found {
			t.Errorf("no problem with job %s's rows in segment 0 of a marker placing it in 1: %+v", moved, ps)
		}
	})
}
