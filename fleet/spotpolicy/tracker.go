package spotpolicy

import (
	"math"
	"sync"
	"time"
)

// FracHalfLife is the half-life of a pool's recent availability (Pool.Frac)
// in the simulator and in the live fleet alike.
const FracHalfLife = 12 * time.Hour

// Tracker keeps what a policy may know about one pool from its past, one
// observation per tick. The simulator feeds it from traces; LiveTracker
// feeds it from the clouds' live spot signals.
type Tracker struct {
	alpha  float64 // weight of a new tick in Frac
	p      Pool
	upRuns int
}

// NewTracker returns a tracker for ticks of gap seconds.
func NewTracker(gap float64) Tracker {
	return Tracker{alpha: 1 - math.Exp2(-gap/FracHalfLife.Seconds()), p: Pool{Frac: 0.5}}
}

// Observe records one tick: spot capacity was there or not.
func (t *Tracker) Observe(avail bool) {
	if avail == t.p.Available && t.p.Run > 0 {
		t.p.Run++
	} else {
		if t.p.Available && t.p.Run > 0 { // an up stretch ended
			t.upRuns++
			w := math.Max(0.2, 1/float64(t.upRuns))
			t.p.MeanUp += w * (float64(t.p.Run) - t.p.MeanUp)
		}
		t.p.Available, t.p.Run = avail, 1
	}
	x := 0.0
	if avail {
		x = 1
	}
	t.p.Frac += t.alpha * (x - t.p.Frac)
}

// View is the pool as a policy sees it: the current up stretch counts
// towards the mean so a long one is not underrated.
func (t *Tracker) View() Pool {
	v := t.p
	if v.Available && float64(v.Run) > v.MeanUp {
		v.MeanUp = float64(v.Run)
	}
	return v
}

// LiveTracker turns live, irregular spot signals (a launch refused for
// capacity, a preemption notice, an instance running) into the per-tick
// Pool view the policies were built on: a pool keeps the state of its last
// signal until the next one, and each whole tick of Gap between them counts
// as one observation. A pool nothing was heard of looks available with
// Frac 0.5, as in the simulator. Safe for concurrent use.
type LiveTracker struct {
	// Gap is the tick length (default 1 minute).
	Gap time.Duration

	mu    sync.Mutex
	pools map[string]*livePool
}

type livePool struct {
	t     Tracker
	avail bool
	at    time.Time // start of the first tick not yet observed
}

func (l *LiveTracker) gap() time.Duration {
	if l.Gap <= 0 {
		return time.Minute
	}
	return l.Gap
}

// advance observes the whole ticks between p.at and now in p's state.
func (l *LiveTracker) advance(p *livePool, now time.Time) {
	g := l.gap()
	for !p.at.Add(g).After(now) {
		// Long silences: after ~16 half-lives more ticks change nothing
		// but Run; jump ahead in one step.
		n := int(now.Sub(p.at) / g)
		if n > 4096 {
			skip := n - 4096
			p.t.p.Run += skip
			p.at = p.at.Add(time.Duration(skip) * g)
			continue
		}
		p.t.Observe(p.avail)
		p.at = p.at.Add(g)
	}
}

// Observe records a signal for the pool at a time: available (an instance
// came up or runs on spot there) or not (a launch was refused for capacity,
// a spot instance was preempted). Signals older than the pool's last are
// ignored.
func (l *LiveTracker) Observe(pool string, at time.Time, available bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pools == nil {
		l.pools = map[string]*livePool{}
	}
	p := l.pools[pool]
	if p == nil {
		p = &livePool{t: NewTracker(l.gap().Seconds()), avail: available, at: at}
		l.pools[pool] = p
		return
	}
	if at.Before(p.at) {
		if available != p.avail && !available {
			// A loss inside the current tick still counts.
			p.avail = available
		}
		return
	}
	l.advance(p, at)
	p.avail = available
}

// Pool is the policy's view of the pool at now, the current (unfinished)
// tick counted in the pool's latest state.
func (l *LiveTracker) Pool(pool string, now time.Time) Pool {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pools[pool]
	if p == nil {
		return Pool{Available: true, Run: 1, Frac: 0.5}
	}
	l.advance(p, now)
	t := p.t
	t.Observe(p.avail)
	return t.View()
}

// Seed gives a pool nothing was heard of the history a running spot
// instance vouches for: available since since (a replica of ours has run
// there, unpreempted, from then to now), with that stretch taken as the
// pool's typical up stretch so far. A new leader, whose trackers start
// empty, then does not treat pools it has run in for hours as unknown
// (which makes the policies fall back to on-demand until they have watched
// them again). Known pools are left alone.
func (l *LiveTracker) Seed(pool string, since, now time.Time) {
	if !since.Before(now) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pools == nil {
		l.pools = map[string]*livePool{}
	}
	if l.pools[pool] != nil {
		return
	}
	p := &livePool{t: NewTracker(l.gap().Seconds()), avail: true, at: since}
	l.advance(p, now)
	if p.t.upRuns == 0 {
		p.t.upRuns = 1
		p.t.p.MeanUp = float64(p.t.p.Run)
	}
	l.pools[pool] = p
}

// Known says whether any signal was heard from the pool.
func (l *LiveTracker) Known(pool string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pools[pool] != nil
}
