package lake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/batchlake/batchlake/internal/testrun"
)

// openWatchedS3 is openS3 with its requests watched.
func openWatchedS3(t *testing.T) (*Lake, *testrun.LakeWatch) {
	t.Helper()
	w := testrun.NewLakeWatch()
	srv := httptest.NewServer(w.Wrap(newFakeS3(t, "lake").Server()))
	t.Cleanup(srv.Close)
	return openLake(t, s3URL(srv.URL, "lake")), w
}

// TestLedgerReadsOnARemoteLake: every ledger read is a round trip to a
// remote lake, so Last reads one event (its name says which is last),
// Events reads a shard's events side by side, and EventsOf several shards
// side by side, each giving what a read of every object in turn gives.
func TestLedgerReadsOnARemoteLake(t *testing.T) {
	ctx := context.Background()
	l, w := openWatchedS3(t)
	g := testLedger(l, "a", func() time.Time { return t0 })
	job := Sum([]byte("job"))
	shards := []string{"s0", "s1", "s2"}
	path := []State{Created, Validated, Reconciling, Partial}
	for _, s := range shards {
		for _, st := range path {
			if _, err := g.Transition(ctx, job, s, st, 0, "", map[string]string{"shard": s}); err != nil {
				t.Fatal(err)
			}
		}
	}

	w.Reset("", "", "")
	last, err := g.Last(ctx, job, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if last.Seq != len(path) || last.State != Partial || last.Detail["shard"] != "s1" {
		t.Fatalf("Last = seq %d %s %v, want seq %d PARTIAL of s1", last.Seq, last.State, last.Detail, len(path))
	}
	if gets, _, lists := w.Counts(); gets != 1 || lists != 1 {
		t.Errorf("Last made %d event reads and %d listings, want 1 and 1", gets, lists)
	}

	w.Reset(http.MethodGet, "ledger/", ".json")
	evs, err := g.Events(ctx, job, "s2")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(path) {
		t.Fatalf("Events: %d events, want %d", len(evs), len(path))
	}
	for i, e := range evs {
		if e.Seq != i+1 || e.State != path[i] || e.ShardID != "s2" {
			t.Fatalf("Events[%d] = seq %d %s of %s, want seq %d %s of s2", i, e.Seq, e.State, e.ShardID, i+1, path[i])
		}
	}
	if !w.Overlapped() {
		t.Error("Events read a shard's events one after another")
	}

	w.Reset(http.MethodGet, "ledger/", ".json")
	all, err := g.EventsOf(ctx, job, []string{"s0", "none", "s2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || len(all[0]) != len(path) || len(all[1]) != 0 || len(all[2]) != len(path) || all[0][3].Detail["shard"] != "s0" {
		t.Fatalf("EventsOf: %d shards, events %v", len(all), all)
	}
	if !w.Overlapped() {
		t.Error("EventsOf read one event at a time")
	}

	// A job's shards' ledgers are read LedgerFanout at a time: 20 shards'
	// events in one round.
	many := make([]string, 20)
	for i := range many {
		many[i] = fmt.Sprintf("m%02d", i)
		if _, err := g.Transition(ctx, job, many[i], Created, 0, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	w.ResetN(http.MethodGet, "ledger/", ".json", len(many))
	if all, err = g.EventsOf(ctx, job, many); err != nil || len(all) != len(many) || len(all[19]) != 1 {
		t.Fatalf("EventsOf of %d shards: %v, %v", len(many), all, err)
	}
	if !w.Overlapped() {
		t.Errorf("EventsOf did not read %d shards' events at once", len(many))
	}
}

// TestLedgerGapIsCorrupt: a missing event (a deleted object, or one written
// under another name) makes every read of the shard fail as corrupt, Last
// too, though it reads only the last event.
func TestLedgerGapIsCorrupt(t *testing.T) {
	ctx := context.Background()
	job := Sum([]byte("job"))
	for _, c := range []struct {
		name string
		mend func(l *Lake) error
	}{
		{"second event gone", func(l *Lake) error { return l.Bucket.Delete(ctx, LedgerKey(job, "s0", 2)) }},
		{"last event holds another seq", func(l *Lake) error {
			b, err := l.Bucket.ReadAll(ctx, LedgerKey(job, "s0", 2))
			if err != nil {
				return err
			}
			return l.Bucket.WriteAll(ctx, LedgerKey(job, "s0", 4), b, nil)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := openMem(t)
			g := testLedger(l, "a", func() time.Time { return t0 })
			for _, st := range []State{Created, Validated, Reconciling} {
				if _, err := g.Transition(ctx, job, "s0", st, 0, "", nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.mend(l); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Last(ctx, job, "s0"); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Last: %v, want ErrCorrupt", err)
			}
			if _, err := g.Events(ctx, job, "s0"); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Events: %v, want ErrCorrupt", err)
			}
			_, err := g.Transition(ctx, job, "s0", Partial, 0, "", nil)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("Transition after the gap: %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestIngestRecordsSideBySide: a job's ingest markers (one a result file)
// are read side by side from a remote lake, twenty at once, and come back
// in their keys' order, each as written.
func TestIngestRecordsSideBySide(t *testing.T) {
	ctx := context.Background()
	l, w := openWatchedS3(t)
	job := Sum([]byte("job"))
	var keys []string
	written := map[string]IngestRecord{}
	for i := range 20 {
		raw := Sum([]byte(fmt.Sprint("file ", i)))
		r := IngestRecord{Version: 1, JobKey: job.Hex(), Provider: "openai", Channel: "output", Raw: raw, FileName: fmt.Sprintf("out-%d.jsonl", i), Lines: int64(i)}
		k := IngestKey(job, r.Channel, raw)
		if _, err := l.PutJSON(ctx, k, FormatIngest, r); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		written[raw.Hex()] = r
	}
	slices.Sort(keys)
	w.ResetN(http.MethodGet, "ingests/", ".json", len(keys))
	recs, err := l.IngestRecords(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Overlapped() {
		t.Errorf("the %d markers were not read at once", len(keys))
	}
	if len(recs) != len(keys) {
		t.Fatalf("%d records, want %d", len(recs), len(keys))
	}
	for i, r := range recs {
		if IngestKey(job, r.Channel, r.Raw) != keys[i] || !reflect.DeepEqual(r, written[r.Raw.Hex()]) {
			t.Errorf("record %d: %+v (key %s), want %+v (key %s)", i, r, IngestKey(job, r.Channel, r.Raw), written[r.Raw.Hex()], keys[i])
		}
	}
}
