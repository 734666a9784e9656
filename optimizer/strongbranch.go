package optimizer

import (
	"math"
	"slices"
)

// Strong branching and grown sets for strongRINS (strongrins.go).
//
// On hardgen 100 / 9 at 0.5 the plan stayed 0.143% above CBC's proven
// optimum (80,609.75 against 80,494.49) although strongRINS's sets held
// most of the moves. Two things stood in the way:
//   - The search. Given exactly the 24 workloads CBC's optimum moves, the
//     best-first search that branches on the largest fractional column
//     found nothing in 5,000 nodes (nor did the depth-first one); with
//     strong branching it finds the optimum in 149.
//   - The LP. Without pruneByLeastUse the whole-fleet LP lies 1,400 below
//     the plan, and no set drawn from it holds a cheaper plan.
// With both, the RINS set grown by the workloads whose joining lifts its
// root gap most (grownStrong) holds one (docs/BENCHMARKS.md, "Session 30").

// strongBranchK is how many fractional columns strong branching tries at
// a node, those nearest one half first.
const strongBranchK = 8

// strongGrowth are the numbers of workloads grownStrong adds to the RINS
// set, tried in turn.
var strongGrowth = [...]int{2, 4, 8, 16}

// strongBranch picks p's branching column (p solved at objective obj) by
// strong branching: of the strongBranchK fractional columns nearest one
// half, the one whose two children's LP bounds rise most (the product of
// the rises, as MIP solvers score them). up and down are the children's
// bounds, +Inf when a child is infeasible or reaches cutoff. When one
// child of a tried column is pruned so, p is fixed the other way at once
// (fixed; the caller re-solves p), and when both are, p is pruned (both
// +Inf). q is -1 when p's solution is whole.
func (m *subMIP) strongBranch(p *lp, obj, cutoff float64) (q int, up, down float64, fixed bool) {
	type frac struct {
		j int
		v float64
	}
	var fs []frac
	for j := 0; j < p.n; j++ {
		if v := p.value(j); v > 1e-6 && v < 1-1e-6 {
			fs = append(fs, frac{j, math.Abs(v - 0.5)})
		}
	}
	if len(fs) == 0 {
		return -1, 0, 0, false
	}
	slices.SortStableFunc(fs, func(a, b frac) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	child := func(j int, val float64) float64 {
		c := p.clone()
		c.setBounds(j, val, val)
		if c.solve(subMIPIters, cutoff) != lpOptimal {
			return math.Inf(1)
		}
		if o := c.objective(); o < cutoff {
			return o
		}
		return math.Inf(1)
	}
	best := -1.0
	q = -1
	for _, f := range fs[:min(strongBranchK, len(fs))] {
		u, d := child(f.j, 1), child(f.j, 0)
		switch {
		case math.IsInf(u, 1) && math.IsInf(d, 1):
			return f.j, u, d, false
		case math.IsInf(u, 1):
			p.setBounds(f.j, 0, 0)
			return f.j, u, d, true
		case math.IsInf(d, 1):
			p.setBounds(f.j, 1, 1)
			return f.j, u, d, true
		}
		if score := max(u-obj, 1e-6) * max(d-obj, 1e-6); score > best {
			best, q, up, down = score, f.j, u, d
		}
	}
	return q, up, down, false
}

// bbStrongBest is bbBest branching by strongBranch: from each node taken
// off the queue (the least bound) it dives into the child with the lower
// bound and queues the other with its own bound.
func (m *subMIP) bbStrongBest(cutoff float64, nodes int) ([]int, float64, int) {
	return m.bestFirst(cutoff, nodes, true)
}

// grownStrong searches the RINS set rins grown by the workloads whose
// joining it alone lifts its strongly cut root gap (what the set's cost
// lies above its root LP) the most, strongGrowth of them in turn: a
// cheaper plan often needs moves to dearer options that make room on the
// rows, which no LP points at (on hardgen 100 / 9, CBC's optimum moves
// w30 and w67 to dearer options). ok when a set improved st's plan.
func (s *solver) grownStrong(st *state, rins []int) bool {
	if len(rins) < 2 {
		return false
	}
	type scored struct {
		w   int
		gap float64
	}
	in := make([]bool, len(st.evals))
	for _, w := range rins {
		in[w] = true
	}
	// One node: the root LP after its cuts is the score.
	_, _, base := s.solveSetCut(st, rins, 1, true, strongCuts)
	var cs []scored
	set := slices.Clone(rins)
	for w := range st.evals {
		if in[w] || st.choice[w] < 0 {
			continue
		}
		if _, _, g := s.solveSetCut(st, append(set[:len(rins)], w), 1, true, strongCuts); g > base+1e-3 {
			cs = append(cs, scored{w, g})
		}
	}
	slices.SortStableFunc(cs, func(a, b scored) int {
		switch {
		case a.gap > b.gap:
			return -1
		case a.gap < b.gap:
			return 1
		}
		return 0
	})
	last := 0
	for _, k := range strongGrowth {
		k = min(k, len(cs))
		if k == last {
			break
		}
		last = k
		set = set[:len(rins)]
		for _, c := range cs[:k] {
			set = append(set, c.w)
		}
		if ok, _, _ := s.solveSetCut(st, set, strongRINSNodes, true, strongCuts); ok {
			return true
		}
	}
	return false
}
