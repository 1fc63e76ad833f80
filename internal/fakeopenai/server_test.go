package fakeopenai_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/batchlake/batchlake/internal/fakeopenai"
)

// api is a bare HTTP client for the fake, so these tests need no SDK.
type api struct {
	t    *testing.T
	base string
	key  string
}

func start(t *testing.T, opts fakeopenai.Options) (*fakeopenai.Server, *api) {
	t.Helper()
	srv := fakeopenai.New(opts)
	base, err := srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	if !strings.HasSuffix(base, "/v1/") {
		t.Fatalf("base URL %q does not end in /v1/", base)
	}
	return srv, &api{t: t, base: base, key: srv.APIKey()}
}

func (a *api) do(method, path, contentType string, body io.Reader, into any) int {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Error(err) // not Fatal: helpers also run on other goroutines
		return 0
	}
	defer func() { _ = res.Body.Close() }()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Error(err)
		return 0
	}
	if into != nil && res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, into); err != nil {
			a.t.Errorf("%s %s: %v in %s", method, path, err, data)
		}
	}
	return res.StatusCode
}

func (a *api) upload(name string, data []byte) fakeopenai.File {
	a.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write(data)
	_ = mw.Close()
	var f fakeopenai.File
	if st := a.do("POST", "files", mw.FormDataContentType(), &body, &f); st != http.StatusOK {
		a.t.Fatalf("upload: status %d", st)
	}
	return f
}

func (a *api) create(fileID string, meta map[string]string) fakeopenai.Batch {
	a.t.Helper()
	body, _ := json.Marshal(map[string]any{"input_file_id": fileID, "endpoint": "/v1/chat/completions", "completion_window": "24h", "metadata": meta})
	var b fakeopenai.Batch
	if st := a.do("POST", "batches", "application/json", bytes.NewReader(body), &b); st != http.StatusOK {
		a.t.Errorf("create: status %d", st)
	}
	return b
}

func (a *api) get(id string) fakeopenai.Batch {
	a.t.Helper()
	var b fakeopenai.Batch
	if st := a.do("GET", "batches/"+id, "", nil, &b); st != http.StatusOK {
		a.t.Errorf("get %s: status %d", id, st)
	}
	return b
}

const line = `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[]}}` + "\n"

func TestAuth(t *testing.T) {
	cases := []struct {
		name string
		key  string
		want int
	}{
		{"right key", "", http.StatusOK},
		{"wrong key", "sk-wrong-000000000000", http.StatusUnauthorized},
		{"no key", "-", http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, a := start(t, fakeopenai.Options{})
			switch tc.key {
			case "":
			case "-":
				a.key = ""
			default:
				a.key = tc.key
			}
			if got := a.do("GET", "batches", "", nil, nil); got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
			if r := srv.Requests(); len(r) != 1 || r[0].Status != tc.want || r[0].Path != "/v1/batches" {
				t.Fatalf("recorded %+v", r)
			}
		})
	}
}

// TestListPaging checks the cursor envelope: newest first, limit, after,
// has_more, first_id and last_id.
func TestListPaging(t *testing.T) {
	_, a := start(t, fakeopenai.Options{})
	f := a.upload("in.jsonl", []byte(line))
	var ids []string
	for i := range 5 {
		ids = append([]string{a.create(f.ID, map[string]string{"n": fmt.Sprint(i)}).ID}, ids...) // newest first
	}
	type page struct {
		Data    []fakeopenai.Batch `json:"data"`
		FirstID *string            `json:"first_id"`
		LastID  *string            `json:"last_id"`
		HasMore bool               `json:"has_more"`
	}
	var got []string
	after := ""
	for n := 0; ; n++ {
		var p page
		q := "batches?limit=2"
		if after != "" {
			q += "&after=" + after
		}
		if st := a.do("GET", q, "", nil, &p); st != http.StatusOK {
			t.Fatalf("list: status %d", st)
		}
		for _, b := range p.Data {
			got = append(got, b.ID)
		}
		if len(p.Data) > 0 && (*p.FirstID != p.Data[0].ID || *p.LastID != p.Data[len(p.Data)-1].ID) {
			t.Fatalf("first_id/last_id %v %v do not match page", *p.FirstID, *p.LastID)
		}
		if !p.HasMore {
			if n != 2 {
				t.Fatalf("%d pages, want 3", n+1)
			}
			break
		}
		after = *p.LastID
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("listed %v, want %v", got, ids)
	}
	if st := a.do("GET", "batches?limit=101", "", nil, nil); st != http.StatusBadRequest {
		t.Fatalf("limit 101: status %d, want 400", st)
	}
}

// TestProgress checks that PollsPerStep GETs move a batch one status on.
func TestProgress(t *testing.T) {
	_, a := start(t, fakeopenai.Options{PollsPerStep: 2})
	b := a.create(a.upload("in.jsonl", []byte(line)).ID, nil)
	var walk []string
	for range 6 {
		walk = append(walk, a.get(b.ID).Status)
	}
	want := "[validating in_progress in_progress finalizing finalizing completed]"
	if fmt.Sprint(walk) != want {
		t.Fatalf("walk %v, want %s", walk, want)
	}
	if st := a.do("POST", "batches/"+b.ID+"/cancel", "", nil, nil); st != http.StatusBadRequest {
		t.Fatalf("cancel of a completed batch: status %d, want 400", st)
	}
}

// TestCreateLost checks that a lost create leaves a batch and no answer.
func TestCreateLost(t *testing.T) {
	srv, a := start(t, fakeopenai.Options{Faults: fakeopenai.Faults{CreateLost: 1}})
	f := a.upload("in.jsonl", []byte(line))
	body := strings.NewReader(`{"input_file_id":"` + f.ID + `","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	req, _ := http.NewRequest("POST", a.base+"batches", body)
	req.Header.Set("Authorization", "Bearer "+a.key)
	if res, err := http.DefaultClient.Do(req); err == nil {
		_ = res.Body.Close()
		t.Fatalf("lost create answered %d", res.StatusCode)
	}
	if n := len(srv.Batches()); n != 1 {
		t.Fatalf("server holds %d batches, want 1", n)
	}
	// The server records the request after its handler returns, which can be
	// after the client saw the connection close: wait for it.
	var last fakeopenai.Request
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r := srv.Requests()
		if last = r[len(r)-1]; last.Fault != "" || time.Now().After(deadline) {
			break
		}
	}
	if last.Status != 0 || last.Fault != "create lost" {
		t.Fatalf("recorded %+v", last)
	}
	if srv.Faults().CreateLost != 0 {
		t.Fatal("fault counter not used up")
	}
}

// TestCreateCut: a client killed between writing a create's headers and
// its body (net/http writes them apart for a body it cannot size up front,
// as the SDK's is) sent a request the server cannot act on. The server
// records it as cut, makes no batch, and CountRequests leaves it out, so a
// test counting creates counts only those that could have made a batch.
func TestCreateCut(t *testing.T) {
	srv, a := start(t, fakeopenai.Options{})
	f := a.upload("in.jsonl", []byte(line))
	body := `{"input_file_id":"` + f.ID + `","endpoint":"/v1/chat/completions","completion_window":"24h"}`
	u, err := url.Parse(a.base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %sbatches HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		u.Path, u.Host, a.key, len(body), body[:len(body)/2])
	_ = conn.Close()

	// The server records the request once its handler has returned.
	var create *fakeopenai.Request
	for deadline := time.Now().Add(10 * time.Second); create == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no create answered in 10 s: %+v", srv.Requests())
		}
		for _, r := range srv.Requests() {
			if r.Method == "POST" && r.Path == "/v1/batches" && !r.Done.IsZero() {
				create = &r
			}
		}
	}
	if !create.Cut {
		t.Fatalf("recorded %+v, want a cut POST /v1/batches", *create)
	}
	if n := len(srv.Batches()); n != 0 {
		t.Fatalf("a cut create made %d batches", n)
	}
	if n := srv.CountRequests("POST", "/v1/batches"); n != 0 {
		t.Fatalf("CountRequests counts %d creates, want 0 (the one received was cut)", n)
	}
	// A whole create after it is counted.
	a.create(f.ID, nil)
	if n := srv.CountRequests("POST", "/v1/batches"); n != 1 {
		t.Fatalf("CountRequests counts %d creates after a whole one, want 1", n)
	}
	if srv.Requests()[len(srv.Requests())-1].Cut {
		t.Fatal("a whole create recorded as cut")
	}
}

// TestConcurrent hammers the server from several goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	srv, a := start(t, fakeopenai.Options{})
	f := a.upload("in.jsonl", []byte(line))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			b := a.create(f.ID, nil)
			for range 4 {
				a.get(b.ID)
			}
			a.do("GET", "batches?limit=3", "", nil, nil)
		})
	}
	wg.Wait()
	if n := len(srv.Batches()); n != 8 {
		t.Fatalf("%d batches, want 8", n)
	}
	for _, b := range srv.Batches() {
		if b.Status != "completed" {
			t.Fatalf("batch %s is %s", b.ID, b.Status)
		}
	}
	if srv.CountRequests("POST", "/v1/batches") != 8 {
		t.Fatal("create count")
	}
}

// TestSharedBucket: two servers keeping their state in one bucket serve the
// same files and batches, as one provider would to two processes: a batch
// created at one is listed, advanced, cancelled and downloaded at the
// other, with the same bytes a server in memory gives.
func TestSharedBucket(t *testing.T) {
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = bucket.Close() })
	shared := fakeopenai.Options{Seed: 7, Bucket: bucket, Prefix: "_state/", IDTag: "sim"}
	_, a := start(t, shared)
	_, b := start(t, shared)
	_, mem := start(t, fakeopenai.Options{Seed: 7})

	input := []byte(line + strings.Replace(line, `"a"`, `"b"`, 1) + strings.Replace(line, `"a"`, `"c"`, 1))
	f := a.upload("shard.jsonl", input)
	if !strings.HasPrefix(f.ID, "file-sim_") {
		t.Errorf("file id %q, want file-sim_…", f.ID)
	}
	var files struct{ Data []fakeopenai.File }
	if st := b.do("GET", "files", "", nil, &files); st != http.StatusOK || len(files.Data) != 1 || files.Data[0].ID != f.ID {
		t.Fatalf("the other server lists %+v (status %d), want the file %s", files.Data, st, f.ID)
	}
	meta := map[string]string{"batchlake_job_key": "job", "batchlake_shard_id": "s1"}
	made := a.create(f.ID, meta)
	if !strings.HasPrefix(made.ID, "batch_sim_") {
		t.Errorf("batch id %q, want batch_sim_…", made.ID)
	}
	var listed struct{ Data []fakeopenai.Batch }
	if st := b.do("GET", "batches", "", nil, &listed); st != http.StatusOK || len(listed.Data) != 1 || listed.Data[0].ID != made.ID {
		t.Fatalf("the other server lists %+v (status %d), want the batch %s", listed.Data, st, made.ID)
	}
	// Polls at either server move the one batch on.
	for i, want := range []string{"in_progress", "finalizing", "completed"} {
		at := []*api{a, b}[i%2]
		if got := at.get(made.ID); got.Status != want {
			t.Fatalf("poll %d: status %q, want %q", i+1, got.Status, want)
		}
	}
	done := a.get(made.ID)
	if done.OutputFileID == nil || done.RequestCounts.Total != 3 {
		t.Fatalf("finished batch %+v: want an output file and 3 requests", done)
	}

	// The same input at a server in memory gives the same bytes.
	mf := mem.upload("shard.jsonl", input)
	mb := mem.create(mf.ID, meta)
	for range 3 {
		mem.get(mb.ID)
	}
	mdone := mem.get(mb.ID)
	content := func(at *api, id *string) string {
		if id == nil {
			return ""
		}
		req, _ := http.NewRequest("GET", at.base+"files/"+*id+"/content", nil)
		req.Header.Set("Authorization", "Bearer "+at.key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		body, _ := io.ReadAll(res.Body)
		return string(body)
	}
	// Each batch's bytes are SimulateBatch's for its id: the answers and
	// defects of the seed, the line and request ids the batch's own, as a
	// provider's are unique to each request it serves.
	for _, c := range []struct {
		at   *api
		b    fakeopenai.Batch
		name string
	}{{b, done, "the other server"}, {mem, mdone, "a server in memory"}} {
		want, err := fakeopenai.SimulateBatch(input, 7, fakeopenai.DefaultRates, c.b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := content(c.at, c.b.OutputFileID); got != string(want.Output) || got == "" {
			t.Errorf("output read at %s:\n%s\nwant:\n%s", c.name, got, want.Output)
		}
		if got := content(c.at, c.b.ErrorFileID); got != string(want.Errors) {
			t.Errorf("error file read at %s:\n%s\nwant:\n%s", c.name, got, want.Errors)
		}
	}
	ids := regexp.MustCompile(`(batch_req|req)_[0-9a-f]+`)
	got, other := content(b, done.OutputFileID), content(mem, mdone.OutputFileID)
	if got == other || ids.ReplaceAllString(got, "ID") != ids.ReplaceAllString(other, "ID") {
		t.Errorf("two batches of one input: outputs\n%s\nand\n%s\nwant the same answers with ids of their own", got, other)
	}

	// A cancel at one server is seen at the other.
	second := b.create(f.ID, map[string]string{"batchlake_job_key": "job", "batchlake_shard_id": "s2"})
	if st := a.do("POST", "batches/"+second.ID+"/cancel", "", nil, nil); st != http.StatusOK {
		t.Fatalf("cancel: status %d", st)
	}
	if got := b.get(second.ID); got.Status != "cancelled" {
		t.Errorf("after a cancel at the other server: status %q, want cancelled", got.Status)
	}
}

// TestFaultsBelongToTheBatchMade checks that FailValidation and Expire pick
// the batches in the order they are created, whatever order they are
// polled in (a client may poll its batches side by side), and that a batch
// kept in a bucket keeps its fate for another server polling it.
func TestFaultsBelongToTheBatchMade(t *testing.T) {
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = bucket.Close() })
	faulty := fakeopenai.Options{Bucket: bucket, Prefix: "_state/", Faults: fakeopenai.Faults{FailValidation: 1, Expire: 1}}
	_, a := start(t, faulty)
	_, b := start(t, fakeopenai.Options{Bucket: bucket, Prefix: "_state/"})
	f := a.upload("in.jsonl", []byte(line))
	failing, expiring, plain := a.create(f.ID, nil), a.create(f.ID, nil), a.create(f.ID, nil)
	// Polled last made first, and at the server without faults.
	end := func(id string) fakeopenai.Batch {
		for range 5 {
			if got := b.get(id); got.Status == "completed" || got.Status == "failed" || got.Status == "expired" {
				return got
			}
		}
		t.Fatalf("batch %s not terminal after 5 polls", id)
		return fakeopenai.Batch{}
	}
	if got := end(plain.ID); got.Status != "completed" {
		t.Errorf("third batch made: %s, want completed", got.Status)
	}
	if got := end(expiring.ID); got.Status != "expired" {
		t.Errorf("second batch made: %s, want expired", got.Status)
	}
	got := end(failing.ID)
	if got.Status != "failed" || got.Errors == nil || len(got.Errors.Data) != 1 || got.Errors.Data[0].Code != "token_limit_exceeded" {
		t.Errorf("first batch made: %s %+v, want failed with token_limit_exceeded", got.Status, got.Errors)
	}
}
