package sim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/providers"
)

const statePrefix = lake.SimStatePrefix

// Client is a simulated provider implementing providers.Client. Batches move
// validating -> in_progress -> completed on successive polls.
type Client struct {
	lake   *lake.Lake
	bucket *blob.Bucket
	Seed   uint64
	Now    func() time.Time
}

// New returns a simulator keeping its state in the lake.
func New(l *lake.Lake, seed uint64) *Client {
	return &Client{lake: l, bucket: l.Bucket, Seed: seed, Now: func() time.Time { return time.Now().UTC() }}
}

// serves refuses a job that was not planned for the simulator: made-up
// results must never enter a job planned for a real provider, whoever
// drives the client.
func (c *Client) serves(ctx context.Context, jobKey string) error {
	job, err := lake.ParseDigest(jobKey)
	if err != nil {
		return &errkind.UsageError{Msg: fmt.Sprintf("sim: batch metadata names no job (%q): the simulator serves only jobs planned with --provider sim", jobKey)}
	}
	m, err := c.lake.GetManifest(ctx, job)
	if err != nil {
		return fmt.Errorf("sim: job %s: %w", jobKey, err)
	}
	if m.Provider != ingest.SimProvider {
		return &errkind.UsageError{Msg: fmt.Sprintf("sim: job %s was planned for provider %s; the simulator serves only jobs planned with --provider sim", jobKey, m.Provider)}
	}
	return nil
}

type batch struct {
	ID         string            `json:"id"`
	InputFile  string            `json:"input_file_id"`
	Endpoint   string            `json:"endpoint"`
	Status     string            `json:"status"`
	Polls      int               `json:"polls"`
	CreatedAt  time.Time         `json:"created_at"`
	Metadata   map[string]string `json:"metadata"`
	OutputFile string            `json:"output_file_id"`
	ErrorFile  string            `json:"error_file_id"`
	Total      int64             `json:"total"`
	Completed  int64             `json:"completed"`
	Failed     int64             `json:"failed"`
}

func (c *Client) put(ctx context.Context, key string, b []byte) error {
	return c.bucket.WriteAll(ctx, statePrefix+key, b, nil)
}

func (c *Client) get(ctx context.Context, key string) ([]byte, error) {
	b, err := c.bucket.ReadAll(ctx, statePrefix+key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("sim: %s: %w", key, providers.ErrFileGone)
	}
	return b, err
}

// Upload stores a file; the same content always gets the same id.
func (c *Client) Upload(ctx context.Context, name string, r io.Reader, size int64) (string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}
	id := "file-" + lake.Sum(b).Hex()[:24]
	if ok, _ := c.bucket.Exists(ctx, statePrefix+"files/"+id); ok {
		return id, nil
	}
	return id, c.put(ctx, "files/"+id, b)
}

// Create makes a batch and computes its results right away (they are
// revealed once the batch reaches completed).
func (c *Client) Create(ctx context.Context, fileID, endpoint string, meta map[string]string) (*providers.Batch, error) {
	if err := c.serves(ctx, meta[providers.MetaJobKey]); err != nil {
		return nil, err
	}
	in, err := c.get(ctx, "files/"+fileID)
	if err != nil {
		return nil, err
	}
	var rid [8]byte
	rand.Read(rid[:])
	b := &batch{ID: "batch_sim_" + hex.EncodeToString(rid[:]), InputFile: fileID, Endpoint: endpoint, Status: "validating",
		CreatedAt: c.Now(), Metadata: meta}
	rates := fakeopenai.DefaultRates
	if a, _ := strconv.Atoi(meta[providers.MetaAttempt]); a > 1 {
		rates = fakeopenai.RetryRates
	}
	res, err := fakeopenai.Simulate(in, c.Seed^hashString(meta[providers.MetaShardID]+meta[providers.MetaJobKey]), rates)
	if err != nil {
		return nil, err
	}
	b.Total, b.Completed, b.Failed = res.Total, res.Completed, res.Failed
	b.OutputFile = "file-out-" + b.ID
	if err := c.put(ctx, "files/"+b.OutputFile, res.Output); err != nil {
		return nil, err
	}
	if len(res.Errors) > 0 {
		b.ErrorFile = "file-err-" + b.ID
		if err := c.put(ctx, "files/"+b.ErrorFile, res.Errors); err != nil {
			return nil, err
		}
	}
	if err := c.save(ctx, b); err != nil {
		return nil, err
	}
	return b.public(), nil
}

func hashString(s string) uint64 {
	// The engine's own hash with seed 0: 8 zero bytes, s, a zero byte.
	h := sha256.Sum256(append(append(make([]byte, 8), s...), 0))
	return binary.BigEndian.Uint64(h[:])
}

func (c *Client) save(ctx context.Context, b *batch) error {
	j, err := json.Marshal(b)
	if err != nil {
		return err
	}
	return c.put(ctx, "batches/"+b.ID+".json", j)
}

func (c *Client) load(ctx context.Context, id string) (*batch, error) {
	j, err := c.get(ctx, "batches/"+id+".json")
	if err != nil {
		return nil, fmt.Errorf("sim: no batch %s: %w", id, err)
	}
	var b batch
	return &b, json.Unmarshal(j, &b)
}

func (b *batch) public() *providers.Batch {
	p := &providers.Batch{ID: b.ID, Status: b.Status, Total: b.Total, CreatedAt: b.CreatedAt, Metadata: b.Metadata}
	if b.Status == "completed" || b.Status == "cancelled" {
		p.OutputFileID, p.ErrorFileID = b.OutputFile, b.ErrorFile
		p.Completed, p.Failed = b.Completed, b.Failed
	}
	return p
}

// Get advances the batch one step and returns it.
func (c *Client) Get(ctx context.Context, id string) (*providers.Batch, error) {
	b, err := c.load(ctx, id)
	if err != nil {
		return nil, err
	}
	if !(&providers.Batch{Status: b.Status}).Terminal() {
		b.Polls++
		switch {
		case b.Polls >= 2:
			b.Status = "completed"
		case b.Polls == 1:
			b.Status = "in_progress"
		}
		if err := c.save(ctx, b); err != nil {
			return nil, err
		}
	}
	return b.public(), nil
}

// Cancel cancels a batch that has not finished; its finished lines stay in
// the output file, the rest become batch_cancelled error lines.
func (c *Client) Cancel(ctx context.Context, id string) (*providers.Batch, error) {
	b, err := c.load(ctx, id)
	if err != nil {
		return nil, err
	}
	if !(&providers.Batch{Status: b.Status}).Terminal() {
		b.Status = "cancelled"
		if err := c.save(ctx, b); err != nil {
			return nil, err
		}
	}
	return b.public(), nil
}

// Find lists batches newest first back to since and matches metadata.
func (c *Client) Find(ctx context.Context, jobKey, shardID string, since time.Time) (*providers.Batch, error) {
	it := c.bucket.List(&blob.ListOptions{Prefix: statePrefix + "batches/"})
	var found []*batch
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		j, err := c.bucket.ReadAll(ctx, o.Key)
		if err != nil {
			return nil, err
		}
		var b batch
		if err := json.Unmarshal(j, &b); err != nil {
			return nil, err
		}
		if b.CreatedAt.Before(since) {
			continue
		}
		if b.Metadata[providers.MetaJobKey] == jobKey && b.Metadata[providers.MetaShardID] == shardID {
			found = append(found, &b)
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	sort.Slice(found, func(i, j int) bool { return found[i].CreatedAt.Before(found[j].CreatedAt) })
	return found[0].public(), nil
}

// Download writes a file's bytes.
func (c *Client) Download(ctx context.Context, fileID string, w io.Writer) error {
	b, err := c.get(ctx, "files/"+fileID)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, bytes.NewReader(b))
	return err
}
