package anthropicbatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/batchlake/batchlake/providers"
)

// DefaultRealTimeRetries is how often the SDK retries a real-time call
// answered 408, 409, 429 or 5xx (honouring retry-after) or not answered.
const DefaultRealTimeRetries = 4

// RealTime sends batch request lines one at a time through the Messages
// API (POST /v1/messages with the line's params), with the same SDK client
// as the batch adapter. The Messages API takes no idempotency key, so a call
// whose answer is lost may have been processed: the caller records every
// attempt (providers.AttemptHook).
type RealTime struct {
	sdk     anthropic.Client
	key     providers.Secret
	timeout time.Duration
}

var _ providers.RealTime = (*RealTime)(nil)

// NewRealTime makes a real-time client from the same Config as New
// (RequestTimeout bounds each attempt; DefaultRealTimeRetries retries).
func NewRealTime(cfg Config) (*RealTime, error) {
	key, base, _, err := endpoint(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.RequestTimeout <= 0 {
		// A message can take minutes to generate.
		cfg.RequestTimeout = 10 * time.Minute
	}
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithBaseURL(base),
		option.WithHTTPClient(providers.HTTPClientWithAttempts(cfg.HTTPClient)), option.WithMaxRetries(DefaultRealTimeRetries)}
	return &RealTime{sdk: anthropic.NewClient(opts...), key: providers.Secret(key), timeout: cfg.RequestTimeout}, nil
}

type requestLine struct {
	CustomID string          `json:"custom_id"`
	Params   json.RawMessage `json:"params"`
}

// Call sends the line's params to the Messages API and returns a line of
// the Message Batches results format: {"custom_id", "result": {"type":
// "succeeded", "message"}} or, for an error answer, {"type": "errored",
// "error": <the API's error body>}.
func (c *RealTime) Call(ctx context.Context, line []byte) ([]byte, error) {
	var in requestLine
	if err := json.Unmarshal(line, &in); err != nil {
		return nil, fmt.Errorf("anthropic real-time: request line: %w", err)
	}
	if len(in.Params) == 0 {
		return nil, fmt.Errorf("anthropic real-time: request %s has no params", in.CustomID)
	}
	var body []byte
	err := c.sdk.Post(ctx, "v1/messages", json.RawMessage(in.Params), &body, option.WithRequestTimeout(c.timeout))
	var result map[string]any
	if err == nil {
		result = map[string]any{"type": "succeeded", "message": json.RawMessage(body)}
	} else {
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.Response == nil {
			return nil, c.key.RedactError(err)
		}
		b, rerr := io.ReadAll(apiErr.Response.Body)
		if rerr != nil {
			return nil, c.key.RedactError(rerr)
		}
		var eb struct {
			Error *struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &eb) != nil || eb.Error == nil || eb.Error.Type == "" {
			// Not the API's error body (a gateway's page): typed by its status.
			b, _ = json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": errorTypeOf(apiErr.StatusCode),
				"message": c.key.Redact(strings.TrimSpace(string(b)))}})
		}
		result = map[string]any{"type": "errored", "error": json.RawMessage(c.key.Redact(string(b)))}
	}
	out, err := json.Marshal(map[string]any{"custom_id": in.CustomID, "result": result})
	if err != nil {
		return nil, fmt.Errorf("anthropic real-time %s: answer is not JSON: %w", in.CustomID, err)
	}
	return out, nil
}

// errorTypeOf is the API's error type for an HTTP status (its errors page).
func errorTypeOf(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	}
	return "invalid_request_error"
}
