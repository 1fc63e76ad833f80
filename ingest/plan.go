package ingest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lake/failpoint"
	"github.com/batchlake/batchlake/lake/sha256x2"
)

// PlanOptions are the settings of one plan.
type PlanOptions struct {
	// KeyOnly reads the input and returns the job key it plans, writing
	// nothing (retry asks whether a child of these records exists).
	KeyOnly             bool
	Provider            string
	Input               string // path of the provider-format input JSONL
	Tenant              string
	PromptVersion       string
	SourceVersion       string
	DatasetVersion      string
	KeyField            string
	Model               string // the job's model where lines name none (Bedrock, Gemini: --model)
	ShardMaxRecords     int
	ShardMaxBytes       int64
	SubmittedBy         string
	CostCenter          string
	Retention           string
	OutputSchemaVersion string
	TmpDir              string
	Now                 func() time.Time
	// Progress, if set, is told the bytes of the input read so far.
	Progress Progress
	// MemoryLimit, if set, is told the soft limit on Go memory, in bytes,
	// the plan wants while it reads and sorts: it sets the process's limit
	// (debug.SetMemoryLimit), which is the caller's to own and to restore.
	MemoryLimit func(bytes int64)

	// Child jobs (retry): identities come from the parent's lineage, keyed by
	// the new custom id, instead of from the lines.
	Lineage      map[string]Lineage
	Attempt      int
	ParentJobKey string
	// Translated says the child's requests were translated from the
	// parent's provider (retry --provider): a record keeps the record id
	// of its lineage, which is defined over the parent's request, instead
	// of one computed from the translated line. ParentProvider and
	// ParentModel, recorded in the manifest, say what it was translated from.
	Translated     bool
	ParentProvider string
	ParentModel    string
	// OutputSchema is the lake object key of the output contract (a JSON
	// Schema) every answer of the job is checked against, "" for none; it is
	// part of the job key.
	OutputSchema string
	// NotBefore, if set, is recorded in the manifest: submit refuses the
	// job before it (a retry's not-before window). Not part of the job key.
	NotBefore *time.Time
	// Estimate sets the token estimate recorded in the manifest and the
	// expected rows.
	Estimate EstimateOptions

	// MinRecords is the fewest records one shard may hold, 0 for no
	// minimum: a provider fails a smaller batch job (Bedrock's per-model
	// quota, DefaultMinRecords). With a minimum, plan balances the records
	// over the fewest shards the limits allow instead of filling each in
	// turn, so no shard is a small remainder.
	MinRecords int
	// BelowMin is what plan does when the input, or a shard the byte limit
	// cut, holds fewer than MinRecords: BelowMinRefuse ("" too),
	// BelowMinAllow or BelowMinHold.
	BelowMin string

	// RunRecords bounds the records plan holds in memory while it sorts
	// them (0: 1<<18, about 50 MB); the others wait in sorted runs, encoded,
	// in memory up to 128 MiB of them and in run files in TmpDir beyond. A
	// retry job's records stay in memory, as its lineage does.
	RunRecords int
	// RunBytes bounds the input lines plan carries in memory through that
	// sort (0: 32 MiB): the lines of records that arrive out of key order.
	RunBytes int

	// SplitMinRecords is the fewest records for which plan splits the
	// expected table (and ingest the attempts tables) by partition, into
	// lake.SplitBuckets files (0: DefaultSplitMinRecords; negative: never).
	SplitMinRecords int64

	// runMemory bounds the bytes of sorted runs held in memory (0:
	// memRunBudget; negative: none, every run in a file).
	runMemory int64

	// reread makes plan write the shards the plain way, every line read
	// again from the input: no line carried through the sort, no shard
	// written while reading (the reference the tests hold those to).
	reread bool
	// noEarly makes plan keep every record in sorted runs and write the
	// expected rows from them, even of an input in key order (the
	// reference earlyExpected is held to).
	noEarly bool
	// wroteEarly, if set, is called when the expected rows written while
	// reading are stored.
	wroteEarly func()
	// reads, if set, is told how the shards were written: while reading
	// (speculated), and how many lines were carried, and read again
	// forward and backward.
	reads func(speculated bool, carried, forward, backward int)
}

// What plan does with records below the minimum (PlanOptions.BelowMin).
const (
	// BelowMinRefuse fails the plan with an errkind.UsageError naming the minimum.
	BelowMinRefuse = "refuse"
	// BelowMinAllow plans anyway: for an account or model whose quota is
	// lower than MinRecords says.
	BelowMinAllow = "allow"
	// BelowMinHold plans the job and marks its manifest held with the
	// reason: submit refuses to send it as a batch (a retry child too
	// small for the provider).
	BelowMinHold = "hold"
)

// Lineage is a retried record's identity, carried from its parent job.
type Lineage struct {
	RecordID      string `json:"record_id"`
	BusinessKey   string `json:"business_key"`
	CustomID      string `json:"custom_id"`
	Attempt       int    `json:"attempt"`
	ParentJobKey  string `json:"parent_job_key"`
	ParentShardID string `json:"parent_shard_id"`
	RetryReason   string `json:"retry_reason"`
}

// ShardSummary is one shard in a plan result.
type ShardSummary struct {
	ShardID string `json:"shard_id"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
}

// PlanResult is what plan prints.
type PlanResult struct {
	JobKey   string         `json:"job_key"`
	Manifest string         `json:"manifest"`
	Records  int64          `json:"records"`
	Shards   []ShardSummary `json:"shards"`
	Created  bool           `json:"created"`
	Message  string         `json:"message"`
	// MinRecords is the plan's minimum records per shard (0: none).
	MinRecords int `json:"min_records,omitempty"`
	// Held, if set, says why the job must not be submitted as a batch.
	Held string `json:"held,omitempty"`
}

type planRec struct {
	key, customID string
	line, off     int64
	n             int32
	out           int32 // the line's output token limit, -1 if none (lineOutputLimit)
	req, rid, cfg lake.Digest
	lin           *Lineage
	data          []byte // the line itself, when carried (see planRuns)
}

func (o *PlanOptions) check() error {
	var miss []string
	if o.Input == "" {
		miss = append(miss, "--input")
	}
	if o.Tenant == "" {
		miss = append(miss, "--tenant")
	}
	if o.PromptVersion == "" {
		miss = append(miss, "--prompt-version")
	}
	if len(miss) > 0 {
		return &errkind.UsageError{Msg: "plan: missing required flag(s) " + strings.Join(miss, ", ")}
	}
	if err := lake.ValidTenant(o.Tenant); err != nil {
		return &errkind.UsageError{Msg: "plan: --" + err.Error()}
	}
	if o.ShardMaxRecords < 0 || o.ShardMaxBytes < 0 {
		return &errkind.UsageError{Msg: "plan: shard limits must be positive"}
	}
	if o.MinRecords < 0 {
		return &errkind.UsageError{Msg: "plan: --min-records must not be negative"}
	}
	if o.Estimate.InputTokens < 0 || o.Estimate.OutputTokens < 0 {
		return &errkind.UsageError{Msg: "plan: --est-input-tokens and --est-output-tokens must not be negative"}
	}
	switch o.BelowMin {
	case "", BelowMinRefuse, BelowMinAllow, BelowMinHold:
	default:
		return &errkind.UsageError{Msg: fmt.Sprintf("plan: --below-min %q: want refuse or allow", o.BelowMin)}
	}
	return nil
}

// Plan validates an input file, computes identities and writes the job's
// shards, expected rows, manifest and first ledger events. Planning the same
// records with the same settings again writes nothing and returns Created=false.
func Plan(ctx context.Context, l *lake.Lake, o PlanOptions) (*PlanResult, error) {
	f, err := o.resolve()
	if err != nil {
		return nil, err
	}
	if err := CheckPlainFile(o.Input); err != nil {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("plan --input %s: %v", o.Input, err)}
	}
	name := filepath.Base(o.Input)
	input, err := providerInput(f, o.Input, o.TmpDir)
	if err != nil {
		return nil, err
	}
	if input != o.Input {
		defer os.Remove(input)
	}
	file, err := os.Open(input)
	if err != nil {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("plan: %v", err)}
	}
	defer file.Close()
	// A plan appends its shards' first events: the store's conditional-write
	// check runs while the input is read and the shards are stored.
	if !o.KeyOnly {
		l.ProbeAhead(ctx)
	}

	in, err := readInput(ctx, l, f, file, name, &o, true)
	if errors.Is(err, errRestart) {
		if _, err = file.Seek(0, io.SeekStart); err == nil {
			in, err = readInput(ctx, l, f, file, name, &o, false)
		}
	}
	if err != nil {
		return nil, err
	}
	defer in.close()
	id, err := identify(in, name, &o, f)
	if err != nil {
		return nil, err
	}
	res := &PlanResult{JobKey: id.key.Hex(), Manifest: lake.ManifestKey(id.key), Records: in.n}
	if o.KeyOnly {
		return res, nil
	}
	if m, err := l.GetManifest(ctx, id.key); err == nil {
		res.Shards, res.MinRecords, res.Held = summaries(m), m.MinRecords, m.Held
		res.Message = "already planned: same records and settings, nothing new written"
		return res, ensureValidated(ctx, l, m)
	} else if !errors.Is(err, lake.ErrNotFound) {
		return nil, err
	}
	cuts, held, err := balance(in, &o, name, f.Name())
	if err != nil {
		return nil, err
	}
	m, err := commitPlan(ctx, l, file, in, id.key, newManifest(&o, id, in, name, held), o, cuts)
	if err != nil {
		return nil, err
	}
	res.Shards, res.Created, res.MinRecords, res.Held = summaries(m), true, m.MinRecords, m.Held
	res.Message = fmt.Sprintf("planned %d records in %d shard(s)", in.n, len(m.Shards))
	if m.Held != "" {
		res.Message += "; held, not to be submitted as a batch: " + m.Held
	}
	return res, nil
}

// resolve checks the options and fills in the defaults: the provider's
// limits, its key field, the first attempt, the clock and the sort's bounds.
// It returns the provider's format.
func (o *PlanOptions) resolve() (Format, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	f, err := FormatFor(o.Provider)
	if err != nil {
		return nil, err
	}
	maxRec, maxBytes := f.Limits()
	if o.ShardMaxRecords == 0 || o.ShardMaxRecords > maxRec {
		o.ShardMaxRecords = maxRec
	}
	if o.ShardMaxBytes == 0 || o.ShardMaxBytes > maxBytes {
		o.ShardMaxBytes = maxBytes
	}
	if o.KeyField == "" {
		o.KeyField = f.DefaultKeyField()
	}
	if o.Attempt == 0 {
		o.Attempt = 1
	}
	if o.Now == nil {
		o.Now = func() time.Time { return time.Now().UTC() }
	}
	if o.RunRecords <= 0 {
		o.RunRecords = defaultRunRecords
	}
	if o.RunBytes <= 0 {
		o.RunBytes = defaultRunBytes
	}
	return f, nil
}

// providerInput is the path of the JSONL file plan reads for input: the
// file itself, or for Gemini an inline-requests document converted to its
// {key, request} lines in a temporary file in tmpDir (the caller removes it).
func providerInput(f Format, input, tmpDir string) (string, error) {
	if f.Name() != "gemini" {
		return input, nil
	}
	conv, err := geminiInlineInput(input, tmpDir)
	if err != nil || conv == "" {
		return input, err
	}
	return conv, nil
}

// planInput is what plan's first pass over the input found.
type planInput struct {
	// recs are the valid records: at most one run of them in memory, the
	// rest in sorted run files (see planRuns); sorted by business key and
	// line once identify has run.
	recs *planRuns
	// n is how many valid records were read.
	n int64
	// keys is the least and greatest business key of the valid records
	// (the manifest's business_keys), set once n > 0.
	keys lake.KeyRange
	// early, if not nil, holds the expected rows, written while reading
	// (recs then holds no record).
	early *earlyExpected
	// spec are the shards written while reading, nil unless every record
	// arrived in key order (and the plan may still succeed).
	spec            *specShards
	bad             InputErrors
	model, endpoint string      // the file's one model and endpoint
	sameKeys        bool        // every business key is its custom id (the default --key-field)
	fileDigest      lake.Digest // SHA-256 of the input file's bytes
	// hashed: every record's key so far was greater than the one before
	// (an input in key order: blgen's, a sorted export's) and was its custom
	// id, and keysHash and cfgs hold the records' identity, hashed as they
	// were read in the order identify would hash them after the sort.
	hashed   bool
	keysHash *lake.FieldHasher
	cfgs     map[lake.Digest]bool
}

// close removes the records' run files and the shards not stored.
func (in *planInput) close() {
	in.recs.close()
	in.spec.abort()
	in.early.abort()
}

// readInput is plan's first pass: it validates every line of file and
// computes its identity. Lines that fail are in the result's bad, not an
// error; close the result when done. With early, an input in key order has
// its expected rows written as it is read (earlyExpected); any other ends
// the read with errRestart, for a read without.
func readInput(ctx context.Context, l *lake.Lake, f Format, file *os.File, name string, o *PlanOptions, early bool) (*planInput, error) {
	var modelLine int64
	// The file's digest is taken in the records' goroutine, a chunk at a
	// time once its lines are in the shards, beside the shards' own digests
	// (hashChunk): the two streams hashed together take little more time
	// than one.
	fileHash := sha256x2.New()
	sawChunk := false
	type parsed struct {
		rec InputRecord
		err *errkind.InputError
		rid lake.Digest // the record id, hashed on the parsing cores
		lin *Lineage
		out int32 // lineOutputLimit, found on the parsing cores too
		// Where the format leaves them (laterDigester), the request and
		// record id digests are hashed two lines at a time once the chunk
		// is parsed: call is the request, ridKey the key of a record id
		// still to hash.
		call   lake.Call
		ridKey string
		ridDue bool
	}
	runMax := o.RunRecords
	if o.Lineage != nil {
		runMax = math.MaxInt // retry jobs: the lineage is in memory anyway
	}
	est := estimateLines(file)
	recs := newPlanRuns(byKeyLine, runMax, o.RunBytes, est, o.TmpDir)
	switch {
	case o.runMemory < 0:
		recs.memBudget = 0
	case o.runMemory > 0:
		recs.memBudget = o.runMemory
	}
	in := &planInput{recs: recs, sameKeys: true,
		hashed: true, keysHash: lake.NewFieldHasher(), cfgs: map[lake.Digest]bool{}}
	// Unless every record arrives in key order (spec, below), those that do
	// are re-read from the input when the shards are written, in one forward
	// sweep; the others carry their lines through the sort (see planRuns).
	// lastKey is the greatest key not carried (lines only grow, so a key
	// equal to it is in order).
	var lastKey string
	// While every record's key is greater than the one before (an input
	// sorted by business key, as a retry job's is: reconcile writes it in
	// the parent's shard order), its line goes straight into the shards: the
	// shards are then written in this pass and the input is read once.
	if !o.reread {
		in.spec = &specShards{maxRecords: int64(o.ShardMaxRecords), maxBytes: o.ShardMaxBytes, tmpDir: o.TmpDir}
	}
	if early {
		var err error
		if in.early, err = newEarlyExpected(ctx, l, o); err != nil {
			return nil, err
		}
	}
	// A soft memory limit keeps the heap near what one run of records needs
	// (about 200 bytes each) instead of letting garbage double it (GOGC=100),
	// which a busy machine's lagging GC turns into 4x.
	// Carried lines (below) raise it by what a run may hold of them, and the
	// sorted runs kept in memory by what they may take (about 90 bytes a
	// record, up to their budget).
	var memLimit int64
	if o.MemoryLimit != nil {
		memLimit = int64(min(est, runMax))*200 + min(recs.memBudget, int64(est)*128) + 192<<20
		o.MemoryLimit(memLimit)
	}
	bad, recs := &in.bad, in.recs
	var cfgHex hexMemo
	later, _ := f.(laterDigester)
	err := parallelLines(ctx, withProgress(bufio.NewReaderSize(file, 1<<20), o.Progress), func(ln Line, p *parsed) {
		if later != nil {
			p.rec, p.call, p.err = later.parseInputLater(ln.Bytes, o.KeyField)
		} else {
			p.rec, p.err = f.ParseInput(ln.Bytes, o.KeyField)
		}
		if p.err == nil {
			p.err = notUTF8(ln.Bytes)
		}
		if p.err == nil {
			p.ridKey, p.ridDue = p.rec.BusinessKey, true
			if o.Lineage != nil {
				if lin, ok := o.Lineage[p.rec.CustomID]; ok {
					p.lin, p.ridKey = &lin, lin.BusinessKey
				}
			}
			if o.Translated && p.lin != nil {
				if d, err := lake.ParseDigest(p.lin.RecordID); err == nil {
					p.rid, p.ridDue = d, false
				}
			}
			p.out = p.rec.limit
			if !p.rec.limitSet {
				p.out = lineOutputLimit(ln.Bytes)
			}
		}
	}, func(ps []parsed) {
		// Two lines' digests at a time: the request digests, then the
		// record ids (messages of like lengths, so that pairs end together).
		inPairs(ps, func(p *parsed) bool { return p.call.Body != nil }, func(a, b *parsed) {
			a.rec.RequestDigest, b.rec.RequestDigest = lake.HashCall2(a.call, b.call)
		}, func(a *parsed) {
			a.rec.RequestDigest = lake.HashCall(a.call.Method, a.call.URL, a.call.Body)
		})
		var fa, fb [5]string
		ridFields := func(dst *[5]string, p *parsed) []string {
			*dst = [5]string{o.Tenant, p.ridKey, o.SourceVersion, o.PromptVersion, cfgHex.of(p.rec.ConfigHash)}
			return dst[:]
		}
		inPairs(ps, func(p *parsed) bool { return p.ridDue }, func(a, b *parsed) {
			a.rid, b.rid = lake.HashFields2(ridFields(&fa, a), ridFields(&fb, b))
		}, func(a *parsed) {
			a.rid = lake.HashFields(ridFields(&fa, a)...)
		})
		for i := range ps {
			ps[i].call, ps[i].ridDue = lake.Call{}, false // the chunk's bytes are let go
		}
	}, func(ln Line, p *parsed) error {
		if in.early != nil && (p.err != nil || bad.Total > 0) {
			return errRestart
		}
		if p.err != nil {
			p.err.File, p.err.Line = name, ln.No
			bad.add(p.err)
			return nil
		}
		r := p.rec
		if r.Model == "" && o.Model == "" {
			bad.add(&errkind.InputError{File: name, Line: ln.No, Field: "model", Msg: "the line names no model: pass --model"})
			return nil
		}
		if r.Model == "" { // Bedrock and Gemini lines name no model: the job's is part of their config
			r.Model, r.ConfigHash = o.Model, lake.HashFields(r.ConfigHash.Hex(), o.Model)
		}
		if in.model == "" {
			in.model, in.endpoint, modelLine = r.Model, r.Endpoint, ln.No
		} else if r.Model != in.model {
			bad.add(&errkind.InputError{File: name, Line: ln.No, Field: "body.model", Msg: fmt.Sprintf("%q, but line %d uses %q: one model per file", r.Model, modelLine, in.model)})
			return nil
		} else if r.Endpoint != in.endpoint {
			bad.add(&errkind.InputError{File: name, Line: ln.No, Field: "url", Msg: fmt.Sprintf("%q, but line %d uses %q: one endpoint per file", r.Endpoint, modelLine, in.endpoint)})
			return nil
		}
		pr := planRec{key: r.BusinessKey, customID: r.CustomID, line: ln.No, off: ln.Offset, n: int32(len(ln.Bytes)), out: p.out, req: r.RequestDigest, cfg: r.ConfigHash}
		if o.Lineage != nil {
			if p.lin == nil {
				bad.add(&errkind.InputError{File: name, Line: ln.No, Field: "custom_id", Msg: fmt.Sprintf("%q has no lineage record", r.CustomID)})
				return nil
			}
			pr.key, pr.lin = p.lin.BusinessKey, p.lin
		}
		pr.rid = p.rid
		if pr.lin != nil && pr.rid.Hex() != pr.lin.RecordID {
			bad.add(&errkind.InputError{File: name, Line: ln.No, Field: "body", Msg: fmt.Sprintf("record id %s differs from the parent's %s: the request changed", pr.rid.Hex()[:12], pr.lin.RecordID[:12])})
			return nil
		}
		in.sameKeys = in.sameKeys && pr.key == pr.customID
		switch {
		case in.n == 0:
			in.keys = lake.KeyRange{First: pr.key, Last: pr.key}
		case pr.key < in.keys.First:
			in.keys.First = pr.key
		case pr.key > in.keys.Last:
			in.keys.Last = pr.key
		}
		// While the keys only grow, none was carried, so lastKey is the key
		// of the record before.
		inOrder := in.n == 0 || pr.key > lastKey
		if in.hashed = in.hashed && in.sameKeys && inOrder; in.hashed {
			in.keysHash.AddString(pr.key).AddDigest(pr.req)
			in.cfgs[pr.cfg] = true
		}
		if in.spec != nil {
			ok := bad.Total == 0 && inOrder
			if ok {
				var err error
				if ok, err = in.spec.add(ln.Bytes, ln.Offset); err != nil {
					return err
				}
			}
			if !ok { // out of order, a line over the shard limit, or a plan that fails anyway
				in.spec.abort()
				in.spec = nil
			}
		}
		if in.early != nil {
			if !in.hashed || in.spec == nil || bad.Total > 0 {
				return errRestart
			}
			lastKey = pr.key
			in.n++
			return in.early.add(&pr, in.spec.ws[len(in.spec.ws)-1])
		}
		in.n++
		var carry []byte
		if !o.reread && pr.lin == nil && pr.key < lastKey { // lineage stays in memory: nothing to carry
			carry = ln.Bytes
			if memLimit > 0 {
				o.MemoryLimit(memLimit + int64(o.RunBytes))
				memLimit = 0
			}
		} else {
			lastKey = pr.key
		}
		return recs.add(pr, carry)
	}, func(c chunk) error {
		if c.seq == 0 && c.offset == int64(len(utf8BOM)) {
			fileHash.Write(utf8BOM) // readChunks skips it
		}
		sawChunk = true
		var runs []shardRun
		if in.spec != nil {
			runs, in.spec.runs = in.spec.runs, in.spec.runs[:0]
		}
		hashChunk(fileHash, c.data, c.offset, runs)
		return nil
	})
	if err == nil && !sawChunk {
		// No chunk: an empty file, or one holding only a BOM, which
		// readChunks skipped.
		var bom [3]byte
		if n, _ := file.ReadAt(bom[:], 0); n == len(bom) && bom == [3]byte(utf8BOM) {
			fileHash.Write(bom[:])
		}
	}
	if err != nil {
		in.close()
		if errors.Is(err, ErrLineTooLong) {
			return nil, &errkind.InputError{File: name, Msg: err.Error()}
		}
		return nil, fmt.Errorf("plan %s: %w", name, err)
	}
	if in.n == 0 && bad.Total == 0 {
		bad.add(&errkind.InputError{File: name, Msg: "no requests in file"})
	}
	in.fileDigest = fileHash.Sum256()
	return in, nil
}

// planJob is a job's identity: its key and what the key is made of.
type planJob struct {
	key       lake.Digest
	inputHash lake.Digest // the records in business-key order
	cfgs      []string    // the records' model config hashes, sorted
	genCfg    string      // the one config hash, or the hash of them all
	provider  string      // the provider the manifest names
}

// identify sorts the records by business key, reports duplicate ids and
// keys (with every other bad line: an error of type *InputErrors) and
// computes the job's identity from the records, hashed in the same pass
// that finds duplicates.
//
// An input read in key order with the custom ids as keys was hashed while it
// was read (readInput): its keys, each greater than the one before, are
// unique, and so are its custom ids, and the records are not passed over
// again.
func identify(in *planInput, name string, o *PlanOptions, f Format) (*planJob, error) {
	if err := in.recs.sort(); err != nil {
		return nil, err
	}
	h, cfgs := in.keysHash, in.cfgs
	if !in.hashed || in.bad.Total > 0 {
		h, cfgs = lake.NewFieldHasher(), map[lake.Digest]bool{}
		if err := checkUnique(in.recs, in.sameKeys, name, o.TmpDir, &in.bad, func(r *planRec) {
			h.AddString(r.key).AddDigest(r.req)
			cfgs[r.cfg] = true
		}); err != nil {
			return nil, err
		}
	}
	if in.bad.Total > 0 {
		return nil, &in.bad
	}
	id := &planJob{inputHash: h.Sum()}
	for c := range cfgs {
		id.cfgs = append(id.cfgs, c.Hex())
	}
	slices.Sort(id.cfgs)
	id.genCfg = id.cfgs[0]
	if len(id.cfgs) > 1 {
		id.genCfg = lake.HashFields(id.cfgs...).Hex()
	}
	var dataset string
	dataset, id.provider = jobDataset(o, f)
	id.key = lake.HashFields(o.Tenant, dataset, id.inputHash.Hex(), in.model, o.PromptVersion, id.genCfg)
	return id, nil
}

// jobDataset is the dataset part of a job's key, and the provider its
// manifest names.
func jobDataset(o *PlanOptions, f Format) (dataset, provider string) {
	dataset, provider = o.DatasetVersion, f.Name()
	if o.ParentJobKey != "" {
		// A child job's records may equal another job's; its parent makes it distinct.
		dataset += "#retry-of=" + o.ParentJobKey
	}
	if o.OutputSchema != "" {
		// The same records held to another output contract are another job.
		dataset += "#output-schema=" + o.OutputSchema
	}
	if o.Provider == SimProvider {
		// The simulator speaks OpenAI's format, but a simulated job is never
		// the real job of the same records: it has a key of its own, and its
		// manifest says sim, so no step can mix simulated results into a job
		// planned for a real provider (or the other way round).
		provider = SimProvider
		dataset += "#provider=" + SimProvider
	}
	return dataset, provider
}

// balance cuts the records over shards of at least o.MinRecords each
// (shardCuts), nil cuts without a minimum (each shard is then filled in
// turn). held, if not "", is why the job is held (BelowMinHold). The shards
// written while reading were cut in turn, and are kept only if the balanced
// cut is the same.
func balance(in *planInput, o *PlanOptions, name, provider string) (cuts []int64, held string, err error) {
	if o.MinRecords <= 0 {
		return nil, "", nil
	}
	cuts, below, err := shardCuts(in.recs, int64(o.ShardMaxRecords), o.ShardMaxBytes, int64(o.MinRecords))
	if err != nil {
		return nil, "", err
	}
	if !in.spec.cutAs(cuts) {
		in.spec.abort()
		in.spec = nil
	}
	if below == "" {
		return cuts, "", nil
	}
	switch o.BelowMin {
	case BelowMinAllow:
		return cuts, "", nil
	case BelowMinHold:
		return cuts, below, nil
	default:
		return nil, "", &errkind.UsageError{Msg: fmt.Sprintf("plan %s: %s (--min-records %d), and %s fails smaller batch jobs. Add records, or pass --below-min allow if your account's quota for this model is lower",
			name, below, o.MinRecords, provider)}
	}
}

// newManifest is the manifest of job id, before its shards are written.
func newManifest(o *PlanOptions, id *planJob, in *planInput, name, held string) *lake.Manifest {
	belowMin := ""
	if o.BelowMin == BelowMinAllow {
		belowMin = BelowMinAllow
	}
	return &lake.Manifest{
		Version: lake.ManifestVersion, JobKey: id.key.Hex(), Tenant: o.Tenant, Provider: id.provider, Model: in.model,
		Endpoint: in.endpoint, PromptVersion: o.PromptVersion, SourceVersion: o.SourceVersion, DatasetVersion: o.DatasetVersion,
		KeyField: o.KeyField, GenerationConfigHash: id.genCfg, ModelConfigHashes: id.cfgs, InputSHA256: id.inputHash.Hex(),
		InputFileSHA256: in.fileDigest.Hex(), InputFileName: name, ExpectedRecords: in.n, Attempt: o.Attempt,
		ParentJobKey: o.ParentJobKey, CreatedAt: o.Now(), SubmittedBy: o.SubmittedBy, CostCenter: o.CostCenter,
		Retention: o.Retention, OutputSchemaVersion: o.OutputSchemaVersion, ShardMaxRecords: o.ShardMaxRecords, ShardMaxBytes: o.ShardMaxBytes,
		NotBefore: o.NotBefore, MinRecords: o.MinRecords, BelowMin: belowMin, Held: held,
		ParentProvider: o.ParentProvider, ParentModel: o.ParentModel, OutputSchema: o.OutputSchema, Translated: o.Translated && o.Lineage != nil,
		BusinessKeys: keyRange(in),
	}
}

// keyRange is the manifest's business_keys: nil for a job without records.
func keyRange(in *planInput) *lake.KeyRange {
	if in.n == 0 {
		return nil
	}
	k := in.keys
	return &k
}

// commitPlan writes the shards and expected rows of m, then m itself (the
// plan's commit marker), then the shards' first ledger events. It returns
// the manifest stored: m, or a concurrent plan's of the same job.
func commitPlan(ctx context.Context, l *lake.Lake, file *os.File, in *planInput, job lake.Digest, m *lake.Manifest, o PlanOptions, cuts []int64) (*lake.Manifest, error) {
	var err error
	if in.early != nil {
		err = in.early.commit(ctx, m, in.spec.finish())
	} else {
		err = writeShards(ctx, l, file, in.recs, m, o, cuts, in.spec.finish())
	}
	if err != nil {
		return nil, err
	}
	if _, err := l.PutJSON(ctx, lake.ManifestKey(job), lake.FormatManifest, m); err != nil {
		if !errors.Is(err, lake.ErrCorrupt) {
			return nil, err
		}
		// A concurrent plan of this job committed first (its manifest differs
		// in created_at): adopt it, as a later plan would.
		if m, err = l.GetManifest(ctx, job); err != nil {
			return nil, err
		}
	}
	failpoint.Hit(failpoint.PlanAfterManifest)
	if err := ensureValidated(ctx, l, m); err != nil {
		return nil, err
	}
	return m, nil
}

func summaries(m *lake.Manifest) []ShardSummary {
	out := make([]ShardSummary, len(m.Shards))
	for i, s := range m.Shards {
		out[i] = ShardSummary{ShardID: s.ShardID, Records: s.Records, Bytes: s.Bytes}
	}
	return out
}

// estimateLines guesses the number of lines of f from its size and the
// length of the lines in its first 256 KiB, with 5 % to spare.
func estimateLines(f *os.File) int {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0
	}
	head := make([]byte, 256<<10)
	n, _ := f.ReadAt(head, 0)
	lines := bytes.Count(head[:n], []byte{'\n'})
	if lines == 0 {
		return 1
	}
	est := st.Size() / int64(n) * int64(lines)
	return int(min(est+est/20+16, 1<<28))
}

// checkUnique reports duplicate custom ids, then duplicate business keys,
// naming both lines, and calls each for every record in business-key order.
// recs is sorted by (key, line); where the keys are the custom ids one pass
// serves both checks, otherwise the custom ids get a sort of their own.
func checkUnique(recs *planRuns, sameKeys bool, name, tmp string, bad *InputErrors, each func(*planRec)) error {
	dups := func(field string, get func(*planRec) string, into *InputErrors) func(*planRec) {
		var prev string
		var prevLine int64
		first := true
		return func(r *planRec) {
			k := get(r)
			if !first && k == prev {
				into.add(&errkind.InputError{File: name, Line: r.line, Field: field, Msg: fmt.Sprintf("duplicate %q, first on line %d", k, prevLine)})
			}
			first, prev, prevLine = false, k, r.line
		}
	}
	key := func(r *planRec) string { return r.key }
	if sameKeys {
		before := bad.Total
		ids := dups("custom_id", key, bad)
		if err := recs.each(func(r *planRec) error { ids(r); each(r); return nil }); err != nil {
			return err
		}
		if bad.Total == before {
			return nil // keys are the custom ids, found unique
		}
		keys := dups("business key", key, bad)
		return recs.each(func(r *planRec) error { keys(r); return nil })
	}
	byID := newPlanRuns(byCustomIDLine, recs.bound, recs.boundBytes, int(recs.n), tmp)
	byID.memBudget = max(0, recs.memBudget-recs.memBytes) // both are held at once
	defer byID.close()
	var keyErrs InputErrors
	keys := dups("business key", key, &keyErrs)
	if err := recs.each(func(r *planRec) error {
		keys(r)
		each(r)
		c := *r
		return byID.add(c, nil)
	}); err != nil {
		return err
	}
	if err := byID.sort(); err != nil {
		return err
	}
	ids := dups("custom_id", func(r *planRec) string { return r.customID }, bad)
	if err := byID.each(func(r *planRec) error { ids(r); return nil }); err != nil {
		return err
	}
	// Custom-id problems are listed first, as they are checked first.
	for _, e := range keyErrs.Errs {
		bad.add(e)
	}
	bad.Total += keyErrs.Total - len(keyErrs.Errs)
	return nil
}

// shardCuts balances a plan's records (in key order) over the fewest shards
// its limits allow, and returns the records of each shard: k shards of n/k
// records, the first n%k one more, unless the byte limit ends one earlier —
// then k is that many shards and the records are spread again. below says
// which shard (or the input) holds fewer than minRecords, "" if none does.
func shardCuts(recs *planRuns, maxRecords, maxBytes, minRecords int64) (cuts []int64, below string, err error) {
	n := recs.n
	k := max(1, (n+maxRecords-1)/maxRecords)
	for {
		base, extra := n/k, n%k
		cuts = cuts[:0]
		var records, bytes int64
		err := recs.each(func(r *planRec) error {
			size := int64(r.n) + 1
			limit := base
			if int64(len(cuts)) < extra {
				limit++
			}
			if records > 0 && shardFull(records, bytes, size, limit, maxBytes) {
				cuts = append(cuts, records)
				records, bytes = 0, 0
			}
			records++
			bytes += size
			return nil
		})
		if err != nil {
			return nil, "", err
		}
		if records > 0 {
			cuts = append(cuts, records)
		}
		if int64(len(cuts)) <= k {
			break
		}
		k = int64(len(cuts))
	}
	for i, c := range cuts {
		switch {
		case c >= minRecords:
		case len(cuts) == 1:
			return cuts, fmt.Sprintf("%d records, below the minimum of %d per batch job", c, minRecords), nil
		default:
			return cuts, fmt.Sprintf("shard part-%05d holds %d records (the byte limit cut it), below the minimum of %d per batch job", i, c, minRecords), nil
		}
	}
	return cuts, "", nil
}

// writeShards cuts the records (in key order) into shards within the limits,
// stores each shard file content-addressed and writes the expected rows.
// cuts, if not nil, are the records of each shard (shardCuts); otherwise
// each shard is filled in turn.
// written, if not nil, are the shards plan wrote while reading an input in
// key order (specShards), cut the same way: they are checked and stored, and
// the input is not read again.
func writeShards(ctx context.Context, l *lake.Lake, src *os.File, recs *planRuns, m *lake.Manifest, o PlanOptions, cuts []int64, written []*shardWriter) error {
	job, _ := lake.ParseDigest(m.JobKey)
	// A large job's expected rows are split by partition, so that
	// reconcile --partition reads only its share of them.
	var (
		ew  *lake.TableWriter[lake.ExpectedRow]
		err error
	)
	split := o.splitMin() > 0 && recs.n >= o.splitMin()
	if split {
		ew = lake.NewSplitTableWriter(l, o.TmpDir, "expected", m.Tenant, job, lake.SplitBuckets,
			func(r *lake.ExpectedRow) string { return r.CustomID })
	} else if ew, err = lake.NewTableWriter[lake.ExpectedRow](l, o.TmpDir, "expected", m.Tenant, job); err != nil {
		return err
	}
	defer ew.Abort()
	// The files are laid out as those of the rows written while reading
	// (earlyExpected): a table earlyExpected starts before the job key is
	// known has it filled in, so the same rows give the same files either way.
	jobKey := m.JobKey
	if split || o.splitMin() == 0 {
		if err := ew.FillLater("job_key"); err != nil {
			return err
		}
		ew.Fill(job, m.JobKey)
		jobKey = ""
	}
	// The expected rows are encoded on another goroutine while this one
	// copies the lines into shards and hashes them: a steady stream, so two
	// batches of slack keep the writer busy.
	rows := lake.NewTablePipe(ctx, ew, 2)
	var cfgHex hexMemo
	var hexes hexArena
	var (
		sw             *shardWriter
		records, bytes int64 // cut into sw so far
		cut            int   // shards cut before sw
		stores         = lake.NewStores[lake.ManifestShard](ctx, l)
		buf            []byte
		flushed        = func() error {
			if sw == nil {
				return nil
			}
			if sw.records != records || sw.bytes != bytes {
				return fmt.Errorf("plan: internal error: shard %s holds %d records (%d bytes), cut at %d (%d)", sw.id, sw.records, sw.bytes, records, bytes)
			}
			w := sw
			sw = nil
			cut++
			return stores.Go(func(ctx context.Context) (lake.ManifestShard, error) { return w.commit(ctx, l) })
		}
	)
	var opened []*shardWriter // removed at the end (a committed one is gone already)
	defer func() {
		for _, w := range opened {
			w.abort()
		}
	}()
	// A full shard is stored while the next is filled (lake.Stores); the
	// stores in flight end before the deferred aborts above remove files.
	defer func() { _, _ = stores.Wait() }()
	rd := &lineReader{f: src}
	carried := 0
	est := newEstimator(o.Estimate)
	each := recs.eachLine
	if written != nil {
		each = recs.each
	}
	err = each(func(r *planRec) error {
		var line []byte
		if written == nil {
			if line = r.data; line != nil {
				carried++
			} else {
				if cap(buf) < int(r.n) {
					buf = make([]byte, r.n)
				}
				buf = buf[:r.n]
				if err := rd.readAt(buf, r.off); err != nil {
					return fmt.Errorf("plan: re-read %s line %d: %w", src.Name(), r.line, err)
				}
				line = buf
			}
		}
		size := int64(r.n) + 1
		full := sw != nil && shardFull(records, bytes, size, int64(o.ShardMaxRecords), o.ShardMaxBytes)
		if sw != nil && cuts != nil {
			if cut >= len(cuts) {
				return fmt.Errorf("plan: internal error: more records than the %d shards cut hold", len(cuts))
			}
			full = records >= cuts[cut]
		}
		if full {
			if err := flushed(); err != nil {
				return err
			}
		}
		if sw == nil {
			if written != nil {
				if cut >= len(written) {
					return fmt.Errorf("plan: internal error: %d shards written, more cut", len(written))
				}
				sw = written[cut]
			} else {
				sw, err = newShardWriter(o.TmpDir, fmt.Sprintf("part-%05d", cut), nil)
				if err != nil {
					return err
				}
				opened = append(opened, sw)
			}
			records, bytes = 0, 0
		}
		if size > o.ShardMaxBytes {
			return &errkind.InputError{File: filepath.Base(src.Name()), Line: r.line, Msg: fmt.Sprintf("request is %d bytes, over the shard limit of %d", r.n, o.ShardMaxBytes)}
		}
		row := lake.ExpectedRow{
			JobKey: jobKey, Tenant: m.Tenant, ShardID: sw.id, ShardLine: records + 1, ShardOffset: bytes, RecordID: hexes.of(r.rid),
			BusinessKey: r.key, CustomID: r.customID, Attempt: int32(o.Attempt), ParentJobKey: o.ParentJobKey,
			RequestSHA256: hexes.of(r.req), ModelConfigHash: cfgHex.of(r.cfg), InputLine: r.line,
		}
		row.EstInputTokens, row.EstOutputTokens = est.add(int64(r.n), r.out)
		if r.lin != nil {
			row.ParentShardID, row.RetryReason = r.lin.ParentShardID, r.lin.RetryReason
			row.Attempt = int32(r.lin.Attempt)
		}
		if written == nil {
			if err := sw.add(line); err != nil {
				return err
			}
		}
		records++
		bytes += size
		return rows.Add(row)
	})
	if err == nil {
		err = flushed()
	}
	if err == nil {
		var shards []lake.ManifestShard
		shards, err = stores.Wait()
		m.Shards = append(m.Shards, shards...)
	}
	if err == nil && written != nil && len(m.Shards) != len(written) {
		err = fmt.Errorf("plan: internal error: %d shards written, %d cut", len(written), len(m.Shards))
	}
	if cerr := rows.Close(err); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if split {
		if m.ExpectedFiles, m.ExpectedBuckets, err = rows.CommitSplit(); err != nil {
			return err
		}
		m.ExpectedSplit = lake.SplitBuckets
	} else {
		key, err := rows.Commit()
		if err != nil {
			return err
		}
		m.ExpectedFiles = []string{key}
	}
	if o.reads != nil {
		o.reads(written != nil, carried, rd.forward, rd.backward)
	}
	failpoint.Hit(failpoint.PlanAfterExpected)
	m.Estimate = &est.sum
	return nil
}

// DefaultSplitMinRecords is the default of PlanOptions.SplitMinRecords: a
// job this large is worth reconciling in partitions, and each of its split
// files still holds thousands of rows.
const DefaultSplitMinRecords = 1 << 16

func (o *PlanOptions) splitMin() int64 {
	switch {
	case o.SplitMinRecords < 0:
		return 0
	case o.SplitMinRecords == 0:
		return DefaultSplitMinRecords
	}
	return o.SplitMinRecords
}

// shardFull says whether a shard of records and bytes so far must end before
// a line of size bytes (with its newline): the one cut of plan's shards.
func shardFull(records, bytes, size, maxRecords, maxBytes int64) bool {
	return records >= maxRecords || bytes+size > maxBytes
}

// specShards are the shards plan writes while it reads an input in key
// order, cut as writeShards cuts them. Each one but the last is closed (its
// buffer let go) until writeShards stores it.
type specShards struct {
	maxRecords, maxBytes int64
	tmpDir               string
	ws                   []*shardWriter
	// runs are the lines written since the last chunk was hashed, their
	// bytes hashed into their shards' digests by hashChunk.
	runs []shardRun
}

// add appends line to the shards; false when it is over the shard limit
// (writeShards reports that).
func (s *specShards) add(line []byte, off int64) (bool, error) {
	size := int64(len(line)) + 1
	if size > s.maxBytes {
		return false, nil
	}
	var w *shardWriter
	if n := len(s.ws); n > 0 {
		w = s.ws[n-1]
		if shardFull(w.records, w.bytes, size, s.maxRecords, s.maxBytes) {
			if err := w.o.Close(); err != nil {
				return false, err
			}
			w = nil
		}
	}
	if w == nil {
		var err error
		if w, err = newShardWriter(s.tmpDir, fmt.Sprintf("part-%05d", len(s.ws)), sha256x2.New()); err != nil {
			return false, err
		}
		s.ws = append(s.ws, w)
	}
	if err := w.add(line); err != nil {
		return false, err
	}
	// The line's bytes with the newline after them, if that is what follows
	// in the file: the next line of the same shard starting just past it
	// extends the run (hashChunk checks the last line's end).
	if n := len(s.runs); n > 0 && s.runs[n-1].h == w.h && s.runs[n-1].end == off {
		s.runs[n-1].end = off + int64(len(line)) + 1
	} else {
		s.runs = append(s.runs, shardRun{h: w.h, start: off, end: off + int64(len(line)) + 1})
	}
	return true, nil
}

// shardRun is lines of the input written one after another to a shard,
// each followed by a newline: the file's bytes from start to end, where the
// last line may instead end the file or a CRLF (hashChunk tells).
type shardRun struct {
	h          *sha256x2.State
	start, end int64
}

// hashChunk hashes a chunk of the input file (data, at offset in it) into
// file, and the runs of its lines written to shards into theirs, two streams
// at a time (sha256x2.Write2): each run is paired with as many of the file's
// bytes, from where the file's hashing stands.
func hashChunk(file *sha256x2.State, data []byte, offset int64, runs []shardRun) {
	pos := 0
	for _, r := range runs {
		s, e := int(r.start-offset), int(r.end-offset)
		crlf := e > len(data) || data[e-1] != '\n'
		if crlf { // the last line ends the file or a CRLF: its newline is not in data
			e--
		}
		// Runs are in file order and hold no byte twice, so pos <= s.
		sha256x2.Write2(file, data[pos:pos+e-s], r.h, data[s:e])
		pos += e - s
		if crlf {
			r.h.Write(newline)
		}
	}
	file.Write(data[pos:])
}

var newline = []byte{'\n'}

// cutAs says whether the shards written hold the records cuts says.
func (s *specShards) cutAs(cuts []int64) bool {
	if s == nil || len(s.ws) != len(cuts) {
		return false
	}
	for i, w := range s.ws {
		if w.records != cuts[i] {
			return false
		}
	}
	return true
}

// finish returns the shards written (nil for a nil s); Commit reports a
// failure to close the last.
func (s *specShards) finish() []*shardWriter {
	if s == nil {
		return nil
	}
	if n := len(s.ws); n > 0 {
		s.ws[n-1].o.Close()
	}
	return s.ws
}

// abort removes the shards' temp files (those stored are gone already).
func (s *specShards) abort() {
	if s == nil {
		return
	}
	for _, w := range s.ws {
		w.abort()
	}
	s.ws = nil
}

// lineReader re-reads lines of the input: sequentially through a buffer
// while the offsets go forward (the records plan did not carry, see
// planRuns), with ReadAt otherwise.
type lineReader struct {
	f                 *os.File
	br                *bufio.Reader
	pos               int64 // file offset of br's next byte
	forward, backward int   // lines read each way
}

func (r *lineReader) readAt(p []byte, off int64) error {
	switch {
	case r.br != nil && off >= r.pos && off-r.pos <= 1<<20:
		// Forward within reach: skip through the buffer.
		if _, err := r.br.Discard(int(off - r.pos)); err != nil {
			return err
		}
	case r.br != nil && off < r.pos:
		r.backward++
		_, err := r.f.ReadAt(p, off)
		return err
	default:
		// First read or a long jump forward: position the buffer.
		if _, err := r.f.Seek(off, io.SeekStart); err != nil {
			return err
		}
		if r.br == nil {
			r.br = bufio.NewReaderSize(r.f, 1<<20)
		} else {
			r.br.Reset(r.f)
		}
	}
	r.forward++
	n, err := io.ReadFull(r.br, p)
	r.pos = off + int64(n)
	return err
}

type shardWriter struct {
	id      string
	o       *lake.ObjectWriter
	h       *sha256x2.State // the digest its writer hashes into, when the caller hashes (specShards)
	records int64
	bytes   int64
}

// newShardWriter starts a shard; with h, the caller hashes its bytes into
// h, and the writer does not.
func newShardWriter(tmpDir, id string, h *sha256x2.State) (*shardWriter, error) {
	var o *lake.ObjectWriter
	var err error
	if h != nil {
		o, err = lake.NewBulkObjectWriterHashedBy(tmpDir, "batchlake-shard-*.jsonl", h)
	} else {
		o, err = lake.NewBulkObjectWriter(tmpDir, "batchlake-shard-*.jsonl")
	}
	if err != nil {
		return nil, err
	}
	return &shardWriter{id: id, o: o, h: h}, nil
}

func (s *shardWriter) add(line []byte) error {
	if err := s.o.Line(line); err != nil {
		return err
	}
	s.records++
	s.bytes += int64(len(line)) + 1
	return nil
}

func (s *shardWriter) commit(ctx context.Context, l *lake.Lake) (lake.ManifestShard, error) {
	_, d, err := s.o.Commit(ctx, l, lake.ObjectKey)
	if err != nil {
		return lake.ManifestShard{}, err
	}
	failpoint.Hit(failpoint.PlanAfterShard)
	return lake.ManifestShard{ShardID: s.id, Object: d, Records: s.records, Bytes: s.bytes}, nil
}

func (s *shardWriter) abort() { s.o.Abort() }

// ensureValidated writes CREATED and VALIDATED for every shard that lacks them
// (a plan killed after its manifest was written is completed by the next run).
// Each append is a round trip to a remote lake: the shards are written
// lake.LedgerFanout at a time, and a shard's VALIDATED follows the CREATED
// this plan just wrote without reading its ledger again.
func ensureValidated(ctx context.Context, l *lake.Lake, m *lake.Manifest) error {
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return err
	}
	g := lake.NewLedger(l, "")
	return lake.EachOf(ctx, len(m.Shards), lake.LedgerFanout, func(ctx context.Context, i int) error {
		s := m.Shards[i]
		last, err := g.Last(ctx, job, s.ShardID)
		if err != nil {
			return err
		}
		for _, st := range []lake.State{lake.Created, lake.Validated} {
			if last.State != "" && last.State != lake.Created {
				break
			}
			if last.State == st {
				continue
			}
			var ev lake.Event
			if last.Actor == g.Actor {
				ev, err = g.AppendAfter(ctx, last, st, 0, "", nil)
			} else {
				ev, err = g.TransitionFrom(ctx, job, s.ShardID, last, st, 0, "", nil)
			}
			if errors.Is(err, lake.ErrConflict) || errors.Is(err, lake.ErrIllegalTransition) {
				break // a concurrent plan wrote it
			}
			if err != nil {
				return err
			}
			last = ev
			failpoint.Hit(failpoint.PlanAfterLedger)
		}
		return nil
	})
}

// hexMemo is d.Hex(), keeping the string of the digest it was last given:
// a job's lines almost always share one model-config hash. Safe for
// concurrent use.
type hexMemo struct{ last atomic.Pointer[digestHex] }

type digestHex struct {
	d   lake.Digest
	hex string
}

func (m *hexMemo) of(d lake.Digest) string {
	if l := m.last.Load(); l != nil && l.d == d {
		return l.hex
	}
	l := &digestHex{d, d.Hex()}
	m.last.Store(l)
	return l.hex
}

// inPairs calls two with the elements of xs that due says, two at a time in
// order, and one with the last if they are odd in number.
func inPairs[T any](xs []T, due func(*T) bool, two func(a, b *T), one func(a *T)) {
	var pend *T
	for i := range xs {
		if !due(&xs[i]) {
			continue
		}
		if pend == nil {
			pend = &xs[i]
			continue
		}
		two(pend, &xs[i])
		pend = nil
	}
	if pend != nil {
		one(pend)
	}
}

// hexArena is d.Hex() for many digests, their strings carved from shared
// blocks of 64 KiB instead of one allocation each (a 1M plan's record ids
// and request digests were two million of them). A block lives as long as
// any of its strings; its bytes are never written again once handed out.
// Not safe for concurrent use.
type hexArena struct{ block []byte }

func (a *hexArena) of(d lake.Digest) string {
	const n = 2 * len(d)
	if cap(a.block)-len(a.block) < n {
		a.block = make([]byte, 0, 64<<10)
	}
	start := len(a.block)
	a.block = d.AppendHex(a.block)
	return unsafe.String(&a.block[start], n)
}
