package broker

import (
	"context"
	"sync"
)

// group runs the daemon's long-running parts with a shared context: the
// first member to fail cancels the others, and wait returns once every
// member has returned.
type group struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

func newGroup(parent context.Context) *group {
	ctx, cancel := context.WithCancelCause(parent)
	return &group{ctx: ctx, cancel: cancel}
}

// Go starts a member. A member returns nil when its context ends normally.
func (g *group) Go(fn func(ctx context.Context) error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := fn(g.ctx); err != nil {
			g.once.Do(func() {
				g.err = err
				g.cancel(err)
			})
		}
	}()
}

// Wait waits for all members and returns the first error.
func (g *group) Wait() error {
	g.wg.Wait()
	g.cancel(nil)
	return g.err
}
