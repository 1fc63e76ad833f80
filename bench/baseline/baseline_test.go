package baseline

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/bench/gen"
)

// The baseline's three counts agree with the generator's truth: invalid
// lines are skipped, unknown ids are counted once, duplicates only for
// records that were sent.
func TestBaselineMatchesTruth(t *testing.T) {
	dir := t.TempDir()
	o := gen.DefaultOptions(3000, 11)
	o.Block = 256
	o.Rates = gen.Rates{ServerError: 0.05, RateLimit: 0.05, Expired: 0.05, BadRequest: 0.05, Missing: 0.05, Empty: 0.05, Duplicate: 0.1}
	o.Unknown, o.Corrupt = 4, 3
	var paths []string
	var files []*os.File
	for _, name := range []string{"input.jsonl", "output.jsonl", "errors.jsonl"} {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		files = append(files, f)
	}
	truth, err := gen.Generate(context.Background(), gen.Writers{Input: files[0], Output: files[1], Errors: files[2]}, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []struct{ keepBody, contract bool }{{false, false}, {true, false}, {false, true}} {
		work := filepath.Join(dir, fmt.Sprintf("work-%v-%v", mode.keepBody, mode.contract))
		if err := os.Mkdir(work, 0o755); err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), Options{Input: paths[0], Output: paths[1], Errors: paths[2], WorkDir: work, Threads: 1, MemoryLimit: "256MB", KeepBody: mode.keepBody, Contract: mode.contract})
		if err != nil {
			t.Fatalf("%+v: %v", mode, err)
		}
		check(t, res, truth)
		steps := 6
		if mode.contract {
			steps = 10
			checkFloor(t, work, paths, truth)
			if res.Rows.Input != truth.Expected {
				t.Errorf("contract floor: %d input rows, want %d", res.Rows.Input, truth.Expected)
			}
		}
		if len(res.Steps) != steps || res.Settings.Version == "" || res.Settings.Contract != mode.contract {
			t.Errorf("%+v: steps %v, settings %+v", mode, res.Steps, res.Settings)
		}
	}
}

// checkFloor checks what the contract floor left in its work directory: the
// raw files as they were, a shard holding the input's lines as they are (in
// any order), one expected and one outcome row per record and one cost row
// per result line, costs adding up to the outcomes' costs.
func checkFloor(t *testing.T, work string, paths []string, truth gen.Truth) {
	t.Helper()
	for i, out := range []string{"shard.jsonl", "raw-output.jsonl", "raw-errors.jsonl"} {
		want, err := os.ReadFile(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(work, out))
		if i == 0 {
			got, want = sortedLines(got), sortedLines(want)
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, err %v; want the %d bytes of %s", out, len(got), err, len(want), paths[i])
		}
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := func(name string) string { return literal(filepath.Join(work, name)) }
	var expected, ids, outcomes, costs, results int64
	var outcomeUSD, costUSD string
	err = db.QueryRow(`SELECT
	    (SELECT count(*) FROM `+f("expected.parquet")+`),
	    (SELECT count(DISTINCT record_id) FROM `+f("expected.parquet")+` WHERE length(record_id) = 64),
	    (SELECT count(*) FROM `+f("outcomes.parquet")+`),
	    (SELECT count(*) FROM `+f("costs.parquet")+`),
	    (SELECT count(*) FROM read_parquet([`+f("output.parquet")+`, `+f("errors.parquet")+`])),
	    (SELECT CAST(sum(CAST(cost_usd AS DECIMAL(38, 18))) AS VARCHAR) FROM `+f("outcomes.parquet")+`),
	    (SELECT CAST(sum(CAST(cost_usd AS DECIMAL(38, 18))) AS VARCHAR) FROM `+f("costs.parquet")+` WHERE record_id <> '')`).
		Scan(&expected, &ids, &outcomes, &costs, &results, &outcomeUSD, &costUSD)
	if err != nil {
		t.Fatal(err)
	}
	if expected != truth.Expected || ids != truth.Expected || outcomes != truth.Expected {
		t.Errorf("expected %d (%d distinct record ids), outcomes %d rows; want %d each", expected, ids, outcomes, truth.Expected)
	}
	if costs != results || costs == 0 {
		t.Errorf("costs %d rows, want one per loaded result line (%d)", costs, results)
	}
	if outcomeUSD != costUSD || strings.Trim(outcomeUSD, "0.") == "" {
		t.Errorf("outcomes cost %s, costs of known records %s: want equal and not zero", outcomeUSD, costUSD)
	}
}

func check(t *testing.T, res Result, truth gen.Truth) {
	t.Helper()
	if res.Expected != truth.Expected || res.Missing != truth.Missing || res.Unknown != truth.Unknown || res.Duplicate != truth.Duplicate {
		t.Errorf("baseline expected/missing/unknown/duplicate = %d/%d/%d/%d, truth %d/%d/%d/%d",
			res.Expected, res.Missing, res.Unknown, res.Duplicate, truth.Expected, truth.Missing, truth.Unknown, truth.Duplicate)
	}
	if want := truth.Lines.Output + truth.Lines.Errors - truth.Quarantined; res.Rows.Output+res.Rows.Errors != want {
		t.Errorf("loaded %d result rows, want %d (every valid line)", res.Rows.Output+res.Rows.Errors, want)
	}
}

func sortedLines(b []byte) []byte {
	lines := bytes.SplitAfter(b, []byte("\n"))
	slices.SortFunc(lines, bytes.Compare)
	return bytes.Join(lines, nil)
}
