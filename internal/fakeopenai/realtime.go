package fakeopenai

import (
	"io"
	"net/http"
	"strconv"

	"github.com/batchlake/batchlake/lake"
)

// RealTimeFaults are the failures injected into real-time calls
// (POST /v1/chat/completions, /v1/responses, /v1/embeddings,
// /v1/completions), each a counter used up one call at a time.
type RealTimeFaults struct {
	// RateLimited answers 429 rate_limit_exceeded with a Retry-After
	// header of RetryAfter (1 s if 0); nothing is processed.
	RateLimited int
	RetryAfter  string
	// ServerError answers 500 server_error; nothing is processed.
	ServerError int
	// Dropped processes the call (it is billed and counted in
	// RealTimeCalls), then closes the connection without an answer.
	Dropped int
	// BadRequest answers 400 invalid_request_error (a permanent failure).
	BadRequest int
}

// RealTimeCall is one real-time request the server processed (answered
// 200 or dropped after processing: billed either way).
type RealTimeCall struct {
	Path string
	// Body is the sha256 of the request body, which identifies the record.
	Body    lake.Digest
	Dropped bool
}

// UpdateRealTimeFaults changes the real-time faults still to inject.
func (s *Server) UpdateRealTimeFaults(f func(*RealTimeFaults)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.rtFaults)
}

// RealTimeCalls returns every real-time call processed, oldest first.
func (s *Server) RealTimeCalls() []RealTimeCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RealTimeCall(nil), s.rtCalls...)
}

// realTime serves one real-time call: the simulator's answer to the body.
func (s *Server) realTime(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "could not read the body")
		return
	}
	s.mu.Lock()
	f := &s.rtFaults
	fault := ""
	switch {
	case f.RateLimited > 0:
		f.RateLimited--
		fault = "rate_limited"
	case f.ServerError > 0:
		f.ServerError--
		fault = "server_error"
	case f.BadRequest > 0:
		f.BadRequest--
		fault = "bad_request"
	case f.Dropped > 0:
		f.Dropped--
		fault = "dropped"
	}
	retryAfter := f.RetryAfter
	if fault == "" || fault == "dropped" {
		s.rtCalls = append(s.rtCalls, RealTimeCall{Path: r.URL.Path, Body: lake.Sum(body), Dropped: fault == "dropped"})
	}
	s.mu.Unlock()
	setFault(w, fault)
	switch fault {
	case "rate_limited":
		if retryAfter == "" {
			retryAfter = "1"
		}
		// OpenAI's rate-limit answers carry the wait in seconds; the SDK
		// honours retry-after (and retry-after-ms, which writeError sets).
		w.Header().Set("Retry-After", retryAfter)
		writeErrorNoHint(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again in "+retryAfter+"s.")
		return
	case "server_error":
		writeError(w, http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request. Sorry about that!")
		return
	case "bad_request":
		writeError(w, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", "This model's maximum context length was exceeded.")
		return
	case "dropped":
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	out, reqID := Answer(s.opts.Seed, r.URL.Path, body)
	w.Header().Set("x-request-id", reqID)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// writeErrorNoHint is writeError without the short retry-after-ms hint, so
// that the Retry-After header set by the caller is the one that counts.
func writeErrorNoHint(w http.ResponseWriter, status int, typ, code, msg string) {
	var e apiError
	e.Error.Message = msg
	e.Error.Type = typ
	if code != "" {
		e.Error.Code = &code
	}
	writeJSON(w, status, e)
}
