package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// otherJob plans a job of 12 records with ids b-0000…b-0011 (another input
// than the flow's) and returns its key and an output file answering all of
// them with success.
func otherJob(t *testing.T, b *box) (job, output string) {
	t.Helper()
	var in, out strings.Builder
	for i := range flowN {
		id := fmt.Sprintf("b-%04d", i)
		in.WriteString(requestLine(id, fmt.Sprintf("Name item %d.", i)) + "\n")
		out.WriteString(successLine(id, 50, 10, fmt.Sprintf("b item %d", i)) + "\n")
	}
	input := writeFile(t, "b-input.jsonl", []byte(in.String()))
	job = jobOf(t, b.want([]int{0}, "plan", "--input", input, "--tenant", "acme", "--prompt-version", "p1", "--shard-max-records", "5"))
	return job, writeFile(t, "b-output.jsonl", []byte(out.String()))
}

// lakeFiles lists every file of a local lake.
func lakeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, strings.TrimPrefix(p, dir))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fileDigest(t *testing.T, p string) string {
	t.Helper()
	d, _, err := lake.HashFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return d.Hex()
}

type reportWithRetracted struct {
	report
	Files struct {
		InputShards []string `json:"input_shards"`
		Output      []string `json:"output"`
		Retracted   []string `json:"retracted"`
	} `json:"files"`
}

// TestIngestWrongJobRetract: another job's output file given to ingest is
// refused (exit 2, nothing written) naming the job it belongs to; forced in,
// it makes the job's reconcile exit 11; retracted, the job reconciles as if
// it had never been ingested, while its lines stay in the attempts view.
func TestIngestWrongJobRetract(t *testing.T) {
	b := newBox(t)
	f := newFlowFiles(t)
	flowJob := jobOf(t, b.want([]int{0}, flowSteps(f)[0].args("")...))
	job, own := otherJob(t, b)
	b.want([]int{0}, "ingest", "--job", job, "--output", own)
	var before reportWithRetracted
	decode(t, b.want([]int{0}, "reconcile", "--job", job), &before)
	if before.State != "COMPLETED" || before.Succeeded != flowN {
		t.Fatalf("the job's own file: %s", before.counts())
	}

	// The flow's output (11 lines with an id, none of them this job's).
	files := lakeFiles(t, b.lake)
	r := b.want([]int{exitUsage}, "ingest", "--job", job, "--output", f.output)
	for _, want := range []string{"only 0 of its 11 lines with an id carry an id of job " + job,
		"10 of them are ids of job " + flowJob + " (tenant acme)", "--force"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("refusal does not say %q: %s", want, r)
		}
	}
	if after := lakeFiles(t, b.lake); !slices.Equal(after, files) {
		t.Errorf("a refused ingest wrote to the lake: %d files before, %d after", len(files), len(after))
	}

	b.want([]int{0}, "ingest", "--job", job, "--output", f.output, "--force")
	var mixed reportWithRetracted
	decode(t, b.want([]int{exitReview}, "reconcile", "--job", job), &mixed)
	if mixed.Unknown != 10 || mixed.RetryRecords != 0 {
		t.Errorf("forced in: unknown %d, retry_records %d; want the flow file's 10 ids, nothing to retry", mixed.Unknown, mixed.RetryRecords)
	}
	// The orchestrator rule from the exit code alone (README "Exit codes"):
	// retry after an 11 with nothing to retry exits 0 and makes no child.
	var rr struct {
		Child   *planOut `json:"child"`
		Message string   `json:"message"`
	}
	decode(t, b.want([]int{0}, "retry", "--job", job), &rr)
	if rr.Child != nil || rr.Message != "nothing to retry" {
		t.Errorf("retry after 11 without retry records: %+v, want no child", rr)
	}

	raw := fileDigest(t, f.output)
	var ret struct {
		RawSHA256 string   `json:"raw_sha256"`
		Channels  []string `json:"channels"`
		Created   bool     `json:"created"`
		Message   string   `json:"message"`
	}
	decode(t, b.want([]int{0}, "ingest", "--job", job, "--retract", raw, "--reason", "wrong job"), &ret)
	if !ret.Created || ret.RawSHA256 != raw || !slices.Equal(ret.Channels, []string{"output"}) {
		t.Errorf("retract: %+v", ret)
	}
	decode(t, b.want([]int{0}, "ingest", "--job", job, "--retract", "sha256-"+raw), &ret)
	if ret.Created || !strings.Contains(ret.Message, "already retracted") {
		t.Errorf("retracting twice: %+v, want already retracted, nothing written", ret)
	}

	var back reportWithRetracted
	decode(t, b.want([]int{0}, "reconcile", "--job", job), &back)
	if back.counts() != before.counts() {
		t.Errorf("after the retraction %s; before the wrong file %s", back.counts(), before.counts())
	}
	if !slices.Equal(back.Files.Retracted, []string{raw}) || slices.Contains(back.Files.Output, raw) {
		t.Errorf("report files: output %v, retracted %v; want %s retracted only", back.Files.Output, back.Files.Retracted, raw)
	}
	// Archived and visible all the same.
	if n := b.sqlCount(fmt.Sprintf("SELECT count(*) FROM attempts WHERE job_key = '%s' AND raw_sha256 = '%s'", job, raw)); n != 11 {
		t.Errorf("attempts view: %v rows of the retracted file, want its 11", n)
	}
	// Ingested again (no --force needed: it is in the job already, nothing
	// new is written), it stays out.
	r = b.want([]int{0}, "ingest", "--job", job, "--output", f.output)
	if !strings.Contains(r.stderr, "retracted") {
		t.Errorf("ingesting a retracted file again does not say it is retracted: %s", r)
	}
	decode(t, b.want([]int{0}, "reconcile", "--job", job), &back)
	if back.counts() != before.counts() {
		t.Errorf("after ingesting the retracted file again: %s", back.counts())
	}
	// Partitions and their merge leave it out as a single reconcile does.
	b.want([]int{0}, "reconcile", "--job", job, "--partition", "0/2")
	b.want([]int{0}, "reconcile", "--job", job, "--partition", "1/2")
	var merged reportWithRetracted
	decode(t, b.want([]int{0}, "reconcile", "--job", job, "--merge"), &merged)
	if merged.counts() != before.counts() || !slices.Equal(merged.Files.Retracted, []string{raw}) {
		t.Errorf("merge of partitions: %s, retracted %v; want %s, [%s]", merged.counts(), merged.Files.Retracted, before.counts(), raw)
	}
	b.verify()
	b.contained()

	for _, c := range []struct{ name, digest string }{
		{"a digest never ingested into the job", fileDigest(t, f.errors)},
		{"the job's own input shard", back.Files.InputShards[0]},
		{"not a digest", "output.jsonl"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := b.want([]int{exitUsage}, "ingest", "--job", job, "--retract", c.digest)
			if !strings.Contains(r.stdout, "--retract") {
				t.Errorf("refusal does not name --retract: %s", r)
			}
		})
	}
	// The flow's own job: its errors file was ingested there, not here.
	b.want([]int{exitUsage}, "ingest", "--job", flowJob, "--retract", raw)
}

// TestIngestMinMatch: the share of a file's lines with an id that must carry
// an id of the job, at the threshold and around it.
func TestIngestMinMatch(t *testing.T) {
	b := newBox(t)
	job, _ := otherJob(t, b)
	file := func(name string, known, unknown, garbage int) string {
		var s strings.Builder
		for i := range known {
			s.WriteString(successLine(fmt.Sprintf("b-%04d", i), 10, 5, name) + "\n")
		}
		for i := range unknown {
			s.WriteString(successLine(fmt.Sprintf("%s-%04d", name, i), 10, 5, name) + "\n")
		}
		for range garbage {
			s.WriteString("{not json\n")
		}
		return writeFile(t, name+".jsonl", []byte(s.String()))
	}
	for _, c := range []struct {
		name                    string
		known, unknown, garbage int
		flags                   []string
		want                    int
		says                    string
	}{
		{"5 of 12 known: refused", 5, 7, 0, nil, exitUsage, "only 5 of its 12 lines with an id carry an id of job " + job + " (--min-match 0.5 wants at least 6); the lake has no other job to compare with"},
		{"5 of 12 known, --force", 5, 7, 0, []string{"--force"}, 0, ""},
		{"6 of 12 known: half is enough", 6, 6, 0, nil, 0, ""},
		{"5 of 12 known, --min-match 0.4", 5, 7, 0, []string{"--min-match", "0.4"}, 0, ""},
		{"4 of 12 known, --min-match 0", 4, 8, 0, []string{"--min-match", "0"}, 0, ""},
		{"unreadable lines carry no id", 2, 0, 10, nil, 0, ""},
		{"--min-match above 1", 12, 0, 0, []string{"--min-match", "1.5"}, exitUsage, "--min-match 1.5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := file(strings.NewReplacer(" ", "", ",", "", ":", "", "-", "", ".", "").Replace(c.name), c.known, c.unknown, c.garbage)
			files := lakeFiles(t, b.lake)
			r := b.want([]int{c.want}, append([]string{"ingest", "--job", job, "--output", out}, c.flags...)...)
			if c.says != "" && !strings.Contains(r.stdout, c.says) {
				t.Errorf("exit %d does not say %q: %s", r.code, c.says, r)
			}
			if after := lakeFiles(t, b.lake); c.want != 0 && !slices.Equal(after, files) {
				t.Errorf("a refused ingest wrote to the lake")
			} else if c.want == 0 && slices.Equal(after, files) {
				t.Errorf("an accepted ingest wrote nothing")
			}
		})
	}
	b.verify()
}

// TestIngestMinMatchEachFile: with an output and an error file given, each
// file is judged by its own sample (the samples are matched in one query),
// the one that fails is named, and neither file is written.
func TestIngestMinMatchEachFile(t *testing.T) {
	b := newBox(t)
	job, output := otherJob(t, b)
	var good, bad strings.Builder
	for i := range 12 {
		good.WriteString(failureLine(fmt.Sprintf("b-%04d", i%flowN), 500, "server_error") + "\n")
		bad.WriteString(failureLine(fmt.Sprintf("x-%04d", i), 500, "server_error") + "\n")
	}
	goodErrs := writeFile(t, "good-errors.jsonl", []byte(good.String()))
	badErrs := writeFile(t, "bad-errors.jsonl", []byte(bad.String()))
	var badOut strings.Builder
	for i := range 12 {
		badOut.WriteString(successLine(fmt.Sprintf("x-%04d", i), 10, 5, "x") + "\n")
	}
	badOutput := writeFile(t, "bad-output.jsonl", []byte(badOut.String()))
	for _, c := range []struct {
		name, output, errs, says string
	}{
		{"the error file's ids are not the job's", output, badErrs, "ingest bad-errors.jsonl: only 0 of its 12 lines with an id carry an id of job " + job},
		{"the output file's ids are not the job's", badOutput, goodErrs, "ingest bad-output.jsonl: only 0 of its 12 lines with an id carry an id of job " + job},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := lakeFiles(t, b.lake)
			r := b.want([]int{exitUsage}, "ingest", "--job", job, "--output", c.output, "--errors", c.errs)
			if !strings.Contains(r.stdout, c.says) {
				t.Errorf("exit %d does not say %q: %s", r.code, c.says, r)
			}
			if after := lakeFiles(t, b.lake); !slices.Equal(after, files) {
				t.Errorf("a refused ingest wrote to the lake")
			}
		})
	}
	// Both files the job's: both are ingested.
	b.want([]int{0}, "ingest", "--job", job, "--output", output, "--errors", goodErrs)
	b.verify()
}

// TestIngestHashesWhileChecking: the files' digests, taken while their ids
// are checked, are each file's own: every file is archived and reported
// under the sha256 of its bytes, whichever channels are given.
func TestIngestHashesWhileChecking(t *testing.T) {
	b := newBox(t)
	job, output := otherJob(t, b)
	errs := writeFile(t, "b-errors.jsonl", []byte(failureLine("b-0003", 500, "server_error")+"\n"))
	for _, args := range [][]string{
		{"--output", output, "--errors", errs},
		{"--errors", errs},
	} {
		r := b.want([]int{0}, append([]string{"ingest", "--job", job}, args...)...)
		var res struct {
			Files []struct {
				Channel   string `json:"channel"`
				RawSHA256 string `json:"raw_sha256"`
			} `json:"files"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("ingest %v: %v: %s", args, err, r)
		}
		if len(res.Files) != len(args)/2 {
			t.Fatalf("ingest %v: %d files reported", args, len(res.Files))
		}
		for _, f := range res.Files {
			path := map[string]string{"output": output, "error": errs}[f.Channel]
			want, _, err := lake.HashFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if f.RawSHA256 != want.Hex() {
				t.Errorf("ingest %v: %s file reported as %s, its bytes hash to %s", args, f.Channel, f.RawSHA256, want.Hex())
			}
			if _, err := os.Stat(filepath.Join(b.lake, lake.ObjectKey(want))); err != nil {
				t.Errorf("ingest %v: %s file not archived under its digest: %v", args, f.Channel, err)
			}
		}
	}
	b.verify()
}
