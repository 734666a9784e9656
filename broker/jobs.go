package broker

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Job is a background job run on a cron schedule by the leader only.
type Job struct {
	Name string
	// Schedule is a cron expression ("*/15 * * * *") or a descriptor
	// ("@hourly", "@every 10m").
	Schedule string
	// OnLeadership also runs the job once each time this replica becomes
	// the leader (one run per lease epoch).
	OnLeadership bool
	Run          func(ctx context.Context) error
}

type slotKey struct{}

// JobSlot returns the scheduled time of the run a job's context belongs to.
func JobSlot(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(slotKey{}).(time.Time)
	return t, ok
}

// JobStore records job runs; *store.Broker implements it.
type JobStore interface {
	ClaimJobRun(ctx context.Context, leaseName, job string, slot time.Time, holder string, epoch int64, now time.Time) (int64, bool, error)
	FinishJobRun(ctx context.Context, id int64, now time.Time, runErr error) error
}

// JobMetrics observes job runs.
type JobMetrics interface {
	JobRan(job, result string, d time.Duration)
}

// Scheduler runs jobs at their scheduled slots while this replica leads.
//
// Overlap protection is by construction: each job has one loop that runs
// it synchronously and then waits for the next slot after it finished, so a
// run that overruns makes the following slots skip, never overlap. Across
// replicas, the lease gates who runs, and the (job, slot) claim in the
// database makes a slot run at most once even during a takeover.
type Scheduler struct {
	Jobs      []Job
	Elector   *Elector
	Store     JobStore
	LeaseName string
	Now       func() time.Time
	Log       *slog.Logger
	Metrics   JobMetrics
	// Grace bounds how long in-flight jobs may run on after shutdown starts.
	Grace time.Duration

	sleep func(ctx context.Context, d time.Duration) bool
}

// slotSchedule computes deterministic slots: the same on every replica, so
// replicas claim the same (job, slot) keys.
type slotSchedule interface{ Next(time.Time) time.Time }

// alignedEvery is "@every d" aligned to multiples of d since the Unix
// epoch (robfig's ConstantDelaySchedule counts from process start, which
// would give every replica different slots).
type alignedEvery struct{ d time.Duration }

func (a alignedEvery) Next(t time.Time) time.Time { return t.Truncate(a.d).Add(a.d) }

func parseSchedule(spec string) (slotSchedule, error) {
	// "@every" is parsed here: robfig rounds it up to whole seconds.
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d < 10*time.Millisecond {
			return nil, fmt.Errorf("schedule %q: want @every with a duration of at least 10ms, like \"@every 10m\"", spec)
		}
		return alignedEvery{d: d}, nil
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w; use a cron expression like \"*/15 * * * *\" or \"@every 10m\"", spec, err)
	}
	return s, nil
}

// Validate checks every job's schedule.
func (s *Scheduler) Validate() error {
	for _, j := range s.Jobs {
		if _, err := parseSchedule(j.Schedule); err != nil {
			return fmt.Errorf("job %s: %w", j.Name, err)
		}
	}
	return nil
}

// Run runs the job loops until ctx ends, then waits (up to Grace) for
// in-flight runs to finish.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.sleep == nil {
		s.sleep = sleepCtx
	}
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	var wg sync.WaitGroup
	for _, j := range s.Jobs {
		sched, err := parseSchedule(j.Schedule)
		if err != nil {
			return fmt.Errorf("job %s: %w", j.Name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.loop(ctx, hard, j, sched)
		}()
	}
	<-ctx.Done()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.Grace):
		s.Log.Warn("jobs still running after the shutdown grace period; cancelling them", "grace", s.Grace)
		cancelHard()
		<-done
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (s *Scheduler) loop(ctx, hard context.Context, j Job, sched slotSchedule) {
	var lastEpoch int64
	for {
		if j.OnLeadership {
			// Poll for a new term between slots; the slot key of such a run
			// is derived from the epoch so each term runs it once.
			if epoch, _, ok := s.Elector.Leading(); ok && epoch != lastEpoch {
				lastEpoch = epoch
				s.runSlot(hard, j, LeadershipSlot(epoch))
			}
			next := sched.Next(s.Now())
			// Leading() is an in-memory check, so polling it is cheap.
			wait := min(time.Until(next), 250*time.Millisecond)
			if !s.sleep(ctx, wait) {
				return
			}
			if !s.Now().Before(next) {
				s.runSlot(hard, j, next)
			}
			continue
		}
		slot := sched.Next(s.Now())
		if !s.sleep(ctx, time.Until(slot)) {
			return
		}
		s.runSlot(hard, j, slot)
	}
}

// LeadershipSlot is the slot key of an OnLeadership run in lease epoch
// epoch: epoch seconds after the Unix epoch. Whole seconds survive every
// database's timestamp precision (PostgreSQL keeps microseconds, so
// nanosecond keys of successive epochs were all stored as the same
// instant and every term after the first found its slot taken), and no
// cron slot is ever that close to 1970.
func LeadershipSlot(epoch int64) time.Time { return time.Unix(epoch, 0).UTC() }

// runSlot runs j for slot if this replica leads and wins the claim. The
// job's context ends when leadership is lost or the hard stop comes, but not
// on a normal shutdown, so in-flight jobs finish.
func (s *Scheduler) runSlot(hard context.Context, j Job, slot time.Time) {
	epoch, lost, ok := s.Elector.Leading()
	if !ok {
		return
	}
	id, claimed, err := s.Store.ClaimJobRun(hard, s.LeaseName, j.Name, slot, s.Elector.Holder, epoch, s.Now())
	if err != nil {
		s.Log.Error("claiming job run", "job", j.Name, "err", err)
		return
	}
	if !claimed {
		s.Metrics.JobRan(j.Name, "skipped", 0)
		return
	}
	jctx, cancel := context.WithCancel(context.WithValue(hard, slotKey{}, slot))
	go func() {
		select {
		case <-lost:
			cancel()
		case <-jctx.Done():
		}
	}()
	start := time.Now()
	runErr := safeRun(jctx, j)
	cancel()
	d := time.Since(start)
	result := "ok"
	if runErr != nil {
		result = "error"
		s.Log.Error("job failed", "job", j.Name, "slot", slot, "err", runErr)
	} else {
		s.Log.Debug("job done", "job", j.Name, "slot", slot, "duration", d)
	}
	s.Metrics.JobRan(j.Name, result, d)
	if err := s.Store.FinishJobRun(context.WithoutCancel(hard), id, s.Now(), runErr); err != nil {
		s.Log.Error("recording job run", "job", j.Name, "err", err)
	}
}

// safeRun turns a panicking job into an error so one bad job cannot take
// the daemon down.
func safeRun(ctx context.Context, j Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("job %s panicked: %v\n%s", j.Name, r, debug.Stack())
		}
	}()
	return j.Run(ctx)
}
