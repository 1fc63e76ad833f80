package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// Anthropic's fast path must agree with encoding/json on every line, as
// OpenAI's does (fastjson_test.go).

// generalAnthropicResult is ParseResult with encoding/json alone.
func generalAnthropicResult(line []byte) (lake.AttemptRow, error) {
	var in anthropicResultLine
	if err := json.Unmarshal(line, &in); err != nil {
		return lake.AttemptRow{}, decodeError(err)
	}
	return anthropicRow(&in)
}

func anthropicResultBoth(t testing.TB, line []byte) {
	t.Helper()
	fast, ferr := anthropicFormat{}.ParseResult(line, ChannelOutput)
	slow, serr := generalAnthropicResult(line)
	if fmt.Sprint(ferr) != fmt.Sprint(serr) || !reflect.DeepEqual(fast, slow) {
		t.Fatalf("ParseResult(%q):\nfast %+v %v\nslow %+v %v", line, fast, ferr, slow, serr)
	}
}

var anthropicResultSeeds = []string{
	`{"custom_id":"a","result":{"type":"succeeded","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"hi \"there\"\n é"},{"type":"tool_use","id":"t","name":"f","input":{"x":[1,2]}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":5,"cache_creation_input_tokens":4,"cache_read_input_tokens":3,"cache_creation":{"ephemeral_5m_input_tokens":1,"ephemeral_1h_input_tokens":3},"server_tool_use":{"web_search_requests":2},"service_tier":"batch"}}}}`,
	` { "custom_id" : "a" , "result" : { "type" : "succeeded" , "message" : { "model" : "m" , "content" : [ ] , "usage" : null } } } `,
	`{"custom_id":"a","result":{"type":"succeeded","message":{"content":null,"usage":{"input_tokens":1,"cache_creation":null,"server_tool_use":null}}}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":{"content":[null]}}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":{"content":[{"type":"text","text":null}]}}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":{"usage":{"input_tokens":1.5}}}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":{"usage":{"input_tokens":-1}}}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":{"usage":{"cache_creation_input_tokens":1,"cache_creation":{"ephemeral_1h_input_tokens":2}}}}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":{"Model":"x","model":"y"}}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":{"model":"x","model":"y"}}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":{"mod\u0065l":"x"}}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":{"models":"x","mode":"y","model":"z"}}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":null}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":"text"}}`,
	`{"custom_id":"a","result":{"type":"errored","error":{"type":"error","error":{"type":"invalid_request_error","message":"bad"},"request_id":"req_1"}}}`,
	`{"custom_id":"a","result":{"type":"errored","error":{"type":"error","error":null}}}`,
	`{"custom_id":"a","result":{"type":"errored","error":{"type":"error","error":{"type":7}}}}`,
	`{"custom_id":"a","result":{"type":"canceled"}}`,
	`{"custom_id":"a","result":{"type":"expired"}}`,
	`{"custom_id":"a","result":{"type":"mystery"}}`,
	`{"custom_id":"a","result":{"type":""}}`,
	`{"custom_id":"a","result":null}`,
	`{"custom_id":"a"}`,
	`{"custom_id":null,"result":{"type":"canceled"}}`,
	`{"custom_id":7,"result":{"type":"canceled"}}`,
	`{"custom_id":"caf\u00e9","result":{"type":"canceled"}}`,
	`{"custom_id":"a","result":{"type":"canceled"}} x`,
	`{"custom_id":"a","result":{"type":"canceled",}}`,
	`{"custom_id":"a","result":{"type":"succeeded","message":{"deep":` + strings.Repeat("[", 250) + strings.Repeat("]", 250) + `}}}`,
	`[1]`, `null`, `{`, ``,
}

// anthropicExamples are the result lines of the providers' documented examples.
func anthropicExamples(t testing.TB) [][]byte {
	data, err := os.ReadFile("testdata/examples/anthropic_results.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(data), []byte{'\n'})
}

func TestAnthropicFastAgrees(t *testing.T) {
	for _, s := range anthropicResultSeeds {
		anthropicResultBoth(t, []byte(s))
	}
	for _, l := range anthropicExamples(t) {
		anthropicResultBoth(t, l)
	}
}

// The fast path must take the documented lines (else it measures nothing).
func TestAnthropicFastTakesExamples(t *testing.T) {
	for _, l := range anthropicExamples(t) {
		var in anthropicResultLine
		if !fastAnthropicLine(l, &in) {
			t.Fatalf("fast path refused %s", l)
		}
	}
}

func TestAnthropicWalkNames(t *testing.T) {
	checkWalkNames(t, [][]string{anthropicLineNames, anthropicResultNames, anthropicMessageNames, anthropicContentNames,
		anthropicUsageNames, anthropicCacheNames, anthropicToolUseNames, anthropicErrorNames, anthropicDetailNames})
}

func FuzzAnthropicResultFast(f *testing.F) {
	for _, s := range anthropicResultSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		anthropicResultBoth(t, line)
	})
}
