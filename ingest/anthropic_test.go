package ingest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// inputCase is one input line and the field error it must give ("" = accepted).
type inputCase struct {
	name, line, keyField string
	field                string // field of the expected error; "-" for an error without field
	check                func(t *testing.T, r InputRecord)
}

func runInputCases(t *testing.T, provider string, cases []inputCase) {
	t.Helper()
	f, err := FormatFor(provider)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, ierr := f.ParseInput([]byte(c.line), c.keyField)
			switch {
			case c.field == "" && ierr != nil:
				t.Fatalf("want accepted, got %v", ierr)
			case c.field != "" && ierr == nil:
				t.Fatalf("want an error on field %q, got %+v", c.field, rec)
			case c.field != "" && ierr.Field != strings.TrimPrefix(c.field, "-"):
				t.Fatalf("error on field %q (%s), want field %q", ierr.Field, ierr.Msg, c.field)
			}
			if c.check != nil && ierr == nil {
				c.check(t, rec)
			}
		})
	}
}

// resultCase is one result line and the row it must give (or quarantine).
type resultCase struct {
	name, line string
	quarantine string // substring of the quarantine reason; "" = accepted
	want       func(t *testing.T, r lake.AttemptRow)
}

func runResultCases(t *testing.T, provider string, cases []resultCase) {
	t.Helper()
	f, err := FormatFor(provider)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row, err := f.ParseResult([]byte(c.line), ChannelOutput)
			switch {
			case c.quarantine == "" && err != nil:
				t.Fatalf("want a row, got quarantine: %v", err)
			case c.quarantine != "" && err == nil:
				t.Fatalf("want quarantine (%s), got %+v", c.quarantine, row)
			case c.quarantine != "" && !strings.Contains(err.Error(), c.quarantine):
				t.Fatalf("quarantine reason %q, want it to mention %q", err, c.quarantine)
			}
			if err == nil {
				if ierr := checkRow(row); ierr != nil {
					t.Fatalf("inconsistent row: %v", ierr)
				}
				if c.want != nil {
					c.want(t, row)
				}
			}
		})
	}
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func status(r lake.AttemptRow) int32 {
	if r.StatusCode == nil {
		return -1
	}
	return *r.StatusCode
}

func TestAnthropicInput(t *testing.T) {
	line := func(id, params string) string {
		return `{"custom_id":` + id + `,"params":` + params + `}`
	}
	const ok = `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	f, _ := FormatFor("anthropic")
	base, _ := f.ParseInput([]byte(line(`"r1"`, ok)), "")
	runInputCases(t, "anthropic", []inputCase{
		{name: "ok", line: line(`"r1"`, ok), check: func(t *testing.T, r InputRecord) {
			eq(t, "custom id", r.CustomID, "r1")
			eq(t, "business key", r.BusinessKey, "r1")
			eq(t, "model", r.Model, "claude-sonnet-4-6")
			eq(t, "endpoint", r.Endpoint, "/v1/messages")
		}},
		{name: "id with the whole alphabet", line: line(`"aZ09_-"`, ok)},
		{name: "id of 64", line: line(`"`+strings.Repeat("x", 64)+`"`, ok)},
		{name: "id of 65", line: line(`"`+strings.Repeat("x", 65)+`"`, ok), field: "custom_id"},
		{name: "id with a dot", line: line(`"req.1"`, ok), field: "custom_id"},
		{name: "id with a colon", line: line(`"tenant:1"`, ok), field: "custom_id"},
		{name: "id with a slash", line: line(`"a/b"`, ok), field: "custom_id"},
		{name: "id with a space", line: line(`"a b"`, ok), field: "custom_id"},
		{name: "id non-ascii", line: line(`"café"`, ok), field: "custom_id"},
		{name: "id empty", line: line(`""`, ok), field: "custom_id"},
		{name: "id a number", line: line(`7`, ok), field: "custom_id"},
		{name: "id missing", line: `{"params":` + ok + `}`, field: "custom_id"},
		{name: "params missing", line: `{"custom_id":"r1"}`, field: "params"},
		{name: "params an array", line: line(`"r1"`, `[]`), field: "params"},
		{name: "model missing", line: line(`"r1"`, `{"max_tokens":1,"messages":[{}]}`), field: "params.model"},
		{name: "model a number", line: line(`"r1"`, `{"model":3,"max_tokens":1,"messages":[{}]}`), field: "params.model"},
		{name: "max_tokens missing", line: line(`"r1"`, `{"model":"m","messages":[{}]}`), field: "params.max_tokens"},
		{name: "max_tokens zero (cache pre-warming)", line: line(`"r1"`, `{"model":"m","max_tokens":0,"messages":[{}]}`), field: "params.max_tokens"},
		{name: "max_tokens fractional", line: line(`"r1"`, `{"model":"m","max_tokens":1.5,"messages":[{}]}`), field: "params.max_tokens"},
		{name: "stream true", line: line(`"r1"`, `{"model":"m","max_tokens":1,"stream":true,"messages":[{}]}`), field: "params.stream"},
		{name: "stream false", line: line(`"r1"`, `{"model":"m","max_tokens":1,"stream":false,"messages":[{}]}`)},
		{name: "messages missing", line: line(`"r1"`, `{"model":"m","max_tokens":1}`), field: "params.messages"},
		{name: "messages empty", line: line(`"r1"`, `{"model":"m","max_tokens":1,"messages":[]}`), field: "params.messages"},
		{name: "not JSON", line: `{"custom_id":`, field: "-"},
		{name: "not an object", line: `[1]`, field: "-"},
		{name: "keys match exactly", line: `{"Custom_ID":"r1","params":` + ok + `}`, field: "custom_id"},
		{name: "business key from a field", keyField: "params.metadata.user_id",
			line:  line(`"r1"`, `{"model":"m","max_tokens":1,"metadata":{"user_id":"u-9"},"messages":[{}]}`),
			check: func(t *testing.T, r InputRecord) { eq(t, "business key", r.BusinessKey, "u-9") }},
		{name: "other content, same config", line: line(`"r1"`, `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"bye"}]}`),
			check: func(t *testing.T, r InputRecord) {
				eq(t, "config hash", r.ConfigHash, base.ConfigHash)
				if r.RequestDigest == base.RequestDigest {
					t.Error("request digest ignores the messages")
				}
			}},
		{name: "system prompt is config", line: line(`"r1"`, `{"model":"claude-sonnet-4-6","system":"be brief","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`),
			check: func(t *testing.T, r InputRecord) {
				if r.ConfigHash == base.ConfigHash {
					t.Error("a system prompt does not change the config hash")
				}
			}},
		{name: "key order is not config", line: line(`"r1"`, `{"max_tokens":64,"messages":[{"role":"user","content":"hi"}],"model":"claude-sonnet-4-6"}`),
			check: func(t *testing.T, r InputRecord) { eq(t, "config hash", r.ConfigHash, base.ConfigHash) }},
	})
}

func TestAnthropicWithCustomID(t *testing.T) {
	f, _ := FormatFor("anthropic")
	line := []byte(`{"custom_id":"r1","params":{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"<a&b>"}]}}`)
	out, err := f.WithCustomID(line, RetryCustomID(3, strings.Repeat("f", 64)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"custom_id":"a3_`) || !strings.Contains(string(out), "<a&b>") {
		t.Errorf("got %s", out)
	}
	if _, err := f.WithCustomID(line, "a.b"); err == nil {
		t.Error("an id outside Anthropic's alphabet was accepted")
	}
}

func TestAnthropicResult(t *testing.T) {
	succeeded := func(msg string) string {
		return `{"custom_id":"r1","result":{"type":"succeeded","message":` + msg + `}}`
	}
	errored := func(e string) string {
		return `{"custom_id":"r1","result":{"type":"errored","error":` + e + `}}`
	}
	runResultCases(t, "anthropic", []resultCase{
		{name: "cache read and write normalised", line: succeeded(`{"id":"msg_1","model":"claude-sonnet-4-6","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn",
			"usage":{"input_tokens":21,"cache_creation_input_tokens":100,"cache_read_input_tokens":50,"output_tokens":7}}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "outcome", r.Outcome, "success")
				eq(t, "input", r.InputTokens, 171)
				eq(t, "cached", r.CachedInputTokens, 50)
				eq(t, "cache write", r.CacheWriteTokens, 100)
				eq(t, "output", r.OutputTokens, 7)
				eq(t, "model", r.ModelVersion, "claude-sonnet-4-6")
				eq(t, "finish", r.FinishReason, "end_turn")
				eq(t, "request id", r.ProviderRequestID, "msg_1")
				eq(t, "text", r.OutputText, "ok")
				eq(t, "has output", r.HasOutput, true)
				eq(t, "status", status(r), -1)
			}},
		{name: "tool use only", line: succeeded(`{"content":[{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"tool_use"}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "has output", r.HasOutput, true)
				eq(t, "tool calls", r.ToolCalls, 1)
			}},
		{name: "thinking only is no output", line: succeeded(`{"content":[{"type":"thinking","thinking":"hmm"}],"stop_reason":"max_tokens"}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "has output", r.HasOutput, false)
				eq(t, "finish", r.FinishReason, "max_tokens")
			}},
		{name: "refusal", line: succeeded(`{"content":[],"stop_reason":"refusal"}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "has output", r.HasOutput, false)
				eq(t, "finish", r.FinishReason, "refusal")
			}},
		{name: "errored, double nested", line: errored(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_9"}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "outcome", r.Outcome, "error")
				eq(t, "code", r.ErrorCode, "overloaded_error")
				eq(t, "type", r.ErrorType, "overloaded_error")
				eq(t, "message", r.ErrorMessage, "Overloaded")
				eq(t, "request id", r.ProviderRequestID, "req_9")
			}},
		{name: "errored, only the outer type", line: errored(`{"type":"error","message":"x"}`), quarantine: "result.error.error.type"},
		{name: "errored, no error", line: `{"custom_id":"r1","result":{"type":"errored"}}`, quarantine: "result.error.error.type"},
		{name: "canceled", line: `{"custom_id":"r1","result":{"type":"canceled"}}`,
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "outcome", r.Outcome, "error")
				eq(t, "code", r.ErrorCode, "canceled")
			}},
		{name: "expired", line: `{"custom_id":"r1","result":{"type":"expired"}}`,
			want: func(t *testing.T, r lake.AttemptRow) { eq(t, "code", r.ErrorCode, "expired") }},
		{name: "unknown type", line: `{"custom_id":"r1","result":{"type":"paused"}}`, quarantine: "unknown result type"},
		{name: "no type", line: `{"custom_id":"r1","result":{}}`, quarantine: "result.type"},
		{name: "no result", line: `{"custom_id":"r1"}`, quarantine: "field result"},
		{name: "no custom id", line: `{"result":{"type":"expired"}}`, quarantine: "custom_id"},
		{name: "succeeded without message", line: `{"custom_id":"r1","result":{"type":"succeeded"}}`, quarantine: "result.message"},
		{name: "negative tokens", line: succeeded(`{"content":[],"usage":{"input_tokens":-1,"output_tokens":1}}`), quarantine: "negative"},
		{name: "overflowing tokens", line: succeeded(`{"content":[],"usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":1}}`), quarantine: "overflow"},
		{name: "not JSON", line: `{"custom_id":"r1",`, quarantine: "not valid JSON"},
	})
}

// checkRow is the self-consistency every accepted result row must have (the
// fuzzers check it too).
func checkRow(r lake.AttemptRow) error {
	if r.Outcome != "success" && r.Outcome != "error" {
		return fmt.Errorf("outcome %q", r.Outcome)
	}
	if r.CustomID == "" {
		return fmt.Errorf("empty custom id")
	}
	if r.Outcome == "success" && r.StatusCode != nil && (*r.StatusCode < 200 || *r.StatusCode > 299) {
		return fmt.Errorf("success with status %d", *r.StatusCode)
	}
	if err := checkUsage(&r); err != nil {
		return err
	}
	if r.ToolCalls < 0 {
		return fmt.Errorf("negative tool calls")
	}
	if r.Outcome == "success" && r.OutputText != "" && !r.HasOutput {
		return fmt.Errorf("output text without has_output")
	}
	return nil
}
