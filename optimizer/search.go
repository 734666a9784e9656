package optimizer

import (
	"math"
	"slices"
	"sort"
)

// searchWork bounds the candidate scans of one search (≈ 0.1 s).
const searchWork = 20_000_000

// searchResult is the outcome of the complete search over a set of
// workloads' candidates.
type searchResult struct {
	// pick is the best assignment found for the searched workloads, in
	// the order given (nil when none was found); cost is its cost.
	pick []int
	cost float64
	// complete is true when the search visited every branch it did not
	// prove useless: then pick is optimal over the candidates, and nil
	// pick proves that no assignment places every workload.
	complete bool
	nodes    int
	// core, for a feasibility search (firstOnly) that is complete and
	// found nothing, is a subset of the searched workloads that cannot all
	// be placed together (with the rest fixed as they were): every
	// workload the search branched on or found without a fitting
	// candidate. Sorted.
	core []int
}

// detach takes the workloads in ws out of base for a search over them: it
// returns a state on base's choices (each of ws set to -1; restore puts
// them back) with a copy of base's remaining capacity less their options,
// O(rows + |ws|) rather than O(fleet), their original choices, and the
// candidates one node of the search scans.
func (s *solver) detach(base *state, ws []int) (st *state, orig []int, work int) {
	evals := base.evals
	st = &state{s: s, evals: evals, choice: base.choice, rem: append([]float64(nil), base.rem...)}
	orig = make([]int, len(ws))
	for i, w := range ws {
		orig[i] = st.choice[w]
		if c := st.choice[w]; c >= 0 {
			st.apply(evals[w], &evals[w].cands[c], -1)
			st.choice[w] = -1
		}
		work += len(evals[w].cands)
	}
	return st, orig, work
}

// restore puts back the choices detach took out of base.
func restore(base *state, ws, orig []int) {
	for i, w := range ws {
		base.choice[w] = orig[i]
	}
}

// search is a depth-first branch and bound over the candidates of the
// workloads in ws (indexes into evals); every other workload is fixed at
// fixed[w] (-1: absent). Workloads with the fewest candidates that fit go
// first, candidates cheapest first; a branch is cut when its cost plus
// each remaining workload's cheapest fitting candidate reaches the
// incumbent, or when a remaining workload has no candidate that fits.
// firstOnly stops at the first full assignment (a feasibility proof).
// It gives up after about budget candidate scans, reporting complete=false.
//
// mu, when not nil, are Lagrangian multipliers of the rows: the bound is
// then cost + Σ_remaining min_j (c_wj + μ·a_wj) − μ·rem, valid for any
// μ ≥ 0 and much tighter than the plain sum of cheapest options.
func (s *solver) search(base *state, ws []int, incumbent float64, budget int, firstOnly bool, mu []float64) searchResult {
	return s.searchBy(base, ws, incumbent, budget, firstOnly, mu, false)
}

// setRows lists the rows the workloads of set use (each workload's budget
// rows, then its candidates' rows, first use first) that keep accepts;
// nrows is the number of rows.
func setRows(evals []*eval, set []int, nrows int, keep func(r int32) bool) []int32 {
	var rows []int32
	seen := make([]bool, nrows)
	mark := func(r int32) {
		if !seen[r] && keep(r) {
			seen[r] = true
			rows = append(rows, r)
		}
	}
	for _, w := range set {
		for _, r := range evals[w].budgetRows {
			mark(r)
		}
		for j := range evals[w].cands {
			for _, u := range evals[w].cands[j].uses {
				mark(u.row)
			}
		}
	}
	return rows
}

// workloadRows lists, per workload, the rows setRows would list for it
// alone (keeping every row).
func workloadRows(evals []*eval) [][]int32 {
	rows := make([][]int32, len(evals))
	for w, e := range evals {
		var rs []int32
		mark := func(r int32) {
			if !slices.Contains(rs, r) {
				rs = append(rs, r)
			}
		}
		for _, r := range e.budgetRows {
			mark(r)
		}
		for j := range e.cands {
			for _, u := range e.cands[j].uses {
				mark(u.row)
			}
		}
		rows[w] = rs
	}
	return rows
}

// unionRows is setRows over ws with mu > 0 from the rows s.wrows lists
// per workload: the same rows in the same order (the first use of a row
// over ws comes first either way).
func (s *solver) unionRows(ws []int, mu []float64) []int32 {
	if len(s.seen) < len(mu) {
		s.seen = make([]bool, len(mu))
	}
	var rows []int32
	for _, w := range ws {
		for _, r := range s.wrows[w] {
			if !s.seen[r] && mu[r] > 0 {
				s.seen[r] = true
				rows = append(rows, r)
			}
		}
	}
	for _, r := range rows {
		s.seen[r] = false
	}
	return rows
}

// searchBy is search; with byPriced (and mu) each workload's candidates
// are tried in the order of their cost priced at mu instead of their cost.
// With multipliers fitted to the set (setMultipliers) that order reaches
// the set's optimum early and the bound then cuts the rest of the tree
// (pricedlns.go).
func (s *solver) searchBy(base *state, ws []int, incumbent float64, budget int, firstOnly bool, mu []float64, byPriced bool) searchResult {
	evals := base.evals
	st, orig, work := s.detach(base, ws)
	defer restore(base, ws, orig)
	// The node limit is a work budget: each node scans every remaining
	// workload's candidates.
	nodeLimit := max(100, budget/max(1, work))
	res := searchResult{cost: incumbent}
	// fit[i] lists the candidates of ws[i] that fit at the root, cheapest
	// first: capacity only shrinks down a path, so no other candidate
	// fits anywhere in the tree, and the nodes scan these alone (same
	// nodes, same order; on full rows most candidates drop out).
	fit := make([][]int32, len(ws))
	all := make([]int32, 0, work)
	for i, w := range ws {
		e := evals[w]
		k := len(all)
		for j := range e.cands {
			if st.fits(e, &e.cands[j]) {
				all = append(all, int32(j))
			}
		}
		fit[i] = all[k:len(all):len(all)]
	}
	// priced[i] are the priced costs of free[i]'s candidates (nil without
	// mu), swapped along with free.
	var priced [][]float64
	// touched lists the rows with a positive multiplier that some freed
	// workload's candidates use: a row no candidate uses only adds
	// −μ·rem to the bound, valid but loose.
	var touched []int32
	if mu != nil {
		priced = make([][]float64, len(ws))
		if s.wrows != nil {
			touched = s.unionRows(ws, mu)
		} else {
			touched = setRows(evals, ws, len(mu), func(r int32) bool { return mu[r] > 0 })
		}
		for i, w := range ws {
			e := evals[w]
			bmu := 0.0
			for _, r := range e.budgetRows {
				bmu += mu[r]
			}
			// Only the candidates that fit at the root are ever priced.
			priced[i] = make([]float64, len(e.cands))
			for _, j := range fit[i] {
				o := &e.cands[j]
				v := o.cost + bmu*o.budgetUse
				for _, u := range o.uses {
					v += mu[u.row] * u.amt
				}
				priced[i][j] = v
			}
		}
	}
	var order map[int][]int32
	if byPriced && priced != nil {
		order = make(map[int][]int32, len(ws))
		for i, w := range ws {
			ord := slices.Clone(fit[i])
			p := priced[i] // (priced follows ws here: free is not yet swapped)
			sort.SliceStable(ord, func(a, b int) bool { return p[ord[a]] < p[ord[b]] })
			order[w] = ord
		}
	}
	free := append([]int(nil), ws...)
	swap := func(a, b int) {
		free[a], free[b] = free[b], free[a]
		fit[a], fit[b] = fit[b], fit[a]
		if priced != nil {
			priced[a], priced[b] = priced[b], priced[a]
		}
	}
	limitHit := false
	// inCore marks, for a feasibility search, the workloads of its dead
	// ends: each branch workload on the path to one and the workload left
	// without a fitting candidate there. The tree tried every fitting
	// candidate of each branch workload, and capacity only shrinks down a
	// path, so those workloads alone have no assignment.
	var inCore map[int]bool
	if firstOnly && math.IsInf(incumbent, 1) {
		inCore = make(map[int]bool)
	}
	var rec func(depth int, cost float64) bool
	rec = func(depth int, cost float64) bool {
		res.nodes++
		if res.nodes > nodeLimit {
			limitHit = true
			return true
		}
		if depth == len(free) {
			if cost < res.cost-eps*max(1, res.cost) || res.pick == nil && cost <= res.cost {
				res.cost = cost
				res.pick = res.pick[:0]
				for _, w := range ws {
					res.pick = append(res.pick, st.choice[w])
				}
			}
			return firstOnly
		}
		// Forward check and bound: every remaining workload needs a fitting
		// candidate; pick the one with the fewest to branch on next.
		// Two bounds, the larger wins: the plain sum of each remaining
		// workload's cheapest fitting candidate, and the Lagrangian one
		// (cost + Σ min priced − μ·rem over the rows the set touches),
		// which is tighter on congested rows and looser where the
		// multipliers price slack the set cannot use.
		bestI, bestN := -1, math.MaxInt
		lower, lagr := cost, cost
		for _, r := range touched {
			lagr -= mu[r] * max(0, st.rem[r])
		}
		for i := depth; i < len(free); i++ {
			e := evals[free[i]]
			n, cheapest, cheapestPriced := 0, 0.0, math.Inf(1)
			for _, j := range fit[i] {
				if st.fits(e, &e.cands[j]) {
					if n == 0 {
						cheapest = e.cands[j].cost
					}
					if priced != nil {
						cheapestPriced = min(cheapestPriced, priced[i][j])
					}
					n++
				}
			}
			if n == 0 {
				if inCore != nil {
					inCore[free[i]] = true
					for _, v := range free[:depth] {
						inCore[v] = true
					}
				}
				return false
			}
			lower += cheapest
			lagr += cheapestPriced
			if n < bestN {
				bestI, bestN = i, n
			}
		}
		if priced != nil {
			lower = max(lower, lagr)
		}
		// A priced search only wants plans cheaper than the incumbent
		// and cuts against it from the start: its first leaves, priced
		// cheapest, may lie deep in infeasible subtrees.
		if (res.pick != nil || byPriced) && lower >= res.cost-eps*max(1, res.cost) {
			return false
		}
		swap(depth, bestI)
		w := free[depth]
		e := evals[w]
		cands := fit[depth]
		if ord := order[w]; ord != nil {
			cands = ord
		}
		for _, j32 := range cands {
			j := int(j32)
			if !st.fits(e, &e.cands[j]) {
				continue
			}
			st.set(w, j)
			stop := rec(depth+1, cost+e.cands[j].cost)
			st.set(w, -1)
			if stop {
				swap(depth, bestI)
				return true
			}
		}
		swap(depth, bestI)
		return false
	}
	rec(0, 0)
	res.complete = !limitHit
	if res.complete && res.pick == nil && inCore != nil {
		for w := range inCore {
			res.core = append(res.core, w)
		}
		sort.Ints(res.core)
	}
	return res
}

// components splits the workloads into groups that share no constraint
// row: each group can be searched on its own.
func (s *solver) components(evals []*eval, ws []int) [][]int {
	parent := make([]int, len(s.caps))
	for i := range parent {
		parent[i] = i
	}
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	rowOf := make([]int, len(evals))
	for _, w := range ws {
		rowOf[w] = -1
		e := evals[w]
		join := func(r int) {
			if rowOf[w] < 0 {
				rowOf[w] = r
				return
			}
			parent[find(r)] = find(rowOf[w])
		}
		for _, r := range e.budgetRows {
			join(int(r))
		}
		for j := range e.cands {
			for _, u := range e.cands[j].uses {
				join(int(u.row))
			}
		}
	}
	byRoot := map[int][]int{}
	var roots []int
	var out [][]int
	for _, w := range ws {
		if rowOf[w] < 0 {
			out = append(out, []int{w})
			continue
		}
		r := find(rowOf[w])
		if _, seen := byRoot[r]; !seen {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], w)
	}
	sort.Ints(roots)
	for _, r := range roots {
		out = append(out, byRoot[r])
	}
	return out
}

// lnsSize is how many workloads one large-neighbourhood move re-solves.
const lnsSize = 12

// lns is large-neighbourhood search. Each move frees a small set of
// workloads and re-solves them exactly (branch and bound with the
// Lagrangian bound) with everything else fixed, so one move can relocate
// several workloads at once, which single moves and swaps cannot. The sets
// are built around the constraint rows: a congested row's holders
// together with the workloads whose cheaper options need that row, and
// for each workload off its cheapest option, the holders of the rows its
// cheaper options need. Passes repeat while they improve and the work
// budget lasts; the sets are deterministic.
func (s *solver) lns(evals []*eval, choice []int, mu []float64, budget int) []int {
	return s.lnsBy(evals, choice, mu, budget, false)
}

// lnsBy is lns; with leave set, a workload's neighbourhood takes the
// holders of a row its cheaper option lacks room in by what leaving the
// row costs them per GPU (leavePenalty), cheapest first, rather than by
// the cost of the option they are on: on a wide row (a region glob with
// dozens of holders) the one to move is rarely among the cheapest
// placed (the differential test against CBC, seed 2285 at
// GPUBROKER_DIFF_MAXN=60: a service's cheaper layout needed a 4-GPU job
// to leave a full region glob for $40 more, a saving of $72 the search
// never tried).
func (s *solver) lnsBy(evals []*eval, choice []int, mu []float64, budget int, leave bool) []int {
	st := &state{s: s, evals: evals, choice: choice, rem: append([]float64(nil), s.caps...)}
	for w, c := range choice {
		st.apply(evals[w], &evals[w].cands[c], 1)
	}
	spent := 0
	inSet := make([]bool, len(evals))
	try := func(set []int) bool {
		old, work := 0.0, 0
		for _, v := range set {
			old += evals[v].cands[st.choice[v]].cost
			work += len(evals[v].cands)
		}
		r := s.search(st, set, old, 2000*work, false, mu)
		spent += r.nodes * work
		if r.pick == nil || r.cost >= old-eps*max(1, old) {
			return false
		}
		for _, v := range set {
			st.set(v, -1)
		}
		for i, v := range set {
			st.set(v, r.pick[i])
		}
		return true
	}
	for pass := 0; pass < 12 && spent < budget; pass++ {
		improved := false
		users, wants := st.rowUsers(), st.rowWants(true)
		// Row neighbourhoods: interleave holders (dearest first) with
		// those that want in (largest saving first).
		for r := range s.caps {
			if spent >= budget || len(wants[r]) == 0 {
				continue
			}
			hold := append([]int(nil), users[r]...)
			sort.SliceStable(hold, func(a, b int) bool {
				return evals[hold[a]].cands[st.choice[hold[a]]].cost > evals[hold[b]].cands[st.choice[hold[b]]].cost
			})
			want := append([]int(nil), wants[r]...)
			gain := func(w int) float64 { return evals[w].cands[st.choice[w]].cost - evals[w].cands[0].cost }
			sort.SliceStable(want, func(a, b int) bool { return gain(want[a]) > gain(want[b]) })
			for start := 0; start < max(len(hold), len(want)) && spent < budget; start += lnsSize / 2 {
				var set []int
				for k := start; k < start+lnsSize/2; k++ {
					for _, xs := range [][]int{want, hold} {
						if k < len(xs) && !inSet[xs[k]] && len(set) < lnsSize {
							inSet[xs[k]] = true
							set = append(set, xs[k])
						}
					}
				}
				for _, v := range set {
					inSet[v] = false
				}
				if len(set) > 1 && try(set) {
					improved = true
				}
			}
		}
		// Workload neighbourhoods: w with the holders of the congested
		// rows its cheaper options need, smallest holders first (they
		// are the easiest to move).
		users = st.rowUsers()
		var todo []int
		for w, c := range st.choice {
			if c > 0 {
				todo = append(todo, w)
			}
		}
		gain := func(w int) float64 { return evals[w].cands[st.choice[w]].cost - evals[w].cands[0].cost }
		sort.SliceStable(todo, func(a, b int) bool { return gain(todo[a]) > gain(todo[b]) })
		for _, w := range todo {
			cur := st.choice[w]
			if spent >= budget || cur <= 0 {
				continue
			}
			for j := 0; j < min(cur, 3); j++ {
				o := &evals[w].cands[j]
				// own is what w's option holds of a row: in leave mode a
				// row lacks room only beyond it (w leaves it for o).
				own := func(r int32) float64 {
					if !leave {
						return 0
					}
					c := &evals[w].cands[cur]
					if slices.Contains(evals[w].budgetRows, r) {
						return c.budgetUse
					}
					for _, u := range c.uses {
						if u.row == r {
							return u.amt
						}
					}
					return 0
				}
				var hold []int
				for _, u := range o.uses {
					if st.rem[u.row]+own(u.row) < u.amt-eps {
						hold = append(hold, users[u.row]...)
					}
				}
				for _, r := range evals[w].budgetRows {
					if st.rem[r]+own(r) < o.budgetUse*(1-eps) {
						hold = append(hold, users[r]...)
					}
				}
				if leave {
					// Per GPU (USD for a budget) of the short rows it
					// holds, the least over them.
					pen := make(map[int]float64, len(hold))
					for _, v := range hold {
						pen[v] = math.Inf(1)
					}
					short := func(r int32) {
						for _, v := range users[r] {
							held := 0.0
							for _, u := range evals[v].cands[st.choice[v]].uses {
								if u.row == r {
									held = u.amt
								}
							}
							if slices.Contains(evals[v].budgetRows, r) {
								held = evals[v].cands[st.choice[v]].budgetUse
							}
							if held > 0 {
								pen[v] = min(pen[v], st.leavePenalty(v, r)/held)
							}
						}
					}
					for _, u := range o.uses {
						if st.rem[u.row]+own(u.row) < u.amt-eps {
							short(u.row)
						}
					}
					for _, r := range evals[w].budgetRows {
						if st.rem[r]+own(r) < o.budgetUse*(1-eps) {
							short(r)
						}
					}
					sort.SliceStable(hold, func(a, b int) bool { return pen[hold[a]] < pen[hold[b]] })
				} else {
					sort.SliceStable(hold, func(a, b int) bool {
						return evals[hold[a]].cands[st.choice[hold[a]]].cost < evals[hold[b]].cands[st.choice[hold[b]]].cost
					})
				}
				set := []int{w}
				inSet[w] = true
				for _, v := range hold {
					if len(set) < lnsSize*2/3 && !inSet[v] && st.choice[v] >= 0 {
						inSet[v] = true
						set = append(set, v)
					}
				}
				// Depth two: who holds the rows the holders would move to.
				for k := 1; k < len(set) && len(set) < lnsSize; k++ {
					v := set[k]
					for a := range evals[v].cands {
						if a == st.choice[v] || len(set) >= lnsSize {
							continue
						}
						alt := &evals[v].cands[a]
						if alt.cost > 2*evals[v].cands[st.choice[v]].cost+1 {
							break
						}
						for _, u := range alt.uses {
							if st.rem[u.row] >= u.amt-eps {
								continue
							}
							for _, x := range users[u.row] {
								if len(set) < lnsSize && !inSet[x] {
									inSet[x] = true
									set = append(set, x)
								}
							}
						}
						break
					}
				}
				for _, v := range set {
					inSet[v] = false
				}
				// users goes stale as moves are made; it only proposes
				// sets, and every search runs on the current state.
				if len(set) > 1 && try(set) {
					improved = true
					break
				}
			}
		}
		if !improved {
			break
		}
	}
	return st.choice
}

// maxPlaced is a depth-first branch and bound over the workloads in ws
// (the rest fixed as in base) that may each also be left out: it finds the
// assignment that places the most of them, the cheapest among those, and
// returns it when it places more than base does (or as many for less).
// An infeasible group's plan should leave out as few workloads as it can:
// the heuristic's partial plan left out whoever it reached last, often
// two or three where one suffices. A branch is cut when the workloads
// placed plus those still able to fit cannot beat the incumbent. It gives
// up after about budget candidate scans and returns the best found.
func (s *solver) maxPlaced(base *state, ws []int, budget int) (pick []int, better bool) {
	evals := base.evals
	st, orig, work := s.detach(base, ws)
	defer restore(base, ws, orig)
	bestN, bestCost := 0, 0.0
	for i, w := range ws {
		if c := orig[i]; c >= 0 {
			bestN++
			bestCost += evals[w].cands[c].cost
		}
	}
	nodeLimit := max(100, budget/max(1, work))
	nodes := 0
	free := append([]int(nil), ws...)
	var rec func(depth, placed int, cost float64) bool
	rec = func(depth, placed int, cost float64) bool {
		nodes++
		if nodes > nodeLimit {
			return true
		}
		if depth == len(free) {
			if placed > bestN || placed == bestN && cost < bestCost-eps*max(1, bestCost) {
				bestN, bestCost, better = placed, cost, true
				pick = pick[:0]
				for _, w := range ws {
					pick = append(pick, st.choice[w])
				}
			}
			return false
		}
		// Workloads with no fitting candidate are left out at once; of the
		// rest, the one with the fewest fitting candidates goes next.
		bestI, fewest, able := -1, math.MaxInt, 0
		for i := depth; i < len(free); i++ {
			e := evals[free[i]]
			n := 0
			for j := range e.cands {
				if st.fits(e, &e.cands[j]) {
					n++
				}
			}
			if n > 0 {
				able++
				if n < fewest {
					bestI, fewest = i, n
				}
			}
		}
		if placed+able < bestN || placed+able == bestN && cost >= bestCost-eps*max(1, bestCost) {
			return false
		}
		if bestI < 0 {
			return rec(len(free), placed, cost)
		}
		free[depth], free[bestI] = free[bestI], free[depth]
		defer func() { free[depth], free[bestI] = free[bestI], free[depth] }()
		w := free[depth]
		e := evals[w]
		for j := range e.cands {
			if !st.fits(e, &e.cands[j]) {
				continue
			}
			st.set(w, j)
			stop := rec(depth+1, placed+1, cost+e.cands[j].cost)
			st.set(w, -1)
			if stop {
				return true
			}
		}
		return rec(depth+1, placed, cost)
	}
	rec(0, 0, 0)
	return pick, better
}

// leaveOneOut looks for one workload of ws whose leaving out lets every
// other workload of ws be placed, when st leaves two or more of them out:
// for each workload, the dearest first, a feasibility search over the
// others (each with a share of the search budget); with three or more
// left out, then for each pair of the eight dearest. The first found is
// taken. maxPlaced's search over who is left out reaches such a plan only
// after trying to place everyone, which on a group of twenty workloads
// with many candidates each runs out of budget first (the differential
// test against CBC: one 64-GPU job left four others out).
func (s *solver) leaveOneOut(st *state, ws []int) {
	left := 0
	for _, w := range ws {
		if st.choice[w] < 0 {
			left++
		}
	}
	if left < 2 {
		return
	}
	order := append([]int(nil), ws...)
	cost := func(w int) float64 {
		if c := st.choice[w]; c >= 0 {
			return st.evals[w].cands[c].cost
		}
		return st.evals[w].cands[0].cost
	}
	sort.SliceStable(order, func(a, b int) bool { return cost(order[a]) > cost(order[b]) })
	budget := max(searchWork/max(1, len(ws)), 100_000)
	rest := make([]int, 0, len(ws))
	// try leaves out the workloads in out and searches for a plan of all
	// the others; it keeps the plan when one is found.
	try := func(out ...int) bool {
		rest = rest[:0]
		for _, w := range ws {
			if !slices.Contains(out, w) {
				rest = append(rest, w)
			}
		}
		prev := make([]int, len(out))
		for i, u := range out {
			prev[i] = st.choice[u]
			st.set(u, -1)
		}
		r := s.search(st, rest, math.Inf(1), budget, true, nil)
		if r.pick != nil {
			for _, w := range rest {
				st.set(w, -1)
			}
			for i, w := range rest {
				st.set(w, r.pick[i])
			}
			return true
		}
		for i, u := range out {
			st.set(u, prev[i])
		}
		return false
	}
	for _, u := range order {
		if try(u) {
			return
		}
	}
	// Three or more left out: pairs of the dearest eight (two large
	// jobs holding what several small ones need).
	if left < 3 {
		return
	}
	top := order[:min(8, len(order))]
	for i := range top {
		for j := i + 1; j < len(top); j++ {
			if try(top[i], top[j]) {
				return
			}
		}
	}
}

// fewestOut looks for a plan of ws that leaves out fewer workloads than st
// does, from cores: sets of workloads of ws that cannot all be placed
// together (a failed feasibility search's searchResult.core). Whoever is
// left out must include one workload of every core, so the fewest left
// out is at least the smallest set that hits every core. It takes such a
// hitting set and tries to place every other workload of ws: first by
// repairing st's plan with the set taken out (repairSets), then by the
// feasibility search. It takes the first plan found, or learns the new
// core the failed search gives, which that set does not hit, and repeats
// (the implicit hitting set method of MaxSAT solvers): with every search
// complete, the first plan found leaves out the fewest possible. Each
// core is first shrunk by dropping members while the rest still cannot be
// placed, so the hitting sets name the workloads that matter. A search
// cut short (each gets at most an eighth of the budget) rules out its
// set only. It stops without a change when the budget runs out or no
// hitting set smaller than what st leaves out remains (st's count is then
// the least over the candidates, when no search was cut short).
//
// Leaving one out (leaveOneOut) or pairs of the dearest only reaches
// hitting sets of those shapes; this reaches any (the differential test:
// a 32-GPU job and a 4-replica service, the eleventh dearest, left out
// where the plan left out four services).
func (s *solver) fewestOut(st *state, ws []int, core []int, budget int) (proven bool) {
	left := 0
	for _, w := range ws {
		if st.choice[w] < 0 {
			left++
		}
	}
	// lpCores: some core came from the LP relaxation (lpCore), not from a
	// complete search; it steers the hitting sets but proves nothing.
	lpCores, lpCells := false, fewestLPCells
	if left >= 2 && len(core) == 0 {
		core, lpCores = s.lpCore(st, ws, true, &lpCells), true
	}
	if left < 2 || len(core) == 0 {
		// One left out of a group with a core is the least.
		return left == 0 || left == 1 && len(core) > 0
	}
	// Ties between hitting sets go to the dearest workloads, as in
	// leaveOneOut: they hold the most.
	dear := make(map[int]float64, len(ws))
	orig := make([]int, len(ws))
	for i, w := range ws {
		orig[i] = st.choice[w]
		dear[w] = st.evals[w].cands[max(0, orig[i])].cost
	}
	cost := func(w int) float64 { return dear[w] }
	if lpCores {
		// No core from a search: the hitting sets go first to what the
		// LP relaxation leaves out, then to the dearest.
		if shares := s.lpOutShares(st, ws); shares != nil {
			top := 0.0
			for _, c := range dear {
				top = max(top, c)
			}
			lp := make(map[int]float64, len(ws))
			for i, w := range ws {
				lp[w] = math.Round(shares[i]*1e6) + dear[w]/(top+1)
			}
			cost = func(w int) float64 { return lp[w] }
		}
	}
	spent, hsNodes := 0, 0
	clearAll := func() {
		for _, w := range ws {
			st.set(w, -1)
		}
	}
	reset := func() {
		clearAll()
		for i, w := range ws {
			st.set(w, orig[i])
		}
	}
	// feasible searches the workloads of set with every other workload of
	// ws absent (cleared): a pick, or (complete, no pick) a core within
	// set.
	feasible := func(set []int, limit int) searchResult {
		work := 0
		for _, w := range set {
			work += len(st.evals[w].cands)
		}
		r := s.search(st, set, math.Inf(1), max(0, min(limit, budget-spent)), true, nil)
		spent += max(1, r.nodes*work)
		return r
	}
	// shrink drops members of a core while the others still cannot be
	// placed (a search each, on the core's few workloads).
	shrink := func(c []int) []int {
		for i := 0; i < len(c) && spent < budget; {
			sub := slices.Delete(slices.Clone(c), i, i+1)
			r := feasible(sub, budget/8)
			if r.pick == nil && r.complete && len(r.core) > 0 {
				c = r.core
				continue
			}
			i++
		}
		return c
	}
	clearAll()
	cores := [][]int{shrink(core)}
	var skipped [][]int
	skip := func(set []int) bool {
		return slices.ContainsFunc(skipped, func(x []int) bool { return slices.Equal(x, set) })
	}
	rest := make([]int, 0, len(ws))
	// restWithout sets rest to the workloads of ws not in out.
	restWithout := func(out []int) {
		rest = rest[:0]
		for _, w := range ws {
			if !slices.Contains(out, w) {
				rest = append(rest, w)
			}
		}
	}
	mips := 0
	// extended: the skipped sets' LP cores were added (once).
	extended := false
	// least: every hitting set so far was a smallest one and no search
	// was cut short, so a hitting set placed is the fewest left out.
	least := func() bool { return len(skipped) == 0 && hsNodes <= hittingNodes && !lpCores }
	for spent < budget {
		out, ok := minHittingSet(cores, left-1, cost, skip, &hsNodes)
		if !ok && !extended && len(skipped) > 0 {
			// Every smaller hitting set left was skipped, its search out
			// of nodes: the LP relaxation of what each left to place may
			// show that it cannot all be placed, and its core steers
			// the hitting sets past their supersets, which minimal
			// hitting sets never reach (differential seed 18012 at
			// MAXN=150: both one-workload sets of the search's core ran
			// out, so three were left out where two suffice;
			// TestRepairAfterPolish). Such a core proves nothing. Only
			// once the hitting sets ran dry: earlier, the new cores
			// reorder them and can spend the sub-MIPs (fewestMIPs)
			// before the set they place (seed 7054).
			extended = true
			added := false
			for _, sk := range skipped {
				restWithout(sk)
				if c := s.lpCore(st, rest, len(cores) < fewestLPCores, &lpCells); c != nil {
					cores = append(cores, c)
					lpCores, added = true, true
				}
			}
			if added {
				continue
			}
		}
		if !ok {
			// None smaller than st's left out: st's is the least, unless
			// a search or the hitting sets' own was cut short.
			proven = least()
			break
		}
		restWithout(out)
		// st's plan with out taken out, its other left-out workloads
		// placed by local repair: often enough, and far cheaper than a
		// search over the whole group.
		reset()
		for _, u := range out {
			st.set(u, -1)
		}
		spent += s.repairSets(st, nil, rest)
		if !slices.ContainsFunc(rest, func(w int) bool { return st.choice[w] < 0 }) {
			return least()
		}
		clearAll()
		// Once a core came from the LP, no proof is left to keep: rest's
		// LP goes before the search, a millisecond against the search's
		// eighth of the budget.
		if lpCores {
			if c := s.lpCore(st, rest, len(cores) < fewestLPCores, &lpCells); c != nil {
				cores = append(cores, c)
				continue
			}
		}
		r := feasible(rest, budget/8)
		if r.pick != nil {
			for i, w := range rest {
				st.set(w, r.pick[i])
			}
			return least()
		}
		// The depth-first search ran out: the sub-MIP's LP sees the
		// whole set at once (differential seed 7054 at MAXN=100: the 68
		// workloads left after leaving out the right two fill two
		// region quotas to the GPU; 12.6·10⁶ search nodes found no
		// plan, the sub-MIP finds one). A few sets per call: each is up
		// to fewestMIPNodes LPs.
		if !r.complete && mips < fewestMIPs && len(rest) <= fewestMIPSize {
			ok, used := s.placeByMIP(st, rest, fewestMIPNodes)
			if ok {
				return least()
			}
			if used > 0 {
				mips++
			}
		}
		if !r.complete || len(r.core) == 0 {
			skipped = append(skipped, slices.Sorted(slices.Values(out)))
			continue
		}
		cores = append(cores, shrink(r.core))
	}
	// Nothing better found: put back st's plan.
	reset()
	return proven
}

// fewestMIPs is how many hitting sets one fewestOut call checks by
// sub-MIP once the search ran out on them, fewestMIPSize the most
// workloads such a set may place, fewestMIPNodes the node limit of each.
const (
	fewestMIPs     = 3
	fewestMIPSize  = 150
	fewestMIPNodes = 4000
)

// fewestLPCells is the LP work one fewestOut call gives lpCore, in
// tableau cells summed over the LPs it solves (seed 7371's 73-workload
// group: about 10⁵ cells and a millisecond or two an LP, so about a
// thousand LPs), fewestLPCores how many cores it may have before new ones
// stop being shrunk (up to an LP per member).
const (
	fewestLPCells = 1 << 27
	fewestLPCores = 8
)

// hittingNodes bounds minHittingSet's branch and bound, over all the calls
// of one fewestOut.
const hittingNodes = 200_000

// minHittingSet returns a smallest set of workloads that has one of every
// core and that skip does not rule out (skip gets it sorted; nil: none
// is), if one of at most maxSize exists (ok false otherwise, or when
// *nodes, which it adds its nodes to, reaches hittingNodes). Branching is
// on the unhit core with the fewest members, the dearest members first
// (cost), then those that hit the most unhit cores; the bound adds a
// greedy count of pairwise disjoint unhit cores, each of which needs a
// member of its own.
func minHittingSet(cores [][]int, maxSize int, cost func(int) float64, skip func([]int) bool, nodes *int) ([]int, bool) {
	if maxSize < 1 {
		return nil, false
	}
	// Members by local index, cores as bit sets over them.
	var members []int
	for _, c := range cores {
		for _, w := range c {
			if !slices.Contains(members, w) {
				members = append(members, w)
			}
		}
	}
	words := (len(members) + 63) / 64
	bits := make([][]uint64, len(cores))
	for k, c := range cores {
		bits[k] = make([]uint64, words)
		for _, w := range c {
			i := slices.Index(members, w)
			bits[k][i/64] |= 1 << (i % 64)
		}
	}
	size := make([]int, len(cores))
	for k, c := range cores {
		size[k] = len(c)
	}
	chosen := make([]uint64, words)
	meets := func(a, b []uint64) bool {
		for i := range a {
			if a[i]&b[i] != 0 {
				return true
			}
		}
		return false
	}
	var best []int
	var path []int
	bestSize := maxSize + 1
	used := make([]uint64, words)
	freq := make([]int, len(members))
	var rec func() bool
	rec = func() bool {
		*nodes++
		if *nodes > hittingNodes {
			return true
		}
		// The smallest unhit core, and a greedy count of disjoint ones.
		pick, need := -1, 0
		clear(used)
		clear(freq)
		for k := range bits {
			if meets(bits[k], chosen) {
				continue
			}
			if pick < 0 || size[k] < size[pick] {
				pick = k
			}
			if !meets(bits[k], used) {
				need++
				for i := range used {
					used[i] |= bits[k][i]
				}
			}
			for i := range members {
				if bits[k][i/64]&(1<<(i%64)) != 0 {
					freq[i]++
				}
			}
		}
		if pick < 0 {
			if skip == nil || !skip(slices.Sorted(slices.Values(path))) {
				best, bestSize = append(best[:0], path...), len(path)
			}
			return false
		}
		if len(path)+need >= bestSize {
			return false
		}
		var branch []int
		for i := range members {
			if bits[pick][i/64]&(1<<(i%64)) != 0 {
				branch = append(branch, i)
			}
		}
		f := append([]int(nil), freq...)
		sort.SliceStable(branch, func(a, b int) bool {
			if ca, cb := cost(members[branch[a]]), cost(members[branch[b]]); ca != cb {
				return ca > cb
			}
			return f[branch[a]] > f[branch[b]]
		})
		for _, i := range branch {
			chosen[i/64] |= 1 << (i % 64)
			path = append(path, members[i])
			stop := rec()
			path = path[:len(path)-1]
			chosen[i/64] &^= 1 << (i % 64)
			if stop {
				return true
			}
		}
		return false
	}
	if rec() {
		return nil, false
	}
	return best, best != nil
}

// tradeInWork bounds tradeIn's candidate scans over one group.
const tradeInWork = 2 * searchWork

// tradeInOptions is how many of a left-out workload's cheapest options
// tradeIn tries.
const tradeInOptions = 4

// tradeIn places a workload of ws that st leaves out by trading it in
// for the holders of what it lacks: for each left-out workload b and
// each of its few cheapest options, it takes out of the plan the holders
// of the rows that option lacks room in, the largest share of a row
// first, until the option fits, places b there, and re-places the
// holders and the other left-out workloads by local repair
// (repairSets). It keeps a plan that leaves fewer of ws out than st did,
// and repeats from it. The hitting-set and leave-one-out searches work
// from who is left out; this works from who holds what the left-out
// workload needs: the large holders that must move, each to a dearer
// option of its own, for a 16-GPU job to fit a full cloud quota
// (differential seed 4806 at MAXN=60: two H100 jobs leave gcp, the
// 64-GPU job of the same team's budget takes their room; the group's
// exhaustive search ran out of nodes first).
func (s *solver) tradeIn(st *state, ws []int, mu []float64) {
	leftOut := func() []int {
		var out []int
		for _, w := range ws {
			if st.choice[w] < 0 {
				out = append(out, w)
			}
		}
		return out
	}
	inWs := make(map[int]bool, len(ws))
	for _, w := range ws {
		inWs[w] = true
	}
	orig := make([]int, len(ws))
	reset := func() {
		for _, w := range ws {
			st.set(w, -1)
		}
		for i, w := range ws {
			st.set(w, orig[i])
		}
	}
	spent := 0
	for improved := true; improved && spent < tradeInWork; {
		improved = false
		outs := leftOut()
		if len(outs) == 0 {
			return
		}
		for i, w := range ws {
			orig[i] = st.choice[w]
		}
	next:
		for _, b := range outs {
			e := st.evals[b]
			for a := 0; a < min(tradeInOptions, len(e.cands)); a++ {
				if spent >= tradeInWork {
					break next
				}
				short := st.shortRows(e, a)
				if len(short) == 0 {
					continue
				}
				users := st.rowUsers()
				var hs []int
				share := map[int]float64{}
				for _, r := range short {
					for _, h := range users[r] {
						if !inWs[h] || s.caps[r] <= 0 {
							continue
						}
						if _, ok := share[h]; !ok {
							hs = append(hs, h)
						}
						share[h] = max(share[h], st.holds(h, r)/s.caps[r])
					}
				}
				sort.SliceStable(hs, func(i, j int) bool { return share[hs[i]] > share[hs[j]] })
				fits := false
				for _, h := range hs {
					st.set(h, -1)
					if fits = st.fits(e, &e.cands[a]); fits {
						break
					}
				}
				if !fits {
					reset()
					continue
				}
				st.set(b, a)
				spent += max(1, s.repairSets(st, mu, ws))
				if len(leftOut()) < len(outs) {
					improved = true
					break next
				}
				reset()
			}
		}
	}
}
