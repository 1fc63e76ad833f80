package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/internal/fakeopenai"
)

// TestStepsUseTheJobsProvider: a job planned for OpenAI is submitted,
// polled and collected at OpenAI when no --provider is given (the provider
// is the job's, from its manifest), never by the simulator.
func TestStepsUseTheJobsProvider(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 11})
	p := h.plan(6, 3) // plan's --provider defaults to openai

	r := h.must([]int{0}, "submit", "--job", p.JobKey)
	var s stepOut
	decode(t, r, &s)
	for _, sh := range s.Shards {
		if sh.Action != "created" || sh.ProviderJobID == "" || strings.HasPrefix(sh.ProviderJobID, "batch_sim_") {
			t.Errorf("shard %s: action %q batch %q, want created at the OpenAI server (not a simulated batch)", sh.ShardID, sh.Action, sh.ProviderJobID)
		}
	}
	if got := h.creates(); got != len(p.Shards) {
		t.Fatalf("the OpenAI server received %d creates, want %d", got, len(p.Shards))
	}
	h.assertOneBatchPerShard(p)
	h.must([]int{0}, "status", "--job", p.JobKey, "--wait", "--poll", "20ms")
	h.must([]int{0}, "collect", "--job", p.JobKey)
	rep := h.reconcile(p.JobKey, p.Records)
	if len(rep.Files.Output) != len(p.Shards) {
		t.Errorf("reconciled %d output files, want the %d the OpenAI server made", len(rep.Files.Output), len(p.Shards))
	}
	// Giving the job's own provider is fine too.
	h.must([]int{0}, "submit", "--job", p.JobKey, "--provider", "openai")
	if got := h.creates(); got != len(p.Shards) {
		t.Errorf("%d creates after submitting again, want %d", got, len(p.Shards))
	}
}

// TestProviderThatDisagreesIsUsage: every step given a --provider other
// than the job's exits 2 naming both, and changes nothing; the simulator
// refuses a job planned for OpenAI.
func TestProviderThatDisagreesIsUsage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 12})
	p := h.plan(4, 2)
	for _, step := range []string{"submit", "status", "collect", "cancel"} {
		for _, other := range []string{"sim", "anthropic"} {
			t.Run(step+" "+other, func(t *testing.T) {
				r := h.run(step, "--job", p.JobKey, "--provider", other)
				if r.code != exitUsage {
					t.Fatalf("want exit 2, got %s", r)
				}
				msg := r.stdout + r.stderr
				for _, want := range []string{"--provider " + other, "planned for provider openai"} {
					if !strings.Contains(msg, want) {
						t.Errorf("message does not say %q: %s", want, msg)
					}
				}
			})
		}
	}
	for _, sh := range p.Shards {
		if got := strings.Join(h.ledgerStates(p.JobKey, sh.ShardID), ","); got != "CREATED,VALIDATED" {
			t.Errorf("shard %s ledger %s after refused steps, want CREATED,VALIDATED", sh.ShardID, got)
		}
	}
	if got := h.creates(); got != 0 {
		t.Errorf("%d creates at the OpenAI server, want 0", got)
	}
}

// TestRunOnTheSimulatorPlansASimJob: `run --provider sim` plans a job whose
// manifest says sim (a job key of its own, apart from the same records
// planned for OpenAI), and its lines are priced as OpenAI's.
func TestRunOnTheSimulatorPlansASimJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 13})
	in := h.writeInput(20)
	r := h.must([]int{0, exitPartial}, "run", "--provider", "sim", "--input", in, "--tenant", "acme", "--prompt-version", "p1",
		"--poll", "20ms", "--max-rounds", "2", "--sim-lost-creates", "0")
	var res struct {
		JobKey     string      `json:"job_key"`
		CostUSD    json.Number `json:"cost_usd"`
		LastReport struct {
			Provider      string `json:"provider"`
			UnpricedLines int64  `json:"unpriced_lines"`
		} `json:"last_report"`
	}
	decode(t, r, &res)
	var ms []struct {
		JobKey   string `json:"job_key"`
		Provider string `json:"provider"`
	}
	h.query("SELECT job_key, provider FROM manifests ORDER BY attempt", &ms)
	if len(ms) == 0 || ms[0].JobKey != res.JobKey {
		t.Fatalf("manifests %+v, want the run's job %s first", ms, res.JobKey)
	}
	for _, m := range ms {
		if m.Provider != "sim" {
			t.Errorf("job %s planned for %q, want sim", m.JobKey, m.Provider)
		}
	}
	if res.LastReport.Provider != "sim" || res.LastReport.UnpricedLines != 0 || res.CostUSD == "0" || res.CostUSD == "" {
		t.Errorf("last report provider %q, %d unpriced lines, cost %s: want sim, 0 and a price", res.LastReport.Provider, res.LastReport.UnpricedLines, res.CostUSD)
	}
	var open planOut
	decode(t, h.must([]int{0}, "plan", "--input", in, "--tenant", "acme", "--prompt-version", "p1"), &open)
	if open.JobKey == res.JobKey {
		t.Errorf("the same records planned for OpenAI got the simulated job's key %s", open.JobKey)
	}
	// A step of the simulated job given a real provider is refused.
	if r := h.run("status", "--job", res.JobKey, "--provider", "openai"); r.code != exitUsage || !strings.Contains(r.stdout+r.stderr, "planned for provider sim") {
		t.Errorf("status --provider openai of a sim job: want exit 2 naming sim, got %s", r)
	}
}

// TestRunContinuesStepsOnTheSimulator: run and the step commands share one
// simulator, whose batches are in the lake: a sim job submitted with
// `submit` is polled, collected and reconciled by `run` (which once spoke
// to a server of its own and could not find the batches), and `status`
// afterwards reads the same batches.
func TestRunContinuesStepsOnTheSimulator(t *testing.T) {
	t.Parallel()
	lk := filepath.Join(t.TempDir(), "lake")
	in := filepath.Join("..", "..", "testdata", "demo", "requests.jsonl")
	planArgs := []string{"--lake", lk, "--provider", "sim", "--input", in, "--tenant", "acme", "--prompt-version", "v1", "--shard-max-records", "100"}
	code, pl := cli(t, append([]string{"plan", "--progress", "never"}, planArgs...)...)
	if code != exitOK {
		t.Fatalf("plan: exit %d: %v", code, pl)
	}
	job, _ := pl["job_key"].(string)
	code, sub := cli(t, "submit", "--lake", lk, "--job", job)
	if code != exitOK {
		t.Fatalf("submit: exit %d: %v", code, sub)
	}
	bound := map[string]string{}
	for _, s := range sub["shards"].([]any) {
		sh := s.(map[string]any)
		bound[sh["shard_id"].(string)], _ = sh["provider_job_id"].(string)
	}
	code, res := cli(t, append([]string{"run", "--poll", "10ms", "--sim-lost-creates", "0", "--progress", "never"}, planArgs...)...)
	if code != exitOK && code != exitPartial {
		t.Fatalf("run after submit: exit %d: %v", code, res)
	}
	if res["job_key"] != job {
		t.Errorf("run's job %v, want the submitted one %s", res["job_key"], job)
	}
	code, st := cli(t, "status", "--lake", lk, "--job", job)
	if code != exitOK {
		t.Fatalf("status after run: exit %d: %v", code, st)
	}
	for _, s := range st["shards"].([]any) {
		sh := s.(map[string]any)
		if id := sh["shard_id"].(string); sh["provider_job_id"] != bound[id] || !strings.HasPrefix(bound[id], "batch_sim_") {
			t.Errorf("shard %s: batch %v after run, want the one submit made (%s)", id, sh["provider_job_id"], bound[id])
		}
	}
}
