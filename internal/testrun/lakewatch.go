package testrun

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// LakeWatch wraps an S3 server's handler and watches a lake's requests: how
// many ledger event objects were read and written, how many listings of the
// ledger were made, and whether two held requests (Reset: a method and the
// objects it holds) were ever in flight at once (ResetN: n of them). While
// holding, each such request waits for the others to arrive (or a quarter
// of a second), so that code making its round trips one after another, or
// fewer at a time, is seen doing so, and fails a test instead of hanging it.
type LakeWatch struct {
	mu       sync.Mutex
	gets     int
	puts     int
	lists    int
	hold     string // method of the held requests
	under    string // the folder their objects are under
	ext      string // and how their names end
	inFlight int
	n        int // held requests in flight at once that close met
	met      chan struct{}
	arrived  []string // "METHOD path" of each request, in arrival order
	listed   []string // the prefix of each listing, in arrival order
}

// NewLakeWatch returns a watch that holds nothing.
func NewLakeWatch() *LakeWatch {
	return &LakeWatch{met: make(chan struct{}), n: 2}
}

// Reset clears the counts and holds requests of method (http.MethodGet or
// http.MethodPut) for objects under the lake's folder under whose names end
// in ext ("ledger/", ".json": its ledger events; "tables/", ".parquet": its
// table files); method "" holds nothing.
func (w *LakeWatch) Reset(method, under, ext string) { w.ResetN(method, under, ext, 2) }

// ResetN is Reset with Overlapped reporting whether n held requests were in
// flight at once.
func (w *LakeWatch) ResetN(method, under, ext string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gets, w.puts, w.lists, w.hold, w.under, w.ext, w.met = 0, 0, 0, method, under, ext, make(chan struct{})
	w.n = n
	w.arrived, w.listed = nil, nil
}

// Arrived returns "METHOD path" of each request since the last Reset, in the
// order they arrived.
func (w *LakeWatch) Arrived() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.arrived...)
}

// Listed returns the prefix of each listing since the last Reset, in the
// order they arrived.
func (w *LakeWatch) Listed() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.listed...)
}

// Counts returns the event objects read and written and the ledger
// listings since the last Reset.
func (w *LakeWatch) Counts() (gets, puts, lists int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gets, w.puts, w.lists
}

// Overlapped reports whether two held requests (ResetN: n) were in flight
// at once since the last Reset.
func (w *LakeWatch) Overlapped() bool {
	select {
	case <-w.met:
		return true
	default:
		return false
	}
}

// Wrap returns next watched.
func (w *LakeWatch) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		event := strings.Contains(r.URL.Path, "/ledger/") && strings.HasSuffix(r.URL.Path, ".json")
		w.mu.Lock()
		w.arrived = append(w.arrived, r.Method+" "+r.URL.Path)
		if r.Method == http.MethodGet && r.URL.Query().Has("list-type") {
			w.listed = append(w.listed, r.URL.Query().Get("prefix"))
		}
		switch {
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Query().Get("prefix"), "ledger/"):
			w.lists++
		case r.Method == http.MethodGet && event:
			w.gets++
		case r.Method == http.MethodPut && event:
			w.puts++
		}
		held := strings.Contains(r.URL.Path, "/"+w.under) && strings.HasSuffix(r.URL.Path, w.ext)
		hold, met := held && w.hold == r.Method, w.met
		if hold {
			w.inFlight++
			if w.inFlight >= w.n && !w.Overlapped() {
				close(met)
			}
		}
		w.mu.Unlock()
		if hold {
			select {
			case <-met:
			case <-time.After(250 * time.Millisecond):
			}
			w.mu.Lock()
			w.inFlight--
			w.mu.Unlock()
		}
		next.ServeHTTP(rw, r)
	})
}
