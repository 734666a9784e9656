package spotpolicy

import "math"

// AdaptiveConfig are the knobs of the adaptive policy.
type AdaptiveConfig struct {
	// Risk scales the expected spot-less time still to come when deciding
	// whether on-demand is needed now (1 = trust the pools' recent
	// availability; higher = start on-demand earlier).
	Risk float64
	// LeaveOnDemand is how many changeovers a pool's expected stretch of
	// capacity must last before an on-demand run is left for it: leaving
	// costs a changeover now and another one when spot goes away again.
	LeaveOnDemand float64
	// StopOnDemand is the extra slack, in changeovers, above the expected
	// need before an on-demand run is stopped while no spot can be had.
	StopOnDemand float64
	// CostCap bounds every run's cost as a multiple of on-demand only: a
	// spot start, or a pause of on-demand, is taken only while the worst
	// case after it (capacity gone at once, the rest on on-demand) stays
	// within the cap. 0 disables the bound.
	CostCap float64
}

// DefaultAdaptiveConfig is tuned on the 1-node AWS availability traces
// (docs/BENCHMARKS.md).
func DefaultAdaptiveConfig() AdaptiveConfig {
	return AdaptiveConfig{Risk: 0.4, LeaveOnDemand: 3, StopOnDemand: 15, CostCap: 1.05}
}

// Adaptive is gpubroker's default training policy. Compared with
// uniform-progress it
//   - treats every zone, region and cloud as an alternative spot pool: when
//     its pool loses capacity it moves to the pool with the best recent
//     availability instead of waiting or paying for on-demand;
//   - decides whether on-demand is needed from the pools' recent
//     availability (the spot-less time to expect before the deadline against
//     the slack left), not from a fixed straight line, so on a pool that is
//     nearly always up it waits out short outages and on one that is rarely
//     up it runs on-demand early instead of paying changeovers for short
//     spot stretches;
//   - leaves on-demand only for a pool whose stretches last long enough to
//     repay the two changeovers;
//   - keeps the same safety net as the other policies.
type Adaptive struct {
	cfg AdaptiveConfig
}

// NewAdaptive returns an adaptive policy with cfg.
func NewAdaptive(cfg AdaptiveConfig) *Adaptive { return &Adaptive{cfg: cfg} }

// Name implements Training.
func (*Adaptive) Name() string { return PolicyAdaptive }

// expectedUp estimates how many more ticks pool p keeps capacity.
func expectedUp(p Pool) float64 {
	if p.MeanUp <= 0 {
		return 1
	}
	return math.Max(1, p.MeanUp)
}

func poolScore(p Pool) float64 { return p.Frac*1000 + expectedUp(p) }

// Decide implements Training.
func (a *Adaptive) Decide(s *State) Action {
	pool, spot := keepOr(s, func(s *State) (int, bool) { return bestPool(s, poolScore) })
	// Expected time without any spot until the deadline, against the slack.
	f := s.Any.Frac
	shortfall := a.cfg.Risk*(1-f)*s.RemainingTime() - s.Slack()
	if s.Checkpoint > 0 {
		// Work preemptions will throw away: one per expected stretch, half
		// a checkpoint interval (at most the stretch) each.
		stretch := math.Max(1, s.Any.MeanUp) * s.Gap
		shortfall += f * s.RemainingTime() / stretch * math.Min(s.Checkpoint, stretch) / 2
	}
	needOD := shortfall > 0
	act := Idle
	switch {
	case s.Current.Capacity == OnDemand:
		act = RunOnDemand
		if spot && s.Current.Capacity == OnDemand && expectedUp(s.Pools[pool])*s.Gap >= a.cfg.LeaveOnDemand*s.Changeover {
			act = RunSpot(pool)
		} else if !spot && shortfall < -a.cfg.StopOnDemand*s.Changeover {
			act = Idle
		}
	case spot:
		act = RunSpot(pool)
	case needOD:
		act = RunOnDemand
	}
	// Running spot without checkpoints can raise the worst case too.
	check := act != s.Current || (act.Capacity == Spot && s.Checkpoint > 0)
	if a.cfg.CostCap > 0 && act != RunOnDemand && check && s.WorstCost(act) > a.cfg.CostCap*s.OnDemandOnlyCost() {
		// Over budget in the worst case: keep what runs, else on-demand.
		act = RunOnDemand
		if s.Current.Capacity == None && s.WorstCost(Idle) <= a.cfg.CostCap*s.OnDemandOnlyCost() && !needOD {
			act = Idle
		}
	}
	return Guard(s, act)
}
