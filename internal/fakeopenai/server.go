package fakeopenai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
)

// DefaultAPIKey is the key the server accepts when Options.APIKey is empty.
const DefaultAPIKey = "sk-fakeopenai-0000000000000000"

// Options configure a Server. The zero value is usable.
type Options struct {
	// APIKey is the bearer token every request must carry (DefaultAPIKey if empty).
	APIKey string
	// Seed drives SimulateBatch: the same input and seed give the same
	// answers and defects, each batch with ids of its own.
	Seed uint64
	// Rates override DefaultRates for first attempts (metadata
	// batchlake_attempt absent or 1); RetryRates override RetryRates for
	// attempt > 1.
	Rates, RetryRates *Rates
	// PollsPerStep is how many GETs of a batch move it one status further
	// (validating → in_progress → finalizing → completed). 0 means 1.
	// While in_progress, request_counts move with the polls: the requests
	// in input order finish evenly over its PollsPerStep polls, and every
	// request is counted by finalizing.
	PollsPerStep int
	// PartialFraction is the share of an input's requests (in input order)
	// that finished when a batch in progress expires or is cancelled.
	// 0 means 0.5; a negative value means none finished.
	PartialFraction float64
	// Now is the server's clock for created_at and the other timestamps
	// (time.Now if nil). Tests move it to put batches in the past.
	Now func() time.Time
	// Faults are the failures to inject; see Faults.
	Faults Faults
	// Answer, if set, gives the text of a successful chat answer by
	// custom_id in place of the simulator's words (tests of an output
	// contract need JSON answers); usage stays the simulator's.
	Answer func(customID string) string
	// RealTime are the failures to inject into real-time calls.
	RealTime RealTimeFaults
	// ListDelay is how long (in real time) a new batch stays out of
	// GET /v1/batches, as an eventually consistent listing does; GET of the
	// batch by id sees it at once.
	ListDelay time.Duration
	// Bucket, when set, keeps the server's files and batches as objects
	// under Prefix instead of in memory, so that servers in several
	// processes sharing the bucket serve the same batches (store.go).
	Bucket *blob.Bucket
	Prefix string
	// IDTag marks the ids the server gives ("fake" if empty):
	// batch_fake000001, file-fake000001 in memory, batch_<tag>_<random>
	// in a bucket.
	IDTag string
	// EnqueuedTokenLimit, if > 0, is the organisation's enqueued prompt
	// token limit per model: a batch whose prompt tokens (estimated as input
	// bytes / 4) would take the model's admitted batches (in_progress and
	// finalizing) past it fails validation with token_limit_exceeded, as
	// OpenAI's does. The create call itself succeeds.
	EnqueuedTokenLimit int64
}

// Faults are counters of failures still to inject. Each counter is used up
// one request (or batch) at a time, so "2" means "the next two". For one
// POST /v1/batches the refusal counter is checked first (nothing is
// created); then the batch is created and CreateLost, CreateSlow and
// CreateErrorAfter are checked in that order.
type Faults struct {
	// CreateRefused answers creates with CreateStatus without creating anything.
	CreateRefused int
	// CreateLost creates the batch, then closes the connection without
	// answering: the client cannot know the outcome.
	CreateLost int
	// CreateSlow creates the batch, then holds the answer for SlowResponse
	// (or until the client gives up), to exceed a client timeout.
	CreateSlow int
	// CreateErrorAfter creates the batch, then answers CreateStatus anyway,
	// as an overloaded front end that timed out on a healthy backend does.
	CreateErrorAfter int
	// CreateStatus is the HTTP status of refused and error-after creates
	// (500 if 0). 429 answers carry a rate-limit error body.
	CreateStatus int
	// SlowResponse is how long a slow create waits (2 s if 0).
	SlowResponse time.Duration

	// UploadRefused answers POST /v1/files with UploadStatus without storing.
	UploadRefused int
	// UploadStatus is the status of refused uploads (500 if 0).
	UploadStatus int
	// UploadSlow makes the next N uploads take UploadDelay after their body
	// arrived before the file is stored and answered, as a large file does;
	// a client that gives up first leaves no file.
	UploadSlow int
	// UploadDelay is how long a slow upload takes (2 s if 0).
	UploadDelay time.Duration

	// FailValidation makes the next N batches created fail when they leave
	// validating, with errors.data [{code: FailCode}]. A batch whose input
	// fails validation anyway does not count.
	FailValidation int
	// FailCode is the batch-level error code ("token_limit_exceeded" if empty).
	FailCode string

	// Expire makes the next N batches created (after those FailValidation
	// takes) expire instead of leaving in_progress:
	// finished lines stay in the output, the rest become batch_expired error lines.
	Expire int

	// FilesGone makes GET /v1/files/{id}/content answer 404 for batch
	// output and error files, as after the provider's retention deleted them.
	FilesGone bool

	// UsageSkew is added to the input tokens of every finished batch's
	// aggregate usage, so that it disagrees with the sum of its lines.
	UsageSkew int64

	// LeakKey makes error messages quote the presented API key in full, as
	// some gateways do, so tests can prove clients keep it out of errors.
	LeakKey bool
}

// Request is one request the server received.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	// Status is the HTTP status answered; 0 when the connection was closed
	// without an answer.
	Status int
	// Fault names the fault injected into this request, if any.
	Fault string
	// Cut is set when the client went away before its body arrived whole
	// (a process killed while writing it): the server read part of a
	// request, could act on none of it, and answered no one.
	Cut bool
	// At is when the request arrived, Done when its answer was written.
	At, Done time.Time
}

// Server is a fake OpenAI Files + Batch API. Its methods are safe for
// concurrent use.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu       sync.Mutex
	faults   Faults
	requests []Request
	files    map[string]*file
	batches  map[string]*batch
	seq      int // orders objects created in the same second (in memory)
	rtFaults RealTimeFaults
	rtCalls  []RealTimeCall
	srv      *http.Server
	url      string
}

// New makes a server. It serves nothing until its Handler is mounted or
// Start is called.
func New(opts Options) *Server {
	if opts.APIKey == "" {
		opts.APIKey = DefaultAPIKey
	}
	if opts.PollsPerStep <= 0 {
		opts.PollsPerStep = 1
	}
	if opts.PartialFraction == 0 {
		opts.PartialFraction = 0.5
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.IDTag == "" {
		opts.IDTag = "fake"
	}
	s := &Server{
		opts:     opts,
		faults:   opts.Faults,
		rtFaults: opts.RealTime,
		files:    map[string]*file{},
		batches:  map[string]*batch{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/files", s.uploadFile)
	mux.HandleFunc("GET /v1/files", s.listFiles)
	mux.HandleFunc("GET /v1/files/{id}", s.getFile)
	mux.HandleFunc("GET /v1/files/{id}/content", s.fileContent)
	mux.HandleFunc("POST /v1/batches", s.createBatch)
	mux.HandleFunc("GET /v1/batches", s.listBatches)
	mux.HandleFunc("GET /v1/batches/{id}", s.getBatch)
	mux.HandleFunc("POST /v1/batches/{id}/cancel", s.cancelBatch)
	for _, p := range []string{"/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions"} {
		mux.HandleFunc("POST "+p, s.realTime)
	}
	s.mux = mux
	return s
}

// APIKey is the bearer token the server accepts.
func (s *Server) APIKey() string { return s.opts.APIKey }

// Handler serves the API under /v1/ (for httptest.NewServer: the client's
// base URL is then server.URL + "/v1/").
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// Start serves on a free loopback port and returns the base URL, ending in
// /v1/, to give the client (OPENAI_BASE_URL).
func (s *Server) Start() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return s.url, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("fakeopenai: listen: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.srv = srv
	s.url = "http://" + ln.Addr().String() + "/v1/"
	// srv, not s.srv: a Close right after Start clears s.srv before the
	// goroutine runs. Serve returns ErrServerClosed on Close.
	go func() { _ = srv.Serve(ln) }()
	return s.url, nil
}

// Close stops a server started with Start.
func (s *Server) Close() error {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	if err := srv.Close(); err != nil {
		return fmt.Errorf("fakeopenai: close: %w", err)
	}
	return nil
}

// UpdateFaults changes the faults still to inject, atomically.
func (s *Server) UpdateFaults(f func(*Faults)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.faults)
}

// Faults returns the faults still to inject.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// Requests returns every request received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// CountRequests counts requests with this method and exact path, such as
// ("POST", "/v1/batches"), that arrived whole: a request cut off by its
// client (Request.Cut) asked for nothing.
func (s *Server) CountRequests(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Method == method && r.Path == path && !r.Cut {
			n++
		}
	}
	return n
}

// Batches returns every batch the server holds, newest first, as the API
// would show them (without advancing them); with a bucket, those it could
// read.
func (s *Server) Batches() []Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	bs, _ := s.sortedBatches(context.Background())
	out := make([]Batch, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Batch)
	}
	return out
}

// Files returns every file the server holds, newest first; with a bucket,
// those it could read.
func (s *Server) Files() []File {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs, _ := s.sortedFiles(context.Background())
	out := make([]File, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.File)
	}
	return out
}

// serve records the request, checks the bearer token and dispatches.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	idx := len(s.requests)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, At: time.Now()})
	s.mu.Unlock()
	rw := &recorder{ResponseWriter: w}
	body := &cutReader{ReadCloser: r.Body}
	r.Body = body
	defer func() {
		s.mu.Lock()
		s.requests[idx].Status = rw.status
		s.requests[idx].Fault = rw.fault
		s.requests[idx].Cut = body.cut
		s.requests[idx].Done = time.Now()
		s.mu.Unlock()
	}()

	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok || got == "":
		writeError(rw, http.StatusUnauthorized, "invalid_request_error", "missing_api_key",
			"You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
		return
	case got != s.opts.APIKey:
		writeError(rw, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			"Incorrect API key provided: "+s.quoteKey(got)+". You can find your API key at https://platform.openai.com/account/api-keys.")
		return
	}
	s.mux.ServeHTTP(rw, r)
}

// quoteKey shows a presented key the way error messages do: masked, or in
// full under the LeakKey fault.
func (s *Server) quoteKey(k string) string {
	s.mu.Lock()
	leak := s.faults.LeakKey
	s.mu.Unlock()
	if leak || len(k) < 8 {
		return k
	}
	return k[:3] + strings.Repeat("*", 8) + k[len(k)-4:]
}

// cutReader notices a request body that ends before its declared length
// (net/http reports io.ErrUnexpectedEOF) or whose connection failed.
type cutReader struct {
	io.ReadCloser
	cut bool
}

func (c *cutReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		c.cut = true
	}
	return n, err
}

// recorder remembers the status and fault of one response.
type recorder struct {
	http.ResponseWriter
	status int
	fault  string
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (hijack, flush).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func setFault(w http.ResponseWriter, name string) {
	if r, ok := w.(*recorder); ok {
		r.fault = name
	}
}

// apiError is OpenAI's error envelope.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	var e apiError
	e.Error.Message = msg
	e.Error.Type = typ
	if code != "" {
		e.Error.Code = &code
	}
	if status == http.StatusTooManyRequests || status >= 500 {
		// Real servers send a wait hint; a short one keeps SDK retries fast.
		w.Header().Set("Retry-After-Ms", "5")
	}
	writeJSON(w, status, e)
}

// faultError answers an injected refusal with a body fitting its status.
func (s *Server) faultError(w http.ResponseWriter, r *http.Request, status int) {
	suffix := ""
	if s.Faults().LeakKey {
		k, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		suffix = " (key " + k + ")"
	}
	switch {
	case status == http.StatusTooManyRequests:
		writeError(w, status, "requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."+suffix)
	case status >= 500:
		writeError(w, status, "server_error", "", "The server had an error while processing your request. Sorry about that!"+suffix)
	default:
		writeError(w, status, "invalid_request_error", "invalid_value", "The request was refused by an injected fault."+suffix)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// list is OpenAI's cursor page envelope.
type list[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// page cuts one cursor page out of items (already in list order): the
// items after the one with id after, at most limit of them.
func page[T any](items []T, id func(T) string, after string, limit int) (list[T], error) {
	start := 0
	if after != "" {
		i := slices.IndexFunc(items, func(t T) bool { return id(t) == after })
		if i < 0 {
			return list[T]{}, errors.New("no object with id " + after)
		}
		start = i + 1
	}
	end := min(start+limit, len(items))
	l := list[T]{Object: "list", Data: items[start:end], HasMore: end < len(items)}
	if l.Data == nil {
		l.Data = []T{}
	}
	if len(l.Data) > 0 {
		f, last := id(l.Data[0]), id(l.Data[len(l.Data)-1])
		l.FirstID, l.LastID = &f, &last
	}
	return l, nil
}
