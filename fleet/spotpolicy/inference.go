package spotpolicy

import (
	"fmt"
	"math"
	"strings"
)

// Zone is what an inference policy knows about one spot zone.
type Zone struct {
	Pool
	// Capacity is how many spot replicas the zone can hold now.
	Capacity int
	// Spot replicas running in the zone, and how many of them are ready.
	Spot, SpotReady int
}

// InferenceState is what an inference policy sees at a tick boundary.
type InferenceState struct {
	Tick       int
	Gap        float64 // seconds per tick
	Target     int     // ready replicas wanted
	ReadyDelay float64 // seconds from launch to ready
	Zones      []Zone
	// OnDemand replicas running, and how many are ready.
	OnDemand, OnDemandReady int
	// OnDemandReadyIn is, for each on-demand replica not yet ready, the
	// seconds until it is (any order).
	OnDemandReadyIn []float64
}

// Ready is the number of ready replicas.
func (s *InferenceState) Ready() int {
	n := s.OnDemandReady
	for _, z := range s.Zones {
		n += z.SpotReady
	}
	return n
}

// Fleet is an inference policy's decision: spot replicas per zone (capped
// at each zone's capacity by the caller) and on-demand replicas.
type Fleet struct {
	Spot     []int
	OnDemand int
}

// Inference decides an inference service's replicas tick by tick; one per
// run (it may keep state).
type Inference interface {
	Name() string
	Decide(s *InferenceState) Fleet
}

// Inference policy names.
const (
	InferenceOnDemand  = "on-demand"
	InferenceSpotHedge = "spot-hedge"
	InferenceAdaptive  = "adaptive"
)

// DefaultInference is the inference policy gpubroker uses unless told
// otherwise.
const DefaultInference = InferenceAdaptive

// InferencePolicies lists the selectable names.
func InferencePolicies() []string {
	return []string{InferenceOnDemand, InferenceSpotHedge, InferenceAdaptive}
}

// NewInference returns a fresh inference policy by name.
func NewInference(name string) (Inference, error) {
	switch name {
	case InferenceOnDemand:
		return inferenceOnDemand{}, nil
	case InferenceSpotHedge:
		return &SpotHedge{Extra: 2}, nil
	case InferenceAdaptive:
		return NewAdaptiveInference(DefaultAdaptiveInferenceConfig()), nil
	}
	return nil, fmt.Errorf("unknown inference policy %q; want one of %s", name, strings.Join(InferencePolicies(), ", "))
}

type inferenceOnDemand struct{}

func (inferenceOnDemand) Name() string { return InferenceOnDemand }
func (inferenceOnDemand) Decide(s *InferenceState) Fleet {
	return Fleet{Spot: make([]int, len(s.Zones)), OnDemand: s.Target}
}

// spread places n spot replicas over zones with capacity, one per zone per
// round in order of score (best first), so a zone's loss costs few.
func spread(zones []Zone, n int, score func(Zone) float64) []int {
	out := make([]int, len(zones))
	order := sortedPools(len(zones), func(i int) float64 { return score(zones[i]) })
	for placed := 0; placed < n; {
		progress := false
		for _, k := range order {
			if placed < n && out[k] < zones[k].Capacity {
				out[k]++
				placed++
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	return out
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// SpotHedge is the SkyServe "SpotHedge" idea: spread target+Extra spot
// replicas over the zones that have capacity and fall back to on-demand
// only for replicas spot cannot place.
type SpotHedge struct{ Extra int }

// Name implements Inference.
func (*SpotHedge) Name() string { return InferenceSpotHedge }

// Decide implements Inference.
func (h *SpotHedge) Decide(s *InferenceState) Fleet {
	sp := spread(s.Zones, s.Target+h.Extra, func(z Zone) float64 { return float64(z.Spot) })
	return Fleet{Spot: sp, OnDemand: max(0, s.Target-sum(sp))}
}

// AdaptiveInferenceConfig are the knobs of the adaptive inference policy;
// docs/simulate.md shows the availability–cost frontier they span.
type AdaptiveInferenceConfig struct {
	// Extra spot replicas over the target.
	Extra int
	// Spare is how many ready replicas above the target the on-demand hedge
	// keeps while spot is short: on-demand replicas are held so that ready
	// spot plus on-demand reaches Target+Spare.
	Spare int
	// Zones is the number of zones with capacity below which an on-demand
	// hedge of Spare replicas is kept even when spot covers the target:
	// when few zones are left, the next loss cannot be replaced on spot.
	Zones int
	// Calm is how long, in ticks, spot must have covered the target before
	// on-demand replicas are released (hysteresis against flapping zones).
	Calm int
	// Fresh is the age in ticks under which a zone's capacity stretch is
	// treated as unreliable (zones that just came back often go again).
	Fresh int
	// Risk, when positive, sizes the on-demand hedge so that the chance of
	// fewer than Target replicas ready over the next ready delay, with each
	// zone losing its capacity at the rate its recent stretches suggest,
	// stays below Risk.
	Risk float64
}

// DefaultAdaptiveInferenceConfig is tuned on the 9-zone aws-02-15-2023
// traces (docs/BENCHMARKS.md).
func DefaultAdaptiveInferenceConfig() AdaptiveInferenceConfig {
	return AdaptiveInferenceConfig{Extra: 2, Spare: 1, Risk: 0.02}
}

// AdaptiveInference is gpubroker's inference policy: SpotHedge's spread and
// over-provisioning, placed on the zones with the best recent availability
// and the longest current stretch; an on-demand hedge sized from how many
// replicas are ready (not merely running) and from how many zones still
// have capacity, started before spot runs out rather than after, since a
// new replica needs the ready delay; and a calm period before on-demand is
// released when spot returns.
type AdaptiveInference struct {
	cfg  AdaptiveInferenceConfig
	calm int // ticks spot has covered the target
}

// NewAdaptiveInference returns the policy with cfg.
func NewAdaptiveInference(cfg AdaptiveInferenceConfig) *AdaptiveInference {
	return &AdaptiveInference{cfg: cfg}
}

// Name implements Inference.
func (*AdaptiveInference) Name() string { return InferenceAdaptive }

// Decide implements Inference.
func (a *AdaptiveInference) Decide(s *InferenceState) Fleet {
	cfg := a.cfg
	score := func(z Zone) float64 {
		sc := z.Frac
		if z.Spot > 0 {
			sc += 2 // keep what runs: moving costs a ready delay
		}
		if z.Available && z.Run >= cfg.Fresh {
			sc += 1 + math.Min(1, float64(z.Run)/100)
		}
		return sc
	}
	sp := spread(s.Zones, s.Target+cfg.Extra, score)
	readySpot, stable, open := 0, 0, 0
	for k, z := range s.Zones {
		readySpot += min(z.SpotReady, sp[k])
		if z.Capacity > 0 {
			open++
			if z.Run >= cfg.Fresh {
				stable += min(sp[k], z.Capacity)
			}
		}
	}
	want := s.Target + cfg.Spare
	od := max(0, want-min(readySpot, stable))
	if cfg.Risk > 0 {
		hedge := riskHedge(s, sp, cfg.Risk)
		if hedge >= s.Target {
			// Spot is so unreliable that on-demand alone must cover the
			// target: spot on top would only add cost.
			// Spot replicas already running stay until on-demand is ready.
			a.calm = 0
			keep := make([]int, len(s.Zones))
			if s.OnDemandReady < s.Target {
				for k, z := range s.Zones {
					keep[k] = z.Spot
				}
			}
			return Fleet{Spot: keep, OnDemand: s.Target}
		}
		od = max(od, hedge)
	}
	if open < cfg.Zones {
		od = max(od, cfg.Spare)
	}
	if readySpot >= want && open >= cfg.Zones {
		a.calm++
	} else {
		a.calm = 0
	}
	if od < s.OnDemand && a.calm < cfg.Calm {
		od = s.OnDemand // hold on-demand until spot has been calm a while
	}
	return Fleet{Spot: sp, OnDemand: od}
}

// riskHedge is the least number of on-demand replicas for which the chance
// that the spot replicas planned in sp lose so many within the next ready
// delay that fewer than Target stay up is below risk. Each zone is assumed
// to lose its capacity at a constant rate of one per mean stretch.
func riskHedge(s *InferenceState, sp []int, risk float64) int {
	window := (s.ReadyDelay + s.Gap) / s.Gap // ticks
	// dist[j] = probability that exactly j spot replicas survive.
	dist := []float64{1}
	for k, z := range s.Zones {
		if sp[k] == 0 {
			continue
		}
		up := math.Max(1, z.MeanUp)
		surv := math.Exp(-window / up)
		for range sp[k] {
			nd := make([]float64, len(dist)+1)
			for j, pj := range dist {
				nd[j] += pj * (1 - surv)
				nd[j+1] += pj * surv
			}
			dist = nd
		}
	}
	for od := 0; od <= s.Target; od++ {
		short := 0.0
		for j, pj := range dist {
			if j+od < s.Target {
				short += pj
			}
		}
		if short <= risk {
			return od
		}
	}
	return s.Target
}
