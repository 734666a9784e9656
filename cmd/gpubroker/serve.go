package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/broker"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/refresh"
)

func newServeCmd(sources refresh.Registry) *cobra.Command {
	var (
		configPath, db, schedule, logFormat string
		clouds, regions                     []string
		concurrency                         int
		noRefreshOnStart                    bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the broker daemon: keep the price catalog fresh on a schedule",
		Long: `Run the gpubroker daemon. It refreshes the offer catalog from the clouds on a cron
schedule (default every six hours, and once at start), never running two refreshes
at once, and stops cleanly on SIGTERM or Ctrl-C, letting a running refresh finish
within the shutdown grace. Settings come from --config (YAML, see docs/providers.md)
and flags; flags win.`,
		Example: `  gpubroker serve
  gpubroker serve --db postgres://gpubroker@db/gpubroker --refresh-schedule "0 */4 * * *"
  gpubroker serve --config /etc/gpubroker/serve.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := broker.DefaultConfig()
			if configPath != "" {
				data, err := os.ReadFile(configPath)
				if err != nil {
					return usageErr(err)
				}
				if cfg, err = broker.ParseConfig(configPath, data); err != nil {
					return usageErr(err)
				}
			}
			fl := cmd.Flags()
			if fl.Changed("db") {
				cfg.DB = db
			}
			if fl.Changed("refresh-schedule") {
				if err := broker.ValidateSchedule(schedule); err != nil {
					return usageErr(fmt.Errorf("--refresh-schedule: %w", err))
				}
				cfg.Refresh.Schedule = schedule
			}
			if fl.Changed("cloud") {
				cfg.Refresh.Clouds = nil
				for _, c := range clouds {
					cl, err := pricing.ParseCloud(c)
					if err != nil {
						return usageErr(fmt.Errorf("--cloud: %w", err))
					}
					cfg.Refresh.Clouds = append(cfg.Refresh.Clouds, cl)
				}
			}
			if fl.Changed("region") {
				cfg.Refresh.Regions = regions
			}
			if fl.Changed("concurrency") {
				if concurrency < 1 {
					return usageErr(fmt.Errorf("--concurrency %d: want 1 or more", concurrency))
				}
				cfg.Refresh.Concurrency = concurrency
			}
			if noRefreshOnStart {
				cfg.Refresh.OnStart = false
			}
			var h slog.Handler
			switch logFormat {
			case "text":
				h = slog.NewTextHandler(cmd.ErrOrStderr(), nil)
			case "json":
				h = slog.NewJSONHandler(cmd.ErrOrStderr(), nil)
			default:
				return usageErr(fmt.Errorf("--log-format %q: want text or json", logFormat))
			}
			b, err := broker.New(cfg, broker.Options{Sources: sources, Logger: slog.New(h), Now: time.Now})
			if err != nil {
				return usageErr(err)
			}
			if err := b.Run(cmd.Context()); err != nil {
				return failErr(err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "YAML configuration file (keys: db, shutdown_grace, refresh.{schedule,on_start,clouds,regions,concurrency,fetch_timeout})")
	f.StringVar(&db, "db", "", "store: a SQLite path, sqlite://PATH or postgres://... (default: the user data directory)")
	f.StringVar(&schedule, "refresh-schedule", broker.DefaultRefreshSchedule, "cron schedule of the catalog refresh (5 fields, or @every 6h)")
	f.StringSliceVar(&clouds, "cloud", nil, "clouds to refresh (default all)")
	f.StringSliceVar(&regions, "region", nil, "regions or globs to refresh (default each cloud's GPU regions)")
	f.IntVar(&concurrency, "concurrency", 4, "regions fetched at once")
	f.BoolVar(&noRefreshOnStart, "no-refresh-on-start", false, "wait for the schedule instead of refreshing at start")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	return cmd
}
