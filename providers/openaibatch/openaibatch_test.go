package openaibatch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/providers"
	"github.com/batchlake/batchlake/providers/openaibatch"
)

// testKey looks like a real key so that a leak is unmistakable.
const testKey = "sk-proj-TEST0123456789abcdefSECRET"

const chat = "/v1/chat/completions"

// clock is the fake server's settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time   { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time)  { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }
func newClock(t time.Time) *clock { return &clock{t: t} }

// setup starts a fake OpenAI over real HTTP and an adapter pointed at it.
func setup(t *testing.T, opts fakeopenai.Options, cfg openaibatch.Config) (*fakeopenai.Server, *openaibatch.Client) {
	t.Helper()
	opts.APIKey = testKey
	srv := fakeopenai.New(opts)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	cfg.BaseURL = hs.URL + "/v1/"
	if cfg.CreateTimeout == 0 {
		cfg.CreateTimeout = 5 * time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	c, err := openaibatch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// input is an OpenAI batch input of n chat requests with ids r-000, r-001, ...
func input(n int) ([]byte, []string) {
	var b bytes.Buffer
	var ids []string
	for i := range n {
		id := fmt.Sprintf("r-%03d", i)
		ids = append(ids, id)
		fmt.Fprintf(&b, `{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"question %d"}]}}`+"\n", id, i)
	}
	return b.Bytes(), ids
}

func nameOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "batchlake-" + hex.EncodeToString(sum[:]) + ".jsonl"
}

func upload(t *testing.T, c *openaibatch.Client, data []byte) string {
	t.Helper()
	id, err := c.Upload(context.Background(), nameOf(data), bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	return id
}

func meta(job, shard, attempt string) map[string]string {
	return map[string]string{providers.MetaJobKey: job, providers.MetaShardID: shard, providers.MetaAttempt: attempt}
}

// poll GETs a batch until it is terminal.
func poll(t *testing.T, c *openaibatch.Client, id string) *providers.Batch {
	t.Helper()
	for range 10 {
		b, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if b.Terminal() {
			return b
		}
	}
	t.Fatalf("batch %s not terminal after 10 polls", id)
	return nil
}

func download(t *testing.T, c *openaibatch.Client, fileID string) []byte {
	t.Helper()
	if fileID == "" {
		return nil
	}
	var buf bytes.Buffer
	if err := c.Download(context.Background(), fileID, &buf); err != nil {
		t.Fatalf("download %s: %v", fileID, err)
	}
	return buf.Bytes()
}

// resultLine is the part of an output or error line the tests look at.
type resultLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int `json:"status_code"`
	} `json:"response"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

func parseLines(t *testing.T, data []byte) []resultLine {
	t.Helper()
	var out []resultLine
	for l := range bytes.Lines(data) {
		var r resultLine
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("result line %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

// TestCreateOutcome sends one create into each kind of trouble and checks
// that the adapter says "unknown" exactly when a batch may exist, never
// retries the create itself, and that Find then resolves the doubt so the
// job ends with exactly one batch.
func TestCreateOutcome(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		faults      fakeopenai.Faults
		endpoint    string
		wantUnknown bool
		wantCreated bool // the first create made a batch on the server
		wantStatus  int  // status in the returned APIError, 0 if none
		cfg         openaibatch.Config
	}{
		{name: "ok", wantCreated: true},
		{name: "response lost after create", faults: fakeopenai.Faults{CreateLost: 1}, wantUnknown: true, wantCreated: true},
		{name: "slow response exceeds create timeout", faults: fakeopenai.Faults{CreateSlow: 1, SlowResponse: 3 * time.Second}, wantUnknown: true, wantCreated: true,
			cfg: openaibatch.Config{CreateTimeout: 300 * time.Millisecond}},
		// An http.Client timeout, unlike the SDK's request timeout, is one
		// the SDK would retry: only retries off keep this to one batch.
		{name: "slow response exceeds http client timeout", faults: fakeopenai.Faults{CreateSlow: 1, SlowResponse: 3 * time.Second}, wantUnknown: true, wantCreated: true,
			cfg: openaibatch.Config{HTTPClient: &http.Client{Timeout: 300 * time.Millisecond}}},
		{name: "500 after the batch was made", faults: fakeopenai.Faults{CreateErrorAfter: 1, CreateStatus: 500}, wantUnknown: true, wantCreated: true, wantStatus: 500},
		{name: "503 before anything was made", faults: fakeopenai.Faults{CreateRefused: 1, CreateStatus: 503}, wantUnknown: true, wantStatus: 503},
		{name: "429 rate limited", faults: fakeopenai.Faults{CreateRefused: 1, CreateStatus: 429}, wantUnknown: true, wantStatus: 429},
		{name: "400 refusal is definite", faults: fakeopenai.Faults{CreateRefused: 1, CreateStatus: 400}, wantStatus: 400},
		{name: "invalid endpoint is definite", endpoint: "/v1/nonsense", wantStatus: 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, c := setup(t, fakeopenai.Options{Faults: tc.faults}, tc.cfg)
			ctx := context.Background()
			data, _ := input(5)
			fileID := upload(t, c, data)
			since := time.Now()
			endpoint := chat
			if tc.endpoint != "" {
				endpoint = tc.endpoint
			}

			b, err := c.Create(ctx, fileID, endpoint, meta("job-1", "shard-0", "1"))
			if got := errors.Is(err, providers.ErrUnknownOutcome); got != tc.wantUnknown {
				t.Fatalf("Create error %v: unknown outcome = %v, want %v", err, got, tc.wantUnknown)
			}
			if tc.name == "ok" && (err != nil || b == nil || b.ID == "") {
				t.Fatalf("Create = %v, %v; want a batch", b, err)
			}
			gotStatus := 0
			var apiErr *openaibatch.APIError
			if errors.As(err, &apiErr) {
				gotStatus = apiErr.StatusCode
			}
			if gotStatus != tc.wantStatus {
				t.Errorf("Create error %v: status %d, want %d", err, gotStatus, tc.wantStatus)
			}
			if n := srv.CountRequests("POST", "/v1/batches"); n != 1 {
				t.Fatalf("server saw %d create requests, want exactly 1 (SDK retries must be off)", n)
			}
			held := srv.Batches()
			if got := len(held) == 1; got != tc.wantCreated {
				t.Fatalf("server holds %d batches after the create, want created=%v", len(held), tc.wantCreated)
			}

			// What the submit protocol does next: look before creating again.
			found, err := c.Find(ctx, "job-1", "shard-0", since)
			if err != nil {
				t.Fatalf("Find: %v", err)
			}
			switch {
			case tc.wantCreated && (found == nil || found.ID != held[0].ID):
				t.Fatalf("Find = %+v, want the batch %s the server made", found, held[0].ID)
			case !tc.wantCreated && found != nil:
				t.Fatalf("Find = %+v, want proven absence", found)
			}
			if found == nil && tc.endpoint == "" {
				if _, err := c.Create(ctx, fileID, chat, meta("job-1", "shard-0", "1")); err != nil {
					t.Fatalf("second create: %v", err)
				}
			}
			if tc.endpoint == "" {
				if n := len(srv.Batches()); n != 1 {
					t.Fatalf("server holds %d batches at the end, want exactly 1", n)
				}
			}
		})
	}
}

// TestCreateNeedsMetadata checks that a create Find could never see again
// is refused before anything is sent.
func TestCreateNeedsMetadata(t *testing.T) {
	srv, c := setup(t, fakeopenai.Options{}, openaibatch.Config{})
	data, _ := input(1)
	fileID := upload(t, c, data)
	_, err := c.Create(context.Background(), fileID, chat, map[string]string{providers.MetaJobKey: "j"})
	if err == nil || errors.Is(err, providers.ErrUnknownOutcome) {
		t.Fatalf("Create without shard id: %v, want a definite error", err)
	}
	if n := srv.CountRequests("POST", "/v1/batches"); n != 0 {
		t.Fatalf("server saw %d creates, want 0", n)
	}
}

// TestUploadRetries checks that transient upload failures are retried by
// the SDK and end in exactly one stored file.
func TestUploadRetries(t *testing.T) {
	cases := []struct {
		name    string
		faults  fakeopenai.Faults
		wantErr bool
		posts   int
	}{
		{name: "two 500s", faults: fakeopenai.Faults{UploadRefused: 2, UploadStatus: 500}, posts: 3},
		{name: "two 429s", faults: fakeopenai.Faults{UploadRefused: 2, UploadStatus: 429}, posts: 3},
		{name: "one 503", faults: fakeopenai.Faults{UploadRefused: 1, UploadStatus: 503}, posts: 2},
		{name: "three 500s exhaust the retries", faults: fakeopenai.Faults{UploadRefused: 3, UploadStatus: 500}, wantErr: true, posts: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := setup(t, fakeopenai.Options{Faults: tc.faults}, openaibatch.Config{})
			data, _ := input(3)
			id, err := c.Upload(context.Background(), nameOf(data), bytes.NewReader(data), int64(len(data)))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Upload = %q, %v; want error %v", id, err, tc.wantErr)
			}
			if n := srv.CountRequests("POST", "/v1/files"); n != tc.posts {
				t.Errorf("server saw %d uploads, want %d", n, tc.posts)
			}
			files := srv.Files()
			if tc.wantErr {
				if len(files) != 0 {
					t.Errorf("server holds %d files, want 0", len(files))
				}
				return
			}
			if len(files) != 1 || files[0].ID != id || files[0].Bytes != int64(len(data)) || files[0].Purpose != "batch" {
				t.Fatalf("server files %+v, want one batch file %s of %d bytes", files, id, len(data))
			}
		})
	}
}

// TestUploadReuse checks that an upload of content already uploaded makes
// no new file, and that a different name or size does.
func TestUploadReuse(t *testing.T) {
	srv, c := setup(t, fakeopenai.Options{}, openaibatch.Config{})
	ctx := context.Background()
	data, _ := input(4)
	first := upload(t, c, data)
	again := upload(t, c, data)
	if again != first {
		t.Fatalf("second upload of the same content gave %s, want %s", again, first)
	}
	if n := srv.CountRequests("POST", "/v1/files"); n != 1 {
		t.Fatalf("server saw %d uploads, want 1", n)
	}

	// Same name, other size: an earlier upload that is not this content.
	short := data[:len(data)/2]
	other, err := c.Upload(ctx, nameOf(data), bytes.NewReader(short), int64(len(short)))
	if err != nil {
		t.Fatal(err)
	}
	if other == first {
		t.Fatalf("upload of other bytes under the same name reused %s", first)
	}
	// Other content, other name.
	data2, _ := input(5)
	if id := upload(t, c, data2); id == first || id == other {
		t.Fatalf("upload of other content reused %s", id)
	}
	if n := len(srv.Files()); n != 3 {
		t.Fatalf("server holds %d files, want 3", n)
	}
}

// TestFind checks paging newest first across several pages, the stop at
// since (minus the skew margin), and that a match older than the window is
// not reported.
func TestFind(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	clk := newClock(now)
	srv, c := setup(t, fakeopenai.Options{Now: clk.Now}, openaibatch.Config{PageSize: 3, ClockSkew: 5 * time.Minute})
	ctx := context.Background()
	data, _ := input(2)
	fileID := upload(t, c, data)
	create := func(at time.Time, shard string) string {
		clk.Set(at)
		b, err := c.Create(ctx, fileID, chat, meta("job-1", shard, "1"))
		if err != nil {
			t.Fatal(err)
		}
		return b.ID
	}
	// Newest first the list is: s-6 s-5 s-4 | s-3 s-2 s-1 | s-0 old o-3 | o-2 o-1 o-0
	for i := range 4 {
		create(now.Add(-5*time.Hour), fmt.Sprintf("o-%d", i))
	}
	oldID := create(now.Add(-2*time.Hour), "s-old")
	recent := map[string]string{}
	for i := range 7 {
		s := fmt.Sprintf("s-%d", i)
		recent[s] = create(now, s)
	}
	// A batch of another job with the same shard id must not match.
	clk.Set(now)
	if _, err := c.Create(ctx, fileID, chat, meta("job-2", "s-0", "1")); err != nil {
		t.Fatal(err)
	}
	// ... which makes the list: j2 s-6 s-5 | s-4 s-3 s-2 | s-1 s-0 old | o-3 o-2 o-1 | o-0

	cases := []struct {
		name      string
		shard     string
		since     time.Time
		wantID    string
		wantPages int
	}{
		{name: "first page", shard: "s-6", since: now.Add(-time.Minute), wantID: recent["s-6"], wantPages: 3},
		{name: "third page", shard: "s-0", since: now.Add(-time.Minute), wantID: recent["s-0"], wantPages: 3},
		{name: "older than since is not looked at", shard: "s-old", since: now.Add(-time.Minute), wantPages: 3},
		{name: "within the skew margin", shard: "s-old", since: now.Add(-2*time.Hour + 2*time.Minute), wantID: oldID, wantPages: 4},
		{name: "wider window", shard: "s-old", since: now.Add(-3 * time.Hour), wantID: oldID, wantPages: 4},
		{name: "zero since lists everything", shard: "absent", wantPages: 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.CountRequests("GET", "/v1/batches")
			b, err := c.Find(ctx, "job-1", tc.shard, tc.since)
			if err != nil {
				t.Fatal(err)
			}
			gotID := ""
			if b != nil {
				gotID = b.ID
				if b.Metadata[providers.MetaShardID] != tc.shard || len(b.Duplicates) != 0 {
					t.Errorf("Find = %+v", b)
				}
			}
			if gotID != tc.wantID {
				t.Errorf("Find found %q, want %q", gotID, tc.wantID)
			}
			if pages := srv.CountRequests("GET", "/v1/batches") - before; pages != tc.wantPages {
				t.Errorf("Find listed %d pages, want %d", pages, tc.wantPages)
			}
		})
	}
}

// TestFindDuplicates checks that of two batches for one shard Find returns
// the older and names the other, never hiding it.
func TestFindDuplicates(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	clk := newClock(now.Add(-time.Minute))
	var logs bytes.Buffer
	_, c := setup(t, fakeopenai.Options{Now: clk.Now}, openaibatch.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	data, _ := input(2)
	fileID := upload(t, c, data)
	first, err := c.Create(ctx, fileID, chat, meta("job-1", "shard-0", "1"))
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(now)
	second, err := c.Create(ctx, fileID, chat, meta("job-1", "shard-0", "1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Find(ctx, "job-1", "shard-0", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if b == nil || b.ID != first.ID || !slices.Equal(b.Duplicates, []string{second.ID}) {
		t.Fatalf("Find = %+v, want %s with duplicate %s", b, first.ID, second.ID)
	}
	if !strings.Contains(logs.String(), second.ID) {
		t.Errorf("the duplicate was not logged: %q", logs.String())
	}
}

// TestLifecycle runs a batch to completion and checks the status walk, the
// request counts and that the result files are the simulator's output for
// the attempt's rates.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	cases := []struct {
		attempt string
		rates   fakeopenai.Rates
	}{
		{attempt: "1", rates: fakeopenai.DefaultRates},
		{attempt: "2", rates: fakeopenai.RetryRates},
	}
	for _, tc := range cases {
		t.Run("attempt "+tc.attempt, func(t *testing.T) {
			t.Parallel()
			const seed = 7
			_, c := setup(t, fakeopenai.Options{Seed: seed}, openaibatch.Config{})
			ctx := context.Background()
			data, ids := input(500) // enough for sim's 1% duplicates to show
			b, err := c.Create(ctx, upload(t, c, data), chat, meta("job-1", "shard-0", tc.attempt))
			if err != nil {
				t.Fatal(err)
			}
			if b.Status != "validating" || b.Metadata[providers.MetaAttempt] != tc.attempt || b.CreatedAt.IsZero() {
				t.Fatalf("created %+v", b)
			}
			var walk []string
			for !b.Terminal() {
				if b, err = c.Get(ctx, b.ID); err != nil {
					t.Fatal(err)
				}
				walk = append(walk, b.Status)
			}
			if want := []string{"in_progress", "finalizing", "completed"}; !slices.Equal(walk, want) {
				t.Fatalf("status walk %v, want %v", walk, want)
			}
			want, err := fakeopenai.SimulateBatch(data, seed, tc.rates, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if b.Total != int64(len(ids)) || b.Completed != want.Completed || b.Failed != want.Failed {
				t.Errorf("counts %d/%d/%d, want %d/%d/%d", b.Total, b.Completed, b.Failed, len(ids), want.Completed, want.Failed)
			}
			out := download(t, c, b.OutputFileID)
			if !bytes.Equal(out, want.Output) {
				t.Errorf("output file differs from fakeopenai.Simulate with the attempt's rates")
			}
			if tc.attempt == "1" {
				// The defects a reconciler must survive reach the client.
				sent := map[string]bool{}
				for _, id := range ids {
					sent[id] = true
				}
				seen := map[string]int{}
				var order []string
				unknown := 0
				for _, l := range parseLines(t, out) {
					seen[l.CustomID]++
					order = append(order, l.CustomID)
					if !sent[l.CustomID] {
						unknown++
					}
				}
				dups := 0
				for _, n := range seen {
					if n > 1 {
						dups++
					}
				}
				if unknown == 0 || dups == 0 || slices.IsSorted(order) {
					t.Errorf("first-attempt output has %d unknown ids, %d duplicated ids, sorted=%v; want shuffled with both",
						unknown, dups, slices.IsSorted(order))
				}
			}
			if got := download(t, c, b.ErrorFileID); !bytes.Equal(got, want.Errors) {
				t.Errorf("error file differs from fakeopenai.Simulate with the attempt's rates")
			}
		})
	}
}

// TestPartialResults checks that an expired or cancelled batch keeps the
// finished lines and reports every unfinished request as an error line
// with the right code.
func TestPartialResults(t *testing.T) {
	cases := []struct {
		name   string
		faults fakeopenai.Faults
		cancel bool
		status string
		code   string
	}{
		{name: "expired", faults: fakeopenai.Faults{Expire: 1}, status: "expired", code: "batch_expired"},
		{name: "cancelled", cancel: true, status: "cancelled", code: "batch_cancelled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clean := fakeopenai.Rates{} // no simulated defects: every finished request succeeds
			_, c := setup(t, fakeopenai.Options{Rates: &clean, PartialFraction: 0.5, Faults: tc.faults}, openaibatch.Config{})
			ctx := context.Background()
			data, ids := input(20)
			b, err := c.Create(ctx, upload(t, c, data), chat, meta("job-1", "shard-0", "1"))
			if err != nil {
				t.Fatal(err)
			}
			if b, err = c.Get(ctx, b.ID); err != nil || b.Status != "in_progress" {
				t.Fatalf("Get = %+v, %v; want in_progress", b, err)
			}
			if tc.cancel {
				if b, err = c.Cancel(ctx, b.ID); err != nil || b.Status != "cancelling" {
					t.Fatalf("Cancel = %+v, %v; want cancelling", b, err)
				}
			}
			b = poll(t, c, b.ID)
			if b.Status != tc.status {
				t.Fatalf("status %s, want %s", b.Status, tc.status)
			}
			finished, unfinished := ids[:10], ids[10:]
			var gotOK, gotCode []string
			for _, l := range parseLines(t, download(t, c, b.OutputFileID)) {
				if l.Response == nil || l.Response.StatusCode != 200 {
					t.Errorf("output line %+v is not a success", l)
				}
				gotOK = append(gotOK, l.CustomID)
			}
			for _, l := range parseLines(t, download(t, c, b.ErrorFileID)) {
				if l.Error == nil || l.Error.Code != tc.code {
					t.Errorf("error line %+v, want code %s", l, tc.code)
					continue
				}
				gotCode = append(gotCode, l.CustomID)
			}
			slices.Sort(gotOK)
			slices.Sort(gotCode)
			if !slices.Equal(gotOK, finished) {
				t.Errorf("output ids %v, want the finished %v", gotOK, finished)
			}
			if !slices.Equal(gotCode, unfinished) {
				t.Errorf("%s ids %v, want the unfinished %v", tc.code, gotCode, unfinished)
			}
			if b.Total != 20 || b.Completed != 10 || b.Failed != 10 {
				t.Errorf("counts %d/%d/%d, want 20/10/10", b.Total, b.Completed, b.Failed)
			}
		})
	}
}

// TestFailedValidation checks that a batch failing validation reports its
// batch-level errors and no result files.
func TestFailedValidation(t *testing.T) {
	good, _ := input(3)
	cases := []struct {
		name   string
		faults fakeopenai.Faults
		input  []byte
		code   string
	}{
		{name: "token limit", faults: fakeopenai.Faults{FailValidation: 1}, input: good, code: "token_limit_exceeded"},
		{name: "malformed line", input: append(slices.Clone(good), "{not json\n"...), code: "invalid_json_line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c := setup(t, fakeopenai.Options{Faults: tc.faults}, openaibatch.Config{})
			b, err := c.Create(context.Background(), upload(t, c, tc.input), chat, meta("job-1", "shard-0", "1"))
			if err != nil {
				t.Fatal(err)
			}
			b = poll(t, c, b.ID)
			if b.Status != "failed" || len(b.Errors) != 1 || !strings.HasPrefix(b.Errors[0], tc.code+": ") {
				t.Fatalf("batch %+v, want failed with %s", b, tc.code)
			}
			if b.OutputFileID != "" || b.ErrorFileID != "" {
				t.Errorf("failed batch has files %q %q", b.OutputFileID, b.ErrorFileID)
			}
		})
	}
}

// TestDownloadGone checks that a result file deleted by retention is
// ErrFileGone while it was downloadable before, and that other failures
// are not.
func TestDownloadGone(t *testing.T) {
	srv, c := setup(t, fakeopenai.Options{}, openaibatch.Config{})
	ctx := context.Background()
	data, _ := input(50)
	b, err := c.Create(ctx, upload(t, c, data), chat, meta("job-1", "shard-0", "1"))
	if err != nil {
		t.Fatal(err)
	}
	b = poll(t, c, b.ID)
	if len(download(t, c, b.OutputFileID)) == 0 {
		t.Fatal("empty output before retention")
	}
	srv.UpdateFaults(func(f *fakeopenai.Faults) { f.FilesGone = true })
	err = c.Download(ctx, b.OutputFileID, &bytes.Buffer{})
	if !errors.Is(err, providers.ErrFileGone) {
		t.Fatalf("Download after retention: %v, want ErrFileGone", err)
	}

	// A refused key is not a gone file.
	_, wrong := setup(t, fakeopenai.Options{}, openaibatch.Config{APIKey: "sk-wrong-key-0000000000"})
	err = wrong.Download(ctx, "file-fake000001", &bytes.Buffer{})
	if err == nil || errors.Is(err, providers.ErrFileGone) {
		t.Fatalf("Download with a wrong key: %v, want an error other than ErrFileGone", err)
	}
}

// TestKeyNeverInErrors drives every call into an error whose answer quotes
// the API key in full and checks that no returned error or log line
// carries it.
func TestKeyNeverInErrors(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := context.Background()
	data, _ := input(2)

	srv, c := setup(t, fakeopenai.Options{Faults: fakeopenai.Faults{LeakKey: true}}, openaibatch.Config{Logger: log})
	fileID := upload(t, c, data)
	srv.UpdateFaults(func(f *fakeopenai.Faults) {
		f.CreateRefused, f.CreateStatus = 1, 400
		f.UploadRefused, f.UploadStatus = 3, 500
	})
	_, createErr := c.Create(ctx, fileID, chat, meta("job-1", "shard-0", "1"))
	other, _ := input(3)
	_, uploadErr := c.Upload(ctx, nameOf(other), bytes.NewReader(other), int64(len(other)))

	// The key presented is the one to hide, even when the server rejects it.
	const badKey = "sk-proj-WRONG0123456789abcdefSECRET"
	_, bad := setup(t, fakeopenai.Options{Faults: fakeopenai.Faults{LeakKey: true}}, openaibatch.Config{APIKey: badKey, Logger: log})
	_, getErr := bad.Get(ctx, "batch_x")
	_, findErr := bad.Find(ctx, "job-1", "shard-0", time.Time{})
	downloadErr := bad.Download(ctx, "file-x", &bytes.Buffer{})
	_, badCreateErr := bad.Create(ctx, "file-x", chat, meta("job-1", "shard-0", "1"))

	cases := []struct {
		name string
		err  error
		key  string
	}{
		{"create refused", createErr, testKey},
		{"upload refused", uploadErr, testKey},
		{"get with a wrong key", getErr, badKey},
		{"find with a wrong key", findErr, badKey},
		{"download with a wrong key", downloadErr, badKey},
		{"create with a wrong key", badCreateErr, badKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("no error")
			}
			for _, s := range []string{tc.err.Error(), fmt.Sprintf("%+v", tc.err), fmt.Sprintf("%#v", tc.err)} {
				if strings.Contains(s, tc.key) {
					t.Fatalf("error carries the API key: %s", s)
				}
			}
			// The server did quote the key: the adapter removed it.
			if !strings.Contains(tc.err.Error(), "[redacted]") {
				t.Errorf("error %q shows no redaction; the test did not exercise a leak", tc.err)
			}
		})
	}
	if strings.Contains(logs.String(), testKey) || strings.Contains(logs.String(), badKey) {
		t.Errorf("logs carry the API key: %s", logs.String())
	}
	// 401 on create is a definite refusal, not an unknown outcome.
	if errors.Is(badCreateErr, providers.ErrUnknownOutcome) {
		t.Errorf("create with a wrong key: %v, want a definite error", badCreateErr)
	}
}

// TestNewFromEnvironment checks that credentials and endpoint come from
// OPENAI_API_KEY and OPENAI_BASE_URL, and that no key is an error.
func TestNewFromEnvironment(t *testing.T) {
	srv := fakeopenai.New(fakeopenai.Options{APIKey: testKey})
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	t.Setenv("OPENAI_API_KEY", testKey)
	t.Setenv("OPENAI_BASE_URL", hs.URL+"/v1/")
	c, err := openaibatch.New(openaibatch.Config{})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := input(1)
	if _, err := c.Upload(context.Background(), nameOf(data), bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("upload with environment credentials: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) == 0 || reqs[len(reqs)-1].Status != http.StatusOK {
		t.Fatalf("requests %+v", reqs)
	}

	t.Setenv("OPENAI_API_KEY", "")
	if _, err := openaibatch.New(openaibatch.Config{}); err == nil {
		t.Fatal("New without a key succeeded")
	}
}
