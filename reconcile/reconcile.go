package reconcile

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lake/failpoint"
)

// Options are the settings of one reconcile run.
type Options struct {
	JobKey      string
	MaxAttempts int
	Retryable   []string // nil: DefaultRetryable
	QualityGate string   // extra SQL predicate over the normalised success row
	// AcceptTruncated lets an answer cut at its token limit (finish reason
	// length, max_tokens, MAX_TOKENS, an incomplete response) succeed;
	// by default it is quality_failed with reason truncated.
	AcceptTruncated bool
	// OutputSchema, if set, is a JSON Schema every success line's output must satisfy.
	OutputSchema *OutputSchema
	Prices       *PriceTable
	OutDir       string
	TmpDir       string
	Engine       EngineOptions
	Lease        time.Duration
	Actor        string
	// Caps are the per-record cumulative token and cost caps (policy.go).
	Caps Caps
	// RetryNotBefore, if set, is how long after this reconcile the retry
	// child may be submitted at the earliest (recorded in the report, then
	// in the child's manifest; submit refuses before it with exit 75).
	RetryNotBefore time.Duration
	// AllowRunning reconciles a job whose batches are not all finished
	// (inFlight): what has arrived is classified, but no missing record is
	// retried or sent to the manual queue (disposition pending), and the
	// shards in flight are left to status and collect (no ledger event).
	// Without it such a job is refused with errkind.ErrNotYet (exit 75).
	AllowRunning bool
	// MemoryLimit, if set, is told the soft limit on Go memory, in bytes,
	// reconcile wants (GoHeapLimit): it sets the process's limit
	// (debug.SetMemoryLimit), which is the caller's to own and to restore.
	MemoryLimit func(bytes int64)
	// RetryReadBytes bounds the input shard bytes read for the retry at
	// once (0: 128 MiB; a shard's retry lines are at most its bytes). A
	// larger shard is read alone.
	RetryReadBytes int64
	// Now is the clock the report's reconciled_at and its retry not-before
	// time are read from (nil: the system clock).
	Now func() time.Time
	// retryReadStart, if set, is called as each input shard's read for the
	// retry starts; retryQueryShard as the retry-set query reaches each
	// input shard's rows, an error ending the query there (tests delay
	// reads and fail the query).
	retryReadStart  func(shardID string)
	retryQueryShard func(shardID string) error
	// beforeReconciling, if set, is called after the run read the shards'
	// ledgers and before it appends their RECONCILING events (tests append
	// in between).
	beforeReconciling func()
	// retryWholeShards reads each input shard whole for the retry, as for
	// expected rows that do not say where their lines start (tests compare
	// the two reads).
	retryWholeShards bool
	// retryPrefetchBytes bounds the retry lines read while the tables are
	// written (0: defaultPrefetchBytes; negative: none); retryPrefetched,
	// if set, counts the lines the retry took from them (tests).
	retryPrefetchBytes int
	retryPrefetched    *atomic.Int64
	// retryPrefetchFinish lets the read ahead end once the tables are
	// written instead of stopping it there (tests: a small job's tables
	// take less time than its read).
	retryPrefetchFinish bool
	// merged: the session holds outcomes and line_costs of a merge of
	// partitions instead of sources to classify.
	merged bool
	// encodeAll writes every column of the outcomes instead of copying the
	// record columns' chunks from the expected files, as for expected files
	// the copy refuses (tests compare the two).
	encodeAll bool
	// tablesStart, if set, is called as the outcomes and costs tables'
	// pass starts, or a partition's (tests read DuckDB's allocator there).
	tablesStart func()
}

// Counts are a report's counts of records and lines: a job's (Report), or
// one partition's (PartitionResult), which add up to the merged report's.
type Counts struct {
	Expected        int64 `json:"expected"`
	Succeeded       int64 `json:"succeeded"`
	FailedRetryable int64 `json:"failed_retryable"`
	FailedPermanent int64 `json:"failed_permanent"`
	QualityFailed   int64 `json:"quality_failed"`
	Missing         int64 `json:"missing"`
	Unknown         int64 `json:"unknown"`
	Duplicate       int64 `json:"duplicate"`
	Quarantined     int64 `json:"quarantined"`
}

// Report is the reconcile report (docs/contract.md).
type Report struct {
	JobKey string     `json:"job_key"`
	State  lake.State `json:"state"`
	Counts
	Closed        bool                   `json:"closed"`
	RetryRecords  int64                  `json:"retry_records"`
	ManualRecords int64                  `json:"manual_records"`
	RetryShards   []string               `json:"retry_shards"`
	RetryLineage  string                 `json:"retry_lineage,omitempty"`
	CostUSD       map[string]json.Number `json:"cost_usd"`
	Files         Files                  `json:"files"`
	Tenant        string                 `json:"tenant"`
	Provider      string                 `json:"provider"`
	Attempt       int                    `json:"attempt"`
	MaxAttempts   int                    `json:"max_attempts"`
	QualityGate   string                 `json:"quality_gate,omitempty"`
	RetryRules    string                 `json:"retry_rules"`
	Prices        string                 `json:"prices_sha256"`
	UnpricedLines int64                  `json:"unpriced_lines"`
	// UnpricedModels are the models of the unpriced lines (tokens but no
	// row of the price table), with how many lines each.
	UnpricedModels []UnpricedModel `json:"unpriced_models"`
	// Truncated counts records whose best line was cut at its token limit:
	// quality_failed (reason truncated), or succeeded under AcceptTruncated.
	Truncated       int64  `json:"truncated"`
	AcceptTruncated bool   `json:"accept_truncated,omitempty"`
	OutputSchema    string `json:"output_schema_sha256,omitempty"`
	SchemaFailed    int64  `json:"schema_failed_lines"`
	// OutputContract is the output schema's pass rate by provider and
	// model version, when the job has one (fallback.go).
	OutputContract []ContractRate `json:"output_contract,omitempty"`
	OutcomesFile   string         `json:"outcomes_file,omitempty"`
	CostsFile      string         `json:"costs_file,omitempty"`
	ReconciledAt   time.Time      `json:"reconciled_at"`
	Report         string         `json:"report"`
	// The retry policy's per-record caps (policy.go), when set.
	MaxRecordTokens int64       `json:"max_record_tokens,omitempty"`
	MaxRecordCost   json.Number `json:"max_record_cost_usd,omitempty"`
	// CappedRecords went to the manual queue because a cap was reached.
	CappedRecords int64 `json:"capped_records"`
	// RetryNotBefore is the earliest time the retry child may be submitted.
	RetryNotBefore *time.Time `json:"retry_not_before,omitempty"`
	// ProviderTotals are the provider's own token totals (OpenAI batch
	// usage, Bedrock manifest.json.out) beside the ingested lines' sums.
	ProviderTotals []ProviderTotal `json:"provider_totals"`
	// Estimate is plan's estimate, priced, beside what was billed (estimate.go).
	Estimate *Estimate `json:"estimate,omitempty"`
	// DuplicateBatches are paid batches made for a shard beside the one it
	// is bound to (the ledger's batch records): their result lines count as
	// duplicate submissions (cost category duplicate_submission).
	DuplicateBatches []DuplicateBatch `json:"duplicate_batches,omitempty"`
	// Unchanged is true when this exact reconcile had already run (not stored).
	Unchanged bool `json:"unchanged"`
}

// UnpricedModel is a model the price table has no row for, and the number
// of lines with tokens it left unpriced (cost 0).
type UnpricedModel struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Lines    int64  `json:"lines"`
}

// DuplicateBatch is a shard's batch beside its bound one.
type DuplicateBatch struct {
	ShardID       string `json:"shard_id"`
	ProviderJobID string `json:"provider_job_id"`
	BoundTo       string `json:"bound_batch"`
	Why           string `json:"why"`
}

// duplicateBatches lists every shard's recorded batches other than the one
// its ledger binds.
func duplicateBatches(ctx context.Context, g *lake.Ledger, job lake.Digest, m *lake.Manifest) ([]DuplicateBatch, error) {
	// Each shard's batch records and last event: round trips to a remote
	// lake, made for several shards at a time.
	recs := make([][]lake.BatchRecord, len(m.Shards))
	last := make([]lake.Event, len(m.Shards))
	err := lake.EachOf(ctx, len(m.Shards), lake.LedgerFanout, func(ctx context.Context, i int) error {
		var err error
		id := m.Shards[i].ShardID
		if recs[i], err = g.BatchRecords(ctx, job, id); err != nil || len(recs[i]) == 0 {
			return err
		}
		last[i], err = g.Last(ctx, job, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []DuplicateBatch
	for i, s := range m.Shards {
		for _, r := range recs[i] {
			if bound := last[i].ProviderJobID; bound != "" && r.ProviderJobID != bound {
				out = append(out, DuplicateBatch{ShardID: s.ShardID, ProviderJobID: r.ProviderJobID, BoundTo: bound, Why: r.Why})
			}
		}
	}
	return out, nil
}

// Files are the digests of every file the report accounts for.
type Files struct {
	InputShards []string `json:"input_shards"`
	Output      []string `json:"output"`
	Error       []string `json:"error"`
	// Retracted are raw files ingested for the job but retracted (ingest
	// --retract): archived, not counted.
	Retracted []string `json:"retracted,omitempty"`
}

// Cost categories of docs/contract.md, plus manual (lines of records the retry
// policy gave up on: policy.sql) and unattributed (lines with unknown ids).
var Categories = []string{"first_success", "duplicate_submission", "quality_failure", "retryable_failure", "permanent_failure", "manual", "unattributed"}

// ErrIdentity means the report's counts do not add up: a bug, never output.
var ErrIdentity = errors.New("reconcile: counts do not add up")

// Run reconciles a job. Running it again over the same files and settings
// returns the stored report with Unchanged set and writes nothing.
func Run(ctx context.Context, l *lake.Lake, o Options) (*Report, error) {
	limitGoHeap(o)
	in, err := prepare(ctx, l, &o)
	if err != nil {
		return nil, err
	}
	m, runKey := in.m, in.runKey
	g := lake.NewLedger(l, o.Actor)
	if stored, err := storedReport(ctx, l, g, m, runKey, in.held); stored != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return stored, writeOut(ctx, l, o.OutDir, stored)
	}
	// Every shard gets a RECONCILING event: the store's conditional-write
	// check runs while the batch records are listed and the tables fetched.
	l.ProbeAhead(ctx)

	e, err := OpenEngine(l, o.Engine.forRecords(m.ExpectedRecords))
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rep := in.newReport(o)
	if rep.DuplicateBatches, err = duplicateBatches(ctx, g, in.job, m); err != nil {
		return nil, err
	}
	if err := in.stage(ctx, e, o, rep, nil); err != nil {
		return nil, err
	}
	return lockAndReconcile(ctx, e, l, g, in, o, rep)
}

// lockAndReconcile leases every shard RECONCILING, reconciles and moves the
// shards to the report's state.
func lockAndReconcile(ctx context.Context, e *Engine, l *lake.Lake, g *lake.Ledger, in *runInputs, o Options, rep *Report) (*Report, error) {
	m, job, runKey := in.m, in.job, in.runKey
	// mine holds each shard's RECONCILING event of this run (Seq 0 for a
	// held shard), which its final event follows (finishLedger).
	mine := make([]lake.Event, len(m.Shards))
	if o.beforeReconciling != nil {
		o.beforeReconciling()
	}
	err := lake.EachOf(ctx, len(m.Shards), lake.LedgerFanout, func(ctx context.Context, i int) error {
		s := m.Shards[i]
		if in.held[s.ShardID] {
			return nil // its batch is still in flight: status and collect go on with it
		}
		detail := map[string]string{"run": runKey}
		ev, err := g.TransitionFrom(ctx, job, s.ShardID, in.last[i], lake.Reconciling, o.Lease, "", detail)
		if errors.Is(err, lake.ErrConflict) || errors.Is(err, lake.ErrLeased) || errors.Is(err, lake.ErrIllegalTransition) {
			// Appended to since prepare read it, or refused by what it read
			// then (another actor's lease, since let go): nothing was
			// appended; decide from the ledger as it is now.
			ev, err = g.Transition(ctx, job, s.ShardID, lake.Reconciling, o.Lease, "", detail)
		}
		if err != nil {
			return fmt.Errorf("reconcile %s: %w", s.ShardID, err)
		}
		mine[i] = ev
		failpoint.Hit(failpoint.ReconcileAfterReconciling)
		return nil
	})
	if err == nil {
		rep, err = reconcileLocked(ctx, e, l, m, job, o, rep, in)
	}
	if err != nil {
		// Give the leases taken back so the next run need not wait for them
		// to expire.
		_ = lake.EachOf(context.WithoutCancel(ctx), len(m.Shards), lake.LedgerFanout, func(ctx context.Context, i int) error {
			if mine[i].Seq > 0 {
				g.Transition(ctx, job, m.Shards[i].ShardID, lake.Reconciling, -1, "", map[string]string{"error": err.Error()})
			}
			return nil
		})
		return nil, err
	}
	if err := finishLedger(ctx, g, m, rep, in.held, mine); err != nil {
		return nil, err
	}
	return rep, writeOut(ctx, l, o.OutDir, rep)
}

// runInputs is what one reconcile run reads, and its identity.
type runInputs struct {
	m     *lake.Manifest
	job   lake.Digest
	rules Rules
	gate  string
	// gateSQL is the gate as the reconcile runs it: printed back by DuckDB
	// from the checked tree (CheckPredicate), set by stage.
	gateSQL string
	recs    []lake.IngestRecord
	// retracted are the raw files left out (ingest --retract), sorted.
	retracted []string
	// run is the digest of everything the run reads; runKey its report's key.
	run    lake.Digest
	runKey string
	// attempts are the attempts-table files of recs; quarantineKeys their
	// quarantine-table files.
	attempts       []lake.TableFile
	quarantineKeys []string
	// prior are the ancestors' priced lines, with caps (policy.go); totals
	// the provider's own totals to cross-check (totals.go).
	prior  *priorLines
	totals *providerSources
	// held are the shards in flight that reconcile --allow-running leaves
	// alone in the ledger; their missing records are held (pending).
	held map[string]bool
	// last is each shard's last event as prepare read it, in the
	// manifest's order: its RECONCILING event follows it unless anything
	// was appended since.
	last []lake.Event
}

// prepare checks the options, fills in defaults and computes the run's identity.
func prepare(ctx context.Context, l *lake.Lake, o *Options) (*runInputs, error) {
	job, err := lake.ParseDigest(o.JobKey)
	if err != nil {
		return nil, &errkind.UsageError{Msg: "reconcile: --job: " + err.Error()}
	}
	if o.OutDir != "" {
		if err := GuardOutput(l, o.Engine.CacheDir, "reconcile --out", o.OutDir, true); err != nil {
			return nil, err
		}
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.Lease < 0 {
		// A lease already run out would let another reconcile of the job
		// take it over while this one writes.
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("reconcile: lease %s: a reconciler must hold the job for a positive time", o.Lease)}
	}
	if o.Lease == 0 {
		o.Lease = 30 * time.Minute
	}
	m, err := l.GetManifest(ctx, job)
	if errors.Is(err, lake.ErrNotFound) {
		return nil, &errkind.UsageError{Msg: lake.JobNotFound(o.JobKey, l.URL).Error()}
	}
	if err != nil {
		return nil, err
	}
	rules, err := ParseRules(o.Retryable)
	if err != nil {
		return nil, &errkind.UsageError{Msg: err.Error()}
	}
	if o.Prices == nil {
		if o.Prices, err = LoadPrices("", nil); err != nil {
			return nil, err
		}
	}
	gate := strings.TrimSpace(o.QualityGate)
	if err := contractFor(ctx, l, m, o); err != nil {
		return nil, err
	}
	recs, retracted, err := countedIngests(ctx, l, job)
	if err != nil {
		return nil, err
	}

	// The run's identity: everything it reads.
	h := lake.NewFieldHasher().AddString("reconcile/v1").AddString(m.JobKey)
	for _, r := range recs {
		h.AddString(r.Channel + ":" + r.Raw.Hex())
	}
	for _, raw := range retracted {
		// Only with retractions, so runs without any keep their identity.
		h.AddString("retracted:" + raw)
	}
	h.AddString(strconv.Itoa(o.MaxAttempts)).AddString(rules.String()).AddString(gate).AddString(o.Prices.Digest.Hex())
	if o.OutputSchema != nil {
		// Only with a schema, so runs without one keep their identity.
		h.AddString("output-schema:" + o.OutputSchema.Digest.Hex())
	}
	var prior *priorLines
	if o.Caps.Set() {
		// With caps the outcome depends on the ancestors' priced lines too.
		if prior, err = ancestors(ctx, l, m); err != nil {
			return nil, err
		}
		h.AddString(fmt.Sprintf("caps:%d:%s", o.Caps.Tokens, o.Caps.CostUSD))
		for _, k := range prior.Reports {
			h.AddString(k)
		}
	}
	if o.RetryNotBefore > 0 {
		h.AddString("retry-not-before:" + o.RetryNotBefore.String())
	}
	// The shards' ledgers, read once for the batches in flight and the
	// provider totals.
	events, err := lake.NewLedger(l, o.Actor).EventsOf(ctx, job, m.ShardIDs())
	if err != nil {
		return nil, err
	}
	flight := inFlight(m, events)
	var held map[string]bool
	if len(flight) > 0 {
		if !o.AllowRunning {
			return nil, notYetError(m, flight)
		}
		// Only when batches are in flight does --allow-running change the
		// result, so only then is it part of the run's identity.
		h.AddString("allow-running:" + strings.Join(flight, ","))
		held = map[string]bool{}
		for _, s := range flight {
			held[s] = true
		}
	}
	if o.AcceptTruncated {
		// Only when set, so runs without it keep their identity.
		h.AddString("accept-truncated")
	}
	totals, err := gatherTotals(ctx, l, m, events, recs)
	if err != nil {
		return nil, err
	}
	for _, s := range totals.identity {
		h.AddString(s)
	}
	in := &runInputs{m: m, job: job, rules: rules, gate: gate, recs: recs, retracted: retracted, run: h.Sum(), prior: prior, totals: totals, held: held}
	in.last = make([]lake.Event, len(events))
	for i, evs := range events {
		if len(evs) > 0 {
			in.last[i] = evs[len(evs)-1]
		}
	}
	in.runKey = lake.ReportKey(job, in.run)
	for _, r := range recs {
		in.attempts = append(in.attempts, r.AttemptTables()...)
		if r.QuarantineFile != "" {
			in.quarantineKeys = append(in.quarantineKeys, r.QuarantineFile)
		}
	}
	return in, nil
}

// storedReport returns the report of a run that already committed (with
// Unchanged set, the ledger finished), or nil.
func storedReport(ctx context.Context, l *lake.Lake, g *lake.Ledger, m *lake.Manifest, runKey string, held map[string]bool) (*Report, error) {
	var stored Report
	if err := l.GetJSON(ctx, runKey, lake.FormatReport, &stored); err == nil {
		stored.Unchanged = true
		if err := finishLedger(ctx, g, m, &stored, held, nil); err != nil {
			return nil, err
		}
		return &stored, nil
	} else if !errors.Is(err, lake.ErrNotFound) {
		return nil, err
	}
	return nil, nil
}

// newReport is the run's report before any counting: settings and files.
func (in *runInputs) newReport(o Options) *Report {
	m := in.m
	rep := &Report{JobKey: m.JobKey, Tenant: m.Tenant, Provider: m.Provider, Attempt: m.Attempt, MaxAttempts: o.MaxAttempts,
		QualityGate: in.gate, AcceptTruncated: o.AcceptTruncated, RetryRules: in.rules.String(), Prices: o.Prices.Digest.Hex(), Report: in.runKey, RetryShards: []string{},
		Files: Files{InputShards: []string{}, Output: []string{}, Error: []string{}}}
	for _, s := range m.Shards {
		rep.Files.InputShards = append(rep.Files.InputShards, s.Object.Hex())
	}
	for _, r := range in.recs {
		switch r.Channel {
		case ingest.ChannelSummary: // provider totals (totals.go), not result lines
		case ingest.ChannelOutput:
			rep.Files.Output = append(rep.Files.Output, r.Raw.Hex())
		default:
			rep.Files.Error = append(rep.Files.Error, r.Raw.Hex())
		}
	}
	rep.Files.Retracted = in.retracted
	if o.OutputSchema != nil {
		rep.OutputSchema = o.OutputSchema.Digest.Hex()
	}
	return rep
}

// countedIngests returns the job's ingest records that count: all but those
// of retracted raw files, which it returns apart (sorted digests). Their
// lines stay in the lake, but no reconcile reads them.
func countedIngests(ctx context.Context, l *lake.Lake, job lake.Digest) ([]lake.IngestRecord, []string, error) {
	// Two listings and their markers: round trips to a remote lake, made
	// side by side.
	var (
		recs []lake.IngestRecord
		gone map[lake.Digest]lake.Retraction
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { recs, err = l.IngestRecords(gctx, job); return err })
	g.Go(func() (err error) { gone, err = l.Retractions(gctx, job); return err })
	if err := g.Wait(); err != nil || len(gone) == 0 {
		return recs, nil, err
	}
	kept := recs[:0]
	for _, r := range recs {
		if _, ok := gone[r.Raw]; !ok {
			kept = append(kept, r)
		}
	}
	retracted := make([]string, 0, len(gone))
	for d := range gone {
		retracted = append(retracted, d.Hex())
	}
	sort.Strings(retracted)
	return kept, retracted, nil
}

// stage loads the run's sources (only partition p's records and lines, when
// p is set), rules, output schema failures and prices into the session.
func (in *runInputs) stage(ctx context.Context, e *Engine, o Options, rep *Report, p *lake.Partition) error {
	sources, src, err := in.sources(ctx, e, p)
	if err != nil {
		return err
	}
	if err := e.ExecFile(ctx, sources, src); err != nil {
		return err
	}
	in.gateSQL = "true"
	if in.gate != "" {
		if in.gateSQL, err = CheckPredicate(ctx, e, in.gate); err != nil {
			return err
		}
	}
	if err := in.rules.load(ctx, e); err != nil {
		return err
	}
	if rep.SchemaFailed, err = o.OutputSchema.check(ctx, e); err != nil {
		return err
	}
	if o.OutputSchema != nil && p == nil {
		if rep.OutputContract, err = contractRates(ctx, e); err != nil {
			return err
		}
	}
	if err := o.Prices.load(ctx, e, in.recs, in.m); err != nil {
		return err
	}
	if in.prior != nil {
		return in.prior.load(ctx, e)
	}
	return nil
}

// reconcileLocked runs the queries and writes the tables, retry files and
// report, while the job's shards are leased RECONCILING.
func reconcileLocked(ctx context.Context, e *Engine, l *lake.Lake, m *lake.Manifest, job lake.Digest, o Options, rep *Report, in *runInputs) (*Report, error) {
	var err error
	// A merge (Merge) has its tables from the partitions already, the retry
	// policy applied by each partition.
	if !o.merged {
		groups, err := in.sourceGroups(ctx, e, e.groupRecords)
		if err != nil {
			return nil, err
		}
		if err := classify(ctx, e, in.gateSQL, o.AcceptTruncated, o.MaxAttempts, groups); err != nil {
			return nil, err
		}
		if len(in.held) > 0 {
			if err := holdMissing(ctx, e); err != nil {
				return nil, err
			}
		}
		if err := settle(ctx, e, o.Caps); err != nil {
			return nil, err
		}
	}
	if rep.CappedRecords, err = cappedRecords(ctx, e, o.Caps); err != nil {
		return nil, err
	}
	rep.MaxRecordTokens, rep.MaxRecordCost = o.Caps.Tokens, json.Number(o.Caps.CostUSD)
	if err := counts(ctx, e, rep); err != nil {
		return nil, err
	}
	if rep.UnpricedModels, err = unpricedModels(ctx, e); err != nil {
		return nil, err
	}
	if sum := rep.Succeeded + rep.QualityFailed + rep.FailedRetryable + rep.FailedPermanent + rep.Missing; sum != rep.Expected || rep.Expected != m.ExpectedRecords {
		return nil, fmt.Errorf("%w: expected %d (manifest %d) != succeeded %d + quality_failed %d + failed_retryable %d + failed_permanent %d + missing %d",
			ErrIdentity, rep.Expected, m.ExpectedRecords, rep.Succeeded, rep.QualityFailed, rep.FailedRetryable, rep.FailedPermanent, rep.Missing)
	}
	if rep.CostUSD, err = costs(ctx, e); err != nil {
		return nil, err
	}
	if rep.Estimate, err = estimate(ctx, e, o.Prices, m, rep.CostUSD["total"]); err != nil {
		return nil, err
	}
	if rep.ProviderTotals, err = in.totals.compare(ctx, e); err != nil {
		return nil, err
	}
	var pre *retryPrefetch
	defer func() { pre.wait(false) }()
	if rep.RetryRecords > 0 {
		// The retry set with its lines' places, under the tables' limit;
		// its lines are read ahead while the tables are written.
		if err := e.ExecFile(ctx, "retry_rows.sql", nil); err != nil {
			return nil, err
		}
	}
	// What follows is mostly Go's: the memory DuckDB's statements freed
	// goes back to the kernel now, for the tables' pass to take again.
	if err := e.releaseMemory(ctx); err != nil {
		return nil, err
	}
	if rep.RetryRecords > 0 {
		if limit := cmp.Or(o.retryPrefetchBytes, defaultPrefetchBytes); limit > 0 {
			if pre, err = startRetryPrefetch(ctx, e, l, m, limit); err != nil {
				return nil, err
			}
		}
	}
	if o.tablesStart != nil {
		o.tablesStart()
	}
	start := time.Now()
	if rep.OutcomesFile, rep.CostsFile, err = writeTables(ctx, e, l, m, job, o.TmpDir, o.merged, !o.encodeAll, rawModes(in.recs)); err != nil {
		return nil, err
	}
	logTiming("writeTables", "outcomes and costs tables", start)
	start = time.Now()
	failpoint.Hit(failpoint.ReconcileAfterTables)
	if rep.RetryRecords > 0 {
		if !o.merged {
			if err := e.ExecFile(ctx, "retry_drop.sql", nil); err != nil {
				return nil, err
			}
		}
		if err := e.lowerMemoryLimit(ctx, retryMemoryLimit); err != nil {
			return nil, err
		}
		if rep.RetryShards, rep.RetryLineage, err = writeRetry(ctx, e, l, m, o, pre.wait(o.retryPrefetchFinish)); err != nil {
			return nil, err
		}
		failpoint.Hit(failpoint.ReconcileAfterRetry)
	}
	logTiming("writeRetry", "retry shards and lineage", start)
	rep.Closed = rep.Missing == 0 && rep.Unknown == 0 && rep.Duplicate == 0
	rep.State = lake.Partial
	if rep.Closed && rep.RetryRecords == 0 {
		rep.State = lake.Completed
	}
	rep.ReconciledAt = now(o.Now)
	if rep.RetryRecords > 0 {
		rep.RetryNotBefore = notBefore(rep.ReconciledAt, o.RetryNotBefore)
	}
	// The report is the run's commit marker: written after everything it names.
	if _, err := l.PutJSON(ctx, rep.Report, lake.FormatReport, rep); err != nil {
		if !errors.Is(err, lake.ErrCorrupt) {
			return nil, err
		}
		// A concurrent run of the same reconcile committed first; use its report.
		if err := l.GetJSON(ctx, rep.Report, lake.FormatReport, rep); err != nil {
			return nil, err
		}
	}
	failpoint.Hit(failpoint.ReconcileAfterReport)
	return rep, nil
}

func sqlList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = quote(p)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// sqlInts renders ns as a DuckDB list literal.
func sqlInts(ns []int) string {
	q := make([]string, len(ns))
	for i, n := range ns {
		q[i] = strconv.Itoa(n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func counts(ctx context.Context, e *Engine, r *Report) error {
	rows, err := e.QueryFile(ctx, "report.sql", nil)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		return fmt.Errorf("sql report.sql: no row")
	}
	if err := rows.Scan(&r.Expected, &r.Succeeded, &r.FailedRetryable, &r.FailedPermanent, &r.QualityFailed, &r.Missing,
		&r.Unknown, &r.Duplicate, &r.Quarantined, &r.RetryRecords, &r.ManualRecords, &r.UnpricedLines, &r.Truncated); err != nil {
		return fmt.Errorf("sql report.sql: %w", err)
	}
	return rows.Err()
}

func unpricedModels(ctx context.Context, e *Engine) ([]UnpricedModel, error) {
	rows, err := e.QueryFile(ctx, "unpriced_models.sql", nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []UnpricedModel{}
	for rows.Next() {
		var u UnpricedModel
		if err := rows.Scan(&u.Provider, &u.Model, &u.Lines); err != nil {
			return nil, fmt.Errorf("sql unpriced_models.sql: %w", err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

func costs(ctx context.Context, e *Engine) (map[string]json.Number, error) {
	rows, err := e.QueryFile(ctx, "cost_by_category.sql", nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]json.Number{}
	total := NewDecimal()
	for _, c := range Categories {
		out[c] = "0"
	}
	for rows.Next() {
		var cat, cost string
		if err := rows.Scan(&cat, &cost); err != nil {
			return nil, err
		}
		out[cat] = json.Number(trimDecimal(cost))
		if err := total.Add(cost); err != nil {
			return nil, err
		}
	}
	out["total"] = json.Number(total.String())
	return out, rows.Err()
}

// finishLedger moves every shard still RECONCILING to the report's state,
// leaving out the held shards (in flight, reconcile --allow-running). A
// shard whose RECONCILING event this run appended (mine, by shard; nil for a
// stored report's run) gets its final event right after it, without reading
// its ledger again, unless anything was appended since.
func finishLedger(ctx context.Context, g *lake.Ledger, m *lake.Manifest, r *Report, held map[string]bool, mine []lake.Event) error {
	job, _ := lake.ParseDigest(m.JobKey)
	return lake.EachOf(ctx, len(m.Shards), lake.LedgerFanout, func(ctx context.Context, i int) error {
		s := m.Shards[i]
		if held[s.ShardID] {
			return nil
		}
		detail := map[string]string{"report": r.Report}
		if i < len(mine) && mine[i].Seq > 0 {
			failpoint.Hit(failpoint.ReconcileBeforeFinal)
			_, err := g.AppendAfter(ctx, mine[i], r.State, 0, "", detail)
			if err == nil {
				return nil
			}
			if !errors.Is(err, lake.ErrConflict) {
				return fmt.Errorf("reconcile %s: %w", s.ShardID, err)
			}
			// Another event came after ours (the lease expired and another
			// run took the shard over): decide from the ledger as it is.
			return finishShard(ctx, g, job, s.ShardID, r, detail, false)
		}
		return finishShard(ctx, g, job, s.ShardID, r, detail, true)
	})
}

// finishShard moves one shard to the report's state after reading its last
// event (hit: the failpoint before the final event is this shard's).
func finishShard(ctx context.Context, g *lake.Ledger, job lake.Digest, shard string, r *Report, detail map[string]string, hit bool) error {
	last, err := g.Last(ctx, job, shard)
	if err != nil {
		return err
	}
	if last.State == r.State && last.Detail["report"] == r.Report {
		return nil
	}
	if last.State != lake.Reconciling || last.Actor != g.Actor {
		// Reconciled again with the same inputs, or a crashed run's
		// expired lease: (re)open as this actor, then close.
		if _, err := g.Transition(ctx, job, shard, lake.Reconciling, time.Minute, "", map[string]string{"run": r.Report}); err != nil {
			return fmt.Errorf("reconcile %s: %w", shard, err)
		}
	}
	if hit {
		failpoint.Hit(failpoint.ReconcileBeforeFinal)
	}
	if _, err := g.Transition(ctx, job, shard, r.State, 0, "", detail); err != nil && !errors.Is(err, lake.ErrConflict) {
		return fmt.Errorf("reconcile %s: %w", shard, err)
	}
	return nil
}

// writeOut copies the report, retry shards and lineage to a local directory.
func writeOut(ctx context.Context, l *lake.Lake, dir string, r *Report) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	copyObj := func(key, name string) error {
		d, ok := lake.ParseObjectKey(key)
		if !ok {
			return fmt.Errorf("out: bad key %s", key)
		}
		data, err := l.GetObject(ctx, d)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	for i, k := range r.RetryShards {
		if err := copyObj(k, fmt.Sprintf("retry-%05d.jsonl", i)); err != nil {
			return err
		}
	}
	if r.RetryLineage != "" {
		if err := copyObj(r.RetryLineage, "retry-lineage.jsonl"); err != nil {
			return err
		}
	}
	return removeStaleOut(dir, len(r.RetryShards), r.RetryLineage != "")
}

// removeStaleOut removes the retry files an earlier reconcile wrote into dir
// that this one did not write again: shards numbered from shards on, and the
// lineage unless lineage. Left there beside this report, they would be sent
// again by a step that sends dir's retry files, records that have succeeded
// since among them. No other file is touched.
func removeStaleOut(dir string, shards int, lineage bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		stale := name == "retry-lineage.jsonl" && !lineage
		if num, ok := strings.CutPrefix(name, "retry-"); ok && len(name) == len("retry-00000.jsonl") && strings.HasSuffix(num, ".jsonl") {
			digits := num[:5]
			if n, err := strconv.Atoi(digits); err == nil && strings.Trim(digits, "0123456789") == "" && n >= shards {
				stale = true
			}
		}
		if stale && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// LatestReport returns the report a job's ledger last closed with.
func LatestReport(ctx context.Context, l *lake.Lake, job lake.Digest) (*Report, error) {
	m, err := l.GetManifest(ctx, job)
	if err != nil {
		return nil, err
	}
	key, err := lake.LatestReportKey(ctx, l, m)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := l.GetJSON(ctx, key, lake.FormatReport, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// goHeapLimit is the soft limit (Options.MemoryLimit) on reconcile's Go
// memory. Its live heap (the Parquet writers' row groups, row batches in
// flight: fixed sizes, not the job's) does not grow with the job, and
// without a limit the collector lets garbage double it; DuckDB's own memory
// is governed by --memory-limit. The live heap is about 105–115 MB while the
// tables are written, so the limit leaves room for garbage between
// collections: at 128 MiB a 10M reconcile's tables pass ran over 600
// collections that freed almost nothing each: 39.3–41.4 s in all, against
// 34.3–36.0 s at 192 MiB (peak RSS 793–878 MiB against 871–900).
const goHeapLimit = 192 << 20

// limitGoHeap asks for goHeapLimit, if the caller listens.
func limitGoHeap(o Options) {
	if o.MemoryLimit != nil {
		o.MemoryLimit(goHeapLimit)
	}
}
