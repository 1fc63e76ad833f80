package ingest

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// Kinds of example file.
const (
	kindInput     = "input"     // provider input JSONL: Format.ParseInput
	kindResult    = "result"    // provider output/error JSONL: Format.ParseResult
	kindManifest  = "manifest"  // Bedrock manifest.json.out
	kindOperation = "operation" // Gemini batch operation JSON
	kindLifecycle = "lifecycle" // batch objects: read by providers/, not ingest
)

// exampleKind says which format and parser read an example file; every file
// in testdata/examples must have one.
func exampleKind(name string) (format, kind string) {
	provider, rest, _ := strings.Cut(name, "_")
	if provider == "vertex" {
		provider = "gemini"
	}
	switch {
	case strings.HasPrefix(rest, "batch_operation_"):
		return provider, kindOperation
	case strings.Contains(rest, "batch_") || strings.HasSuffix(rest, "_object.json"):
		return provider, kindLifecycle
	case strings.HasPrefix(rest, "manifest"):
		return provider, kindManifest
	case strings.HasPrefix(rest, "input"):
		return provider, kindInput
	case strings.HasPrefix(rest, "output"), strings.HasPrefix(rest, "results"), strings.HasPrefix(rest, "error"):
		return provider, kindResult
	}
	return "", ""
}

type goldenInput struct {
	Line   int                 `json:"line"`
	Record *InputRecord        `json:"record,omitempty"`
	Error  *errkind.InputError `json:"error,omitempty"`
}

type goldenResult struct {
	Line       int              `json:"line"`
	Row        *lake.AttemptRow `json:"row,omitempty"`
	Quarantine string           `json:"quarantine,omitempty"`
}

type goldenManifest struct {
	Manifest *BedrockManifest `json:"manifest"`
	// Against the example output files' lines (which are not the job the
	// example manifest describes, so differences are expected).
	Tally       BedrockTally         `json:"tally"`
	Differences []ManifestDifference `json:"differences"`
}

type goldenOperation struct {
	Output *GeminiBatchOutput `json:"output"`
	Rows   []goldenResult     `json:"rows,omitempty"`
}

// exampleLines splits a JSONL example into its non-blank lines, numbered from 1.
func exampleLines(data []byte) (nos []int, lines [][]byte) {
	for i, l := range bytes.Split(data, []byte{'\n'}) {
		l = bytes.TrimSuffix(l, []byte{'\r'})
		if len(bytes.TrimSpace(l)) > 0 {
			nos, lines = append(nos, i+1), append(lines, l)
		}
	}
	return nos, lines
}

func parseResults(f Format, nos []int, lines [][]byte, channel string) []goldenResult {
	var out []goldenResult
	for i, l := range lines {
		row, err := f.ParseResult(l, channel)
		g := goldenResult{Line: nos[i]}
		if err != nil {
			g.Quarantine = err.Error()
		} else {
			g.Row = &row
		}
		out = append(out, g)
	}
	return out
}

func exampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/examples/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	var out []string
	for _, f := range files {
		if filepath.Base(f) != "README.md" {
			out = append(out, f)
		}
	}
	return out
}

// TestGolden parses every provider example and compares the result with its
// golden file: input records or field errors, attempt rows or quarantine
// reasons, the Bedrock manifest and its cross-check, Gemini operations.
func TestGolden(t *testing.T) {
	for _, path := range exampleFiles(t) {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			provider, kind := exampleKind(name)
			if kind == "" {
				t.Fatalf("no parser is assigned to %s: add it to exampleKind", name)
			}
			if kind == kindLifecycle {
				t.Skipf("%s is a %s batch object, read by providers/, not ingest", name, provider)
			}
			f, err := FormatFor(provider)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var got any
			switch kind {
			case kindInput:
				nos, lines := exampleLines(data)
				var out []goldenInput
				for i, l := range lines {
					rec, ierr := f.ParseInput(l, "")
					g := goldenInput{Line: nos[i], Error: ierr}
					if ierr == nil {
						g.Record = &rec
					}
					out = append(out, g)
				}
				got = out
			case kindResult:
				channel := ChannelOutput
				if strings.Contains(name, "error") {
					channel = ChannelError
				}
				nos, lines := exampleLines(data)
				got = parseResults(f, nos, lines, channel)
			case kindManifest:
				m, err := ParseBedrockManifest(data)
				if err != nil {
					t.Fatal(err)
				}
				g := goldenManifest{Manifest: m}
				for _, out := range []string{"bedrock_output.jsonl", "bedrock_output_converse.jsonl"} {
					b, err := os.ReadFile(filepath.Join("testdata/examples", out))
					if err != nil {
						t.Fatal(err)
					}
					_, lines := exampleLines(b)
					for _, l := range lines {
						row, err := f.ParseResult(l, ChannelOutput)
						if err != nil {
							t.Fatalf("%s: %v", out, err)
						}
						g.Tally.Add(row)
					}
				}
				g.Tally.Expected = 6
				g.Differences = m.Check(g.Tally)
				got = g
			case kindOperation:
				op, err := ParseGeminiBatchOperation(data)
				if err != nil {
					t.Fatal(err)
				}
				g := goldenOperation{Output: op}
				nos := make([]int, len(op.Lines))
				lines := make([][]byte, len(op.Lines))
				for i, l := range op.Lines {
					nos[i], lines[i] = i+1, l
				}
				g.Rows = parseResults(f, nos, lines, ChannelOutput)
				got = g
			}
			compareGolden(t, filepath.Join("testdata/golden", name+".json"), got)
		})
	}
}

func compareGolden(t *testing.T, path string, v any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ingest -run TestGolden -update)", err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Errorf("%s differs from the parse; run with -update and review the diff.\ngot:\n%s", path, buf.Bytes())
	}
}

// TestRetryKeepsIdentity: giving an accepted example line a retry custom id
// (what reconcile does for attempt n+1) changes its id and nothing else that
// identifies the record.
func TestRetryKeepsIdentity(t *testing.T) {
	for _, path := range exampleFiles(t) {
		name := filepath.Base(path)
		provider, kind := exampleKind(name)
		if kind != kindInput {
			continue
		}
		f, err := FormatFor(provider)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		nos, lines := exampleLines(data)
		for i, l := range lines {
			rec, ierr := f.ParseInput(l, "")
			if ierr != nil {
				continue
			}
			id := RetryCustomID(2, strings.Repeat("ab12", 16))
			nl, err := f.WithCustomID(l, id)
			if err != nil {
				t.Errorf("%s line %d: WithCustomID: %v", name, nos[i], err)
				continue
			}
			again, ierr := f.ParseInput(nl, "")
			if ierr != nil {
				t.Errorf("%s line %d: retry line does not parse: %v", name, nos[i], ierr)
				continue
			}
			if again.CustomID != id {
				t.Errorf("%s line %d: custom id %q, want %q", name, nos[i], again.CustomID, id)
			}
			again.CustomID, again.BusinessKey = rec.CustomID, rec.BusinessKey
			if again != rec {
				t.Errorf("%s line %d: identity changed on retry:\n got %+v\nwant %+v", name, nos[i], again, rec)
			}
		}
	}
}
