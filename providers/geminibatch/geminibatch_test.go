package geminibatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakegemini"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers"
	"github.com/batchlake/batchlake/providers/geminibatch"
)

const testKey = "AIzaTEST0123456789abcdefSECRETkey"

// must fails the test (by panicking: a failure with its stack) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

type env struct {
	srv *fakegemini.Server
	c   *geminibatch.Client
	l   *lake.Lake
	drv *lifecycle.Driver
	tmp string
	url string
}

func setup(t *testing.T, opts fakegemini.Options, inlineMax int64) *env {
	t.Helper()
	opts.APIKey = testKey
	srv := fakegemini.New(opts)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetBaseURL(hs.URL)
	tmp := t.TempDir()
	l := must(lake.Open(context.Background(), filepath.Join(tmp, "lake")))
	t.Cleanup(func() { l.Close() })
	c := must(geminibatch.New(geminibatch.Config{APIKey: testKey, BaseURL: hs.URL, RequestTimeout: 5 * time.Second, CreateTimeout: 5 * time.Second,
		PageSize: 2, InlineMaxBytes: inlineMax, Jobs: lifecycle.LakeShards{Lake: l}}))
	drv := &lifecycle.Driver{Lake: l, Ledger: lake.NewLedger(l, "tester"), Client: c, Target: "gemini", Lease: time.Minute, TmpDir: tmp}
	return &env{srv: srv, c: c, l: l, drv: drv, tmp: tmp, url: hs.URL}
}

func (e *env) plan(t *testing.T, n, per int) lake.Digest {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"key":"r-%03d","request":{"contents":[{"parts":[{"text":"question %d"}]}],"generation_config":{"temperature":0.2}}}`+"\n", i, i)
	}
	in := filepath.Join(e.tmp, fmt.Sprintf("in-%d-%d.jsonl", n, per))
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	res := must(ingest.Plan(context.Background(), e.l, ingest.PlanOptions{Provider: "gemini", Model: "gemini-2.5-flash", Input: in, Tenant: "acme", PromptVersion: "v1", ShardMaxRecords: per, TmpDir: e.tmp}))
	return must(lake.ParseDigest(res.JobKey))
}

func (e *env) submit(t *testing.T, job lake.Digest) *lifecycle.Result {
	t.Helper()
	return must(e.drv.Submit(context.Background(), job))
}

func actions(r *lifecycle.Result) string {
	var a []string
	for _, s := range r.Shards {
		a = append(a, s.ShardID+":"+s.Action)
	}
	return strings.Join(a, " ")
}

func TestSubmitTwiceCreatesOnce(t *testing.T) {
	t.Parallel()
	for _, inline := range []int64{0, 1 << 20} {
		t.Run(fmt.Sprintf("inline_max=%d", inline), func(t *testing.T) {
			t.Parallel()
			e := setup(t, fakegemini.Options{PollsPerStep: 100}, inline)
			job := e.plan(t, 6, 3)
			if got := actions(e.submit(t, job)); got != "part-00000:created part-00001:created" {
				t.Fatalf("first submit: %s", got)
			}
			if got := actions(e.submit(t, job)); got != "part-00000:already_bound part-00001:already_bound" {
				t.Fatalf("second submit: %s", got)
			}
			if n := len(e.srv.Batches()); n != 2 {
				t.Fatalf("%d batches, want 2", n)
			}
			uploads := e.srv.Count("POST", "/upload/v1beta/files")
			if inline > 0 && uploads != 0 || inline == 0 && uploads != 4 { // start + finalize per shard
				t.Fatalf("%d upload requests with inline max %d", uploads, inline)
			}
		})
	}
}

func TestLostOrFailedCreateIsFoundByDisplayName(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]fakegemini.Faults{
		"lost":      {CreateLost: 1},
		"500_after": {CreateErrorAfter: 1},
		"429_after": {CreateErrorAfter: 1, CreateStatus: 429},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, fakegemini.Options{PollsPerStep: 100, Faults: f}, 0)
			e.drv.LostLookup = -1 // the next run looks it up, not this one
			job := e.plan(t, 3, 3)
			r := e.submit(t, job)
			if got := actions(r); got != "part-00000:unknown" || !r.Pending {
				t.Fatalf("submit: %s", got)
			}
			r = e.submit(t, job)
			if got := actions(r); got != "part-00000:found" || r.Shards[0].ProviderJobID != e.srv.Batches()[0] {
				t.Fatalf("resubmit: %s %s", got, r.Shards[0].ProviderJobID)
			}
			if n := len(e.srv.Batches()); n != 1 {
				t.Fatalf("%d batches, want 1", n)
			}
			// The file was uploaded once; the resubmit found the batch before uploading.
			if n := e.srv.Count("POST", "/upload/v1beta/files"); n != 2 {
				t.Fatalf("%d upload requests, want 2", n)
			}
		})
	}
}

func TestRefusedCreateCreatesLaterReusingTheUpload(t *testing.T) {
	e := setup(t, fakegemini.Options{Faults: fakegemini.Faults{CreateRefused: 1, CreateStatus: 400}}, 0)
	job := e.plan(t, 2, 2)
	if _, err := e.drv.Submit(context.Background(), job); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("submit with a refused create: %v", err)
	}
	if got := actions(e.submit(t, job)); got != "part-00000:created" {
		t.Fatalf("resubmit: %s", got)
	}
	if n := e.srv.Count("POST", "/upload/v1beta/files"); n != 2 {
		t.Fatalf("%d upload requests, want 2 (the second submit reuses the file)", n)
	}
}

func TestFindNeedsACompleteListing(t *testing.T) {
	t.Parallel()
	e := setup(t, fakegemini.Options{PollsPerStep: 100}, 0)
	job := e.plan(t, 2, 2)
	for range 5 {
		e.srv.Inject("someone-elses-batch")
	}
	e.srv.Inject(geminibatch.DisplayName(job.Hex(), "part-00001")) // another shard's name
	// A failing list is an error, not absence (the client retries twice).
	e.srv.UpdateFaults(func(f *fakegemini.Faults) { f.ListErrors = 3 })
	if _, err := e.drv.Submit(context.Background(), job); err == nil || !strings.Contains(err.Error(), "lookup failed") && !strings.Contains(err.Error(), "list page") {
		t.Fatalf("submit with failing lists: %v", err)
	}
	if n := e.srv.Count("POST", "/v1beta/models/"); n != 0 {
		t.Fatalf("%d creates after a failed lookup", n)
	}
	r := e.submit(t, job)
	if got := actions(r); got != "part-00000:created" {
		t.Fatalf("submit: %s", got)
	}
	// A batch somebody made under the shard's display name is the shard's.
	b := must(e.c.Find(context.Background(), job.Hex(), "part-00001", time.Time{}))
	if b == nil || b.Metadata["displayName"] != geminibatch.DisplayName(job.Hex(), "part-00001") {
		t.Fatalf("find by display name: %+v", b)
	}
}

func TestKeyNeverInErrors(t *testing.T) {
	e := setup(t, fakegemini.Options{}, 0)
	c := must(geminibatch.New(geminibatch.Config{APIKey: testKey + "x", BaseURL: e.url, MaxRetries: -1}))
	_, err := c.Get(context.Background(), "batches/nope")
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Fatalf("error with a wrong key: %v", err)
	}
	var apiErr *geminibatch.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 {
		t.Fatalf("want a 403 APIError, got %v", err)
	}
	if _, err := c.Find(context.Background(), "j", "s", time.Time{}); err == nil || errors.Is(err, providers.ErrUnknownOutcome) {
		t.Fatalf("find with a wrong key: %v", err)
	}
}

// Some accounts refuse application/jsonl with 400 "Unsupported MIME type"
// (answered on the finalize, as a 200 with an error body): the upload is
// tried again with the next type, and fails only when every type is
// refused, naming the setting.
func TestUploadFallsBackOnUnsupportedMIME(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		refuse   []string
		types    []string // Config.UploadMIMETypes (default if nil)
		wantMIME string   // the stored file's type; "" when the upload fails
		uploads  int      // upload requests: start + finalize per try
	}{
		{"accepted", nil, nil, "application/jsonl", 2},
		{"jsonl refused", []string{"application/jsonl"}, nil, "application/json", 4},
		{"jsonl and json refused", []string{"application/jsonl", "application/json"}, nil, "text/plain", 6},
		{"every type refused", []string{"application/jsonl", "application/json", "text/plain"}, nil, "", 6},
		{"the setting's type only", []string{"application/jsonl"}, []string{"text/plain"}, "text/plain", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, fakegemini.Options{PollsPerStep: 100, RefuseMIME: c.refuse}, 0)
			if c.types != nil {
				e.drv.Client = must(geminibatch.New(geminibatch.Config{APIKey: testKey, BaseURL: e.url, RequestTimeout: 5 * time.Second,
					Jobs: lifecycle.LakeShards{Lake: e.l}, UploadMIMETypes: c.types}))
			}
			job := e.plan(t, 3, 3)
			r, err := e.drv.Submit(context.Background(), job)
			if n := e.srv.Count("POST", "/upload/v1beta/files"); n != c.uploads {
				t.Errorf("%d upload requests, want %d", n, c.uploads)
			}
			if c.wantMIME == "" {
				if err == nil || !strings.Contains(err.Error(), "Unsupported MIME type") || !strings.Contains(err.Error(), "BATCHLAKE_GEMINI_UPLOAD_MIME") {
					t.Fatalf("submit with every type refused: %v", err)
				}
				if n := len(e.srv.Batches()); n != 0 {
					t.Fatalf("%d batches created without an input file", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := actions(r); got != "part-00000:created" {
				t.Fatalf("submit: %s", got)
			}
			if got := e.srv.FileMIMEs(); len(got) != 1 || got[0] != c.wantMIME {
				t.Fatalf("stored files declared %v, want [%s]", got, c.wantMIME)
			}
		})
	}
}

// fakegemini refuses a MIME type in the upload service's shape: the
// finalize is a 200 with upload status final and an error body, no file.
func TestFakeRefusesMIMEInTheServicesShape(t *testing.T) {
	e := setup(t, fakegemini.Options{RefuseMIME: []string{"application/jsonl"}}, 0)
	start, err := http.NewRequest(http.MethodPost, e.url+"/upload/v1beta/files", strings.NewReader(`{"file":{"display_name":"x.jsonl"}}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"X-Goog-Api-Key": testKey, "X-Goog-Upload-Protocol": "resumable", "X-Goog-Upload-Command": "start",
		"X-Goog-Upload-Header-Content-Length": "3", "X-Goog-Upload-Header-Content-Type": "application/jsonl"} {
		start.Header.Set(k, v)
	}
	res := must(http.DefaultClient.Do(start))
	res.Body.Close()
	fin, err := http.NewRequest(http.MethodPost, res.Header.Get("X-Goog-Upload-URL"), strings.NewReader("{}\n"))
	if err != nil {
		t.Fatal(err)
	}
	fin.Header.Set("X-Goog-Upload-Command", "upload, finalize")
	fin.Header.Set("X-Goog-Upload-Offset", "0")
	res = must(http.DefaultClient.Do(fin))
	defer res.Body.Close()
	var body struct {
		File  json.RawMessage `json:"file"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("X-Goog-Upload-Status") != "final" || body.File != nil ||
		body.Error.Code != 400 || body.Error.Status != "INVALID_ARGUMENT" || body.Error.Message != "Unsupported MIME type: application/jsonl" {
		t.Fatalf("finalize of a refused type: %d, upload status %q, body %+v", res.StatusCode, res.Header.Get("X-Goog-Upload-Status"), body)
	}
	if got := e.srv.FileMIMEs(); len(got) != 0 {
		t.Fatalf("a refused upload stored files %v", got)
	}
}

// TestExpiryBelongsToTheBatchMade: the fake's Expire picks the batches in
// the order they are created, not the order they are polled in, as a real
// batch's expiry is its own (status polls shards side by side).
func TestExpiryBelongsToTheBatchMade(t *testing.T) {
	t.Parallel()
	e := setup(t, fakegemini.Options{PollsPerStep: 1, Faults: fakegemini.Faults{Expire: 1}}, 0)
	r := e.submit(t, e.plan(t, 6, 3))
	if len(r.Shards) != 2 {
		t.Fatalf("%d shards submitted, want 2", len(r.Shards))
	}
	ctx := context.Background()
	end := func(id string) string {
		var b *providers.Batch
		for range 3 {
			b = must(e.c.Get(ctx, id))
		}
		return b.Status
	}
	// The second shard's batch is polled to its end first.
	if got := end(r.Shards[1].ProviderJobID); got == "expired" {
		t.Errorf("second batch made: %s, want not expired", got)
	}
	if got := end(r.Shards[0].ProviderJobID); got != "expired" {
		t.Errorf("first batch made: %s, want expired", got)
	}
}
