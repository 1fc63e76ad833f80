package reconcile

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// retryMemoryLimit is DuckDB's memory limit once the outcomes and costs
// tables are written. What DuckDB still does (the records to retry, read in
// shard order) needs little, and the memory it gives back is what the retry
// shards' reads in Go use (at 10M records the retry then peaked at about
// 0.6 GiB instead of 0.8, in the same time, measured while DuckDB's allocator
// still gave freed pages back to the kernel after one second).
const retryMemoryLimit = 128 << 20

// releaseMemory hands the kernel the pages DuckDB's allocator keeps freed
// for its own next allocations (jemalloc keeps them three seconds,
// internal/duckalloc), by setting the session's memory limit again: DuckDB
// flushes its allocator whenever the limit is set. Reconcile calls it where
// the Go side takes over (the outcomes and costs tables): the Go heap and the
// page cache then take pages the process has just given back, which the host
// still backs, instead of fresh ones, which on a virtual machine that reports
// its free pages to the host cost a fault the host must serve (about 3 ms a
// 2 MiB page, docs/performance.md). A session at DuckDB's default limit, or
// one parseMemoryLimit does not read, keeps its pages: RESET memory_limit
// does not flush.
func (e *Engine) releaseMemory(ctx context.Context) error {
	if e.memoryLimit == math.MaxInt64 || e.memoryLimit>>10 <= 0 {
		return nil
	}
	return e.setMemoryLimit(ctx, e.memoryLimit)
}

// setMemoryLimit sets the session's memory limit to bytes, to the KiB.
func (e *Engine) setMemoryLimit(ctx context.Context, bytes int64) error {
	kib := bytes >> 10
	if err := e.ExecFile(ctx, "memory_limit.sql", map[string]any{"Limit": quote(fmt.Sprintf("%dKiB", kib))}); err != nil {
		return err
	}
	e.memoryLimit = kib << 10
	return nil
}

// memoryLimitRE is DuckDB's syntax for a memory limit: a number and a unit,
// decimal (KB, MB, ...) or binary (KiB, MiB, ...).
var memoryLimitRE = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$`)

// memoryUnits are the units of memoryLimitRE, in bytes.
var memoryUnits = map[string]float64{
	"": 1, "b": 1, "byte": 1, "bytes": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// parseMemoryLimit reads a memory limit in DuckDB's syntax ("384MB",
// "1.5 GiB"). "" is DuckDB's default, a share of the machine's memory, and
// counts as unlimited. ok is false for what it does not read, so a caller
// leaves such a limit alone.
func parseMemoryLimit(s string) (bytes int64, ok bool) {
	if strings.TrimSpace(s) == "" {
		return math.MaxInt64, true
	}
	m := memoryLimitRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, false
	}
	u, found := memoryUnits[strings.ToLower(m[2])]
	if !found || n*u >= math.MaxInt64 {
		return 0, false
	}
	return int64(n * u), true
}

// lowerMemoryLimit sets DuckDB's memory limit to bytes if the session's
// limit is higher (DuckDB then evicts and frees what is over it). A lower
// limit, or one parseMemoryLimit does not read, is left as it is.
func (e *Engine) lowerMemoryLimit(ctx context.Context, bytes int64) error {
	if e.memoryLimit <= bytes {
		return nil
	}
	return e.setMemoryLimit(ctx, bytes)
}
