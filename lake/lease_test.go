package lake

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// submittingLedgers returns two ledgers of different actors on one local lake
// sharing a settable clock, and a shard already VALIDATED.
func submittingLedgers(t *testing.T, margin time.Duration) (a, b *Ledger, job Digest, clock *time.Time) {
	t.Helper()
	l, err := Open(context.Background(), filepath.Join(t.TempDir(), "lake"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock = &now
	a, b = testLedger(l, "A", func() time.Time { return *clock }), testLedger(l, "B", func() time.Time { return *clock })
	a.TakeoverMargin, b.TakeoverMargin = margin, margin
	job = Sum([]byte("job"))
	for _, st := range []State{Created, Validated} {
		if _, err := a.Transition(context.Background(), job, "s0", st, 0, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, job, clock
}

// TestSubmittedOnlyByHolder: a SUBMITTED is appended only by the actor
// holding the shard's SUBMITTING lease, only directly after its own event,
// and never a second time with another batch id.
func TestSubmittedOnlyByHolder(t *testing.T) {
	ctx := context.Background()
	a, b, job, clock := submittingLedgers(t, 0)
	evA, err := a.Transition(ctx, job, "s0", Submitting, time.Second, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(2 * time.Second) // A's lease ran out: B takes over
	evB, err := b.Transition(ctx, job, "s0", Submitting, time.Second, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AppendAfter(ctx, evA, Submitted, 0, "batch_a", nil); !errors.Is(err, ErrConflict) {
		t.Errorf("A binds after B took over: %v, want ErrConflict", err)
	}
	if _, err := a.Transition(ctx, job, "s0", Submitted, 0, "batch_a", nil); !errors.Is(err, ErrLeased) {
		t.Errorf("A binds by Transition while B holds: %v, want ErrLeased", err)
	}
	if _, err := b.AppendAfter(ctx, evB, Submitted, 0, "batch_b", nil); err != nil {
		t.Fatalf("B (the holder) binds: %v", err)
	}
	for name, g := range map[string]*Ledger{"other actor": a, "holder again": b} {
		if _, err := g.Transition(ctx, job, "s0", Submitted, 0, "batch_x", nil); !errors.Is(err, ErrNotHolder) {
			t.Errorf("%s: a second SUBMITTED: %v, want ErrNotHolder", name, err)
		}
	}
	evs, err := a.Events(ctx, job, "s0")
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.State != Submitted || last.ProviderJobID != "batch_b" || len(evs) != 5 {
		t.Errorf("ledger ends %s %s after %d events, want SUBMITTED batch_b after 5", last.State, last.ProviderJobID, len(evs))
	}
}

// TestTakeoverMargin: another actor takes a SUBMITTING shard over only a
// margin past the recorded expiry (the holder's clock may be behind ours);
// a released lease needs no margin, and a settle time is kept to.
func TestTakeoverMargin(t *testing.T) {
	ctx := context.Background()
	const margin = 30 * time.Second
	cases := []struct {
		name    string
		release func(a *Ledger, ev Event) error
		free    time.Duration // after the holder's event, when B may take over
	}{
		{"lease ran out", func(*Ledger, Event) error { return nil }, time.Minute + margin},
		{"released", func(a *Ledger, ev Event) error { _, err := a.Release(ctx, ev, 0, nil); return err }, 0},
		{"released with settle", func(a *Ledger, ev Event) error { _, err := a.Release(ctx, ev, 10*time.Second, nil); return err }, 10 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b, job, clock := submittingLedgers(t, margin)
			start := *clock
			ev, err := a.Transition(ctx, job, "s0", Submitting, time.Minute, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.release(a, ev); err != nil {
				t.Fatal(err)
			}
			if c.free > 0 {
				*clock = start.Add(c.free - time.Second)
				if _, err := b.Transition(ctx, job, "s0", Submitting, time.Minute, "", nil); !errors.Is(err, ErrLeased) {
					t.Fatalf("B a second before %s: %v, want ErrLeased", c.free, err)
				}
			}
			*clock = start.Add(c.free)
			if _, err := b.Transition(ctx, job, "s0", Submitting, time.Minute, "", nil); err != nil {
				t.Fatalf("B at %s: %v", c.free, err)
			}
		})
	}
}

// TestAppendAfterRenews: a renewal appended after the holder's own event
// extends its lease; one appended after a stale event fails.
func TestAppendAfterRenews(t *testing.T) {
	ctx := context.Background()
	a, b, job, clock := submittingLedgers(t, 0)
	ev, err := a.Transition(ctx, job, "s0", Submitting, time.Second, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(900 * time.Millisecond)
	renewed, err := a.AppendAfter(ctx, ev, Submitting, time.Second, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(900 * time.Millisecond) // past the first lease, inside the renewal
	if _, err := b.Transition(ctx, job, "s0", Submitting, time.Second, "", nil); !errors.Is(err, ErrLeased) {
		t.Errorf("B inside A's renewed lease: %v, want ErrLeased", err)
	}
	if _, err := a.AppendAfter(ctx, ev, Submitting, time.Second, "", nil); !errors.Is(err, ErrConflict) {
		t.Errorf("renewal after a stale event: %v, want ErrConflict", err)
	}
	if _, err := b.AppendAfter(ctx, renewed, Submitting, time.Second, "", nil); !errors.Is(err, ErrNotHolder) {
		t.Errorf("B renews A's event: %v, want ErrNotHolder", err)
	}
}

// TestLedgerRefusesStoreWithoutConditionalWrites: an S3 endpoint that drops
// If-None-Match (overwrites although asked not to) is refused at the first
// append with a clear error; the same store honouring it is accepted.
func TestLedgerRefusesStoreWithoutConditionalWrites(t *testing.T) {
	faker := newFakeS3(t, "lake-honours", "lake-ignores")
	for _, c := range []struct {
		name   string
		ignore bool
	}{{"honours", false}, {"ignores", true}} {
		t.Run(c.name, func(t *testing.T) {
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.ignore {
					r.Header.Del("If-None-Match")
				}
				faker.Server().ServeHTTP(w, r)
			}))
			t.Cleanup(front.Close)
			l := openLake(t, s3URL(front.URL, "lake-"+c.name))
			g := NewLedger(l, "A")
			_, err := g.Transition(context.Background(), Sum([]byte("job")), "s0", Created, 0, "", nil)
			if !c.ignore {
				if err != nil {
					t.Fatalf("a store that honours conditional writes: %v", err)
				}
				keys, _ := l.List(context.Background(), LedgerProbePrefix)
				if len(keys) != 0 {
					t.Errorf("probe keys left behind: %v", keys)
				}
				return
			}
			if !errors.Is(err, ErrNoConditionalWrites) || !strings.Contains(err.Error(), "If-None-Match") {
				t.Fatalf("a store that ignores conditional writes: %v, want ErrNoConditionalWrites naming If-None-Match", err)
			}
			if keys, _ := l.List(context.Background(), "ledger/"); len(keys) != 0 {
				t.Errorf("events written on a store that ignores conditional writes: %v", keys)
			}
		})
	}
}

// TestBatchRecords: a batch is recorded once whoever records it again, the
// records come back oldest first, and their keys are part of the layout.
func TestBatchRecords(t *testing.T) {
	ctx := context.Background()
	a, b, job, clock := submittingLedgers(t, 0)
	for _, r := range []struct {
		g  *Ledger
		id string
	}{{a, "batch_2"}, {b, "batch_1"}, {b, "batch_2"}} {
		*clock = clock.Add(time.Second)
		if err := r.g.RecordBatch(ctx, job, "s0", r.id, "found_duplicate"); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := a.BatchRecords(ctx, job, "s0")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].ProviderJobID != "batch_2" || recs[0].Actor != "A" || recs[1].ProviderJobID != "batch_1" {
		t.Fatalf("records %+v, want batch_2 (by A, first) then batch_1", recs)
	}
	key := BatchRecordKey(job, "s0", "batch_1")
	if j, shard, ok := ParseBatchRecordKey(key); !ok || j != job || shard != "s0" {
		t.Errorf("ParseBatchRecordKey(%s) = %s %s %v", key, j, shard, ok)
	}
	if _, _, _, ok := ParseLedgerKey(key); ok {
		t.Errorf("a batch record key parses as a ledger event: %s", key)
	}
	if evs, err := a.Events(ctx, job, "s0"); err != nil || len(evs) != 2 {
		t.Errorf("events beside batch records: %d, %v; want the 2 events", len(evs), err)
	}
}

// TestTransitionFrom: a transition from a last event the caller read appends
// after it without reading the ledger again, and one from a stale read fails
// with ErrConflict, never overwriting the event that came in between.
func TestTransitionFrom(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	job := Sum([]byte("job"))
	a, b := NewLedger(l, "A"), NewLedger(l, "B")
	none, err := a.Last(ctx, job, "s0")
	if err != nil {
		t.Fatal(err)
	}
	created, err := a.TransitionFrom(ctx, job, "s0", none, Created, 0, "", nil)
	if err != nil || created.Seq != 1 {
		t.Fatalf("CREATED from no event: %+v, %v", created, err)
	}
	if _, err := b.TransitionFrom(ctx, job, "s0", none, Created, 0, "", nil); !errors.Is(err, ErrConflict) {
		t.Errorf("CREATED from a stale read: %v, want ErrConflict", err)
	}
	validated, err := b.TransitionFrom(ctx, job, "s0", created, Validated, 0, "", nil)
	if err != nil || validated.Seq != 2 {
		t.Fatalf("VALIDATED from CREATED: %+v, %v", validated, err)
	}
	if _, err := a.TransitionFrom(ctx, job, "s0", created, Validated, 0, "", nil); !errors.Is(err, ErrConflict) {
		t.Errorf("VALIDATED again from a stale read: %v, want ErrConflict", err)
	}
	events, err := a.Events(ctx, job, "s0")
	if err != nil || len(events) != 2 || events[0].Actor != "A" || events[1].Actor != "B" {
		t.Errorf("events %+v (%v), want A's CREATED then B's VALIDATED", events, err)
	}
}
