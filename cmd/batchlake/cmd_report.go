package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

func reportCmd(ctx context.Context, g *globals) *cobra.Command {
	var job, htmlOut string
	c := &cobra.Command{
		Use:   "report --job K [--html out.html]",
		Short: "The numbers of a job and its retries as JSON, and as one static HTML page",
		Long: `report gathers a job and its retry descendants (manifests whose parent_job_key
is the job, recursively): the reconciliation funnel per generation from each
job's latest reconcile report, the family's totals (expected, succeeded =
accepted, retried, manual, pending), cost by category and model, attempts per
record and the first 200 records of the manual queue. --html writes them as one
self-contained page (inline CSS, no scripts, no external requests). Stdout is
the JSON of exactly the numbers on the page.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := jobDigest(job)
			if err != nil {
				return err
			}
			e, done, err := g.session(ctx, "")
			if err != nil {
				return err
			}
			defer done()
			s, err := e.Summarize(ctx, e.Lake(), d)
			if errors.Is(err, lake.ErrNotFound) {
				return &errkind.UsageError{Msg: err.Error()}
			}
			if err != nil {
				return err
			}
			if htmlOut != "" {
				if err := reconcile.GuardOutput(e.Lake(), g.cacheDir, "report --html", htmlOut); err != nil {
					return err
				}
				if err := writeHTML(s, htmlOut); err != nil {
					return err
				}
			}
			printJSON(g.stdout, struct {
				*reconcile.JobSummary
				HTML string `json:"html,omitempty"`
			}{s, htmlOut})
			return nil
		},
	}
	c.Flags().StringVar(&job, "job", "", "the job, key or unique prefix (its retry descendants are included)")
	c.Flags().StringVar(&htmlOut, "html", "", "write the page here")
	return c
}

// writeHTML renders to a temporary file beside out and renames it into place.
func writeHTML(s *reconcile.JobSummary, out string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(out), ".report-*.html")
	if err != nil {
		return fmt.Errorf("report --html: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriter(f)
	if err = reconcile.RenderHTML(w, s); err != nil {
		return fmt.Errorf("report --html %s: %w", out, err)
	}
	if err = w.Flush(); err != nil {
		return fmt.Errorf("report --html %s: %w", out, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("report --html %s: %w", out, err)
	}
	if err = os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}
