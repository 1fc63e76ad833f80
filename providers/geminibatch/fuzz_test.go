package geminibatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzToBatch: a batch operation from the API (outside input) never panics
// the mapping, and what it maps is consistent: a known status word, an
// output id of a kind Download understands, non-negative counts.
func FuzzToBatch(f *testing.F) {
	files, _ := filepath.Glob("../../ingest/testdata/examples/gemini_batch_*.json")
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"name":"batches/x","done":true,"error":{"code":13},"metadata":{"state":"JOB_STATE_RUNNING","batchStats":{"requestCount":"-3","failedRequestCount":7}}}`))
	f.Add([]byte(`{"name":"batches/y","metadata":{"state":"BATCH_STATE_SUCCEEDED","batchStats":{"requestCount":"2"}}}`))
	f.Fuzz(func(t *testing.T, op []byte) {
		b, err := toBatch(op)
		if err != nil {
			return
		}
		switch {
		case strings.HasPrefix(b.Status, "unknown:"):
		case b.Status == "pending", b.Status == "in_progress", b.Status == "cancelling", b.Status == "finalizing",
			b.Status == "completed", b.Status == "failed", b.Status == "cancelled", b.Status == "expired":
		default:
			t.Fatalf("status %q", b.Status)
		}
		if b.Total < 0 || b.Completed < 0 || b.Failed < 0 {
			t.Fatalf("negative counts %d/%d/%d", b.Completed, b.Failed, b.Total)
		}
		if b.Status == "completed" && b.Total > 0 && b.OutputFileID == "" {
			t.Fatalf("completed with %d requests and no output: collect would find nothing", b.Total)
		}
	})
}
