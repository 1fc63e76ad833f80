package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/batchlake/batchlake/lake"
)

// stager gives DuckDB local paths for lake files, each checked against the
// digest in its name once per session, before DuckDB reads it. A local
// lake's files are used in place; a remote lake's files are downloaded into
// a cache named by digest, bounded in size, and a cached file that no longer
// matches its digest is fetched again (with a warning).
type stager struct {
	lake     *lake.Lake
	dir      string
	maxBytes int64
	checked  map[string]string
	// onStage is EngineOptions.OnStage.
	onStage func(key string, size int64)
}

func newStager(l *lake.Lake, dir string, maxBytes int64) (*stager, error) {
	if maxBytes <= 0 {
		maxBytes = 4 << 30
	}
	s := &stager{lake: l, maxBytes: maxBytes, checked: map[string]string{}}
	if _, local := l.LocalDir(); local {
		return s, nil
	}
	dir = CacheDir(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}
	s.dir = dir
	return s, nil
}

// CacheDir is the cache folder of a remote lake's table files: dir, or by
// default batchlake under the user cache dir.
func CacheDir(dir string) string {
	if dir != "" {
		return dir
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "batchlake")
}

func (s *stager) local(ctx context.Context, key string) (string, error) {
	if p, ok := s.checked[key]; ok {
		return p, nil
	}
	d, ok := lake.ParseObjectKey(key)
	if !ok {
		return "", fmt.Errorf("stage %s: not a content-addressed key", key)
	}
	var p string
	if _, local := s.lake.LocalDir(); local {
		var size int64
		var err error
		if p, size, err = s.checkLocal(ctx, key, d); err != nil {
			return "", err
		}
		if s.onStage != nil {
			s.onStage(key, size)
		}
	} else {
		var fetched bool
		var err error
		if p, fetched, err = s.cached(ctx, key, d); err != nil {
			return "", err
		}
		if fetched {
			s.evict()
		}
	}
	s.checked[key] = p
	return p, nil
}

// cached returns the path of a remote lake's file of key (digest d) in the
// cache, fetching it there unless the cache holds its bytes (fetched). It
// neither records the file as checked nor evicts: a caller staging several
// files at once does both once they are all in place.
func (s *stager) cached(ctx context.Context, key string, d lake.Digest) (p string, fetched bool, err error) {
	p = filepath.Join(s.dir, d.Hex()+filepath.Ext(key))
	// A cache hit is re-hashed like any read of the lake: the cache is a
	// plain folder that anything on the machine may have written.
	got, _, err := lake.HashFile(p)
	switch {
	case err == nil && got == d:
		t := time.Now()
		os.Chtimes(p, t, t) // LRU by modification time
		return p, false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("stage %s: cache: %w", key, err)
	}
	if err == nil {
		slog.Warn("cache: a cached table file does not match its digest; fetching it again from the lake",
			"file", p, "want", d.String(), "got", got.String())
		if err := os.Remove(p); err != nil {
			return "", false, fmt.Errorf("stage %s: cache: %w", key, err)
		}
	}
	if err := s.fetch(ctx, key, d, p); err != nil {
		return "", false, err
	}
	return p, true, nil
}

// localAll is local for each of keys, in order. A local lake's files are
// hashed several at a time: a reconcile checks some 50 table files of a
// million-record job (131 MB) before DuckDB reads them, one core's work
// otherwise. A remote lake's are fetched remoteFetches at a time: each is a
// request's wait and a download.
func (s *stager) localAll(ctx context.Context, keys []string) ([]string, error) {
	if err := s.checkAll(ctx, keys); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		p, err := s.local(ctx, k)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// checkAll checks (a remote lake's: fetches) the files of keys not yet
// checked, several at a time, so that local finds each checked. A step
// that reads several tables checks all their files at once.
func (s *stager) checkAll(ctx context.Context, keys []string) error {
	if len(keys) <= 1 {
		return nil
	}
	if _, local := s.lake.LocalDir(); local {
		return s.hashLocal(ctx, keys)
	}
	return s.fetchAll(ctx, keys)
}

// hashLocal checks the local lake's files of keys not yet checked against
// their digests, on all cores, and marks them checked in keys' order.
func (s *stager) hashLocal(ctx context.Context, keys []string) error {
	type file struct {
		key, path string
		size      int64
	}
	var todo []file
	for _, k := range s.unchecked(keys) {
		todo = append(todo, file{key: k})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	// Two files at a time on each core, hashed together (lake.HashFilePair).
	for i := 0; i < len(todo); i += 2 {
		f := todo[i:min(i+2, len(todo))]
		g.Go(func() error {
			var ds [2]lake.Digest
			for j := range f {
				d, ok := lake.ParseObjectKey(f[j].key)
				if !ok {
					return fmt.Errorf("stage %s: not a content-addressed key", f[j].key)
				}
				ds[j] = d
			}
			if len(f) == 1 {
				var err error
				f[0].path, f[0].size, err = s.checkLocal(gctx, f[0].key, ds[0])
				return err
			}
			pa, pb := s.lake.LocalPath(f[0].key), s.lake.LocalPath(f[1].key)
			da, na, db, nb, err := lake.HashFilePair(gctx, pa, pb)
			if err != nil {
				return fmt.Errorf("stage %s and %s: %w", f[0].key, f[1].key, err)
			}
			for j, got := range []lake.Digest{da, db} {
				if got != ds[j] {
					return corrupt(f[j].key, got)
				}
			}
			f[0].path, f[0].size, f[1].path, f[1].size = pa, na, pb, nb
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, f := range todo {
		if s.onStage != nil {
			s.onStage(f.key, f.size)
		}
		s.checked[f.key] = f.path
	}
	return nil
}

// unchecked lists the keys not yet checked this session, each once, in
// keys' order.
func (s *stager) unchecked(keys []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if _, ok := s.checked[k]; !ok && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// remoteFetches is how many of a remote lake's files a stage fetches at a
// time: a job's tables split by partition are sixteen files each, and its
// attempts sixteen a result file.
const remoteFetches = 32

// fetchAll puts a remote lake's files of keys not yet checked into the
// cache, remoteFetches at a time, and marks them checked in keys' order; the
// cache's bound is kept once they are all in place (every one in use).
func (s *stager) fetchAll(ctx context.Context, keys []string) error {
	todo := s.unchecked(keys)
	paths := make([]string, len(todo))
	var fetched atomic.Bool
	err := lake.EachOf(ctx, len(todo), remoteFetches, func(ctx context.Context, i int) error {
		d, ok := lake.ParseObjectKey(todo[i])
		if !ok {
			return fmt.Errorf("stage %s: not a content-addressed key", todo[i])
		}
		p, f, err := s.cached(ctx, todo[i], d)
		if f {
			fetched.Store(true)
		}
		paths[i] = p
		return err
	})
	if err != nil {
		return err
	}
	for i, k := range todo {
		s.checked[k] = paths[i]
	}
	if fetched.Load() {
		s.evict()
	}
	return nil
}

// corrupt is the error of a file of key whose bytes hash to got, not to the
// digest its key names.
func corrupt(key string, got lake.Digest) error {
	return fmt.Errorf("stage %s: content hashes to %s: %w", key, got, lake.ErrCorrupt)
}

// checkLocal hashes a local lake's file of key against its digest d and
// returns its path and size.
func (s *stager) checkLocal(ctx context.Context, key string, d lake.Digest) (string, int64, error) {
	p := s.lake.LocalPath(key)
	got, size, err := lake.HashFileContext(ctx, p)
	if err != nil {
		return "", 0, fmt.Errorf("stage %s: %w", key, err)
	}
	if got != d {
		return "", 0, corrupt(key, got)
	}
	return p, size, nil
}

func (s *stager) fetch(ctx context.Context, key string, d lake.Digest, p string) error {
	r, err := s.lake.OpenVerified(ctx, key, d)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.CreateTemp(s.dir, ".fetch-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("stage %s: %w", key, err)
	}
	// Read-only, like a local lake's objects: DuckDB reads the file, and
	// (unless it runs as root) cannot open it for writing.
	if err := f.Chmod(0o444); err != nil {
		f.Close()
		return fmt.Errorf("stage %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}

// evict removes the least recently used cache entries above the bound.
func (s *stager) evict() {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	type ent struct {
		path string
		size int64
		mod  int64
	}
	var all []ent
	var total int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || e.IsDir() || strings.HasPrefix(e.Name(), ".fetch-") {
			continue // a fetch in flight (this process's or another's)
		}
		all = append(all, ent{filepath.Join(s.dir, e.Name()), info.Size(), info.ModTime().UnixNano()})
		total += info.Size()
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod < all[j].mod })
	inUse := map[string]bool{}
	for _, p := range s.checked {
		inUse[p] = true
	}
	for _, e := range all {
		if total <= s.maxBytes {
			break
		}
		if inUse[e.path] {
			continue
		}
		if os.Remove(e.path) == nil {
			total -= e.size
		}
	}
}
