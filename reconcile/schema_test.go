package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/errkind"
)

// TestOutputSchema: with --output-schema, success lines whose output is not
// JSON or breaks the schema fail the quality gate (and are retried); without
// it the same lines succeed; a broken schema is refused as bad input.
func TestOutputSchema(t *testing.T) {
	ctx := context.Background()
	outputs := []string{`{\"label\":\"spam\"}`, `{\"label\":5}`, `not json at all`, `{\"label\":\"ham\",\"score\":0.5}`, `{\"score\":1}`}
	var g genBatch
	for i, out := range outputs {
		id := fmt.Sprintf("r%d", i)
		g.input = append(g.input, fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x%d"}]}}`, id, i))
		g.output = append(g.output, fmt.Sprintf(`{"id":"b%d","custom_id":%q,"response":{"status_code":200,"body":{"model":"gpt-4o-mini-2024-07-18","choices":[{"message":{"content":"%s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}},"error":null}`, i, id, out))
	}
	l, dir := testLake(t)
	m := planAndIngest(t, l, dir, g, 0)
	schema, err := LoadOutputSchema("label.schema.json", []byte(`{"type":"object","required":["label"],"properties":{"label":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name                      string
		schema                    *OutputSchema
		succeeded, quality, lines int64
		reasons                   string // each record's outcome and reason, in business key order
	}{
		{"without schema", nil, 5, 0, 0, "[r0 succeeded  r1 succeeded  r2 succeeded  r3 succeeded  r4 succeeded ]"},
		{"with schema", schema, 2, 3, 3, "[r0 succeeded  r1 quality_failed schema r2 quality_failed schema r3 succeeded  r4 quality_failed schema]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Run(ctx, l, Options{JobKey: m.JobKey, OutputSchema: c.schema, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Succeeded != c.succeeded || rep.QualityFailed != c.quality || rep.SchemaFailed != c.lines || rep.RetryRecords != c.quality {
				t.Fatalf("succeeded %d quality_failed %d schema_failed_lines %d retry %d; want %d %d %d %d",
					rep.Succeeded, rep.QualityFailed, rep.SchemaFailed, rep.RetryRecords, c.succeeded, c.quality, c.lines, c.quality)
			}
			if (rep.OutputSchema != "") != (c.schema != nil) {
				t.Fatalf("report output_schema_sha256 = %q", rep.OutputSchema)
			}
			if got := tableRows(t, l, rep.OutcomesFile, "business_key, outcome, reason"); got != c.reasons {
				t.Errorf("outcomes %v, want %v", got, c.reasons)
			}
		})
	}
	for _, bad := range []string{`{"type":`, `{"type":"no-such-type"}`} {
		if _, err := LoadOutputSchema("bad.json", []byte(bad)); !errors.Is(err, errkind.ErrBadInput) {
			t.Errorf("schema %s: error %v, want bad input", bad, err)
		}
	}
}

// TestOutputSchemaRefsStayInside: a schema's $ref is resolved inside the
// document only. A $ref to a file was loaded and its text quoted in the
// error (file:///proc/self/environ leaked the environment); now any $ref
// that leaves the document is refused, whatever its scheme, and none is read.
func TestOutputSchemaRefsStayInside(t *testing.T) {
	dir := t.TempDir()
	secret := "BATCHLAKE-SECRET-" + fmt.Sprint(len(dir))
	side := filepath.Join(dir, "side.json")
	if err := os.WriteFile(side, []byte(`{"type":"string","title":"`+secret+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BATCHLAKE_TEST_SECRET", secret)
	for _, ref := range []string{"file:///proc/self/environ", "file://" + side, "side.json", "./side.json", "http://127.0.0.1:1/x.json", "/etc/passwd"} {
		t.Run(ref, func(t *testing.T) {
			doc := fmt.Sprintf(`{"type":"object","properties":{"label":{"$ref":%q}}}`, ref)
			_, err := LoadOutputSchema(filepath.Join(dir, "s.json"), []byte(doc))
			if err == nil {
				t.Fatal("a $ref out of the document was accepted")
			}
			if !errors.Is(err, errkind.ErrBadInput) || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "PATH=") {
				t.Fatalf("error %v: want bad input that quotes nothing it read", err)
			}
		})
	}
	// Inside the document it works.
	s, err := LoadOutputSchema("defs.json", []byte(`{"$defs":{"l":{"type":"string"}},"type":"object","properties":{"label":{"$ref":"#/$defs/l"}}}`))
	if err != nil || s == nil {
		t.Fatalf("a $ref into $defs: %v", err)
	}
}
