package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

func openaiLine(id, model, content string) string {
	return fmt.Sprintf(`{"custom_id": %q, "method": "POST", "url": "/v1/chat/completions", "body": {"model": %q, "messages": [{"role": "user", "content": %q}], "max_tokens": 100}}`, id, model, content)
}

// keyedLine is an OpenAI request whose business key, under --key-field
// body.metadata.doc, is key.
func keyedLine(id, key string) string {
	return fmt.Sprintf(`{"custom_id": %q, "method": "POST", "url": "/v1/chat/completions", "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "metadata": {"doc": %q}}}`, id, key)
}

func writeFile(t *testing.T, name string, lines []string, eol string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, eol)+eol), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func newLake(t *testing.T) *lake.Lake {
	t.Helper()
	l, err := lake.Open(context.Background(), filepath.Join(t.TempDir(), "lake"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func keys(t *testing.T, l *lake.Lake) []string {
	t.Helper()
	k, err := l.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// lp is an independent rendering of docs/contract.md's length-prefixed sha256.
func lp(fields ...string) string {
	h := sha256.New()
	for _, f := range fields {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func opts(input string) PlanOptions {
	return PlanOptions{Provider: "openai", Input: input, Tenant: "acme", PromptVersion: "p1", SourceVersion: "s1", DatasetVersion: "d1", TmpDir: os.TempDir()}
}

func TestIdentity(t *testing.T) {
	ctx := context.Background()
	lines := []string{openaiLine("a", "gpt-4o-mini", "one"), openaiLine("b", "gpt-4o-mini", "two"), openaiLine("c", "gpt-4o-mini", "three")}
	l := newLake(t)
	res, err := Plan(ctx, l, opts(writeFile(t, "in.jsonl", lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.Records != 3 {
		t.Fatalf("plan: %+v", res)
	}

	// record_id and job_key recomputed independently from the contract.
	cfg := lp("/v1/chat/completions", `{"max_tokens":100,"model":"gpt-4o-mini"}`)
	m, err := l.GetManifest(ctx, mustDigest(t, res.JobKey))
	if err != nil {
		t.Fatal(err)
	}
	if m.GenerationConfigHash != cfg {
		t.Errorf("generation config hash %s, want %s", m.GenerationConfigHash, cfg)
	}
	in := sha256.New()
	for i, id := range []string{"a", "b", "c"} {
		body := []string{`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"one"}],"max_tokens":100}`,
			`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"two"}],"max_tokens":100}`,
			`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"three"}],"max_tokens":100}`}[i]
		req, _ := hex.DecodeString(lp("POST", "/v1/chat/completions", body))
		for _, f := range [][]byte{[]byte(id), req} {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(f)))
			in.Write(n[:])
			in.Write(f)
		}
	}
	inputHash := hex.EncodeToString(in.Sum(nil))
	if m.InputSHA256 != inputHash {
		t.Errorf("input hash %s, want %s", m.InputSHA256, inputHash)
	}
	if want := lp("acme", "d1", inputHash, "gpt-4o-mini", "p1", cfg); res.JobKey != want {
		t.Errorf("job_key %s, want %s", res.JobKey, want)
	}
	if lp("ab", "c") == lp("a", "bc") {
		t.Fatal("length prefix does not separate fields")
	}

	// The same records in another order with CRLF line ends: same job, nothing written.
	before := keys(t, l)
	shuffled := []string{lines[2], lines[0], lines[1]}
	again, err := Plan(ctx, l, opts(writeFile(t, "in2.jsonl", shuffled, "\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	if again.JobKey != res.JobKey || again.Created {
		t.Fatalf("replan: job %s created %v, want %s not created", again.JobKey, again.Created, res.JobKey)
	}
	if after := keys(t, l); len(after) != len(before) {
		t.Fatalf("replan wrote %d new keys", len(after)-len(before))
	}

	// A new prompt version gives a new job and new record ids.
	o := opts(writeFile(t, "in3.jsonl", lines, "\n"))
	o.PromptVersion = "p2"
	other, err := Plan(ctx, l, o)
	if err != nil {
		t.Fatal(err)
	}
	if other.JobKey == res.JobKey {
		t.Fatal("prompt version did not change the job key")
	}
}

// TestIdentityInOrderOrNot: an input in key order is hashed as it is read,
// any other after its records are sorted (in run files here): the same
// records give the same job and record ids either way, whatever the order.
func TestIdentityInOrderOrNot(t *testing.T) {
	var lines []string
	for i := range 300 {
		lines = append(lines, openaiLine(fmt.Sprintf("r%04d", i), "gpt-4o-mini", fmt.Sprintf("item %d", i)))
	}
	swapped := slices.Clone(lines)
	swapped[298], swapped[299] = swapped[299], swapped[298]
	shuffled := slices.Clone(lines)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var want string
	for _, c := range []struct {
		name  string
		lines []string
	}{{"in key order", lines}, {"the last two swapped", swapped}, {"shuffled", shuffled}, {"reversed", reversed(lines)}} {
		l := newLake(t)
		o := opts(writeFile(t, "in.jsonl", c.lines, "\n"))
		o.RunRecords = 16
		res, err := Plan(context.Background(), l, o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ids := expectedIDs(t, l, res.JobKey)
		got := res.JobKey + " " + strings.Join(ids, ",")
		if len(ids) != len(lines) {
			t.Fatalf("%s: %d expected rows", c.name, len(ids))
		}
		if want == "" {
			want = got
		} else if got != want {
			t.Errorf("%s: job %s and its record ids differ from the input in key order's (%s)", c.name, res.JobKey, want[:64])
		}
	}
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// expectedIDs are the record ids of a job's expected rows, sorted.
func expectedIDs(t *testing.T, l *lake.Lake, job string) []string {
	t.Helper()
	ctx := context.Background()
	m, err := l.GetManifest(ctx, mustDigest(t, job))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range m.ExpectedFiles {
		if err := lake.ReadTableFile(ctx, l, k, func(rows []lake.ExpectedRow) error {
			for _, r := range rows {
				ids = append(ids, r.CustomID+"="+r.RecordID)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestJobKeyDataset: a retry child's parent and a simulated job's provider
// are part of the dataset its key is made of, so the same
// records planned as a child, or for the simulator, are a job of their own.
func TestJobKeyDataset(t *testing.T) {
	lines := []string{openaiLine("a", "gpt-4o-mini", "one"), openaiLine("b", "gpt-4o-mini", "two")}
	for _, c := range []struct {
		name, dataset, provider string
		edit                    func(*PlanOptions)
	}{
		{"plain", "d1", "openai", nil},
		{"retry child", "d1#retry-of=parent", "openai", func(o *PlanOptions) { o.ParentJobKey, o.Attempt = "parent", 2 }},
		{"simulated", "d1#provider=sim", "sim", func(o *PlanOptions) { o.Provider = SimProvider }},
		{"simulated retry child", "d1#retry-of=parent#provider=sim", "sim", func(o *PlanOptions) {
			o.Provider, o.ParentJobKey, o.Attempt = SimProvider, "parent", 2
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLake(t)
			o := opts(writeFile(t, "in.jsonl", lines, "\n"))
			if c.edit != nil {
				c.edit(&o)
			}
			res, m := planManifest(t, l, o)
			if want := lp("acme", c.dataset, m.InputSHA256, "gpt-4o-mini", "p1", m.GenerationConfigHash); res.JobKey != want {
				t.Errorf("job_key %s, want %s (dataset %q)", res.JobKey, want, c.dataset)
			}
			if m.Provider != c.provider || m.DatasetVersion != "d1" {
				t.Errorf("manifest provider %q dataset %q, want %q and d1", m.Provider, m.DatasetVersion, c.provider)
			}
		})
	}
}

func mustDigest(t *testing.T, s string) lake.Digest {
	t.Helper()
	d, err := lake.ParseDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPlanRefusesBadInput(t *testing.T) {
	good := openaiLine("a", "gpt-4o-mini", "x")
	cases := []struct {
		name  string
		lines []string
		edit  func(*PlanOptions)
		want  []string // substrings of the error
	}{
		{"malformed line", []string{good, `{"custom_id": "b", "method": "POST",`}, nil, []string{"line 2", "not valid JSON"}},
		{"duplicate id names both lines", []string{good, openaiLine("z", "gpt-4o-mini", "y"), openaiLine("a", "gpt-4o-mini", "other")}, nil, []string{"line 3", "custom_id", `duplicate "a", first on line 1`}},
		{"duplicate id in key order", []string{good, openaiLine("b", "gpt-4o-mini", "y"), openaiLine("b", "gpt-4o-mini", "other")}, nil, []string{"line 3", "custom_id", `duplicate "b", first on line 2`}},
		{"missing custom_id", []string{`{"method": "POST", "url": "/v1/chat/completions", "body": {"model": "m"}}`}, nil, []string{"line 1", "field custom_id", "missing"}},
		{"wrong method", []string{strings.Replace(good, `"POST"`, `"GET"`, 1)}, nil, []string{"field method"}},
		{"unknown endpoint", []string{strings.Replace(good, "/v1/chat/completions", "/v1/nope", 1)}, nil, []string{"field url"}},
		{"two models", []string{good, openaiLine("b", "gpt-4o", "y")}, nil, []string{"line 2", "body.model", "one model per file"}},
		{"control character in id", []string{strings.Replace(good, `"a"`, `"a\u0001b"`, 1)}, nil, []string{"field custom_id", "control character"}},
		{"missing tenant", []string{good}, func(o *PlanOptions) { o.Tenant = "" }, []string{"--tenant"}},
		{"path in tenant", []string{good}, func(o *PlanOptions) { o.Tenant = "../etc" }, []string{"tenant"}},
		{"missing prompt version", []string{good}, func(o *PlanOptions) { o.PromptVersion = "" }, []string{"--prompt-version"}},
		{"empty file", []string{""}, nil, []string{"no requests"}},
		{"key field missing", []string{good}, func(o *PlanOptions) { o.KeyField = "body.metadata.doc" }, []string{"field body.metadata.doc", "missing"}},
		// A cut two-byte sequence (caf\xc3) in an answer's text: the
		// decoders read it as U+FFFD, the shard would carry it as it is.
		{"invalid UTF-8 in a message", []string{good, strings.Replace(openaiLine("b", "gpt-4o-mini", "caf-"), "caf-", "caf\xc3", 1)}, nil,
			[]string{"line 2", "field body.messages[0].content", "not valid UTF-8 at byte 147 of the line"}},
		{"invalid UTF-8 in a key", []string{strings.Replace(good, `"max_tokens"`, "\"max\xfftokens\"", 1)}, nil,
			[]string{"line 1", "field body.max\ufffdtokens", "not valid UTF-8"}},
		{"invalid UTF-8 in an Anthropic request", []string{`{"custom_id": "a", "params": {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "text", "text": "` + "\xe2\x82" + `"}]}]}}`},
			func(o *PlanOptions) { o.Provider = "anthropic" }, []string{"line 1", "field params.messages[0].content[0].text", "not valid UTF-8 at byte 147 of the line"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLake(t)
			o := opts(writeFile(t, "in.jsonl", c.lines, "\n"))
			if c.edit != nil {
				c.edit(&o)
			}
			_, err := Plan(context.Background(), l, o)
			if err == nil {
				t.Fatal("plan accepted bad input")
			}
			if !errors.Is(err, errkind.ErrBadInput) {
				t.Errorf("error %v is not errkind.ErrBadInput (exit 2)", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if k := keys(t, l); len(k) != 0 {
				t.Errorf("refused plan wrote %v", k)
			}
		})
	}
}

func TestPlanShardsWithinLimits(t *testing.T) {
	var lines []string
	for i := range 10 {
		lines = append(lines, openaiLine(fmt.Sprintf("r%02d", i), "gpt-4o-mini", strings.Repeat("x", rand.IntN(50))))
	}
	cases := []struct {
		name     string
		records  int
		bytes    int64
		wantRecs []int64
	}{
		{"records", 4, 0, []int64{4, 4, 2}},
		{"bytes", 0, 500, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLake(t)
			o := opts(writeFile(t, "in.jsonl", lines, "\n"))
			o.ShardMaxRecords, o.ShardMaxBytes = c.records, c.bytes
			res, err := Plan(context.Background(), l, o)
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			for i, s := range res.Shards {
				total += s.Records
				if c.wantRecs != nil && s.Records != c.wantRecs[i] {
					t.Errorf("shard %d has %d records, want %d", i, s.Records, c.wantRecs[i])
				}
				if c.bytes > 0 && s.Bytes > c.bytes {
					t.Errorf("shard %s is %d bytes, over %d", s.ShardID, s.Bytes, c.bytes)
				}
			}
			if total != 10 {
				t.Errorf("shards hold %d records, want 10", total)
			}
			if c.wantRecs != nil && len(res.Shards) != len(c.wantRecs) {
				t.Errorf("%d shards, want %d", len(res.Shards), len(c.wantRecs))
			}
		})
	}
}

// planManifest plans o in l and returns the result and the job's manifest.
func planManifest(t *testing.T, l *lake.Lake, o PlanOptions) (*PlanResult, *lake.Manifest) {
	t.Helper()
	ctx := context.Background()
	res, err := Plan(ctx, l, o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := l.GetManifest(ctx, mustDigest(t, res.JobKey))
	if err != nil {
		t.Fatal(err)
	}
	return res, m
}

// planOne plans a job of one record (custom_id "a") in l.
func planOne(t *testing.T, l *lake.Lake) *lake.Manifest {
	t.Helper()
	ctx := context.Background()
	res, err := Plan(ctx, l, opts(writeFile(t, "in.jsonl", []string{openaiLine("a", "gpt-4o-mini", "x")}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	m, err := l.GetManifest(ctx, mustDigest(t, res.JobKey))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestIngestQuarantinesAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	l := newLake(t)
	m := planOne(t, l)
	out := writeFile(t, "out.jsonl", []string{
		"\ufeff" + `{"id":"r1","custom_id":"a","response":{"status_code":200,"request_id":"q","body":{"model":"gpt-4o-mini-2024-07-18","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}},"error":null}`,
		`{"id":"r2","custom_id":"b","response":`,
		`{"id":"r3","response":null,"error":{"code":"batch_expired","message":"x"}}`,
		strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
	}, "\r\n")
	fr, err := IngestFile(ctx, l, m, FileOptions{Path: out, Channel: ChannelOutput})
	if err != nil {
		t.Fatal(err)
	}
	if fr.Lines != 4 || fr.Rows != 1 || fr.Quarantined != 3 || !fr.Created {
		t.Fatalf("ingest: %+v, want 4 lines, 1 row, 3 quarantined", fr)
	}
	before := keys(t, l)
	again, err := IngestFile(ctx, l, m, FileOptions{Path: out, Channel: ChannelOutput})
	if err != nil {
		t.Fatal(err)
	}
	if again.Created || again.Rows != 1 {
		t.Fatalf("second ingest: %+v", again)
	}
	if after := keys(t, l); len(after) != len(before) {
		t.Fatalf("second ingest wrote %d keys", len(after)-len(before))
	}
}

// TestIngestHashedWhileParsed: every attempt and quarantine row carries the
// file's digest however far the parse got before the hash was known (from
// the start, or only after the last line: the attempts table is given it
// when it is committed, split into buckets or not);
// a file that grew after it was hashed (a caller's stale FileOptions.Hash)
// fails with no ingest record, and is ingested under its new digest when
// given again.
func TestIngestHashedWhileParsed(t *testing.T) {
	ctx := context.Background()
	line := func(id string) string {
		return `{"id":"r1","custom_id":"` + id + `","response":{"status_code":200,"request_id":"q","body":{"model":"gpt-4o-mini-2024-07-18","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}},"error":null}`
	}
	// 5,000 lines: several batches of rows.
	var lines []string
	for i := range 5000 {
		lines = append(lines, line(fmt.Sprintf("a%d", i)))
	}
	lines = append(lines, `{"id":"broken"`)
	out := writeFile(t, "out.jsonl", lines, "\n")
	want, size, err := lake.HashFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// ready returns a Hashing that is known once release is closed.
	ready := func(release chan struct{}) *Hashing {
		h := &Hashing{done: make(chan struct{}), d: want, n: size}
		go func() { <-release; close(h.done) }()
		return h
	}
	for _, c := range []struct {
		name  string
		hash  func(release chan struct{}) *Hashing
		split bool
	}{
		{"own", func(chan struct{}) *Hashing { return nil }, false},
		{"known-before", func(r chan struct{}) *Hashing { close(r); return ready(r) }, false},
		{"known-after", ready, false},
		{"known-after, split", ready, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLake(t)
			m := planOne(t, l)
			if c.split {
				// The job's expected rows and attempts as a large job's:
				// in buckets (the expected rows stay one file, which the
				// attempts' split does not read), the file's attempts
				// split as a large file's are.
				m.ExpectedSplit = lake.SplitBuckets
			}
			release := make(chan struct{})
			h := c.hash(release)
			var fr FileResult
			done := make(chan error, 1)
			go func() {
				var err error
				fr, err = IngestFile(ctx, l, m, FileOptions{Path: out, Channel: ChannelOutput, Hash: h, SplitMinBytes: -1})
				done <- err
			}()
			// The digest comes once the parse is over: the ingest waits
			// for it then, or at the bound.
			time.Sleep(50 * time.Millisecond)
			select {
			case <-release:
			default:
				close(release)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if fr.RawSHA256 != want.Hex() || fr.Rows != 5000 || fr.Quarantined != 1 || !fr.Created {
				t.Fatalf("ingest: %+v; want raw %s, 5000 rows, 1 quarantined", fr, want.Hex())
			}
			rec := ingestRecord(t, l, m, want)
			if files := len(rec.AttemptKeys()); c.split != (files > 1) {
				t.Fatalf("%d attempts files, split %v", files, c.split)
			}
			n := 0
			for _, k := range rec.AttemptKeys() {
				if err := lake.ReadTableFile(ctx, l, k, func(rows []lake.AttemptRow) error {
					for _, r := range rows {
						if n++; r.RawSHA256 != want.Hex() {
							t.Fatalf("line %d: raw_sha256 %q, want %s", r.LineNo, r.RawSHA256, want.Hex())
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			if n != 5000 {
				t.Errorf("%d attempt rows, want 5000", n)
			}
			if err := lake.ReadTableFile(ctx, l, rec.QuarantineFile, func(rows []lake.QuarantineRow) error {
				for _, r := range rows {
					if r.RawSHA256 != want.Hex() || r.LineNo != 5001 {
						t.Errorf("quarantined line %d: raw_sha256 %q", r.LineNo, r.RawSHA256)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("grown", func(t *testing.T) {
		l := newLake(t)
		m := planOne(t, l)
		out := writeFile(t, "out.jsonl", []string{line("a")}, "\n")
		stale := HashAsync(ctx, out)
		before, size, err := stale.Wait()
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(out, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(line("b") + "\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		_, err = IngestFile(ctx, l, m, FileOptions{Path: out, Channel: ChannelOutput, Hash: stale})
		var usage *errkind.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), fmt.Sprintf("changed while it was ingested (%d bytes hashed, %d parsed)", size, 2*size)) {
			t.Fatalf("grown after it was hashed: %v; want a usage error naming both sizes", err)
		}
		job := mustDigest(t, m.JobKey)
		if recs, err := l.List(ctx, lake.IngestPrefix(job)); err != nil || len(recs) != 0 {
			t.Fatalf("ingest records after the failure: %v, %v", recs, err)
		}
		fr, err := IngestFile(ctx, l, m, FileOptions{Path: out, Channel: ChannelOutput})
		if err != nil {
			t.Fatal(err)
		}
		now, _, err := lake.HashFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if fr.RawSHA256 != now.Hex() || fr.RawSHA256 == before.Hex() || fr.Rows != 2 || !fr.Created {
			t.Errorf("ingested again: %+v; want raw %s, 2 rows, created", fr, now.Hex())
		}
		if b, err := l.GetObject(ctx, now); err != nil || int64(len(b)) != 2*size {
			t.Errorf("the grown file's archive: %d bytes, %v", len(b), err)
		}
	})
}

// ingestRecord reads the ingest record of the output file of digest raw.
func ingestRecord(t *testing.T, l *lake.Lake, m *lake.Manifest, raw lake.Digest) *lake.IngestRecord {
	t.Helper()
	var rec lake.IngestRecord
	if err := l.GetJSON(context.Background(), lake.IngestKey(mustDigest(t, m.JobKey), ChannelOutput, raw), lake.FormatIngest, &rec); err != nil {
		t.Fatal(err)
	}
	return &rec
}

// TestIngestOwnedFileLinked: a download of collect (Owned, made by
// lake.CreateTemp) becomes the raw archive itself in a local lake; anyone
// else's file is copied, so that changing it later cannot change the lake.
func TestIngestOwnedFileLinked(t *testing.T) {
	ctx := context.Background()
	for _, owned := range []bool{false, true} {
		t.Run(fmt.Sprintf("owned=%v", owned), func(t *testing.T) {
			l := newLake(t)
			m := planOne(t, l)
			f, err := lake.CreateTemp(t.TempDir(), "collect-*.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"id":"r1","custom_id":"a","response":{"status_code":200,"request_id":"q","body":{"model":"gpt-4o-mini-2024-07-18","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}},"error":null}` + "\n")
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			fr, err := IngestFile(ctx, l, m, FileOptions{Path: f.Name(), Owned: owned, Channel: ChannelOutput})
			if err != nil || fr.Rows != 1 {
				t.Fatalf("ingest: %+v, %v", fr, err)
			}
			src, err := os.Stat(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			obj, err := os.Stat(l.LocalPath(lake.ObjectKey(mustDigest(t, fr.RawSHA256))))
			if err != nil {
				t.Fatal(err)
			}
			if got := os.SameFile(src, obj); got != owned {
				t.Errorf("raw archive is the ingested file itself: %v, want %v", got, owned)
			}
		})
	}
}

// TestPlanFileAndShardDigests: the input file's digest and each shard's,
// taken together as the shards are written, are the SHA-256 of the file's
// bytes and of each shard's, whatever the line ends, blank lines, a BOM, a
// last line without its newline, an input out of key order part way, and
// shards and chunks (a MiB each) that end mid-way through one another.
func TestPlanFileAndShardDigests(t *testing.T) {
	var lines []string
	for i := range 2500 {
		lines = append(lines, openaiLine(fmt.Sprintf("r%05d", i), "gpt-4o-mini", strings.Repeat("x", 300+i%700)))
	}
	join := func(ls []string, eol string) string { return strings.Join(ls, eol) + eol }
	swapped := slices.Clone(lines)
	swapped[2000], swapped[2001] = swapped[2001], swapped[2000]
	var blanks strings.Builder
	for i, l := range lines {
		blanks.WriteString(l + "\n")
		if i%97 == 0 {
			blanks.WriteString("\n  \t\n")
		}
	}
	long := slices.Clone(lines)
	long[1200] = openaiLine("r01200", "gpt-4o-mini", strings.Repeat("y", 3<<19))
	mixed := ""
	for i, l := range lines {
		mixed += l + []string{"\n", "\r\n", "\n"}[i%3]
	}
	// Each input, and the records' lines in key order that its shards hold.
	for _, c := range []struct {
		name, data string
		lines      []string
	}{
		{"LF", join(lines, "\n"), lines},
		{"CRLF", join(lines, "\r\n"), lines},
		{"LF and CRLF", mixed, lines},
		{"blank lines", blanks.String(), lines},
		{"BOM", "\xEF\xBB\xBF" + join(lines, "\n"), lines},
		{"no last newline", strings.TrimSuffix(join(lines, "\n"), "\n"), lines},
		{"no last newline, CR", strings.TrimSuffix(join(lines, "\r\n"), "\n"), lines},
		{"out of order late", join(swapped, "\n"), lines},
		{"a line longer than a chunk", join(long, "\n"), long},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLake(t)
			p := filepath.Join(t.TempDir(), "in.jsonl")
			if err := os.WriteFile(p, []byte(c.data), 0o644); err != nil {
				t.Fatal(err)
			}
			o := opts(p)
			o.ShardMaxRecords = 333
			_, m := planManifest(t, l, o)
			if want := sha256.Sum256([]byte(c.data)); m.InputFileSHA256 != hex.EncodeToString(want[:]) {
				t.Errorf("input file digest %s, want %x", m.InputFileSHA256, want)
			}
			var all strings.Builder
			for _, s := range m.Shards {
				b, err := os.ReadFile(l.LocalPath(lake.ObjectKey(s.Object)))
				if err != nil {
					t.Fatal(err)
				}
				if lake.Digest(sha256.Sum256(b)) != s.Object {
					t.Errorf("shard %s: named %s, its bytes hash to %x", s.ShardID, s.Object.Hex(), sha256.Sum256(b))
				}
				all.Write(b)
			}
			if got, want := all.String(), join(c.lines, "\n"); got != want {
				t.Errorf("the shards hold %d bytes, not the %d of the records' lines in key order", len(got), len(want))
			}
		})
	}
}

// TestHexArena: digests' hex strings carved from shared blocks equal
// Digest.Hex, and stay so as later strings fill the block and the next.
func TestHexArena(t *testing.T) {
	var a hexArena
	var ds []lake.Digest
	var hs []string
	for i := range 3000 { // about three blocks of 1,024
		d := lake.Digest(sha256.Sum256([]byte(fmt.Sprint(i))))
		ds, hs = append(ds, d), append(hs, a.of(d))
	}
	for i, d := range ds {
		if hs[i] != d.Hex() {
			t.Fatalf("digest %d: %q, want %q", i, hs[i], d.Hex())
		}
	}
}

// TestPlanKeepsBusinessKeyRange: the manifest keeps the least and the
// greatest business key of the job's expected rows, whichever way plan
// reads the input (in key order and written as read, sorted in memory or in
// run files, keyed by another field than the custom id).
func TestPlanKeepsBusinessKeyRange(t *testing.T) {
	var lines, keyed []string
	for i := range 60 {
		lines = append(lines, openaiLine(fmt.Sprintf("r%04d", i), "gpt-4o-mini", fmt.Sprintf("item %d", i)))
		// The custom ids run down while the keys run up, and the keys'
		// byte order is not their numbers' (k10 before k9).
		keyed = append(keyed, keyedLine(fmt.Sprintf("c%02d", 59-i), fmt.Sprintf("k%d", i)))
	}
	shuffled := slices.Clone(lines)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, c := range []struct {
		name  string
		lines []string
		edit  func(*PlanOptions)
		want  lake.KeyRange
	}{
		{"in key order", lines, nil, lake.KeyRange{First: "r0000", Last: "r0059"}},
		{"in key order, split", lines, func(o *PlanOptions) { o.SplitMinRecords = 20 }, lake.KeyRange{First: "r0000", Last: "r0059"}},
		{"shuffled, in run files", shuffled, func(o *PlanOptions) { o.RunRecords = 16 }, lake.KeyRange{First: "r0000", Last: "r0059"}},
		{"reversed", reversed(lines), nil, lake.KeyRange{First: "r0000", Last: "r0059"}},
		{"keyed by another field", keyed, func(o *PlanOptions) { o.KeyField, o.RunRecords = "body.metadata.doc", 16 }, lake.KeyRange{First: "k0", Last: "k9"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			l := newLake(t)
			o := opts(writeFile(t, "in.jsonl", c.lines, "\n"))
			if c.edit != nil {
				c.edit(&o)
			}
			_, m := planManifest(t, l, o)
			var keys []string
			for _, k := range m.ExpectedFiles {
				if err := lake.ReadTableFile(ctx, l, k, func(rows []lake.ExpectedRow) error {
					for _, r := range rows {
						keys = append(keys, r.BusinessKey)
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			if len(keys) != len(c.lines) || slices.Min(keys) != c.want.First || slices.Max(keys) != c.want.Last {
				t.Fatalf("%d expected rows, keys %s to %s; the test wants %d, %s to %s", len(keys), slices.Min(keys), slices.Max(keys), len(c.lines), c.want.First, c.want.Last)
			}
			if m.BusinessKeys == nil || *m.BusinessKeys != c.want {
				t.Errorf("manifest business_keys %+v, want %+v", m.BusinessKeys, c.want)
			}
		})
	}
}
