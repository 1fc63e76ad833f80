package reconcile

import "testing"

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
