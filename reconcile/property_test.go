package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// fate is what the fake provider does with one record.
type fate int

const (
	fSuccess       fate = iota
	fEmpty              // 200 with no content: fails the default quality gate
	f500                // retryable
	f429                // retryable
	fExpired            // batch_expired error line: retryable
	fQuota              // 429 insufficient_quota: permanent
	f400                // permanent
	fMissing            // no line
	fDupSuccess         // the success line twice
	fSuccessAndErr      // a success and an expired line: succeeded and duplicate
	nFates
)

// truth is the ground truth of a generated batch, computed without DuckDB.
type truth struct {
	counts map[string]int64
	costs  map[string]*big.Rat
	retry  []string // custom ids of the retry set
}

// Prices of gpt-4o-mini in the shipped table, per token, batch multiplier applied.
var (
	pIn     = big.NewRat(15, 100*2*1_000_000)
	pCached = big.NewRat(75, 1000*2*1_000_000)
	pOut    = big.NewRat(60, 100*2*1_000_000)
	// The shipped table has no cache_write_usd_per_mtok: cache writes cost
	// the input price.
	pWrite = pIn
)

// cacheWrite is how many of a line's input tokens the generator reports as
// cache writes (counted inside input_tokens, like the providers do).
func cacheWrite(in, cached int64) int64 { return (in - cached) / 4 }

func lineCost(in, cached, out int64) *big.Rat {
	write := cacheWrite(in, cached)
	c := new(big.Rat).Mul(big.NewRat(in-cached-write, 1), pIn)
	c.Add(c, new(big.Rat).Mul(big.NewRat(cached, 1), pCached))
	c.Add(c, new(big.Rat).Mul(big.NewRat(write, 1), pWrite))
	return c.Add(c, new(big.Rat).Mul(big.NewRat(out, 1), pOut))
}

type genBatch struct {
	input, output, errors []string
	truth                 truth
}

func generate(rng *rand.Rand, n, unknown, garbage int) genBatch {
	var g genBatch
	t := truth{counts: map[string]int64{}, costs: map[string]*big.Rat{}}
	for _, c := range Categories {
		t.costs[c] = new(big.Rat)
	}
	success := func(id, text string, in, cached, out int64) string {
		return fmt.Sprintf(`{"id":"br_%s","custom_id":%q,"response":{"status_code":200,"request_id":"req_%s","body":{"object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d,"cache_write_tokens":%d}}}},"error":null}`, id, id, id, text, in, out, cached, cacheWrite(in, cached))
	}
	httpErr := func(id string, status int, typ, code string) string {
		return fmt.Sprintf(`{"id":"br_%s","custom_id":%q,"response":{"status_code":%d,"request_id":"req_%s","body":{"error":{"message":"m","type":%q,"param":null,"code":%q}}},"error":null}`, id, id, status, id, typ, code)
	}
	expired := func(id string) string {
		return fmt.Sprintf(`{"id":"br_%s","custom_id":%q,"response":null,"error":{"code":"batch_expired","message":"expired"}}`, id, id)
	}
	tokens := func() (int64, int64, int64) {
		in := int64(10 + rng.IntN(5000))
		return in, int64(rng.IntN(int(in))) / 64 * 64, int64(1 + rng.IntN(800))
	}
	for i := range n {
		id := fmt.Sprintf("rec-%05d", i)
		g.input = append(g.input, fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"item %d"}],"max_tokens":64}}`, id, i))
		f := fate(rng.IntN(int(nFates)))
		in, cached, out := tokens()
		switch f {
		case fSuccess, fDupSuccess, fSuccessAndErr:
			l := success(id, "answer", in, cached, out)
			g.output = append(g.output, l)
			t.counts["succeeded"]++
			t.costs["first_success"].Add(t.costs["first_success"], lineCost(in, cached, out))
			if f == fDupSuccess {
				g.output = append(g.output, l)
				t.costs["duplicate_submission"].Add(t.costs["duplicate_submission"], lineCost(in, cached, out))
				t.counts["duplicate"]++
			}
			if f == fSuccessAndErr {
				g.errors = append(g.errors, expired(id))
				t.counts["duplicate"]++
			}
		case fEmpty:
			g.output = append(g.output, success(id, "", in, cached, out))
			t.counts["quality_failed"]++
			t.costs["quality_failure"].Add(t.costs["quality_failure"], lineCost(in, cached, out))
			t.retry = append(t.retry, id)
		case f500:
			g.errors = append(g.errors, httpErr(id, 500, "server_error", ""))
			t.counts["failed_retryable"]++
			t.retry = append(t.retry, id)
		case f429:
			g.errors = append(g.errors, httpErr(id, 429, "requests", "rate_limit_exceeded"))
			t.counts["failed_retryable"]++
			t.retry = append(t.retry, id)
		case fExpired:
			g.errors = append(g.errors, expired(id))
			t.counts["failed_retryable"]++
			t.retry = append(t.retry, id)
		case fQuota:
			g.errors = append(g.errors, httpErr(id, 429, "insufficient_quota", "insufficient_quota"))
			t.counts["failed_permanent"]++
		case f400:
			g.errors = append(g.errors, httpErr(id, 400, "invalid_request_error", "context_length_exceeded"))
			t.counts["failed_permanent"]++
		case fMissing:
			t.counts["missing"]++
			t.retry = append(t.retry, id)
		}
	}
	for i := range unknown {
		in, cached, out := tokens()
		g.output = append(g.output, success(fmt.Sprintf("stranger-%d", i), "hi", in, cached, out))
		t.costs["unattributed"].Add(t.costs["unattributed"], lineCost(in, cached, out))
	}
	for i := range garbage {
		g.output = append(g.output, fmt.Sprintf(`{"id":"br_x%d","custom_id":"rec-`, i))
	}
	t.counts["expected"] = int64(n)
	t.counts["unknown"] = int64(unknown)
	t.counts["quarantined"] = int64(garbage)
	t.counts["retry_records"] = int64(len(t.retry))
	t.counts["manual_records"] = t.counts["failed_permanent"]
	rng.Shuffle(len(g.output), func(i, j int) { g.output[i], g.output[j] = g.output[j], g.output[i] })
	rng.Shuffle(len(g.errors), func(i, j int) { g.errors[i], g.errors[j] = g.errors[j], g.errors[i] })
	slices.Sort(t.retry)
	g.truth = t
	return g
}

func writeLines(t testing.TB, dir, name string, lines []string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// planAndIngest plans input and ingests output and errors into l.
func planAndIngest(t testing.TB, l *lake.Lake, dir string, g genBatch, shardMax int) *lake.Manifest {
	t.Helper()
	return planAndIngestSplit(t, l, dir, g, shardMax, 0)
}

// planAndIngestSplit is planAndIngest with the job's tables split by
// partition from splitMin records on (ingest.PlanOptions.SplitMinRecords),
// every result file's attempts split as a large file's are.
func planAndIngestSplit(t testing.TB, l *lake.Lake, dir string, g genBatch, shardMax int, splitMin int64) *lake.Manifest {
	t.Helper()
	return planAndIngestSized(t, l, dir, g, shardMax, splitMin, -1)
}

// planAndIngestSized is planAndIngestSplit with each result file's attempts
// split by its size (ingest.FileOptions.SplitMinBytes).
func planAndIngestSized(t testing.TB, l *lake.Lake, dir string, g genBatch, shardMax int, splitMin, splitMinBytes int64) *lake.Manifest {
	t.Helper()
	ctx := context.Background()
	m := planGen(t, l, dir, g, shardMax, splitMin)
	for _, f := range []struct {
		name, channel string
		lines         []string
	}{{"output.jsonl", ingest.ChannelOutput, g.output}, {"errors.jsonl", ingest.ChannelError, g.errors}} {
		if _, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: writeLines(t, dir, f.name, f.lines), Channel: f.channel, TmpDir: dir, SplitMinBytes: splitMinBytes}); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// planGen plans g's input in l (shards of shardMax records, 0 for the
// default; tables split by partition from splitMin records on) and returns
// the job's manifest.
func planGen(t testing.TB, l *lake.Lake, dir string, g genBatch, shardMax int, splitMin int64) *lake.Manifest {
	t.Helper()
	ctx := context.Background()
	res, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", Input: writeLines(t, dir, "input.jsonl", g.input),
		Tenant: "t1", PromptVersion: "p1", ShardMaxRecords: shardMax, TmpDir: dir, SplitMinRecords: splitMin})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := lake.ParseDigest(res.JobKey)
	m, err := l.GetManifest(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// reconcileNew plans and ingests g into a new lake dir/name (shards of
// shardMax records, 0 for the default) and reconciles it once.
func reconcileNew(t *testing.T, dir, name string, g genBatch, shardMax int) (*lake.Lake, *lake.Manifest, *Report) {
	t.Helper()
	return reconcileNewWith(t, dir, name, g, shardMax, nil)
}

// reconcileNewWith is reconcileNew with the options edit makes.
func reconcileNewWith(t *testing.T, dir, name string, g genBatch, shardMax int, edit func(*Options)) (*lake.Lake, *lake.Manifest, *Report) {
	t.Helper()
	ctx := context.Background()
	l, err := lake.Open(ctx, filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	m := planAndIngest(t, l, dir, g, shardMax)
	o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2, CacheDir: filepath.Join(dir, "cache-"+name)}}
	if edit != nil {
		edit(&o)
	}
	rep, err := Run(ctx, l, o)
	if err != nil {
		t.Fatal(err)
	}
	return l, m, rep
}

// TestReconcileMatchesGroundTruth: for random batches with known defects the
// report equals the ground truth exactly — every count, the retry set and its
// lineage, the cost per category — and reconciling again changes nothing.
func TestReconcileMatchesGroundTruth(t *testing.T) {
	t.Parallel()
	seeds := 12
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(seed), 99))
			g := generate(rng, 20+rng.IntN(300), rng.IntN(4), rng.IntN(3))
			dir := t.TempDir()
			url := filepath.Join(dir, "lake")
			if seed%4 == 3 {
				url = "mem://" // a remote-style lake: DuckDB reads through the cache
			}
			l, err := lake.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			m := planAndIngest(t, l, dir, g, 1+rng.IntN(120))
			out := filepath.Join(dir, "out")
			o := Options{JobKey: m.JobKey, OutDir: out, TmpDir: dir, Engine: EngineOptions{Threads: 2, CacheDir: filepath.Join(dir, "cache")}}
			rep, err := Run(ctx, l, o)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{"expected": rep.Expected, "succeeded": rep.Succeeded, "failed_retryable": rep.FailedRetryable,
				"failed_permanent": rep.FailedPermanent, "quality_failed": rep.QualityFailed, "missing": rep.Missing, "unknown": rep.Unknown,
				"duplicate": rep.Duplicate, "quarantined": rep.Quarantined, "retry_records": rep.RetryRecords, "manual_records": rep.ManualRecords}
			for k, want := range g.truth.counts {
				if got[k] != want {
					t.Errorf("%s = %d, want %d", k, got[k], want)
				}
			}
			total := new(big.Rat)
			for _, c := range Categories {
				have, ok := new(big.Rat).SetString(string(rep.CostUSD[c]))
				if !ok {
					t.Fatalf("cost_usd.%s = %q", c, rep.CostUSD[c])
				}
				if have.Cmp(g.truth.costs[c]) != 0 {
					t.Errorf("cost_usd.%s = %s, want %s", c, have.FloatString(12), g.truth.costs[c].FloatString(12))
				}
				total.Add(total, g.truth.costs[c])
			}
			if have, _ := new(big.Rat).SetString(string(rep.CostUSD["total"])); have == nil || have.Cmp(total) != 0 {
				t.Errorf("cost_usd.total = %s, want %s", rep.CostUSD["total"], total.FloatString(12))
			}
			wantState := lake.Partial
			if g.truth.counts["retry_records"] == 0 && g.truth.counts["missing"] == 0 && g.truth.counts["unknown"] == 0 && g.truth.counts["duplicate"] == 0 {
				wantState = lake.Completed
			}
			if rep.State != wantState {
				t.Errorf("state %s, want %s", rep.State, wantState)
			}
			checkRetryFiles(t, out, g, m)

			// Reconciling again: the same report, nothing new in the lake.
			before, _ := l.List(ctx, "")
			again, err := Run(ctx, l, o)
			if err != nil {
				t.Fatal(err)
			}
			if !again.Unchanged || again.Report != rep.Report || again.Succeeded != rep.Succeeded || again.CostUSD["total"] != rep.CostUSD["total"] {
				t.Errorf("second reconcile: unchanged=%v report %s (first %s)", again.Unchanged, again.Report, rep.Report)
			}
			after, _ := l.List(ctx, "")
			if len(after) != len(before) {
				t.Errorf("second reconcile wrote %d keys", len(after)-len(before))
			}
		})
	}
}

// checkRetryFiles: the retry shards hold exactly the retry set, with the
// original request bodies and new custom ids; the lineage names every one.
func checkRetryFiles(t *testing.T, out string, g genBatch, m *lake.Manifest) {
	t.Helper()
	bodies := map[string]string{}
	for _, l := range g.input {
		var in struct {
			CustomID string          `json:"custom_id"`
			Body     json.RawMessage `json:"body"`
		}
		json.Unmarshal([]byte(l), &in)
		bodies[in.CustomID] = string(in.Body)
	}
	lineage := map[string]string{} // new custom id -> parent custom id
	if f, err := os.Open(filepath.Join(out, "retry-lineage.jsonl")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var li struct {
				ingest.Lineage
				Parent string `json:"parent_custom_id"`
			}
			if err := json.Unmarshal(sc.Bytes(), &li); err != nil {
				t.Fatal(err)
			}
			if li.Attempt != 2 || li.ParentJobKey != m.JobKey || li.ParentShardID == "" || li.RetryReason == "" {
				t.Errorf("lineage %+v incomplete", li)
			}
			lineage[li.CustomID] = li.Parent
		}
		f.Close()
	}
	var parents []string
	files, _ := filepath.Glob(filepath.Join(out, "retry-0*.jsonl"))
	for _, p := range files {
		b, _ := os.ReadFile(p)
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var in struct {
				CustomID string          `json:"custom_id"`
				Body     json.RawMessage `json:"body"`
			}
			if err := json.Unmarshal([]byte(l), &in); err != nil {
				t.Fatal(err)
			}
			parent, ok := lineage[in.CustomID]
			if !ok {
				t.Errorf("retry line %s has no lineage", in.CustomID)
				continue
			}
			if !strings.HasPrefix(in.CustomID, "a2_") || len(in.CustomID) > 64 {
				t.Errorf("retry custom id %q", in.CustomID)
			}
			var a, b any
			json.Unmarshal(in.Body, &a)
			json.Unmarshal([]byte(bodies[parent]), &b)
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("retry body of %s changed", parent)
			}
			parents = append(parents, parent)
		}
	}
	slices.Sort(parents)
	if !slices.Equal(parents, g.truth.retry) {
		t.Errorf("retry set %v, want %v", parents, g.truth.retry)
	}
	if len(lineage) != len(g.truth.retry) {
		t.Errorf("lineage has %d records, want %d", len(lineage), len(g.truth.retry))
	}
}
