package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/lake"
)

// cliRaw runs the command in-process and returns its exit code, stdout and stderr.
func cliRaw(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestVersionFlag: --version prints the build's version and exactly the
// marker formats the lake package writes, as JSON on stdout, exit 0.
func TestVersionFlag(t *testing.T) {
	code, out, errb := cliRaw("--version")
	if code != exitOK {
		t.Fatalf("--version: exit %d\n%s", code, errb)
	}
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("--version stdout is not JSON: %v\n%s", err, out)
	}
	if v.Version == "" || v.Go == "" {
		t.Errorf("--version: empty version or go: %+v", v)
	}
	if !slices.Equal(v.LakeFormats, lake.Formats()) || v.ManifestVersion != lake.ManifestVersion || v.IngestVersion != lake.IngestSplitVersion ||
		v.CompactionVersion != lake.CompactionVersion {
		t.Errorf("--version: formats %v manifest %d ingest %d compaction %d, want %v %d %d %d", v.LakeFormats, v.ManifestVersion, v.IngestVersion,
			v.CompactionVersion, lake.Formats(), lake.ManifestVersion, lake.IngestSplitVersion, lake.CompactionVersion)
	}
	for _, f := range []string{lake.FormatManifest, lake.FormatIngest, lake.FormatReport, lake.FormatEvent, lake.FormatPartition} {
		if !slices.Contains(v.LakeFormats, f) {
			t.Errorf("--version does not name %s", f)
		}
	}
}

func TestBuildVersion(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "devel"},
		{"tagged module", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}}}, true, "v1.4.0"},
		{"checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, true, rev},
		{"modified checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, true, rev + "-dirty"},
		{"no vcs stamp", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "devel"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := buildVersion(c.bi, c.ok).Version; got != c.want {
				t.Errorf("version %q, want %q", got, c.want)
			}
		})
	}
}

// TestJobsAndJobPrefixes: after the simulator's whole loop (a job and two
// retry generations) and one more plan for another tenant, `jobs` lists all
// four newest first, each with the state its ledger gives and the cost the
// costs view sums; --tenant filters; and every --job flag takes a unique key
// prefix, while an ambiguous one lists the candidates and an unknown one is
// "not found", both exit 2.
func TestJobsAndJobPrefixes(t *testing.T) {
	t.Parallel()
	lk, root := demoLake(t)
	dir := filepath.Dir(lk)
	lines, err := os.ReadFile(demoInput)
	if err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small.jsonl")
	if err := os.WriteFile(small, []byte(strings.Join(strings.SplitN(string(lines), "\n", 8)[:7], "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // created_at must order the new job first
	code, pl := cli(t, "plan", "--lake", lk, "--provider", "sim", "--input", small, "--tenant", "beta", "--prompt-version", "v1", "--progress", "never")
	if code != exitOK {
		t.Fatalf("plan: exit %d %v", code, pl)
	}
	beta := pl["job_key"].(string)

	code, out, errb := cliRaw("jobs", "--lake", lk)
	if code != exitOK {
		t.Fatalf("jobs: exit %d\n%s", code, errb)
	}
	var list struct {
		Jobs  []jobRow `json:"jobs"`
		Count int      `json:"count"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("jobs: %v\n%s", err, out)
	}
	if list.Count != 4 || len(list.Jobs) != 4 {
		t.Fatalf("jobs: %d jobs (count %d), want 4:\n%s", len(list.Jobs), list.Count, out)
	}
	for i := 1; i < len(list.Jobs); i++ {
		if list.Jobs[i].CreatedAt.After(list.Jobs[i-1].CreatedAt) {
			t.Errorf("jobs not newest first: %s (%s) after %s (%s)", list.Jobs[i].JobKey, list.Jobs[i].CreatedAt, list.Jobs[i-1].JobKey, list.Jobs[i-1].CreatedAt)
		}
	}
	if j := list.Jobs[0]; j.JobKey != beta || j.Tenant != "beta" || j.State != lake.Validated || j.Cost != nil || j.Records != 7 || j.Attempt != 1 || j.ParentJobKey != "" {
		t.Errorf("newest job %+v, want the beta plan: VALIDATED, 7 records, attempt 1, no cost", j)
	}

	// Against the lake's own views: the ledger's last state per shard and the costs.
	states := sqlRows(t, lk, "SELECT job_key, max_by(state, seq) AS state FROM ledger GROUP BY job_key, shard_id")
	costs := sqlRows(t, lk, "SELECT job_key, CAST(sum(cost_usd) AS VARCHAR) AS usd FROM costs GROUP BY job_key")
	parents := map[string]string{}
	for _, j := range list.Jobs {
		var shardStates []lake.State
		for _, r := range states {
			if r["job_key"] == j.JobKey {
				shardStates = append(shardStates, lake.State(r["state"].(string)))
			}
		}
		if want := lake.JobState(shardStates); j.State != want {
			t.Errorf("job %s: state %s, the ledger view says %s", j.JobKey[:12], j.State, want)
		}
		parents[j.JobKey] = j.ParentJobKey
		if j.JobKey == beta {
			continue
		}
		if j.Cost == nil {
			t.Errorf("job %s was reconciled but has no cost", j.JobKey[:12])
			continue
		}
		for _, r := range costs {
			if r["job_key"] == j.JobKey && !sameDecimal(r["usd"].(string), j.Cost.TotalUSD.String()) {
				t.Errorf("job %s: total_usd %s, the costs view sums %s", j.JobKey[:12], j.Cost.TotalUSD, r["usd"])
			}
		}
	}
	// The run's generations chain back to its root job.
	gens := 0
	for k := range parents {
		for n := 0; k != "" && n < 4; n++ {
			if k == root {
				gens++
			}
			k = parents[k]
		}
	}
	if gens != 3 {
		t.Errorf("%d jobs chain back to the run's job %s through parent_job_key, want 3: %v", gens, root[:12], parents)
	}

	t.Run("verify lists no problems as an empty list", func(t *testing.T) {
		code, res := cli(t, "verify", "--lake", lk)
		probs, isList := res["problems"].([]any)
		if code != exitOK || !isList || len(probs) != 0 {
			t.Errorf("verify of a clean lake: exit %d, problems %#v; want 0 and []", code, res["problems"])
		}
	})

	t.Run("status --wait --timeout", func(t *testing.T) {
		// beta is planned, never submitted: status stays pending for ever.
		start := time.Now()
		code, res := cli(t, "status", "--lake", lk, "--provider", "sim", "--job", beta, "--wait", "--poll", "20ms", "--timeout", "150ms")
		if took := time.Since(start); code != exitTempFail || res["pending"] != true || took < 150*time.Millisecond || took > 20*time.Second {
			t.Errorf("status --wait --timeout 150ms: exit %d pending %v after %s; want 75, pending, after the timeout", code, res["pending"], took)
		}
	})

	t.Run("tenant filter", func(t *testing.T) {
		_, out, _ := cliRaw("jobs", "--lake", lk, "--tenant", "acme")
		var l struct{ Jobs []jobRow }
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Jobs) != 3 {
			t.Errorf("--tenant acme: %d jobs, want 3", len(l.Jobs))
		}
		for _, j := range l.Jobs {
			if j.Tenant != "acme" {
				t.Errorf("--tenant acme listed %s of tenant %s", j.JobKey[:12], j.Tenant)
			}
		}
	})

	t.Run("prefix", func(t *testing.T) {
		// status, report and cost each resolve the 12 digits the logs print.
		for _, args := range [][]string{
			{"status", "--provider", "sim", "--job", beta[:12]},
			{"report", "--job", root[:12]},
			{"cost", "--job", root[:12]},
		} {
			code, out, errb := cliRaw(append(args, "--lake", lk, "--progress", "never")...)
			if code != exitOK && code != exitTempFail {
				t.Errorf("%s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errb)
			}
		}
		code, res := cli(t, "status", "--lake", lk, "--provider", "sim", "--job", beta[:12])
		if res["job_key"] != beta {
			t.Errorf("status --job %s: job_key %v (exit %d), want %s", beta[:12], res["job_key"], code, beta)
		}
	})

	t.Run("ambiguous and unknown", func(t *testing.T) {
		l, err := lake.Open(context.Background(), lk)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		// A second manifest name sharing beta's first 12 digits (its content
		// does not matter: resolving a prefix reads names only).
		twin := beta[:12] + strings.Repeat("0", 52)
		if twin == beta {
			twin = beta[:12] + strings.Repeat("1", 52)
		}
		if _, err := l.PutOnce(context.Background(), lake.ManifestPrefix+twin+".json", []byte("{}\n")); err != nil {
			t.Fatal(err)
		}
		code, res := cli(t, "status", "--lake", lk, "--provider", "sim", "--job", beta[:12])
		cands, _ := res["candidates"].([]any)
		if code != exitUsage || len(cands) != 2 || !strings.Contains(res["error"].(string), "matches 2 jobs") {
			t.Errorf("ambiguous prefix: exit %d %v, want 2 with both candidates", code, res)
		}
		for _, args := range [][]string{
			{"status", "--provider", "sim"}, {"reconcile"}, {"retry"}, {"manual"}, {"report"}, {"cost"}, {"ingest", "--output", small},
		} {
			for _, job := range []string{"fedcba987654", strings.Repeat("f", 64)} {
				code, res := cli(t, append(args, "--lake", lk, "--job", job)...)
				msg, _ := res["error"].(string)
				if code != exitUsage || !strings.Contains(msg, "job not found: no job "+job+" in lake") {
					t.Errorf("%s --job %s: exit %d %q, want 2 and the one not-found wording", args[0], job[:12], code, msg)
				}
			}
		}
	})
}

// TestReadCommandsNeedALake: a read command pointed at a folder that does not
// exist, at a file, or at a folder that holds no job, says so and exits 2,
// and creates nothing.
func TestReadCommandsNeedALake(t *testing.T) {
	job := strings.Repeat("a", 64)
	for _, args := range [][]string{
		{"sql", "SELECT 1"}, {"cost"}, {"verify"}, {"jobs"}, {"catalog", "--out", "OUT"}, {"manual"},
		{"status", "--job", job}, {"collect", "--job", job}, {"reconcile", "--job", job}, {"report", "--job", job},
		{"ingest", "--job", job, "--output", "out.jsonl"},
	} {
		t.Run(args[0], func(t *testing.T) {
			dir := t.TempDir()
			args := slices.Clone(args)
			for i, a := range args {
				if a == "OUT" { // a file a wrong command would write: never in the source tree
					args[i] = filepath.Join(dir, "out.duckdb")
				}
			}
			missing := filepath.Join(dir, "nolake")
			code, res := cli(t, append(args, "--lake", missing)...)
			msg, _ := res["error"].(string)
			if code != exitUsage || !strings.Contains(msg, "no lake at "+missing) {
				t.Errorf("missing lake: exit %d %q, want 2 and \"no lake at\"", code, msg)
			}
			if _, err := os.Stat(missing); !os.IsNotExist(err) {
				t.Errorf("%s created the lake folder it was pointed at (stat: %v)", args[0], err)
			}
			file := filepath.Join(dir, "afile")
			if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			code, res = cli(t, append(args, "--lake", file)...)
			msg, _ = res["error"].(string)
			if code != exitUsage || !strings.Contains(msg, "no lake at "+file+": it is a file") {
				t.Errorf("lake a file: exit %d %q, want 2 and \"it is a file\"", code, msg)
			}
			empty := filepath.Join(dir, "empty")
			if err := os.Mkdir(empty, 0o755); err != nil {
				t.Fatal(err)
			}
			code, res = cli(t, append(args, "--lake", empty)...)
			msg, _ = res["error"].(string)
			if code != exitUsage || !strings.Contains(msg, "holds no job") {
				t.Errorf("empty folder: exit %d %q, want 2 and \"holds no job\"", code, msg)
			}
		})
	}
}

// sqlRows runs `batchlake sql --format json` in-process.
func sqlRows(t *testing.T, lk, q string) []map[string]any {
	t.Helper()
	return sqlRowsWith(t, q, "--lake", lk)
}

// sqlRowsWith is sqlRows with the given global flags (a remote lake's).
func sqlRowsWith(t *testing.T, q string, global ...string) []map[string]any {
	t.Helper()
	code, out, errb := cliRaw(append([]string{"sql", "--format", "json", q}, global...)...)
	if code != exitOK {
		t.Fatalf("sql %s: exit %d\n%s", q, code, errb)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("sql %s: %v\n%s", q, err, out)
	}
	return rows
}

// sameDecimal compares two decimal strings by value ("0.10" = "0.1").
func sameDecimal(a, b string) bool {
	trim := func(s string) string {
		if strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
		return s
	}
	return trim(a) == trim(b)
}

// TestFlagSuggestions: a mistyped sub-command or flag is exit 2 with the
// nearest names; a flag like nothing known gets no suggestion.
func TestFlagSuggestions(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string // in the error; "" for no suggestion
	}{
		{"command", []string{"subm"}, "Did you mean this?\n\tsubmit"},
		{"global flag", []string{"verify", "--lak", "x"}, "did you mean --lake?"},
		{"command flag", []string{"status", "--jb", "x"}, "did you mean --job?"},
		{"prefix", []string{"reconcile", "--max-att", "2"}, "did you mean --max-attempts?"},
		{"nothing near", []string{"status", "--zzzzzz", "x"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, res := cli(t, c.args...)
			msg, _ := res["error"].(string)
			if code != exitUsage {
				t.Errorf("exit %d, want 2: %q", code, msg)
			}
			if c.want != "" && !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not suggest %q", msg, c.want)
			}
			if c.want == "" && strings.Contains(strings.ToLower(msg), "did you mean") {
				t.Errorf("error %q suggests something for a flag like nothing known", msg)
			}
		})
	}
}

// TestCancelReportsStateAfter: cancel's result gives each shard the state the
// ledger holds after the step (CANCELLED), and jobs agrees with it.
func TestCancelReportsStateAfter(t *testing.T) {
	_, lk, _, job := planDemoJob(t, 5)
	if code, res := cli(t, "submit", "--lake", lk, "--provider", "sim", "--job", job); code != exitOK {
		t.Fatalf("submit: exit %d %v", code, res)
	}
	code, res := cli(t, "cancel", "--lake", lk, "--provider", "sim", "--job", job)
	if code != exitOK {
		t.Fatalf("cancel: exit %d %v", code, res)
	}
	shards, _ := res["shards"].([]any)
	if len(shards) == 0 {
		t.Fatalf("cancel printed no shards: %v", res)
	}
	for _, s := range shards {
		sh := s.(map[string]any)
		if sh["action"] != "cancel_requested" || sh["state"] != string(lake.Cancelled) {
			t.Errorf("cancel: shard %v action %v state %v, want cancel_requested and CANCELLED (the state after the step)", sh["shard_id"], sh["action"], sh["state"])
		}
	}
	if res["state"] != string(lake.Cancelled) {
		t.Errorf("cancel: job state %v, want CANCELLED", res["state"])
	}
	_, out, _ := cliRaw("jobs", "--lake", lk)
	var l struct{ Jobs []jobRow }
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Jobs) != 1 || l.Jobs[0].State != lake.Cancelled {
		t.Errorf("jobs after cancel: %v %s, want one CANCELLED job", err, out)
	}
}

// TestRetryBeforeReconcile: retry of a job no reconcile has closed is a step
// run out of order, exit 2 naming the step to run first (running it again
// would not help), and makes no child.
func TestRetryBeforeReconcile(t *testing.T) {
	_, lk, _, job := planDemoJob(t, 3)
	code, res := cli(t, "retry", "--lake", lk, "--job", job)
	msg, _ := res["error"].(string)
	if code != exitUsage || !strings.Contains(msg, "has not been reconciled: run batchlake reconcile --job "+job+" first") {
		t.Errorf("retry before reconcile: exit %d %q, want 2 naming reconcile", code, msg)
	}
	ms, err := os.ReadDir(filepath.Join(lk, "manifests"))
	if err != nil || len(ms) != 1 {
		t.Errorf("retry before reconcile left %d manifests (%v), want the parent's alone", len(ms), err)
	}
}

// TestIngestFolderNotFile: a result file that is a folder is exit 2 naming
// the flag, before anything is read or written.
func TestIngestFolderNotFile(t *testing.T) {
	dir, lk, _, job := planDemoJob(t, 3)
	for _, flag := range []string{"--output", "--errors"} {
		code, res := cli(t, "ingest", "--lake", lk, "--job", job, flag, dir)
		msg, _ := res["error"].(string)
		if code != exitUsage || msg != "ingest "+flag+" "+dir+": a folder, not a file" {
			t.Errorf("ingest %s a folder: exit %d %q, want 2 naming the flag", flag, code, msg)
		}
	}
	// A compressed result file was ingested as lines all quarantined, and
	// reconcile would have sent every record again; plan, too, is told.
	gz := filepath.Join(dir, "out.jsonl.gz")
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(`{"custom_id":"a"}` + "\n"))
	zw.Close()
	if err := os.WriteFile(gz, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	want := gz + ": gzip-compressed (its first bytes are the format's): decompress it first (gunzip -k); batchlake reads the JSON lines as the provider writes them"
	for _, args := range [][]string{
		{"ingest", "--job", job, "--output", gz},
		{"plan", "--provider", "sim", "--input", gz, "--tenant", "acme", "--prompt-version", "v1"},
	} {
		code, res := cli(t, append(args, "--lake", lk)...)
		if msg, _ := res["error"].(string); code != exitUsage || msg != args[0]+" "+args[3]+" "+want {
			t.Errorf("%s of a gzip file: exit %d %q, want 2 and %q", args[0], code, msg, args[0]+" "+args[3]+" "+want)
		}
	}
	if _, err := os.Stat(filepath.Join(lk, "ingests")); !os.IsNotExist(err) {
		t.Errorf("a refused ingest wrote its marker folder (stat: %v)", err)
	}
}

// TestIngestRefusesFileWithoutIDs: a file none of whose lines is a result
// line of the job's provider with an id (here the job's own input, given as
// its output) was ingested with exit 0, every line quarantined, and the job's
// records counted missing, to be sent again.
func TestIngestRefusesFileWithoutIDs(t *testing.T) {
	_, lk, in, job := planDemoJob(t, 3)
	code, res := cli(t, "ingest", "--lake", lk, "--job", job, "--output", in)
	want := "ingest in.jsonl: none of its 3 lines is a result line with an id in the format of the job's provider, sim (is it the job's input, or another provider's file?); every line would be quarantined and the job's records counted missing. Nothing was written; --force ingests it into this job anyway"
	if msg, _ := res["error"].(string); code != exitUsage || msg != want {
		t.Fatalf("ingest of the input as output: exit %d %q, want 2 and %q", code, msg, want)
	}
	if _, err := os.Stat(filepath.Join(lk, "ingests")); !os.IsNotExist(err) {
		t.Errorf("a refused ingest wrote its marker folder (stat: %v)", err)
	}
	// --force ingests it, every line quarantined; once ingested, the same
	// file passes the check and writes nothing.
	for i, args := range [][]string{{"--force"}, nil} {
		code, res := cli(t, append([]string{"ingest", "--lake", lk, "--job", job, "--output", in}, args...)...)
		files, _ := res["files"].([]any)
		if code != exitOK || len(files) != 1 {
			t.Fatalf("ingest %v: exit %d %v", args, code, res)
		}
		f := files[0].(map[string]any)
		if f["quarantined"] != json.Number("3") || f["rows"] != json.Number("0") || f["created"] != (i == 0) {
			t.Errorf("ingest %v: %v, want 3 quarantined, no rows, created %v", args, f, i == 0)
		}
	}
}

// TestIngestRefusesPartialCopies: a result file cut short (a download that
// stopped) ingested beside the whole file counted their common lines twice,
// as duplicate submissions priced again. Either order is refused, naming the
// other file; once the partial one is retracted the whole one goes in. So
// is the output file given as the errors file too.
func TestIngestRefusesPartialCopies(t *testing.T) {
	dir, lk, _, job := planDemoJob(t, 3)
	var whole []byte
	for i := range 3 {
		whole = fmt.Appendf(whole, `{"id": "batch_req_%d", "custom_id": "ticket-%05d", "response": {"status_code": 200, "request_id": "r%d", "body": {"id": "chatcmpl-%d", "object": "chat.completion", "model": "gpt-4o-mini-2024-07-18", "choices": [{"index": 0, "message": {"role": "assistant", "content": "billing: a refund"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48}}}, "error": null}`+"\n", i, i, i, i)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cut, full := write("cut.jsonl", whole[:len(whole)/2]), write("output.jsonl", whole)
	ingest := func(path string, more ...string) (int, string) {
		code, res := cli(t, append([]string{"ingest", "--lake", lk, "--job", job, "--output", path}, more...)...)
		msg, _ := res["error"].(string)
		return code, msg
	}
	if code, msg := ingest(cut); code != exitOK {
		t.Fatalf("ingest of the cut file: exit %d %s", code, msg)
	}
	cutSum, fullSum := sha256.Sum256(whole[:len(whole)/2]), sha256.Sum256(whole)
	want := fmt.Sprintf("ingest output.jsonl: it begins with the whole of cut.jsonl (sha256 %x, %d bytes), ingested into the job before: that one is a partial copy of this file", cutSum, len(whole)/2)
	if code, msg := ingest(full); code != exitUsage || !strings.HasPrefix(msg, want) {
		t.Fatalf("ingest of the whole file after the cut one: exit %d %q, want 2 and %q…", code, msg, want)
	}
	if code, res := cli(t, "ingest", "--lake", lk, "--job", job, "--retract", fmt.Sprintf("%x", cutSum)); code != exitOK {
		t.Fatalf("retract: exit %d %v", code, res)
	}
	if code, msg := ingest(full); code != exitOK {
		t.Fatalf("ingest of the whole file once the cut one is retracted: exit %d %s", code, msg)
	}
	// The other order: a cut copy of a file ingested before.
	cut2 := write("cut2.jsonl", whole[:len(whole)/3])
	want = fmt.Sprintf("ingest cut2.jsonl: its %d bytes are the start of output.jsonl (sha256 %x), ingested into the job before", len(whole)/3, fullSum)
	if code, msg := ingest(cut2); code != exitUsage || !strings.HasPrefix(msg, want) {
		t.Fatalf("ingest of a cut copy after the whole file: exit %d %q, want 2 and %q…", code, msg, want)
	}
	if code, msg := ingest(cut2, "--force"); code != exitOK {
		t.Fatalf("ingest --force of the cut copy: exit %d %s", code, msg)
	}
	// The output file given as the errors file too, in one command or
	// after it was ingested: every line counted twice.
	dup := write("copy.jsonl", whole)
	code, res := cli(t, "ingest", "--lake", lk, "--job", job, "--output", full, "--errors", dup)
	want = fmt.Sprintf("ingest: --output %s and --errors %s are the same bytes: each line would count twice", full, dup)
	if msg, _ := res["error"].(string); code != exitUsage || !strings.HasPrefix(msg, want) {
		t.Errorf("ingest of one file as output and errors: exit %d %q, want 2 and %q…", code, msg, want)
	}
	code, res = cli(t, "ingest", "--lake", lk, "--job", job, "--errors", dup)
	want = "ingest copy.jsonl: the same bytes as output.jsonl, ingested into the job before as its output file: each line would count twice"
	if msg, _ := res["error"].(string); code != exitUsage || !strings.HasPrefix(msg, want) {
		t.Errorf("ingest of the output file as the errors file: exit %d %q, want 2 and %q…", code, msg, want)
	}
	recs, err := os.ReadDir(filepath.Join(lk, "ingests", job))
	if err != nil || len(recs) != 3 {
		t.Errorf("ingest records: %d (%v), want 3 (cut, whole, the forced cut copy)", len(recs), err)
	}
}

// TestIngestRefusesAnotherJobsFile: two jobs planned from one provider file
// (two prompt versions) expect the same custom ids, so one job's output
// ingested into the other passed every id check, and both counted its
// answers and their cost: the lake's costs twice what was billed. It is
// refused, naming the job that counts it, until retracted there; --force
// takes it; an empty errors file, every job's alike, is not refused; nor is
// a file both of whose ingests name their own provider batch.
func TestIngestRefusesAnotherJobsFile(t *testing.T) {
	dir, lk, in, first := planDemoJob(t, 3)
	code, pl := cli(t, "plan", "--lake", lk, "--provider", "sim", "--input", in, "--tenant", "acme", "--prompt-version", "v2", "--progress", "never")
	if code != exitOK {
		t.Fatalf("plan of the second prompt version: exit %d %v", code, pl)
	}
	second := pl["job_key"].(string)
	if second == first {
		t.Fatal("two prompt versions planned as one job")
	}
	var whole []byte
	for i := range 3 {
		whole = fmt.Appendf(whole, `{"id": "batch_req_%d", "custom_id": "ticket-%05d", "response": {"status_code": 200, "request_id": "r%d", "body": {"id": "chatcmpl-%d", "object": "chat.completion", "model": "gpt-4o-mini-2024-07-18", "choices": [{"index": 0, "message": {"role": "assistant", "content": "billing: a refund"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48}}}, "error": null}`+"\n", i, i, i, i)
	}
	out, empty := filepath.Join(dir, "output.jsonl"), filepath.Join(dir, "errors.jsonl")
	if err := os.WriteFile(out, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ingest := func(job string, args ...string) (int, string) {
		code, res := cli(t, append([]string{"ingest", "--lake", lk, "--job", job}, args...)...)
		msg, _ := res["error"].(string)
		return code, msg
	}
	if code, msg := ingest(first, "--output", out, "--errors", empty); code != exitOK {
		t.Fatalf("ingest into the first job: exit %d %s", code, msg)
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(whole))
	want := fmt.Sprintf("ingest output.jsonl: this file (sha256 %s) was ingested into job %s before, and counts there", sum, first)
	for _, args := range [][]string{{"--output", out, "--errors", empty}, {"--errors", out}} {
		if code, msg := ingest(second, args...); code != exitUsage || !strings.HasPrefix(msg, want) || !strings.Contains(msg, "--retract "+sum) {
			t.Fatalf("ingest %v into the second job: exit %d %q, want 2 and %q…", args, code, msg, want)
		}
	}
	if _, err := os.Stat(filepath.Join(lk, "ingests", second)); !os.IsNotExist(err) {
		t.Errorf("a refused ingest wrote the second job's ingest records (%v)", err)
	}
	// The empty errors file alone: every job's errors file of no line.
	if code, msg := ingest(second, "--errors", empty); code != exitOK {
		t.Errorf("ingest of an empty errors file into the second job: exit %d %s", code, msg)
	}
	// Retracted from the first job, it goes into the second.
	if code, res := cli(t, "ingest", "--lake", lk, "--job", first, "--retract", sum, "--reason", "wrong job"); code != exitOK {
		t.Fatalf("retract: exit %d %v", code, res)
	}
	if code, msg := ingest(second, "--output", out); code != exitOK {
		t.Fatalf("ingest into the second job once retracted from the first: exit %d %s", code, msg)
	}
	// A third job: refused for the second's ingest, taken with --force.
	code, pl = cli(t, "plan", "--lake", lk, "--provider", "sim", "--input", in, "--tenant", "acme", "--prompt-version", "v3", "--progress", "never")
	if code != exitOK {
		t.Fatalf("plan of a third prompt version: exit %d %v", code, pl)
	}
	third := pl["job_key"].(string)
	if code, msg := ingest(third, "--output", out); code != exitUsage || !strings.Contains(msg, "was ingested into job "+second+" before") {
		t.Errorf("ingest into the third job: exit %d %q, want 2 naming the second job", code, msg)
	}
	if code, msg := ingest(third, "--output", out, "--force"); code != exitOK {
		t.Errorf("ingest --force into the third job: exit %d %s", code, msg)
	}
	// Two batches whose files are the same bytes (every line of both
	// expired, no request id in them): each ingest names its own batch.
	expired := []byte(`{"custom_id": "ticket-00000", "response": null, "error": {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}}` + "\n")
	exp := filepath.Join(dir, "expired.jsonl")
	if err := os.WriteFile(exp, expired, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, msg := ingest(first, "--errors", exp, "--provider-job-id", "batch_a"); code != exitOK {
		t.Fatalf("ingest of batch_a's expired lines: exit %d %s", code, msg)
	}
	if code, msg := ingest(second, "--errors", exp, "--provider-job-id", "batch_b"); code != exitOK {
		t.Errorf("ingest of batch_b's expired lines, the same bytes as batch_a's: exit %d %s", code, msg)
	}
	if code, _ := ingest(third, "--errors", exp); code != exitUsage {
		t.Errorf("ingest of the same expired lines naming no batch: exit %d, want 2", code)
	}
}

// TestRetryAfterLateResults: a retry made from a reconcile that results
// ingested later (a second output file, the errors file) did not see put
// the records they answered in a child, and submit sent them: paid twice.
// retry refuses until the job is reconciled again, submit refuses a child
// made before; a file retracted since the reconcile is refused alike.
func TestRetryAfterLateResults(t *testing.T) {
	_, lk, in, job := planDemoJob(t, 4)
	lines := readLines(t, in)
	early, late := answerAll(t, lines[:2]), answerAll(t, lines[2:])
	run := func(want int, args ...string) string {
		t.Helper()
		code, res := cli(t, append(args, "--lake", lk)...)
		if code != want {
			t.Fatalf("%v: exit %d %v, want %d", args, code, res, want)
		}
		msg, _ := res["error"].(string)
		return msg
	}
	run(exitOK, "ingest", "--job", job, "--output", early)
	run(exitPartial, "reconcile", "--job", job)
	code, res := cli(t, "retry", "--lake", lk, "--job", job)
	if code != exitOK || res["child"] == nil {
		t.Fatalf("retry: exit %d %v", code, res)
	}
	child := res["child"].(map[string]any)["job_key"].(string)
	run(exitOK, "ingest", "--job", job, "--output", late)
	sum := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%x", sha256.Sum256(b))
	}
	since := fmt.Sprintf("(ingested since: output output.jsonl (sha256 %s))", sum(late))
	if msg := run(exitUsage, "retry", "--job", job); !strings.Contains(msg, "results changed since its latest reconcile "+since) {
		t.Errorf("retry after a late ingest: %q, want it to name %s", msg, since)
	}
	if msg := run(exitUsage, "submit", "--job", child); !strings.Contains(msg, "is a retry of "+job+", whose results changed since its latest reconcile "+since) {
		t.Errorf("submit of the child made before the late ingest: %q", msg)
	}
	if entries, _ := os.ReadDir(filepath.Join(lk, "ledger", child, "part-00000")); len(entries) != 2 {
		t.Errorf("the refused child's ledger has %d events, want 2 (CREATED, VALIDATED: nothing sent)", len(entries))
	}
	run(exitOK, "reconcile", "--job", job)
	if msg := run(exitOK, "retry", "--job", job); msg != "" {
		t.Errorf("retry once reconciled: %s", msg)
	}
	// A file retracted since the reconcile: its records would be left out.
	run(exitOK, "ingest", "--job", job, "--retract", sum(late))
	if msg := run(exitUsage, "retry", "--job", job); !strings.Contains(msg, "(retracted since: output file (sha256 "+sum(late)+"))") {
		t.Errorf("retry after a retraction: %q", msg)
	}
	run(exitPartial, "reconcile", "--job", job)
	if code, res := cli(t, "retry", "--lake", lk, "--job", job); code != exitOK || res["child"] == nil {
		t.Errorf("retry once the retraction is reconciled: exit %d %v", code, res)
	}
}

// TestGeminiModelsPrefixPriced: a Gemini job planned with --model in the
// API's own form (models/gemini-2.5-flash) had its lines that name no
// modelVersion priced by models/gemini-2.5-flash, which no price row names:
// every such line unpriced. They are the job's model without the prefix.
func TestGeminiModelsPrefixPriced(t *testing.T) {
	dir := t.TempDir()
	lk := filepath.Join(dir, "lake")
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	var inb, outb []byte
	for i := range 2 {
		inb = fmt.Appendf(inb, `{"key":"k%d","request":{"contents":[{"role":"user","parts":[{"text":"q %d"}]}]}}`+"\n", i, i)
		outb = fmt.Appendf(outb, `{"key":"k%d","response":{"candidates":[{"content":{"role":"model","parts":[{"text":"a"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1000,"candidatesTokenCount":100,"totalTokenCount":1100}}}`+"\n", i)
	}
	if err := os.WriteFile(in, inb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, outb, 0o644); err != nil {
		t.Fatal(err)
	}
	code, pl := cli(t, "plan", "--lake", lk, "--provider", "gemini", "--model", "models/gemini-2.5-flash", "--input", in, "--tenant", "acme", "--prompt-version", "v1", "--progress", "never")
	if code != exitOK {
		t.Fatalf("plan: exit %d %v", code, pl)
	}
	job := pl["job_key"].(string)
	if code, res := cli(t, "ingest", "--lake", lk, "--job", job, "--output", out); code != exitOK {
		t.Fatalf("ingest: exit %d %v", code, res)
	}
	code, rep := cli(t, "reconcile", "--lake", lk, "--job", job)
	if code != exitOK {
		t.Fatalf("reconcile: exit %d %v", code, rep)
	}
	// gemini-2.5-flash: 0.30 and 2.50 USD per million, batch 0.5: two lines
	// of 1,000 input and 100 output tokens.
	if n, total := rep["unpriced_lines"], rep["cost_usd"].(map[string]any)["total"]; fmt.Sprint(n) != "0" || fmt.Sprint(total) != "0.00055" {
		t.Errorf("unpriced lines %v, cost %v; want 0 and 0.00055", n, total)
	}
}

// TestRunAgainGoesOnWithItsChildren: run started again on a job it ran
// (an orchestrator's retry of a finished step, a restarted pod) made another
// child of the root's retry set, sending again the records its first child
// had settled (past --max-attempts and the caps too), then failed its own
// count with exit 1 on every later run. It goes on with the children it
// sent: the same generations, nothing planned or sent, exit 0.
func TestRunAgainGoesOnWithItsChildren(t *testing.T) {
	_, lk, in, _ := planDemoJob(t, 120)
	args := []string{"run", "--lake", lk, "--provider", "sim", "--input", in, "--tenant", "again", "--prompt-version", "v1", "--poll", "10ms", "--max-record-cost-usd", "0.00001", "--progress", "never"}
	type gens struct {
		Succeeded, Manual int64
		Generations       []struct {
			JobKey string `json:"job_key"`
		}
	}
	var first gens
	code, res := cli(t, args...)
	if code != exitOK {
		t.Fatalf("run: exit %d %v", code, res)
	}
	decodeMap(t, res, &first)
	if len(first.Generations) < 2 || first.Manual == 0 {
		t.Fatalf("first run: %+v; want a retry and a record given up on, or the test proves nothing", first)
	}
	planned, err := os.ReadDir(filepath.Join(lk, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		code, res := cli(t, args...)
		var again gens
		decodeMap(t, res, &again)
		if code != exitOK || fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("run again: exit %d %+v, want 0 and %+v", code, again, first)
		}
	}
	if now, err := os.ReadDir(filepath.Join(lk, "manifests")); err != nil || len(now) != len(planned) {
		t.Errorf("manifests: %d after running again, %d before (%v)", len(now), len(planned), err)
	}
}

// TestRetryLeavesOutRecordsSentInAChild: retry of a job whose child was
// sent put the child's records in another child (sent twice, paid twice
// while in flight); they are the sent child's to settle. Run again with
// nothing changed, retry gives that same child (submit of it sends nothing
// more); once records of the child succeeded, the rest stay its own.
func TestRetryLeavesOutRecordsSentInAChild(t *testing.T) {
	_, lk, _, root := planDemoJob(t, 120)
	sendAndReconcile(t, lk, root, false)
	code, res := cli(t, "retry", "--lake", lk, "--job", root)
	if code != exitOK || res["child"] == nil {
		t.Fatalf("retry: exit %d %v", code, res)
	}
	child := res["child"].(map[string]any)["job_key"].(string)
	if code, res := cli(t, "submit", "--lake", lk, "--job", child); code != exitOK {
		t.Fatalf("submit of the child: exit %d %v", code, res)
	}
	code, res = cli(t, "retry", "--lake", lk, "--job", root)
	if c, _ := res["child"].(map[string]any); code != exitOK || c == nil || c["job_key"] != child || c["created"] != false {
		t.Fatalf("retry of the root again once its child was sent: exit %d %v; want the same child, %s", code, res, child[:12])
	}
	sendAndReconcile(t, lk, child, true)
	code, res = cli(t, "retry", "--lake", lk, "--job", root)
	msg, _ := res["message"].(string)
	if code != exitOK || res["child"] != nil || !strings.Contains(msg, "were sent in a retry of it ("+child[:12]+")") {
		t.Errorf("retry of the root once its child was back: exit %d %v; want no child, the records the child did not answer left to it", code, res)
	}
}

// TestRetryRefusesASupersededChild: a retry back to the settings of a child
// that a newer retry (another model) superseded gave that child again, exit
// 0, a child submit refuses: a dead end for an orchestrator. It is exit 2
// naming the child to submit instead.
func TestRetryRefusesASupersededChild(t *testing.T) {
	_, lk, _, root := planDemoJob(t, 120)
	sendAndReconcile(t, lk, root, false)
	childOf := func(args ...string) string {
		t.Helper()
		code, res := cli(t, append([]string{"retry", "--lake", lk, "--job", root}, args...)...)
		if code != exitOK || res["child"] == nil {
			t.Fatalf("retry %v: exit %d %v", args, code, res)
		}
		return res["child"].(map[string]any)["job_key"].(string)
	}
	first := childOf()
	newer := childOf("--model", "gpt-4o")
	code, res := cli(t, "retry", "--lake", lk, "--job", root)
	msg, _ := res["error"].(string)
	if code != exitUsage || !strings.Contains(msg, "job "+first+", was planned before and superseded by a newer retry, job "+newer) {
		t.Errorf("retry back to the first child's settings: exit %d %v, want 2 naming %s and %s", code, res, first[:12], newer[:12])
	}
}

// sendAndReconcile takes a simulated job through submit (already done when
// sent), status --wait, collect and reconcile, whose exit says what it found.
func sendAndReconcile(t *testing.T, lk, job string, sent bool) {
	t.Helper()
	steps := [][]string{{"submit"}, {"status", "--wait", "--poll", "10ms"}, {"collect"}}
	if sent {
		steps = steps[1:]
	}
	for _, step := range steps {
		if code, res := cli(t, append(append([]string{}, step...), "--lake", lk, "--job", job)...); code != exitOK {
			t.Fatalf("%v %s: exit %d %v", step, job[:12], code, res)
		}
	}
	if code, res := cli(t, "reconcile", "--lake", lk, "--job", job); code != exitOK && code != exitPartial && code != exitReview {
		t.Fatalf("reconcile %s: exit %d %v", job[:12], code, res)
	}
}

// decodeMap decodes a command's JSON result, as decoded into a map, into v.
func decodeMap(t *testing.T, res map[string]any, v any) {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// TestFlagsOutOfRange: a count or duration no setting means is exit 2 naming
// the flag, before anything is written; --max-attempts 0 was taken for the
// default 3, and a reconcile's lease below zero was taken as given.
func TestFlagsOutOfRange(t *testing.T) {
	_, lk, in, job := planDemoJob(t, 3)
	run := func(flags ...string) []string {
		return append([]string{"run", "--provider", "sim", "--input", in, "--tenant", "refused", "--prompt-version", "v1"}, flags...)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reconcile", "--job", job, "--max-attempts", "0"}, "--max-attempts 0: want 1 or more (1: no retries)"},
		{[]string{"reconcile", "--job", job, "--max-attempts", "-2"}, "--max-attempts -2: want 1 or more (1: no retries)"},
		{[]string{"jobs", "--threads", "-1"}, "--threads -1: want a count of threads (0: the default)"},
		{[]string{"jobs", "--tmp-dir", filepath.Join(lk, "none")}, "--tmp-dir " + filepath.Join(lk, "none") + ": want a folder that is there (stat " + filepath.Join(lk, "none") + ": no such file or directory)"},
		{[]string{"reconcile", "--job", job, "--tmp-dir", in}, "--tmp-dir " + in + ": want a folder that is there (in.jsonl is a file)"},
		{[]string{"jobs", "--cache-dir", in}, "--cache-dir " + in + ": want a folder, made if it is not there (in.jsonl is a file)"},
		{run("--cache-dir", filepath.Join(in, "sub")), "--cache-dir " + filepath.Join(in, "sub") + ": want a folder, made if it is not there (stat " + filepath.Join(in, "sub") + ": not a directory)"},
		// An output path of the other kind than the command writes.
		{[]string{"reconcile", "--job", job, "--out", in}, fmt.Sprintf("reconcile --out %q: a file is there, where it writes a folder", in)},
		{[]string{"report", "--job", job, "--html", lk + "/.."}, fmt.Sprintf("report --html %q: a folder is there, where it writes a file", lk+"/..")},
		{[]string{"manual", "--job", job, "--out", filepath.Dir(lk)}, fmt.Sprintf("manual --out %q: a folder is there, where it writes a file", filepath.Dir(lk))},
		{[]string{"report", "--job", job, "--html", filepath.Join(in, "r.html")}, fmt.Sprintf("report --html %q: mkdir %s: not a directory", filepath.Join(in, "r.html"), in)},
		// A lease already run out would let a second reconcile or submitter
		// take the job over while the first one writes.
		{[]string{"reconcile", "--job", job, "--lease", "-5m"}, "reconcile --lease -5m0s: a reconciler must hold the job for a positive time"},
		{[]string{"reconcile", "--job", job, "--lease", "0s"}, "reconcile --lease 0s: a reconciler must hold the job for a positive time"},
		{[]string{"submit", "--job", job, "--lease", "-1s"}, "--lease -1s: a submitter must hold a shard for a positive time"},
		// A submitter's timings: a margin below zero was taken as none, a
		// settle below zero as the provider's default.
		{[]string{"submit", "--job", job, "--takeover-margin", "-1s"}, "--takeover-margin -1s: want a duration of 0 (none) or more"},
		{[]string{"cancel", "--job", job, "--settle", "-2s"}, "--settle -2s: want a duration of 0 (the provider's default) or more"},
		{[]string{"status", "--job", job, "--lost-lookup", "-1m"}, "--lost-lookup -1m0s: want a duration of 0 (no lookups of its own) or more"},
		// --wait without a pause would call the provider in a loop.
		{[]string{"status", "--job", job, "--wait", "--poll", "0s"}, "--poll 0s: want a positive interval between the provider's status calls"},
		{[]string{"status", "--job", job, "--wait", "--timeout", "-1s"}, "--timeout -1s: want a duration of 0 (wait for ever) or more"},
		// run checks every flag before it plans (its tenant is not the
		// planned job's, so a plan would add a manifest, checked below):
		// its reconcile flags were refused at the first reconcile, once the
		// batch had been sent and had finished.
		{run("--max-rounds", "0"), "run --max-rounds 0: want 1 or more"},
		{run("--concurrency", "0"), "--concurrency 0: want 1 or more calls in flight"},
		{run("--max-attempts", "0"), "--max-attempts 0: want 1 or more (1: no retries)"},
		{run("--retryable", "99"), `--retryable: "99" is not an HTTP status`},
		{run("--retryable", " ,"), `--retryable " ,": names no HTTP status or error code…`},
		{[]string{"reconcile", "--job", job, "--retryable", ","}, `--retryable ",": names no HTTP status or error code…`},
		{run("--max-record-cost-usd", "abc"), `--max-record-cost-usd "abc": want a positive decimal, e.g. 0.25`},
		{run("--prices", filepath.Join(lk, "none.csv")), "--prices: open " + filepath.Join(lk, "none.csv") + ": no such file or directory"},
		{run("--quality-gate", "nosuchcolumn > 0"), `--quality-gate "nosuchcolumn > 0": does not bind: sql gate_bind.sql: Binder Error: Referenced column "nosuchcolumn" not found…`},
		{run("--lease", "0s"), "--lease 0s: a submitter must hold a shard for a positive time"},
		{run("--takeover-margin", "-1s"), "--takeover-margin -1s: want a duration of 0 (none) or more"},
		{run("--poll", "0s"), "run --poll 0s: want a positive interval between the provider's status calls"},
		{run("--out", in), fmt.Sprintf("run --out %q: a file is there, where it writes a folder", in)},
		{run("--fallback", "anthropic:claude-haiku-4-5", "--fallback-max-tokens", "-5"), "run --fallback-max-tokens -5: want a positive token limit (0: none)"},
		{run("--min-records", "-2"), "--min-records -2: want -1 (the provider's minimum), 0 (none) or a count of records"},
		{run("--est-output-tokens", "-1"), "plan: --est-input-tokens and --est-output-tokens must not be negative"},
		{run("--sim-lost-creates", "-1"), "--sim-lost-creates -1: want a count of create answers to drop (0: none)"},
		{[]string{"plan", "--provider", "sim", "--input", in, "--tenant", "refused", "--prompt-version", "v1", "--min-records", "-3"}, "--min-records -3: want -1 (the provider's minimum), 0 (none) or a count of records"},
		// retry checks its sending flags before it plans a child (this job
		// is not reconciled: that would be the next refusal).
		{[]string{"retry", "--job", job, "--mode", "later"}, `--mode "later": want batch, sync or auto`},
		{[]string{"retry", "--job", job, "--maybe-sent", "drop"}, `--maybe-sent "drop": want resend or leave`},
		{[]string{"retry", "--job", job, "--lease", "0s"}, "--lease 0s: a sender must hold a shard for a positive time"},
		{[]string{"retry", "--job", job, "--sync-below", "-1"}, "--sync-below -1: want a count of records (0: only below the provider's minimum)"},
		{[]string{"retry", "--job", job, "--takeover-margin", "-1s"}, "--takeover-margin -1s: want a duration of 0 (none) or more"},
		{[]string{"retry", "--job", job, "--not-before", "-1h"}, "retry --not-before -1h0m0s: want a duration of 0 (at once) or more"},
		{[]string{"ingest", "--job", job, "--output", in, "--min-match", "NaN"}, "ingest --min-match NaN: want a fraction from 0 (no check) to 1"},
		// An output format the command does not write, refused before
		// any query (cost's message listed sql's Arrow, which it refused).
		{[]string{"cost", "--format", "arrow"}, `cost --format "arrow": want table, csv or json`},
		{[]string{"sql", "--format", "xml", "SELECT 1"}, `sql --format "xml": want table, csv, json or arrow`},
	} {
		code, res := cli(t, append(c.args, "--lake", lk)...)
		msg, _ := res["error"].(string)
		same := msg == c.want
		if head, ok := strings.CutSuffix(c.want, "…"); ok {
			same = strings.HasPrefix(msg, head) // the rest is DuckDB's
		}
		if code != exitUsage || !same {
			t.Errorf("%v: exit %d %q, want 2 and %q", c.args, code, msg, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(lk, "reports")); !os.IsNotExist(err) {
		t.Errorf("a refused reconcile wrote a report (stat: %v)", err)
	}
	if ms, err := os.ReadDir(filepath.Join(lk, "manifests")); err != nil || len(ms) != 1 {
		t.Errorf("a refused run planned a job: %d manifests (%v), want 1", len(ms), err)
	}
	// An output file's missing folders are made, as catalog's are.
	html := filepath.Join(filepath.Dir(lk), "new", "sub", "r.html")
	if code, res := cli(t, "report", "--lake", lk, "--job", job, "--html", html); code != exitOK {
		t.Errorf("report --html into new folders: exit %d %v", code, res)
	} else if _, err := os.Stat(html); err != nil {
		t.Errorf("report --html into new folders: %v", err)
	}
}

// TestEnvFlags: a flag's environment variable sets it unless the command
// line does, parsed as the flag is; a value it cannot read is exit 2 naming
// the variable (it was the default, in silence).
func TestEnvFlags(t *testing.T) {
	_, lk, _, job := planDemoJob(t, 3)
	for _, c := range []struct {
		env, val string
		args     []string
		want     string // the error; "" for success
	}{
		{"BATCHLAKE_SUBMIT_PARALLEL", "abc", []string{"submit"}, `BATCHLAKE_SUBMIT_PARALLEL="abc" (--parallel): strconv.ParseInt: parsing "abc": invalid syntax`},
		{"BATCHLAKE_TAKEOVER_MARGIN", "soon", []string{"retry"}, `BATCHLAKE_TAKEOVER_MARGIN="soon" (--takeover-margin): time: invalid duration "soon"`},
		{"BATCHLAKE_SIM_SEED", "-1", []string{"status"}, `BATCHLAKE_SIM_SEED="-1" (--sim-seed): strconv.ParseUint: parsing "-1": invalid syntax`},
		// The variable reaches the flag: the flag's own check refuses it.
		{"BATCHLAKE_MAX_IN_FLIGHT", "-4", []string{"submit"}, "--max-in-flight -4: want 0 (no limit) or a positive number of batches"},
		// The command line wins over the variable.
		{"BATCHLAKE_SUBMIT_PARALLEL", "abc", []string{"submit", "--parallel", "2"}, ""},
	} {
		t.Run(c.env+"="+c.val, func(t *testing.T) {
			t.Setenv(c.env, c.val)
			code, res := cli(t, append(c.args, "--lake", lk, "--job", job)...)
			msg, _ := res["error"].(string)
			if c.want == "" {
				if code != exitOK {
					t.Errorf("%v: exit %d %q, want 0", c.args, code, msg)
				}
				return
			}
			if code != exitUsage || msg != c.want {
				t.Errorf("%v: exit %d %q, want 2 and %q", c.args, code, msg, c.want)
			}
		})
	}
}

// TestEmptyLakeRefused: an empty --lake, or BATCHLAKE_LAKE set to nothing (a
// DAG's unset parameter), was ./lake: a run in a pod's throwaway folder
// whose paid results went with the pod.
func TestEmptyLakeRefused(t *testing.T) {
	dir, _, in, _ := planDemoJob(t, 3)
	t.Chdir(dir)
	runArgs := []string{"run", "--provider", "sim", "--input", in, "--tenant", "refused", "--prompt-version", "v1"}
	for _, c := range []struct {
		env  bool
		args []string
		want string
	}{
		{false, append([]string{"plan", "--lake", ""}, runArgs[1:]...), "--lake is empty: give the lake's URL (a folder, s3://…), or leave the flag out for ./lake"},
		{true, runArgs, "BATCHLAKE_LAKE is set but empty: give the lake's URL (a folder, s3://…), or unset it for ./lake"},
		{true, []string{"jobs"}, "BATCHLAKE_LAKE is set but empty: give the lake's URL (a folder, s3://…), or unset it for ./lake"},
	} {
		if c.env {
			t.Setenv("BATCHLAKE_LAKE", "")
		}
		code, res := cli(t, c.args...)
		if msg, _ := res["error"].(string); code != exitUsage || msg != c.want {
			t.Errorf("%v (BATCHLAKE_LAKE empty: %v): exit %d %q, want 2 and %q", c.args, c.env, code, msg, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "lake", "manifests")); err != nil {
		t.Fatalf("planDemoJob's lake: %v", err)
	}
	if ms, _ := os.ReadDir(filepath.Join(dir, "lake", "manifests")); len(ms) != 1 {
		t.Errorf("./lake holds %d manifests, want planDemoJob's one", len(ms))
	}
	// The command line wins over the empty variable.
	if code, res := cli(t, "jobs", "--lake", filepath.Join(dir, "lake")); code != exitOK {
		t.Errorf("jobs --lake with BATCHLAKE_LAKE empty: exit %d %v", code, res)
	}
}

// TestVerifyPrintsOneObject: verify that finds a problem exits 1 with its
// report as the one JSON object on stdout (an error object was printed
// after it, which an orchestrator reading stdout as JSON could not parse).
func TestVerifyPrintsOneObject(t *testing.T) {
	_, lk, _, _ := planDemoJob(t, 3)
	var shard string
	filepath.WalkDir(filepath.Join(lk, "objects"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && shard == "" {
			shard = p
		}
		return nil
	})
	if err := os.WriteFile(shard, []byte("tampered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errb := cliRaw("verify", "--lake", lk)
	if code != exitError {
		t.Fatalf("verify of a tampered lake: exit %d, want 1\n%s", code, errb)
	}
	d := json.NewDecoder(strings.NewReader(out))
	var rep struct {
		OK       *bool            `json:"ok"`
		Problems []map[string]any `json:"problems"`
	}
	if err := d.Decode(&rep); err != nil || rep.OK == nil || *rep.OK || len(rep.Problems) == 0 {
		t.Fatalf("verify's stdout: %v %+v, want its report with ok false and the problem\n%s", err, rep, out)
	}
	var more any
	if err := d.Decode(&more); err != io.EOF {
		t.Errorf("verify printed more than one JSON object: then %v (%v)\n%s", more, err, out)
	}
}

// planDemoJob plans the first n requests of testdata/demo for the simulator
// into a new lake, returning its folder, the lake, the input and the job key.
func planDemoJob(t *testing.T, n int) (dir, lk, in, job string) {
	t.Helper()
	dir = t.TempDir()
	lk = filepath.Join(dir, "lake")
	lines, err := os.ReadFile(filepath.Join("..", "..", "testdata", "demo", "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	in = filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(strings.SplitN(string(lines), "\n", n+1)[:n], "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, pl := cli(t, "plan", "--lake", lk, "--provider", "sim", "--input", in, "--tenant", "acme", "--prompt-version", "v1", "--progress", "never")
	if code != exitOK {
		t.Fatalf("plan: exit %d %v", code, pl)
	}
	return dir, lk, in, pl["job_key"].(string)
}
