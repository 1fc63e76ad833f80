package reconcile

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/ingest"
)

// retryable mirrors the classification in sql/lines.sql for a failed
// line: a permanent error_code first, then a retry status or a retry
// error_code / error_type.
func retryable(r Rules, status int, code string) bool {
	if slices.Contains(r.Permanent, code) {
		return false
	}
	return slices.Contains(r.Statuses, status) || slices.Contains(r.Codes, code)
}

// TestTaxonomyMatchesDefaultRules: every row of every provider's error
// taxonomy (ingest.ErrorTaxonomy, shown in docs/errors.md) is classified by
// the default rules as the taxonomy says.
func TestTaxonomyMatchesDefaultRules(t *testing.T) {
	rules, err := ParseRules(nil)
	if err != nil {
		t.Fatal(err)
	}
	for provider, rows := range ingest.ErrorTaxonomy {
		for _, row := range rows {
			statuses := []int{0}
			switch {
			case strings.HasSuffix(row.Status, "xx"):
				base := int(row.Status[0]-'0') * 100
				statuses = []int{base, base + 2, base + 3, base + 99}
			case row.Status != "":
				n, err := strconv.Atoi(row.Status)
				if err != nil {
					t.Fatalf("%s: status %q", provider, row.Status)
				}
				statuses = []int{n}
			}
			for _, st := range statuses {
				if got := retryable(rules, st, row.Code); got != row.Retryable {
					t.Errorf("%s: status %d code %q: default rules say retryable=%v, the taxonomy %v", provider, st, row.Code, got, row.Retryable)
				}
			}
		}
	}
}
