package optimizer

import (
	"math"
	"math/rand/v2"
	"slices"
)

// The row- and workload-centred neighbourhoods of lns are built greedily
// and deterministically, so they miss improvements that need a chain of
// moves across several rows: on tight small fleets the proven optimum
// often moves one workload to its cheaper option, two holders of the rows
// that option needs to equally priced options elsewhere, and a fourth
// workload into the room those leave, all at once (seeds 7, 8 and 10 of
// TestMILPComparison). chains samples such neighbourhoods: from a workload
// off its cheapest option it follows, breadth first, the rows a cheaper
// option lacks room in to some of their holders, the rows those holders'
// other options lack room in to theirs, and the workloads that want the
// room a holder would leave; each set is re-solved exactly by search.

// chainFleet is the largest constrained fleet the live fleet's re-plans
// always run chains on (plans made once: oneOffFleet). On the
// 200-workload bench/placement instance of 2026-12-03 they found nothing
// even with five times the sets (docs/BENCHMARKS.md), so larger fleets run
// them only when the plan is still far from the bound (chainGap).
const chainFleet = 150

// oneOffFleet is the largest fleet whose plans made once (not the live
// fleet's re-plans, which keep chainFleet) get the chain search from each
// restart's plan and the steps after it: priced chains, holder layouts,
// partial-row layouts and the sub-MIPs. At 150 the 200-workload hardgen
// fleet of docs/BENCHMARKS.md (session 14) stopped 1.205% above CBC's
// optimum over the same candidates (23 CPU-s); at 250, with the sub-MIPs'
// regret sets, 0.011% (53 CPU-s).
const oneOffFleet = 250

// chainGap is the gap to the lower bound above which a fleet larger than
// chainFleet gets the chain search, with a larger budget (chainWorkLarge,
// chainMaxWork) and patience (chainStaleLarge). Fleets whose plan is that
// far from the bound are the hard ones: on the 2,000-workload hardgen
// instance (quotas, budgets and spot pools all binding) the rest of the
// search stops 9% above CBC's solution and the chains bring the plan below
// it (docs/BENCHMARKS.md); on the benchmark fleets the gap is under 0.3%
// and they cost nothing.
const chainGap = 0.01

// chainWorkLarge is the chain search's budget per workload on fleets
// larger than chainFleet, chainMaxWork its cap (about two to four minutes of CPU,
// reached above 8,000 workloads). On the hard 10,000-workload fleet the
// search still improved the plan every few dozen sets when the earlier
// caps of 8·10¹⁰ (reached at 2,000) and 1.6·10¹¹ stopped it; the sub-search
// bookkeeping in slices paid for the raise to 2·10¹¹, and sub-searches
// that scan only the candidates fitting at their root for the raise to
// 3.2·10¹¹ (docs/BENCHMARKS.md: 8,463,734 in 254 CPU-s at 1.6·10¹¹,
// 8,452,613 in 274 at 2·10¹¹; branch large10k3: 8,436,315 at 3.2·10¹¹
// in 405 CPU-s where main took 497 on the same box).
const (
	chainWorkLarge = 40_000_000
	chainMaxWork   = 320_000_000_000
)

// chainWeightedFleet is the fleet size above which the chain seeds are
// drawn by their priced excess at the multipliers (by saving, half of
// them, without multipliers; chainRun); the live fleet's re-plans (up to
// 1,000 workloads) keep the uniform draws, so the same plans.
const chainWeightedFleet = 1000

// chainStaleLarge is chainStale on fleets larger than chainFleet: with
// thousands of workloads a set that helps is rarer.
const chainStaleLarge = 3000

// chainSize is the most workloads one chain neighbourhood frees.
const chainSize = 16

// chainMin is the fewest workloads a chain neighbourhood aims for.
const chainMin = 8

// chainWork is chains' budget of candidate scans per workload.
const chainWork = 2_000_000

// chainStale stops chains after this many sets in a row found nothing.
const chainStale = 800

// chainNodes is the node limit of one set's search.
const chainNodes = 500

// chains improves choice with sampled ejection-chain neighbourhoods (see
// above), within about budget candidate scans, until patience sets in a
// row found nothing. The generator's seed is
// fixed by the fleet's shape, so a plan is reproducible.
func (s *solver) chains(evals []*eval, choice []int, mu []float64, budget, patience int) []int {
	return s.chainRun(evals, choice, mu, budget, patience, 0)
}

// chainStarts is how many chain searches multiChains runs from one plan.
const chainStarts = 4

// multiChains runs the chain search chainStarts times from choice, each
// with its own generator, and keeps the cheapest plan (the first on a tie).
// One sampled search is a trajectory: on the mid-size hardgen fleets of
// docs/BENCHMARKS.md the same search with another generator ends up to 1%
// cheaper or dearer, so a few independent runs make the plan's quality
// much less a matter of luck. Run 0 is chains itself, so the plan is never
// dearer than a single search's.
func (s *solver) multiChains(evals []*eval, choice []int, mu []float64, budget, patience int) []int {
	best := s.chainRun(evals, choice, mu, budget, patience, 0)
	bestCost := planCost(evals, best)
	v := uint64(1)
	for round := 0; round < chainRounds; round++ {
		from, improved := best, false
		for k := 1; k < chainStarts; k, v = k+1, v+1 {
			alt := s.chainRun(evals, from, mu, budget, patience, v)
			if c := planCost(evals, alt); c < bestCost-eps*max(1, bestCost) {
				best, bestCost, improved = alt, c, true
			}
		}
		if !improved {
			break
		}
	}
	return best
}

// chainRounds is how many times multiChains starts its searches again
// from the best plan so far while that improves.
const chainRounds = 4

// chainRun is one chain search; variant 0 draws holders uniformly, the
// others with their own generator and, half the time, the holder that
// leaves the row cheapest among a few drawn.
func (s *solver) chainRun(evals []*eval, choice []int, mu []float64, budget, patience int, variant uint64) []int {
	st := newState(s, evals, append([]int(nil), choice...))
	// The candidates stay fixed while the search runs: each workload's
	// rows are listed once for the sub-searches.
	s.wrows = workloadRows(evals)
	defer func() { s.wrows = nil }()
	rng := rand.New(rand.NewPCG(uint64(len(evals))+variant<<40, uint64(len(s.caps))<<32|0xc4a1))
	guided := variant > 0
	inSet := make([]bool, len(evals))
	spent, stale := 0, 0
	var users, wants [][]int
	refresh := func() {
		users, wants = st.rowUsers(), st.rowWants(false)
	}
	refresh()
	var set, off []int
	var short, rows []int32
	size := chainSize
	add := func(v int) {
		if len(set) < size && !inSet[v] && st.choice[v] >= 0 {
			inSet[v] = true
			set = append(set, v)
		}
	}
	offStale := true
	// saving[i] sums what off[:i+1] would save on their cheapest options;
	// excess[i] what they would save on their priced-cheapest ones at mu.
	var saving, excess []float64
	weighted := len(evals) > chainWeightedFleet
	var pc [][]float64
	var pbest []int
	if weighted && mu != nil && !s.savingSeeds {
		pc, pbest = pricedCands(evals, mu)
	}
	for spent < budget && stale < patience {
		// off changes only when a set improves.
		if offStale {
			off, offStale = off[:0], false
			saving, excess = saving[:0], excess[:0]
			sum, psum := 0.0, 0.0
			for w, c := range st.choice {
				if c > 0 || pc != nil && c == 0 && pbest[w] != 0 {
					off = append(off, w)
					if pc != nil {
						psum += pc[w][c] - pc[w][pbest[w]]
						excess = append(excess, psum)
					}
				}
			}
			// The savings are only drawn from without priced excess (at
			// 10,000 workloads summing them after every improving set
			// was a tenth of the search: each reads two candidates).
			if pc == nil || psum <= 0 {
				for _, w := range off {
					sum += evals[w].cands[st.choice[w]].cost - evals[w].cands[0].cost
					saving = append(saving, sum)
				}
			}
		}
		if len(off) == 0 {
			break
		}
		// Sets of varied size: small ones are cheap to re-solve and
		// large ones reach further.
		size = chainMin + rng.IntN(chainSize-chainMin+1)
		set = set[:0]
		seedTo := -1
		switch {
		case pc != nil && excess[len(excess)-1] > 0:
			// Very large fleets draw every seed by priced excess and
			// aim it at its priced-cheapest option: the multipliers say
			// which workloads sit on an option dearer than the rows
			// justify. On the hard 2,000 fleet, from one plan with one
			// budget, four generators each: all seeds so 1,398,455 on
			// average, three in four 1,398,985, half 1,400,628, a
			// quarter (with a quarter by saving) 1,402,144, none (half
			// by saving) 1,404,966 (docs/BENCHMARKS.md).
			i, _ := slices.BinarySearch(excess, rng.Float64()*excess[len(excess)-1])
			w := off[min(i, len(off)-1)]
			add(w)
			if len(set) == 1 && pbest[w] != st.choice[w] {
				seedTo = pbest[w]
			}
		case weighted && rng.IntN(2) == 0:
			// Without multipliers, half the seeds on very large fleets
			// are drawn by what they would save: with thousands of
			// workloads off their cheapest option, uniform draws spend
			// most of the budget on ones a few cents off.
			i, _ := slices.BinarySearch(saving, rng.Float64()*saving[len(saving)-1])
			add(off[min(i, len(off)-1)])
		default:
			add(off[rng.IntN(len(off))])
		}
		for k := 0; k < len(set) && len(set) < size; k++ {
			v := set[k]
			e := evals[v]
			cur := st.choice[v]
			// The option v would move to: a cheaper one for the seed; for
			// a holder any other, the cheap ones likelier.
			var a int
			switch {
			case k == 0 && seedTo >= 0:
				a = seedTo
			case k == 0 && cur == 0:
				// On its cheapest option but not its priced-cheapest
				// (only then is it among off).
				a = pbest[v]
			case k == 0:
				a = rng.IntN(cur)
			default:
				a = rng.IntN(min(len(e.cands), 1+rng.IntN(12)))
				if a == cur {
					continue
				}
			}
			o := &e.cands[a]
			short = short[:0]
			for _, u := range o.uses {
				if st.rem[u.row] < u.amt-eps {
					short = append(short, u.row)
				}
			}
			for _, r := range e.budgetRows {
				if st.rem[r] < o.budgetUse*(1-eps) {
					short = append(short, r)
				}
			}
			for _, r := range short {
				if hs := users[r]; len(hs) > 0 {
					for n := 1 + rng.IntN(2); n > 0; n-- {
						if !guided || rng.IntN(2) == 0 {
							add(hs[rng.IntN(len(hs))])
							continue
						}
						// Half the time the holder that leaves the row
						// cheapest among a few drawn: on wide rows
						// (region globs with dozens of holders) a
						// uniform draw rarely finds the one to move.
						best, bestP := -1, math.Inf(1)
						for t := 0; t < chainDraws; t++ {
							h := hs[rng.IntN(len(hs))]
							if inSet[h] {
								continue
							}
							if p := st.leavePenalty(h, r); p < bestP {
								best, bestP = h, p
							}
						}
						if best >= 0 {
							add(best)
						}
					}
				}
			}
			// Someone who would take the room v leaves.
			if k > 0 {
				for _, u := range e.cands[cur].uses {
					if ws := wants[u.row]; len(ws) > 0 && rng.IntN(2) == 0 {
						add(ws[rng.IntN(len(ws))])
					}
				}
			}
		}
		for _, v := range set {
			inSet[v] = false
		}
		if len(set) < 2 {
			stale++
			continue
		}
		old, work := 0.0, 0
		for _, v := range set {
			old += evals[v].cands[st.choice[v]].cost
			work += len(evals[v].cands)
		}
		r := s.search(st, set, old, chainNodes*work, false, mu)
		spent += r.nodes * work
		if r.pick == nil || r.cost >= old-eps*max(1, old) {
			stale++
			continue
		}
		// The row lists are updated for the set's workloads alone, to
		// what rowUsers and rowWants would build (rebuilding them is
		// O(fleet × options) per improving set, which dominated at
		// 10,000 workloads).
		edit := func(v int, op func([]int, int) []int) {
			rows = st.userRows(v, st.choice[v], rows[:0])
			for _, r := range rows {
				users[r] = op(users[r], v)
			}
			rows = st.wantRows(v, st.choice[v], rows[:0])
			for _, r := range rows {
				wants[r] = op(wants[r], v)
			}
		}
		for _, v := range set {
			edit(v, removeSorted)
			st.set(v, -1)
		}
		for i, v := range set {
			st.set(v, r.pick[i])
			edit(v, insertSorted)
		}
		stale, offStale = 0, true
	}
	return st.choice
}

// pricedCands prices every candidate at mu and finds each workload's
// priced-cheapest one.
func pricedCands(evals []*eval, mu []float64) ([][]float64, []int) {
	pc := make([][]float64, len(evals))
	best := make([]int, len(evals))
	for w, e := range evals {
		pc[w] = make([]float64, len(e.cands))
		bmu := 0.0
		for _, r := range e.budgetRows {
			bmu += mu[r]
		}
		for j := range e.cands {
			o := &e.cands[j]
			v := o.cost + bmu*o.budgetUse
			for _, u := range o.uses {
				v += mu[u.row] * u.amt
			}
			pc[w][j] = v
			if v < pc[w][best[w]] {
				best[w] = j
			}
		}
	}
	return pc, best
}

// chainDraws is how many holders of a row chains draws to pick the one
// that leaves it cheapest.
const chainDraws = 6

// leavePenalty is what moving w off row r costs at least: its cheapest
// other option that does not use r (any other option for a budget row,
// which every option uses) against the option it is on; +Inf when none
// (leaveRow's cost).
func (st *state) leavePenalty(w int, r int32) float64 {
	p, _ := st.leaveRow(w, r)
	return p
}

// userRows appends to dst the rows whose rowUsers list holds w when it is
// on option c (none when c < 0), as often and in the order rowUsers
// appends w.
func (st *state) userRows(w, c int, dst []int32) []int32 {
	if c < 0 {
		return dst
	}
	e := st.evals[w]
	st.s.quotaUses(&e.cands[c], func(r int32, _ float64) { dst = append(dst, r) })
	return append(dst, e.budgetRows...)
}

// wantRows appends to dst the rows whose rowWants(false) list holds w when
// it is on option c: the rows of its cheaper options, once each.
func (st *state) wantRows(w, c int, dst []int32) []int32 {
	n := len(dst)
	for j := 0; j < c; j++ {
		for _, u := range st.evals[w].cands[j].uses {
			if !slices.Contains(dst[n:], u.row) {
				dst = append(dst, u.row)
			}
		}
	}
	return dst
}

// removeSorted removes every v from the ascending list xs.
func removeSorted(xs []int, v int) []int {
	i, _ := slices.BinarySearch(xs, v)
	k := i
	for k < len(xs) && xs[k] == v {
		k++
	}
	return slices.Delete(xs, i, k)
}

// insertSorted inserts v into the ascending list xs, after any equal ones.
func insertSorted(xs []int, v int) []int {
	i, _ := slices.BinarySearch(xs, v+1)
	return slices.Insert(xs, i, v)
}

// chainAlternatives is how many of the diversifying restarts' plans, the
// cheapest first, get a chain search of their own after the best plan's
// (fleets of up to chainFleet workloads). A restart's plan lies in another
// basin: on hardgen 99 / seed 4 the chains from the best plan stop 0.85%
// above CBC's optimum and those from the third-best restart reach 0.15%.
const chainAlternatives = 4
