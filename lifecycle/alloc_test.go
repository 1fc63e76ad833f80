package lifecycle_test

import (
	"testing"

	"github.com/batchlake/batchlake/internal/testrun"
)

// TestDuckDBAllocatorAsTheBinary: the flows' reconciles run DuckDB with the
// allocator settings of the batchlake binary (testrun imports duckalloc).
func TestDuckDBAllocatorAsTheBinary(t *testing.T) {
	testrun.CheckAllocator(t)
}
