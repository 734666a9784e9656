package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/daemon"
)

type serveOptions struct {
	policy          string
	db              string
	listen          string
	logFormat       string
	logLevel        string
	refreshSchedule string
	replanSchedule  string
	leaseTTL        time.Duration
	grace           time.Duration
}

func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the broker daemon: JSON API, agents, metrics and background jobs",
		Long: `Run the long-running broker. It serves the JSON API under /api/v1 (see docs/api.md),
/metrics, /healthz and /readyz; re-plans the policy and refreshes prices on cron schedules.
With a PostgreSQL --db several replicas can run; one leads the background jobs at a time.
On first start it prints an admin token once; only its hash is stored.`,
		Example: `  gpubroker serve -f policy.yaml
  gpubroker serve -f policy.yaml --db postgres://broker@db/gpubroker --listen 0.0.0.0:8080 --log-format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(cmd.ErrOrStderr(), o.logFormat, o.logLevel)
			if err != nil {
				return usageErr(err)
			}
			if o.policy != "" {
				if _, err := os.Stat(o.policy); err != nil {
					return usageErr(fmt.Errorf("policy file: %w", err))
				}
			}
			err = daemon.Run(cmd.Context(), daemon.Config{PolicyPath: o.policy, DSN: o.db, Listen: o.listen,
				Logger: log, Out: cmd.OutOrStdout(), LeaseTTL: o.leaseTTL, RefreshSchedule: o.refreshSchedule,
				ReplanSchedule: o.replanSchedule, ShutdownGrace: o.grace, Plan: daemon.OptimizerPlan})
			if err != nil {
				return failErr(err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.policy, "file", "f", "", "policy file to plan and keep placed")
	f.StringVar(&o.db, "db", "", "database: a SQLite file or postgres://user@host/db (default: the user's data directory)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&o.refreshSchedule, "refresh-schedule", "@every 6h", "cron schedule of the price refresh")
	f.StringVar(&o.replanSchedule, "replan-schedule", "@every 15m", "cron schedule of the re-plan")
	f.DurationVar(&o.leaseTTL, "lease-ttl", 15*time.Second, "leader lease time; a dead leader is replaced within about this")
	f.DurationVar(&o.grace, "shutdown-grace", 30*time.Second, "how long in-flight requests and jobs may finish on shutdown")
	return cmd
}

func newLogger(w interface{ Write([]byte) (int, error) }, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}
