package sim

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
)

// Inference is the setting of an inference simulation: keep Target ready
// replicas; each trace is one zone that can hold data[i] spot replicas at
// tick i; on-demand replicas can always be had; every new replica serves
// only after ReadyDelay.
type Inference struct {
	Target     int
	ReadyDelay time.Duration
	Prices     Prices
	// Duration to simulate from Start (0 = to the end of the traces).
	Start    int
	Duration time.Duration
	History  time.Duration
	// Goal is the availability goal (share of time at target, e.g. 0.99)
	// the policy is told its error budget against, over the run as the
	// result measures it (spotpolicy.ErrorBudget); 0 tells it none.
	Goal float64
}

// InferenceResult is one inference run.
type InferenceResult struct {
	Policy string  `json:"policy"`
	Hours  float64 `json:"hours"`
	// AtTarget is the fraction of time with at least Target ready replicas.
	AtTarget          float64 `json:"at_target"`
	SpotHours         float64 `json:"spot_replica_hours"`
	OnDemandHours     float64 `json:"on_demand_replica_hours"`
	Cost              float64 `json:"cost_usd"`
	Normalized        float64 `json:"cost_vs_on_demand"`
	Preemptions       int     `json:"preemptions"`
	Launches          int     `json:"launches"`
	MeanReady         float64 `json:"mean_ready_replicas"`
	LongestShortfallH float64 `json:"longest_below_target_hours"`
	// Steps is the per-tick timeline when recorded.
	Steps []InferenceStep `json:"-"`
}

// InferenceStep is one tick of a recorded inference run.
type InferenceStep struct {
	Spot, OnDemand, Ready int
	Open                  int // zones with capacity
}

type replica struct {
	zone    int // -1 for on-demand
	readyAt float64
}

// RunInference replays the zones against an inference policy.
func RunInference(c Inference, p *Pools, pol spotpolicy.Inference, record bool) (InferenceResult, error) {
	if c.Target < 1 {
		return InferenceResult{}, fmt.Errorf("%w: target must be at least 1", ErrSetting)
	}
	if c.Goal < 0 || c.Goal >= 1 || math.IsNaN(c.Goal) {
		return InferenceResult{}, fmt.Errorf("%w: goal %g: want a share of time in (0, 1), e.g. 0.99, or 0 for none", ErrSetting, c.Goal)
	}
	if c.ReadyDelay < 0 || c.Prices.OnDemand <= 0 || c.Prices.Spot < 0 {
		return InferenceResult{}, fmt.Errorf("%w: ready delay and prices must not be negative", ErrSetting)
	}
	gap := float64(p.Gap)
	end := p.Len
	if c.Duration > 0 {
		end = min(end, c.Start+int(math.Ceil(c.Duration.Seconds()/gap)))
	}
	if c.Start < 0 || c.Start >= end {
		return InferenceResult{}, fmt.Errorf("%w: start tick %d outside the traces (%d ticks)", ErrSetting, c.Start, p.Len)
	}
	k := len(p.Traces)
	tr := make([]spotpolicy.Tracker, k)
	for i := range tr {
		tr[i] = spotpolicy.NewTracker(gap)
	}
	for i := max(0, c.Start-int(c.History.Seconds()/gap)); i < c.Start; i++ {
		for q := range k {
			tr[q].Observe(p.Available(q, i))
		}
	}
	delay := c.ReadyDelay.Seconds()
	var reps []replica
	budget := spotpolicy.NewErrorBudget(c.Goal, end-c.Start)
	st := &spotpolicy.InferenceState{Gap: gap, Target: c.Target, ReadyDelay: delay, Zones: make([]spotpolicy.Zone, k), SpotPrice: c.Prices.Spot, OnDemandPrice: c.Prices.OnDemand}
	res := InferenceResult{Policy: pol.Name()}
	atTarget, readySum := 0.0, 0.0
	shortfall, longest := 0.0, 0.0
	readyAts := make([]float64, 0, 16)
	for i := c.Start; i < end; i++ {
		now := float64(i-c.Start) * gap
		// Zones that lost capacity take back their replicas, newest first.
		for q := range k {
			tr[q].Observe(p.Available(q, i))
			capq := p.Traces[q].Avail[i]
			n := 0
			for j := len(reps) - 1; j >= 0; j-- {
				if reps[j].zone != q {
					continue
				}
				n++
				if n > capq {
					reps = append(reps[:j], reps[j+1:]...)
					res.Preemptions++
				}
			}
		}
		st.Tick = i - c.Start
		for q := range k {
			st.Zones[q] = spotpolicy.Zone{Pool: tr[q].View(), Capacity: p.Traces[q].Avail[i]}
		}
		st.OnDemand, st.OnDemandReady, st.OnDemandReadyIn = 0, 0, st.OnDemandReadyIn[:0]
		for _, r := range reps {
			ready := r.readyAt <= now
			if r.zone < 0 {
				st.OnDemand++
				if ready {
					st.OnDemandReady++
				} else {
					st.OnDemandReadyIn = append(st.OnDemandReadyIn, r.readyAt-now)
				}
				continue
			}
			st.Zones[r.zone].Spot++
			if ready {
				st.Zones[r.zone].SpotReady++
			}
		}
		st.Budgeted, st.BudgetLeft = budget.Valid(), budget.Left(st.Tick)
		f := pol.Decide(st)
		// Apply: per zone (spot, capped at capacity) and on-demand (-1).
		for q := -1; q < k; q++ {
			want, have := f.OnDemand, st.OnDemand
			if q >= 0 {
				want, have = 0, st.Zones[q].Spot
				if q < len(f.Spot) {
					want = min(max(0, f.Spot[q]), p.Traces[q].Avail[i])
				}
			}
			for ; have < want; have++ {
				reps = append(reps, replica{zone: q, readyAt: now + delay})
				res.Launches++
			}
			// Scale down: drop the replicas that would be ready last.
			for ; have > want; have-- {
				worst := -1
				for j, r := range reps {
					if r.zone == q && (worst < 0 || r.readyAt > reps[worst].readyAt) {
						worst = j
					}
				}
				reps = append(reps[:worst], reps[worst+1:]...)
			}
		}
		// Account the tick.
		readyAts = readyAts[:0]
		spotN, odN := 0, 0
		for _, r := range reps {
			readyAts = append(readyAts, r.readyAt)
			if r.zone < 0 {
				odN++
			} else {
				spotN++
			}
		}
		sort.Float64s(readyAts)
		frac := 0.0
		if len(readyAts) >= c.Target {
			from := math.Max(now, readyAts[c.Target-1])
			frac = math.Max(0, math.Min(1, (now+gap-from)/gap))
		}
		atTarget += frac
		budget.Record(st.Tick, 1-frac)
		if frac < 1 {
			shortfall += (1 - frac) * gap
			longest = math.Max(longest, shortfall)
		} else {
			shortfall = 0
		}
		readyNow := 0
		for _, ra := range readyAts {
			if ra <= now+gap {
				readyNow++
			}
		}
		readySum += float64(readyNow)
		res.SpotHours += float64(spotN) * gap / 3600
		res.OnDemandHours += float64(odN) * gap / 3600
		if record {
			open := 0
			for q := range k {
				if p.Available(q, i) {
					open++
				}
			}
			res.Steps = append(res.Steps, InferenceStep{Spot: spotN, OnDemand: odN, Ready: readyNow, Open: open})
		}
	}
	n := float64(end - c.Start)
	res.Hours = n * gap / 3600
	res.AtTarget = atTarget / n
	res.MeanReady = readySum / n
	res.LongestShortfallH = longest / 3600
	res.Cost = res.SpotHours*c.Prices.Spot + res.OnDemandHours*c.Prices.OnDemand
	res.Normalized = res.Cost / (float64(c.Target) * res.Hours * c.Prices.OnDemand)
	return res, nil
}
