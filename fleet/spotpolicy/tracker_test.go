package spotpolicy

import (
	"testing"
	"time"
)

func TestLiveTrackerTicks(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var l LiveTracker // 1-minute ticks
	if p := l.Pool("a", t0); !p.Available || p.Frac != 0.5 || l.Known("a") {
		t.Fatalf("unknown pool: %+v", p)
	}
	l.Observe("a", t0, true)
	l.Observe("a", t0.Add(10*time.Minute), false)
	p := l.Pool("a", t0.Add(12*time.Minute+30*time.Second))
	// 10 up ticks, then ticks 10, 11 and the current one down.
	if p.Available || p.Run != 3 {
		t.Fatalf("after loss: %+v, want down for 3 ticks", p)
	}
	if p.MeanUp != 10 {
		t.Errorf("MeanUp %v, want 10", p.MeanUp)
	}
	if p.Frac <= 0.5 || p.Frac >= 0.51 {
		t.Errorf("Frac %v: 10 up then 3 down ticks from 0.5 with a 12 h half-life", p.Frac)
	}
	// The same feed through a per-tick Tracker gives the same view.
	tr := NewTracker(60)
	for i := 0; i < 13; i++ {
		tr.Observe(i < 10)
	}
	if got := tr.View(); got != p {
		t.Errorf("live %+v, per-tick %+v", p, got)
	}
	// A loss inside the current tick counts; an old "available" does not.
	l.Observe("a", t0.Add(20*time.Minute), true)
	l.Observe("a", t0.Add(19*time.Minute), true)
	if p := l.Pool("a", t0.Add(20*time.Minute)); !p.Available {
		t.Errorf("recovered pool: %+v", p)
	}
	l.Observe("a", t0.Add(19*time.Minute+59*time.Second), false)
	if p := l.Pool("a", t0.Add(20*time.Minute+10*time.Second)); p.Available {
		t.Errorf("a loss inside the current tick was dropped: %+v", p)
	}
	// A week of silence stays cheap and keeps the state.
	if p := l.Pool("a", t0.Add(7*24*time.Hour)); p.Available || p.Run < 10000 {
		t.Errorf("after a week: %+v", p)
	}
}

// TestLiveTrackerSeed: a pool seeded from a running instance looks
// available for as long as the instance ran, with that stretch as its mean
// up time; a known pool is not reseeded; a seed in the future is ignored.
func TestLiveTrackerSeed(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var l LiveTracker
	l.Seed("a", t0, t0.Add(10*time.Hour))
	p := l.Pool("a", t0.Add(10*time.Hour))
	if !p.Available || p.Run < 600 || p.MeanUp < 600 || p.Frac <= 0.6 {
		t.Fatalf("seeded pool %+v: want available, a 10 h run and mean, Frac up from 0.5", p)
	}
	l.Observe("b", t0.Add(9*time.Hour), false)
	l.Seed("b", t0, t0.Add(10*time.Hour))
	if p := l.Pool("b", t0.Add(10*time.Hour)); p.Available {
		t.Fatalf("a known pool was reseeded: %+v", p)
	}
	l.Seed("c", t0.Add(time.Hour), t0)
	if l.Known("c") {
		t.Fatal("a seed after now was recorded")
	}
}
