package ingest

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ruleStatus is one concrete status of a rule ("5xx" → 503), 0 for none.
func ruleStatus(t *testing.T, s string) int {
	t.Helper()
	if s == "" {
		return 0
	}
	if strings.HasSuffix(s, "xx") {
		s = s[:1] + "03"
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("rule status %q", s)
	}
	return n
}

// errorLine writes a provider error line that a rule describes.
func errorLine(t *testing.T, provider string, r ErrorRule) string {
	st := ruleStatus(t, r.Status)
	code := strconv.Quote(r.Code)
	switch provider {
	case "openai":
		if st == 0 {
			return `{"id":"b","custom_id":"x","response":null,"error":{"code":` + code + `,"message":"m"}}`
		}
		return `{"id":"b","custom_id":"x","response":{"status_code":` + strconv.Itoa(st) + `,"request_id":"r","body":{"error":{"message":"m","type":"t","code":` + code + `}}},"error":null}`
	case "anthropic":
		if r.Code == "canceled" || r.Code == "expired" {
			return `{"custom_id":"x","result":{"type":` + code + `}}`
		}
		return `{"custom_id":"x","result":{"type":"errored","error":{"type":"error","error":{"type":` + code + `,"message":"m"}}}}`
	case "bedrock":
		return `{"recordId":"x","modelInput":{},"error":{"errorCode":` + strconv.Itoa(st) + `,"errorMessage":"m"}}`
	case "gemini":
		if st != 0 {
			return `{"key":"x","error":{"code":` + strconv.Itoa(st) + `,"message":"m"}}`
		}
		n := slices.Index(GRPCCodeNames[:], r.Code)
		if n < 0 {
			t.Fatalf("%s is not a gRPC code name", r.Code)
		}
		return `{"key":"x","error":{"code":` + strconv.Itoa(n) + `,"message":"m"}}`
	}
	t.Fatalf("no error line for %s", provider)
	return ""
}

// TestErrorTaxonomyMatchesParsers: every rule describes a row the provider's
// parser really produces from such an error.
func TestErrorTaxonomyMatchesParsers(t *testing.T) {
	for provider, rules := range ErrorTaxonomy {
		f, err := FormatFor(provider)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			t.Run(provider+"/"+r.Status+"/"+r.Code, func(t *testing.T) {
				if r.Source == "" || r.Meaning == "" {
					t.Error("a rule needs a meaning and a source")
				}
				row, err := f.ParseResult([]byte(errorLine(t, provider, r)), ChannelError)
				if err != nil {
					t.Fatal(err)
				}
				eq(t, "outcome", row.Outcome, "error")
				if st := ruleStatus(t, r.Status); st == 0 {
					if row.StatusCode != nil {
						t.Errorf("status %d, want none", *row.StatusCode)
					}
				} else {
					eq(t, "status", status(row), int32(st))
				}
				if r.Code != "" && row.ErrorCode != r.Code && row.ErrorType != r.Code {
					t.Errorf("error_code %q, error_type %q: want %q", row.ErrorCode, row.ErrorType, r.Code)
				}
			})
		}
	}
}

// TestErrorDocs: docs/errors.md shows each provider's taxonomy table as
// TaxonomyMarkdown renders it, between <!-- taxonomy:NAME --> markers;
// -update rewrites the tables.
func TestErrorDocs(t *testing.T) {
	const path = "../docs/errors.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, provider := range []string{"openai", "anthropic", "bedrock", "gemini"} {
		begin, end := "<!-- taxonomy:"+provider+" -->\n", "<!-- /taxonomy:"+provider+" -->"
		i, j := strings.Index(text, begin), strings.Index(text, end)
		if i < 0 || j < i {
			t.Errorf("%s: no %s…%s section", path, strings.TrimSpace(begin), end)
			continue
		}
		want := TaxonomyMarkdown(provider)
		if got := text[i+len(begin) : j]; got != want {
			if *update {
				text = text[:i+len(begin)] + want + text[j:]
				continue
			}
			t.Errorf("%s: the %s table differs from ErrorTaxonomy; run go test ./ingest -run TestErrorDocs -update\nwant:\n%s", path, provider, want)
		}
	}
	if *update && text != string(doc) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
