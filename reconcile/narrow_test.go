package reconcile

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// TestNarrowCostsEqualWide: every line's cost worked out in DECIMAL(18, 12)
// (narrow_prices.sql) is the value DECIMAL(38, 18) gives, for each of the five
// token counts at its own price and counts up to the ingest ceiling; and the
// narrow form is not taken for prices it cannot hold exactly or lines that
// could cost more than its range.
func TestNarrowCostsEqualWide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := generate(rand.New(rand.NewPCG(7, 3)), 60, 2, 1)
	const header = "provider,model,input_usd_per_mtok,cached_input_usd_per_mtok,output_usd_per_mtok,batch_multiplier,cache_write_usd_per_mtok,cache_write_1h_usd_per_mtok,cached_batch_multiplier"
	for _, c := range []struct {
		name, row string
		narrow    bool
		// over is a cost the dearest line must exceed (USD): the counts
		// below reach the magnitudes the bound is about.
		over float64
	}{
		{"shipped-like", "openai,gpt-4o-mini,0.15,0.075,0.60,0.5,0.1875,0.3,1", true, 100},
		// Input-side dearest 400 + output 598 USD per million tokens: a
		// line of 10^9 input and 10^9 output tokens costs 998,000 USD.
		{"near-the-bound", "openai,gpt-4o-mini,300,30,598,1,350,400,1", true, 900_000},
		// 0.1234567 × 0.5 / 10^6 has 14 decimals: each of the five prices
		// in turn, the others as in shipped-like.
		{"more-decimals-input", "openai,gpt-4o-mini,0.1234567,0.075,0.60,0.5,0.1875,0.3,1", false, 100},
		{"more-decimals-cached", "openai,gpt-4o-mini,0.15,0.1234567,0.60,0.5,0.1875,0.3,1", false, 100},
		{"more-decimals-cache-write", "openai,gpt-4o-mini,0.15,0.075,0.60,0.5,0.1234567,0.3,1", false, 100},
		{"more-decimals-cache-write-1h", "openai,gpt-4o-mini,0.15,0.075,0.60,0.5,0.1875,0.1234567,1", false, 100},
		{"more-decimals-output", "openai,gpt-4o-mini,0.15,0.075,0.1234567,0.5,0.1875,0.3,1", false, 10},
		// 500 + 600 USD per million: 1.1 million USD for the dearest line.
		{"too-dear", "openai,gpt-4o-mini,500,500,600,1,,,", false, 1_000_000},
		// Each input-side price alone with the output price over the bound
		// (500 + 598 USD per million), and the output price alone (999.15).
		{"too-dear-input", "openai,gpt-4o-mini,500,0.075,598,1,0.1875,0.3,1", false, 100_000},
		{"too-dear-cached", "openai,gpt-4o-mini,0.15,500,598,1,0.1875,0.3,1", false, 100_000},
		{"too-dear-cache-write", "openai,gpt-4o-mini,0.15,0.075,598,1,500,0.3,1", false, 100_000},
		{"too-dear-cache-write-1h", "openai,gpt-4o-mini,0.15,0.075,598,1,0.1875,500,1", false, 100_000},
		{"too-dear-output", "openai,gpt-4o-mini,0.15,0.075,999,1,0.1875,0.3,1", false, 100_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			prices, err := LoadPrices("prices.csv", []byte(header+"\n"+c.row+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			l, dir := testLake(t)
			m := planAndIngest(t, l, dir, g, 0)
			o := Options{JobKey: m.JobKey, TmpDir: dir, MaxAttempts: 3, Prices: prices, Engine: EngineOptions{Threads: 2, CacheDir: filepath.Join(dir, "cache")}}
			in, e := stagedEngine(t, l, &o, nil)
			// Every answered line gets counts of its own (from its place):
			// some at the 10^9 ceiling, some over it or negative (priced at
			// nothing either way), the cached, cache write and one-hour
			// write tokens inside the input tokens as ingest keeps them.
			if err := e.Exec(ctx, "counts", []string{
				`CREATE TEMP TABLE counted AS
				 WITH h AS (SELECT *, hash(raw_sha256, line_no) AS h FROM attempts_raw),
				 i AS (SELECT *, CASE WHEN line_no % 11 = 0 THEN -1
				                      WHEN line_no % 13 = 0 THEN 1000000001
				                      WHEN line_no % 3 = 0 THEN 1000000000
				                      ELSE CAST(h % 5000000 AS BIGINT) END AS n_in FROM h),
				 c AS (SELECT *, CASE WHEN n_in < 0 THEN 0 ELSE n_in // CAST(2 + h % 3 AS BIGINT) END AS n_cached FROM i),
				 w AS (SELECT *, CASE WHEN n_in < 0 THEN 0 ELSE (n_in - n_cached) // CAST(1 + (h >> 4) % 4 AS BIGINT) END AS n_write FROM c)
				 SELECT * EXCLUDE (h, n_in, n_cached, n_write) REPLACE (
				     CASE WHEN input_tokens IS NULL THEN NULL ELSE n_in END AS input_tokens,
				     CASE WHEN input_tokens IS NULL THEN NULL ELSE n_cached END AS cached_input_tokens,
				     CASE WHEN input_tokens IS NULL THEN NULL ELSE n_write END AS cache_write_tokens,
				     CASE WHEN input_tokens IS NULL THEN NULL ELSE n_write // CAST(1 + (h >> 6) % 3 AS BIGINT) END AS cache_write_1h_tokens,
				     CASE WHEN input_tokens IS NULL THEN NULL WHEN line_no % 5 = 0 THEN 1000000000 ELSE CAST((h >> 10) % 100000 AS BIGINT) END AS output_tokens)
				 FROM w`,
				`CREATE OR REPLACE TEMP VIEW attempts_raw AS SELECT * FROM counted`,
			}); err != nil {
				t.Fatal(err)
			}
			// costs classifies the job and returns every line's cost in
			// line order, the dearest, and whether they were priced narrow
			// (narrowPrices asked again of the model_prices classify made).
			costs := func() (string, float64, bool) {
				t.Helper()
				if err := classify(ctx, e, in.gateSQL, false, 3, nil); err != nil {
					t.Fatal(err)
				}
				var all string
				var most float64
				if err := e.DB.QueryRowContext(ctx, `SELECT string_agg(CAST(cost_usd AS VARCHAR), ',' ORDER BY line_key),
					max(CAST(cost_usd AS DOUBLE)) FROM lines`).Scan(&all, &most); err != nil {
					t.Fatal(err)
				}
				narrow, err := narrowPrices(ctx, e)
				if err != nil {
					t.Fatal(err)
				}
				return all, most, narrow
			}
			got, most, narrow := costs()
			if narrow != c.narrow {
				t.Errorf("priced narrow: %v, want %v", narrow, c.narrow)
			}
			if most <= c.over {
				t.Fatalf("the dearest line costs %v USD, want over %v: the counts prove nothing", most, c.over)
			}
			e.wideCosts = true
			want, _, narrow := costs()
			if narrow {
				t.Fatal("priced narrow with wideCosts set")
			}
			if got != want {
				g, w := strings.Split(got, ","), strings.Split(want, ",")
				for i := range min(len(g), len(w)) {
					if g[i] != w[i] {
						t.Fatalf("line %d of %d costs %s narrow, %s wide", i, len(w), g[i], w[i])
					}
				}
				t.Fatalf("%d line costs narrow, %d wide", len(g), len(w))
			}
		})
	}
}
