package reconcile

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/batchlake/batchlake/lake"
)

func TestMatchIDsAndLikelyJob(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	// job plans n records with ids prefix-0000…, with a manifest unless orphan.
	job := func(name, tenant, prefix string, n int, orphan bool) *lake.Manifest {
		t.Helper()
		d := lake.Sum([]byte(name))
		rows := make([]lake.ExpectedRow, n)
		for i := range rows {
			rows[i] = lake.ExpectedRow{JobKey: d.Hex(), Tenant: tenant, ShardID: "s0", RecordID: fmt.Sprintf("%s-r%d", name, i),
				CustomID: fmt.Sprintf("%s-%04d", prefix, i), Attempt: 1}
		}
		key, err := lake.WriteTable(ctx, l, dir, "expected", tenant, d, rows)
		if err != nil {
			t.Fatal(err)
		}
		m := &lake.Manifest{Version: lake.ManifestVersion, JobKey: d.Hex(), Tenant: tenant, Provider: "openai",
			ExpectedRecords: int64(n), ExpectedFiles: []string{key}}
		if !orphan {
			if _, err := l.PutJSON(ctx, lake.ManifestKey(d), lake.FormatManifest, m); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond) // distinct modification times: newest first
		return m
	}
	target := job("target", "acme", "t", 10, false)
	a := job("a", "acme", "a", 10, false)
	job("orphan", "acme", "a", 10, true) // the same ids, but its plan never committed
	job("globex", "globex", "a", 3, false)
	ids := []string{"a-0000", "a-0001", "a-0002", "a-0003", "t-0000", "zzz"}

	e, err := OpenEngine(l, EngineOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if own, err := e.MatchIDs(ctx, target, ids); err != nil || own != 1 {
		t.Errorf("MatchIDs = %d, %v; want 1 (t-0000)", own, err)
	}
	if own, err := e.MatchIDs(ctx, a, ids); err != nil || own != 4 {
		t.Errorf("MatchIDs of job a = %d, %v; want 4", own, err)
	}
	// Several files' samples in one read: each counts only its own lines,
	// an empty sample counts none, and a sample's place is kept.
	samples := [][]string{ids, nil, {"a-0009", "t-0001", "t-0002", "a-0009"}, {"zzz"}}
	for _, c := range []struct {
		m    *lake.Manifest
		want []int64
	}{{target, []int64{1, 0, 2, 0}}, {a, []int64{4, 0, 2, 0}}} {
		own, err := e.MatchEach(ctx, c.m, samples)
		if err != nil || !slices.Equal(own, c.want) {
			t.Errorf("MatchEach of job %s = %v, %v; want %v", c.m.JobKey[:8], own, err, c.want)
		}
		// The same without a DuckDB session, as ingest checks a file.
		own, err = MatchEach(ctx, l, EngineOptions{}, c.m, samples)
		if err != nil || !slices.Equal(own, c.want) {
			t.Errorf("MatchEach (no session) of job %s = %v, %v; want %v", c.m.JobKey[:8], own, err, c.want)
		}
	}
	tests := []struct {
		name     string
		maxJobs  int
		maxBytes int64
		job      string
		lines    int64
		searched int
		bounded  bool
	}{
		{"the job with the most matching lines, not an orphan plan", 64, 256 << 20, a.JobKey, 4, 3, false},
		{"bounded to one job: the newest of the tenant, an orphan plan", 1, 256 << 20, "", 0, 1, true},
		{"bounded by bytes", 64, 1, "", 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func(j int, b int64) { likelyMaxJobs, likelyMaxBytes = j, b }(likelyMaxJobs, likelyMaxBytes)
			likelyMaxJobs, likelyMaxBytes = tc.maxJobs, tc.maxBytes
			got, err := e.LikelyJob(ctx, target, ids)
			if err != nil {
				t.Fatal(err)
			}
			if got.JobKey != tc.job || got.Lines != tc.lines || got.Searched != tc.searched || got.Bounded != tc.bounded {
				t.Errorf("LikelyJob = %+v; want job %q, %d lines, %d searched, bounded %v", got, tc.job, tc.lines, tc.searched, tc.bounded)
			}
			if got.JobKey != "" && got.Tenant != "acme" {
				t.Errorf("tenant %q, want acme", got.Tenant)
			}
		})
	}
}

// The match check reads every expected row of the job; its memory must
// follow the sample, not the job's size (a DISTINCT over every expected row
// once held a whole job's ids: ingest peaked at 732 MiB at 3M records, in
// this check). The job's ids are looked up where parquet-go decoded them,
// never copied: the check allocates far less than they take.
func TestMatchIDsMemoryFollowsTheSample(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	const n = 300_000
	d := lake.Sum([]byte("big"))
	w, err := lake.NewTableWriter[lake.ExpectedRow](l, dir, "expected", "acme", d)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	batch := make([]lake.ExpectedRow, 0, 4096)
	for i := range n {
		batch = append(batch, lake.ExpectedRow{JobKey: d.Hex(), Tenant: "acme", ShardID: "s0",
			RecordID: fmt.Sprintf("r%d", i), CustomID: fmt.Sprintf("request-%032d", i), Attempt: 1})
		if len(batch) == cap(batch) || i == n-1 {
			if err := w.Write(batch...); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	key, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := &lake.Manifest{Version: lake.ManifestVersion, JobKey: d.Hex(), Tenant: "acme", Provider: "openai",
		ExpectedRecords: n, ExpectedFiles: []string{key}}

	e, err := OpenEngine(l, EngineOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ids := []string{fmt.Sprintf("request-%032d", 7), fmt.Sprintf("request-%032d", n-1), fmt.Sprintf("request-%032d", 7), "other"}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	own, err := e.MatchIDs(ctx, m, ids)
	runtime.ReadMemStats(&after)
	if err != nil || own != 3 {
		t.Errorf("MatchIDs = %d, %v; want 3 (a repeated id counts per line)", own, err)
	}
	idBytes := uint64(n * len(ids[0]))
	if got := after.TotalAlloc - before.TotalAlloc; got > idBytes/4 {
		t.Errorf("the check allocated %d bytes; the job's ids take %d", got, idBytes)
	}
}
