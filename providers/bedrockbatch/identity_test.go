package bedrockbatch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

const jobA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
const jobB = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

// The API reference's constraints, written out again here so that the
// derivation is checked against the documented rule, not its own copy.
var (
	docToken = regexp.MustCompile(`^[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}$`)
	docName  = regexp.MustCompile(`^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}$`)
)

func TestTokenAndName(t *testing.T) {
	long := strings.Repeat("x", 64)
	cases := []struct {
		name, job, shard string
		wantName         string
	}{
		{name: "plan's shard id", job: jobA, shard: "part-00000", wantName: "batchlake-0123456789abcdef01234567-part-00000"},
		{name: "underscore and dots", job: jobA, shard: "a_b.c", wantName: "batchlake-0123456789abcdef01234567-a-b.c-" + sha8("a_b.c")},
		{name: "dash where the other has underscore", job: jobA, shard: "a-b.c", wantName: "batchlake-0123456789abcdef01234567-a-b.c"},
		{name: "leading dot", job: jobA, shard: ".x", wantName: "batchlake-0123456789abcdef01234567-.x"},
		{name: "longest shard id", job: jobA, shard: long, wantName: "batchlake-0123456789abcdef01234567-xxxxxxxxxxxxxxxxxxx-" + sha8(long)},
		{name: "single character", job: jobB, shard: "_", wantName: "batchlake-fedcba9876543210fedcba98---" + sha8("_")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := Token(tc.job, tc.shard)
			if err != nil {
				t.Fatal(err)
			}
			if len(tok) > 256 || !docToken.MatchString(tok) {
				t.Errorf("token %q breaks Bedrock's clientRequestToken constraint", tok)
			}
			if again, _ := Token(tc.job, tc.shard); again != tok {
				t.Errorf("token not stable: %q then %q", tok, again)
			}
			job, shard, ok := ParseToken(tok)
			if !ok || job != tc.job || shard != tc.shard {
				t.Errorf("ParseToken(%q) = %q, %q, %v", tok, job, shard, ok)
			}
			n, err := JobName(tc.job, tc.shard)
			if err != nil {
				t.Fatal(err)
			}
			if len(n) > 63 || !docName.MatchString(n) {
				t.Errorf("job name %q breaks Bedrock's jobName constraint", n)
			}
			if n != tc.wantName {
				t.Errorf("job name %q, want %q", n, tc.wantName)
			}
		})
	}
}

// TestTokenDistinct: every shard of a job, and the same shard of another
// job, gets its own token and name.
func TestTokenDistinct(t *testing.T) {
	seen := map[string]string{}
	add := func(job, shard string) {
		tok, err := Token(job, shard)
		if err != nil {
			t.Fatal(err)
		}
		name, err := JobName(job, shard)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"token " + tok, "name " + name} {
			if prev, ok := seen[k]; ok {
				t.Fatalf("%s for %s/%s and %s", k, job[:8], shard, prev)
			}
			seen[k] = job[:8] + "/" + shard
		}
	}
	for _, job := range []string{jobA, jobB} {
		for i := range 2000 {
			add(job, fmt.Sprintf("part-%05d", i))
		}
		add(job, "a_b")
		add(job, "a-b")
		add(job, strings.Repeat("y", 63)+"1")
		add(job, strings.Repeat("y", 63)+"2")
	}
}

func TestTokenRejects(t *testing.T) {
	cases := []struct{ name, job, shard string }{
		{"short job key", "abc", "part-00000"},
		{"upper-case job key", strings.ToUpper(jobA), "part-00000"},
		{"empty shard", jobA, ""},
		{"shard too long", jobA, strings.Repeat("x", 65)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tok, err := Token(tc.job, tc.shard); err == nil {
				t.Fatalf("Token = %q, want an error", tok)
			}
		})
	}
	for _, bad := range []string{"", "bl1-" + jobA, "bl1-" + jobA + "-zz", "bl2-" + jobA + "-61", "bl1-" + jobA[:63] + "-61"} {
		if _, _, ok := ParseToken(bad); ok {
			t.Errorf("ParseToken(%q) accepted a token batchlake did not make", bad)
		}
	}
}

func TestLocations(t *testing.T) {
	in, out, ok := DefaultLocations("s3://lake?region=eu-west-1&prefix=team%2F&endpoint=http%3A%2F%2Flocalhost%3A9000")
	if !ok {
		t.Fatal("s3 lake gave no default locations")
	}
	li, err := ParseLocation(in)
	if err != nil {
		t.Fatal(err)
	}
	lo, _ := ParseLocation(out)
	if li.URI() != "s3://lake/team/_staging/bedrock/input/" || lo.URI() != "s3://lake/team/_staging/bedrock/output/" {
		t.Errorf("defaults %s %s", li.URI(), lo.URI())
	}
	if li.Query.Get("region") != "eu-west-1" || li.Query.Get("endpoint") != "http://localhost:9000" || li.Query.Has("prefix") {
		t.Errorf("default input keeps query %v", li.Query)
	}
	if _, _, ok := DefaultLocations("file:///tmp/lake"); ok {
		t.Error("a local lake has no default S3 location")
	}
	for _, bad := range []string{"gs://b/p", "s3:///p", "/tmp/x"} {
		if _, err := ParseLocation(bad); err == nil {
			t.Errorf("ParseLocation(%q) accepted", bad)
		}
	}
	if got := outputFileID("s3://b/out/", "arn:aws:bedrock:us-east-1:1:model-invocation-job/abc123", "s3://b/in/batchlake-x.jsonl"); got != "s3://b/out/abc123/batchlake-x.jsonl.out" {
		t.Errorf("outputFileID = %s", got)
	}
}

func sha8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// FuzzParseToken: tokens come back from Bedrock's listing, so ParseToken
// reads outside input. Whatever it accepts must be exactly the token of
// what it returns, and every derived token and name must keep Bedrock's rules.
func FuzzParseToken(f *testing.F) {
	for _, shard := range []string{"part-00000", "a_b", ".x", strings.Repeat("z", 64)} {
		tok, _ := Token(jobA, shard)
		f.Add(tok)
	}
	f.Add("bl1-" + jobA + "-")
	f.Add("console-token")
	f.Add("bl1-" + jobA + "-4A") // upper-case hex: not a token Token makes
	f.Fuzz(func(t *testing.T, s string) {
		job, shard, ok := ParseToken(s)
		if !ok {
			return
		}
		tok, err := Token(job, shard)
		if err != nil {
			t.Fatalf("ParseToken(%q) gave %q/%q, which Token refuses: %v", s, job, shard, err)
		}
		if tok != s {
			t.Fatalf("ParseToken(%q) = %q/%q, whose token is %q", s, job, shard, tok)
		}
		if name, err := JobName(job, shard); err != nil || len(name) > 63 || !docName.MatchString(name) {
			t.Fatalf("JobName(%q, %q) = %q, %v", job, shard, name, err)
		}
	})
}
