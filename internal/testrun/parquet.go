package testrun

import (
	"os"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// OpenParquet opens the Parquet file at path for a test's reads, the file
// and parquet-go's view of it; it is closed when the test ends.
func OpenParquet(t testing.TB, path string) (*os.File, *parquet.File) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return f, pf
}
