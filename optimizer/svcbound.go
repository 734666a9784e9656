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
		sig := layoutSig(&opt)
		dup := false
		for j := range e.cands {
			if layoutSig(&e.cands[j]) == sig {
				dup = true
				break
			}
		}
		if dup || s.oversized(e, &opt) {
			continue
		}
		// The caller restores the order (resort).
		opt.model, opt.why = model, ok
		opt.unit = int32(len(e.svc))
		e.svc = append(e.svc, opt)
		e.cands = append(e.cands, opt)
		added = true
	}
	return added
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

// fittingColumns adds service layouts that the repair search may need
// when st leaves workloads out: to each service left out, the cheapest
// layout that fits what st leaves of every row and the cheapest that fits
// the caps on their own; and for each of the four cheapest options of a
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
		sig := layoutSig(&opt)
		for j := range e.cands {
			if layoutSig(&e.cands[j]) == sig {
				return
			}
		}
		opt.model, opt.why = model, ok
		opt.unit = int32(len(e.svc))
		e.svc = append(e.svc, opt)
		e.cands = append(e.cands, opt)
		added = true
	}
	var left []int
	for w, e := range st.evals {
		if st.choice[w] >= 0 {
			continue
		}
		left = append(left, w)
		if len(e.svcBound) == 0 {
			continue
		}
		for _, rem := range [][]float64{st.rem, s.caps} {
			if opt, model, found := s.fittingLayout(e, rem); found {
				add(e, opt, model)
			}
		}
	}
	rem := make([]float64, len(s.caps))
	for _, b := range left {
		eb := st.evals[b]
		for j := 0; j < min(4, len(eb.cands)); j++ {
			ob := &eb.cands[j]
			short := map[int32]bool{}
			for _, u := range ob.uses {
				if st.rem[u.row] < u.amt-eps {
					short[u.row] = true
				}
			}
			if len(short) == 0 {
				continue
			}
			for w, e := range st.evals {
				c := st.choice[w]
				if len(e.svcBound) == 0 || c < 0 {
					continue
				}
				oc := &e.cands[c]
				holds := false
				for _, u := range oc.uses {
					holds = holds || short[u.row]
				}
				if !holds {
					continue
				}
				copy(rem, st.rem)
				for _, u := range oc.uses {
					rem[u.row] += u.amt
				}
				for _, r := range e.budgetRows {
					rem[r] += oc.budgetUse
				}
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
