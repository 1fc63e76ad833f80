package ingest

import (
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

func TestBedrockInput(t *testing.T) {
	line := func(body string) string { return `{"recordId":"rec-1","modelInput":` + body + `}` }
	const claude = `{"anthropic_version":"bedrock-2023-05-31","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`
	const converse = `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"inferenceConfig":{"maxTokens":16}}`
	endpoint := func(want string) func(t *testing.T, r InputRecord) {
		return func(t *testing.T, r InputRecord) {
			eq(t, "endpoint", r.Endpoint, want)
			eq(t, "model", r.Model, "") // the job's, from plan --model
		}
	}
	runInputCases(t, "bedrock", []inputCase{
		{name: "InvokeModel, Claude", line: line(claude), check: endpoint(BedrockInvokeModel)},
		{name: "InvokeModel, Titan", line: line(`{"inputText":"Roses are red"}`), check: endpoint(BedrockInvokeModel)},
		{name: "InvokeModel, Llama", line: line(`{"prompt":"hi","max_gen_len":16}`), check: endpoint(BedrockInvokeModel)},
		{name: "InvokeModel, Nova", line: line(`{"schemaVersion":"messages-v1","messages":[{"role":"user","content":[{"text":"hi"}]}]}`), check: endpoint(BedrockInvokeModel)},
		{name: "InvokeModel, typed blocks", line: line(`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`), check: endpoint(BedrockInvokeModel)},
		{name: "Converse", line: line(converse), check: endpoint(BedrockConverse)},
		{name: "Converse with toolConfig", line: line(`{"messages":[{"role":"user","content":"hi"}],"toolConfig":{"tools":[]}}`), check: endpoint(BedrockConverse)},
		{name: "Converse, system is config", line: line(`{"system":[{"text":"one word"}],"messages":[{"role":"user","content":[{"text":"hi"}]}],"inferenceConfig":{"maxTokens":16}}`),
			check: func(t *testing.T, r InputRecord) {
				f, _ := FormatFor("bedrock")
				plain, _ := f.ParseInput([]byte(line(converse)), "")
				if r.ConfigHash == plain.ConfigHash {
					t.Error("the system prompt does not change the config hash")
				}
			}},
		{name: "Converse, content is not config", line: line(`{"messages":[{"role":"user","content":[{"text":"bye"}]}],"inferenceConfig":{"maxTokens":16}}`),
			check: func(t *testing.T, r InputRecord) {
				f, _ := FormatFor("bedrock")
				plain, _ := f.ParseInput([]byte(line(converse)), "")
				eq(t, "config hash", r.ConfigHash, plain.ConfigHash)
			}},
		{name: "modelId inside modelInput", line: line(`{"modelId":"anthropic.claude-3-haiku-20240307-v1:0","messages":[]}`), field: "modelInput.modelId"},
		{name: "recordId missing", line: `{"modelInput":` + claude + `}`, field: "recordId"},
		{name: "recordId null", line: `{"recordId":null,"modelInput":` + claude + `}`, field: "recordId"},
		{name: "recordId a number", line: `{"recordId":11,"modelInput":` + claude + `}`, field: "recordId"},
		{name: "recordId with a control character", line: `{"recordId":"a\u0001","modelInput":` + claude + `}`, field: "recordId"},
		{name: "modelInput missing", line: `{"recordId":"rec-1"}`, field: "modelInput"},
		{name: "modelInput a string", line: line(`"hi"`), field: "modelInput"},
		{name: "not JSON", line: `{`, field: "-"},
		{name: "keys match exactly", line: `{"recordId":"rec-1","modelInput":` + claude + `,"MODELINPUT":{"modelId":"x"}}`},
		{name: "null", line: `null`, field: "-"},
		{name: "business key from a field", keyField: "modelInput.metadata.id", line: line(`{"inputText":"x","metadata":{"id":42}}`),
			check: func(t *testing.T, r InputRecord) { eq(t, "business key", r.BusinessKey, "42") }},
	})
}

func TestBedrockResult(t *testing.T) {
	out := func(o string) string {
		return `{"recordId":"rec-1","modelInput":{"messages":[{"role":"user","content":[{"text":"hi"}]}]},"modelOutput":` + o + `}`
	}
	failed := func(e string) string {
		return `{"recordId":"rec-1","modelInput":{"inputText":"x"},"error":` + e + `}`
	}
	runResultCases(t, "bedrock", []resultCase{
		{name: "numeric errorCode 429", line: failed(`{"errorCode":429,"errorMessage":"Too many requests"}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "outcome", r.Outcome, "error")
				eq(t, "status", status(r), 429)
				eq(t, "code", r.ErrorCode, "")
				eq(t, "message", r.ErrorMessage, "Too many requests")
			}},
		{name: "numeric errorCode 400", line: failed(`{"errorCode":400,"errorMessage":"bad request"}`),
			want: func(t *testing.T, r lake.AttemptRow) { eq(t, "status", status(r), 400) }},
		{name: "errorCode 503 as a string", line: failed(`{"errorCode":"503","errorMessage":"x"}`),
			want: func(t *testing.T, r lake.AttemptRow) { eq(t, "status", status(r), 503) }},
		{name: "errorCode not HTTP-like", line: failed(`{"errorCode":1000,"errorMessage":"x"}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "status", status(r), -1)
				eq(t, "code", r.ErrorCode, "1000")
			}},
		{name: "errorCode a name", line: failed(`{"errorCode":"ThrottlingException","errorMessage":"x"}`),
			want: func(t *testing.T, r lake.AttemptRow) { eq(t, "code", r.ErrorCode, "ThrottlingException") }},
		{name: "errorCode fractional", line: failed(`{"errorCode":429.5}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "status", status(r), -1)
				eq(t, "code", r.ErrorCode, "429.5")
			}},
		{name: "error wins over modelOutput", line: `{"recordId":"rec-1","modelOutput":{"results":[]},"error":{"errorCode":500}}`,
			want: func(t *testing.T, r lake.AttemptRow) { eq(t, "outcome", r.Outcome, "error") }},
		{name: "Converse, cache excluded from inputTokens", line: out(`{"output":{"message":{"role":"assistant","content":[{"text":"Positive"}]}},"stopReason":"end_turn",
			"usage":{"inputTokens":4,"outputTokens":97,"totalTokens":1210,"cacheReadInputTokens":0,"cacheWriteInputTokens":1109}}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "outcome", r.Outcome, "success")
				eq(t, "input", r.InputTokens, 1113)
				eq(t, "cache write", r.CacheWriteTokens, 1109)
				eq(t, "cached", r.CachedInputTokens, 0)
				eq(t, "output", r.OutputTokens, 97)
				eq(t, "model", r.ModelVersion, "") // Converse names none: ingest fills the job's
				eq(t, "finish", r.FinishReason, "end_turn")
				eq(t, "text", r.OutputText, "Positive")
			}},
		{name: "Converse, cache writes by lifetime", line: out(`{"output":{"message":{"content":[{"text":"x"}]}},"stopReason":"end_turn",
			"usage":{"inputTokens":100,"outputTokens":300,"totalTokens":12400,"cacheReadInputTokens":0,"cacheWriteInputTokens":12000,
			"cacheDetails":[{"ttl":"1h","inputTokens":10000},{"ttl":"5m","inputTokens":2000}]}}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "input", r.InputTokens, 12100)
				eq(t, "cache write", r.CacheWriteTokens, 12000)
				eq(t, "1h cache write", r.CacheWrite1hTokens, 10000)
			}},
		{name: "Converse, 1h writes above the writes", line: out(`{"output":{"message":{"content":[{"text":"x"}]}},
			"usage":{"inputTokens":100,"outputTokens":3,"cacheWriteInputTokens":10,"cacheDetails":[{"ttl":"1h","inputTokens":11}]}}`),
			quarantine: "1h cache write tokens 11 exceed cache write tokens 10"},
		{name: "Converse, cache read without totalTokens", line: out(`{"output":{"message":{"content":[{"text":"x"}]}},"usage":{"inputTokens":10,"outputTokens":1,"cacheReadInputTokens":900}}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "input", r.InputTokens, 910)
				eq(t, "cached", r.CachedInputTokens, 900)
			}},
		{name: "Converse, totalTokens says cache included", line: out(`{"output":{"message":{"content":[{"text":"x"}]}},"usage":{"inputTokens":1200,"outputTokens":10,"totalTokens":1210,"cacheReadInputTokens":1000}}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "input", r.InputTokens, 1200)
				eq(t, "cached", r.CachedInputTokens, 1000)
			}},
		{name: "Converse, tool use", line: out(`{"output":{"message":{"content":[{"toolUse":{"toolUseId":"t","name":"f","input":{}}}]}},"stopReason":"tool_use"}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "tool calls", r.ToolCalls, 1)
				eq(t, "has output", r.HasOutput, true)
			}},
		{name: "Converse, empty", line: out(`{"output":{"message":{"content":[]}},"stopReason":"max_tokens","usage":{"inputTokens":3,"outputTokens":0}}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "has output", r.HasOutput, false)
				eq(t, "finish", r.FinishReason, "max_tokens")
			}},
		{name: "InvokeModel Claude with cache", line: out(`{"id":"msg_1","type":"message","model":"claude-3-haiku-20240307","content":[{"type":"text","text":"x"}],"stop_reason":"end_turn",
			"usage":{"input_tokens":12,"output_tokens":3,"cache_read_input_tokens":2000,"cache_creation_input_tokens":30}}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "input", r.InputTokens, 2042)
				eq(t, "cached", r.CachedInputTokens, 2000)
				eq(t, "cache write", r.CacheWriteTokens, 30)
				eq(t, "model", r.ModelVersion, "claude-3-haiku-20240307")
				eq(t, "request id", r.ProviderRequestID, "msg_1")
			}},
		{name: "Titan text", line: out(`{"inputTextTokenCount":8,"results":[{"tokenCount":3,"outputText":"blue\n","completionReason":"FINISH"}]}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "input", r.InputTokens, 8)
				eq(t, "output", r.OutputTokens, 3)
				eq(t, "finish", r.FinishReason, "FINISH")
			}},
		{name: "Titan embedding", line: out(`{"embedding":[0.1,0.2],"inputTextTokenCount":4}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "has output", r.HasOutput, true)
				eq(t, "input", r.InputTokens, 4)
			}},
		{name: "Llama", line: out(`{"generation":"hello","prompt_token_count":5,"generation_token_count":2,"stop_reason":"length"}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "text", r.OutputText, "hello")
				eq(t, "finish", r.FinishReason, "length")
				eq(t, "input", r.InputTokens, 5)
			}},
		{name: "Mistral", line: out(`{"outputs":[{"text":"hi","stop_reason":"stop"}]}`),
			want: func(t *testing.T, r lake.AttemptRow) { eq(t, "finish", r.FinishReason, "stop") }},
		{name: "unknown shape is a success", line: out(`{"something":"new"}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				eq(t, "outcome", r.Outcome, "success")
				eq(t, "has output", r.HasOutput, true)
			}},
		{name: "empty modelOutput object", line: out(`{}`),
			want: func(t *testing.T, r lake.AttemptRow) { eq(t, "has output", r.HasOutput, false) }},
		{name: "modelOutput a string", line: out(`"text"`), quarantine: "modelOutput"},
		{name: "cache beyond input", line: out(`{"output":{"message":{"content":[]}},"usage":{"inputTokens":1200,"outputTokens":10,"totalTokens":1210,"cacheReadInputTokens":5000}}`),
			want: func(t *testing.T, r lake.AttemptRow) { eq(t, "input", r.InputTokens, 6200) }},
		{name: "negative tokens", line: out(`{"output":{"message":{"content":[]}},"usage":{"inputTokens":-3}}`), quarantine: "negative"},
		{name: "neither output nor error", line: `{"recordId":"rec-1","modelInput":{}}`, quarantine: "neither"},
		{name: "recordId missing", line: `{"modelOutput":{}}`, quarantine: "recordId"},
		{name: "modelInput not stored", line: out(`{"results":[{"outputText":"x"}]}`),
			want: func(t *testing.T, r lake.AttemptRow) {
				if strings.Contains(r.OutputText+r.ErrorMessage, "hi") {
					t.Error("the echoed modelInput leaked into the row")
				}
			}},
	})
}

func TestBedrockManifest(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	full := &BedrockManifest{TotalRecordCount: n(10), ProcessedRecordCount: n(9), SuccessRecordCount: n(8), ErrorRecordCount: n(1),
		InputTokenCount: n(1000), OutputTokenCount: n(50)}
	agree := BedrockTally{Expected: 10, Success: 8, Error: 1, InputTokens: 1000, OutputTokens: 50}
	for _, c := range []struct {
		name  string
		m     *BedrockManifest
		tally BedrockTally
		want  []string // fields that differ
	}{
		{"agree", full, agree, nil},
		{"expected unknown", full, BedrockTally{Success: 8, Error: 1, InputTokens: 1000, OutputTokens: 50}, nil},
		{"a success line missing", full, BedrockTally{Expected: 10, Success: 7, Error: 1, InputTokens: 1000, OutputTokens: 50},
			[]string{"processedRecordCount", "successRecordCount"}},
		{"input tokens without cache agree", full, BedrockTally{Expected: 10, Success: 8, Error: 1, InputTokens: 1300, CachedInputTokens: 200, CacheWriteTokens: 100, OutputTokens: 50}, nil},
		{"input tokens with cache agree", full, BedrockTally{Expected: 10, Success: 8, Error: 1, InputTokens: 1000, CachedInputTokens: 200, OutputTokens: 50}, nil},
		{"tokens differ", full, BedrockTally{Expected: 10, Success: 8, Error: 1, InputTokens: 999, OutputTokens: 51}, []string{"inputTokenCount", "outputTokenCount"}},
		{"total differs from expected", full, BedrockTally{Expected: 12, Success: 8, Error: 1, InputTokens: 1000, OutputTokens: 50}, []string{"totalRecordCount"}},
		{"absent fields are not compared", &BedrockManifest{SuccessRecordCount: n(8)}, BedrockTally{Expected: 99, Success: 8, Error: 5}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, d := range c.m.Check(c.tally) {
				got = append(got, d.Field)
				if d.String() == "" {
					t.Error("empty description")
				}
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("differences %v, want %v", got, c.want)
			}
		})
	}
}

func TestParseBedrockManifest(t *testing.T) {
	for _, c := range []struct {
		name, in string
		ok       bool
	}{
		{"example", `{ "totalRecordCount" : 1000, "processedRecordCount" : 1000, "successRecordCount": 998, "errorRecordCount": 2, "inputTokenCount": 812345, "outputTokenCount" : 96012 }`, true},
		{"partial", `{"successRecordCount": 3}`, true},
		{"unknown fields", `{"successRecordCount": 3, "cacheTokens": 7}`, true},
		{"negative", `{"successRecordCount": -3}`, false},
		{"string count", `{"successRecordCount": "3"}`, false},
		{"array", `[]`, false},
		{"null", `null`, false},
		{"truncated", `{"successRecordCount": 3`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseBedrockManifest([]byte(c.in))
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			if c.ok && m == nil {
				t.Fatal("nil manifest")
			}
		})
	}
}

func TestBedrockTallyFromRows(t *testing.T) {
	var tally BedrockTally
	for _, r := range []lake.AttemptRow{
		{Outcome: "success", InputTokens: 10, CachedInputTokens: 4, OutputTokens: 2},
		{Outcome: "error"},
		{Outcome: "success", InputTokens: 5, CacheWriteTokens: 5, OutputTokens: 1},
	} {
		tally.Add(r)
	}
	want := BedrockTally{Success: 2, Error: 1, InputTokens: 15, CachedInputTokens: 4, CacheWriteTokens: 5, OutputTokens: 3}
	if tally != want {
		t.Errorf("tally %+v, want %+v", tally, want)
	}
}
