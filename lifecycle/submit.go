package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchlake/batchlake/errkind"
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
	// LostLookup bounds the submitter's own lookups (with backoff) after a
	// create whose answer was lost: DefaultLostLookup if 0, none if < 0.
	LostLookup time.Duration
	// Settle is how long a shard whose create outcome stayed unknown is
	// released for before another submitter may look it up: the provider's
	// listing delay (DefaultSettle of the target if 0).
	Settle time.Duration
	// Shard, if set, limits Collect to that shard of the job, so shards can
	// be collected in parallel (collect --shard).
	Shard string
	// MaxInFlight, if > 0, bounds the job's batches unfinished at the
	// provider: Submit creates batches only while fewer are in flight and
	// leaves the other shards waiting (Pending), so a backfill stays under
	// the provider's enqueued-token limit instead of having batches fail
	// validation. It bounds one submitter; concurrent submitters of a job
	// each count what the ledger and the provider show them.
	MaxInFlight int
	// Parallel is how many shards Submit works on at a time (one if < 2):
	// each shard's protocol is its own (its ledger, its lease, its lookup,
	// upload and create), so shards side by side upload side by side.
	Parallel int
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
	// Duplicates are further paid batches made for the shard (status and
	// collect list them; see DuplicateBatch).
	Duplicates []DuplicateBatch `json:"duplicate_batches,omitempty"`
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
// none, by a submitter that has just proven it still holds the shard (see
// create); SUBMITTED, appended by that holder only, records its id. A create
// whose outcome is unknown is looked up at once (lostCreate); if it stays
// unknown the shard is left SUBMITTING, released after a settle time, and the
// next Submit looks it up before anything else.
func (d *Driver) Submit(ctx context.Context, job lake.Digest) (*Result, error) {
	if d.Lease <= 0 {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("submit: lease %s: a submitter must hold a shard for a positive time", d.Lease)}
	}
	m, err := d.Lake.GetManifest(ctx, job)
	if err != nil {
		return nil, err
	}
	if err := d.checkSubmit(ctx, m); err != nil {
		return nil, err
	}
	// The store's conditional-write check, which the first SUBMITTING event
	// waits for, runs while the shards' ledgers are read.
	d.Lake.ProbeAhead(ctx)
	inFlight, err := d.inFlight(ctx, m)
	if err != nil {
		return nil, err
	}
	if d.Parallel > 1 {
		return d.submitParallel(ctx, m, inFlight)
	}
	res := &Result{JobKey: m.JobKey}
	for _, s := range m.Shards {
		if d.MaxInFlight > 0 && inFlight >= d.MaxInFlight {
			if last, err := d.Ledger.Last(ctx, job, s.ShardID); err != nil {
				return nil, fmt.Errorf("submit %s: %w", s.ShardID, err)
			} else if last.State == lake.Validated {
				res.Pending = true
				res.Shards = append(res.Shards, d.waiting(s.ShardID, last.State, inFlight))
				continue
			}
		}
		sr, err := d.submitShard(ctx, m, s)
		if err != nil {
			return nil, fmt.Errorf("submit %s: %w", s.ShardID, err)
		}
		if sr.State != lake.Submitted && sr.State != lake.Running && !terminalState(sr.State) {
			res.Pending = true
		}
		if sr.Action == "created" || sr.Action == "found" {
			inFlight++
		}
		res.Shards = append(res.Shards, sr)
	}
	return res, nil
}

// waiting is the result of a shard left for a later submit: inFlight of
// the job's batches are in flight, MaxInFlight allowed.
func (d *Driver) waiting(shard string, state lake.State, inFlight int) ShardResult {
	return ShardResult{ShardID: shard, State: state, Action: "waiting",
		Detail: fmt.Sprintf("%d of the job's batches in flight (--max-in-flight %d): submit again when one has finished", inFlight, d.MaxInFlight)}
}

// submitParallel is Submit working on d.Parallel shards at a time. A
// shard's failure lets the shards already started finish (a create in
// flight is not cut off) and starts no more; the step then fails with the
// first failure in the shards' order. Under MaxInFlight each VALIDATED
// shard started takes one of the batches allowed besides the inFlight
// counted: a shard that ends up creating nothing (bound meanwhile, leased)
// does not hand its place on, so the next submit sends more.
func (d *Driver) submitParallel(ctx context.Context, m *lake.Manifest, inFlight int) (*Result, error) {
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return nil, err
	}
	res := &Result{JobKey: m.JobKey, Shards: make([]ShardResult, len(m.Shards))}
	errs := make([]error, len(m.Shards))
	var (
		wg     sync.WaitGroup
		failed atomic.Bool
		slots  = make(chan struct{}, d.Parallel)
	)
	for i, s := range m.Shards {
		slots <- struct{}{}
		if failed.Load() || ctx.Err() != nil {
			<-slots
			break
		}
		if d.MaxInFlight > 0 {
			last, err := d.Ledger.Last(ctx, job, s.ShardID)
			if err != nil {
				<-slots
				errs[i] = fmt.Errorf("submit %s: %w", s.ShardID, err)
				break
			}
			if last.State == lake.Validated {
				if inFlight >= d.MaxInFlight {
					<-slots
					res.Shards[i] = d.waiting(s.ShardID, last.State, inFlight)
					continue
				}
				inFlight++
			}
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			sr, err := d.submitShard(ctx, m, s)
			if err != nil {
				errs[i] = fmt.Errorf("submit %s: %w", s.ShardID, err)
				failed.Store(true)
				return
			}
			res.Shards[i] = sr
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, sr := range res.Shards {
		if sr.State != lake.Submitted && sr.State != lake.Running && !terminalState(sr.State) {
			res.Pending = true
		}
	}
	return res, nil
}

// inFlight counts the job's batches unfinished at the provider, when
// MaxInFlight asks: shards being submitted, and bound shards whose batch the
// provider (asked now: the ledger learns of a finished batch only from
// status) has not finished.
func (d *Driver) inFlight(ctx context.Context, m *lake.Manifest) (int, error) {
	if d.MaxInFlight <= 0 {
		return 0, nil
	}
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return 0, err
	}
	// One ledger read and at most one provider poll a shard, sixteen
	// shards at a time.
	busy := make([]bool, len(m.Shards))
	err = lake.EachOf(ctx, len(m.Shards), lake.ShardFanout, func(ctx context.Context, i int) error {
		s := m.Shards[i]
		last, err := d.Ledger.Last(ctx, job, s.ShardID)
		if err != nil {
			return fmt.Errorf("submit %s: %w", s.ShardID, err)
		}
		switch last.State {
		case lake.Submitting:
			busy[i] = true
		case lake.Submitted, lake.Running:
			b, err := d.Client.Get(ctx, last.ProviderJobID)
			if err != nil {
				return fmt.Errorf("submit %s: status of %s: %w", s.ShardID, last.ProviderJobID, err)
			}
			busy[i] = !b.Terminal()
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, b := range busy {
		if b {
			n++
		}
	}
	return n, nil
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
	if last.State == lake.Submitting && IsSync(evs) {
		return sr, &errkind.UsageError{Msg: fmt.Sprintf("shard %s of job %s is being sent through the real-time API (retry --mode sync, SUBMITTING by %s): run that again to finish it; it is not also sent as a batch", s.ShardID, m.JobKey, last.Actor)}
	}
	if last.State == lake.Submitting {
		if t := last.Detail["target"]; t != "" && t != d.Target {
			return sr, fmt.Errorf("shard was being submitted to %s, not %s", t, d.Target)
		}
	}
	// SUBMITTING before any provider call. Taking over a SUBMITTING shard
	// whose lease expired (plus the ledger's takeover margin) is allowed; a
	// live lease of another actor is not.
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
	since = since.Add(-d.skew())
	b, err := d.Client.Find(ctx, m.JobKey, s.ShardID, since)
	if errors.Is(err, providers.ErrUnknownOutcome) {
		// A batch that may be this shard's exists but cannot be proven to be
		// (Anthropic before it ends): create nothing, release the shard with
		// the reason on the ledger for a person, and look again on the next run.
		d.Ledger.Release(context.WithoutCancel(ctx), ev, 0, map[string]string{"target": d.Target, "unknown": err.Error()})
		sr.Action, sr.Detail = "unknown", err.Error()
		return sr, nil
	}
	if err != nil {
		return d.giveUp(ctx, ev, sr, "lookup failed: "+err.Error(), err)
	}
	if b != nil {
		return d.bind(ctx, job, ev, sr, b, "found")
	}
	return d.create(ctx, job, m, s, ev, sr, since)
}

// create uploads the shard and creates its batch while the submitter can
// prove it holds the shard: the upload runs under a heartbeat that renews
// the lease by conditional appends (and cancels the upload when a renewal
// loses), a renewal appended directly after the submitter's own last event
// proves the lease right before the create, and the create must answer
// before that renewed lease runs out. A taker waits the takeover margin past
// the expiry, so no create of ours is in flight when it looks the batch up.
func (d *Driver) create(ctx context.Context, job lake.Digest, m *lake.Manifest, s lake.ManifestShard, ev lake.Event, sr ShardResult, since time.Time) (ShardResult, error) {
	h := d.hold(ctx, ev)
	fileID, err := d.upload(h.ctx, s)
	ev, lost := h.finish()
	if lost != nil {
		sr.Action, sr.Detail = "lease_lost", fmt.Sprintf("%v during the upload; nothing was created: run submit again", lost)
		return sr, nil
	}
	if err != nil {
		return d.giveUp(ctx, ev, sr, "upload failed: "+err.Error(), err)
	}
	sent := time.Now()
	ev, err = d.Ledger.AppendAfter(ctx, ev, lake.Submitting, d.Lease, "", map[string]string{"target": d.Target, "attempt": strconv.Itoa(m.Attempt), "lease": "proof before create"})
	if err != nil {
		if errors.Is(err, lake.ErrConflict) {
			sr.Action, sr.Detail = "lease_lost", fmt.Sprintf("%v: another submitter took the shard over before the create; nothing was created", err)
			return sr, nil
		}
		return sr, err
	}
	cctx, cancel := context.WithDeadline(ctx, sent.Add(d.Lease-d.guard()))
	defer cancel()
	meta := map[string]string{providers.MetaJobKey: m.JobKey, providers.MetaShardID: s.ShardID, providers.MetaAttempt: strconv.Itoa(m.Attempt)}
	b, err := d.Client.Create(cctx, fileID, m.Endpoint, meta)
	if errors.Is(err, providers.ErrUnknownOutcome) {
		return d.lostCreate(ctx, job, m, s, ev, sr, since, err)
	}
	if err != nil {
		return d.giveUp(ctx, ev, sr, "create refused: "+err.Error(), err)
	}
	failpoint.Hit(failpoint.SubmitAfterCreate)
	return d.bind(ctx, job, ev, sr, b, "created")
}

// bind records the shard's batch with a SUBMITTED appended directly after
// the submitter's own SUBMITTING: only the holder binds, and only while it
// still holds the shard. A holder that lost the shard after its create went
// out records the batch beside the ledger instead, so that status cancels
// it (and collect keeps its results as a duplicate submission) if the shard
// ends up bound to another batch.
func (d *Driver) bind(ctx context.Context, job lake.Digest, ev lake.Event, sr ShardResult, b *providers.Batch, action string) (ShardResult, error) {
	detail := map[string]string{"target": d.Target, lake.DetailProviderStatus: b.Status, "action": action}
	if len(b.Duplicates) > 0 {
		// More than one batch exists for this shard (created outside this
		// protocol, or by a holder that lost a race): bind the oldest, record
		// the others for status to cancel and collect.
		detail["duplicate_batches"] = strings.Join(b.Duplicates, ",")
		for _, id := range b.Duplicates {
			if err := d.Ledger.RecordBatch(ctx, job, sr.ShardID, id, "found_duplicate"); err != nil {
				return sr, err
			}
		}
	}
	bev, err := d.Ledger.AppendAfter(ctx, ev, lake.Submitted, 0, b.ID, detail)
	if errors.Is(err, lake.ErrConflict) {
		if rerr := d.Ledger.RecordBatch(context.WithoutCancel(ctx), job, sr.ShardID, b.ID, "created_after_lease_lost"); rerr != nil {
			return sr, errors.Join(err, rerr)
		}
		sr.ProviderJobID, sr.ProviderStatus = b.ID, b.Status
		sr.Action = "lease_lost"
		sr.Detail = fmt.Sprintf("batch %s (%s) could not be bound: %v; it is recorded, and status cancels it if the shard is bound to another batch", b.ID, action, err)
		return sr, nil
	}
	if err != nil {
		return sr, err
	}
	sr.State, sr.ProviderJobID, sr.ProviderStatus, sr.Action = bev.State, b.ID, b.Status, action
	return sr, nil
}

// lostCreate handles a create whose answer was lost: the batch may exist. The
// submitter looks it up itself (with backoff while the provider's listing
// catches up) and binds it if found. If it still cannot tell, it records the
// unknown outcome and releases the shard with a settle time (the provider's
// listing delay), after which any submitter looks it up before creating.
func (d *Driver) lostCreate(ctx context.Context, job lake.Digest, m *lake.Manifest, s lake.ManifestShard, ev lake.Event, sr ShardResult, since time.Time, cerr error) (ShardResult, error) {
	budget := d.lostLookup()
	start := time.Now()
	wait := min(250*time.Millisecond, budget)
	lookups := 0
	var why error = cerr
	for budget > 0 && time.Since(start)+wait <= budget {
		select {
		case <-ctx.Done():
			return sr, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
		lookups++
		b, err := d.Client.Find(ctx, m.JobKey, s.ShardID, since)
		if err == nil && b != nil {
			return d.bind(ctx, job, ev, sr, b, "found")
		}
		if errors.Is(err, providers.ErrUnknownOutcome) {
			why = errors.Join(cerr, err)
			break // a candidate that cannot be verified yet: waiting here does not help
		}
		if err != nil {
			why = errors.Join(cerr, err)
		}
	}
	settle := d.settle()
	detail := map[string]string{"target": d.Target, "unknown": why.Error(), "lookups": strconv.Itoa(lookups), "settle": settle.String()}
	rev, err := d.Ledger.Release(context.WithoutCancel(ctx), ev, settle, detail)
	sr.Action = "unknown"
	if err != nil {
		sr.Detail = fmt.Sprintf("create answer lost (%v), batch not found in %d lookups, and the release failed (%v): the shard is free when its lease expires", cerr, lookups, err)
		return sr, nil
	}
	sr.Detail = fmt.Sprintf("create answer lost (%v); batch not found in %d lookups over %s; the shard is released: any submitter looks it up from %s (settle %s, the provider's listing delay)",
		cerr, lookups, time.Since(start).Round(time.Millisecond), rev.LeaseExpires.Format(time.RFC3339), settle)
	return sr, nil
}

// giveUp releases the lease after a definite failure (no batch was created),
// so the next run need not wait for it to expire.
func (d *Driver) giveUp(ctx context.Context, ev lake.Event, sr ShardResult, why string, err error) (ShardResult, error) {
	d.Ledger.Release(context.WithoutCancel(ctx), ev, 0, map[string]string{"target": d.Target, "error": why})
	return sr, err
}

// DefaultLostLookup bounds a submitter's own lookups after a lost create answer.
const DefaultLostLookup = 20 * time.Second

// DefaultSettle is, per target, how long a shard whose create outcome is
// unknown stays released-but-settling before another submitter looks it up:
// long enough for a batch created just before to show in the provider's
// listing.
var DefaultSettle = map[string]time.Duration{
	"openai":    time.Minute,
	"anthropic": time.Minute,
	"gemini":    time.Minute,
	"bedrock":   90 * time.Second,
	// The simulator (the fake OpenAI server, its state in the lake) lists at once.
	"sim": 0,
}

func (d *Driver) settle() time.Duration {
	if d.Settle > 0 {
		return d.Settle
	}
	if v, ok := DefaultSettle[d.Target]; ok {
		return v
	}
	return time.Minute
}

func (d *Driver) lostLookup() time.Duration {
	switch {
	case d.LostLookup < 0:
		return 0
	case d.LostLookup == 0:
		return DefaultLostLookup
	}
	return d.LostLookup
}

// guard is how long before its lease runs out a holder stops its own
// provider calls.
func (d *Driver) guard() time.Duration { return d.Lease / 10 }

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
