package openaibatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/batchlake/batchlake/providers"
)

// DefaultRealTimeRetries is how often the SDK retries a real-time call
// answered 408, 409, 429 or 5xx (honouring retry-after) or not answered.
const DefaultRealTimeRetries = 4

// RealTime sends batch input lines one at a time through OpenAI's real-time
// endpoints (/v1/chat/completions, /v1/responses, /v1/embeddings,
// /v1/completions: the line's url), with the same SDK client as the batch
// adapter. OpenAI's inference endpoints take no idempotency key, so a call
// whose answer is lost may have been processed: the caller records every
// attempt (providers.AttemptHook).
type RealTime struct {
	sdk     openai.Client
	key     providers.Secret
	timeout time.Duration
}

var _ providers.RealTime = (*RealTime)(nil)

// NewRealTime makes a real-time client from the same Config as New
// (RequestTimeout bounds each attempt; DefaultRealTimeRetries retries).
func NewRealTime(cfg Config) (*RealTime, error) {
	key, err := apiKey(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	opts := []option.RequestOption{option.WithHTTPClient(providers.HTTPClientWithAttempts(cfg.HTTPClient)), option.WithMaxRetries(DefaultRealTimeRetries)}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	return &RealTime{sdk: openai.NewClient(opts...), key: providers.Secret(key), timeout: cfg.RequestTimeout}, nil
}

type inputLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// realTimePaths are the batch endpoints with a real-time twin.
var realTimePaths = map[string]bool{"/v1/chat/completions": true, "/v1/responses": true, "/v1/embeddings": true, "/v1/completions": true}

// Call sends the line's body to its url and returns a line of the Batch
// API's output format: {"id", "custom_id", "response": {"status_code",
// "request_id", "body"}, "error": null}, for an error answer too.
func (c *RealTime) Call(ctx context.Context, line []byte) ([]byte, error) {
	var in inputLine
	if err := json.Unmarshal(line, &in); err != nil {
		return nil, fmt.Errorf("openai real-time: input line: %w", err)
	}
	if !realTimePaths[in.URL] {
		return nil, fmt.Errorf("openai real-time: %s of %s has no real-time endpoint here (want one of /v1/chat/completions, /v1/responses, /v1/embeddings, /v1/completions)", in.URL, in.CustomID)
	}
	var body []byte
	var res *http.Response
	err := c.sdk.Post(ctx, strings.TrimPrefix(in.URL, "/v1/"), json.RawMessage(in.Body), &body,
		option.WithRequestTimeout(c.timeout), option.WithResponseInto(&res))
	status := http.StatusOK
	if err != nil {
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.Response == nil {
			return nil, c.key.RedactError(err)
		}
		status = apiErr.StatusCode
		res = apiErr.Response
		b, rerr := io.ReadAll(res.Body)
		if rerr != nil {
			return nil, c.key.RedactError(rerr)
		}
		if !json.Valid(b) {
			b, _ = json.Marshal(map[string]any{"error": map[string]any{"message": c.key.Redact(strings.TrimSpace(string(b))), "type": "server_error", "code": nil}})
		}
		body = []byte(c.key.Redact(string(b)))
	}
	reqID := ""
	if res != nil {
		reqID = res.Header.Get("x-request-id")
	}
	out, err := json.Marshal(map[string]any{"id": "sync_" + reqID, "custom_id": in.CustomID,
		"response": map[string]any{"status_code": status, "request_id": reqID, "body": json.RawMessage(body)}, "error": nil})
	if err != nil {
		return nil, fmt.Errorf("openai real-time %s: answer is not JSON: %w", in.CustomID, err)
	}
	return out, nil
}
