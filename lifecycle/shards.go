package lifecycle

import (
	"bufio"
	"context"
	"fmt"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// LakeShards answers a provider adapter's questions about what the lake
// planned and bound, for providers whose lookup cannot rely on metadata
// (Anthropic matches a shard's custom_id set; Gemini needs the job's model).
type LakeShards struct{ Lake *lake.Lake }

func (s LakeShards) manifest(ctx context.Context, jobKey string) (*lake.Manifest, error) {
	job, err := lake.ParseDigest(jobKey)
	if err != nil {
		return nil, err
	}
	return s.Lake.GetManifest(ctx, job)
}

// Model is the job's model, from its manifest.
func (s LakeShards) Model(ctx context.Context, jobKey string) (string, error) {
	m, err := s.manifest(ctx, jobKey)
	if err != nil {
		return "", err
	}
	return m.Model, nil
}

// CustomIDs reads the shard object (verified) and returns its lines'
// custom ids, in shard order.
func (s LakeShards) CustomIDs(ctx context.Context, jobKey, shardID string) ([]string, error) {
	m, err := s.manifest(ctx, jobKey)
	if err != nil {
		return nil, err
	}
	f, err := ingest.FormatFor(m.Provider)
	if err != nil {
		return nil, err
	}
	for _, sh := range m.Shards {
		if sh.ShardID != shardID {
			continue
		}
		r, err := s.Lake.OpenVerified(ctx, lake.ObjectKey(sh.Object), sh.Object)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		ids := make([]string, 0, sh.Records)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
		for n := 1; sc.Scan(); n++ {
			rec, ierr := f.ParseInput(sc.Bytes(), "")
			if ierr != nil {
				return nil, fmt.Errorf("shard %s line %d: %w", shardID, n, ierr)
			}
			ids = append(ids, rec.CustomID)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("shard %s: %w", shardID, err)
		}
		if int64(len(ids)) != sh.Records {
			return nil, fmt.Errorf("shard %s: %d lines, manifest says %d", shardID, len(ids), sh.Records)
		}
		return ids, nil
	}
	return nil, fmt.Errorf("job %s has no shard %s", jobKey, shardID)
}

// Bound maps every provider batch id bound to a shard anywhere in the lake
// to "job_key/shard_id". It reads the last ledger event of every shard, so
// callers ask only when they must (a candidate batch to rule out).
func (s LakeShards) Bound(ctx context.Context) (map[string]string, error) {
	ledgers, err := s.Lake.ListLedgers(ctx)
	if err != nil {
		// A local lake's listing can trip over a concurrent append's temp
		// file vanishing under it; once more is enough.
		if ledgers, err = s.Lake.ListLedgers(ctx); err != nil {
			return nil, err
		}
	}
	out := map[string]string{}
	for job, shards := range ledgers {
		for shard, keys := range shards {
			var e lake.Event
			if err := s.Lake.GetJSON(ctx, keys[len(keys)-1], lake.FormatEvent, &e); err != nil {
				return nil, err
			}
			if e.ProviderJobID != "" {
				out[e.ProviderJobID] = job.Hex() + "/" + shard
			}
		}
	}
	return out, nil
}
