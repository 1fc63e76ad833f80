package ingest

import (
	"fmt"
	"strings"
	"testing"
)

// The custom ids batchlake generates for retries must be ones Anthropic
// accepts (^[a-zA-Z0-9_-]{1,64}$), for any attempt a job can reach and any
// record id; and a retried line must still plan.
func TestRetryCustomIDFitsAnthropic(t *testing.T) {
	f, _ := FormatFor("anthropic")
	line := []byte(`{"custom_id":"orig.id:with/odd chars is refused at plan","params":{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}}`)
	for _, attempt := range []int{2, 3, 9, 10, 99, 1000, 1 << 20} {
		for _, rid := range []string{strings.Repeat("f", 64), strings.Repeat("0", 64), "abc"} {
			id := RetryCustomID(attempt, rid)
			if !ValidAnthropicID(id) {
				t.Fatalf("RetryCustomID(%d, %s…) = %q: Anthropic would refuse it", attempt, rid[:3], id)
			}
			out, err := f.WithCustomID(line, id)
			if err != nil {
				t.Fatal(err)
			}
			rec, ierr := f.ParseInput(out, "")
			if ierr != nil || rec.CustomID != id {
				t.Fatalf("retried line does not plan: %v (%s)", ierr, fmt.Sprint(rec.CustomID))
			}
		}
	}
}
