package geminibatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/batchlake/batchlake/providers"
)

// DefaultRealTimeRetries is how often a real-time call answered 429 or 5xx
// (or not answered) is sent again.
const DefaultRealTimeRetries = 4

// maxRetryDelay caps the wait a 429 asks for.
const maxRetryDelay = time.Minute

// RealTime sends batch request lines one at a time through generateContent
// (POST /v1beta/{model}:generateContent with the line's request), over the
// batch adapter's HTTP conventions (x-goog-api-key, GOOGLE_GEMINI_BASE_URL).
// generateContent takes no idempotency key, so a call whose answer is lost
// may have been processed: the caller records every attempt
// (providers.AttemptHook). A 429 is retried after the wait its RetryInfo
// (or Retry-After header) asks for, a 5xx with backoff.
type RealTime struct {
	c     *Client
	model string
	retry int
}

var _ providers.RealTime = (*RealTime)(nil)

// NewRealTime makes a real-time client for model (models/… or a bare id)
// from the same Config as New.
func NewRealTime(cfg Config, model string) (*RealTime, error) {
	if model == "" {
		return nil, errors.New("geminibatch: real-time calls need the job's model")
	}
	cfg.HTTPClient = providers.HTTPClientWithAttempts(cfg.HTTPClient)
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Minute // an answer can take minutes
	}
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(model, "models/") {
		model = "models/" + model
	}
	return &RealTime{c: c, model: model, retry: DefaultRealTimeRetries}, nil
}

type requestLine struct {
	Key     json.RawMessage `json:"key"`
	Request json.RawMessage `json:"request"`
}

// Call sends the line's request and returns a line of the batch output
// format: {"key", "response": <GenerateContentResponse>} or, for an error
// answer, {"key", "error": <google.rpc.Status>}.
func (r *RealTime) Call(ctx context.Context, line []byte) ([]byte, error) {
	var in requestLine
	if err := json.Unmarshal(line, &in); err != nil {
		return nil, fmt.Errorf("gemini real-time: request line: %w", err)
	}
	if len(in.Request) == 0 {
		return nil, fmt.Errorf("gemini real-time: request %s has no request", string(in.Key))
	}
	u := r.c.base.JoinPath("v1beta", r.model+":generateContent")
	status, body, err := r.send(ctx, u.String(), in.Request)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"key": in.Key}
	if status/100 == 2 {
		out["response"] = json.RawMessage(body)
	} else {
		var e struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || len(e.Error) == 0 {
			e.Error, _ = json.Marshal(map[string]any{"code": status, "message": strings.TrimSpace(string(body)), "status": statusName(status)})
		}
		out["error"] = e.Error
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("gemini real-time %s: answer is not JSON: %w", string(in.Key), err)
	}
	return []byte(r.c.key.Redact(string(b))), nil
}

// send makes attempts until one is answered with something other than 429
// or 5xx, the retries run out or ctx ends; the last answer is returned, an
// error only when none arrived.
func (r *RealTime) send(ctx context.Context, u string, reqBody []byte) (int, []byte, error) {
	for attempt := 0; ; attempt++ {
		status, body, wait, err := r.once(ctx, u, reqBody)
		if err == nil && status != http.StatusTooManyRequests && status < 500 {
			return status, body, nil
		}
		if attempt >= r.retry || ctx.Err() != nil {
			return status, body, err
		}
		if wait == 0 {
			wait = time.Duration(500<<attempt) * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return status, body, err
		case <-time.After(min(wait, maxRetryDelay)):
		}
	}
}

// once makes one attempt; wait is what a 429 asks for (0: not said).
func (r *RealTime) once(ctx context.Context, u string, reqBody []byte) (int, []byte, time.Duration, error) {
	cctx, cancel := context.WithTimeout(ctx, r.c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, u, bytes.NewReader(reqBody))
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-goog-api-key", string(r.c.key))
	res, err := r.c.http.Do(req)
	if err != nil {
		return 0, nil, 0, r.c.clean(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, 0, r.c.clean(err)
	}
	return res.StatusCode, body, retryDelay(res, body), nil
}

// retryDelay is the wait a 429 answer asks for: its Retry-After header, or
// the retryDelay of a google.rpc.RetryInfo in its error details.
func retryDelay(res *http.Response, body []byte) time.Duration {
	if res.StatusCode != http.StatusTooManyRequests {
		return 0
	}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	var e struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		for _, d := range e.Error.Details {
			if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
				if v, err := time.ParseDuration(d.RetryDelay); err == nil && v >= 0 {
					return max(v, time.Millisecond)
				}
			}
		}
	}
	return 0
}

func statusName(code int) string {
	switch {
	case code == http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case code == http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case code >= 500:
		return "INTERNAL"
	case code == http.StatusNotFound:
		return "NOT_FOUND"
	case code == http.StatusForbidden:
		return "PERMISSION_DENIED"
	}
	return "INVALID_ARGUMENT"
}
