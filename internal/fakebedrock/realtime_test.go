package fakebedrock_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/batchlake/batchlake/internal/fakebedrock"
)

// TestInvokeModel: the runtime's InvokeModel through the official SDK (no
// retries): a Claude body is answered with a Message and its usage; each
// fault is the exception Bedrock's API reference gives for it; a body that
// is not a Claude request is a ValidationException; only answered calls
// and dropped ones count as processed.
func TestInvokeModel(t *testing.T) {
	const model = "anthropic.claude-3-haiku-20240307-v1:0"
	claude := `{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		name      string
		faults    fakebedrock.RealTimeFaults
		body      string
		status    int
		exception string
		processed int
	}{
		{"answered", fakebedrock.RealTimeFaults{}, claude, 200, "", 1},
		{"throttled", fakebedrock.RealTimeFaults{RateLimited: 1, RetryAfter: "2"}, claude, 429, "ThrottlingException", 0},
		{"unavailable", fakebedrock.RealTimeFaults{Unavailable: 1}, claude, 503, "ServiceUnavailableException", 0},
		{"model timeout", fakebedrock.RealTimeFaults{ModelTimeout: 1}, claude, 408, "ModelTimeoutException", 0},
		{"bad request", fakebedrock.RealTimeFaults{BadRequest: 1}, claude, 400, "ValidationException", 0},
		{"not a Claude body", fakebedrock.RealTimeFaults{}, `{"inputText":"hi"}`, 400, "ValidationException", 0},
		{"dropped", fakebedrock.RealTimeFaults{Dropped: 1}, claude, 0, "", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, _, url := setup(t, fakebedrock.Options{RealTime: c.faults})
			rt := bedrockruntime.New(bedrockruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(url),
				Credentials: credentials.NewStaticCredentialsProvider("AKIATEST", "secret", ""), RetryMaxAttempts: 1})
			out, err := rt.InvokeModel(context.Background(), &bedrockruntime.InvokeModelInput{ModelId: aws.String(model),
				Body: []byte(c.body), ContentType: aws.String("application/json")})
			calls := srv.RealTimeCalls()
			if len(calls) != c.processed {
				t.Fatalf("processed %d calls, want %d", len(calls), c.processed)
			}
			if len(calls) > 0 && calls[0].Model != model {
				t.Errorf("call to model %q, want %q", calls[0].Model, model)
			}
			switch {
			case c.status == 200:
				if err != nil {
					t.Fatal(err)
				}
				var msg struct {
					Type    string `json:"type"`
					Model   string `json:"model"`
					Content []struct{ Text string }
					Usage   struct {
						In  int `json:"input_tokens"`
						Out int `json:"output_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal(out.Body, &msg); err != nil || msg.Type != "message" || msg.Model != "claude-3-haiku-20240307" ||
					len(msg.Content) != 1 || msg.Content[0].Text == "" || msg.Usage.In == 0 || msg.Usage.Out == 0 {
					t.Fatalf("answer %s (%v)", out.Body, err)
				}
			case c.status == 0:
				var api smithy.APIError
				if err == nil || errors.As(err, &api) {
					t.Fatalf("dropped connection answered: %v", err)
				}
			default:
				var api smithy.APIError
				if !errors.As(err, &api) || api.ErrorCode() != c.exception {
					t.Fatalf("error %v, want %s", err, c.exception)
				}
				reqs := srv.Requests()
				if got := reqs[len(reqs)-1].Status; got != c.status {
					t.Errorf("status %d, want %d", got, c.status)
				}
				var thr *types.ThrottlingException
				if c.exception == "ThrottlingException" && !errors.As(err, &thr) {
					t.Errorf("%T is not the SDK's ThrottlingException", err)
				}
			}
		})
	}
	t.Run("unsigned", func(t *testing.T) {
		srv, _, url := setup(t, fakebedrock.Options{})
		resp, err := http.Post(url+"/model/"+model+"/invoke", "application/json", strings.NewReader(claude))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || len(srv.RealTimeCalls()) != 0 {
			t.Fatalf("unsigned InvokeModel: %d, %d calls processed", resp.StatusCode, len(srv.RealTimeCalls()))
		}
	})
}
