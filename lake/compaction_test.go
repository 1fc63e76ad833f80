package lake

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestCompactionMarker(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		tamper func(f *fixture, c *Compaction)
		want   []string // problem messages, by substring
	}{
		{"intact", func(*fixture, *Compaction) {}, nil},
		{"table object missing", func(f *fixture, c *Compaction) { c.Tables["costs"] = ObjectKey(Sum([]byte("gone"))) },
			[]string{"compaction table costs objects/sha256/"}},
		{"table not an object", func(f *fixture, c *Compaction) { c.Tables["ledger"] = f.expected },
			[]string{"compaction table ledger is"}},
		{"job without a manifest", func(f *fixture, c *Compaction) {
			c.Jobs = append(c.Jobs, CompactedJob{JobKey: Sum([]byte("no such job")).Hex(), Tenant: "acme"})
		}, []string{"compaction of job"}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					l := b.open(t)
					f := buildLake(t, l)
					marks, err := l.JobMarkers(ctx)
					if err != nil {
						t.Fatal(err)
					}
					c := &Compaction{CreatedAt: t0, Jobs: []CompactedJob{{JobKey: f.job.Hex(), Tenant: f.tenant, Markers: marks[f.job.Hex()]}},
						Tables: map[string]string{"outcomes": f.shard}}
					tc.tamper(f, c)
					k, err := l.PutCompaction(ctx, c)
					if err != nil {
						t.Fatal(err)
					}
					latest, lk, err := l.LatestCompaction(ctx)
					if err != nil || lk != k || len(latest.Jobs) != len(c.Jobs) {
						t.Fatalf("LatestCompaction: %s %v, want %s", lk, err, k)
					}
					rep, err := Verify(ctx, l)
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, p := range rep.Problems {
						if p.Key == k && p.Severity == SeverityError {
							got = append(got, p.Message)
						}
					}
					if len(got) != len(tc.want) {
						t.Fatalf("problems %q, want %q (all: %+v)", got, tc.want, rep.Problems)
					}
					for i, w := range tc.want {
						if !strings.Contains(got[i], w) {
							t.Errorf("problem %q, want %q", got[i], w)
						}
					}
				})
			}
		})
	}
}

// A job's marker fingerprint changes when an event is appended to its
// ledger, and only that job's.
func TestJobMarkersSeeNewEvents(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			l := b.open(t)
			f := buildLake(t, l)
			before, err := l.JobMarkers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if before[f.job.Hex()] == "" {
				t.Fatalf("no fingerprint for the job: %v", before)
			}
			sealEvent(t, l, LedgerKey(f.job, "s0", len(f.ledger)+1), Event{JobKey: f.job.Hex(), ShardID: "s0", Seq: len(f.ledger) + 1,
				State: Reconciling, At: t0.Add(time.Hour), Actor: "x"})
			after, err := l.JobMarkers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after[f.job.Hex()] == before[f.job.Hex()] {
				t.Error("the fingerprint did not change with a new ledger event")
			}
		})
	}
}
