// Package broker wires the long-running broker (`gpubroker serve`): the
// store, the catalog, the HTTP API, leader election and the background jobs,
// all members of one group with a shared context and an orderly shutdown.
package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/config"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/broker/identity"
	"github.com/gpubroker/gpubroker/catalog"
	"github.com/gpubroker/gpubroker/dashboard"
	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/refresh"
	"github.com/gpubroker/gpubroker/store"
)

// LeaseName is the leader lease's row name.
const LeaseName = "broker-leader"

// Refresher updates the prices in the store. The broker then reloads its
// catalog from the store (catalog.Load), as every replica does on its
// reload interval, so the leader and the followers serve the same prices.
type Refresher func(ctx context.Context, st *store.Store) error

// Config is what `gpubroker serve` passes in. Zero values take defaults.
type Config struct {
	// PolicyPath is the policy file (-f); its bytes are handed to Plan.
	PolicyPath string
	// DSN is a SQLite path or a postgres:// DSN; "" is the default SQLite
	// file in the user's data directory (see store.ParseDSN).
	DSN string
	// DBPasswordFile holds the PostgreSQL password (see store.Options).
	DBPasswordFile string
	// CatalogReload is how often every replica re-reads the catalog and
	// the stored plan's cost from the store (default 30s): the longest a
	// follower serves older prices than the leader.
	CatalogReload time.Duration
	// Retention prunes price history and events (zero: keep for ever).
	Retention store.Retention
	// PruneSchedule is when the leader prunes (default "@every 1h").
	PruneSchedule string
	// Listen is the address to listen on; default 127.0.0.1:8080.
	Listen string
	// Listener, when set, is used instead of Listen (tests).
	Listener net.Listener
	Logger   *slog.Logger
	// Out receives the one-time admin token and the listen address.
	Out io.Writer
	Now func() time.Time
	// ReplicaID names this replica in the leader lease; default host-pid-random.
	ReplicaID string
	// LeaseTTL (default 15s) and LeaseRenew (default TTL/3) tune failover.
	// A TTL under 1s or over 10m is refused: shorter makes leadership flap
	// on a slow database round trip, longer leaves jobs unrun for that long
	// after a leader dies.
	LeaseTTL   time.Duration
	LeaseRenew time.Duration
	// RefreshSchedule and ReplanSchedule are cron specs (defaults
	// "@every 6h" and "@every 15m").
	RefreshSchedule string
	ReplanSchedule  string
	// Refresh updates the catalog; nil takes the prices last saved in the
	// store (by `gpubroker catalog refresh` or another refresher).
	// CloudRefresher fetches from the clouds first.
	Refresh Refresher
	// NoRefresh turns the refresh job off.
	NoRefresh bool
	// RefreshOnLeadership runs a refresh whenever this replica becomes the
	// leader (so a fresh start does not wait hours for the schedule).
	RefreshOnLeadership bool
	// Plan computes plans; nil disables the plan and budget routes.
	Plan PlanFunc
	// ExtraJobs run on the leader too (tests count runs with these).
	ExtraJobs []Job
	// Reports configures scheduled Slack reports and alerts; SlackAPIURL
	// and SlackHTTP override Slack's endpoint and client (tests).
	Reports   config.ReportsConfig
	SlackHTTP *http.Client
	// ShutdownGrace bounds how long in-flight requests and jobs may take
	// after a stop signal (default 30s).
	ShutdownGrace time.Duration
	// Identity verifies agents' signed instance identities (nil: not
	// verified); RequireIdentity refuses bootstrap registrations without
	// one (docs/api.md, "Instance identity").
	Identity        *identity.Verifier
	RequireIdentity bool
	// Started, when set, is closed once the daemon listens.
	Started chan<- net.Addr
	// TLSCert and TLSKey are PEM files; when both are set the broker serves
	// HTTPS (API and dashboard) and the dashboard's cookies are Secure.
	TLSCert, TLSKey string
	// Fleet, when set, runs the fleet reconciler (fleet.go).
	Fleet *FleetSetup
}

func (c *Config) defaults() error {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.ReplicaID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.ReplicaID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 15 * time.Second
	}
	if c.LeaseTTL < MinLeaseTTL || c.LeaseTTL > MaxLeaseTTL {
		return fmt.Errorf("lease TTL %s: want between %s and %s", c.LeaseTTL, MinLeaseTTL, MaxLeaseTTL)
	}
	if c.LeaseRenew < 0 {
		return fmt.Errorf("lease renew interval %s must be positive", c.LeaseRenew)
	}
	if c.LeaseRenew == 0 {
		c.LeaseRenew = c.LeaseTTL / 3
	}
	if c.CatalogReload == 0 {
		c.CatalogReload = DefaultCatalogReload
	}
	if c.CatalogReload < time.Second || c.CatalogReload > time.Hour {
		return fmt.Errorf("catalog reload interval %s: want between 1s and 1h", c.CatalogReload)
	}
	if c.Retention.PriceHistory < 0 || c.Retention.Events < 0 || c.Retention.Agents < 0 || c.Retention.LaunchIntents < 0 {
		return errors.New("retention durations must not be negative (0 keeps for ever)")
	}
	if c.PruneSchedule == "" {
		c.PruneSchedule = "@every 1h"
	}
	if c.ShutdownGrace < 0 {
		return fmt.Errorf("shutdown grace %s must not be negative", c.ShutdownGrace)
	}
	if c.LeaseRenew >= c.LeaseTTL {
		return fmt.Errorf("lease renew interval %s must be shorter than the lease TTL %s", c.LeaseRenew, c.LeaseTTL)
	}
	if c.RefreshSchedule == "" {
		c.RefreshSchedule = "@every 6h"
	}
	if c.ReplanSchedule == "" {
		c.ReplanSchedule = "@every 15m"
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 30 * time.Second
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("TLS needs both a certificate (--tls-cert) and its key (--tls-key)")
	}
	return nil
}

// Bounds of Config.LeaseTTL, and the default catalog reload interval.
const (
	MinLeaseTTL          = time.Second
	MaxLeaseTTL          = 10 * time.Minute
	DefaultCatalogReload = 30 * time.Second
)

// catalogHolder swaps the catalog atomically: readers never see a
// half-applied refresh.
type catalogHolder struct {
	p atomic.Pointer[pricing.Catalog]
}

func (h *catalogHolder) Load() *pricing.Catalog   { return h.p.Load() }
func (h *catalogHolder) Store(c *pricing.Catalog) { h.p.Store(c) }

// Run runs the daemon until ctx ends, then shuts down in order: stop
// accepting requests and scheduling jobs, finish in-flight requests and
// jobs, give up the leader lease, close the store.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	log := cfg.Logger
	policyData, err := readPolicy(cfg.PolicyPath)
	if err != nil {
		return err
	}

	st, err := store.OpenWith(ctx, cfg.DSN, log, store.Options{PasswordFile: cfg.DBPasswordFile})
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Warn("closing store", "err", err)
		}
	}()
	broker, err := st.Broker(ctx)
	if err != nil {
		return err
	}
	if err := firstAdminToken(ctx, broker, cfg.Out, cfg.Now()); err != nil {
		return err
	}

	// Every replica starts from the prices already in the store, not the
	// snapshot alone, and re-reads them on cfg.CatalogReload.
	var cat catalogHolder
	snap, err := catalog.Load(ctx, st)
	if err != nil {
		return err
	}
	cat.Store(snap)

	metrics := httpapi.NewMetrics(&httpapi.Gauges{
		CatalogAge: func() time.Duration { return cfg.Now().Sub(cat.Load().GeneratedAt) },
		Agents: func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, active, err := broker.CountInstances(ctx, cfg.Now().Add(-5*time.Minute))
			if err != nil {
				return 0
			}
			return float64(active)
		},
	})

	elector := &Elector{Store: broker, Name: LeaseName, Holder: cfg.ReplicaID, TTL: cfg.LeaseTTL, Renew: cfg.LeaseRenew,
		Now: cfg.Now, Log: log, OnChange: metrics.SetLeader, Release: true}

	var planner *policyPlanner
	var dplanner httpapi.Planner
	var checkWorkload func(store.WorkloadRecord) error
	if cfg.Plan != nil {
		planner = &policyPlanner{plan: cfg.Plan, catalog: cat.Load, now: cfg.Now, policyName: cfg.PolicyPath,
			policy: policyData, metrics: metrics, store: broker, leaseName: LeaseName, log: log,
			leading: func() (string, int64, bool) {
				epoch, _, ok := elector.Leading()
				return cfg.ReplicaID, epoch, ok
			}}
		dplanner = planner
		// Validate the loaded policy now: a broken file is a startup error,
		// not a surprise at the first re-plan.
		if policyData != nil {
			if _, err := planner.compute(ctx); err != nil {
				return fmt.Errorf("planning %s: %w", cfg.PolicyPath, err)
			}
		}
		checkWorkload = func(w store.WorkloadRecord) error { return checkAPIWorkload(cfg.PolicyPath, policyData, w) }
	}

	var fp *fleetParts
	var fleetAPI httpapi.Fleet
	if cfg.Fleet != nil {
		if fp, err = newFleet(ctx, &cfg, broker, &cat, policyData, metrics, elector, log); err != nil {
			return err
		}
		fleetAPI = fp.api
	}

	jobs := append([]Job(nil), cfg.ExtraJobs...)
	if cfg.Refresh == nil {
		cfg.Refresh = StoreRefresher
	}
	reload := func(ctx context.Context) error {
		next, err := catalog.Load(ctx, st)
		if err != nil {
			return err // keep the last good catalog
		}
		cat.Store(next)
		return nil
	}
	if !cfg.NoRefresh {
		jobs = append(jobs, Job{Name: "refresh", Schedule: cfg.RefreshSchedule, OnLeadership: cfg.RefreshOnLeadership, Run: func(ctx context.Context) error {
			// Failed regions keep their stored offers, so the catalog is
			// reloaded and re-planned even after a partial failure.
			rerr := cfg.Refresh(ctx, st)
			if err := reload(ctx); err != nil {
				return errors.Join(rerr, fmt.Errorf("reloading the catalog after the refresh: %w", err))
			}
			if rerr != nil {
				return fmt.Errorf("refreshing prices: %w", rerr)
			}
			metrics.RefreshSucceeded(cfg.Now())
			if planner != nil {
				// New prices, new plan: followers pick both up on their
				// next reload instead of waiting for the re-plan schedule.
				return planner.replan(ctx)
			}
			return nil
		}})
	}
	if planner != nil {
		// OnLeadership: a new leader (a restart with a changed policy file,
		// a failover) stores its plan at once.
		jobs = append(jobs, Job{Name: "replan", Schedule: cfg.ReplanSchedule, OnLeadership: true, Run: planner.replan})
	}
	// Always: services' time below target is pruned past the longest
	// availability window even when every retention keeps rows for ever.
	jobs = append(jobs, Job{Name: "prune", Schedule: cfg.PruneSchedule, Run: func(ctx context.Context) error {
		res, err := st.Prune(ctx, cfg.Retention, cfg.Now())
		if res.PricePoints+res.Events+res.Agents+res.LaunchIntents+res.Shortfall > 0 {
			log.Info("pruned old rows", "price_points", res.PricePoints, "events", res.Events,
				"agents", res.Agents, "launch_intents", res.LaunchIntents, "service_shortfall", res.Shortfall)
		}
		return err
	}})
	var pol *policy.Policy
	if policyData != nil {
		pol, _ = policy.Parse(cfg.PolicyPath, policyData) // checked by the first plan above
	}
	ledgerMetrics := NewLedgerMetrics(metrics.Registry())
	jobs = append(jobs, Job{Name: "ledger", Schedule: LedgerSchedule, OnLeadership: true, Run: func(ctx context.Context) error {
		if err := RunLedger(ctx, LedgerSources{Broker: broker, Catalog: cat.Load, Policy: pol, Metrics: ledgerMetrics}, cfg.Now()); err != nil {
			return err
		}
		var replace func(ctx context.Context, id, reason string) error
		if fp != nil && cfg.Fleet.ReplaceSlowHosts {
			replace = func(ctx context.Context, id, reason string) error {
				_, err := fp.svc.Replace(ctx, id, reason, "slow-host check")
				if errors.Is(err, fleet.ErrNotInFleet) {
					return nil // not a fleet instance (an agent started by hand)
				}
				return err
			}
		}
		return flagSlowHosts(ctx, broker, cfg.Now(), replace)
	}})
	if planner != nil {
		planner.speeds = func(ctx context.Context) optimizer.SpeedTable {
			t, err := MeasuredSpeeds(ctx, broker, cfg.Now())
			if err != nil {
				log.Warn("measured speeds unavailable; planning on spec sheets", "err", err)
			}
			return t
		}
		planner.spend = func(ctx context.Context, bs apiv1.Budgets) (apiv1.Budgets, error) {
			return withSpend(ctx, broker, cat.Load(), pol, bs, cfg.Now())
		}
	}
	if cfg.Reports.Enabled() {
		rjobs, err := reportJobs(cfg, st, broker, cat.Load, planner, policyData)
		if err != nil {
			return err
		}
		jobs = append(jobs, rjobs...)
	}
	sched := &Scheduler{Jobs: jobs, Elector: elector, Store: broker, LeaseName: LeaseName, Now: cfg.Now, Log: log,
		Metrics: metrics, Grace: cfg.ShutdownGrace}
	if err := sched.Validate(); err != nil {
		return err
	}

	api := httpapi.New(httpapi.Config{Store: broker, Catalog: cat.Load, Planner: dplanner, Fleet: fleetAPI, Logger: log,
		Identity: cfg.Identity, RequireIdentity: cfg.RequireIdentity,
		CheckWorkload: checkWorkload,
		Spend: func(ctx context.Context, q apiv1.SpendQuery) (apiv1.Spend, error) {
			return SpendView(ctx, broker, q)
		},
		Now: cfg.Now, Metrics: metrics, Ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return broker.Ping(ctx)
		}})

	var tlsConfig *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("loading the TLS certificate and key: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	var planView dashboard.CurrentPlan = dashboard.NoPlan{}
	var budgetView dashboard.Budgets = dashboard.NoPlan{}
	if planner != nil {
		planView, budgetView = dashPlan{planner}, dashPlan{planner}
	}
	dstore := dashStore{st: st, b: broker}
	dash, err := dashboard.New(dashboard.Config{Auth: api, Offers: dashboard.OffersFunc(cat.Load), History: dstore,
		Plan: planView, Budgets: budgetView, Agents: dstore, Benchmarks: dstore, Events: dstore,
		Fleet: dashFleetSource(fp), Spend: dashSpend{broker},
		Logger: log, Now: cfg.Now, Secure: tlsConfig != nil})
	if err != nil {
		return err
	}

	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
		}
	}
	srv := &http.Server{Handler: dashboard.Route(api.Handler(), dash), TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	fmt.Fprintf(cfg.Out, "gpubroker serve: listening on %s://%s (store: %s %s, replica %s)\n", scheme, ln.Addr(), st.Dialect(), st.Where(), cfg.ReplicaID)
	log.Info("broker started", "refresh_schedule", cfg.RefreshSchedule, "addr", ln.Addr().String(), "store", st.Dialect(), "db", st.Where(), "replica", cfg.ReplicaID,
		"catalog", snap.Source, "offers", snap.Len(), "catalog_reload", cfg.CatalogReload)
	if cfg.Started != nil {
		cfg.Started <- ln.Addr()
	}

	// The elector outlives the scheduler so the lease is held until
	// in-flight jobs finish; it has its own context for that.
	electCtx, stopElect := context.WithCancel(context.WithoutCancel(ctx))
	electDone := make(chan struct{})
	go func() {
		defer close(electDone)
		_ = elector.Run(electCtx)
	}()

	g := newGroup(ctx)
	g.Go(func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() {
			if tlsConfig != nil {
				errc <- srv.ServeTLS(ln, "", "")
				return
			}
			errc <- srv.Serve(ln)
		}()
		select {
		case err := <-errc:
			return fmt.Errorf("HTTP server: %w", err)
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("HTTP shutdown did not finish in time", "err", err)
			_ = srv.Close()
		}
		<-errc
		return nil
	})
	g.Go(sched.Run)
	g.Go(func(ctx context.Context) error {
		// Every replica, leader or not, re-reads the catalog and the stored
		// plan's cost: the leader's refresh and re-plan reach the followers
		// within one interval.
		t := time.NewTicker(cfg.CatalogReload)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			if err := reload(ctx); err != nil && ctx.Err() == nil {
				log.Warn("reloading the catalog from the store failed; serving the last good one", "err", err)
			}
			if planner != nil {
				if err := planner.replanIfWorkloadsChanged(ctx); err != nil && ctx.Err() == nil {
					log.Warn("re-planning after a workload change failed", "err", err)
				}
				planner.observe(ctx)
			}
		}
	})
	if fp != nil {
		g.Go(fp.loop.Run)
	}
	err = g.Wait()
	stopElect()
	<-electDone
	log.Info("broker stopped")
	return err
}

func readPolicy(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the policy: %w", err)
	}
	return b, nil
}

// firstAdminToken creates and prints an admin token when the store has none.
// The token is printed once, to out only: never logged, never stored in
// clear.
func firstAdminToken(ctx context.Context, b *store.Broker, out io.Writer, now time.Time) error {
	tok, hash, err := httpapi.NewToken()
	if err != nil {
		return fmt.Errorf("generating the admin token: %w", err)
	}
	created, err := b.EnsureFirstAdminToken(ctx, hash, "initial", now.UTC())
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(out, "gpubroker serve: created the admin token (shown only now; store it safely):\n  %s\n", tok)
	}
	return nil
}

// StoreRefresher fetches nothing: the prices are those `gpubroker catalog
// refresh` (or another broker) saved in the store, which the broker reloads
// after each run.
func StoreRefresher(context.Context, *store.Store) error { return nil }

// CloudRefresher refreshes the targets from the clouds into the store with
// the refresh package (failed regions keep their stored offers).
func CloudRefresher(targets []refresh.Target, opt refresh.Options) Refresher {
	return func(ctx context.Context, st *store.Store) error {
		rep := refresh.Run(ctx, st, targets, opt)
		if opt.Logger != nil {
			attrs := []any{"refreshed", rep.Count(refresh.Refreshed), "empty", rep.Count(refresh.Empty),
				"failed", rep.Count(refresh.Failed), "took", rep.Finished.Sub(rep.Started).Round(time.Millisecond)}
			if err := rep.Err(); err != nil {
				opt.Logger.Warn("refresh finished with failures; failed regions keep their stored offers", append(attrs, "err", err)...)
			} else {
				opt.Logger.Info("refresh finished", attrs...)
			}
		}
		return rep.Err()
	}
}

// checkAPIWorkload checks a workload written through the API the way the
// planner will read it: its spec must parse as a policy workload, and its
// name must not be one the policy file already uses.
func checkAPIWorkload(policyName string, policyData []byte, w store.WorkloadRecord) error {
	if _, err := policy.WorkloadFromJSON("workload "+w.Name, w.Name, w.Team, w.Kind, w.Spec); err != nil {
		return fmt.Errorf("%w: %v", policy.ErrInvalid, err)
	}
	if policyData == nil {
		return nil
	}
	pol, err := policy.Parse(policyName, policyData)
	if err != nil {
		return nil // the broker refused to start with a broken file; nothing to compare
	}
	for _, fw := range pol.Workloads {
		if fw.Name == w.Name {
			return fmt.Errorf("%w: workload %q is defined in the policy file %s; choose another name", store.ErrConflict, w.Name, policyName)
		}
	}
	return nil
}
