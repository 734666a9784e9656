package optimizer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// Spot capacity is finite, and shared: a pool (one GPU model in one zone;
// Azure: region) gives the whole fleet at most so many spot GPUs. Each pool
// that the fleet could overfill gets a constraint row after the quotas and
// budgets, used by every spot option in the pool like a quota row, so the
// Lagrangian bound, the heuristic and the exact model all see it. Pools
// that even the fleet's largest possible demand cannot fill get no row:
// they can never bind, and rows cost time in every solver loop.

// spotPool is one pool's capacity and where the figure comes from.
type spotPool struct {
	key string // cloud/zone/gpu
	cap int
	// source is "policy" (spot_capacity.pools), "placement score" or
	// "default".
	source string
	score  int // the best placement score of the pool's offers, 0 unknown
	row    int32
	demand int // the most the fleet could ask of it (GPUs)
}

// poolKey names the pool of an offer: its GPU model in its zone, or its
// region for regional offers.
func poolKey(o *pricing.Offer) string {
	return zoneKey(o) + "/" + string(o.GPU)
}

// capacityOf is a pool's capacity: the first spot_capacity.pools entry that
// matches, else the default scaled by the best placement score of the
// pool's offers (score ÷ 10 of the default; a score is AWS's 1-10
// likelihood that a spot request succeeds), else the default.
func capacityOf(p *policy.Policy, o *pricing.Offer, score int) (int, string) {
	def := p.SpotCapacity.DefaultGPUsPerPool
	if def <= 0 {
		def = policy.DefaultSpotCapacityGPUs
	}
	where := o.Zone
	if where == "" {
		where = o.Region
	}
	for _, pl := range p.SpotCapacity.Pools {
		if pl.Cloud == o.Cloud && pricing.MatchAnyGlob([]string{pl.Zone}, where) && (pl.GPU == "" || pl.GPU == o.GPU) {
			return pl.GPUs, "policy"
		}
	}
	if score > 0 {
		return def * min(score, 10) / 10, "placement score"
	}
	return def, "default"
}

// SpotPoolCapacity is the spot GPUs the pool of offer o gives the fleet
// under policy p (spot_capacity, else the default scaled by o's placement
// score): the figure Solve plans with, for the live stages that place spot
// replicas themselves (fleet.HedgedSource).
func SpotPoolCapacity(p *policy.Policy, o *pricing.Offer) int {
	c, _ := capacityOf(p, o, o.Spot.PlacementScore)
	return c
}

// initSpotPools gives every spot offer its pool and per-offer capacity
// limit; rows come later (spotPoolRows), once the workloads' demand is
// known.
func (s *solver) initSpotPools() {
	n := len(s.offers)
	s.offerPool = make([]int32, n)
	idx := map[string]int32{}
	for i := range s.offers {
		o := &s.offers[i]
		s.offerPool[i] = -1
		if o.SpotPrice <= 0 {
			continue
		}
		k := poolKey(o)
		pi, seen := idx[k]
		if !seen {
			pi = int32(len(s.pools))
			idx[k] = pi
			s.pools = append(s.pools, spotPool{key: k, row: -1})
		}
		s.offerPool[i] = pi
		s.pools[pi].score = max(s.pools[pi].score, o.Spot.PlacementScore)
	}
	done := make([]bool, len(s.pools))
	for i := range s.offers {
		pi := s.offerPool[i]
		if pi < 0 || done[pi] {
			continue
		}
		done[pi] = true
		s.pools[pi].cap, s.pools[pi].source = capacityOf(s.pol, &s.offers[i], s.pools[pi].score)
	}
}

// spotLimit is the most spot GPUs one workload may take from the pool of
// an offer: the per-workload spot_pool_gpus and the pool's capacity.
func (s *solver) spotLimit(offer int32) int {
	lim := s.spotPool
	if pi := s.offerPool[offer]; pi >= 0 {
		lim = min(lim, s.pools[pi].cap)
	}
	return lim
}

// poolDemand records the most each pool could be asked for by the fleet:
// a job asks at most its GPUs of a pool, a service at most half its max
// replicas (spot replicas spread over at least two zones), both at most the
// per-workload limit. Pools whose demand fits their capacity never need a
// row.
func (s *solver) poolDemand() {
	seen := map[*class][]int32{}
	for i := range s.pol.Workloads {
		w := &s.pol.Workloads[i]
		if w.Spot == policy.SpotNever {
			continue
		}
		c := s.staticClass(w)
		ps, found := seen[c]
		if !found {
			mark := map[int32]bool{}
			for _, u := range c.units {
				if u.cap != pricing.Spot || u.why != ok {
					continue
				}
				if pi := s.offerPool[u.offer]; pi >= 0 && !mark[pi] {
					mark[pi] = true
					ps = append(ps, pi)
				}
			}
			seen[c] = ps
		}
		ask := gpuCount(w)
		if w.Kind == policy.Inference {
			ask = ceilDiv(max(w.Replicas.Max, w.Replicas.Min, 1), 2) * gpuCount(w)
		}
		ask = min(ask, s.spotPool)
		for _, pi := range ps {
			s.pools[pi].demand += ask
		}
	}
}

// nearFull is the share of a pool's capacity above which it gets its row
// along with the overfilled ones.
const nearFull = 0.5

// maxPoolRounds bounds the rounds of lazy row generation that add a few
// rows each (fewer on large fleets, where a round costs more: poolRounds);
// after them every pool the plan uses that the fleet could overfill gets
// its row each round, and after twice as many every such pool at once.
const maxPoolRounds = 16

func poolRounds(workloads int) int {
	if workloads <= 1000 {
		return maxPoolRounds
	}
	return max(4, maxPoolRounds*1000/workloads)
}

// usedPools lists the pools without a row that an assignment uses at all
// and that the fleet could overfill.
func (s *solver) usedPools(evals []*eval, choice []int) []int32 {
	var out []int32
	seen := map[int32]bool{}
	note := func(offer int32, ct pricing.CapacityType) {
		pi := s.offerPool[offer]
		if ct != pricing.Spot || pi < 0 || seen[pi] {
			return
		}
		seen[pi] = true
		if p := &s.pools[pi]; p.row < 0 && p.demand > p.cap {
			out = append(out, pi)
		}
	}
	for w, e := range evals {
		if choice[w] < 0 {
			continue
		}
		o := &e.cands[choice[w]]
		if o.groups == nil {
			note(o.offer, o.cap)
			continue
		}
		for _, g := range o.groups {
			note(g.offer, g.cap)
		}
	}
	slices.Sort(out)
	return out
}

// Pool rows are generated lazily, as cutting planes: Solve starts with the
// rows of the pools the workloads' cheapest options overfill, and after
// each fleet solve adds the rows of the pools the plan overfills, until
// the plan fits every pool. Leaving a row out only relaxes the problem, so
// every lower bound and every infeasibility proof of a round holds for the
// full problem; a plan that fits every pool is feasible for it. Rows cost
// time in every solver loop, and spot options in a pool with a row are
// candidates of their own, so most large fleets end with a few dozen rows
// instead of hundreds.

// potentialPools lists the pools the fleet could overfill that have no row.
func (s *solver) potentialPools() []int32 {
	var out []int32
	for pi := range s.pools {
		if p := &s.pools[pi]; p.row < 0 && p.demand > p.cap {
			out = append(out, int32(pi))
		}
	}
	return out
}

// overfilled lists the pools without a row that an assignment puts more
// spot GPUs in than they have; choice nil means each workload's cheapest
// candidate.
func (s *solver) overfilled(evals []*eval, choice []int) []int32 {
	used := map[int32]int{}
	add := func(offer int32, ct pricing.CapacityType, gpus int) {
		if ct != pricing.Spot {
			return
		}
		if pi := s.offerPool[offer]; pi >= 0 && s.pools[pi].row < 0 {
			used[pi] += gpus
		}
	}
	for w, e := range evals {
		j := 0
		if choice != nil {
			j = choice[w]
		}
		if j < 0 || j >= len(e.cands) {
			continue
		}
		o := &e.cands[j]
		if o.groups == nil {
			add(o.offer, o.cap, o.gpus)
			continue
		}
		for _, g := range o.groups {
			add(g.offer, g.cap, g.n*s.offers[g.offer].GPUCount)
		}
	}
	var out []int32
	over := false
	for pi, n := range used {
		if n > s.pools[pi].cap {
			over = true
		}
	}
	if !over {
		return nil
	}
	// Workloads pushed out of a full pool move to the next cheapest ones:
	// pools filled to nearFull get their rows in the same round.
	for pi, n := range used {
		if float64(n) > nearFull*float64(s.pools[pi].cap) {
			out = append(out, pi)
		}
	}
	slices.Sort(out)
	return out
}

// addPoolRows gives pools their rows (after the quotas, budgets and
// earlier pool rows) and spot offers their rows and quota classes; the
// caller re-evaluates the workloads.
func (s *solver) addPoolRows(pis []int32) {
	for _, pi := range pis {
		p := &s.pools[pi]
		if p.row >= 0 {
			continue
		}
		p.row = int32(len(s.caps))
		s.poolRows = append(s.poolRows, pi)
		s.caps = append(s.caps, float64(p.cap))
	}
	n := len(s.offers)
	s.spotRows, s.spotQClass = make([][]int32, n), make([]int32, n)
	next := s.nQClass
	extra := map[[2]int32]int32{}
	for i := range s.offers {
		s.spotRows[i], s.spotQClass[i] = s.offerQuota[i], s.offerQClass[i]
		pi := s.offerPool[i]
		if pi < 0 || s.pools[pi].row < 0 {
			continue
		}
		r := s.pools[pi].row
		s.spotRows[i] = append(append([]int32(nil), s.offerQuota[i]...), r)
		k := [2]int32{s.offerQClass[i], r}
		id, found := extra[k]
		if !found {
			id = next
			next++
			extra[k] = id
		}
		s.spotQClass[i] = id
	}
	s.qcSlot = make([]int32, next)
	for i := range s.qcSlot {
		s.qcSlot[i] = -1
	}
	// Cached per-class data holds quota classes and rows.
	s.jobClasses = map[jobKey][]jobUnit{}
	s.lb = nil
}

// rowsOf is the constraint rows (quotas, and the spot pool's) an offer
// bought one way uses, budgets aside.
func (s *solver) rowsOf(offer int32, ct pricing.CapacityType) []int32 {
	if ct == pricing.Spot && s.spotRows != nil {
		return s.spotRows[offer]
	}
	return s.offerQuota[offer]
}

// Row kinds, by position: quotas, then budgets, then spot pools.
func (s *solver) isPoolRow(r int32) bool { return int(r) >= len(s.quotas)+len(s.budgets) }

func (s *solver) poolOfRow(r int32) *spotPool {
	return &s.pools[s.poolRows[int(r)-len(s.quotas)-len(s.budgets)]]
}

// rowName names a quota or spot pool row for explanations.
func (s *solver) rowName(r int32) string {
	switch {
	case int(r) < len(s.quotas):
		return quotaName(s.quotas[r])
	case s.isPoolRow(r):
		return s.poolOfRow(r).describe()
	}
	return "budget " + budgetName(s.budgets[int(r)-len(s.quotas)].Budget)
}

// rowConstraint is the Blocked/RunnerUp constraint name of a row.
func (s *solver) rowConstraint(r int32) string {
	if s.isPoolRow(r) {
		return "spot_capacity"
	}
	return "quota"
}

// rowLeft says what is left of a row holding amt more: "quota … has 3 GPUs
// left" or "spot pool … full: 64 of 64 GPUs taken".
func (s *solver) rowLeft(r int32, rem float64) string {
	if s.isPoolRow(r) {
		p := s.poolOfRow(r)
		taken := float64(p.cap) - max(0, rem)
		if rem < 1-eps {
			return fmt.Sprintf("spot pool %s full: %g of %d GPUs taken (%s)", p.key, taken, p.cap, p.capNote())
		}
		return fmt.Sprintf("spot pool %s has %g of %d GPUs left (%s)", p.key, max(0, rem), p.cap, p.capNote())
	}
	return fmt.Sprintf("%s has %g GPUs left", quotaName(s.quotas[r]), max(0, rem))
}

func (p *spotPool) describe() string {
	return fmt.Sprintf("spot pool %s (%d GPUs, %s)", p.key, p.cap, p.capNote())
}

// capNote says where a pool's capacity comes from.
func (p *spotPool) capNote() string {
	switch p.source {
	case "policy":
		return "spot_capacity.pools"
	case "placement score":
		return fmt.Sprintf("placement score %d/10 × spot_capacity.default_gpus_per_pool", p.score)
	}
	return "spot_capacity.default_gpus_per_pool"
}

// poolLines explain the spot pools an option uses, in one line: capacity,
// where the figure comes from, and whether the fleet is held to it.
func (s *solver) poolLines(o *option) []string {
	if o.cap != pricing.Spot {
		return nil
	}
	var parts []string
	one := func(offer int32, gpus int) {
		pi := s.offerPool[offer]
		if pi < 0 {
			return
		}
		p := &s.pools[pi]
		part := fmt.Sprintf("%s %d of its %d GPUs (%s", p.key, gpus, p.cap, p.capNote())
		if p.row >= 0 {
			part += "; shared by the fleet, held to capacity"
		}
		parts = append(parts, part+")")
	}
	if o.groups == nil {
		one(o.offer, o.gpus)
	} else {
		for _, g := range o.groups {
			one(g.offer, g.n*s.offers[g.offer].GPUCount)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return []string{"spot capacity: " + strings.Join(parts, "; ")}
}

// spotPoolUses lists the pools a plan puts spot GPUs in.
func (s *solver) spotPoolUses(evals []*eval, choice []int) []SpotPoolUse {
	used := map[int32]int{}
	for w, e := range evals {
		if choice[w] < 0 {
			continue
		}
		o := &e.cands[choice[w]]
		if o.cap != pricing.Spot {
			continue
		}
		if o.groups == nil {
			if pi := s.offerPool[o.offer]; pi >= 0 {
				used[pi] += o.gpus
			}
			continue
		}
		for _, g := range o.groups {
			if pi := s.offerPool[g.offer]; pi >= 0 {
				used[pi] += g.n * s.offers[g.offer].GPUCount
			}
		}
	}
	out := []SpotPoolUse{}
	for pi, n := range used {
		p := &s.pools[pi]
		out = append(out, SpotPoolUse{Pool: p.key, CapacityGPUs: p.cap, UsedGPUs: n, Source: p.source, PlacementScore: p.score, Constrained: p.row >= 0})
	}
	slices.SortFunc(out, func(a, b SpotPoolUse) int { return strings.Compare(a.Pool, b.Pool) })
	return out
}
