package spotpolicy

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Zone is what an inference policy knows about one spot zone.
type Zone struct {
	Pool
	// Capacity is how many spot replicas the zone can hold now.
	Capacity int
	// Spot replicas running in the zone, and how many of them are ready.
	Spot, SpotReady int
	// Limited says Capacity is a limit learned from a refusal, not a
	// loss: the zone refused one more replica while it held Spot of them
	// (live, a pool that holds one instance refuses the second). The
	// zone kept what it ran, so the risk model counts no loss when
	// Capacity falls to the limit and keeps the capacity it saw before
	// for its loss windows. The simulator, which reads capacity from
	// traces, never sets it.
	Limited bool
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
	// BudgetLeft, when Budgeted, is how many more ticks the service may
	// spend below Target before it misses its availability goal over the
	// period the goal is measured over: the goal's error budget left
	// (ErrorBudget.Left), negative once it is spent.
	Budgeted   bool
	BudgetLeft float64
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
	return spreadIn(zones, n, spreadOrder(zones, score))
}

// spreadOrder is the zones in spread's order: by score, best first, ties
// in zone order. Each zone's score is taken once (sorting called the score
// function for every comparison).
func spreadOrder(zones []Zone, score func(Zone) float64) []int {
	scores := make([]float64, len(zones))
	for i, z := range zones {
		scores[i] = score(z)
	}
	return sortedPools(len(zones), func(i int) float64 { return scores[i] })
}

// spreadOrderIn is spreadOrder in the memory of scores and idx (the same
// stable sort on the same scores: the same order).
func spreadOrderIn(zones []Zone, score func(Zone) float64, scores []float64, idx []int) ([]float64, []int) {
	scores, idx = scores[:0], idx[:0]
	for i, z := range zones {
		scores = append(scores, score(z))
		idx = append(idx, i)
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch sa, sb := scores[a], scores[b]; {
		case sa > sb:
			return -1
		case sb > sa:
			return 1
		}
		return 0
	})
	return scores, idx
}

// spreadIn is spread over the zones in a given order (spreadOrder): a
// policy that tries several replica counts on one state sorts once.
func spreadIn(zones []Zone, n int, order []int) []int {
	return spreadInto(make([]int, len(zones)), zones, n, order)
}

// spreadInto is spreadIn in out's memory (len(zones) zeros).
func spreadInto(out []int, zones []Zone, n int, order []int) []int {
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
	// Budget is the error budget, in ready delays, under which Risk is
	// scaled down in proportion to what is left (InferenceState's
	// BudgetLeft; down to minBudgetRisk of it): each loss the hedge does
	// not cover costs about one ready delay below target, so a service
	// with little budget left can afford few more, whatever the zones'
	// loss rates say. Below one ready delay left survival also takes
	// losses to come in bursts. 0 ignores the budget.
	Budget float64
	// Ample is the error budget, in ready delays, above which Risk is
	// doubled (ampleRiskShare): a service that has spent little of its
	// budget can afford the losses a leaner hedge leaves uncovered, and
	// Budget makes it careful again as the budget runs low. A 30-day
	// window at 99% with a 10-minute ready delay holds 43 ready delays;
	// without this the policy left most of it unspent on almost every
	// trace set (docs/BENCHMARKS.md, "Session 25"). 0 never doubles it.
	Ample float64
}

// DefaultAdaptiveInferenceConfig is tuned on the 9-zone aws-02-15-2023
// traces (docs/BENCHMARKS.md).
func DefaultAdaptiveInferenceConfig() AdaptiveInferenceConfig {
	return AdaptiveInferenceConfig{Extra: 2, Spare: 1, Risk: 0.02, Budget: 2, Ample: 10}
}

// AdaptiveInference is gpubroker's inference policy: SpotHedge's spread,
// placed on the zones with the best recent availability and the longest
// current stretch, with as many spot and on-demand replicas as the
// cheapest plan needs to keep the chance of falling below the target over
// the next ready delay under Risk. That chance comes from what each zone
// was seen to lose (how many replicas, not only whether) and from how
// often zones lost capacity together.
type AdaptiveInference struct {
	cfg  AdaptiveInferenceConfig
	calm int // ticks spot has covered the target
	// wary: less than a ready delay of the error budget is left, so one
	// more loss the hedge does not cover misses the goal; survival then
	// takes losses to come in bursts (see there).
	wary bool
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
	// windows is, per zone, what it lost over each past ready delay.
	windows []lossWindows
	// runs is, per zone, its past runs (a run is the ticks from
	// capacity coming back, or from a loss it survived, to its next
	// loss, as observe counts losses), sorted by length; runAt is the
	// tick its current run began, or -1 while it has no capacity. They
	// say how long spot placed there now may be expected to last
	// (worthSwitching).
	runs  [][]pastRun
	runAt []int
	// survAt[k*survN+n] says where survival(k, n) lies in survMem, the
	// memory the tick's survivals are cut from, if it was taken at the
	// current tick (n < survN). (A cache of slices cleared each tick
	// wrote a pointer per entry set.)
	survAt  []survEntry
	survN   int
	survMem []float64
	// fail[k] is zone k's chance of a loss in survival, taken at tick
	// failAt[k] (it does not depend on the replica count).
	fail   []float64
	failAt []int
	// Scratch of Decide and hedge, kept between calls (a policy decides
	// for one service, one tick at a time).
	surv       [][]float64
	risk       riskScratch
	scores     []float64
	order      []int
	cand, best []int
	// noPrune sizes the hedge of every replica count (a test compares).
	noPrune bool
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
	most := 2*s.Target + cfg.Extra // the most spot replicas a plan places
	a.observe(s, most)
	risk := cfg.Risk * budgetShare(s, cfg.Budget, cfg.Ample)
	a.wary = cfg.Budget > 0 && budgetDelays(s) < 1
	rho := a.together()
	spotP, odP := s.SpotPrice, s.OnDemandPrice
	if odP <= 0 {
		spotP, odP = 1, 3 // the usual ratio when prices are not given
	}
	if spotP >= odP {
		// Spot at or above the on-demand price (it happens, for some
		// GPU types in some zones): on demand costs no more and is never
		// preempted.
		return a.allOnDemand(s)
	}
	a.scores, a.order = spreadOrderIn(s.Zones, score, a.scores, a.order)
	p := a.search(s, rho, risk, spotP, odP)
	sp, od := slices.Clone(p.sp), p.od // (the caller keeps it)
	if p.risky {
		// Spot is so unreliable that on-demand alone must cover the
		// target: spot on top would only add cost.
		return a.allOnDemand(s)
	}
	// What spot saves each tick over the target on demand once it is
	// ready, at the cheapest plan. Plans that save nothing even then
	// (their hedge holds the target on demand, or their spot costs as
	// much as the on-demand it frees) only add cost.
	saving := float64(s.Target)*odP - p.steadyCost
	if p.steady >= s.Target || (s.OnDemand >= s.Target && saving <= 1e-9) {
		return a.allOnDemand(s)
	}
	if s.OnDemand >= s.Target && !moving(s) && !a.worthSwitching(s, sp, od, saving, spotP, odP, rho, risk) {
		// Moving from on-demand to spot costs more than the spot is
		// expected to save before it goes.
		return a.allOnDemand(s)
	}
	readySpot, open := 0, 0
	for k, z := range s.Zones {
		readySpot += min(z.SpotReady, sp[k])
		if z.Capacity > 0 {
			open++
		}
	}
	if readySpot >= s.Target+cfg.Spare && open >= cfg.Zones {
		a.calm++
	} else {
		a.calm = 0
	}
	if od < s.OnDemand && a.calm < cfg.Calm {
		od = s.OnDemand // hold on-demand until spot has been calm a while
	}
	return Fleet{Spot: sp, OnDemand: od}
}

// minBudgetRisk is the least share of Risk the error budget leaves: with
// the budget spent the hedge asks a loss within a ready delay to be ten
// times rarer, not impossible (a risk of zero is all on demand, at any
// price, for a goal already missed).
const minBudgetRisk = 0.1

// ampleRiskShare is the share of Risk taken while more than
// AdaptiveInferenceConfig.Ample ready delays of the error budget are
// left. 1.5 and 2.5 give much the same figures (docs/BENCHMARKS.md).
const ampleRiskShare = 2

// budgetShare is the share of Risk the service's error budget allows:
// ampleRiskShare while more than ample ready delays of it are left, 1
// while more than budget are (or it has none), falling in proportion
// below, to minBudgetRisk. Ticks that start cold (a new service, no
// replica ready) spend a ready delay at once, so on a short period the
// first loss already leaves little.
func budgetShare(s *InferenceState, budget, ample float64) float64 {
	left := budgetDelays(s)
	switch {
	case math.IsInf(left, 1):
		return 1
	case ample > 0 && left > ample:
		return ampleRiskShare
	case !(budget > 0):
		return 1
	}
	return math.Max(minBudgetRisk, math.Min(1, left/budget))
}

// budgetDelays is the error budget left in ready delays: +Inf without one.
func budgetDelays(s *InferenceState) float64 {
	if !s.Budgeted || s.Gap <= 0 || math.IsNaN(s.BudgetLeft) {
		return math.Inf(1)
	}
	return s.BudgetLeft / math.Max(1, math.Ceil(s.ReadyDelay/s.Gap))
}

// plan is what search found: the cheapest spot replicas per zone (in
// the policy's memory, valid until the next search) with their on-demand
// hedge now and once they are ready, whether the risk model asks for the
// whole target on demand, and the least cost per tick of any plan tried
// once its spot is ready.
type plan struct {
	sp         []int
	od, steady int
	risky      bool
	cost       float64
	steadyCost float64
}

// search is the cheapest plan over the zones in a.order's spread.
// Over-provision spot as far as it is cheaper than the on-demand hedge
// it saves: each extra spot replica is weighed against the on-demand
// replicas the risk model still asks for with it.
func (a *AdaptiveInference) search(s *InferenceState, rho, risk, spotP, odP float64) plan {
	cfg := a.cfg
	p := plan{cost: math.Inf(1), steadyCost: math.Inf(1)}
	placed := -1
	// The order is the same for every candidate, and each candidate is the
	// one before with its spread carried on (spread places one replica at
	// a time, round after round: the first n of n+1 are placed as for n),
	// in the policy's memory; the best one is returned in its own.
	a.cand = zeroed(a.cand, len(s.Zones))
	spr := spreader{out: a.cand, order: a.order}
	for extra := cfg.Extra; extra <= cfg.Extra+s.Target; extra++ {
		for spr.placed < s.Target+extra && spr.step(s.Zones) {
		}
		cand, n := spr.out, spr.placed
		if n == placed {
			break // no zone can take more
		}
		placed = n
		if float64(n)*spotP >= p.cost-1e-9 && !a.noPrune {
			// Its spot alone costs as much as the best plan so far: with
			// any on-demand hedge (never negative) it cannot be cheaper,
			// so the risk model need not size one, nor for any larger
			// count (more spot, the same best). Nor cheaper once
			// ready: the best plan's cost then is no more than now.
			break
		}
		o, st, r := a.hedge(s, cand, rho, risk)
		if c := float64(n)*spotP + float64(o)*odP; c < p.cost-1e-9 {
			a.best = append(a.best[:0], cand...)
			p.sp, p.od, p.steady, p.risky, p.cost = a.best, o, st, r, c
		}
		if !r {
			p.steadyCost = math.Min(p.steadyCost, float64(n)*spotP+float64(st)*odP)
		}
	}
	return p
}

// spreader is spreadIn one replica at a time: after n steps out is
// spreadIn(zones, n, order) (when n could be placed).
type spreader struct {
	out      []int // len(zones) zeros to start with
	order    []int
	at       int  // the next zone of the round, in order
	progress bool // the round placed a replica
	placed   int
}

// step places one more replica, at the next zone of the round with
// capacity left, or says that no zone has any.
func (x *spreader) step(zones []Zone) bool {
	for {
		if x.at == len(x.order) {
			if !x.progress {
				return false // a whole round placed nothing
			}
			x.at, x.progress = 0, false
		}
		k := x.order[x.at]
		x.at++
		if x.out[k] < zones[k].Capacity {
			x.out[k]++
			x.placed++
			x.progress = true
			return true
		}
	}
}

// zeroed is buf resized to n zeros (its memory kept when large enough).
func zeroed[T int | float64](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	buf = buf[:n]
	clear(buf)
	return buf
}

// allOnDemand is the target on demand. Spot replicas already running
// stay until on-demand is ready (make before break).
func (a *AdaptiveInference) allOnDemand(s *InferenceState) Fleet {
	a.calm = 0
	keep := make([]int, len(s.Zones))
	if s.OnDemandReady < s.Target {
		for k, z := range s.Zones {
			keep[k] = z.Spot
		}
	}
	return Fleet{Spot: keep, OnDemand: s.Target}
}

// moving says a move to spot is under way: spot replicas launched and
// not yet ready (their ready delay is paid for; dropping them would pay
// it again at the next move).
func moving(s *InferenceState) bool {
	for _, z := range s.Zones {
		if z.SpotReady < z.Spot {
			return true
		}
	}
	return false
}

// worthSwitching says whether moving a service that holds its target on
// demand to the plan (spot replicas sp, on-demand od while they get
// ready) is expected to pay: each tick its spot serves saves saving over
// the target on demand, and the move costs, for one ready delay, the
// spot replicas it launches (billed before they serve; and again on the
// way back, when they are kept until on-demand is ready) and the
// on-demand replicas it adds to bridge the delay. The spot serves from
// one ready delay after launch until a critical zone it runs in (one
// without which the plan is all on demand) loses capacity; each zone's
// chance of keeping it t ticks more comes from the lengths of its past
// runs between losses, given the age of its current run (zones that just
// came back often go again soon; ones that have held long tend to hold),
// with the loss rate of survival as one more run (an exponential one, so
// the chance never reaches zero), zones independent. Spot launched
// already is paid for: a plan that launches none is not weighed (nor is
// a move under way: Decide).
func (a *AdaptiveInference) worthSwitching(s *InferenceState, sp []int, od int, saving, spotP, odP, rho, risk float64) bool {
	delay := math.Ceil(s.ReadyDelay / s.Gap)
	launched := 0
	for k, z := range s.Zones {
		launched += max(0, sp[k]-z.Spot)
	}
	if launched == 0 {
		return true
	}
	// The launched spot one ready delay going and one coming back (kept
	// until on-demand is ready), and the on-demand added to bridge.
	cost := delay * (2*float64(launched)*spotP + float64(max(0, od-s.OnDemand))*odP)
	need := cost / saving // ticks the spot must serve
	type zoneRuns struct {
		runs    []pastRun
		long    []float64 // long[i]: the summed length of runs[i:]
		at, age int       // runs[at:] reach age+t
		rate    float64   // loss rate
		base    float64   // runs reaching age
		f       float64   // the chance of lasting t ticks more
		// The exponential run's chance of reaching age+t, its factor a
		// tick, and the sum of its chances from age+t on per chance.
		exp, step, sum float64
	}
	var zs []zoneRuns
	total := 0.0 // summed loss rate
	for k, z := range s.Zones {
		if sp[k] == 0 || !a.critical(s, k, rho, risk, spotP, odP) {
			continue
		}
		age := 1
		if a.runAt[k] >= 0 {
			age = s.Tick - a.runAt[k] + 1
		}
		rate := (a.zoneLosses[k] + 1) / (a.upTicks[k] + math.Max(1, z.MeanUp))
		r := zoneRuns{runs: a.runs[k], age: age, rate: rate}
		r.at, _ = slices.BinarySearchFunc(r.runs, age, func(x pastRun, n int) int { return x.n - n })
		r.base = float64(len(r.runs)-r.at) + math.Exp(-rate*float64(age))
		r.exp, r.step, r.sum = math.Exp(-rate*(float64(age)+delay)), math.Exp(-rate), 1/-math.Expm1(-rate)
		r.long = make([]float64, len(r.runs)+1)
		for i := len(r.runs) - 1; i >= r.at; i-- {
			r.long[i] = r.long[i+1] + float64(r.runs[i].n)
		}
		zs = append(zs, r)
		total += rate
	}
	if len(zs) == 0 {
		return true // no one zone's loss ends the spot
	}
	served := 0.0
	for t := int(delay); ; t++ {
		p, past := 1.0, true
		for i := range zs {
			r := &zs[i]
			x := r.age + t
			for r.at < len(r.runs) && r.runs[r.at].n < x {
				r.at++
			}
			if t > int(delay) {
				r.exp *= r.step
			}
			r.f = (float64(len(r.runs)-r.at) + r.exp) / r.base
			p *= r.f
			past = past && r.at == len(r.runs)
		}
		if past {
			// Beyond every run seen: only the exponential runs are
			// left, the chance falls by exp(-total) a tick.
			served += p / -math.Expm1(-total)
			return served >= need
		}
		// What is left to serve from t on is at most, for any zone j,
		// its own chances from t on (each run reaching x = age+t lasts
		// n-x+1 more of them) times the others' at t (theirs only fall).
		left := math.Inf(1)
		for j := range zs {
			r := &zs[j]
			x := float64(r.age + t)
			own := (r.long[r.at] - float64(len(r.runs)-r.at)*(x-1) + r.exp*r.sum) / r.base
			for i := range zs {
				if i != j {
					own *= zs[i].f
				}
			}
			left = math.Min(left, own)
		}
		if served+left < need {
			return false
		}
		if served += p; served >= need {
			return true
		}
	}
}

// critical says whether losing zone k would end the service's spot:
// with the zone gone, the cheapest plan on the others is all on demand
// (the risk model asks for the whole target, or spot saves nothing).
func (a *AdaptiveInference) critical(s *InferenceState, k int, rho, risk, spotP, odP float64) bool {
	z := s.Zones[k]
	s.Zones[k].Capacity, s.Zones[k].Spot, s.Zones[k].SpotReady = 0, 0, 0
	p := a.search(s, rho, risk, spotP, odP)
	s.Zones[k] = z
	return p.risky || float64(s.Target)*odP-p.steadyCost <= 1e-9
}

// pastRun is a zone's run of n ticks that ended at tick end.
type pastRun struct{ n, end int }

// keptRuns is how many runs a zone's record keeps, the latest: a live
// policy runs for months.
const keptRuns = 1024

// insertRun inserts r into runs, sorted by length, keeping the latest
// keptRuns.
func insertRun(runs []pastRun, r pastRun) []pastRun {
	if len(runs) >= keptRuns {
		oldest := 0
		for i, x := range runs {
			if x.end < runs[oldest].end {
				oldest = i
			}
		}
		runs = slices.Delete(runs, oldest, oldest+1)
	}
	i, _ := slices.BinarySearchFunc(runs, r.n, func(x pastRun, n int) int { return x.n - n })
	return slices.Insert(runs, i, r)
}

// hedge is the on-demand replicas to run with the spot replicas sp: enough
// that ready spot (counting only zones past their fresh age) plus
// on-demand reaches Target+Spare, at least Spare when fewer than Zones
// zones have capacity, and at least what the risk model asks for.
// risky reports that the risk model alone asks for the whole target.
//
// steady is the hedge once sp's spot replicas are all ready: the same
// but for the readiness term, which counts them all.
func (a *AdaptiveInference) hedge(s *InferenceState, sp []int, rho, risk float64) (od, steady int, risky bool) {
	cfg := a.cfg
	readySpot, placed, stable, open := 0, 0, 0, 0
	for k, z := range s.Zones {
		readySpot += min(z.SpotReady, sp[k])
		placed += sp[k]
		if z.Capacity > 0 {
			open++
			if z.Run >= cfg.Fresh {
				stable += min(sp[k], z.Capacity)
			}
		}
	}
	od = max(0, s.Target+cfg.Spare-min(readySpot, stable))
	steady = max(0, s.Target+cfg.Spare-min(placed, stable))
	if cfg.Risk > 0 {
		surv := a.surv[:0]
		for k := range s.Zones {
			surv = append(surv, a.survival(s, k, sp[k]))
		}
		a.surv = surv
		r := a.risk.hedge(s.Target, surv, risk, rho)
		od, steady, risky = max(od, r), max(steady, r), r >= s.Target
	}
	if open < cfg.Zones {
		od, steady = max(od, cfg.Spare), max(steady, cfg.Spare)
	}
	return od, steady, risky
}

// lossWindows keeps, for one zone, the capacities of the last ready delay
// and, per number n of replicas placed, how many of them each past loss
// left standing over one ready delay: hist[n][j] counts the windows (a
// tick and the ready delay after it) that began with capacity for n, saw
// the capacity fall below where it began (as far as the service could use
// it), and whose least capacity held j of the n (j < n: the loss took
// some; j = n: it took none of them).
type lossWindows struct {
	caps []int // ring of the last len(caps) capacities
	seen int
	at   int // seen % len(caps), kept without a division
	hist [][]float64
	// total[n] is 1 plus the sum of hist[n] (survival's prior and
	// denominator): counts are whole numbers, so the sum is exact in any
	// order, and kept as they grow it is not summed per survival.
	total []float64
}

// newLossWindows is a zone's windows of size ticks for up to want replicas.
func newLossWindows(size, want int) lossWindows {
	w := lossWindows{caps: make([]int, size), hist: make([][]float64, want+1), total: make([]float64, want+1)}
	for n := range w.hist {
		w.hist[n], w.total[n] = make([]float64, n+1), 1
	}
	return w
}

func (w *lossWindows) observe(c, want int) {
	w.caps[w.at] = c
	w.seen++
	if w.at++; w.at == len(w.caps) {
		w.at = 0
	}
	if w.seen < len(w.caps) {
		return
	}
	o := w.at
	first := w.caps[o] // the oldest
	// The least of the others (the ring but the oldest), without a
	// division per entry: every service's zones, every tick.
	least := math.MaxInt
	for _, x := range w.caps[:o] {
		least = min(least, x)
	}
	for _, x := range w.caps[o+1:] {
		least = min(least, x)
	}
	if least >= min(first, want) {
		return // no loss the service would have felt
	}
	for n := 1; n < len(w.hist) && n <= first; n++ {
		w.hist[n][min(n, least)]++
		w.total[n]++
	}
}

// survival is the chance that exactly j of n replicas placed in zone k are
// still up at the end of the next ready delay (plus a tick), j = 0..n: the
// zone loses capacity with chance fail (a constant loss rate measured
// online over the ticks it had capacity, one loss per mean stretch as the
// prior), and when it does, it keeps j of n as often as its past losses
// did (a 16-node zone that drops to 2 keeps 2 of 4), with one loss of
// all as the prior. The slice is cached for the tick: callers must not
// change it.
func (a *AdaptiveInference) survival(s *InferenceState, k, n int) []float64 {
	var e *survEntry
	if n < a.survN {
		if e = &a.survAt[k*a.survN+n]; e.tick == a.ticks {
			return a.survMem[e.off : e.off+n+1 : e.off+n+1]
		}
	}
	// Cut from the tick's memory (grown by copying: the slices cut before
	// stay where they are, and their values are where survAt says).
	m := len(a.survMem)
	a.survMem = slices.Grow(a.survMem, n+1)[:m+n+1]
	out := a.survMem[m : m+n+1 : m+n+1]
	clear(out)
	if e != nil {
		*e = survEntry{tick: a.ticks, off: m}
	}
	if n == 0 {
		out[0] = 1
		return out
	}
	if len(a.fail) != len(s.Zones) {
		a.fail, a.failAt = make([]float64, len(s.Zones)), make([]int, len(s.Zones))
		for k := range a.failAt {
			a.failAt[k] = -1 // (none taken)
		}
	}
	if a.failAt[k] != a.ticks {
		z := &s.Zones[k]
		window := (s.ReadyDelay + s.Gap) / s.Gap
		rate := (a.zoneLosses[k] + 1) / (a.upTicks[k] + math.Max(1, z.MeanUp))
		if a.wary && a.zoneLosses[k] > 0 {
			// Losses come in bursts: a zone calm for a day may then
			// lose capacity five times in 14 hours, while its rate over
			// its whole record still says one a day. With no budget
			// for another uncovered loss, a zone that has lost
			// capacity is taken to lose it again at least once per the
			// time since its last loss (a loss an hour ago: one more
			// within the next hour is likely).
			rate = math.Max(rate, 1/(float64(s.Tick-a.lastLoss[k])+window))
		}
		a.fail[k], a.failAt[k] = 1-math.Exp(-window*rate), a.ticks
	}
	fail := a.fail[k]
	var h []float64
	total := 1.0
	if n < len(a.windows[k].hist) {
		h, total = a.windows[k].hist[n], a.windows[k].total[n]
	}
	out[0] = fail / total
	for j, x := range h {
		out[j] += fail * x / total
	}
	out[n] += 1 - fail
	return out
}

// survEntry is where a survival lies in AdaptiveInference.survMem and the
// tick it is of.
type survEntry struct{ tick, off int }

// observe records the zones' capacity losses: capacity falling below what
// it was, as far as the service could have used it (want), so a 16-node
// zone dropping to 2 is a loss and one dropping to 11 is not. A loss
// is joint when another zone lost capacity within one ready delay before
// it, the window in which a replacement cannot become ready; expected
// counts how many joint losses chance alone would give, from each zone's
// own loss rate.
func (a *AdaptiveInference) observe(s *InferenceState, want int) {
	window := int(math.Ceil(s.ReadyDelay/s.Gap)) + 1
	if len(a.prev) != len(s.Zones) {
		a.prev = make([]int, len(s.Zones))
		a.lastLoss = make([]int, len(s.Zones))
		a.zoneLosses = make([]float64, len(s.Zones))
		a.upTicks = make([]float64, len(s.Zones))
		a.windows = make([]lossWindows, len(s.Zones))
		a.runs, a.runAt = make([][]pastRun, len(s.Zones)), make([]int, len(s.Zones))
		// The zones' rings and counts side by side in one block each:
		// every zone's are read every tick.
		caps := make([]int, len(s.Zones)*(window+1))
		rows := make([][]float64, len(s.Zones)*(want+1))
		counts := make([]float64, len(s.Zones)*(want+1)*(want+2)/2)
		totals := make([]float64, len(s.Zones)*(want+1))
		for i := range totals {
			totals[i] = 1
		}
		for k, z := range s.Zones {
			a.prev[k] = z.Capacity
			a.lastLoss[k] = math.MinInt / 2
			a.runAt[k] = -1
			w := &a.windows[k]
			w.caps, caps = caps[:window+1:window+1], caps[window+1:]
			w.hist, rows = rows[:want+1:want+1], rows[want+1:]
			w.total, totals = totals[:want+1:want+1], totals[want+1:]
			for n := range w.hist {
				w.hist[n], counts = counts[:n+1:n+1], counts[n+1:]
			}
		}
	}
	a.ticks++
	// A new tick (a.ticks): the last one's survivals go, and their
	// memory is the new tick's.
	a.survMem = a.survMem[:0]
	if a.survN != want+1 || len(a.survAt) != len(s.Zones)*(want+1) {
		a.survN, a.survAt = want+1, make([]survEntry, len(s.Zones)*(want+1))
	}
	for k, z := range s.Zones {
		c := z.Capacity
		if z.Limited {
			// A learned limit: the zone lost nothing it held, so to the
			// loss record its capacity is unchanged.
			c = max(c, a.prev[k])
		}
		a.windows[k].observe(c, want)
		if c < min(a.prev[k], want) {
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
			if a.runAt[k] >= 0 {
				a.runs[k] = insertRun(a.runs[k], pastRun{s.Tick - a.runAt[k], s.Tick})
				a.runAt[k] = -1
			}
		}
		if c > 0 {
			a.upTicks[k]++
			if a.runAt[k] < 0 {
				a.runAt[k] = s.Tick
			}
		} else {
			a.runAt[k] = -1
		}
		a.prev[k] = c
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

// allOrNothing is the survival of n replicas in a zone that loses all of
// them with chance fail.
func allOrNothing(n int, fail float64) []float64 {
	out := make([]float64, n+1)
	out[0] += fail
	out[n] += 1 - fail
	return out
}

// riskHedge is the least number of on-demand replicas for which the chance
// that fewer than target replicas stay up over the next ready delay is
// below risk, surv[k][j] being the chance that j of the replicas placed in
// zone k survive it. Zones fail independently with weight 1-rho and
// together (comonotone: one draw decides every zone, the worst outcomes
// of all zones coinciding) with weight rho, rho being the measured share
// of losses that came with another zone's.
func riskHedge(target int, surv [][]float64, risk, rho float64) int {
	return new(riskScratch).hedge(target, surv, risk, rho)
}

// riskScratch is riskHedge's working memory, kept by a policy between
// calls: a service's policy runs it for several replica counts every tick.
type riskScratch struct {
	all             []mass
	ends, cur       []int
	zones           [][]mass
	indep, nd, como []float64
	steps           []step
}

// mass is one outcome of a zone: j replicas survive with chance p.
type mass struct {
	j int
	p float64
}

// step is where zone's cumulative chance steps to its next outcome.
type step struct {
	at   float64
	zone int
}

// hedge is riskHedge in x's memory.
func (x *riskScratch) hedge(target int, surv [][]float64, risk, rho float64) int {
	// Only the outcomes a zone can have count: a zone that loses all or
	// nothing has two, whatever its replica count.
	all := x.all[:0]
	ends := x.ends[:0] // zone z's outcomes are all[ends[z-1]:ends[z]]
	total := 0
	for _, d := range surv {
		if len(d) <= 1 {
			continue // no replica there
		}
		from := len(all)
		for j, q := range d {
			if q > 0 {
				all = append(all, mass{j, q})
			}
		}
		if len(all) > from {
			ends = append(ends, len(all))
			total += len(d) - 1
		}
	}
	x.all, x.ends = all, ends
	zones := x.zones[:0]
	for range ends {
		zones = append(zones, nil)
	}
	x.zones = zones
	for z, e := range ends {
		from := 0
		if z > 0 {
			from = ends[z-1]
		}
		zones[z] = all[from:e]
	}
	// indep[j] = probability that exactly j spot replicas survive when
	// zones fail independently.
	indep := zeroed(x.indep, total+1)
	nd := zeroed(x.nd, total+1)
	x.indep, x.nd = indep, nd
	indep[0] = 1
	for _, m := range zones {
		clear(nd)
		for j, pj := range indep {
			if pj == 0 {
				continue
			}
			for _, e := range m {
				nd[j+e.j] += pj * e.p
			}
		}
		indep, nd = nd, indep
	}
	// Comonotone: a uniform u picks, in every zone, the survivors at
	// cumulative chance u. Sweeping u upwards, the sum changes only where
	// some zone's cumulative chance steps to its next outcome.
	como := zeroed(x.como, total+1)
	x.como = como
	steps := x.steps[:0]
	n := 0
	for z, m := range zones {
		n += m[0].j
		c := 0.0
		for _, e := range m[:len(m)-1] {
			c += e.p
			steps = append(steps, step{c, z})
		}
	}
	x.steps = steps
	slices.SortStableFunc(steps, func(a, b step) int {
		// (sort.SliceStable's order: a before b only when a.at < b.at.)
		switch {
		case a.at < b.at:
			return -1
		case b.at < a.at:
			return 1
		}
		return 0
	})
	cur := x.cur[:0]
	for range zones {
		cur = append(cur, 0)
	}
	x.cur = cur
	lo := 0.0
	for _, st := range steps {
		if st.at > lo {
			como[n] += math.Min(1, st.at) - lo
			lo = math.Min(1, st.at)
		}
		m := zones[st.zone]
		n += m[cur[st.zone]+1].j - m[cur[st.zone]].j
		cur[st.zone]++
	}
	if lo < 1 {
		como[n] += 1 - lo
	}
	for od := 0; od <= target; od++ {
		short := 0.0
		for j := range indep {
			if j+od < target {
				short += (1-rho)*indep[j] + rho*como[j]
			}
		}
		if short <= risk {
			return od
		}
	}
	return target
}
