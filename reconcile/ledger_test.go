package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/internal/testrun"
	"github.com/batchlake/batchlake/lake"
)

// TestLedgerRoundTripsOnS3: on a remote lake every ledger read and append
// is a round trip, so plan writes its shards' first events side by side,
// a reconcile moves its shards side by side, and a shard's final event
// follows the run's own RECONCILING event without the ledger read again:
// 20 shards cost two appends each, one read of each event (for the batches
// in flight and the provider totals together) and one for the lease: three
// a shard, which has two events before.
func TestLedgerRoundTripsOnS3(t *testing.T) {
	ctx := context.Background()
	w := testrun.NewLakeWatch()
	l := s3LakeWatched(t, w)
	dir := t.TempDir()
	g := generate(rand.New(rand.NewPCG(4, 4)), 200, 1, 0)
	// All 20 shards' CREATED events in flight at once (lake.LedgerFanout).
	w.ResetN(http.MethodPut, "ledger/", ".json", 20)
	m := planAndIngest(t, l, dir, g, 10)
	if len(m.Shards) != 20 {
		t.Fatalf("%d shards, want 20", len(m.Shards))
	}
	// Plan: CREATED, then VALIDATED after it unread.
	if gets, puts, _ := w.Counts(); puts != 2*len(m.Shards) || gets != 0 {
		t.Errorf("plan and ingest appended %d ledger events and read %d, want %d and 0", puts, gets, 2*len(m.Shards))
	}
	if !w.Overlapped() {
		t.Error("plan did not append its 20 shards' ledger events at once")
	}
	w.ResetN(http.MethodPut, "ledger/", ".json", 20)
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1, CacheDir: filepath.Join(dir, "cache")}})
	if err != nil {
		t.Fatal(err)
	}
	gets, puts, lists := w.Counts()
	if puts != 2*len(m.Shards) {
		t.Errorf("%d ledger events appended, want %d (RECONCILING and %s for each shard)", puts, 2*len(m.Shards), rep.State)
	}
	// Each shard's events (CREATED, VALIDATED) read once, and its ledger and
	// batch records listed once: the RECONCILING event follows the events
	// read at the start, the final event the RECONCILING one.
	if gets != 2*len(m.Shards) || lists != 2*len(m.Shards) {
		t.Errorf("%d ledger events read and %d listings, want %d and %d", gets, lists, 2*len(m.Shards), 2*len(m.Shards))
	}
	if !w.Overlapped() {
		t.Error("the 20 shards' ledger events were not appended at once")
	}
	job, _ := lake.ParseDigest(m.JobKey)
	for _, s := range m.Shards {
		evs, err := lake.NewLedger(l, "check").Events(ctx, job, s.ShardID)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(evs); n != 4 || evs[2].State != lake.Reconciling || evs[3].State != rep.State || evs[3].Detail["report"] != rep.Report || evs[3].Actor != evs[2].Actor {
			t.Fatalf("shard %s ledger after reconcile: %+v", s.ShardID, evs)
		}
	}
}

// TestReconcilingAfterAnotherEvent: a shard whose ledger changed after the
// run read it gets its RECONCILING event after the change, never over it:
// another actor's event appended since (the append from the run's read is
// refused as a conflict), or another actor's lease, live when the run read
// the ledger, let go since (refused by what the run read). Either way the run
// reads the ledger again and decides from it as it is.
func TestReconcilingAfterAnotherEvent(t *testing.T) {
	for _, c := range []struct {
		name   string
		before time.Duration // B's RECONCILING lease when the run starts (0: no event)
		want   string        // the shard's events after plan's, by actor
	}{
		{"an event since", 0, "RECONCILING/B RECONCILING/A %s/A"},
		{"a lease let go since", time.Hour, "RECONCILING/B RECONCILING/B RECONCILING/A %s/A"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			l, dir, m, job := memJob(t, 7)
			other := m.Shards[2].ShardID
			b := lake.NewLedger(l, "B")
			if c.before != 0 {
				if _, err := b.Transition(ctx, job, other, lake.Reconciling, c.before, "", map[string]string{"by": "B"}); err != nil {
					t.Fatal(err)
				}
			}
			var appendErr error
			o := Options{JobKey: m.JobKey, TmpDir: dir, Actor: "A", Engine: EngineOptions{Threads: 1}}
			o.beforeReconciling = func() { // B appends a released RECONCILING
				_, appendErr = b.Transition(ctx, job, other, lake.Reconciling, -1, "", map[string]string{"by": "B"})
			}
			rep, err := Run(ctx, l, o)
			if err != nil {
				t.Fatal(err)
			}
			if appendErr != nil {
				t.Fatal(appendErr)
			}
			for _, s := range m.Shards {
				want := "RECONCILING/A " + string(rep.State) + "/A"
				if s.ShardID == other {
					want = fmt.Sprintf(c.want, rep.State)
				}
				if got := shardEventsAfterPlan(t, l, job, s.ShardID); got != want {
					t.Errorf("shard %s ledger: %s, want %s", s.ShardID, got, want)
				}
			}
		})
	}
}

// TestFinalEventAfterATakeover: a shard whose ledger got another event
// after the run's RECONCILING (its lease expired and another actor took
// the shard and let it go) is not closed by appending after the run's own
// event: the run reads the ledger as it is, takes the shard again and
// closes it.
func TestFinalEventAfterATakeover(t *testing.T) {
	ctx := context.Background()
	l, dir, m, job := memJob(t, 6)
	taken := m.Shards[1].ShardID
	var once sync.Once
	var takeErr error
	o := Options{JobKey: m.JobKey, TmpDir: dir, Actor: "A", Lease: time.Nanosecond, Engine: EngineOptions{Threads: 1}}
	o.retryReadStart = func(string) {
		once.Do(func() {
			_, takeErr = lake.NewLedger(l, "B").Transition(ctx, job, taken, lake.Reconciling, -1, "", map[string]string{"took": "over"})
		})
	}
	rep, err := Run(ctx, l, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.RetryRecords == 0 {
		t.Fatal("no retry: the takeover never ran")
	}
	if takeErr != nil {
		t.Fatal(takeErr)
	}
	for _, s := range m.Shards {
		want := "RECONCILING/A " + string(rep.State) + "/A"
		if s.ShardID == taken {
			want = "RECONCILING/A RECONCILING/B RECONCILING/A " + string(rep.State) + "/A"
		}
		if got := shardEventsAfterPlan(t, l, job, s.ShardID); got != want {
			t.Errorf("shard %s ledger: %s, want %s", s.ShardID, got, want)
		}
	}
}

// shardEventsAfterPlan returns a shard's events after plan's CREATED and
// VALIDATED, each as STATE/actor.
func shardEventsAfterPlan(t *testing.T, l *lake.Lake, job lake.Digest, shard string) string {
	t.Helper()
	evs, err := lake.NewLedger(l, "check").Events(context.Background(), job, shard)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs[min(2, len(evs)):] {
		got = append(got, string(e.State)+"/"+e.Actor)
	}
	return strings.Join(got, " ")
}

// memJob plans and ingests 40 generated records (seed) in shards of 10 into
// a new mem:// lake, closed when the test ends.
func memJob(t *testing.T, seed uint64) (l *lake.Lake, dir string, m *lake.Manifest, job lake.Digest) {
	t.Helper()
	l, err := lake.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	dir = t.TempDir()
	m = planAndIngest(t, l, dir, generate(rand.New(rand.NewPCG(seed, seed)), 40, 0, 0), 10)
	job, _ = lake.ParseDigest(m.JobKey)
	return l, dir, m, job
}

// TestNegativeLeaseRefused: a lease below zero (already run out, so another
// reconcile could take the job over at once) is bad input, and the job's
// shards get no event.
func TestNegativeLeaseRefused(t *testing.T) {
	l, dir, m, job := memJob(t, 3)
	_, err := Run(context.Background(), l, Options{JobKey: m.JobKey, TmpDir: dir, Lease: -time.Minute, Engine: EngineOptions{Threads: 1}})
	if !errors.Is(err, errkind.ErrBadInput) || !strings.Contains(err.Error(), "lease -1m0s") {
		t.Fatalf("Run with lease -1m: %v, want bad input naming the lease", err)
	}
	for _, s := range m.Shards {
		if got := shardEventsAfterPlan(t, l, job, s.ShardID); got != "" {
			t.Errorf("shard %s got events %s", s.ShardID, got)
		}
	}
}
