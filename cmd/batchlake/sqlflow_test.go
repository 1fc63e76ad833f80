package main

import (
	"bytes"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sqlJSON runs `sql --format json` with the given arguments and standard input.
func sqlJSON(t *testing.T, stdin string, args ...string) (int, []map[string]any, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runIO(append([]string{"sql", "--format", "json"}, args...), strings.NewReader(stdin), &out, &errb)
	var rows []map[string]any
	if code == exitOK {
		d := json.NewDecoder(&out)
		d.UseNumber()
		if err := d.Decode(&rows); err != nil {
			t.Fatalf("sql %v: stdout is not a JSON array: %v\n%s", args, err, out.String())
		}
	}
	return code, rows, errb.String()
}

// TestSQLQueryFromStdinAndFile: `sql` takes its query from the argument, from
// standard input (an argument of -, or none when stdin is not a terminal) and
// from --file, with the same answer; a file of several statements is still
// refused, and no query at all, or two, is a usage error.
func TestSQLQueryFromStdinAndFile(t *testing.T) {
	t.Parallel()
	lk, _ := demoLake(t)
	const q = "SELECT final_state, count(*) AS n FROM records GROUP BY ALL ORDER BY ALL"
	code, want, stderr := sqlJSON(t, "", "--lake", lk, q)
	if code != exitOK || len(want) == 0 {
		t.Fatalf("sql with the query as argument: exit %d, %v\n%s", code, want, stderr)
	}
	file := filepath.Join(t.TempDir(), "q.sql")
	// A query file as people write them: a comment, lines, a semicolon.
	if err := os.WriteFile(file, []byte("-- records by state\n"+strings.ReplaceAll(q, " FROM", "\nFROM")+";\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	multi := filepath.Join(t.TempDir(), "two.sql")
	if err := os.WriteFile(multi, []byte(q+";\nSELECT 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		stdin string
		args  []string
		code  int
	}{
		{"dash reads stdin", q + ";\n", []string{"-"}, exitOK},
		{"no argument reads a piped stdin", q, nil, exitOK},
		{"file", "", []string{"--file", file}, exitOK},
		{"file wins over an unused stdin", "SELECT 1", []string{"--file", file}, exitOK},
		{"empty stdin", "  \n", []string{"-"}, exitUsage},
		{"argument and file", "", []string{q, "--file", file}, exitUsage},
		{"missing file", "", []string{"--file", filepath.Join(t.TempDir(), "none.sql")}, exitUsage},
		{"two statements in a file", "", []string{"--file", multi}, exitUsage},
		{"two statements on stdin", q + "; SELECT 1", []string{"-"}, exitUsage},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, got, stderr := sqlJSON(t, c.stdin, append([]string{"--lake", lk}, c.args...)...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s", code, c.code, stderr)
			}
			if c.code == exitOK {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				if string(g) != string(w) {
					t.Errorf("got %s, want %s", g, w)
				}
			}
		})
	}
	// One query whose text has a line ending in ';' inside a string is still
	// one query.
	code, got, stderr := sqlJSON(t, "SELECT 'a;\nb' AS s, count(*) AS n FROM records;\n", "--lake", lk)
	if code != exitOK || len(got) != 1 || got[0]["s"] != "a;\nb" {
		t.Errorf("a literal with ';' at a line's end: exit %d %v\n%s", code, got, stderr)
	}
}

// costRows runs `cost --format json` and returns its rows.
func costRows(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"cost", "--format", "json"}, args...), &out, &errb)
	if code != exitOK {
		t.Fatalf("cost %v: exit %d\n%s%s", args, code, out.String(), errb.String())
	}
	var rows []map[string]any
	d := json.NewDecoder(&out)
	d.UseNumber()
	if err := d.Decode(&rows); err != nil {
		t.Fatalf("cost %v: %v\n%s", args, err, out.String())
	}
	return rows
}

// TestCostByModelFamily: `cost --by model` puts a model's dated version and
// its undated name (the error lines of the demo name no date) in one row,
// the family; --by model_version keeps them apart; both add up to the same
// total. With no price for the model the family is the version without its
// date suffix.
func TestCostByModelFamily(t *testing.T) {
	t.Parallel()
	noPrice := filepath.Join(t.TempDir(), "prices.csv")
	if err := os.WriteFile(noPrice, []byte("provider,model,input_usd_per_mtok,cached_input_usd_per_mtok,output_usd_per_mtok,batch_multiplier\nanthropic,claude-sonnet-4-5,3,0.3,15,0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		extra []string
	}{{"priced", nil}, {"unpriced", []string{"--prices", noPrice}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lk, _ := demoLake(t, c.extra...)
			sum := func(rows []map[string]any) (*big.Rat, int64) {
				s, n := new(big.Rat), int64(0)
				for _, r := range rows {
					x, ok := new(big.Rat).SetString(string(r["cost_usd"].(json.Number)))
					if !ok {
						t.Fatalf("cost_usd %v", r["cost_usd"])
					}
					s.Add(s, x)
					l, _ := r["lines"].(json.Number).Int64()
					n += l
				}
				return s, n
			}
			versions := costRows(t, "--lake", lk, "--by", "model_version")
			families := costRows(t, "--lake", lk, "--by", "model")
			var vs []string
			for _, r := range versions {
				vs = append(vs, r["model_version"].(string))
			}
			if strings.Join(vs, ",") != "gpt-4o-mini,gpt-4o-mini-2024-07-18" {
				t.Fatalf("--by model_version: %v, want the undated and the dated version (the test needs both)", vs)
			}
			if len(families) != 1 || families[0]["model"] != "gpt-4o-mini" {
				t.Fatalf("--by model: %v, want one row, gpt-4o-mini", families)
			}
			vs1, vn := sum(versions)
			fs1, fn := sum(families)
			if vs1.Cmp(fs1) != 0 || vn != fn {
				t.Errorf("families add up to %s USD over %d lines, versions to %s over %d", fs1.FloatString(18), fn, vs1.FloatString(18), vn)
			}
			if c.name == "priced" && fs1.Sign() == 0 {
				t.Error("the priced run cost nothing: the sums prove nothing")
			}
		})
	}
}

// TestCommittedNotBilledSettledByRetry: records missing in the first job
// (no result line) that its retry child answered are no longer committed but
// not billed: the demo family ends with nothing pending, so `cost --estimate`
// and `report` say 0, while the first job's own report still counts them.
func TestCommittedNotBilledSettledByRetry(t *testing.T) {
	t.Parallel()
	lk, job := demoLake(t)
	code, rep := cli(t, "report", "--lake", lk, "--job", job)
	if code != exitOK {
		t.Fatalf("report: exit %d %v", code, rep)
	}
	if rep["pending"].(json.Number).String() != "0" {
		t.Fatalf("the demo family has %v pending; the test needs none", rep["pending"])
	}
	if got := rep["committed_not_billed_usd"]; got != json.Number("0") {
		t.Errorf("report committed_not_billed_usd %v, want 0 (every missing record succeeded in a retry)", got)
	}
	// USD is a JSON number everywhere in the report, never a string.
	usd := []any{rep["cost_total_usd"], rep["estimated_usd"], rep["committed_not_billed_usd"]}
	for _, k := range []string{"cost_by_category", "cost_by_model", "cost_by_attempt", "cost_by_tenant", "cost_by_day", "manual_queue", "generations"} {
		for _, x := range rep[k].([]any) {
			usd = append(usd, x.(map[string]any)["cost_usd"])
		}
	}
	for _, x := range rep["generations"].([]any) {
		usd = append(usd, x.(map[string]any)["estimated_usd"])
	}
	ev := rep["estimate_vs_bill"].(map[string]any)
	usd = append(usd, ev["estimated_usd"], ev["billed_usd"], ev["difference_usd"])
	for i, v := range usd {
		if _, ok := v.(json.Number); !ok {
			t.Errorf("report USD value %d is %T %v, want a JSON number", i, v, v)
		}
	}
	if len(rep["manual_queue"].([]any)) == 0 {
		t.Error("the demo's manual queue is empty: its cost_usd went unchecked")
	}
	// The first job's own report counted missing records: without them the
	// test would prove nothing.
	code, missing, stderr := sqlJSON(t, "", "--lake", lk, "SELECT count(*) AS n FROM outcomes WHERE outcome = 'missing' AND job_key = '"+job+"'")
	if code != exitOK || len(missing) != 1 || missing[0]["n"].(json.Number).String() == "0" {
		t.Fatalf("missing records of the first job: exit %d %v %s", code, missing, stderr)
	}
	rows := costRows(t, "--lake", lk, "--estimate", "--job", job)
	if len(rows) < 3 {
		t.Fatalf("cost --estimate: %d rows, want the 3 generations and the total", len(rows))
	}
	for _, r := range rows {
		if v := r["committed_not_billed_usd"].(json.Number).String(); v != "0" {
			t.Errorf("cost --estimate %v: committed_not_billed_usd %s, want 0", r["job_key"], v)
		}
	}
}

// TestAttemptsCarryBusinessKeyAndTimes: every line of the attempts view has
// its record's business_key and the time its raw file was ingested, and a
// line from a provider batch the time that batch completed; so every attempt
// of one record is one filter, and cost per day one GROUP BY on costs. Money
// is DECIMAL in every view, so sums need no cast.
func TestAttemptsCarryBusinessKeyAndTimes(t *testing.T) {
	t.Parallel()
	lk := filepath.Join(t.TempDir(), "lake")
	demo := copyDemoLake(t, lk)
	// The lake is a copy of a run made once per test process: its ingest
	// times fall within that run.
	before, after := demo.start.UTC().Add(-time.Second), demo.end.UTC().Add(time.Second)
	one := func(q string) map[string]any {
		t.Helper()
		code, rows, stderr := sqlJSON(t, "", "--lake", lk, q)
		if code != exitOK || len(rows) != 1 {
			t.Fatalf("%s: exit %d %v\n%s", q, code, rows, stderr)
		}
		return rows[0]
	}
	// Lines whose id the job knows: the business key is the expected row's.
	r := one(`SELECT count(*) AS n,
	    count(*) FILTER (WHERE a.business_key IS DISTINCT FROM e.business_key OR a.business_key IS NULL) AS wrong_key,
	    count(*) FILTER (WHERE a.ingested_at IS NULL OR a.batch_completed_at IS NULL) AS no_time,
	    count(*) FILTER (WHERE a.batch_completed_at > a.ingested_at) AS completed_after_ingest,
	    epoch_ms(min(a.ingested_at)) AS first, epoch_ms(max(a.ingested_at)) AS last,
	    count(DISTINCT a.ingested_at) AS times
	  FROM attempts a JOIN expected e ON e.job_key = a.job_key AND e.custom_id = a.custom_id`)
	if r["n"].(json.Number).String() == "0" {
		t.Fatal("no attempt lines")
	}
	for _, k := range []string{"wrong_key", "no_time", "completed_after_ingest"} {
		if v := r[k].(json.Number).String(); v != "0" {
			t.Errorf("%s: %s lines", k, v)
		}
	}
	for _, k := range []string{"first", "last"} {
		ms, err := r[k].(json.Number).Int64()
		if err != nil {
			t.Fatal(err)
		}
		at := time.UnixMilli(ms).UTC()
		if at.Before(before) || at.After(after) {
			t.Errorf("%s ingested_at %s is outside the run (%s to %s)", k, at, before, after)
		}
	}
	// Three generations, at least one ingest each: as many distinct times.
	if n, _ := r["times"].(json.Number).Int64(); n < 3 {
		t.Errorf("%d distinct ingest times over three generations", n)
	}
	// Every attempt of one retried record, by its business key alone.
	r = one(`SELECT business_key, attempts FROM records WHERE attempts >= 2 ORDER BY record_id LIMIT 1`)
	bk := r["business_key"].(string)
	r = one(`SELECT count(DISTINCT attempt) AS n FROM attempts WHERE business_key = '` + strings.ReplaceAll(bk, "'", "''") + `'`)
	if r["n"] == nil || r["n"].(json.Number).String() != "2" && r["n"].(json.Number).String() != "3" {
		t.Errorf("attempts of %q by business_key: %v distinct attempts, want its 2 or more", bk, r["n"])
	}
	// Money is DECIMAL in every view: sums need no cast, and the records'
	// costs add up to the lines'.
	r = one(`SELECT typeof(any_value(o.cost_usd)) AS o_type, typeof(any_value(c.cost_usd)) AS c_type,
	    CAST((SELECT sum(cost_usd) FROM outcomes) AS VARCHAR) AS outcomes_usd,
	    CAST((SELECT sum(cost_usd) FROM records) AS VARCHAR) AS records_usd,
	    CAST((SELECT sum(cost_usd) FROM costs WHERE record_id <> '') AS VARCHAR) AS lines_usd
	  FROM outcomes o, (SELECT cost_usd FROM costs LIMIT 1) c`)
	if r["o_type"] != "DECIMAL(38,18)" || r["c_type"] != "DECIMAL(38,18)" || r["outcomes_usd"] != r["records_usd"] || r["outcomes_usd"] != r["lines_usd"] {
		t.Errorf("money in the views: %v", r)
	}
	// Cost per day off the costs view alone adds up to the total.
	r = one(`SELECT CAST(sum(usd) AS VARCHAR) AS by_day, (SELECT CAST(sum(cost_usd) AS VARCHAR) FROM costs) AS total,
	    count(*) FILTER (WHERE day IS NULL) AS no_day
	  FROM (SELECT CAST(ingested_at AS DATE) AS day, sum(cost_usd) AS usd FROM costs GROUP BY ALL)`)
	if r["by_day"] != r["total"] || r["no_day"].(json.Number).String() != "0" {
		t.Errorf("cost per day %v", r)
	}
}
