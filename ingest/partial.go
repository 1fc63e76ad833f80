package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// partialHead is how many first bytes of two files are compared before the
// one is hashed as a prefix of the other.
const partialHead = 4096

// CheckPartialCopy refuses a result file (channel of job m) that begins with
// the whole of a file ingested into the job before, or whose bytes are the
// whole start of one: a download cut short, ingested beside the complete
// file; and a file ingested before on the other channel (an output file
// given as the errors file too). The lines they share would count twice,
// each a duplicate submission of its record priced again, though the
// provider answered and billed it once. earlier are the job's ingest records
// that count (the retracted ones left out), read once by the caller for all
// its files. Only files whose first bytes agree are hashed, the new one up
// to the earlier one's size or the earlier one (read from the lake) up to
// the new one's.
func CheckPartialCopy(ctx context.Context, l *lake.Lake, m *lake.Manifest, earlier []lake.IngestRecord, path, channel string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() == 0 {
		return nil // the ingest reports what it cannot read
	}
	size := fi.Size()
	head, err := readHead(func() (io.ReadCloser, error) { return os.Open(path) }, min(size, partialHead))
	if err != nil {
		return nil
	}
	// The new file's digest, taken once if a record of its size or larger
	// begins as it does.
	var whole *lake.Digest
	digest := func() (lake.Digest, error) {
		if whole == nil {
			d, _, err := lake.HashFile(path)
			if err != nil {
				return d, err
			}
			whole = &d
		}
		return *whole, nil
	}
	for _, r := range earlier {
		if r.RawBytes == 0 || (r.RawBytes == size && r.Channel == channel) {
			continue // the same channel and size: the same file again (nothing to write), or another
		}
		n := min(size, r.RawBytes, partialHead)
		earlier, err := readHead(func() (io.ReadCloser, error) { return l.OpenAt(ctx, lake.ObjectKey(r.Raw), 0) }, n)
		if err != nil {
			return err
		}
		if !bytes.Equal(earlier, head[:n]) {
			continue
		}
		if r.RawBytes == size {
			if d, err := digest(); err == nil && d == r.Raw {
				return &errkind.UsageError{Msg: fmt.Sprintf("ingest %s: the same bytes as %s, ingested into the job before as its %s file: each line would count twice, as a duplicate submission. Nothing was written; give the job's %s file, or --force to ingest it anyway",
					fi.Name(), r.FileName, r.Channel, channel)}
			}
			continue
		}
		if r.RawBytes < size {
			d, err := prefixDigest(func() (io.ReadCloser, error) { return os.Open(path) }, r.RawBytes)
			if err != nil {
				return err
			}
			if d == r.Raw {
				retract := fmt.Sprintf("batchlake ingest --job %s --retract %s --reason \"partial copy\"", m.JobKey, r.Raw.Hex())
				return &errkind.UsageError{Msg: fmt.Sprintf("ingest %s: it begins with the whole of %s (sha256 %s, %d bytes), ingested into the job before: that one is a partial copy of this file, and the lines they share would count twice, as duplicate submissions. Retract it first (%s), then ingest this file; --force ingests it anyway",
					fi.Name(), r.FileName, r.Raw.Hex(), r.RawBytes, retract)}
			}
			continue
		}
		d, err := prefixDigest(func() (io.ReadCloser, error) { return l.OpenAt(ctx, lake.ObjectKey(r.Raw), 0) }, size)
		if err != nil {
			return err
		}
		if w, err := digest(); err == nil && d == w {
			return &errkind.UsageError{Msg: fmt.Sprintf("ingest %s: its %d bytes are the start of %s (sha256 %s), ingested into the job before: a partial copy of it, which adds no line and whose lines would count twice, as duplicate submissions. Nothing was written; --force ingests it anyway",
				fi.Name(), size, r.FileName, r.Raw.Hex())}
		}
	}
	return nil
}

// readHead reads the first n bytes that open gives.
func readHead(open func() (io.ReadCloser, error), n int64) ([]byte, error) {
	r, err := open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// prefixDigest is the sha256 of the first n bytes that open gives (of
// fewer, if it ends before).
func prefixDigest(open func() (io.ReadCloser, error), n int64) (lake.Digest, error) {
	var d lake.Digest
	r, err := open()
	if err != nil {
		return d, err
	}
	defer r.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(r, n)); err != nil {
		return d, err
	}
	h.Sum(d[:0])
	return d, nil
}
