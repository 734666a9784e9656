package optimizer

import (
	"math"
	"sort"
)

// searchResult is the outcome of the complete search over a set of
// workloads' candidates.
type searchResult struct {
	// choice is the best full assignment found (nil when none was found).
	choice []int
	cost   float64
	// complete is true when the search visited every branch it did not
	// prove useless: then choice is optimal over the candidates, and nil
	// choice proves that no assignment places every workload.
	complete bool
	nodes    int
}

// search is a depth-first branch and bound over the candidates of the
// workloads in ws (indexes into evals); every other workload is fixed at
// fixed[w] (-1: absent). Workloads with the fewest candidates that fit go
// first, candidates cheapest first; a branch is cut when its cost plus
// each remaining workload's cheapest fitting candidate reaches the
// incumbent, or when a remaining workload has no candidate that fits.
// firstOnly stops at the first full assignment (a feasibility proof).
// It gives up after nodeLimit nodes, reporting complete=false.
func (s *solver) search(evals []*eval, ws []int, fixed []int, incumbent float64, nodeLimit int, firstOnly bool) searchResult {
	st := &state{s: s, evals: evals, choice: append([]int(nil), fixed...), rem: append([]float64(nil), s.caps...)}
	for w, c := range st.choice {
		if c >= 0 {
			st.apply(evals[w], &evals[w].cands[c], 1)
		}
	}
	for _, w := range ws {
		if c := st.choice[w]; c >= 0 {
			st.apply(evals[w], &evals[w].cands[c], -1)
			st.choice[w] = -1
		}
	}
	res := searchResult{cost: incumbent}
	free := append([]int(nil), ws...)
	limitHit := false
	var rec func(depth int, cost float64) bool
	rec = func(depth int, cost float64) bool {
		res.nodes++
		if res.nodes > nodeLimit {
			limitHit = true
			return true
		}
		if depth == len(free) {
			if cost < res.cost-eps*max(1, res.cost) || res.choice == nil && cost <= res.cost {
				res.cost = cost
				res.choice = append(res.choice[:0], st.choice...)
			}
			return firstOnly
		}
		// Forward check and bound: every remaining workload needs a fitting
		// candidate; pick the one with the fewest to branch on next.
		bestI, bestN := -1, math.MaxInt
		lower := cost
		for i := depth; i < len(free); i++ {
			e := evals[free[i]]
			n, cheapest := 0, math.Inf(1)
			for j := range e.cands {
				if st.fits(e, &e.cands[j]) {
					if n == 0 {
						cheapest = e.cands[j].cost
					}
					n++
				}
			}
			if n == 0 {
				return false
			}
			lower += cheapest
			if n < bestN {
				bestI, bestN = i, n
			}
		}
		if res.choice != nil && lower >= res.cost-eps*max(1, res.cost) {
			return false
		}
		free[depth], free[bestI] = free[bestI], free[depth]
		w := free[depth]
		e := evals[w]
		for j := range e.cands {
			if !st.fits(e, &e.cands[j]) {
				continue
			}
			st.set(w, j)
			stop := rec(depth+1, cost+e.cands[j].cost)
			st.set(w, -1)
			if stop {
				free[depth], free[bestI] = free[bestI], free[depth]
				return true
			}
		}
		free[depth], free[bestI] = free[bestI], free[depth]
		return false
	}
	rec(0, 0)
	res.complete = !limitHit
	if res.choice != nil {
		full := 0.0
		for w, c := range res.choice {
			if c >= 0 {
				full += evals[w].cands[c].cost
			}
		}
		res.cost = full
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
	var find func(int) int
	find = func(x int) int {
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
