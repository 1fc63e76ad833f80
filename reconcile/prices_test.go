package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// TestLoadPricesOptionalColumns: a 6-column table still loads, with cache
// writes (both lifetimes) at the input price and cached input under the batch
// multiplier; an empty optional cell means the same; the shipped table loads
// with every provider's rows; effective_from takes dates and RFC 3339 times,
// and one model may have several rows only with different effective_from.
func TestLoadPricesOptionalColumns(t *testing.T) {
	shipped, err := LoadPrices("", nil)
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]int{}
	for _, p := range shipped.Rows {
		providers[p.Provider]++
		if !p.EffectiveFrom.IsZero() {
			t.Errorf("%s/%s: effective %v, want always", p.Provider, p.Model, p.EffectiveFrom)
		}
		// Gemini bills cached tokens without the batch discount; everyone
		// else discounts them too.
		if want := p.Multiply; p.Provider == "gemini" && p.CachedMultiply.Cmp(big.NewRat(1, 1)) != 0 || p.Provider != "gemini" && p.CachedMultiply.Cmp(want) != 0 {
			t.Errorf("%s/%s: cached_batch_multiplier %s", p.Provider, p.Model, p.CachedMultiply.RatString())
		}
	}
	if len(providers) != 4 {
		t.Errorf("shipped table has providers %v, want all four", providers)
	}
	for _, table := range []string{
		"provider,model,input_usd_per_mtok,cached_input_usd_per_mtok,output_usd_per_mtok,batch_multiplier\nanthropic,m,3,0.3,15,0.5\n",
		"provider,model,input_usd_per_mtok,cached_input_usd_per_mtok,output_usd_per_mtok,batch_multiplier,cache_write_usd_per_mtok,cache_write_1h_usd_per_mtok,cached_batch_multiplier\nanthropic,m,3,0.3,15,0.5,,,\n",
	} {
		pt, err := LoadPrices("six.csv", []byte(table))
		if err != nil {
			t.Fatal(err)
		}
		p := pt.Rows[0]
		if p.CacheWrite.RatString() != "3" || p.CacheWrite1h.RatString() != "3" || p.CachedMultiply.RatString() != "1/2" {
			t.Errorf("%q: cache write %s, 1h %s, cached multiplier %s; want 3, 3, 1/2", table, p.CacheWrite.RatString(), p.CacheWrite1h.RatString(), p.CachedMultiply.RatString())
		}
	}
	nine, err := LoadPrices("nine.csv", []byte("# a comment line\nprovider,model,input_usd_per_mtok,cached_input_usd_per_mtok,output_usd_per_mtok,batch_multiplier,cache_write_usd_per_mtok,cache_write_1h_usd_per_mtok,cached_batch_multiplier\n# another\nanthropic,m,3,0.3,15,0.5,3.75,,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := nine.Rows[0]; p.CacheWrite.RatString() != "15/4" || p.CacheWrite1h.RatString() != "15/4" || p.CachedMultiply.RatString() != "1" {
		t.Errorf("9 columns: cache write %s, 1h %s (want the 5m price when empty), cached multiplier %s", p.CacheWrite.RatString(), p.CacheWrite1h.RatString(), p.CachedMultiply.RatString())
	}
	head := "provider,model,input_usd_per_mtok,cached_input_usd_per_mtok,output_usd_per_mtok,batch_multiplier,effective_from,cache_write_usd_per_mtok\n"
	cases := []struct {
		name, rows, field string // field "" means valid
	}{
		{"dates", "openai,m,1,1,1,1,,\nopenai,m,2,1,1,1,2026-02-01,3\nopenai,m,3,1,1,1,2026-03-01T12:00:00Z,\n", ""},
		{"same date twice", "openai,m,1,1,1,1,2026-02-01,\nopenai,m,2,1,1,1,2026-02-01,\n", "model"},
		{"always twice", "openai,m,1,1,1,1,,\nopenai,m,2,1,1,1,,\n", "model"},
		{"bad date", "openai,m,1,1,1,1,01/02/2026,\n", "effective_from"},
		{"negative cache write", "openai,m,1,1,1,1,,-1\n", "cache_write_usd_per_mtok"},
		{"price above the ceiling", "openai,m,10001,1,1,1,,\n", "input_usd_per_mtok"},
		{"multiplier above the ceiling", "openai,m,1,1,1,11,,\n", "batch_multiplier"},
		{"twelve decimal places", "openai,m,0.123456789012,1,1,1,,\n", ""},
		{"thirteen decimal places", "openai,m,0.1234567890123,1,1,1,,\n", "input_usd_per_mtok"},
		{"a price times its multiplier past twelve places", "openai,m,1,1,0.123456789,0.5555,,\n", "output_usd_per_mtok"},
		{"a cache write's price times the multiplier past twelve places", "openai,m,1,1,1,0.5,,0.000000000001\n", "cache_write_usd_per_mtok"},
		{"a provider's name in capitals", "OpenAI,m,1,1,1,1,,\n", "provider"},
		{"no such provider", "azure,m,1,1,1,1,,\n", "provider"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pt, err := LoadPrices("p.csv", []byte(head+c.rows))
			var ie *errkind.InputError
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.name == "twelve decimal places":
				if got := perToken(pt.Rows[0].Input, pt.Rows[0].Multiply); got != "0.000000123456789012" {
					t.Errorf("per token %s, want 0.123456789012 / 10^6 exactly", got)
				}
			case c.field == "":
				if want := "2026-03-01 12:00:00 +0000 UTC"; pt.Rows[2].EffectiveFrom.String() != want || pt.Rows[1].CacheWrite.RatString() != "3" || pt.Rows[2].CacheWrite.RatString() != "3" {
					t.Errorf("rows %+v", pt.Rows)
				}
			case !errors.As(err, &ie) || ie.Field != c.field:
				t.Fatalf("error %v, want an input error on field %s", err, c.field)
			}
		})
	}
}

// TestPriceChangeBetweenAttempts: attempt 1 (ingested before a price change)
// and attempt 2 (after it) are each priced by the row in force at their
// ingest time — never by a future row, never by a shorter model prefix — and
// cache write tokens are priced separately; the costs are recomputed here
// independently with exact rationals.
func TestPriceChangeBetweenAttempts(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	prices, err := LoadPrices("prices.csv", []byte(strings.Join([]string{
		"provider,model,input_usd_per_mtok,cached_input_usd_per_mtok,output_usd_per_mtok,batch_multiplier,effective_from,cache_write_usd_per_mtok",
		"openai,gpt-4o-mini,0.15,0.075,0.60,0.5,,",
		"openai,gpt-4o-mini,0.30,0.10,1.20,0.5,2026-02-01,0.375",
		"openai,gpt-4o-mini,9,9,9,0.5,2026-03-01,9",
		"openai,gpt-4,100,100,100,1,2026-01-01,100",
	}, "\n")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	line := func(id string, in, cached, write, out int64) string {
		return fmt.Sprintf(`{"id":"br_%s","custom_id":%q,"response":{"status_code":200,"body":{"object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d,"cache_write_tokens":%d}}}},"error":null}`, id, id, in, out, cached, write)
	}
	// cost recomputes a line's price: (in−cached−write)·input + cached·cached +
	// write·cacheWrite + out·output, per Mtok, times the batch multiplier.
	cost := func(in, cached, write, out int64, pIn, pCached, pWrite, pOut string, mult string) *big.Rat {
		r := func(s string) *big.Rat { v, _ := new(big.Rat).SetString(s); return v }
		c := new(big.Rat).Mul(big.NewRat(in-cached-write, 1), r(pIn))
		c.Add(c, new(big.Rat).Mul(big.NewRat(cached, 1), r(pCached)))
		c.Add(c, new(big.Rat).Mul(big.NewRat(write, 1), r(pWrite)))
		c.Add(c, new(big.Rat).Mul(big.NewRat(out, 1), r(pOut)))
		c.Mul(c, r(mult))
		return c.Quo(c, big.NewRat(1_000_000, 1))
	}
	at := func(s string) func() time.Time {
		return func() time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	}
	input := []string{
		`{"custom_id":"r0","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a"}]}}`,
		`{"custom_id":"r1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"b"}]}}`,
	}
	res, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", Input: writeLines(t, dir, "input.jsonl", input), Tenant: "t1", PromptVersion: "p1", TmpDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := lake.ParseDigest(res.JobKey)
	m1, _ := l.GetManifest(ctx, d1)
	ing := func(m *lake.Manifest, name, channel string, now func() time.Time, lines ...string) {
		t.Helper()
		if _, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: writeLines(t, dir, name, lines), Channel: channel, TmpDir: dir, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	ing(m1, "out1.jsonl", ingest.ChannelOutput, at("2026-01-10T00:00:00Z"), line("r0", 5000, 1024, 2048, 300))
	ing(m1, "err1.jsonl", ingest.ChannelError, at("2026-01-10T00:00:00Z"), errLine("r1", 500, "server_error"))
	rep1, err := Run(ctx, l, Options{JobKey: m1.JobKey, TmpDir: dir, Prices: prices, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	rr, err := Retry(ctx, l, d1, dir)
	if err != nil || rr.Child == nil {
		t.Fatalf("retry: %v %+v", err, rr)
	}
	d2, _ := lake.ParseDigest(rr.Child.JobKey)
	m2, _ := l.GetManifest(ctx, d2)
	x := &lineageLake{l: l, dir: dir}
	var child string
	x.query(t, "SELECT custom_id FROM expected WHERE job_key = '"+m2.JobKey+"'", func(v []any) { child = v[0].(string) })
	ing(m2, "out2.jsonl", ingest.ChannelOutput, at("2026-02-10T00:00:00Z"), line(child, 7000, 512, 4096, 700))
	rep2, err := Run(ctx, l, Options{JobKey: m2.JobKey, TmpDir: dir, Prices: prices, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}

	want1 := cost(5000, 1024, 2048, 300, "0.15", "0.075", "0.15", "0.60", "0.5")
	want2 := cost(7000, 512, 4096, 700, "0.30", "0.10", "0.375", "1.20", "0.5")
	for _, c := range []struct {
		name string
		rep  *Report
		want *big.Rat
	}{{"attempt 1 (old price)", rep1, want1}, {"attempt 2 (new price)", rep2, want2}} {
		got, ok := new(big.Rat).SetString(string(c.rep.CostUSD["first_success"]))
		if !ok || got.Cmp(c.want) != 0 {
			t.Errorf("%s: first_success %s, want %s", c.name, c.rep.CostUSD["first_success"], c.want.FloatString(18))
		}
	}
	// The costs view agrees line by line, naming the model row it used.
	var lines []string
	x.query(t, "SELECT attempt, price_model, CAST(cost_usd AS VARCHAR) FROM costs WHERE category = 'first_success' ORDER BY attempt", func(v []any) {
		lines = append(lines, fmt.Sprintf("%v %v %s", v[0], v[1], trimDecimal(v[2].(string))))
	})
	want := []string{"1 gpt-4o-mini " + trimDecimal(want1.FloatString(18)), "2 gpt-4o-mini " + trimDecimal(want2.FloatString(18))}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("costs %q, want %q", lines, want)
	}
}

// TestSimPricedAsOpenAI: the simulator's lines are priced by the table's
// openai rows, unless the table has rows of its own for provider sim.
func TestSimPricedAsOpenAI(t *testing.T) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	const model = "gpt-4o-mini-2024-07-18"
	shipped, err := LoadPrices("", nil)
	if err != nil {
		t.Fatal(err)
	}
	open, sim := shipped.PriceFor("openai", model, at), shipped.PriceFor("sim", model, at)
	if open == nil || sim == nil || sim.Input.Cmp(open.Input) != 0 || sim.Output.Cmp(open.Output) != 0 || sim.Multiply.Cmp(open.Multiply) != 0 {
		t.Fatalf("shipped table: sim %+v, openai %+v; want OpenAI's price for the simulator", sim, open)
	}
	own, err := LoadPrices("own.csv", []byte("provider,model,input_usd_per_mtok,cached_input_usd_per_mtok,output_usd_per_mtok,batch_multiplier\n"+
		"openai,gpt-4o-mini,0.15,0.075,0.60,0.5\nsim,gpt-4o-mini,0,0,0,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := own.PriceFor("sim", model, at); p == nil || p.Input.Sign() != 0 || p.Output.Sign() != 0 {
		t.Errorf("a table with sim rows: sim priced %+v, want its own zero row", p)
	}
	if p := own.PriceFor("anthropic", model, at); p != nil {
		t.Errorf("anthropic priced by %+v, want no row", p)
	}
}

// TestPriceForBedrockProfiles: plan's estimate finds a Bedrock job's price
// as reconcile does: by the longest row, with or without the model id's
// inference-profile prefix.
func TestPriceForBedrockProfiles(t *testing.T) {
	shipped, err := LoadPrices("", nil)
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]string{
		"us.anthropic.claude-sonnet-4-5-20250929-v1:0":     "us.anthropic.claude-sonnet-4-5",
		"global.anthropic.claude-sonnet-4-5-20250929-v1:0": "anthropic.claude-sonnet-4-5",
		"anthropic.claude-haiku-4-5-20251001-v1:0":         "anthropic.claude-haiku-4-5",
		"eu.anthropic.claude-opus-4-1-20250805-v1:0":       "anthropic.claude-opus-4-1",
	} {
		p := shipped.PriceFor("bedrock", model, time.Now())
		if p == nil || p.Model != want {
			t.Errorf("PriceFor(bedrock, %s) = %+v, want the row %s", model, p, want)
		}
	}
	if p := shipped.PriceFor("openai", "us.gpt-5", time.Now()); p != nil {
		t.Errorf("a profile prefix outside Bedrock matched %s", p.Model)
	}
}
