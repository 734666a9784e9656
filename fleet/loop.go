package fleet

import (
	"context"
	"errors"
	"time"

	"github.com/gpubroker/gpubroker/store"
)

// Leader says whether this replica leads: the lease term's epoch, a channel
// closed when the term ends, and ok. broker.Elector.Leading implements it.
type Leader func() (epoch int64, lost <-chan struct{}, ok bool)

// Loop runs reconcile passes while this replica leads: every Interval, and
// at once after Kick (a preemption notice, a drain report, a pause).
type Loop struct {
	Reconciler *Reconciler
	Leading    Leader
	// Lease and Holder name the leader lease, for the fence.
	Lease    string
	Holder   string
	Interval time.Duration

	kick chan struct{}
}

// Kick asks for a pass as soon as possible; it never blocks.
func (l *Loop) Kick() {
	if l.kick == nil {
		return
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Init prepares Kick before Run starts (so callers may kick early).
func (l *Loop) Init() {
	if l.kick == nil {
		l.kick = make(chan struct{}, 1)
	}
}

// Run runs until ctx ends. A pass runs under the lease term it started in
// and is cancelled when the term ends.
func (l *Loop) Run(ctx context.Context) error {
	l.Init()
	if l.Interval <= 0 {
		l.Interval = 10 * time.Second
	}
	r := l.Reconciler
	r.init()
	t := time.NewTicker(l.Interval)
	defer t.Stop()
	var lastEpoch int64
	for {
		if epoch, lost, ok := l.Leading(); ok {
			if epoch != lastEpoch {
				r.NewTerm()
				lastEpoch = epoch
			}
			pctx, cancel := context.WithCancel(ctx)
			go func() {
				select {
				case <-lost:
					cancel()
				case <-pctx.Done():
				}
			}()
			rep, err := r.Reconcile(pctx, store.Fence{Lease: l.Lease, Holder: l.Holder, Epoch: epoch, Now: r.Now()})
			cancel()
			switch {
			case errors.Is(err, store.ErrFenced):
				r.Log.Info("reconcile pass stopped: leadership moved on", "epoch", epoch)
			case err != nil && ctx.Err() == nil:
				r.Log.Error("reconcile pass failed", "err", err)
			case err == nil && anyDone(rep.Actions):
				r.Log.Info("reconcile pass", "mode", rep.Mode, "paused", rep.Paused, "slots", rep.Slots, "instances", rep.Instances,
					"actions", len(rep.Actions), "took", rep.Took.Round(time.Millisecond))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-l.kick:
		}
	}
}

func anyDone(as []Action) bool {
	for _, a := range as {
		if a.Done {
			return true
		}
	}
	return false
}
