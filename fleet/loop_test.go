package fleet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoopActsOnlyWhileLeading: a follower's loop launches nothing; once it
// leads (with the lease it really holds), a kick runs a pass at once.
func TestLoopActsOnlyWhileLeading(t *testing.T) {
	e := newEnv(t, testPolicy)
	var leading atomic.Bool
	lost := make(chan struct{})
	l := &Loop{Reconciler: e.r, Lease: lease, Holder: e.holder, Interval: time.Hour,
		Leading: func() (int64, <-chan struct{}, bool) {
			if !leading.Load() {
				return 0, nil, false
			}
			return e.epoch, lost, true
		}}
	l.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	time.Sleep(100 * time.Millisecond)
	if n := len(e.cloud.Instances()); n != 0 {
		t.Fatalf("a follower launched %d instances", n)
	}
	leading.Store(true)
	l.Kick()
	deadline := time.Now().Add(10 * time.Second)
	for len(liveTagged(e.cloud)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the leader's loop did not launch after a kick")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if last := e.r.Last(); last.Epoch != e.epoch || len(last.Actions) == 0 {
		t.Fatalf("last pass %+v", last)
	}
}
