package baseline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchlake/batchlake/bench/gen"
)

// The baseline's three counts agree with the generator's truth: invalid
// lines are skipped, unknown ids are counted once, duplicates only for
// records that were sent.
func TestBaselineMatchesTruth(t *testing.T) {
	dir := t.TempDir()
	o := gen.DefaultOptions(3000, 11)
	o.Block = 256
	o.Rates = gen.Rates{ServerError: 0.05, RateLimit: 0.05, Expired: 0.05, BadRequest: 0.05, Missing: 0.05, Empty: 0.05, Duplicate: 0.1}
	o.Unknown, o.Corrupt = 4, 3
	var paths []string
	var files []*os.File
	for _, name := range []string{"input.jsonl", "output.jsonl", "errors.jsonl"} {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		files = append(files, f)
	}
	truth, err := gen.Generate(context.Background(), gen.Writers{Input: files[0], Output: files[1], Errors: files[2]}, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, keepBody := range []bool{false, true} {
		work := filepath.Join(dir, fmt.Sprintf("work-%v", keepBody))
		if err := os.Mkdir(work, 0o755); err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), Options{Input: paths[0], Output: paths[1], Errors: paths[2], WorkDir: work, Threads: 1, MemoryLimit: "256MB", KeepBody: keepBody})
		if err != nil {
			t.Fatalf("keep body %v: %v", keepBody, err)
		}
		check(t, res, truth)
	}
}

func check(t *testing.T, res Result, truth gen.Truth) {
	t.Helper()
	if res.Expected != truth.Expected || res.Missing != truth.Missing || res.Unknown != truth.Unknown || res.Duplicate != truth.Duplicate {
		t.Errorf("baseline expected/missing/unknown/duplicate = %d/%d/%d/%d, truth %d/%d/%d/%d",
			res.Expected, res.Missing, res.Unknown, res.Duplicate, truth.Expected, truth.Missing, truth.Unknown, truth.Duplicate)
	}
	if want := truth.Lines.Output + truth.Lines.Errors - truth.Quarantined; res.Rows.Output+res.Rows.Errors != want {
		t.Errorf("loaded %d result rows, want %d (every valid line)", res.Rows.Output+res.Rows.Errors, want)
	}
	if len(res.Steps) != 6 || res.Settings.Version == "" {
		t.Errorf("steps %v, settings %+v", res.Steps, res.Settings)
	}
}
