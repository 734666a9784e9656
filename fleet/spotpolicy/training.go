// Package spotpolicy holds gpubroker's spot decision policies as pure logic:
// given what is known at a decision point (progress, time left, which spot
// pools have capacity now and how they behaved before), a policy says which
// capacity to run next. Nothing here talks to a cloud; fleet's control loop
// and the trace simulator (fleet/sim) call the same code.
//
// Training policies decide, once per tick, between waiting, on-demand and a
// spot pool for a job with a deadline (see docs/simulate.md). Inference
// policies decide how many spot replicas to hold in each zone and how many
// on-demand replicas to keep as a hedge.
package spotpolicy

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Capacity is what a training job runs on during a tick.
type Capacity int

// Capacities.
const (
	None     Capacity = iota // idle: no instance, no cost, no progress
	OnDemand                 // always available, full price
	Spot                     // one spot pool (Action.Pool), cheap while it has capacity
)

func (c Capacity) String() string {
	switch c {
	case OnDemand:
		return "on-demand"
	case Spot:
		return "spot"
	}
	return "none"
}

// Action is one tick's decision.
type Action struct {
	Capacity Capacity
	Pool     int // spot pool index; 0 otherwise
}

// Idle, RunOnDemand and RunSpot build actions.
var (
	Idle        = Action{Capacity: None}
	RunOnDemand = Action{Capacity: OnDemand}
)

// RunSpot is spot capacity in pool p.
func RunSpot(p int) Action { return Action{Capacity: Spot, Pool: p} }

func (a Action) String() string {
	if a.Capacity == Spot {
		return fmt.Sprintf("spot[%d]", a.Pool)
	}
	return a.Capacity.String()
}

// Pool is what a policy knows about one spot pool at a decision point. Only
// the past and the present are visible: the simulator fills it from the
// trace up to the current tick, fleet from the clouds' spot signals.
type Pool struct {
	// Available says spot capacity can be had in this tick.
	Available bool
	// Run is how many ticks the pool has been in its current state
	// (available or not), counting this one.
	Run int
	// Frac is the recent fraction of ticks with capacity (an exponentially
	// weighted mean; 0.5 when nothing is known).
	Frac float64
	// MeanUp is the recent mean length, in ticks, of an available stretch
	// (0 when none has been seen).
	MeanUp float64
}

// State is what a training policy sees at a tick boundary. Times are in
// seconds.
type State struct {
	Tick       int     // ticks since the job started
	Gap        float64 // seconds per tick
	Work       float64 // total work, seconds of compute
	Deadline   float64 // seconds after start the work must be done by
	Changeover float64 // seconds lost each time an instance starts
	Done       float64 // work done so far
	// Current is what ran in the previous tick and is still up: a spot
	// instance whose pool lost capacity has already become None.
	Current Action
	// Overhead is changeover still to be paid by the current instance.
	Overhead float64
	// Checkpoint is the work between two checkpoints (0: progress is saved
	// continuously). A preemption loses the work done since Saved, the
	// progress at the current instance's last checkpoint or start; a
	// voluntary stop checkpoints first and loses nothing.
	Checkpoint, Saved float64
	Pools             []Pool
	// Any summarises all pools together: available when at least one is.
	Any Pool
	// Spent is what the job has cost so far, and OnDemandPrice and
	// SpotPrice what an hour of each costs (USD), for policies that bound
	// their cost.
	Spent, OnDemandPrice, SpotPrice float64
}

// WorstCost is the most the job can cost in total if it takes a now, spot
// capacity is gone at the worst moment (right after the changeover), and the
// rest runs on on-demand.
func (s *State) WorstCost(a Action) float64 {
	rw := s.RemainingWork()
	odNeed := func(rw float64, onOD bool, ov float64) float64 {
		if !onOD {
			ov = s.Changeover
		}
		return (rw + ov) * s.OnDemandPrice / 3600
	}
	switch a.Capacity {
	case OnDemand:
		return s.Spent + odNeed(rw, s.Current.Capacity == OnDemand, s.Overhead)
	case Spot:
		ov := s.Changeover
		if s.Current == a {
			ov = s.Overhead
		}
		// The worst moment is when the changeover has just been paid: the
		// instance costs money every tick before it makes progress.
		ticks := math.Max(1, math.Ceil(ov/s.Gap))
		run := math.Min(ticks*s.Gap, ov+rw)
		prog := run - ov
		if prog < 0 {
			prog = 0
		}
		cost := s.Spent + run*s.SpotPrice/3600
		if prog >= rw {
			return cost
		}
		return cost + odNeed(s.Work-s.savedAfter(a, prog), false, 0)
	}
	return s.Spent + odNeed(rw, false, 0)
}

// OnDemandOnlyCost is what the whole job costs on on-demand alone.
func (s *State) OnDemandOnlyCost() float64 {
	return (s.Work + s.Changeover) * s.OnDemandPrice / 3600
}

// Elapsed is seconds since start.
func (s *State) Elapsed() float64 { return float64(s.Tick) * s.Gap }

// RemainingWork is work still to do.
func (s *State) RemainingWork() float64 { return math.Max(0, s.Work-s.Done) }

// RemainingTime is seconds to the deadline.
func (s *State) RemainingTime() float64 { return s.Deadline - s.Elapsed() }

// Slack is the time that can still be lost before the job must run on
// on-demand without pause: remaining time less remaining work and one
// changeover (none to pay when on-demand is already up).
func (s *State) Slack() float64 {
	need := s.Changeover
	if s.Current.Capacity == OnDemand {
		need = s.Overhead
	}
	return s.RemainingTime() - s.RemainingWork() - need
}

// eps absorbs float rounding in the deadline arithmetic.
const eps = 1e-6

// Safe reports whether taking a for one tick still leaves, in the worst case
// (spot capacity gone at the next tick), a finish by the deadline on
// on-demand. Running on-demand is always safe while the job is feasible.
func (s *State) Safe(a Action) bool {
	if a.Capacity == OnDemand {
		return true
	}
	rw, rt := s.RemainingWork(), s.RemainingTime()
	prog := 0.0
	ov := 0.0
	if a.Capacity == Spot {
		ov = s.Changeover
		if s.Current == a {
			ov = s.Overhead
		}
		prog = math.Max(0, s.Gap-ov)
	}
	if a.Capacity == Spot && prog >= rw {
		return ov+rw <= rt+eps // finishes within this tick on spot that is known to be there
	}
	left := rw - prog
	if a.Capacity == Spot {
		left = s.Work - s.savedAfter(a, prog) // a preemption loses what is not checkpointed
	}
	return left+s.Changeover <= rt-s.Gap+eps
}

// savedAfter is the progress safe from a preemption after running spot
// action a for a tick that makes prog progress.
func (s *State) savedAfter(a Action, prog float64) float64 {
	done := s.Done + prog
	if s.Checkpoint <= 0 {
		return done
	}
	base := s.Done // a new instance starts from a checkpoint
	if s.Current == a {
		base = s.Saved
	}
	return math.Max(base, math.Floor(done/s.Checkpoint)*s.Checkpoint)
}

// Guard is the safety net every policy ends with: it replaces an action
// that could make the deadline unreachable by on-demand, and a spot action
// on a pool without capacity by waiting.
func Guard(s *State, a Action) Action {
	if a.Capacity == Spot && (a.Pool < 0 || a.Pool >= len(s.Pools) || !s.Pools[a.Pool].Available) {
		a = Idle
	}
	if !s.Safe(a) {
		return RunOnDemand
	}
	return a
}

// Training decides a training job's capacity tick by tick. A Training holds
// per-run state (hysteresis, "on-demand for good"): make one per run with
// NewTraining.
type Training interface {
	Name() string
	// Decide is called once per tick, in order, from tick 0.
	Decide(s *State) Action
}

// Training policy names.
const (
	PolicyOnDemand        = "on-demand"
	PolicyGreedy          = "greedy"
	PolicyUniformProgress = "uniform-progress"
	PolicyAdaptive        = "adaptive"
)

// DefaultTraining is the policy gpubroker uses unless told otherwise.
const DefaultTraining = PolicyAdaptive

// TrainingPolicies lists the selectable policy names.
func TrainingPolicies() []string {
	return []string{PolicyOnDemand, PolicyGreedy, PolicyUniformProgress, PolicyAdaptive}
}

// NewTraining returns a fresh policy by name.
func NewTraining(name string) (Training, error) {
	switch name {
	case PolicyOnDemand:
		return onDemandOnly{}, nil
	case PolicyGreedy:
		return &greedy{}, nil
	case PolicyUniformProgress:
		return &uniformProgress{}, nil
	case PolicyAdaptive:
		return NewAdaptive(DefaultAdaptiveConfig()), nil
	}
	return nil, fmt.Errorf("unknown training policy %q; want one of %s", name, strings.Join(TrainingPolicies(), ", "))
}

type onDemandOnly struct{}

func (onDemandOnly) Name() string         { return PolicyOnDemand }
func (onDemandOnly) Decide(*State) Action { return RunOnDemand }

func firstAvailable(s *State) (int, bool) { return bestPool(s, func(Pool) float64 { return 0 }) }
func keepOrFirst(s *State) (int, bool)    { return keepOr(s, firstAvailable) }

// keepOr keeps the current spot pool while it has capacity, else asks f.
func keepOr(s *State, f func(*State) (int, bool)) (int, bool) {
	if s.Current.Capacity == Spot && s.Pools[s.Current.Pool].Available {
		return s.Current.Pool, true
	}
	return f(s)
}

// bestPool returns the available pool with the highest score (lowest index
// on ties).
func bestPool(s *State, score func(Pool) float64) (int, bool) {
	best, bestScore := -1, math.Inf(-1)
	for i, p := range s.Pools {
		if !p.Available {
			continue
		}
		if sc := score(p); best < 0 || sc > bestScore {
			best, bestScore = i, sc
		}
	}
	return best, best >= 0
}

// greedy runs spot whenever some pool has capacity and waits otherwise,
// until the safety net moves it to on-demand for good.
type greedy struct{ forGood bool }

func (*greedy) Name() string { return PolicyGreedy }

func (g *greedy) Decide(s *State) Action {
	if g.forGood {
		return RunOnDemand
	}
	a := Idle
	if p, ok := keepOrFirst(s); ok {
		a = RunSpot(p)
	}
	if a = Guard(s, a); a.Capacity == OnDemand {
		g.forGood = true
	}
	return a
}

// uniformProgress is the policy of "Can't Be Late" (Wu et al., NSDI'24):
// keep progress on or above the straight line from (0, 0) to (deadline,
// work); run spot whenever it is available (even when behind) and until it
// is preempted; when behind and idle, run on-demand, and once on on-demand
// stay there until progress is ahead of the line 2 changeovers from now
// (hysteresis); and the safety net, after which on-demand is kept to the end.
type uniformProgress struct{ forGood bool }

func (*uniformProgress) Name() string { return PolicyUniformProgress }

func (u *uniformProgress) Decide(s *State) Action {
	if u.forGood {
		return RunOnDemand
	}
	line := func(t float64) float64 { return t * s.Work / s.Deadline }
	t := s.Elapsed()
	a := Idle
	switch p, spot := keepOrFirst(s); {
	case s.Current.Capacity == OnDemand && s.Done < line(t+2*s.Changeover):
		a = RunOnDemand // hysteresis
	case spot:
		a = RunSpot(p)
	case s.Done < line(t):
		a = RunOnDemand
	}
	g := Guard(s, a)
	if g != a {
		u.forGood = true
	}
	return g
}

// sortedPools returns pool indices ordered by descending score.
func sortedPools(n int, score func(int) float64) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	// (sort.SliceStable's order, without its reflection: a before b only
	// when a scores more.)
	slices.SortStableFunc(idx, func(a, b int) int {
		sa, sb := score(a), score(b)
		switch {
		case sa > sb:
			return -1
		case sb > sa:
			return 1
		}
		return 0
	})
	return idx
}
