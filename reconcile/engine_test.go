package reconcile

import (
	"context"
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
