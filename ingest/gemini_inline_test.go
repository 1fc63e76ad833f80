package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/errkind"
)

// The inline document testdata/gemini_inline/requests.json holds the same
// two requests as the example gemini_input.jsonl.
func TestGeminiInlineGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/gemini_inline/requests.json")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n, err := convertGeminiInline(bytes.NewReader(data), &out)
	if err != nil || n != 2 {
		t.Fatalf("convert: %d, %v", n, err)
	}
	var lines []json.RawMessage
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		lines = append(lines, json.RawMessage(l))
	}
	compareGolden(t, "testdata/golden/gemini_inline_requests.json.json", lines)
}

// Every accepted wrapping of the inline requests plans to the same job and
// records as the JSONL example with the same requests.
func TestGeminiInlinePlansLikeJSONL(t *testing.T) {
	ctx := context.Background()
	o := func(in string) PlanOptions {
		return PlanOptions{Provider: "gemini", Model: "gemini-2.5-flash", Input: in, Tenant: "acme", PromptVersion: "p1", TmpDir: t.TempDir()}
	}
	want, err := Plan(ctx, newLake(t), o("testdata/examples/gemini_input.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	list := `[{"request":{"contents":[{"parts":[{"text":"Describe the process of photosynthesis."}]}],"generation_config":{"temperature":0.7}},"metadata":{"key":"request-1"}},` +
		"\n" + `{"metadata":{"key":"request-2"},"request":{"contents":[{"parts":[{"text":"What are the main ingredients in a Margherita pizza?"}]}]}}]`
	for name, doc := range map[string]string{
		"requests":          `{"requests":` + list + `}`,
		"input_config":      `{"requests":{"requests":` + list + `}}`,
		"inputConfig":       `{"inputConfig":{"requests":{"requests":` + list + `}}}`,
		"batch":             `{"batch":{"display_name":"x","input_config":{"requests":{"requests":` + list + `}}}}`,
		"testdata_requests": "",
	} {
		t.Run(name, func(t *testing.T) {
			in := "testdata/gemini_inline/requests.json"
			if doc != "" {
				in = filepath.Join(t.TempDir(), "inline.json")
				if err := os.WriteFile(in, []byte(doc), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			l := newLake(t)
			got, err := Plan(ctx, l, o(in))
			if err != nil {
				t.Fatal(err)
			}
			if got.JobKey != want.JobKey || got.Records != 2 {
				t.Fatalf("job %s (%d records), want %s as from the JSONL", got.JobKey, got.Records, want.JobKey)
			}
			m, err := l.GetManifest(ctx, mustDigest(t, got.JobKey))
			if err != nil {
				t.Fatal(err)
			}
			if m.InputFileName != filepath.Base(in) {
				t.Fatalf("manifest names the input %q, want %q", m.InputFileName, filepath.Base(in))
			}
		})
	}
}

func TestGeminiInlineErrors(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"missing key":    {`{"requests":[{"request":{"contents":[{"parts":[{"text":"a"}]}]},"metadata":{"key":"k1"}},{"request":{"contents":[{"parts":[{"text":"b"}]}]}}]}`, "bad.json line 2 field key: missing"},
		"not an object":  {`{"requests":[{"request":{"contents":[{"parts":[{"text":"a"}]}]},"metadata":{"key":"k1"}}, 7]}`, "bad.json line 2: not valid JSON"},
		"no contents":    {`{"requests":[{"request":{},"metadata":{"key":"k1"}}]}`, "bad.json line 1 field request.contents"},
		"duplicate key":  {`{"requests":[{"request":{"contents":[{"parts":[{"text":"a"}]}]},"metadata":{"key":"k"}},{"request":{"contents":[{"parts":[{"text":"b"}]}]},"metadata":{"key":"k"}}]}`, `bad.json line 2 field custom_id: duplicate "k", first on line 1`},
		"trailing value": {`{"requests":[]} {"requests":[]}`, "bad.json: an inline-requests document must be one JSON object"},
		"empty list":     {`{"requests":{"requests":[]}}`, "bad.json field requests.requests: no requests"},
		"bad wrapper":    {`{"batch":{"inputConfig":[1]}}`, "bad.json field batch.inputConfig: want a JSON object"},
		"no requests":    {`{"batch":{"displayName":"x"}}`, "bad.json field batch.requests: missing"},
	} {
		t.Run(name, func(t *testing.T) {
			in := filepath.Join(t.TempDir(), "bad.json")
			if err := os.WriteFile(in, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Plan(context.Background(), newLake(t), PlanOptions{Provider: "gemini", Model: "gemini-2.5-flash", Input: in, Tenant: "acme", PromptVersion: "p1", TmpDir: t.TempDir()})
			if !errors.Is(err, errkind.ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want bad input naming %q", err, tc.want)
			}
		})
	}
}

// FuzzGeminiInline: the inline-document parser never panics; what it
// writes is one JSON object per request, one per line.
func FuzzGeminiInline(f *testing.F) {
	seedLines(f, `{"requests":[{"request":{"contents":[]},"metadata":{"key":1}}, 3, null, "x", {"metadata":null}]}`,
		`{"batch":{"inputConfig":{"requests":{"requests":[{"request":{"contents":[{"parts":[{"text":"a"}]}]},"metadata":{"key":"k"}}]}}}}`)
	if data, err := os.ReadFile("testdata/gemini_inline/requests.json"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var out bytes.Buffer
		n, err := convertGeminiInline(bytes.NewReader(doc), &out)
		if err != nil {
			if errors.Is(err, errNotInline) && out.Len() > 0 {
				t.Fatalf("wrote %d bytes for a document it did not take", out.Len())
			}
			return
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if n < 1 || len(lines) != n {
			t.Fatalf("%d requests, %d lines", n, len(lines))
		}
		for i, l := range lines {
			if !json.Valid([]byte(l)) {
				t.Fatalf("line %d is not JSON: %q", i+1, l)
			}
		}
	})
}
