package reconcile

import (
	"context"
	"database/sql"
	"math/big"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// TestLineCostsExact: every line's cost, in whichever form lines.sql takes
// (DECIMAL(18, 12) when narrow_prices.sql allows it, DECIMAL(38, 18)
// otherwise), is the exact sum of its counts at their prices, for each of the
// five token counts at its own price and counts up to the ingest ceiling; and
// the narrow form is not taken for prices it cannot hold exactly or lines that
// could cost more than its range.
func TestLineCostsExact(t *testing.T) {
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
			if err := classify(ctx, e, in.gateSQL, false, 3, nil); err != nil {
				t.Fatal(err)
			}
			narrow, err := narrowPrices(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			if narrow != c.narrow {
				t.Errorf("priced narrow: %v, want %v", narrow, c.narrow)
			}
			// Every line's cost against its counts and prices, worked out
			// here in exact rationals.
			rows, err := e.DB.QueryContext(ctx, `SELECT l.line_key, CAST(l.cost_usd AS VARCHAR),
				    a.input_tokens, a.cached_input_tokens, a.cache_write_tokens, a.cache_write_1h_tokens, a.output_tokens,
				    CAST(p.input_per_token AS VARCHAR), CAST(p.cached_per_token AS VARCHAR), CAST(p.cache_write_per_token AS VARCHAR),
				    CAST(p.cache_write_1h_per_token AS VARCHAR), CAST(p.output_per_token AS VARCHAR)
				FROM lines l
				JOIN files f ON f.file_no = l.file_no
				JOIN counted a ON a.channel = f.channel AND a.raw_sha256 = f.raw_sha256 AND a.line_no = l.line_no
				JOIN model_prices p ON p.mp_no = l.mp_no
				ORDER BY l.line_key`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var n int
			most := new(big.Rat)
			for rows.Next() {
				var key int64
				var got string
				var tok [5]sql.NullInt64
				var price [5]sql.NullString
				if err := rows.Scan(&key, &got, &tok[0], &tok[1], &tok[2], &tok[3], &tok[4],
					&price[0], &price[1], &price[2], &price[3], &price[4]); err != nil {
					t.Fatal(err)
				}
				n++
				want := lineCostOf(tok, price)
				have, ok := new(big.Rat).SetString(got)
				if !ok || have.Cmp(want) != 0 {
					t.Fatalf("line %d costs %s, want %s (counts %v, prices %v)", key, got, want.FloatString(18), tok, price)
				}
				if have.Cmp(most) > 0 {
					most = have
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			var lines int
			if err := e.DB.QueryRowContext(ctx, "SELECT count(*) FROM lines").Scan(&lines); err != nil {
				t.Fatal(err)
			}
			if n == 0 || n != lines {
				t.Fatalf("checked %d of %d lines", n, lines)
			}
			if f, _ := most.Float64(); f <= c.over {
				t.Fatalf("the dearest line costs %v USD, want over %v: the counts prove nothing", f, c.over)
			}
		})
	}
}

// lineCostOf is a line's cost as lines.sql defines it (docs/costs.md), in
// exact rationals: uncached input, cached input, 5-minute and one-hour cache
// writes and output, each count at its per-token price; nothing for a line
// without a price or whose counts are missing, negative, over 10^9 or
// inconsistent (ingest's checks).
func lineCostOf(tok [5]sql.NullInt64, price [5]sql.NullString) *big.Rat {
	const ceiling = 1_000_000_000
	in, cached, write, write1h, out := tok[0], tok[1], tok[2].Int64, tok[3].Int64, tok[4]
	within := func(v, hi int64) bool { return v >= 0 && v <= hi }
	if !in.Valid || !cached.Valid || !out.Valid || !within(in.Int64, ceiling) || !within(cached.Int64, ceiling) ||
		!within(write, ceiling) || !within(write1h, write) || !within(out.Int64, ceiling) || cached.Int64+write > in.Int64 {
		return new(big.Rat)
	}
	counts := [5]int64{in.Int64 - cached.Int64 - write, cached.Int64, write - write1h, write1h, out.Int64}
	sum := new(big.Rat)
	for i, p := range price {
		if !p.Valid {
			return new(big.Rat)
		}
		r, ok := new(big.Rat).SetString(p.String)
		if !ok {
			panic("price " + p.String)
		}
		sum.Add(sum, r.Mul(r, big.NewRat(counts[i], 1)))
	}
	return sum
}
