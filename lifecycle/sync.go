package lifecycle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lake/failpoint"
	"github.com/batchlake/batchlake/providers"
)

// Ledger detail of a shard sent through the real-time API.
const (
	DetailMode = "mode"
	ModeSync   = "sync"
	ModeBatch  = "batch"
)

// The error code of the line written for a real-time call that may have
// reached the provider without an answer (maybe_sent): reconcile counts the
// record as a duplicate when it has another line, and prices the line as a
// duplicate submission.
const MaybeSentCode = "maybe_sent"

// DefaultConcurrency is how many real-time calls a sync tail has in flight.
const DefaultConcurrency = 4

// SyncOptions configure SubmitSync.
type SyncOptions struct {
	RealTime providers.RealTime
	// Concurrency bounds the calls in flight (DefaultConcurrency if 0).
	Concurrency int
	// LeaveMaybeSent leaves a record whose earlier call may have reached the
	// provider without an answer unsent (it counts as failed, retryable),
	// instead of sending it again as a counted duplicate.
	LeaveMaybeSent bool
	// Progress, if set, is told each record finished (done of total).
	Progress func(done, total int64)
}

// SyncShard is what the sync tail did to one shard.
type SyncShard struct {
	ShardID       string     `json:"shard_id"`
	State         lake.State `json:"state"`
	ProviderJobID string     `json:"provider_job_id,omitempty"`
	Action        string     `json:"action"`
	Detail        string     `json:"detail,omitempty"`
	Records       int64      `json:"records"`
	// Answered records have their final answer (a success or an API error).
	Answered int64 `json:"answered"`
	// Calls is the HTTP attempts made in this run (retries included).
	Calls int64 `json:"calls"`
	// MaybeSent counts the calls (of any run) that may have reached the
	// provider without an answer; Resent the records sent again after one
	// (each a counted duplicate submission); Left those left unsent.
	MaybeSent int64 `json:"maybe_sent"`
	Resent    int64 `json:"resent"`
	Left      int64 `json:"left_maybe_sent,omitempty"`
	// Unfinished records have no answer: the run was cancelled, or their
	// calls got none. They count as failed (retryable) or missing in reconcile.
	Unfinished int64  `json:"unfinished"`
	OutputRaw  string `json:"output_sha256,omitempty"`
}

// SyncResult is the sync tail's result for a job.
type SyncResult struct {
	JobKey string      `json:"job_key"`
	Mode   string      `json:"mode"`
	State  lake.State  `json:"state"`
	Shards []SyncShard `json:"shards"`
	// Pending is true when a shard is held by another live sender, or this
	// run lost its lease: run again later (exit 75).
	Pending bool `json:"pending"`
	// Cancelled is true when the run was interrupted: what finished is
	// written and the shard closed; its other records are left for the
	// next retry.
	Cancelled bool `json:"cancelled,omitempty"`
}

// SyncProviderJobID is the provider job id a synchronously sent shard is
// bound to: there is no provider batch, the id only names the run's output.
func SyncProviderJobID(job lake.Digest, shard string) string {
	return "sync-" + job.Hex()[:16] + "-" + shard
}

// IsSync reports whether a shard's events show it sent (or being sent)
// through the real-time API: an event says mode sync. A sync shard never
// returns to VALIDATED, so once sent this way it stays so.
func IsSync(evs []lake.Event) bool {
	for _, ev := range evs {
		if ev.Detail[DetailMode] == ModeSync {
			return true
		}
	}
	return false
}

// SubmitSync sends every record of the job's shards through the provider's
// real-time API instead of a batch. Per shard: SUBMITTING (lease, mode sync)
// before any call, renewed while the calls run; each HTTP attempt of a
// record is preceded by a call record and followed by an answer record in
// the lake (lake.SyncCall); a record's final answer is kept at once. At the
// end the answers are written as one output file in the provider's batch
// output format, archived and ingested like a batch's, and the shard is
// bound (SUBMITTED, then RUNNING with provider_status completed) to
// SyncProviderJobID, so that
// reconcile treats it as a finished batch. Running it again resumes: records
// with an answer are not sent again; a call recorded without an answer is
// maybe_sent, and the record is sent again only as a counted duplicate.
func (d *Driver) SubmitSync(ctx context.Context, job lake.Digest, o SyncOptions) (*SyncResult, error) {
	if d.Lease <= 0 {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("sync: lease %s: a sender must hold a shard for a positive time", d.Lease)}
	}
	if o.RealTime == nil {
		return nil, fmt.Errorf("sync: provider %s has no real-time client", d.Target)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	m, err := d.Lake.GetManifest(ctx, job)
	if err != nil {
		return nil, err
	}
	if err := d.checkSubmit(ctx, m); err != nil {
		return nil, err
	}
	res := &SyncResult{JobKey: m.JobKey, Mode: ModeSync}
	var states []lake.State
	for _, s := range m.Shards {
		sr, err := d.syncShard(ctx, m, s, o)
		if err != nil {
			return nil, fmt.Errorf("sync %s: %w", s.ShardID, err)
		}
		res.Pending = res.Pending || sr.Action == "leased" || sr.Action == "lease_lost"
		res.Cancelled = res.Cancelled || sr.Action == "cancelled"
		res.Shards = append(res.Shards, sr)
		states = append(states, sr.State)
		if ctx.Err() != nil {
			break // interrupted: later shards are not started
		}
	}
	res.State = lake.JobState(states)
	return res, nil
}

func (d *Driver) syncShard(ctx context.Context, m *lake.Manifest, s lake.ManifestShard, o SyncOptions) (SyncShard, error) {
	job, _ := lake.ParseDigest(m.JobKey)
	sr := SyncShard{ShardID: s.ShardID, Records: s.Records}
	evs, err := d.Ledger.Events(ctx, job, s.ShardID)
	if err != nil {
		return sr, err
	}
	if len(evs) == 0 {
		return sr, fmt.Errorf("no ledger events: plan did not finish")
	}
	last := evs[len(evs)-1]
	sr.State, sr.ProviderJobID = last.State, last.ProviderJobID
	switch {
	case last.State == lake.Validated:
	case last.State == lake.Submitting && IsSync(evs):
	case IsSync(evs):
		sr.Action = "already_sent"
		return sr, nil
	case last.State == lake.Submitting:
		return sr, &errkind.UsageError{Msg: fmt.Sprintf("shard %s of job %s is being submitted as a batch (SUBMITTING by %s): finish that with submit; it cannot also be sent through the real-time API", s.ShardID, m.JobKey, last.Actor)}
	default:
		return sr, &errkind.UsageError{Msg: fmt.Sprintf("shard %s of job %s is %s as a batch (%s): its records are not sent again through the real-time API; collect and reconcile it", s.ShardID, m.JobKey, last.State, last.ProviderJobID)}
	}
	if ctx.Err() != nil {
		return sr, ctx.Err()
	}
	ev, err := d.Ledger.Transition(ctx, job, s.ShardID, lake.Submitting, d.Lease, "",
		map[string]string{"target": d.Target, "attempt": strconv.Itoa(m.Attempt), DetailMode: ModeSync})
	if errors.Is(err, lake.ErrLeased) || errors.Is(err, lake.ErrConflict) || errors.Is(err, lake.ErrIllegalTransition) {
		sr.Action, sr.Detail = "leased", err.Error()
		return sr, nil
	}
	if err != nil {
		return sr, err
	}
	sr.State = lake.Submitting
	failpoint.Hit(failpoint.SyncAfterSubmitting)
	recs, err := d.shardLines(ctx, m, s)
	if err != nil {
		return sr, err
	}
	// The calls run on a context SIGINT does not cancel: an interrupt stops
	// new calls and waits for those in flight. Losing the lease cancels them.
	h := d.hold(context.WithoutCancel(ctx), ev)
	st := &syncRun{d: d, job: job, shard: s.ShardID, o: o, ctx: h.ctx, stop: ctx}
	states, runErr := st.run(recs)
	ev, lost := h.finish()
	sr.Calls = st.calls.Load()
	if lost != nil {
		sr.Action, sr.Detail = "lease_lost", fmt.Sprintf("%v: the answers received are kept; run again to finish", lost)
		return sr, nil
	}
	if runErr != nil {
		// Every call of this run has ended: the next run may take over at
		// once (the answers kept stay kept).
		d.Ledger.Release(context.WithoutCancel(ctx), ev, 0, map[string]string{"target": d.Target, DetailMode: ModeSync, "error": runErr.Error()})
		return sr, runErr
	}
	cancelled := ctx.Err() != nil
	wctx := context.WithoutCancel(ctx)
	out, err := st.output(recs, states, &sr)
	if err != nil {
		return sr, err
	}
	pjid := SyncProviderJobID(job, s.ShardID)
	fr, err := d.ingestSync(wctx, m, out, pjid)
	if err != nil {
		return sr, err
	}
	failpoint.Hit(failpoint.SyncAfterIngest)
	status := "completed"
	sr.Action = "sent"
	if cancelled {
		status, sr.Action = "cancelled", "cancelled"
	}
	sr.OutputRaw = fr.RawSHA256
	detail := map[string]string{"target": d.Target, DetailMode: ModeSync, "provider_status": status, "output_file_id": fr.RawSHA256,
		"counts":     fmt.Sprintf("%d/%d/%d", sr.Answered, sr.Unfinished, sr.Records),
		"maybe_sent": strconv.FormatInt(sr.MaybeSent, 10), "resent": strconv.FormatInt(sr.Resent, 10)}
	bev, err := d.Ledger.AppendAfter(wctx, ev, lake.Submitted, 0, pjid, detail)
	if errors.Is(err, lake.ErrConflict) {
		sr.Action, sr.Detail = "lease_lost", fmt.Sprintf("%v: the output is ingested; run again to bind the shard", err)
		return sr, nil
	}
	if err != nil {
		return sr, err
	}
	// Finished at once, as a batch is once status saw it end: RUNNING with
	// its provider status, which reconcile takes as terminal.
	rev, err := d.Ledger.AppendAfter(wctx, bev, lake.Running, 0, pjid, detail)
	if err != nil && !errors.Is(err, lake.ErrConflict) {
		return sr, err
	}
	sr.State, sr.ProviderJobID = lake.Submitted, pjid
	if err == nil {
		sr.State = rev.State
	}
	return sr, nil
}

// syncLine is one record of a shard: its custom id and input line.
type syncLine struct {
	id   string
	line []byte
}

// shardLines reads the shard object (verified) into its records.
func (d *Driver) shardLines(ctx context.Context, m *lake.Manifest, s lake.ManifestShard) ([]syncLine, error) {
	f, err := ingest.FormatFor(m.Provider)
	if err != nil {
		return nil, err
	}
	r, err := d.Lake.OpenVerified(ctx, lake.ObjectKey(s.Object), s.Object)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []syncLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		rec, ierr := f.ParseInput(line, m.KeyField)
		if ierr != nil {
			return nil, fmt.Errorf("shard %s line %d: %s", s.ShardID, n, ierr.Error())
		}
		out = append(out, syncLine{id: rec.CustomID, line: bytes.Clone(line)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("shard %s: %w", s.ShardID, err)
	}
	return out, nil
}

// syncRun sends one shard's records.
type syncRun struct {
	d     *Driver
	job   lake.Digest
	shard string
	o     SyncOptions
	ctx   context.Context // the calls' context (cancelled when the lease is lost)
	stop  context.Context // cancelled on interrupt: no new calls
	calls atomic.Int64
	done  atomic.Int64
}

// recState is one record's state in a run.
type recState struct {
	before lake.SyncState // as read before the run
	result *lake.SyncResult
	resent bool
	left   bool
	noAns  []int // calls of this run without an answer
}

func (r *syncRun) run(recs []syncLine) ([]*recState, error) {
	states := make([]*recState, len(recs))
	var todo []int
	for i, rec := range recs {
		st, err := r.d.Lake.ReadSyncState(r.ctx, r.job, r.shard, rec.id)
		if err != nil {
			return nil, err
		}
		states[i] = &recState{before: st, result: st.Result}
		switch {
		case st.Result != nil:
			r.done.Add(1)
		case len(st.Unanswered()) > 0 && r.o.LeaveMaybeSent:
			states[i].left = true
			r.done.Add(1)
		default:
			states[i].resent = len(st.Unanswered()) > 0
			todo = append(todo, i)
		}
	}
	total := int64(len(recs))
	if r.o.Progress != nil {
		r.o.Progress(r.done.Load(), total)
	}
	work := make(chan int)
	// The first error stops the feed; the calls in flight finish.
	var firstErr error
	var errOnce sync.Once
	failed := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < r.o.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := r.send(recs[i], states[i]); err != nil {
					errOnce.Do(func() { firstErr = err; close(failed) })
				}
				if r.o.Progress != nil {
					r.o.Progress(r.done.Add(1), total)
				}
			}
		}()
	}
feed:
	for _, i := range todo {
		select {
		case <-r.stop.Done():
			break feed
		case <-r.ctx.Done():
			break feed
		case <-failed:
			break feed
		case work <- i:
		}
	}
	close(work)
	wg.Wait()
	return states, firstErr
}

// hook records each HTTP attempt of one record's call in the lake.
type hook struct {
	r     *syncRun
	rec   syncLine
	next  int
	cur   int
	noAns []int
}

func (h *hook) Before(ctx context.Context) error {
	c := lake.SyncCall{JobKey: h.r.job.Hex(), ShardID: h.r.shard, CustomID: h.rec.id, N: h.next, At: h.r.d.Ledger.Now(), Actor: h.r.d.Ledger.Actor}
	if err := h.r.d.Lake.PutSyncCall(ctx, h.r.job, c); err != nil {
		return err
	}
	h.cur = h.next
	h.next++
	h.r.calls.Add(1)
	failpoint.Hit(failpoint.SyncAfterCall)
	return nil
}

func (h *hook) After(ctx context.Context, status int) {
	if status == 0 {
		h.noAns = append(h.noAns, h.cur)
		return
	}
	// Recorded even if the caller's context ended: the answer arrived.
	if err := h.r.d.Lake.PutSyncAnswer(context.WithoutCancel(ctx), h.r.job, h.r.shard, lake.SyncAnswer{CustomID: h.rec.id, N: h.cur, Status: status, At: h.r.d.Ledger.Now()}); err != nil {
		// Without its answer record the call reads as maybe_sent: an
		// over-count, never a silent duplicate.
		h.noAns = append(h.noAns, h.cur)
	}
}

// send calls the real-time API for one record and keeps its answer.
func (r *syncRun) send(rec syncLine, st *recState) error {
	h := &hook{r: r, rec: rec, next: st.before.NextCall()}
	line, err := r.o.RealTime.Call(providers.WithAttemptHook(r.ctx, h), rec.line)
	st.noAns = h.noAns
	if err != nil {
		if errors.Is(err, lake.ErrSyncCallTaken) || (h.cur == 0 && r.ctx.Err() == nil) {
			// Another writer's call, or nothing sent at all (a request
			// this client cannot make): stop, naming the record.
			return fmt.Errorf("record %s: %w", rec.id, err)
		}
		// No answer (after the SDK's retries, or cancelled by a lost
		// lease): the record stays unfinished; its calls are maybe_sent.
		return nil
	}
	res := lake.SyncResult{CustomID: rec.id, N: h.cur, Status: statusOf(line), Line: string(line), At: r.d.Ledger.Now()}
	if err := r.d.Lake.PutSyncResult(context.WithoutCancel(r.ctx), r.job, r.shard, res); err != nil {
		return fmt.Errorf("record %s: keep its answer: %w", rec.id, err)
	}
	failpoint.Hit(failpoint.SyncAfterResult)
	st.result = &res
	return nil
}

// statusOf is the status an output line records, for the result record.
func statusOf(line []byte) int {
	var v struct {
		Response *struct {
			StatusCode int `json:"status_code"`
		} `json:"response"`
		Status int `json:"status"`
		// Bedrock's error line.
		Error *struct {
			ErrorCode int `json:"errorCode"`
		} `json:"error"`
	}
	_ = json.Unmarshal(line, &v)
	switch {
	case v.Response != nil:
		return v.Response.StatusCode
	case v.Error != nil && v.Error.ErrorCode != 0:
		return v.Error.ErrorCode
	}
	return v.Status
}

// output writes the shard's output file: each answered record's line, and a
// maybe_sent line for every call that may have reached the provider without
// an answer, in custom id order (the same answers give the same bytes).
func (r *syncRun) output(recs []syncLine, states []*recState, sr *SyncShard) (string, error) {
	f, err := lake.CreateTemp(r.d.TmpDir, "batchlake-sync-*.jsonl")
	if err != nil {
		return "", err
	}
	w := bufio.NewWriter(f)
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return recs[order[a]].id < recs[order[b]].id })
	fm, err := r.format()
	if err != nil {
		f.Close()
		return "", err
	}
	for _, i := range order {
		rec, st := recs[i], states[i]
		// Every call without an answer, from earlier runs and this one,
		// except the one the result came from.
		maybe := map[int]bool{}
		for _, n := range st.before.Unanswered() {
			maybe[n] = true
		}
		for _, n := range st.noAns {
			maybe[n] = true
		}
		if st.result != nil {
			delete(maybe, st.result.N)
		}
		ns := make([]int, 0, len(maybe))
		for n := range maybe {
			ns = append(ns, n)
		}
		sort.Ints(ns)
		sr.MaybeSent += int64(len(ns))
		if st.resent {
			sr.Resent++
		}
		if st.left {
			sr.Left++
		}
		for _, n := range ns {
			w.Write(maybeSentLine(fm, rec.id, n))
			w.WriteByte('\n')
		}
		if st.result == nil {
			sr.Unfinished++
			continue
		}
		sr.Answered++
		w.WriteString(st.result.Line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}

func (r *syncRun) format() (string, error) {
	m, err := r.d.Lake.GetManifest(r.ctx, r.job)
	if err != nil {
		return "", err
	}
	if m.Provider == ingest.SimProvider {
		return "openai", nil
	}
	return m.Provider, nil
}

// ingestSync archives and ingests a sync shard's output file (mode sync:
// priced without the batch multiplier) and removes the temp file.
func (d *Driver) ingestSync(ctx context.Context, m *lake.Manifest, path, pjid string) (ingest.FileResult, error) {
	defer os.Remove(path)
	return ingest.IngestFile(ctx, d.Lake, m, ingest.FileOptions{Path: path, Owned: true, Channel: ingest.ChannelOutput, ProviderJobID: pjid, TmpDir: d.TmpDir, Mode: ModeSync})
}

// maybeSentLine is the output line recording that call n of a record may
// have reached the provider without an answer, in the provider's batch
// output format as an error line with code MaybeSentCode.
func maybeSentLine(provider, customID string, n int) []byte {
	msg := fmt.Sprintf("real-time call %d may have reached the provider but got no answer (maybe_sent): if it did, the record was sent twice", n)
	var v any
	switch provider {
	case "anthropic":
		v = map[string]any{"custom_id": customID, "result": map[string]any{"type": "errored",
			"error": map[string]any{"type": "error", "error": map[string]any{"type": MaybeSentCode, "message": msg}}}}
	case "gemini":
		v = map[string]any{"key": customID, "error": map[string]any{"message": msg, "status": MaybeSentCode}}
	case "bedrock":
		v = map[string]any{"recordId": customID, "error": map[string]any{"errorCode": MaybeSentCode, "errorMessage": msg}}
	default:
		v = map[string]any{"id": fmt.Sprintf("sync_maybe_sent_%d", n), "custom_id": customID, "response": nil,
			"error": map[string]any{"code": MaybeSentCode, "message": msg}}
	}
	b, _ := json.Marshal(v)
	return b
}
