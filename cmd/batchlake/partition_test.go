package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/lake"
)

// shardFiles are one shard's provider output and error files.
type shardFiles struct{ output, errors string }

// resultFiles writes, per shard of plan p (records req-0000… in plan
// order, perShard to a shard), an output and an error file with every kind
// of defect: failures of each class, empty successes, duplicates, missing
// records, unknown ids and unreadable lines.
func resultFiles(t *testing.T, p planOut, perShard int, rng *rand.Rand) map[string]shardFiles {
	t.Helper()
	dir := t.TempDir()
	success := func(id, text string, in, out int) string {
		return fmt.Sprintf(`{"id":"br_%s","custom_id":%q,"response":{"status_code":200,"request_id":"req_%s","body":{"object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":0}}}},"error":null}`, id, id, id, text, in, out)
	}
	httpErr := func(id string, status int, code string) string {
		return fmt.Sprintf(`{"id":"br_%s","custom_id":%q,"response":{"status_code":%d,"request_id":"req_%s","body":{"error":{"message":"m","type":"t","param":null,"code":%q}}},"error":null}`, id, id, status, id, code)
	}
	out := map[string]shardFiles{}
	for si, s := range p.Shards {
		var o, e []string
		for r := range int(s.Records) {
			id := fmt.Sprintf("req-%04d", si*perShard+r)
			in, toks := 20+rng.IntN(900), 1+rng.IntN(300)
			switch rng.IntN(9) {
			case 0, 1, 2:
				o = append(o, success(id, "fine", in, toks))
			case 3:
				o = append(o, success(id, "", in, toks)) // fails the quality gate
			case 4:
				e = append(e, httpErr(id, 500, "server_error"))
			case 5:
				e = append(e, httpErr(id, 400, "invalid_request_error"))
			case 6: // missing
			case 7:
				l := success(id, "twice", in, toks)
				o = append(o, l, l)
			case 8:
				o = append(o, success(id, "fine", in, toks))
				e = append(e, fmt.Sprintf(`{"id":"br_%s","custom_id":%q,"response":null,"error":{"code":"batch_expired","message":"expired"}}`, id, id))
			}
		}
		o = append(o, success(fmt.Sprintf("stranger-%d", si), "who", 50, 5), `{"id":"br_broken","custom_id":"req-`)
		rng.Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
		f := shardFiles{filepath.Join(dir, s.ShardID+"-output.jsonl"), filepath.Join(dir, s.ShardID+"-errors.jsonl")}
		for path, lines := range map[string][]string{f.output: o, f.errors: e} {
			if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out[s.ShardID] = f
	}
	return out
}

// parallel runs one batchlake process per argument list, all at once, and
// requires each to exit with one of codes.
func (h *harness) parallel(codes []int, runs [][]string) []result {
	h.t.Helper()
	res := make([]result, len(runs))
	var wg sync.WaitGroup
	for i, args := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = h.run(args...)
		}()
	}
	wg.Wait()
	for _, r := range res {
		if r.killed || !slices.Contains(codes, r.code) {
			h.t.Fatalf("want exit %v, got %s", codes, r)
		}
	}
	return res
}

// lakeKeys lists the keys of a local lake, leaving out partition results
// and the partial files they name.
func lakeKeys(t *testing.T, dir string) (keys []string, partials map[string]bool) {
	t.Helper()
	partials = map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		k, _ := filepath.Rel(dir, p)
		k = filepath.ToSlash(k)
		if strings.HasPrefix(k, lake.PartitionArea) {
			var env struct {
				Body struct {
					Outcomes string `json:"outcomes_file"`
					Costs    string `json:"costs_file"`
				} `json:"body"`
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(b, &env); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			partials[k], partials[env.Body.Outcomes], partials[env.Body.Costs] = true, true, true
			return nil
		}
		keys = append(keys, k)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { return partials[k] })
	slices.Sort(keys)
	return keys, partials
}

// TestPartitionedFanOut runs a job the way a cluster would, as parallel
// local processes — ingest per shard at once, reconcile --partition k/n per
// partition at once, then reconcile --merge — and proves the merged result
// identical to a single reconcile of the same files in another lake: the
// same exit code, report (but its time), retry shards and lineage, outcomes
// and costs rows, lake keys, and the same child job from retry.
func TestPartitionedFanOut(t *testing.T) {
	const records, perShard, parts = 180, 40, 3
	single := newHarness(t, fakeopenai.Options{})
	fan := newHarness(t, fakeopenai.Options{})
	input := single.writeInput(records)
	plan := func(h *harness) planOut {
		r := h.must([]int{0}, "plan", "--input", input, "--tenant", "acme", "--prompt-version", "p1", "--shard-max-records", fmt.Sprint(perShard))
		var p planOut
		decode(t, r, &p)
		return p
	}
	p := plan(single)
	if q := plan(fan); q.JobKey != p.JobKey {
		t.Fatalf("the two lakes planned different jobs: %s, %s", p.JobKey, q.JobKey)
	}
	files := resultFiles(t, p, perShard, rand.New(rand.NewPCG(7, 7)))
	ingestArgs := func(shard string) []string {
		f := files[shard]
		return []string{"ingest", "--job", p.JobKey, "--shard", shard, "--output", f.output, "--errors", f.errors}
	}

	// The single run: ingest shard by shard, one reconcile.
	for _, s := range p.Shards {
		single.must([]int{0}, ingestArgs(s.ShardID)...)
	}
	singleOut := t.TempDir()
	sr := single.must([]int{exitReview}, "reconcile", "--job", p.JobKey, "--out", singleOut)

	// The fan-out: every shard's ingest at once, every partition at once, the merge.
	var ingests, partitions [][]string
	for _, s := range p.Shards {
		ingests = append(ingests, ingestArgs(s.ShardID))
	}
	fan.parallel([]int{0}, ingests)
	for k := range parts {
		partitions = append(partitions, []string{"reconcile", "--job", p.JobKey, "--partition", fmt.Sprintf("%d/%d", k, parts)})
	}
	var expected int64
	for _, r := range fan.parallel([]int{0}, partitions) {
		var pr struct {
			Expected int64 `json:"expected"`
			Key      string
		}
		decode(t, r, &pr)
		expected += pr.Expected
	}
	if expected != records {
		t.Errorf("partitions reconciled %d records, want %d", expected, records)
	}
	// Bad usage, one partition short, or a partition count that was not run: refused.
	fan.must([]int{exitUsage}, "reconcile", "--job", p.JobKey, "--partition", fmt.Sprintf("%d/%d", parts, parts))
	fan.must([]int{exitUsage}, "reconcile", "--job", p.JobKey, "--partitions", fmt.Sprint(parts))
	fan.must([]int{exitUsage}, "reconcile", "--job", p.JobKey, "--merge", "--partitions", fmt.Sprint(parts+1))
	fan.must([]int{exitUsage}, "reconcile", "--job", p.JobKey, "--merge", "--max-attempts", "5")
	fanOut := t.TempDir()
	fr := fan.must([]int{exitReview}, "reconcile", "--job", p.JobKey, "--merge", "--out", fanOut)

	// The same report, but for its time.
	norm := func(s string) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("report: %v\n%s", err, s)
		}
		delete(m, "reconciled_at")
		b, _ := json.MarshalIndent(m, "", " ")
		return string(b)
	}
	if a, b := norm(fr.stdout), norm(sr.stdout); a != b {
		t.Fatalf("merged report differs from the single run's:\nmerged %s\nsingle %s", a, b)
	}
	var rep report
	decode(t, sr, &rep)
	if rep.Expected != records || rep.Unknown != int64(len(p.Shards)) || rep.Quarantined != int64(len(p.Shards)) || rep.Duplicate == 0 || len(rep.RetryShards) == 0 {
		t.Fatalf("the batch lacks the defects the test needs: %s", rep.counts())
	}

	// The same --out files: report (but its time), retry shards, lineage.
	sf, _ := filepath.Glob(filepath.Join(singleOut, "*"))
	ff, _ := filepath.Glob(filepath.Join(fanOut, "*"))
	if len(sf) < 3 || len(sf) != len(ff) {
		t.Fatalf("--out files: single %v, merged %v", sf, ff)
	}
	for _, f := range sf {
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(fanOut, filepath.Base(f)))
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "report.json" {
			a, b = []byte(norm(string(a))), []byte(norm(string(b)))
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the single and the merged run", filepath.Base(f))
		}
	}

	// The same lake keys (content-addressed: the same bytes), beside the partitions.
	sk, _ := lakeKeys(t, single.lake)
	fk, partials := lakeKeys(t, fan.lake)
	if !slices.Equal(sk, fk) {
		t.Errorf("lake keys differ:\nsingle only %v\nmerged only %v", minus(sk, fk), minus(fk, sk))
	}
	if len(partials) != 3*parts {
		t.Errorf("%d partition keys, want %d (a marker and two files per partition)", len(partials), 3*parts)
	}

	// The same rows in the views (but the lines' ingest times, each lake's
	// own), and both lakes verify.
	q := `SELECT (SELECT list(o ORDER BY record_id) FROM outcomes o) AS outcomes,
	             (SELECT list(c ORDER BY raw_sha256, line_no) FROM (SELECT * EXCLUDE (ingested_at) FROM costs) c) AS costs,
	             (SELECT list(s ORDER BY shard_id, seq) FROM (SELECT shard_id, seq, state FROM ledger) s) AS ledger`
	a := single.must([]int{0}, "sql", "--format", "json", q)
	b := fan.must([]int{0}, "sql", "--format", "json", q)
	if a.stdout != b.stdout || !strings.Contains(a.stdout, "duplicate_submission") || !strings.Contains(a.stdout, "RECONCILING") {
		t.Errorf("the views differ:\nsingle %.600s\nmerged %.600s", a.stdout, b.stdout)
	}
	single.must([]int{0}, "verify")
	fan.must([]int{0}, "verify")

	// Merging again changes nothing; retry makes the same child job.
	again := fan.must([]int{exitReview}, "reconcile", "--job", p.JobKey, "--merge")
	if !strings.Contains(again.stdout, `"unchanged": true`) {
		t.Errorf("merge again: %s", again.stdout)
	}
	childOf := func(h *harness) string {
		var r struct {
			Child struct {
				JobKey string `json:"job_key"`
			} `json:"child"`
		}
		decode(t, h.must([]int{0}, "retry", "--job", p.JobKey), &r)
		return r.Child.JobKey
	}
	if a, b := childOf(single), childOf(fan); a == "" || a != b {
		t.Errorf("retry: child %q from the single run, %q from the merge", a, b)
	}
}

// minus is a without b.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
