package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lake/failpoint"
	"github.com/batchlake/batchlake/providers"
)

// progressEvery is how often Status records a running batch's request
// counts when nothing else about it changed. Providers move the counts
// while a batch runs (OpenAI's completed/failed, Bedrock's processed
// records); an event for every poll would grow a shard's ledger with every
// poll of a day-long batch.
const progressEvery = 10 * time.Minute

// stateOf maps a provider status to a ledger state. A completed batch stays
// RUNNING (with provider_status=completed) until it is reconciled.
func stateOf(status string) lake.State {
	switch status {
	case "failed", "Failed":
		return lake.Failed
	case "expired", "Expired":
		return lake.Expired
	case "cancelled", "Stopped":
		return lake.Cancelled
	default:
		return lake.Running
	}
}

// Status polls every bound shard once and records changes in the ledger.
// Pending is true while any shard is not terminal at the provider. A batch
// that cannot be polled fails the step (exit 1: poll again), after the other
// shards are polled and their changes recorded.
func (d *Driver) Status(ctx context.Context, job lake.Digest) (*Result, error) {
	m, err := d.Lake.GetManifest(ctx, job)
	if err != nil {
		return nil, err
	}
	if err := d.checkProvider(m); err != nil {
		return nil, err
	}
	if err := d.checkBindings(ctx, m, true); err != nil {
		return nil, err
	}
	// Each shard's batch is polled, its change recorded and its duplicate
	// batches polled side by side with the others' (ShardFanout at a
	// time): each is a provider round trip or a few, and a large job has
	// hundreds of shards. A shard whose batch cannot be polled (the
	// provider's client has already retried) does not stop the others:
	// their changes are recorded, then the failures are the step's error.
	polls := make([]shardPoll, len(m.Shards))
	err = lake.EachOf(ctx, len(m.Shards), lake.ShardFanout, func(ctx context.Context, i int) error {
		var err error
		polls[i], err = d.pollShard(ctx, job, m.Shards[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	res := &Result{JobKey: m.JobKey}
	var unpolled []error
	for _, p := range polls {
		res.Shards = append(res.Shards, p.result)
		res.Pending = res.Pending || p.pending
		unpolled = append(unpolled, p.unpolled...)
	}
	if len(unpolled) > 0 {
		return nil, fmt.Errorf("%d of %d shards not polled (the others' changes are recorded): %w", len(unpolled), len(m.Shards), errors.Join(unpolled...))
	}
	return res, nil
}

// shardPoll is what polling one shard found: its result, whether it (or a
// duplicate batch of it) is not terminal yet, and what could not be polled.
type shardPoll struct {
	result   ShardResult
	pending  bool
	unpolled []error
}

// pollShard polls a shard's bound batch and its duplicate batches once and
// records a change in the shard's ledger. Its error (the ledger's, or ctx's)
// stops the step; a batch the provider does not answer for is in unpolled.
func (d *Driver) pollShard(ctx context.Context, job lake.Digest, s lake.ManifestShard) (shardPoll, error) {
	last, err := d.Ledger.Last(ctx, job, s.ShardID)
	if err != nil {
		return shardPoll{}, err
	}
	p := shardPoll{result: ShardResult{ShardID: s.ShardID, State: last.State, ProviderJobID: last.ProviderJobID, ProviderStatus: last.Detail[lake.DetailProviderStatus], Action: "unchanged"}}
	sr := &p.result
	poll := true
	switch last.State {
	case lake.Submitted, lake.Running:
		// Sent through the real-time API: no provider batch to poll.
		poll = last.Detail[DetailMode] != ModeSync
	case lake.Validated, lake.Submitting:
		sr.Action = "not_submitted"
		p.pending = true
		poll = false
	default:
		poll = false
	}
	if poll {
		b, err := d.Client.Get(ctx, last.ProviderJobID)
		switch {
		case err != nil && ctx.Err() != nil:
			return shardPoll{}, err
		case err != nil:
			p.unpolled = append(p.unpolled, fmt.Errorf("status %s (%s): %w", s.ShardID, last.ProviderJobID, err))
		default:
			if err := d.record(ctx, job, s.ShardID, last, b, sr); err != nil {
				return shardPoll{}, err
			}
			p.pending = !b.Terminal()
		}
	}
	pending, err := d.pollDuplicates(ctx, job, sr)
	if err != nil {
		if ctx.Err() != nil {
			return shardPoll{}, err
		}
		p.unpolled = append(p.unpolled, fmt.Errorf("status %s: %w", s.ShardID, err))
	}
	p.pending = p.pending || pending
	return p, nil
}

// record puts what a poll of a shard's batch found into its result and, when
// it changed, into the shard's ledger.
func (d *Driver) record(ctx context.Context, job lake.Digest, shard string, last lake.Event, b *providers.Batch, sr *ShardResult) error {
	sr.ProviderStatus = b.Status
	to := stateOf(b.Status)
	counts := fmt.Sprintf("%d/%d/%d", b.Completed, b.Failed, b.Total)
	usage := UsageDetail(b.Usage)
	changed := to != last.State || b.Status != last.Detail[lake.DetailProviderStatus] || usage[lake.DetailUsageInput] != last.Detail[lake.DetailUsageInput]
	if !changed && counts != last.Detail["counts"] {
		// Counts alone move on nearly every poll of a running batch:
		// recorded once the batch is terminal, or as progress at most
		// every progressEvery.
		changed = b.Terminal() || d.Ledger.Now().Sub(last.At) >= progressEvery
	}
	if !changed {
		return nil
	}
	detail := map[string]string{"target": d.Target, lake.DetailProviderStatus: b.Status, "counts": counts,
		"output_file_id": b.OutputFileID, "error_file_id": b.ErrorFileID}
	for k, v := range usage {
		detail[k] = v
	}
	for i, e := range b.Errors {
		detail["error_"+strconv.Itoa(i)] = e
	}
	ev, err := d.Ledger.Transition(ctx, job, shard, to, 0, "", detail)
	if err != nil && !errors.Is(err, lake.ErrConflict) {
		return fmt.Errorf("status %s: %w", shard, err)
	}
	if err == nil {
		sr.State, sr.Action = ev.State, "recorded"
	}
	return nil
}

// Collect downloads the output and error files of every shard whose batch is
// terminal (completed, expired, cancelled: partial results are kept), archives
// them raw and ingests them. Files already ingested for a batch are skipped.
func (d *Driver) Collect(ctx context.Context, job lake.Digest) (*Result, error) {
	m, err := d.Lake.GetManifest(ctx, job)
	if err != nil {
		return nil, err
	}
	// A batch of another provider is never collected: its results would
	// enter the job as if its own provider had answered.
	if err := d.checkProvider(m); err != nil {
		return nil, err
	}
	if err := d.checkBindings(ctx, m, false); err != nil {
		return nil, err
	}
	recs, err := d.Lake.IngestRecords(ctx, job)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, r := range recs {
		have[r.ProviderJobID+"/"+r.Channel] = true
	}
	if d.Shard != "" {
		if _, ok := m.Shard(d.Shard); !ok {
			return nil, &errkind.UsageError{Msg: fmt.Sprintf("collect: --shard %s is not a shard of job %s", d.Shard, m.JobKey)}
		}
	}
	var shards []lake.ManifestShard
	for _, s := range m.Shards {
		if d.Shard == "" || s.ShardID == d.Shard {
			shards = append(shards, s)
		}
	}
	ids := make([]string, len(shards))
	for i, s := range shards {
		ids[i] = s.ShardID
	}
	events, err := d.Ledger.EventsOf(ctx, job, ids)
	if err != nil {
		return nil, err
	}
	// What each shard's bound batch left to collect, in the shards' order.
	lasts := make([]lake.Event, len(shards))
	var fetches []fetch
	for i, evs := range events {
		// The provider's view of the batch (status, file ids) is on the
		// newest event that recorded it: reconcile's events carry none, and
		// collecting again after reconcile must still find the files.
		var last lake.Event
		for j := len(evs) - 1; j >= 0; j-- {
			if evs[j].Detail[lake.DetailProviderStatus] != "" {
				last = evs[j]
				break
			}
		}
		if len(evs) > 0 {
			last.State = evs[len(evs)-1].State
		}
		lasts[i] = last
		if last.ProviderJobID == "" || !(&providers.Batch{Status: last.Detail[lake.DetailProviderStatus]}).Terminal() {
			continue
		}
		for _, f := range []struct{ id, channel string }{{last.Detail["output_file_id"], ingest.ChannelOutput}, {last.Detail["error_file_id"], ingest.ChannelError}} {
			if f.id != "" && !have[last.ProviderJobID+"/"+f.channel] {
				fetches = append(fetches, fetch{shard: i, batchID: last.ProviderJobID, fileID: f.id, channel: f.channel})
			}
		}
	}
	// The files are downloaded up to collectAhead ahead of the one being
	// ingested, and ingested one at a time in order, as before: a
	// download is mostly waiting on the provider, an ingest on the cores.
	dl := d.startDownloads(ctx, fetches)
	defer dl.stop()
	res := &Result{JobKey: m.JobKey}
	next := 0
	for i, s := range shards {
		last := lasts[i]
		sr := ShardResult{ShardID: s.ShardID, State: last.State, ProviderJobID: last.ProviderJobID, ProviderStatus: last.Detail[lake.DetailProviderStatus]}
		// A duplicate batch (paid twice) is collected as soon as it ended,
		// whatever the bound batch does.
		dupPending, err := d.collectDuplicates(ctx, m, s, job, last.ProviderJobID, have, &sr)
		if err != nil {
			return nil, fmt.Errorf("collect %s: %w", s.ShardID, err)
		}
		res.Pending = res.Pending || dupPending
		if last.ProviderJobID == "" || !(&providers.Batch{Status: sr.ProviderStatus}).Terminal() {
			sr.Action = "not_ready"
			res.Pending = true
			res.Shards = append(res.Shards, sr)
			continue
		}
		var got []string
		for ; next < len(fetches) && fetches[next].shard == i; next++ {
			f := fetches[next]
			path, err := dl.wait(next)
			if errors.Is(err, providers.ErrFileGone) {
				sr.Detail += fmt.Sprintf("%s file %s is gone at the provider (retention); its records count as missing. ", f.channel, f.fileID)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("collect %s: %w", s.ShardID, err)
			}
			fr, sum, err := d.ingestDownloaded(ctx, m, s, f.batchID, f.fileID, f.channel, path)
			if err != nil {
				return nil, fmt.Errorf("collect %s: %w", s.ShardID, err)
			}
			got = append(got, fmt.Sprintf("%s:%d lines", f.channel, fr.Lines))
			if sum != nil {
				sr.Summary = sum
				for _, diff := range sum.Differences {
					sr.Detail += "job summary disagrees with the result lines: " + diff.String() + ". "
				}
			}
		}
		sr.Action = "collected"
		switch {
		case last.Detail["output_file_id"] == "" && last.Detail["error_file_id"] == "":
			// A batch failed at validation (or cancelled before it ran) has
			// no result files: its records count as missing.
			sr.Action = "no_results"
		case len(got) == 0 && sr.Detail == "":
			sr.Action = "already_collected"
		}
		res.Shards = append(res.Shards, sr)
	}
	return res, nil
}

// summarizer is a provider whose batches leave a job summary beside their
// output file (Bedrock's manifest.json.out), which collect archives and
// cross-checks against the lines it ingested.
type summarizer interface {
	SummaryFileID(outputFileID string) string
}

// collectFile downloads one result file of a batch and ingests it.
func (d *Driver) collectFile(ctx context.Context, m *lake.Manifest, s lake.ManifestShard, batchID, fileID, channel string) (ingest.FileResult, *ingest.SummaryCheck, error) {
	path, err := d.download(ctx, fileID)
	if err != nil {
		return ingest.FileResult{}, nil, err
	}
	return d.ingestDownloaded(ctx, m, s, batchID, fileID, channel, path)
}

// download writes a provider file into a new file in TmpDir and returns its
// path; the caller removes it.
func (d *Driver) download(ctx context.Context, fileID string) (string, error) {
	f, err := lake.CreateTemp(d.TmpDir, "batchlake-collect-*.jsonl")
	if err != nil {
		return "", err
	}
	err = d.Client.Download(ctx, fileID, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// ingestDownloaded ingests a downloaded result file (and removes it), then
// checks the batch's job summary where the provider leaves one.
func (d *Driver) ingestDownloaded(ctx context.Context, m *lake.Manifest, s lake.ManifestShard, batchID, fileID, channel, path string) (ingest.FileResult, *ingest.SummaryCheck, error) {
	defer os.Remove(path)
	failpoint.Hit(failpoint.CollectAfterDownload)
	fr, err := ingest.IngestFile(ctx, d.Lake, m, ingest.FileOptions{Path: path, Owned: true, Channel: channel, ProviderJobID: batchID, TmpDir: d.TmpDir})
	if err != nil {
		return fr, nil, err
	}
	failpoint.Hit(failpoint.CollectAfterIngest)
	sz, ok := d.Client.(summarizer)
	if !ok || channel != ingest.ChannelOutput {
		return fr, nil, nil
	}
	sum, err := d.checkSummary(ctx, m, s, batchID, sz.SummaryFileID(fileID), path)
	return fr, sum, err
}

// checkSummary downloads a batch's job summary and compares it with the
// output file at path. A summary that is missing is reported as a
// difference, not an error: the lines are what reconcile counts.
func (d *Driver) checkSummary(ctx context.Context, m *lake.Manifest, s lake.ManifestShard, batchID, summaryID, path string) (*ingest.SummaryCheck, error) {
	var buf bytes.Buffer
	err := d.Client.Download(ctx, summaryID, &buf)
	if errors.Is(err, providers.ErrFileGone) {
		return &ingest.SummaryCheck{File: summaryID, Differences: []ingest.ManifestDifference{{Field: "manifest.json.out", Note: "no job summary beside the output"}}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("job summary %s: %w", summaryID, err)
	}
	// Recorded (channel summary) so that reconcile reports its token totals
	// beside the lines' (provider_totals).
	if err := ingest.RecordSummary(ctx, d.Lake, m, filepath.Base(summaryID), batchID, buf.Bytes(), time.Now()); err != nil {
		return nil, err
	}
	return ingest.CheckBedrockSummary(ctx, d.Lake, summaryID, buf.Bytes(), []string{path}, s.Records)
}

// Cancel asks the provider to cancel every bound, unfinished batch, then polls
// once so the ledger records the result; collect keeps what finished.
func (d *Driver) Cancel(ctx context.Context, job lake.Digest) (*Result, error) {
	m, err := d.Lake.GetManifest(ctx, job)
	if err != nil {
		return nil, err
	}
	if err := d.checkProvider(m); err != nil {
		return nil, err
	}
	wrong, err := d.wrongBindings(ctx, m)
	if err != nil {
		return nil, err
	}
	// Sixteen shards at a time: each is a ledger read and a provider call.
	res := &Result{JobKey: m.JobKey, Shards: make([]ShardResult, len(m.Shards))}
	err = lake.EachOf(ctx, len(m.Shards), lake.ShardFanout, func(ctx context.Context, i int) error {
		s := m.Shards[i]
		last, err := d.Ledger.Last(ctx, job, s.ShardID)
		if err != nil {
			return err
		}
		sr := &res.Shards[i]
		*sr = ShardResult{ShardID: s.ShardID, State: last.State, ProviderJobID: last.ProviderJobID, Action: "nothing_to_cancel"}
		if w := bindingOf(wrong, s.ShardID); w != nil {
			// Bound to another provider's batch: this job's client cannot
			// reach it. Close the shard in the ledger so no step polls or
			// collects it; the batch itself is left to its provider.
			if last.State == lake.Submitted || last.State == lake.Running {
				ev, err := d.Ledger.Transition(ctx, job, s.ShardID, lake.Cancelled, 0, "", map[string]string{"target": d.Target, "wrong_provider": w.target,
					lake.DetailReason: "bound to a batch of " + w.target + ", not " + m.Provider})
				if err != nil {
					return fmt.Errorf("cancel %s: %w", s.ShardID, err)
				}
				sr.State, sr.Action = ev.State, "closed_wrong_provider"
			}
			sr.Detail = fmt.Sprintf("bound to %s batch %s, not a %s batch: not called; stop it at %s if it still runs, and plan the records again as a new job", w.target, w.batch, m.Provider, w.target)
			return nil
		}
		if (last.State == lake.Submitted || last.State == lake.Running) && !lake.ProviderStatusTerminal(last.Detail[lake.DetailProviderStatus]) {
			b, err := d.Client.Cancel(ctx, last.ProviderJobID)
			if err != nil {
				return fmt.Errorf("cancel %s: %w", s.ShardID, err)
			}
			sr.ProviderStatus, sr.Action = b.Status, "cancel_requested"
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The poll records what the cancel did; each shard reports its state
	// after the step, not the one it had before.
	st, err := d.Status(ctx, job)
	if err != nil {
		return res, err
	}
	after := map[string]lake.State{}
	for _, s := range st.Shards {
		after[s.ShardID] = s.State
	}
	for i, s := range res.Shards {
		if state, ok := after[s.ShardID]; ok {
			res.Shards[i].State = state
		}
	}
	return res, nil
}

func bindingOf(ws []wrongBinding, shard string) *wrongBinding {
	for i := range ws {
		if ws[i].shard == shard {
			return &ws[i]
		}
	}
	return nil
}

// UsageDetail renders a batch's usage as ledger detail (none when nil).
func UsageDetail(u *providers.Usage) map[string]string {
	if u == nil {
		return nil
	}
	return map[string]string{lake.DetailUsageInput: strconv.FormatInt(u.InputTokens, 10),
		lake.DetailUsageCached: strconv.FormatInt(u.CachedInputTokens, 10), lake.DetailUsageOutput: strconv.FormatInt(u.OutputTokens, 10)}
}
