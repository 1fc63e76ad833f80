package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/batchlake/batchlake/internal/fakeanthropic"
	"github.com/batchlake/batchlake/internal/fakegemini"
	"github.com/batchlake/batchlake/internal/fakeopenai"
)

// TestFallbackOpenAIToAnthropic runs, as processes, an OpenAI job (the fake
// OpenAI server) whose retryable failures and contract failures fall back
// to Anthropic (the fake Anthropic server) with retry --provider --model,
// under an output contract (a JSON Schema) checked on both providers'
// answers; the last record then goes through Gemini's real-time API (retry
// --provider gemini --mode sync). The family's report, lineage and costs,
// batch and sync, must add up exactly.
func TestFallbackOpenAIToAnthropic(t *testing.T) {
	const (
		n        = 12
		seed     = 7
		badOpen  = "r-002" // OpenAI's answer breaks the contract (if it answers)
		claude   = "claude-sonnet-4-5-20250929"
		antKey   = "sk-ant-api03-FALLBACKTEST0123456789SECRET"
		goodJSON = `{"label":"positive"}`
	)
	rates := fakeopenai.Rates{ServerError: 0.35}
	h := newHarness(t, fakeopenai.Options{Seed: seed, Rates: &rates, Answer: func(cid string) string {
		if cid == badOpen {
			return "Sure! The label is positive."
		}
		return goodJSON
	}})

	var mu sync.Mutex
	keyOf := map[string]string{} // the child's custom ids to business keys
	var badAnt string            // the business key whose Anthropic answer breaks the contract
	ant := fakeanthropic.New(fakeanthropic.Options{APIKey: antKey, Answer: func(cid string) string {
		mu.Lock()
		defer mu.Unlock()
		if keyOf[cid] == badAnt {
			return `{"label": 7}`
		}
		return goodJSON
	}})
	hs := httptest.NewServer(ant.Handler())
	defer hs.Close()
	ant.SetBaseURL(hs.URL)
	env := []string{"ANTHROPIC_API_KEY=" + antKey, "ANTHROPIC_BASE_URL=" + hs.URL}

	// Chat requests asking for JSON under a schema: they translate.
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, `{"custom_id":"r-%03d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Label the review."},{"role":"user","content":"review %d"}],"max_tokens":64,"temperature":0.2,"response_format":{"type":"json_schema","json_schema":{"name":"label","strict":true,"schema":{"type":"object","properties":{"label":{"type":"string"}},"required":["label"],"additionalProperties":false}}}}}`+"\n", i, i)
	}
	input := filepath.Join(h.tmp, "in.jsonl")
	schema := filepath.Join(h.tmp, "contract.json")
	if err := os.WriteFile(input, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(schema, []byte(`{"type":"object","properties":{"label":{"type":"string"}},"required":["label"]}`), 0o644); err != nil {
		t.Fatal(err)
	}

	// What the OpenAI side does, from the simulator itself: which records
	// answer and which fail with a 500.
	simRes, err := fakeopenai.Simulate(in.Bytes(), seed, rates)
	if err != nil {
		t.Fatal(err)
	}
	answered := idsOf(t, simRes.Output)
	failed := idsOf(t, simRes.Errors)
	if len(failed) == 0 || len(answered) < 2 || !answered[badOpen] {
		t.Fatalf("seed %d: want some 500s and %s answered, got answered %v failed %v", seed, badOpen, answered, failed)
	}

	run := func(want int, args ...string) result {
		t.Helper()
		r := h.runEnv(env, args...)
		if r.code != want || r.killed {
			t.Fatalf("want exit %d, got %s", want, r)
		}
		if strings.Contains(r.stdout+r.stderr, antKey) {
			t.Fatalf("the Anthropic key leaked: %s", r)
		}
		return r
	}
	finish := func(job string) {
		t.Helper()
		run(0, "submit", "--job", job)
		for i := 0; ; i++ {
			r := h.runEnv(env, "status", "--job", job)
			if r.code == 0 {
				break
			}
			if r.code != exitTempFail || i > 20 {
				t.Fatalf("status: %s", r)
			}
		}
		run(0, "collect", "--job", job)
	}

	var plan struct {
		JobKey string `json:"job_key"`
	}
	decode(t, run(0, "plan", "--provider", "openai", "--input", input, "--tenant", "acme", "--prompt-version", "v1"), &plan)
	parent := plan.JobKey
	finish(parent)
	var prep famReport
	decode(t, run(10, "reconcile", "--job", parent, "--output-schema", schema), &prep)
	ok := int64(len(answered) - 1) // every answer but badOpen's satisfies the contract
	if prep.Succeeded != ok || prep.QualityFailed != 1 || prep.FailedRetryable != int64(len(failed)) || prep.RetryRecords != int64(len(failed))+1 {
		t.Fatalf("parent report: %+v; want succeeded %d, quality_failed 1, failed_retryable %d", prep, ok, len(failed))
	}
	wantContract := []contractRow{{"openai", "gpt-4o-mini-2024-07-18", int64(len(answered)), ok}}
	if fmt.Sprint(prep.OutputContract) != fmt.Sprint(wantContract) {
		t.Fatalf("parent output_contract %v, want %v", prep.OutputContract, wantContract)
	}

	// The fallback: the retry set translated to Anthropic messages.
	var rr struct {
		Child struct {
			JobKey  string `json:"job_key"`
			Records int64  `json:"records"`
		} `json:"child"`
		Provider     string `json:"provider"`
		Model        string `json:"model"`
		OutputSchema string `json:"output_schema"`
	}
	decode(t, run(0, "retry", "--job", parent, "--provider", "anthropic", "--model", claude), &rr)
	child := rr.Child.JobKey
	if rr.Child.Records != prep.RetryRecords || rr.Provider != "anthropic" || rr.Model != claude || rr.OutputSchema == "" {
		t.Fatalf("retry: %+v; want %d records for anthropic %s under the parent's contract", rr, prep.RetryRecords, claude)
	}
	// Again: the same child, nothing new.
	var again struct {
		Child struct {
			JobKey  string `json:"job_key"`
			Created bool   `json:"created"`
		} `json:"child"`
	}
	decode(t, run(0, "retry", "--job", parent, "--provider", "anthropic", "--model", claude), &again)
	if again.Child.JobKey != child || again.Child.Created {
		t.Fatalf("retry again: %+v, want child %s unchanged", again, child)
	}

	// The child's manifest names both providers and models; its records
	// keep their ids and lineage.
	m := h.sqlRows(t, fmt.Sprintf(`SELECT provider, model, parent_provider, parent_model, parent_job_key, attempt, output_schema <> '' AS contract
		FROM manifests WHERE job_key = '%s'`, child))
	if got := fmt.Sprint(m); got != fmt.Sprintf("[[anthropic %s openai gpt-4o-mini %s 2 true]]", claude, parent) {
		t.Fatalf("child manifest: %s", got)
	}
	lin := h.sqlRows(t, fmt.Sprintf(`SELECT c.business_key, c.custom_id, p.record_id = c.record_id, c.parent_job_key = p.job_key
		FROM expected c JOIN expected p ON p.job_key = '%s' AND p.business_key = c.business_key
		WHERE c.job_key = '%s' ORDER BY c.business_key`, parent, child))
	var childKeys []string
	mu.Lock() // until badAnt is set: the fake reads keyOf when a batch ends
	for _, r := range lin {
		if r[2] != "true" || r[3] != "true" {
			t.Fatalf("lineage row %v: the record id or parent changed", r)
		}
		childKeys = append(childKeys, r[0])
		keyOf[r[1]] = r[0]
	}
	var wantKeys []string
	for id := range failed {
		wantKeys = append(wantKeys, id)
	}
	wantKeys = append(wantKeys, badOpen)
	sort.Strings(wantKeys)
	if fmt.Sprint(childKeys) != fmt.Sprint(wantKeys) {
		t.Fatalf("child records %v, want the 500s and the contract failure %v", childKeys, wantKeys)
	}
	badAnt = childKeys[0]
	mu.Unlock()

	finish(child)
	var crep famReport
	// No --output-schema: the child is held to the contract its manifest names.
	decode(t, run(10, "reconcile", "--job", child), &crep)
	nc := int64(len(childKeys))
	if crep.Expected != nc || crep.Succeeded != nc-1 || crep.QualityFailed != 1 || crep.SchemaFailed != 1 {
		t.Fatalf("child report: %+v; want %d expected, %d succeeded, 1 quality_failed by the contract", crep, nc, nc-1)
	}
	wantContract = []contractRow{{"anthropic", claude, nc, nc - 1}}
	if fmt.Sprint(crep.OutputContract) != fmt.Sprint(wantContract) {
		t.Fatalf("child output_contract %v, want %v", crep.OutputContract, wantContract)
	}
	if r := h.sqlRows(t, fmt.Sprintf(`SELECT outcome, reason FROM outcomes WHERE job_key = '%s' AND business_key = '%s'`, child, badAnt)); fmt.Sprint(r) != "[[quality_failed schema]]" {
		t.Fatalf("the fallback's contract failure: %v", r)
	}

	// Who finally answered each record.
	rows := h.sqlRows(t, `SELECT business_key, final_state, provider, model FROM records ORDER BY business_key`)
	if len(rows) != n {
		t.Fatalf("records: %v", rows)
	}
	for _, r := range rows {
		want := "[" + r[0] + " succeeded openai gpt-4o-mini]"
		switch {
		case r[0] == badAnt:
			want = "[" + r[0] + " quality_failed anthropic " + claude + "]"
		case failed[r[0]] || r[0] == badOpen:
			want = "[" + r[0] + " succeeded anthropic " + claude + "]"
		}
		if fmt.Sprint(r) != want {
			t.Errorf("record %v, want %s", r, want)
		}
	}

	// The family: the report's numbers, its contract by provider, and what
	// each provider cost, exactly.
	var fam struct {
		Expected       int64         `json:"expected"`
		Succeeded      int64         `json:"succeeded"`
		CostTotal      json.Number   `json:"cost_total_usd"`
		OutputContract []contractRow `json:"output_contract"`
		Generations    []struct {
			Provider string `json:"provider"`
			Model    string `json:"model"`
		} `json:"generations"`
		ByProvider []struct {
			Key     string      `json:"key"`
			CostUSD json.Number `json:"cost_usd"`
		} `json:"cost_by_provider_model"`
	}
	decodeNumbers(t, run(0, "report", "--job", parent), &fam)
	if fam.Expected != n || fam.Succeeded != prep.Succeeded+crep.Succeeded {
		t.Fatalf("family: expected %d succeeded %d, want %d and %d", fam.Expected, fam.Succeeded, n, prep.Succeeded+crep.Succeeded)
	}
	wantFam := []contractRow{{"anthropic", claude, nc, nc - 1}, {"openai", "gpt-4o-mini-2024-07-18", int64(len(answered)), ok}}
	if fmt.Sprint(fam.OutputContract) != fmt.Sprint(wantFam) {
		t.Fatalf("family output_contract %v, want %v", fam.OutputContract, wantFam)
	}
	if fmt.Sprint(fam.Generations) != fmt.Sprintf("[{openai gpt-4o-mini} {anthropic %s}]", claude) {
		t.Fatalf("generations %v", fam.Generations)
	}
	openaiUSD, antUSD := prep.CostUSD["total"], crep.CostUSD["total"]
	if rat(t, openaiUSD).Sign() <= 0 || rat(t, antUSD).Sign() <= 0 {
		t.Fatalf("costs: openai %s, anthropic %s; want both priced", openaiUSD, antUSD)
	}
	sum := new(big.Rat).Add(rat(t, openaiUSD), rat(t, antUSD))
	if rat(t, fam.CostTotal.String()).Cmp(sum) != 0 {
		t.Fatalf("family cost %s, want %s + %s", fam.CostTotal, openaiUSD, antUSD)
	}
	if len(fam.ByProvider) != 2 || fam.ByProvider[0].Key != "anthropic claude-sonnet-4-5" || fam.ByProvider[1].Key != "openai gpt-4o-mini" ||
		rat(t, fam.ByProvider[0].CostUSD.String()).Cmp(rat(t, antUSD)) != 0 || rat(t, fam.ByProvider[1].CostUSD.String()).Cmp(rat(t, openaiUSD)) != 0 {
		t.Fatalf("report cost by provider %v; want anthropic %s, openai %s", fam.ByProvider, antUSD, openaiUSD)
	}
	var cost []map[string]any
	decodeNumbers(t, run(0, "cost", "--job", parent, "--family", "--by", "provider,model", "--format", "json"), &cost)
	if len(cost) != 2 {
		t.Fatalf("cost --family: %v", cost)
	}
	for _, c := range cost {
		want := openaiUSD
		if c["provider"] == "anthropic" {
			want = antUSD
			if c["model"] != "claude-sonnet-4-5" {
				t.Errorf("cost row %v", c)
			}
		}
		if rat(t, fmt.Sprint(c["cost_usd"])).Cmp(rat(t, want)) != 0 {
			t.Errorf("cost --family %v: want %s", c, want)
		}
	}
	// Without --family only the parent.
	decodeNumbers(t, run(0, "cost", "--job", parent, "--by", "provider", "--format", "json"), &cost)
	if len(cost) != 1 || cost[0]["provider"] != "openai" {
		t.Fatalf("cost of the parent alone: %v", cost)
	}
	// A plain retry of the fallback child retries on Anthropic, its records
	// still under their first ids.
	var gc struct {
		Child struct {
			JobKey  string `json:"job_key"`
			Records int64  `json:"records"`
		} `json:"child"`
	}
	decode(t, run(0, "retry", "--job", child), &gc)
	if gc.Child.Records != 1 {
		t.Fatalf("retry of the fallback child: %+v", gc)
	}
	if r := h.sqlRows(t, fmt.Sprintf(`SELECT m.provider, e.business_key, e.record_id = p.record_id, e.attempt FROM expected e
		JOIN manifests m ON m.job_key = e.job_key JOIN expected p ON p.job_key = '%s' AND p.business_key = e.business_key
		WHERE e.job_key = '%s'`, parent, gc.Child.JobKey)); fmt.Sprint(r) != "[[anthropic "+badAnt+" true 3]]" {
		t.Fatalf("grandchild: %v", r)
	}

	// The last record goes through Gemini's real-time API: a fallback child
	// of the Anthropic child, sent synchronously (it supersedes the plain
	// retry above, which was never submitted).
	const gemKey, gemModel = "AIzaFALLBACKTEST0123456789SECRET", "gemini-2.5-flash"
	gem := fakegemini.New(fakegemini.Options{APIKey: gemKey, Answer: func([]byte) string { return goodJSON }})
	gs := httptest.NewServer(gem.Handler())
	defer gs.Close()
	gem.SetBaseURL(gs.URL)
	env = append(env, "GEMINI_API_KEY="+gemKey, "GOOGLE_GEMINI_BASE_URL="+gs.URL)
	var sr struct {
		Child struct {
			JobKey  string `json:"job_key"`
			Records int64  `json:"records"`
		} `json:"child"`
		Mode string `json:"mode"`
	}
	decode(t, run(0, "retry", "--job", child, "--provider", "gemini", "--model", gemModel, "--mode", "sync"), &sr)
	if sr.Child.Records != 1 || sr.Mode != "sync" || sr.Child.JobKey == gc.Child.JobKey {
		t.Fatalf("retry to Gemini's real-time API: %+v", sr)
	}
	if calls := gem.RealTimeCalls(); len(calls) != 1 {
		t.Fatalf("Gemini's real-time API got %d calls, want 1 (one record)", len(calls))
	}
	var grep famReport
	decode(t, run(0, "reconcile", "--job", sr.Child.JobKey), &grep)
	if grep.Expected != 1 || grep.Succeeded != 1 {
		t.Fatalf("the Gemini child's report: %+v", grep)
	}
	if r := h.sqlRows(t, fmt.Sprintf(`SELECT final_state, provider, model, attempts FROM records WHERE business_key = '%s'`, badAnt)); fmt.Sprint(r) != "[[succeeded gemini "+gemModel+" 3]]" {
		t.Fatalf("the record Anthropic failed, after Gemini's real-time answer: %v", r)
	}
	if r := h.sqlRows(t, fmt.Sprintf(`SELECT e.record_id = p.record_id FROM expected e JOIN expected p ON p.job_key = '%s' AND p.business_key = e.business_key
		WHERE e.job_key = '%s'`, parent, sr.Child.JobKey)); fmt.Sprint(r) != "[[true]]" {
		t.Fatalf("the Gemini child's record id: %v", r)
	}
	// Every record succeeded, and the family's cost is the three jobs' to
	// the last digit, the tail's at the on-demand price (mode sync).
	gemUSD := grep.CostUSD["total"]
	if rat(t, gemUSD).Sign() <= 0 {
		t.Fatalf("the Gemini child cost %s; want it priced", gemUSD)
	}
	decodeNumbers(t, run(0, "report", "--job", parent), &fam)
	if fam.Expected != n || fam.Succeeded != n {
		t.Fatalf("family after the tail: expected %d succeeded %d, want %d each", fam.Expected, fam.Succeeded, n)
	}
	sum.Add(sum, rat(t, gemUSD))
	if rat(t, fam.CostTotal.String()).Cmp(sum) != 0 {
		t.Fatalf("family cost %s, want %s + %s + %s", fam.CostTotal, openaiUSD, antUSD, gemUSD)
	}
	decodeNumbers(t, run(0, "cost", "--job", parent, "--family", "--by", "provider,mode", "--format", "json"), &cost)
	byPM := map[string]string{}
	for _, c := range cost {
		byPM[fmt.Sprint(c["provider"], "/", c["mode"])] = fmt.Sprint(c["cost_usd"])
	}
	if len(byPM) != 3 || rat(t, byPM["gemini/sync"]).Cmp(rat(t, gemUSD)) != 0 ||
		rat(t, byPM["openai/batch"]).Cmp(rat(t, openaiUSD)) != 0 || rat(t, byPM["anthropic/batch"]).Cmp(rat(t, antUSD)) != 0 {
		t.Fatalf("cost --family --by provider,mode: %v; want openai/batch %s, anthropic/batch %s, gemini/sync %s", byPM, openaiUSD, antUSD, gemUSD)
	}

	// The lake, the contract object the child's manifest names included, verifies.
	run(0, "verify")
}

// famReport is the part of a reconcile report the fallback test reads.
type famReport struct {
	Expected        int64                  `json:"expected"`
	Succeeded       int64                  `json:"succeeded"`
	FailedRetryable int64                  `json:"failed_retryable"`
	QualityFailed   int64                  `json:"quality_failed"`
	RetryRecords    int64                  `json:"retry_records"`
	SchemaFailed    int64                  `json:"schema_failed_lines"`
	CostUSD         map[string]string      `json:"-"`
	RawCost         map[string]json.Number `json:"cost_usd"`
	OutputContract  []contractRow          `json:"output_contract"`
}

func (r *famReport) UnmarshalJSON(b []byte) error {
	type plain famReport
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	r.CostUSD = map[string]string{}
	for k, v := range r.RawCost {
		r.CostUSD[k] = v.String()
	}
	return nil
}

type contractRow struct {
	Provider string `json:"provider"`
	Model    string `json:"model_version"`
	Answers  int64  `json:"answers"`
	Passed   int64  `json:"passed"`
}

// idsOf returns the custom ids of an output or error file.
func idsOf(t *testing.T, file []byte) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(file))
	for sc.Scan() {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		ids[l.CustomID] = true
	}
	return ids
}

// sqlRows runs a query through batchlake sql and returns its rows as text.
func (h *harness) sqlRows(t *testing.T, q string) [][]string {
	t.Helper()
	r := h.run("sql", "--format", "csv", q)
	if r.code != 0 {
		t.Fatalf("sql %s: %s", q, r)
	}
	var out [][]string
	for i, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if i == 0 || line == "" {
			continue // the header
		}
		out = append(out, strings.Split(line, ","))
	}
	return out
}

func decodeNumbers(t *testing.T, r result, v any) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(r.stdout))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
}

func rat(t *testing.T, s string) *big.Rat {
	t.Helper()
	x, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("not a decimal: %q", s)
	}
	return x
}

// TestFallbackRefusesUntranslatable: a retry set holding a request that
// does not translate is refused with exit 2 naming the record and the
// field, and nothing is planned; --skip-untranslatable plans the rest and
// lists the record for manual handling.
func TestFallbackRefusesUntranslatable(t *testing.T) {
	rates := fakeopenai.Rates{ServerError: 1} // every record fails retryably
	h := newHarness(t, fakeopenai.Options{Seed: 3, Rates: &rates})
	lines := []string{
		`{"custom_id":"a-1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"one"}],"max_tokens":16}}`,
		`{"custom_id":"a-2","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"two"}],"max_tokens":16,"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]}}`,
		`{"custom_id":"a-3","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"three"}]}}`,
	}
	input := filepath.Join(h.tmp, "in.jsonl")
	if err := os.WriteFile(input, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var plan struct {
		JobKey string `json:"job_key"`
	}
	decode(t, h.must([]int{0}, "plan", "--provider", "openai", "--input", input, "--tenant", "acme", "--prompt-version", "v1"), &plan)
	h.must([]int{0}, "submit", "--job", plan.JobKey)
	for i := 0; h.run("status", "--job", plan.JobKey).code != 0; i++ {
		if i > 20 {
			t.Fatal("status never finished")
		}
	}
	h.must([]int{0}, "collect", "--job", plan.JobKey)
	h.must([]int{10}, "reconcile", "--job", plan.JobKey)
	rid := h.sqlRows(t, fmt.Sprintf(`SELECT business_key, record_id FROM expected WHERE job_key = '%s' ORDER BY business_key`, plan.JobKey))

	// a-2 uses tools: refused, naming it and the field.
	r := h.must([]int{2}, "retry", "--job", plan.JobKey, "--provider", "anthropic", "--model", "claude-haiku-4-5", "--max-tokens", "100")
	if !strings.Contains(r.stderr, rid[1][1]) || !strings.Contains(r.stderr, `"a-2"`) || !strings.Contains(r.stderr, "body.tools") || !strings.Contains(r.stderr, "--skip-untranslatable") {
		t.Fatalf("the refusal names no record or field: %s", r)
	}
	if n := h.sqlRows(t, `SELECT count(*) FROM manifests`); fmt.Sprint(n) != "[[1]]" {
		t.Fatalf("a refused retry planned something: %v manifests", n)
	}
	var res struct {
		Child struct {
			JobKey  string `json:"job_key"`
			Records int64  `json:"records"`
		} `json:"child"`
		Untranslatable []struct {
			RecordID    string `json:"record_id"`
			BusinessKey string `json:"business_key"`
			Field       string `json:"field"`
		} `json:"untranslatable"`
		UntranslatableFile string `json:"untranslatable_file"`
	}
	// a-3 sets no output limit, which Claude requires: without --max-tokens
	// it is left out too.
	decode(t, h.must([]int{0}, "retry", "--job", plan.JobKey, "--provider", "anthropic", "--model", "claude-haiku-4-5", "--skip-untranslatable"), &res)
	if res.Child.Records != 1 || len(res.Untranslatable) != 2 || res.Untranslatable[1].BusinessKey != "a-3" || res.Untranslatable[1].Field != "max_tokens" {
		t.Fatalf("retry --skip-untranslatable without --max-tokens: %+v", res)
	}
	res.Untranslatable = nil
	decode(t, h.must([]int{0}, "retry", "--job", plan.JobKey, "--provider", "anthropic", "--model", "claude-haiku-4-5", "--max-tokens", "100", "--skip-untranslatable"), &res)
	if res.Child.Records != 2 || len(res.Untranslatable) != 1 || res.Untranslatable[0].RecordID != rid[1][1] ||
		res.Untranslatable[0].BusinessKey != "a-2" || res.Untranslatable[0].Field != "body.tools" || res.UntranslatableFile == "" {
		t.Fatalf("retry --skip-untranslatable: %+v", res)
	}
	got := h.sqlRows(t, fmt.Sprintf(`SELECT business_key FROM expected WHERE job_key = '%s' ORDER BY 1`, res.Child.JobKey))
	if fmt.Sprint(got) != "[[a-1] [a-3]]" {
		t.Fatalf("child records %v, want a-1 and a-3", got)
	}
}

// TestRunFallback: run --fallback sends the first round's retry set to the
// fallback provider and follows the child there, to the end.
func TestRunFallback(t *testing.T) {
	const seed = 7
	rates := fakeopenai.Rates{ServerError: 0.35}
	h := newHarness(t, fakeopenai.Options{Seed: seed, Rates: &rates})
	const antKey = "sk-ant-api03-RUNFALLBACK0123456789SECRET"
	ant := fakeanthropic.New(fakeanthropic.Options{APIKey: antKey})
	hs := httptest.NewServer(ant.Handler())
	defer hs.Close()
	ant.SetBaseURL(hs.URL)
	env := []string{"ANTHROPIC_API_KEY=" + antKey, "ANTHROPIC_BASE_URL=" + hs.URL}

	var in bytes.Buffer
	for i := range 12 {
		fmt.Fprintf(&in, `{"custom_id":"r-%03d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"q %d"}]}}`+"\n", i, i)
	}
	input := filepath.Join(h.tmp, "in.jsonl")
	if err := os.WriteFile(input, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	simRes, err := fakeopenai.Simulate(in.Bytes(), seed, rates)
	if err != nil {
		t.Fatal(err)
	}
	failed := idsOf(t, simRes.Errors)
	if len(failed) == 0 {
		t.Fatalf("seed %d: no failures to fall back", seed)
	}
	r := h.runEnv(env, "run", "--provider", "openai", "--input", input, "--tenant", "acme", "--prompt-version", "v1", "--poll", "10ms",
		"--fallback", "anthropic:claude-haiku-4-5", "--fallback-max-tokens", "50")
	if r.code != 0 {
		t.Fatalf("run: %s", r)
	}
	var res struct {
		Records, Succeeded int64
		Generations        []struct {
			Expected  int64 `json:"expected"`
			Succeeded int64 `json:"succeeded"`
		} `json:"generations"`
	}
	decode(t, r, &res)
	if res.Records != 12 || res.Succeeded != 12 || len(res.Generations) != 2 || res.Generations[1].Expected != int64(len(failed)) {
		t.Fatalf("run: %+v; want 12 succeeded in 2 generations, the second the %d records OpenAI failed", res, len(failed))
	}
	rows := h.sqlRows(t, `SELECT business_key, provider, model FROM records ORDER BY business_key`)
	for _, row := range rows {
		want := "[" + row[0] + " openai gpt-4o-mini]"
		if failed[row[0]] {
			want = "[" + row[0] + " anthropic claude-haiku-4-5]"
		}
		if fmt.Sprint(row) != want {
			t.Errorf("record %v, want %s", row, want)
		}
	}
}
