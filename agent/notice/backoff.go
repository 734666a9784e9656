package notice

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential backoff with full jitter. The zero value
// uses 200ms..10s. It is not safe for concurrent use; each loop owns one.
type Backoff struct {
	Min, Max time.Duration
	n        int
}

// Next returns the next wait.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 200 * time.Millisecond
	}
	if hi < lo {
		hi = max(lo, 10*time.Second)
	}
	d := lo << min(b.n, 20)
	if d > hi || d <= 0 {
		d = hi
	}
	b.n++
	// Half fixed, half jitter: a fleet of agents must not retry in step.
	return d/2 + rand.N(d/2+1)
}

// Reset starts over after a success.
func (b *Backoff) Reset() { b.n = 0 }

// Sleep waits d or until ctx is done; it reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Seen remembers notice IDs already emitted. It keeps the newest max IDs
// (a VM sees a handful of notices in its life; the cap only bounds memory
// against a misbehaving metadata server).
type Seen struct {
	max   int
	ids   map[string]struct{}
	order []string
}

// NewSeen returns a set holding up to max IDs (256 when max <= 0).
func NewSeen(max int) *Seen {
	if max <= 0 {
		max = 256
	}
	return &Seen{max: max, ids: map[string]struct{}{}}
}

// Add records id and reports whether it was new.
func (s *Seen) Add(id string) bool {
	if _, ok := s.ids[id]; ok {
		return false
	}
	s.ids[id] = struct{}{}
	s.order = append(s.order, id)
	if len(s.order) > s.max {
		delete(s.ids, s.order[0])
		s.order = s.order[1:]
	}
	return true
}

// Emit sends n on ch unless ctx ends first; it reports whether it was sent.
func Emit(ctx context.Context, ch chan<- Notice, n Notice) bool {
	select {
	case ch <- n:
		return true
	case <-ctx.Done():
		return false
	}
}
