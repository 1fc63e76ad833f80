package bedrockbatch_test

import (
	"os"
	"testing"

	"github.com/batchlake/batchlake/internal/testrun"
)

// TestMain points the AWS SDK at nothing real once for the whole binary, so
// that tests can run in parallel (t.Setenv refuses parallel tests).
func TestMain(m *testing.M) {
	testrun.SetOfflineAWS()
	os.Exit(m.Run())
}
