package reconcile

import (
	"testing"

	"github.com/batchlake/batchlake/internal/testrun"
)

// TestDuckDBAllocatorAsTheBinary: this package's tests run DuckDB with the
// allocator settings of the batchlake binary (testrun imports duckalloc).
func TestDuckDBAllocatorAsTheBinary(t *testing.T) {
	testrun.CheckAllocator(t)
}
