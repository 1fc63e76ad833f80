package reconcile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPricedByItsOwnRow: a price row prices its model id and the id with
// version suffixes only, never another model whose id it begins
// (gpt-5.2-pro at gpt-5.2's price, a twelfth of its own; claude-opus-4-6 at
// claude-opus-4's, three times its own): such a line is unpriced, and
// reported. reconcile.sql (every line) and PriceFor (plan's estimate) agree.
func TestPricedByItsOwnRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct{ version, want string }{
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
		{"gpt-4o-mini", "gpt-4o-mini"},
		{"gpt-4o-2024-08-06", "gpt-4o"},
		{"gpt-5-2025-08-07", "gpt-5"},
		{"gpt-5-mini-2025-08-07", "gpt-5-mini"},
		{"gpt-3.5-turbo-0125", "gpt-3.5-turbo"},
		{"gpt-5.2-pro-2025-12-11", ""},
		{"gpt-5.4-2026-03-05", ""},
		{"o3-deep-research-2025-06-26", ""},
		{"gpt-4o-mini-search-preview-2025-03-11", ""},
		{"gpt-4o-minix", ""},
	}
	g := generate(rand.New(rand.NewPCG(11, 4)), 40, 1, 1)
	l, dir := testLake(t)
	m := planAndIngest(t, l, dir, g, 0)
	prices, err := LoadPrices("", nil)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{JobKey: m.JobKey, TmpDir: dir, MaxAttempts: 3, Prices: prices, Engine: EngineOptions{Threads: 1, CacheDir: filepath.Join(dir, "cache")}}
	in, e := stagedEngine(t, l, &o, nil)
	var when strings.Builder
	for i, c := range cases {
		fmt.Fprintf(&when, " WHEN line_no %% %d = %d THEN '%s'", len(cases), i, c.version)
	}
	if err := e.Exec(ctx, "versions", []string{
		`CREATE TEMP TABLE versioned AS SELECT * REPLACE (CASE` + when.String() + ` END AS model_version) FROM attempts_raw`,
		`CREATE OR REPLACE TEMP VIEW attempts_raw AS SELECT * FROM versioned`,
	}); err != nil {
		t.Fatal(err)
	}
	if err := classify(ctx, e, in.gateSQL, false, 3, nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	rows, err := e.DB.QueryContext(ctx, `SELECT DISTINCT model_version, coalesce(model, '') FROM model_prices`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var v, p string
		if err := rows.Scan(&v, &p); err != nil {
			t.Fatal(err)
		}
		got[v] = p
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if p, ok := got[c.version]; !ok || p != c.want {
			t.Errorf("lines of %s priced by row %q (seen: %v), want %q", c.version, p, ok, c.want)
		}
		var est string
		if r := prices.PriceFor("openai", c.version, time.Now()); r != nil {
			est = r.Model
		}
		if est != c.want {
			t.Errorf("PriceFor(openai, %s) = %q, want %q", c.version, est, c.want)
		}
	}
	// Anthropic and Bedrock ids, by PriceFor (the same pattern as the SQL).
	for _, c := range []struct{ provider, version, want string }{
		{"anthropic", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"anthropic", "claude-opus-4-20250514", "claude-opus-4"},
		{"anthropic", "claude-opus-4-7", ""},
		{"anthropic", "claude-3-5-sonnet@20241022", "claude-3-5-sonnet"},
		{"bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "us.anthropic.claude-sonnet-4-5"},
		{"bedrock", "amazon.nova-pro-v1:0", "amazon.nova-pro"},
		{"bedrock", "amazon.nova-premier-v1:0", ""},
		{"gemini", "gemini-2.0-flash-001", "gemini-2.0-flash"},
		{"gemini", "gemini-2.5-flash-lite", "gemini-2.5-flash-lite"},
	} {
		var est string
		if r := prices.PriceFor(c.provider, c.version, time.Now()); r != nil {
			est = r.Model
		}
		if est != c.want {
			t.Errorf("PriceFor(%s, %s) = %q, want %q", c.provider, c.version, est, c.want)
		}
	}
}
