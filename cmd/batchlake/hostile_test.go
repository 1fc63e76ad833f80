package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// deep returns JSON nested n arrays deep.
func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

func lines(ls ...string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }

// TestHostilePlan feeds plan hostile tenants, ids, keys and files. Each
// either exits 2 naming the file, line and field, or plans every record
// (expected rows = non-blank lines); never a panic, never a file outside the
// lake.
func TestHostilePlan(t *testing.T) {
	ok := func(id string) string { return requestLine(id, "hello") }
	big := strings.Repeat("x", 10<<20)
	for _, c := range []struct {
		name    string
		input   []byte
		flags   []string // replace the default --tenant acme
		records int64    // > 0: planned with this many records
		errs    []string // exit 2 with all of these in the error
	}{
		{"tenant ../", lines(ok("a")), []string{"--tenant", "../evil"}, 0, []string{"tenant"}},
		{"tenant with /", lines(ok("a")), []string{"--tenant", "a/b"}, 0, []string{"tenant"}},
		{"tenant ..", lines(ok("a")), []string{"--tenant", ".."}, 0, []string{"tenant"}},
		{"tenant with control character", lines(ok("a")), []string{"--tenant", "a\x1bb"}, 0, []string{"tenant"}},
		{"tenant not UTF-8", lines(ok("a")), []string{"--tenant", "a\xff"}, 0, []string{"tenant"}},
		{"tenant too long", lines(ok("a")), []string{"--tenant", strings.Repeat("t", 65)}, 0, []string{"tenant"}},
		{"custom_id with ../ and / is opaque", lines(ok("../../etc/passwd"), ok("a/b/../c"), ok("/abs")), nil, 3, nil},
		{"custom_id with NUL", lines(ok("a"), ok("b\x00c")), nil, 0, []string{"input.jsonl line 2 field custom_id", "control character"}},
		{"custom_id with control character", lines(ok("\x1b[31mred")), nil, 0, []string{"line 1 field custom_id"}},
		{"custom_id too long", lines(ok(strings.Repeat("i", 600))), nil, 0, []string{"line 1 field custom_id", "600 bytes"}},
		{"custom_id not UTF-8", lines(ok("a"), strings.Replace(ok("bQ"), "Q", "\xff", 1)), nil, 0, []string{"line 2 field custom_id", "UTF-8"}},
		{"request not UTF-8", lines(ok("a"), strings.Replace(ok("b"), "hello", "hel\xfflo", 1)), nil, 0, []string{"line 2 field body.messages[0].content", "not valid UTF-8"}},
		{"business key with ../, NUL and control characters", lines(
			`{"custom_id":"r1","meta":{"k":"../../x\u0000y"},"method":"POST","url":"/v1/chat/completions","body":{"model":"m-1","messages":[]}}`,
			`{"custom_id":"r2","meta":{"k":"a/b\u001b"},"method":"POST","url":"/v1/chat/completions","body":{"model":"m-1","messages":[]}}`),
			[]string{"--tenant", "acme", "--key-field", "meta.k"}, 2, nil},
		{"business key not UTF-8", lines(
			"{\"custom_id\":\"r1\",\"meta\":{\"k\":\"a\xff\"},\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"m-1\",\"messages\":[]}}"),
			[]string{"--tenant", "acme", "--key-field", "meta.k"}, 0, []string{"line 1 field meta.k", "UTF-8"}},
		{"business key 1 MB", lines(`{"custom_id":"r1","meta":{"k":"` + strings.Repeat("k", 1<<20) + `"},"method":"POST","url":"/v1/chat/completions","body":{"model":"m-1","messages":[]}}`),
			[]string{"--tenant", "acme", "--key-field", "meta.k"}, 1, nil},
		{"10 MB line", lines(ok("a"), requestLine("big", big)), nil, 2, nil},
		{"BOM", append([]byte("\xef\xbb\xbf"), lines(ok("a"), ok("b"))...), nil, 2, nil},
		{"CRLF", []byte(ok("a") + "\r\n" + ok("b") + "\r\n"), nil, 2, nil},
		{"no final newline", []byte(ok("a") + "\n" + ok("b") + "\n" + ok("c")), nil, 3, nil},
		{"blank lines between", []byte("\n" + ok("a") + "\n\n  \n" + ok("b") + "\n\n"), nil, 2, nil},
		{"empty file", nil, nil, 0, []string{"input.jsonl", "no requests"}},
		{"only blank lines", []byte("\n\r\n \n"), nil, 0, []string{"input.jsonl", "no requests"}},
		{"JSON nested 10,000 deep", lines(ok("a"), `{"custom_id":"d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini-2024-07-18","metadata":`+deep(10000)+`,"messages":[]}}`), nil, 0, []string{"line 2"}},
		{"not JSON at all", lines(ok("a"), "\x00\x01\x02garbage"), nil, 0, []string{"line 2", "not valid JSON"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBox(t)
			in := writeFile(t, "input.jsonl", c.input)
			flags := c.flags
			if flags == nil {
				flags = []string{"--tenant", "acme"}
			}
			r := b.do(append([]string{"plan", "--input", in, "--prompt-version", "p1"}, flags...)...)
			survived := true
			if c.records > 0 {
				if r.code != 0 {
					t.Fatalf("want planned, got %s", r)
				}
				var p planOut
				decode(t, r, &p)
				n := b.sqlCount("SELECT count(*) FROM expected")
				if p.Records != c.records || int64(n) != c.records {
					t.Errorf("planned %d records, %v expected rows; want %d", p.Records, n, c.records)
					survived = false
				}
				b.verify()
			} else {
				if r.code != exitUsage {
					t.Fatalf("want exit 2, got %s", r)
				}
				for _, s := range c.errs {
					if !strings.Contains(r.stderr, s) {
						t.Errorf("error does not say %q: %s", s, r.stderr)
						survived = false
					}
				}
				// The refusal left nothing behind: a good plan afterwards is the
				// lake's only job.
				good := jobOf(t, b.want([]int{0}, "plan", "--input", writeFile(t, "good.jsonl", lines(ok("a"))), "--tenant", "acme", "--prompt-version", "p1"))
				if entries, _ := os.ReadDir(filepath.Join(b.lake, "manifests")); len(entries) != 1 || entries[0].Name() != good+".json" {
					t.Errorf("refused input, but the lake holds manifests %v", entries)
				}
				b.verify()
			}
			b.contained()
			record(t, "hostile input", "plan: "+c.name, survived, 0)
		})
	}
	// NUL cannot reach a tenant through argv; the lake refuses it all the same.
	for _, tenant := range []string{"a\x00b", "", "../x", "x/../../y", ".hidden", "tenant=b"} {
		if lake.ValidTenant(tenant) == nil {
			t.Errorf("lake.ValidTenant(%q) accepts it", tenant)
		}
	}
}

// TestHostileIngest ingests hostile output files into a planned job of 12
// records. Every line is either an attempt row or a quarantined line counted
// in the report; the report accounts for every expected record; nothing is
// written outside the lake.
func TestHostileIngest(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("req-%04d", i) }
	okl := func(i int) string { return successLine(id(i), 10, 5, "fine") }
	withUsage := func(i int, usage string) string {
		return `{"id":"x","custom_id":"` + id(i) + `","response":{"status_code":200,"body":{"model":"gpt-4o-mini-2024-07-18","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":` + usage + `}},"error":null}`
	}
	other := func() []byte {
		var b strings.Builder
		for i := range 12 {
			b.WriteString(successLine(fmt.Sprintf("other-job-%04d", i), 10, 5, "not yours") + "\n")
		}
		return []byte(b.String())
	}
	for _, c := range []struct {
		name       string
		output     []byte
		lines      int64 // non-blank lines read
		quarantine int64
		unknown    int64
		succeeded  int64
	}{
		{"BOM, CRLF, no final newline", []byte("\xef\xbb\xbf" + okl(0) + "\r\n" + okl(1) + "\r\n\r\n" + okl(2)), 3, 0, 0, 3},
		{"empty file", nil, 0, 0, 0, 0},
		{"token counts out of range", lines(withUsage(0, `{"prompt_tokens":1e30,"completion_tokens":1}`), withUsage(1, `{"prompt_tokens":-5,"completion_tokens":1}`),
			withUsage(2, `{"prompt_tokens":99999999999999999999,"completion_tokens":1}`), withUsage(3, `{"prompt_tokens":10,"completion_tokens":2}`)), 4, 3, 0, 1},
		{"JSON nested 10,000 deep", lines(okl(0), `{"custom_id":"req-0001","response":{"status_code":200,"body":{"x":`+deep(10000)+`}}}`), 2, 1, 0, 1},
		{"10 MB line", lines(okl(0), successLine(id(1), 10, 5, strings.Repeat("y", 10<<20))), 2, 0, 0, 2},
		{"hostile custom_ids", lines(okl(0), successLine("../../etc/passwd", 1, 1, "x"), successLine("a/b", 1, 1, "x"),
			`{"custom_id":"nul\u0000id","response":{"status_code":200,"body":{}}}`, "{\"custom_id\":\"bad\xff\",\"response\":{\"status_code\":200,\"body\":{}}}",
			successLine(strings.Repeat("L", 100_000), 1, 1, "x")), 6, 0, 5, 1},
		{"garbage and half lines", lines(okl(0), "\x00\x00\x00", `{"custom_id":"req-0001","response":{"status_co`, `[]`, `null`), 5, 4, 0, 1},
		{"output file of another job", other(), 12, 0, 12, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBox(t)
			f := newFlowFiles(t)
			job := jobOf(t, b.want([]int{0}, flowSteps(f)[0].args("")...))
			out := writeFile(t, "output.jsonl", c.output)
			// --force: this is about reading hostile lines, not about whose
			// ids they carry (TestIngestMinMatch).
			r := b.want([]int{0}, "ingest", "--job", job, "--output", out, "--force")
			var ing struct {
				Files []struct {
					Lines, Rows, Quarantined int64
				} `json:"files"`
			}
			decode(t, r, &ing)
			if len(ing.Files) != 1 || ing.Files[0].Lines != c.lines || ing.Files[0].Quarantined != c.quarantine || ing.Files[0].Rows+ing.Files[0].Quarantined != c.lines {
				t.Errorf("ingest read %+v, want %d lines, %d quarantined, the rest rows", ing.Files, c.lines, c.quarantine)
			}
			rep := b.reconcileReport(job)
			sum := rep.Succeeded + rep.QualityFailed + rep.FailedRetryable + rep.FailedPermanent + rep.Missing
			if rep.Expected != flowN || sum != rep.Expected || rep.Quarantined != c.quarantine || rep.Unknown != c.unknown || rep.Succeeded != c.succeeded {
				t.Errorf("report %s (outcomes sum %d); want expected %d, quarantined %d, unknown %d, succeeded %d",
					rep.counts(), sum, flowN, c.quarantine, c.unknown, c.succeeded)
			}
			b.verify()
			b.contained()
			record(t, "hostile input", "ingest: "+c.name, !t.Failed(), max(0, flowN-sum))
		})
	}
}

// reconcileReport runs reconcile and checks its exit code matches the report.
func (b *box) reconcileReport(job string) report {
	b.t.Helper()
	r := b.want([]int{0, exitPartial, exitReview}, "reconcile", "--job", job)
	var rep report
	decode(b.t, r, &rep)
	want := exitPartial
	switch {
	case rep.Unknown > 0 || rep.Duplicate > 0:
		want = exitReview
	case rep.State == "COMPLETED":
		want = 0
	}
	if r.code != want {
		b.t.Errorf("reconcile exit %d, want %d for %s", r.code, want, rep.counts())
	}
	return rep
}

// TestMillionUnknownIDs ingests an output file of 1,000,000 lines whose ids
// are all unknown to the job (200,000 unless BATCHLAKE_LONG), streamed to a temp file,
// and checks each is counted as unknown and none matched, with ingest and
// reconcile in bounded memory (peak RSS from the kernel's rusage).
func TestMillionUnknownIDs(t *testing.T) {
	n := 200_000
	if longRun() {
		n = 1_000_000
	}
	b := newBox(t)
	f := newFlowFiles(t)
	job := jobOf(t, b.want([]int{0}, flowSteps(f)[0].args("")...))
	p := filepath.Join(t.TempDir(), "unknown.jsonl")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	for i := range n {
		fmt.Fprintf(w, `{"custom_id":"unknown-%07d","response":{"status_code":200,"body":{"model":"gpt-4o-mini-2024-07-18","usage":{"prompt_tokens":1,"completion_tokens":1}}}}`+"\n", i)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	r, ingestRSS := b.exec(nil, "ingest", "--job", job, "--output", p, "--force")
	if r.code != 0 {
		t.Fatalf("ingest: %s", r)
	}
	r, recRSS := b.exec(nil, "reconcile", "--job", job)
	if r.code != exitReview {
		t.Fatalf("reconcile: want exit 11 (unknown ids), got %s", r)
	}
	var rep report
	decode(t, r, &rep)
	if rep.Unknown != int64(n) || rep.Succeeded != 0 || rep.Missing != flowN || rep.Expected != flowN {
		t.Errorf("report %s; want unknown %d, missing %d, nothing matched", rep.counts(), n, flowN)
	}
	t.Logf("%d unknown ids: peak RSS ingest %d MiB, reconcile %d MiB", n, ingestRSS>>10, recRSS>>10)
	// The file is ~140 MB at 1M lines; ingest streams it. Reconcile's peak is
	// logged, not bounded (a known issue, see docs/reliability.md).
	const limitKiB = 512 << 10
	if ingestRSS > limitKiB {
		t.Errorf("peak RSS of ingest %d MiB: over %d MiB", ingestRSS>>10, limitKiB>>10)
	}
	b.contained()
	record(t, "hostile input", fmt.Sprintf("ingest: %d unknown ids", n), !t.Failed(), 0)
}

// poisonProviders are one planned job's input and result lines per provider,
// for the poison-line cases: usage is the provider's own usage object.
var poisonProviders = []struct {
	name  string
	plan  []string // plan flags besides --input, --tenant, --prompt-version
	input func(id string) string
	line  func(id, usage string) string
	// Poison usage objects: 5e18 tokens, negative, not an integer,
	// inconsistent (cached or cache-write tokens above the prompt's).
	huge, negative, fraction, inconsistent, good string
}{{
	name:  "openai",
	input: func(id string) string { return requestLine(id, "q") },
	line: func(id, usage string) string {
		return `{"id":"x","custom_id":"` + id + `","response":{"status_code":200,"body":{"model":"gpt-4o-mini-2024-07-18","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":` + usage + `}},"error":null}`
	},
	huge:         `{"prompt_tokens":5000000000000000000,"completion_tokens":1}`,
	negative:     `{"prompt_tokens":10,"completion_tokens":-1}`,
	fraction:     `{"prompt_tokens":10.5,"completion_tokens":1}`,
	inconsistent: `{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cache_write_tokens":20}}`,
	good:         `{"prompt_tokens":1000,"completion_tokens":100}`,
}, {
	name: "anthropic",
	plan: []string{"--provider", "anthropic"},
	input: func(id string) string {
		return `{"custom_id":"` + id + `","params":{"model":"claude-sonnet-4-5-20250929","max_tokens":32,"messages":[{"role":"user","content":"q"}]}}`
	},
	line: func(id, usage string) string {
		return `{"custom_id":"` + id + `","result":{"type":"succeeded","message":{"id":"msg_1","type":"message","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":` + usage + `}}}`
	},
	huge:         `{"input_tokens":5000000000000000000,"output_tokens":1}`,
	negative:     `{"input_tokens":10,"output_tokens":-1}`,
	fraction:     `{"input_tokens":10,"output_tokens":1.5}`,
	inconsistent: `{"input_tokens":10,"output_tokens":1,"cache_creation_input_tokens":5,"cache_creation":{"ephemeral_5m_input_tokens":5,"ephemeral_1h_input_tokens":5}}`,
	good:         `{"input_tokens":1000,"output_tokens":100}`,
}, {
	name: "bedrock",
	plan: []string{"--provider", "bedrock", "--model", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "--below-min", "allow"},
	input: func(id string) string {
		return `{"recordId":"` + id + `","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":32,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}]}}`
	},
	line: func(id, usage string) string {
		return `{"recordId":"` + id + `","modelInput":{},"modelOutput":{"id":"msg_1","type":"message","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":` + usage + `}}`
	},
	huge:         `{"input_tokens":10,"output_tokens":5000000000000000000}`,
	negative:     `{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":-20}`,
	fraction:     `{"input_tokens":1e3,"output_tokens":1}`,
	inconsistent: `{"input_tokens":10,"output_tokens":1,"cache_creation_input_tokens":0,"cache_creation":{"ephemeral_1h_input_tokens":7}}`,
	good:         `{"input_tokens":1000,"output_tokens":100}`,
}, {
	name: "gemini",
	plan: []string{"--provider", "gemini", "--model", "gemini-2.5-flash"},
	input: func(id string) string {
		return `{"key":"` + id + `","request":{"contents":[{"parts":[{"text":"q"}]}]}}`
	},
	line: func(id, usage string) string {
		return `{"key":"` + id + `","response":{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":` + usage + `,"modelVersion":"gemini-2.5-flash"}}`
	},
	huge:         `{"promptTokenCount":5000000000000000000,"candidatesTokenCount":1}`,
	negative:     `{"promptTokenCount":10,"candidatesTokenCount":-1}`,
	fraction:     `{"promptTokenCount":10,"candidatesTokenCount":0.5}`,
	inconsistent: `{"promptTokenCount":10,"cachedContentTokenCount":11,"candidatesTokenCount":1}`,
	good:         `{"promptTokenCount":1000,"candidatesTokenCount":100}`,
}}

// TestHostilePoisonUsage ingests, for each provider, an output file whose
// lines report 5e18 tokens, a negative count, a fraction and cache tokens
// above the prompt's, beside one good line. Each poison line is quarantined
// with its reason and raw bytes; reconcile succeeds (no DECIMAL overflow),
// sends the four records to retry and prices nothing negative.
func TestHostilePoisonUsage(t *testing.T) {
	for _, p := range poisonProviders {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			b := newBox(t)
			ids := []string{"CALL0000000", "CALL0000001", "CALL0000002", "CALL0000003", "CALL0000004"}
			usages := []string{p.good, p.huge, p.negative, p.fraction, p.inconsistent}
			var in, out []string
			for i, id := range ids {
				in = append(in, p.input(id))
				out = append(out, p.line(id, usages[i]))
			}
			plan := append([]string{"plan", "--input", writeFile(t, "input.jsonl", lines(in...)), "--tenant", "acme", "--prompt-version", "p1"}, p.plan...)
			job := jobOf(t, b.want([]int{0}, plan...))
			b.want([]int{0}, "ingest", "--job", job, "--output", writeFile(t, "output.jsonl", lines(out...)))
			r := b.want([]int{exitPartial}, "reconcile", "--job", job)
			var rep struct {
				report
				CostUSD map[string]json.Number `json:"cost_usd"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("report: %v: %s", err, r)
			}
			if rep.Quarantined != 4 || rep.Succeeded != 1 || rep.Missing != 4 || rep.RetryRecords != 4 {
				t.Errorf("report %s; want 4 quarantined, 1 succeeded, 4 missing and retried", rep.counts())
			}
			for cat, v := range rep.CostUSD {
				if strings.HasPrefix(string(v), "-") {
					t.Errorf("cost_usd %s is negative: %s", cat, v)
				}
			}
			if n := b.sqlCount("SELECT count(*) FROM costs WHERE cost_usd < 0"); n != 0 {
				t.Errorf("%v negative cost rows", n)
			}
			// Every poison line is kept with its reason and its raw bytes.
			qr := b.want([]int{0}, "sql", "--format", "json", "SELECT line_no, reason, decode(raw) AS raw FROM quarantine ORDER BY line_no")
			var qs []struct {
				LineNo int64  `json:"line_no"`
				Reason string `json:"reason"`
				Raw    string `json:"raw"`
			}
			decode(t, qr, &qs)
			if len(qs) != 4 {
				t.Fatalf("quarantine holds %d lines, want 4: %+v", len(qs), qs)
			}
			for i, q := range qs {
				if q.LineNo != int64(i+2) || q.Raw != out[i+1] || q.Reason == "" {
					t.Errorf("quarantined line %+v; want line %d with its raw bytes %s and a reason", q, i+2, out[i+1])
				}
			}
			b.verify()
			b.contained()
			record(t, "hostile input", "poison usage: "+p.name, !t.Failed(), 0)
		})
	}
}
