package gen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// Version names the generator's output format: the same Version, Options and
// seed give the same bytes. Change it whenever the bytes change.
const Version = "blgen/1"

// Rates are per-record probabilities of each defect. The primary outcome of a
// record is drawn once: ServerError, RateLimit, Expired, BadRequest, Missing
// and Empty are exclusive, the rest succeed. Duplicate is then drawn for every
// record that has a line.
type Rates struct {
	ServerError float64 `json:"server_error"` // HTTP 500 server_error (retryable)
	RateLimit   float64 `json:"rate_limit"`   // HTTP 429 rate_limit_exceeded (retryable)
	Expired     float64 `json:"expired"`      // error line batch_expired (retryable)
	BadRequest  float64 `json:"bad_request"`  // HTTP 400 context_length_exceeded (permanent)
	Missing     float64 `json:"missing"`      // no line in any file
	Empty       float64 `json:"empty"`        // 200 with empty or null content (quality gate)
	// Duplicate gives a record a second line: half the time an identical
	// repeat, otherwise a line in the other channel (a success also gets a
	// 500 in the error file; a failure also gets a success, which wins).
	Duplicate float64 `json:"duplicate"`
}

// DefaultRates give a first attempt that is visibly imperfect, as a large
// real batch is: about 3.5 % of records need attention.
var DefaultRates = Rates{ServerError: 0.008, RateLimit: 0.006, Expired: 0.006, BadRequest: 0.004, Missing: 0.005, Empty: 0.003, Duplicate: 0.002}

func (r Rates) validate() error {
	for _, p := range []float64{r.ServerError, r.RateLimit, r.Expired, r.BadRequest, r.Missing, r.Empty, r.Duplicate} {
		if p < 0 || p > 1 {
			return fmt.Errorf("rate %v outside [0, 1]", p)
		}
	}
	sum := r.ServerError + r.RateLimit + r.Expired + r.BadRequest + r.Missing + r.Empty
	if sum > 1 {
		return fmt.Errorf("failure rates add up to %v, more than 1", sum)
	}
	return nil
}

// Options say what to generate. Start from DefaultOptions.
type Options struct {
	N            int64  // records in the input file, at least 1
	Seed         uint64 // fixes every random choice
	Rates        Rates
	Unknown      int    // distinct ids in the results that were never sent (the first one gets two lines)
	Corrupt      int    // result lines that are not JSON (even: a torn line in the output file; odd: an HTML page in the error file)
	Model        string // body.model of every request
	ModelVersion string // the dated snapshot the results report
	IDPrefix     string // custom_id = IDPrefix + 10 digits; unknown ids are IDPrefix + "unknown-" + 10 digits
	Block        int    // records per block, the unit of shuffling and parallel work
	Workers      int    // parallel renderers; 0 means GOMAXPROCS
}

// DefaultOptions returns the options blgen uses for n records and a seed.
func DefaultOptions(n int64, seed uint64) Options {
	return Options{
		N: n, Seed: seed, Rates: DefaultRates,
		Unknown: 3 + int(n/200_000), Corrupt: 2,
		Model: defaultModel, ModelVersion: defaultModelVersion, IDPrefix: "bench-",
		Block: 4096,
	}
}

// Truth is what a correct reconciler reports for the generated files
// (docs/contract.md: counts of distinct records unless noted), plus facts about
// the files themselves.
type Truth struct {
	Generator       string `json:"generator"`
	N               int64  `json:"n"`
	Seed            uint64 `json:"seed"`
	Expected        int64  `json:"expected"`
	Succeeded       int64  `json:"succeeded"`
	QualityFailed   int64  `json:"quality_failed"`
	FailedRetryable int64  `json:"failed_retryable"`
	FailedPermanent int64  `json:"failed_permanent"`
	Missing         int64  `json:"missing"`
	Unknown         int64  `json:"unknown"`     // distinct ids not in the input
	Duplicate       int64  `json:"duplicate"`   // input records with more than one result line
	Quarantined     int64  `json:"quarantined"` // result lines that are not valid JSON
	// RetryRecords is missing + failed_retryable + quality_failed: every
	// record is in its first attempt, under any max-attempts of 2 or more.
	RetryRecords int64     `json:"retry_records"`
	Closed       bool      `json:"closed"`
	Lines        FileStats `json:"lines"`
	Bytes        FileStats `json:"bytes"`
	Rates        Rates     `json:"rates"`
}

// FileStats holds one number per generated file.
type FileStats struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	Errors int64 `json:"errors"`
}

// Writers receive the three generated files.
type Writers struct {
	Input, Output, Errors io.Writer
}

// recordPlan is what happens to one request.
type recordPlan struct {
	primary  kind
	extra    kind
	hasExtra bool
}

func (o *Options) plan(i uint64) recordPlan {
	r := newRNG(o.Seed, streamPlan, i)
	u := r.float()
	rt := &o.Rates
	var p recordPlan
	switch {
	case u < rt.ServerError:
		p.primary = kind500
	case u < rt.ServerError+rt.RateLimit:
		p.primary = kind429
	case u < rt.ServerError+rt.RateLimit+rt.Expired:
		p.primary = kindExpired
	case u < rt.ServerError+rt.RateLimit+rt.Expired+rt.BadRequest:
		p.primary = kind400
	case u < rt.ServerError+rt.RateLimit+rt.Expired+rt.BadRequest+rt.Missing:
		p.primary = kindMissing
	case u < rt.ServerError+rt.RateLimit+rt.Expired+rt.BadRequest+rt.Missing+rt.Empty:
		p.primary = kindEmpty
	default:
		p.primary = kindOK
	}
	if p.primary != kindMissing && r.float() < rt.Duplicate {
		p.hasExtra = true
		switch {
		case r.intn(2) == 0:
			p.extra = p.primary
		case p.primary == kindOK || p.primary == kindEmpty:
			p.extra = kind500
		default:
			p.extra = kindOK
		}
	}
	return p
}

func (p recordPlan) outcome() Outcome {
	out := outcomeOf(p.primary)
	if p.hasExtra {
		out = min(out, outcomeOf(p.extra))
	}
	return out
}

// lineSpec is one result line to render.
type lineSpec struct {
	i      uint64
	k      kind
	errors bool   // goes to the error file
	prefix string // custom_id prefix
}

type blockResult struct {
	in, out, errs []byte
	t             Truth // counts for this block only
}

type job struct {
	pos  uint64
	br   *blockResult
	done chan *blockResult
}

// Generate writes an N-record OpenAI batch input file and the output and
// error files a provider would return for it, and returns the truth about
// them. Memory is bounded by a few blocks; work is spread over Workers.
func Generate(ctx context.Context, w Writers, o Options) (Truth, error) {
	t := Truth{Generator: Version, N: o.N, Seed: o.Seed, Rates: o.Rates}
	if o.N < 1 {
		return t, fmt.Errorf("generate: n = %d, want at least 1", o.N)
	}
	if o.Block < 1 {
		return t, fmt.Errorf("generate: block = %d, want at least 1", o.Block)
	}
	if o.Unknown < 0 || o.Corrupt < 0 {
		return t, fmt.Errorf("generate: unknown and corrupt counts must not be negative")
	}
	if o.Model == "" || o.ModelVersion == "" || o.IDPrefix == "" {
		return t, fmt.Errorf("generate: model, model version and id prefix must be set")
	}
	if err := o.Rates.validate(); err != nil {
		return t, fmt.Errorf("generate: %w", err)
	}
	if w.Input == nil || w.Output == nil || w.Errors == nil {
		return t, errors.New("generate: all three writers must be set")
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	blocks := (uint64(o.N) + uint64(o.Block) - 1) / uint64(o.Block)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan job)
	futures := make(chan job, 2*workers)
	// A fixed set of block buffers, reused: it bounds the blocks in flight
	// and keeps the grown buffers out of the garbage collector's way.
	free := make(chan *blockResult, 3*workers+1)
	for range cap(free) {
		free <- &blockResult{}
	}
	go func() {
		defer close(futures)
		defer close(jobs)
		for pos := uint64(0); pos < blocks; pos++ {
			j := job{pos: pos, done: make(chan *blockResult, 1)}
			var br *blockResult
			select {
			case br = <-free:
			case <-ctx.Done():
				return
			}
			j.br = br
			select {
			case futures <- j:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var specs []lineSpec
			for j := range jobs {
				specs = o.renderBlock(j.br, j.pos, blocks, specs[:0])
				j.done <- j.br
			}
		}()
	}

	for j := range futures {
		var br *blockResult
		select {
		case br = <-j.done:
		case <-ctx.Done():
			return t, fmt.Errorf("generate: %w", ctx.Err())
		}
		if _, err := w.Input.Write(br.in); err != nil {
			return t, fmt.Errorf("generate: write input: %w", err)
		}
		if _, err := w.Output.Write(br.out); err != nil {
			return t, fmt.Errorf("generate: write output: %w", err)
		}
		if _, err := w.Errors.Write(br.errs); err != nil {
			return t, fmt.Errorf("generate: write errors: %w", err)
		}
		t.add(&br.t)
		free <- br
	}
	if err := ctx.Err(); err != nil {
		return t, fmt.Errorf("generate: %w", err)
	}
	t.RetryRecords = t.Missing + t.FailedRetryable + t.QualityFailed
	t.Closed = t.Missing == 0 && t.Unknown == 0 && t.Duplicate == 0
	if sum := t.Succeeded + t.QualityFailed + t.FailedRetryable + t.FailedPermanent + t.Missing; sum != t.Expected || t.Expected != o.N {
		return t, fmt.Errorf("generate: internal error: outcomes add up to %d of %d expected, n = %d", sum, t.Expected, o.N)
	}
	return t, nil
}

func (t *Truth) add(b *Truth) {
	t.Expected += b.Expected
	t.Succeeded += b.Succeeded
	t.QualityFailed += b.QualityFailed
	t.FailedRetryable += b.FailedRetryable
	t.FailedPermanent += b.FailedPermanent
	t.Missing += b.Missing
	t.Unknown += b.Unknown
	t.Duplicate += b.Duplicate
	t.Quarantined += b.Quarantined
	t.Lines.Input += b.Lines.Input
	t.Lines.Output += b.Lines.Output
	t.Lines.Errors += b.Lines.Errors
	t.Bytes.Input += b.Bytes.Input
	t.Bytes.Output += b.Bytes.Output
	t.Bytes.Errors += b.Bytes.Errors
}

// blockRange returns the records [lo, hi) of block b.
func (o *Options) blockRange(b uint64) (lo, hi uint64) {
	lo = b * uint64(o.Block)
	hi = min(lo+uint64(o.Block), uint64(o.N))
	return lo, hi
}

// renderBlock fills br with block pos of the input file and with the result
// lines of a permuted block, shuffled, plus any unknown and corrupt lines
// placed at pos. It returns specs for reuse.
func (o *Options) renderBlock(br *blockResult, pos, blocks uint64, specs []lineSpec) []lineSpec {
	br.in, br.out, br.errs = grow(br.in, o.Block*700), grow(br.out, o.Block*850), grow(br.errs, o.Block*64)
	br.t = Truth{}
	t := &br.t

	lo, hi := o.blockRange(pos)
	for i := lo; i < hi; i++ {
		br.in = appendInput(br.in, o, i)
		br.in = append(br.in, '\n')
	}
	t.Lines.Input = int64(hi - lo)
	t.Bytes.Input = int64(len(br.in))

	lo, hi = o.blockRange(permute(pos, blocks, mix(o.Seed, streamPerm)))
	for i := lo; i < hi; i++ {
		p := o.plan(i)
		t.Expected++
		switch p.outcome() {
		case Succeeded:
			t.Succeeded++
		case QualityFailed:
			t.QualityFailed++
		case FailedRetryable:
			t.FailedRetryable++
		case FailedPermanent:
			t.FailedPermanent++
		case Missing:
			t.Missing++
		}
		if p.primary == kindMissing {
			continue
		}
		specs = append(specs, lineSpec{i: i, k: p.primary, errors: errorChannel(p.primary), prefix: o.IDPrefix})
		if p.hasExtra {
			t.Duplicate++
			specs = append(specs, lineSpec{i: i, k: p.extra, errors: errorChannel(p.extra), prefix: o.IDPrefix})
		}
	}
	unknownPrefix := o.IDPrefix + "unknown-"
	for j := 0; j < o.Unknown; j++ {
		if mix(mix(o.Seed, streamExtra), uint64(j))%blocks != pos {
			continue
		}
		t.Unknown++
		specs = append(specs, lineSpec{i: uint64(j), k: kindUnknownOK, prefix: unknownPrefix})
		if j == 0 {
			specs = append(specs, lineSpec{i: uint64(j), k: kindUnknownExp, errors: true, prefix: unknownPrefix})
		}
	}
	for j := 0; j < o.Corrupt; j++ {
		if mix(mix(o.Seed, streamExtra+1), uint64(j))%blocks != pos {
			continue
		}
		t.Quarantined++
		if j%2 == 0 {
			specs = append(specs, lineSpec{i: uint64(j), k: kindTorn})
		} else {
			specs = append(specs, lineSpec{i: uint64(j), k: kindHTML, errors: true})
		}
	}
	r := newRNG(o.Seed, streamShuffle, pos)
	for k := len(specs) - 1; k > 0; k-- {
		m := r.intn(k + 1)
		specs[k], specs[m] = specs[m], specs[k]
	}
	for _, s := range specs {
		if s.errors {
			br.errs = appendResult(br.errs, o, s.i, s.k, s.prefix)
			br.errs = append(br.errs, '\n')
			t.Lines.Errors++
		} else {
			br.out = appendResult(br.out, o, s.i, s.k, s.prefix)
			br.out = append(br.out, '\n')
			t.Lines.Output++
		}
	}
	t.Bytes.Output = int64(len(br.out))
	t.Bytes.Errors = int64(len(br.errs))
	return specs
}

// grow returns b emptied, with room for at least n bytes.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, 0, n)
	}
	return b[:0]
}
