package ingest

import (
	"testing"
)

// The hot paths' allocations a line, at most. Each allocation costs more
// than its size on a 1M-record plan or ingest (the collector's work, and a
// first touch of fresh pages), so one more is a regression to look at, not
// noise: raise a limit only with a reason.
func TestParseAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	in, out, errs := generated(t, 64)
	for _, tc := range []struct {
		name  string
		lines [][]byte
		parse func([]byte)
		max   float64
	}{
		// None: the custom_id's string (the business key is the same string)
		// is carved from the memo's block of strings.
		{"openai input", in, func(l []byte) { openaiFormat{}.ParseInput(l, "") }, 0},
		// The decoded body's parts that outlive the line (usage details, the
		// message); the custom_id, the request id and the answer are carved
		// from the memo's block of strings (jmemo.str), a block now and then.
		{"openai output", out, func(l []byte) { openaiFormat{}.ParseResult(l, ChannelOutput) }, 1},
		// Error lines are few (about one in a hundred): their code is read
		// by encoding/json, which tries a string first.
		{"openai error", errs, func(l []byte) { openaiFormat{}.ParseResult(l, ChannelError) }, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Many runs: a collection during them empties the pools the
			// parsers take from, and its few allocations must not count.
			i := 0
			got := testing.AllocsPerRun(1000, func() {
				tc.parse(tc.lines[i%len(tc.lines)])
				i++
			})
			if got > tc.max {
				t.Errorf("%.2f allocations a line, want at most %.0f", got, tc.max)
			}
		})
	}
}
