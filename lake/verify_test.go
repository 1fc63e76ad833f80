package lake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fixture is a small but complete lake: one job planned, submitted, one output
// file ingested and reconciled, with the key of everything written.
type fixture struct {
	job                               Digest
	manifest, shard, expected         string
	raw, attempts, quarantine, ingest string
	report, retry, outcomes           string
	ledger                            []string // events 1..n of shard s0
	ledgerStates                      []State
	tenant                            string
	tmp                               string
}

func buildLake(t *testing.T, l *Lake) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{job: Sum([]byte("verify job")), tenant: "acme", tmp: t.TempDir()}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// plan: shard object and expected rows first, the manifest last.
	shardBytes := []byte(`{"custom_id":"a","body":{}}` + "\n" + `{"custom_id":"b","body":{}}` + "\n")
	sd, err := l.PutObject(ctx, shardBytes)
	must(err)
	f.shard = ObjectKey(sd)
	f.expected, err = WriteTable(ctx, l, f.tmp, "expected", f.tenant, f.job, []ExpectedRow{
		{JobKey: f.job.Hex(), Tenant: f.tenant, ShardID: "s0", ShardLine: 1, RecordID: "r1", BusinessKey: "a", CustomID: "a", Attempt: 1},
		{JobKey: f.job.Hex(), Tenant: f.tenant, ShardID: "s0", ShardLine: 2, RecordID: "r2", BusinessKey: "b", CustomID: "b", Attempt: 1},
	})
	must(err)
	m := Manifest{Version: ManifestVersion, JobKey: f.job.Hex(), Tenant: f.tenant, Provider: "openai", Model: "gpt-test",
		ExpectedRecords: 2, Attempt: 1, CreatedAt: t0, BusinessKeys: &KeyRange{First: "a", Last: "b"},
		Shards:        []ManifestShard{{ShardID: "s0", Object: sd, Records: 2, Bytes: int64(len(shardBytes))}},
		ExpectedFiles: []string{f.expected}}
	f.manifest = ManifestKey(f.job)
	_, err = l.PutJSON(ctx, f.manifest, FormatManifest, m)
	must(err)

	// ledger
	c := &clock{t: t0}
	g := testLedger(l, "tester", c.Now)
	f.ledgerStates = []State{Created, Validated, Submitting, Submitted, Running}
	for i, s := range f.ledgerStates {
		lease := time.Duration(0)
		if s == Submitting {
			lease = time.Hour
		}
		_, err := g.Transition(ctx, f.job, "s0", s, lease, "batch_1", nil)
		must(err)
		f.ledger = append(f.ledger, LedgerKey(f.job, "s0", i+1))
		c.Advance(time.Minute)
	}

	// ingest: raw file, attempts and quarantine rows, then the ingest record.
	rawBytes := []byte(`{"custom_id":"a","response":{"status_code":200}}` + "\n" + "not json\n")
	rd, err := l.PutObject(ctx, rawBytes)
	must(err)
	f.raw = ObjectKey(rd)
	code := int32(200)
	f.attempts, err = WriteTable(ctx, l, f.tmp, "attempts", f.tenant, f.job, []AttemptRow{
		{JobKey: f.job.Hex(), Tenant: f.tenant, CustomID: "a", Channel: "output", RawSHA256: rd.Hex(), LineNo: 1, StatusCode: &code, Outcome: "success"},
	})
	must(err)
	f.quarantine, err = WriteTable(ctx, l, f.tmp, "quarantine", f.tenant, f.job, []QuarantineRow{
		{JobKey: f.job.Hex(), Tenant: f.tenant, Channel: "output", RawSHA256: rd.Hex(), LineNo: 2, Reason: "not JSON", Raw: []byte("not json")},
	})
	must(err)
	f.ingest = IngestKey(f.job, "output", rd)
	_, err = l.PutJSON(ctx, f.ingest, FormatIngest, IngestRecord{Version: IngestVersion, JobKey: f.job.Hex(), Provider: "openai",
		Channel: "output", Raw: rd, RawBytes: int64(len(rawBytes)), FileName: "out.jsonl", Lines: 2, Rows: 1, Quarantined: 1,
		AttemptsFile: f.attempts, QuarantineFile: f.quarantine, IngestedAt: t0})
	must(err)

	// reconcile: retry shard and outcome rows, then the report.
	retry, err := l.PutObject(ctx, []byte(`{"custom_id":"b-2","body":{}}`+"\n"))
	must(err)
	f.retry = ObjectKey(retry)
	f.outcomes, err = WriteTable(ctx, l, f.tmp, "outcomes", f.tenant, f.job, []OutcomeRow{
		{JobKey: f.job.Hex(), Tenant: f.tenant, RecordID: "r1", Outcome: "succeeded", Disposition: "accepted"},
		{JobKey: f.job.Hex(), Tenant: f.tenant, RecordID: "r2", Outcome: "missing", Disposition: "retry"},
	})
	must(err)
	f.report = ReportKey(f.job, Sum([]byte("run 1")))
	_, err = l.PutJSON(ctx, f.report, FormatReport, map[string]any{
		"job_key": f.job.Hex(), "report": f.report, "state": "PARTIAL", "expected": 2, "succeeded": 1, "missing": 1,
		"retry_shards": []string{f.retry},
		"tables":       map[string]any{"outcomes_file": f.outcomes},
		"files":        map[string]any{"input": []string{sd.Hex()}, "output": []string{rd.Hex()}},
		"note_file":    "not a lake key, ignored",
	})
	must(err)
	return f
}

// splitIngest rewrites the fixture's ingest record as one of a split
// attempts table (its one attempts file in buckets of 16), with version v
// and attemptsFile, as a buggy writer might.
func splitIngest(t *testing.T, l *Lake, f *fixture, v int, attemptsFile string, buckets []int) {
	t.Helper()
	var r IngestRecord
	if err := l.GetJSON(context.Background(), f.ingest, FormatIngest, &r); err != nil {
		t.Fatal(err)
	}
	r.Version, r.AttemptsFile = v, attemptsFile
	r.AttemptsFiles, r.AttemptsSplit, r.AttemptsBuckets = []string{f.attempts}, SplitBuckets, buckets
	b, err := SealJSON(FormatIngest, r)
	if err != nil {
		t.Fatal(err)
	}
	overwrite(t, l, f.ingest, b)
}

// sealEvent writes a ledger event directly, as a buggy or hostile writer would.
func sealEvent(t *testing.T, l *Lake, key string, e Event) {
	t.Helper()
	b, err := SealJSON(FormatEvent, e)
	if err != nil {
		t.Fatal(err)
	}
	overwrite(t, l, key, b)
}

func remove(t *testing.T, l *Lake, key string) {
	t.Helper()
	if err := l.Bucket.Delete(context.Background(), key); err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
}

// want is an expected problem: its key, severity and a part of its message.
type want struct {
	key func(f *fixture) string
	sev Severity
	msg string
}

func at(key func(f *fixture) string, sev Severity, msg string) want { return want{key, sev, msg} }

var (
	kRaw        = func(f *fixture) string { return f.raw }
	kShard      = func(f *fixture) string { return f.shard }
	kExpected   = func(f *fixture) string { return f.expected }
	kAttempts   = func(f *fixture) string { return f.attempts }
	kQuarantine = func(f *fixture) string { return f.quarantine }
	kOutcomes   = func(f *fixture) string { return f.outcomes }
	kManifest   = func(f *fixture) string { return f.manifest }
	kIngest     = func(f *fixture) string { return f.ingest }
	kReport     = func(f *fixture) string { return f.report }
	kEvent      = func(seq int) func(f *fixture) string {
		return func(f *fixture) string { return f.ledger[seq-1] }
	}
	kLiteral = func(k string) func(f *fixture) string { return func(*fixture) string { return k } }
)

func TestVerify(t *testing.T) {
	t.Parallel()
	orphanKey := func(f *fixture) string { return TableFileKey("outcomes", f.tenant, f.job, Sum([]byte("orphan"))) }
	tests := []struct {
		name   string
		damage func(t *testing.T, l *Lake, f *fixture)
		want   []want
	}{
		{"intact lake", func(*testing.T, *Lake, *fixture) {}, nil},
		{"flipped byte in raw object", func(t *testing.T, l *Lake, f *fixture) { flipByte(t, l, f.raw) }, []want{
			at(kRaw, SeverityError, "content hashes to"),
			at(kIngest, SeverityError, "raw file "),
		}},
		{"flipped byte in shard object", func(t *testing.T, l *Lake, f *fixture) { flipByte(t, l, f.shard) }, []want{
			at(kShard, SeverityError, "content hashes to"),
			at(kManifest, SeverityError, "shard s0 object"),
		}},
		{"flipped byte in expected table file", func(t *testing.T, l *Lake, f *fixture) { flipByte(t, l, f.expected) }, []want{
			at(kExpected, SeverityError, "content hashes to"),
			at(kManifest, SeverityError, "is corrupt"),
		}},
		{"flipped byte in attempts table file", func(t *testing.T, l *Lake, f *fixture) { flipByte(t, l, f.attempts) }, []want{
			at(kAttempts, SeverityError, "content hashes to"),
			at(kIngest, SeverityError, "attempts file"),
		}},
		{"flipped byte in manifest", func(t *testing.T, l *Lake, f *fixture) { flipByte(t, l, f.manifest) }, []want{
			at(kManifest, SeverityError, "does not verify"),
			at(kExpected, SeverityWarning, "orphan"),
		}},
		{"flipped byte in ingest record", func(t *testing.T, l *Lake, f *fixture) { flipByte(t, l, f.ingest) }, []want{
			at(kIngest, SeverityError, "does not verify"),
			at(kAttempts, SeverityWarning, "orphan"),
			at(kQuarantine, SeverityWarning, "orphan"),
		}},
		{"flipped byte in report", func(t *testing.T, l *Lake, f *fixture) { flipByte(t, l, f.report) }, []want{
			at(kReport, SeverityError, "does not verify"),
			at(kOutcomes, SeverityWarning, "orphan"),
		}},
		// A report is named by its run, not its bytes: a copy of it under
		// another run's key verifies as a marker, but reads of that run
		// would take these numbers.
		{"report under another run's key", func(t *testing.T, l *Lake, f *fixture) {
			b, err := l.Bucket.ReadAll(context.Background(), f.report)
			if err != nil {
				t.Fatal(err)
			}
			overwrite(t, l, ReportKey(f.job, Sum([]byte("run 2"))), b)
		}, []want{
			at(func(f *fixture) string { return ReportKey(f.job, Sum([]byte("run 2"))) }, SeverityError, "marker does not verify: the body is the report "),
		}},
		// The ingest records and retractions a report counted: deleted, the
		// next reconcile would leave the file out, or count a retracted
		// file again.
		{"report that counts a retraction not in the lake", func(t *testing.T, l *Lake, f *fixture) {
			key := ReportKey(f.job, Sum([]byte("run 3")))
			if _, err := l.PutJSON(context.Background(), key, FormatReport, map[string]any{
				"job_key": f.job.Hex(), "report": key, "files": map[string]any{"output": []string{}, "retracted": []string{Sum([]byte("gone")).Hex()}},
			}); err != nil {
				t.Fatal(err)
			}
		}, []want{
			at(func(f *fixture) string { return ReportKey(f.job, Sum([]byte("run 3"))) }, SeverityError, "files.retracted retractions/"),
		}},
		{"missing ingest record a report counted", func(t *testing.T, l *Lake, f *fixture) { remove(t, l, f.ingest) }, []want{
			at(kReport, SeverityError, "files.output "),
			at(kAttempts, SeverityWarning, "orphan"),
			at(kQuarantine, SeverityWarning, "orphan"),
		}},
		{"flipped byte in ledger event", func(t *testing.T, l *Lake, f *fixture) { flipByte(t, l, f.ledger[1]) }, []want{
			at(kEvent(2), SeverityError, "does not verify"),
		}},
		{"missing raw object", func(t *testing.T, l *Lake, f *fixture) { remove(t, l, f.raw) }, []want{
			at(kIngest, SeverityError, "is missing"),
		}},
		{"missing shard object", func(t *testing.T, l *Lake, f *fixture) { remove(t, l, f.shard) }, []want{
			at(kManifest, SeverityError, "is missing"),
		}},
		{"missing quarantine file", func(t *testing.T, l *Lake, f *fixture) { remove(t, l, f.quarantine) }, []want{
			at(kIngest, SeverityError, "quarantine file"),
		}},
		{"missing retry shard", func(t *testing.T, l *Lake, f *fixture) { remove(t, l, f.retry) }, []want{
			at(kReport, SeverityError, "retry_shards "),
		}},
		{"manifest's business keys leave out a key", func(t *testing.T, l *Lake, f *fixture) {
			editManifest(t, l, f, func(m *Manifest) { m.BusinessKeys.Last = "a" })
		}, []want{
			at(kManifest, SeverityError, `business keys "a" to "a", its expected rows run from "a" to "b"`),
		}},
		{"manifest's business keys wider than its rows", func(t *testing.T, l *Lake, f *fixture) {
			editManifest(t, l, f, func(m *Manifest) { m.BusinessKeys.First = "" })
		}, []want{
			at(kManifest, SeverityError, `business keys "" to "b", its expected rows run from "a" to "b"`),
		}},
		{"manifest from before plan kept business keys", func(t *testing.T, l *Lake, f *fixture) {
			editManifest(t, l, f, func(m *Manifest) { m.BusinessKeys = nil })
		}, nil},
		{"missing manifest", func(t *testing.T, l *Lake, f *fixture) { remove(t, l, f.manifest) }, []want{
			at(kExpected, SeverityWarning, "orphan"),
			at(kIngest, SeverityError, "has no manifest"),
			at(kReport, SeverityError, "has no manifest"),
			at(kEvent(1), SeverityError, "has no manifest"),
		}},
		{"ledger gap", func(t *testing.T, l *Lake, f *fixture) { remove(t, l, f.ledger[2]) }, []want{
			at(kEvent(3), SeverityError, "ledger gap: events 3..3"),
		}},
		{"second SUBMITTED with another batch", func(t *testing.T, l *Lake, f *fixture) {
			sealEvent(t, l, f.ledger[4], Event{JobKey: f.job.Hex(), ShardID: "s0", Seq: 5, State: Submitted, At: t0, Actor: "x", ProviderJobID: "batch_2"})
		}, []want{
			at(kEvent(5), SeverityWarning, "bound a second time: SUBMITTED batch_2 after SUBMITTED batch_1"),
		}},
		{"illegal transition", func(t *testing.T, l *Lake, f *fixture) {
			sealEvent(t, l, f.ledger[4], Event{JobKey: f.job.Hex(), ShardID: "s0", Seq: 5, State: Completed, At: t0, Actor: "x"})
		}, []want{
			at(kEvent(5), SeverityError, "illegal transition SUBMITTED -> COMPLETED"),
		}},
		{"event stored under another seq", func(t *testing.T, l *Lake, f *fixture) {
			sealEvent(t, l, f.ledger[4], Event{JobKey: f.job.Hex(), ShardID: "s0", Seq: 4, State: Running, At: t0, Actor: "x"})
		}, []want{
			at(kEvent(5), SeverityError, "not where it is stored"),
		}},
		{"split ingest record (version 2)", func(t *testing.T, l *Lake, f *fixture) {
			splitIngest(t, l, f, IngestSplitVersion, "", []int{5})
		}, nil},
		{"split ingest record with more buckets than files", func(t *testing.T, l *Lake, f *fixture) {
			splitIngest(t, l, f, IngestSplitVersion, "", []int{5, 7})
		}, []want{
			at(kIngest, SeverityError, "attempts: 1 files, 2 buckets"),
		}},
		{"split ingest record with a bucket out of range", func(t *testing.T, l *Lake, f *fixture) {
			splitIngest(t, l, f, IngestSplitVersion, "", []int{16})
		}, []want{
			at(kIngest, SeverityError, "want increasing buckets of 0..15"),
		}},
		{"split ingest record of version 1", func(t *testing.T, l *Lake, f *fixture) {
			splitIngest(t, l, f, IngestVersion, "", []int{5})
		}, []want{
			at(kIngest, SeverityError, "want one attempts_file in version 1, attempts_files in version 2"),
			at(kIngest, SeverityError, "counts 1 attempts rows but names no attempts file"),
			at(kAttempts, SeverityWarning, "orphan"),
		}},
		{"split ingest record with an attempts_file too", func(t *testing.T, l *Lake, f *fixture) {
			splitIngest(t, l, f, IngestSplitVersion, f.attempts, []int{5})
		}, []want{
			at(kIngest, SeverityError, "want one attempts_file in version 1"),
		}},
		{"orphan table file", func(t *testing.T, l *Lake, f *fixture) {
			overwrite(t, l, orphanKey(f), []byte("orphan"))
		}, []want{
			at(orphanKey, SeverityWarning, "orphan"),
		}},
		{"stray files", func(t *testing.T, l *Lake, f *fixture) {
			overwrite(t, l, "junk.txt", []byte("x"))
			overwrite(t, l, "objects/sha256/zz/not-a-digest", []byte("x"))
			overwrite(t, l, LedgerShardPrefix(f.job, "s0")+".tmp-event-123", []byte("x"))
		}, []want{
			at(kLiteral("junk.txt"), SeverityWarning, "not part of the lake layout"),
			at(kLiteral("objects/sha256/zz/not-a-digest"), SeverityError, "does not follow the lake layout"),
			at(func(f *fixture) string { return LedgerShardPrefix(f.job, "s0") + ".tmp-event-123" }, SeverityWarning, "temporary file"),
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					l := b.open(t)
					f := buildLake(t, l)
					tc.damage(t, l, f)
					rep, err := Verify(context.Background(), l)
					if err != nil {
						t.Fatal(err)
					}
					checkProblems(t, rep, f, tc.want)
					if wantOK := !hasError(tc.want); rep.OK() != wantOK {
						t.Errorf("OK() = %v, want %v", rep.OK(), wantOK)
					}
				})
			}
		})
	}
}

func hasError(ws []want) bool {
	for _, w := range ws {
		if w.sev == SeverityError {
			return true
		}
	}
	return false
}

// checkProblems requires exactly the wanted problems, no more and no fewer.
func checkProblems(t *testing.T, rep Report, f *fixture, ws []want) {
	t.Helper()
	used := make([]bool, len(rep.Problems))
	for _, w := range ws {
		key, found := w.key(f), false
		for i, p := range rep.Problems {
			if !used[i] && p.Key == key && p.Severity == w.sev && strings.Contains(p.Message, w.msg) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("missing problem: %s %s: ...%s...", w.sev, key, w.msg)
		}
	}
	for i, p := range rep.Problems {
		if !used[i] {
			t.Errorf("unexpected problem: %s", p)
		}
	}
	if t.Failed() {
		t.Logf("all problems:\n%s", fmt.Sprint(rep.Problems))
	}
}

func TestVerifyCounts(t *testing.T) {
	l := openMem(t)
	f := buildLake(t, l)
	rep, err := Verify(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	got := [6]int{rep.Objects, rep.TableFiles, rep.Manifests, rep.Ingests, rep.Reports, rep.LedgerEvents}
	want := [6]int{3, 4, 1, 1, 1, len(f.ledger)}
	if got != want {
		t.Errorf("counts (objects, tables, manifests, ingests, reports, events) = %v, want %v", got, want)
	}
	empty, err := Verify(context.Background(), openMem(t))
	if err != nil || len(empty.Problems) != 0 || !empty.OK() {
		t.Errorf("empty lake: %+v, %v", empty, err)
	}
}

func TestParseLedgerKey(t *testing.T) {
	job := Sum([]byte("j"))
	tests := []struct {
		key   string
		shard string
		seq   int
		ok    bool
	}{
		{LedgerKey(job, "s0", 1), "s0", 1, true},
		{LedgerKey(job, JobShard, 1234567), JobShard, 1234567, true},
		{LedgerPrefix(job) + "s0/.tmp-event-123", "", 0, false},
		{LedgerPrefix(job) + "s0/0000000001.json.1f.tmp", "", 0, false},
		{LedgerPrefix(job) + "s0/1.json", "", 0, false},
		{LedgerPrefix(job) + "s0/0000000000.json", "", 0, false},
		{LedgerPrefix(job) + "s0/x/0000000001.json", "", 0, false},
		{"ledger/ABC/s0/0000000001.json", "", 0, false},
		{"objects/" + job.Hex() + "/s0/0000000001.json", "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			gotJob, shard, seq, ok := ParseLedgerKey(tc.key)
			if ok != tc.ok || shard != tc.shard || seq != tc.seq || (ok && gotJob != job) {
				t.Errorf("ParseLedgerKey = %s, %q, %d, %v; want %q, %d, %v", gotJob.Hex()[:8], shard, seq, ok, tc.shard, tc.seq, tc.ok)
			}
		})
	}
}

// editManifest stores the fixture's manifest again, as edit changes it.
func editManifest(t *testing.T, l *Lake, f *fixture, edit func(*Manifest)) {
	t.Helper()
	ctx := context.Background()
	m, err := l.GetManifest(ctx, f.job)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	remove(t, l, f.manifest)
	if _, err := l.PutJSON(ctx, f.manifest, FormatManifest, m); err != nil {
		t.Fatal(err)
	}
}

// TestReportReadUnderAnotherKey: a report copied, or swapped, to another
// run's key verifies as a marker, but it names its own key: every read
// (reconcile, sql, cost, jobs) refuses it as corrupt instead of taking the
// other run's numbers.
func TestReportReadUnderAnotherKey(t *testing.T) {
	t.Parallel()
	l := openMem(t)
	f := buildLake(t, l)
	ctx := context.Background()
	b, err := l.Bucket.ReadAll(ctx, f.report)
	if err != nil {
		t.Fatal(err)
	}
	moved := ReportKey(f.job, Sum([]byte("run 2")))
	overwrite(t, l, moved, b)
	var body map[string]any
	if err := l.GetJSON(ctx, f.report, FormatReport, &body); err != nil {
		t.Fatalf("the report at its own key: %v", err)
	}
	if err := l.GetJSON(ctx, moved, FormatReport, &body); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "the body is the report "+f.report) {
		t.Errorf("the report under another run's key: %v, want it refused as corrupt", err)
	}
}
