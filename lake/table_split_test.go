package lake

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestSplitTableWriter: a split writer puts each row in the file of its
// custom_id's bucket (IDPartition of SplitBuckets), in the order written,
// stores no file for a bucket without rows, returns the buckets in
// increasing order, and writes the same bytes (the same keys) for the same
// rows, whether its buckets are encoded on one core or on several.
func TestSplitTableWriter(t *testing.T) {
	ctx := context.Background()
	l := openMem(t)
	job := Sum([]byte("split job"))
	// 20,000 rows over the 16 buckets (several batches each), but none in
	// bucket 3.
	var rows []ExpectedRow
	for i := 0; len(rows) < 20000; i++ {
		id := fmt.Sprintf("rec-%06d", i)
		if IDPartition(id, SplitBuckets) == 3 {
			continue
		}
		rows = append(rows, ExpectedRow{JobKey: job.Hex(), Tenant: "t", CustomID: id, ShardLine: int64(len(rows) + 1)})
	}
	write := func() ([]string, []int) {
		w := NewSplitTableWriter(l, t.TempDir(), "expected", "t", job, SplitBuckets, func(r *ExpectedRow) string { return r.CustomID })
		for i := 0; i < len(rows); i += 700 {
			if err := w.Write(rows[i:min(i+700, len(rows))]...); err != nil {
				t.Fatal(err)
			}
		}
		if w.Rows() != int64(len(rows)) {
			t.Fatalf("Rows() = %d, want %d", w.Rows(), len(rows))
		}
		keys, buckets, err := w.CommitSplit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return keys, buckets
	}
	keys, buckets := write()
	want := []int{0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	if !slices.Equal(buckets, want) || len(keys) != len(want) {
		t.Fatalf("buckets %v (%d keys), want %v", buckets, len(keys), want)
	}
	var total int
	for i, k := range keys {
		d, ok := ParseObjectKey(k)
		if !ok {
			t.Fatalf("key %s is not content-addressed", k)
		}
		b, err := l.GetVerified(ctx, k, d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parquet.Read[ExpectedRow](bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		last := int64(0)
		for _, r := range got {
			if p := IDPartition(r.CustomID, SplitBuckets); p != buckets[i] {
				t.Errorf("file of bucket %d holds %s, of bucket %d", buckets[i], r.CustomID, p)
			}
			if r.ShardLine <= last {
				t.Errorf("file of bucket %d: row %d after row %d, not in the order written", buckets[i], r.ShardLine, last)
			}
			last = r.ShardLine
		}
		total += len(got)
	}
	if total != len(rows) {
		t.Errorf("the files hold %d rows, %d written", total, len(rows))
	}
	if again, _ := write(); !slices.Equal(again, keys) {
		t.Errorf("the same rows written again gave other files:\n%v\n%v", again, keys)
	}
	for _, procs := range []int{1, 3} {
		prev := runtime.GOMAXPROCS(procs)
		again, _ := write()
		runtime.GOMAXPROCS(prev)
		if !slices.Equal(again, keys) {
			t.Errorf("the same rows written with GOMAXPROCS %d gave other files:\n%v\n%v", procs, again, keys)
		}
	}
	// A split writer is committed with CommitSplit, not Commit.
	w := NewSplitTableWriter(l, t.TempDir(), "expected", "t", job, SplitBuckets, func(r *ExpectedRow) string { return r.CustomID })
	if _, err := w.Commit(ctx); err == nil {
		t.Error("Commit of a split writer succeeded")
	}
}
