package ingest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// Fuzz targets for every parser of outside input, seeded with the provider
// examples (every line of every example, whatever its provider: other
// providers' lines are good near-misses). Run one with e.g.
//
//	go test ./ingest -run '^$' -fuzz '^FuzzAnthropicResult$' -fuzztime 1m
//
// The property everywhere: no panic, and what a parser accepts is
// self-consistent.

// seedLines adds every non-blank line of every example, and each whole file.
func seedLines(f *testing.F, extra ...string) {
	files, _ := filepath.Glob("testdata/examples/*")
	for _, path := range files {
		if filepath.Base(path) == "README.md" {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		_, lines := exampleLines(data)
		for _, l := range lines {
			f.Add(l)
		}
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

func fuzzInput(f *testing.F, provider string, extra ...string) {
	seedLines(f, extra...)
	format, err := FormatFor(provider)
	if err != nil {
		f.Fatal(err)
	}
	retryID := RetryCustomID(7, strings.Repeat("0f", 32))
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, ierr := format.ParseInput(line, "")
		again, ierr2 := format.ParseInput(line, "")
		if (ierr == nil) != (ierr2 == nil) || rec != again {
			t.Fatalf("parse is not deterministic")
		}
		if ierr != nil {
			if ierr.Msg == "" {
				t.Fatalf("an error without a message (field %q)", ierr.Field)
			}
			return
		}
		if rec.CustomID == "" || rec.BusinessKey == "" || rec.Endpoint == "" {
			t.Fatalf("accepted with an empty id, key or endpoint: %+v", rec)
		}
		if rec.ConfigHash.IsZero() || rec.RequestDigest.IsZero() {
			t.Fatalf("accepted without a config hash or request digest")
		}
		if provider == "anthropic" && !ValidAnthropicID(rec.CustomID) {
			t.Fatalf("accepted custom_id %q outside Anthropic's alphabet", rec.CustomID)
		}
		// A retry (attempt n+1 under a new id) keeps the record's identity.
		nl, err := format.WithCustomID(line, retryID)
		if err != nil {
			t.Fatalf("accepted line cannot take a retry id: %v", err)
		}
		r2, ierr := format.ParseInput(nl, "")
		if ierr != nil {
			t.Fatalf("the retry line %s does not parse: %v", nl, ierr)
		}
		if r2.CustomID != retryID {
			t.Fatalf("retry line has id %q, want %q", r2.CustomID, retryID)
		}
		r2.CustomID, r2.BusinessKey = rec.CustomID, rec.BusinessKey
		if r2 != rec {
			t.Fatalf("identity changed with the retry id:\n got %+v\nwant %+v", r2, rec)
		}
	})
}

func fuzzResult(f *testing.F, provider string, check func(lake.AttemptRow) error, extra ...string) {
	seedLines(f, extra...)
	format, err := FormatFor(provider)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		row, err := format.ParseResult(line, ChannelOutput)
		row2, err2 := format.ParseResult(line, ChannelOutput)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("parse is not deterministic")
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("quarantined without a reason")
			}
			return
		}
		if (row.StatusCode == nil) != (row2.StatusCode == nil) || row.StatusCode != nil && *row.StatusCode != *row2.StatusCode {
			t.Fatalf("status not deterministic")
		}
		if err := check(row); err != nil {
			t.Fatalf("accepted an inconsistent row: %v\n%+v", err, row)
		}
	})
}

func FuzzOpenAIInput(f *testing.F) {
	fuzzInput(f, "openai", `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":["x"]}}`)
}

func FuzzAnthropicInput(f *testing.F) {
	fuzzInput(f, "anthropic", `{"custom_id":"a","params":{"model":"m","max_tokens":1,"stream":false,"messages":[{"role":"user","content":"<&>"}]}}`)
}

func FuzzBedrockInput(f *testing.F) {
	fuzzInput(f, "bedrock", `{"recordId":"a","modelInput":{"modelId":"m"}}`, `{"recordId":"a","modelInput":{"messages":[{"content":[{"text":"x"}]}],"toolConfig":{}}}`)
}

func FuzzGeminiInput(f *testing.F) {
	fuzzInput(f, "gemini", `{"key":"a","request":{"model":"models/g","contents":[{"parts":[{"text":"x"}]}]}}`)
}

func FuzzOpenAIResult(f *testing.F) {
	fuzzResult(f, "openai", checkRow,
		`{"custom_id":"a","response":{"status_code":200,"body":{"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cache_write_tokens":20}}}}}`,
		`{"custom_id":"a","response":{"status_code":200,"body":{"usage":{"prompt_tokens":5000000000000000000}}}}`)
}

func FuzzAnthropicResult(f *testing.F) {
	fuzzResult(f, "anthropic", checkRow,
		`{"custom_id":"a","result":{"type":"succeeded","message":{"content":[{"type":"tool_use"}],"usage":{"input_tokens":1,"cache_read_input_tokens":2,"cache_creation_input_tokens":3}}}}`)
}

func FuzzBedrockResult(f *testing.F) {
	fuzzResult(f, "bedrock", checkRow,
		`{"recordId":"a","modelOutput":{"output":{"message":{"content":[{"text":"x"},{"toolUse":{}}]}},"usage":{"inputTokens":5,"outputTokens":1,"totalTokens":6,"cacheReadInputTokens":3}}}`,
		`{"recordId":"a","modelOutput":{"generation":"x","prompt_token_count":1}}`,
		`{"recordId":"a","error":{"errorCode":"503"}}`)
}

func FuzzGeminiResult(f *testing.F) {
	fuzzResult(f, "gemini", checkRow,
		`{"key":"a","error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`,
		`{"key":"a","response":{"promptFeedback":{"blockReason":"SAFETY"}}}`,
		`{"key":"a","response":{"candidates":[{"content":{"parts":[{"text":"t","thought":true},{"functionCall":{}}]}}],"usageMetadata":{"thoughtsTokenCount":3}}}`)
}

func FuzzBedrockManifest(f *testing.F) {
	seedLines(f, `{"successRecordCount":-1}`, `{"totalRecordCount":9223372036854775807}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseBedrockManifest(data)
		if err != nil {
			return
		}
		for _, fl := range m.fields() {
			if fl.v != nil && *fl.v < 0 {
				t.Fatalf("accepted a negative %s", fl.name)
			}
		}
		for _, tally := range []BedrockTally{{}, {Expected: 3, Success: 2, Error: 1, InputTokens: 10, CachedInputTokens: 4, OutputTokens: 2}} {
			for _, d := range m.Check(tally) {
				if d.Manifest == d.Lines && d.Field != "inputTokenCount" {
					t.Fatalf("a difference that is none: %+v", d)
				}
			}
		}
	})
}

func FuzzGeminiOperation(f *testing.F) {
	seedLines(f, `{"response":{"inlinedResponses":{"inlinedResponses":[{"metadata":{"key":7},"error":{"code":14}},{"response":null},{}]}}}`)
	format, _ := FormatFor("gemini")
	f.Fuzz(func(t *testing.T, op []byte) {
		out, err := ParseGeminiBatchOperation(op)
		if err != nil {
			return
		}
		for i, l := range out.Lines {
			if !json.Valid(l) || bytes.ContainsRune(l, '\n') {
				t.Fatalf("line %d is not one JSON line: %q", i+1, l)
			}
			row, err := format.ParseResult(l, ChannelOutput)
			if err == nil {
				if err := checkRow(row); err != nil {
					t.Fatalf("line %d: inconsistent row: %v", i+1, err)
				}
			}
		}
	})
}

func FuzzCanonical(f *testing.F) {
	seedLines(f, `{"b":1,"a":[1e5,-0,0.10]}`, `"\u003c\ud800"`, `{"a":1} {"b":2}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Canonical(data)
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form is not JSON: %q", c)
		}
		again, err := Canonical(c)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v", err)
		}
		if !bytes.Equal(again, c) {
			t.Fatalf("not idempotent:\n%q\n%q", c, again)
		}
	})
}
