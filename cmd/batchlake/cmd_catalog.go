package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

func catalogCmd(ctx context.Context, g *globals) *cobra.Command {
	var out, tenant string
	var refresh bool
	c := &cobra.Command{
		Use:   "catalog --out analytics.duckdb",
		Short: "Write a DuckDB database whose views read the lake (live for a local lake), for analysts' own tools",
		Long:  catalogLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return &errkind.UsageError{Msg: "catalog: missing required flag --out"}
			}
			if tenant != "" {
				if err := lake.ValidTenant(tenant); err != nil {
					return &errkind.UsageError{Msg: "--tenant: " + err.Error()}
				}
			}
			l, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			res, err := reconcile.Catalog(ctx, l, out, g.engineOptions(), reconcile.CatalogOptions{Scope: reconcile.Scope{Tenant: tenant}, Refresh: refresh})
			if err != nil {
				return err
			}
			g.log.Info("catalog written", "database", res.Database, "kind", res.Kind, "files", res.Files)
			if res.OpenFrom != "" {
				g.log.Info("open it from its folder: its views read the lake by relative paths", "cd", res.OpenFrom, "lake", res.Lake)
			}
			printJSON(g.stdout, res)
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "the DuckDB database file to write (required)")
	c.Flags().StringVar(&tenant, "tenant", "", "only this tenant's data")
	c.Flags().BoolVar(&refresh, "refresh", false, "rebuild the catalog --out names, of the same lake and tenant: a snapshot sees newer jobs, a live one reads folders that were empty")
	return c
}
