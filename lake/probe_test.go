package lake

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// probeFront is a fake S3 endpoint that keeps each request's method, path
// and times, and holds the probe's requests (ledger-probe/) for hold.
type probeFront struct {
	mu   sync.Mutex
	reqs []probeReq
	seen chan struct{} // closed at the probe's first request
	once sync.Once
}

type probeReq struct {
	method, path string
	start, end   time.Time
}

func newProbeFront(t *testing.T, bucket string, hold time.Duration, ignoreIfNoneMatch bool) (*probeFront, string) {
	t.Helper()
	faker := newFakeS3(t, bucket)
	f := &probeFront{seen: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if strings.Contains(r.URL.Path, "/"+LedgerProbePrefix) {
			f.once.Do(func() { close(f.seen) })
			time.Sleep(hold)
		}
		if ignoreIfNoneMatch {
			r.Header.Del("If-None-Match")
		}
		faker.Server().ServeHTTP(w, r)
		f.mu.Lock()
		f.reqs = append(f.reqs, probeReq{r.Method, r.URL.Path, start, time.Now()})
		f.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return f, s3URL(srv.URL, bucket)
}

// split returns the probe's requests and the others, each in the order they
// ended.
func (f *probeFront) split() (probe, other []probeReq) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.reqs {
		if strings.Contains(r.path, "/"+LedgerProbePrefix) {
			probe = append(probe, r)
		} else {
			other = append(other, r)
		}
	}
	return probe, other
}

// TestProbeAhead: a step that will append starts the store's conditional-write
// check ahead (ProbeAhead). It runs in the background, before any append is
// asked for; the first append waits for it and no ledger of the lake probes
// again; Close waits for a probe no append waited for, so its object is gone
// when the process ends; a store that overwrites is still refused at the
// first append, and nothing is appended to it.
func TestProbeAhead(t *testing.T) {
	ctx := context.Background()
	job := Sum([]byte("job"))

	t.Run("first append waits, one probe per lake", func(t *testing.T) {
		f, u := newProbeFront(t, "lake-ahead", 50*time.Millisecond, false)
		l, err := Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		l.ProbeAhead(ctx)
		select {
		case <-f.seen: // started with no append asked for
		case <-time.After(10 * time.Second):
			t.Fatal("ProbeAhead made no request")
		}
		if _, err := NewLedger(l, "A").Transition(ctx, job, "s0", Created, 0, "", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := NewLedger(l, "B").Transition(ctx, job, "s1", Created, 0, "", nil); err != nil {
			t.Fatal(err)
		}
		probe, other := f.split()
		var puts int
		for _, r := range probe {
			if r.method == http.MethodPut {
				puts++
			}
		}
		if puts != 2 {
			t.Fatalf("%d probe PUTs, want 2 (one probe for the lake, whichever ledger appends)", puts)
		}
		for _, r := range other {
			if r.method == http.MethodPut && strings.Contains(r.path, "/ledger/") && r.start.Before(probe[1].end) {
				t.Errorf("event %s written at %s, before the probe's second create ended (%s)", r.path, r.start, probe[1].end)
			}
		}
		if keys, _ := l.List(ctx, LedgerProbePrefix); len(keys) != 0 {
			t.Errorf("probe keys left behind: %v", keys)
		}
	})

	t.Run("close waits for a probe no append waited for", func(t *testing.T) {
		f, u := newProbeFront(t, "lake-close", 150*time.Millisecond, false)
		l, err := Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		l.ProbeAhead(ctx)
		<-f.seen
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		probe, _ := f.split()
		var deleted bool
		for _, r := range probe {
			deleted = deleted || r.method == http.MethodDelete
		}
		if !deleted {
			t.Errorf("Close returned before the probe deleted its object: %d probe requests done", len(probe))
		}
		l2 := openLake(t, u)
		if keys, _ := l2.List(ctx, LedgerProbePrefix); len(keys) != 0 {
			t.Errorf("probe keys left behind: %v", keys)
		}
	})

	t.Run("a store that overwrites", func(t *testing.T) {
		f, u := newProbeFront(t, "lake-ignores", 0, true)
		l := openLake(t, u)
		l.ProbeAhead(ctx)
		<-f.seen
		_, err := NewLedger(l, "A").Transition(ctx, job, "s0", Created, 0, "", nil)
		if !errors.Is(err, ErrNoConditionalWrites) {
			t.Fatalf("append on a store that ignores conditional writes: %v, want ErrNoConditionalWrites", err)
		}
		if keys, _ := l.List(ctx, "ledger/"); len(keys) != 0 {
			t.Errorf("events written on a store that ignores conditional writes: %v", keys)
		}
	})

	t.Run("local lake", func(t *testing.T) {
		l := openLake(t, t.TempDir())
		l.ProbeAhead(ctx)
		if _, err := NewLedger(l, "A").Transition(ctx, job, "s0", Created, 0, "", nil); err != nil {
			t.Fatal(err)
		}
		if keys, _ := l.List(ctx, LedgerProbePrefix); len(keys) != 0 {
			t.Errorf("a local lake probed: %v", keys)
		}
	})
}
