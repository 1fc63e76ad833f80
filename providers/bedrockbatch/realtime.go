package bedrockbatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/smithy-go"

	"github.com/batchlake/batchlake/providers"
)

// Real-time defaults for the zero Config.
const (
	// DefaultRealTimeAttempts is how many times the SDK's standard retryer
	// sends an InvokeModel call (the first and its retries) answered by a
	// throttling exception, a 5xx or nothing at all.
	DefaultRealTimeAttempts = 5
	// DefaultRealTimeTimeout bounds each attempt: a long answer takes minutes.
	DefaultRealTimeTimeout = 10 * time.Minute
	// maxRetryAfter caps the wait a Retry-After header can ask for.
	maxRetryAfter = time.Minute
)

// invokeModel is the modelInvocationType whose record bodies InvokeModel
// takes as they are (the manifest's endpoint).
const invokeModel = "InvokeModel"

// RealTime sends Bedrock batch records one at a time through the runtime's
// InvokeModel (POST /model/{modelId}/invoke) with the job's model id, over
// the official SDK with credentials from the AWS default chain, as the
// batch Client. InvokeModel takes no idempotency key, so a call whose
// answer is lost may have been processed: the caller records every attempt
// (providers.AttemptHook).
type RealTime struct {
	sdk   *bedrockruntime.Client
	model string
}

var _ providers.RealTime = (*RealTime)(nil)

// NewRealTime makes a real-time client for a job of model (the manifest's
// model) whose records are of the modelInvocationType endpoint (the
// manifest's endpoint; "" is InvokeModel). Config's Region, HTTPClient and
// MaxAttempts apply (DefaultRealTimeAttempts if 0), Endpoint overrides the
// runtime endpoint, and RequestTimeout bounds each attempt
// (DefaultRealTimeTimeout if 0); the S3 locations and role are not used.
// Converse records are refused: their body is not an InvokeModel body.
func NewRealTime(ctx context.Context, cfg Config, model, endpoint string) (*RealTime, error) {
	if model == "" {
		return nil, errors.New("bedrockbatch: the job names no model (plan --model): InvokeModel needs one")
	}
	if endpoint != "" && endpoint != invokeModel {
		return nil, fmt.Errorf("bedrockbatch: the job's records are %s requests; the real-time client sends InvokeModel bodies only: use --mode batch", endpoint)
	}
	attempts := cfg.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultRealTimeAttempts
	}
	timeout := cfg.RequestTimeout
	if timeout <= 0 {
		timeout = DefaultRealTimeTimeout
	}
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("bedrockbatch: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("bedrockbatch: no AWS region: set --bedrock-region or AWS_REGION")
	}
	hc := providers.HTTPClientWithAttempts(cfg.HTTPClient)
	hc.Timeout = timeout
	sdk := bedrockruntime.NewFromConfig(awsCfg, func(o *bedrockruntime.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.HTTPClient = hc
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = attempts
			so.Backoff = retryAfter{retry.NewExponentialJitterBackoff(so.MaxBackoff)}
			// The client-side retry quota would turn a burst of
			// throttling into failed calls; the tail waits instead.
			so.RateLimiter = ratelimit.None
		})
	})
	return &RealTime{sdk: sdk, model: model}, nil
}

// retryAfter waits at least as long as an answer's Retry-After header asks
// (when it carries one), else the SDK's jittered exponential backoff.
type retryAfter struct{ base retry.BackoffDelayer }

func (b retryAfter) BackoffDelay(attempt int, err error) (time.Duration, error) {
	d, berr := b.base.BackoffDelay(attempt, err)
	if berr != nil {
		return d, berr
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		if n, perr := strconv.Atoi(strings.TrimSpace(re.Response.Header.Get("Retry-After"))); perr == nil && n > 0 {
			if w := min(time.Duration(n)*time.Second, maxRetryAfter); w > d {
				d = w
			}
		}
	}
	return d, nil
}

type recordLine struct {
	RecordID   string          `json:"recordId"`
	ModelInput json.RawMessage `json:"modelInput"`
}

// Call sends the line's modelInput to InvokeModel and returns a line of
// Bedrock's batch output format: {"recordId", "modelInput", "modelOutput":
// <the response body>} or, for an exception, {"recordId", "modelInput",
// "error": {"errorCode": <HTTP status>, "errorMessage": "<exception>: <message>"}}.
func (c *RealTime) Call(ctx context.Context, line []byte) ([]byte, error) {
	var in recordLine
	if err := json.Unmarshal(line, &in); err != nil {
		return nil, fmt.Errorf("bedrock real-time: record line: %w", err)
	}
	if in.RecordID == "" || len(in.ModelInput) == 0 || in.ModelInput[0] != '{' {
		return nil, fmt.Errorf("bedrock real-time: record %q: want a recordId and a modelInput object", in.RecordID)
	}
	out := map[string]any{"recordId": in.RecordID, "modelInput": in.ModelInput}
	res, err := c.sdk.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String(c.model), Body: in.ModelInput,
		ContentType: aws.String("application/json"), Accept: aws.String("application/json")})
	switch {
	case err == nil:
		if !json.Valid(res.Body) {
			return nil, fmt.Errorf("bedrock real-time %s: the answer body is not JSON", in.RecordID)
		}
		out["modelOutput"] = json.RawMessage(res.Body)
	default:
		var re *awshttp.ResponseError
		if !errors.As(err, &re) || re.HTTPStatusCode() == 0 {
			// No answer after the retries: the call may have been processed.
			return nil, fmt.Errorf("bedrock real-time %s: %w", in.RecordID, err)
		}
		msg := err.Error()
		var api smithy.APIError
		if errors.As(err, &api) {
			msg = api.ErrorCode() + ": " + api.ErrorMessage()
		}
		out["error"] = map[string]any{"errorCode": re.HTTPStatusCode(), "errorMessage": msg}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("bedrock real-time %s: answer is not JSON: %w", in.RecordID, err)
	}
	return b, nil
}
