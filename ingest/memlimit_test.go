package ingest

import (
	"context"
	"fmt"
	"testing"
)

// TestPlanAsksForMemoryLimit: plan asks its caller for a soft limit of what
// one run of records needs (192 MiB and up), and for a run's worth of bytes
// more once it carries out-of-order lines; it never sets the process's
// limit itself (cmd does). An input out of order is read twice (the first
// read writes the expected rows early, and stops at the first record out of
// order), each read asking.
func TestPlanAsksForMemoryLimit(t *testing.T) {
	cases := []struct {
		name  string
		order func(i, n int) int
		want  int // calls
	}{
		{"sorted input: one ask", func(i, n int) int { return i }, 1},
		{"out of order: read again, raised once", func(i, n int) int { return n - 1 - i }, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const n = 20
			var lines []string
			for i := range n {
				lines = append(lines, openaiLine(fmt.Sprintf("r%02d", c.order(i, n)), "gpt-4o-mini", "x"))
			}
			o := opts(writeFile(t, "in.jsonl", lines, "\n"))
			var asks []int64
			o.MemoryLimit = func(b int64) { asks = append(asks, b) }
			if _, err := Plan(context.Background(), newLake(t), o); err != nil {
				t.Fatal(err)
			}
			if len(asks) != c.want {
				t.Fatalf("plan asked for limits %v, want %d asks", asks, c.want)
			}
			if asks[0] < 192<<20 {
				t.Errorf("first ask %d, want at least 192 MiB", asks[0])
			}
			if k := len(asks) - 1; c.want > 1 && (asks[k] != asks[k-1]+int64(defaultRunBytes) || asks[k-1] != asks[0]) {
				t.Errorf("asked for %v: want the first ask again, then raised by a run's bytes (%d)", asks, defaultRunBytes)
			}
		})
	}
}
