//go:build !agentonly

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/broker"
	"github.com/gpubroker/gpubroker/broker/config"
	"github.com/gpubroker/gpubroker/broker/identity"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/refresh"
	"github.com/gpubroker/gpubroker/store"
)

type serveOptions struct {
	configPath       string
	policy           string
	db               string
	listen           string
	logFormat        string
	logLevel         string
	refreshSchedule  string
	replanSchedule   string
	clouds           []string
	regions          []string
	concurrency      int
	noRefreshOnStart bool
	leaseTTL         time.Duration
	grace            time.Duration
	catalogReload    time.Duration
	dbPasswordFile   string
	awsIdentityCerts string
	requireIdentity  bool
	tlsCert, tlsKey  string
}

func newServeCmd(sources refresh.Registry) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the broker daemon: JSON API, agents, metrics, price refresh and re-planning",
		Long: `Run the long-running broker. It serves the web dashboard at / (docs/dashboard.md), the JSON
API under /api/v1 (docs/api.md), /metrics, /healthz and /readyz (HTTPS with --tls-cert and --tls-key);
refreshes prices from the clouds and re-plans the policy on cron schedules.
With a PostgreSQL --db several replicas can run; one leads the background jobs at a time.
On first start it prints an admin token once; only its hash is stored.
Settings come from --config (YAML, see docs/providers.md) and flags; flags win.`,
		Example: `  gpubroker serve -f policy.yaml
  gpubroker serve -f policy.yaml --db postgres://broker@db/gpubroker --listen 0.0.0.0:8080 --log-format json
  gpubroker serve --config /etc/gpubroker/serve.yaml -f policy.yaml
  gpubroker serve -f policy.yaml --listen 0.0.0.0:8443 --tls-cert /etc/gpubroker/tls.crt --tls-key /etc/gpubroker/tls.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.brokerConfig(cmd)
			if err != nil {
				return usageErr(err)
			}
			log, err := newLogger(cmd.ErrOrStderr(), o.logFormat, o.logLevel)
			if err != nil {
				return usageErr(err)
			}
			if o.policy == "-" {
				return usageErr(errors.New("serve re-reads its policy file on every re-plan; -f - (standard input) is for plan and policy check"))
			}
			if o.policy != "" {
				// A bad policy is a usage error (exit 2), every problem
				// printed, as for plan.
				if _, err := policy.Load(o.policy); err != nil {
					var list policy.ErrorList
					if errors.As(err, &list) {
						for _, e := range list {
							fmt.Fprintln(cmd.ErrOrStderr(), e)
						}
						return usageErr(fmt.Errorf("%s: %d error(s)", o.policy, len(list)))
					}
					return usageErr(fmt.Errorf("policy file: %w", err))
				}
			}
			ident, err := o.identity()
			if err != nil {
				return usageErr(err)
			}
			targets, err := refresh.Plan(sources, cfg.Refresh.Clouds, cfg.Refresh.Regions)
			if err != nil {
				return usageErr(fmt.Errorf("refresh: %w", err))
			}
			fleetCfg, stopFleet, err := fleetSetup(cfg.Fleet, log)
			if err != nil {
				return usageErr(err)
			}
			defer stopFleet()
			err = broker.Run(cmd.Context(), broker.Config{PolicyPath: o.policy, DSN: cfg.DB, Listen: o.listen,
				DBPasswordFile: cfg.DBPasswordFile, CatalogReload: cfg.CatalogReload,
				Retention: store.Retention{PriceHistory: cfg.Retention.PriceHistory, Events: cfg.Retention.Events,
					Agents: cfg.Retention.Agents, LaunchIntents: cfg.Retention.LaunchIntents},
				Logger: log, Out: cmd.OutOrStdout(), LeaseTTL: cfg.LeaseTTL, RefreshSchedule: cfg.Refresh.Schedule,
				ReplanSchedule: o.replanSchedule, ShutdownGrace: cfg.ShutdownGrace, Plan: broker.OptimizerPlan,
				RefreshOnLeadership: cfg.Refresh.OnStart, Reports: cfg.Reports, Fleet: fleetCfg, Identity: ident, RequireIdentity: o.requireIdentity,
				TLSCert: o.tlsCert, TLSKey: o.tlsKey,
				Refresh: broker.CloudRefresher(targets, refresh.Options{Concurrency: cfg.Refresh.Concurrency,
					FetchTimeout: cfg.Refresh.FetchTimeout, Now: time.Now, Logger: log, Endpoints: cfg.Endpoints,
					Progress: refresh.LogProgress{Log: log}})})
			if err != nil {
				return failErr(err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.configPath, "config", "", "YAML configuration file (keys: db, db_password_file, shutdown_grace, lease_ttl, catalog_reload, retention.{price_history,events,agents,launch_intents}, refresh.{schedule,on_start,clouds,regions,concurrency,fetch_timeout}, fleet (docs/fleet.md))")
	f.StringVarP(&o.policy, "file", "f", "", "policy file to plan and keep placed")
	f.StringVar(&o.db, "db", "", "store: a SQLite path, sqlite://PATH or postgres://user@host/db (default: the user data directory); give a PostgreSQL password through PGPASSWORD or --db-password-file, not here")
	f.StringVar(&o.dbPasswordFile, "db-password-file", "", "file whose first line is the PostgreSQL password")
	f.DurationVar(&o.catalogReload, "catalog-reload", config.DefaultCatalogReload, "how often every replica re-reads prices and the stored plan from the store (1s to 1h)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&o.refreshSchedule, "refresh-schedule", config.DefaultRefreshSchedule, "cron schedule of the catalog refresh (5 fields, or @every 6h)")
	f.StringVar(&o.replanSchedule, "replan-schedule", "@every 15m", "cron schedule of the re-plan of the policy")
	f.StringSliceVar(&o.clouds, "cloud", nil, "clouds to refresh (default all)")
	f.StringSliceVar(&o.regions, "region", nil, "regions or globs to refresh (default each cloud's GPU regions)")
	f.IntVar(&o.concurrency, "concurrency", 4, "regions fetched at once")
	f.BoolVar(&o.noRefreshOnStart, "no-refresh-on-start", false, "wait for the schedule instead of refreshing when this replica starts leading")
	f.DurationVar(&o.leaseTTL, "lease-ttl", config.DefaultLeaseTTL, "leader lease, 1s to 10m; a dead leader is replaced within about this")
	f.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate (chain) file: serve HTTPS; needs --tls-key")
	f.StringVar(&o.tlsKey, "tls-key", "", "PEM private key file of --tls-cert")
	f.DurationVar(&o.grace, "shutdown-grace", 30*time.Second, "how long in-flight requests and jobs may finish on shutdown")
	f.StringVar(&o.awsIdentityCerts, "aws-identity-certs", "", "PEM file of the AWS public certificates that sign instance identity documents (your regions'); agents' signed identities are then verified")
	f.BoolVar(&o.requireIdentity, "require-identity", false, "refuse bootstrap-token registrations without a verified signed identity (needs --aws-identity-certs)")
	return cmd
}

// identity loads the instance identity verifier (nil: none configured).
func (o *serveOptions) identity() (*identity.Verifier, error) {
	if o.awsIdentityCerts == "" {
		if o.requireIdentity {
			return nil, fmt.Errorf("--require-identity needs --aws-identity-certs")
		}
		return nil, nil
	}
	data, err := os.ReadFile(o.awsIdentityCerts)
	if err != nil {
		return nil, fmt.Errorf("--aws-identity-certs: %w", err)
	}
	certs, err := identity.ParseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("--aws-identity-certs %s: %w", o.awsIdentityCerts, err)
	}
	return &identity.Verifier{AWS: certs}, nil
}

// brokerConfig reads --config and applies the flags that were set.
func (o *serveOptions) brokerConfig(cmd *cobra.Command) (config.Config, error) {
	cfg := config.DefaultConfig()
	if o.configPath != "" {
		data, err := os.ReadFile(o.configPath)
		if err != nil {
			return cfg, err
		}
		if cfg, err = config.ParseConfig(o.configPath, data); err != nil {
			return cfg, err
		}
	}
	if err := cfg.Endpoints.FromEnv(os.LookupEnv); err != nil {
		return cfg, err
	}
	fl := cmd.Flags()
	if fl.Changed("db") {
		cfg.DB = o.db
	}
	if fl.Changed("refresh-schedule") {
		if err := config.ValidateSchedule(o.refreshSchedule); err != nil {
			return cfg, fmt.Errorf("--refresh-schedule: %w", err)
		}
		cfg.Refresh.Schedule = o.refreshSchedule
	}
	if fl.Changed("cloud") {
		cfg.Refresh.Clouds = nil
		for _, c := range o.clouds {
			cl, err := pricing.ParseCloud(c)
			if err != nil {
				return cfg, fmt.Errorf("--cloud: %w", err)
			}
			cfg.Refresh.Clouds = append(cfg.Refresh.Clouds, cl)
		}
	}
	if fl.Changed("region") {
		cfg.Refresh.Regions = o.regions
	}
	if fl.Changed("concurrency") {
		if o.concurrency < 1 {
			return cfg, fmt.Errorf("--concurrency %d: want 1 or more", o.concurrency)
		}
		cfg.Refresh.Concurrency = o.concurrency
	}
	if o.noRefreshOnStart {
		cfg.Refresh.OnStart = false
	}
	if fl.Changed("shutdown-grace") {
		if o.grace <= 0 || o.grace > time.Hour {
			return cfg, fmt.Errorf("--shutdown-grace %s: want a duration from 1ns to 1h, such as 30s", o.grace)
		}
		cfg.ShutdownGrace = o.grace
	}
	if fl.Changed("lease-ttl") {
		if err := config.CheckDuration("--lease-ttl", o.leaseTTL, broker.MinLeaseTTL, broker.MaxLeaseTTL); err != nil {
			return cfg, err
		}
		cfg.LeaseTTL = o.leaseTTL
	}
	if fl.Changed("catalog-reload") {
		if err := config.CheckDuration("--catalog-reload", o.catalogReload, time.Second, time.Hour); err != nil {
			return cfg, err
		}
		cfg.CatalogReload = o.catalogReload
	}
	if fl.Changed("db-password-file") {
		cfg.DBPasswordFile = o.dbPasswordFile
	}
	if err := config.ValidateSchedule(o.replanSchedule); err != nil {
		return cfg, fmt.Errorf("--replan-schedule: %w", err)
	}
	return cfg, nil
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
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
