package providers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"
)

// Batch is a provider batch as batchlake sees it.
type Batch struct {
	ID string
	// Status is the provider's own status word (validating, in_progress, completed, ...).
	Status       string
	OutputFileID string
	ErrorFileID  string
	Total        int64
	Completed    int64
	Failed       int64
	CreatedAt    time.Time
	Metadata     map[string]string
	// Errors are batch-level errors (a batch failed at validation).
	Errors []string
	// Usage is the provider's aggregate token usage of the batch, where the
	// batch object has it (OpenAI: batches created after 2025-09-07); nil
	// otherwise. Reconcile cross-checks it against the ingested lines.
	Usage *Usage
	// Duplicates, set only by Find, are the ids of further batches created
	// for the same job and shard (a create retried after a lost response
	// elsewhere): each is a paid duplicate submission to cancel or collect.
	Duplicates []string
}

// Usage is a batch's aggregate token usage as the provider reports it.
// InputTokens include the cached ones.
type Usage struct {
	InputTokens       int64
	CachedInputTokens int64
	OutputTokens      int64
}

// Terminal reports whether the provider will not change the batch any more.
func (b *Batch) Terminal() bool { return slices.Contains(TerminalStatuses, b.Status) }

// TerminalStatuses are the batch statuses after which a batch changes no
// more (a live catalog's batches view lists them in SQL).
var TerminalStatuses = []string{
	"completed", "failed", "expired", "cancelled",
	// Amazon Bedrock's words (bedrockbatch keeps them as they are): a
	// partially completed, stopped or expired job still holds paid results.
	"Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired",
}

// Metadata keys batchlake stamps on every batch it creates.
const (
	MetaJobKey  = "batchlake_job_key"
	MetaShardID = "batchlake_shard_id"
	MetaAttempt = "batchlake_attempt"
)

// ErrUnknownOutcome means a create call was sent but its outcome is unknown
// (lost response, timeout): the batch may or may not exist.
var ErrUnknownOutcome = errors.New("provider: create outcome unknown")

// Refusal reports whether an HTTP status answering a create is a definite
// refusal (nothing was created, creating again is safe): a 4xx other than
// 408 (timeout), 409 (conflict) and 429 (rate limit), which gateways send
// while the request may still be in flight upstream. A 5xx, or no answer,
// means the outcome is unknown.
func Refusal(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return false
	}
	return status >= 400 && status < 500
}

// ErrFileGone means a result file no longer exists at the provider (retention).
var ErrFileGone = errors.New("provider: file no longer available")

// Client is what the submit protocol needs from a provider's batch API.
type Client interface {
	// Upload stores a shard file for batch use and returns its file id,
	// reusing an earlier upload of the same content (name carries the digest).
	Upload(ctx context.Context, name string, r io.Reader, size int64) (fileID string, err error)
	// Find looks for a batch created for (jobKey, shardID), paging newest
	// first back to since. It returns nil, nil only when it proved absence.
	Find(ctx context.Context, jobKey, shardID string, since time.Time) (*Batch, error)
	// Create creates a batch; it must not retry on its own. An error wrapping
	// ErrUnknownOutcome means the batch may exist.
	Create(ctx context.Context, fileID, endpoint string, meta map[string]string) (*Batch, error)
	Get(ctx context.Context, id string) (*Batch, error)
	Cancel(ctx context.Context, id string) (*Batch, error)
	// Download writes a result file to w.
	Download(ctx context.Context, fileID string, w io.Writer) error
}
