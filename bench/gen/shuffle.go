package gen

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
)

// Shuffle writes the lines of in to out in a random order fixed by seed,
// with memory bounded by bucketBytes however large in is: each line goes to
// one of size/bucketBytes temporary files in tmpDir, picked at random, and
// each file is then shuffled in memory and written out. size is in's length
// in bytes (it only sets the number of buckets). Every line is written with
// a trailing newline.
//
// A shuffled input is what a warehouse export without ORDER BY looks like;
// plan must sort it by business key, so the bench measures plan on both.
func Shuffle(ctx context.Context, in io.Reader, size int64, out io.Writer, seed uint64, tmpDir string, bucketBytes int64) error {
	if bucketBytes < 1 {
		return fmt.Errorf("shuffle: bucket size %d, want at least 1", bucketBytes)
	}
	k := int(max(1, (size+bucketBytes-1)/bucketBytes))
	buckets := make([]*os.File, 0, k)
	defer func() {
		for _, f := range buckets {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	ws := make([]*bufio.Writer, k)
	for i := range k {
		f, err := os.CreateTemp(tmpDir, "blgen-shuffle-*")
		if err != nil {
			return fmt.Errorf("shuffle: %w", err)
		}
		buckets = append(buckets, f)
		ws[i] = bufio.NewWriterSize(f, 64<<10)
	}
	r := newRNG(seed, streamInputShuffle, 0)
	br := bufio.NewReaderSize(in, 1<<20)
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: gather it whole.
			rest, rerr := br.ReadBytes('\n')
			line, err = append(bytes.Clone(line), rest...), rerr
		}
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			if _, werr := ws[r.next()%uint64(k)].Write(line); werr != nil {
				return fmt.Errorf("shuffle: %w", werr)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("shuffle: read: %w", err)
		}
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	var (
		lines [][]byte
		buf   []byte // one bucket's bytes, reused
	)
	for i, f := range buckets {
		if err := ws[i].Flush(); err != nil {
			return fmt.Errorf("shuffle: %w", err)
		}
		n, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return fmt.Errorf("shuffle: %w", err)
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n+n/8)
		}
		data := buf[:n]
		if _, err := f.ReadAt(data, 0); err != nil {
			return fmt.Errorf("shuffle: %w", err)
		}
		lines = lines[:0]
		for len(data) > 0 {
			j := bytes.IndexByte(data, '\n') + 1 // every line ends with one
			lines = append(lines, data[:j])
			data = data[j:]
		}
		for j := len(lines) - 1; j > 0; j-- { // Fisher-Yates
			m := int(r.next() % uint64(j+1))
			lines[j], lines[m] = lines[m], lines[j]
		}
		for _, l := range lines {
			if _, err := out.Write(l); err != nil {
				return fmt.Errorf("shuffle: write: %w", err)
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}
