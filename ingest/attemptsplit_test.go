package ingest

import (
	"context"
	"fmt"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

func TestAttemptsSplit(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name     string
		split    int
		records  int64
		size     int64
		minBytes int64
		want     int
	}{
		{"an unsplit job", 0, 10, 1 << 30, 0, 0},
		{"a job of one file", 1, 10, 1 << 30, 0, 0},
		{"a thousand errors", 16, 1_000_000, 1 * mib, 0, 0},
		{"just under two parts", 16, 1_000_000, 16*mib - 1, 0, 0},
		{"two parts", 16, 1_000_000, 16 * mib, 0, 2},
		{"a provider batch of 50,000 answers", 16, 1_000_000, 38 * mib, 0, 4},
		{"eight parts", 16, 1_000_000, 127 * mib, 0, 8},
		{"as the job's records", 16, 1_000_000, 128 * mib, 0, 16},
		{"no more than the job's records", 16, 1_000_000, 1 << 40, 0, 16},
		{"a smaller part", 16, 1_000_000, 1 * mib, 256 << 10, 4},
		{"no bound", 16, 1_000_000, 1, -1, 16},
		{"a job classified in groups", 16, SizedSplitMaxRecords + 1, 1, 0, 16},
		{"the largest job split by size", 16, SizedSplitMaxRecords, 38 * mib, 0, 4},
	} {
		m := &lake.Manifest{ExpectedSplit: c.split, ExpectedRecords: c.records}
		if got := AttemptsSplit(m, c.size, c.minBytes); got != c.want {
			t.Errorf("%s: AttemptsSplit(split %d, %d records, %d bytes, min %d) = %d, want %d", c.name, c.split, c.records, c.size, c.minBytes, got, c.want)
		}
	}
}

// TestIngestSplitsBySize: in a job split by partition, a result file's
// attempts are split in as many files as its size gives (AttemptsSplit),
// each file holding only its bucket's rows; a small file's are one file of
// any rows (an ingest record of version 1), and a large job's every file is
// split as its records are. No row is lost or repeated either way.
func TestIngestSplitsBySize(t *testing.T) {
	ctx := context.Background()
	var lines []string
	for i := range 2000 {
		lines = append(lines, fmt.Sprintf(`{"id":"r%d","custom_id":"c%d","response":{"status_code":200,"request_id":"q","body":{"model":"gpt-4o-mini-2024-07-18","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}},"error":null}`, i, i))
	}
	out := writeFile(t, "out.jsonl", lines, "\n")
	raw, size, err := lake.HashFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		records  int64
		minBytes int64
		want     int // attempts split, 0 for one file
	}{
		{"small file", 2000, size + 1, 0},
		{"four parts", 2000, size / 4, 4},
		{"sixteen parts at most", 2000, 1, lake.SplitBuckets},
		{"a job classified in groups", SizedSplitMaxRecords + 1, size + 1, lake.SplitBuckets},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLake(t)
			m := planOne(t, l)
			m.ExpectedSplit, m.ExpectedRecords = lake.SplitBuckets, c.records
			if _, err := IngestFile(ctx, l, m, FileOptions{Path: out, Channel: ChannelOutput, SplitMinBytes: c.minBytes}); err != nil {
				t.Fatal(err)
			}
			rec := ingestRecord(t, l, m, raw)
			tables := rec.AttemptTables()
			switch {
			case c.want == 0 && (rec.Version != lake.IngestVersion || rec.AttemptsFile == "" || len(tables) != 1):
				t.Fatalf("ingest record version %d, attempts file %q, %d files: want one file, version %d", rec.Version, rec.AttemptsFile, len(tables), lake.IngestVersion)
			case c.want > 0 && (rec.Version != lake.IngestSplitVersion || rec.AttemptsSplit != c.want || len(tables) != c.want):
				t.Fatalf("ingest record version %d, split %d, %d files: want %d files, version %d", rec.Version, rec.AttemptsSplit, len(tables), c.want, lake.IngestSplitVersion)
			}
			seen := map[string]bool{}
			for _, f := range tables {
				if err := lake.ReadTableFile(ctx, l, f.Key, func(rows []lake.AttemptRow) error {
					for _, r := range rows {
						if seen[r.CustomID] {
							return fmt.Errorf("%s twice", r.CustomID)
						}
						seen[r.CustomID] = true
						if f.Split > 1 && lake.IDPartition(r.CustomID, f.Split) != f.Bucket {
							return fmt.Errorf("%s (partition %d of %d) in the file of bucket %d", r.CustomID, lake.IDPartition(r.CustomID, f.Split), f.Split, f.Bucket)
						}
					}
					return nil
				}); err != nil {
					t.Fatalf("%s: %v", f.Key, err)
				}
			}
			if len(seen) != len(lines) {
				t.Fatalf("%d rows in the attempts files, want %d", len(seen), len(lines))
			}
		})
	}
}
