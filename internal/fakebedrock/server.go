package fakebedrock

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
)

// Options configure a Server.
type Options struct {
	// OpenBucket opens an S3 bucket by name, for reading job input and
	// writing job output (required for jobs to get past validation).
	OpenBucket func(ctx context.Context, bucket string) (*blob.Bucket, error)
	// Seed draws each record's outcome; the same input and seed give the
	// same outcomes and bytes.
	Seed uint64
	// Rates are the per-record outcome probabilities (DefaultRates if nil).
	Rates *Rates
	// PollsPerStep is how many GETs of a job move it one status further. 0 means 1.
	PollsPerStep int
	// PartialFraction is the share of a job's records (in input order)
	// processed when it ends PartiallyCompleted, Expired or Stopped while in
	// progress. 0 means 0.5; negative means none.
	PartialFraction float64
	// Region and Account shape job ARNs (us-east-1, 123456789012 if empty).
	Region, Account string
	// Now is the server's clock (time.Now if nil).
	Now func() time.Time
	// MinRecords is the quota "Minimum number of records per batch
	// inference job": a job with fewer records fails validation, as
	// Bedrock's does. 0 means Bedrock's default, 100; negative, none (an
	// account whose quota allows any size).
	MinRecords int
	// Faults are the failures to inject; see Faults.
	Faults Faults
	// RealTime are the failures to inject into InvokeModel calls.
	RealTime RealTimeFaults
}

// Rates are per-record outcome probabilities; the rest succeed.
type Rates struct {
	BadRequest  float64 // errorCode 400 (permanent)
	Throttled   float64 // errorCode 429 (retryable)
	ServerError float64 // errorCode 500 (retryable)
	Empty       float64 // a modelOutput with no text (fails the quality gate)
}

// DefaultRates make a job visibly imperfect.
var DefaultRates = Rates{BadRequest: 0.04, Throttled: 0.04, ServerError: 0.03, Empty: 0.03}

// Faults are counters of failures still to inject, used up one at a time.
type Faults struct {
	// CreateRefused answers creates with a ValidationException (or
	// CreateStatus's exception) without creating anything.
	CreateRefused int
	// CreateLost creates the job, then closes the connection unanswered.
	CreateLost int
	// CreateErrorAfter creates the job, then answers CreateStatus's exception.
	CreateErrorAfter int
	// CreateStatus picks the exception of refused and error-after creates:
	// 429 ThrottlingException, 5xx InternalServerException, 4xx
	// ValidationException (500 if 0).
	CreateStatus int
	// Throttle answers the next N requests of any operation with a
	// ThrottlingException.
	Throttle int
	// ListFail answers the next N list requests with an InternalServerException.
	ListFail int
	// FailValidation makes the next N jobs created fail validation (no output),
	// whatever their input.
	FailValidation int
	// Partial makes the next N jobs created (after those FailValidation and
	// Expire take) end PartiallyCompleted.
	Partial int
	// Expire makes the next N jobs created (after those FailValidation
	// takes) end Expired while in progress.
	Expire int
	// ManifestSkew makes the manifests of the next N jobs created claim one
	// success more than the lines hold.
	ManifestSkew int
}

// Request is one request the server received.
type Request struct {
	Method, Path, RawQuery string
	// Status is the HTTP status answered; 0 when the connection was closed.
	Status int
	Fault  string
	At     time.Time
}

// Server is a fake Bedrock control plane. Its methods are safe for
// concurrent use.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu       sync.Mutex
	faults   Faults
	rtFaults RealTimeFaults
	rtCalls  []RealTimeCall
	requests []Request
	jobs     map[string]*job // by ARN
	tokens   map[string]string
	seq      int
	srv      *http.Server
	url      string
}

// New makes a server; mount Handler or call Start.
func New(opts Options) *Server {
	if opts.PollsPerStep <= 0 {
		opts.PollsPerStep = 1
	}
	if opts.PartialFraction == 0 {
		opts.PartialFraction = 0.5
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Account == "" {
		opts.Account = "123456789012"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rates == nil {
		r := DefaultRates
		opts.Rates = &r
	}
	s := &Server{opts: opts, faults: opts.Faults, rtFaults: opts.RealTime, jobs: map[string]*job{}, tokens: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /model-invocation-job", s.create)
	mux.HandleFunc("GET /model-invocation-jobs", s.list)
	mux.HandleFunc("GET /model-invocation-job/{id...}", s.get)
	mux.HandleFunc("POST /model-invocation-job/{id...}", s.stop)
	// The runtime's InvokeModel (bedrock-runtime.<region>.amazonaws.com),
	// served here too so one server stands for both endpoints.
	mux.HandleFunc("POST /model/{modelId}/invoke", s.invoke)
	s.mux = mux
	return s
}

// Handler serves the API at the root (the SDK's BaseEndpoint is the server URL).
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// Start serves on a free loopback port and returns the endpoint URL.
func (s *Server) Start() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return s.url, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("fakebedrock: listen: %w", err)
	}
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.url = "http://" + ln.Addr().String()
	go func() { _ = s.srv.Serve(ln) }()
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
	return srv.Close()
}

// UpdateFaults changes the faults still to inject, atomically.
func (s *Server) UpdateFaults(f func(*Faults)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.faults)
}

// Requests returns every request received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// CountRequests counts requests with this method and path prefix.
func (s *Server) CountRequests(method, pathPrefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Method == method && strings.HasPrefix(r.Path, pathPrefix) {
			n++
		}
	}
	return n
}

// Jobs returns every job the server holds, oldest first, without advancing them.
func (s *Server) Jobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Job, 0, len(s.jobs))
	for _, j := range s.sorted() {
		out = append(out, j.Job)
	}
	return out
}

// Outcomes returns, for a job past validation, each recordId's outcome
// class as reconcile names it: succeeded, quality_failed,
// failed_retryable, failed_permanent, or missing (not processed before the
// job ended).
func (s *Server) Outcomes(arn string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[arn]
	if !ok {
		return nil
	}
	out := map[string]string{}
	for i, r := range j.records {
		switch {
		case j.done && i >= j.finished:
			out[r.id] = "missing"
		default:
			out[r.id] = r.outcome.class()
		}
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	idx := len(s.requests)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, At: time.Now()})
	throttle := s.faults.Throttle > 0
	if throttle {
		s.faults.Throttle--
	}
	s.mu.Unlock()
	rw := &recorder{ResponseWriter: w}
	defer func() {
		s.mu.Lock()
		s.requests[idx].Status, s.requests[idx].Fault = rw.status, rw.fault
		s.mu.Unlock()
	}()
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		writeError(rw, http.StatusForbidden, "AccessDeniedException", "Missing Authentication Token")
		return
	}
	if throttle {
		rw.fault = "throttled"
		writeError(rw, http.StatusTooManyRequests, "ThrottlingException", "Rate exceeded")
		return
	}
	s.mux.ServeHTTP(rw, r)
}

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

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// writeError answers an AWS restjson1 error: the type in X-Amzn-ErrorType,
// the message in the body.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-ErrorType", typ)
	writeJSON(w, status, map[string]string{"message": msg})
}

// exceptionFor is the exception a fault status stands for.
func exceptionFor(status int) (int, string, string) {
	switch {
	case status == 0:
		return http.StatusInternalServerError, "InternalServerException", "An internal server error occurred. Retry your request."
	case status == http.StatusTooManyRequests:
		return status, "ThrottlingException", "Rate exceeded"
	case status >= 500:
		return status, "InternalServerException", "An internal server error occurred. Retry your request."
	default:
		return status, "ValidationException", "The request was refused by an injected fault."
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
