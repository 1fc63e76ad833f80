package ingest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/batchlake/batchlake/errkind"
)

// SampleLines is how many lines of a result file ingest's match check reads
// (all of a smaller file): enough to tell a file of another job from the
// job's own, without a second pass over a large file.
const SampleLines = 10_000

// IDSample is the ids of the first lines of a result file.
type IDSample struct {
	File string
	// Lines is the number of non-blank lines read.
	Lines int64
	// IDs holds the id of each line read that parses and names one (repeats
	// kept: a line counts once for each time it appears). Lines that would be
	// quarantined are not in it: they carry no id to match.
	IDs []string
	// Whole is true when the whole file was read.
	Whole bool
}

// SampleIDs reads the ids of up to max lines of a result file of provider,
// from its start, as ingest would parse them.
func SampleIDs(path, provider, channel string, max int) (*IDSample, error) {
	f, err := FormatFor(provider)
	if err != nil {
		return nil, err
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("ingest: %v", err)}
	}
	defer fh.Close()
	s := &IDSample{File: filepath.Base(path)}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 0, 1<<20), MaxLineBytes)
	first := true
	for s.Lines < int64(max) && sc.Scan() {
		line := bytes.TrimSuffix(sc.Bytes(), []byte{'\r'})
		if first {
			line, first = bytes.TrimPrefix(line, utf8BOM), false
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		s.Lines++
		if row, err := f.ParseResult(line, channel); err == nil && row.CustomID != "" {
			s.IDs = append(s.IDs, row.CustomID)
		}
	}
	if err := sc.Err(); err != nil {
		// A line too long to read: the ingest itself names it. The lines
		// before it are the sample.
		return s, nil
	}
	s.Whole = !sc.Scan()
	return s, nil
}
