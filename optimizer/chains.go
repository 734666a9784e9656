package optimizer

import (
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

// chainFleet is the largest constrained fleet chains always runs on. On
// the 200-workload bench/placement instance it found nothing even with five
// times the sets (docs/BENCHMARKS.md), so larger fleets run it only when
// the plan is still far from the bound (chainGap).
const chainFleet = 150

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
// larger than chainFleet, chainMaxWork its cap (about a minute of CPU).
const (
	chainWorkLarge = 40_000_000
	chainMaxWork   = 80_000_000_000
)

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
	st := newState(s, evals, append([]int(nil), choice...))
	rng := rand.New(rand.NewPCG(uint64(len(evals)), uint64(len(s.caps))<<32|0xc4a1))
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
	for spent < budget && stale < patience {
		// off changes only when a set improves.
		if offStale {
			off, offStale = off[:0], false
			for w, c := range st.choice {
				if c > 0 {
					off = append(off, w)
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
		add(off[rng.IntN(len(off))])
		for k := 0; k < len(set) && len(set) < size; k++ {
			v := set[k]
			e := evals[v]
			cur := st.choice[v]
			// The option v would move to: a cheaper one for the seed; for
			// a holder any other, the cheap ones likelier.
			var a int
			if k == 0 {
				a = rng.IntN(cur)
			} else {
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
						add(hs[rng.IntN(len(hs))])
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
