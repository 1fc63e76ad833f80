package ingest

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestOutputLimit(t *testing.T) {
	cases := []struct {
		name, line string
		want       int64
		ok         bool
	}{
		{"openai chat", `{"custom_id":"a","body":{"model":"m","max_tokens": 64,"messages":[]}}`, 64, true},
		{"completion tokens win", `{"body":{"max_tokens":10,"max_completion_tokens":500}}`, 500, true},
		{"responses", `{"body":{"max_output_tokens":300}}`, 300, true},
		{"bedrock converse", `{"modelInput":{"inferenceConfig":{"maxTokens":77}}}`, 77, true},
		{"gemini", `{"request":{"generationConfig":{"maxOutputTokens":1024}}}`, 1024, true},
		{"none", `{"body":{"messages":[{"content":"no limit"}]}}`, 0, false},
		{"escaped key inside text", `{"body":{"messages":[{"content":"say \"max_tokens\": 99"}]}}`, 0, false},
		{"escaped then real", `{"body":{"messages":[{"content":"\"max_tokens\": 99"}],"max_tokens":5}}`, 5, true},
		{"not a number", `{"body":{"max_tokens":null}}`, 0, false},
	}
	for _, c := range cases {
		got, ok := outputLimit([]byte(c.line))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: outputLimit = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestEstimatorSums(t *testing.T) {
	add := func(e *estimator, line string) (int64, int64) {
		return e.add(int64(len(line)), lineOutputLimit([]byte(line)))
	}
	e := newEstimator(EstimateOptions{OutputTokens: 7})
	in1, out1 := add(e, `{"body":{"max_tokens":64}}`) // 26 bytes
	in2, out2 := add(e, `{"body":{}}`)                // 11 bytes, no limit
	if in1 != 7 || out1 != 64 || in2 != 3 || out2 != 7 {
		t.Errorf("per record: %d/%d and %d/%d, want 7/64 and 3/7", in1, out1, in2, out2)
	}
	if e.sum.InputTokens != 10 || e.sum.OutputTokens != 71 || e.sum.NoOutputLimit != 1 || e.sum.BytesPerToken != 4 {
		t.Errorf("sum %+v", e.sum)
	}
	f := newEstimator(EstimateOptions{InputTokens: 100})
	if in, _ := add(f, `{}`); in != 100 || f.sum.BytesPerToken != 0 || f.sum.InputPerRecord != 100 {
		t.Errorf("--est-input-tokens 100: in %d, sum %+v", in, f.sum)
	}
	if got := lineOutputLimit([]byte(`{"body":{"max_tokens":99999999999}}`)); got != math.MaxInt32 {
		t.Errorf("a limit past int32: %d, want it clamped to %d", got, math.MaxInt32)
	}
}

// outputLimitModel is outputLimit as first written, one search per key: the
// reference for TestOutputLimitOnePass.
func outputLimitModel(line []byte) (int64, bool) {
	for _, k := range outputLimitKeys {
		for off := 0; off < len(line); {
			i := bytes.Index(line[off:], k)
			if i < 0 {
				break
			}
			i += off
			off = i + len(k)
			if i > 0 && line[i-1] == '\\' {
				continue
			}
			if n, ok := limitValue(line, off); ok {
				return n, true
			}
		}
	}
	return 0, false
}

// TestOutputLimitOnePass: the one-pass search agrees with a search per key on
// lines made of every key, escaped keys, bad values and other text, in
// random orders.
func TestOutputLimitOnePass(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	parts := []string{`"max"`, `"maximum":1`, `\"max_tokens\":9`, `\"max_tokens":3`, `: 12`, `"max_tokens" : null`, `"x":"max_tokens"`, `,`, `{`, `}`, ` `}
	for _, k := range outputLimitKeys {
		parts = append(parts, string(k)+":"+fmt.Sprint(rng.IntN(5000)), string(k)+` : 7`, string(k)+`:"5"`, string(k))
	}
	for i := range 20000 {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		line := []byte(b.String())
		got, ok := outputLimit(line)
		want, wok := outputLimitModel(line)
		if got != want || ok != wok {
			t.Fatalf("case %d %s: outputLimit = %d, %v; one search per key gives %d, %v", i, line, got, ok, want, wok)
		}
	}
}

// An OpenAI request's output limit is its body's own member, as the
// provider reads it, on the fast path and through encoding/json alike: a key
// of the same name elsewhere in the line (here in a message) does not count,
// where the scan of the line (lineOutputLimit) would take it.
func TestBodyOutputLimit(t *testing.T) {
	line := func(body string) []byte {
		return []byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m",` + body + `}}`)
	}
	cases := []struct {
		name, body string
		want       int32
	}{
		{"max_tokens", `"messages":[{"role":"user","content":"x"}],"max_tokens":64`, 64},
		{"a message's key", `"messages":[{"role":"user","content":"x","max_tokens":7}],"max_tokens":64`, 64},
		{"only a message's key", `"messages":[{"role":"user","content":"x","max_tokens":7}]`, -1},
		{"completion tokens win", `"max_tokens":10,"messages":[],"max_completion_tokens":500`, 500},
		{"null skipped", `"max_completion_tokens":null,"max_tokens":12,"messages":[]`, 12},
		{"a string is none", `"max_tokens":"12","messages":[]`, -1},
		{"responses", `"input":"hi","max_output_tokens":300`, 300},
		{"clamped", `"max_tokens":99999999999,"messages":[]`, math.MaxInt32},
		{"spaces", `"messages": [], "max_tokens" :  33 `, 33},
		{"none", `"messages":[]`, -1},
	}
	f := openaiFormat{}
	for _, c := range cases {
		l := line(c.body)
		fast, _, err := f.parseInputLater(l, "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		slow, serr := generalParseInput(l, "")
		if serr != nil {
			t.Fatalf("%s: %v", c.name, serr)
		}
		for _, r := range []InputRecord{fast, slow} {
			if !r.limitSet || r.limit != c.want {
				t.Errorf("%s: limit %d (set %v), want %d", c.name, r.limit, r.limitSet, c.want)
			}
		}
	}
	// Other providers' parsers leave it to the scan of the line.
	if r, err := (anthropicFormat{}).ParseInput([]byte(`{"custom_id":"a","params":{"model":"claude","max_tokens":9,"messages":[{"role":"user","content":"x"}]}}`), ""); err != nil || r.limitSet {
		t.Errorf("anthropic: limit set %v, err %v; want it left to the scan", r.limitSet, err)
	}
}

// Plan's estimate takes an OpenAI line's limit from its body (above): a
// message holding the same key changes nothing.
func TestPlanEstimateFromBody(t *testing.T) {
	decoy := `{"custom_id": "b", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x", "max_tokens": 7}], "max_tokens": 100}}`
	none := `{"custom_id": "c", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x", "max_tokens": 7}]}}`
	_, m := planManifest(t, newLake(t), opts(writeFile(t, "in.jsonl", []string{openaiLine("a", "gpt-4o-mini", "one"), decoy, none}, "\n")))
	if m.Estimate == nil || m.Estimate.OutputTokens != 200 || m.Estimate.NoOutputLimit != 1 {
		t.Errorf("estimate %+v, want 200 output tokens (100 + 100 + none) and one record without a limit", m.Estimate)
	}
}
