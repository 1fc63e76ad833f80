package fakeanthropic

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/batchlake/batchlake/lake"
)

// RealTimeFaults are the failures injected into real-time calls
// (POST /v1/messages), each a counter used up one call at a time.
type RealTimeFaults struct {
	// RateLimited answers 429 rate_limit_error with a retry-after header of
	// RetryAfter seconds ("1" if empty); nothing is processed.
	RateLimited int
	RetryAfter  string
	// Overloaded answers 529 overloaded_error; nothing is processed.
	Overloaded int
	// Dropped processes the message (billed, counted in RealTimeCalls),
	// then closes the connection without an answer.
	Dropped int
	// BadRequest answers 400 invalid_request_error (permanent).
	BadRequest int
}

// RealTimeCall is one message the server processed.
type RealTimeCall struct {
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

// RealTimeCalls returns every message processed, oldest first.
func (s *Server) RealTimeCalls() []RealTimeCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RealTimeCall(nil), s.rtCalls...)
}

// message serves POST /v1/messages: a message answering the params.
func (s *Server) message(w http.ResponseWriter, r *http.Request, rec *Request, reply func(int, any), fail func(int, string, string)) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fail(400, "invalid_request_error", "could not read the body")
		return
	}
	var p struct {
		Model     string          `json:"model"`
		MaxTokens int             `json:"max_tokens"`
		Messages  json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Model == "" || p.MaxTokens <= 0 || len(p.Messages) == 0 {
		fail(400, "invalid_request_error", "model, max_tokens and messages are required")
		return
	}
	s.mu.Lock()
	f := &s.rtFaults
	switch {
	case f.RateLimited > 0:
		f.RateLimited--
		rec.Fault = "rate_limited"
	case f.Overloaded > 0:
		f.Overloaded--
		rec.Fault = "overloaded"
	case f.BadRequest > 0:
		f.BadRequest--
		rec.Fault = "bad_request"
	case f.Dropped > 0:
		f.Dropped--
		rec.Fault = "dropped"
	}
	retryAfter := f.RetryAfter
	if rec.Fault == "" || rec.Fault == "dropped" {
		s.rtCalls = append(s.rtCalls, RealTimeCall{Body: lake.Sum(body), Dropped: rec.Fault == "dropped"})
	}
	s.mu.Unlock()
	switch rec.Fault {
	case "rate_limited":
		if retryAfter == "" {
			retryAfter = "1"
		}
		w.Header().Set("retry-after", retryAfter)
		fail(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")
		return
	case "overloaded":
		fail(529, "overloaded_error", "Overloaded")
		return
	case "bad_request":
		fail(400, "invalid_request_error", "prompt is too long")
		return
	case "dropped":
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	d := lake.Sum(body).Hex()
	reply(200, map[string]any{
		"id": "msg_" + d[:24], "type": "message", "role": "assistant", "model": p.Model,
		"content":     []any{map[string]any{"type": "text", "text": fmt.Sprintf("answer %s", d[:8])}},
		"stop_reason": "end_turn", "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10 + len(body)/4, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 5, "service_tier": "standard"},
	})
}
