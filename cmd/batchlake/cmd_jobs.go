package main

import (
	"context"
	"encoding/json"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

// jobRow is one job of `batchlake jobs`.
type jobRow struct {
	JobKey       string     `json:"job_key"`
	Tenant       string     `json:"tenant"`
	Provider     string     `json:"provider"`
	Model        string     `json:"model"`
	State        lake.State `json:"state"`
	Records      int64      `json:"records"`
	Shards       int        `json:"shards"`
	CreatedAt    time.Time  `json:"created_at"`
	Cost         *jobCost   `json:"cost"`
	Attempt      int        `json:"attempt"`
	ParentJobKey string     `json:"parent_job_key"`
}

// jobCost is the cost of the job's newest reconcile report.
type jobCost struct {
	TotalUSD   json.Number            `json:"total_usd"`
	ByCategory map[string]json.Number `json:"by_category"`
	Report     string                 `json:"report"`
}

func jobsCmd(ctx context.Context, g *globals) *cobra.Command {
	var tenant string
	c := &cobra.Command{
		Use:   "jobs",
		Short: "List the lake's jobs, newest first, with their state, records and cost",
		Long: `jobs lists every job planned in the lake, newest first: its key, tenant,
provider, model, records and shards, its state (derived from the last ledger
event of each shard: the least advanced shard decides), when it was planned,
its attempt and parent job (for retry children), and the cost of its newest
reconcile report (null before the first reconcile). It reads manifests, one
ledger event per shard and reports only, so it needs no DuckDB.

Every --job flag takes a unique prefix of a job key, such as the 12 digits the
logs print.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			rows, err := listJobs(ctx, l, tenant)
			if err != nil {
				return err
			}
			printJSON(g.stdout, map[string]any{"jobs": rows, "count": len(rows)})
			return nil
		},
	}
	c.Flags().StringVar(&tenant, "tenant", "", "only this tenant's jobs")
	return c
}

// listJobs reads every job of the lake (of one tenant when tenant is set),
// newest first; ties (jobs planned in the same instant) go by job key.
func listJobs(ctx context.Context, l *lake.Lake, tenant string) ([]jobRow, error) {
	keys, err := l.JobKeys(ctx)
	if err != nil {
		return nil, err
	}
	// On an object store every listing is a request: the ledgers and the
	// reports of every job are listed at once there, not one a shard and
	// one a job. A local lake reads each shard's folder as it goes.
	var (
		ledgers map[lake.Digest]map[string][]string
		reports map[lake.Digest][]string
	)
	if _, local := l.LocalDir(); !local {
		if ledgers, err = l.ListLedgers(ctx); err != nil {
			return nil, err
		}
		if reports, err = l.ListReports(ctx); err != nil {
			return nil, err
		}
	}
	rows := make([]*jobRow, len(keys))
	eg, ectx := errgroup.WithContext(ctx)
	// An object store answers many small reads at once, each mostly a wait;
	// a local lake's reads keep its cores busy parsing with a few.
	if _, local := l.LocalDir(); local {
		eg.SetLimit(8)
	} else {
		eg.SetLimit(32)
	}
	led := lake.NewLedger(l, "")
	for i, d := range keys {
		eg.Go(func() error {
			m, err := l.GetManifest(ectx, d)
			if err != nil {
				return err
			}
			if tenant != "" && m.Tenant != tenant {
				return nil
			}
			r := &jobRow{JobKey: m.JobKey, Tenant: m.Tenant, Provider: m.Provider, Model: m.Model, Records: m.ExpectedRecords,
				Shards: len(m.Shards), CreatedAt: m.CreatedAt, Attempt: m.Attempt, ParentJobKey: m.ParentJobKey}
			states := make([]lake.State, 0, len(m.Shards))
			for _, s := range m.Shards {
				var e lake.Event
				if ledgers != nil {
					e, err = led.TipOf(ectx, d, s.ShardID, ledgers[d][s.ShardID])
				} else {
					e, err = led.Tip(ectx, d, s.ShardID)
				}
				if err != nil {
					return err
				}
				states = append(states, e.State)
			}
			r.State = lake.JobState(states)
			var reps []string
			if reports != nil {
				reps = reports[d]
			} else if reps, err = l.List(ectx, lake.ReportPrefix(d)); err != nil {
				return err
			}
			if r.Cost, err = newestCost(ectx, l, reps); err != nil {
				return err
			}
			rows[i] = r
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	out := make([]jobRow, 0, len(rows))
	for _, r := range rows {
		if r != nil {
			out = append(out, *r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].JobKey < out[j].JobKey
	})
	return out, nil
}

// newestCost returns the cost of the most recent of a job's reconcile
// reports (keys, its listing), or nil when it was never reconciled.
func newestCost(ctx context.Context, l *lake.Lake, keys []string) (*jobCost, error) {
	var newest *reconcile.Report
	var newestKey string
	for _, k := range keys {
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		var r reconcile.Report
		if err := l.GetJSON(ctx, k, lake.FormatReport, &r); err != nil {
			return nil, err
		}
		if newest == nil || r.ReconciledAt.After(newest.ReconciledAt) {
			newest, newestKey = &r, k
		}
	}
	if newest == nil {
		return nil, nil
	}
	total, ok := newest.CostUSD["total"]
	if !ok {
		total = sumUSD(newest.CostUSD)
	}
	return &jobCost{TotalUSD: total, ByCategory: newest.CostUSD, Report: newestKey}, nil
}

// sumUSD adds decimal amounts exactly, keeping the most decimals any of them
// has: the total of a report that predates its "total" key.
func sumUSD(by map[string]json.Number) json.Number {
	total, places := new(big.Rat), 0
	for _, v := range by {
		s := v.String()
		if r, ok := new(big.Rat).SetString(s); ok {
			total.Add(total, r)
		}
		if i := strings.IndexByte(s, '.'); i >= 0 && len(s)-i-1 > places {
			places = len(s) - i - 1
		}
	}
	return json.Number(total.FloatString(places))
}
