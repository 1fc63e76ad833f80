package openaibatch

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/batchlake/batchlake/providers"
)

// Defaults for the zero Config.
const (
	DefaultCreateTimeout  = 60 * time.Second
	DefaultRequestTimeout = 60 * time.Second
	DefaultPageSize       = 100
	DefaultClockSkew      = 5 * time.Minute
)

// Config configures a Client. The zero value reads the environment.
type Config struct {
	// APIKey overrides OPENAI_API_KEY.
	APIKey string
	// BaseURL overrides OPENAI_BASE_URL (which otherwise defaults to
	// https://api.openai.com/v1/); it must end in /v1/.
	BaseURL string
	// HTTPClient replaces the SDK's HTTP client (for proxies, tracing, tests).
	HTTPClient *http.Client
	// CreateTimeout bounds the single, unretried create attempt; when it
	// fires the outcome is unknown (DefaultCreateTimeout if 0).
	CreateTimeout time.Duration
	// RequestTimeout bounds each attempt of list, get and cancel calls; the
	// SDK retries those (DefaultRequestTimeout if 0). Uploads and downloads
	// are bounded by the caller's context only, as their size varies.
	RequestTimeout time.Duration
	// PageSize is the batches listed per page by Find, 1–100 (DefaultPageSize if 0).
	PageSize int64
	// ClockSkew is how far before `since` Find keeps looking, because the
	// provider's clock stamps created_at, not ours (DefaultClockSkew if 0).
	ClockSkew time.Duration
	// Logger receives notes such as reused uploads and duplicate batches
	// (discarded if nil). The API key is never logged.
	Logger *slog.Logger
}

// Client is a providers.Client for the OpenAI Batch API.
type Client struct {
	sdk openai.Client
	key providers.Secret // only to redact it from error text
	cfg Config
	log *slog.Logger
}

var _ providers.Client = (*Client)(nil)

// apiKey is cfg's API key, or OPENAI_API_KEY: the batch client's and the
// real-time client's.
func apiKey(cfg Config) (string, error) {
	key := cfg.APIKey
	if key == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	if key == "" {
		return "", errors.New("openaibatch: no API key: set OPENAI_API_KEY")
	}
	return key, nil
}

// New makes a client. It fails when no API key is configured.
func New(cfg Config) (*Client, error) {
	key, err := apiKey(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.CreateTimeout <= 0 {
		cfg.CreateTimeout = DefaultCreateTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.PageSize <= 0 || cfg.PageSize > 100 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = DefaultClockSkew
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// openai.NewClient reads OPENAI_API_KEY and OPENAI_BASE_URL itself;
	// explicit settings are applied after and win.
	var opts []option.RequestOption
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Client{sdk: openai.NewClient(opts...), key: providers.Secret(key), cfg: cfg, log: log}, nil
}

// APIError is an error answer from the API, reduced to what is safe to
// print: unlike the SDK's error it holds no request (whose headers carry
// the key), and its message has the key redacted.
type APIError struct {
	StatusCode int
	Type       string
	Code       string
	Param      string
	Message    string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "OpenAI API %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if c := e.Code; c != "" {
		b.WriteString(" (" + c + ")")
	} else if e.Type != "" {
		b.WriteString(" (" + e.Type + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// clean turns an SDK error into one that is safe to print and log.
func (c *Client) clean(err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return &APIError{
			StatusCode: apiErr.StatusCode,
			Type:       c.key.Redact(apiErr.Type),
			Code:       c.key.Redact(apiErr.Code),
			Param:      c.key.Redact(apiErr.Param),
			Message:    c.key.Redact(apiErr.Message),
		}
	}
	return c.key.RedactError(err)
}

// statusOf is the HTTP status of an API error, 0 for other errors.
func statusOf(err error) int {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	return 0
}
