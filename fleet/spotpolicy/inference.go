package spotpolicy

import (
	"fmt"
	"math"
	"sort"
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
	// Prices per replica-hour; policies that weigh spot against on-demand
	// assume on-demand costs three times spot when they are zero.
	SpotPrice, OnDemandPrice float64
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
	// Correlated losses, measured online: each zone's capacity last tick,
	// the tick of its last loss, and how many losses were seen and how
	// many of them came within one ready delay of another zone's loss.
	prev       []int
	lastLoss   []int
	zoneLosses []float64
	upTicks    []float64
	ticks      int
	losses     float64
	joint      float64
	chance     float64
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
	// A zone is lost to the service when its capacity falls below what the
	// service could place there: the target plus as many extra as it may
	// over-provision.
	a.observe(s, s.Target+cfg.Extra+s.Target)
	fail := a.failChance(s)
	risk := cfg.Risk
	rho := a.together()
	spotP, odP := s.SpotPrice, s.OnDemandPrice
	if odP <= 0 {
		spotP, odP = 1, 3 // the usual ratio when prices are not given
	}
	// Over-provision spot as far as it is cheaper than the on-demand hedge
	// it saves: each extra spot replica is weighed against the on-demand
	// replicas the risk model still asks for with it.
	var sp []int
	od, risky, bestCost, placed := 0, false, math.Inf(1), -1
	for extra := cfg.Extra; extra <= cfg.Extra+s.Target; extra++ {
		cand := spread(s.Zones, s.Target+extra, score)
		n := sum(cand)
		if n == placed {
			break // no zone can take more
		}
		placed = n
		o, r := a.hedge(s, cand, fail, rho, risk)
		if c := float64(n)*spotP + float64(o)*odP; c < bestCost-1e-9 {
			sp, od, risky, bestCost = cand, o, r, c
		}
	}
	if risky {
		// Spot is so unreliable that on-demand alone must cover the
		// target: spot on top would only add cost. Spot replicas already
		// running stay until on-demand is ready (make before break).
		a.calm = 0
		keep := make([]int, len(s.Zones))
		if s.OnDemandReady < s.Target {
			for k, z := range s.Zones {
				keep[k] = z.Spot
			}
		}
		return Fleet{Spot: keep, OnDemand: s.Target}
	}
	readySpot, open := 0, 0
	for k, z := range s.Zones {
		readySpot += min(z.SpotReady, sp[k])
		if z.Capacity > 0 {
			open++
		}
	}
	want := s.Target + cfg.Spare
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

// hedge is the on-demand replicas to run with the spot replicas sp: enough
// that ready spot (counting only zones past their fresh age) plus
// on-demand reaches Target+Spare, at least Spare when fewer than Zones
// zones have capacity, and at least what the risk model asks for.
// risky reports that the risk model alone asks for the whole target.
func (a *AdaptiveInference) hedge(s *InferenceState, sp []int, fail []float64, rho, risk float64) (od int, risky bool) {
	cfg := a.cfg
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
	od = max(0, s.Target+cfg.Spare-min(readySpot, stable))
	if cfg.Risk > 0 {
		r := riskHedge(s, sp, fail, risk, rho)
		od, risky = max(od, r), r >= s.Target
	}
	if open < cfg.Zones {
		od = max(od, cfg.Spare)
	}
	return od, risky
}

// failChance is, per zone, the chance that it loses the service's replicas
// within the next ready delay (plus a tick): a constant loss rate measured
// online over the ticks the zone could hold them, with one loss per mean
// stretch of capacity as the prior.
func (a *AdaptiveInference) failChance(s *InferenceState) []float64 {
	window := (s.ReadyDelay + s.Gap) / s.Gap
	out := make([]float64, len(s.Zones))
	for k, z := range s.Zones {
		rate := (a.zoneLosses[k] + 1) / (a.upTicks[k] + math.Max(1, z.MeanUp))
		out[k] = 1 - math.Exp(-window*rate)
	}
	return out
}

// observe records the zones' capacity losses: capacity falling below what
// it was, as far as the service could have used it (want), so a 16-node
// zone dropping to 2 is a loss and one dropping to 11 is not. A loss
// is joint when another zone lost capacity within one ready delay before
// it, the window in which a replacement cannot become ready; expected
// counts how many joint losses chance alone would give, from each zone's
// own loss rate.
func (a *AdaptiveInference) observe(s *InferenceState, want int) {
	if len(a.prev) != len(s.Zones) {
		a.prev = make([]int, len(s.Zones))
		a.lastLoss = make([]int, len(s.Zones))
		a.zoneLosses = make([]float64, len(s.Zones))
		a.upTicks = make([]float64, len(s.Zones))
		for k, z := range s.Zones {
			a.prev[k] = z.Capacity
			a.lastLoss[k] = math.MinInt / 2
		}
	}
	a.ticks++
	window := int(math.Ceil(s.ReadyDelay/s.Gap)) + 1
	for k, z := range s.Zones {
		if z.Capacity < min(a.prev[k], want) {
			a.losses++
			a.zoneLosses[k]++
			joint, alone := false, 1.0
			for j := range s.Zones {
				if j == k {
					continue
				}
				joint = joint || s.Tick-a.lastLoss[j] <= window
				alone *= 1 - math.Min(1, a.zoneLosses[j]/float64(a.ticks)*float64(window+1))
			}
			if joint {
				a.joint++
			}
			a.chance += 1 - alone
			a.lastLoss[k] = s.Tick
		}
		if z.Capacity > 0 {
			a.upTicks[k]++
		}
		a.prev[k] = z.Capacity
	}
}

// together is the weight given to zones failing all at once rather than
// independently: the share of zone losses that followed another zone's
// loss within one ready delay, beyond what chance explains, leaning to one
// half while little is known. (Counting the leader of each pair as well
// gives twice the weight for zones that always go together; on the
// held-out traces that kept every set at 99% but put the 9 aws-02-15-2023
// zones at 0.622 of on-demand: docs/BENCHMARKS.md.)
func (a *AdaptiveInference) together() float64 {
	excess := a.joint - a.chance
	return math.Max(0, math.Min(1, (excess+1)/(a.losses-a.chance+2)))
}

// riskHedge is the least number of on-demand replicas for which the chance
// that the spot replicas planned in sp lose so many within the next ready
// delay that fewer than Target stay up is below risk. Each zone loses its
// capacity at a constant rate of one per mean stretch, and a zone's
// replicas go together. Zones fail independently with weight 1-rho and all
// together (the likeliest to fail first) with weight rho, rho being the
// measured share of losses that came with another zone's.
func riskHedge(s *InferenceState, sp []int, fail []float64, risk, rho float64) int {
	type zoneRisk struct {
		n    int
		fail float64
	}
	var zs []zoneRisk
	total := 0
	for k := range s.Zones {
		if sp[k] == 0 {
			continue
		}
		zs = append(zs, zoneRisk{sp[k], fail[k]})
		total += sp[k]
	}
	// indep[j] = probability that exactly j spot replicas survive when
	// zones fail independently.
	indep := make([]float64, total+1)
	indep[0] = 1
	for _, z := range zs {
		nd := make([]float64, total+1)
		for j, pj := range indep {
			if pj == 0 {
				continue
			}
			nd[j] += pj * z.fail
			if j+z.n <= total {
				nd[j+z.n] += pj * (1 - z.fail)
			}
		}
		indep = nd
	}
	// Comonotone: zones fail in order of their failure chance, the
	// likeliest first; exactly the m likeliest fail with probability
	// fail(m) - fail(m+1).
	sort.Slice(zs, func(i, j int) bool { return zs[i].fail > zs[j].fail })
	como := make([]float64, total+1)
	left := total
	for m := 0; m <= len(zs); m++ {
		pm := 1.0
		if m > 0 {
			pm = zs[m-1].fail
		}
		if m < len(zs) {
			pm -= zs[m].fail
		}
		como[left] += math.Max(0, pm)
		if m < len(zs) {
			left -= zs[m].n
		}
	}
	for od := 0; od <= s.Target; od++ {
		short := 0.0
		for j := range indep {
			if j+od < s.Target {
				short += (1-rho)*indep[j] + rho*como[j]
			}
		}
		if short <= risk {
			return od
		}
	}
	return s.Target
}
