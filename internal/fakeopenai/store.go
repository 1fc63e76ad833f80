package fakeopenai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// The server keeps its files and batches in memory, or, with
// Options.Bucket, as objects in a bucket: then servers in several processes
// that share the bucket serve the same files and batches, as one provider
// would (the simulator keeps them in the lake, so that each step command,
// a process of its own, sees the batches the others made). Under
// Options.Prefix:
//
//	files/<id>.json     the file object
//	files/<id>.data     its bytes
//	batches/<id>.json   the batch object and the server's bookkeeping
//
// Faults and the request log stay each server's own.

// storedBatch is a batch as a bucket keeps it.
type storedBatch struct {
	Batch    Batch     `json:"batch"`
	Seq      int       `json:"seq"`
	IDs      []string  `json:"ids"`
	Output   []byte    `json:"output"`
	Errors   []byte    `json:"errors"`
	Total    int64     `json:"total"`
	Complete int64     `json:"completed"`
	Fail     int64     `json:"failed"`
	SimError string    `json:"simulate_error,omitempty"`
	Polls    int       `json:"polls"`
	Finished int       `json:"finished"`
	Listable time.Time `json:"listable"`
	Tokens   int64     `json:"tokens"`
	FailCode string    `json:"fail_code,omitempty"`
	Expire   bool      `json:"expire,omitempty"`
}

// storedFile is a file object as a bucket keeps it (its bytes apart).
type storedFile struct {
	File File `json:"file"`
	Seq  int  `json:"seq"`
}

func (s *Server) key(parts ...string) string { return s.opts.Prefix + strings.Join(parts, "") }

// newID names a new file or batch and gives its place in listings among
// objects created in the same second; s.mu must be held. In memory the ids
// count up; in a bucket they are random, since other processes name
// objects too.
func (s *Server) newID(kind string) (string, int) {
	sep := map[string]string{"batch": "_", "file": "-"}[kind]
	if s.opts.Bucket == nil {
		s.seq++
		return fmt.Sprintf("%s%s%s%06d", kind, sep, s.opts.IDTag, s.seq), s.seq
	}
	var r [12]byte
	_, _ = rand.Read(r[:])
	return kind + sep + s.opts.IDTag + "_" + hex.EncodeToString(r[:]), int(time.Now().UnixNano())
}

// newIDOr is id with the place of a new object in listings, or a new id if
// id is empty; s.mu must be held.
func (s *Server) newIDOr(id, kind string) (string, int) {
	if id == "" {
		return s.newID(kind)
	}
	if s.opts.Bucket == nil {
		s.seq++
		return id, s.seq
	}
	return id, int(time.Now().UnixNano())
}

// stored is the context of a request's reads and writes of the store: a
// client that hangs up does not stop a change half-way, as it would not at
// a provider (a create whose answer is lost still made its batch).
func stored(r *http.Request) context.Context { return context.WithoutCancel(r.Context()) }

// storeError answers a request the server could not serve because its
// store failed, as a provider's internal error.
func storeError(w http.ResponseWriter, err error) {
	writeError(w, http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request: "+err.Error())
}

// lookupFile returns a file with its bytes, nil if there is none; s.mu must be held.
func (s *Server) lookupFile(ctx context.Context, id string) (*file, error) {
	if s.opts.Bucket == nil {
		return s.files[id], nil
	}
	var sf storedFile
	if ok, err := s.readJSON(ctx, s.key("files/", id, ".json"), &sf); !ok || err != nil {
		return nil, err
	}
	data, err := s.opts.Bucket.ReadAll(ctx, s.key("files/", id, ".data"))
	if err != nil {
		return nil, fmt.Errorf("fakeopenai: file %s: %w", id, err)
	}
	return &file{File: sf.File, data: data, seq: sf.Seq}, nil
}

// saveFile stores a new file; s.mu must be held. Its bytes go first, so a
// file object always has them.
func (s *Server) saveFile(ctx context.Context, f *file) error {
	if s.opts.Bucket == nil {
		s.files[f.ID] = f
		return nil
	}
	if err := s.opts.Bucket.WriteAll(ctx, s.key("files/", f.ID, ".data"), f.data, nil); err != nil {
		return fmt.Errorf("fakeopenai: file %s: %w", f.ID, err)
	}
	return s.writeJSON(ctx, s.key("files/", f.ID, ".json"), storedFile{File: f.File, Seq: f.seq})
}

// allFiles returns every file, without its bytes when they are in a
// bucket; s.mu must be held.
func (s *Server) allFiles(ctx context.Context) ([]*file, error) {
	if s.opts.Bucket == nil {
		fs := make([]*file, 0, len(s.files))
		for _, f := range s.files {
			fs = append(fs, f)
		}
		return fs, nil
	}
	var fs []*file
	err := s.each(ctx, s.key("files/"), ".json", func(b []byte) error {
		var sf storedFile
		if err := json.Unmarshal(b, &sf); err != nil {
			return err
		}
		fs = append(fs, &file{File: sf.File, seq: sf.Seq})
		return nil
	})
	return fs, err
}

// lookupBatch returns a batch, nil if there is none; s.mu must be held.
func (s *Server) lookupBatch(ctx context.Context, id string) (*batch, error) {
	if s.opts.Bucket == nil {
		return s.batches[id], nil
	}
	var sb storedBatch
	if ok, err := s.readJSON(ctx, s.key("batches/", id, ".json"), &sb); !ok || err != nil {
		return nil, err
	}
	return sb.batch(), nil
}

// saveBatch stores a batch after a change; s.mu must be held.
func (s *Server) saveBatch(ctx context.Context, b *batch) error {
	if s.opts.Bucket == nil {
		s.batches[b.ID] = b
		return nil
	}
	sb := storedBatch{Batch: b.Batch, Seq: b.seq, IDs: b.ids, Output: b.result.Output, Errors: b.result.Errors,
		Total: b.result.Total, Complete: b.result.Completed, Fail: b.result.Failed,
		Polls: b.polls, Finished: b.finished, Listable: b.listable, Tokens: b.tokens, FailCode: b.failCode, Expire: b.expire}
	if b.simErr != nil {
		sb.SimError = b.simErr.Error()
	}
	return s.writeJSON(ctx, s.key("batches/", b.ID, ".json"), sb)
}

func (sb *storedBatch) batch() *batch {
	b := &batch{Batch: sb.Batch, seq: sb.Seq, ids: sb.IDs,
		result: Result{Output: sb.Output, Errors: sb.Errors, Total: sb.Total, Completed: sb.Complete, Failed: sb.Fail},
		polls:  sb.Polls, finished: sb.Finished, listable: sb.Listable, tokens: sb.Tokens,
		failCode: sb.FailCode, expire: sb.Expire}
	if sb.SimError != "" {
		b.simErr = errors.New(sb.SimError)
	}
	b.outcome = outcomes(b.result)
	return b
}

// allBatches returns every batch; s.mu must be held.
func (s *Server) allBatches(ctx context.Context) ([]*batch, error) {
	if s.opts.Bucket == nil {
		bs := make([]*batch, 0, len(s.batches))
		for _, b := range s.batches {
			bs = append(bs, b)
		}
		return bs, nil
	}
	var bs []*batch
	err := s.each(ctx, s.key("batches/"), ".json", func(j []byte) error {
		var sb storedBatch
		if err := json.Unmarshal(j, &sb); err != nil {
			return err
		}
		bs = append(bs, sb.batch())
		return nil
	})
	return bs, err
}

// readJSON reads one object; false without an error when there is none.
func (s *Server) readJSON(ctx context.Context, key string, v any) (bool, error) {
	b, err := s.opts.Bucket.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fakeopenai: read %s: %w", key, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("fakeopenai: read %s: %w", key, err)
	}
	return true, nil
}

func (s *Server) writeJSON(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := s.opts.Bucket.WriteAll(ctx, key, b, nil); err != nil {
		return fmt.Errorf("fakeopenai: write %s: %w", key, err)
	}
	return nil
}

// each calls fn with the bytes of every object under prefix whose key ends in suffix.
func (s *Server) each(ctx context.Context, prefix, suffix string, fn func([]byte) error) error {
	it := s.opts.Bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("fakeopenai: list %s: %w", prefix, err)
		}
		if !strings.HasSuffix(o.Key, suffix) {
			continue
		}
		b, err := s.opts.Bucket.ReadAll(ctx, o.Key)
		if gcerrors.Code(err) == gcerrors.NotFound {
			continue
		}
		if err != nil {
			return fmt.Errorf("fakeopenai: read %s: %w", o.Key, err)
		}
		if err := fn(b); err != nil {
			return fmt.Errorf("fakeopenai: read %s: %w", o.Key, err)
		}
	}
}
