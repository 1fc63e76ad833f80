package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/providers"
	"github.com/batchlake/batchlake/providers/openaibatch"
)

// Options configure a simulator. The zero value is usable.
type Options struct {
	// Seed fixes the simulated results: the same records and seed give
	// the same answers and defects.
	Seed uint64
	// LostCreates is how many create responses this simulator drops after
	// the batch was made, so the submitter must find the batch, not create
	// it again (run shows that recovery on the demo).
	LostCreates int
	// Rates and RetryRates replace the default defect rates of first
	// attempts and of retries (fakeopenai.DefaultRates, RetryRates).
	Rates, RetryRates *fakeopenai.Rates
	// Logger receives the OpenAI adapter's notes (discarded if nil).
	Logger *slog.Logger
	// InMemory keeps the server's files and batches in this process instead
	// of the lake. Only for a process that takes each job from submit to
	// collect with one simulator (bench/lakegen, which starts one per job so
	// that finding a job's batch lists that job's batches, not the whole
	// lake's): another process cannot see these batches.
	InMemory bool
}

// Simulator is a providers.Client: the OpenAI adapter talking to the fake
// server, refusing jobs not planned for the simulator. Close stops the
// server.
type Simulator struct {
	*openaibatch.Client
	lake *lake.Lake
	srv  *fakeopenai.Server
	url  string
}

var _ providers.Client = (*Simulator)(nil)

// Start serves the simulator on a free loopback port, its state in l.
func Start(l *lake.Lake, o Options) (*Simulator, error) {
	fo := fakeopenai.Options{Seed: o.Seed, Rates: o.Rates, RetryRates: o.RetryRates,
		Faults: fakeopenai.Faults{CreateLost: o.LostCreates}, IDTag: ingest.SimProvider}
	if !o.InMemory {
		fo.Bucket, fo.Prefix = l.Bucket, lake.SimStatePrefix
	}
	srv := fakeopenai.New(fo)
	base, err := srv.Start()
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	c, err := openaibatch.New(openaibatch.Config{APIKey: srv.APIKey(), BaseURL: base, Logger: o.Logger})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sim: %w", err), srv.Close())
	}
	return &Simulator{Client: c, lake: l, srv: srv, url: base}, nil
}

// URL is the fake server's base URL on loopback.
func (s *Simulator) URL() string { return s.url }

// Server is the fake server, for tests that count its requests or inject
// more faults.
func (s *Simulator) Server() *fakeopenai.Server { return s.srv }

// Close stops the server. The state stays in the lake.
func (s *Simulator) Close() error { return s.srv.Close() }

// Create refuses a job that was not planned for the simulator, then
// creates the batch: made-up results must never enter a job planned for a
// real provider, whoever drives the client.
func (s *Simulator) Create(ctx context.Context, fileID, endpoint string, meta map[string]string) (*providers.Batch, error) {
	if err := s.serves(ctx, meta[providers.MetaJobKey]); err != nil {
		return nil, err
	}
	return s.Client.Create(ctx, fileID, endpoint, meta)
}

func (s *Simulator) serves(ctx context.Context, jobKey string) error {
	job, err := lake.ParseDigest(jobKey)
	if err != nil {
		return &errkind.UsageError{Msg: fmt.Sprintf("sim: batch metadata names no job (%q): the simulator serves only jobs planned with --provider sim", jobKey)}
	}
	m, err := s.lake.GetManifest(ctx, job)
	if err != nil {
		return fmt.Errorf("sim: job %s: %w", jobKey, err)
	}
	if m.Provider != ingest.SimProvider {
		return &errkind.UsageError{Msg: fmt.Sprintf("sim: job %s was planned for provider %s; the simulator serves only jobs planned with --provider sim", jobKey, m.Provider)}
	}
	return nil
}

// RealTime is the simulator's real-time API, for the synchronous tail: the
// OpenAI adapter's real-time client talking to the same fake server.
func (s *Simulator) RealTime() (providers.RealTime, error) {
	return openaibatch.NewRealTime(openaibatch.Config{APIKey: s.srv.APIKey(), BaseURL: s.url})
}
