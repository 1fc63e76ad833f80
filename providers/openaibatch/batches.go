package openaibatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/batchlake/batchlake/providers"
)

// Create creates a batch over an uploaded input file. meta must carry
// providers.MetaJobKey and providers.MetaShardID, or Find could not see the
// batch later; it is refused before anything is sent.
//
// The call is made exactly once. Any failure after the request may have
// reached the provider wraps providers.ErrUnknownOutcome: the caller must
// Find before it creates again.
func (c *Client) Create(ctx context.Context, fileID, endpoint string, meta map[string]string) (*providers.Batch, error) {
	jobKey, shardID := meta[providers.MetaJobKey], meta[providers.MetaShardID]
	if fileID == "" || jobKey == "" || shardID == "" {
		return nil, fmt.Errorf("openaibatch: create batch: need an input file id and metadata %s and %s", providers.MetaJobKey, providers.MetaShardID)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("openaibatch: create batch for job %s shard %s: not sent: %w", jobKey, shardID, err)
	}
	b, err := c.sdk.Batches.New(ctx, openai.BatchNewParams{
		InputFileID:      fileID,
		Endpoint:         openai.BatchNewParamsEndpoint(endpoint),
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
		Metadata:         shared.Metadata(maps.Clone(meta)),
	},
		// A retried create after a lost response is a second, paid batch.
		option.WithMaxRetries(0),
		option.WithRequestTimeout(c.cfg.CreateTimeout),
	)
	if err != nil {
		err = c.clean(err)
		if refused(err) {
			return nil, fmt.Errorf("openaibatch: create batch for job %s shard %s: refused: %w", jobKey, shardID, err)
		}
		return nil, fmt.Errorf("openaibatch: create batch for job %s shard %s: %w: %w", jobKey, shardID, providers.ErrUnknownOutcome, err)
	}
	if b == nil || b.ID == "" {
		// A 2xx without a batch: something answered, something may exist.
		return nil, fmt.Errorf("openaibatch: create batch for job %s shard %s: %w: answer has no batch id", jobKey, shardID, providers.ErrUnknownOutcome)
	}
	return toBatch(b), nil
}

// refused reports whether a create error is a definite refusal
// (providers.Refusal of its status).
func refused(err error) bool { return providers.Refusal(statusOf(err)) }

// Find looks for the batch created for (jobKey, shardID), listing batches
// newest first until they are older than since minus the clock-skew margin
// (a zero since lists everything). nil, nil means proven absent in that
// window. Of several matches the oldest is returned — the one the first
// create made — with the others in Duplicates.
func (c *Client) Find(ctx context.Context, jobKey, shardID string, since time.Time) (*providers.Batch, error) {
	bounded := !since.IsZero()
	cutoff := since.Add(-c.cfg.ClockSkew).Unix()
	var matches []openai.Batch
	params := openai.BatchListParams{Limit: openai.Int(c.cfg.PageSize)}
	for pages := 1; ; pages++ {
		page, err := c.sdk.Batches.List(ctx, params, option.WithRequestTimeout(c.cfg.RequestTimeout))
		if err != nil {
			return nil, fmt.Errorf("openaibatch: find batch for job %s shard %s: list page %d: %w", jobKey, shardID, pages, c.clean(err))
		}
		done := !page.HasMore || len(page.Data) == 0
		for _, b := range page.Data {
			if bounded && b.CreatedAt < cutoff {
				done = true
				break
			}
			if b.Metadata[providers.MetaJobKey] == jobKey && b.Metadata[providers.MetaShardID] == shardID {
				matches = append(matches, b)
			}
		}
		if done {
			break
		}
		params.After = openai.String(page.Data[len(page.Data)-1].ID)
	}
	if len(matches) == 0 {
		return nil, nil
	}
	// The list is newest first, so the last match is the oldest; ties in
	// created_at keep list order.
	oldest := toBatch(&matches[len(matches)-1])
	for _, m := range matches[:len(matches)-1] {
		oldest.Duplicates = append(oldest.Duplicates, m.ID)
	}
	if len(oldest.Duplicates) > 0 {
		c.log.Warn("several batches for one job shard; keeping the oldest",
			"job_key", jobKey, "shard_id", shardID, "batch", oldest.ID, "duplicates", oldest.Duplicates)
	}
	return oldest, nil
}

// Get fetches a batch.
func (c *Client) Get(ctx context.Context, id string) (*providers.Batch, error) {
	b, err := c.sdk.Batches.Get(ctx, id, option.WithRequestTimeout(c.cfg.RequestTimeout))
	if err != nil {
		return nil, fmt.Errorf("openaibatch: get batch %s: %w", id, c.clean(err))
	}
	return toBatch(b), nil
}

// Cancel asks the provider to cancel a batch; it moves to cancelling, then
// cancelled with partial results. Retrying a cancel is harmless, so the
// SDK's retries stay on.
func (c *Client) Cancel(ctx context.Context, id string) (*providers.Batch, error) {
	b, err := c.sdk.Batches.Cancel(ctx, id, option.WithRequestTimeout(c.cfg.RequestTimeout))
	if err != nil {
		return nil, fmt.Errorf("openaibatch: cancel batch %s: %w", id, c.clean(err))
	}
	return toBatch(b), nil
}

// toBatch maps the SDK's batch to batchlake's. The SDK already reads a
// null file id as ""; an explicit "" (seen on clean batches) is the same
// "no file" to callers.
func toBatch(b *openai.Batch) *providers.Batch {
	out := &providers.Batch{
		ID:           b.ID,
		Status:       string(b.Status),
		OutputFileID: b.OutputFileID,
		ErrorFileID:  b.ErrorFileID,
		Total:        b.RequestCounts.Total,
		Completed:    b.RequestCounts.Completed,
		Failed:       b.RequestCounts.Failed,
		CreatedAt:    time.Unix(b.CreatedAt, 0).UTC(),
		Metadata:     maps.Clone(map[string]string(b.Metadata)),
	}
	if b.JSON.Usage.Valid() {
		out.Usage = &providers.Usage{InputTokens: b.Usage.InputTokens, CachedInputTokens: b.Usage.InputTokensDetails.CachedTokens,
			OutputTokens: b.Usage.OutputTokens}
	}
	for _, e := range b.Errors.Data {
		msg := e.Message
		if e.Code != "" {
			msg = e.Code + ": " + msg
		}
		if e.Line != 0 {
			msg = fmt.Sprintf("line %d: %s", e.Line, msg)
		}
		out.Errors = append(out.Errors, msg)
	}
	return out
}

// errNotFound reports a 404 answer.
func errNotFound(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound
}
