package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lake/failpoint"
	"github.com/batchlake/batchlake/providers"
)

// Driver runs lifecycle steps for one job against one provider client.
type Driver struct {
	Lake   *lake.Lake
	Ledger *lake.Ledger
	Client providers.Client
	// Target names the provider the client talks to (openai, sim, …); it is
	// recorded on SUBMITTING so later steps use the same one.
	Target string
	// Lease bounds how long a submitter may hold a shard before another may
	// take over (after looking the batch up remotely).
	Lease  time.Duration
	TmpDir string
	// ClockSkew widens the remote lookup window.
	ClockSkew time.Duration
	// Shard, if set, limits Collect to that shard of the job, so shards can
	// be collected in parallel (collect --shard).
	Shard string
}

// ShardResult is what a step did to one shard.
type ShardResult struct {
	ShardID        string     `json:"shard_id"`
	State          lake.State `json:"state"`
	ProviderJobID  string     `json:"provider_job_id,omitempty"`
	ProviderStatus string     `json:"provider_status,omitempty"`
	Action         string     `json:"action"`
	Detail         string     `json:"detail,omitempty"`
	// Summary is collect's cross-check of a provider's job summary
	// (Bedrock's manifest.json.out) against the lines it ingested.
	Summary *ingest.SummaryCheck `json:"summary_check,omitempty"`
}

// Result is a step's result for a job.
type Result struct {
	JobKey string `json:"job_key"`
	// State is the job's state, derived from its shards' (lake.JobState).
	State  lake.State    `json:"state"`
	Shards []ShardResult `json:"shards"`
	// Pending is true when the step must be run again later (exit 75).
	Pending bool `json:"pending"`
}

// Submit binds every shard of the job to exactly one provider batch:
// SUBMITTING (with a lease) is written before any provider call; the batch is
// looked up remotely first and created only when the lookup proves there is
// none; SUBMITTED records its id. A create whose outcome is unknown leaves the
// shard SUBMITTING: the next Submit looks it up before anything else.
func (d *Driver) Submit(ctx context.Context, job lake.Digest) (*Result, error) {
	m, err := d.Lake.GetManifest(ctx, job)
	if err != nil {
		return nil, err
	}
	if err := d.checkSubmit(ctx, m); err != nil {
		return nil, err
	}
	res := &Result{JobKey: m.JobKey}
	for _, s := range m.Shards {
		sr, err := d.submitShard(ctx, m, s)
		if err != nil {
			return nil, fmt.Errorf("submit %s: %w", s.ShardID, err)
		}
		if sr.State != lake.Submitted && sr.State != lake.Running && !terminalState(sr.State) {
			res.Pending = true
		}
		res.Shards = append(res.Shards, sr)
	}
	return res, nil
}

func terminalState(s lake.State) bool {
	switch s {
	case lake.Failed, lake.Expired, lake.Cancelled, lake.Completed, lake.Partial, lake.Reconciling:
		return true
	}
	return false
}

func (d *Driver) submitShard(ctx context.Context, m *lake.Manifest, s lake.ManifestShard) (ShardResult, error) {
	job, _ := lake.ParseDigest(m.JobKey)
	sr := ShardResult{ShardID: s.ShardID}
	evs, err := d.Ledger.Events(ctx, job, s.ShardID)
	if err != nil {
		return sr, err
	}
	if len(evs) == 0 {
		return sr, fmt.Errorf("no ledger events: plan did not finish")
	}
	last := evs[len(evs)-1]
	sr.State, sr.ProviderJobID = last.State, last.ProviderJobID
	switch last.State {
	case lake.Validated, lake.Submitting:
	default:
		sr.Action = "already_bound"
		return sr, nil
	}
	if now := d.Ledger.Now(); last.State == lake.Validated && m.NotBefore != nil && now.Before(*m.NotBefore) {
		// A retry's not-before window (the manifest's not_before): nothing
		// is written and no provider is called before it; exit 75, try later.
		sr.Action = "not_before"
		sr.Detail = fmt.Sprintf("may not be submitted before %s (%s from now): the retry's not-before window; run submit again then",
			m.NotBefore.Format(time.RFC3339), m.NotBefore.Sub(now).Round(time.Second))
		return sr, nil
	}
	if last.State == lake.Submitting {
		if t := last.Detail["target"]; t != "" && t != d.Target {
			return sr, fmt.Errorf("shard was being submitted to %s, not %s", t, d.Target)
		}
	}
	// SUBMITTING before any provider call. Taking over a SUBMITTING shard
	// whose lease expired is allowed; a live lease of another actor is not.
	failpoint.Hit(failpoint.SubmitBeforeSubmitting)
	ev, err := d.Ledger.Transition(ctx, job, s.ShardID, lake.Submitting, d.Lease, "",
		map[string]string{"target": d.Target, "attempt": strconv.Itoa(m.Attempt)})
	if errors.Is(err, lake.ErrLeased) || errors.Is(err, lake.ErrConflict) {
		sr.Action, sr.Detail = "leased", err.Error()
		return sr, nil
	}
	if errors.Is(err, lake.ErrIllegalTransition) {
		// A concurrent submitter bound the shard between our read and our
		// append: nothing for us to do.
		if now, lerr := d.Ledger.Last(ctx, job, s.ShardID); lerr == nil && now.State != lake.Validated && now.State != lake.Submitting {
			sr.State, sr.ProviderJobID, sr.Action = now.State, now.ProviderJobID, "already_bound"
			return sr, nil
		}
	}
	if err != nil {
		return sr, err
	}
	sr.State = lake.Submitting
	failpoint.Hit(failpoint.SubmitAfterSubmitting)
	// Look back to the first SUBMITTING of this streak: a create sent by a
	// crashed or timed-out predecessor happened after it.
	since := ev.At
	for i := len(evs) - 1; i >= 0 && evs[i].State == lake.Submitting; i-- {
		since = evs[i].At
	}
	b, err := d.Client.Find(ctx, m.JobKey, s.ShardID, since.Add(-d.skew()))
	if errors.Is(err, providers.ErrUnknownOutcome) {
		// A batch that may be this shard's exists but cannot be proven to be
		// (Anthropic before it ends): create nothing, stay SUBMITTING with the
		// reason on the ledger for a person, and look again on the next run.
		d.Ledger.Transition(context.WithoutCancel(ctx), job, s.ShardID, lake.Submitting, -1, "", map[string]string{"target": d.Target, "unknown": err.Error()})
		sr.Action, sr.Detail = "unknown", err.Error()
		return sr, nil
	}
	if err != nil {
		return d.giveUp(ctx, job, sr, "lookup failed: "+err.Error(), err)
	}
	action := "found"
	if b == nil {
		fileID, err := d.upload(ctx, s)
		if err != nil {
			return d.giveUp(ctx, job, sr, "upload failed: "+err.Error(), err)
		}
		meta := map[string]string{providers.MetaJobKey: m.JobKey, providers.MetaShardID: s.ShardID, providers.MetaAttempt: strconv.Itoa(m.Attempt)}
		b, err = d.Client.Create(ctx, fileID, m.Endpoint, meta)
		if errors.Is(err, providers.ErrUnknownOutcome) {
			// Maybe created: stay SUBMITTING; the next submit looks it up first.
			sr.Action, sr.Detail = "unknown", err.Error()
			return sr, nil
		}
		if err != nil {
			return d.giveUp(ctx, job, sr, "create refused: "+err.Error(), err)
		}
		action = "created"
		failpoint.Hit(failpoint.SubmitAfterCreate)
	}
	detail := map[string]string{"target": d.Target, "provider_status": b.Status, "action": action}
	if len(b.Duplicates) > 0 {
		// More than one batch exists for this shard (created outside this
		// protocol or before it): bind the oldest and leave the rest for a person.
		detail["duplicate_batches"] = strings.Join(b.Duplicates, ",")
	}
	ev, err = d.Ledger.Transition(ctx, job, s.ShardID, lake.Submitted, 0, b.ID, detail)
	if err != nil {
		return sr, err
	}
	sr.State, sr.ProviderJobID, sr.ProviderStatus, sr.Action = ev.State, b.ID, b.Status, action
	return sr, nil
}

// giveUp releases the lease after a definite failure (no batch was created),
// so the next run need not wait for it to expire.
func (d *Driver) giveUp(ctx context.Context, job lake.Digest, sr ShardResult, why string, err error) (ShardResult, error) {
	d.Ledger.Transition(context.WithoutCancel(ctx), job, sr.ShardID, lake.Submitting, -1, "", map[string]string{"target": d.Target, "error": why})
	return sr, err
}

func (d *Driver) skew() time.Duration {
	if d.ClockSkew == 0 {
		return 5 * time.Minute
	}
	return d.ClockSkew
}

// upload streams the shard object (verified) to the provider.
func (d *Driver) upload(ctx context.Context, s lake.ManifestShard) (string, error) {
	f, err := os.CreateTemp(d.TmpDir, "batchlake-upload-*.jsonl")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	r, err := d.Lake.OpenVerified(ctx, lake.ObjectKey(s.Object), s.Object)
	if err != nil {
		return "", err
	}
	_, err = f.ReadFrom(r)
	r.Close()
	if err != nil {
		return "", err
	}
	if _, err := f.Seek(0, 0); err != nil {
		return "", err
	}
	return d.Client.Upload(ctx, "batchlake-"+s.Object.Hex()+".jsonl", f, s.Bytes)
}
