package reconcile

import (
	"context"
	"errors"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/batchlake/batchlake/lake"
)

// manifests reads each job's manifest once for a session, from any number
// of goroutines.
type manifests struct {
	l  *lake.Lake
	mu sync.Mutex
	ms map[lake.Digest]*lake.Manifest
}

func newManifests(l *lake.Lake) *manifests {
	return &manifests{l: l, ms: map[lake.Digest]*lake.Manifest{}}
}

func (c *manifests) get(ctx context.Context, d lake.Digest) (*lake.Manifest, error) {
	c.mu.Lock()
	m, ok := c.ms[d]
	c.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := c.l.GetManifest(ctx, d)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.ms[d] = m
	c.mu.Unlock()
	return m, nil
}

// maxLineage bounds the walk from a job to its first attempt: a chain this
// long is not a real retry history, and its job is kept (related says so).
const maxLineage = 1000

// root is the first attempt of m's lineage (m itself when it has no parent),
// or nil when a parent's manifest is not in the lake: a retry's records keep
// their first attempt's record ids (a retry on another provider or model
// too), so the root's manifest says which record ids a job can hold.
func (c *manifests) root(ctx context.Context, m *lake.Manifest) (*lake.Manifest, error) {
	for range maxLineage {
		if m.ParentJobKey == "" {
			return m, nil
		}
		d, err := lake.ParseDigest(m.ParentJobKey)
		if err != nil {
			return nil, nil
		}
		p, err := c.get(ctx, d)
		if errors.Is(err, lake.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		m = p
	}
	return nil, nil
}

// related says whether two jobs of one tenant, by their first attempts'
// manifests, can hold a record id in common. A record id is the sha256 of
// the tenant, business key, source version, prompt version and the record's
// model config hash, so jobs whose first attempts differ in source or
// prompt version, whose business keys lie in ranges that do not meet, or
// that have no model config hash in common, cannot. A job whose first
// attempt is unknown (nil) may share any; a manifest that lists no model
// config hashes, or no business key range, leaves that test out.
func related(a, b *lake.Manifest) bool {
	if a == nil || b == nil {
		return true
	}
	if a.SourceVersion != b.SourceVersion || a.PromptVersion != b.PromptVersion {
		return false
	}
	if a.BusinessKeys != nil && b.BusinessKeys != nil && !a.BusinessKeys.Meets(*b.BusinessKeys) {
		return false
	}
	if len(a.ModelConfigHashes) == 0 || len(b.ModelConfigHashes) == 0 {
		return true
	}
	for _, h := range a.ModelConfigHashes {
		if slices.Contains(b.ModelConfigHashes, h) {
			return true
		}
	}
	return false
}

// relatedJobs keeps of ds the jobs that can hold a record of job's family
// (job, its retry descendants): those of job's tenant whose first attempt
// is related to job's. Every other job's rows are left out of a session
// that asks about that family, so that a job's report or manual queue reads
// what its records need rather than the whole lake: a record's attempts,
// accepted result and latest disposition count every job that holds it
// (the records view), and no left-out job holds it. tenant is job's. If the
// lake has no job, ds is kept whole (the caller reports the missing job as
// for any scope).
func relatedJobs(ctx context.Context, c *manifests, ds []lake.Digest, job lake.Digest) (keep []lake.Digest, tenant string, err error) {
	m0, err := c.get(ctx, job)
	if errors.Is(err, lake.ErrNotFound) {
		return ds, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	r0, err := c.root(ctx, m0)
	if err != nil {
		return nil, "", err
	}
	kept := make([]bool, len(ds))
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(markerReaders)
	for i, d := range ds {
		eg.Go(func() error {
			m, err := c.get(ectx, d)
			if err != nil || m.Tenant != m0.Tenant {
				return err
			}
			r, err := c.root(ectx, m)
			kept[i] = err == nil && related(r, r0)
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, "", err
	}
	for i, d := range ds {
		if kept[i] {
			keep = append(keep, d)
		}
	}
	return keep, m0.Tenant, nil
}
