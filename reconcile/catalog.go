package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// CatalogResult is what the catalog command prints.
type CatalogResult struct {
	Database string   `json:"database"`
	Files    int      `json:"files"`
	Views    []string `json:"views"`
	Sidecar  string   `json:"sidecar"`
}

// Catalog writes a DuckDB database whose views read the lake's committed
// files, for the DuckDB CLI, DBeaver or Python. Small tables built from the
// lake's JSON markers (manifests, shards, ledger) are written as Parquet in a
// sidecar folder next to it. A remote lake's files are read from the cache.
// Re-run it to see newer jobs: the views list the files committed when it ran.
func Catalog(ctx context.Context, l *lake.Lake, out string, o EngineOptions, scope Scope) (*CatalogResult, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	// The database, its temporary file and its sidecar folder must not land
	// among the lake's files or the cache's, which they could overwrite.
	if err := GuardOutput(l, o.CacheDir, "catalog --out", abs); err != nil {
		return nil, err
	}
	if strings.Contains(abs, "?") {
		// DuckDB reads a '?' in a database path as the start of options
		// (its write-ahead log would go to another folder).
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("catalog --out %q: DuckDB cannot open a database whose path holds '?'; choose another path", out)}
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, err
	}
	tmp := abs + ".tmp"
	os.Remove(tmp)
	o.Database = tmp
	e, err := OpenEngine(l, o)
	if err != nil {
		return nil, err
	}
	side := abs + ".d"
	files, err := e.Views(ctx, scope, "VIEW", side)
	if err == nil {
		_, err = e.DB.ExecContext(ctx, "CHECKPOINT")
	}
	if cerr := e.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("catalog %s: %w", out, err)
	}
	// Appear complete or not at all.
	if err := os.Rename(tmp, abs); err != nil {
		return nil, err
	}
	return &CatalogResult{Database: abs, Files: len(files), Sidecar: side,
		Views: []string{"manifests", "shards", "expected", "attempts", "quarantine", "outcomes", "records", "costs", "ledger", "accepted", "manual", "ingests", "batches"}}, nil
}

// GuardOutput refuses (as bad usage) an output path of a command (flag
// names it) that is inside a local lake's folder or the cache of remote
// lakes' table files (cacheDir, "" for the default): a file written there
// could replace one of the lake's, which nothing may overwrite.
func GuardOutput(l *lake.Lake, cacheDir, flag, path string) error {
	guarded := []string{CacheDir(cacheDir)}
	if dir, local := l.LocalDir(); local {
		guarded = append(guarded, dir)
	}
	for _, g := range guarded {
		if within(path, g) {
			return &errkind.UsageError{Msg: fmt.Sprintf("%s %q: inside %s, which only batchlake's own write-once writes may change; choose a path outside the lake and the cache", flag, path, g)}
		}
	}
	return nil
}

// within reports whether path is dir or under it, both made absolute and
// with symbolic links resolved as far as they exist.
func within(path, dir string) bool {
	resolve := func(p string) string {
		p, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		// Resolve the longest existing prefix: the file itself may not exist yet.
		rest := ""
		for q := p; ; q = filepath.Dir(q) {
			if r, err := filepath.EvalSymlinks(q); err == nil {
				return filepath.Join(r, rest)
			}
			if filepath.Dir(q) == q {
				return p
			}
			rest = filepath.Join(filepath.Base(q), rest)
		}
	}
	rel, err := filepath.Rel(resolve(dir), resolve(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
