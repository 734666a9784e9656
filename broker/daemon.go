// Package daemon wires the long-running broker (`gpubroker serve`): the
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

	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/dashboard"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/refresh"
	"github.com/gpubroker/gpubroker/store"
)

// LeaseName is the leader lease's row name.
const LeaseName = "broker-leader"

// Refresher updates the prices in the store (st) and returns the new
// catalog built from current.
type Refresher func(ctx context.Context, st *store.Store, current *pricing.Catalog) (*pricing.Catalog, error)

// Config is what `gpubroker serve` passes in. Zero values take defaults.
type Config struct {
	// PolicyPath is the policy file (-f); its bytes are handed to Plan.
	PolicyPath string
	// DSN is a SQLite path or a postgres:// DSN; "" is the default SQLite
	// file in the user's data directory (see store.ParseDSN).
	DSN string
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
	// ShutdownGrace bounds how long in-flight requests and jobs may take
	// after a stop signal (default 30s).
	ShutdownGrace time.Duration
	// Started, when set, is closed once the daemon listens.
	Started chan<- net.Addr
	// TLSCert and TLSKey are PEM files; when both are set the broker serves
	// HTTPS (API and dashboard) and the dashboard's cookies are Secure.
	TLSCert, TLSKey string
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
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 15 * time.Second
	}
	if c.LeaseRenew <= 0 {
		c.LeaseRenew = c.LeaseTTL / 3
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

	st, err := store.Open(ctx, cfg.DSN, log)
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

	var cat catalogHolder
	snap, err := pricing.EmbeddedCatalog()
	if err != nil {
		return fmt.Errorf("loading the embedded price snapshot: %w", err)
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

	var planner *policyPlanner
	var dplanner httpapi.Planner
	if cfg.Plan != nil {
		planner = &policyPlanner{plan: cfg.Plan, catalog: cat.Load, now: cfg.Now, policyName: cfg.PolicyPath,
			policy: policyData, metrics: metrics}
		dplanner = planner
		// Validate the loaded policy now: a broken file is a startup error,
		// not a surprise at the first re-plan.
		if _, err := planner.Current(ctx); err != nil && !errors.Is(err, httpapi.ErrNoPolicy) {
			return fmt.Errorf("planning %s: %w", cfg.PolicyPath, err)
		}
	}

	elector := &Elector{Store: broker, Name: LeaseName, Holder: cfg.ReplicaID, TTL: cfg.LeaseTTL, Renew: cfg.LeaseRenew,
		Now: cfg.Now, Log: log, OnChange: metrics.SetLeader, Release: true}

	jobs := append([]Job(nil), cfg.ExtraJobs...)
	if cfg.Refresh == nil {
		cfg.Refresh = StoreRefresher
	}
	if !cfg.NoRefresh {
		jobs = append(jobs, Job{Name: "refresh", Schedule: cfg.RefreshSchedule, OnLeadership: cfg.RefreshOnLeadership, Run: func(ctx context.Context) error {
			next, err := cfg.Refresh(ctx, st, cat.Load())
			if err != nil {
				// Keep the last good catalog.
				return fmt.Errorf("refreshing prices: %w", err)
			}
			cat.Store(next)
			metrics.RefreshSucceeded(cfg.Now())
			return nil
		}})
	}
	if planner != nil {
		jobs = append(jobs, Job{Name: "replan", Schedule: cfg.ReplanSchedule, Run: planner.replan})
	}
	sched := &Scheduler{Jobs: jobs, Elector: elector, Store: broker, LeaseName: LeaseName, Now: cfg.Now, Log: log,
		Metrics: metrics, Grace: cfg.ShutdownGrace}
	if err := sched.Validate(); err != nil {
		return err
	}

	api := httpapi.New(httpapi.Config{Store: broker, Catalog: cat.Load, Planner: dplanner, Logger: log,
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
		Fleet: dashboard.NoFleet{}, Spend: dashboard.NoSpend{},
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
		"catalog", snap.Source, "offers", snap.Len())
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

// StoreRefresher merges the offers saved in the store into the catalog. An
// empty store is an error, so the snapshot stays in use until real prices
// arrive.
func StoreRefresher(ctx context.Context, st *store.Store, cur *pricing.Catalog) (*pricing.Catalog, error) {
	saved, err := st.Catalog(ctx)
	if err != nil {
		return nil, err
	}
	if saved == nil || saved.Len() == 0 {
		return nil, errors.New("the store holds no refreshed prices yet; keeping the current catalog")
	}
	return cur.Merge(saved.Offers(), saved.GeneratedAt, "store: "+saved.Source), nil
}

// CloudRefresher refreshes the targets from the clouds into the store with
// the refresh package (failed regions keep their stored offers), then merges
// the store's prices into the catalog.
func CloudRefresher(targets []refresh.Target, opt refresh.Options) Refresher {
	return func(ctx context.Context, st *store.Store, cur *pricing.Catalog) (*pricing.Catalog, error) {
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
		next, err := StoreRefresher(ctx, st, cur)
		if err != nil {
			return nil, errors.Join(rep.Err(), err)
		}
		return next, nil
	}
}
