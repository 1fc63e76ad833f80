package baseline

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" driver
)

// Options say which files to read and how DuckDB may use the machine.
type Options struct {
	Input, Output, Errors string // the three JSONL files
	WorkDir               string // where the Parquet files go; must exist
	Threads               int    // DuckDB threads; 0 means GOMAXPROCS
	MemoryLimit           string // DuckDB memory_limit, e.g. "512MB"
	TempDir               string // DuckDB temp_directory; "" means WorkDir/duckdb-tmp
	KeepBody              bool   // also copy each request body (as JSON) into Parquet
	// Contract runs the contract floor (contract.sql) instead of the input
	// load and the three set queries: the lake tables batchlake must write,
	// made by DuckDB alone.
	Contract bool
}

// Step is the wall time of one statement.
type Step struct {
	Name    string  `json:"step"`
	Seconds float64 `json:"seconds"`
	Rows    int64   `json:"rows,omitempty"`
}

// Settings echo what DuckDB ran with.
type Settings struct {
	Threads     int    `json:"threads"`
	MemoryLimit string `json:"memory_limit"`
	TempDir     string `json:"temp_directory"`
	Version     string `json:"duckdb_version"`
	KeepBody    bool   `json:"keep_body"`
	Contract    bool   `json:"contract"`
}

// Result is the baseline's answer and how long each part took.
type Result struct {
	Expected  int64    `json:"expected"`
	Missing   int64    `json:"missing"`
	Unknown   int64    `json:"unknown"`
	Duplicate int64    `json:"duplicate"`
	Rows      Rows     `json:"rows"`
	Steps     []Step   `json:"steps"`
	Seconds   float64  `json:"seconds"`
	Settings  Settings `json:"settings"`
}

// Rows are the rows loaded from each file (invalid lines are skipped).
type Rows struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	Errors int64 `json:"errors"`
}

// inputColumns are the parts of a request line that are kept: the ids and
// the model. With KeepBody the whole request body is kept as JSON too (as a
// retry needs it), which costs DuckDB a JSON parse and copy per line.
const (
	inputColumns     = `{custom_id: 'VARCHAR', method: 'VARCHAR', url: 'VARCHAR', body: 'STRUCT(model VARCHAR)'}`
	inputColumnsBody = `{custom_id: 'VARCHAR', method: 'VARCHAR', url: 'VARCHAR', body: 'JSON'}`
	inputSelect      = `SELECT custom_id, method, url, body.model AS model FROM read_ndjson(%s, columns = ` + inputColumns + `, ignore_errors = true)`
	inputSelectBody  = `SELECT custom_id, method, url, body->>'$.model' AS model, body FROM read_ndjson(%s, columns = ` + inputColumnsBody + `, ignore_errors = true)`
)

// resultColumns are the parts of an output or error line that a reconciler
// reads: ids, status, usage, model version and the error.
const resultColumns = `{id: 'VARCHAR', custom_id: 'VARCHAR',
  response: 'STRUCT(status_code INTEGER, request_id VARCHAR, body STRUCT(model VARCHAR,
    usage STRUCT(prompt_tokens BIGINT, completion_tokens BIGINT, prompt_tokens_details STRUCT(cached_tokens BIGINT)),
    error STRUCT(message VARCHAR, type VARCHAR, code VARCHAR)))',
  error: 'STRUCT(code VARCHAR, message VARCHAR)'}`

// With ignore_errors a line that is not JSON comes back as a row of NULLs;
// the filter drops it (batchlake quarantines it instead).
const resultSelect = `SELECT custom_id, id AS line_id, %s AS channel,
  response.status_code AS status_code, response.request_id AS request_id,
  response.body.model AS model_version,
  response.body.usage.prompt_tokens AS input_tokens,
  response.body.usage.prompt_tokens_details.cached_tokens AS cached_input_tokens,
  response.body.usage.completion_tokens AS output_tokens,
  coalesce(error.code, response.body.error.code, response.body.error.type) AS error_code,
  coalesce(error.message, response.body.error.message) AS error_message
FROM read_ndjson(%s, columns = ` + resultColumns + `, ignore_errors = true)
WHERE custom_id IS NOT NULL`

// The three set queries over the Parquet copies.
var queries = []struct{ name, sql string }{
	{"missing", `SELECT count(*) FROM inp ANTI JOIN results r ON inp.custom_id = r.custom_id`},
	{"unknown", `SELECT count(DISTINCT r.custom_id) FROM results r ANTI JOIN inp ON r.custom_id = inp.custom_id WHERE r.custom_id IS NOT NULL`},
	{"duplicate", `SELECT count(*) FROM (SELECT r.custom_id FROM results r SEMI JOIN inp ON r.custom_id = inp.custom_id GROUP BY r.custom_id HAVING count(*) > 1)`},
}

// Run loads the three files into Parquet and runs the set queries.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	start := time.Now()
	if o.Threads <= 0 {
		o.Threads = runtime.GOMAXPROCS(0)
	}
	if o.MemoryLimit == "" {
		o.MemoryLimit = "512MB"
	}
	if o.TempDir == "" {
		o.TempDir = filepath.Join(o.WorkDir, "duckdb-tmp")
	}
	for _, p := range []string{o.Input, o.Output, o.Errors} {
		if _, err := os.Stat(p); err != nil {
			return res, fmt.Errorf("baseline: %w", err)
		}
	}
	if err := os.MkdirAll(o.TempDir, 0o755); err != nil {
		return res, fmt.Errorf("baseline: create temp directory: %w", err)
	}
	q := url.Values{}
	q.Set("threads", strconv.Itoa(o.Threads))
	q.Set("memory_limit", o.MemoryLimit)
	q.Set("temp_directory", o.TempDir)
	q.Set("autoinstall_known_extensions", "false")
	q.Set("autoload_known_extensions", "false")
	db, err := sql.Open("duckdb", "?"+q.Encode())
	if err != nil {
		return res, fmt.Errorf("baseline: open duckdb: %w", err)
	}
	defer db.Close()
	// One connection: an in-memory database is per connector, but keep the
	// views and settings on one session regardless.
	conn, err := db.Conn(ctx)
	if err != nil {
		return res, fmt.Errorf("baseline: open duckdb: %w", err)
	}
	defer conn.Close()
	res.Settings = Settings{Threads: o.Threads, MemoryLimit: o.MemoryLimit, TempDir: o.TempDir, KeepBody: o.KeepBody, Contract: o.Contract}
	if err := conn.QueryRowContext(ctx, `SELECT version()`).Scan(&res.Settings.Version); err != nil {
		return res, fmt.Errorf("baseline: duckdb version: %w", err)
	}

	pq := func(name string) string { return filepath.Join(o.WorkDir, name+".parquet") }
	inSelect := inputSelect
	if o.KeepBody {
		inSelect = inputSelectBody
	}
	loads := []struct {
		step, query, dest string
		rows              *int64
	}{
		{"load_input", fmt.Sprintf(inSelect, literal(o.Input)), pq("input"), &res.Rows.Input},
		{"load_output", fmt.Sprintf(resultSelect, literal("output"), literal(o.Output)), pq("output"), &res.Rows.Output},
		{"load_errors", fmt.Sprintf(resultSelect, literal("error"), literal(o.Errors)), pq("errors"), &res.Rows.Errors},
	}
	if o.Contract {
		// The contract floor reads the input itself (its expected table and
		// shard): batchlake keeps no Parquet copy of the input.
		loads = loads[1:]
	}
	for _, l := range loads {
		t0 := time.Now()
		r, err := conn.ExecContext(ctx, fmt.Sprintf(`COPY (%s) TO %s (FORMAT parquet, COMPRESSION zstd)`, l.query, literal(l.dest)))
		if err != nil {
			return res, fmt.Errorf("baseline: %s: %w", l.step, err)
		}
		if *l.rows, err = r.RowsAffected(); err != nil {
			return res, fmt.Errorf("baseline: %s: rows: %w", l.step, err)
		}
		res.Steps = append(res.Steps, Step{Name: l.step, Seconds: time.Since(t0).Seconds(), Rows: *l.rows})
	}
	if o.Contract {
		if err := contract(ctx, conn, o, pq, &res); err != nil {
			return res, err
		}
		res.Seconds = time.Since(start).Seconds()
		return res, nil
	}
	views := []string{
		fmt.Sprintf(`CREATE VIEW inp AS SELECT * FROM read_parquet(%s)`, literal(pq("input"))),
		fmt.Sprintf(`CREATE VIEW results AS SELECT * FROM read_parquet([%s, %s])`, literal(pq("output")), literal(pq("errors"))),
	}
	for _, v := range views {
		if _, err := conn.ExecContext(ctx, v); err != nil {
			return res, fmt.Errorf("baseline: create view: %w", err)
		}
	}
	res.Expected = res.Rows.Input
	counts := map[string]*int64{"missing": &res.Missing, "unknown": &res.Unknown, "duplicate": &res.Duplicate}
	for _, qy := range queries {
		t0 := time.Now()
		if err := conn.QueryRowContext(ctx, qy.sql).Scan(counts[qy.name]); err != nil {
			return res, fmt.Errorf("baseline: query %s: %w", qy.name, err)
		}
		res.Steps = append(res.Steps, Step{Name: "query_" + qy.name, Seconds: time.Since(t0).Seconds()})
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// literal quotes s as a SQL string literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

//go:embed contract.sql
var contractSQL string

// contract runs the contract floor over the input and the loaded result
// Parquet files: the raw result files archived as they are (a file copy, as
// batchlake makes of a user's file), then each step of contract.sql, the last
// of which gives the three counts.
func contract(ctx context.Context, conn *sql.Conn, o Options, pq func(string) string, res *Result) error {
	t0 := time.Now()
	for _, f := range []struct{ src, name string }{{o.Output, "raw-output.jsonl"}, {o.Errors, "raw-errors.jsonl"}} {
		if err := copyFile(f.src, filepath.Join(o.WorkDir, f.name)); err != nil {
			return fmt.Errorf("baseline: archive_raw: %w", err)
		}
	}
	res.Steps = append(res.Steps, Step{Name: "archive_raw", Seconds: time.Since(t0).Seconds()})

	paths := strings.NewReplacer(
		"{{input}}", literal(o.Input), "{{output}}", literal(pq("output")), "{{errors}}", literal(pq("errors")),
		"{{expected}}", literal(pq("expected")), "{{outcomes}}", literal(pq("outcomes")), "{{costs}}", literal(pq("costs")),
		"{{shard}}", literal(filepath.Join(o.WorkDir, "shard.jsonl")))
	steps := strings.Split(contractSQL, "\n-- step: ")[1:]
	for i, st := range steps {
		name, body, _ := strings.Cut(st, "\n")
		body = paths.Replace(body)
		t0 := time.Now()
		if i < len(steps)-1 {
			if _, err := conn.ExecContext(ctx, body); err != nil {
				return fmt.Errorf("baseline: contract step %s: %w", name, err)
			}
		} else if err := conn.QueryRowContext(ctx, body).Scan(&res.Expected, &res.Missing, &res.Unknown, &res.Duplicate); err != nil {
			return fmt.Errorf("baseline: contract step %s: %w", name, err)
		}
		res.Steps = append(res.Steps, Step{Name: "contract_" + name, Seconds: time.Since(t0).Seconds()})
	}
	// The floor loads no input Parquet; its input rows are the expected table's.
	res.Rows.Input = res.Expected
	return nil
}

// copyFile copies src to a new file dst (copy_file_range where the kernel has it).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}
