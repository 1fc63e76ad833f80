package ingest

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckPlainFile(t *testing.T) {
	dir := t.TempDir()
	line := []byte(`{"custom_id":"a","response":{"status_code":200}}` + "\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(line)
	zw.Close()
	for _, c := range []struct {
		name    string
		content []byte // nil: a folder
		want    string // "" for no error
	}{
		{"plain.jsonl", line, ""},
		{"bom.jsonl", append([]byte{0xEF, 0xBB, 0xBF}, line...), ""},
		{"empty.jsonl", []byte{}, ""},
		{"one.jsonl", []byte("{"), ""},
		{"out.jsonl.gz", gz.Bytes(), "gzip-compressed (its first bytes are the format's): decompress it first (gunzip -k)"},
		{"out.jsonl.zst", []byte{0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x00}, "zstd-compressed"},
		{"out.jsonl.bz2", []byte("BZh91AY&SY"), "bzip2-compressed"},
		{"out.jsonl.xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0, 0, 4}, "xz-compressed"},
		{"out.zip", []byte("PK\x03\x04\x14\x00"), "a zip archive"},
		{"out.parquet", []byte("PAR1\x15\x04"), "a Parquet file, not JSON lines"},
		{"folder", nil, "a folder, not a file"},
	} {
		p := filepath.Join(dir, c.name)
		var err error
		if c.content == nil {
			err = os.Mkdir(p, 0o755)
		} else {
			err = os.WriteFile(p, c.content, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		err = CheckPlainFile(p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q…", c.name, err, c.want)
		}
	}
	// A path that is not there is the open's to report.
	if err := CheckPlainFile(filepath.Join(dir, "none.jsonl")); err != nil {
		t.Errorf("missing file: %v, want nil", err)
	}
}
