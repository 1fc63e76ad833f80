package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/reconcile"
)

func manualCmd(ctx context.Context, g *globals) *cobra.Command {
	var job, tenant, out string
	c := &cobra.Command{
		Use:   "manual [--job K] [--tenant T] [--out FILE.jsonl]",
		Short: "The manual queue: records no retry will settle, with the reason of their last attempt",
		Long: `manual lists the manual view: records whose latest disposition is manual (a
permanent failure, or past --max-attempts) and that have no accepted result,
with the outcome and reason of their last attempt, their attempts and last job.
--job limits it to a job and its retry descendants. --out writes one JSON line
per record (written whole or not at all); stdout has the count and the file
(or, without --out, the records themselves).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if job != "" {
				d, err := jobDigest(job)
				if err != nil {
					return err
				}
				job = d.Hex()
			}
			e, done, err := g.session(ctx, reconcile.Scope{Tenant: tenant, Job: job, Views: reconcile.ManualViews})
			if err != nil {
				return err
			}
			defer done()
			res := map[string]any{"job_key": job, "tenant": tenant}
			if out == "" {
				recs := []reconcile.ManualRow{}
				err := e.ManualQueue(ctx, job, tenant, func(r reconcile.ManualRow) error { recs = append(recs, r); return nil })
				if err != nil {
					return err
				}
				res["count"], res["records"] = len(recs), recs
				printJSON(g.stdout, res)
				return nil
			}
			if err := reconcile.GuardOutput(e.Lake(), g.cacheDir, "manual --out", out, false); err != nil {
				return err
			}
			n, err := writeManual(ctx, e, job, tenant, out)
			if err != nil {
				return err
			}
			res["count"], res["file"] = n, out
			printJSON(g.stdout, res)
			return nil
		},
	}
	c.Flags().StringVar(&job, "job", "", "only this job (key or unique prefix) and its retry descendants")
	c.Flags().StringVar(&tenant, "tenant", "", "only this tenant")
	c.Flags().StringVar(&out, "out", "", "write the queue here as JSON lines")
	return c
}

// writeManual writes the queue to a temporary file beside out and renames it
// into place, so a reader never sees half a queue.
func writeManual(ctx context.Context, e *reconcile.Engine, job, tenant, out string) (n int, err error) {
	if err := makeParent("manual --out", out); err != nil {
		return 0, err
	}
	f, err := os.CreateTemp(filepath.Dir(out), ".manual-*.jsonl")
	if err != nil {
		return 0, fmt.Errorf("manual --out: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err = e.ManualQueue(ctx, job, tenant, func(r reconcile.ManualRow) error { n++; return enc.Encode(r) }); err != nil {
		return 0, err
	}
	if err = w.Flush(); err != nil {
		return 0, fmt.Errorf("manual --out %s: %w", out, err)
	}
	if err = f.Close(); err != nil {
		return 0, fmt.Errorf("manual --out %s: %w", out, err)
	}
	if err = os.Chmod(f.Name(), 0o644); err != nil {
		return 0, err
	}
	if err = os.Rename(f.Name(), out); err != nil {
		return 0, fmt.Errorf("manual --out %s: %w", out, err)
	}
	return n, nil
}
