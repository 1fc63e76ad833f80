package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

func reportCmd(ctx context.Context, g *globals) *cobra.Command {
	var job, tenant, since, htmlOut string
	var all bool
	c := &cobra.Command{
		Use:   "report (--job K | --tenant T | --all) [--since DATE] [--html out.html]",
		Short: "The numbers of a job and its retries, a tenant or the whole lake, as JSON and one static HTML page",
		Long: `report gathers the numbers of a set of jobs: --job, a job and its retry
descendants (manifests whose parent_job_key is the job, recursively);
--tenant, every job of a tenant; --all, every job of the lake. --since DATE
(YYYY-MM-DD, or an RFC 3339 time) keeps, with --tenant or --all, the jobs
planned at or after it.

For those jobs: each job's tenant, provider, model, prompt version, times
(planned, submitted, the provider's last batch done, reconciled) and
turnaround, and the counts of its latest reconcile report, with the unknown
ids, duplicate records and quarantined lines that make a reconcile exit 11;
the records' funnel (expected, succeeded = accepted, retried, manual,
pending); cost by category, model, attempt, tenant and day, whose total equals
the cost command's for the same jobs (cost --tenant T, or cost with no
filter); plan's estimate beside the bill, with the token counts and the
reasons they differ; attempts per record; the first 200 records of the
manual queue.

--html writes them as one self-contained page (inline CSS and SVG charts, no
scripts, no external requests); amounts show rounded for people, with the
exact value beside them. Stdout is the JSON of exactly the numbers on the
page, with amounts as exact decimal numbers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc, err := reportScope(job, tenant, since, all)
			if err != nil {
				return err
			}
			e, done, err := g.session(ctx, reconcile.Scope{Tenant: sc.Tenant, Job: sc.Job})
			if err != nil {
				return err
			}
			defer done()
			s, err := e.SummarizeScope(ctx, e.Lake(), sc)
			if errors.Is(err, lake.ErrNotFound) {
				return &errkind.UsageError{Msg: strings.TrimSuffix(err.Error(), ": "+lake.ErrNotFound.Error())}
			}
			if err != nil {
				return err
			}
			if htmlOut != "" {
				if err := reconcile.GuardOutput(e.Lake(), g.cacheDir, "report --html", htmlOut, false); err != nil {
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
	c.Flags().StringVar(&tenant, "tenant", "", "every job of this tenant")
	c.Flags().BoolVar(&all, "all", false, "every job of the lake")
	c.Flags().StringVar(&since, "since", "", "with --tenant or --all: only jobs planned at or after this date (YYYY-MM-DD, UTC) or RFC 3339 time")
	c.Flags().StringVar(&htmlOut, "html", "", "write the page here")
	return c
}

// reportScope checks report's flags: exactly one of --job, --tenant and
// --all, and --since only beside --tenant or --all.
func reportScope(job, tenant, since string, all bool) (reconcile.SummaryScope, error) {
	var sc reconcile.SummaryScope
	n := 0
	for _, set := range []bool{job != "", tenant != "", all} {
		if set {
			n++
		}
	}
	if n != 1 {
		return sc, &errkind.UsageError{Msg: "report: give exactly one of --job K, --tenant T or --all"}
	}
	if job != "" {
		d, err := jobDigest(job)
		if err != nil {
			return sc, err
		}
		if since != "" {
			return sc, &errkind.UsageError{Msg: "report: --since goes with --tenant or --all (--job reports the whole family)"}
		}
		sc.Job = d.Hex()
		return sc, nil
	}
	sc.Tenant = tenant
	if since != "" {
		t, err := time.Parse("2006-01-02", since)
		if err != nil {
			if t, err = time.Parse(time.RFC3339, since); err != nil {
				return sc, &errkind.UsageError{Msg: fmt.Sprintf("report --since %q: want a date YYYY-MM-DD (UTC) or an RFC 3339 time such as 2025-06-01T00:00:00Z", since)}
			}
		}
		sc.Since = t.UTC()
	}
	return sc, nil
}

// makeParent makes the folders an output file's path names, as catalog
// --out and reconcile --out do; a file in their place is bad usage.
func makeParent(flag, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return &errkind.UsageError{Msg: fmt.Sprintf("%s %q: %v", flag, out, err)}
	}
	return nil
}

// writeHTML renders to a temporary file beside out and renames it into place.
func writeHTML(s *reconcile.JobSummary, out string) (err error) {
	if err := makeParent("report --html", out); err != nil {
		return err
	}
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
