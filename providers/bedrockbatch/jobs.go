package bedrockbatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrock"
	"github.com/aws/aws-sdk-go-v2/service/bedrock/types"

	"github.com/batchlake/batchlake/providers"
)

// Bedrock's job statuses (types.ModelInvocationJobStatus). They are kept as
// the provider's own words in providers.Batch.Status and the ledger.
const (
	StatusSubmitted          = string(types.ModelInvocationJobStatusSubmitted)
	StatusValidating         = string(types.ModelInvocationJobStatusValidating)
	StatusScheduled          = string(types.ModelInvocationJobStatusScheduled)
	StatusInProgress         = string(types.ModelInvocationJobStatusInProgress)
	StatusCompleted          = string(types.ModelInvocationJobStatusCompleted)
	StatusPartiallyCompleted = string(types.ModelInvocationJobStatusPartiallyCompleted)
	StatusFailed             = string(types.ModelInvocationJobStatusFailed)
	StatusStopping           = string(types.ModelInvocationJobStatusStopping)
	StatusStopped            = string(types.ModelInvocationJobStatusStopped)
	StatusExpired            = string(types.ModelInvocationJobStatusExpired)
)

// Create creates the batch inference job for one shard. meta must carry
// providers.MetaJobKey and providers.MetaShardID: the clientRequestToken
// and jobName are derived from them (Token, JobName). endpoint is the
// manifest's endpoint, which for Bedrock is the modelInvocationType
// (InvokeModel or Converse).
//
// Unlike OpenAI, the SDK's retries stay on: every attempt carries the same
// token, so Bedrock answers a retry of a create whose response was lost
// with the job it already made. When the outcome is still unknown (timeout,
// 5xx, throttling, lost connection after the retries; or a ConflictException
// saying the token is taken with other parameters) the error wraps
// providers.ErrUnknownOutcome and the caller's next Find binds the job.
func (c *Client) Create(ctx context.Context, fileID, endpoint string, meta map[string]string) (*providers.Batch, error) {
	jobKey, shardID := meta[providers.MetaJobKey], meta[providers.MetaShardID]
	if fileID == "" || jobKey == "" || shardID == "" {
		return nil, fmt.Errorf("bedrockbatch: create job: need an input file and metadata %s and %s", providers.MetaJobKey, providers.MetaShardID)
	}
	token, err := Token(jobKey, shardID)
	if err != nil {
		return nil, err
	}
	name, err := JobName(jobKey, shardID)
	if err != nil {
		return nil, err
	}
	if c.cfg.RoleARN == "" {
		return nil, fmt.Errorf("bedrockbatch: create job for job %s shard %s: %w", jobKey, shardID, errNoRole)
	}
	if c.cfg.Model == nil {
		return nil, fmt.Errorf("bedrockbatch: create job for job %s shard %s: no model configured", jobKey, shardID)
	}
	model, err := c.cfg.Model(ctx, jobKey)
	if err != nil || model == "" {
		return nil, fmt.Errorf("bedrockbatch: create job for job %s shard %s: the job's model (plan --model): %v", jobKey, shardID, err)
	}
	in := &bedrock.CreateModelInvocationJobInput{
		JobName:            aws.String(name),
		ClientRequestToken: aws.String(token),
		ModelId:            aws.String(model),
		RoleArn:            aws.String(c.cfg.RoleARN),
		InputDataConfig: &types.ModelInvocationJobInputDataConfigMemberS3InputDataConfig{Value: types.ModelInvocationJobS3InputDataConfig{
			S3Uri: aws.String(fileID), S3InputFormat: types.S3InputFormatJsonl}},
		OutputDataConfig: &types.ModelInvocationJobOutputDataConfigMemberS3OutputDataConfig{Value: types.ModelInvocationJobS3OutputDataConfig{
			S3Uri: aws.String(c.output.URI())}},
	}
	switch endpoint {
	case string(types.ModelInvocationTypeInvokeModel), string(types.ModelInvocationTypeConverse):
		in.ModelInvocationType = types.ModelInvocationType(endpoint)
	case "":
	default:
		return nil, fmt.Errorf("bedrockbatch: create job for job %s shard %s: endpoint %q: want InvokeModel or Converse", jobKey, shardID, endpoint)
	}
	if c.cfg.TimeoutHours > 0 {
		in.TimeoutDurationInHours = aws.Int32(c.cfg.TimeoutHours)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bedrockbatch: create job for job %s shard %s: not sent: %w", jobKey, shardID, err)
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CreateTimeout)
	defer cancel()
	out, err := c.sdk.CreateModelInvocationJob(cctx, in)
	if err != nil {
		if refused(err) {
			return nil, fmt.Errorf("bedrockbatch: create job for job %s shard %s: refused: %w", jobKey, shardID, err)
		}
		return nil, fmt.Errorf("bedrockbatch: create job for job %s shard %s: %w: %w", jobKey, shardID, providers.ErrUnknownOutcome, err)
	}
	if out.JobArn == nil || *out.JobArn == "" {
		return nil, fmt.Errorf("bedrockbatch: create job for job %s shard %s: %w: answer has no job ARN", jobKey, shardID, providers.ErrUnknownOutcome)
	}
	return &providers.Batch{ID: *out.JobArn, Status: StatusSubmitted, CreatedAt: time.Now().UTC(),
		Metadata: map[string]string{providers.MetaJobKey: jobKey, providers.MetaShardID: shardID, providers.MetaAttempt: meta[providers.MetaAttempt]}}, nil
}

// refused reports a definite refusal: Bedrock validated the request and
// made nothing. A ConflictException is not one (a job with this token
// exists), nor are throttling and server errors.
func refused(err error) bool {
	var (
		validation *types.ValidationException
		denied     *types.AccessDeniedException
		notFound   *types.ResourceNotFoundException
		quota      *types.ServiceQuotaExceededException
	)
	return errors.As(err, &validation) || errors.As(err, &denied) || errors.As(err, &notFound) || errors.As(err, &quota)
}

// Find looks for the job created for (jobKey, shardID): it lists jobs whose
// name contains JobName (newest first, submitted after since minus the
// clock-skew margin; a zero since lists all), reading every page, and keeps
// those whose clientRequestToken is Token or whose name is exactly
// JobName. nil, nil means none matched. The token's job is returned (the
// oldest, if several are named alike without it); any other job named as
// ours — made outside batchlake's token, by hand or by an older version —
// is listed in Duplicates, as a paid job a person should look at.
func (c *Client) Find(ctx context.Context, jobKey, shardID string, since time.Time) (*providers.Batch, error) {
	token, err := Token(jobKey, shardID)
	if err != nil {
		return nil, err
	}
	name, err := JobName(jobKey, shardID)
	if err != nil {
		return nil, err
	}
	in := &bedrock.ListModelInvocationJobsInput{
		NameContains: aws.String(name),
		SortBy:       types.SortJobsByCreationTime,
		SortOrder:    types.SortOrderDescending,
		MaxResults:   aws.Int32(c.cfg.PageSize),
	}
	if !since.IsZero() {
		in.SubmitTimeAfter = aws.Time(since.Add(-c.cfg.ClockSkew))
	}
	var matches []types.ModelInvocationJobSummary
	p := bedrock.NewListModelInvocationJobsPaginator(c.sdk, in)
	for pages := 1; p.HasMorePages(); pages++ {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		page, err := p.NextPage(rctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("bedrockbatch: find job for job %s shard %s: list page %d: %w", jobKey, shardID, pages, err)
		}
		for _, s := range page.InvocationJobSummaries {
			if aws.ToString(s.ClientRequestToken) == token || aws.ToString(s.JobName) == name {
				matches = append(matches, s)
			}
		}
	}
	if len(matches) == 0 {
		return nil, nil
	}
	// The token's job first, then by submit time.
	slices.SortStableFunc(matches, func(a, b types.ModelInvocationJobSummary) int {
		ta, tb := aws.ToString(a.ClientRequestToken) == token, aws.ToString(b.ClientRequestToken) == token
		if ta != tb {
			if ta {
				return -1
			}
			return 1
		}
		return aws.ToTime(a.SubmitTime).Compare(aws.ToTime(b.SubmitTime))
	})
	found := summaryBatch(matches[0])
	for _, m := range matches[1:] {
		found.Duplicates = append(found.Duplicates, aws.ToString(m.JobArn))
	}
	if len(found.Duplicates) > 0 {
		c.log.Warn("several Bedrock jobs named for one job shard; keeping the one with batchlake's token, or the oldest",
			"job_key", jobKey, "shard_id", shardID, "job", found.ID, "duplicates", found.Duplicates)
	}
	if found.Metadata == nil {
		found.Metadata = map[string]string{providers.MetaJobKey: jobKey, providers.MetaShardID: shardID}
	}
	return found, nil
}

// Get fetches a job. For a terminal job it also says where the output file
// is, when there is one (a job that failed validation has none).
func (c *Client) Get(ctx context.Context, id string) (*providers.Batch, error) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	out, err := c.sdk.GetModelInvocationJob(rctx, &bedrock.GetModelInvocationJobInput{JobIdentifier: aws.String(id)})
	if err != nil {
		return nil, fmt.Errorf("bedrockbatch: get job %s: %w", id, err)
	}
	b := jobBatch(out)
	if b.Terminal() {
		in, _ := out.InputDataConfig.(*types.ModelInvocationJobInputDataConfigMemberS3InputDataConfig)
		o, _ := out.OutputDataConfig.(*types.ModelInvocationJobOutputDataConfigMemberS3OutputDataConfig)
		if in != nil && o != nil {
			f := outputFileID(aws.ToString(o.Value.S3Uri), b.ID, aws.ToString(in.Value.S3Uri))
			ok, err := c.exists(ctx, f)
			if err != nil {
				return nil, fmt.Errorf("bedrockbatch: get job %s: %w", id, err)
			}
			if ok {
				b.OutputFileID = f
			}
		}
	}
	return b, nil
}

// Cancel stops a job (StopModelInvocationJob): it moves to Stopping, then
// Stopped; the records it processed stay in the output and are billed. A
// job that ended meanwhile is returned as it is.
func (c *Client) Cancel(ctx context.Context, id string) (*providers.Batch, error) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	_, err := c.sdk.StopModelInvocationJob(rctx, &bedrock.StopModelInvocationJobInput{JobIdentifier: aws.String(id)})
	cancel()
	b, gerr := c.Get(ctx, id)
	if err != nil {
		if gerr == nil && b.Terminal() {
			return b, nil
		}
		return nil, fmt.Errorf("bedrockbatch: stop job %s: %w", id, err)
	}
	return b, gerr
}

// jobBatch maps GetModelInvocationJob's answer to batchlake's Batch.
func jobBatch(j *bedrock.GetModelInvocationJobOutput) *providers.Batch {
	return toBatch(aws.ToString(j.JobArn), string(j.Status), aws.ToString(j.ClientRequestToken), aws.ToString(j.Message),
		j.SubmitTime, j.TotalRecordCount, j.SuccessRecordCount, j.ErrorRecordCount)
}

func summaryBatch(s types.ModelInvocationJobSummary) *providers.Batch {
	return toBatch(aws.ToString(s.JobArn), string(s.Status), aws.ToString(s.ClientRequestToken), aws.ToString(s.Message),
		s.SubmitTime, s.TotalRecordCount, s.SuccessRecordCount, s.ErrorRecordCount)
}

func toBatch(arn, status, token, message string, submitted *time.Time, total, success, failed *int64) *providers.Batch {
	b := &providers.Batch{ID: arn, Status: status, CreatedAt: aws.ToTime(submitted).UTC(),
		Total: aws.ToInt64(total), Completed: aws.ToInt64(success), Failed: aws.ToInt64(failed)}
	if jobKey, shardID, ok := ParseToken(token); ok {
		b.Metadata = map[string]string{providers.MetaJobKey: jobKey, providers.MetaShardID: shardID}
	}
	if message != "" && status == StatusFailed {
		b.Errors = []string{message}
	}
	return b
}
