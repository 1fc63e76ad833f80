package providers

import (
	"context"
	"net/http"
)

// RealTime sends one request at a time through a provider's real-time API
// (OpenAI chat completions, responses and embeddings, Anthropic messages,
// Bedrock InvokeModel, Gemini generateContent): the synchronous tail of a
// retry (retry --mode sync).
type RealTime interface {
	// Call sends the request of one line of the provider's batch input
	// format and returns the answer as a line of its batch output format,
	// with the same custom id: a success, or the API's error answer (which
	// reconcile classifies like a batch's error line). An error means no
	// answer arrived: the request may or may not have been processed.
	// Every HTTP attempt (the SDK retries 429 and 5xx answers, honouring
	// retry-after) goes through the AttemptHook of ctx, if any.
	Call(ctx context.Context, line []byte) ([]byte, error)
}

// AttemptHook is told of every HTTP attempt of a real-time call.
type AttemptHook interface {
	// Before runs before the attempt goes out; an error stops it unsent.
	Before(ctx context.Context) error
	// After runs once the attempt got an HTTP answer (its status), or with
	// status 0 when it got none (the request may have been processed).
	After(ctx context.Context, status int)
}

type hookKey struct{}

// WithAttemptHook returns a context whose real-time calls report each HTTP
// attempt to h.
func WithAttemptHook(ctx context.Context, h AttemptHook) context.Context {
	return context.WithValue(ctx, hookKey{}, h)
}

// AttemptTransport wraps an HTTP transport (nil: http.DefaultTransport) so
// that each attempt an SDK makes is announced to the AttemptHook of its
// request's context before it goes out, and its answer after. SDKs retry
// above the transport, so every retry passes through here too.
func AttemptTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return attemptTransport{base}
}

type attemptTransport struct{ base http.RoundTripper }

func (t attemptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	h, _ := req.Context().Value(hookKey{}).(AttemptHook)
	if h == nil {
		return t.base.RoundTrip(req)
	}
	if err := h.Before(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	res, err := t.base.RoundTrip(req)
	if err != nil {
		h.After(req.Context(), 0)
		return nil, err
	}
	h.After(req.Context(), res.StatusCode)
	return res, nil
}

// HTTPClientWithAttempts returns a copy of c (nil: a new client) whose
// transport announces every attempt (AttemptTransport).
func HTTPClientWithAttempts(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	out.Transport = AttemptTransport(out.Transport)
	return &out
}
