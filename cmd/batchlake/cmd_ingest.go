package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

func ingestCmd(ctx context.Context, g *globals) *cobra.Command {
	var job, output, errs, providerJobID, shard, summary, retract, reason string
	var minMatch float64
	var force bool
	c := &cobra.Command{
		Use:   "ingest",
		Short: "Archive and normalise provider output and error files of a job submitted elsewhere",
		Long: `ingest archives each file raw and content-addressed, normalises every line into
attempt rows (matched to records by custom id, never by line number) and
quarantines lines it cannot read, with their raw bytes and line numbers.
Ingesting the same file again changes nothing.

A file whose lines mostly carry ids the job does not expect (fewer than
--min-match of its first 10,000 lines with an id) is refused with exit 2 and
nothing written, naming the lake's job whose ids it carries, if any; so is a
file none of whose lines is a result line with an id in the format of the
job's provider (the job's input given as its output, another provider's
file), and a file that begins with the whole of one ingested into the job
before, or whose bytes are the start of one (a download cut short), or that
holds the same bytes as one ingested on the other channel (the output given as
--errors too), or that another job of the lake ingested and did not retract
(yesterday's output given to today's job): the lines they share would count
twice. --force ingests it anyway. --retract SHA256 undoes an ingest: the file (the sha256 in
the report's files, the attempts' raw_sha256) no longer counts for the job;
it stays archived.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if retract != "" && (output != "" || errs != "" || summary != "") {
				return &errkind.UsageError{Msg: "ingest: --retract undoes an ingest; give it without --output, --errors and --summary"}
			}
			if retract == "" && output == "" && errs == "" {
				return &errkind.UsageError{Msg: "ingest: give --output and/or --errors (or --retract SHA256)"}
			}
			if !(minMatch >= 0 && minMatch <= 1) { // NaN too
				return &errkind.UsageError{Msg: fmt.Sprintf("ingest --min-match %g: want a fraction from 0 (no check) to 1", minMatch)}
			}
			for _, f := range []struct{ flag, path string }{{"--output", output}, {"--errors", errs}, {"--summary", summary}} {
				if f.path == "" {
					continue
				}
				if err := ingest.CheckPlainFile(f.path); err != nil {
					return &errkind.UsageError{Msg: fmt.Sprintf("ingest %s %s: %v", f.flag, f.path, err)}
				}
			}
			l, d, err := g.openJob(ctx, job)
			if err != nil {
				return err
			}
			defer l.Close()
			m, err := l.GetManifest(ctx, d)
			if errors.Is(err, lake.ErrNotFound) {
				return lake.JobNotFound(job, l.URL)
			}
			if err != nil {
				return err
			}
			if retract != "" {
				res, err := ingest.Retract(ctx, l, m, retract, reason, time.Now())
				if err != nil {
					return err
				}
				g.log.Info(res.Message, "job", m.JobKey[:12], "raw_sha256", res.RawSHA256, "file", res.FileName, "channels", res.Channels)
				printJSON(g.stdout, res)
				return nil
			}
			if shard != "" {
				if _, ok := m.Shard(shard); !ok {
					return &errkind.UsageError{Msg: "ingest: --shard " + shard + " is not a shard of this job"}
				}
			}
			res := struct {
				JobKey  string               `json:"job_key"`
				Files   []ingest.FileResult  `json:"files"`
				Summary *ingest.SummaryCheck `json:"summary_check,omitempty"`
			}{JobKey: m.JobKey}
			heap := new(goHeap)
			heap.percent(bulkGCPercent)
			defer heap.restore()
			files := []resultFile{{output, ingest.ChannelOutput}, {errs, ingest.ChannelError}}
			var hashes []*ingest.Hashing
			if !force && minMatch > 0 {
				// Every file is checked before any is written; the files are
				// hashed meanwhile, on another core, and ingested as soon as
				// they pass (the parse does not wait for the digest).
				hctx, stop := context.WithCancel(ctx)
				defer stop()
				hashes = make([]*ingest.Hashing, len(files))
				for i, f := range files {
					if f.path != "" {
						hashes[i] = ingest.HashAsync(hctx, f.path)
					}
				}
				if err := checkIDs(ctx, g, l, m, files, minMatch); err != nil {
					return err
				}
			}
			retracted, err := l.Retractions(ctx, d)
			if err != nil {
				return err
			}
			if !force {
				if err := checkCopies(ctx, l, m, retracted, files); err != nil {
					return err
				}
			}
			for i, f := range files {
				if f.path == "" {
					continue
				}
				tell, done := g.progressFor("ingest", f.path, fileSize(f.path), g.stderr)
				o := ingest.FileOptions{Path: f.path, Channel: f.channel, ProviderJobID: providerJobID, TmpDir: g.tmpDir, Progress: tell, RefuseOtherJobs: !force}
				if i < len(hashes) {
					o.Hash = hashes[i]
				}
				fr, err := ingest.IngestFile(ctx, l, m, o)
				done()
				if err != nil {
					return err
				}
				msg := "ingested"
				if !fr.Created {
					msg = "already ingested: nothing new written"
				}
				if raw, err := lake.ParseDigest(fr.RawSHA256); err == nil {
					if _, gone := retracted[raw]; gone {
						msg = "already ingested and retracted from this job: it does not count (a retraction is final)"
					}
				}
				g.log.Info(msg, "file", fr.File, "channel", fr.Channel, "lines", fr.Lines, "quarantined", fr.Quarantined)
				res.Files = append(res.Files, fr)
			}
			if summary != "" {
				expected := m.ExpectedRecords
				if s, ok := m.Shard(shard); ok {
					expected = s.Records
				}
				if res.Summary, err = checkBedrockSummary(ctx, l, m, summary, output, errs, providerJobID, expected); err != nil {
					return err
				}
				for _, d := range res.Summary.Differences {
					g.log.Warn("bedrock manifest.json.out disagrees with the result lines", "difference", d.String())
				}
			}
			printJSON(g.stdout, res)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&job, "job", "", "job key, or a unique prefix of one (required)")
	f.StringVar(&output, "output", "", "provider output JSONL")
	f.StringVar(&errs, "errors", "", "provider error JSONL")
	f.StringVar(&providerJobID, "provider-job-id", "", "the provider's batch id, recorded on every row")
	f.StringVar(&shard, "shard", "", "the shard these files belong to (optional: lines are matched by id)")
	f.StringVar(&summary, "summary", "", "Bedrock manifest.json.out: archived and cross-checked against the result lines")
	f.Float64Var(&minMatch, "min-match", 0.5, "refuse a file unless at least this fraction of its first 10,000 lines with an id carry ids of the job (0: no check)")
	f.BoolVar(&force, "force", false, "ingest a file the --min-match check refuses")
	f.StringVar(&retract, "retract", "", "the sha256 of a file ingested into --job: from now on it does not count for the job (it stays archived)")
	f.StringVar(&reason, "reason", "", "with --retract: why, recorded in the retraction")
	return c
}

// resultFile is a provider file given to ingest and its channel.
type resultFile struct{ path, channel string }

// checkIDs refuses (exit 2, nothing written) the first result file whose
// sampled lines mostly carry ids the job does not expect, naming the lake's
// job whose ids they are, if one is found. The files' samples are matched
// in one read of the job's expected files.
func checkIDs(ctx context.Context, g *globals, l *lake.Lake, m *lake.Manifest, files []resultFile, minMatch float64) error {
	var (
		sampled []resultFile
		samples []*ingest.IDSample
	)
	for _, f := range files {
		if f.path == "" {
			continue
		}
		s, err := ingest.SampleIDs(f.path, m.Provider, f.channel, ingest.SampleLines)
		if err != nil {
			return err
		}
		if len(s.IDs) == 0 {
			if s.Lines == 0 {
				continue // no line: nothing to judge by, or to ingest
			}
			// Not one line is a result of the job's provider with an id:
			// another provider's file, or a request file given as its
			// output. Ingested, every line would go to quarantine and the
			// job's records count as missing, to be sent again.
			if err := refuseIDless(ctx, l, m, f, s); err != nil {
				return err
			}
			continue
		}
		sampled, samples = append(sampled, f), append(samples, s)
	}
	if len(samples) == 0 {
		return nil
	}
	ids := make([][]string, len(samples))
	for i, s := range samples {
		ids[i] = s.IDs
	}
	own, err := reconcile.MatchEach(ctx, l, g.engineOptions(), m, ids)
	if err != nil {
		return err
	}
	for i, f := range sampled {
		if err := checkSample(ctx, g, l, m, f, samples[i], own[i], minMatch); err != nil {
			return err
		}
	}
	return nil
}

// checkCopies refuses result files whose lines the job would count twice:
// --output and --errors naming the same bytes, or a file that is a copy, or
// a partial copy, of one ingested into the job before and not retracted
// (ingest.CheckPartialCopy).
func checkCopies(ctx context.Context, l *lake.Lake, m *lake.Manifest, retracted map[lake.Digest]lake.Retraction, files []resultFile) error {
	if a, b := files[0].path, files[1].path; a != "" && b != "" {
		same, err := sameBytes(a, b)
		if err != nil {
			return &errkind.UsageError{Msg: fmt.Sprintf("ingest: %v", err)}
		}
		if same {
			return &errkind.UsageError{Msg: fmt.Sprintf("ingest: --output %s and --errors %s are the same bytes: each line would count twice, as a duplicate submission. Give the job's errors file as --errors (or leave it out); --force ingests both anyway", a, b)}
		}
	}
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return err
	}
	recs, err := l.IngestRecords(ctx, job)
	if err != nil {
		return err
	}
	recs = slices.DeleteFunc(recs, func(r lake.IngestRecord) bool { _, gone := retracted[r.Raw]; return gone })
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if err := ingest.CheckPartialCopy(ctx, l, m, recs, f.path, f.channel); err != nil {
			return err
		}
	}
	return nil
}

// sameBytes reports whether the files at a and b hold the same bytes: one
// file, or two of one size and digest.
func sameBytes(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	if os.SameFile(fa, fb) {
		return true, nil
	}
	if fa.Size() != fb.Size() {
		return false, nil
	}
	da, _, err := lake.HashFile(a)
	if err != nil {
		return false, err
	}
	db, _, err := lake.HashFile(b)
	return err == nil && da == db, err
}

// refuseIDless refuses a file none of whose sampled lines is a result line
// of the job's provider with an id, unless it was ingested into the job
// before (ingesting it again writes nothing).
func refuseIDless(ctx context.Context, l *lake.Lake, m *lake.Manifest, f resultFile, s *ingest.IDSample) error {
	if ingested, err := ingestedBefore(ctx, l, m, f); err != nil || ingested {
		return err
	}
	read := fmt.Sprintf("its %d lines", s.Lines)
	if !s.Whole {
		read = fmt.Sprintf("its first %d lines", s.Lines)
	}
	return &errkind.UsageError{Msg: fmt.Sprintf("ingest %s: none of %s is a result line with an id in the format of the job's provider, %s (is it the job's input, or another provider's file?); every line would be quarantined and the job's records counted missing. Nothing was written; --force ingests it into this job anyway",
		s.File, read, m.Provider)}
}

// ingestedBefore reports whether the file f was ingested into the job
// before.
func ingestedBefore(ctx context.Context, l *lake.Lake, m *lake.Manifest, f resultFile) (bool, error) {
	job, _ := lake.ParseDigest(m.JobKey)
	raw, _, err := lake.HashFile(f.path)
	if err != nil {
		return false, &errkind.UsageError{Msg: fmt.Sprintf("ingest: %v", err)}
	}
	return l.Exists(ctx, lake.IngestKey(job, f.channel, raw))
}

// checkSample refuses one file's sample, own of whose lines carry ids of the
// job, unless that is at least minMatch of them. A file already ingested
// into the job passes: ingesting it again writes nothing.
func checkSample(ctx context.Context, g *globals, l *lake.Lake, m *lake.Manifest, f resultFile, s *ingest.IDSample, own int64, minMatch float64) error {
	if float64(own) >= minMatch*float64(len(s.IDs)) {
		return nil
	}
	if ingested, err := ingestedBefore(ctx, l, m, f); err != nil || ingested {
		return err
	}
	read := fmt.Sprintf("its %d lines with an id", len(s.IDs))
	if !s.Whole {
		read = fmt.Sprintf("the %d lines with an id among its first %d", len(s.IDs), s.Lines)
	}
	msg := fmt.Sprintf("ingest %s: only %d of %s carry an id of job %s (--min-match %g wants at least %d)",
		s.File, own, read, m.JobKey, minMatch, int64(math.Ceil(minMatch*float64(len(s.IDs)))))
	// A DuckDB session only for a refused file: the search reads other jobs'
	// expected files.
	e, err := reconcile.OpenEngine(l, g.engineOptions())
	if err != nil {
		return err
	}
	defer e.Close()
	likely, err := e.LikelyJob(ctx, m, s.IDs)
	if err != nil {
		return err
	}
	switch {
	case likely.JobKey != "":
		msg += fmt.Sprintf("; %d of them are ids of job %s (tenant %s): is this that job's file? Then run ingest --job %s",
			likely.Lines, likely.JobKey, likely.Tenant, likely.JobKey)
	case likely.Bounded:
		msg += fmt.Sprintf("; none is an id of the %d other jobs searched (the newest; the lake has more)", likely.Searched)
	case likely.Searched == 0:
		msg += "; the lake has no other job to compare with"
	default:
		msg += fmt.Sprintf("; none is an id of the lake's %d other job(s) either", likely.Searched)
	}
	return &errkind.UsageError{Msg: msg + ". Nothing was written; --force ingests it into this job anyway"}
}

// checkBedrockSummary archives a manifest.json.out content-addressed and
// compares its counts with what the output and error files' lines add up to.
func checkBedrockSummary(ctx context.Context, l *lake.Lake, m *lake.Manifest, path, output, errs, providerJobID string, expected int64) (*ingest.SummaryCheck, error) {
	if m.Provider != "bedrock" {
		return nil, &errkind.UsageError{Msg: "ingest --summary: only Bedrock jobs have a manifest.json.out; this job is " + m.Provider}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &errkind.UsageError{Msg: "ingest --summary: " + err.Error()}
	}
	// Archived with an ingest record (channel summary), so reconcile reports
	// the summary's token totals beside the lines' (provider_totals).
	if err := ingest.RecordSummary(ctx, l, m, filepath.Base(path), providerJobID, data, time.Now()); err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range []string{output, errs} {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return ingest.CheckBedrockSummary(ctx, l, filepath.Base(path), data, paths, expected)
}
