package reconcile

import (
	"context"
	"fmt"
	"testing"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// truncCase is one provider's shape of an answer cut at its token limit
// (cut) and of a complete one (whole), for a job of two records.
type truncCase struct {
	name, provider, model string
	input                 func(id string) string
	cut, whole            func(id string) string
}

var truncCases = []truncCase{{
	name: "openai chat finish_reason length", provider: "openai",
	input: func(id string) string {
		return `{"custom_id":"` + id + `","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"q"}]}}`
	},
	cut:   func(id string) string { return openaiChat(id, "length") },
	whole: func(id string) string { return openaiChat(id, "stop") },
}, {
	name: "openai responses status incomplete", provider: "openai",
	input: func(id string) string {
		return `{"custom_id":"` + id + `","method":"POST","url":"/v1/responses","body":{"model":"gpt-4.1","max_output_tokens":16,"input":"q"}}`
	},
	cut: func(id string) string {
		return openaiResponses(id, `"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}`)
	},
	whole: func(id string) string { return openaiResponses(id, `"status":"completed","incomplete_details":null`) },
}, {
	name: "anthropic stop_reason max_tokens", provider: "anthropic",
	input: func(id string) string {
		return `{"custom_id":"` + id + `","params":{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"q"}]}}`
	},
	cut: func(id string) string {
		return `{"custom_id":"` + id + `","result":{"type":"succeeded","message":` + claudeMessage("max_tokens") + `}}`
	},
	whole: func(id string) string {
		return `{"custom_id":"` + id + `","result":{"type":"succeeded","message":` + claudeMessage("end_turn") + `}}`
	},
}, {
	name: "bedrock invoke claude stop_reason max_tokens", provider: "bedrock", model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
	input: bedrockInput,
	cut: func(id string) string {
		return `{"recordId":"` + id + `","modelInput":{},"modelOutput":` + claudeMessage("max_tokens") + `}`
	},
	whole: func(id string) string {
		return `{"recordId":"` + id + `","modelInput":{},"modelOutput":` + claudeMessage("end_turn") + `}`
	},
}, {
	name: "bedrock converse stopReason max_tokens", provider: "bedrock", model: "amazon.nova-lite-v1:0",
	input: bedrockInput,
	cut:   func(id string) string { return bedrockConverse(id, "max_tokens") },
	whole: func(id string) string { return bedrockConverse(id, "end_turn") },
}, {
	name: "gemini finishReason MAX_TOKENS", provider: "gemini", model: "gemini-2.5-flash",
	input: func(id string) string {
		return `{"key":"` + id + `","request":{"contents":[{"parts":[{"text":"q"}]}]}}`
	},
	cut:   func(id string) string { return geminiAnswer(id, "MAX_TOKENS") },
	whole: func(id string) string { return geminiAnswer(id, "STOP") },
}}

func openaiChat(id, finish string) string {
	return `{"id":"b_` + id + `","custom_id":"` + id + `","response":{"status_code":200,"body":{"object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"The answer is"},"finish_reason":"` + finish + `"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}},"error":null}`
}

func openaiResponses(id, status string) string {
	return `{"id":"b_` + id + `","custom_id":"` + id + `","response":{"status_code":200,"body":{"object":"response",` + status + `,"model":"gpt-4.1-2025-04-14","output":[{"type":"message","content":[{"type":"output_text","text":"The answer is"}]}],"usage":{"input_tokens":10,"output_tokens":16}}},"error":null}`
}

func claudeMessage(stop string) string {
	return `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"The answer is"}],"stop_reason":"` + stop + `","usage":{"input_tokens":10,"output_tokens":5}}`
}

func bedrockInput(id string) string {
	return `{"recordId":"` + id + `","modelInput":{"messages":[{"role":"user","content":[{"text":"q"}]}]}}`
}

func bedrockConverse(id, stop string) string {
	return `{"recordId":"` + id + `","modelInput":{},"modelOutput":{"output":{"message":{"role":"assistant","content":[{"text":"The answer is"}]}},"stopReason":"` + stop + `","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15}}}`
}

func geminiAnswer(id, finish string) string {
	return `{"key":"` + id + `","response":{"candidates":[{"content":{"role":"model","parts":[{"text":"The answer is"}]},"finishReason":"` + finish + `"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5},"modelVersion":"gemini-2.5-flash"}}`
}

// TestTruncatedIsQualityFailed: for every provider, an answer cut at its
// token limit is quality_failed with reason truncated and retried, counted in
// the report's truncated key and the records view's truncated column;
// --accept-truncated lets it succeed, still counted as truncated.
func TestTruncatedIsQualityFailed(t *testing.T) {
	t.Parallel()
	for _, c := range truncCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			for _, accept := range []bool{false, true} {
				l, dir := testLake(t)
				ids := []string{"CUT00000001", "WHOLE000002"}
				res, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: c.provider, Model: c.model, TmpDir: dir, Tenant: "t1", PromptVersion: "p1",
					Input: writeLines(t, dir, "input.jsonl", []string{c.input(ids[0]), c.input(ids[1])})})
				if err != nil {
					t.Fatal(err)
				}
				d, _ := lake.ParseDigest(res.JobKey)
				m, err := l.GetManifest(ctx, d)
				if err != nil {
					t.Fatal(err)
				}
				out := writeLines(t, dir, "output.jsonl", []string{c.cut(ids[0]), c.whole(ids[1])})
				if _, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: out, Channel: ingest.ChannelOutput, TmpDir: dir}); err != nil {
					t.Fatal(err)
				}
				rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, AcceptTruncated: accept, Engine: EngineOptions{Threads: 1}})
				if err != nil {
					t.Fatal(err)
				}
				x := &lineageLake{l: l, dir: dir}
				var got []string
				x.query(t, "SELECT o.business_key, o.outcome, o.reason, o.disposition, r.truncated FROM outcomes o JOIN records r USING (record_id) ORDER BY 1", func(v []any) {
					got = append(got, fmt.Sprint(v...))
				})
				want := fmt.Sprint([]string{"CUT00000001quality_failedtruncatedretrytrue", "WHOLE000002succeededacceptedfalse"})
				wantRep := rep.QualityFailed == 1 && rep.Succeeded == 1 && rep.RetryRecords == 1 && rep.State == lake.Partial
				if accept {
					want = fmt.Sprint([]string{"CUT00000001succeededacceptedtrue", "WHOLE000002succeededacceptedfalse"})
					wantRep = rep.QualityFailed == 0 && rep.Succeeded == 2 && rep.RetryRecords == 0 && rep.State == lake.Completed && rep.AcceptTruncated
				}
				if fmt.Sprint(got) != want {
					t.Errorf("accept=%v: outcomes %v, want %v", accept, got, want)
				}
				if !wantRep || rep.Truncated != 1 {
					t.Errorf("accept=%v: report succeeded %d quality_failed %d retry %d state %s truncated %d", accept, rep.Succeeded, rep.QualityFailed, rep.RetryRecords, rep.State, rep.Truncated)
				}
			}
		})
	}
}
