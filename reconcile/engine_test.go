package reconcile

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestEngineCachesParquetFooters: every session keeps the Parquet footers it
// has read, so that the statements of a reconcile over a job's many table
// files do not read and parse each file's footer again.
func TestEngineCachesParquetFooters(t *testing.T) {
	l, dir := testLake(t)
	e, err := OpenEngine(l, EngineOptions{TempDir: dir, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var on bool
	if err := e.DB.QueryRow("SELECT current_setting('parquet_metadata_cache')").Scan(&on); err != nil {
		t.Fatal(err)
	}
	if !on {
		t.Error("parquet_metadata_cache is off")
	}
}

// TestManyFilesTurnCachesOff: a session over manyFiles table files or more
// runs without DuckDB's footer and file-byte caches (many_files.sql), one
// over fewer keeps them, and both give the same answers.
func TestManyFilesTurnCachesOff(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	planJobs(t, ctx, l, dir, 0, 3, 1)
	defer func(n int) { manyFiles = n }(manyFiles)
	// session reads the lake's views with the caches turned off from
	// threshold files, and returns how many files they read.
	session := func(threshold int) (footers, bytes bool, records, files int) {
		t.Helper()
		manyFiles = threshold
		e, err := OpenEngine(l, EngineOptions{Threads: 1, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		read, err := e.Views(ctx, Scope{}, "TEMP VIEW", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		err = e.DB.QueryRowContext(ctx, "SELECT current_setting('parquet_metadata_cache'), current_setting('enable_external_file_cache'), (SELECT count(*) FROM expected)").Scan(&footers, &bytes, &records)
		if err != nil {
			t.Fatal(err)
		}
		return footers, bytes, records, len(read)
	}
	footers, bytes, records, n := session(1 << 30)
	if !footers || !bytes || records != 3 || n < 3 {
		t.Fatalf("a session of %d files: footer cache %v, file cache %v, %d expected records; want both caches on, 3 records, 3 files or more", n, footers, bytes, records)
	}
	for _, c := range []struct {
		threshold int
		caches    bool
	}{{n + 1, true}, {n, false}, {1, false}} {
		footers, bytes, records, _ := session(c.threshold)
		if footers != c.caches || bytes != c.caches || records != 3 {
			t.Errorf("a session of %d files, caches off from %d: footer cache %v, file cache %v, %d expected records; want caches %v and 3 records",
				n, c.threshold, footers, bytes, records, c.caches)
		}
	}
}

// TestSQLTimingLine: with BATCHLAKE_SQL_TIMING each statement's line names
// its file and gives its wall and cpu time, the minor page faults since the
// line before, the process's peak resident memory and the statement's first
// line that is not a comment.
func TestSQLTimingLine(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	e, err := OpenEngine(l, EngineOptions{TempDir: dir, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	defer func(on bool, w io.Writer) { sqlTiming, timingOut = on, w }(sqlTiming, timingOut)
	var buf bytes.Buffer
	sqlTiming, timingOut = true, &buf
	// The first line starts the counts; the second statement fills 64 MB of
	// fresh memory, the third next to none.
	if err := e.Exec(ctx, "timed.sql", []string{"SELECT 1",
		"-- a table of 4M rows\nCREATE TEMP TABLE t AS SELECT range AS k, range * 2 AS v FROM range(4000000)",
		"SELECT 2"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d timing lines, want 3:\n%s", len(lines), buf.String())
	}
	re := regexp.MustCompile(`^sql-timing (\S+) +([0-9.]+)s +([0-9.]+) cpu s +([0-9]+) faults +([0-9]+) MiB peak  (.*)$`)
	var faults, peak [3]int64
	for i, line := range lines {
		m := re.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("timing line %q is not of the form sql-timing NAME WALLs CPU cpu s FAULTS faults PEAK MiB peak  STATEMENT", line)
		}
		if want := []string{"SELECT 1", "CREATE TEMP TABLE t AS SELECT range AS k, range * 2 AS v FROM range(40", "SELECT 2"}[i]; m[1] != "timed.sql" || m[6] != want {
			t.Errorf("timing line %d names %q and the statement %q, want timed.sql and %q", i, m[1], m[6], want)
		}
		faults[i], _ = strconv.ParseInt(m[4], 10, 64)
		peak[i], _ = strconv.ParseInt(m[5], 10, 64)
	}
	if runtime.GOOS != "linux" {
		return
	}
	if faults[1] <= faults[2] || peak[1] < 64 || peak[2] < peak[1] {
		t.Errorf("faults %v and peaks %v MiB for statements of which the second filled 64 MB: want more faults by it than by the third, and a peak of 64 MiB or more from it on", faults, peak)
	}
	// The peak is in MiB: the kernel's high-water mark of the process, read
	// after the last line, is that or a little more.
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+([0-9]+) kB$`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/self/status:\n%s", status)
	}
	hwmKiB, _ := strconv.ParseInt(string(m[1]), 10, 64)
	if hwm := hwmKiB >> 10; peak[2] > hwm || peak[2] < hwm-32 {
		t.Errorf("the last line's peak is %d, the process's high-water mark %d MiB after it: want the peak in MiB, at most 32 below it", peak[2], hwm)
	}
}
