package broker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/store"
)

// LeaseStore is the database side of leader election; *store.Broker
// implements it.
type LeaseStore interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (store.Lease, bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error
}

// Elector keeps trying to hold a lease row in the shared database. The
// holder leads: it runs background jobs and the control loop. A leader
// renews every Renew; when it dies, its lease expires after TTL and another
// replica takes over on its next try, so failover takes at most TTL+Renew.
// Each takeover increments the lease epoch, which fences job runs (see
// store.ClaimJobRun).
type Elector struct {
	Store  LeaseStore
	Name   string // lease name, e.g. "broker-leader"
	Holder string // this replica's unique id
	TTL    time.Duration
	Renew  time.Duration
	Now    func() time.Time
	Log    *slog.Logger
	// OnChange is called (from the elector's goroutine) when leadership is
	// gained or lost.
	OnChange func(leading bool)
	// Release, when true, gives the lease up on a clean stop so another
	// replica takes over at once. Tests turn it off to simulate a crash.
	Release bool

	mu         sync.Mutex
	leading    bool
	epoch      int64
	validUntil time.Time
	lost       chan struct{} // closed when the current term ends
}

// Leading reports whether this replica leads now, with the lease epoch and
// a channel closed when this term ends.
func (e *Elector) Leading() (epoch int64, lost <-chan struct{}, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.leading || !e.Now().Before(e.validUntil) {
		return 0, nil, false
	}
	return e.epoch, e.lost, true
}

func (e *Elector) set(leading bool, epoch int64, validUntil time.Time) {
	e.mu.Lock()
	changed := leading != e.leading || (leading && epoch != e.epoch)
	if changed && e.leading && e.lost != nil {
		close(e.lost)
		e.lost = nil
	}
	if changed && leading {
		e.lost = make(chan struct{})
	}
	e.leading, e.epoch, e.validUntil = leading, epoch, validUntil
	e.mu.Unlock()
	if changed {
		if leading {
			e.Log.Info("became leader", "holder", e.Holder, "epoch", epoch)
		} else {
			e.Log.Info("lost leadership", "holder", e.Holder)
		}
		if e.OnChange != nil {
			e.OnChange(leading)
		}
	}
}

// Run campaigns until ctx ends.
func (e *Elector) Run(ctx context.Context) error {
	t := time.NewTicker(e.Renew)
	defer t.Stop()
	for {
		e.try(ctx)
		select {
		case <-ctx.Done():
			e.stop()
			return nil
		case <-t.C:
		}
	}
}

func (e *Elector) try(ctx context.Context) {
	// The term is measured from before the request, so a slow round trip
	// can only shorten what this replica believes, never lengthen it.
	start := e.Now()
	tctx, cancel := context.WithTimeout(ctx, e.Renew)
	defer cancel()
	l, ok, err := e.Store.AcquireLease(tctx, e.Name, e.Holder, e.TTL, start)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			e.Log.Warn("leader lease renewal failed", "err", err)
		}
		// Keep leading until the lease we last got runs out.
		e.mu.Lock()
		expired := !e.Now().Before(e.validUntil)
		e.mu.Unlock()
		if expired {
			e.set(false, 0, time.Time{})
		}
	case ok:
		e.set(true, l.Epoch, start.Add(e.TTL))
	default:
		e.set(false, 0, time.Time{})
	}
}

func (e *Elector) stop() {
	_, _, leading := e.Leading()
	e.set(false, 0, time.Time{})
	if leading && e.Release {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Store.ReleaseLease(ctx, e.Name, e.Holder); err != nil {
			e.Log.Warn("releasing leader lease", "err", err)
		}
	}
}
