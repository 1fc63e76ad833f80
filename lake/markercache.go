package lake

import (
	"bytes"
	"cmp"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
//
// The folder is bounded by its number of files (maxFiles): a process that
// keeps a marker then removes the oldest kept beyond the bound, in the
// background. A marker removed is read from the lake again when next asked.
type markerDisk struct {
	dir string
	// maxFiles bounds the folder; past it the oldest files are removed down
	// to nine tenths of it.
	maxFiles int
	// trim runs the bound's check once a process, after its first put.
	trim sync.Once
	// trimmed is closed when that check is done (tests wait for it).
	trimmed chan struct{}
	mu      sync.Mutex
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
	l.mdisk = newMarkerDisk(dir)
}

func newMarkerDisk(dir string) *markerDisk {
	return &markerDisk{dir: dir, listed: map[string][]byte{}, maxFiles: markerCacheFiles, trimmed: make(chan struct{})}
}

// markerCacheFiles bounds the marker cache folder: markers are about 0.8 KB
// each, so some 200 MB of them (a file takes a block of 4 KiB on most
// disks: about 1 GiB there), beside the table files' 4 GiB.
const markerCacheFiles = 250_000

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
	if err := c.write(c.path(key, sum), b); err != nil {
		if !c.off.Swap(true) {
			slog.Warn("marker cache: cannot keep markers; reading them from the lake", "dir", c.dir, "err", err)
		}
		return
	}
	c.trim.Do(func() {
		go func() {
			defer close(c.trimmed)
			c.bound()
		}()
	})
}

// bound removes the oldest kept markers (by the time they were written)
// when the folder holds more than maxFiles, down to nine tenths of it, so
// that a folder just past the bound is not trimmed by every process. Files
// being written (".fetch-") are left alone.
func (c *markerDisk) bound() {
	f, err := os.Open(c.dir)
	if err != nil {
		return
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil || len(names) <= c.maxFiles {
		return
	}
	type kept struct {
		name string
		mod  int64
	}
	all := make([]kept, 0, len(names))
	for _, n := range names {
		if !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") {
			continue
		}
		if info, err := os.Lstat(filepath.Join(c.dir, n)); err == nil && info.Mode().IsRegular() {
			all = append(all, kept{n, info.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(all, func(a, b kept) int { return cmp.Compare(a.mod, b.mod) })
	for _, k := range all[:max(0, len(all)-c.maxFiles*9/10)] {
		os.Remove(filepath.Join(c.dir, k.name))
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
