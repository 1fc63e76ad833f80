package lake

import (
	"context"
	"errors"
	"testing"
)

func TestRetractionKey(t *testing.T) {
	job, raw := Sum([]byte("j")), Sum([]byte("r"))
	k := RetractionKey(job, raw)
	if want := "retractions/" + job.Hex() + "/" + raw.Hex() + ".json"; k != want {
		t.Fatalf("RetractionKey = %s, want %s", k, want)
	}
	tests := []struct {
		name, key string
		ok        bool
	}{
		{"built by RetractionKey", k, true},
		{"temp file beside it", RetractionPrefix(job) + ".tmp-" + raw.Hex(), false},
		{"no .json", RetractionPrefix(job) + raw.Hex(), false},
		{"upper-case raw", RetractionPrefix(job) + "AB" + raw.Hex()[2:] + ".json", false},
		{"sha256- prefix", RetractionPrefix(job) + raw.String() + ".json", false},
		{"nested", RetractionPrefix(job) + "x/" + raw.Hex() + ".json", false},
		{"other area", "ingests/" + job.Hex() + "/" + raw.Hex() + ".json", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, r, ok := ParseRetractionKey(tc.key)
			if ok != tc.ok || (ok && (j != job || r != raw)) {
				t.Errorf("ParseRetractionKey(%s) = %v %v %v, want ok %v", tc.key, j, r, ok, tc.ok)
			}
		})
	}
}

func TestParseTableFileKey(t *testing.T) {
	job, file := Sum([]byte("j")), Sum([]byte("f"))
	k := TableFileKey("expected", "acme", job, file)
	table, tenant, j, f, ok := ParseTableFileKey(k)
	if !ok || table != "expected" || tenant != "acme" || j != job || f != file {
		t.Fatalf("ParseTableFileKey(%s) = %s %s %v %v %v", k, table, tenant, j, f, ok)
	}
	for _, bad := range []string{
		"tables/expected/tenant=acme/job=" + job.Hex() + "/" + file.Hex() + ".parquet.tmp",
		"tables/expected/tenant=acme/" + file.Hex() + ".parquet",
		"tables/Expected/tenant=acme/job=" + job.Hex() + "/" + file.Hex() + ".parquet",
		"tables/expected/tenant=../job=" + job.Hex() + "/" + file.Hex() + ".parquet",
		"objects/sha256/ab/" + file.Hex(),
	} {
		if _, _, _, _, ok := ParseTableFileKey(bad); ok {
			t.Errorf("ParseTableFileKey accepted %s", bad)
		}
	}
}

// retract writes a retraction marker directly, as ingest --retract (or a
// buggy writer) would.
func retract(t *testing.T, l *Lake, key string, r Retraction) {
	t.Helper()
	b, err := SealJSON(FormatRetraction, r)
	if err != nil {
		t.Fatal(err)
	}
	overwrite(t, l, key, b)
}

func TestVerifyRetractions(t *testing.T) {
	rawOf := func(f *fixture) Digest { d, _ := ParseObjectKey(f.raw); return d }
	sound := func(f *fixture) Retraction {
		return Retraction{Version: RetractionVersion, JobKey: f.job.Hex(), Raw: rawOf(f), Ingests: []string{f.ingest}, RetractedAt: t0}
	}
	kRetraction := func(f *fixture) string { return RetractionKey(f.job, rawOf(f)) }
	other := Sum([]byte("never ingested"))
	kOther := func(f *fixture) string { return RetractionKey(f.job, other) }
	tests := []struct {
		name  string
		write func(t *testing.T, l *Lake, f *fixture)
		want  []want
	}{
		{"sound retraction", func(t *testing.T, l *Lake, f *fixture) { retract(t, l, kRetraction(f), sound(f)) }, nil},
		{"body names another raw file", func(t *testing.T, l *Lake, f *fixture) {
			r := sound(f)
			r.Raw, r.Ingests = other, []string{IngestKey(f.job, "output", other)}
			retract(t, l, kRetraction(f), r)
		}, []want{
			at(kRetraction, SeverityError, "does not match its key"),
			at(kRetraction, SeverityError, "is not one of raw file"),
		}},
		{"retracts an ingest record that does not exist", func(t *testing.T, l *Lake, f *fixture) {
			r := sound(f)
			r.Raw, r.Ingests = other, []string{IngestKey(f.job, "output", other)}
			retract(t, l, kOther(f), r)
		}, []want{
			at(kOther, SeverityError, "is missing"),
		}},
		{"unknown version", func(t *testing.T, l *Lake, f *fixture) {
			r := sound(f)
			r.Version = 99
			retract(t, l, kRetraction(f), r)
		}, []want{
			at(kRetraction, SeverityError, "version 99"),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := openMem(t)
			f := buildLake(t, l)
			tc.write(t, l, f)
			rep, err := Verify(context.Background(), l)
			if err != nil {
				t.Fatal(err)
			}
			checkProblems(t, rep, f, tc.want)
			if rep.Retractions != 1 {
				t.Errorf("verify counted %d retractions, want 1", rep.Retractions)
			}
		})
	}
}

func TestRetractions(t *testing.T) {
	ctx := context.Background()
	l := openMem(t)
	f := buildLake(t, l)
	raw, _ := ParseObjectKey(f.raw)
	r := Retraction{Version: RetractionVersion, JobKey: f.job.Hex(), Raw: raw, Ingests: []string{f.ingest}, RetractedAt: t0}
	if _, err := l.PutJSON(ctx, RetractionKey(f.job, raw), FormatRetraction, r); err != nil {
		t.Fatal(err)
	}
	got, err := l.Retractions(ctx, f.job)
	if err != nil || len(got) != 1 || got[raw].Raw != raw {
		t.Fatalf("Retractions = %v, %v", got, err)
	}
	if none, err := l.Retractions(ctx, Sum([]byte("other job"))); err != nil || len(none) != 0 {
		t.Errorf("another job's retractions = %v, %v", none, err)
	}
	// A body that retracts another file than its key says is corrupt.
	other := Sum([]byte("x"))
	r.Raw = other
	retract(t, l, RetractionKey(f.job, raw), r)
	if _, err := l.Retractions(ctx, f.job); !errors.Is(err, ErrCorrupt) {
		t.Errorf("mismatched body: %v, want ErrCorrupt", err)
	}
}
