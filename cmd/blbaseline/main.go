package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/batchlake/batchlake/bench/baseline"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "blbaseline:", err)
		os.Exit(1)
	}
}

func run() error {
	data := flag.String("data", "bench-data", "directory holding input.jsonl, output.jsonl and errors.jsonl")
	input := flag.String("input", "", "input JSONL (default DATA/input.jsonl)")
	output := flag.String("output", "", "output JSONL (default DATA/output.jsonl)")
	errs := flag.String("errors", "", "error JSONL (default DATA/errors.jsonl)")
	work := flag.String("work", "", "empty directory for the Parquet and spill files (required)")
	threads := flag.Int("threads", 0, "DuckDB threads (0: all cores)")
	mem := flag.String("memory-limit", "512MB", "DuckDB memory_limit")
	tmp := flag.String("temp-dir", "", "DuckDB temp_directory (default WORK/duckdb-tmp)")
	keepBody := flag.Bool("keep-body", false, "also copy each request body (as JSON) into the input Parquet")
	contract := flag.Bool("contract", false, "run the contract floor instead of the three set queries: the lake tables batchlake writes (expected, a shard, outcomes, costs, the raw files), made by DuckDB alone (no Parquet copy of the input)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if *work == "" {
		return fmt.Errorf("-work is required")
	}
	def := func(p *string, name string) {
		if *p == "" {
			*p = filepath.Join(*data, name)
		}
	}
	def(input, "input.jsonl")
	def(output, "output.jsonl")
	def(errs, "errors.jsonl")
	if err := os.MkdirAll(*work, 0o755); err != nil {
		return fmt.Errorf("create work directory: %w", err)
	}
	if ents, err := os.ReadDir(*work); err != nil {
		return fmt.Errorf("read work directory: %w", err)
	} else if len(ents) > 0 {
		return fmt.Errorf("work directory %s is not empty", *work)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := baseline.Run(ctx, baseline.Options{Input: *input, Output: *output, Errors: *errs, WorkDir: *work, Threads: *threads, MemoryLimit: *mem, TempDir: *tmp, KeepBody: *keepBody, Contract: *contract})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}
