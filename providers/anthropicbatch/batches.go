package anthropicbatch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/providers"
)

// maxLine bounds one request line of a shard (a request is part of a body
// of at most 256 MB).
const maxLine = 256 << 20

// Upload stages a shard for Create: Anthropic takes requests inline, so
// nothing is sent here. Each line must be a {custom_id, params} object with
// a custom_id Anthropic accepts; the body {"requests":[…]} is written to a
// temporary file and the returned id names it.
func (c *Client) Upload(ctx context.Context, name string, r io.Reader, size int64) (string, error) {
	f, err := os.CreateTemp(c.cfg.TmpDir, "batchlake-anthropic-*.json")
	if err != nil {
		return "", fmt.Errorf("anthropicbatch: stage %s: %w", name, err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(`{"requests":[`)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), maxLine)
	n, lineNo := 0, 0
	for sc.Scan() {
		lineNo++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var req struct {
			CustomID string          `json:"custom_id"`
			Params   json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(line, &req); err != nil || len(req.Params) == 0 {
			return "", fmt.Errorf("anthropicbatch: stage %s line %d: want {custom_id, params}", name, lineNo)
		}
		if !ingest.ValidAnthropicID(req.CustomID) {
			return "", fmt.Errorf("anthropicbatch: stage %s line %d: custom_id %q does not match ^[a-zA-Z0-9_-]{1,64}$", name, lineNo, req.CustomID)
		}
		if n > 0 {
			w.WriteByte(',')
		}
		w.Write(line)
		n++
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("anthropicbatch: stage %s: %w", name, err)
	}
	if n == 0 {
		return "", fmt.Errorf("anthropicbatch: stage %s: no requests", name)
	}
	w.WriteString(`]}`)
	if err := w.Flush(); err != nil {
		return "", fmt.Errorf("anthropicbatch: stage %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("anthropicbatch: stage %s: %w", name, err)
	}
	ok = true
	id := "staged:" + strings.TrimSuffix(name, ".jsonl")
	c.mu.Lock()
	if old, dup := c.staged[id]; dup {
		os.Remove(old.path)
	}
	c.staged[id] = staged{path: f.Name(), count: n}
	c.mu.Unlock()
	return id, nil
}

// Create sends the staged requests as one batch. meta must carry the job
// and shard (for messages only: Anthropic stores no metadata). The call is
// made once; a failure after the request may have reached the API wraps
// providers.ErrUnknownOutcome. The staged body is removed either way.
func (c *Client) Create(ctx context.Context, fileID, endpoint string, meta map[string]string) (*providers.Batch, error) {
	jobKey, shardID := meta[providers.MetaJobKey], meta[providers.MetaShardID]
	c.mu.Lock()
	st, ok := c.staged[fileID]
	delete(c.staged, fileID)
	c.mu.Unlock()
	if !ok || jobKey == "" || shardID == "" {
		return nil, fmt.Errorf("anthropicbatch: create batch: need a staged shard from Upload (got %q) and metadata %s and %s", fileID, providers.MetaJobKey, providers.MetaShardID)
	}
	defer os.Remove(st.path)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("anthropicbatch: create batch for job %s shard %s: not sent: %w", jobKey, shardID, err)
	}
	body, err := os.Open(st.path)
	if err != nil {
		return nil, fmt.Errorf("anthropicbatch: create batch for job %s shard %s: not sent: %w", jobKey, shardID, err)
	}
	defer body.Close()
	var b *anthropic.MessageBatch
	err = c.sdk.Post(ctx, "v1/messages/batches", nil, &b,
		option.WithRequestBody("application/json", body),
		// A retried create after a lost answer is a second, paid batch.
		option.WithMaxRetries(0),
		option.WithRequestTimeout(c.cfg.CreateTimeout),
	)
	if err != nil {
		err = c.clean(err)
		if refused(err) {
			return nil, fmt.Errorf("anthropicbatch: create batch for job %s shard %s: refused: %w", jobKey, shardID, err)
		}
		return nil, fmt.Errorf("anthropicbatch: create batch for job %s shard %s: %w: %w", jobKey, shardID, providers.ErrUnknownOutcome, err)
	}
	if b == nil || b.ID == "" {
		return nil, fmt.Errorf("anthropicbatch: create batch for job %s shard %s: %w: answer has no batch id", jobKey, shardID, providers.ErrUnknownOutcome)
	}
	c.log.Info("created batch", "job_key", jobKey, "shard_id", shardID, "batch", b.ID, "requests", st.count)
	return toBatch(b), nil
}

// Find looks for the batch of (jobKey, shardID) among the batches created
// since `since` minus the clock-skew margin (a zero since lists all). See
// the package doc for how a candidate is proven to be, or not to be, the
// shard's batch. Of several proven batches the oldest is returned, the
// others in Duplicates.
func (c *Client) Find(ctx context.Context, jobKey, shardID string, since time.Time) (*providers.Batch, error) {
	if c.cfg.Shards == nil {
		return nil, fmt.Errorf("anthropicbatch: find batch for job %s shard %s: no shard index configured: cannot prove absence", jobKey, shardID)
	}
	ids, err := c.cfg.Shards.CustomIDs(ctx, jobKey, shardID)
	if err != nil {
		return nil, fmt.Errorf("anthropicbatch: find batch for job %s shard %s: %w", jobKey, shardID, err)
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	bounded := !since.IsZero()
	cutoff := since.Add(-c.cfg.ClockSkew)
	var cands []anthropic.MessageBatch
	params := anthropic.MessageBatchListParams{Limit: anthropic.Int(c.cfg.PageSize)}
	for pages := 1; ; pages++ {
		page, err := c.sdk.Messages.Batches.List(ctx, params, c.reqTimeout())
		if err != nil {
			return nil, fmt.Errorf("anthropicbatch: find batch for job %s shard %s: list page %d: %w", jobKey, shardID, pages, c.clean(err))
		}
		done := !page.HasMore || len(page.Data) == 0
		for _, b := range page.Data {
			if bounded && b.CreatedAt.Before(cutoff) {
				done = true
				break
			}
			// An ended batch's counts are final: only the shard's size can
			// be its batch. One still in progress may show fewer requests
			// than it holds (processing is a live count, filled in while
			// the batch is set up), so any smaller one is a candidate too —
			// unverifiable until it ends, never proof of absence. More
			// requests than the shard's is never the shard's batch.
			n := total(b.RequestCounts)
			if n == int64(len(want)) || n < int64(len(want)) && b.ProcessingStatus != anthropic.MessageBatchProcessingStatusEnded {
				cands = append(cands, b)
			}
		}
		if done {
			break
		}
		params.AfterID = anthropic.String(page.Data[len(page.Data)-1].ID)
	}
	if len(cands) == 0 {
		return nil, nil
	}
	bound, err := c.cfg.Shards.Bound(ctx)
	if err != nil {
		return nil, fmt.Errorf("anthropicbatch: find batch for job %s shard %s: bound batches: %w", jobKey, shardID, err)
	}
	var matches []anthropic.MessageBatch
	var unverified []string
	// Oldest first: the first create made the batch to keep.
	for i := len(cands) - 1; i >= 0; i-- {
		b := cands[i]
		if where, ok := bound[b.ID]; ok {
			c.log.Debug("candidate batch is bound to another shard", "batch", b.ID, "bound_to", where)
			continue
		}
		if b.ProcessingStatus != anthropic.MessageBatchProcessingStatusEnded || !b.ArchivedAt.IsZero() || b.ResultsURL == "" {
			what := string(b.ProcessingStatus)
			if n := total(b.RequestCounts); n != int64(len(want)) {
				what += fmt.Sprintf(", %d of %d requests counted so far", n, len(want))
			}
			unverified = append(unverified, fmt.Sprintf("%s (%s)", b.ID, what))
			continue
		}
		same, err := c.sameIDs(ctx, &b, want)
		if errors.Is(err, providers.ErrFileGone) {
			unverified = append(unverified, b.ID+" (results gone)")
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("anthropicbatch: find batch for job %s shard %s: verify %s: %w", jobKey, shardID, b.ID, err)
		}
		if same {
			matches = append(matches, b)
		}
	}
	if len(matches) > 0 {
		out := toBatch(&matches[0])
		for _, m := range matches[1:] {
			out.Duplicates = append(out.Duplicates, m.ID)
		}
		if len(out.Duplicates) > 0 {
			c.log.Warn("several batches for one job shard; keeping the oldest", "job_key", jobKey, "shard_id", shardID, "batch", out.ID, "duplicates", out.Duplicates)
		}
		return out, nil
	}
	if len(unverified) > 0 {
		return nil, fmt.Errorf("job %s shard %s: %d request(s), created since %s: %s: %w",
			jobKey, shardID, len(want), cutoff.UTC().Format(time.RFC3339), strings.Join(unverified, ", "), ErrUnverified)
	}
	return nil, nil
}

func total(rc anthropic.MessageBatchRequestCounts) int64 {
	return rc.Processing + rc.Succeeded + rc.Errored + rc.Canceled + rc.Expired
}

// sameIDs reads an ended batch's results and reports whether their
// custom_id set is exactly want. It stops at the first id not in want.
func (c *Client) sameIDs(ctx context.Context, b *anthropic.MessageBatch, want map[string]bool) (bool, error) {
	body, err := c.openResults(ctx, b.ID, b.ResultsURL)
	if err != nil {
		return false, err
	}
	defer body.Close()
	seen := make(map[string]bool, len(want))
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 1<<20), maxLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return false, fmt.Errorf("results line: %w", err)
		}
		if !want[r.CustomID] || seen[r.CustomID] {
			return false, nil
		}
		seen[r.CustomID] = true
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read results: %w", c.clean(err))
	}
	return len(seen) == len(want), nil
}

// Get fetches a batch.
func (c *Client) Get(ctx context.Context, id string) (*providers.Batch, error) {
	b, err := c.sdk.Messages.Batches.Get(ctx, id, anthropic.MessageBatchGetParams{}, c.reqTimeout())
	if err != nil {
		return nil, fmt.Errorf("anthropicbatch: get batch %s: %w", id, c.clean(err))
	}
	return toBatch(b), nil
}

// Cancel asks for a batch to be cancelled: it moves to canceling, then
// ended with its results. Retrying a cancel is harmless.
func (c *Client) Cancel(ctx context.Context, id string) (*providers.Batch, error) {
	b, err := c.sdk.Messages.Batches.Cancel(ctx, id, anthropic.MessageBatchCancelParams{}, c.reqTimeout())
	if err != nil {
		return nil, fmt.Errorf("anthropicbatch: cancel batch %s: %w", id, c.clean(err))
	}
	return toBatch(b), nil
}

// Download streams a batch's results (fileID is its results_url) to w. A
// 404 (results archived after 29 days) is providers.ErrFileGone.
func (c *Client) Download(ctx context.Context, fileID string, w io.Writer) error {
	if fileID == "" {
		return errors.New("anthropicbatch: download: empty results url")
	}
	body, err := c.openResults(ctx, "", fileID)
	if err != nil {
		return fmt.Errorf("anthropicbatch: download %s: %w", fileID, err)
	}
	n, err := io.Copy(w, body)
	cerr := body.Close()
	if err != nil {
		return fmt.Errorf("anthropicbatch: download %s after %d bytes: %w", fileID, n, c.clean(err))
	}
	if cerr != nil {
		return fmt.Errorf("anthropicbatch: download %s: close: %w", fileID, cerr)
	}
	return nil
}

// openResults opens a results stream. results_url is used as given when it
// is on the API's origin; otherwise its path is read from the configured
// base URL, so the key never goes to another host.
func (c *Client) openResults(ctx context.Context, batchID, resultsURL string) (io.ReadCloser, error) {
	u, err := url.Parse(resultsURL)
	var path string
	switch {
	case err == nil && u.IsAbs() && c.sameOrigin(u):
		path = resultsURL
	case batchID != "":
		path = "v1/messages/batches/" + url.PathEscape(batchID) + "/results"
	case err == nil && strings.HasSuffix(u.Path, "/results"):
		path = strings.TrimPrefix(u.EscapedPath(), "/")
		c.log.Warn("results_url is not on the API's host; reading its path from the API instead", "host", u.Host)
	default:
		return nil, fmt.Errorf("results url %q is not a results path", resultsURL)
	}
	var res *http.Response
	err = c.sdk.Get(ctx, path, nil, &res, option.WithHeader("Accept", "application/x-jsonl"), c.reqTimeout())
	if err != nil {
		err = c.clean(err)
		if statusOf(err) == http.StatusNotFound {
			return nil, fmt.Errorf("%w: %w", providers.ErrFileGone, err)
		}
		return nil, err
	}
	return res.Body, nil
}

// toBatch maps an Anthropic batch to batchlake's, in the lifecycle's status
// words. Per-outcome counts are zero until the batch ends.
func toBatch(b *anthropic.MessageBatch) *providers.Batch {
	rc := b.RequestCounts
	out := &providers.Batch{
		ID:        b.ID,
		Total:     total(rc),
		Completed: rc.Succeeded,
		Failed:    rc.Errored + rc.Canceled + rc.Expired,
		CreatedAt: b.CreatedAt.UTC(),
	}
	switch b.ProcessingStatus {
	case anthropic.MessageBatchProcessingStatusInProgress:
		out.Status = "in_progress"
	case anthropic.MessageBatchProcessingStatusCanceling:
		out.Status = "cancelling"
	case anthropic.MessageBatchProcessingStatusEnded:
		switch {
		case !b.CancelInitiatedAt.IsZero():
			out.Status = "cancelled"
		case rc.Expired > 0:
			out.Status = "expired"
		default:
			out.Status = "completed"
		}
		out.OutputFileID = b.ResultsURL
		if !b.ArchivedAt.IsZero() {
			out.Errors = append(out.Errors, "results archived at "+b.ArchivedAt.UTC().Format(time.RFC3339))
		}
	default:
		// An unknown word is not terminal: polling goes on, nothing is lost.
		out.Status = "unknown:" + string(b.ProcessingStatus)
	}
	return out
}
