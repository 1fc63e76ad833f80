package anthropicbatch

import (
	"context"

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

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/batchlake/batchlake/providers"
)

// Defaults for the zero Config.
const (
	DefaultCreateTimeout  = 5 * time.Minute // the body can be 256 MB
	DefaultRequestTimeout = 60 * time.Second
	DefaultPageSize       = 100
	DefaultClockSkew      = 5 * time.Minute
	defaultBaseURL        = "https://api.anthropic.com/"
)

// Shards is what Find needs to know from the lake: which custom_ids a shard
// holds, and which batches are already bound to some shard (so another
// shard's batch of the same size is never taken for this one's).
type Shards interface {
	CustomIDs(ctx context.Context, jobKey, shardID string) ([]string, error)
	// Bound maps batch ids bound in the lake to "job_key/shard_id".
	Bound(ctx context.Context) (map[string]string, error)
}

// Config configures a Client. The zero value reads the environment but
// cannot Find (Shards is required for that).
type Config struct {
	// APIKey overrides ANTHROPIC_API_KEY.
	APIKey string
	// BaseURL overrides ANTHROPIC_BASE_URL (default https://api.anthropic.com/).
	BaseURL string
	// HTTPClient replaces the SDK's HTTP client (proxies, tracing, tests).
	HTTPClient *http.Client
	// CreateTimeout bounds the single, unretried create (DefaultCreateTimeout if 0).
	CreateTimeout time.Duration
	// RequestTimeout bounds each attempt of list, get and cancel calls,
	// which the SDK retries (DefaultRequestTimeout if 0).
	RequestTimeout time.Duration
	// PageSize is the batches per list page, 1–1000 (DefaultPageSize if 0).
	PageSize int64
	// ClockSkew widens Find's window below `since`: Anthropic's clock
	// stamps created_at, not ours (DefaultClockSkew if 0).
	ClockSkew time.Duration
	// Shards answers Find's questions about the lake.
	Shards Shards
	// TmpDir holds staged request bodies (os.TempDir if empty).
	TmpDir string
	// Logger receives notes (discarded if nil). The key is never logged.
	Logger *slog.Logger
}

// ErrUnverified means a batch that may be the shard's exists but cannot be
// proven to be (or not to be) its batch yet. It wraps
// providers.ErrUnknownOutcome: create nothing, look again later.
var ErrUnverified = fmt.Errorf("anthropicbatch: a candidate batch cannot be verified yet: %w", providers.ErrUnknownOutcome)

// Client is a providers.Client for Anthropic Message Batches.
type Client struct {
	sdk  anthropic.Client
	key  providers.Secret
	base *url.URL
	cfg  Config
	log  *slog.Logger

	mu     sync.Mutex
	staged map[string]staged // Upload's ids → request bodies on disk
}

type staged struct {
	path  string
	count int
}

var _ providers.Client = (*Client)(nil)

// endpoint is the API key and base URL of cfg, or of ANTHROPIC_API_KEY and
// ANTHROPIC_BASE_URL: the batch client's and the real-time client's.
func endpoint(cfg Config) (key, base string, bu *url.URL, err error) {
	key = cfg.APIKey
	if key == "" {
		key = os.Getenv("ANTHROPIC_API_KEY")
	}
	if key == "" {
		return "", "", nil, errors.New("anthropicbatch: no API key: set ANTHROPIC_API_KEY")
	}
	base = cfg.BaseURL
	if base == "" {
		base = os.Getenv("ANTHROPIC_BASE_URL")
	}
	if base == "" {
		base = defaultBaseURL
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	bu, err = url.Parse(base)
	if err != nil || bu.Scheme == "" || bu.Host == "" {
		return "", "", nil, fmt.Errorf("anthropicbatch: base URL %q is not an absolute URL", base)
	}
	return key, base, bu, nil
}

// New makes a client. It fails when no API key is configured.
func New(cfg Config) (*Client, error) {
	key, base, bu, err := endpoint(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.CreateTimeout <= 0 {
		cfg.CreateTimeout = DefaultCreateTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.PageSize <= 0 || cfg.PageSize > 1000 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = DefaultClockSkew
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithBaseURL(base)}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Client{sdk: anthropic.NewClient(opts...), key: providers.Secret(key), base: bu, cfg: cfg, log: log, staged: map[string]staged{}}, nil
}

// APIError is an error answer from the API reduced to what is safe to
// print: no request (whose headers carry the key), key redacted.
type APIError struct {
	StatusCode int
	Type       string
	Message    string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Anthropic API %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Type != "" {
		b.WriteString(" (" + e.Type + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// clean turns an SDK error into one that is safe to print and log.
func (c *Client) clean(err error) error {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		return &APIError{StatusCode: apiErr.StatusCode, Type: c.key.Redact(string(apiErr.Type())), Message: c.key.Redact(apiErr.Message)}
	}
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

func (c *Client) reqTimeout() option.RequestOption {
	return option.WithRequestTimeout(c.cfg.RequestTimeout)
}

// sameOrigin reports whether u is on the configured API's scheme and host.
func (c *Client) sameOrigin(u *url.URL) bool {
	return strings.EqualFold(u.Scheme, c.base.Scheme) && strings.EqualFold(u.Host, c.base.Host)
}
