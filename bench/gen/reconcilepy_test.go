package gen

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bench/reconcile.py, the Python reconciler make bench compares batchlake
// with, must count what the generator planted, like batchlake's report.
func TestPythonReconcilerMatchesTruth(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed; make bench runs the Python reconciler with it")
	}
	high := Rates{ServerError: 0.05, RateLimit: 0.05, Expired: 0.05, BadRequest: 0.05, Missing: 0.05, Empty: 0.05, Duplicate: 0.2}
	cases := []struct {
		name string
		opts func(*Options)
	}{
		{"default rates", func(o *Options) { o.N = 20_000; o.Block = 1024 }},
		{"high rates", func(o *Options) { o.N = 3001; o.Block = 256; o.Rates = high; o.Unknown = 7; o.Corrupt = 5 }},
		{"clean", func(o *Options) { o.N = 500; o.Rates = Rates{}; o.Unknown = 0; o.Corrupt = 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultOptions(0, 42)
			c.opts(&o)
			f, truth := generate(t, o)
			dir := t.TempDir()
			paths := []string{filepath.Join(dir, "input.jsonl"), filepath.Join(dir, "output.jsonl"), filepath.Join(dir, "errors.jsonl")}
			for i, b := range [][]byte{f.in.Bytes(), f.out.Bytes(), f.errs.Bytes()} {
				if err := os.WriteFile(paths[i], b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := exec.Command(py, append([]string{filepath.Join("..", "reconcile.py")}, paths...)...).Output()
			if err != nil {
				t.Fatalf("reconcile.py: %v", err)
			}
			var got Truth
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("reconcile.py printed %q: %v", out, err)
			}
			// What the reconciler does not report: the generator's own facts.
			got.Generator, got.N, got.Seed, got.Rates, got.Lines, got.Bytes = truth.Generator, truth.N, truth.Seed, truth.Rates, truth.Lines, truth.Bytes
			if got != truth {
				gj, _ := json.Marshal(got)
				tj, _ := json.Marshal(truth)
				t.Errorf("reconcile.py differs from the truth\ntruth:         %s\nreconcile.py:  %s", tj, gj)
			}
		})
	}
}
