package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
		// refused: the marker itself is malformed, so a session refuses
		// to read it too (the others fail later, on the objects).
		refused bool
	}{
		{"intact", func(*fixture, *Compaction) {}, nil, false},
		{"table object missing", func(f *fixture, c *Compaction) { c.Segments[0].Tables["costs"] = ObjectKey(Sum([]byte("gone"))) },
			[]string{"compaction table costs objects/sha256/"}, false},
		{"table not an object", func(f *fixture, c *Compaction) { c.Segments[0].Tables["ledger"] = f.expected },
			[]string{"compaction table ledger is"}, false},
		{"job without a manifest", func(f *fixture, c *Compaction) {
			c.Jobs = append(c.Jobs, CompactedJob{JobKey: Sum([]byte("no such job")).Hex(), Tenant: "acme"})
		}, []string{"compaction of job"}, false},
		{"a second segment's object missing", func(f *fixture, c *Compaction) {
			c.Jobs = append(c.Jobs, CompactedJob{JobKey: f.job.Hex(), Tenant: f.tenant, Segment: 1})
			c.Segments = append(c.Segments, CompactionSegment{Tables: map[string]string{"outcomes": ObjectKey(Sum([]byte("gone")))}})
		}, []string{"compaction table outcomes objects/sha256/"}, false},
		{"job in no segment", func(f *fixture, c *Compaction) { c.Jobs[0].Segment = 1 }, []string{"in segment 1 of 1"}, true},
		{"segment without a job", func(f *fixture, c *Compaction) {
			c.Segments = append(c.Segments, CompactionSegment{Tables: map[string]string{"outcomes": f.shard}})
		}, []string{"segment 1 holds no job"}, true},
		{"tables beside segments", func(f *fixture, c *Compaction) { c.Tables = map[string]string{"outcomes": f.shard} },
			[]string{"compaction_version 2 holds its tables in segments"}, true},
		{"version 1, its one object per view source", func(f *fixture, c *Compaction) {
			c.Version, c.Tables, c.Segments = 1, map[string]string{"outcomes": f.shard}, nil
		}, nil, false},
		{"version 1 with segments", func(f *fixture, c *Compaction) { c.Version = 1 },
			[]string{"compaction_version 1 holds tables and no segments"}, true},
		{"unknown version", func(f *fixture, c *Compaction) { c.Version = 3 }, []string{"unknown compaction_version 3"}, true},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					l := b.open(t)
					f := buildLake(t, l)
					c := compactionOf(t, l, f)
					tc.tamper(f, c)
					// Stored as PutCompaction would, without its check: the
					// marker may be one it refuses to write.
					b, err := json.Marshal(c)
					if err != nil {
						t.Fatal(err)
					}
					k := CompactionKey(Sum(b))
					if _, err := l.PutJSON(ctx, k, FormatCompaction, c); err != nil {
						t.Fatal(err)
					}
					latest, lk, err := l.LatestCompaction(ctx)
					if tc.refused {
						if err == nil {
							t.Errorf("LatestCompaction read a malformed marker")
						}
					} else if err != nil || lk != k || len(latest.Jobs) != len(c.Jobs) {
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

// LatestCompaction picks the newest marker from each marker's first bytes
// and reads only that one whole: an older marker that no longer verifies
// does not stop a session (verify reports it), a marker whose envelope is
// laid out otherwise is still read, and the one chosen is checked whole.
func TestLatestCompactionReadsOnlyTheNewest(t *testing.T) {
	ctx := context.Background()
	put := func(t *testing.T, l *Lake, at time.Time, seal func(body []byte) []byte) string {
		t.Helper()
		body, err := json.Marshal(&Compaction{Version: CompactionVersion, CreatedAt: at,
			Jobs: []CompactedJob{{JobKey: "j"}}, Segments: []CompactionSegment{{Tables: map[string]string{"x": "y0"}}}})
		if err != nil {
			t.Fatal(err)
		}
		k := CompactionKey(Sum(body))
		if _, err := l.PutOnce(ctx, k, seal(body)); err != nil {
			t.Fatal(err)
		}
		return k
	}
	sealed := func(body []byte) []byte {
		b, _ := json.Marshal(envelope{Format: FormatCompaction, SHA256: Sum(body).Hex(), Body: body})
		return b
	}
	// The body's digest in the envelope, but the body's tail changed: it
	// parses, its first bytes are intact, and it does not verify.
	damaged := func(body []byte) []byte {
		b := sealed(body)
		return bytes.Replace(b, []byte(`"tables":{"x":"y0"}`), []byte(`"tables":{"x":"y1"}`), 1)
	}
	// The same envelope, body first.
	bodyFirst := func(body []byte) []byte {
		return []byte(`{"body":` + string(body) + `,"sha256":"` + Sum(body).Hex() + `","format":"` + FormatCompaction + `"}`)
	}
	forEachBackend(t, func(t *testing.T, l *Lake) {
		put(t, l, t0, damaged)
		newest := put(t, l, t0.Add(2*time.Hour), sealed)
		put(t, l, t0.Add(time.Hour), sealed)
		c, k, err := l.LatestCompaction(ctx)
		if err != nil || k != newest || !c.CreatedAt.Equal(t0.Add(2*time.Hour)) {
			t.Fatalf("LatestCompaction = %s, %v; want %s (an older damaged marker must not be read)", k, err, newest)
		}
		laidOut := put(t, l, t0.Add(3*time.Hour), bodyFirst)
		if _, k, err := l.LatestCompaction(ctx); err != nil || k != laidOut {
			t.Fatalf("LatestCompaction = %s, %v; want the body-first marker %s", k, err, laidOut)
		}
		put(t, l, t0.Add(4*time.Hour), damaged)
		if _, _, err := l.LatestCompaction(ctx); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("the newest marker does not verify: err %v, want ErrCorrupt", err)
		}
	})
}

// TestRenamedCompactionMarker: a compaction marker is named by its body's
// digest. Renamed to another, it verified as a marker, and a session read
// it; both now refuse it.
func TestRenamedCompactionMarker(t *testing.T) {
	ctx := context.Background()
	l := openMem(t)
	f := buildLake(t, l)
	c := compactionOf(t, l, f)
	k := CompactionKey(Sum([]byte("another")))
	if _, err := l.PutJSON(ctx, k, FormatCompaction, c); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.LatestCompaction(ctx); !errors.Is(err, ErrCorrupt) {
		t.Errorf("LatestCompaction of a renamed marker: %v, want it refused as corrupt", err)
	}
	rep, err := Verify(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || (p.Key == k && p.Severity == SeverityError && strings.Contains(p.Message, "a compaction marker is named by its body's digest"))
	}
	if !found {
		t.Errorf("verify of a renamed compaction marker: %+v", rep.Problems)
	}
}

// compactionOf is a sound marker of the fixture's job, its one segment's
// table the shard object.
func compactionOf(t *testing.T, l *Lake, f *fixture) *Compaction {
	t.Helper()
	marks, err := l.JobMarkers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &Compaction{Version: CompactionVersion, CreatedAt: t0,
		Jobs:     []CompactedJob{{JobKey: f.job.Hex(), Tenant: f.tenant, Markers: marks[f.job.Hex()]}},
		Segments: []CompactionSegment{{Tables: map[string]string{"outcomes": f.shard}}}}
}
