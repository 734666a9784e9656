// Package broker is the long-running gpubroker daemon behind `gpubroker
// serve`. Today it keeps the offer catalog fresh: it opens the store and runs
// the catalog refresh on a cron schedule, never two at once, and shuts down
// cleanly on a stop signal. The HTTP API, control loop and leader election
// join it as further members of Run's group.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/gpubroker/gpubroker/refresh"
	"github.com/gpubroker/gpubroker/store"
)

// Broker is the daemon. Build it with New and start it with Run.
type Broker struct {
	cfg     Config
	sources refresh.Registry
	log     *slog.Logger
	now     func() time.Time

	// refreshing is held while a refresh runs; a scheduled run that finds
	// it taken is skipped rather than queued.
	refreshing sync.Mutex
	st         *store.Store
}

// Options carries the Broker's collaborators.
type Options struct {
	// Sources builds each cloud's price source.
	Sources refresh.Registry
	Logger  *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// New checks cfg and returns a Broker; nothing starts until Run.
func New(cfg Config, opt Options) (*Broker, error) {
	if err := ValidateSchedule(cfg.Refresh.Schedule); err != nil {
		return nil, fmt.Errorf("refresh schedule: %w", err)
	}
	if _, err := refresh.Plan(opt.Sources, cfg.Refresh.Clouds, cfg.Refresh.Regions); err != nil {
		return nil, fmt.Errorf("refresh: %w", err)
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Broker{cfg: cfg, sources: opt.Sources, log: opt.Logger, now: opt.Now}, nil
}

// Run opens the store, schedules the jobs and blocks until ctx ends. Then it
// starts no new job, gives running ones ShutdownGrace to finish, cancels
// them, waits for them and closes the store.
func (b *Broker) Run(ctx context.Context) error {
	st, err := store.Open(ctx, b.cfg.DB, b.log)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	defer st.Close()
	b.st = st

	// Jobs outlive ctx by up to the grace period: a refresh half-way
	// through its regions may finish what it is doing.
	jobCtx, cancelJobs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelJobs()
	g := &jobGroup{}
	job := func(fn func(context.Context)) func() {
		return func() {
			if !g.start() {
				return // stopping: start nothing new
			}
			defer g.wg.Done()
			fn(jobCtx)
		}
	}

	c := cron.New(cron.WithLogger(cronLogger{b.log}), cron.WithChain(cron.Recover(cronLogger{b.log})))
	id, err := c.AddFunc(b.cfg.Refresh.Schedule, job(func(ctx context.Context) { _, _ = b.RefreshNow(ctx) }))
	if err != nil {
		return fmt.Errorf("scheduling the refresh %q: %w", b.cfg.Refresh.Schedule, err)
	}
	c.Start()
	b.log.Info("broker started", "store", st.Where(), "refresh_schedule", b.cfg.Refresh.Schedule,
		"next_refresh", c.Entry(id).Next.UTC().Format(time.RFC3339))
	if b.cfg.Refresh.OnStart {
		go job(func(ctx context.Context) { _, _ = b.RefreshNow(ctx) })()
	}

	<-ctx.Done()
	b.log.Info("stopping: no new jobs; waiting for running ones", "grace", b.cfg.ShutdownGrace)
	cronDone := c.Stop()
	g.stop()
	done := make(chan struct{})
	go func() { g.wg.Wait(); <-cronDone.Done(); close(done) }()
	select {
	case <-done:
	case <-time.After(b.cfg.ShutdownGrace):
		b.log.Warn("jobs still running after the grace period; cancelling them")
		cancelJobs()
		<-done
	}
	b.log.Info("broker stopped")
	return nil
}

// jobGroup tracks running jobs and refuses new ones once stopping, so that
// no job can start after the shutdown began waiting.
type jobGroup struct {
	mu       sync.Mutex
	stopping bool
	wg       sync.WaitGroup
}

func (g *jobGroup) start() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopping {
		return false
	}
	g.wg.Add(1)
	return true
}

func (g *jobGroup) stop() {
	g.mu.Lock()
	g.stopping = true
	g.mu.Unlock()
}

// ErrRefreshRunning is returned by RefreshNow when a refresh is already
// running; the caller's run is skipped.
var ErrRefreshRunning = errors.New("a refresh is already running")

// RefreshNow runs one catalog refresh unless one is running already. It
// is what the schedule calls; Run must have opened the store.
func (b *Broker) RefreshNow(ctx context.Context) (*refresh.Report, error) {
	if !b.refreshing.TryLock() {
		b.log.Warn("refresh skipped: the previous one is still running")
		return nil, ErrRefreshRunning
	}
	defer b.refreshing.Unlock()
	if b.st == nil {
		return nil, errors.New("refresh: the broker is not running (no store open)")
	}
	targets, err := refresh.Plan(b.sources, b.cfg.Refresh.Clouds, b.cfg.Refresh.Regions)
	if err != nil {
		return nil, err
	}
	rep := refresh.Run(ctx, b.st, targets, refresh.Options{
		Concurrency: b.cfg.Refresh.Concurrency, FetchTimeout: b.cfg.Refresh.FetchTimeout,
		Now: b.now, Logger: b.log, Progress: refresh.LogProgress{Log: b.log},
	})
	attrs := []any{"refreshed", rep.Count(refresh.Refreshed), "empty", rep.Count(refresh.Empty),
		"failed", rep.Count(refresh.Failed), "took", rep.Finished.Sub(rep.Started).Round(time.Millisecond)}
	if err := rep.Err(); err != nil {
		b.log.Warn("refresh finished with failures; failed regions keep their stored offers", append(attrs, "err", err)...)
	} else {
		b.log.Info("refresh finished", attrs...)
	}
	return rep, nil
}

// cronLogger sends cron's own messages to slog.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug("cron: "+msg, kv...) }
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append(kv, "err", err)...)
}
