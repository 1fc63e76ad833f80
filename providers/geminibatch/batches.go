package geminibatch

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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/providers"
)

// DisplayName is the displayName batchlake gives the batch of a job's
// shard; Find matches it exactly. A job key is 64 hex digits and a shard id
// short, so it stays well within the 128 characters display names allow.
func DisplayName(jobKey, shardID string) string { return "batchlake-" + jobKey + "-" + shardID }

const maxDisplayName = 128

// inlinePrefix marks file ids that are not Files API names: staged inline
// requests (Upload → Create) and inline output (Get → Download).
const inlinePrefix = "inline:"

// Upload prepares a shard for Create. Shards up to InlineMaxBytes are
// staged as inline requests and nothing is sent; larger ones are uploaded
// as JSONL through the Files API (resumable protocol), reusing an earlier
// upload with the same display name and size.
func (c *Client) Upload(ctx context.Context, name string, r io.Reader, size int64) (string, error) {
	if name == "" {
		return "", errors.New("geminibatch: upload: empty file name")
	}
	if size >= 0 && size <= c.cfg.InlineMaxBytes {
		body, err := inlineRequests(r)
		if err != nil {
			return "", fmt.Errorf("geminibatch: stage %s: %w", name, err)
		}
		id := inlinePrefix + name
		c.mu.Lock()
		c.inline[id] = body
		c.mu.Unlock()
		return id, nil
	}
	if size < 0 {
		return "", fmt.Errorf("geminibatch: upload %s: size unknown", name)
	}
	if id, err := c.findFile(ctx, name, size); err != nil {
		return "", fmt.Errorf("geminibatch: upload %s: look for an earlier upload: %w", name, err)
	} else if id != "" {
		c.log.Info("reusing uploaded file", "name", name, "file", id)
		return id, nil
	}
	types := c.cfg.UploadMIMETypes
	var refused []string
	for i, mime := range types {
		if i > 0 {
			s, ok := r.(io.Seeker)
			if !ok {
				break
			}
			if _, err := s.Seek(0, io.SeekStart); err != nil {
				return "", fmt.Errorf("geminibatch: upload %s: rewind to try %s: %w", name, mime, err)
			}
		}
		id, err := c.upload(ctx, name, r, size, mime)
		if !unsupportedMIME(err) {
			return id, err
		}
		refused = append(refused, mime)
		if i+1 < len(types) {
			c.log.Warn("the Files API refused the upload's MIME type; trying the next", "name", name, "mime", mime, "next", types[i+1])
		}
	}
	return "", fmt.Errorf("geminibatch: upload %s: the Files API refused the MIME type(s) %s (Unsupported MIME type): set BATCHLAKE_GEMINI_UPLOAD_MIME to a type your account accepts",
		name, strings.Join(refused, ", "))
}

// unsupportedMIME says whether err is the Files API's refusal of an
// upload's declared type: 400 INVALID_ARGUMENT "Unsupported MIME type: …".
func unsupportedMIME(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusBadRequest && strings.Contains(ae.Message, "Unsupported MIME type")
}

// upload sends a file through the resumable protocol, declared as mime.
func (c *Client) upload(ctx context.Context, name string, r io.Reader, size int64, mime string) (string, error) {
	meta, _ := json.Marshal(map[string]any{"file": map[string]any{"display_name": name}})
	res, err := c.do(ctx, call{method: http.MethodPost, path: "upload/v1beta/files", body: meta, timeout: c.cfg.RequestTimeout, header: http.Header{
		"X-Goog-Upload-Protocol":              {"resumable"},
		"X-Goog-Upload-Command":               {"start"},
		"X-Goog-Upload-Header-Content-Length": {strconv.FormatInt(size, 10)},
		"X-Goog-Upload-Header-Content-Type":   {mime},
	}})
	if err != nil {
		return "", fmt.Errorf("geminibatch: upload %s as %s: start: %w", name, mime, err)
	}
	res.Body.Close()
	up := res.Header.Get("X-Goog-Upload-Url")
	if up == "" {
		return "", fmt.Errorf("geminibatch: upload %s: start: no upload URL in the answer", name)
	}
	// Hidden from net/http, which closes a body that is a Closer: a refused
	// type is retried over the same file.
	body := struct{ io.Reader }{r}
	res, err = c.do(ctx, call{method: http.MethodPost, path: up, reader: body, size: size, header: http.Header{
		"X-Goog-Upload-Offset":  {"0"},
		"X-Goog-Upload-Command": {"upload, finalize"},
	}})
	if err != nil {
		return "", fmt.Errorf("geminibatch: upload %s as %s: %w", name, mime, err)
	}
	defer res.Body.Close()
	// The upload service answers a refused finalize with 200 (upload status
	// final) and an error body instead of the file.
	var out struct {
		File  fileInfo `json:"file"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return "", fmt.Errorf("geminibatch: upload %s as %s: answer is not JSON: %w", name, mime, c.clean(err))
	}
	if e := out.Error; e != nil {
		return "", fmt.Errorf("geminibatch: upload %s as %s: %w", name, mime,
			&APIError{StatusCode: e.Code, Status: c.key.Redact(e.Status), Message: c.key.Redact(e.Message)})
	}
	if st := res.Header.Get("X-Goog-Upload-Status"); st != "" && st != "final" {
		return "", fmt.Errorf("geminibatch: upload %s as %s: upload status %q after finalize, want final", name, mime, st)
	}
	if out.File.Name == "" {
		return "", fmt.Errorf("geminibatch: upload %s as %s: answer has no file name", name, mime)
	}
	if n, _ := strconv.ParseInt(out.File.SizeBytes, 10, 64); n != size {
		return "", fmt.Errorf("geminibatch: upload %s: provider stored %s bytes of %d (file %s)", name, out.File.SizeBytes, size, out.File.Name)
	}
	return out.File.Name, nil
}

type fileInfo struct {
	Name           string    `json:"name"`
	DisplayName    string    `json:"displayName"`
	SizeBytes      string    `json:"sizeBytes"`
	State          string    `json:"state"`
	ExpirationTime time.Time `json:"expirationTime"`
}

// findFile returns an earlier, still usable upload named name of size bytes.
func (c *Client) findFile(ctx context.Context, name string, size int64) (string, error) {
	notBefore := time.Now().Add(time.Hour)
	q := url.Values{"pageSize": {strconv.Itoa(c.cfg.PageSize)}}
	for {
		var page struct {
			Files         []fileInfo `json:"files"`
			NextPageToken string     `json:"nextPageToken"`
		}
		if err := c.getJSON(ctx, call{method: http.MethodGet, path: "v1beta/files", query: q}, &page); err != nil {
			return "", err
		}
		for _, f := range page.Files {
			if f.DisplayName == name && f.SizeBytes == strconv.FormatInt(size, 10) && f.State == "ACTIVE" &&
				(f.ExpirationTime.IsZero() || f.ExpirationTime.After(notBefore)) {
				return f.Name, nil
			}
		}
		if page.NextPageToken == "" || page.NextPageToken == q.Get("pageToken") {
			return "", nil
		}
		q.Set("pageToken", page.NextPageToken)
	}
}

// inlineRequests turns {key, request} lines into the inline input config
// {"requests":[{"request":…, "metadata":{"key":…}}]}.
func inlineRequests(r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(`{"requests":[`)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), MaxInlineBytes+1)
	n := 0
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var in struct {
			Key     json.RawMessage `json:"key"`
			Request json.RawMessage `json:"request"`
		}
		if err := json.Unmarshal(b, &in); err != nil || len(in.Key) == 0 || len(in.Request) == 0 {
			return nil, fmt.Errorf("line %d: want {key, request}", line)
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"request":`)
		buf.Write(in.Request)
		buf.WriteString(`,"metadata":{"key":`)
		buf.Write(in.Key)
		buf.WriteString(`}}`)
		n++
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("no requests")
	}
	buf.WriteString(`]}`)
	return buf.Bytes(), nil
}

// Create creates the batch of (job, shard) over an uploaded file or staged
// inline requests, named DisplayName. The call is made once; a failure
// after the request may have reached the API wraps providers.ErrUnknownOutcome.
func (c *Client) Create(ctx context.Context, fileID, endpoint string, meta map[string]string) (*providers.Batch, error) {
	jobKey, shardID := meta[providers.MetaJobKey], meta[providers.MetaShardID]
	if fileID == "" || jobKey == "" || shardID == "" {
		return nil, fmt.Errorf("geminibatch: create batch: need an input and metadata %s and %s", providers.MetaJobKey, providers.MetaShardID)
	}
	what := fmt.Sprintf("geminibatch: create batch for job %s shard %s", jobKey, shardID)
	dn := DisplayName(jobKey, shardID)
	if len(dn) > maxDisplayName {
		return nil, fmt.Errorf("%s: display name %q is over %d characters", what, dn, maxDisplayName)
	}
	if c.cfg.Jobs == nil {
		return nil, fmt.Errorf("%s: no job index configured: the model is unknown", what)
	}
	model, err := c.cfg.Jobs.Model(ctx, jobKey)
	if err != nil || model == "" {
		return nil, fmt.Errorf("%s: the job's model: %v", what, err)
	}
	input := map[string]any{"fileName": fileID}
	if strings.HasPrefix(fileID, inlinePrefix) {
		c.mu.Lock()
		body, ok := c.inline[fileID]
		delete(c.inline, fileID)
		c.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("%s: %s was not staged by Upload", what, fileID)
		}
		input = map[string]any{"requests": json.RawMessage(body)}
	}
	body, err := json.Marshal(map[string]any{"batch": map[string]any{"displayName": dn, "inputConfig": input}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: not sent: %w", what, err)
	}
	path := "v1beta/models/" + url.PathEscape(strings.TrimPrefix(model, "models/")) + ":batchGenerateContent"
	res, err := c.do(ctx, call{method: http.MethodPost, path: path, body: body, timeout: c.cfg.CreateTimeout, retries: 0})
	if err != nil {
		if refused(err) {
			return nil, fmt.Errorf("%s: refused: %w", what, err)
		}
		return nil, fmt.Errorf("%s: %w: %w", what, providers.ErrUnknownOutcome, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", what, providers.ErrUnknownOutcome, c.clean(err))
	}
	b, err := toBatch(raw)
	if err != nil || b.ID == "" {
		return nil, fmt.Errorf("%s: %w: answer has no batch name", what, providers.ErrUnknownOutcome)
	}
	c.log.Info("created batch", "job_key", jobKey, "shard_id", shardID, "batch", b.ID, "model", model)
	return b, nil
}

// Find pages through every batch and matches DisplayName(jobKey, shardID).
// Only a complete listing proves absence.
func (c *Client) Find(ctx context.Context, jobKey, shardID string, since time.Time) (*providers.Batch, error) {
	dn := DisplayName(jobKey, shardID)
	q := url.Values{"pageSize": {strconv.Itoa(c.cfg.PageSize)}}
	var matches []*providers.Batch
	seen := map[string]bool{}
	for pages := 1; ; pages++ {
		var page struct {
			Operations    []json.RawMessage `json:"operations"`
			NextPageToken string            `json:"nextPageToken"`
		}
		if err := c.getJSON(ctx, call{method: http.MethodGet, path: "v1beta/batches", query: q}, &page); err != nil {
			return nil, fmt.Errorf("geminibatch: find batch for job %s shard %s: list page %d: %w", jobKey, shardID, pages, err)
		}
		for _, op := range page.Operations {
			b, err := toBatch(op)
			if err != nil {
				return nil, fmt.Errorf("geminibatch: find batch for job %s shard %s: list page %d: %w", jobKey, shardID, pages, err)
			}
			if b.Metadata["displayName"] == dn {
				matches = append(matches, b)
			}
		}
		if page.NextPageToken == "" {
			break
		}
		if seen[page.NextPageToken] {
			return nil, fmt.Errorf("geminibatch: find batch for job %s shard %s: list page %d repeats a page token: absence not proven", jobKey, shardID, pages)
		}
		seen[page.NextPageToken] = true
		q.Set("pageToken", page.NextPageToken)
	}
	if len(matches) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(matches, func(a, b *providers.Batch) int { return a.CreatedAt.Compare(b.CreatedAt) })
	out := matches[0]
	for _, m := range matches[1:] {
		out.Duplicates = append(out.Duplicates, m.ID)
	}
	if len(out.Duplicates) > 0 {
		c.log.Warn("several batches for one job shard; keeping the oldest", "job_key", jobKey, "shard_id", shardID, "batch", out.ID, "duplicates", out.Duplicates)
	}
	return out, nil
}

func (c *Client) getOp(ctx context.Context, id string) (json.RawMessage, error) {
	if !strings.HasPrefix(id, "batches/") {
		return nil, fmt.Errorf("batch name %q does not start with batches/", id)
	}
	var raw json.RawMessage
	err := c.getJSON(ctx, call{method: http.MethodGet, path: "v1beta/" + id}, &raw)
	return raw, err
}

// Get fetches a batch.
func (c *Client) Get(ctx context.Context, id string) (*providers.Batch, error) {
	raw, err := c.getOp(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("geminibatch: get batch %s: %w", id, err)
	}
	b, err := toBatch(raw)
	if err != nil {
		return nil, fmt.Errorf("geminibatch: get batch %s: %w", id, err)
	}
	return b, nil
}

// Cancel asks for a batch to be cancelled and returns it as it is then.
// Retrying a cancel is harmless.
func (c *Client) Cancel(ctx context.Context, id string) (*providers.Batch, error) {
	if !strings.HasPrefix(id, "batches/") {
		return nil, fmt.Errorf("geminibatch: cancel batch %q: not a batch name", id)
	}
	var empty json.RawMessage
	if err := c.getJSON(ctx, call{method: http.MethodPost, path: "v1beta/" + id + ":cancel", body: []byte("{}")}, &empty); err != nil {
		return nil, fmt.Errorf("geminibatch: cancel batch %s: %w", id, err)
	}
	return c.Get(ctx, id)
}

// Download streams a response file ("files/…") to w, or writes a batch's
// inlined responses ("inline:batches/…") as response-file lines.
func (c *Client) Download(ctx context.Context, fileID string, w io.Writer) error {
	if name, ok := strings.CutPrefix(fileID, inlinePrefix); ok {
		raw, err := c.getOp(ctx, name)
		if err != nil {
			return fmt.Errorf("geminibatch: download inline responses of %s: %w", name, err)
		}
		out, err := ingest.ParseGeminiBatchOperation(raw)
		if err != nil {
			return fmt.Errorf("geminibatch: download inline responses of %s: %w", name, err)
		}
		bw := bufio.NewWriter(w)
		for _, l := range out.Lines {
			bw.Write(l)
			bw.WriteByte('\n')
		}
		return bw.Flush()
	}
	if !strings.HasPrefix(fileID, "files/") {
		return fmt.Errorf("geminibatch: download %q: not a file name", fileID)
	}
	res, err := c.do(ctx, call{method: http.MethodGet, path: "download/v1beta/" + fileID + ":download", query: url.Values{"alt": {"media"}}, retries: max(c.cfg.MaxRetries, 0)})
	if err != nil {
		if statusOf(err) == http.StatusNotFound {
			return fmt.Errorf("geminibatch: download %s: %w: %w", fileID, providers.ErrFileGone, err)
		}
		return fmt.Errorf("geminibatch: download %s: %w", fileID, err)
	}
	n, err := io.Copy(w, res.Body)
	cerr := res.Body.Close()
	if err != nil {
		return fmt.Errorf("geminibatch: download %s after %d bytes: %w", fileID, n, c.clean(err))
	}
	if cerr != nil {
		return fmt.Errorf("geminibatch: download %s: close: %w", fileID, cerr)
	}
	return nil
}

// operation is what toBatch reads of a batch operation; the output is read
// by ingest.ParseGeminiBatchOperation.
type operation struct {
	Name     string `json:"name"`
	Done     bool   `json:"done"`
	Metadata struct {
		DisplayName string    `json:"displayName"`
		State       string    `json:"state"`
		CreateTime  time.Time `json:"createTime"`
		BatchStats  struct {
			RequestCount           json.RawMessage `json:"requestCount"`
			SuccessfulRequestCount json.RawMessage `json:"successfulRequestCount"`
			FailedRequestCount     json.RawMessage `json:"failedRequestCount"`
		} `json:"batchStats"`
	} `json:"metadata"`
}

// count reads an int64 written as a JSON string or number; absent (or
// nonsense) is 0.
func count(raw json.RawMessage) int64 {
	s := strings.Trim(string(raw), `"`)
	n, _ := strconv.ParseInt(s, 10, 64)
	return max(n, 0)
}

// toBatch maps a batch operation to batchlake's Batch.
func toBatch(raw []byte) (*providers.Batch, error) {
	var op operation
	if err := json.Unmarshal(raw, &op); err != nil {
		return nil, fmt.Errorf("batch operation: %v", err)
	}
	out, err := ingest.ParseGeminiBatchOperation(raw)
	if err != nil {
		return nil, err
	}
	md := op.Metadata
	b := &providers.Batch{
		ID:        op.Name,
		Total:     count(md.BatchStats.RequestCount),
		Completed: count(md.BatchStats.SuccessfulRequestCount),
		Failed:    count(md.BatchStats.FailedRequestCount),
		CreatedAt: md.CreateTime.UTC(),
		Metadata:  map[string]string{"displayName": md.DisplayName, "state": md.State},
	}
	if out.Error != "" {
		b.Errors = append(b.Errors, out.Error)
	}
	hasOutput := out.ResponsesFile != "" || len(out.Lines) > 0
	switch out.ResponsesFile {
	case "":
		if len(out.Lines) > 0 {
			b.OutputFileID = inlinePrefix + op.Name
		}
	default:
		b.OutputFileID = out.ResponsesFile
	}
	state := md.State
	for _, p := range []string{"BATCH_STATE_", "JOB_STATE_"} {
		state = strings.TrimPrefix(state, p)
	}
	switch state {
	case "PENDING", "QUEUED", "UNSPECIFIED", "":
		b.Status = "pending"
	case "RUNNING", "UPDATING", "PAUSED":
		b.Status = "in_progress"
	case "CANCELLING":
		b.Status = "cancelling"
	case "SUCCEEDED", "PARTIALLY_SUCCEEDED":
		b.Status = "completed"
		if !hasOutput && b.Total > 0 {
			// The output can lag behind the state (§4.3): poll again.
			b.Status = "finalizing"
		}
	case "FAILED":
		b.Status = "failed"
	case "CANCELLED":
		b.Status = "cancelled"
	case "EXPIRED":
		b.Status = "expired"
	default:
		b.Status = "unknown:" + md.State // not terminal: polling goes on
	}
	if op.Done && out.Error != "" && !b.Terminal() {
		b.Status = "failed"
	}
	return b, nil
}
