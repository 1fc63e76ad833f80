package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/ingest/translate"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lake/failpoint"
)

// RetryResult is what the retry command prints.
type RetryResult struct {
	ParentJobKey string             `json:"parent_job_key"`
	Report       string             `json:"report"`
	RetryRecords int64              `json:"retry_records"`
	Child        *ingest.PlanResult `json:"child,omitempty"`
	// NotBefore is the earliest time the child may be submitted.
	NotBefore *time.Time `json:"not_before,omitempty"`
	// AlreadySucceeded counts the records of the retry set left out of the
	// child because a retry descendant of the parent already did them;
	// AlreadySent those left out because a descendant was sent with them
	// (in flight, or settled there: retried by that job, or given up on).
	AlreadySucceeded int64 `json:"already_succeeded,omitempty"`
	AlreadySent      int64 `json:"already_sent,omitempty"`
	// Superseded are older, unsubmitted children of the parent that this
	// child supersedes (submit refuses them); StillSubmitted older children
	// that were already sent and are left alone.
	Superseded     []string `json:"superseded,omitempty"`
	StillSubmitted []string `json:"older_children_submitted,omitempty"`
	// Provider and Model are the child's when it was translated to another
	// provider or model (Fallback).
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Untranslatable are the records left out of a translated child for
	// manual handling (--skip-untranslatable), also stored in the lake as
	// UntranslatableFile.
	Untranslatable     []UntranslatableRecord `json:"untranslatable,omitempty"`
	UntranslatableFile string                 `json:"untranslatable_file,omitempty"`
	// OutputSchema is the lake key of the output contract the child is held to.
	OutputSchema string `json:"output_schema,omitempty"`
	Message      string `json:"message"`
}

// childDigest parses a job key plan just made.
func childDigest(hex string) lake.Digest { d, _ := lake.ParseDigest(hex); return d }

// Retry turns the retry shards of a job's latest report into a child job:
// attempt n+1, the same record ids, new custom ids, lineage kept. Running it
// again yields the same child job key and writes nothing.
func Retry(ctx context.Context, l *lake.Lake, job lake.Digest, tmpDir string) (*RetryResult, error) {
	return RetryWith(ctx, l, job, RetryOptions{TmpDir: tmpDir})
}

// RetryOptions are the settings of RetryWith.
type RetryOptions struct {
	TmpDir string
	// NotBefore is a not-before window: the child may be submitted no
	// earlier than now + NotBefore, or the reconcile's --retry-not-before
	// time if that is later. The time is recorded in the child's manifest
	// (not part of its job key); a child already planned keeps the time it
	// has.
	NotBefore time.Duration
	// MemoryLimit is passed to the child's plan (ingest.PlanOptions).
	MemoryLimit func(bytes int64)
	// Fallback, if set, makes the child for another provider or model, its
	// requests translated (fallback.go).
	Fallback *Fallback
	// OutputSchema is the lake key of an output contract for the child; ""
	// keeps the parent's (its manifest's, or its reconcile's --output-schema).
	OutputSchema string
	// Now is the clock the not-before window starts from (nil: the system
	// clock).
	Now func() time.Time
}

// RetryWith is Retry with settings: a not-before window and a memory limit.
func RetryWith(ctx context.Context, l *lake.Lake, job lake.Digest, o RetryOptions) (*RetryResult, error) {
	m, err := l.GetManifest(ctx, job)
	if err != nil {
		return nil, err
	}
	rep, err := LatestReport(ctx, l, job)
	if errors.Is(err, lake.ErrNotReconciled) {
		// A step run out of order: running it again will not help.
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("retry: job %s has not been reconciled: run batchlake reconcile --job %s first", m.JobKey, m.JobKey)}
	}
	if err != nil {
		return nil, err
	}
	// The retry set is the latest reconcile's: made from it after more
	// results came in, a child would send records they answered.
	if added, gone, err := lake.Unreconciled(ctx, l, m); err != nil {
		return nil, err
	} else if len(added)+len(gone) > 0 {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("retry: job %s's results changed since its latest reconcile (%s): its retry set would send again records answered since, or leave out records. Run batchlake reconcile --job %s again first; nothing was planned",
			m.JobKey, lake.UnreconciledText(added, gone), m.JobKey)}
	}
	res := &RetryResult{ParentJobKey: m.JobKey, Report: rep.Report, RetryRecords: rep.RetryRecords}
	if rep.RetryRecords == 0 || len(rep.RetryShards) == 0 {
		res.Message = "nothing to retry"
		return res, nil
	}
	lineage := map[string]ingest.Lineage{}
	ld, ok := lake.ParseObjectKey(rep.RetryLineage)
	if !ok {
		return nil, fmt.Errorf("retry: report %s has no lineage", rep.Report)
	}
	lb, err := l.GetObject(ctx, ld)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(lb))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var li ingest.Lineage
		if err := json.Unmarshal(sc.Bytes(), &li); err != nil {
			return nil, fmt.Errorf("retry: lineage %s: %w", rep.RetryLineage, err)
		}
		lineage[li.CustomID] = li
	}
	fam, err := lake.ReadFamily(ctx, l)
	if err != nil {
		return nil, err
	}
	done, err := succeededInFamily(ctx, l, fam, m.JobKey, lineage)
	if err != nil {
		return nil, err
	}
	sent, err := sentInFamily(ctx, l, fam, m.JobKey, lineage, done)
	if err != nil {
		return nil, err
	}
	// skip: the records of the retry set a descendant settled or holds.
	skip := make(map[string]string, len(done)+len(sent))
	for _, held := range []map[string]string{done, sent} {
		for id, job := range held {
			skip[id] = job
		}
	}
	format, err := ingest.FormatFor(m.Provider)
	if err != nil {
		return nil, err
	}
	childProvider, childModel := m.Provider, m.Model
	var target translate.Target
	if o.Fallback != nil {
		if target, err = o.Fallback.target(m); err != nil {
			return nil, err
		}
		childProvider, childModel = o.Fallback.childProvider(m), target.Model
		res.Provider, res.Model = childProvider, childModel
	}
	schema, err := childSchema(ctx, l, m, rep, o.OutputSchema)
	if err != nil {
		return nil, err
	}
	res.OutputSchema = schema
	// The child's input is the retry shards, concatenated.
	// A fixed name: the child's manifest records it (input_file_name), so a
	// random temp name would make every retry's manifest bytes differ.
	dir, err := os.MkdirTemp(o.TmpDir, "batchlake-retry-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	input := filepath.Join(dir, "retry-of-"+m.JobKey+".jsonl")
	writeInput := func(skip map[string]string) error {
		res.Untranslatable = nil
		f, err := os.Create(input)
		if err != nil {
			return err
		}
		defer f.Close()
		w := bufio.NewWriter(f)
		for _, k := range rep.RetryShards {
			d, ok := lake.ParseObjectKey(k)
			if !ok {
				return fmt.Errorf("retry: bad retry shard key %s", k)
			}
			b, err := l.GetObject(ctx, d)
			if err != nil {
				return err
			}
			if o.Fallback != nil {
				if _, err := o.Fallback.translateShard(w, k, b, format.Name(), target, lineage, skip, &res.Untranslatable); err != nil {
					return err
				}
				continue
			}
			if len(skip) == 0 {
				w.Write(b)
				continue
			}
			// No record whose latest state is succeeded goes into a child,
			// nor one a descendant was sent with.
			if _, err := writeWithout(w, b, format, lineage, skip); err != nil {
				return fmt.Errorf("retry: %s: %w", k, err)
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return f.Close()
	}
	nb := rep.RetryNotBefore
	if o.NotBefore > 0 {
		if t := now(o.Now).Add(o.NotBefore).UTC().Truncate(time.Second); nb == nil || t.After(*nb) {
			nb = &t
		}
	}
	var est ingest.EstimateOptions
	if m.Estimate != nil {
		est = ingest.EstimateOptions{InputTokens: m.Estimate.InputPerRecord, OutputTokens: m.Estimate.OutputPerRecord}
	}
	// A child below the provider's minimum records per batch job is planned
	// but held: submit refuses to send it as a batch (the provider would
	// fail it), unless the parent was planned below the minimum on purpose.
	belowMin := ingest.BelowMinHold
	if m.BelowMin == ingest.BelowMinAllow {
		belowMin = ingest.BelowMinAllow
	}
	po := ingest.PlanOptions{
		MinRecords: m.MinRecords, BelowMin: belowMin,
		Provider: m.Provider, Model: m.Model, Input: input, Tenant: m.Tenant, PromptVersion: m.PromptVersion, SourceVersion: m.SourceVersion,
		DatasetVersion: m.DatasetVersion, KeyField: m.KeyField, ShardMaxRecords: m.ShardMaxRecords, ShardMaxBytes: m.ShardMaxBytes,
		SubmittedBy: m.SubmittedBy, CostCenter: m.CostCenter, Retention: m.Retention, OutputSchemaVersion: m.OutputSchemaVersion,
		TmpDir: o.TmpDir, MemoryLimit: o.MemoryLimit, Lineage: lineage, Attempt: m.Attempt + 1, ParentJobKey: m.JobKey, NotBefore: nb, Estimate: est,
		OutputSchema: schema,
		// A retry of a translated job sends its translated requests again:
		// their record ids are still the lineage's.
		Translated: m.Translated,
	}
	if o.Fallback != nil {
		o.Fallback.planOptions(&po, m, childProvider, childModel)
	}
	// A child a retry made before of the records not succeeded, sent since
	// or not (this retry run again after a crash, or after its child was
	// sent), is that same child: gone on with, never a second one.
	if len(sent) > 0 && int64(len(done)) < rep.RetryRecords {
		if err := writeInput(done); err != nil {
			return nil, err
		}
		ko := po
		ko.KeyOnly = true
		// An input that does not plan (every request untranslatable) made
		// no child either.
		if k, err := ingest.Plan(ctx, l, ko); err == nil {
			if _, err := l.GetManifest(ctx, childDigest(k.JobKey)); err == nil {
				skip, sent = done, nil
			} else if !errors.Is(err, lake.ErrNotFound) {
				return nil, err
			}
		}
	}
	if err := writeInput(skip); err != nil {
		return nil, err
	}
	res.AlreadySucceeded, res.AlreadySent = int64(len(done)), int64(len(sent))
	if len(res.Untranslatable) > 0 {
		if res.UntranslatableFile, err = storeUntranslatable(ctx, l, res.Untranslatable); err != nil {
			return nil, err
		}
	}
	if int64(len(skip)) >= rep.RetryRecords {
		res.Message = fmt.Sprintf("nothing to retry: of the %d records of the retry set, %d already succeeded in its retry tree and %d were sent in a retry of it (%s): retry that job to go on with them",
			rep.RetryRecords, len(done), len(sent), sentJobs(sent))
		if len(sent) == 0 {
			res.Message = fmt.Sprintf("nothing to retry: all %d records of the retry set already succeeded in its retry tree", len(done))
		}
		return res, nil
	}
	if int64(len(skip)+len(res.Untranslatable)) >= rep.RetryRecords {
		res.Message = fmt.Sprintf("nothing to retry: %d records of the retry set do not translate to %s (left for manual handling: %s), %d already succeeded, %d were sent in a retry of this job",
			len(res.Untranslatable), childProvider, res.UntranslatableFile, len(done), len(sent))
		return res, nil
	}
	failpoint.Hit(failpoint.RetryBeforePlan)
	child, err := ingest.Plan(ctx, l, po)
	if err != nil {
		return nil, fmt.Errorf("retry: plan child of %s: %w", m.JobKey[:12], err)
	}
	res.Child = child
	res.Message = fmt.Sprintf("child job %s: attempt %d for %d records", child.JobKey[:12], m.Attempt+1, child.Records)
	if len(done) > 0 {
		res.Message += fmt.Sprintf(" (%d left out: already succeeded in its retry tree)", len(done))
	}
	if len(sent) > 0 {
		res.Message += fmt.Sprintf(" (%d left out: sent in a retry of this job, %s, which settles them)", len(sent), sentJobs(sent))
	}
	if o.Fallback != nil {
		res.Message += fmt.Sprintf(", translated from %s %s to %s %s", m.Provider, m.Model, childProvider, childModel)
	}
	if len(res.Untranslatable) > 0 {
		res.Message += fmt.Sprintf("; %d records do not translate, left for manual handling (%s)", len(res.Untranslatable), res.UntranslatableFile)
	}
	// The child's manifest holds the time that counts (a child planned
	// before keeps its own).
	cm, err := l.GetManifest(ctx, childDigest(child.JobKey))
	if err != nil {
		return nil, err
	}
	if cm.NotBefore != nil {
		res.NotBefore = cm.NotBefore
		res.Message += fmt.Sprintf(", not to be submitted before %s", cm.NotBefore.Format(time.RFC3339))
	}
	if !child.Created {
		// The same records and settings make the same child: one a newer
		// retry superseded cannot be sent, and handing it back would leave
		// the caller a child that submit refuses.
		if _, by, err := sendState(ctx, lake.NewLedger(l, ""), cm); err != nil {
			return nil, err
		} else if by != "" {
			return nil, &errkind.UsageError{Msg: fmt.Sprintf("retry: the child these settings make, job %s, was planned before and superseded by a newer retry, job %s, before it was sent; a superseded child is never sent. Submit job %s, or retry job %s with settings that differ from both",
				child.JobKey, by, by, m.JobKey[:12])}
		}
		res.Message = "child job already planned: nothing new written"
	}
	if child.Held != "" {
		res.Message += fmt.Sprintf("; held: %s, so submit refuses to send it as a %s batch (exit 2)", child.Held, childProvider)
	}
	if res.Superseded, res.StillSubmitted, err = supersedeOlder(ctx, l, fam, m.JobKey, cm); err != nil {
		return nil, err
	}
	if len(res.Superseded) > 0 {
		res.Message += fmt.Sprintf("; supersedes %d older unsubmitted child(ren), which submit now refuses", len(res.Superseded))
	}
	if len(res.StillSubmitted) > 0 {
		res.Message += fmt.Sprintf("; %d older child(ren) were already submitted and may hold some of the same records", len(res.StillSubmitted))
	}
	return res, nil
}

// sentJobs names the jobs of sent (record id → job), sorted, for a message.
func sentJobs(sent map[string]string) string {
	var jobs []string
	for _, j := range sent {
		if !slices.Contains(jobs, j[:12]) {
			jobs = append(jobs, j[:12])
		}
	}
	slices.Sort(jobs)
	return strings.Join(jobs, ", ")
}
