package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// Multi-generation policy scenario: a job and three rounds of retries with
// mixed outcomes, late duplicates (a second output file ingested days later,
// across a price change), prices that change twice between attempts, and
// per-record token and cost caps. A model of the rules below recomputes,
// without DuckDB and with exact rationals, every report's counts, the
// records each cap sends to the manual queue, the cost of every category
// (manual included), plan's estimate and what is committed but not billed.

const polPrices = `provider,model,input_usd_per_mtok,cached_input_usd_per_mtok,output_usd_per_mtok,batch_multiplier,effective_from
openai,gpt-4o-mini,0.15,0.075,0.60,0.5,
openai,gpt-4o-mini,0.30,0.10,1.20,0.5,2026-02-01
openai,gpt-4o-mini,0.45,0.2,1.8,0.5,2026-03-01
`

type polPrice struct{ in, cached, out *big.Rat }

func rat(s string) *big.Rat { v, _ := new(big.Rat).SetString(s); return v }

// polPriceAt is the row in force at t, per token, multiplier applied.
func polPriceAt(t time.Time) polPrice {
	row := []string{"0.15", "0.075", "0.60"}
	switch {
	case !t.Before(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)):
		row = []string{"0.45", "0.2", "1.8"}
	case !t.Before(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)):
		row = []string{"0.30", "0.10", "1.20"}
	}
	per := func(s string) *big.Rat { return new(big.Rat).Quo(rat(s), big.NewRat(2_000_000, 1)) }
	return polPrice{per(row[0]), per(row[1]), per(row[2])}
}

func (p polPrice) cost(in, cached, out int64) *big.Rat {
	c := new(big.Rat).Mul(big.NewRat(in-cached, 1), p.in)
	c.Add(c, new(big.Rat).Mul(big.NewRat(cached, 1), p.cached))
	return c.Add(c, new(big.Rat).Mul(big.NewRat(out, 1), p.out))
}

type polFate int

const (
	pSuccess polFate = iota
	pEmpty           // 200 without content: quality_failed (has tokens)
	p500             // retryable, no tokens
	p400             // permanent
	pMissing         // no line
	pDup             // the success twice in the same file
	pLateDup         // the success, and again in a late file after a price change
	nPolFates
)

// polLine is one result line of the model.
type polLine struct {
	id               string
	file             int // 0 main output, 1 late output, 2 errors
	text             string
	status           int
	in, cached, out  int64
	class            string // succeeded, quality_failed, failed_retryable, failed_permanent
	lineNo           int64
	raw              string // sha256 of its file
	cost             *big.Rat
	record, category string
}

type polRecord struct {
	key           string
	tokens        int64
	cost          *big.Rat
	final, reason string
	disposition   string
	attempts      int
	accepted      bool
}

func TestPolicyMultiGeneration(t *testing.T) {
	t.Parallel()
	seeds := []uint64{3, 11}
	if testing.Short() {
		seeds = seeds[:1] // -short: one scenario of three generations; the full run tries two
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runPolicyScenario(t, seed) })
	}
}

func runPolicyScenario(t *testing.T, seed uint64) {
	ctx := context.Background()
	l, dir := testLake(t)
	prices, err := LoadPrices("prices.csv", []byte(polPrices))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	const (
		n           = 60
		maxAttempts = 4
		tokenCap    = 3500
		defaultOut  = 100 // plan's --est-output-tokens for requests without max_tokens
	)
	costCap := "0.0003"
	caps := Caps{Tokens: tokenCap, CostUSD: costCap}

	var input []string
	recs := map[string]*polRecord{}
	for i := range n {
		key := fmt.Sprintf("k%03d", i)
		limit := ""
		if i%5 != 0 {
			limit = fmt.Sprintf(`,"max_tokens":%d`, 16+rng.IntN(500))
		}
		input = append(input, fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"item %d %s"}]%s}}`,
			key, i, strings.Repeat("x", rng.IntN(200)), limit))
		recs[key] = &polRecord{key: key, cost: new(big.Rat)}
	}
	res, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", Input: writeLines(t, dir, "input.jsonl", input), Tenant: "t1",
		PromptVersion: "p1", TmpDir: dir, Estimate: ingest.EstimateOptions{OutputTokens: defaultOut}})
	if err != nil {
		t.Fatal(err)
	}
	job, _ := lake.ParseDigest(res.JobKey)
	x := &lineageLake{l: l, dir: dir}
	total := map[string]*big.Rat{}
	capped := map[string]int{}
	for gen := 1; ; gen++ {
		m, err := l.GetManifest(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if m.Attempt != gen {
			t.Fatalf("generation %d has attempt %d", gen, m.Attempt)
		}
		// The job's records: business key -> custom id, from the lake.
		ids := map[string]string{}
		x.query(t, "SELECT business_key, custom_id FROM expected WHERE job_key = '"+m.JobKey+"'", func(v []any) { ids[v[0].(string)] = v[1].(string) })
		keys := make([]string, 0, len(ids))
		for k := range ids {
			keys = append(keys, k)
		}
		sort.Strings(keys)

		// Plan's estimate, recomputed from the shard bytes the job submits.
		var estIn, estOut int64
		perRecord := map[string][2]int64{}
		for _, s := range m.Shards {
			b, err := l.GetObject(ctx, s.Object)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
				var req struct {
					CustomID string `json:"custom_id"`
					Body     struct {
						MaxTokens *int64 `json:"max_tokens"`
					} `json:"body"`
				}
				if err := json.Unmarshal([]byte(line), &req); err != nil {
					t.Fatal(err)
				}
				in, out := (int64(len(line))+3)/4, int64(defaultOut)
				if req.Body.MaxTokens != nil {
					out = *req.Body.MaxTokens
				}
				estIn, estOut = estIn+in, estOut+out
				perRecord[req.CustomID] = [2]int64{in, out}
			}
		}

		// This generation's lines.
		mainAt := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC).AddDate(0, 0, 20*(gen-1))
		lateAt := mainAt.AddDate(0, 0, 5)
		var lines []*polLine
		tok := func() (int64, int64, int64) {
			in := int64(200 + rng.IntN(2800))
			return in, int64(rng.IntN(int(in))) / 128 * 128, int64(10 + rng.IntN(290))
		}
		fates := map[string]polFate{}
		for _, k := range keys {
			f := polFate(rng.IntN(int(nPolFates)))
			if rng.IntN(3) == 0 {
				f = pEmpty // enough quality failures for the caps to matter
			}
			fates[k] = f
			id := ids[k]
			in, cached, out := tok()
			switch f {
			case pSuccess, pDup, pLateDup:
				lines = append(lines, &polLine{id: id, file: 0, text: "answer " + k, status: 200, in: in, cached: cached, out: out, class: "succeeded", record: k})
				if f == pDup {
					lines = append(lines, &polLine{id: id, file: 0, text: "answer " + k, status: 200, in: in, cached: cached, out: out, class: "succeeded", record: k})
				}
				if f == pLateDup {
					lines = append(lines, &polLine{id: id, file: 1, text: "late " + k, status: 200, in: in, cached: cached, out: out, class: "succeeded", record: k})
				}
			case pEmpty:
				lines = append(lines, &polLine{id: id, file: 0, status: 200, in: in, cached: cached, out: out, class: "quality_failed", record: k})
			case p500:
				lines = append(lines, &polLine{id: id, file: 2, status: 500, class: "failed_retryable", record: k})
			case p400:
				lines = append(lines, &polLine{id: id, file: 2, status: 400, class: "failed_permanent", record: k})
			}
		}
		rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
		files := [3][]string{}
		for _, ln := range lines {
			var s string
			if ln.status == 200 {
				s = fmt.Sprintf(`{"id":"br","custom_id":%q,"response":{"status_code":200,"body":{"object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}},"error":null}`,
					ln.id, ln.text, ln.in, ln.out, ln.cached)
			} else {
				typ := "server_error"
				if ln.status == 400 {
					typ = "invalid_request_error"
				}
				s = errLine(ln.id, ln.status, typ)
			}
			files[ln.file] = append(files[ln.file], s)
			ln.lineNo = int64(len(files[ln.file]))
		}
		for i, f := range []struct {
			channel string
			at      time.Time
		}{{ingest.ChannelOutput, mainAt}, {ingest.ChannelOutput, lateAt}, {ingest.ChannelError, mainAt}} {
			if len(files[i]) == 0 {
				continue
			}
			p := writeLines(t, dir, fmt.Sprintf("g%d-%d.jsonl", gen, i), files[i])
			b, _ := os.ReadFile(p)
			raw := lake.Sum(b).Hex()
			price := polPriceAt(f.at)
			for _, ln := range lines {
				if ln.file == i {
					ln.raw, ln.cost = raw, price.cost(ln.in, ln.cached, ln.out)
				}
			}
			at := f.at
			if _, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: p, Channel: f.channel, TmpDir: dir, Now: func() time.Time { return at }}); err != nil {
				t.Fatal(err)
			}
		}

		// The model: outcomes, dispositions, caps, categories.
		rank := map[string]int{"succeeded": 1, "quality_failed": 2, "failed_retryable": 3, "failed_permanent": 4}
		chanOf := func(ln *polLine) string {
			if ln.file == 2 {
				return "error"
			}
			return "output"
		}
		best := map[string]*polLine{}
		nLines := map[string]int{}
		for _, ln := range lines {
			nLines[ln.record]++
			b := best[ln.record]
			less := b == nil || rank[ln.class] < rank[b.class] ||
				(rank[ln.class] == rank[b.class] && fmt.Sprintf("%s %s %09d", chanOf(ln), ln.raw, ln.lineNo) < fmt.Sprintf("%s %s %09d", chanOf(b), b.raw, b.lineNo))
			if less {
				best[ln.record] = ln
			}
		}
		want := map[string]int64{}
		cats := map[string]*big.Rat{}
		for _, c := range Categories {
			cats[c] = new(big.Rat)
		}
		var nbRecs, nbIn, nbOut int64
		for _, k := range keys {
			r := recs[k]
			r.attempts = gen
			for _, ln := range lines {
				if ln.record == k {
					r.tokens += ln.in + ln.out
					r.cost.Add(r.cost, ln.cost)
				}
			}
			outcome := "missing"
			if b := best[k]; b != nil {
				outcome = b.class
			}
			want[outcome]++
			if nLines[k] > 1 {
				want["duplicate"]++
			}
			r.final, r.reason = outcome, ""
			switch {
			case outcome == "succeeded":
				r.disposition, r.accepted = "accepted", true
			case outcome == "failed_permanent":
				r.disposition, r.reason = "manual", "permanent"
			case gen >= maxAttempts:
				r.disposition, r.reason = "manual", "max_attempts"
			case r.tokens >= tokenCap:
				r.disposition, r.reason = "manual", "token_cap"
			case r.cost.Cmp(rat(costCap)) >= 0:
				r.disposition, r.reason = "manual", "cost_cap"
			default:
				r.disposition = "retry"
			}
			if r.reason == "token_cap" || r.reason == "cost_cap" {
				want["capped"]++
				capped[r.reason]++
			}
			want[r.disposition]++
			if outcome == "missing" {
				e := perRecord[ids[k]]
				nbRecs, nbIn, nbOut = nbRecs+1, nbIn+e[0], nbOut+e[1]
			}
			for _, ln := range lines {
				if ln.record != k {
					continue
				}
				switch {
				case r.disposition == "manual" && outcome != "failed_permanent":
					ln.category = "manual"
				case ln.class == "succeeded" && ln == best[k]:
					ln.category = "first_success"
				case ln.class == "succeeded":
					ln.category = "duplicate_submission"
				case ln.class == "quality_failed":
					ln.category = "quality_failure"
				case ln.class == "failed_retryable":
					ln.category = "retryable_failure"
				default:
					ln.category = "permanent_failure"
				}
				cats[ln.category].Add(cats[ln.category], ln.cost)
			}
		}

		rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Prices: prices, MaxAttempts: maxAttempts, Caps: caps, Engine: EngineOptions{Threads: 1}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{"succeeded": rep.Succeeded, "quality_failed": rep.QualityFailed, "failed_retryable": rep.FailedRetryable,
			"failed_permanent": rep.FailedPermanent, "missing": rep.Missing, "duplicate": rep.Duplicate, "retry": rep.RetryRecords,
			"manual": rep.ManualRecords, "capped": rep.CappedRecords}
		for k, g := range got {
			if g != want[k] {
				t.Errorf("generation %d: %s = %d, want %d", gen, k, g, want[k])
			}
		}
		sum := new(big.Rat)
		for _, c := range Categories {
			g, ok := new(big.Rat).SetString(string(rep.CostUSD[c]))
			if !ok || g.Cmp(cats[c]) != 0 {
				t.Errorf("generation %d: cost_usd.%s = %s, want %s", gen, c, rep.CostUSD[c], cats[c].FloatString(18))
			}
			sum.Add(sum, cats[c])
			if total[c] == nil {
				total[c] = new(big.Rat)
			}
			total[c].Add(total[c], cats[c])
		}
		if g := rat(string(rep.CostUSD["total"])); g.Cmp(sum) != 0 {
			t.Errorf("generation %d: total %s, categories add up to %s", gen, rep.CostUSD["total"], sum.FloatString(18))
		}
		// The estimate, priced at plan time (every price row is older than
		// the plan: the latest applies), and what is not billed yet.
		latest := polPriceAt(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
		estCost := func(in, out int64) *big.Rat {
			c := new(big.Rat).Mul(big.NewRat(in, 1), latest.in)
			return c.Add(c, new(big.Rat).Mul(big.NewRat(out, 1), latest.out))
		}
		e := rep.Estimate
		if e == nil {
			t.Fatalf("generation %d: no estimate in the report", gen)
		}
		if e.InputTokens != estIn || e.OutputTokens != estOut || e.NotBilledRecords != nbRecs || e.NotBilledInputTokens != nbIn || e.NotBilledOutputTokens != nbOut {
			t.Errorf("generation %d: estimate %+v, want in %d out %d, not billed %d records %d/%d", gen, e, estIn, estOut, nbRecs, nbIn, nbOut)
		}
		if rat(string(e.CostUSD)).Cmp(estCost(estIn, estOut)) != 0 || rat(string(e.NotBilledUSD)).Cmp(estCost(nbIn, nbOut)) != 0 || e.BilledUSD != rep.CostUSD["total"] {
			t.Errorf("generation %d: estimate cost %s not billed %s billed %s, want %s %s %s", gen, e.CostUSD, e.NotBilledUSD, e.BilledUSD,
				estCost(estIn, estOut).FloatString(18), estCost(nbIn, nbOut).FloatString(18), rep.CostUSD["total"])
		}
		if rep.RetryRecords == 0 {
			break
		}
		rr, err := Retry(ctx, l, job, dir)
		if err != nil || rr.Child == nil {
			t.Fatalf("retry after generation %d: %v %+v", gen, err, rr)
		}
		job, _ = lake.ParseDigest(rr.Child.JobKey)
		if gen > maxAttempts {
			t.Fatalf("generation %d: still retrying past --max-attempts %d", gen, maxAttempts)
		}
	}
	if capped["token_cap"] == 0 || capped["cost_cap"] == 0 {
		t.Fatalf("the scenario never reached a cap (%v): it tests nothing; change the seed or caps", capped)
	}

	// Across generations: the manual view names each record the policy gave
	// up on with its reason, and records/costs views agree with the model.
	wantManual := map[string]string{}
	for k, r := range recs {
		if r.disposition == "manual" {
			reason := r.reason
			if reason == "permanent" || reason == "max_attempts" {
				reason = "*"
			}
			wantManual[k] = reason
		}
	}
	gotManual := map[string]string{}
	x.query(t, "SELECT business_key, reason, attempts FROM manual", func(v []any) {
		reason := v[1].(string)
		if reason != "token_cap" && reason != "cost_cap" {
			reason = "*"
		}
		gotManual[v[0].(string)] = reason
		if int(v[2].(int32)) != recs[v[0].(string)].attempts {
			t.Errorf("manual %s: attempts %v, want %d", v[0], v[2], recs[v[0].(string)].attempts)
		}
	})
	if fmt.Sprint(gotManual) != fmt.Sprint(wantManual) {
		t.Errorf("manual view %v\nwant %v", gotManual, wantManual)
	}
	x.query(t, "SELECT business_key, CAST(cost_usd AS VARCHAR) FROM records", func(v []any) {
		if r := recs[v[0].(string)]; rat(v[1].(string)).Cmp(r.cost) != 0 {
			t.Errorf("records %s: cost %s, want %s", v[0], v[1], r.cost.FloatString(18))
		}
	})
	x.query(t, "SELECT category, CAST(sum(cost_usd) AS VARCHAR) FROM costs GROUP BY category", func(v []any) {
		if w := total[v[0].(string)]; w == nil || rat(v[1].(string)).Cmp(w) != 0 {
			t.Errorf("costs view %s: %s, want %v", v[0], v[1], w)
		}
	})
	t.Logf("caps reached: %v", capped)
}
