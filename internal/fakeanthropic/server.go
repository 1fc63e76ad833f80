package fakeanthropic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultAPIKey is the key accepted when Options.APIKey is empty.
const DefaultAPIKey = "sk-ant-fake-000000000000000000"

// Outcomes a request can have.
const (
	Succeeded = "succeeded"
	Errored   = "errored"  // api_error: retryable
	Invalid   = "invalid"  // errored with invalid_request_error: permanent
	Canceled  = "canceled" // only when the batch is cancelled
	Expired   = "expired"
)

// Options configure a Server.
type Options struct {
	APIKey string
	// PollsPerStep is how many GETs of a batch end it (1 if 0).
	PollsPerStep int
	// Outcome gives a request's outcome by custom_id (Succeeded if nil).
	Outcome func(customID string) string
	// Answer gives a succeeded request's text by custom_id ("answer to
	// <custom_id>" if nil).
	Answer func(customID string) string
	// Now is the server's clock (time.Now if nil).
	Now func() time.Time
	// FillViews is how many views (GET or list) of a new batch show its
	// request_counts still filling: processing grows from a part of the
	// requests to all of them over those views. The API reference defines
	// processing as the requests "that are processing", a live count, and
	// promises nothing about when it reaches the batch's size; 0 shows
	// every request from the first view.
	FillViews int
	Faults    Faults
	// RealTime are the failures to inject into POST /v1/messages.
	RealTime RealTimeFaults
}

// Faults are counters of failures still to inject.
type Faults struct {
	// CreateRefused answers creates with CreateStatus, creating nothing.
	CreateRefused int
	// CreateLost creates the batch, then closes the connection unanswered.
	CreateLost int
	// CreateErrorAfter creates the batch, then answers CreateStatus.
	CreateErrorAfter int
	// CreateStatus is the status of refused and error-after creates (500 if 0).
	CreateStatus int
	// ListStatus answers the next N list calls with 500.
	ListErrors int
	// UploadSlow makes the next N creates take UploadDelay to arrive (a
	// large inline request list on a slow link): the batch is made only
	// after it; a client that gives up first leaves none.
	UploadSlow int
	// UploadDelay is how long a slow create takes to arrive (2 s if 0).
	UploadDelay time.Duration
}

// Request is one request received.
type Request struct {
	Method, Path string
	Status       int
	Fault        string
}

type request struct {
	CustomID string          `json:"custom_id"`
	Params   json.RawMessage `json:"params"`
}

type batch struct {
	id         string
	created    time.Time
	ended      time.Time
	cancelAt   time.Time
	status     string
	polls      int
	reqs       []request
	outcomes   []string
	cancelling bool
	views      int // views while in progress, for FillViews
}

// Server is a fake Message Batches API; safe for concurrent use.
type Server struct {
	opts     Options
	mu       sync.Mutex
	faults   Faults
	requests []Request
	batches  map[string]*batch
	seq      int
	base     string
	rtFaults RealTimeFaults
	rtCalls  []RealTimeCall
}

// New makes a server; mount Handler on an httptest server and call SetBaseURL.
func New(o Options) *Server {
	if o.APIKey == "" {
		o.APIKey = DefaultAPIKey
	}
	if o.PollsPerStep <= 0 {
		o.PollsPerStep = 1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Server{opts: o, faults: o.Faults, rtFaults: o.RealTime, batches: map[string]*batch{}}
}

// SetBaseURL tells the server its own URL, for results_url.
func (s *Server) SetBaseURL(u string) {
	s.mu.Lock()
	s.base = strings.TrimSuffix(u, "/")
	s.mu.Unlock()
}

// Base is the URL given to SetBaseURL.
func (s *Server) Base() string { s.mu.Lock(); defer s.mu.Unlock(); return s.base }

// UpdateFaults changes the faults still to inject.
func (s *Server) UpdateFaults(f func(*Faults)) { s.mu.Lock(); f(&s.faults); s.mu.Unlock() }

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count counts requests by method and path prefix.
func (s *Server) Count(method, prefix string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == method && strings.HasPrefix(r.Path, prefix) {
			n++
		}
	}
	return n
}

// Batches returns the ids of all batches, oldest first.
func (s *Server) Batches() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sortedIDs(false)
}

// Inject adds a batch somebody else created at `at`, with these custom_ids;
// ended makes it ended already.
func (s *Server) Inject(customIDs []string, at time.Time, ended bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.newBatch(at)
	for _, id := range customIDs {
		b.reqs = append(b.reqs, request{CustomID: id, Params: json.RawMessage(`{"model":"claude-sonnet-4-6","max_tokens":16,"messages":[{"role":"user","content":"foreign"}]}`)})
	}
	if ended {
		s.end(b)
	}
	return b.id
}

// Handler serves the API.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

var pathRe = regexp.MustCompile(`^/v1/messages/batches(?:/([A-Za-z0-9_]+)(/cancel|/results)?)?$`)
var idRe = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rec := Request{Method: r.Method, Path: r.URL.Path}
	defer func() {
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
	}()
	reply := func(status int, v any) {
		rec.Status = status
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_fake")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	fail := func(status int, typ, msg string) {
		reply(status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	}
	// The SDK sends the key as a bearer token; older clients use x-api-key.
	if r.Header.Get("X-Api-Key") != s.opts.APIKey && r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey {
		fail(401, "authentication_error", "invalid x-api-key: "+r.Header.Get("Authorization"))
		return
	}
	if r.URL.Path == "/v1/messages" && r.Method == http.MethodPost {
		s.message(w, r, &rec, reply, fail)
		return
	}
	m := pathRe.FindStringSubmatch(r.URL.Path)
	if m == nil {
		fail(404, "not_found_error", "no route "+r.URL.Path)
		return
	}
	id, sub := m[1], m[2]
	if id == "" && r.Method == http.MethodPost && !s.slowUpload(r, &rec) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case id == "" && r.Method == http.MethodPost:
		s.create(w, r, &rec, reply, fail)
	case id == "" && r.Method == http.MethodGet:
		if s.faults.ListErrors > 0 {
			s.faults.ListErrors--
			rec.Fault = "list_error"
			fail(500, "api_error", "Internal server error")
			return
		}
		s.list(r, reply)
	case sub == "" && r.Method == http.MethodGet:
		b, ok := s.batches[id]
		if !ok {
			fail(404, "not_found_error", "no batch "+id)
			return
		}
		b.polls++
		if b.status != "ended" && b.polls >= s.opts.PollsPerStep {
			s.end(b)
		}
		reply(200, s.object(b))
	case sub == "/cancel" && r.Method == http.MethodPost:
		b, ok := s.batches[id]
		if !ok {
			fail(404, "not_found_error", "no batch "+id)
			return
		}
		if b.status == "in_progress" {
			b.status, b.cancelAt, b.cancelling, b.polls = "canceling", s.opts.Now(), true, 0
		}
		reply(200, s.object(b))
	case sub == "/results" && r.Method == http.MethodGet:
		b, ok := s.batches[id]
		if !ok {
			fail(404, "not_found_error", "no batch "+id)
			return
		}
		if b.status != "ended" {
			fail(400, "invalid_request_error", "batch has not ended")
			return
		}
		rec.Status = 200
		w.Header().Set("Content-Type", "application/x-jsonl")
		w.Write(s.results(b))
	default:
		fail(405, "invalid_request_error", "method not allowed")
	}
}

// slowUpload applies the UploadSlow fault to a request (without holding the
// server's lock, so other requests go on meanwhile). It reports false when
// the client gave up before the body arrived.
func (s *Server) slowUpload(r *http.Request, rec *Request) bool {
	s.mu.Lock()
	slow := s.faults.UploadSlow > 0
	delay := s.faults.UploadDelay
	if slow {
		s.faults.UploadSlow--
	}
	s.mu.Unlock()
	if !slow {
		return true
	}
	if delay == 0 {
		delay = 2 * time.Second
	}
	rec.Fault = "upload_slow"
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, rec *Request, reply func(int, any), fail func(int, string, string)) {
	st := s.faults.CreateStatus
	if st == 0 {
		st = 500
	}
	if s.faults.CreateRefused > 0 {
		s.faults.CreateRefused--
		rec.Fault = "create_refused"
		s.failStatus(st, fail)
		return
	}
	var body struct {
		Requests []request `json:"requests"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		fail(400, "invalid_request_error", "body: "+err.Error())
		return
	}
	if len(body.Requests) < 1 || len(body.Requests) > 100_000 {
		fail(400, "invalid_request_error", "requests: want 1 to 100000 items")
		return
	}
	seen := map[string]bool{}
	for i, q := range body.Requests {
		if !idRe.MatchString(q.CustomID) {
			fail(400, "invalid_request_error", fmt.Sprintf("requests.%d.custom_id: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i))
			return
		}
		if seen[q.CustomID] {
			fail(400, "invalid_request_error", fmt.Sprintf("requests.%d.custom_id: duplicate %q", i, q.CustomID))
			return
		}
		seen[q.CustomID] = true
	}
	b := s.newBatch(s.opts.Now())
	b.reqs = body.Requests
	switch {
	case s.faults.CreateLost > 0:
		s.faults.CreateLost--
		rec.Fault = "create_lost"
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	case s.faults.CreateErrorAfter > 0:
		s.faults.CreateErrorAfter--
		rec.Fault = "create_error_after"
		s.failStatus(st, fail)
		return
	}
	reply(200, s.object(b))
}

func (s *Server) failStatus(st int, fail func(int, string, string)) {
	switch st {
	case 429:
		fail(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit")
	case 529:
		fail(529, "overloaded_error", "Overloaded")
	default:
		fail(st, "api_error", "Internal server error")
	}
}

func (s *Server) newBatch(at time.Time) *batch {
	s.seq++
	b := &batch{id: fmt.Sprintf("msgbatch_%06d", s.seq), created: at.UTC(), status: "in_progress"}
	s.batches[b.id] = b
	return b
}

// end finishes a batch: outcomes from Options.Outcome; in a cancelled batch
// every request whose outcome is not Succeeded is canceled.
func (s *Server) end(b *batch) {
	b.status, b.ended = "ended", s.opts.Now().UTC()
	b.outcomes = make([]string, len(b.reqs))
	for i, q := range b.reqs {
		o := Succeeded
		if s.opts.Outcome != nil {
			o = s.opts.Outcome(q.CustomID)
		}
		if b.cancelling && o != Succeeded {
			o = Canceled
		}
		b.outcomes[i] = o
	}
}

func (s *Server) sortedIDs(newestFirst bool) []string {
	ids := make([]string, 0, len(s.batches))
	for id := range s.batches {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := s.batches[ids[i]], s.batches[ids[j]]
		if !a.created.Equal(b.created) {
			return a.created.Before(b.created) != newestFirst
		}
		return (ids[i] < ids[j]) != newestFirst
	})
	return ids
}

func (s *Server) list(r *http.Request, reply func(int, any)) {
	limit := 20
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v >= 1 && v <= 1000 {
		limit = v
	}
	ids := s.sortedIDs(true)
	if after := r.URL.Query().Get("after_id"); after != "" {
		for i, id := range ids {
			if id == after {
				ids = ids[i+1:]
				break
			}
		}
	}
	more := len(ids) > limit
	if more {
		ids = ids[:limit]
	}
	data := []any{}
	for _, id := range ids {
		data = append(data, s.object(s.batches[id]))
	}
	page := map[string]any{"data": data, "has_more": more, "first_id": nil, "last_id": nil}
	if len(ids) > 0 {
		page["first_id"], page["last_id"] = ids[0], ids[len(ids)-1]
	}
	reply(200, page)
}

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Format(time.RFC3339Nano)
}

func (s *Server) object(b *batch) map[string]any {
	counts := map[string]int{"processing": 0, Succeeded: 0, "errored": 0, Canceled: 0, Expired: 0}
	if b.status != "ended" {
		counts["processing"] = len(b.reqs)
		if b.views++; b.views <= s.opts.FillViews {
			counts["processing"] = len(b.reqs) * b.views / (s.opts.FillViews + 1)
		}
	} else {
		for _, o := range b.outcomes {
			if o == Invalid {
				o = Errored
			}
			counts[o]++
		}
	}
	obj := map[string]any{
		"id": b.id, "type": "message_batch", "processing_status": b.status, "request_counts": counts,
		"created_at": ts(b.created), "expires_at": ts(b.created.Add(24 * time.Hour)), "ended_at": ts(b.ended),
		"cancel_initiated_at": ts(b.cancelAt), "archived_at": nil, "results_url": nil,
	}
	if b.status == "ended" {
		obj["results_url"] = s.base + "/v1/messages/batches/" + b.id + "/results"
	}
	return obj
}

// results writes a batch's results stream, in reverse request order (the
// API does not keep order).
func (s *Server) results(b *batch) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := len(b.reqs) - 1; i >= 0; i-- {
		q := b.reqs[i]
		var res any
		switch b.outcomes[i] {
		case Succeeded:
			var p struct {
				Model string `json:"model"`
			}
			json.Unmarshal(q.Params, &p)
			text := "answer to " + q.CustomID
			if s.opts.Answer != nil {
				text = s.opts.Answer(q.CustomID)
			}
			res = map[string]any{"type": "succeeded", "message": map[string]any{
				"id": messageID(b.id, q.CustomID), "type": "message", "role": "assistant", "model": p.Model,
				"content":     []any{map[string]any{"type": "text", "text": text}},
				"stop_reason": "end_turn", "stop_sequence": nil,
				"usage": map[string]any{"input_tokens": 10 + len(q.CustomID), "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 5, "service_tier": "batch"},
			}}
		case Errored:
			res = map[string]any{"type": "errored", "error": map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": "Internal server error"}}}
		case Invalid:
			res = map[string]any{"type": "errored", "error": map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": "max_tokens: too large"}, "request_id": "req_" + q.CustomID}}
		default:
			res = map[string]any{"type": b.outcomes[i]}
		}
		enc.Encode(map[string]any{"custom_id": q.CustomID, "result": res})
	}
	return buf.Bytes()
}

// messageID is a batch's answer's message id: unique to the batch and the
// request, as Anthropic's msg_… ids are to each message.
func messageID(batchID, customID string) string {
	d := sha256.Sum256([]byte(batchID + "\x00" + customID))
	return "msg_" + hex.EncodeToString(d[:12])
}
