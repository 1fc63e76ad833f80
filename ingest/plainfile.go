package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// notText names the formats whose files start with these bytes: an input or
// result file compressed, or an archive or a table, where batchlake reads
// the provider's text as it is.
var notText = []struct {
	magic []byte
	what  string
	undo  string
}{
	{[]byte{0x1f, 0x8b}, "gzip-compressed", "gunzip -k"},
	{[]byte{0x28, 0xb5, 0x2f, 0xfd}, "zstd-compressed", "zstd -d"},
	{[]byte("BZh"), "bzip2-compressed", "bunzip2 -k"},
	{[]byte{0xfd, '7', 'z', 'X', 'Z', 0}, "xz-compressed", "unxz -k"},
	{[]byte("PK\x03\x04"), "a zip archive", "unzip"},
	{[]byte("PAR1"), "a Parquet file", ""},
}

// CheckPlainFile refuses a path that cannot be the provider's JSON text: a
// folder, or a file whose first bytes are a compressed or binary format's.
// Read line by line, such a file plans nothing, or is ingested as lines that
// all go to quarantine while the job's records count as missing, to be sent
// (and paid for) again. A path that is not there is left to the open that
// follows.
func CheckPlainFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return err
	} else if fi.IsDir() {
		return errors.New("a folder, not a file")
	}
	head := make([]byte, 8)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return err
	}
	for _, t := range notText {
		if bytes.HasPrefix(head[:n], t.magic) {
			if t.undo == "" {
				return fmt.Errorf("%s, not JSON lines", t.what)
			}
			return fmt.Errorf("%s (its first bytes are the format's): decompress it first (%s); batchlake reads the JSON lines as the provider writes them", t.what, t.undo)
		}
	}
	return nil
}
