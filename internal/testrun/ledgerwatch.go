package testrun

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// LedgerWatch wraps an S3 server's handler and watches a lake's ledger
// requests: how many event objects were read and written, how many listings
// of the ledger were made, and whether two requests of the held method
// (Hold) were ever in flight at once. While holding, each such request waits
// for a second one to arrive (or for a few seconds, once: then holding
// stops), so that code making its round trips one after another is seen
// doing so, and fails a test instead of hanging it.
type LedgerWatch struct {
	mu       sync.Mutex
	gets     int
	puts     int
	lists    int
	hold     string
	inFlight int
	met      chan struct{}
}

// NewLedgerWatch returns a watch that holds nothing.
func NewLedgerWatch() *LedgerWatch {
	return &LedgerWatch{met: make(chan struct{})}
}

// Reset clears the counts and holds requests of method (http.MethodGet or
// http.MethodPut) for ledger event objects; "" holds nothing.
func (w *LedgerWatch) Reset(method string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gets, w.puts, w.lists, w.hold, w.met = 0, 0, 0, method, make(chan struct{})
}

// Counts returns the event objects read and written and the ledger
// listings since the last Reset.
func (w *LedgerWatch) Counts() (gets, puts, lists int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gets, w.puts, w.lists
}

// Overlapped reports whether two held requests were in flight at once
// since the last Reset.
func (w *LedgerWatch) Overlapped() bool {
	select {
	case <-w.met:
		return true
	default:
		return false
	}
}

// Wrap returns next watched.
func (w *LedgerWatch) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		event := strings.Contains(r.URL.Path, "/ledger/") && strings.HasSuffix(r.URL.Path, ".json")
		w.mu.Lock()
		switch {
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Query().Get("prefix"), "ledger/"):
			w.lists++
		case r.Method == http.MethodGet && event:
			w.gets++
		case r.Method == http.MethodPut && event:
			w.puts++
		}
		hold, met := event && w.hold == r.Method, w.met
		if hold {
			w.inFlight++
			if w.inFlight >= 2 && !w.Overlapped() {
				close(met)
			}
		}
		w.mu.Unlock()
		if hold {
			select {
			case <-met:
			case <-time.After(3 * time.Second):
				w.mu.Lock()
				w.hold = ""
				w.mu.Unlock()
			}
			w.mu.Lock()
			w.inFlight--
			w.mu.Unlock()
		}
		next.ServeHTTP(rw, r)
	})
}
