package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

func (g *globals) engineOptions() reconcile.EngineOptions {
	return reconcile.EngineOptions{Threads: g.threads, MemoryLimit: g.memoryLimit(queryMemoryLimit), TempDir: g.tmpDir, CacheDir: g.cacheDir}
}

// session opens the lake and a read-only DuckDB session over its views,
// limited to one tenant when scope.Tenant is set, and to the views a query
// or a command reads (scope.Query, scope.Views).
func (g *globals) session(ctx context.Context, scope reconcile.Scope) (*reconcile.Engine, func(), error) {
	if tenant := scope.Tenant; tenant != "" {
		if err := lake.ValidTenant(tenant); err != nil {
			return nil, nil, &errkind.UsageError{Msg: "--tenant: " + err.Error()}
		}
	}
	l, err := g.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	e, err := reconcile.OpenSession(ctx, l, g.engineOptions(), scope)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return e, func() { e.Close(); l.Close() }, nil
}

func sqlCmd(ctx context.Context, g *globals) *cobra.Command {
	var format, tenant, file string
	c := &cobra.Command{
		Use:   "sql [--format table|csv|json|arrow] [\"SELECT …\" | - | --file q.sql]",
		Short: "Run read-only SQL over the lake's views in embedded DuckDB",
		Long: `sql runs one SELECT over the views manifests, shards, expected, attempts,
quarantine, outcomes, records, costs, ledger, accepted, manual, ingests and
batches; only the views the query reads are built, and only their files are
hashed (or fetched from a remote lake). The session is read-only by construction: DuckDB's parser must find exactly one query before anything runs
(no COPY, ATTACH, SET, PRAGMA, CALL, INSTALL, LOAD or EXPLAIN; no table function
but range, generate_series and unnest), and DuckDB may read nothing but the
lake files behind the views.
The query is the argument, or read from --file, or from standard input when
the argument is - or absent and standard input is not a terminal
(batchlake sql < q.sql, or a here-document).
--format arrow streams an Arrow IPC stream on stdout for pyarrow, polars or DuckDB.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat("sql", format, "table", "csv", "json", "arrow"); err != nil {
				return err
			}
			q, err := g.sqlText(args, file)
			if err != nil {
				return err
			}
			e, done, err := g.session(ctx, reconcile.Scope{Tenant: tenant, Query: q})
			if err != nil {
				return err
			}
			defer done()
			if format == "arrow" {
				return e.QueryArrow(ctx, q, g.stdout)
			}
			rows, err := e.Query(ctx, q)
			if err != nil {
				return err
			}
			defer rows.Close()
			return writeRows(g.stdout, rows, format)
		},
	}
	c.Flags().StringVar(&format, "format", "table", "output: table, csv, json or arrow (Arrow IPC stream)")
	c.Flags().StringVar(&tenant, "tenant", "", "only this tenant's data")
	c.Flags().StringVar(&file, "file", "", "read the query from this file instead of the argument")
	return c
}

// maxQueryBytes bounds a query read from a file or standard input: a query,
// not a data file.
const maxQueryBytes = 1 << 20

// sqlText is the query of `sql`: the argument, --file, or standard input
// (an argument of -, or none with standard input not a terminal).
func (g *globals) sqlText(args []string, file string) (string, error) {
	var (
		r    io.Reader
		name string
	)
	switch {
	case file != "" && len(args) > 0:
		return "", &errkind.UsageError{Msg: "sql: give the query as an argument or with --file, not both"}
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return "", &errkind.UsageError{Msg: fmt.Sprintf("sql --file: %v", err)}
		}
		defer f.Close()
		r, name = f, file
	case len(args) == 1 && args[0] != "-":
		return args[0], nil
	case len(args) == 0 && (g.stdin == nil || isTerminal(g.stdin)):
		return "", &errkind.UsageError{Msg: "sql: no query: give one as an argument, with --file q.sql, or on standard input (batchlake sql - < q.sql)"}
	default:
		if g.stdin == nil {
			return "", &errkind.UsageError{Msg: "sql -: no standard input"}
		}
		r, name = g.stdin, "standard input"
	}
	b, err := io.ReadAll(io.LimitReader(r, maxQueryBytes+1))
	if err != nil {
		return "", fmt.Errorf("sql: read %s: %w", name, err)
	}
	if len(b) > maxQueryBytes {
		return "", &errkind.UsageError{Msg: fmt.Sprintf("sql: %s holds more than %d bytes: a query, not data, is wanted", name, maxQueryBytes)}
	}
	if !utf8.Valid(b) {
		return "", &errkind.UsageError{Msg: fmt.Sprintf("sql: %s is not UTF-8 text", name)}
	}
	q := strings.TrimSpace(strings.TrimPrefix(string(b), "\ufeff"))
	if q == "" {
		return "", &errkind.UsageError{Msg: fmt.Sprintf("sql: %s holds no query", name)}
	}
	return q, nil
}

// isTerminal says whether r is a terminal (a person typing, not a pipe or file).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// checkFormat refuses an output format the command does not write, before
// it opens a session or runs a query.
func checkFormat(cmd, format string, formats ...string) error {
	if slices.Contains(formats, format) {
		return nil
	}
	want := strings.Join(formats[:len(formats)-1], ", ") + " or " + formats[len(formats)-1]
	return &errkind.UsageError{Msg: fmt.Sprintf("%s --format %q: want %s", cmd, format, want)}
}

// writeRows renders a result set as an aligned table, CSV or JSON.
func writeRows(w io.Writer, rows *sql.Rows, format string) error {
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var (
		tw  *tabwriter.Writer
		cw  *csv.Writer
		out []json.RawMessage
	)
	switch format {
	case "table":
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		hs := make([]string, len(cols))
		for i, c := range cols {
			hs[i] = printable(c)
		}
		fmt.Fprintln(tw, strings.Join(hs, "\t"))
	case "csv":
		cw = csv.NewWriter(w)
		cw.Write(cols)
	case "json":
		out = []json.RawMessage{}
	default:
		return &errkind.UsageError{Msg: fmt.Sprintf("--format %q: want table, csv or json", format)}
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		switch format {
		case "table", "csv":
			s := make([]string, len(vals))
			for i, v := range vals {
				s[i] = cell(v)
				if tw != nil {
					s[i] = printable(s[i])
				}
			}
			if tw != nil {
				fmt.Fprintln(tw, strings.Join(s, "\t"))
			} else {
				cw.Write(s)
			}
		case "json":
			var b strings.Builder
			b.WriteByte('{')
			for i, v := range vals {
				if i > 0 {
					b.WriteByte(',')
				}
				k, _ := json.Marshal(cols[i])
				b.Write(k)
				b.WriteByte(':')
				b.Write(jsonValue(v))
			}
			b.WriteByte('}')
			out = append(out, json.RawMessage(b.String()))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sql: %w", err)
	}
	switch {
	case tw != nil:
		return tw.Flush()
	case cw != nil:
		cw.Flush()
		return cw.Error()
	default:
		printJSON(w, out)
		return nil
	}
}

// printable escapes what a terminal would act on or an aligned table would
// break on: control characters (escape sequences, tabs, newlines, C1 codes),
// bidirectional overrides and invalid UTF-8, written as Go writes them
// (\x1b, \n, \u202e). The strings come from providers and are not to be
// trusted with a terminal.
func printable(s string) string {
	bad := func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }
	if utf8.ValidString(s) && !strings.ContainsFunc(s, bad) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case bad(r):
			q := strconv.QuoteRune(r) // '\x1b', '\n', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}

func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case duckdb.Decimal:
		return reconcile.FormatDecimal(x)
	case *big.Int:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

func jsonValue(v any) []byte {
	switch x := v.(type) {
	case duckdb.Decimal:
		return []byte(reconcile.FormatDecimal(x))
	case []byte:
		b, _ := json.Marshal(base64.StdEncoding.EncodeToString(x))
		return b
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(fmt.Sprint(v))
	}
	return b
}
