package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

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

// openLines opens the shard object key of size bytes for lineAt: in a local
// lake the file itself, read where asked (ReadAt); otherwise one ranged read
// from the first wanted line on, skipping what lies between lines, opened
// again past a long gap.
func openLines(ctx context.Context, l *lake.Lake, key string, size int64) (shardLines, error) {
	if _, ok := l.LocalDir(); ok {
		if f, err := os.Open(l.LocalPath(key)); err == nil {
			st, err := f.Stat()
			if err != nil {
				f.Close()
				return nil, err
			}
			if st.Size() != size {
				f.Close()
				return nil, fmt.Errorf("%s holds %d bytes, the manifest says %d: %w", key, st.Size(), size, lake.ErrCorrupt)
			}
			return &fileLines{f: f, size: size}, nil
		}
		// Not a plain file where the lake keeps it: read it through the
		// bucket like any other, which says what is wrong.
	}
	return &streamLines{ctx: ctx, l: l, key: key, size: size}, nil
}

// fileLines reads lines of a local file at their offsets.
type fileLines struct {
	f    *os.File
	size int64
	buf  []byte
}

func (s *fileLines) lineAt(off int64) ([]byte, error) {
	if off < 0 || off >= s.size {
		return nil, fmt.Errorf("the line starts outside the shard's %d bytes: %w", s.size, lake.ErrCorrupt)
	}
	if s.buf == nil {
		s.buf = make([]byte, 4<<10)
	}
	for {
		n, err := s.f.ReadAt(s.buf[:min(int64(len(s.buf)), s.size-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if i := bytes.IndexByte(s.buf[:n], '\n'); i >= 0 {
			return s.buf[:i], nil
		}
		if off+int64(n) >= s.size {
			return nil, fmt.Errorf("no newline before the shard's end: %w", lake.ErrCorrupt)
		}
		if len(s.buf) > ingest.MaxLineBytes {
			return nil, fmt.Errorf("a line over %d bytes: %w", ingest.MaxLineBytes, lake.ErrCorrupt)
		}
		s.buf = make([]byte, min(2*len(s.buf), ingest.MaxLineBytes+1))
	}
}

func (s *fileLines) Close() error { return s.f.Close() }

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
