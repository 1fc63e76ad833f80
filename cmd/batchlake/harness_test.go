package main

// Process-level test harness: the batchlake command runs as a subprocess
// against an in-test fake OpenAI server (real HTTP on loopback) and a lake in
// a temp folder, exactly as an orchestrator runs it. The subprocess is this
// test binary itself, started under the name batchlake: TestMain then runs
// the CLI's main (os.Exit(run(args))) instead of the tests, so every process
// test shares the binary go test already linked, and no second link of the
// DuckDB binary is paid per test run.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/lake/failpoint"
	"github.com/batchlake/batchlake/providers"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

// cliName is the name the process tests start this test binary under; the
// test binary itself is batchlake.test.
const cliName = "batchlake"

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == cliName {
		main()
	}
	// The tests call run, not main.
	started()
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	if demoRuns.root != "" {
		os.RemoveAll(demoRuns.root)
	}
	os.Exit(code)
}

// binary is the batchlake command the process tests run: a symbolic link
// named batchlake to this test binary (TestMain), made once per test run.
// BATCHLAKE_TEST_BIN names a binary built by go build instead, to run the
// process tests against a release build.
//
// Under -short every test that runs it is skipped: each step is a process
// that opens the lake and DuckDB anew, which makes these suites the slow
// part of the tests by nature; the full run (make test) covers them.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs batchlake as a subprocess per step (make test runs it)")
	}
	buildOnce.Do(func() {
		if p := os.Getenv("BATCHLAKE_TEST_BIN"); p != "" {
			binPath = p
			return
		}
		self, err := os.Executable()
		if err != nil {
			buildErr = fmt.Errorf("the test binary: %w", err)
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "batchlake-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, cliName)
		buildErr = os.Symlink(self, binPath)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// harness is one lake, one fake provider and the batchlake binary.
type harness struct {
	t    *testing.T
	bin  string
	srv  *fakeopenai.Server
	url  string
	key  string
	lake string
	tmp  string

	mu   sync.Mutex
	logs [][]byte // every stdout and stderr, for the secrets check
}

// result is one finished batchlake process.
type result struct {
	args   []string
	code   int  // exit code; -1 when killed
	killed bool // died of SIGKILL
	stdout string
	stderr string
}

func (r result) String() string {
	return fmt.Sprintf("batchlake %s: exit %d killed=%v\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, r.killed, r.stdout, r.stderr)
}

// secretKey looks like a real project key, so a leak is unmistakable.
func secretKey(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "sk-proj-" + hex.EncodeToString(b)
}

// newHarness starts a fake server with opts (its key is replaced by a fresh
// secret) and an empty lake. At cleanup it checks that the key appears in no
// output of any command and in no file of the lake.
func newHarness(t *testing.T, opts fakeopenai.Options) *harness {
	t.Helper()
	h := &harness{t: t, bin: binary(t), key: secretKey(t), lake: t.TempDir(), tmp: t.TempDir()}
	opts.APIKey = h.key
	h.srv = fakeopenai.New(opts)
	url, err := h.srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	h.url = url
	t.Cleanup(func() {
		h.srv.Close()
		h.checkSecrets()
	})
	return h
}

// env is the subprocess environment: ours, minus anything that could point
// batchlake elsewhere, plus the fake provider's endpoint and key.
func (h *harness) env(extra ...string) []string {
	env := environWithout("OPENAI_", "BATCHLAKE_")
	env = append(env, "OPENAI_API_KEY="+h.key, "OPENAI_BASE_URL="+h.url)
	// The submit protocol's timings, small so that takeovers happen in test
	// time: a takeover margin past an expired lease, no lookups of its own
	// after a lost create (the next process looks up, as before), a short
	// settle. Tests of these timings override them in extra.
	env = append(env, "BATCHLAKE_TAKEOVER_MARGIN=200ms", "BATCHLAKE_LOST_LOOKUP=0s", "BATCHLAKE_SETTLE=200ms")
	return append(env, extra...)
}

// start launches batchlake with the lake flags and extra environment.
// environWithout is this process's environment without the variables whose
// names begin with one of prefixes.
func environWithout(prefixes ...string) []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) })
	})
}

func (h *harness) start(ctx context.Context, extraEnv []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	h.t.Helper()
	full := append([]string{args[0], "--lake", h.lake, "--tmp-dir", h.tmp, "--progress", "never", "--log-format", "json", "--threads", "1"}, args[1:]...)
	cmd := exec.CommandContext(ctx, h.bin, full...)
	cmd.Env = h.env(extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	return cmd, &stdout, &stderr
}

func (h *harness) wait(cmd *exec.Cmd, stdout, stderr *bytes.Buffer, args []string) result {
	err := cmd.Wait()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	h.mu.Lock()
	h.logs = append(h.logs, stdout.Bytes(), stderr.Bytes())
	h.mu.Unlock()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			r.killed = true
		}
	default:
		h.t.Fatalf("batchlake %v: %v", args, err)
	}
	return r
}

// runEnv runs batchlake to its end (at most a minute) with extra environment.
func (h *harness) runEnv(extraEnv []string, args ...string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, stdout, stderr := h.start(ctx, extraEnv, args...)
	return h.wait(cmd, stdout, stderr, args)
}

func (h *harness) run(args ...string) result {
	h.t.Helper()
	return h.runEnv(nil, args...)
}

// must runs batchlake and fails the test unless it exits with one of codes.
func (h *harness) must(codes []int, args ...string) result {
	h.t.Helper()
	r := h.run(args...)
	for _, c := range codes {
		if r.code == c && !r.killed {
			return r
		}
	}
	h.t.Fatalf("want exit %v, got %s", codes, r)
	return r
}

// crash runs batchlake with a failpoint armed and requires it to die of SIGKILL.
func (h *harness) crash(fp string, args ...string) result {
	h.t.Helper()
	r := h.runEnv([]string{failpoint.EnvVar + "=" + fp}, args...)
	if !r.killed {
		h.t.Fatalf("failpoint %s: want the process killed, got %s", fp, r)
	}
	return r
}

// lifecycle args for a step of job against the fake provider.
func lifecycleArgs(step, job string, extra ...string) []string {
	return append([]string{step, "--provider", "openai", "--job", job}, extra...)
}

// writeInput writes n OpenAI chat requests with custom ids req-0000…
func (h *harness) writeInput(n int) string {
	h.t.Helper()
	var b strings.Builder
	for i := range n {
		line, _ := json.Marshal(map[string]any{
			"custom_id": fmt.Sprintf("req-%04d", i), "method": "POST", "url": "/v1/chat/completions",
			"body": map[string]any{"model": "gpt-4o-mini-2024-07-18", "max_tokens": 64,
				"messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("Summarise item %d in one line.", i)}}},
		})
		b.Write(line)
		b.WriteByte('\n')
	}
	p := filepath.Join(h.t.TempDir(), "input.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		h.t.Fatal(err)
	}
	return p
}

type planOut struct {
	JobKey  string `json:"job_key"`
	Records int64  `json:"records"`
	Shards  []struct {
		ShardID string `json:"shard_id"`
		Records int64  `json:"records"`
	} `json:"shards"`
}

// plan plans n records into shards of perShard.
func (h *harness) plan(n, perShard int) planOut {
	h.t.Helper()
	r := h.must([]int{0}, "plan", "--input", h.writeInput(n), "--tenant", "acme", "--prompt-version", "p1",
		"--shard-max-records", fmt.Sprint(perShard))
	var p planOut
	decode(h.t, r, &p)
	if p.Records != int64(n) || len(p.Shards) != (n+perShard-1)/perShard {
		h.t.Fatalf("plan: %d records in %d shards, want %d in %d: %s", p.Records, len(p.Shards), n, (n+perShard-1)/perShard, r)
	}
	return p
}

func decode(t *testing.T, r result, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("stdout is not the JSON result: %v\n%s", err, r)
	}
}

type stepOut struct {
	JobKey string `json:"job_key"`
	Shards []struct {
		ShardID        string `json:"shard_id"`
		State          string `json:"state"`
		ProviderJobID  string `json:"provider_job_id"`
		ProviderStatus string `json:"provider_status"`
		Action         string `json:"action"`
		Detail         string `json:"detail"`
	} `json:"shards"`
	Pending bool `json:"pending"`
}

// submitUntilBound runs submit (lease as given) until it exits 0, accepting
// 75 in between (a live lease, an unknown create outcome) and pausing
// between runs so an expired lease can be taken over. It returns how many
// runs exited 75 and the result of the last run.
func (h *harness) submitUntilBound(job, lease string) (int, stepOut) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for tempfails := 0; ; tempfails++ {
		r := h.must([]int{0, exitTempFail}, lifecycleArgs("submit", job, "--lease", lease)...)
		var s stepOut
		decode(h.t, r, &s)
		if r.code == 0 {
			if s.Pending {
				h.t.Fatalf("submit exit 0 but pending: %s", r)
			}
			return tempfails, s
		}
		if !s.Pending {
			h.t.Fatalf("submit exit 75 but not pending: %s", r)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("submit still pending after 30 s: %s", r)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// statusUntilTerminal polls until every shard is terminal.
func (h *harness) statusUntilTerminal(job string) stepOut {
	h.t.Helper()
	r := h.must([]int{0}, lifecycleArgs("status", job, "--wait", "--poll", "20ms")...)
	var s stepOut
	decode(h.t, r, &s)
	return s
}

type report struct {
	JobKey          string   `json:"job_key"`
	State           string   `json:"state"`
	Expected        int64    `json:"expected"`
	Succeeded       int64    `json:"succeeded"`
	FailedRetryable int64    `json:"failed_retryable"`
	FailedPermanent int64    `json:"failed_permanent"`
	QualityFailed   int64    `json:"quality_failed"`
	Missing         int64    `json:"missing"`
	Unknown         int64    `json:"unknown"`
	Duplicate       int64    `json:"duplicate"`
	Quarantined     int64    `json:"quarantined"`
	Closed          bool     `json:"closed"`
	RetryRecords    int64    `json:"retry_records"`
	ManualRecords   int64    `json:"manual_records"`
	RetryShards     []string `json:"retry_shards"`
	Files           struct {
		InputShards []string `json:"input_shards"`
		Output      []string `json:"output"`
		Error       []string `json:"error"`
	} `json:"files"`
}

// counts is the part of a report two equivalent runs must agree on.
func (r report) counts() string {
	return fmt.Sprintf("expected=%d succeeded=%d quality_failed=%d failed_retryable=%d failed_permanent=%d missing=%d unknown=%d duplicate=%d quarantined=%d retry=%d manual=%d state=%s",
		r.Expected, r.Succeeded, r.QualityFailed, r.FailedRetryable, r.FailedPermanent, r.Missing, r.Unknown, r.Duplicate, r.Quarantined, r.RetryRecords, r.ManualRecords, r.State)
}

// reconcile runs reconcile and checks the report accounts for every planned record.
func (h *harness) reconcile(job string, planned int64) report {
	h.t.Helper()
	r := h.must([]int{0, exitPartial, exitReview}, "reconcile", "--job", job)
	var rep report
	decode(h.t, r, &rep)
	if rep.Expected != planned {
		h.t.Errorf("report expected %d, planned %d", rep.Expected, planned)
	}
	if sum := rep.Succeeded + rep.QualityFailed + rep.FailedRetryable + rep.FailedPermanent + rep.Missing; sum != rep.Expected {
		h.t.Errorf("report does not account for every record: %s (sum %d)", rep.counts(), sum)
	}
	want := exitPartial
	switch {
	case rep.Unknown > 0 || rep.Duplicate > 0:
		want = exitReview
	case rep.State == "COMPLETED":
		want = 0
	}
	if r.code != want {
		h.t.Errorf("reconcile exit %d, want %d for %s", r.code, want, rep.counts())
	}
	return rep
}

// query runs `batchlake sql --format json` and decodes the rows.
func (h *harness) query(q string, v any) {
	h.t.Helper()
	r := h.must([]int{0}, "sql", "--format", "json", q)
	decode(h.t, r, v)
}

type shardRow struct {
	ShardID       string `json:"shard_id"`
	ProviderJobID string `json:"provider_job_id"`
	State         string `json:"state"`
}

// shardRows reads the shards view of a job.
func (h *harness) shardRows(job string) []shardRow {
	h.t.Helper()
	var rows []shardRow
	h.query(fmt.Sprintf("SELECT shard_id, provider_job_id, state FROM shards WHERE job_key = '%s' ORDER BY shard_id", job), &rows)
	return rows
}

// assertOneBatchPerShard checks the provider holds exactly one batch per
// shard of the job, made for that shard, and that the lake binds each
// shard to it.
func (h *harness) assertOneBatchPerShard(p planOut) {
	h.t.Helper()
	byShard := map[string][]string{}
	for _, b := range h.srv.Batches() {
		if b.Metadata[providers.MetaJobKey] != p.JobKey {
			h.t.Errorf("batch %s belongs to no shard of this job: metadata %v", b.ID, b.Metadata)
			continue
		}
		byShard[b.Metadata[providers.MetaShardID]] = append(byShard[b.Metadata[providers.MetaShardID]], b.ID)
	}
	if n := len(h.srv.Batches()); n != len(p.Shards) {
		h.t.Errorf("provider holds %d batches, want exactly %d (one per shard): %v", n, len(p.Shards), byShard)
	}
	rows := h.shardRows(p.JobKey)
	if len(rows) != len(p.Shards) {
		h.t.Fatalf("shards view has %d rows, want %d: %+v", len(rows), len(p.Shards), rows)
	}
	for _, s := range rows {
		ids := byShard[s.ShardID]
		if len(ids) != 1 {
			h.t.Errorf("shard %s: %d provider batches %v, want 1", s.ShardID, len(ids), ids)
			continue
		}
		if s.ProviderJobID != ids[0] {
			h.t.Errorf("shard %s bound to %q in the lake, but its batch is %s", s.ShardID, s.ProviderJobID, ids[0])
		}
	}
}

// creates is how many create calls the provider received whole (one cut
// off by a killed client made nothing).
func (h *harness) creates() int { return h.srv.CountRequests("POST", "/v1/batches") }

// createCalls lists every create call the provider received, for a failure
// message: when it arrived, what it answered, and whether it was cut off.
func (h *harness) createCalls() string {
	var b strings.Builder
	for _, r := range h.srv.Requests() {
		if r.Method == "POST" && r.Path == "/v1/batches" {
			fmt.Fprintf(&b, "\n  %s status %d fault %q cut %v answered after %s",
				r.At.Format("15:04:05.000"), r.Status, r.Fault, r.Cut, r.Done.Sub(r.At).Round(time.Millisecond))
		}
	}
	return b.String()
}

// checkSecrets fails when the API key shows in any output or lake file.
func (h *harness) checkSecrets() {
	h.t.Helper()
	h.mu.Lock()
	logs := h.logs
	h.mu.Unlock()
	leaks, files, err := findSecret(h.key, logs, h.lake)
	if err != nil {
		h.t.Errorf("secrets check: %v", err)
	}
	for _, l := range leaks {
		h.t.Errorf("the API key leaked: %s", l)
	}
	if files == 0 && len(logs) > 0 {
		h.t.Errorf("secrets check walked an empty lake %s", h.lake)
	}
}

// findSecret names every output (by index) and every file under dir that
// contains key, and counts the files it read.
func findSecret(key string, outputs [][]byte, dir string) (leaks []string, files int, err error) {
	k := []byte(key)
	for i, o := range outputs {
		if bytes.Contains(o, k) {
			leaks = append(leaks, fmt.Sprintf("command output #%d: %s", i, o))
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, k) {
			leaks = append(leaks, "lake file "+p)
		}
		return nil
	})
	return leaks, files, err
}

// ledgerStates lists the states of a shard's ledger events in order.
func (h *harness) ledgerStates(job, shard string) []string {
	h.t.Helper()
	var rows []struct {
		State string `json:"state"`
	}
	h.query(fmt.Sprintf("SELECT state FROM ledger WHERE job_key = '%s' AND shard_id = '%s' ORDER BY seq", job, shard), &rows)
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.State
	}
	return out
}

// attemptRows counts the attempts rows of a job (every ingested result line).
func (h *harness) attemptRows(job string) int64 {
	h.t.Helper()
	var rows []struct {
		N int64 `json:"n"`
	}
	h.query(fmt.Sprintf("SELECT count(*) AS n FROM attempts WHERE job_key = '%s'", job), &rows)
	if len(rows) != 1 {
		h.t.Fatalf("count query returned %d rows", len(rows))
	}
	return rows[0].N
}

// actions maps each shard of a step's result to what the step did to it.
func actions(s stepOut) map[string]string {
	m := map[string]string{}
	for _, sh := range s.Shards {
		m[sh.ShardID] = sh.Action
	}
	return m
}

// finish runs status, collect and reconcile for a job.
func (h *harness) finish(p planOut) report {
	h.t.Helper()
	h.statusUntilTerminal(p.JobKey)
	h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
	return h.reconcile(p.JobKey, p.Records)
}
