package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// Line is one line of an input file.
type Line struct {
	No     int64  // 1-based line number
	Offset int64  // byte offset of the line in the file
	Bytes  []byte // without the line end (\n or \r\n); valid only during the callback
}

// MaxLineBytes bounds one line; longer lines are an error naming the line.
const MaxLineBytes = 256 << 20

const chunkBytes = 1 << 20

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

type chunk struct {
	seq     int
	data    []byte
	buf     []byte // the buffer data lies in, read into again once the sink is done with it
	firstNo int64
	offset  int64
}

// ErrLineTooLong reports a line longer than MaxLineBytes.
var ErrLineTooLong = errors.New("line too long")

// chunkSlack is room in a chunk buffer for the unfinished line carried over
// from the one before: a buffer of chunkBytes+chunkSlack holds a chunk whose
// first line began in the previous one, for lines up to chunkSlack bytes.
const chunkSlack = 64 << 10

// readChunks splits r into chunks that end at line boundaries; a line
// longer than maxLine bytes is an error (ErrLineTooLong). It reads into the
// buffers that come back on free (those big enough), so that the input is
// read into memory once, neither copied nor allocated afresh per chunk.
func readChunks(ctx context.Context, r io.Reader, maxLine int, out chan<- chunk, free chan []byte) error {
	defer close(out)
	var (
		carry  []byte // the unfinished line at the end of the last chunk
		seq    int
		lineNo int64 = 1
		offset int64
		first  = true
	)
	for {
		// At least as much is read as is carried (up to the longest line
		// allowed), so a line longer than a chunk is copied O(1) times per
		// byte, not once per chunk.
		want := max(chunkBytes, min(len(carry), maxLine+1-len(carry)))
		// The first buffer given back that is large enough: one too small
		// for a long line's read goes back for a later chunk, so that a
		// long line does not cost a buffer of the pool each time.
		var buf []byte
		for range len(free) {
			b := <-free
			if cap(b) >= len(carry)+want {
				buf = b[:len(carry)+want]
				break
			}
			select {
			case free <- b:
			default:
			}
		}
		if buf == nil {
			buf = make([]byte, len(carry)+want, max(len(carry)+want, chunkBytes+chunkSlack))
		}
		copy(buf, carry)
		n, err := io.ReadFull(r, buf[len(carry):])
		data := buf[:len(carry)+n]
		carry = carry[:0]
		eof := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !eof {
			return err
		}
		if first && len(data) > 0 {
			first = false
			if bytes.HasPrefix(data, utf8BOM) {
				data = data[3:]
				offset = 3
			}
		}
		cut := len(data)
		if !eof {
			i := bytes.LastIndexByte(data, '\n')
			if i < 0 {
				if len(data) > maxLine {
					return fmt.Errorf("line %d: longer than %d bytes: %w", lineNo, maxLine, ErrLineTooLong)
				}
				carry = append(carry, data...)
				continue
			}
			cut = i + 1
			carry = append(carry, data[cut:]...)
		}
		if cut > 0 {
			c := chunk{seq: seq, data: data[:cut], buf: buf, firstNo: lineNo, offset: offset}
			select {
			case out <- c:
			case <-ctx.Done():
				return ctx.Err()
			}
			seq++
			lineNo += int64(bytes.Count(data[:cut], []byte{'\n'}))
			offset += int64(cut)
		}
		if eof {
			return nil
		}
	}
}

// eachLine calls fn for every non-blank line of a chunk.
func eachLine(c chunk, fn func(Line)) {
	data := c.data
	no, off := c.firstNo, c.offset
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		var l []byte
		adv := i + 1
		if i < 0 {
			l, adv = data, len(data)
		} else {
			l = data[:i]
		}
		l = bytes.TrimSuffix(l, []byte{'\r'})
		if len(bytes.TrimSpace(l)) > 0 {
			fn(Line{No: no, Offset: off, Bytes: l})
		}
		no++
		off += int64(adv)
		data = data[adv:]
	}
}

// ParallelLines parses every non-blank line of r with parse on all cores and
// hands the results to sink in file order. parse fills in the zero value it
// is given (the result stays where it is made: a line's row is hundreds of
// bytes, and copying it from call to call to slice was a visible part of a
// parse), and must not keep Line.Bytes; sink must not keep the pointer.
func ParallelLines[T any](ctx context.Context, r io.Reader, parse func(Line, *T), sink func(Line, *T) error) error {
	return parallelLines(ctx, r, parse, nil, sink, nil)
}

// parallelLines is ParallelLines with two more callbacks, each optional:
// finish, called on the parsing core with each chunk's parsed values once
// its lines are parsed and before any goes to sink (work that pairs lines,
// lake.HashCall2, waits there for a chunk's lines, which are valid until sink
// has seen them); and done, called in sink's goroutine with each chunk, in
// file order, once sink has seen its lines and before its buffer is read
// into again. A chunk's data are the file's bytes from its offset on, and the
// chunks follow one another but for a leading BOM (see readChunks).
func parallelLines[T any](ctx context.Context, r io.Reader, parse func(Line, *T), finish func([]T), sink func(Line, *T) error, done func(chunk) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := runtime.GOMAXPROCS(0)
	// At most inflight chunks are read but not yet through the sink, so
	// memory stays flat even when one worker falls behind (a busy machine).
	inflight := 2*workers + 2
	tokens := make(chan struct{}, inflight)
	raw := make(chan chunk)
	chunks := make(chan chunk, workers)
	go func() {
		defer close(chunks)
		for c := range raw {
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				for range raw {
				}
				return
			}
			select {
			case chunks <- c:
			case <-ctx.Done():
				for range raw {
				}
				return
			}
		}
	}()
	type result struct {
		seq   int
		c     chunk
		lines []Line
		vals  []T
	}
	results := make(chan result, workers)
	// Once the sink has seen a chunk's lines, its buffer goes back to the
	// reader and its slices of lines and values to the workers.
	free := make(chan []byte, inflight+1)
	spare := make(chan result, inflight+1)
	readErr := make(chan error, 1)
	go func() { readErr <- readChunks(ctx, r, MaxLineBytes, raw, free) }()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range chunks {
				var res result
				select {
				case res = <-spare:
					res.lines, res.vals = res.lines[:0], res.vals[:0]
				default:
				}
				res.seq, res.c = c.seq, c
				var zero T
				eachLine(c, func(l Line) {
					res.lines = append(res.lines, l)
					res.vals = append(res.vals, zero)
					parse(l, &res.vals[len(res.vals)-1])
				})
				if finish != nil {
					finish(res.vals)
				}
				select {
				case results <- res:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()
	pending := map[int]result{}
	next := 0
	var sinkErr error
	for res := range results {
		if sinkErr != nil {
			continue
		}
		pending[res.seq] = res
		for {
			r, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			<-tokens
			for i := range r.lines {
				if err := sink(r.lines[i], &r.vals[i]); err != nil {
					sinkErr = err
					cancel()
					break
				}
			}
			if sinkErr == nil && done != nil {
				if err := done(r.c); err != nil {
					sinkErr = err
					cancel()
				}
			}
			if sinkErr != nil {
				break
			}
			select {
			case free <- r.c.buf:
			default:
			}
			select {
			case spare <- r:
			default:
			}
		}
	}
	if sinkErr != nil {
		return sinkErr
	}
	if err := <-readErr; err != nil {
		return err
	}
	return ctx.Err()
}
