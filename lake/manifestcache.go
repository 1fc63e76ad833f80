package lake

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gocloud.dev/blob"
)

// A remote lake's manifests, kept on local disk. A command about one job
// (its report, a retry, a retry child's submit) asks about the jobs related
// to it, and so reads every manifest in the lake: on an object store a
// request each, every time, for objects that never change. The listing that
// finds the manifests carries each one's MD5 (S3's ETag of a plain upload,
// GCS's and Azure's MD5); a manifest read once is kept in the cache folder
// under its job key and that MD5, and taken from there, its bytes hashed
// against the MD5 the listing gave, while the listing still gives it. A
// file of the folder, which anything on the machine may have written, is
// never trusted for more than that: one that does not hash to its MD5 is
// read from the lake again. An object whose listed MD5 is not its bytes'
// (an S3 ETag under SSE-KMS, a multipart upload) is not kept.
type manifestDisk struct {
	dir string
	mu  sync.Mutex
	// listed holds each manifest's MD5 as the latest listing gave it.
	listed map[Digest][]byte
}

// SetManifestCache keeps a remote lake's manifests in dir (created when
// first needed); "" keeps none. A local lake reads its manifests in place
// and keeps none.
func (l *Lake) SetManifestCache(dir string) {
	if l.dir != "" || dir == "" {
		l.mdisk = nil
		return
	}
	l.mdisk = &manifestDisk{dir: dir, listed: map[Digest][]byte{}}
}

// listManifestKeys lists the keys under ManifestPrefix, noting each one's
// MD5 for the manifest cache when the lake keeps one.
func (l *Lake) listManifestKeys(ctx context.Context) ([]string, error) {
	c := l.mdisk
	if c == nil {
		return l.listNames(ctx, ManifestPrefix)
	}
	type listed struct {
		key string
		md5 []byte
	}
	objs, err := retry(ctx, l, "list", ManifestPrefix, func(ctx context.Context) ([]listed, error) {
		var out []listed
		it := l.Bucket.List(&blob.ListOptions{Prefix: ManifestPrefix})
		for {
			o, err := it.Next(ctx)
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return nil, err
			}
			if !o.IsDir {
				out = append(out, listed{o.Key, o.MD5})
			}
		}
	})
	if err != nil {
		return nil, wrapOp("list", ManifestPrefix, err)
	}
	keys := make([]string, len(objs))
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, o := range objs {
		keys[i] = o.key
		name, _ := strings.CutSuffix(strings.TrimPrefix(o.key, ManifestPrefix), ".json")
		if d, err := ParseDigest(name); err == nil {
			if len(o.md5) == md5.Size {
				c.listed[d] = o.md5
			} else {
				delete(c.listed, d)
			}
		}
	}
	return keys, nil
}

// path is the cache file of job's manifest whose bytes hash to sum.
func (c *manifestDisk) path(job Digest, sum []byte) string {
	return filepath.Join(c.dir, job.Hex()+"-"+hex.EncodeToString(sum)+".json")
}

// get returns the cached bytes of job's manifest, and the MD5 its bytes
// must have (nil when no listing gave one: then nothing is cached).
func (c *manifestDisk) get(job Digest) (b, sum []byte) {
	c.mu.Lock()
	sum = c.listed[job]
	c.mu.Unlock()
	if sum == nil {
		return nil, nil
	}
	p := c.path(job, sum)
	b, err := os.ReadFile(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			slog.Warn("manifest cache: cannot read a cached manifest; reading it from the lake", "file", p, "err", err)
		}
		return nil, sum
	}
	if got := md5.Sum(b); !bytes.Equal(got[:], sum) {
		slog.Warn("manifest cache: a cached manifest does not match the lake's listing; reading it from the lake again",
			"file", p, "want_md5", hex.EncodeToString(sum), "got_md5", hex.EncodeToString(got[:]))
		return nil, sum
	}
	return b, sum
}

// put keeps b, the bytes of job's manifest as read from the lake, when
// they hash to sum, the MD5 the listing gave. A failure to write is only
// logged: the cache saves requests, the lake is what is read.
func (c *manifestDisk) put(job Digest, sum, b []byte) {
	if got := md5.Sum(b); sum == nil || !bytes.Equal(got[:], sum) {
		return
	}
	if err := c.write(c.path(job, sum), b); err != nil {
		slog.Warn("manifest cache: cannot keep a manifest", "dir", c.dir, "err", err)
	}
}

// write puts b at p whole or not at all (a temporary file renamed), so a
// process reading the folder at the same time never sees part of it.
func (c *manifestDisk) write(p string, b []byte) error {
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
