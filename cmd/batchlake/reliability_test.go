package main

// Helpers of the hostile-conditions suites: a sandboxed runner that proves
// nothing is written outside the lake, a snapshot of a lake to compare
// two runs, a local plan -> ingest -> reconcile -> retry flow, and the
// reliability tally (BATCHLAKE_RELIABILITY_OUT) behind docs/reliability.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batchlake/batchlake/internal/fakeopenai"
)

// longRun is true under `make reliability` (BATCHLAKE_LONG=1).
func longRun() bool { return os.Getenv("BATCHLAKE_LONG") != "" }

// ---- the tally ---------------------------------------------------------------

// tally is one fault class's figures, appended as a JSON line to
// $BATCHLAKE_RELIABILITY_OUT (cmd/blreliability turns the file into
// docs/reliability.md).
type tally struct {
	Suite    string `json:"suite"`
	Class    string `json:"class"`
	Injected int    `json:"injected"`
	Survived int    `json:"survived"`
	Lost     int64  `json:"records_lost"`
}

var tallyMu sync.Mutex

// record adds one fault of class to the tally file: survived when the test
// found the outcome correct, lost the records it found missing.
func record(t *testing.T, suite, class string, survived bool, lost int64) {
	t.Helper()
	p := os.Getenv("BATCHLAKE_RELIABILITY_OUT")
	if p == "" {
		return
	}
	s := 0
	if survived && !t.Failed() {
		s = 1
	}
	b, _ := json.Marshal(tally{Suite: suite, Class: class, Injected: 1, Survived: s, Lost: lost})
	tallyMu.Lock()
	defer tallyMu.Unlock()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("tally: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Errorf("tally: %v", err)
	}
}

// ---- a sandboxed runner ------------------------------------------------------

// box runs batchlake with its working directory and HOME in an empty folder,
// so a write outside the lake and the --tmp-dir shows up as a file there.
type box struct {
	*harness
	cwd string
}

func newBox(t *testing.T) *box {
	t.Helper()
	return &box{harness: newHarness(t, fakeopenai.Options{Seed: 1}), cwd: t.TempDir()}
}

// exec runs batchlake (at most two minutes) and returns its result and peak RSS in KiB.
func (b *box) exec(env []string, args ...string) (result, int64) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{args[0], "--lake", b.lake, "--tmp-dir", b.tmp, "--progress", "never", "--log-format", "json", "--threads", "1"}, args[1:]...)
	cmd := exec.CommandContext(ctx, b.bin, full...)
	cmd.Env = b.env(append([]string{"HOME=" + b.cwd, "XDG_CACHE_HOME=" + filepath.Join(b.cwd, ".cache")}, env...)...)
	cmd.Dir = b.cwd
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	r := b.wait(cmd, &stdout, &stderr, args)
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss
	}
	if strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine ") {
		b.t.Errorf("batchlake panicked: %s", r)
	}
	return r, rss
}

func (b *box) do(args ...string) result {
	b.t.Helper()
	r, _ := b.exec(nil, args...)
	return r
}

// want runs batchlake and fails the test unless it exits with one of codes.
func (b *box) want(codes []int, args ...string) result {
	b.t.Helper()
	r := b.do(args...)
	if r.killed || !slices.Contains(codes, r.code) {
		b.t.Fatalf("want exit %v, got %s", codes, r)
	}
	return r
}

// contained checks that nothing was written outside the lake: the sandbox
// folder is empty and every temporary file was removed.
func (b *box) contained() {
	b.t.Helper()
	for _, dir := range []string{b.cwd, b.tmp} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b.t.Errorf("file written outside the lake: %s", p)
			}
			return nil
		})
	}
	// And inside the lake only the layout's areas.
	entries, _ := os.ReadDir(b.lake)
	for _, e := range entries {
		switch e.Name() {
		case "objects", "tables", "manifests", "ingests", "reports", "ledger", "partitions", "retractions":
		default:
			b.t.Errorf("unexpected top-level name in the lake: %s", e.Name())
		}
	}
}

// verify runs `batchlake verify` and requires exit 0.
func (b *box) verify() {
	b.t.Helper()
	if r := b.do("verify"); r.code != 0 {
		b.t.Errorf("verify: %s", r)
	}
}

// ---- inputs ------------------------------------------------------------------

// writeFile writes content to a fresh file named name.
func writeFile(t *testing.T, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func requestLine(id, content string) string {
	b, _ := json.Marshal(map[string]any{
		"custom_id": id, "method": "POST", "url": "/v1/chat/completions",
		"body": map[string]any{"model": "gpt-4o-mini-2024-07-18", "max_tokens": 64,
			"messages": []map[string]string{{"role": "user", "content": content}}},
	})
	return string(b)
}

func successLine(id string, in, out int64, text string) string {
	b, _ := json.Marshal(map[string]any{
		"id": "batch_req_" + id, "custom_id": id,
		"response": map[string]any{"status_code": 200, "request_id": "req_" + id, "body": map[string]any{
			"object": "chat.completion", "model": "gpt-4o-mini-2024-07-18",
			"choices": []map[string]any{{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": text}}},
			"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}}},
		"error": nil,
	})
	return string(b)
}

func failureLine(id string, status int, code string) string {
	b, _ := json.Marshal(map[string]any{
		"id": "batch_req_" + id, "custom_id": id,
		"response": map[string]any{"status_code": status, "request_id": "req_" + id, "body": map[string]any{
			"error": map[string]any{"message": "failed: " + code, "type": code, "code": code}}},
		"error": nil,
	})
	return string(b)
}

func errorFileLine(id, code string) string {
	b, _ := json.Marshal(map[string]any{"id": "batch_req_" + id, "custom_id": id, "response": nil,
		"error": map[string]any{"code": code, "message": "batch ended: " + code}})
	return string(b)
}

// flowFiles is the input of the local flow and the provider files answering it.
type flowFiles struct{ input, output, errors string }

// flowN records, flowPer per shard: 3 shards.
const flowN, flowPer = 12, 5

// newFlowFiles: of req-0000…req-0011, i%4==0 and 3 succeed, i%4==1 fail
// retryably in the output, i%4==2 are missing except req-0002 (error file,
// batch_expired); req-0003 has a duplicate line and "ghost-1" is unknown, so
// reconcile writes a retry shard and exits 11, and every report count is non-zero.
func newFlowFiles(t *testing.T) flowFiles {
	t.Helper()
	var in, out strings.Builder
	for i := range flowN {
		id := fmt.Sprintf("req-%04d", i)
		in.WriteString(requestLine(id, fmt.Sprintf("Summarise item %d in one line.", i)) + "\n")
		switch i % 4 {
		case 0, 3:
			out.WriteString(successLine(id, int64(100+i), int64(20+i), fmt.Sprintf("item %d", i)) + "\n")
		case 1:
			out.WriteString(failureLine(id, 500, "server_error") + "\n")
		}
	}
	out.WriteString(successLine("req-0003", 103, 23, "item 3 again") + "\n")
	out.WriteString(successLine("ghost-1", 5, 5, "who am I") + "\n")
	out.WriteString("{not json\n") // one quarantined line
	return flowFiles{
		input:  writeFile(t, "input.jsonl", []byte(in.String())),
		output: writeFile(t, "output.jsonl", []byte(out.String())),
		errors: writeFile(t, "errors.jsonl", []byte(errorFileLine("req-0002", "batch_expired")+"\n")),
	}
}

// flowJob is the job key of the flow's input (planned identically everywhere).
type flowStep struct {
	name string
	args func(job string) []string
	ok   []int // exit codes of a successful run
}

func flowSteps(f flowFiles) []flowStep {
	return []flowStep{
		{"plan", func(string) []string {
			return []string{"plan", "--input", f.input, "--tenant", "acme", "--prompt-version", "p1", "--shard-max-records", fmt.Sprint(flowPer)}
		}, []int{0}},
		{"ingest", func(job string) []string {
			return []string{"ingest", "--job", job, "--output", f.output, "--errors", f.errors}
		}, []int{0}},
		{"reconcile", func(job string) []string {
			return []string{"reconcile", "--job", job, "--lease", "1s"}
		}, []int{exitReview}},
		{"retry", func(job string) []string { return []string{"retry", "--job", job} }, []int{0}},
	}
}

// jobOf plans nothing: it reads the job key from a plan's stdout.
func jobOf(t *testing.T, r result) string {
	t.Helper()
	var p planOut
	decode(t, r, &p)
	if len(p.JobKey) != 64 {
		t.Fatalf("plan printed no job key: %s", r)
	}
	return p.JobKey
}

// runStep runs a step until it succeeds, waiting out a lease a crashed or
// concurrent run left (exit 75, try later, naming the lease), for at most 20 s.
func (b *box) runStep(s flowStep, job string) result {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := b.do(s.args(job)...)
		if !r.killed && slices.Contains(s.ok, r.code) {
			return r
		}
		busy := strings.Contains(r.stderr, "leased") || strings.Contains(r.stderr, "another writer won")
		if r.code != exitTempFail || !busy || time.Now().After(deadline) {
			b.t.Fatalf("step %s: %s", s.name, r)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// ---- snapshots ---------------------------------------------------------------

// snapshot is what two runs of the same work must agree on.
type snapshot struct {
	keys     []string          // every key outside ledger/ (content-addressed or derived)
	bodies   map[string]string // marker key -> body without timestamps
	final    map[string]string // ledger job/shard -> last state
	expected int64             // sum of manifests' expected_records
	rows     int64             // sum of ingest records' rows
	reports  map[string]int    // job -> number of reports
}

var timeFields = []string{"created_at", "ingested_at", "reconciled_at"}

func takeSnapshot(t *testing.T, lakeDir string) snapshot {
	t.Helper()
	s := snapshot{bodies: map[string]string{}, final: map[string]string{}, reports: map[string]int{}}
	lastSeq := map[string]string{}
	err := filepath.WalkDir(lakeDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		key := filepath.ToSlash(strings.TrimPrefix(p, lakeDir+string(filepath.Separator)))
		area, rest, _ := strings.Cut(key, "/")
		if area == "ledger" {
			dir, name := filepath.Split(rest)
			if strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".") && name > lastSeq[dir] {
				lastSeq[dir] = name
			}
			return nil
		}
		s.keys = append(s.keys, key)
		if area != "manifests" && area != "ingests" && area != "reports" {
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var env struct {
			Body map[string]any `json:"body"`
		}
		if err := json.Unmarshal(raw, &env); err != nil {
			t.Errorf("marker %s: %v", key, err)
			return nil
		}
		for _, f := range timeFields {
			delete(env.Body, f)
		}
		delete(env.Body, "unchanged")
		nb, _ := json.Marshal(env.Body)
		s.bodies[key] = string(nb)
		switch area {
		case "manifests":
			n, _ := env.Body["expected_records"].(float64)
			s.expected += int64(n)
		case "ingests":
			n, _ := env.Body["rows"].(float64)
			s.rows += int64(n)
		case "reports":
			s.reports[strings.Split(rest, "/")[0]]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, name := range lastSeq {
		raw, err := os.ReadFile(filepath.Join(lakeDir, "ledger", dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Body struct {
				State string `json:"state"`
			} `json:"body"`
		}
		if err := json.Unmarshal(raw, &env); err != nil {
			t.Fatalf("ledger %s%s: %v", dir, name, err)
		}
		s.final[strings.TrimSuffix(dir, "/")] = env.Body.State
	}
	sort.Strings(s.keys)
	return s
}

// diff lists how got differs from want, and how many records got lost
// (expected records or ingested rows fewer than in want).
func (want snapshot) diff(got snapshot) (problems []string, lost int64) {
	wk, gk := map[string]bool{}, map[string]bool{}
	for _, k := range want.keys {
		wk[k] = true
	}
	for _, k := range got.keys {
		gk[k] = true
		if !wk[k] {
			problems = append(problems, "extra key "+k)
		}
	}
	for _, k := range want.keys {
		if !gk[k] {
			problems = append(problems, "missing key "+k)
		}
	}
	for k, b := range want.bodies {
		if g, ok := got.bodies[k]; ok && g != b {
			problems = append(problems, fmt.Sprintf("marker %s differs:\n got %s\nwant %s", k, g, b))
		}
	}
	for k, st := range want.final {
		if got.final[k] != st {
			problems = append(problems, fmt.Sprintf("ledger %s ends in %q, want %q", k, got.final[k], st))
		}
	}
	if len(got.final) != len(want.final) {
		problems = append(problems, fmt.Sprintf("%d ledger shards, want %d", len(got.final), len(want.final)))
	}
	for j, n := range got.reports {
		if n != want.reports[j] {
			problems = append(problems, fmt.Sprintf("job %s has %d reports, want %d", j, n, want.reports[j]))
		}
	}
	lost = max(0, want.expected-got.expected) + max(0, want.rows-got.rows)
	return problems, lost
}

// sqlCount runs a one-number query in the box.
func (b *box) sqlCount(q string, extra ...string) float64 {
	b.t.Helper()
	r := b.want([]int{0}, append(append([]string{"sql", "--format", "json"}, extra...), q)...)
	var rows []map[string]any
	decode(b.t, r, &rows)
	if len(rows) != 1 || len(rows[0]) != 1 {
		b.t.Fatalf("%s: want one value, got %v", q, rows)
	}
	for _, v := range rows[0] {
		switch x := v.(type) {
		case float64:
			return x
		case string:
			var f float64
			fmt.Sscan(x, &f)
			return f
		case nil:
			return 0
		}
	}
	return 0
}
