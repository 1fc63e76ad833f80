package reconcile

import (
	"slices"
	"strings"
	"testing"
)

// TestParseRules: a --retryable list as users write it. A list of nothing
// but commas and spaces is refused (it would retry no failure); a status
// class takes either case.
func TestParseRules(t *testing.T) {
	for _, c := range []struct {
		in       []string
		statuses []int // first and last, and how many
		n        int
		codes    []string
		err      string
	}{
		{in: []string{"429", "5xx", "server_error"}, statuses: []int{429, 599}, n: 101, codes: []string{"server_error"}},
		{in: []string{"5XX"}, statuses: []int{500, 599}, n: 100},
		{in: []string{" 408 ", "", "timeout"}, statuses: []int{408, 408}, n: 1, codes: []string{"timeout"}},
		{in: []string{"", ""}, err: `--retryable ",": names no HTTP status or error code`},
		{in: []string{" "}, err: `--retryable " ": names no HTTP status or error code`},
		{in: []string{"99"}, err: `--retryable: "99" is not an HTTP status`},
	} {
		r, err := ParseRules(c.in)
		if c.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q…", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if len(r.Statuses) != c.n || r.Statuses[0] != c.statuses[0] || r.Statuses[len(r.Statuses)-1] != c.statuses[1] || !slices.Equal(r.Codes, c.codes) {
			t.Errorf("%q: statuses %v codes %v", c.in, r.Statuses, r.Codes)
		}
	}
}
