package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// shardLines reads the lines of a stored shard by where they start.
type shardLines interface {
	// lineAt returns the line starting at byte off, without its newline;
	// the bytes are valid until the next call. Offsets come in increasing
	// order.
	lineAt(off int64) ([]byte, error)
	Close() error
}

// streamGap is the most a remote shard's reader skips, reading, to the next
// wanted line before it opens the object again there instead: a request
// costs about what reading a few MiB does (tests set it).
var streamGap int64 = 4 << 20

// openLines opens the shard object key of size bytes for lineAt, to read
// the lines starting at offs (increasing): in a local lake the file itself,
// read past the page cache in blocks that each take the wanted lines near one
// another (lake.DirectReader); otherwise one ranged read from the first
// wanted line on, skipping what lies between lines, opened again past a long
// gap.
func openLines(ctx context.Context, l *lake.Lake, key string, size int64, offs []int64) (shardLines, error) {
	if _, ok := l.LocalDir(); ok {
		if r, err := lake.OpenDirectReader(l.LocalPath(key)); err == nil {
			st, err := r.Stat()
			if err != nil {
				r.Close()
				return nil, err
			}
			if st.Size() != size {
				r.Close()
				return nil, fmt.Errorf("%s holds %d bytes, the manifest says %d: %w", key, st.Size(), size, lake.ErrCorrupt)
			}
			return &fileLines{r: r, size: size, offs: offs}, nil
		}
		// Not a plain file where the lake keeps it: read it through the
		// bucket like any other, which says what is wrong.
	}
	return &streamLines{ctx: ctx, l: l, key: key, size: size}, nil
}

// A local shard's reads: each takes the wanted lines that start within
// lineGap of the one before, up to lineWindow bytes, and lineGuess past the
// last line's start. On a virtual machine's disk a direct read took about
// 75 µs however small, and 1 MiB about 0.7 ms: a gap under 128 KiB costs less
// read than a read of its own. A line longer than what was read is read
// again from its start, in a block twice as long, until its newline.
const (
	lineWindow = 1 << 20
	lineGap    = 128 << 10
	lineGuess  = 4 << 10
)

// fileLines reads lines of a local file at their offsets.
type fileLines struct {
	r     *lake.DirectReader
	size  int64
	offs  []int64 // the wanted lines' starts, increasing
	next  int     // offs[next] is the first after the line last asked for
	buf   []byte  // aligned; holds the file's bytes from start on
	start int64
	// reads counts the reads and read the bytes they took (tests).
	reads, read int64
}

func (s *fileLines) lineAt(off int64) ([]byte, error) {
	if off < 0 || off >= s.size {
		return nil, fmt.Errorf("the line starts outside the shard's %d bytes: %w", s.size, lake.ErrCorrupt)
	}
	for s.next < len(s.offs) && s.offs[s.next] <= off {
		s.next++
	}
	if off >= s.start && off < s.start+int64(len(s.buf)) {
		if i := bytes.IndexByte(s.buf[off-s.start:], '\n'); i >= 0 {
			return s.buf[off-s.start:][:i], nil
		}
	}
	// A new read from the block of off: through the wanted lines that
	// follow closely, or longer if the line is.
	from := off / lake.DirectAlign * lake.DirectAlign
	end := off + lineGuess
	for _, o := range s.offs[s.next:] {
		if o-end > lineGap || o+lineGuess-from > lineWindow {
			break
		}
		end = o + lineGuess
	}
	n := end - from
	for {
		n = min(n, s.size-from)
		if err := s.fill(from, n); err != nil {
			return nil, err
		}
		if i := bytes.IndexByte(s.buf[off-from:], '\n'); i >= 0 {
			return s.buf[off-from:][:i], nil
		}
		switch {
		case from+int64(len(s.buf)) >= s.size:
			return nil, fmt.Errorf("no newline before the shard's end: %w", lake.ErrCorrupt)
		case int64(len(s.buf))-(off-from) > ingest.MaxLineBytes:
			return nil, fmt.Errorf("a line over %d bytes: %w", ingest.MaxLineBytes, lake.ErrCorrupt)
		}
		n = 2 * int64(len(s.buf))
	}
}

// fill reads the file's n bytes from from (aligned) into buf, reading whole
// blocks.
func (s *fileLines) fill(from, n int64) error {
	want := int((n + lake.DirectAlign - 1) / lake.DirectAlign * lake.DirectAlign)
	if cap(s.buf) < want {
		s.buf = lake.AlignedBuffer(max(want, lineWindow))
	}
	k, err := s.r.ReadAt(s.buf[:want], from)
	s.reads++
	s.read += int64(k)
	if err != nil && !(errors.Is(err, io.EOF) && int64(k) >= n) {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("the file ends at byte %d, before the shard's %d: %w", from+int64(k), s.size, lake.ErrCorrupt)
		}
		return err
	}
	s.buf, s.start = s.buf[:n], from
	return nil
}

func (s *fileLines) Close() error { return s.r.Close() }

// streamLines reads lines of a remote object in one pass of ranged reads.
type streamLines struct {
	ctx  context.Context
	l    *lake.Lake
	key  string
	size int64
	r    io.ReadCloser
	br   *bufio.Reader
	pos  int64 // the offset br reads next
	line []byte
}

func (s *streamLines) lineAt(off int64) ([]byte, error) {
	if off < 0 || off >= s.size {
		return nil, fmt.Errorf("the line starts outside the shard's %d bytes: %w", s.size, lake.ErrCorrupt)
	}
	if s.r == nil || off < s.pos || off-s.pos > streamGap {
		if s.r != nil {
			s.r.Close()
		}
		r, err := s.l.OpenAt(s.ctx, s.key, off)
		if err != nil {
			return nil, err
		}
		s.r, s.pos = r, off
		if s.br == nil {
			s.br = bufio.NewReaderSize(r, 1<<20)
		} else {
			s.br.Reset(r)
		}
	}
	if _, err := s.br.Discard(int(off - s.pos)); err != nil {
		return nil, s.short(err)
	}
	s.pos, s.line = off, s.line[:0]
	for {
		chunk, err := s.br.ReadSlice('\n')
		s.line = append(s.line, chunk...)
		s.pos += int64(len(chunk))
		switch {
		case err == nil && s.pos > s.size:
			return nil, fmt.Errorf("the line ends past the shard's %d bytes: %w", s.size, lake.ErrCorrupt)
		case err == nil:
			return s.line[:len(s.line)-1], nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, s.short(err)
		case len(s.line) > ingest.MaxLineBytes:
			return nil, fmt.Errorf("a line over %d bytes: %w", ingest.MaxLineBytes, lake.ErrCorrupt)
		}
	}
}

// short is the error of a read that ended before the line did.
func (s *streamLines) short(err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("no newline before the shard's end: %w", lake.ErrCorrupt)
	}
	return err
}

func (s *streamLines) Close() error {
	if s.r == nil {
		return nil
	}
	return s.r.Close()
}
