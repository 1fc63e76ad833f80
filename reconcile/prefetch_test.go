package reconcile

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// TestReadAheadBudget: a shard's lines read ahead take their bytes from the
// budget the shards read at once share; a shard whose lines do not fit in
// what is left is not taken, and gives back what it had taken.
func TestReadAheadBudget(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	g := generate(rand.New(rand.NewPCG(5, 8)), 60, 0, 0)
	m := planAndIngest(t, l, dir, g, 25)
	s := m.Shards[0]
	b, err := os.ReadFile(filepath.Join(dir, "lake", filepath.FromSlash(lake.ObjectKey(s.Object))))
	if err != nil {
		t.Fatal(err)
	}
	// Every other line of the shard.
	var offs []int64
	var want [][]byte
	var total int64
	for off, i := int64(0), 0; off < int64(len(b)); i++ {
		end := off + int64(bytes.IndexByte(b[off:], '\n'))
		if i%2 == 0 {
			offs, want = append(offs, off), append(want, b[off:end])
			total += end - off
		}
		off = end + 1
	}
	if len(offs) < 3 {
		t.Fatalf("shard %s has %d lines to read: the test needs more", s.ShardID, len(offs))
	}
	var budget atomic.Int64
	budget.Store(total - 1)
	if pf, ok := readAhead(ctx, l, s, offs, &budget); ok || pf != nil {
		t.Fatalf("%d bytes of lines read ahead in a budget of %d", total, total-1)
	}
	if got := budget.Load(); got != total-1 {
		t.Fatalf("budget %d after a shard that did not fit, want %d back", got, total-1)
	}
	budget.Store(total + 5)
	pf, ok := readAhead(ctx, l, s, offs, &budget)
	if !ok {
		t.Fatalf("%d bytes of lines not read ahead in a budget of %d", total, total+5)
	}
	if got := budget.Load(); got != 5 {
		t.Errorf("budget %d after the shard's %d bytes, want 5", got, total)
	}
	for i, off := range offs {
		if line, ok := pf.lineAt(off); !ok || !bytes.Equal(line, want[i]) {
			t.Errorf("line at %d: %q (%v), want %q", off, line, ok, want[i])
		}
	}
}
