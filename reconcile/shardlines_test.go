package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// TestShardLines: the lines of a stored shard read by their offsets, from a
// local lake's file and through an s3 lake's ranged reads (each gap skipped
// or, past streamGap, opened again), are the lines themselves: short ones,
// ones longer than a read buffer, and the last; an offset outside the
// object or a line without its newline is corrupt.
func TestShardLines(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	var lines []string
	for i := range 300 {
		n := 1 + rng.IntN(200)
		switch i {
		case 40:
			n = 9 << 10 // past fileLines' first buffer
		case 41:
			n = 3 << 20 // past streamLines' bufio buffer
		}
		lines = append(lines, fmt.Sprintf("%d:%s", i, strings.Repeat(string(rune('a'+i%26)), n)))
	}
	data := []byte(strings.Join(lines, "\n") + "\n")
	offs := make([]int64, len(lines))
	for i := 1; i < len(lines); i++ {
		offs[i] = offs[i-1] + int64(len(lines[i-1])) + 1
	}
	local, err := lake.Open(ctx, filepath.Join(t.TempDir(), "lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	for name, l := range map[string]*lake.Lake{"local": local, "s3": s3Lake(t)} {
		for _, gap := range []int64{0, 1 << 10, 64 << 20} {
			t.Run(fmt.Sprintf("%s-gap%d", name, gap), func(t *testing.T) {
				defer func(g int64) { streamGap = g }(streamGap)
				streamGap = gap
				d, err := l.PutObject(ctx, data)
				if err != nil {
					t.Fatal(err)
				}
				src, err := openLines(ctx, l, lake.ObjectKey(d), int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				if _, local := src.(*fileLines); local != (name == "local") {
					t.Fatalf("%s lake read by %T", name, src)
				}
				n := 0
				for i := range lines {
					if i%3 != 0 && i != 40 && i != 41 && i != len(lines)-1 {
						continue // every third line, the long ones and the last
					}
					got, err := src.lineAt(offs[i])
					if err != nil {
						t.Fatalf("line %d at %d: %v", i, offs[i], err)
					}
					if !bytes.Equal(got, []byte(lines[i])) {
						t.Fatalf("line %d at %d: %.40q (%d bytes), want %.40q (%d)", i, offs[i], got, len(got), lines[i], len(lines[i]))
					}
					n++
				}
				if n < 100 {
					t.Fatalf("%d lines read", n)
				}
				if _, err := src.lineAt(int64(len(data))); !errors.Is(err, lake.ErrCorrupt) {
					t.Errorf("an offset past the end: %v, want lake.ErrCorrupt", err)
				}
			})
		}
		// The object is a byte longer than the manifest says: a local file is
		// refused on opening, a remote line that ends past the size on reading.
		t.Run(name+"-longer", func(t *testing.T) {
			d, err := l.PutObject(ctx, data)
			if err != nil {
				t.Fatal(err)
			}
			src, err := openLines(ctx, l, lake.ObjectKey(d), int64(len(data)-1))
			if err == nil {
				defer src.Close()
				_, err = src.lineAt(offs[len(offs)-1])
			}
			if !errors.Is(err, lake.ErrCorrupt) {
				t.Errorf("an object longer than its size: %v, want lake.ErrCorrupt", err)
			}
		})
		t.Run(name+"-no-newline", func(t *testing.T) {
			d, err := l.PutObject(ctx, data[:len(data)-1])
			if err != nil {
				t.Fatal(err)
			}
			src, err := openLines(ctx, l, lake.ObjectKey(d), int64(len(data)-1))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if _, err := src.lineAt(offs[len(offs)-1]); !errors.Is(err, lake.ErrCorrupt) {
				t.Errorf("the last line without its newline: %v, want lake.ErrCorrupt", err)
			}
		})
	}
}
