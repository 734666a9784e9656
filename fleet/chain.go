package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// ChainConfig is what the reconciler's plan sources need. The broker
// (`gpubroker serve`) and the fleet simulator (`gpubroker simulate fleet`)
// both build their chain with NewPlanChain, so the simulator runs the
// controller users run.
type ChainConfig struct {
	Catalog func() *pricing.Catalog
	Policy  func() *policy.Policy
	Now     func() time.Time
	Log     *slog.Logger
	// Load is the inference services' live load (agents' utilisation,
	// Prometheus); nil leaves services at the plan's replicas.
	Load LoadSource
	// StopScaling says a stop-scaling budget over the workload is spent.
	StopScaling func(ctx context.Context, w policy.Workload, now time.Time) bool
	// SpotOnly says a spot-only budget over the workload is spent; nil
	// leaves workloads as written (SpotOnlySource).
	SpotOnly func(ctx context.Context, w policy.Workload, now time.Time) bool
	// Fleet is the fleet's stored slots; with it the live training stage
	// runs each deadline job's spot policy (TrainingSource). Progress is
	// what the jobs reported (nil: estimated), SpeedRatio their measured
	// speed against the planned one, Training the stage's settings.
	Fleet      FleetReader
	Progress   ProgressSource
	SpeedRatio func(cloud pricing.Cloud, instanceType string) float64
	Training   TrainingConfig
	// PrefetchLoad samples the services' load while the inner stages plan
	// (ScaledSource.Prefetch), and the hedging stage reads the fleet and
	// the agents' heartbeats then (HedgedSource.Prefetch); the fleet
	// simulator sets it.
	PrefetchLoad bool
	// IncrementalReplan makes the solver re-plan only the workloads a pool
	// block or a removed workload touches (SolverSource.Incremental); the
	// fleet simulator sets it, the broker does not.
	IncrementalReplan bool
	// ReusePlanMemory lets the training, autoscaling and hedging stages
	// build each plan's placements in the memory of their plan before the
	// last (placementBufs): for a reader of the chain that keeps no plan
	// beyond the next one. The fleet simulator sets it; the broker must
	// not (Diff reads the last pass's plan after later re-plans).
	ReusePlanMemory bool
	// SplitStages plans the training stage beside the autoscaling and
	// hedging stages, from the solver's plan (split.go): the same plan,
	// the two sides on two goroutines. An error of the training stage is
	// still the chain's, but the other stages have planned by then. The
	// fleet simulator sets it.
	SplitStages bool
	// Hedge, with Fleet set, turns on live spot hedging of inference
	// services (HedgedSource) on the autoscaled target; Agents tells
	// ready replicas by their heartbeats.
	Hedge  *HedgeOptions
	Agents Agents
	// Shortfall keeps the hedged services' time below target, so their
	// availability goals' error budgets outlive the leader
	// (HedgedSource.Shortfall); nil keeps them in memory.
	Shortfall ShortfallStore
	// Decisions, when set, is wired to the live stages NewPlanChain builds
	// (training, hedging), so status can show their latest decisions.
	Decisions *DecisionBoard
}

// HedgeOptions are the live hedging settings (config keys fleet.hedge_tick,
// fleet.ready_delay, fleet.hedge_max_zones); zero values take
// HedgedSource's defaults.
type HedgeOptions struct {
	Tick       time.Duration
	ReadyDelay time.Duration
	MaxZones   int
}

// NewPlanChain returns the plan source the reconciler reads. Each stage
// wraps the one before it:
//
//	SolverSource   the optimizer's plan of the policy on the catalog,
//	               blocked pools ruled out
//	SpotOnlySource workloads of a spent spot-only budget planned on spot
//	               (the policy every stage reads)
//	TrainingSource deadline jobs on the capacity their live spot policy
//	               decides (fleet/spotpolicy), when Fleet is set
//	ScaledSource   inference replicas sized to live load (fleet/autoscale)
//	HedgedSource   inference replicas spread over spot pools with an
//	               on-demand fallback (fleet/spotpolicy, live)
func NewPlanChain(c ChainConfig) PlanSource {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pol := c.Policy
	var spotOnly *SpotOnlySource
	if c.SpotOnly != nil {
		spotOnly = &SpotOnlySource{Policy: c.Policy, Catalog: c.Catalog, SpotOnly: c.SpotOnly, Now: c.Now, Log: log}
		pol = spotOnly.Current
	}
	var src PlanSource = &SolverSource{Catalog: c.Catalog, Policy: pol, Now: c.Now, Incremental: c.IncrementalReplan,
		KeepInPass: c.IncrementalReplan, reuse: c.ReusePlanMemory}
	if spotOnly != nil {
		spotOnly.Inner, src = src, spotOnly
	}
	var fork *forkSource
	if c.Fleet != nil {
		tr := &TrainingSource{Inner: src, Policy: pol, Catalog: c.Catalog, Fleet: c.Fleet, Progress: c.Progress,
			SpeedRatio: c.SpeedRatio, Tracker: &spotpolicy.LiveTracker{Gap: c.Training.tick()}, Now: c.Now, Log: log,
			Config: c.Training, reuse: c.ReusePlanMemory}
		if c.Decisions != nil {
			c.Decisions.training = tr
		}
		if c.SplitStages && (c.Load != nil || c.Hedge != nil) {
			fork = &forkSource{inner: src, training: tr}
			tr.Inner = &fork.fixed
			src = fork
		} else {
			src = tr
		}
	}
	if c.Load != nil {
		src = &ScaledSource{Inner: src, Policy: pol, Load: c.Load, Now: c.Now, Log: log, StopScaling: c.StopScaling,
			Prefetch: c.PrefetchLoad, reuse: c.ReusePlanMemory}
	}
	if c.Fleet != nil && c.Hedge != nil {
		h := &HedgedSource{Inner: src, Catalog: c.Catalog, Policy: pol, Fleet: c.Fleet, Agents: c.Agents, Now: c.Now, Log: log,
			Tick: c.Hedge.Tick, ReadyDelay: c.Hedge.ReadyDelay, MaxZones: c.Hedge.MaxZones, Prefetch: c.PrefetchLoad, Shortfall: c.Shortfall,
			reuse: c.ReusePlanMemory}
		if c.Decisions != nil {
			c.Decisions.hedged = h
		}
		src = h
	}
	if fork != nil {
		src = &joinSource{inner: src, fork: fork, reuse: c.ReusePlanMemory}
	}
	return src
}

// stageInput is what every stage after the solver starts from: the inner
// plan, the policy and its workloads by name, and the time. ok is false when
// there is nothing for the stage to do (no plan, no policy): it returns
// plan, err.
func stageInput(ctx context.Context, inner PlanSource, u *Unavailable, policyOf func() *policy.Policy, clock func() time.Time, idx *indexCache) (
	plan *optimizer.Plan, pol *policy.Policy, byName workloadIndex, now time.Time, ok bool, err error) {
	plan, err = inner.Plan(ctx, u)
	if err != nil || plan == nil {
		return plan, nil, nil, now, false, err
	}
	if pol = policyOf(); pol == nil {
		return plan, nil, nil, now, false, nil
	}
	now = time.Now()
	if clock != nil {
		now = clock()
	}
	return plan, pol, idx.of(pol), now, true, nil
}

// indexCache is a stage's index of the policy it last planned with: a
// policy is not changed once loaded (a new one is a new pointer, as
// SolverSource assumes too), and a thousand-workload index per stage per
// plan was a good part of the fleet simulator's map work.
type indexCache struct {
	mu  sync.Mutex
	pol *policy.Policy
	ws  []policy.Workload // pol.Workloads when indexed
	idx workloadIndex
}

// of is pol's index, read only.
func (c *indexCache) of(pol *policy.Policy) workloadIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idx == nil || c.pol != pol || !sameWorkloads(c.ws, pol.Workloads) {
		idx := make(workloadIndex, len(pol.Workloads))
		for i := range pol.Workloads {
			idx[pol.Workloads[i].Name] = &pol.Workloads[i]
		}
		c.pol, c.ws, c.idx = pol, pol.Workloads, idx
	}
	return c.idx
}

// sameWorkloads says a and b are one slice (same memory, same length).
func sameWorkloads(a, b []policy.Workload) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// placementBufs are a stage's two buffers for its plans' placements when
// the chain reuses plan memory (ChainConfig.ReusePlanMemory): each plan is
// built over the plan before the last, which no reader keeps by then (the
// stage itself keeps the last one, for a re-plan inside the pass).
type placementBufs struct {
	bufs [2][]optimizer.Placement
	next int
}

// copyOf is a copy of src the stage may change: new memory, or with reuse
// the older buffer's.
func (b *placementBufs) copyOf(src []optimizer.Placement, reuse bool) []optimizer.Placement {
	if !reuse || len(src) == 0 {
		return append([]optimizer.Placement(nil), src...)
	}
	buf := append(b.bufs[b.next][:0], src...)
	b.bufs[b.next] = buf
	b.next ^= 1
	return buf
}

// empty is an empty slice for n placements: new memory, or with reuse the
// older buffer's.
func (b *placementBufs) empty(n int, reuse bool) []optimizer.Placement {
	if !reuse {
		return make([]optimizer.Placement, 0, n)
	}
	buf := b.bufs[b.next][:0]
	if cap(buf) < n {
		buf = make([]optimizer.Placement, 0, n)
	}
	b.bufs[b.next] = buf
	b.next ^= 1
	return buf
}

// workloadIndex finds a policy's workloads by name. It points into the
// policy rather than holding copies: three stages build one every plan, and
// copying every workload into a map each time was a good part of the fleet
// simulator's garbage. The last of two workloads of one name wins, as it
// did in the map of copies.
type workloadIndex map[string]*policy.Workload
