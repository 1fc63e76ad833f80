package fakebedrock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrock"
	"github.com/aws/aws-sdk-go-v2/service/bedrock/types"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"github.com/batchlake/batchlake/internal/fakebedrock"
)

func setup(t *testing.T, opts fakebedrock.Options) (*fakebedrock.Server, *bedrock.Client, string) {
	t.Helper()
	srv := fakebedrock.New(opts)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	c := bedrock.New(bedrock.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIATEST", "secret", ""), RetryMaxAttempts: 1})
	return srv, c, hs.URL
}

func createInput(name, token, output string) *bedrock.CreateModelInvocationJobInput {
	return &bedrock.CreateModelInvocationJobInput{
		JobName: aws.String(name), ClientRequestToken: aws.String(token), ModelId: aws.String("amazon.nova-lite-v1:0"),
		RoleArn: aws.String("arn:aws:iam::123456789012:role/r"),
		InputDataConfig: &types.ModelInvocationJobInputDataConfigMemberS3InputDataConfig{Value: types.ModelInvocationJobS3InputDataConfig{
			S3Uri: aws.String("s3://b/in/x.jsonl")}},
		OutputDataConfig: &types.ModelInvocationJobOutputDataConfigMemberS3OutputDataConfig{Value: types.ModelInvocationJobS3OutputDataConfig{
			S3Uri: aws.String(output)}},
	}
}

// TestIdempotency: same token and parameters → the same job; same token,
// other parameters → ConflictException; bad names and tokens → ValidationException.
func TestIdempotency(t *testing.T) {
	srv, c, _ := setup(t, fakebedrock.Options{})
	ctx := context.Background()
	a, err := c.CreateModelInvocationJob(ctx, createInput("job-a", "tok1", "s3://b/out/"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateModelInvocationJob(ctx, createInput("job-a", "tok1", "s3://b/out/"))
	if err != nil || *b.JobArn != *a.JobArn {
		t.Fatalf("repeat create = %v, %v; want %s", b, err, *a.JobArn)
	}
	_, err = c.CreateModelInvocationJob(ctx, createInput("job-a", "tok1", "s3://b/other/"))
	var conflict *types.ConflictException
	if !errors.As(err, &conflict) {
		t.Fatalf("same token, other output: %v, want ConflictException", err)
	}
	var invalid *types.ValidationException
	for _, in := range []*bedrock.CreateModelInvocationJobInput{
		createInput("-leading-dash", "tok2", "s3://b/out/"),
		createInput(strings.Repeat("n", 64), "tok3", "s3://b/out/"),
		createInput("job-b", "tok_underscore", "s3://b/out/"),
		createInput("job-c", "trailing-", "s3://b/out/"),
	} {
		if _, err := c.CreateModelInvocationJob(ctx, in); !errors.As(err, &invalid) {
			t.Errorf("create %s/%s: %v, want ValidationException", *in.JobName, *in.ClientRequestToken, err)
		}
	}
	if n := len(srv.Jobs()); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
}

// TestList: nameContains, statusEquals, sort order and nextToken paging.
func TestList(t *testing.T) {
	srv, c, _ := setup(t, fakebedrock.Options{})
	ctx := context.Background()
	var arns []string
	for i := range 7 {
		name := fmt.Sprintf("batchlake-x-%d", i)
		if i == 6 {
			name = "other-6"
		}
		out, err := c.CreateModelInvocationJob(ctx, createInput(name, fmt.Sprintf("t%d", i), "s3://b/out/"))
		if err != nil {
			t.Fatal(err)
		}
		arns = append(arns, *out.JobArn)
	}
	// No S3: the job fails at validation, so its status differs.
	for range 2 {
		if _, err := c.GetModelInvocationJob(ctx, &bedrock.GetModelInvocationJobInput{JobIdentifier: aws.String(arns[0])}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(in *bedrock.ListModelInvocationJobsInput) []string {
		var got []string
		p := bedrock.NewListModelInvocationJobsPaginator(c, in)
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range page.InvocationJobSummaries {
				got = append(got, *s.JobArn)
			}
		}
		return got
	}
	before := srv.CountRequests("GET", "/model-invocation-jobs")
	got := list(&bedrock.ListModelInvocationJobsInput{NameContains: aws.String("batchlake-x"), MaxResults: aws.Int32(2)})
	want := slices.Clone(arns[:6])
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Errorf("newest first by name: %v, want %v", got, want)
	}
	if n := srv.CountRequests("GET", "/model-invocation-jobs") - before; n != 3 {
		t.Errorf("%d pages, want 3", n)
	}
	got = list(&bedrock.ListModelInvocationJobsInput{SortOrder: types.SortOrderAscending, StatusEquals: types.ModelInvocationJobStatusSubmitted})
	if !slices.Equal(got, arns[1:]) {
		t.Errorf("ascending, Submitted: %v, want %v", got, arns[1:])
	}
	j, _ := c.GetModelInvocationJob(ctx, &bedrock.GetModelInvocationJobInput{JobIdentifier: aws.String(arns[0])})
	if j.Status != types.ModelInvocationJobStatusFailed || aws.ToString(j.Message) == "" {
		t.Errorf("job without readable input: %s %q", j.Status, aws.ToString(j.Message))
	}
	var invalid *types.ValidationException
	if _, err := c.StopModelInvocationJob(ctx, &bedrock.StopModelInvocationJobInput{JobIdentifier: aws.String(arns[0])}); !errors.As(err, &invalid) {
		t.Errorf("stop of a failed job: %v, want ValidationException", err)
	}
}

// TestUnsigned: a request without SigV4 is refused.
func TestUnsigned(t *testing.T) {
	_, _, url := setup(t, fakebedrock.Options{})
	resp, err := http.Get(url + "/model-invocation-jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Amzn-ErrorType") != "AccessDeniedException" {
		t.Fatalf("unsigned list: %d %s", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
}

// TestMinimumRecords: a job with fewer records than the quota "Minimum
// number of records per batch inference job" is created, then fails
// validation with a message naming the quota, as Bedrock's does.
func TestMinimumRecords(t *testing.T) {
	cases := []struct {
		name    string
		min     int
		records int
		want    types.ModelInvocationJobStatus
	}{
		{"default minimum, 99 records", 0, 99, types.ModelInvocationJobStatusFailed},
		{"default minimum, 100 records", 0, 100, types.ModelInvocationJobStatusScheduled},
		{"minimum 1000, 500 records", 1000, 500, types.ModelInvocationJobStatusFailed},
		{"no minimum, 3 records", -1, 3, types.ModelInvocationJobStatusScheduled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var in strings.Builder
			for i := range c.records {
				fmt.Fprintf(&in, `{"recordId":"R%05d","modelInput":{"messages":[{"role":"user","content":[{"text":"q"}]}]}}`+"\n", i)
			}
			if err := os.MkdirAll(filepath.Join(dir, "b", "in"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "b", "in", "x.jsonl"), []byte(in.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			_, cl, _ := setup(t, fakebedrock.Options{MinRecords: c.min, OpenBucket: func(_ context.Context, name string) (*blob.Bucket, error) {
				return fileblob.OpenBucket(filepath.Join(dir, name), nil)
			}})
			ctx := context.Background()
			out, err := cl.CreateModelInvocationJob(ctx, createInput("job-min", "tokmin", "s3://b/out/"))
			if err != nil {
				t.Fatalf("create: %v (the minimum is checked while validating, not at create)", err)
			}
			var j *bedrock.GetModelInvocationJobOutput
			for range 2 { // Submitted → Validating → Failed or Scheduled
				if j, err = cl.GetModelInvocationJob(ctx, &bedrock.GetModelInvocationJobInput{JobIdentifier: out.JobArn}); err != nil {
					t.Fatal(err)
				}
			}
			if j.Status != c.want {
				t.Fatalf("job of %d records, minimum %d: %s %q, want %s", c.records, c.min, j.Status, aws.ToString(j.Message), c.want)
			}
			if c.want == types.ModelInvocationJobStatusFailed {
				msg := aws.ToString(j.Message)
				if !strings.Contains(msg, "minimum number of records per batch inference job") || !strings.Contains(msg, fmt.Sprintf("(%d)", max(c.min, 100))) {
					t.Fatalf("failure message %q does not name the quota and its value", msg)
				}
			}
		})
	}
}

// TestFaultsBelongToTheJobMade: FailValidation, Expire and Partial pick the
// jobs in the order they are created, whatever order they are polled in (a
// client may poll its jobs side by side).
func TestFaultsBelongToTheJobMade(t *testing.T) {
	dir := t.TempDir()
	var in strings.Builder
	for i := range 3 {
		fmt.Fprintf(&in, `{"recordId":"R%05d","modelInput":{"messages":[{"role":"user","content":[{"text":"q"}]}]}}`+"\n", i)
	}
	if err := os.MkdirAll(filepath.Join(dir, "b", "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b", "in", "x.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, cl, _ := setup(t, fakebedrock.Options{MinRecords: -1, Faults: fakebedrock.Faults{FailValidation: 1, Expire: 1, Partial: 1},
		OpenBucket: func(_ context.Context, name string) (*blob.Bucket, error) {
			return fileblob.OpenBucket(filepath.Join(dir, name), nil)
		}})
	ctx := context.Background()
	var arns []*string
	for i := range 4 {
		out, err := cl.CreateModelInvocationJob(ctx, createInput(fmt.Sprintf("job-%d", i), fmt.Sprintf("tok%d", i), fmt.Sprintf("s3://b/out%d/", i)))
		if err != nil {
			t.Fatal(err)
		}
		arns = append(arns, out.JobArn)
	}
	want := []types.ModelInvocationJobStatus{types.ModelInvocationJobStatusFailed, types.ModelInvocationJobStatusExpired,
		types.ModelInvocationJobStatusPartiallyCompleted, types.ModelInvocationJobStatusCompleted}
	for i := len(arns) - 1; i >= 0; i-- { // last made first
		var j *bedrock.GetModelInvocationJobOutput
		for range 6 {
			var err error
			if j, err = cl.GetModelInvocationJob(ctx, &bedrock.GetModelInvocationJobInput{JobIdentifier: arns[i]}); err != nil {
				t.Fatal(err)
			}
		}
		if j.Status != want[i] {
			t.Errorf("job %d made: %s %q, want %s", i+1, j.Status, aws.ToString(j.Message), want[i])
		}
	}
}
