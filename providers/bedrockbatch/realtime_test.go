package bedrockbatch_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakebedrock"
	"github.com/batchlake/batchlake/providers/bedrockbatch"
)

// TestRealTimeLines: each InvokeModel answer becomes a Bedrock batch output
// line that the Bedrock ingest reads back to the same record, status and
// tokens; an exception the SDK does not retry (408, 400) is the record's
// error line with its HTTP status as errorCode.
func TestRealTimeLines(t *testing.T) {
	t.Parallel()
	const model = "anthropic.claude-3-haiku-20240307-v1:0"
	line := `{"recordId":"REC00000001","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}}`
	format, err := ingest.FormatFor("bedrock")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		faults fakebedrock.RealTimeFaults
		status int32 // 0: a success
		msg    string
	}{
		{"answered", fakebedrock.RealTimeFaults{}, 0, ""},
		{"throttled, then answered", fakebedrock.RealTimeFaults{RateLimited: 1}, 0, ""},
		{"model timeout", fakebedrock.RealTimeFaults{ModelTimeout: 1}, 408, "ModelTimeoutException: "},
		{"validation", fakebedrock.RealTimeFaults{BadRequest: 1}, 400, "ValidationException: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := fakebedrock.New(fakebedrock.Options{RealTime: c.faults})
			hs := httptest.NewServer(srv.Handler())
			t.Cleanup(hs.Close)
			rt, err := bedrockbatch.NewRealTime(context.Background(), bedrockbatch.Config{Endpoint: hs.URL}, model, "InvokeModel")
			if err != nil {
				t.Fatal(err)
			}
			out, err := rt.Call(context.Background(), []byte(line))
			if err != nil {
				t.Fatal(err)
			}
			var echo struct {
				ModelInput json.RawMessage `json:"modelInput"`
			}
			if err := json.Unmarshal(out, &echo); err != nil || !strings.Contains(line, string(echo.ModelInput)) {
				t.Errorf("modelInput not echoed: %s", out)
			}
			row, err := format.ParseResult(out, ingest.ChannelOutput)
			if err != nil {
				t.Fatalf("ingest of %s: %v", out, err)
			}
			if row.CustomID != "REC00000001" {
				t.Fatalf("recordId %q", row.CustomID)
			}
			switch {
			case c.status == 0 && (row.Outcome == "error" || row.OutputTokens == 0):
				t.Fatalf("success read as %+v from %s", row, out)
			case c.status != 0 && (row.Outcome != "error" || row.StatusCode == nil || *row.StatusCode != c.status || !strings.HasPrefix(row.ErrorMessage, c.msg)):
				t.Fatalf("error read as %+v from %s, want status %d", row, out, c.status)
			}
		})
	}
}

// TestRealTimeRefusals: a job without a model, or of Converse records (not
// InvokeModel bodies), gets no real-time client.
func TestRealTimeRefusals(t *testing.T) {
	if _, err := bedrockbatch.NewRealTime(context.Background(), bedrockbatch.Config{}, "", "InvokeModel"); err == nil || !strings.Contains(err.Error(), "no model") {
		t.Errorf("no model: %v", err)
	}
	if _, err := bedrockbatch.NewRealTime(context.Background(), bedrockbatch.Config{}, "amazon.nova-lite-v1:0", "Converse"); err == nil || !strings.Contains(err.Error(), "Converse") {
		t.Errorf("Converse: %v", err)
	}
}
