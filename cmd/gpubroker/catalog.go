//go:build !agentonly

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/refresh"
	"github.com/gpubroker/gpubroker/store"
)

func newCatalogCmd(sources refresh.Registry) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Manage the stored GPU offer catalog",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newCatalogRefreshCmd(sources))
	cmd.AddCommand(newCatalogCheckCmd())
	return cmd
}

type refreshOptions struct {
	clouds      []string
	regions     []string
	gpus        []string
	policy      string
	db          string
	concurrency int
	timeout     time.Duration
}

func newCatalogRefreshCmd(sources refresh.Registry) *cobra.Command {
	var o refreshOptions
	cmd := &cobra.Command{
		Use:   "refresh",
		Short: "Fetch live GPU prices and spot signals from the clouds into the store",
		Long: `Fetch GPU offers from AWS, GCP and Azure through their SDKs and merge them into
the store, region by region. A region that fails or returns nothing keeps its
stored offers. Clouds without credentials are skipped with one line. Regions come
from --region, else the policy's regions (-f), else each cloud's default GPU
regions; globs select from the defaults (docs/providers.md).`,
		Example: `  gpubroker catalog refresh
  gpubroker catalog refresh --cloud aws --region us-east-1,us-west-2
  gpubroker catalog refresh -f policy.yaml --db postgres://gpubroker@db/gpubroker`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var clouds []pricing.Cloud
			patterns := o.regions
			if o.policy != "" {
				pc, pr, err := policyScope(o.policy)
				if err != nil {
					return usageErr(err)
				}
				clouds = pc
				if len(patterns) == 0 {
					patterns = pr
				}
			}
			if len(o.clouds) > 0 {
				clouds = nil
				for _, c := range o.clouds {
					cl, err := pricing.ParseCloud(c)
					if err != nil {
						return usageErr(fmt.Errorf("--cloud: %w", err))
					}
					clouds = append(clouds, cl)
				}
			}
			var gpus []pricing.GPUModel
			for _, g := range o.gpus {
				m, ok := pricing.ParseGPUModel(g)
				if !ok {
					return usageErr(fmt.Errorf("--gpu: unknown GPU %q%s", g, suggestGPU(g)))
				}
				gpus = append(gpus, m)
			}
			if o.timeout <= 0 {
				return usageErr(fmt.Errorf("--timeout %s: want a positive duration such as 15m", o.timeout))
			}
			if o.concurrency < 1 {
				return usageErr(fmt.Errorf("--concurrency %d: want 1 or more", o.concurrency))
			}
			if o.timeout <= 0 {
				return usageErr(fmt.Errorf("--timeout %v: want a positive duration such as 15m", o.timeout))
			}
			if err := checkGlobs("--region", o.regions); err != nil {
				return usageErr(err)
			}
			targets, err := refresh.Plan(sources, clouds, patterns)
			if err != nil {
				return usageErr(fmt.Errorf("--region: %w", err))
			}

			out := cmd.OutOrStdout()
			f, isFile := out.(*os.File)
			tty := isFile && refresh.IsTerminal(f)
			level := slog.LevelInfo
			if tty {
				level = slog.LevelWarn // the bars say the rest
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			// A SQLite file this run creates is removed again when nothing is
			// saved: a first run without credentials leaves no empty database
			// behind (which 'prices' would then read).
			fresh, err := newSQLiteFile(o.db)
			if err != nil {
				return usageErr(fmt.Errorf("--db: %w", err))
			}
			st, err := store.Open(cmd.Context(), o.db, log)
			if err != nil {
				return failErr(err)
			}
			defer st.Close()
			var ep providers.Endpoints
			if err := ep.FromEnv(os.LookupEnv); err != nil {
				return usageErr(err)
			}
			opt := refresh.Options{Concurrency: o.concurrency, FetchTimeout: o.timeout, GPUs: gpus,
				Logger: log, Progress: refresh.LogProgress{Log: log, QuietSkips: true}, Endpoints: ep}
			if tty {
				var cs []pricing.Cloud
				for _, t := range targets {
					cs = append(cs, t.Cloud)
				}
				opt.Progress = refresh.NewBars(out, cs)
			}
			rep := refresh.Run(cmd.Context(), st, targets, opt)
			fmt.Fprintln(out)
			if err := rep.Write(out); err != nil {
				return failErr(err)
			}
			if rep.Count(refresh.Refreshed) == 0 && fresh != nil {
				_ = st.Close()
				fresh.remove()
				fmt.Fprintln(out, "Store: nothing saved, so no database was created.")
			} else {
				fmt.Fprintf(out, "Store: %s\n", st.Where())
			}
			if err := rep.Err(); err != nil {
				return failErr(fmt.Errorf("refresh incomplete; failed regions keep their stored offers:\n%w", err))
			}
			if rep.Count(refresh.Refreshed)+rep.Count(refresh.Empty) == 0 {
				return failErr(errors.New("nothing was refreshed: every cloud was skipped"))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&o.clouds, "cloud", nil, "clouds to refresh: aws, gcp, azure (comma-separated; default: the policy's, else all)")
	fl.StringSliceVar(&o.regions, "region", nil, "regions or globs, e.g. us-east-1,eastus or 'europe-*' (default: the policy's, else each cloud's GPU regions)")
	fl.StringSliceVar(&o.gpus, "gpu", nil, "only these GPU models (comma-separated)")
	fl.StringVarP(&o.policy, "policy", "f", "", "policy file whose clouds and regions to refresh")
	fl.StringVar(&o.db, "db", "", "store: a SQLite path, sqlite://PATH or postgres://... (default: the user data directory)")
	fl.IntVar(&o.concurrency, "concurrency", 4, "regions each cloud fetches at once (clouds run side by side)")
	fl.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up on a cloud's fetch after this long")
	return cmd
}
