package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/reconcile"
)

// runFallback is run's fallback policy: from a given round on, the retry
// children go to another provider and model, their requests translated.
type runFallback struct {
	spec      string
	after     int
	maxTokens int64
	skip      bool
	fb        *reconcile.Fallback
}

func addRunFallbackFlags(c *cobra.Command) *runFallback {
	f := &runFallback{}
	fl := c.Flags()
	fl.StringVar(&f.spec, "fallback", "", "PROVIDER:MODEL: retry children go to this provider and model, requests translated (see docs/fallback.md)")
	fl.IntVar(&f.after, "fallback-after", 1, "with --fallback: the retries after this many rounds on the first provider go to the fallback")
	fl.Int64Var(&f.maxTokens, "fallback-max-tokens", 0, "with --fallback: output token limit for requests that set none where the fallback needs one (Claude)")
	fl.BoolVar(&f.skip, "skip-untranslatable", false, "with --fallback: leave records whose requests do not translate for manual handling instead of exit 2")
	return f
}

// parse checks the flags; PROVIDER:MODEL splits at the first colon (a
// Bedrock model id has colons of its own).
func (f *runFallback) parse() error {
	if f.spec == "" {
		if f.skip || f.maxTokens != 0 {
			return &errkind.UsageError{Msg: "run: --skip-untranslatable and --fallback-max-tokens go with --fallback"}
		}
		return nil
	}
	p, m, ok := strings.Cut(f.spec, ":")
	if !ok || p == "" || m == "" {
		return &errkind.UsageError{Msg: "run --fallback " + f.spec + ": want PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-5-20250929"}
	}
	if f.after < 1 {
		return &errkind.UsageError{Msg: "run --fallback-after: want 1 or more rounds"}
	}
	if f.maxTokens < 0 {
		return &errkind.UsageError{Msg: fmt.Sprintf("run --fallback-max-tokens %d: want a positive token limit (0: none)", f.maxTokens)}
	}
	f.fb = &reconcile.Fallback{Provider: p, Model: m, MaxTokens: f.maxTokens, SkipUntranslatable: f.skip}
	return nil
}

// retryOptions sets the fallback on the retry that ends round.
func (f *runFallback) retryOptions(round int, o *reconcile.RetryOptions) {
	if f.fb != nil && round >= f.after {
		o.Fallback = f.fb
	}
}

// driverFor is the driver for a child job: cur if the child is for cur's
// provider, else one for the child's provider, with the function that
// releases what it started.
func (f *runFallback) driverFor(g *globals, l *lake.Lake, pf providerFlags, child *lake.Manifest, cur *lifecycle.Driver) (*lifecycle.Driver, func(), error) {
	if child.Provider == cur.Target {
		return cur, func() {}, nil
	}
	pf.target = child.Provider
	return pf.driver(g, l)
}
