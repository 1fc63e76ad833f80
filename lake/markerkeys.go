package lake

import (
	"context"
	"path"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"
)

// IngestArea is the top-level folder of every job's ingest records.
const IngestArea = "ingests/"

// fingerprintAreas are the areas whose keys JobMarkers fingerprints: every
// marker the views read a job's rows through besides its manifest (reports
// are read only where a ledger event names them).
var fingerprintAreas = []string{IngestArea, RetractionArea, LedgerArea}

// MarkerKeys are the keys of every job's ingest records, retractions and
// ledger events, from one flat listing of each area: reading many jobs, a
// command lists the lake once instead of a job's ingest records and each of
// its shards' ledgers one at a time, on an object store one request per
// thousand keys instead of one per job and shard. A remote lake with a
// marker cache notes each listed marker's MD5 (List), so the reports its
// ledger events name are then taken from the cache too.
type MarkerKeys struct {
	// byJob holds each job's keys of fingerprintAreas, sorted, under its
	// folder name as listed (a name that is not a digest too: JobMarkers
	// fingerprints whatever is there).
	byJob map[string][]string
	// ledgers are the ledger area's event keys by job and shard, as
	// ListLedgers groups them.
	ledgers map[Digest]map[string][]string
}

// ListMarkerKeys lists the ingest, retraction and ledger areas, and on a
// remote lake with a marker cache the report area for its MD5s, at the same
// time on an object store.
func (l *Lake) ListMarkerKeys(ctx context.Context) (*MarkerKeys, error) {
	areas := fingerprintAreas
	if l.mdisk != nil {
		areas = append(append([]string{}, areas...), ReportArea)
	}
	listed := make([][]string, len(areas))
	eg, ectx := errgroup.WithContext(ctx)
	for i, area := range areas {
		eg.Go(func() (err error) {
			listed[i], err = l.List(ectx, area)
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	m := &MarkerKeys{byJob: map[string][]string{}}
	for i, area := range fingerprintAreas {
		if area == LedgerArea {
			m.ledgers = groupLedgerKeys(listed[i])
		}
		for _, k := range listed[i] {
			if isTempKey(k) {
				continue
			}
			job, _, ok := strings.Cut(strings.TrimPrefix(k, area), "/")
			if !ok {
				continue
			}
			m.byJob[job] = append(m.byJob[job], k)
		}
	}
	for _, keys := range m.byJob {
		sort.Strings(keys)
	}
	return m, nil
}

// Fingerprints is JobMarkers of the listing.
func (m *MarkerKeys) Fingerprints() map[string]string {
	out := make(map[string]string, len(m.byJob))
	for job, keys := range m.byJob {
		h := NewFieldHasher()
		for _, k := range keys {
			h.AddString(path.Clean(k))
		}
		out[job] = h.Sum().Hex()
	}
	return out
}

// IngestKeys are the keys of job's ingest records, as IngestRecords lists them.
func (m *MarkerKeys) IngestKeys(job Digest) []string {
	var out []string
	for _, k := range m.byJob[job.Hex()] {
		if strings.HasPrefix(k, IngestArea) && strings.HasSuffix(k, ".json") {
			out = append(out, k)
		}
	}
	return out
}

// EventKeys are the keys of a shard's ledger events in sequence order, as
// the ledger lists them.
func (m *MarkerKeys) EventKeys(job Digest, shard string) []string {
	return m.ledgers[job][shard]
}
