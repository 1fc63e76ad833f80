package lake

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// A remote lake's JSON markers (manifests, ledger events, ingest records,
// reports), kept on local disk. A command about one job asks about the jobs
// related to it, and `jobs` and a session reading jobs live read every
// job's markers: on an object store a request each, every time, for objects
// written once that never change. The listing that finds a marker carries
// its MD5 (S3's ETag of a plain upload, GCS's and Azure's MD5); a marker
// read once is kept in the cache folder under its key and that MD5, and
// taken from there, its bytes hashed against the MD5 the listing gave,
// while a listing in this process gives it. A file of the folder, which
// anything on the machine may have written, is never trusted for more than
// that: one that does not hash to its MD5 is read from the lake again. A
// marker read without a listing, or whose listed MD5 is not its bytes' (an
// S3 ETag under SSE-KMS or SSE-C), is read from the lake.
type markerDisk struct {
	dir string
	mu  sync.Mutex
	// listed holds each marker's MD5 as the latest listing gave it.
	listed map[string][]byte
	// off is set once a marker could not be kept (a folder that cannot be
	// written): the command reads on from the lake, warned once.
	off atomic.Bool
}

// SetMarkerCache keeps a remote lake's JSON markers in dir (created when
// first needed); "" keeps none. A local lake reads its markers in place and
// keeps none.
func (l *Lake) SetMarkerCache(dir string) {
	if l.dir != "" || dir == "" {
		l.mdisk = nil
		return
	}
	l.mdisk = &markerDisk{dir: dir, listed: map[string][]byte{}}
}

// noteListed records the MD5 a listing gave of a marker (a key ending in
// .json); nil forgets it.
func (c *markerDisk) noteListed(key string, sum []byte) {
	if !strings.HasSuffix(key, ".json") {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(sum) == md5.Size {
		c.listed[key] = sum
	} else {
		delete(c.listed, key)
	}
}

// path is the cache file of the marker at key whose bytes hash to sum.
func (c *markerDisk) path(key string, sum []byte) string {
	return filepath.Join(c.dir, Sum([]byte(key)).Hex()+"-"+hex.EncodeToString(sum)+".json")
}

// get returns the cached bytes of the marker at key, and the MD5 its bytes
// must have (nil when no listing gave one: then nothing is cached).
func (c *markerDisk) get(key string) (b, sum []byte) {
	c.mu.Lock()
	sum = c.listed[key]
	c.mu.Unlock()
	if sum == nil {
		return nil, nil
	}
	p := c.path(key, sum)
	b, err := os.ReadFile(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			slog.Warn("marker cache: cannot read a cached marker; reading it from the lake", "file", p, "key", key, "err", err)
		}
		return nil, sum
	}
	if got := md5.Sum(b); !bytes.Equal(got[:], sum) {
		slog.Warn("marker cache: a cached marker does not match the lake's listing; reading it from the lake again",
			"file", p, "key", key, "want_md5", hex.EncodeToString(sum), "got_md5", hex.EncodeToString(got[:]))
		return nil, sum
	}
	return b, sum
}

// put keeps b, the bytes of the marker at key as read from the lake, when
// they hash to sum, the MD5 the listing gave. A failure to write is logged
// once and ends the keeping: the cache saves requests, the lake is what is
// read.
func (c *markerDisk) put(key string, sum, b []byte) {
	if got := md5.Sum(b); sum == nil || !bytes.Equal(got[:], sum) || c.off.Load() {
		return
	}
	if err := c.write(c.path(key, sum), b); err != nil && !c.off.Swap(true) {
		slog.Warn("marker cache: cannot keep markers; reading them from the lake", "dir", c.dir, "err", err)
	}
}

// write puts b at p whole or not at all (a temporary file renamed), so a
// process reading the folder at the same time never sees part of it.
func (c *markerDisk) write(p string, b []byte) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(c.dir, ".fetch-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), p)
	}
	if werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("%s: %w", p, werr)
	}
	return nil
}
