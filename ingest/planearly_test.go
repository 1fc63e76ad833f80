package ingest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/lake"
)

// TestPlanEarlyExpected: an input in key order has its expected rows written
// as it is read, the job key filled in once known; any other input is read
// again, its records sorted. Either way the plan's result, errors, shards and
// manifest are those of a plan that keeps every record until the end, and so
// are the expected rows, file by file: byte for byte where the job has one
// file, and where it is split, the same rows in the same files (the filled
// files lay out their job key column apart).
func TestPlanEarlyExpected(t *testing.T) {
	var sorted []string
	for i := range 60 {
		sorted = append(sorted, openaiLine(fmt.Sprintf("id-%03d", i), "gpt-4o-mini", fmt.Sprintf("text %d", i)))
	}
	swapped := slices.Clone(sorted)
	swapped[40], swapped[41] = swapped[41], swapped[40]
	duplicate := slices.Concat(sorted[:30], sorted[29:])
	// Keyed by a field of their own, in that key's order (and in custom id
	// order too).
	var keyed []string
	for i := range 60 {
		keyed = append(keyed, fmt.Sprintf(`{"custom_id": "id-%03d", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "text"}], "user": "u-%03d"}}`, i, i))
	}
	long := slices.Clone(sorted)
	long[30] = openaiLine("id-030", "gpt-4o-mini", strings.Repeat("long ", 100))
	split := func(n int64) func(*PlanOptions) { return func(o *PlanOptions) { o.SplitMinRecords = n } }
	cases := []struct {
		name  string
		lines []string
		edit  func(*PlanOptions)
		early bool // the rows were written while reading
		same  bool // the lakes are the same bytes
	}{
		{"in order, one file", sorted, nil, true, true},
		{"in order, split", sorted, split(20), true, false},
		{"in order, split at the last record", sorted, split(60), true, false},
		{"in order, one record short of a split", sorted, split(61), true, true},
		{"in order, never split", sorted, split(-1), true, false},
		{"two records swapped late", swapped, split(20), false, true},
		{"a duplicate id", duplicate, split(20), false, true},
		{"a bad line last", append(slices.Clone(sorted), `{"custom_id": "id-999"`), split(20), false, true},
		{"a bad line first", append([]string{`{"custom_id": "id-000"`}, sorted[1:]...), split(20), false, true},
		{"keyed by another field", keyed, func(o *PlanOptions) { o.SplitMinRecords, o.KeyField = 20, "body.user" }, false, true},
		{"shards of one record", sorted, func(o *PlanOptions) { o.SplitMinRecords, o.ShardMaxBytes = 20, 180 }, true, false},
		{"a line over the shard limit", long, func(o *PlanOptions) { o.SplitMinRecords, o.ShardMaxBytes = 20, 400 }, false, true},
		{"shards balanced over a minimum", sorted, func(o *PlanOptions) { o.SplitMinRecords, o.MinRecords, o.BelowMin = 20, 5, BelowMinAllow }, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, wl, wobjs := planLake(t, c.lines, func(o *PlanOptions) {
				if c.edit != nil {
					c.edit(o)
				}
				o.noEarly = true
			})
			var early bool
			got, gl, gobjs := planLake(t, c.lines, func(o *PlanOptions) {
				if c.edit != nil {
					c.edit(o)
				}
				o.wroteEarly = func() { early = true }
			})
			if got != want {
				t.Fatalf("plan:\n got %s\nwant %s", got, want)
			}
			if early != c.early {
				t.Errorf("expected rows written while reading: %v, want %v", early, c.early)
			}
			if same := maps.Equal(gobjs, wobjs); same != c.same {
				t.Errorf("the lakes are the same bytes: %v, want %v", same, c.same)
			}
			if strings.HasPrefix(want, "error: ") {
				return
			}
			job := strings.Fields(want)[0]
			wm, gm := manifestOf(t, wl, job), manifestOf(t, gl, job)
			wantRows, gotRows := expectedByFile(t, wl, wm), expectedByFile(t, gl, gm)
			if !reflect.DeepEqual(gotRows, wantRows) {
				t.Errorf("expected rows differ: %d files against %d", len(gotRows), len(wantRows))
			}
			if len(gotRows) < 2 && c.edit != nil && !c.same && gm.ExpectedSplit > 0 {
				t.Errorf("a split job of %d files", len(gotRows))
			}
			wm.ExpectedFiles, gm.ExpectedFiles = nil, nil
			if !reflect.DeepEqual(gm, wm) {
				t.Errorf("manifest:\n got %+v\nwant %+v", gm, wm)
			}
			for k, v := range wobjs {
				if !strings.HasPrefix(k, "tables/expected/") && !strings.HasPrefix(k, "manifests/") && gobjs[k] != v {
					t.Errorf("object %s differs or is missing", k)
				}
			}
		})
	}
}

// planLake plans lines as planWith does and returns the lake too.
func planLake(t *testing.T, lines []string, edit func(*PlanOptions)) (string, *lake.Lake, map[string]string) {
	t.Helper()
	ctx := context.Background()
	l := newLake(t)
	tmp := t.TempDir()
	o := opts(writeFile(t, "in.jsonl", lines, "\n"))
	o.TmpDir, o.ShardMaxRecords = tmp, 7
	o.Now = func() time.Time { return time.Unix(0, 0).UTC() }
	edit(&o)
	res, err := Plan(ctx, l, o)
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("plan left %d temporary file(s), e.g. %s", len(left), left[0].Name())
	}
	objs := map[string]string{}
	for _, k := range keys(t, l) {
		if strings.HasPrefix(k, "ledger/") {
			continue // events carry the time they were written
		}
		b, rerr := l.Bucket.ReadAll(ctx, k)
		if rerr != nil {
			t.Fatal(rerr)
		}
		objs[k] = string(b)
	}
	if err != nil {
		return "error: " + err.Error(), l, objs
	}
	return fmt.Sprintf("%s %d %v %s", res.JobKey, res.Records, res.Shards, res.Message), l, objs
}

func manifestOf(t *testing.T, l *lake.Lake, job string) *lake.Manifest {
	t.Helper()
	m, err := l.GetManifest(context.Background(), mustDigest(t, job))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// expectedByFile are a job's expected rows, file by file in the manifest's
// order.
func expectedByFile(t *testing.T, l *lake.Lake, m *lake.Manifest) [][]lake.ExpectedRow {
	t.Helper()
	var out [][]lake.ExpectedRow
	for _, k := range m.ExpectedFiles {
		var rows []lake.ExpectedRow
		if err := lake.ReadTableFile(context.Background(), l, k, func(rs []lake.ExpectedRow) error {
			rows = append(rows, rs...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		out = append(out, rows)
	}
	return out
}
