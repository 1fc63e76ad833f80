package bedrockbatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrock"
	"github.com/aws/aws-sdk-go-v2/service/bedrock/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakebedrock"
	"github.com/batchlake/batchlake/providers"
	"github.com/batchlake/batchlake/providers/bedrockbatch"
)

const (
	role  = "arn:aws:iam::123456789012:role/batchlake-bedrock"
	model = "anthropic.claude-3-haiku-20240307-v1:0"
	jobA  = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	jobB  = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// env is gofakes3 plus fakebedrock on loopback, spoken to by the real SDK.
type env struct {
	fake  *fakebedrock.Server
	s3    *httptest.Server
	brk   *httptest.Server
	query url.Values
}

func newEnv(t *testing.T, opts fakebedrock.Options) *env {
	t.Helper()
	faker := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	e := &env{s3: httptest.NewServer(faker.Server())}
	t.Cleanup(e.s3.Close)
	e.query = url.Values{"region": {"us-east-1"}, "endpoint": {e.s3.URL}, "use_path_style": {"true"}, "disable_https": {"true"},
		"response_checksum_validation": {"when_required"}, "request_checksum_calculation": {"when_required"}}
	opts.OpenBucket = e.openBucket
	if opts.MinRecords == 0 {
		// The jobs here are a few records: an account whose quota allows
		// them. (The whole flow at Bedrock's minimum is tested in lifecycle.)
		opts.MinRecords = -1
	}
	e.fake = fakebedrock.New(opts)
	e.brk = httptest.NewServer(e.fake.Handler())
	t.Cleanup(e.brk.Close)
	return e
}

func (e *env) openBucket(ctx context.Context, name string) (*blob.Bucket, error) {
	return blob.OpenBucket(ctx, "s3://"+name+"?"+e.query.Encode())
}

func (e *env) config() bedrockbatch.Config {
	return bedrockbatch.Config{
		Endpoint: e.brk.URL,
		RoleARN:  role,
		Model:    func(context.Context, string) (string, error) { return model, nil },
		Input:    "s3://staging/in/?" + e.query.Encode(),
		Output:   "s3://staging/out/?" + e.query.Encode(),
	}
}

func (e *env) client(t *testing.T, cfg bedrockbatch.Config) *bedrockbatch.Client {
	t.Helper()
	c, err := bedrockbatch.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func meta(job, shard string) map[string]string {
	return map[string]string{providers.MetaJobKey: job, providers.MetaShardID: shard, providers.MetaAttempt: "1"}
}

// input is a Bedrock InvokeModel input of n Anthropic records.
func input(n int) ([]byte, []string) {
	var b bytes.Buffer
	var ids []string
	for i := range n {
		id := fmt.Sprintf("REC%08d", i)
		ids = append(ids, id)
		fmt.Fprintf(&b, `{"recordId":%q,"modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"question %d"}]}]}}`+"\n", id, i)
	}
	return b.Bytes(), ids
}

func upload(t *testing.T, c *bedrockbatch.Client, data []byte) string {
	t.Helper()
	uri, err := c.Upload(context.Background(), fmt.Sprintf("batchlake-%d.jsonl", len(data)), bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return uri
}

// TestCreateTwiceSameToken proves the promise: a Bedrock job
// submitted twice with the same token exists once — created twice in a
// row, after a lost create response (answered by the SDK's retry, or by
// the next create once the outcome was unknown), and by concurrent
// submitters.
func TestCreateTwiceSameToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data, _ := input(5)
	cases := []struct {
		name    string
		faults  fakebedrock.Faults
		attempt int // SDK max attempts (0: the default)
		run     func(t *testing.T, c *bedrockbatch.Client, file string) []string
		creates int // POSTs the fake must have seen
	}{
		{name: "twice in a row", run: func(t *testing.T, c *bedrockbatch.Client, file string) []string {
			return []string{create(t, c, file), create(t, c, file)}
		}, creates: 2},
		{name: "lost response, SDK retry", faults: fakebedrock.Faults{CreateLost: 1}, run: func(t *testing.T, c *bedrockbatch.Client, file string) []string {
			return []string{create(t, c, file)}
		}, creates: 2},
		{name: "error after creating, SDK retry", faults: fakebedrock.Faults{CreateErrorAfter: 1, CreateStatus: 503}, run: func(t *testing.T, c *bedrockbatch.Client, file string) []string {
			return []string{create(t, c, file)}
		}, creates: 2},
		{name: "lost response, unknown outcome, then Find and create again", faults: fakebedrock.Faults{CreateLost: 1}, attempt: 1,
			run: func(t *testing.T, c *bedrockbatch.Client, file string) []string {
				_, err := c.Create(ctx, file, "InvokeModel", meta(jobA, "part-00000"))
				if !errors.Is(err, providers.ErrUnknownOutcome) {
					t.Fatalf("create after a lost response: %v, want ErrUnknownOutcome", err)
				}
				found, err := c.Find(ctx, jobA, "part-00000", time.Now().Add(-time.Minute))
				if err != nil || found == nil {
					t.Fatalf("Find after the lost response = %v, %v; want the job", found, err)
				}
				return []string{found.ID, create(t, c, file)}
			}, creates: 2},
		{name: "eight concurrent submitters", run: func(t *testing.T, c *bedrockbatch.Client, file string) []string {
			var mu sync.Mutex
			var ids []string
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					// Each submitter proves absence, then creates: all may
					// pass Find before any creates.
					b, err := c.Find(ctx, jobA, "part-00000", time.Time{})
					if err == nil && b == nil {
						b, err = c.Create(ctx, file, "InvokeModel", meta(jobA, "part-00000"))
					}
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Error(err)
						return
					}
					ids = append(ids, b.ID)
				})
			}
			wg.Wait()
			return ids
		}, creates: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, fakebedrock.Options{Faults: tc.faults})
			cfg := e.config()
			cfg.MaxAttempts = tc.attempt
			c := e.client(t, cfg)
			file := upload(t, c, data)
			ids := tc.run(t, c, file)
			jobs := e.fake.Jobs()
			if len(jobs) != 1 {
				t.Fatalf("the fake holds %d jobs, want 1: %+v", len(jobs), jobs)
			}
			for _, id := range ids {
				if id != jobs[0].JobArn {
					t.Errorf("a create answered %s, the one job is %s", id, jobs[0].JobArn)
				}
			}
			tok, _ := bedrockbatch.Token(jobA, "part-00000")
			name, _ := bedrockbatch.JobName(jobA, "part-00000")
			if jobs[0].ClientRequestToken != tok || jobs[0].JobName != name || jobs[0].ModelID != model || jobs[0].RoleArn != role {
				t.Errorf("job %+v", jobs[0])
			}
			if n := e.fake.CountRequests("POST", "/model-invocation-job"); tc.creates >= 0 && n != tc.creates {
				t.Errorf("the fake saw %d creates, want %d", n, tc.creates)
			}
		})
	}
}

func create(t *testing.T, c *bedrockbatch.Client, file string) string {
	t.Helper()
	b, err := c.Create(context.Background(), file, "InvokeModel", meta(jobA, "part-00000"))
	if err != nil {
		t.Fatal(err)
	}
	return b.ID
}

// TestCreateOutcomes: which create failures are definite refusals and which
// leave the outcome unknown, and that no refusal made a job.
func TestCreateOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data, _ := input(3)
	cases := []struct {
		name      string
		faults    fakebedrock.Faults
		cfg       func(*bedrockbatch.Config)
		unknown   bool
		wantJobs  int
		wantInErr string
	}{
		{name: "validation refused", faults: fakebedrock.Faults{CreateRefused: 1, CreateStatus: 400}, wantInErr: "refused"},
		{name: "throttled through every retry", faults: fakebedrock.Faults{CreateRefused: 5, CreateStatus: 429}, unknown: true},
		{name: "server error after creating, no retries", faults: fakebedrock.Faults{CreateErrorAfter: 1}, cfg: func(c *bedrockbatch.Config) { c.MaxAttempts = 1 }, unknown: true, wantJobs: 1},
		{name: "bad role ARN", cfg: func(c *bedrockbatch.Config) { c.RoleARN = "not-an-arn" }, wantInErr: "ValidationException"},
		{name: "no role", cfg: func(c *bedrockbatch.Config) { c.RoleARN = "" }, wantInErr: "no service role ARN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, fakebedrock.Options{Faults: tc.faults})
			cfg := e.config()
			cfg.MaxAttempts = 2
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			c := e.client(t, cfg)
			_, err := c.Create(ctx, upload(t, c, data), "InvokeModel", meta(jobA, "part-00000"))
			if err == nil {
				t.Fatal("create succeeded")
			}
			if errors.Is(err, providers.ErrUnknownOutcome) != tc.unknown {
				t.Errorf("create: %v; unknown outcome = %v, want %v", err, !tc.unknown, tc.unknown)
			}
			if tc.wantInErr != "" && !strings.Contains(err.Error(), tc.wantInErr) {
				t.Errorf("create: %v, want it to mention %q", err, tc.wantInErr)
			}
			if n := len(e.fake.Jobs()); n != tc.wantJobs {
				t.Errorf("the fake holds %d jobs, want %d", n, tc.wantJobs)
			}
		})
	}
}

// TestConflict: the same token with other parameters (here another output
// prefix) is a ConflictException, which leaves the outcome unknown — a job
// with this token exists — and makes no second job; Find then binds it.
func TestConflict(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakebedrock.Options{})
	c := e.client(t, e.config())
	data, _ := input(3)
	file := upload(t, c, data)
	first := create(t, c, file)
	cfg := e.config()
	cfg.Output = "s3://staging/elsewhere/?" + e.query.Encode()
	other := e.client(t, cfg)
	_, err := other.Create(ctx, file, "InvokeModel", meta(jobA, "part-00000"))
	if !errors.Is(err, providers.ErrUnknownOutcome) || !strings.Contains(err.Error(), "ConflictException") {
		t.Fatalf("create with the same token and other parameters: %v, want an unknown outcome from a ConflictException", err)
	}
	if n := len(e.fake.Jobs()); n != 1 {
		t.Fatalf("the fake holds %d jobs, want 1", n)
	}
	b, err := other.Find(ctx, jobA, "part-00000", time.Time{})
	if err != nil || b == nil || b.ID != first {
		t.Fatalf("Find = %+v, %v; want %s", b, err, first)
	}
}

// TestFind: listing by name across pages, matching by token (not by the
// readable name, which two shard ids can share), the since window, proof
// of absence, and duplicates made outside the token.
func TestFind(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clock := now
	var mu sync.Mutex
	e := newEnv(t, fakebedrock.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	set := func(t time.Time) { mu.Lock(); clock = t; mu.Unlock() }
	cfg := e.config()
	cfg.PageSize = 2
	cfg.ClockSkew = time.Minute
	c := e.client(t, cfg)
	data, _ := input(2)
	file := upload(t, c, data)
	mk := func(job, shard string) string {
		b, err := c.Create(ctx, file, "InvokeModel", meta(job, shard))
		if err != nil {
			t.Fatal(err)
		}
		return b.ID
	}
	set(now.Add(-3 * time.Hour))
	old := mk(jobA, "old")
	set(now)
	ab := mk(jobA, "a_b")
	dash := mk(jobA, "a-b")
	mk(jobB, "a_b") // same shard, other job
	for i := range 5 {
		mk(jobA, fmt.Sprintf("x%d", i))
	}
	cases := []struct {
		name, job, shard string
		since            time.Time
		want             string
		wantPages        int
	}{
		{name: "a_b", job: jobA, shard: "a_b", since: now.Add(-time.Hour), want: ab, wantPages: 1},
		{name: "the other of the pair", job: jobA, shard: "a-b", since: now.Add(-time.Hour), want: dash, wantPages: 1},
		{name: "outside the window", job: jobA, shard: "old", since: now.Add(-time.Hour), wantPages: 1},
		{name: "within the skew margin", job: jobA, shard: "old", since: now.Add(-3*time.Hour + 30*time.Second), want: old, wantPages: 1},
		{name: "zero since", job: jobA, shard: "old", want: old, wantPages: 1},
		{name: "absent", job: jobB, shard: "never", wantPages: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.fake.CountRequests("GET", "/model-invocation-jobs")
			b, err := c.Find(ctx, tc.job, tc.shard, tc.since)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if b != nil {
				got = b.ID
				if b.Metadata[providers.MetaJobKey] != tc.job || b.Metadata[providers.MetaShardID] != tc.shard {
					t.Errorf("found job's metadata %v", b.Metadata)
				}
			}
			if got != tc.want {
				t.Errorf("Find = %q, want %q", got, tc.want)
			}
			if n := e.fake.CountRequests("GET", "/model-invocation-jobs") - before; n != tc.wantPages {
				t.Errorf("listed %d pages, want %d", n, tc.wantPages)
			}
		})
	}

	// Jobs made outside batchlake's token under our name: spread over
	// several pages, they are all reported, behind the token's job.
	raw := bedrock.New(bedrock.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.brk.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	name, _ := bedrockbatch.JobName(jobB, "dup")
	var outside []string
	for i := range 4 {
		set(now.Add(time.Duration(i-10) * time.Second))
		out, err := raw.CreateModelInvocationJob(ctx, &bedrock.CreateModelInvocationJobInput{
			JobName: aws.String(name), ModelId: aws.String(model), RoleArn: aws.String(role),
			ClientRequestToken: aws.String(fmt.Sprintf("console%d", i)),
			InputDataConfig: &types.ModelInvocationJobInputDataConfigMemberS3InputDataConfig{Value: types.ModelInvocationJobS3InputDataConfig{
				S3Uri: aws.String(file)}},
			OutputDataConfig: &types.ModelInvocationJobOutputDataConfigMemberS3OutputDataConfig{Value: types.ModelInvocationJobS3OutputDataConfig{
				S3Uri: aws.String("s3://staging/out/")}},
		})
		if err != nil {
			t.Fatal(err)
		}
		outside = append(outside, *out.JobArn)
	}
	b, err := c.Find(ctx, jobB, "dup", time.Time{})
	if err != nil || b == nil || b.ID != outside[0] || !slices.Equal(b.Duplicates, outside[1:]) {
		t.Fatalf("Find over jobs named alike without our token = %+v, %v; want %s with duplicates %v", b, err, outside[0], outside[1:])
	}
	set(now.Add(time.Minute))
	ours := mk(jobB, "dup")
	b, err = c.Find(ctx, jobB, "dup", time.Time{})
	if err != nil || b == nil || b.ID != ours || len(b.Duplicates) != len(outside) {
		t.Fatalf("Find = %+v, %v; want the token's job %s first, the %d others as duplicates", b, err, ours, len(outside))
	}
	if n := e.fake.CountRequests("GET", "/model-invocation-jobs"); n < 3 {
		t.Errorf("%d list requests: the listing did not page", n)
	}
}

// TestJobStates walks jobs to each end and checks the status words, the
// counts, whether there is output, and that output and manifest agree with
// what the fake decided.
func TestJobStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name      string
		faults    fakebedrock.Faults
		stopAt    string // status at which to cancel
		walk      []string
		processed int64 // of 20 records
		output    bool
	}{
		{name: "completed", walk: []string{"Validating", "Scheduled", "InProgress", "Completed"}, processed: 20, output: true},
		{name: "partially completed", faults: fakebedrock.Faults{Partial: 1}, walk: []string{"Validating", "Scheduled", "InProgress", "PartiallyCompleted"}, processed: 10, output: true},
		{name: "expired", faults: fakebedrock.Faults{Expire: 1}, walk: []string{"Validating", "Scheduled", "InProgress", "Expired"}, processed: 10, output: true},
		// Cancel stops, then gets the job, which the fake moves on to Stopped.
		{name: "stopped while running", stopAt: "InProgress", walk: []string{"Validating", "Scheduled", "InProgress", "Stopped"}, processed: 10, output: true},
		{name: "stopped before running", stopAt: "Scheduled", walk: []string{"Validating", "Scheduled", "Stopped"}},
		{name: "failed validation", faults: fakebedrock.Faults{FailValidation: 1}, walk: []string{"Validating", "Failed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, fakebedrock.Options{Faults: tc.faults, Seed: 3})
			c := e.client(t, e.config())
			data, ids := input(20)
			b, err := c.Create(ctx, upload(t, c, data), "InvokeModel", meta(jobA, "part-00000"))
			if err != nil {
				t.Fatal(err)
			}
			var walk []string
			for !b.Terminal() {
				if b, err = c.Get(ctx, b.ID); err != nil {
					t.Fatal(err)
				}
				walk = append(walk, b.Status)
				if b.Status == tc.stopAt {
					if b, err = c.Cancel(ctx, b.ID); err != nil {
						t.Fatal(err)
					}
					walk = append(walk, b.Status)
				}
			}
			if !slices.Equal(walk, tc.walk) {
				t.Fatalf("status walk %v, want %v", walk, tc.walk)
			}
			if tc.output != (b.OutputFileID != "") {
				t.Fatalf("output file %q, want one: %v", b.OutputFileID, tc.output)
			}
			if !tc.output {
				if (b.Status == "Failed") != (len(b.Errors) == 1) {
					t.Errorf("%s job errors %v", b.Status, b.Errors)
				}
				truth := e.fake.Outcomes(b.ID)
				for id, class := range truth {
					if class != "missing" {
						t.Errorf("record %s of a job that never ran: %s", id, class)
					}
				}
				if b.Status == "Stopped" && len(truth) != len(ids) {
					t.Errorf("the fake knows %d records of the stopped job, want %d", len(truth), len(ids))
				}
				return
			}
			if b.Completed+b.Failed != tc.processed || b.Total != 20 {
				t.Errorf("counts %d+%d of %d, want %d processed of 20", b.Completed, b.Failed, b.Total, tc.processed)
			}
			var out bytes.Buffer
			if err := c.Download(ctx, b.OutputFileID, &out); err != nil {
				t.Fatal(err)
			}
			f, _ := ingest.FormatFor("bedrock")
			truth := e.fake.Outcomes(b.ID)
			seen := map[string]bool{}
			for i, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
				row, err := f.ParseResult(line, ingest.ChannelOutput)
				if err != nil {
					t.Fatalf("output line %d: %v", i+1, err)
				}
				seen[row.CustomID] = true
				if (row.Outcome == "success") != (truth[row.CustomID] == "succeeded" || truth[row.CustomID] == "quality_failed") {
					t.Errorf("record %s: line outcome %s, fake says %s", row.CustomID, row.Outcome, truth[row.CustomID])
				}
			}
			for _, id := range ids {
				if seen[id] == (truth[id] == "missing") {
					t.Errorf("record %s: in output %v, fake says %s", id, seen[id], truth[id])
				}
			}
			if int64(len(seen)) != tc.processed {
				t.Errorf("%d records in the output, want %d", len(seen), tc.processed)
			}
			var sum bytes.Buffer
			if err := c.Download(ctx, c.SummaryFileID(b.OutputFileID), &sum); err != nil {
				t.Fatal(err)
			}
			sm, err := ingest.ParseBedrockManifest(sum.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if *sm.TotalRecordCount != 20 || *sm.ProcessedRecordCount != tc.processed || *sm.SuccessRecordCount != b.Completed {
				t.Errorf("manifest %s, job counts %d/%d", sum.String(), b.Completed, b.Failed)
			}
		})
	}
}

// TestDownloadGone: a result object deleted from S3 is ErrFileGone.
func TestDownloadGone(t *testing.T) {
	e := newEnv(t, fakebedrock.Options{})
	c := e.client(t, e.config())
	err := c.Download(context.Background(), "s3://staging/out/nojob/x.jsonl.out", &bytes.Buffer{})
	if !errors.Is(err, providers.ErrFileGone) {
		t.Fatalf("Download of a missing object: %v, want ErrFileGone", err)
	}
}

// TestTransientErrorsRetried: a failing list page and a throttled get are
// retried by the SDK (with the same request), not reported.
func TestTransientErrorsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, fakebedrock.Options{})
	c := e.client(t, e.config())
	data, _ := input(2)
	id := create(t, c, upload(t, c, data))
	e.fake.UpdateFaults(func(f *fakebedrock.Faults) { f.ListFail = 1 })
	b, err := c.Find(ctx, jobA, "part-00000", time.Time{})
	if err != nil || b == nil || b.ID != id {
		t.Fatalf("Find after a failing list = %+v, %v", b, err)
	}
	e.fake.UpdateFaults(func(f *fakebedrock.Faults) { f.Throttle = 1 })
	if _, err := c.Get(ctx, id); err != nil {
		t.Fatalf("Get after throttling: %v", err)
	}
	var faults []string
	for _, r := range e.fake.Requests() {
		if r.Fault != "" {
			faults = append(faults, r.Method+" "+r.Fault)
		}
	}
	if !slices.Equal(faults, []string{"GET list failed", "GET throttled"}) {
		t.Errorf("injected faults %v", faults)
	}
}
