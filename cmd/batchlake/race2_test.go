package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestConcurrentSteps starts N batchlake processes (4; 8 under
// BATCHLAKE_LONG) running the same step of the same job at once — plan,
// ingest, reconcile, retry — and proves they end in the state one process
// reaches: each exits with the step's success code (reconcile: or 1, having
// met the winner's RECONCILING lease: "retry the step"), at least one succeeds,
// and after one more run (an orchestrator's retry) the lake equals the
// uninterrupted run's — the same keys and marker bodies, one report per job,
// attempts unique by (raw_sha256, line_no), the costs view summing to a single
// run's, and `verify` exit 0.
func TestConcurrentSteps(t *testing.T) {
	want, _ := flowBaseline(t)
	n := 4
	if longRun() {
		n = 8
	}
	for k, name := range []string{"plan", "ingest", "reconcile", "retry"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBox(t)
			f := newFlowFiles(t)
			steps := flowSteps(f)
			var job string
			for i, s := range steps {
				if i == k {
					codes := b.race(n, s.args(job))
					if !slices.ContainsFunc(codes, func(c int) bool { return slices.Contains(s.ok, c) }) {
						t.Errorf("%d concurrent %s: no process succeeded: exit codes %v", n, name, codes)
					}
					// Only reconcile has losers: its RECONCILING lease admits one
					// process, the others exit 75 (try later) naming the lease.
					allowed := s.ok
					if name == "reconcile" {
						allowed = append(allowed, exitTempFail)
					}
					for _, c := range codes {
						if !slices.Contains(allowed, c) {
							t.Errorf("%d concurrent %s: exit codes %v, want only %v", n, name, codes, allowed)
						}
					}
				}
				r := b.runStep(s, job)
				if s.name == "plan" {
					job = jobOf(t, r)
				}
			}
			b.verify()
			problems, lost := want.diff(takeSnapshot(t, b.lake))
			for _, p := range problems {
				t.Error(p)
			}
			if dup := b.sqlCount("SELECT count(*) - count(DISTINCT (raw_sha256, line_no)) FROM attempts"); dup != 0 {
				t.Errorf("%v duplicate attempt rows", dup)
			}
			if rows := b.sqlCount("SELECT count(*) FROM attempts"); rows != baselineFlow.attempts {
				t.Errorf("%v attempt rows, a single run has %v", rows, baselineFlow.attempts)
			}
			if cost := b.sqlCount("SELECT sum(cost_usd::DOUBLE) FROM costs"); cost != baselineFlow.cost {
				t.Errorf("costs sum to %v, a single run's to %v", cost, baselineFlow.cost)
			}
			record(t, "concurrency", fmt.Sprintf("%d processes run %s at once", n, name), len(problems) == 0, lost)
		})
	}
}

// race starts n processes with args at the same instant and returns their exit codes.
func (b *box) race(n int, args []string) []int {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{args[0], "--lake", b.lake, "--tmp-dir", b.tmp, "--progress", "never", "--log-format", "json", "--threads", "1"}, args[1:]...)
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	ps := make([]*proc, n)
	for i := range ps {
		p := &proc{cmd: exec.CommandContext(ctx, b.bin, full...)}
		p.cmd.Env, p.cmd.Dir = b.env("HOME="+b.cwd), b.cwd
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		ps[i] = p
	}
	var wg sync.WaitGroup
	for _, p := range ps {
		if err := p.cmd.Start(); err != nil {
			b.t.Fatal(err)
		}
	}
	codes := make([]int, n)
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := b.wait(p.cmd, &p.stdout, &p.stderr, args)
			codes[i] = r.code
			if r.killed || bytes.Contains(p.stderr.Bytes(), []byte("panic:")) {
				b.t.Errorf("concurrent run crashed: %s", r)
			}
			if r.code == exitError {
				b.t.Logf("loser: %s", r.stderr)
			}
		}()
	}
	wg.Wait()
	return codes
}
