package httpapi

import (
	"context"
	"errors"
	"sync"

	"github.com/gpubroker/gpubroker/store"
)

// heartbeatBatcher group-commits heartbeats: requests that arrive while a
// commit is in flight are written together in the next transaction, and
// each request is answered only after the transaction holding it has
// committed. Under load this turns thousands of tiny transactions into a
// few large ones without acknowledging anything that is not yet durable.
// It needs no goroutine of its own: one of the waiting requests does the
// commit.
type heartbeatBatcher struct {
	store Store

	mu         sync.Mutex
	pending    []*beatReq
	committing bool
}

type beatReq struct {
	up   store.HeartbeatUpdate
	done chan error
}

// errYourTurn tells a waiting request to commit the next batch itself.
var errYourTurn = errors.New("commit the next batch")

// maxBatch bounds one transaction.
const maxBatch = 512

func newHeartbeatBatcher(s Store) *heartbeatBatcher { return &heartbeatBatcher{store: s} }

// record stores one heartbeat and returns once it is committed (nil), the
// instance is unknown (store.ErrNotFound) or the write failed.
func (b *heartbeatBatcher) record(ctx context.Context, up store.HeartbeatUpdate) error {
	req := &beatReq{up: up, done: make(chan error, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, req)
	if b.committing {
		b.mu.Unlock()
		// Wait even if ctx ends: the write may already be in a
		// transaction, and the batch's committer needs our channel.
		if err := <-req.done; !errors.Is(err, errYourTurn) {
			return err
		}
		b.mu.Lock()
	}
	b.committing = true
	n := min(len(b.pending), maxBatch)
	batch := b.pending[:n:n]
	b.pending = b.pending[n:]
	b.mu.Unlock()

	ups := make([]store.HeartbeatUpdate, len(batch))
	for i, r := range batch {
		ups[i] = r.up
	}
	// The commit serves other requests too, so one client going away must
	// not cancel it.
	errs, err := b.store.Heartbeats(context.WithoutCancel(ctx), ups)
	var mine error
	for i, r := range batch {
		e := err
		if e == nil {
			e = errs[i]
		}
		if r == req {
			mine = e
			continue
		}
		r.done <- e
	}

	b.mu.Lock()
	if len(b.pending) > 0 {
		// Hand the committer role to the oldest waiter.
		b.pending[0].done <- errYourTurn
	} else {
		b.committing = false
	}
	b.mu.Unlock()
	return mine
}
