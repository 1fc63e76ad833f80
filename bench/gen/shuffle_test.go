package gen

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestShuffle: the output holds exactly the input's lines, in an order that
// the seed fixes and that differs from the input's, however many buckets.
func TestShuffle(t *testing.T) {
	var in strings.Builder
	var want []string
	for i := range 500 {
		l := fmt.Sprintf(`{"custom_id":"id-%04d"}`, i)
		want = append(want, l+"\n")
		in.WriteString(l)
		if i < 499 {
			in.WriteByte('\n') // the last line has no newline: it gets one
		}
	}
	run := func(seed uint64, bucket int64) string {
		t.Helper()
		var out bytes.Buffer
		if err := Shuffle(context.Background(), strings.NewReader(in.String()), int64(in.Len()), &out, seed, t.TempDir(), bucket); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	for _, bucket := range []int64{1 << 30, 1000, 100} {
		got := run(1, bucket)
		lines := strings.SplitAfter(got, "\n")
		lines = lines[:len(lines)-1]
		if slices.Equal(lines, want) {
			t.Errorf("bucket %d: lines in input order", bucket)
		}
		if run(1, bucket) != got {
			t.Errorf("bucket %d: seed 1 gave two orders", bucket)
		}
		if run(2, bucket) == got {
			t.Errorf("bucket %d: seeds 1 and 2 gave the same order", bucket)
		}
		slices.Sort(lines)
		if !slices.Equal(lines, want) {
			t.Errorf("bucket %d: %d lines, not a permutation of the input's %d", bucket, len(lines), len(want))
		}
	}
}
