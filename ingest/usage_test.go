package ingest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// usageLine renders one success line of provider with usage in the
// provider's own usage object.
func usageLine(provider, usage string) string {
	switch provider {
	case "openai":
		return `{"id":"b1","custom_id":"r1","response":{"status_code":200,"request_id":"q1","body":{"object":"chat.completion","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":` + usage + `}},"error":null}`
	case "anthropic":
		return `{"custom_id":"r1","result":{"type":"succeeded","message":{"id":"msg_1","type":"message","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":` + usage + `}}}`
	case "bedrock":
		return `{"recordId":"r1","modelInput":{},"modelOutput":{"id":"msg_1","type":"message","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":` + usage + `}}`
	case "gemini":
		return `{"key":"r1","response":{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":` + usage + `,"modelVersion":"gemini-2.5-flash"}}`
	}
	panic(provider)
}

// TestUntrustedUsage: every provider's parser refuses token counts that are
// negative, not integers, above MaxLineTokens or inconsistent, so ingest
// quarantines the line with the reason instead of storing a count reconcile
// cannot price (DECIMAL(18, 0) overflow) or prices negative.
func TestUntrustedUsage(t *testing.T) {
	huge := "5000000000000000000"
	over := fmt.Sprint(MaxLineTokens + 1)
	for _, c := range []struct {
		provider, name, usage string
		why                   string // "" accepted; else in the error
	}{
		{"openai", "good", `{"prompt_tokens":100,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":50}}`, ""},
		{"openai", "at the ceiling", `{"prompt_tokens":1000000000,"completion_tokens":1000000000}`, ""},
		{"openai", "5e18 prompt tokens", `{"prompt_tokens":` + huge + `,"completion_tokens":1}`, "ceiling"},
		{"openai", "one over the ceiling", `{"prompt_tokens":` + over + `,"completion_tokens":1}`, "ceiling"},
		{"openai", "negative completion", `{"prompt_tokens":10,"completion_tokens":-1}`, "negative"},
		{"openai", "not an integer", `{"prompt_tokens":10.5,"completion_tokens":1}`, "prompt_tokens"},
		{"openai", "cache writes above the prompt", `{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cache_write_tokens":20}}`, "exceed input"},
		{"openai", "cached above the prompt (Responses)", `{"input_tokens":10,"output_tokens":1,"input_tokens_details":{"cached_tokens":11}}`, "exceed input"},
		{"openai", "reasoning above the output", `{"prompt_tokens":10,"completion_tokens":1,"completion_tokens_details":{"reasoning_tokens":2}}`, "reasoning"},
		{"openai", "prompt and input tokens overflow together", `{"prompt_tokens":9000000000000000000,"input_tokens":9000000000000000000}`, "overflow"},
		{"anthropic", "good", `{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":40,"cache_creation":{"ephemeral_5m_input_tokens":30,"ephemeral_1h_input_tokens":10}}`, ""},
		{"anthropic", "5e18 input tokens", `{"input_tokens":` + huge + `,"output_tokens":1}`, "ceiling"},
		{"anthropic", "sum over the ceiling", `{"input_tokens":600000000,"output_tokens":1,"cache_read_input_tokens":600000000}`, "ceiling"},
		{"anthropic", "negative output", `{"input_tokens":10,"output_tokens":-3}`, "negative"},
		{"anthropic", "not an integer", `{"input_tokens":1.5,"output_tokens":1}`, "input_tokens"},
		{"anthropic", "cache split above the writes", `{"input_tokens":10,"output_tokens":1,"cache_creation_input_tokens":5,"cache_creation":{"ephemeral_5m_input_tokens":5,"ephemeral_1h_input_tokens":1}}`, "exceed cache_creation_input_tokens"},
		{"bedrock", "good", `{"input_tokens":10,"output_tokens":5}`, ""},
		{"bedrock", "5e18 output tokens", `{"input_tokens":10,"output_tokens":` + huge + `}`, "ceiling"},
		{"bedrock", "negative cache read", `{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":-20}`, "negative"},
		{"bedrock", "not an integer", `{"input_tokens":10,"output_tokens":2e3}`, "output_tokens"},
		{"bedrock", "cache split above the writes", `{"input_tokens":10,"output_tokens":1,"cache_creation_input_tokens":0,"cache_creation":{"ephemeral_1h_input_tokens":7}}`, "exceed cache_creation_input_tokens"},
		{"gemini", "good", `{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":5,"thoughtsTokenCount":7}`, ""},
		{"gemini", "5e18 prompt tokens", `{"promptTokenCount":` + huge + `,"candidatesTokenCount":1}`, "ceiling"},
		{"gemini", "negative thoughts", `{"promptTokenCount":10,"candidatesTokenCount":1,"thoughtsTokenCount":-1}`, "negative"},
		{"gemini", "not an integer", `{"promptTokenCount":10,"candidatesTokenCount":0.5}`, "candidatesTokenCount"},
		{"gemini", "cached above the prompt", `{"promptTokenCount":10,"cachedContentTokenCount":11,"candidatesTokenCount":1}`, "exceed input"},
	} {
		t.Run(c.provider+"/"+c.name, func(t *testing.T) {
			f, err := FormatFor(c.provider)
			if err != nil {
				t.Fatal(err)
			}
			// OpenAI's lines are read by a fast path with encoding/json
			// behind it: both must check the usage.
			parsers := map[string]func([]byte) (lake.AttemptRow, error){
				"ParseResult": func(l []byte) (lake.AttemptRow, error) { return f.ParseResult(l, ChannelOutput) },
			}
			if c.provider == "openai" {
				parsers["generalParseResult"] = generalParseResult
			}
			for name, parse := range parsers {
				row, err := parse([]byte(usageLine(c.provider, c.usage)))
				switch {
				case c.why == "" && err != nil:
					t.Fatalf("%s: refused a good line: %v", name, err)
				case c.why == "" && row.InputTokens == 0:
					t.Fatalf("%s: read no usage: %+v", name, row)
				case c.why != "" && err == nil:
					t.Fatalf("%s: accepted %s: %+v", name, c.usage, row)
				case c.why != "" && !strings.Contains(err.Error(), c.why):
					t.Fatalf("%s: error %q does not say %q", name, err, c.why)
				}
			}
		})
	}
}
