package lake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// A read-ahead gives each key its own bytes in the list's order, passes
// over the keys its reader skips, leaves keys behind the reader or off the
// list to be read directly, and stops with reads under way.
func TestReadAhead(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	var keys []string
	for i := range readAheadWindow + 50 {
		k := fmt.Sprintf("ledger/k%04d.json", i)
		if err := l.Bucket.WriteAll(ctx, k, []byte(k), nil); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	list := append(append([]string(nil), keys[:10]...), "ledger/missing.json")
	list = append(list, keys[10:]...)
	r := l.newReadAhead(ctx, list)
	check := func(key string, wantOK bool) {
		t.Helper()
		b, err, ok := r.get(key)
		switch {
		case ok != wantOK:
			t.Fatalf("get %s: read ahead %v, want %v", key, ok, wantOK)
		case ok && err != nil:
			t.Fatalf("get %s: %v", key, err)
		case ok && string(b) != key:
			t.Fatalf("get %s gave %q", key, b)
		}
	}
	check(keys[0], true)
	check(keys[3], true) // keys 1 and 2 passed over
	check(keys[2], false)
	check("ledger/other.json", false)
	if _, err, ok := r.get("ledger/missing.json"); !ok || !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing key: read ahead %v, err %v; want ErrNotFound", ok, err)
	}
	// Past the window: the reader's skips free it.
	check(keys[len(keys)-1], true)
	r.stop()

	stopped := make(chan struct{})
	go func() {
		r := l.newReadAhead(ctx, keys)
		r.get(keys[5])
		r.stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return with reads under way")
	}
}

// On an object store verify reads the ledger's events several at once (each
// read is a round trip), and finds what reading them one by one finds.
func TestVerifyReadsEventsAhead(t *testing.T) {
	ctx := context.Background()
	l, w := openWatchedS3(t)
	g := testLedger(l, "a", func() time.Time { return t0 })
	job := Sum([]byte("job"))
	for _, s := range []string{"s0", "s1", "s2"} {
		for _, st := range []State{Created, Validated, Reconciling, Partial} {
			if _, err := g.Transition(ctx, job, s, st, 0, "", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Bucket.Delete(ctx, LedgerKey(job, "s1", 2)); err != nil {
		t.Fatal(err)
	}
	if err := l.Bucket.WriteAll(ctx, LedgerKey(job, "s2", 3), []byte("not an event\n"), nil); err != nil {
		t.Fatal(err)
	}
	w.ResetN(http.MethodGet, "ledger/", ".json", 8)
	rep, err := Verify(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Overlapped() {
		t.Error("verify read the ledger's events fewer than 8 at once")
	}
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.String())
	}
	noManifest := ": ledger of job " + job.Hex() + ", which has no manifest"
	want := []string{
		"error " + LedgerKey(job, "s0", 1) + noManifest,
		"error " + LedgerKey(job, "s1", 1) + noManifest,
		"error " + LedgerKey(job, "s1", 2) + ": ledger gap: events 2..2 of shard s1 are missing, 0000000003.json follows",
		"error " + LedgerKey(job, "s2", 1) + noManifest,
		"error " + LedgerKey(job, "s2", 3) + ": marker does not verify: invalid character 'o' in literal null (expecting 'u'): lake: corrupt object",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rep.LedgerEvents != 11 {
		t.Errorf("%d ledger events verified, want 11", rep.LedgerEvents)
	}
}
