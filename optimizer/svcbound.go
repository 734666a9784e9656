package optimizer

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// An inference service's options are layouts of replicas over zones: far
// too many to list. The candidates the fleet solver picks from are the
// cheapest layout per GPU model and capacity type, and, per set of quota
// rows avoided, the cheapest layout avoiding them (enumerateLayouts), so a
// quota on one cloud or zone never removes a whole GPU model. The
// Lagrangian bound does not rely on that list: for given multipliers it
// solves the service's priced subproblem over every layout exactly
// (svcPriced), so the bound is a bound of the whole problem.

// svcBoundGroup is one GPU model and capacity type's zones for one
// service, with its restart overhead priced in.
type svcBoundGroup struct {
	model  pricing.GPUModel
	cap    pricing.CapacityType
	units  []zoneUnit
	shapes []replicaShape
}

// replicaShape is a number of zones and the replicas spread over them.
type replicaShape struct{ z, total int }

// replicaShapes lists the (zones, replicas) layouts the spreading rules
// allow for a capacity type; docs/plan.md "Inference" gives the rules.
func (s *solver) replicaShapes(w *policy.Workload, nUnits int, ct pricing.CapacityType) []replicaShape {
	spotPool := s.spotPool
	minR := max(1, w.Replicas.Min)
	maxR := max(w.Replicas.Max, minR)
	need, _ := s.serviceNeed(w)
	minZones := max(1, w.Spread.MinZones, w.Spread.MinClouds)
	if ct == pricing.OnDemand {
		total := max(need, minZones)
		if total > maxR {
			return nil
		}
		return []replicaShape{{minZones, total}}
	}
	var out []replicaShape
	for z := max(2, minZones); z <= min(nUnits, need+1, maxSpreadZones); z++ {
		total := max(need, z)
		for total-ceilDiv(total, z) < minR {
			total++
		}
		if total <= maxR && ceilDiv(total, z)*max(1, w.GPU.Count) <= spotPool {
			out = append(out, replicaShape{z, total})
		}
	}
	return out
}

// maxLayouts bounds the extra layouts kept per GPU model and capacity type.
const maxLayouts = 24

// enumerateLayouts adds to e, for one GPU model and capacity type, the
// cheapest layout avoiding each set of quota rows reached by branching on
// the rows the previous layouts use (breadth first, at most maxLayouts).
// For any set U of rows, the cheapest layout using rows only from U is
// reached (forbid each used row outside U in turn), limit permitting.
func (s *solver) enumerateLayouts(w *policy.Workload, units []zoneUnit, g svcGroup, e *eval, first *option) {
	seen := map[string]bool{layoutSig(first): true}
	visited := map[string]bool{"": true}
	type node struct{ forbid []int32 }
	var queue []node
	push := func(parent []int32, o *option) {
		for _, u := range o.uses {
			if slices.Contains(parent, u.row) {
				continue
			}
			f := append(append([]int32(nil), parent...), u.row)
			slices.Sort(f)
			k := fmt.Sprint(f)
			if !visited[k] {
				visited[k] = true
				queue = append(queue, node{f})
			}
		}
	}
	push(nil, first)
	added, nodes := 0, 0
	var filtered []zoneUnit
	for len(queue) > 0 && added < maxLayouts && nodes < 4*maxLayouts {
		n := queue[0]
		queue = queue[1:]
		nodes++
		filtered = filtered[:0]
		for _, u := range units {
			bad := false
			for _, r := range s.rowsOf(u.offer, g.cap) {
				if slices.Contains(n.forbid, r) {
					bad = true
					break
				}
			}
			if !bad {
				filtered = append(filtered, u)
			}
		}
		opt, _ := s.spread(w, filtered, g.cap)
		if !opt.valid() {
			continue
		}
		push(n.forbid, &opt)
		if k := layoutSig(&opt); !seen[k] {
			seen[k] = true
			s.addServiceOption(e, opt, g.model)
			added++
		}
	}
}

func (s *solver) addServiceOption(e *eval, opt option, model pricing.GPUModel) {
	opt.model, opt.why = model, ok
	opt.unit = int32(len(e.svc))
	e.svc = append(e.svc, opt)
	e.cands = append(e.cands, opt)
}

func layoutSig(o *option) string {
	var b strings.Builder
	fmt.Fprint(&b, o.cap)
	for _, g := range o.groups {
		fmt.Fprintf(&b, "|%d:%d", g.offer, g.n)
	}
	return b.String()
}

// layoutIndex is the index of e's candidate with layout signature sig, or
// -1: a service's option found again after its list was extended or
// re-sorted.
func (e *eval) layoutIndex(sig string) int {
	for j := range e.cands {
		if layoutSig(&e.cands[j]) == sig {
			return j
		}
	}
	return -1
}

// svcScratch is reused across svcPriced calls.
type svcScratch struct {
	val   []float64
	order []int
	sel   []int
	uses  []use
}

// svcPriced solves one service's Lagrangian subproblem exactly: the least
// priced cost over every layout the rules allow, a replica in zone i
// costing perHour_i·(h + β·720) + gpus·Σ_{rows of i} μ_r, where β is the
// sum of the multipliers of its budgets. It returns that value, the rows
// the best layout uses (in sc.uses) and its monthly spend.
func (s *solver) svcPriced(e *eval, mu []float64, bmu float64, sc *svcScratch) (float64, []use, float64) {
	h := s.horizon
	bestVal, bestBudget := math.Inf(1), 0.0
	sc.uses = sc.uses[:0]
	minClouds := max(1, e.w.Spread.MinClouds)
	gpus := float64(gpuCount(e.w))
	_, scale := s.serviceNeed(e.w)
	for gi := range e.svcBound {
		g := &e.svcBound[gi]
		n := len(g.units)
		sc.val = sc.val[:0]
		sc.order = sc.order[:0]
		for i := range g.units {
			u := &g.units[i]
			v := u.perHour * scale * (h + bmu*monthHours)
			for _, r := range s.rowsOf(u.offer, g.cap) {
				v += gpus * mu[r]
			}
			sc.val = append(sc.val, v)
			sc.order = append(sc.order, i)
		}
		val := sc.val
		sort.Slice(sc.order, func(a, b int) bool {
			x, y := sc.order[a], sc.order[b]
			return val[x] < val[y] || val[x] == val[y] && x < y
		})
		for _, sh := range g.shapes {
			if sh.z > n {
				continue
			}
			counts := replicaCounts(sh.total, sh.z)
			var cost float64
			sc.sel, cost = pickZones(g.units, sc.val, sc.order, counts, minClouds, sc.sel)
			if cost < bestVal {
				bestVal = cost
				sc.uses = sc.uses[:0]
				bestBudget = 0
				for i, ui := range sc.sel {
					u := &g.units[ui]
					bestBudget += float64(counts[i]) * u.perHour * scale * monthHours
					for _, r := range s.rowsOf(u.offer, g.cap) {
						sc.uses = addUse(sc.uses, r, float64(counts[i])*gpus)
					}
				}
			}
		}
	}
	return bestVal, sc.uses, bestBudget
}

// pricedLayout rebuilds the option svcPriced chose, to offer it to the
// heuristic as a new candidate (column generation).
func (s *solver) pricedLayout(e *eval, mu []float64, bmu float64) (option, pricing.GPUModel) {
	h := s.horizon
	var best option
	var model pricing.GPUModel
	bestVal := math.Inf(1)
	minClouds := max(1, e.w.Spread.MinClouds)
	gpus := float64(gpuCount(e.w))
	need, scale := s.serviceNeed(e.w)
	for gi := range e.svcBound {
		g := &e.svcBound[gi]
		val := make([]float64, len(g.units))
		order := make([]int, len(g.units))
		for i := range g.units {
			u := &g.units[i]
			val[i] = u.perHour * scale * (h + bmu*monthHours)
			for _, r := range s.rowsOf(u.offer, g.cap) {
				val[i] += gpus * mu[r]
			}
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool {
			x, y := order[a], order[b]
			return val[x] < val[y] || val[x] == val[y] && x < y
		})
		for _, sh := range g.shapes {
			counts := replicaCounts(sh.total, sh.z)
			sel, cost := pickZones(g.units, val, order, counts, minClouds, nil)
			if sel != nil && cost < bestVal {
				bestVal, model = cost, g.model
				best = s.layoutOption(g.units, sel, counts, sh.total, need, g.cap, scale)
			}
		}
	}
	return best, model
}

// addPricedColumns adds each service's best layout under the multipliers
// mu as a candidate when it is new and fits the caps on its own. It
// reports whether any was added (the bound's flat copy is then stale).
func (s *solver) addPricedColumns(evals []*eval, mu []float64) bool {
	added := false
	for _, e := range evals {
		if len(e.svcBound) == 0 {
			continue
		}
		bmu := 0.0
		for _, r := range e.budgetRows {
			bmu += mu[r]
		}
		opt, model := s.pricedLayout(e, mu, bmu)
		if !opt.valid() {
			continue
		}
		// The caller restores the order (resort).
		if !s.oversized(e, &opt) && s.addNewLayout(e, opt, model) {
			added = true
		}
	}
	return added
}

// addNewLayout adds opt as a service layout of e unless e has it already
// (the same groups and cap), and reports whether it did.
func (s *solver) addNewLayout(e *eval, opt option, model pricing.GPUModel) bool {
	if e.layoutIndex(layoutSig(&opt)) >= 0 {
		return false
	}
	s.addServiceOption(e, opt, model)
	return true
}

// oversized reports whether an option alone exceeds a quota or budget.
func (s *solver) oversized(e *eval, o *option) bool {
	for _, u := range o.uses {
		if u.amt > s.caps[u.row]+eps {
			return true
		}
	}
	for _, r := range e.budgetRows {
		if o.budgetUse > s.caps[r]*(1+eps) {
			return true
		}
	}
	return false
}

// remWithout sets rem to what st leaves with w's own option taken out.
func (st *state) remWithout(w int, rem []float64) []float64 {
	copy(rem, st.rem)
	if c := st.choice[w]; c >= 0 {
		e := st.evals[w]
		for _, u := range e.cands[c].uses {
			rem[u.row] += u.amt
		}
		for _, r := range e.budgetRows {
			rem[r] += e.cands[c].budgetUse
		}
	}
	return rem
}

// layoutUses sets a service layout's row uses from its groups, under this
// solver's rows (a layout enumerated by another solver of the same input
// may carry pool rows this one has not added, or lack some it has).
func (s *solver) layoutUses(o *option) {
	o.uses = nil
	for _, g := range o.groups {
		for _, r := range s.rowsOf(g.offer, g.cap) {
			o.uses = addUse(o.uses, r, float64(g.n*s.offers[g.offer].GPUCount))
		}
	}
}

// fullLayouts adds to service e the layouts of the full solver (s.full,
// with a row for every spot pool the fleet could fill, as BuildModel
// builds its model) that fit this solver's caps alone, each with its rows
// recomputed under this solver's; it reports whether it added any.
func (s *solver) fullLayouts(e *eval) bool {
	if s.in.Catalog == nil || s.in.Policy == nil {
		return false
	}
	if s.full == nil {
		// Made once per plan: it depends on the input alone.
		s.full = newSolver(s.in)
		s.full.ctx, s.full.in = s.ctx, s.in
		s.full.addPoolRows(s.full.potentialPools())
	}
	he := s.full.eval(e.w)
	if he.blocked != nil {
		return false
	}
	added := false
	for j := range he.cands {
		o := he.cands[j]
		if !o.valid() || o.groups == nil {
			continue
		}
		// The layout's rows are this solver's (its pool rows may be
		// fewer), as BuildModel does the other way round.
		s.layoutUses(&o)
		if s.oversized(e, &o) {
			continue
		}
		o.full = true
		if s.addNewLayout(e, o, o.model) {
			added = true
		}
	}
	return added
}

// hideFull takes out of each service's candidates the layouts fullLayouts
// added, except the one choice holds (its index follows), so that a
// search runs over the lists a fresh solve's first sub-MIPs see. The
// returned function puts them back, with any layout added meanwhile, and
// finds each service's option in choice again; nil when nothing was
// hidden.
func (s *solver) hideFull(evals []*eval, choice []int) (restore func(choice []int)) {
	type saved struct {
		w     int
		cands []option
	}
	var kept []saved
	for w, e := range evals {
		if len(e.svcBound) == 0 {
			continue
		}
		short := make([]option, 0, len(e.cands))
		at := -1
		for j := range e.cands {
			if e.cands[j].full && j != choice[w] {
				continue
			}
			if j == choice[w] {
				at = len(short)
			}
			short = append(short, e.cands[j])
		}
		if len(short) == len(e.cands) {
			continue
		}
		kept = append(kept, saved{w, e.cands})
		e.cands = short
		if choice[w] >= 0 {
			choice[w] = at
		}
	}
	if len(kept) == 0 {
		return nil
	}
	s.lb = nil
	return func(choice []int) {
		for _, k := range kept {
			e := evals[k.w]
			sig := ""
			if choice[k.w] >= 0 {
				sig = layoutSig(&e.cands[choice[k.w]])
			}
			short := e.cands
			e.cands = k.cands
			// Layouts added meanwhile join the list (a set of the
			// signatures: a service may hold hundreds of layouts).
			have := make(map[string]bool, len(e.cands))
			for j := range e.cands {
				have[layoutSig(&e.cands[j])] = true
			}
			for j := range short {
				if ls := layoutSig(&short[j]); !have[ls] {
					e.cands = append(e.cands, short[j])
					have[ls] = true
				}
			}
			if sig != "" {
				choice[k.w] = e.layoutIndex(sig)
			}
		}
		s.resort(evals, choice)
	}
}

// modelColumns adds to each service of the group ws the layouts BuildModel
// gives it: those enumerated with a row for every spot pool the fleet
// could fill (Solve's own enumeration runs on the pool rows it has added
// so far, and lays replicas out around those). It is for the final
// repair's failed search, before it calls the group infeasible: on
// differential seed 4189 (at GPUBROKER_DIFF_MAXN=60) a spot-only service
// needing three zones was called infeasible with a "proof" while CBC
// placed it over the model, one replica in gcp me-west1-a and four in
// us-central1, once another service left the us-* quota
// (TestModelColumns). When it added a layout it returns the function that
// takes them out again, restoring the group's candidate lists and choices
// (nil otherwise).
func (s *solver) modelColumns(st *state, ws []int) (undo func()) {
	if s.in.Catalog == nil || s.in.Policy == nil {
		return nil
	}
	var svcs []int
	for _, w := range ws {
		if len(st.evals[w].svcBound) > 0 {
			svcs = append(svcs, w)
		}
	}
	if len(svcs) == 0 {
		return nil
	}
	type saved struct {
		cands, svc []option
	}
	before := make([]saved, len(svcs))
	for i, w := range svcs {
		e := st.evals[w]
		before[i] = saved{slices.Clone(e.cands), slices.Clone(e.svc)}
	}
	choices := make([]int, len(ws))
	for i, w := range ws {
		choices[i] = st.choice[w]
	}
	added := false
	for _, w := range svcs {
		if s.fullLayouts(st.evals[w]) {
			added = true
		}
	}
	if !added {
		return nil
	}
	return func() {
		for i, w := range svcs {
			e := st.evals[w]
			e.cands, e.svc = before[i].cands, before[i].svc
		}
		for i, w := range ws {
			st.choice[w] = choices[i]
		}
		s.lb = nil
	}
}

// fittingColumns adds service layouts that the repair search may need
// when st leaves workloads out. To each service that shares a row with a
// left-out workload (placed or not; at most fitColumnServices of them): the
// cheapest layout that fits what st leaves of every row (its own layout
// taken out), the cheapest that fits the caps on their own, and then, step
// by step, the cheapest that takes one replica less from each row its last
// one lacks room in now or that a left-out workload's cheaper options lack
// room in. And for each of the four cheapest options of a
// left-out workload that lack room in some row, to each placed service
// holding such a row, the cheapest layout that fits what is left once the
// service is taken out and that option put in. The enumerated layouts
// avoid whole sets of rows reached by branching, so a layout that takes
// just the room a row has, or leaves room for another workload (one
// replica instead of two under a 2-GPU quota), is among them only by
// luck, and without it the search cannot place a fleet that fits (seen in
// the differential test against CBC). It reports whether any was added
// (the caller restores the order).
func (s *solver) fittingColumns(st *state) bool {
	added := false
	add := func(e *eval, opt option, model pricing.GPUModel) {
		if s.addNewLayout(e, opt, model) {
			added = true
		}
	}
	var left []int
	for w, c := range st.choice {
		if c < 0 {
			left = append(left, w)
		}
	}
	if len(left) == 0 {
		return false
	}
	// The rows the left-out workloads' cheapest options lack room in.
	short := map[int32]bool{}
	for _, b := range left {
		eb := st.evals[b]
		for j := 0; j < min(4, len(eb.cands)); j++ {
			for _, u := range eb.cands[j].uses {
				if st.rem[u.row] < u.amt-eps {
					short[u.row] = true
				}
			}
		}
	}
	rem := make([]float64, len(s.caps))
	cut := make([]float64, len(s.caps))
	done := 0
	for _, comp := range s.components(st.evals, allIdx(len(st.evals))) {
		hit := false
		for _, w := range comp {
			hit = hit || st.choice[w] < 0
		}
		if !hit {
			continue
		}
		for _, w := range comp {
			e := st.evals[w]
			if len(e.svcBound) == 0 || done >= fitColumnServices {
				continue
			}
			done++
			st.remWithout(w, rem)
			if opt, model, found := s.fittingLayout(e, rem); found {
				add(e, opt, model)
			}
			// Within the caps, a replica less from each row that has no
			// room now or that a left-out workload needs, step by step.
			copy(cut, s.caps)
			gpus := float64(gpuCount(e.w))
			for step := 0; step < 8; step++ {
				opt, model, found := s.fittingLayout(e, cut)
				if !found {
					break
				}
				add(e, opt, model)
				less := false
				for _, u := range opt.uses {
					if rem[u.row] < u.amt-eps || short[u.row] {
						cut[u.row] = u.amt - gpus
						less = true
					}
				}
				if !less {
					break
				}
			}
		}
	}
	for _, b := range left {
		eb := st.evals[b]
		for j := 0; j < min(4, len(eb.cands)); j++ {
			ob := &eb.cands[j]
			lacks := map[int32]bool{}
			for _, u := range ob.uses {
				if st.rem[u.row] < u.amt-eps {
					lacks[u.row] = true
				}
			}
			if len(lacks) == 0 {
				continue
			}
			for w, e := range st.evals {
				c := st.choice[w]
				if len(e.svcBound) == 0 || c < 0 {
					continue
				}
				holds := false
				for _, u := range e.cands[c].uses {
					holds = holds || lacks[u.row]
				}
				if !holds {
					continue
				}
				st.remWithout(w, rem)
				for _, u := range ob.uses {
					rem[u.row] -= u.amt
				}
				for _, r := range eb.budgetRows {
					rem[r] -= ob.budgetUse
				}
				if opt, model, found := s.fittingLayout(e, rem); found {
					add(e, opt, model)
				}
			}
		}
	}
	return added
}

// fitColumnServices bounds the services fittingColumns works on in one
// repair (each costs up to ~80 priced subproblems).
const fitColumnServices = 256

// fittingLayout is the cheapest layout of service e whose rows all have
// room in rem, found by pricing out the rows without room for one
// replica, then each row the layout still overfills, up to 8 rounds.
func (s *solver) fittingLayout(e *eval, rem []float64) (option, pricing.GPUModel, bool) {
	const priceOut = 1e7 // per GPU: above any layout's cost
	gpus := float64(gpuCount(e.w))
	mu := make([]float64, len(s.caps))
	for r := range mu {
		if rem[r] < gpus-eps {
			mu[r] = priceOut
		}
	}
	for round := 0; round < 8; round++ {
		opt, model := s.pricedLayout(e, mu, 0)
		if !opt.valid() {
			break
		}
		over := false
		for _, u := range opt.uses {
			if rem[u.row] < u.amt-eps {
				mu[u.row] += priceOut
				over = true
			}
		}
		if over {
			continue
		}
		for _, r := range e.budgetRows {
			if rem[r] < opt.budgetUse-eps*max(1, opt.budgetUse) {
				// Over a budget: pricing rows does not make it cheaper.
				return option{}, "", false
			}
		}
		return opt, model, true
	}
	return option{}, "", false
}

// frontierFleet is the largest fleet whose services get frontier layouts:
// the fleets the branch and bound polish (polishSize) can search whole.
// Above it the neighbourhood searches do not make full use of them: on a
// 45-workload hard fleet (hardgen seed 7) they let CBC's optimum over the
// candidates drop 0.8% and the heuristic's plan 0.6%, ending 0.123% above
// it (docs/BENCHMARKS.md).
const frontierFleet = polishSize

// addFrontierLayouts adds to a service, for each quota or spot pool row
// its candidates use, the layouts that trade cost against that row's GPUs
// best: the cheapest layout with the row priced at a sweep of prices per
// GPU, from a sixteenth of the cheapest layout's cost per GPU to far above
// it (the lower convex hull of cost against the row's GPUs), on top of
// the prices that make the layout fit every cap. The enumerated layouts avoid a row entirely or not at all; when
// two services share a tight row the optimum often gives each part of it
// (3 and 2 GPUs of a 5-GPU quota), which no enumerated layout does: the
// differential test against CBC found plans 0.2-2.2% above the optimum
// for want of them.
func (s *solver) addFrontierLayouts(e *eval) {
	if len(e.svcBound) == 0 || len(e.cands) == 0 {
		return
	}
	seen := map[int32]bool{}
	var rows []int32
	for j := range e.cands {
		for _, u := range e.cands[j].uses {
			if !seen[u.row] {
				seen[u.row] = true
				rows = append(rows, u.row)
			}
		}
	}
	perGPU := e.cands[0].cost / float64(max(1, e.cands[0].gpus))
	mu := make([]float64, len(s.caps))
	sigs := map[string]bool{}
	for j := range e.cands {
		sigs[layoutSig(&e.cands[j])] = true
	}
	add := func(opt option, model pricing.GPUModel) {
		if !opt.valid() || s.oversized(e, &opt) {
			return
		}
		if sig := layoutSig(&opt); !sigs[sig] {
			sigs[sig] = true
			s.addServiceOption(e, opt, model)
		}
	}
	// Rows a layout alone would overfill get dearer, doubling, until the
	// layout fits the caps: the layouts on the way that fit are kept, and
	// the sweep below runs from there over layouts that fit.
	base := make([]float64, len(s.caps))
	for round := 0; round < 32; round++ {
		opt, model := s.pricedLayout(e, base, 0)
		over := false
		for _, u := range opt.uses {
			if u.amt > s.caps[u.row]+eps {
				base[u.row] = max(2*base[u.row], perGPU/16)
				over = true
			}
		}
		if !over {
			add(opt, model)
			break
		}
	}
	for _, r := range rows {
		for _, f := range []float64{1.0 / 16, 1.0 / 8, 1.0 / 4, 1.0 / 2, 1, 2, 4, 8, 16, 64, 1e6} {
			copy(mu, base)
			mu[r] += perGPU * f
			add(s.pricedLayout(e, mu, 0))
		}
	}
}

// fitColumns adds to each service, once every other search is done, the
// cheapest layout that fits what the plan leaves of each row with its own
// layout taken out, and the cheapest that fits the caps on their own
// (fitLayout: rows taken in part); a service whose new layout is cheaper
// than its own moves to it, and when any layout was new the
// large-neighbourhood search runs again from the plan with them (one
// service's partial layout often needs another workload to move first).
// On fleets of up to oneOffFleet workloads the search runs even with
// nothing new, taking holders by what leaving a row costs them (lnsBy).
// Run last, it returns the plan it got or a cheaper one. As candidates
// from the start they changed the searches' paths: a 35-workload hard
// fleet with tight spot pools (TestMILPComparisonSpotPools seed 4) ended
// 3% dearer.
func (s *solver) fitColumns(evals []*eval, choice []int, mu []float64, budget int) []int {
	st := newState(s, evals, choice)
	rem := make([]float64, len(s.caps))
	added := false
	for w, e := range evals {
		if len(e.svcBound) == 0 {
			continue
		}
		st.remWithout(w, rem)
		// Within what the plan leaves and within the caps. (Cutting
		// each row of the cheapest layout to every level below its use
		// as well found 0.4% on a 26-workload fleet, but on others it
		// gave the exact solver cheaper plans than the search finds:
		// TestMILPComparison seeds 7 and 8 0.26-0.30% and
		// TestMILPComparisonSpotPools seed 4 0.97% above CBC over the
		// candidates, while its plan for the last was cheaper than
		// main's, 27,422.75 → 27,409.70.)
		limits := [][]float64{rem, s.caps}
		for k, caps := range limits {
			opt, model, ok := s.fitLayout(e, caps)
			if !ok || s.oversized(e, &opt) {
				continue
			}
			if e.layoutIndex(layoutSig(&opt)) >= 0 {
				continue
			}
			s.addServiceOption(e, opt, model)
			added = true
			if k == 0 && opt.cost < e.cands[st.choice[w]].cost*(1-eps) {
				st.set(w, len(e.cands)-1)
			}
		}
	}
	if added {
		s.resort(evals, st.choice)
	}
	if len(evals) > oneOffFleet {
		if !added {
			return choice
		}
		return s.lns(evals, st.choice, mu, budget)
	}
	// Holders by what leaving a row costs them (lnsBy): run last as well,
	// so it too can only make the plan cheaper.
	return s.lnsBy(evals, st.choice, mu, budget, true)
}

// fitLayout is the cheapest layout of service e whose replicas fit rem
// row by row, each row taken in part where its room allows (one replica
// under a 1-GPU region quota, the others elsewhere), which pricing whole
// rows cannot give: a priced row keeps all its cheap zones or none, and
// the frontier's sweep of prices jumps over the narrow range in which it
// keeps just one (the differential test against CBC: 0.93% and 0.16%
// above the optimum for want of such layouts). Per GPU model, capacity
// type and shape the zones are picked cheapest first, the larger counts
// first, each the cheapest zone whose rows still have room for it
// (pickZonesFit); budgets are checked on the result.
func (s *solver) fitLayout(e *eval, rem []float64) (option, pricing.GPUModel, bool) {
	var best option
	var model pricing.GPUModel
	gpus := float64(gpuCount(e.w))
	need, scale := s.serviceNeed(e.w)
	minClouds := max(1, e.w.Spread.MinClouds)
	left := make([]float64, len(rem))
	for gi := range e.svcBound {
		g := &e.svcBound[gi]
		val := make([]float64, len(g.units))
		order := make([]int, len(g.units))
		for i := range g.units {
			val[i], order[i] = g.units[i].perHour, i
		}
		sort.SliceStable(order, func(a, b int) bool { return val[order[a]] < val[order[b]] })
		for _, sh := range g.shapes {
			if sh.z > len(g.units) {
				continue
			}
			counts := replicaCounts(sh.total, sh.z)
			copy(left, rem)
			sel, cost := s.pickZonesFit(g, order, counts, minClouds, gpus, left)
			if sel == nil || best.valid() && cost*scale*s.horizon >= best.cost {
				continue
			}
			opt := s.layoutOption(g.units, sel, counts, sh.total, need, g.cap, scale)
			budgetOK := true
			for _, r := range e.budgetRows {
				budgetOK = budgetOK && rem[r] >= opt.budgetUse-eps*max(1, opt.budgetUse)
			}
			if budgetOK && (!best.valid() || opt.cost < best.cost) {
				best, model = opt, g.model
			}
		}
	}
	return best, model, best.valid()
}

// pickZonesFit chooses len(counts) zones of g (order: cheapest first) for
// the counts, larger counts first, each on the cheapest unused zone whose
// rows have room in left for its GPUs (left is used up as it goes); when
// the zones still to pick are as many as the clouds still missing for
// minClouds, only zones of a new cloud are taken. It returns the zones
// and Σ counts·perHour, or nil when some count finds no zone. Greedy, not
// exact: a partial row's room goes to the cheapest zone that needs it.
func (s *solver) pickZonesFit(g *svcBoundGroup, order, counts []int, minClouds int, gpus float64, left []float64) ([]int, float64) {
	sel := make([]int, 0, len(counts))
	var clouds []pricing.Cloud
	cost := 0.0
	for k, c := range counts {
		amt := float64(c) * gpus
		mustNew := minClouds-len(clouds) >= len(counts)-k
		found := -1
		for _, ui := range order {
			u := &g.units[ui]
			if containsInt(sel, ui) || mustNew && slices.Contains(clouds, u.cloud) {
				continue
			}
			fits := true
			for _, r := range s.rowsOf(u.offer, g.cap) {
				if left[r] < amt-eps {
					fits = false
					break
				}
			}
			if fits {
				found = ui
				break
			}
		}
		if found < 0 {
			return nil, math.Inf(1)
		}
		u := &g.units[found]
		for _, r := range s.rowsOf(u.offer, g.cap) {
			left[r] -= amt
		}
		if !slices.Contains(clouds, u.cloud) {
			clouds = append(clouds, u.cloud)
		}
		sel = append(sel, found)
		cost += float64(c) * u.perHour
	}
	return sel, cost
}

// holderLayouts gives each service a layout that takes a row in part once
// one of the row's holders leaves it, when that pair of moves makes the
// plan cheaper. fitColumns fits layouts to the room the plan leaves now;
// on a 26-workload fleet of the differential test (seed 2285 at 60
// workloads) the optimum moves a 4-GPU job off a full *east* quota for
// $39.68 more so that an Azure A100 service can put 4 of its 10 GPUs in
// eastus ($111.27 less), a layout neither the enumeration (2 or 8 GPUs
// there) nor fitColumns (2) gives. For each service, each row its
// cheapest layout within the caps lacks room in, and each holder of that
// row (the cheapest to leave per amount held), the service's cheapest
// layout within the room left with the holder off the row is tried with
// the holder on its cheapest option that still fits; a layout is added to
// the service's candidates only when the pair is taken. When any pair
// was, the large-neighbourhood search runs again (the room left over may
// suit a third workload). Run last, on plans made once: it returns the
// plan it got or a cheaper one.
func (s *solver) holderLayouts(evals []*eval, choice []int, mu []float64, budget int) []int {
	st := newState(s, evals, append([]int(nil), choice...))
	rem := make([]float64, len(s.caps))
	added := false
	for w, e := range evals {
		if len(e.svcBound) == 0 || st.choice[w] < 0 {
			continue
		}
		full, _, ok := s.fitLayout(e, s.caps)
		if !ok {
			continue
		}
		for _, fu := range full.uses {
			st.remWithout(w, rem)
			r := fu.row
			if rem[r] >= fu.amt-eps {
				continue
			}
			// The cheapest holder to leave the row per amount it holds.
			type holder struct {
				h   int
				amt float64
				pen float64
			}
			var hs []holder
			for h, hc := range st.choice {
				if h == w || hc < 0 {
					continue
				}
				amt := st.holds(h, r)
				if amt <= eps {
					continue
				}
				pen, j := st.leaveRow(h, r)
				if j < 0 {
					continue
				}
				i := slices.IndexFunc(hs, func(x holder) bool { return x.amt == amt })
				switch {
				case i < 0:
					hs = append(hs, holder{h, amt, pen})
				case pen < hs[i].pen:
					hs[i] = holder{h, amt, pen}
				}
			}
			for _, hd := range hs {
				h := hd.h
				room := slices.Clone(rem)
				room[r] += hd.amt
				opt, model, ok := s.fitLayout(e, room)
				c, hc := st.choice[w], st.choice[h]
				if !ok || s.oversized(e, &opt) || opt.cost >= e.cands[c].cost*(1-eps) {
					continue
				}
				old := e.cands[c].cost + evals[h].cands[hc].cost
				st.set(w, -1)
				st.set(h, -1)
				hj := -1
				if st.fits(e, &opt) {
					st.apply(e, &opt, 1)
					for j := range evals[h].cands {
						if st.fits(evals[h], &evals[h].cands[j]) {
							hj = j
							break
						}
					}
					st.apply(e, &opt, -1)
				}
				if hj < 0 || opt.cost+evals[h].cands[hj].cost >= old-eps*max(1, old) {
					st.set(h, hc)
					st.set(w, c)
					continue
				}
				s.addServiceOption(e, opt, model)
				st.set(h, hj)
				st.set(w, len(e.cands)-1)
				s.resort(evals, st.choice)
				// Re-sorting keeps w's choice; its rows are those of the
				// same layout.
				added = true
				break
			}
		}
	}
	if !added {
		return choice
	}
	return s.lns(evals, st.choice, mu, budget)
}
