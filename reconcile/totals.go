package reconcile

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// Tokens are token totals. CachedInputTokens is nil where the provider's
// total has none (Bedrock's manifest.json.out).
type Tokens struct {
	InputTokens       int64  `json:"input_tokens"`
	CachedInputTokens *int64 `json:"cached_input_tokens,omitempty"`
	OutputTokens      int64  `json:"output_tokens"`
}

// ProviderTotal is one provider-reported total beside what the job's
// ingested lines of the same batch add up to. Difference is provider minus
// lines: positive means the provider counted tokens no ingested line shows
// (lines lost or not yet collected), negative the reverse.
type ProviderTotal struct {
	// Source: openai_batch_usage (the batch object's usage, from the ledger
	// event status recorded) or bedrock_manifest (manifest.json.out, from
	// ingest --summary).
	Source        string `json:"source"`
	ShardID       string `json:"shard_id,omitempty"`
	ProviderJobID string `json:"provider_job_id"`
	Provider      Tokens `json:"provider"`
	Lines         Tokens `json:"lines"`
	Difference    Tokens `json:"difference"`
	Agree         bool   `json:"agree"`
}

// providerSources are the provider totals a job has in the lake: the newest
// usage each shard's ledger recorded, and each summary ingest record.
type providerSources struct {
	totals []ProviderTotal
	// identity is what the run key must cover: the totals change the report.
	identity []string
}

// gatherTotals reads the provider totals of a job: from its shards' ledger
// events (events, in the manifest's order) and its summary ingest records.
func gatherTotals(ctx context.Context, l *lake.Lake, m *lake.Manifest, events [][]lake.Event, recs []lake.IngestRecord) (*providerSources, error) {
	ps := &providerSources{}
	for k, s := range m.Shards {
		evs := events[k]
		for i := len(evs) - 1; i >= 0; i-- {
			d := evs[i].Detail
			if d[lake.DetailUsageInput] == "" {
				continue
			}
			var t Tokens
			var cached int64
			var perr error
			for _, f := range []struct {
				k string
				v *int64
			}{{lake.DetailUsageInput, &t.InputTokens}, {lake.DetailUsageCached, &cached}, {lake.DetailUsageOutput, &t.OutputTokens}} {
				var err error
				if *f.v, err = strconv.ParseInt(d[f.k], 10, 64); err != nil {
					perr = fmt.Errorf("ledger %s/%s seq %d: %s %q: %w", m.JobKey[:12], s.ShardID, evs[i].Seq, f.k, d[f.k], err)
				}
			}
			if perr != nil {
				return nil, perr
			}
			t.CachedInputTokens = &cached
			ps.totals = append(ps.totals, ProviderTotal{Source: "openai_batch_usage", ShardID: s.ShardID, ProviderJobID: evs[i].ProviderJobID, Provider: t})
			ps.identity = append(ps.identity, fmt.Sprintf("usage:%s:%s:%d:%d:%d", s.ShardID, evs[i].ProviderJobID, t.InputTokens, cached, t.OutputTokens))
			break
		}
	}
	for _, r := range recs {
		if r.Channel != ingest.ChannelSummary {
			continue
		}
		data, err := l.GetObject(ctx, r.Raw)
		if err != nil {
			return nil, err
		}
		bm, err := ingest.ParseBedrockManifest(data)
		if err != nil {
			return nil, fmt.Errorf("summary %s: %w", r.Raw.Hex()[:12], err)
		}
		var t Tokens
		if bm.InputTokenCount != nil {
			t.InputTokens = *bm.InputTokenCount
		}
		if bm.OutputTokenCount != nil {
			t.OutputTokens = *bm.OutputTokenCount
		}
		ps.totals = append(ps.totals, ProviderTotal{Source: "bedrock_manifest", ProviderJobID: r.ProviderJobID, Provider: t})
	}
	return ps, nil
}

// compare fills each total's lines and difference from the ingested lines:
// a total with a provider batch id is compared with that batch's lines, one
// without (a summary ingested with no --provider-job-id) with all the job's.
func (ps *providerSources) compare(ctx context.Context, e *Engine) ([]ProviderTotal, error) {
	out := []ProviderTotal{}
	if len(ps.totals) == 0 {
		return out, nil
	}
	rows, err := e.QueryFile(ctx, "provider_totals.sql", nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byID := map[string][3]int64{}
	var all [3]int64
	for rows.Next() {
		var id string
		var v [3]int64
		if err := rows.Scan(&id, &v[0], &v[1], &v[2]); err != nil {
			return nil, err
		}
		byID[id] = v
		for i := range v {
			all[i] += v[i]
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, t := range ps.totals {
		v := all
		if t.ProviderJobID != "" {
			v = byID[t.ProviderJobID]
		}
		t.Lines = Tokens{InputTokens: v[0], OutputTokens: v[2]}
		t.Difference = Tokens{InputTokens: t.Provider.InputTokens - v[0], OutputTokens: t.Provider.OutputTokens - v[2]}
		if t.Provider.CachedInputTokens != nil {
			c, d := v[1], *t.Provider.CachedInputTokens-v[1]
			t.Lines.CachedInputTokens, t.Difference.CachedInputTokens = &c, &d
		}
		t.Agree = t.Difference.InputTokens == 0 && t.Difference.OutputTokens == 0 &&
			(t.Difference.CachedInputTokens == nil || *t.Difference.CachedInputTokens == 0)
		out = append(out, t)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		return out[i].ShardID+out[i].ProviderJobID < out[j].ShardID+out[j].ProviderJobID
	})
	return out, nil
}
