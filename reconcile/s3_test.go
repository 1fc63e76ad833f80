package reconcile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/batchlake/batchlake/lake"
)

// TestFlowOnS3: plan, ingest, reconcile and sql on an s3:// lake served by a
// real S3-protocol server on loopback; DuckDB reads through the local cache.
func TestFlowOnS3(t *testing.T) {
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	faker := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(faker.Server())
	defer srv.Close()
	q := url.Values{"region": {"us-east-1"}, "endpoint": {srv.URL}, "use_path_style": {"true"}, "disable_https": {"true"},
		"response_checksum_validation": {"when_required"}, "request_checksum_calculation": {"when_required"}}
	ctx := context.Background()
	l, err := lake.Open(ctx, fmt.Sprintf("s3://lake/prefix?%s", q.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, local := l.LocalDir(); local {
		t.Fatal("s3 lake opened as a local folder")
	}
	dir := t.TempDir()
	g := generate(rand.New(rand.NewPCG(3, 3)), 150, 2, 1)
	m := planAndIngest(t, l, dir, g, 60)
	cache := filepath.Join(dir, "cache")
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2, CacheDir: cache}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Expected != 150 || rep.Succeeded != g.truth.counts["succeeded"] || rep.Unknown != 2 || rep.Quarantined != 1 {
		t.Fatalf("report on s3: %+v", rep)
	}
	e, err := OpenSession(ctx, l, EngineOptions{Threads: 1, TempDir: dir, CacheDir: cache}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var n int64
	if err := e.DB.QueryRowContext(ctx, "SELECT count(*) FROM records WHERE final_state = 'succeeded'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != rep.Succeeded {
		t.Fatalf("records view on s3 says %d succeeded, report %d", n, rep.Succeeded)
	}
	// The cache holds the table files, named by digest.
	ents, _ := os.ReadDir(cache)
	if len(ents) == 0 {
		t.Fatal("nothing staged in the cache")
	}
	for _, en := range ents {
		d, ok := lake.ParseObjectKey(en.Name())
		if !ok {
			t.Fatalf("cache entry %s not named by digest", en.Name())
		}
		if got, _, _ := lake.HashFile(filepath.Join(cache, en.Name())); got != d {
			t.Fatalf("cache entry %s holds other bytes", en.Name())
		}
	}
	// Verify walks the s3 lake clean.
	vr, err := lake.Verify(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if !vr.OK() {
		t.Fatalf("verify on s3: %v", vr.Problems)
	}
}
