package openaibatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/batchlake/batchlake/providers"
)

// reuseMargin is how long a reused input file must still live: long enough
// for the batch about to be created to be validated.
const reuseMargin = time.Hour

// Upload stores a batch input file and returns its id. name should embed
// the content digest ("batchlake-<sha256>.jsonl"): an earlier upload with
// the same name and size (purpose batch, not about to expire) is reused
// instead, so a resumed submit uploads nothing new. With size < 0 nothing
// is reused. The SDK retries uploads; a duplicate upload costs only storage.
func (c *Client) Upload(ctx context.Context, name string, r io.Reader, size int64) (string, error) {
	if name == "" {
		return "", errors.New("openaibatch: upload: empty file name")
	}
	if size >= 0 {
		id, err := c.findFile(ctx, name, size)
		if err != nil {
			return "", fmt.Errorf("openaibatch: upload %s: look for an earlier upload: %w", name, err)
		}
		if id != "" {
			c.log.Info("reusing uploaded file", "name", name, "file_id", id)
			return id, nil
		}
	}
	f, err := c.sdk.Files.New(ctx, openai.FileNewParams{
		File:    openai.File(r, name, "application/jsonl"),
		Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		return "", fmt.Errorf("openaibatch: upload %s: %w", name, c.clean(err))
	}
	if size >= 0 && f.Bytes != size {
		return "", fmt.Errorf("openaibatch: upload %s: provider stored %d bytes of %d (file %s)", name, f.Bytes, size, f.ID)
	}
	return f.ID, nil
}

// findFile returns the id of the newest usable batch file named name with
// size bytes, or "".
func (c *Client) findFile(ctx context.Context, name string, size int64) (string, error) {
	notBefore := time.Now().Add(reuseMargin).Unix()
	params := openai.FileListParams{Purpose: openai.String(string(openai.FilePurposeBatch)), Order: openai.FileListParamsOrderDesc}
	for {
		page, err := c.sdk.Files.List(ctx, params, option.WithRequestTimeout(c.cfg.RequestTimeout))
		if err != nil {
			return "", fmt.Errorf("list files: %w", c.clean(err))
		}
		for _, f := range page.Data {
			//lint:ignore SA1019 the API still sets status "error" on a file it could not process; such a file must not be reused
			if f.Filename != name || f.Bytes != size || f.Status == openai.FileObjectStatusError {
				continue
			}
			if f.ExpiresAt != 0 && f.ExpiresAt < notBefore {
				continue
			}
			return f.ID, nil
		}
		if !page.HasMore || len(page.Data) == 0 {
			return "", nil
		}
		params.After = openai.String(page.Data[len(page.Data)-1].ID)
	}
}

// Download streams a result file to w. A file the provider no longer has
// (404, after retention) is providers.ErrFileGone.
func (c *Client) Download(ctx context.Context, fileID string, w io.Writer) error {
	if fileID == "" {
		return errors.New("openaibatch: download: empty file id")
	}
	res, err := c.sdk.Files.Content(ctx, fileID)
	if err != nil {
		err = c.clean(err)
		if errNotFound(err) {
			return fmt.Errorf("openaibatch: download file %s: %w: %w", fileID, providers.ErrFileGone, err)
		}
		return fmt.Errorf("openaibatch: download file %s: %w", fileID, err)
	}
	n, err := io.Copy(w, res.Body)
	cerr := res.Body.Close()
	if err != nil {
		return fmt.Errorf("openaibatch: download file %s after %d bytes: %w", fileID, n, c.clean(err))
	}
	if cerr != nil {
		return fmt.Errorf("openaibatch: download file %s: close: %w", fileID, cerr)
	}
	return nil
}
