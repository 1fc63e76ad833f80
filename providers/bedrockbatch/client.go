package bedrockbatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrock"
	"gocloud.dev/blob"

	"github.com/batchlake/batchlake/providers"
)

// Defaults for the zero Config.
const (
	DefaultCreateTimeout  = 2 * time.Minute
	DefaultRequestTimeout = time.Minute
	DefaultPageSize       = 100
	DefaultClockSkew      = 5 * time.Minute
)

// Config configures a Client. Credentials always come from the AWS default
// chain (environment, shared config and credentials files, SSO, web
// identity, container and instance roles), never from here.
type Config struct {
	// Region is the AWS region; empty means the default chain's (AWS_REGION,
	// the profile).
	Region string
	// Endpoint overrides Bedrock's control-plane endpoint (a VPC endpoint,
	// a gateway, a test server).
	Endpoint string
	// RoleARN is the service role Bedrock assumes to read the input and
	// write the output. Only Create needs it.
	RoleARN string
	// Model returns the model id of a job (the manifest's model, from plan
	// --model): Bedrock sets it per job, not per record.
	Model func(ctx context.Context, jobKey string) (string, error)
	// Input and Output are the S3 prefixes for shard files and results,
	// "s3://bucket/prefix/" with optional gocloud.dev s3blob query options
	// for batchlake's own access (see DefaultLocations).
	Input, Output string
	// TimeoutHours sets the job's timeoutDurationInHours (Bedrock's default if 0).
	TimeoutHours int32
	// HTTPClient replaces the SDK's HTTP client for Bedrock calls.
	HTTPClient *http.Client
	// CreateTimeout bounds a create with the SDK's retries, which are safe
	// here: every attempt carries the same clientRequestToken.
	CreateTimeout time.Duration
	// RequestTimeout bounds each list, get and stop call with its retries.
	RequestTimeout time.Duration
	// PageSize is the jobs listed per page by Find, 1–1000.
	PageSize int32
	// ClockSkew is how far before `since` Find looks (submitTime is
	// Bedrock's clock, not ours).
	ClockSkew time.Duration
	// MaxAttempts caps the SDK's attempts per call (its default if 0).
	MaxAttempts int
	Logger      *slog.Logger
}

// Client is a providers.Client for Amazon Bedrock batch inference.
type Client struct {
	sdk    *bedrock.Client
	cfg    Config
	input  Location
	output Location
	log    *slog.Logger

	mu      sync.Mutex
	buckets map[string]*blob.Bucket
}

var _ providers.Client = (*Client)(nil)

// New makes a client from the AWS default chain. It fails when the input or
// output location is missing or not s3://, or no region is known.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Input == "" || cfg.Output == "" {
		return nil, errors.New("bedrockbatch: need S3 input and output prefixes (--bedrock-input, --bedrock-output; they default under an s3:// lake's bucket)")
	}
	in, err := ParseLocation(cfg.Input)
	if err != nil {
		return nil, err
	}
	out, err := ParseLocation(cfg.Output)
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
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.MaxAttempts > 0 {
		opts = append(opts, config.WithRetryMaxAttempts(cfg.MaxAttempts))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("bedrockbatch: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("bedrockbatch: no AWS region: set --bedrock-region or AWS_REGION")
	}
	sdk := bedrock.NewFromConfig(awsCfg, func(o *bedrock.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		if cfg.HTTPClient != nil {
			o.HTTPClient = cfg.HTTPClient
		}
	})
	return &Client{sdk: sdk, cfg: cfg, input: in, output: out, log: log, buckets: map[string]*blob.Bucket{}}, nil
}

// Close closes the S3 buckets the client opened.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for n, b := range c.buckets {
		errs = append(errs, b.Close())
		delete(c.buckets, n)
	}
	return errors.Join(errs...)
}
