package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/batchlake/batchlake/bench/gen"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "blgen:", err)
		os.Exit(1)
	}
}

func run() error {
	n := flag.Int64("n", 1_000_000, "records in the input file")
	seed := flag.Uint64("seed", 1, "random seed; the same seed and n give the same bytes")
	out := flag.String("out", "bench-data", "directory to write input.jsonl, output.jsonl, errors.jsonl and truth.json into")
	workers := flag.Int("workers", 0, "parallel renderers (0: all cores)")
	unknown := flag.Int("unknown", -1, "distinct unknown ids (-1: 3 + n/200000)")
	corrupt := flag.Int("corrupt", 2, "result lines that are not valid JSON")
	version := flag.Bool("version", false, "print the generator version (it names the output format) and exit")
	shuffle := flag.Bool("shuffle", false, "write input.shuffled.jsonl in -out: input.jsonl's lines in an order the seed fixes (memory bounded; temp files in -out), and exit")
	flag.Parse()
	if *version {
		fmt.Println(gen.Version)
		return nil
	}
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *shuffle {
		return shuffleInput(ctx, *out, *seed)
	}
	o := gen.DefaultOptions(*n, *seed)
	o.Workers = *workers
	o.Corrupt = *corrupt
	if *unknown >= 0 {
		o.Unknown = *unknown
	}

	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	// A stale truth.json must not vouch for files being rewritten.
	if err := os.Remove(filepath.Join(*out, "truth.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove old truth.json: %w", err)
	}
	start := time.Now()
	names := []string{"input.jsonl", "output.jsonl", "errors.jsonl"}
	files := make([]*outFile, len(names))
	for i, name := range names {
		f, err := createOut(filepath.Join(*out, name))
		if err != nil {
			return err
		}
		defer f.abort()
		files[i] = f
	}
	truth, err := gen.Generate(ctx, gen.Writers{Input: files[0].w, Output: files[1].w, Errors: files[2].w}, o)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := f.commit(); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(truth, "", "  ")
	if err != nil {
		return fmt.Errorf("encode truth: %w", err)
	}
	b = append(b, '\n')
	tf, err := createOut(filepath.Join(*out, "truth.json"))
	if err != nil {
		return err
	}
	defer tf.abort()
	if _, err := tf.w.Write(b); err != nil {
		return fmt.Errorf("write truth.json: %w", err)
	}
	if err := tf.commit(); err != nil {
		return err
	}
	el := time.Since(start)
	total := truth.Bytes.Input + truth.Bytes.Output + truth.Bytes.Errors
	fmt.Fprintf(os.Stderr, "blgen: %d records, %.1f MB in %s (%.0f MB/s)\n", truth.N, float64(total)/1e6, el.Round(time.Millisecond), float64(total)/1e6/el.Seconds())
	_, err = os.Stdout.Write(b)
	return err
}

// shuffleInput writes dir/input.shuffled.jsonl from dir/input.jsonl.
func shuffleInput(ctx context.Context, dir string, seed uint64) error {
	start := time.Now()
	src := filepath.Join(dir, "input.jsonl")
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := createOut(filepath.Join(dir, "input.shuffled.jsonl"))
	if err != nil {
		return err
	}
	defer out.abort()
	if err := gen.Shuffle(ctx, in, st.Size(), out.w, seed, dir, 64<<20); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	if err := out.commit(); err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(os.Stderr, "blgen: shuffled %.1f MB in %s\n", float64(st.Size())/1e6, el.Round(time.Millisecond))
	return nil
}

// outFile is a file written under a temporary name and renamed on commit.
type outFile struct {
	f    *os.File
	w    *bufio.Writer
	path string
	done bool
}

func createOut(path string) (*outFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &outFile{f: f, w: bufio.NewWriterSize(f, 1<<20), path: path}, nil
}

func (o *outFile) commit() error {
	if err := o.w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", o.path, err)
	}
	if err := o.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", o.path, err)
	}
	if err := os.Rename(o.f.Name(), o.path); err != nil {
		return fmt.Errorf("rename %s: %w", o.path, err)
	}
	o.done = true
	return nil
}

// abort removes the temporary file unless it was committed.
func (o *outFile) abort() {
	if o.done {
		return
	}
	o.f.Close()
	os.Remove(o.f.Name())
}
