package reconcile

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	lakesql "github.com/batchlake/batchlake/sql"
)

// EngineOptions are DuckDB's resource settings.
type EngineOptions struct {
	Threads     int    // 0: all cores (a reconcile of a small job: one, see forRecords)
	MemoryLimit string // e.g. "1GB"; "" lets DuckDB choose (80% of RAM)
	TempDir     string // spill directory; "" uses a fresh temporary directory
	CacheDir    string // local cache for remote lakes; "" uses the user cache dir
	CacheBytes  int64  // cache bound; 0 means 4 GiB
	Database    string // a DuckDB database file; "" for in-memory

	// ChunkRows is about how many rows one range query of the outcomes or
	// costs table returns (0: defaultChunkRows).
	ChunkRows int64
	// SortRows is about how many rows one step sorts where the costs are
	// sorted in steps (0: defaultSortRows).
	SortRows int64
	// GroupRecords is about how many records one group of a large job's
	// buckets holds when reconcile classifies the job a group at a time
	// (0: defaultGroupRecords; sort.go).
	GroupRecords int64
	// SortInSteps sorts that table in steps from the start, instead of
	// only once one sort ran out of memory (sort.go).
	SortInSteps bool
	// CompactJobs is how many live jobs a compaction reads at a time, and
	// CompactFiles how many table files one of its statements reads at
	// most (0: defaultCompactJobs, defaultCompactFiles; compact.go).
	CompactJobs, CompactFiles int
	// OnStage, if set, is told each file of a local lake the session hashes
	// and hands to DuckDB, with its size: what a session reads.
	OnStage func(key string, size int64)
	// OnOpen, if set, is given each session once it is open, before any
	// statement runs: a caller can read the settings DuckDB runs with.
	OnOpen func(e *Engine)
}

// smallJobRecords is the job size under which a reconcile runs DuckDB on one
// thread unless Threads is set. Below it the tables are a few small files
// that one thread scans as fast as two, and a second thread only adds work:
// each thread's hash tables are allocated and cleared for every aggregate,
// however few its rows (2 MiB each at up to two threads). A 300-record
// reconcile took a fifth less cpu on one thread and no longer, a
// 50,000-record one a tenth less time; at 100,000 records the two were
// about even (docs/performance.md).
const smallJobRecords = 50_000

// forRecords returns the options for a session over about n records: one
// thread for a small job when Threads is 0 (all cores), else o unchanged.
func (o EngineOptions) forRecords(n int64) EngineOptions {
	if o.Threads == 0 && n < smallJobRecords {
		o.Threads = 1
	}
	return o
}

// Engine is one DuckDB session over a lake.
type Engine struct {
	DB    *sql.DB
	lake  *lake.Lake
	tmp   string
	stage *stager
	// emptyDir holds the empty schema files; a catalog needs them to outlive the session.
	emptyDir string
	// chunkRows, sortRows, groupRecords and sortInSteps are EngineOptions', defaults filled in.
	chunkRows, sortRows, groupRecords int64
	sortInSteps                       bool
	// groups is how many groups of buckets classify took the job in (0:
	// whole).
	groups int
	// memoryLimit is DuckDB's memory limit in bytes; 0 if parseMemoryLimit
	// does not read it (then it is never lowered).
	memoryLimit int64
	// locked: the session is read-only (lockdown.sql), its settings fixed,
	// so its statements are not profiled (profileNext).
	locked bool
}

// OpenEngine starts an in-memory DuckDB session with the given settings and
// extension auto-install/auto-load off (nothing is fetched at run time).
func OpenEngine(l *lake.Lake, o EngineOptions) (*Engine, error) {
	tmp, err := os.MkdirTemp(o.TempDir, "batchlake-duckdb-*")
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	threads := o.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	// Settings go in as URL-encoded values, which the driver decodes one by
	// one: a path with '&', '+', '%', spaces or any other byte arrives
	// whole. The database path would be cut at its first '?', so a database
	// file is attached by a quoted literal instead of named in the DSN.
	cfg := url.Values{
		"threads":                      {strconv.Itoa(threads)},
		"temp_directory":               {filepath.Join(tmp, "spill")},
		"autoinstall_known_extensions": {"false"},
		"autoload_known_extensions":    {"false"},
	}
	if o.MemoryLimit != "" {
		cfg.Set("memory_limit", o.MemoryLimit)
	}
	c, err := duckdb.NewConnector("?"+cfg.Encode(), nil)
	if err != nil {
		os.RemoveAll(tmp)
		if o.MemoryLimit != "" && strings.Contains(err.Error(), "memory_limit") {
			// A setting the user gave (--memory-limit): fixed by a person,
			// not by running the step again.
			return nil, &errkind.UsageError{Msg: fmt.Sprintf("memory limit %q: not a size DuckDB reads (for example 384MB or 1.5GiB): %v", o.MemoryLimit, err)}
		}
		return nil, fmt.Errorf("engine: open duckdb: %w", err)
	}
	db := sql.OpenDB(c)
	// Temp views and tables live in one connection.
	db.SetMaxOpenConns(1)
	if err := execFile(context.Background(), db, "parquet_cache.sql", nil); err != nil {
		db.Close()
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("engine: %w", err)
	}
	if o.Database != "" {
		if err := execFile(context.Background(), db, "attach_database.sql", map[string]string{"Path": quote(o.Database)}); err != nil {
			db.Close()
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("engine: %w", err)
		}
	}
	st, err := newStager(l, o.CacheDir, o.CacheBytes)
	if err != nil {
		db.Close()
		os.RemoveAll(tmp)
		return nil, err
	}
	st.onStage = o.OnStage
	e := &Engine{DB: db, lake: l, tmp: tmp, stage: st, chunkRows: o.ChunkRows, sortRows: o.SortRows, sortInSteps: o.SortInSteps}
	if e.chunkRows <= 0 {
		e.chunkRows = defaultChunkRows
	}
	if e.groupRecords = o.GroupRecords; e.groupRecords <= 0 {
		e.groupRecords = defaultGroupRecords
	}
	if e.sortRows <= 0 {
		e.sortRows = defaultSortRows
	}
	if n, ok := parseMemoryLimit(o.MemoryLimit); ok {
		e.memoryLimit = n
	}
	if o.OnOpen != nil {
		o.OnOpen(e)
	}
	return e, nil
}

// Lake is the lake the session reads.
func (e *Engine) Lake() *lake.Lake { return e.lake }

// Close ends the session and removes its temporary files.
func (e *Engine) Close() error {
	err := e.DB.Close()
	os.RemoveAll(e.tmp)
	return err
}

// rawConn hands fn the DuckDB driver connection of the session (its one
// connection, which holds the temp views and tables), for what database/sql
// does not offer: the appender, the Arrow interface, a statement's type.
func (e *Engine) rawConn(ctx context.Context, fn func(driver.Conn) error) error {
	conn, err := e.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		c, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("engine: the connection is a %T, not DuckDB's driver connection", dc)
		}
		return fn(c)
	})
}

// sqlTiming, when BATCHLAKE_SQL_TIMING is set, logs each statement's wall
// time to stderr (timingOut, which the tests replace), and the process's CPU time and minor page faults since the
// previous line and its peak resident memory so far (on a shared machine the
// wall time says more about the neighbours, and on a virtual machine that
// gives freed memory back to its host a statement's first touch of fresh
// memory is dear: docs/performance.md); for profiling, off by default.
var (
	sqlTiming            = os.Getenv("BATCHLAKE_SQL_TIMING") != ""
	timingOut  io.Writer = os.Stderr
	lastCPU    float64
	lastFaults int64
	lastCPUSet bool
)

func logTiming(name, stmt string, start time.Time) {
	if !sqlTiming {
		return
	}
	now, peak, faults := processUsage()
	if !lastCPUSet {
		lastCPU, lastFaults, lastCPUSet = now, faults, true
	}
	cpu, faulted := now-lastCPU, faults-lastFaults
	lastCPU, lastFaults = now, faults
	first := strings.TrimSpace(stmt)
	for _, l := range strings.Split(first, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
			first = l
			break
		}
	}
	if len(first) > 70 {
		first = first[:70]
	}
	fmt.Fprintf(timingOut, "sql-timing %-22s %8.3fs %7.2f cpu s %7d faults %5d MiB peak  %s\n", name, time.Since(start).Seconds(), cpu, faulted, peak, first)
}

// sqlProfileDir, when BATCHLAKE_SQL_PROFILE names a directory, receives
// DuckDB's profile of each statement, one file per statement numbered in
// run order (for profiling; off by default).
var (
	sqlProfileDir = os.Getenv("BATCHLAKE_SQL_PROFILE")
	sqlProfileSeq int
)

// profileNext asks DuckDB to profile the session's next statement into
// sqlProfileDir, unless the session is read-only (lock): its settings cannot
// change, and DuckDB may write into nothing but its spill folder.
func (e *Engine) profileNext(ctx context.Context, name string) error {
	if sqlProfileDir == "" || e.locked {
		return nil
	}
	sqlProfileSeq++
	p := filepath.Join(sqlProfileDir, fmt.Sprintf("%04d-%s.txt", sqlProfileSeq, strings.TrimSuffix(name, ".sql")))
	return execFile(ctx, e.DB, "profile.sql", map[string]string{"Path": quote(p)})
}

// lock makes the session read-only (lockdown.sql): it may read the files
// and write into the folders given, nothing else, and its settings are
// fixed. Profiling (BATCHLAKE_SQL_PROFILE) is turned off first, for a
// profile's file is written after its statement, where the lockdown would
// refuse it; a locked session's statements are not profiled.
func (e *Engine) lock(ctx context.Context, files, dirs []string) error {
	if sqlProfileDir != "" {
		if err := execFile(ctx, e.DB, "profile_off.sql", nil); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "batchlake: BATCHLAKE_SQL_PROFILE: the statements of a read-only session (sql, cost, report, manual) are not profiled")
	}
	e.locked = true
	return execFile(ctx, e.DB, "lockdown.sql", map[string]string{"Paths": sqlList(files), "Dirs": sqlList(dirs)})
}

// Exec runs statements in order, naming the file on error.
func (e *Engine) Exec(ctx context.Context, name string, stmts []string) error {
	for _, s := range stmts {
		if err := e.profileNext(ctx, name); err != nil {
			return err
		}
		start := time.Now()
		if _, err := e.DB.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("sql %s: %w", name, err)
		}
		logTiming(name, s, start)
	}
	return nil
}

// ExecFile renders and runs one embedded .sql file.
func (e *Engine) ExecFile(ctx context.Context, name string, data any) error {
	stmts, err := lakesql.Render(name, data)
	if err != nil {
		return err
	}
	return e.Exec(ctx, name, stmts)
}

// execFile renders and runs one embedded .sql file on db.
func execFile(ctx context.Context, db *sql.DB, name string, data any) error {
	stmts, err := lakesql.Render(name, data)
	if err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("sql %s: %w", name, err)
		}
	}
	return nil
}

// QueryFile renders one embedded .sql file holding a single query and runs it.
func (e *Engine) QueryFile(ctx context.Context, name string, data any) (*sql.Rows, error) {
	stmts, err := lakesql.Render(name, data)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		return nil, fmt.Errorf("sql %s: want one statement, have %d", name, len(stmts))
	}
	if err := e.profileNext(ctx, name); err != nil {
		return nil, err
	}
	start := time.Now()
	rows, err := e.DB.QueryContext(ctx, stmts[0])
	if err != nil {
		return nil, fmt.Errorf("sql %s: %w", name, err)
	}
	// DuckDB has run the query by now (its result is materialised), so this
	// is the query's time, not the caller's reading of the rows.
	logTiming(name, stmts[0], start)
	return rows, nil
}

// count runs one embedded query returning a single count.
func (e *Engine) count(ctx context.Context, name string, data any) (int64, error) {
	rows, err := e.QueryFile(ctx, name, data)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, err
		}
	}
	return n, rows.Err()
}

// LocalFiles stages lake keys of table files for DuckDB and returns local
// paths, each verified against the digest in its name; the list starts with
// an empty file of the table's schema so that an empty list still has columns.
func LocalFiles[T any](ctx context.Context, e *Engine, keys []string) ([]string, error) {
	dir := e.emptyDir
	if dir == "" {
		dir = e.tmp
	}
	empty, err := emptyFile[T](dir)
	if err != nil {
		return nil, err
	}
	paths, err := e.stage.localAll(ctx, keys)
	if err != nil {
		return nil, err
	}
	return append([]string{empty}, paths...), nil
}

// emptyFile writes (once per session) an empty Parquet file of T's schema.
func emptyFile[T any](dir string) (string, error) {
	var zero T
	name := strings.ToLower(strings.TrimPrefix(fmt.Sprintf("%T", zero), "lake.")) + "-empty.parquet"
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	f, err := os.Create(p)
	if err != nil {
		return "", err
	}
	w := parquet.NewGenericWriter[T](f)
	if err := w.Close(); err != nil {
		f.Close()
		return "", err
	}
	return p, f.Close()
}

func quote(s string) string { return lakesql.Quote(s) }
