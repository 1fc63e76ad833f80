package reconcile

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// TestProviderCostsShippedTable prices one worked line per provider with the
// shipped price table: the golden costs below are worked by hand in
// docs/costs.md, and recomputed here from the formula with exact rationals.
// The Bedrock job is Claude Sonnet 4.5 planned through the us. inference
// profile: its output names the model as claude-sonnet-4-5-20250929, which no
// Bedrock row matches, so it is priced by the job's model id.
func TestProviderCostsShippedTable(t *testing.T) {
	t.Parallel()
	r := func(s string) *big.Rat { v, _ := new(big.Rat).SetString(s); return v }
	// formula: (uncached·in + write5m·cw + write1h·cw1h)·mult + cached·cachedPrice·cachedMult + out·outPrice·mult, per Mtok.
	formula := func(uncached, w5, w1, cached, out int64, in, cw, cw1, cp, op, mult, cmult string) string {
		c := new(big.Rat).Mul(big.NewRat(uncached, 1), r(in))
		c.Add(c, new(big.Rat).Mul(big.NewRat(w5, 1), r(cw)))
		c.Add(c, new(big.Rat).Mul(big.NewRat(w1, 1), r(cw1)))
		c.Add(c, new(big.Rat).Mul(big.NewRat(out, 1), r(op)))
		c.Mul(c, r(mult))
		c.Add(c, new(big.Rat).Mul(new(big.Rat).Mul(big.NewRat(cached, 1), r(cp)), r(cmult)))
		return trimDecimal(c.Quo(c, big.NewRat(1_000_000, 1)).FloatString(18))
	}
	for _, c := range []struct {
		name, provider, model string
		input, output         string
		priceModel            string
		golden, recomputed    string
		web                   int64
	}{{
		name: "openai gpt-5-mini with cached input and reasoning", provider: "openai",
		input:      `{"custom_id":"R0000000001","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-5-mini","messages":[{"role":"user","content":"q"}]}}`,
		output:     `{"id":"b1","custom_id":"R0000000001","response":{"status_code":200,"body":{"object":"chat.completion","model":"gpt-5-mini-2025-08-07","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2000,"completion_tokens":500,"prompt_tokens_details":{"cached_tokens":1000},"completion_tokens_details":{"reasoning_tokens":200}}}},"error":null}`,
		priceModel: "gpt-5-mini", golden: "0.0006375",
		recomputed: formula(1000, 0, 0, 1000, 500, "0.25", "0.25", "0.25", "0.025", "2.00", "0.5", "0.5"),
	}, {
		name: "anthropic claude-sonnet-4-5 with 5m and 1h cache writes", provider: "anthropic",
		input:      `{"custom_id":"R0000000001","params":{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"q"}]}}`,
		output:     `{"custom_id":"R0000000001","result":{"type":"succeeded","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"a"}],"stop_reason":"end_turn","usage":{"input_tokens":100,"cache_read_input_tokens":2000,"cache_creation_input_tokens":1500,"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":500},"output_tokens":300,"server_tool_use":{"web_search_requests":2}}}}}`,
		priceModel: "claude-sonnet-4-5", golden: "0.006075", web: 2,
		recomputed: formula(100, 1000, 500, 2000, 300, "3.00", "3.75", "6.00", "0.30", "15.00", "0.5", "0.5"),
	}, {
		name: "bedrock us.anthropic.claude-sonnet-4-5 priced by the job's model id", provider: "bedrock", model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
		input:      `{"recordId":"R0000000001","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":512,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}]}}`,
		output:     `{"recordId":"R0000000001","modelInput":{},"modelOutput":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"a"}],"stop_reason":"end_turn","usage":{"input_tokens":1000,"output_tokens":200}}}`,
		priceModel: "us.anthropic.claude-sonnet-4-5", golden: "0.0033",
		recomputed: formula(1000, 0, 0, 0, 200, "3.30", "4.125", "6.60", "0.33", "16.50", "0.5", "0.5"),
	}, {
		name: "bedrock global. profile, Converse output, priced by the base model", provider: "bedrock", model: "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
		input:      `{"recordId":"R0000000001","modelInput":{"messages":[{"role":"user","content":[{"text":"q"}]}]}}`,
		output:     `{"recordId":"R0000000001","modelInput":{},"modelOutput":{"output":{"message":{"role":"assistant","content":[{"text":"a"}]}},"stopReason":"end_turn","usage":{"inputTokens":1000,"outputTokens":200,"totalTokens":1200}}}`,
		priceModel: "anthropic.claude-sonnet-4-5", golden: "0.003",
		recomputed: formula(1000, 0, 0, 0, 200, "3.00", "3.75", "6.00", "0.30", "15.00", "0.5", "0.5"),
	}, {
		name: "gemini-2.5-flash with cached tokens and thoughts", provider: "gemini", model: "gemini-2.5-flash",
		input:      `{"key":"R0000000001","request":{"contents":[{"parts":[{"text":"q"}]}]}}`,
		output:     `{"key":"R0000000001","response":{"candidates":[{"content":{"role":"model","parts":[{"text":"a"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10000,"cachedContentTokenCount":8000,"candidatesTokenCount":300,"thoughtsTokenCount":700},"modelVersion":"gemini-2.5-flash"}}`,
		priceModel: "gemini-2.5-flash", golden: "0.00179",
		recomputed: formula(2000, 0, 0, 8000, 1000, "0.30", "0.30", "0.30", "0.03", "2.50", "0.5", "1"),
	}} {
		t.Run(c.name, func(t *testing.T) {
			if c.recomputed != c.golden {
				t.Fatalf("the formula gives %s, the golden cost is %s", c.recomputed, c.golden)
			}
			ctx := context.Background()
			l, dir := testLake(t)
			res, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: c.provider, Model: c.model, TmpDir: dir, Tenant: "t1", PromptVersion: "p1",
				Input: writeLines(t, dir, "input.jsonl", []string{c.input})})
			if err != nil {
				t.Fatal(err)
			}
			d, _ := lake.ParseDigest(res.JobKey)
			m, err := l.GetManifest(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: writeLines(t, dir, "output.jsonl", []string{c.output}), Channel: ingest.ChannelOutput, TmpDir: dir}); err != nil {
				t.Fatal(err)
			}
			rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if rep.UnpricedLines != 0 || len(rep.UnpricedModels) != 0 || string(rep.CostUSD["first_success"]) != c.golden || string(rep.CostUSD["total"]) != c.golden {
				t.Errorf("report: unpriced %d %v, cost %v; want every line priced, first_success = total = %s", rep.UnpricedLines, rep.UnpricedModels, rep.CostUSD, c.golden)
			}
			x := &lineageLake{l: l, dir: dir}
			var rows []string
			x.query(t, "SELECT c.price_model, CAST(c.cost_usd AS VARCHAR), c.unpriced, a.web_search_requests FROM costs c JOIN attempts a USING (job_key, raw_sha256, line_no)", func(v []any) {
				rows = append(rows, fmt.Sprintf("%v %s %v %v", v[0], trimDecimal(v[1].(string)), v[2], v[3]))
			})
			if want := fmt.Sprintf("%s %s false %d", c.priceModel, c.golden, c.web); len(rows) != 1 || rows[0] != want {
				t.Errorf("cost rows %q, want [%s]", rows, want)
			}
		})
	}
}

// TestUnpricedModelsListed: lines of a model the price table lacks are priced
// 0 and listed by model in the report (unpriced_models) and flagged in the
// costs table.
func TestUnpricedModelsListed(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	var input, output []string
	for i, model := range []string{"mystery-1", "mystery-1"} {
		id := fmt.Sprintf("R%010d", i)
		input = append(input, `{"custom_id":"`+id+`","method":"POST","url":"/v1/chat/completions","body":{"model":"`+model+`","messages":[{"role":"user","content":"q"}]}}`)
		output = append(output, `{"id":"b","custom_id":"`+id+`","response":{"status_code":200,"body":{"object":"chat.completion","model":"`+model+`-2025","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}},"error":null}`)
	}
	res, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", TmpDir: dir, Tenant: "t1", PromptVersion: "p1", Input: writeLines(t, dir, "input.jsonl", input)})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := lake.ParseDigest(res.JobKey)
	m, _ := l.GetManifest(ctx, d)
	if _, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: writeLines(t, dir, "output.jsonl", output), Channel: ingest.ChannelOutput, TmpDir: dir}); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[{openai mystery-1-2025 2}]"; rep.UnpricedLines != 2 || fmt.Sprint(rep.UnpricedModels) != want {
		t.Errorf("unpriced %d %v, want 2 %s", rep.UnpricedLines, rep.UnpricedModels, want)
	}
	e, err := OpenSession(ctx, l, EngineOptions{Threads: 1, TempDir: dir}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got, err := e.UnpricedCosts(ctx, m.JobKey, "")
	if err != nil || fmt.Sprint(got) != "[{openai mystery-1-2025 2}]" {
		t.Errorf("UnpricedCosts %v %v", got, err)
	}
	if strings.Contains(fmt.Sprint(rep.CostUSD), "-") {
		t.Errorf("negative cost %v", rep.CostUSD)
	}
}
