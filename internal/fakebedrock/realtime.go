package fakebedrock

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/batchlake/batchlake/lake"
)

// RealTimeFaults are the failures injected into real-time calls (the
// runtime's InvokeModel, POST /model/{modelId}/invoke), each a counter used
// up one call at a time.
type RealTimeFaults struct {
	// RateLimited answers 429 ThrottlingException, with a Retry-After
	// header of RetryAfter seconds when it is set; nothing is processed.
	RateLimited int
	RetryAfter  string
	// Unavailable answers 503 ServiceUnavailableException; nothing is processed.
	Unavailable int
	// ModelTimeout answers 408 ModelTimeoutException (processed, billed
	// nothing); the SDK does not retry it.
	ModelTimeout int
	// Dropped processes the call (billed, counted in RealTimeCalls), then
	// closes the connection without an answer.
	Dropped int
	// BadRequest answers 400 ValidationException (permanent).
	BadRequest int
}

// RealTimeCall is one InvokeModel call the server processed.
type RealTimeCall struct {
	// Model is the model id of the path, unescaped.
	Model string
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

// RealTimeCalls returns every InvokeModel call processed, oldest first.
func (s *Server) RealTimeCalls() []RealTimeCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RealTimeCall(nil), s.rtCalls...)
}

// invoke serves InvokeModel for Anthropic Claude models: the body is an
// Anthropic Messages request (anthropic_version, max_tokens, messages), the
// answer a Message with usage, and the token counts in the
// X-Amzn-Bedrock-*-Token-Count headers, as Bedrock sends them.
func (s *Server) invoke(w http.ResponseWriter, r *http.Request) {
	model := r.PathValue("modelId")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "ValidationException", "could not read the body")
		return
	}
	var p struct {
		Version   string          `json:"anthropic_version"`
		MaxTokens int             `json:"max_tokens"`
		Messages  json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Version == "" || p.MaxTokens <= 0 || len(p.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: #: required key [anthropic_version, max_tokens, messages] not found, please reformat your input and try again.")
		return
	}
	fault := ""
	s.mu.Lock()
	f := &s.rtFaults
	switch {
	case f.RateLimited > 0:
		f.RateLimited--
		fault = "rate_limited"
	case f.Unavailable > 0:
		f.Unavailable--
		fault = "unavailable"
	case f.ModelTimeout > 0:
		f.ModelTimeout--
		fault = "model_timeout"
	case f.BadRequest > 0:
		f.BadRequest--
		fault = "bad_request"
	case f.Dropped > 0:
		f.Dropped--
		fault = "dropped"
	}
	retryAfter := f.RetryAfter
	if fault == "" || fault == "dropped" {
		s.rtCalls = append(s.rtCalls, RealTimeCall{Model: model, Body: lake.Sum(body), Dropped: fault == "dropped"})
	}
	s.mu.Unlock()
	w.(*recorder).fault = fault
	switch fault {
	case "rate_limited":
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		writeError(w, http.StatusTooManyRequests, "ThrottlingException", "Too many requests, please wait before trying again.")
		return
	case "unavailable":
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "The service isn't available. Try again later.")
		return
	case "model_timeout":
		writeError(w, http.StatusRequestTimeout, "ModelTimeoutException", "Model has timed out in processing the request. Try your request again.")
		return
	case "bad_request":
		writeError(w, http.StatusBadRequest, "ValidationException", "Input is too long for requested model.")
		return
	case "dropped":
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	d := lake.Sum(body).Hex()
	in, out := 10+len(body)/4, 5
	w.Header().Set("X-Amzn-Bedrock-Input-Token-Count", fmt.Sprint(in))
	w.Header().Set("X-Amzn-Bedrock-Output-Token-Count", fmt.Sprint(out))
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "msg_bdrk_" + d[:24], "type": "message", "role": "assistant", "model": anthropicModel(model),
		"content":     []any{map[string]any{"type": "text", "text": "answer " + d[:8]}},
		"stop_reason": "end_turn", "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in, "output_tokens": out},
	})
}
