package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// TestInFlight: which shards make reconcile wait (exit 75). Each case takes
// a fresh two-shard job through the given ledger events.
func TestInFlight(t *testing.T) {
	type ev struct {
		state  lake.State
		status string
	}
	submitted := []ev{{lake.Submitting, ""}, {lake.Submitted, "validating"}}
	running := func(status string) []ev { return append(slices.Clone(submitted), ev{lake.Running, status}) }
	for _, tc := range []struct {
		name   string
		shards [2][]ev
		want   []int // indexes of the shards in flight
	}{
		{"ingested from files, nothing tracked", [2][]ev{nil, nil}, nil},
		{"both submitted", [2][]ev{submitted, submitted}, []int{0, 1}},
		{"running, provider still working", [2][]ev{running("in_progress"), running("completed")}, []int{0}},
		{"finished at the provider (collect's turn)", [2][]ev{running("completed"), running("expired")}, nil},
		{"one sent, one never sent", [2][]ev{running("completed"), nil}, []int{1}},
		{"a create that went unanswered", [2][]ev{{{lake.Submitting, ""}}, running("failed")}, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			l, dir := testLake(t)
			var input []string
			for i := range 2 {
				input = append(input, fmt.Sprintf(`{"custom_id":"r%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"item %d"}]}}`, i, i))
			}
			res, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", Input: writeLines(t, dir, "input.jsonl", input),
				Tenant: "t1", PromptVersion: "p1", TmpDir: dir, ShardMaxRecords: 1})
			if err != nil {
				t.Fatal(err)
			}
			job, _ := lake.ParseDigest(res.JobKey)
			m, err := l.GetManifest(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			g := lake.NewLedger(l, "test")
			for i, evs := range tc.shards {
				for _, e := range evs {
					d := map[string]string{"target": "openai"}
					if e.status != "" {
						d["provider_status"] = e.status
					}
					lease := time.Duration(0)
					if e.state == lake.Submitting {
						lease = time.Minute
					}
					if _, err := g.Transition(ctx, job, m.Shards[i].ShardID, e.state, lease, "", d); err != nil {
						t.Fatal(err)
					}
				}
			}
			events, err := g.EventsOf(ctx, job, m.ShardIDs())
			if err != nil {
				t.Fatal(err)
			}
			got := inFlight(m, events)
			var want []string
			for _, i := range tc.want {
				want = append(want, m.Shards[i].ShardID)
			}
			if !slices.Equal(got, want) {
				t.Errorf("in flight %v, want %v", got, want)
			}
			_, err = Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
			if len(want) > 0 && !errors.Is(err, errkind.ErrNotYet) {
				t.Errorf("reconcile with shards in flight: %v, want errkind.ErrNotYet", err)
			}
			if len(want) == 0 && err != nil {
				t.Errorf("reconcile with nothing in flight: %v", err)
			}
		})
	}
}
