package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// planSegments keeps the segments whose jobs are unchanged, writes again
// those holding a changed job, and carries the newest kept ones into the
// new segment while each holds no more jobs than it has gathered.
func TestPlanSegments(t *testing.T) {
	// compaction builds a marker of segments of the given sizes; job "sNjM"
	// is the Mth job of segment N, its markers "m".
	compaction := func(sizes ...int) *lake.Compaction {
		c := &lake.Compaction{Version: lake.CompactionVersion}
		for i, n := range sizes {
			c.Segments = append(c.Segments, lake.CompactionSegment{Tables: map[string]string{"costs": fmt.Sprintf("seg%d", i)}})
			for j := range n {
				c.Jobs = append(c.Jobs, lake.CompactedJob{JobKey: fmt.Sprintf("s%dj%d", i, j), Markers: "m", Segment: i})
			}
		}
		return c
	}
	marks := func(c *lake.Compaction, changed ...string) map[string]string {
		m := map[string]string{}
		for _, j := range c.Jobs {
			m[j.JobKey] = "m"
		}
		for _, j := range changed {
			m[j] = "m2"
		}
		return m
	}
	tests := []struct {
		name    string
		sizes   []int
		changed []string
		live    int // new and changed jobs read live
		// the segments kept and merged (by their costs object), and the
		// unchanged jobs the new segment takes from the merged ones
		kept, merged []string
		mergedJobs   int
	}{
		{"nothing new", []int{8, 4}, nil, 0, []string{"seg0", "seg1"}, nil, 0},
		{"a day's jobs beside larger segments", []int{8, 4}, nil, 2, []string{"seg0", "seg1"}, nil, 0},
		{"a segment no larger than the new one", []int{8, 2}, nil, 2, []string{"seg0"}, []string{"seg1"}, 2},
		{"carries on while each fits", []int{16, 4, 2, 1}, nil, 1, []string{"seg0"}, []string{"seg3", "seg2", "seg1"}, 7},
		{"a carry through every segment", []int{8, 4, 2, 1}, nil, 1, nil, []string{"seg3", "seg2", "seg1", "seg0"}, 15},
		{"stops at the first larger one", []int{2, 8, 1}, nil, 1, []string{"seg0", "seg1"}, []string{"seg2"}, 1},
		{"a changed job writes its segment again", []int{8, 4}, []string{"s0j3"}, 1, nil, []string{"seg0", "seg1"}, 11},
		{"a changed job in the newest segment", []int{8, 4}, []string{"s1j0"}, 1, []string{"seg0"}, []string{"seg1"}, 3},
		{"version 1: one segment", nil, nil, 3, []string{"v1"}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c *lake.Compaction
			if tc.sizes == nil {
				c = &lake.Compaction{Version: 1, Tables: map[string]string{"costs": "v1"}}
				for j := range 5 {
					c.Jobs = append(c.Jobs, lake.CompactedJob{JobKey: fmt.Sprintf("v1j%d", j), Markers: "m"})
				}
			} else {
				c = compaction(tc.sizes...)
			}
			p := planSegments(c, newCompactionUse(c, marks(c, tc.changed...), Scope{}), tc.live)
			names := func(ss []segment) []string {
				var out []string
				for _, s := range ss {
					out = append(out, s.tables["costs"])
				}
				return out
			}
			if got := names(p.kept); !reflect.DeepEqual(got, tc.kept) {
				t.Errorf("kept %v, want %v", got, tc.kept)
			}
			if got := names(p.merged); !reflect.DeepEqual(got, tc.merged) {
				t.Errorf("merged %v, want %v", got, tc.merged)
			}
			if p.mergedJobs() != tc.mergedJobs {
				t.Errorf("merged jobs %d, want %d", p.mergedJobs(), tc.mergedJobs)
			}
			for _, s := range p.merged {
				for _, j := range s.jobs {
					for _, ch := range tc.changed {
						if j.JobKey == ch {
							t.Errorf("changed job %s taken from its old segment", ch)
						}
					}
				}
			}
		})
	}
}

// A job without markers (its plan stopped after its manifest, before its
// first ledger events) has no fingerprint: the compaction leaves it out,
// sessions read it live, and compacting again does not write its segment
// again for it.
func TestCompactionLeavesOutJobsWithoutMarkers(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	plan := func(tenant string) string {
		in := `{"custom_id":"r1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + tenant + `"}]}}`
		res, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", TmpDir: dir, Tenant: tenant, PromptVersion: "p1",
			Input: writeLines(t, dir, tenant+".jsonl", []string{in})})
		if err != nil {
			t.Fatal(err)
		}
		return res.JobKey
	}
	kept, bare := plan("t1"), plan("t2")
	if err := os.RemoveAll(filepath.Join(dir, "lake", "ledger", bare)); err != nil {
		t.Fatal(err)
	}
	marks, err := l.JobMarkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if marks[kept] == "" || marks[bare] != "" {
		t.Fatalf("markers: %q for the planned job, %q for the one without its ledger", marks[kept], marks[bare])
	}
	eo := EngineOptions{Threads: 1, TempDir: t.TempDir()}
	first, err := Compact(ctx, l, eo, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := l.LatestCompaction(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Jobs) != 1 || c.Jobs[0].JobKey != kept {
		t.Fatalf("the compaction names %+v, want only %s", c.Jobs, kept)
	}
	again, err := Compact(ctx, l, eo, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Key != first.Key || again.JobsWritten != 0 {
		t.Errorf("compacting again wrote %d jobs (key %s, first %s), want nothing", again.JobsWritten, again.Key, first.Key)
	}
	e, err := OpenSession(ctx, l, EngineOptions{Threads: 1, TempDir: t.TempDir()}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rows, err := e.Query(ctx, "SELECT count(DISTINCT job_key) FROM expected")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for rows.Next() {
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	rows.Close()
	if n != 2 {
		t.Errorf("the views hold %d jobs' expected rows, want 2 (the job without markers read live)", n)
	}
}
