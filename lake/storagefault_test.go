package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// ---- a fault-injecting proxy in front of gofakes3 ----------------------------

// faultKind is one kind of storage fault the proxy injects.
type faultKind string

const (
	// fault500 answers 500 InternalError without touching the store.
	fault500 faultKind = "500 InternalError"
	// faultSlowDown answers 503 SlowDown without touching the store.
	faultSlowDown faultKind = "503 SlowDown"
	// faultDelay reads the request, holds it until the client gave up on it
	// (past its attempt timeout), then lets the store serve it: a put then
	// lands although the client saw it fail, the ambiguous case.
	faultDelay faultKind = "delay past the client timeout"
	// faultResetUpload reads part of the request body, then resets the
	// connection: the store never sees the request.
	faultResetUpload faultKind = "connection reset mid-upload"
	// faultResetDownload lets the store serve the request, sends the headers
	// and half the body, then resets the connection.
	faultResetDownload faultKind = "connection reset mid-download"
)

// rule injects kind into the next `times` requests of op ("put", "get",
// "head", "list"); times < 0 means every one.
type rule struct {
	op    string
	kind  faultKind
	times int
}

type faultProxy struct {
	next  http.Handler
	mu    sync.Mutex
	rules []*rule
	// injected counts the faults injected, by kind.
	injected map[faultKind]int
	// served counts requests by op, faulted or not.
	served map[string]int
}

func newFaultProxy(next http.Handler) *faultProxy {
	return &faultProxy{next: next, injected: map[faultKind]int{}, served: map[string]int{}}
}

// inject schedules a fault.
func (p *faultProxy) inject(op string, kind faultKind, times int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &rule{op: op, kind: kind, times: times})
}

// clear drops the remaining schedule.
func (p *faultProxy) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

func (p *faultProxy) count(kind faultKind) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.injected[kind]
}

// opOf names a path-style S3 request: /bucket?list-type=2 is a listing,
// /bucket/key a put, get or head of an object.
func opOf(r *http.Request) string {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)
	if len(parts) < 2 || parts[1] == "" {
		if r.Method == http.MethodGet {
			return "list"
		}
		return "bucket"
	}
	switch r.Method {
	case http.MethodPut:
		return "put"
	case http.MethodGet:
		return "get"
	case http.MethodHead:
		return "head"
	}
	return strings.ToLower(r.Method)
}

func (p *faultProxy) next1(op string) (faultKind, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.served[op]++
	for _, r := range p.rules {
		if r.op != op || r.times == 0 {
			continue
		}
		if r.times > 0 {
			r.times--
		}
		p.injected[r.kind]++
		return r.kind, true
	}
	return "", false
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, ok := p.next1(opOf(r))
	if !ok {
		p.next.ServeHTTP(w, r)
		return
	}
	switch kind {
	case fault500, faultSlowDown:
		_, _ = io.Copy(io.Discard, r.Body)
		code, status := "InternalError", http.StatusInternalServerError
		if kind == faultSlowDown {
			code, status = "SlowDown", http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message><RequestId>fault</RequestId></Error>`, code)
	case faultDelay:
		body, _ := io.ReadAll(r.Body)
		select {
		case <-r.Context().Done(): // the client gave up
		case <-time.After(5 * time.Second):
		}
		r2 := r.Clone(context.Background())
		r2.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		p.next.ServeHTTP(rec, r2)
		// The answer goes to a connection nobody listens on any more.
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	case faultResetUpload:
		n := r.ContentLength / 2
		if n <= 0 {
			n = 64
		}
		_, _ = io.CopyN(io.Discard, r.Body, n)
		reset(w)
	case faultResetDownload:
		rec := httptest.NewRecorder()
		p.next.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		body := rec.Body.Bytes()
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		time.Sleep(10 * time.Millisecond) // let the half body reach the client
		reset(w)
	}
}

// reset hijacks the connection and closes it with a TCP RST.
func reset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// faultyS3 is a gofakes3 server reached two ways: through the fault proxy
// (the lake under test, with a short retry policy) and directly (the
// observer, which sees what the store really holds).
type faultyS3 struct {
	proxy    *faultProxy
	lake     *Lake
	direct   *Lake
	retries  int // retries the lake under test made
	retryMu  sync.Mutex
	lastErrs []error
}

// testRetry is a short policy for the fault tests: attempts time out after
// 300 ms and waits stay under 50 ms.
var testRetry = RetryPolicy{Initial: 5 * time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxElapsed: 5 * time.Second, AttemptTimeout: 300 * time.Millisecond}

func openFaultyS3(t *testing.T) *faultyS3 {
	t.Helper()
	faker := newFakeS3(t, "lake")
	store := httptest.NewServer(faker.Server())
	t.Cleanup(store.Close)
	f := &faultyS3{proxy: newFaultProxy(faker.Server())}
	front := httptest.NewServer(f.proxy)
	t.Cleanup(front.Close)
	f.direct = openLake(t, s3URL(store.URL, "lake"))
	f.direct.Retry = RetryPolicy{MaxAttempts: 1}
	f.lake = openLake(t, s3URL(front.URL, "lake"))
	f.lake.Retry = testRetry
	f.lake.Retry.Notify = func(op, key string, attempt int, err error) {
		f.retryMu.Lock()
		defer f.retryMu.Unlock()
		f.retries++
		f.lastErrs = append(f.lastErrs, err)
	}
	return f
}

func (f *faultyS3) retried() int {
	f.retryMu.Lock()
	defer f.retryMu.Unlock()
	return f.retries
}

// contents returns every key the store holds and its bytes.
func (f *faultyS3) contents(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := f.direct.List(ctx, "")
	if err != nil {
		t.Fatalf("direct list: %v", err)
	}
	out := map[string]string{}
	for _, k := range keys {
		b, err := f.direct.Bucket.ReadAll(ctx, k)
		if err != nil {
			t.Fatalf("direct read %s: %v", k, err)
		}
		out[k] = string(b)
	}
	return out
}

// ---- the reliability tally ---------------------------------------------------

var storageTallyMu sync.Mutex

// recordStorage appends one fault class's figures to $BATCHLAKE_RELIABILITY_OUT
// in the JSON line format of cmd/batchlake/reliability_test.go, which
// cmd/blreliability sums into docs/reliability.md.
func recordStorage(t *testing.T, class string, injected int) {
	t.Helper()
	p := os.Getenv("BATCHLAKE_RELIABILITY_OUT")
	if p == "" || injected == 0 {
		return
	}
	survived := injected
	if t.Failed() {
		survived = 0
	}
	storageTallyMu.Lock()
	defer storageTallyMu.Unlock()
	b, _ := json.Marshal(map[string]any{"suite": "storage faults (S3)", "class": class, "injected": injected, "survived": survived, "records_lost": 0})
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("tally: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Errorf("tally: %v", err)
	}
}

// ---- the tests ---------------------------------------------------------------

// payload is a few KiB of bytes unique to name.
func payload(name string) []byte {
	return bytes.Repeat([]byte(name+"|0123456789abcdef\n"), 256)
}

// TestStorageFaultsSurvived injects two faults of each class into each lake
// operation and checks the operation's result and what the store holds.
func TestStorageFaultsSurvived(t *testing.T) {
	type op struct {
		name  string
		fault string // the request op the faults hit
		reset faultKind
		run   func(t *testing.T, f *faultyS3)
	}
	ctx := context.Background()
	ops := []op{
		{"PutOnce", "put", faultResetUpload, func(t *testing.T, f *faultyS3) {
			data := payload("put")
			if _, err := f.lake.PutOnce(ctx, "objects/put.bin", data); err != nil {
				t.Fatalf("PutOnce: %v", err)
			}
			// created may be false after a delay: the first attempt landed.
			want := map[string]string{"objects/put.bin": string(data)}
			if got := f.contents(t); !mapsEqual(got, want) {
				t.Errorf("store holds %v, want exactly the object", keysOf(got))
			}
		}},
		{"GetVerified", "get", faultResetDownload, func(t *testing.T, f *faultyS3) {
			got, err := f.lake.GetVerified(ctx, "objects/a.bin", Sum(payload("a")))
			if err != nil {
				t.Fatalf("GetVerified: %v", err)
			}
			if !bytes.Equal(got, payload("a")) {
				t.Errorf("GetVerified returned %d bytes, want the %d stored", len(got), len(payload("a")))
			}
		}},
		{"OpenVerified", "get", faultResetDownload, func(t *testing.T, f *faultyS3) {
			r, err := f.lake.OpenVerified(ctx, "objects/a.bin", Sum(payload("a")))
			if err != nil {
				t.Fatalf("OpenVerified: %v", err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatalf("read OpenVerified stream: %v", err)
			}
			if !bytes.Equal(got, payload("a")) {
				t.Errorf("OpenVerified streamed %d bytes, want the %d stored", len(got), len(payload("a")))
			}
		}},
		{"OpenAt", "get", faultResetDownload, func(t *testing.T, f *faultyS3) {
			const off = 3
			r, err := f.lake.OpenAt(ctx, "objects/a.bin", off)
			if err != nil {
				t.Fatalf("OpenAt: %v", err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatalf("read OpenAt stream: %v", err)
			}
			if want := payload("a")[off:]; !bytes.Equal(got, want) {
				t.Errorf("OpenAt streamed %d bytes, want the %d stored from byte %d", len(got), len(want), off)
			}
		}},
		{"List", "list", faultResetDownload, func(t *testing.T, f *faultyS3) {
			got, err := f.lake.List(ctx, "objects/")
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if want := []string{"objects/a.bin", "objects/b.bin", "objects/c.bin"}; strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("List = %v, want %v", got, want)
			}
		}},
		{"ledger append", "put", faultResetUpload, func(t *testing.T, f *faultyS3) {
			job := Sum([]byte("job"))
			g := testLedger(f.lake, "actor-1", func() time.Time { return t0 })
			e, err := g.Transition(ctx, job, "s0", Created, 0, "", nil)
			if err != nil {
				t.Fatalf("Transition: %v", err)
			}
			evs, err := testLedger(f.direct, "observer", func() time.Time { return t0 }).Events(ctx, job, "s0")
			if err != nil {
				t.Fatalf("Events: %v", err)
			}
			if len(evs) != 1 || evs[0].Nonce != e.Nonce || evs[0].State != Created {
				t.Errorf("ledger holds %+v, want exactly the appended event (nonce %s)", evs, e.Nonce)
			}
		}},
	}
	const faults = 3
	for _, o := range ops {
		for _, kind := range []faultKind{fault500, faultSlowDown, faultDelay, o.reset} {
			t.Run(o.name+"/"+string(kind), func(t *testing.T) {
				t.Parallel() // mostly waiting on timeouts and backoff
				f := openFaultyS3(t)
				if o.fault != "put" {
					for _, k := range []string{"a", "b", "c"} {
						if _, err := f.direct.PutOnce(ctx, "objects/"+k+".bin", payload(k)); err != nil {
							t.Fatal(err)
						}
					}
				}
				// The AWS SDK makes up to 3 attempts of its own inside each of
				// the lake's (gocloud sets its retryer; AWS_MAX_ATTEMPTS is
				// ignored): 3 faults in a row get past it to the lake's retries.
				f.proxy.inject(o.fault, kind, faults)
				o.run(t, f)
				n := f.proxy.count(kind)
				if n != faults {
					t.Errorf("proxy injected %d faults, want %d (the operation never hit them)", n, faults)
				}
				if f.retried() < 1 {
					t.Errorf("the lake never retried")
				}
				if testing.Verbose() {
					t.Logf("retries: %v", f.lastErrs)
				}
				recordStorage(t, string(kind)+" on "+o.name, n)
			})
		}
	}
}

// TestStorageFaultsPersist checks that faults outlasting the retry budget end
// in a clear error that names the key and says it gave up, and that nothing
// of a failed put is visible.
func TestStorageFaultsPersist(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		op   string
		kind faultKind
		key  string
		run  func(f *faultyS3) error
	}{
		{"PutOnce", "put", faultResetUpload, "objects/p.bin", func(f *faultyS3) error {
			_, err := f.lake.PutOnce(ctx, "objects/p.bin", payload("p"))
			return err
		}},
		{"PutOnce", "put", faultSlowDown, "objects/p.bin", func(f *faultyS3) error {
			_, err := f.lake.PutOnce(ctx, "objects/p.bin", payload("p"))
			return err
		}},
		{"GetVerified", "get", fault500, "objects/g.bin", func(f *faultyS3) error {
			_, err := f.lake.GetVerified(ctx, "objects/g.bin", Sum(payload("g")))
			return err
		}},
		{"OpenVerified", "get", faultResetDownload, "objects/g.bin", func(f *faultyS3) error {
			r, err := f.lake.OpenVerified(ctx, "objects/g.bin", Sum(payload("g")))
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.ReadAll(r)
			return err
		}},
		{"OpenAt", "get", faultResetDownload, "objects/g.bin", func(f *faultyS3) error {
			r, err := f.lake.OpenAt(ctx, "objects/g.bin", 1)
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.ReadAll(r)
			return err
		}},
		{"ledger append", "put", fault500, LedgerKey(Sum([]byte("job")), "s0", 1), func(f *faultyS3) error {
			g := testLedger(f.lake, "actor-1", func() time.Time { return t0 })
			_, err := g.Transition(ctx, Sum([]byte("job")), "s0", Created, 0, "", nil)
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name+"/"+string(c.kind), func(t *testing.T) {
			t.Parallel()
			f := openFaultyS3(t)
			f.lake.Retry.MaxAttempts = 3
			if c.op == "get" {
				if _, err := f.direct.PutOnce(ctx, c.key, payload("g")); err != nil {
					t.Fatal(err)
				}
			}
			before := f.contents(t)
			f.proxy.inject(c.op, c.kind, -1)
			err := c.run(f)
			f.proxy.clear()
			if err == nil {
				t.Fatal("no error although every request failed")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.key) || !strings.Contains(msg, "gave up after") {
				t.Errorf("error %q does not name the key %s and say it gave up", msg, c.key)
			}
			var g *GaveUpError
			if !errors.As(err, &g) || g.Attempts != 3 {
				t.Errorf("error %v is not a GaveUpError after 3 attempts", err)
			}
			if got := f.contents(t); !mapsEqual(got, before) {
				t.Errorf("store changed: holds %v, held %v", keysOf(got), keysOf(before))
			}
			recordStorage(t, "persistent "+string(c.kind)+" on "+c.name+": clear error, nothing visible", f.proxy.count(c.kind))
		})
	}
}

// TestTransientClasses checks which errors are retried.
func TestTransientClasses(t *testing.T) {
	live := context.Background()
	dead, cancel := context.WithCancel(live)
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"unexpected EOF", live, io.ErrUnexpectedEOF, true},
		{"deadline of an attempt", live, context.DeadlineExceeded, true},
		{"deadline with a dead caller", dead, context.DeadlineExceeded, false},
		{"cancelled", live, context.Canceled, false},
		{"not found", live, ErrNotFound, false},
		{"corrupt", live, fmt.Errorf("x: %w", ErrCorrupt), false},
		{"local source", live, permanentErr{os.ErrNotExist}, false},
	} {
		if got := transient(c.ctx, c.err); got != c.want {
			t.Errorf("%s: transient = %v, want %v", c.name, got, c.want)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keysOf(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s(%d B)", k, len(v)))
	}
	return out
}
