package main

// Demo lakes, built once per test process and copied per test: many tests
// query the lake the simulator's whole loop leaves over the demo requests,
// and that run is the most expensive step of most of them. A lake holds
// no path of its own folder (objects are named by their keys, a manifest
// names its input file by base name), so a copy is the same lake: it
// verifies and answers the same, and each test writes only to its own.
//
// The tests that use them run in parallel with each other. run touches
// no process-wide state but two GC hints: a step sets the Go soft memory
// limit (debug.SetMemoryLimit) and restores it after, so concurrent steps
// may leave the process at one step's limit (some hundreds of MB, far
// above these tests' Go heap); and signal.NotifyContext, which any number
// of callers may hold. The tests that change the environment or the
// working directory (t.Setenv, t.Chdir) stay sequential, and Go runs no
// parallel test beside them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// demoInput is the demo requests by absolute path, so that a test that
// changed its working directory (t.Chdir) can still build a demo lake.
var demoInput = func() string {
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "demo", "requests.jsonl"))
	if err != nil {
		panic(err)
	}
	return p
}()

// demoRun is one `batchlake run --provider sim` over the demo requests,
// made once per test process into a folder of its own.
type demoRun struct {
	once       sync.Once
	lake       string         // the lake the run made; copied, never used
	res        map[string]any // run's JSON result
	start, end time.Time      // when run began and returned
	err        error
}

// jobKey is the first generation's job.
func (r *demoRun) jobKey() string { return r.res["job_key"].(string) }

var demoRuns struct {
	sync.Mutex
	root string // removed by TestMain
	runs map[string]*demoRun
}

// copyDemoLake copies into dst (which must not exist) the lake of
// `run --provider sim` over the demo requests for tenant acme and prompt
// v1 with extra flags, running it the first time it is asked for, and
// returns that run.
func copyDemoLake(t *testing.T, dst string, extra ...string) *demoRun {
	t.Helper()
	key := strings.Join(extra, "\x00")
	demoRuns.Lock()
	if demoRuns.runs == nil {
		demoRuns.runs = map[string]*demoRun{}
	}
	r := demoRuns.runs[key]
	if r == nil {
		r = new(demoRun)
		demoRuns.runs[key] = r
	}
	if demoRuns.root == "" {
		root, err := os.MkdirTemp("", "batchlake-demo-")
		if err != nil {
			demoRuns.Unlock()
			t.Fatal(err)
		}
		demoRuns.root = root
	}
	root := demoRuns.root
	demoRuns.Unlock()
	r.once.Do(func() {
		dir, err := os.MkdirTemp(root, "run-")
		if err != nil {
			r.err = err
			return
		}
		r.lake = filepath.Join(dir, "lake")
		args := append([]string{"run", "--lake", r.lake, "--provider", "sim", "--input", demoInput,
			"--tenant", "acme", "--prompt-version", "v1", "--poll", "1ms", "--progress", "never"}, extra...)
		var out, errb bytes.Buffer
		r.start = time.Now()
		code := run(args, &out, &errb)
		r.end = time.Now()
		d := json.NewDecoder(&out)
		d.UseNumber()
		if err := d.Decode(&r.res); err != nil || code != exitOK {
			r.err = fmt.Errorf("run %v: exit %d %v %s\n%s", extra, code, err, out.String(), errb.String())
		}
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := copyTree(r.lake, dst); err != nil {
		t.Fatalf("copy the demo lake: %v", err)
	}
	return r
}

// demoLake runs the simulator's whole loop on the demo requests (three
// generations with retries) into a new lake, with extra flags for run, and
// returns the lake and the first job's key. The lake is a copy of one run
// per set of flags (copyDemoLake), a folder named lake in a temporary
// folder of the test's own.
func demoLake(t *testing.T, extra ...string) (string, string) {
	t.Helper()
	lk := filepath.Join(t.TempDir(), "lake")
	return lk, copyDemoLake(t, lk, extra...).jobKey()
}

// copyTree copies the folder src to dst (which must not exist), keeping
// the files' permissions: a lake's objects are read-only.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(to, info.Mode().Perm())
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
			if err != nil {
				return err
			}
			_, err = f.Write(b)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		default:
			return fmt.Errorf("%s: not a file or folder", p)
		}
	})
}
