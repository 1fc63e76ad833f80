package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
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
	var want []int // every third line, the long ones and the last
	var wantOffs []int64
	for i := range lines {
		if i%3 == 0 || i == 40 || i == 41 || i == len(lines)-1 {
			want = append(want, i)
			wantOffs = append(wantOffs, offs[i])
		}
	}
	lakes := map[string]*lake.Lake{"local": localLake(t, t.TempDir()), "s3": s3Lake(t)}
	// The tests' folder is often in memory (tmpfs), which refuses direct
	// I/O; a folder on disk takes it where the file system does.
	if dir, err := os.MkdirTemp(".", "shardlines-test-"); err == nil { // the repository's disk
		t.Cleanup(func() { os.RemoveAll(dir) })
		lakes["local-disk"] = localLake(t, dir)
	}
	for name, l := range lakes {
		for _, gap := range []int64{0, 1 << 10, 64 << 20} {
			t.Run(fmt.Sprintf("%s-gap%d", name, gap), func(t *testing.T) {
				defer func(g int64) { streamGap = g }(streamGap)
				streamGap = gap
				d, err := l.PutObject(ctx, data)
				if err != nil {
					t.Fatal(err)
				}
				src, err := openLines(ctx, l, lake.ObjectKey(d), int64(len(data)), wantOffs)
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				if fl, local := src.(*fileLines); local != (name != "s3") {
					t.Fatalf("%s lake read by %T", name, src)
				} else if local {
					t.Logf("%s: direct I/O %v", name, fl.r.Direct())
				}
				n := 0
				for _, i := range want {
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
			src, err := openLines(ctx, l, lake.ObjectKey(d), int64(len(data)-1), offs[len(offs)-1:])
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
			src, err := openLines(ctx, l, lake.ObjectKey(d), int64(len(data)-1), offs[len(offs)-1:])
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

func localLake(t *testing.T, dir string) *lake.Lake {
	t.Helper()
	l, err := lake.Open(context.Background(), filepath.Join(dir, "lake"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestShardLinesReads: a local shard's wanted lines are read in as few reads
// as their spacing allows: lines close together share one read (up to
// lineWindow), a line far from the one before takes a short read of its own,
// and a line longer than its read is read again whole. Every read is aligned
// (lake.DirectReader refuses any other).
func TestShardLinesReads(t *testing.T) {
	ctx := context.Background()
	const lineLen = 1000 // with its newline
	line := func(i int) string { return fmt.Sprintf("%07d:%s", i, strings.Repeat("x", lineLen-9)) }
	var b strings.Builder
	n := 20_000 // 20 MB
	for i := range n {
		b.WriteString(line(i))
		b.WriteByte('\n')
	}
	data := []byte(b.String())
	l := localLake(t, t.TempDir())
	d, err := l.PutObject(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		every     int   // a wanted line every this many
		reads     int64 // at most
		readBytes int64 // at most
	}{
		// 100 KB apart, under lineGap: one read per lineWindow.
		{"close", 100, int64(len(data))/lineWindow + 2, int64(len(data)) + lineWindow},
		// 1 MB apart: a read each, of lineGuess and a block at most.
		{"far", 1000, int64(n / 1000), int64(n/1000) * (lineGuess + 2*lake.DirectAlign)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var offs []int64
			for i := 0; i < n; i += c.every {
				offs = append(offs, int64(i)*lineLen)
			}
			src, err := openLines(ctx, l, lake.ObjectKey(d), int64(len(data)), offs)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			for _, off := range offs {
				got, err := src.lineAt(off)
				if err != nil {
					t.Fatalf("line at %d: %v", off, err)
				}
				if want := line(int(off / lineLen)); string(got) != want {
					t.Fatalf("line at %d: %.20q, want %.20q", off, got, want)
				}
			}
			fl := src.(*fileLines)
			t.Logf("%d lines: %d reads, %d bytes", len(offs), fl.reads, fl.read)
			if fl.reads > c.reads || fl.read > c.readBytes {
				t.Errorf("%d lines in %d reads of %d bytes, want at most %d reads of %d", len(offs), fl.reads, fl.read, c.reads, c.readBytes)
			}
		})
	}
	// A line longer than lineWindow, wanted after a short one close before
	// it: read again from its start until its newline.
	long := strings.Repeat("y", 3*lineWindow)
	data2 := []byte("a\n" + long + "\nb\n")
	d2, err := l.PutObject(ctx, data2)
	if err != nil {
		t.Fatal(err)
	}
	offs := []int64{0, 2, int64(len(data2)) - 2}
	src, err := openLines(ctx, l, lake.ObjectKey(d2), int64(len(data2)), offs)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i, want := range []string{"a", long, "b"} {
		got, err := src.lineAt(offs[i])
		if err != nil || string(got) != want {
			t.Fatalf("line at %d: %.20q (%d bytes), %v; want %.20q (%d)", offs[i], got, len(got), err, want, len(want))
		}
	}
}
