package lake

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	_ "gocloud.dev/blob/s3blob" // s3:// lakes on the test S3 server

	"github.com/batchlake/batchlake/internal/testrun"
)

// TestMain points the AWS SDK at fixed test credentials (the S3 backend is an
// in-process gofakes3 server) and runs helper processes for the two-process
// ledger race when asked to.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelperProcess())
	}
	testrun.SetOfflineAWS()
	// The parallel tests mostly wait (injected storage delays past the
	// client's timeout, SDK backoff, loopback S3).
	testrun.DefaultParallel(8)
	os.Exit(m.Run())
}

// backend opens a fresh, empty lake of one kind for one test.
type backend struct {
	name string
	open func(t *testing.T) *Lake
}

// backends are the three kinds of lake every conformance test runs against:
// memory, a local folder (fileblob plus link(2) ledger appends) and a real
// S3-protocol server over HTTP.
var backends = []backend{
	{"mem", openMem},
	{"file", openFile},
	{"s3", openS3},
}

// forEachBackend runs fn as a subtest against a fresh lake of every kind.
func forEachBackend(t *testing.T, fn func(t *testing.T, l *Lake)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			fn(t, b.open(t))
		})
	}
}

func openLake(t *testing.T, u string) *Lake {
	t.Helper()
	l, err := Open(context.Background(), u)
	if err != nil {
		t.Fatalf("Open(%s): %v", u, err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close lake: %v", err)
		}
	})
	return l
}

func openMem(t *testing.T) *Lake { return openLake(t, "mem://") }

func openFile(t *testing.T) *Lake {
	l := openLake(t, "file://"+t.TempDir())
	if _, ok := l.LocalDir(); !ok {
		t.Fatal("file:// lake is not local")
	}
	return l
}

// newFakeS3 is an in-memory S3 server whose buckets exist before the first
// request: gofakes3's auto-bucket checks, then creates, so of concurrent
// first requests (a race test's contenders) all but one see NoSuchBucket.
func newFakeS3(t *testing.T, buckets ...string) *gofakes3.GoFakeS3 {
	t.Helper()
	backend := s3mem.New()
	for _, b := range buckets {
		if err := backend.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	return gofakes3.New(backend, gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
}

// openS3 starts a gofakes3 server on loopback and opens it through s3blob,
// exactly as a user would with an s3:// lake URL.
func openS3(t *testing.T) *Lake {
	t.Helper()
	faker := newFakeS3(t, "lake")
	srv := httptest.NewServer(faker.Server())
	t.Cleanup(srv.Close)
	return openLake(t, s3URL(srv.URL, "lake"))
}

func s3URL(endpoint, bucket string) string {
	q := url.Values{}
	q.Set("region", "us-east-1")
	q.Set("endpoint", endpoint)
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	q.Set("response_checksum_validation", "when_required")
	q.Set("request_checksum_calculation", "when_required")
	return fmt.Sprintf("s3://%s?%s", bucket, q.Encode())
}

// clock is an injected, settable clock for ledger tests.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time          { return c.t }
func (c *clock) Advance(d time.Duration) { c.t = c.t.Add(d) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testLedger is a ledger acting as actor on a frozen or injected clock.
func testLedger(l *Lake, actor string, now func() time.Time) *Ledger {
	g := NewLedger(l, actor)
	g.Now = now
	return g
}

// overwrite replaces key's bytes directly through the bucket, bypassing the
// write-once path, as a disk error or a careless hand would.
func overwrite(t *testing.T, l *Lake, key string, data []byte) {
	t.Helper()
	if err := l.Bucket.WriteAll(context.Background(), key, data, nil); err != nil {
		t.Fatalf("overwrite %s: %v", key, err)
	}
}

// flipByte flips one bit of the byte in the middle of key's stored bytes.
func flipByte(t *testing.T, l *Lake, key string) {
	t.Helper()
	b, err := l.Bucket.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	b[len(b)/2] ^= 0x01
	overwrite(t, l, key, b)
}
