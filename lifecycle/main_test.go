package lifecycle_test

import (
	"os"
	"testing"

	"github.com/batchlake/batchlake/internal/testrun"
)

// TestMain sets the process-wide test environment once, so that the tests
// that need it can run in parallel (t.Setenv refuses parallel tests):
//
//   - the AWS SDK points at nothing real (static test credentials, no
//     profile, no instance metadata);
//   - unless -parallel is given, up to 8 parallel tests run at once instead
//     of GOMAXPROCS: they mostly wait (SDK backoff, retry-after, polls), not
//     compute, so on a 2-core machine the default would queue the waits.
func TestMain(m *testing.M) {
	testrun.SetOfflineAWS()
	testrun.DefaultParallel(8)
	os.Exit(m.Run())
}
