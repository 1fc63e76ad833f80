package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/reconcile"
)

func retryCmd(ctx context.Context, g *globals) *cobra.Command {
	var job string
	var notBefore time.Duration
	var fb *fallbackFlags
	var sf syncFlags
	c := &cobra.Command{
		Use:   "retry",
		Short: "Turn a job's retry shard into a child job (attempt n+1, lineage kept), ready to submit",
		Long:  retryLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := sf.check(true); err != nil {
				return err
			}
			if notBefore < 0 {
				return &errkind.UsageError{Msg: fmt.Sprintf("retry --not-before %s: want a duration of 0 (at once) or more", notBefore)}
			}
			l, d, err := g.openJob(ctx, job)
			if err != nil {
				return err
			}
			defer l.Close()
			heap := new(goHeap)
			ro := reconcile.RetryOptions{TmpDir: g.tmpDir, NotBefore: notBefore, MemoryLimit: heap.limit}
			if err := fb.apply(ctx, l, &ro); err != nil {
				return err
			}
			res, err := reconcile.RetryWith(ctx, l, d, ro)
			heap.restore()
			if err != nil {
				return err
			}
			out, err := sf.retrySync(ctx, g, l, res)
			if out == nil {
				return err
			}
			g.log.Info(res.Message, "parent", res.ParentJobKey[:12])
			printJSON(g.stdout, out)
			return err
		},
	}
	c.Flags().StringVar(&job, "job", "", "job key, or a unique prefix of one (required)")
	fb = addFallbackFlags(c)
	c.Flags().DurationVar(&notBefore, "not-before", 0, "the child may be submitted no earlier than this long from now (recorded in its manifest; submit exits 75 before)")
	sf.register(c)
	return c
}
