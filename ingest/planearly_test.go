package ingest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/lake"
)

// TestPlanEarlyExpected: an input in key order has its expected rows written
// as it is read, the job key filled in once known; any other input is read
// again, its records sorted. Either way the lake holds byte for byte what a
// plan that keeps every record until the end writes: the same result or
// errors, shards, expected files and manifest.
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
	// The same records in files of other shapes: the text of the input
	// (lines joined by "\n" and one after the last when nil).
	crlf := func(ls []string) string { return strings.Join(ls, "\r\n") + "\r\n" }
	var blanks strings.Builder
	for i, l := range sorted {
		blanks.WriteString(l + "\n")
		if i%7 == 3 {
			blanks.WriteString("\n  \t\n")
		}
	}
	cases := []struct {
		name  string
		lines []string
		edit  func(*PlanOptions)
		early bool // the rows were written while reading
		files int  // expected files
		text  string
	}{
		{"CRLF, split", sorted, split(20), true, 16, crlf(sorted)},
		{"a BOM, split", sorted, split(20), true, 16, "\xEF\xBB\xBF" + crlf(sorted)},
		{"blank lines, split", sorted, split(20), true, 16, blanks.String()},
		{"no last newline, one file", sorted, nil, true, 1, strings.Join(sorted, "\r\n")},
		{"no last newline, split", sorted, split(20), true, 16, strings.Join(sorted, "\n")},
		{"in order, one file", sorted, nil, true, 1, ""},
		{"in order, split", sorted, split(20), true, 16, ""},
		{"in order, split at the last record", sorted, split(60), true, 16, ""},
		{"in order, one record short of a split", sorted, split(61), true, 1, ""},
		{"in order, never split", sorted, split(-1), true, 1, ""},
		{"two records swapped late", swapped, split(20), false, 16, ""},
		{"a duplicate id", duplicate, split(20), false, 0, ""},
		{"a bad line last", append(slices.Clone(sorted), `{"custom_id": "id-999"`), split(20), false, 0, ""},
		{"a bad line first", append([]string{`{"custom_id": "id-000"`}, sorted[1:]...), split(20), false, 0, ""},
		{"keyed by another field", keyed, func(o *PlanOptions) { o.SplitMinRecords, o.KeyField = 20, "body.user" }, false, 16, ""},
		{"shards of one record", sorted, func(o *PlanOptions) { o.SplitMinRecords, o.ShardMaxBytes = 20, 180 }, true, 16, ""},
		{"a line over the shard limit", long, func(o *PlanOptions) { o.SplitMinRecords, o.ShardMaxBytes = 20, 400 }, false, 0, ""},
		{"shards balanced over a minimum", sorted, func(o *PlanOptions) { o.SplitMinRecords, o.MinRecords, o.BelowMin = 20, 5, BelowMinAllow }, false, 16, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := c.text
			if text == "" {
				text = strings.Join(c.lines, "\n") + "\n"
			}
			want, _, wobjs := planLake(t, text, func(o *PlanOptions) {
				if c.edit != nil {
					c.edit(o)
				}
				o.noEarly = true
			})
			var early bool
			got, gl, gobjs := planLake(t, text, func(o *PlanOptions) {
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
			if !maps.Equal(gobjs, wobjs) {
				for k, v := range wobjs {
					if gobjs[k] != v {
						t.Errorf("object %s differs or is missing", k)
					}
				}
				t.Fatalf("the lakes differ: %d objects against %d", len(gobjs), len(wobjs))
			}
			if strings.HasPrefix(want, "error: ") {
				if c.files != 0 {
					t.Fatal(want)
				}
				return
			}
			m := manifestOf(t, gl, strings.Fields(want)[0])
			rows := expectedByFile(t, gl, m)
			if len(rows) != c.files {
				t.Errorf("%d expected files, want %d", len(rows), c.files)
			}
			var n int
			for _, f := range rows {
				for _, r := range f {
					n++
					if r.JobKey != m.JobKey || r.Tenant != m.Tenant || r.RecordID == "" {
						t.Fatalf("expected row %+v of job %s", r, m.JobKey)
					}
				}
			}
			if n != len(c.lines) || int64(n) != m.ExpectedRecords {
				t.Errorf("%d expected rows, %d lines, %d records in the manifest", n, len(c.lines), m.ExpectedRecords)
			}
		})
	}
}

// planLake plans the input text into a new lake, with shards of at most 7 records
// and a fixed clock, after edit, and returns the plan's result (or error),
// the lake and its objects but the ledger's events (they carry the time
// they were written).
func planLake(t *testing.T, text string, edit func(*PlanOptions)) (string, *lake.Lake, map[string]string) {
	t.Helper()
	ctx := context.Background()
	l := newLake(t)
	tmp := t.TempDir()
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	o := opts(in)
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
