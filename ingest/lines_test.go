package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// splitLines is the plain reference for ParallelLines: every non-blank line
// with its number and byte offset, CR stripped, a leading BOM skipped.
func splitLines(data []byte) []Line {
	var out []Line
	off := int64(0)
	if bytes.HasPrefix(data, utf8BOM) {
		data, off = data[3:], 3
	}
	for no := int64(1); len(data) > 0; no++ {
		l, rest, found := bytes.Cut(data, []byte{'\n'})
		adv := len(l)
		if found {
			adv++
		}
		l = bytes.TrimSuffix(l, []byte{'\r'})
		if len(bytes.TrimSpace(l)) > 0 {
			out = append(out, Line{No: no, Offset: off, Bytes: bytes.Clone(l)})
		}
		off += int64(adv)
		data = rest
	}
	return out
}

func TestParallelLinesMatchesSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	line := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(26))
		}
		return string(b)
	}
	// Many lines of a few hundred bytes: chunk boundaries fall inside lines.
	var many strings.Builder
	for i := range 9000 {
		fmt.Fprintf(&many, "%d %s\n", i, line(rng.IntN(600)))
	}
	cases := []struct {
		name string
		data string
	}{
		{"empty", ""},
		{"one line, no newline", "abc"},
		{"blank lines and CRLF", "a\r\n\n  \nb\r\n\r\nc"},
		{"BOM", "\xEF\xBB\xBFfirst\nsecond\n"},
		{"many lines across chunks", many.String()},
		{"a line of exactly one chunk", line(chunkBytes-1) + "\nafter\n"},
		{"a line longer than two chunks", "before\n" + line(2*chunkBytes+123) + "\nafter"},
		{"long line last, no newline", "x\n" + line(chunkBytes+7)},
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole":  func(r io.Reader) io.Reader { return r },
		"halves": iotest.HalfReader,
	}
	for _, c := range cases {
		for rname, wrap := range readers {
			t.Run(c.name+"/"+rname, func(t *testing.T) {
				want := splitLines([]byte(c.data))
				var got []Line
				err := ParallelLines(context.Background(), wrap(strings.NewReader(c.data)),
					func(l Line, n *int) { *n = len(l.Bytes) },
					func(l Line, n *int) error {
						if *n != len(l.Bytes) {
							return fmt.Errorf("line %d: parsed %d bytes, sink sees %d", l.No, *n, len(l.Bytes))
						}
						got = append(got, Line{No: l.No, Offset: l.Offset, Bytes: bytes.Clone(l.Bytes)})
						return nil
					})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%d lines, want %d", len(got), len(want))
				}
				for i := range want {
					if got[i].No != want[i].No || got[i].Offset != want[i].Offset || !bytes.Equal(got[i].Bytes, want[i].Bytes) {
						t.Fatalf("line %d: got no %d offset %d len %d, want no %d offset %d len %d (same bytes: %v)", i,
							got[i].No, got[i].Offset, len(got[i].Bytes), want[i].No, want[i].Offset, len(want[i].Bytes),
							bytes.Equal(got[i].Bytes, want[i].Bytes))
					}
				}
			})
		}
	}
}

// TestReadChunksTooLong: a line over the limit (MaxLineBytes for
// ParallelLines, smaller here) is an error naming its line.
func TestReadChunksTooLong(t *testing.T) {
	data := "ok\n" + strings.Repeat("x", 3*chunkBytes) + "\n"
	out := make(chan chunk)
	go func() {
		for range out {
		}
	}()
	err := readChunks(context.Background(), strings.NewReader(data), chunkBytes+chunkBytes/2, out, nil)
	if !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want ErrLineTooLong naming line 2", err)
	}
}

// TestParallelLinesReusesBuffers: chunk buffers go back to the reader once
// the sink has seen their lines. Every line the sink sees is still the one
// parse saw (a buffer read into too early would change it), and reading 48
// MiB allocates a small part of that (a fresh buffer per chunk would be all
// of it). The values parse fills in are reused too, and given to it zeroed.
func TestParallelLinesReusesBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	// Lines of random length; their letters follow from the line number and
	// the position, which tells lines apart as well as random letters do at
	// a fraction of the cost (a random draw per byte took about three times
	// as long as reading the 48 MiB).
	data := make([]byte, 0, 48<<20+chunkSlack+chunkBytes+32)
	for no := 0; len(data) < 48<<20; no++ {
		n := rng.IntN(2000)
		if no%5000 == 0 {
			n = chunkSlack + rng.IntN(chunkBytes) // now and then, a line longer than the slack
		}
		data = fmt.Appendf(data, "%d ", no)
		for j := range n {
			data = append(data, 'a'+byte((no*7+j)%26))
		}
		data = append(data, '\n')
	}
	want := splitLines(data)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	i := 0
	type parsed struct {
		sum   uint32
		dirty bool // the value parse was given was not zero
	}
	err := ParallelLines(context.Background(), bytes.NewReader(data),
		func(l Line, p *parsed) { *p = parsed{sum: crc32.ChecksumIEEE(l.Bytes), dirty: *p != parsed{}} },
		func(l Line, p *parsed) error {
			if crc32.ChecksumIEEE(l.Bytes) != p.sum {
				return fmt.Errorf("line %d changed between parse and sink", l.No)
			}
			if p.dirty {
				return fmt.Errorf("line %d: parse was given a value not zeroed", l.No)
			}
			if i >= len(want) || l.No != want[i].No || !bytes.Equal(l.Bytes, want[i].Bytes) {
				return fmt.Errorf("line %d: not the input's line %d", l.No, i)
			}
			i++
			return nil
		})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if i != len(want) {
		t.Fatalf("%d lines, want %d", i, len(want))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(data))/2 {
		t.Errorf("reading %d bytes allocated %d", len(data), alloc)
	} else {
		t.Logf("reading %d bytes allocated %d", len(data), alloc)
	}
}
