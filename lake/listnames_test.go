package lake

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gocloud.dev/blob"
)

// List walks a local lake's folders several at once and must give exactly
// fileblob's keys in fileblob's order: nested folders, files beside
// folders, more folders than walkers, and an area that does not exist.
func TestListLocalIsFileblobs(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	put := func(key string) {
		t.Helper()
		if err := l.Bucket.WriteAll(ctx, key, []byte(key), nil); err != nil {
			t.Fatal(err)
		}
	}
	for j := range 3 * listWalkers {
		job := fmt.Sprintf("%064x", j*7919)
		for s := range 2 {
			for e := range 3 {
				put(fmt.Sprintf("ledger/%s/part-%05d/%010d.json", job, s, e))
			}
		}
		put(fmt.Sprintf("ingests/%s/output-%d.json", job, j))
	}
	for i := range 1100 { // more than a page of List's
		d := Sum([]byte(fmt.Sprint(i)))
		put(fmt.Sprintf("tables/expected/tenant=t%d/job=%064x/%s.parquet", i%3, i/10, d.Hex()))
		put(ObjectKey(d))
	}
	put("ledger/a-file-beside-the-folders.json")
	if err := os.MkdirAll(filepath.Join(l.LocalPath("ledger"), "empty-folder"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An attributes file, as fileblob writes beside a file unless told not
	// to: List leaves it out.
	for _, k := range []string{"ledger/a-file-beside-the-folders.json", fmt.Sprintf("ledger/%064x/part-00000/%010d.json", 0, 0)} {
		if err := os.WriteFile(l.LocalPath(k)+".attrs", []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	job0 := fmt.Sprintf("ledger/%064x/", 0)
	for _, prefix := range append([]string{job0, job0 + "part-00001/", "tables/expected/tenant=t1/"}, lakeAreas...) {
		t.Run(prefix, func(t *testing.T) {
			want := fileblobList(t, l, prefix)
			got, err := l.List(ctx, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("List gave %d keys, fileblob's listing %d:\n got %.300v\nwant %.300v", len(got), len(want), got, want)
			}
		})
	}
}

// fileblobList is fileblob's own listing of the keys under prefix.
func fileblobList(t *testing.T, l *Lake, prefix string) []string {
	t.Helper()
	var keys []string
	it := l.Bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(context.Background())
		if err == io.EOF {
			return keys
		}
		if err != nil {
			t.Fatal(err)
		}
		if !o.IsDir {
			keys = append(keys, o.Key)
		}
	}
}
