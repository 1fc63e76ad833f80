package fakegemini

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/batchlake/batchlake/lake"
)

// RealTimeFaults are the failures injected into real-time calls
// (POST /v1beta/models/{model}:generateContent), each a counter used up one
// call at a time.
type RealTimeFaults struct {
	// RateLimited answers 429 RESOURCE_EXHAUSTED whose details carry a
	// google.rpc.RetryInfo with RetryDelay ("1s" if empty); nothing is processed.
	RateLimited int
	RetryDelay  string
	// Unavailable answers 503 UNAVAILABLE; nothing is processed.
	Unavailable int
	// Dropped processes the call (billed, counted in RealTimeCalls), then
	// closes the connection without an answer.
	Dropped int
	// BadRequest answers 400 INVALID_ARGUMENT (permanent).
	BadRequest int
}

// RealTimeCall is one generateContent call the server processed.
type RealTimeCall struct {
	Model   string
	Body    lake.Digest
	Dropped bool
}

// UpdateRealTimeFaults changes the real-time faults still to inject.
func (s *Server) UpdateRealTimeFaults(f func(*RealTimeFaults)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.rtFaults)
}

// RealTimeCalls returns every call processed, oldest first.
func (s *Server) RealTimeCalls() []RealTimeCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RealTimeCall(nil), s.rtCalls...)
}

// generate serves generateContent (called with s.mu held).
func (s *Server) generate(w http.ResponseWriter, r *http.Request, model string, rec *Request, reply func(int, any), fail func(int, string, string)) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fail(400, "INVALID_ARGUMENT", "could not read the body")
		return
	}
	var req struct {
		Contents []json.RawMessage `json:"contents"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Contents) == 0 {
		fail(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	f := &s.rtFaults
	switch {
	case f.RateLimited > 0:
		f.RateLimited--
		rec.Fault = "rate_limited"
		delay := f.RetryDelay
		if delay == "" {
			delay = "1s"
		}
		reply(429, map[string]any{"error": map[string]any{"code": 429, "status": "RESOURCE_EXHAUSTED",
			"message": "You exceeded your current quota, please check your plan and billing details.",
			"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}}}})
		return
	case f.Unavailable > 0:
		f.Unavailable--
		rec.Fault = "unavailable"
		fail(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
		return
	case f.BadRequest > 0:
		f.BadRequest--
		rec.Fault = "bad_request"
		fail(400, "INVALID_ARGUMENT", "The input token count exceeds the maximum number of tokens allowed.")
		return
	case f.Dropped > 0:
		f.Dropped--
		rec.Fault = "dropped"
		s.rtCalls = append(s.rtCalls, RealTimeCall{Model: model, Body: lake.Sum(body), Dropped: true})
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	s.rtCalls = append(s.rtCalls, RealTimeCall{Model: model, Body: lake.Sum(body)})
	d := lake.Sum(body).Hex()
	version := strings.TrimPrefix(model, "models/")
	text := "answer " + d[:8]
	if s.opts.Answer != nil {
		text = s.opts.Answer(body)
	}
	reply(200, map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"parts": []any{map[string]any{"text": text}}, "role": "model"}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10 + len(body)/4, "candidatesTokenCount": 5, "totalTokenCount": 15 + len(body)/4},
		"modelVersion":  version, "responseId": "resp-" + d[:16],
	})
}
