package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/batchlake/batchlake/internal/testrun"
	"github.com/batchlake/batchlake/lake"
)

// escapes are SQL strings that try to write through `batchlake sql`: victim
// is a table file DuckDB reads for the views (a costs file of the local
// lake, or its cached copy for a remote lake), cwd the working directory.
// Every one must be refused before anything of it runs.
func escapes(victim, cwd string) []string {
	v := strings.ReplaceAll(victim, "'", "''")
	copyTo := "COPY (SELECT 'x' AS record_id) TO '" + v + "' (FORMAT parquet, USE_TMP_FILE false)"
	return []string{
		// One statement that writes.
		copyTo,
		"COPY costs TO '" + v + "' (FORMAT parquet, USE_TMP_FILE false)",
		"COPY (SELECT 1 AS x) TO 'relative.csv'",
		"EXPORT DATABASE '" + filepath.Join(cwd, "export") + "'",
		"INSERT INTO costs SELECT * FROM costs",
		"CREATE TABLE t AS SELECT * FROM costs",
		"CREATE OR REPLACE TEMP VIEW costs AS SELECT 'x' AS record_id",
		"DROP VIEW costs",
		"ATTACH '" + filepath.Join(cwd, "x.db") + "' AS x",
		"ATTACH ':memory:' AS m",
		"CHECKPOINT",
		"VACUUM",
		"INSTALL httpfs",
		"LOAD httpfs",
		"BEGIN TRANSACTION",
		// Settings that name output files, or undo the lockdown.
		"PRAGMA enable_profiling = 'json'",
		"SET profiling_output = '" + v + "'",
		"PRAGMA profiling_output = '" + filepath.Join(cwd, "profile.json") + "'",
		"SET enable_external_access = true",
		"RESET allowed_paths",
		"SET allowed_directories = ['/']",
		"SET temp_directory = '" + cwd + "'",
		"CALL enable_logging(storage = 'file', storage_path = '" + cwd + "')",
		"SELECT * FROM enable_logging(storage = 'file', storage_path = '" + v + "')",
		"SELECT * FROM checkpoint()",
		"SELECT * FROM query('" + strings.ReplaceAll(copyTo, "'", "''") + "')",
		"CALL pragma_version()",
		// EXPLAIN: ANALYZE runs the statement it explains.
		"EXPLAIN ANALYZE " + copyTo,
		"EXPLAIN " + copyTo,
		"EXPLAIN ANALYZE SELECT count(*) FROM costs",
		"EXPLAIN SELECT 1",
		// Several statements, the writing one in every position.
		copyTo + "; SELECT 1 AS ok",
		"SELECT 1 AS ok; " + copyTo,
		"SELECT 1; " + copyTo + "; SELECT 2",
		"select 1; select 2",
		"SELECT 1;;" + copyTo,
		"SELECT 1\n;\n" + copyTo,
		"FROM range(1); " + copyTo,
		"WITH x AS (SELECT 1) SELECT * FROM x; " + copyTo,
		"SET profiling_output = '" + v + "'; PRAGMA enable_profiling = 'json'; SELECT 1",
		// Comments and quoting around the separator.
		"SELECT 1 /* ; */; " + copyTo,
		"SELECT 1 -- ;\n; " + copyTo,
		"SELECT ';' AS s; " + copyTo,
		"SELECT 1 AS \"a;b\"; " + copyTo,
		"SELECT $$;$$ AS s; " + copyTo,
		"SELECT 'it''s'; " + copyTo,
		"SELECT 1\x00; " + copyTo,
		"/* SELECT */ " + copyTo,
		"PIVOT costs ON category USING sum(cost_usd)",
	}
}

// gateEscapes are --quality-gate values that try to get a statement of
// their own into the reconcile: each must be refused, before the reconcile
// writes anything.
func gateEscapes(victim string) []string {
	v := strings.ReplaceAll(victim, "'", "''")
	copyTo := "COPY (SELECT 'x' AS record_id) TO '" + v + "' (FORMAT parquet, USE_TMP_FILE false)"
	return []string{
		"true); " + copyTo + "; SELECT (true",
		"true)); " + copyTo + " --",
		"true) UNION ALL SELECT * FROM attempts_raw WHERE (true",
		"(SELECT count(*) FROM query('" + strings.ReplaceAll(copyTo, "'", "''") + "')) > 0",
		"true) OR (SELECT count(*) FROM enable_logging(storage = 'file', storage_path = '" + v + "')) > 0 OR (true",
		"true /* ) OR (true */",
		"true\x00) OR (true",
	}
}

// hashTree hashes every file under each root (missing roots are empty).
func hashTree(t *testing.T, roots ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				out[p] = "dir"
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			out[p] = hex.EncodeToString(s[:])
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// bucketSnapshot fingerprints every object of a fake S3 bucket: its key,
// size and the MD5 the fake computed from the body it stored. It asks the
// fake's backend directly, so a snapshot after each of many attempts costs no
// HTTP round trip and no download.
func bucketSnapshot(t *testing.T, b *s3mem.Backend, bucket string) map[string]string {
	t.Helper()
	out := map[string]string{}
	page := gofakes3.ListBucketPage{}
	for {
		list, err := b.ListBucket(bucket, nil, page)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list.Contents {
			out["bucket:"+c.Key] = fmt.Sprintf("%s/%d", c.ETag, c.Size)
		}
		if !list.IsTruncated {
			return out
		}
		page = gofakes3.ListBucketPage{Marker: list.NextMarker, HasMarker: true}
	}
}

// changed lists the differences of two snapshots.
func changed(before, after map[string]string) []string {
	var d []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			d = append(d, "removed "+k)
		} else if w != v {
			d = append(d, "changed "+k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			d = append(d, "added "+k)
		}
	}
	sort.Strings(d)
	return d
}

// runCLI runs batchlake in-process and returns its exit code, stdout and stderr.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestSQLCannotWrite: every escape attempt through `sql`, `catalog`,
// `--quality-gate` and the output paths of manual, report and reconcile is
// refused (a non-zero exit) and changes no byte of the
// lake, the cache, the temporary folder or the working directory; `verify`
// passes after them all and the views still answer. Run on a local lake and
// on an S3 lake read through the cache.
func TestSQLCannotWrite(t *testing.T) {
	input, err := filepath.Abs(filepath.Join("..", "..", "testdata", "demo", "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range testrun.OfflineAWS() {
		t.Setenv(k, v)
	}
	backend := s3mem.New()
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(faker.Server())
	defer srv.Close()
	q := url.Values{"region": {"us-east-1"}, "endpoint": {srv.URL}, "use_path_style": {"true"}, "disable_https": {"true"},
		"response_checksum_validation": {"when_required"}, "request_checksum_calculation": {"when_required"}}
	tried := 0
	for _, remote := range []bool{false, true} {
		name := map[bool]string{false: "local", true: "s3"}[remote]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cwd, tmp, cache := filepath.Join(dir, "cwd"), filepath.Join(dir, "tmp"), filepath.Join(dir, "cache")
			for _, d := range []string{cwd, tmp} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(cwd)
			lk := filepath.Join(dir, "lake")
			if remote {
				lk = "s3://lake/" + name + "?" + q.Encode()
			}
			global := []string{"--lake", lk, "--tmp-dir", tmp, "--cache-dir", cache, "--progress", "never", "--threads", "1"}
			var res struct {
				JobKey string `json:"job_key"`
			}
			if remote {
				code, out, errs := runCLI(append([]string{"run", "--provider", "sim", "--input", input, "--tenant", "acme",
					"--prompt-version", "v1", "--poll", "1ms"}, global...)...)
				if code != exitOK {
					t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
				}
				if err := json.Unmarshal([]byte(out), &res); err != nil {
					t.Fatal(err)
				}
			} else {
				// The same run on a local lake: a copy of the demo lake.
				res.JobKey = copyDemoLake(t, lk).jobKey()
			}
			count := func() string {
				t.Helper()
				code, out, errs := runCLI(append([]string{"sql", "--format", "csv",
					"SELECT (SELECT count(*) FROM costs) || '/' || (SELECT sum(cost_usd) FROM costs) || '/' || (SELECT count(*) FROM attempts)"}, global...)...)
				if code != exitOK {
					t.Fatalf("sql: exit %d\n%s", code, errs)
				}
				return out
			}
			want := count()
			// A session stages only the files of the views its query
			// reads; SHOW TABLES gets every view, so the cache holds every
			// table's files before the snapshot, and an escape could change
			// it only by writing.
			if code, _, errs := runCLI(append([]string{"sql", "SHOW TABLES"}, global...)...); code != exitOK {
				t.Fatalf("sql SHOW TABLES: exit %d\n%s", code, errs)
			}
			// The victim: a costs file of the lake as DuckDB reads it.
			l, err := lake.Open(context.Background(), lk)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			keys, err := l.List(context.Background(), lake.TablePrefix("costs"))
			if err != nil || len(keys) == 0 {
				t.Fatalf("no costs table file in the lake (%v)", err)
			}
			victim := l.LocalPath(keys[0])
			if remote {
				d, _ := lake.ParseObjectKey(keys[0])
				victim = filepath.Join(cache, d.Hex()+".parquet")
			}
			if _, err := os.Stat(victim); err != nil {
				t.Fatalf("victim: %v", err)
			}
			state := func() map[string]string {
				s := hashTree(t, cwd, tmp, cache)
				if remote {
					for k, v := range bucketSnapshot(t, backend, "lake") {
						s[k] = v
					}
				} else {
					for k, v := range hashTree(t, filepath.Join(dir, "lake")) {
						s[k] = v
					}
				}
				return s
			}
			before := state()
			attempt := func(class, what string, args ...string) {
				t.Helper()
				tried++
				code, out, errs := runCLI(append(args, global...)...)
				d := changed(before, state())
				record(t, "read-only SQL", class+" ("+name+" lake)", code != exitOK && len(d) == 0, 0)
				if code == exitOK {
					t.Errorf("%s: exit 0, want a refusal\nstdout: %s", what, out)
				}
				if len(d) > 0 {
					t.Fatalf("%s (exit %d: %s): changed %d files: %v", what, code, strings.TrimSpace(errs), len(d), d)
				}
			}
			sqlEscapes, gates := escapes(victim, cwd), gateEscapes(victim)
			if testing.Short() {
				// Each escape is a whole command run, some 200 of them: -short
				// tries one of each kind (the S3 lake's own risk, its cache,
				// is checked in full below); make test tries them all.
				t.Logf("-short: one escape of each kind, of %d", len(sqlEscapes)+len(gates))
				sqlEscapes, gates = sqlEscapes[:1], gates[:1]
			}
			for _, e := range sqlEscapes {
				attempt("sql escape", fmt.Sprintf("sql %q", e), "sql", e)
				attempt("sql --format arrow escape", fmt.Sprintf("sql --format arrow %q", e), "sql", "--format", "arrow", e)
			}
			for _, g := range gates {
				attempt("--quality-gate injection", fmt.Sprintf("reconcile --quality-gate %q", g), "reconcile", "--job", res.JobKey, "--quality-gate", g)
			}
			for _, out := range []string{victim, filepath.Join(filepath.Dir(victim), "x.duckdb"), filepath.Join(cache, "x.duckdb")} {
				attempt("catalog --out into the lake or cache", "catalog --out "+out, "catalog", "--out", out)
			}
			// The other commands that write a file where they are told.
			attempt("output path into the lake or cache", "manual --out "+victim, "manual", "--out", victim)
			attempt("output path into the lake or cache", "report --html "+victim, "report", "--job", res.JobKey, "--html", victim)
			attempt("output path into the lake or cache", "reconcile --out "+filepath.Dir(victim), "reconcile", "--job", res.JobKey, "--out", filepath.Dir(victim), "--max-attempts", "7")
			if got := count(); got != want {
				t.Errorf("the views changed: %s, before %s", got, want)
			}
			if code, out, errs := runCLI(append([]string{"verify"}, global...)...); code != exitOK {
				t.Errorf("verify: exit %d\n%s\n%s", code, out, errs)
			}
			if d := changed(before, state()); len(d) > 0 {
				t.Fatalf("changed %d files: %v", len(d), d)
			}
			if !remote {
				return
			}
			// A forged cached costs file (another table file of the cache,
			// which DuckDB reads without complaint) is never read: sql says
			// so on stderr and shows the lake's rows.
			ents, _ := os.ReadDir(cache)
			for _, en := range ents {
				if p := filepath.Join(cache, en.Name()); p != victim && filepath.Ext(p) == ".parquet" {
					forged, _ := os.ReadFile(p)
					os.Remove(victim) // cached files are read-only: the forger replaces it
					if err := os.WriteFile(victim, forged, 0o644); err != nil {
						t.Fatal(err)
					}
					break
				}
			}
			code, out, errs := runCLI(append([]string{"sql", "--format", "csv",
				"SELECT (SELECT count(*) FROM costs) || '/' || (SELECT sum(cost_usd) FROM costs) || '/' || (SELECT count(*) FROM attempts)"}, global...)...)
			if code != exitOK || out != want || !strings.Contains(errs, "does not match its digest") {
				t.Errorf("sql over a forged cache: exit %d, %q (want %q), stderr %s", code, out, want, errs)
			}
			if d := changed(before, state()); len(d) > 0 {
				t.Errorf("the forged cache file was not fetched again: %v", d)
			}
		})
	}
	if !t.Failed() {
		t.Logf("%d escapes tried, 0 bytes changed", tried)
	}
}

// TestSQLTableEscapesControls: `sql --format table` writes no byte a
// terminal acts on. Provider strings holding escape sequences, newlines,
// tabs, C1 codes, bidirectional overrides or invalid UTF-8 are printed
// escaped, as Go escapes them; csv and json keep the exact value.
func TestSQLTableEscapesControls(t *testing.T) {
	lk := filepath.Join(t.TempDir(), "lake")
	// sql reads an existing lake only: plan one job first.
	in := writeFile(t, "in.jsonl", []byte(requestLine("r1", "hi")+"\n"))
	if code, _, errs := runCLI("plan", "--lake", lk, "--provider", "openai", "--input", in, "--tenant", "acme", "--prompt-version", "v1", "--progress", "never"); code != exitOK {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	q := `SELECT chr(27) || '[2J' || chr(27) || ']0;pwned' || chr(7) AS "t` + "\x1b" + `itle",
		'a' || chr(10) || 'b' || chr(13) || 'c' || chr(9) || 'd' AS lines, chr(155) || '31m' AS c1, chr(8238) || 'txt' AS bidi,
		'plain é' AS ok`
	code, out, errs := runCLI("sql", "--lake", lk, "--format", "table", q)
	if code != exitOK {
		t.Fatalf("sql: exit %d: %s", code, errs)
	}
	for i, r := range out {
		if r == '\n' {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x202e || r == utf8.RuneError {
			t.Fatalf("table output holds %U at byte %d: %q", r, i, out)
		}
	}
	if lines := strings.Count(out, "\n"); lines != 2 {
		t.Errorf("table output has %d lines, want a header and one row: %q", lines, out)
	}
	for _, want := range []string{`\x1b[2J\x1b]0;pwned\a`, `a\nb\rc\td`, `\u009b31m`, `\u202etxt`, `plain é`, `t\x1bitle`} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %s: %q", want, out)
		}
	}
	code, out, _ = runCLI("sql", "--lake", lk, "--format", "json", "SELECT chr(27) || 'x' AS s")
	if code != exitOK || !strings.Contains(out, `"\u001bx"`) {
		t.Errorf("json output: exit %d %q, want the value exactly", code, out)
	}
}
