package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/batchlake/batchlake/internal/duckalloc"
	"github.com/batchlake/batchlake/internal/hugepages"
	"github.com/batchlake/batchlake/lake"
)

// versionInfo is what `batchlake --version` prints: which build this is and
// which lake formats it writes, so a lake's reader can tell whether a binary
// understands it.
type versionInfo struct {
	Version         string   `json:"version"`
	Revision        string   `json:"vcs_revision,omitempty"`
	Modified        bool     `json:"vcs_modified,omitempty"`
	Go              string   `json:"go"`
	LakeFormats     []string `json:"lake_formats"`
	ManifestVersion int      `json:"manifest_version"`
	IngestVersion   int      `json:"ingest_version"`
	// CompactionVersion is the compaction markers' version it writes (it
	// reads version 1 too).
	CompactionVersion int `json:"compaction_version"`
	// DuckDBAllocator is how DuckDB's own allocator returns freed memory
	// (allocator.go), when DuckDB has one.
	DuckDBAllocator string `json:"duckdb_allocator,omitempty"`
	// HugePages says whether large anonymous mappings are advised to use
	// transparent huge pages (internal/hugepages): "advised" or "off".
	HugePages string `json:"huge_pages"`
}

// buildVersion reads the version from the build info: the module version
// when built from a tagged module (go install …@v1.2.3), else the VCS
// revision the binary was built from, else "devel".
func buildVersion(bi *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{Version: "devel", Go: runtime.Version(), LakeFormats: lake.Formats(),
		ManifestVersion: lake.ManifestVersion, IngestVersion: lake.IngestSplitVersion, CompactionVersion: lake.CompactionVersion}
	if !ok || bi == nil {
		return v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	switch {
	case bi.Main.Version != "" && bi.Main.Version != "(devel)":
		v.Version = bi.Main.Version
	case v.Revision != "":
		v.Version = v.Revision
		if v.Modified {
			v.Version += "-dirty"
		}
	}
	return v
}

func currentVersion() versionInfo {
	v := buildVersion(debug.ReadBuildInfo())
	v.HugePages = "off"
	if hugepages.Enabled() {
		v.HugePages = "advised"
	}
	if dirty, muzzy, ok := duckalloc.Settings(); ok {
		v.DuckDBAllocator = fmt.Sprintf("jemalloc dirty_decay_ms=%d muzzy_decay_ms=%d", dirty, muzzy)
	}
	return v
}
