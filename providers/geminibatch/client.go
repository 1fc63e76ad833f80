package geminibatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/batchlake/batchlake/providers"
)

// Defaults for the zero Config.
const (
	DefaultCreateTimeout  = 5 * time.Minute
	DefaultRequestTimeout = 60 * time.Second
	DefaultPageSize       = 100
	DefaultMaxRetries     = 2
	defaultBaseURL        = "https://generativelanguage.googleapis.com"
	// MaxInlineBytes is the API's limit for inline requests (§4.1).
	MaxInlineBytes = 20 << 20
)

// DefaultUploadMIMETypes are the types a JSONL upload is tried as. The
// batch guide's type, application/jsonl, is refused with 400 "Unsupported
// MIME type" by some accounts (python-genai #1547, cookbook #1008), where
// application/json or text/plain are accepted; the file's bytes are the
// same JSONL whatever the declared type.
var DefaultUploadMIMETypes = []string{"application/jsonl", "application/json", "text/plain"}

// Jobs tells Create the model of a job: Gemini names it in the create URL.
type Jobs interface {
	Model(ctx context.Context, jobKey string) (string, error)
}

// Config configures a Client. The zero value reads the environment but
// cannot Create (Jobs is required for that).
type Config struct {
	// APIKey overrides GEMINI_API_KEY (and GOOGLE_API_KEY).
	APIKey string
	// BaseURL overrides GOOGLE_GEMINI_BASE_URL.
	BaseURL string
	// HTTPClient replaces http.DefaultClient.
	HTTPClient *http.Client
	// CreateTimeout bounds the single create (DefaultCreateTimeout if 0).
	CreateTimeout time.Duration
	// RequestTimeout bounds each attempt of get, list and cancel calls
	// (DefaultRequestTimeout if 0).
	RequestTimeout time.Duration
	// MaxRetries is how often get, list, cancel and download are retried
	// on a transport error, 429 or 5xx (DefaultMaxRetries if 0, none if <0).
	MaxRetries int
	// PageSize is the batches or files per list page (DefaultPageSize if 0).
	PageSize int
	// InlineMaxBytes: shards up to this size are sent inline (0: never;
	// capped at MaxInlineBytes).
	InlineMaxBytes int64
	// UploadMIMETypes are the MIME types a JSONL upload is declared as,
	// tried in order while the Files API answers "Unsupported MIME type"
	// (DefaultUploadMIMETypes if empty).
	UploadMIMETypes []string
	// Jobs gives a job's model.
	Jobs Jobs
	// Logger receives notes (discarded if nil). The key is never logged.
	Logger *slog.Logger
}

// Client is a providers.Client for Gemini batch mode.
type Client struct {
	key  providers.Secret
	base *url.URL
	http *http.Client
	cfg  Config
	log  *slog.Logger

	mu     sync.Mutex
	inline map[string][]byte // Upload's inline ids → {"requests":[…]} bodies
}

var _ providers.Client = (*Client)(nil)

// New makes a client. It fails when no API key is configured.
func New(cfg Config) (*Client, error) {
	key := cfg.APIKey
	for _, v := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"} {
		if key == "" {
			key = os.Getenv(v)
		}
	}
	if key == "" {
		return nil, errors.New("geminibatch: no API key: set GEMINI_API_KEY")
	}
	base := cfg.BaseURL
	if base == "" {
		base = os.Getenv("GOOGLE_GEMINI_BASE_URL")
	}
	if base == "" {
		base = defaultBaseURL
	}
	bu, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil || bu.Scheme == "" || bu.Host == "" {
		return nil, fmt.Errorf("geminibatch: base URL %q is not an absolute URL", base)
	}
	if cfg.CreateTimeout <= 0 {
		cfg.CreateTimeout = DefaultCreateTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if len(cfg.UploadMIMETypes) == 0 {
		cfg.UploadMIMETypes = DefaultUploadMIMETypes
	}
	cfg.InlineMaxBytes = min(cfg.InlineMaxBytes, MaxInlineBytes)
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Client{key: providers.Secret(key), base: bu, http: hc, cfg: cfg, log: log, inline: map[string][]byte{}}, nil
}

// APIError is an error answer (google.rpc.Status in {"error": …}), with the
// key redacted.
type APIError struct {
	StatusCode int
	Status     string // RESOURCE_EXHAUSTED, INVALID_ARGUMENT, …
	Message    string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Gemini API %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Status != "" {
		b.WriteString(" (" + e.Status + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

func (c *Client) clean(err error) error {
	return c.key.RedactError(err)
}

func statusOf(err error) int {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	return 0
}

// refused reports a definite refusal (providers.Refusal of its status).
func refused(err error) bool { return providers.Refusal(statusOf(err)) }

func retryable(err error) bool {
	st := statusOf(err)
	return st == 0 || st == http.StatusTooManyRequests || st >= 500
}

// call is one HTTP exchange. path is relative to the base URL unless it is
// absolute. The key is sent only to the base URL's host. A non-2xx answer
// is an *APIError; on success the caller owns the body.
type call struct {
	method, path string
	query        url.Values
	header       http.Header
	body         []byte
	reader       io.Reader
	size         int64
	timeout      time.Duration
	retries      int
}

func (c *Client) do(ctx context.Context, k call) (*http.Response, error) {
	var u *url.URL
	if strings.HasPrefix(k.path, "http://") || strings.HasPrefix(k.path, "https://") {
		var err error
		if u, err = url.Parse(k.path); err != nil {
			return nil, err
		}
	} else {
		u = c.base.JoinPath(k.path)
	}
	if k.query != nil {
		u.RawQuery = k.query.Encode()
	}
	for attempt := 0; ; attempt++ {
		res, err := c.once(ctx, u, k)
		if err == nil {
			return res, nil
		}
		if attempt >= k.retries || !retryable(err) || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Duration(200*(attempt+1)) * time.Millisecond):
		}
	}
}

func (c *Client) once(ctx context.Context, u *url.URL, k call) (*http.Response, error) {
	var cancel context.CancelFunc = func() {}
	if k.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, k.timeout)
	}
	var body io.Reader
	if k.body != nil {
		body = bytes.NewReader(k.body)
	} else if k.reader != nil {
		body = k.reader
	}
	req, err := http.NewRequestWithContext(ctx, k.method, u.String(), body)
	if err != nil {
		cancel()
		return nil, err
	}
	if k.reader != nil && k.size >= 0 {
		req.ContentLength = k.size
	}
	for h, vs := range k.header {
		req.Header[h] = vs
	}
	if k.body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.EqualFold(u.Host, c.base.Host) && strings.EqualFold(u.Scheme, c.base.Scheme) {
		req.Header.Set("x-goog-api-key", string(c.key))
	}
	res, err := c.http.Do(req)
	if err != nil {
		cancel()
		return nil, c.clean(err)
	}
	if res.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		cancel()
		var e struct {
			Error struct {
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		json.Unmarshal(data, &e)
		msg := e.Error.Message
		if msg == "" && len(data) > 0 && !json.Valid(data) {
			msg = strings.TrimSpace(string(data))
		}
		return nil, &APIError{StatusCode: res.StatusCode, Status: c.key.Redact(e.Error.Status), Message: c.key.Redact(msg)}
	}
	res.Body = &cancelBody{ReadCloser: res.Body, cancel: cancel}
	return res, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error { err := b.ReadCloser.Close(); b.cancel(); return err }

// getJSON makes a retried call and decodes its JSON answer into v (raw
// bytes too, when v is *json.RawMessage).
func (c *Client) getJSON(ctx context.Context, k call, v any) error {
	if k.timeout == 0 {
		k.timeout = c.cfg.RequestTimeout
	}
	if k.retries == 0 {
		k.retries = max(c.cfg.MaxRetries, 0)
	}
	res, err := c.do(ctx, k)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return c.clean(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("answer is not the expected JSON: %v", err)
	}
	return nil
}
