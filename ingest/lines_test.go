package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
					func(l Line) int { return len(l.Bytes) },
					func(l Line, n int) error {
						if n != len(l.Bytes) {
							return fmt.Errorf("line %d: parsed %d bytes, sink sees %d", l.No, n, len(l.Bytes))
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
	err := readChunks(context.Background(), strings.NewReader(data), chunkBytes+chunkBytes/2, out)
	if !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want ErrLineTooLong naming line 2", err)
	}
}
