package bedrockbatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/s3blob" // s3:// buckets for input and output
	"gocloud.dev/gcerrors"

	"github.com/batchlake/batchlake/providers"
)

// Location is an S3 prefix Bedrock reads input from or writes output to,
// with the gocloud.dev query options batchlake uses to reach the same
// bucket (region, endpoint, use_path_style, …).
type Location struct {
	Bucket string
	// Prefix is empty or ends in "/".
	Prefix string
	// Query holds the gocloud.dev s3blob URL options; never sent to Bedrock.
	Query url.Values
}

// ParseLocation reads "s3://bucket/prefix/?region=…&endpoint=…". The path is
// the key prefix (a trailing "/" is added); the query is for batchlake's
// own S3 access only.
func ParseLocation(s string) (Location, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Location{}, fmt.Errorf("bedrockbatch: location %q: %w", redactQuery(s), err)
	}
	if u.Scheme != "s3" || u.Host == "" {
		return Location{}, fmt.Errorf("bedrockbatch: location %q: want s3://bucket/prefix/", redactQuery(s))
	}
	p := strings.TrimPrefix(u.Path, "/")
	if p != "" && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	q := u.Query()
	q.Del("prefix")
	return Location{Bucket: u.Host, Prefix: p, Query: q}, nil
}

// URI is the location as Bedrock sees it: s3://bucket/prefix/.
func (l Location) URI() string { return "s3://" + l.Bucket + "/" + l.Prefix }

// DefaultLocations are the input and output prefixes under an s3:// lake's
// bucket: <lake prefix>_staging/bedrock/input/ and …/output/, inside the
// lake's bucket but outside its layout (lake.StagingPrefix). ok is false
// when the lake is not on S3.
func DefaultLocations(lakeURL string) (input, output string, ok bool) {
	u, err := url.Parse(lakeURL)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return "", "", false
	}
	q := u.Query()
	prefix := q.Get("prefix")
	q.Del("prefix")
	base := "s3://" + u.Host + "/" + prefix + "_staging/bedrock/"
	if enc := q.Encode(); enc != "" {
		return base + "input/?" + enc, base + "output/?" + enc, true
	}
	return base + "input/", base + "output/", true
}

func redactQuery(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i] + "?…"
	}
	return s
}

// splitURI splits s3://bucket/key.
func splitURI(s string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	bucket, key, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" || key == "" {
		return "", "", fmt.Errorf("bedrockbatch: %q is not an s3://bucket/key URI", s)
	}
	return bucket, key, nil
}

// bucket opens (once) the named bucket with the S3 options of the output
// location, or of the input location when it is the input's bucket.
func (c *Client) bucket(ctx context.Context, name string) (*blob.Bucket, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.buckets[name]; ok {
		return b, nil
	}
	q := c.output.Query
	if name == c.input.Bucket && name != c.output.Bucket {
		q = c.input.Query
	}
	u := "s3://" + name
	if enc := q.Encode(); enc != "" {
		u += "?" + enc
	}
	b, err := blob.OpenBucket(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("bedrockbatch: open bucket %s: %w", name, err)
	}
	c.buckets[name] = b
	return b, nil
}

// Upload stores a shard file under the input prefix as name (which embeds
// the content digest) and returns its s3:// URI. An object already there
// with the same size is reused: a resumed submit uploads nothing new.
func (c *Client) Upload(ctx context.Context, name string, r io.Reader, size int64) (string, error) {
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("bedrockbatch: upload: bad file name %q", name)
	}
	key := c.input.Prefix + name
	uri := "s3://" + c.input.Bucket + "/" + key
	b, err := c.bucket(ctx, c.input.Bucket)
	if err != nil {
		return "", err
	}
	if a, err := b.Attributes(ctx, key); err == nil && a.Size == size {
		c.log.Info("reusing uploaded input", "uri", uri)
		return uri, nil
	} else if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return "", fmt.Errorf("bedrockbatch: upload %s: %w", uri, err)
	}
	w, err := b.NewWriter(ctx, key, &blob.WriterOptions{ContentType: "application/jsonl"})
	if err != nil {
		return "", fmt.Errorf("bedrockbatch: upload %s: %w", uri, err)
	}
	n, err := io.Copy(w, r)
	if err != nil {
		w.Close()
		return "", fmt.Errorf("bedrockbatch: upload %s: %w", uri, err)
	}
	// The object exists only once Close succeeds.
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("bedrockbatch: upload %s: %w", uri, err)
	}
	if n != size {
		return "", fmt.Errorf("bedrockbatch: upload %s: wrote %d bytes, want %d", uri, n, size)
	}
	return uri, nil
}

// Download writes a result file (an s3:// URI from Batch.OutputFileID or
// SummaryFileID) to w. A missing object is providers.ErrFileGone.
func (c *Client) Download(ctx context.Context, fileID string, w io.Writer) error {
	bucket, key, err := splitURI(fileID)
	if err != nil {
		return err
	}
	b, err := c.bucket(ctx, bucket)
	if err != nil {
		return err
	}
	r, err := b.NewReader(ctx, key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("bedrockbatch: download %s: %w", fileID, providers.ErrFileGone)
	}
	if err != nil {
		return fmt.Errorf("bedrockbatch: download %s: %w", fileID, err)
	}
	defer r.Close()
	if _, err := io.Copy(w, r); err != nil {
		return fmt.Errorf("bedrockbatch: download %s: %w", fileID, err)
	}
	return nil
}

// SummaryName is the job summary Bedrock writes beside the output files.
const SummaryName = "manifest.json.out"

// SummaryFileID names the manifest.json.out beside an output file.
func (c *Client) SummaryFileID(outputFileID string) string {
	i := strings.LastIndexByte(outputFileID, '/')
	if i < 0 {
		return ""
	}
	return outputFileID[:i+1] + SummaryName
}

// outputFileID is where Bedrock writes the output of a job's input file:
// <output uri>/<job id>/<input file name>.out, the job id being the last
// part of its ARN.
func outputFileID(outputURI, jobArn, inputURI string) string {
	id := jobArn[strings.LastIndexByte(jobArn, '/')+1:]
	return strings.TrimSuffix(outputURI, "/") + "/" + id + "/" + path.Base(inputURI) + ".out"
}

// exists reports whether an s3:// object exists.
func (c *Client) exists(ctx context.Context, uri string) (bool, error) {
	bucket, key, err := splitURI(uri)
	if err != nil {
		return false, err
	}
	b, err := c.bucket(ctx, bucket)
	if err != nil {
		return false, err
	}
	ok, err := b.Exists(ctx, key)
	if err != nil {
		return false, fmt.Errorf("bedrockbatch: look for %s: %w", uri, err)
	}
	return ok, nil
}

var errNoRole = errors.New("no service role ARN: set --bedrock-role-arn or BATCHLAKE_BEDROCK_ROLE_ARN")
