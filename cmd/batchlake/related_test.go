package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestJobCommandsReadTheirRecordsJobs: report, manual and cost of one job
// read only the jobs that can hold its records. The same records planned
// for another tenant, and for another prompt version, and records of other
// business keys under the same versions, are three jobs whose table files
// are then damaged: a session over the whole lake refuses them, the job's
// own commands do not read them and answer as before.
func TestJobCommandsReadTheirRecordsJobs(t *testing.T) {
	b := newBox(t)
	f := newFlowFiles(t)
	// The same flow with other business keys (set-… where the flow's are
	// req-…, all of them past the flow's): the next day's records of a
	// pipeline that keeps its versions.
	later := flowFiles{}
	for _, c := range []struct {
		from string
		to   *string
	}{{f.input, &later.input}, {f.output, &later.output}, {f.errors, &later.errors}} {
		data, err := os.ReadFile(c.from)
		if err != nil {
			t.Fatal(err)
		}
		*c.to = writeFile(t, filepath.Base(c.from), bytes.ReplaceAll(data, []byte(`"req-`), []byte(`"set-`)))
	}
	plan := func(f flowFiles, tenant, prompt string) string {
		job := jobOf(t, b.want([]int{0}, "plan", "--input", f.input, "--tenant", tenant, "--prompt-version", prompt, "--shard-max-records", "5"))
		// One result file in two jobs is refused without --force (its lines
		// would count twice); here it stands for each job's own answers.
		b.want([]int{0}, "ingest", "--job", job, "--output", f.output, "--errors", f.errors, "--force")
		b.want([]int{exitReview}, "reconcile", "--job", job)
		return job
	}
	job := plan(f, "acme", "p1")
	others := []string{plan(f, "other", "p1"), plan(f, "acme", "p2"), plan(later, "acme", "p1")}
	commands := [][]string{
		{"report", "--job", job},
		{"manual", "--job", job},
		{"cost", "--job", job},
		{"cost", "--job", job, "--estimate"},
	}
	before := map[string]string{}
	for _, c := range commands {
		before[strings.Join(c, " ")] = b.want([]int{0}, c...).stdout
	}
	// Damage every table file of the other jobs.
	damaged := 0
	err := filepath.WalkDir(filepath.Join(b.lake, "tables"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") || !slices.ContainsFunc(others, func(o string) bool { return strings.Contains(p, o) }) {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0xff
		os.Chmod(p, 0o644)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		damaged++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if damaged == 0 {
		t.Fatal("no table file of the other jobs found to damage: the test would prove nothing")
	}
	if r := b.do("report", "--all"); r.code == 0 {
		t.Fatalf("report --all read the damaged files without an error: the test would prove nothing: %s", r)
	}
	for _, c := range commands {
		r := b.do(c...)
		if r.code != 0 {
			t.Errorf("%s read another job's files: %s", strings.Join(c, " "), r)
			continue
		}
		if k := strings.Join(c, " "); r.stdout != before[k] {
			t.Errorf("%s: the answer changed:\n%s\nbefore:\n%s", k, r.stdout, before[k])
		}
	}
}
