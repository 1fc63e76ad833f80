package ingest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

func TestGeminiInput(t *testing.T) {
	line := func(key, req string) string { return `{"key":` + key + `,"request":` + req + `}` }
	const ok = `{"contents":[{"parts":[{"text":"hi"}]}],"generation_config":{"temperature":0.7}}`
	f, _ := FormatFor("gemini")
	base, _ := f.ParseInput([]byte(line(`"k1"`, ok)), "")
	runInputCases(t, "gemini", []inputCase{
		{name: "ok", line: line(`"k1"`, ok), check: func(t *testing.T, r InputRecord) {
			eq(t, "custom id", r.CustomID, "k1")
			eq(t, "model", r.Model, "") // the job's, from plan --model
			eq(t, "endpoint", r.Endpoint, "generateContent")
		}},
		{name: "model in the request", line: line(`"k1"`, `{"model":"models/gemini-2.5-flash","contents":[{"parts":[{"text":"hi"}]}]}`),
			check: func(t *testing.T, r InputRecord) { eq(t, "model", r.Model, "gemini-2.5-flash") }},
		{name: "model not a string", line: line(`"k1"`, `{"model":1,"contents":[{}]}`), field: "request.model"},
		{name: "key missing (Vertex and the docs' REST sample)", line: `{"request":` + ok + `}`, field: "key"},
		{name: "key empty", line: line(`""`, ok), field: "key"},
		{name: "key a number", line: line(`1`, ok), field: "key"},
		{name: "request missing", line: `{"key":"k1"}`, field: "request"},
		{name: "request an array", line: line(`"k1"`, `[]`), field: "request"},
		{name: "contents missing", line: line(`"k1"`, `{"generation_config":{}}`), field: "request.contents"},
		{name: "contents empty", line: line(`"k1"`, `{"contents":[]}`), field: "request.contents"},
		{name: "not JSON", line: `nope`, field: "-"},
		{name: "content is not config", line: line(`"k2"`, `{"contents":[{"parts":[{"text":"bye"}]}],"generation_config":{"temperature":0.7}}`),
			check: func(t *testing.T, r InputRecord) {
				eq(t, "config hash", r.ConfigHash, base.ConfigHash)
				if r.RequestDigest == base.RequestDigest {
					t.Error("request digest ignores the contents")
				}
			}},
		{name: "system instruction is config", line: line(`"k1"`, `{"systemInstruction":{"parts":[{"text":"be brief"}]},"contents":[{"parts":[{"text":"hi"}]}],"generation_config":{"temperature":0.7}}`),
			check: func(t *testing.T, r InputRecord) {
				if r.ConfigHash == base.ConfigHash {
					t.Error("a system instruction does not change the config hash")
				}
			}},
	})
}

func TestGeminiResult(t *testing.T) {
	resp := func(r string) string { return `{"key":"k1","response":` + r + `}` }
	grpc := func(code int) string {
		return `{"key":"k1","error":{"code":` + strconv.Itoa(code) + `,"message":"m"}}`
	}
	errCode := func(code string) func(t *testing.T, r lake.AttemptRow) {
		return func(t *testing.T, r lake.AttemptRow) {
			eq(t, "outcome", r.Outcome, "error")
			eq(t, "code", r.ErrorCode, code)
			eq(t, "status", status(r), -1) // a gRPC code is not an HTTP status
		}
	}
	runResultCases(t, "gemini", []resultCase{
		{name: "gRPC 3", line: grpc(3), want: errCode("INVALID_ARGUMENT")},
		{name: "gRPC 4", line: grpc(4), want: errCode("DEADLINE_EXCEEDED")},
		{name: "gRPC 8", line: grpc(8), want: errCode("RESOURCE_EXHAUSTED")},
		{name: "gRPC 13", line: grpc(13), want: errCode("INTERNAL")},
		{name: "gRPC 14", line: grpc(14), want: errCode("UNAVAILABLE")},
		{name: "gRPC 16", line: grpc(16), want: errCode("UNAUTHENTICATED")},
		{name: "gRPC 17 is not a gRPC code", line: grpc(17), want: errCode("17")},
		{name: "no code, status name", line: `{"key":"k1","error":{"message":"m","status":"UNAVAILABLE"}}`, want: errCode("UNAVAILABLE")},
		{name: "no code, no status", line: `{"key":"k1","error":{"message":"m"}}`, want: errCode("UNKNOWN")},
		{name: "HTTP-style error", line: `{"key":"k1","error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED"}}`,
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "status", status(r), 429)
				eq(t, "code", r.ErrorCode, "RESOURCE_EXHAUSTED")
			}},
		{name: "usage with cache and thoughts", line: resp(`{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP"}],
			"usageMetadata":{"promptTokenCount":4213,"cachedContentTokenCount":4096,"candidatesTokenCount":19,"thoughtsTokenCount":100,"toolUsePromptTokenCount":7},
			"modelVersion":"gemini-2.5-flash","responseId":"r-1"}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "outcome", r.Outcome, "success")
				eq(t, "input", r.InputTokens, 4220)
				eq(t, "cached", r.CachedInputTokens, 4096)
				eq(t, "output", r.OutputTokens, 119)
				eq(t, "reasoning", r.ReasoningTokens, 100)
				eq(t, "model", r.ModelVersion, "gemini-2.5-flash")
				eq(t, "request id", r.ProviderRequestID, "r-1")
				eq(t, "finish", r.FinishReason, "STOP")
				eq(t, "status", status(r), -1)
			}},
		{name: "blocked prompt", line: resp(`{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":9}}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "outcome", r.Outcome, "success")
				eq(t, "has output", r.HasOutput, false)
				eq(t, "finish", r.FinishReason, "PROHIBITED_CONTENT")
			}},
		{name: "safety stop without content", line: resp(`{"candidates":[{"finishReason":"SAFETY"}]}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "has output", r.HasOutput, false)
				eq(t, "finish", r.FinishReason, "SAFETY")
			}},
		{name: "max tokens with text", line: resp(`{"candidates":[{"content":{"parts":[{"text":"trunc"}]},"finishReason":"MAX_TOKENS"}]}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "has output", r.HasOutput, true)
				eq(t, "finish", r.FinishReason, "MAX_TOKENS")
			}},
		{name: "function call only", line: resp(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP"}]}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "has output", r.HasOutput, true)
				eq(t, "tool calls", r.ToolCalls, 1)
			}},
		{name: "thought only is no output", line: resp(`{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true}]},"finishReason":"MAX_TOKENS"}]}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "has output", r.HasOutput, false)
				eq(t, "text", r.OutputText, "")
			}},
		{name: "output in a later candidate", line: resp(`{"candidates":[{"finishReason":"SAFETY"},{"content":{"parts":[{"text":"b"}]},"finishReason":"STOP"}]}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "has output", r.HasOutput, true)
				eq(t, "finish", r.FinishReason, "SAFETY")
			}},
		{name: "cached beyond prompt", line: resp(`{"usageMetadata":{"promptTokenCount":10,"cachedContentTokenCount":11}}`), quarantine: "exceed"},
		{name: "negative", line: resp(`{"usageMetadata":{"candidatesTokenCount":-1}}`), quarantine: "negative"},
		{name: "string count", line: resp(`{"usageMetadata":{"promptTokenCount":"10"}}`), quarantine: "response"},
		{name: "neither response nor error", line: `{"key":"k1"}`, quarantine: "neither"},
		{name: "null response", line: `{"key":"k1","response":null}`, quarantine: "neither"},
		{name: "no key (Vertex output)", line: `{"status":"","response":{}}`, quarantine: "key"},
	})
}

func TestParseGeminiBatchOperation(t *testing.T) {
	f, _ := FormatFor("gemini")
	for _, c := range []struct {
		name, op string
		ok       bool
		check    func(t *testing.T, o *GeminiBatchOutput)
	}{
		{name: "inline with an error and a keyless response", ok: true, op: `{"name":"batches/x","done":true,"metadata":{"state":"BATCH_STATE_SUCCEEDED"},
			"response":{"inlinedResponses":{"inlinedResponses":[
				{"metadata":{"key":"a"},"response":{"candidates":[{"content":{"parts":[{"text":"<1>"}]},"finishReason":"STOP"}]}},
				{"metadata":{"key":"b"},"error":{"code":14,"message":"unavailable"}},
				{"response":{"candidates":[]}}]}}}`,
			check: func(t *testing.T, o *GeminiBatchOutput) {
				eq(t, "state", o.State, "BATCH_STATE_SUCCEEDED")
				eq(t, "lines", len(o.Lines), 3)
				eq(t, "line 1", string(o.Lines[0]), `{"key":"a","response":{"candidates":[{"content":{"parts":[{"text":"<1>"}]},"finishReason":"STOP"}]}}`)
				row, err := f.ParseResult(o.Lines[1], ChannelOutput)
				if err != nil {
					t.Fatal(err)
				}
				eq(t, "line 2 code", row.ErrorCode, "UNAVAILABLE")
				eq(t, "line 2 key", row.CustomID, "b")
				if _, err := f.ParseResult(o.Lines[2], ChannelOutput); err == nil || !strings.Contains(err.Error(), "key") {
					t.Errorf("a keyless inline response is not quarantined: %v", err)
				}
			}},
		{name: "output only in metadata", ok: true, op: `{"name":"batches/y","done":true,"metadata":{"state":"BATCH_STATE_SUCCEEDED",
			"output":{"inlinedResponses":{"inlinedResponses":[{"metadata":{"key":"a"},"response":{}}]}}}}`,
			check: func(t *testing.T, o *GeminiBatchOutput) { eq(t, "lines", len(o.Lines), 1) }},
		{name: "file output", ok: true, op: `{"done":true,"response":{"responsesFile":"files/out-1"}}`,
			check: func(t *testing.T, o *GeminiBatchOutput) { eq(t, "file", o.ResponsesFile, "files/out-1") }},
		{name: "failed batch", ok: true, op: `{"name":"batches/z","done":true,"error":{"code":3,"message":"bad input file"},"metadata":{"state":"BATCH_STATE_FAILED"}}`,
			check: func(t *testing.T, o *GeminiBatchOutput) {
				eq(t, "error", o.Error, "bad input file")
				eq(t, "lines", len(o.Lines), 0)
			}},
		{name: "pending", ok: true, op: `{"name":"batches/p","metadata":{"state":"BATCH_STATE_PENDING"}}`,
			check: func(t *testing.T, o *GeminiBatchOutput) { eq(t, "done", o.Done, false) }},
		{name: "not JSON", op: `{"name":`},
		{name: "wrong shape", op: `{"response":{"inlinedResponses":[]}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := ParseGeminiBatchOperation([]byte(c.op))
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			if c.check != nil && err == nil {
				c.check(t, o)
			}
		})
	}
}
