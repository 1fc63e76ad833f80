package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// CatalogResult is what the catalog command prints.
type CatalogResult struct {
	Database string `json:"database"`
	// Kind is "live" (a local lake: views over the lake's folders, by paths
	// relative to the catalog's folder) or "snapshot" (a remote lake: views
	// over the files cached when it was written).
	Kind string `json:"kind"`
	// Lake is the path the views read the lake by (live: relative to the
	// catalog's folder, which is where to open it from) or the lake's URL.
	Lake string `json:"lake"`
	// OpenFrom is the folder to open the catalog from (live catalogs).
	OpenFrom string `json:"open_from,omitempty"`
	// Files counts the table files the views read now.
	Files   int      `json:"files"`
	Views   []string `json:"views"`
	Sidecar string   `json:"sidecar"`
	// Static lists the live catalog's sources that had no file at all when
	// it was written: they read an empty stand-in until catalog --refresh.
	Static []string `json:"static,omitempty"`
	// Refreshed is true for catalog --refresh.
	Refreshed bool `json:"refreshed,omitempty"`
}

// catalogViews are the views a catalog database holds for analysts.
var catalogViews = []string{"manifests", "shards", "expected", "attempts", "quarantine", "outcomes", "records", "costs", "ledger",
	"accepted", "manual", "ingests", "batches", "report_files"}

// CatalogOptions are catalog's settings beside the lake and the engine's.
type CatalogOptions struct {
	Scope Scope
	// Refresh rebuilds an existing catalog of the same lake (CatalogInfo).
	Refresh bool
}

// CatalogInfo is what a catalog records about itself (its batchlake_catalog
// table), so that catalog --refresh rebuilds it from the same lake.
type CatalogInfo struct {
	Kind   string
	Lake   string // live: the lake folder relative to the catalog's; snapshot: the URL
	Tenant string
}

// ReadCatalogInfo reads what a catalog database records about itself; a
// file that is no batchlake catalog is bad usage.
func ReadCatalogInfo(ctx context.Context, path string) (*CatalogInfo, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("catalog --refresh %q: %v; write it first with catalog --out", path, err)}
	}
	info, err := readCatalogInfo(ctx, path)
	if err != nil {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("catalog --refresh %q: not a catalog batchlake wrote (%v)", path, err)}
	}
	return info, nil
}

// readCatalogInfo reads the batchlake_catalog table of the DuckDB database
// at path, attached read only.
func readCatalogInfo(ctx context.Context, path string) (*CatalogInfo, error) {
	c, err := duckdb.NewConnector("", nil)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	var info CatalogInfo
	err = execFile(ctx, db, "catalog_attach.sql", map[string]string{"Path": quote(path)})
	if err == nil {
		err = db.QueryRowContext(ctx, "SELECT kind, lake, tenant FROM catalog_db.batchlake_catalog").Scan(&info.Kind, &info.Lake, &info.Tenant)
	}
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// Catalog writes a DuckDB database whose views read the lake, for the DuckDB
// CLI, DBeaver or Python.
//
// For a local lake it is live: its views read the lake's folders by globs
// and the JSON markers each time they are queried (catalog_sources.sql), so
// new jobs, ingests and reconciles are seen without writing it again, and
// the paths are relative to the catalog's folder, so a copy of the folder
// holding both (or the catalog placed beside a copy of the lake at the same
// relative path) works too. DuckDB resolves relative paths against its
// current directory: the catalog is opened from its own folder.
//
// For a remote lake (DuckDB reads local files only) the views list the
// files committed when it ran, staged in the cache, and small tables built
// from the markers sit in a sidecar folder next to it: re-run it, or
// catalog --refresh, to see newer jobs.
func Catalog(ctx context.Context, l *lake.Lake, out string, o EngineOptions, co CatalogOptions) (*CatalogResult, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	// The database, its temporary file and its sidecar folder must not land
	// among the lake's files or the cache's, which they could overwrite.
	if err := GuardOutput(l, o.CacheDir, "catalog --out", abs, false); err != nil {
		return nil, err
	}
	if strings.Contains(abs, "?") {
		// DuckDB reads a '?' in a database path as the start of options
		// (its write-ahead log would go to another folder).
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("catalog --out %q: DuckDB cannot open a database whose path holds '?'; choose another path", out)}
	}
	lakeDir, live := l.LocalDir()
	res := &CatalogResult{Database: abs, Sidecar: abs + ".d", Views: catalogViews, Kind: "snapshot", Lake: l.URL, Refreshed: co.Refresh}
	if live {
		res.Kind, res.OpenFrom = "live", filepath.Dir(abs)
		if strings.Contains(res.OpenFrom, ",") {
			// The folder is DuckDB's file_search_path while the views are
			// made, and that setting is a comma-separated list.
			return nil, &errkind.UsageError{Msg: fmt.Sprintf("catalog --out %q: a live catalog's folder may not hold ','; choose another folder", out)}
		}
		if res.Lake, err = relPath(res.OpenFrom, lakeDir); err != nil {
			return nil, err
		}
		// The views' paths are DuckDB globs: a path of its own holding a
		// glob character would match other files, or none.
		for _, p := range []string{res.Lake, filepath.Base(res.Sidecar)} {
			if strings.ContainsAny(p, "*?[") {
				return nil, &errkind.UsageError{Msg: fmt.Sprintf("catalog --out %q: a live catalog reads the lake by the path %q, which holds a glob character (* ? [); move the catalog or the lake", out, p)}
			}
		}
	}
	if _, err := os.Stat(abs); err == nil && !co.Refresh {
		// Writing again replaces a catalog batchlake wrote, and nothing else:
		// --out naming the analyst's own file would have been lost.
		if _, err := readCatalogInfo(ctx, abs); err != nil {
			return nil, &errkind.UsageError{Msg: fmt.Sprintf("catalog --out %q: the file is there and is not a catalog batchlake wrote (%v); remove it or choose another path", out, err)}
		}
	}
	if co.Refresh {
		info, err := ReadCatalogInfo(ctx, abs)
		if err != nil {
			return nil, err
		}
		if info.Kind != res.Kind || info.Lake != res.Lake {
			return nil, &errkind.UsageError{Msg: fmt.Sprintf("catalog --refresh %q: it is a %s catalog of lake %q, not of %q; give that --lake (or write a new catalog without --refresh)",
				out, info.Kind, info.Lake, res.Lake)}
		}
		if co.Scope.Tenant == "" {
			co.Scope.Tenant = info.Tenant
		} else if co.Scope.Tenant != info.Tenant {
			return nil, &errkind.UsageError{Msg: fmt.Sprintf("catalog --refresh %q: it holds tenant %q, not %q", out, info.Tenant, co.Scope.Tenant)}
		}
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
	if live {
		// The views' paths are relative to the catalog's folder; the views
		// are bound (their files read) as they are made, here.
		err = e.ExecFile(ctx, "catalog_search_path.sql", map[string]string{"Dir": quote(res.OpenFrom)})
		if err == nil {
			res.Files, res.Static, err = e.liveViews(ctx, lakeDir, res.Lake, res.Sidecar, co.Scope)
		}
	} else {
		var files []string
		files, err = e.Views(ctx, co.Scope, "VIEW", res.Sidecar)
		res.Files = len(files)
	}
	if err == nil {
		err = e.ExecFile(ctx, "catalog_info.sql", map[string]string{"Kind": quote(res.Kind), "Lake": quote(res.Lake), "Tenant": quote(co.Scope.Tenant)})
	}
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
	return res, nil
}

// relPath is target relative to dir, with forward slashes (DuckDB's
// globs), or target itself where no relative path leads there.
func relPath(dir, target string) (string, error) {
	r, err := filepath.Rel(dir, target)
	if err != nil {
		return filepath.ToSlash(target), nil
	}
	return filepath.ToSlash(r), nil
}

// liveTable is one Parquet table of a live catalog: its view's name and the
// glob (or empty stand-in) it reads.
type liveTable struct{ Name, Glob string }

// liveViews makes a live catalog's views (catalog_sources.sql, then
// views.sql over them). rel is the lake's folder as the views name it,
// side the sidecar folder for empty stand-ins. It returns how many table
// files the views read now and the sources that had no file at all.
func (e *Engine) liveViews(ctx context.Context, lakeDir, rel, side string, scope Scope) (int, []string, error) {
	if err := os.MkdirAll(side, 0o755); err != nil {
		return 0, nil, err
	}
	sideRel := filepath.Base(side)
	var static []string
	// source returns the glob of a folder of the lake when it holds a file
	// matching it now, else the stand-in (made by empty).
	source := func(name, glob string, empty func() (string, error)) (string, error) {
		found, err := hasMatch(filepath.Join(lakeDir, filepath.FromSlash(glob)))
		if err != nil {
			return "", err
		}
		if found {
			return quote(rel + "/" + glob), nil
		}
		static = append(static, name)
		p, err := empty()
		if err != nil {
			return "", err
		}
		return quote(sideRel + "/" + filepath.Base(p)), nil
	}
	emptyJSON := func() (string, error) {
		p := filepath.Join(side, "empty.json")
		return p, os.WriteFile(p, nil, 0o644)
	}
	data := map[string]any{"Tenant": ""}
	if scope.Tenant != "" {
		data["Tenant"] = quote(scope.Tenant)
	}
	for _, m := range []struct{ key, glob string }{
		{"Manifests", "manifests/*.json"},
		{"Ledger", "ledger/*/*/*.json"},
		{"Ingests", "ingests/*/*.json"},
		{"Reports", "reports/*/*.json"},
	} {
		g, err := source(strings.ToLower(m.key), m.glob, emptyJSON)
		if err != nil {
			return 0, nil, err
		}
		data[m.key] = g
	}
	tenantDir := "*"
	if scope.Tenant != "" {
		tenantDir = "tenant=" + scope.Tenant
	}
	// A table's view reads its folder and its empty stand-in together, so
	// the view has today's columns even when every file in the folder was
	// written before a column existed (the stand-in's rows are none, and its
	// name is no file the markers name).
	withSchema := func(name, glob string, empty func() (string, error)) (string, error) {
		g, err := source(name, glob, empty)
		if err != nil || slices.Contains(static, name) {
			return g, err
		}
		p, err := empty()
		if err != nil {
			return "", err
		}
		return "[" + g + ", " + quote(sideRel+"/"+filepath.Base(p)) + "]", nil
	}
	var tables []liveTable
	for _, t := range []struct {
		name  string
		empty func() (string, error)
	}{
		{"expected", func() (string, error) { return emptyFile[lake.ExpectedRow](side) }},
		{"attempts", func() (string, error) { return emptyFile[lake.AttemptRow](side) }},
		{"quarantine", func() (string, error) { return emptyFile[lake.QuarantineRow](side) }},
		{"outcomes", func() (string, error) { return emptyFile[lake.OutcomeRow](side) }},
		{"costs", func() (string, error) { return emptyFile[lake.CostRow](side) }},
	} {
		g, err := withSchema(t.name, "tables/"+t.name+"/"+tenantDir+"/*/*.parquet", t.empty)
		if err != nil {
			return 0, nil, err
		}
		tables = append(tables, liveTable{Name: t.name, Glob: g})
	}
	data["Tables"] = tables
	q := make([]string, len(lake.ProviderTerminalStatuses))
	for i, s := range lake.ProviderTerminalStatuses {
		q[i] = quote(s)
	}
	data["Terminal"] = "(" + strings.Join(q, ", ") + ")"
	if err := e.ExecFile(ctx, "catalog_sources.sql", data); err != nil {
		return 0, nil, err
	}
	if err := e.ExecFile(ctx, "views.sql", map[string]string{"Kind": "VIEW",
		"Expected": "_lake_expected", "Attempts": "_lake_attempts", "Quarantine": "_lake_quarantine",
		"Outcomes": "_lake_outcomes", "Costs": "_lake_costs", "Manifests": "_lake_manifest_rows", "Shards": "_lake_shard_rows",
		"Ledger": "_lake_ledger_rows", "ReportFiles": "_lake_report_file_rows", "Ingests": "_lake_ingest_rows", "Batches": "_lake_batch_rows",
	}); err != nil {
		return 0, nil, err
	}
	var files int
	if err := e.DB.QueryRowContext(ctx, "SELECT count(DISTINCT key) FROM _lake_files").Scan(&files); err != nil {
		return 0, nil, fmt.Errorf("catalog: count the lake's files: %w", err)
	}
	return files, static, nil
}

// hasMatch reports whether a glob of the lake's folder matches any file.
func hasMatch(pattern string) (bool, error) {
	m, err := filepath.Glob(pattern)
	return len(m) > 0, err
}

// GuardOutput refuses (as bad usage) an output path of a command (flag
// names it) that is inside a local lake's folder or the cache of remote
// lakes' table files (cacheDir, "" for the default): a file written there
// could replace one of the lake's, which nothing may overwrite. It also
// refuses a folder where the command writes a file, and a file where it
// writes a folder (dir), which the write would fail on.
func GuardOutput(l *lake.Lake, cacheDir, flag, path string, dir bool) error {
	guarded := []string{CacheDir(cacheDir)}
	if dir, local := l.LocalDir(); local {
		guarded = append(guarded, dir)
	}
	for _, g := range guarded {
		if within(path, g) {
			return &errkind.UsageError{Msg: fmt.Sprintf("%s %q: inside %s, which only batchlake's own write-once writes may change; choose a path outside the lake and the cache", flag, path, g)}
		}
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() != dir {
		there, want := "a file", "a folder"
		if fi.IsDir() {
			there, want = "a folder", "a file"
		}
		return &errkind.UsageError{Msg: fmt.Sprintf("%s %q: %s is there, where it writes %s", flag, path, there, want)}
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
