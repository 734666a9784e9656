package optimizer

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Exact sub-MIPs by LP-based branch and bound (lp.go).
//
// The depth-first searches of lns, chains and pricedLNS bound a node by
// the Lagrangian relaxation at fixed multipliers, which does not tighten
// as the search fixes workloads; on the hardest hardgen fleets the moves
// that close the last 0.1-0.3% change 17-21 workloads at once, and the
// priced search over the 25 workloads CBC moves on 99 / seed 4 found
// nothing in 2·10⁶ nodes. A linear programme re-solved at every node
// (dual simplex from the parent's basis) tightens with every branch, and
// its fractional solution says what to branch on: MIP solvers' way.
//
// subMIPLNS frees neighbourhoods of the plan (RINS: the workloads whose
// option differs from the LP relaxation of the whole fleet; and the
// workloads on the tightest rows) and solves each exactly over its
// workloads' candidates, the rest of the plan fixed: min Σ cost·x subject
// to one option per workload and, per row the options touch, what they
// take within what the fixed plan leaves. A move is kept only when the
// plan's own feasibility check accepts it and it is cheaper.
//
// The plain LP relaxation of these fleets is as weak as the Lagrangian
// bound (hardgen 99 / 4: 1.9% below the optimum; plain LP branch and
// bound over 23 freed workloads found nothing in 10⁵ nodes). Two steps
// make it work: whole-GPU rows lowered to the largest total one option
// per workload can reach (tightenRows, again at every node), and Gomory
// mixed-integer cuts at the root (lp.addCut); with both, the improving
// sets of the hard fleets are solved at the root or in a few nodes.

// subMIPOpts is the most candidates one workload brings to a sub-MIP (its
// cheapest that fit alone; its current option always).
const subMIPOpts = 64

// subMIPNodes is the node limit of one sub-MIP's branch and bound. With
// the tightened rows and the root's cuts the improving sets of the hard
// hardgen fleets are solved at the root or within a few nodes; 20 gives
// the same plans as 200-500 on them (99 / 4 at 0.4 a cheaper one) at a
// fraction of the CPU (98 / 2 at 0.6: 16.8 → 8.3 CPU-s; main 8.6).
const subMIPNodes = 20

// When no set of a round improves, the subMIPDeepSets sets whose search
// ran out of its subMIPNodes while their root LP lay furthest below their
// cost are searched again with subMIPDeepNodes each. Hardgen 150 / seed
// 39 at 0.5 stopped 0.237% above CBC's optimum: an anchored set of 71
// held 20 of the 21 workloads CBC's plan moves, and 200 nodes found
// an improvement that opened the way to the optimum.
const (
	subMIPDeepSets  = 3
	subMIPDeepNodes = 200
)

// subMIPPairRows: the unions of the row sets of each pair of the
// subMIPPairRows tightest rows are searched too, at most subMIPPairSize
// workloads each.
const (
	subMIPPairRows = 24
	subMIPPairSize = 100
)

// subMIPCuts is the number of cut rows a sub-MIP has room for,
// subMIPCutRounds and subMIPCutsPerRound how they are added at the root.
const (
	subMIPCuts         = 24
	subMIPCutRounds    = 3
	subMIPCutsPerRound = 8
)

// cutPlan is how a sub-MIP's root is cut: room for rows cut rows, added
// in at most rounds rounds of perRound each.
type cutPlan struct{ rows, rounds, perRound int }

// subMIPCutPlan is every sub-MIP's cut plan but strongRINS's.
var subMIPCutPlan = cutPlan{subMIPCuts, subMIPCutRounds, subMIPCutsPerRound}

// subMIPRounds is the most improvements subMIPLNS makes; subMIPRowSize
// the most workloads of one row's neighbourhood; subMIPWork its budget
// of branch-and-bound nodes per workload (at 40, with 200 nodes a set,
// 99 / 4 at 0.6 stopped at 58,425.05 instead of 58,363.81).
const (
	subMIPRounds  = 20
	subMIPRowSize = 40
	subMIPWork    = 100
)

// subMIPRINS is the most workloads a RINS neighbourhood frees.
const subMIPRINS = 60

// Anchored pairs: once no neighbourhood of a round improves, the RINS set
// joined with each pair of the subMIPPairRows tightest rows' sets (at most
// subMIPPairSize workloads), in the first subMIPLNS run only, with a node
// budget of its own (subMIPAnchorWork per workload). Hardgen 98 / seed 6
// at 0.4: CBC's optimum moves 24 workloads, 16 of them in the RINS set
// and at most 18 in any pair of row sets; RINS with a pair of row sets
// holds all 24 (docs/BENCHMARKS.md, session 12).
//
// When no pair improves with the whole RINS set, the pairs are tried
// again anchored on its subMIPAnchorCore most different workloads only.
// A sub-MIP's LP relaxation weakens with every workload it frees: on
// hardgen 100 / seed 9 at 0.5 the 14 workloads CBC's optimum moves are
// solved in 20 nodes alone, but any set of 41-75 that holds them (the
// whole RINS set, 31, with a pair of row sets) finds nothing in 1,000
// nodes (its root LP, after cuts, 1,457 below the set's optimum against
// 38 for the 14 alone); the pairs with the RINS set's first 8 improve the
// plan, from 80,666.25 to 80,609.75 (docs/BENCHMARKS.md, session 13).
const (
	subMIPAnchorCore = 8
	subMIPAnchorWork = 2 * subMIPWork
)

// subMIPIters is the pivot limit of one node's LP.
const subMIPIters = 5000

// Grown RINS sets: once nothing else improves a fleet of at most
// grownRINSFleet workloads, the RINS set is grown by the workloads whose
// release alone lowers its root LP the most (grownRINSSizes of them),
// each set searched best bound first (bbBest) with grownRINSNodes nodes.
// (Sizes 4, 8, 16 and 32 cost seed 17011's plan 4 s more than 4 and 32,
// for the same plan.)
// Differential seed 17011 at MAXN=150 (its 90 placed solved alone): CBC's
// optimum moves 9 workloads, 5 of them in the 13-workload RINS set; the
// other moves that make room on the aws, gcp and A100 rows (w43, w130)
// are among the 4 whose release lowers the set's root LP most, and the
// 17-workload set's best-first search finds the optimum in 1,534 nodes,
// where the depth-first search of the same set finds nothing in 4,000
// (0.387% above the optimum before; docs/BENCHMARKS.md, session 24).
const (
	grownRINSFleet = 200
	grownRINSMax   = 24
	grownRINSNodes = 4000
)

var grownRINSSizes = [...]int{4, 32}

// subMIP is the exact sub-problem over a set of workloads whose options
// have been released from the state.
type subMIP struct {
	ws   []int
	colW []int // column → index into ws
	colJ []int // column → candidate of that workload
	// shift is Σ of each workload's cheapest column's cost: column
	// costs are relative to it, so all are non-negative.
	shift float64
	p     *lp
	// amts are the whole-number rows' amounts (tightenRows).
	amts [][]rowAmt
	// noCuts leaves out the root's cuts (bbTwice's second pass).
	noCuts bool
	// root is the last bb's root LP objective after its cuts (shifted
	// cost; +Inf when the root has no solution).
	root float64
	// cuts is how the root is cut (cutRounds).
	cuts cutPlan
	// integral: every plan's objective is a whole number (leastOutMIP's
	// count), so once a plan of k is found only plans of k-1 or fewer are
	// wanted (nextCutoff).
	integral bool
}

// nextCutoff is the cutoff after a plan of objective obj is found: obj
// itself, and for an integral objective the next whole number down (with
// the searches' 1e-4 tolerance left room on the right side), so nodes
// that can only tie the plan are pruned.
func (m *subMIP) nextCutoff(obj float64) float64 {
	if m.integral {
		return math.Round(obj) - 1 + 2e-4
	}
	return obj
}

// newSubMIP builds the sub-problem of ws (already released from st, so
// st.rem is what the rest of the plan leaves). Columns are the candidates
// that fit alone, at most subMIPOpts per workload, those whose shifted
// cost exceeds limit dropped (they cannot be part of a plan cheaper than
// limit); keep[i] is a candidate of ws[i] always kept (-1: none). Nil when
// some workload has no column.
func (s *solver) newSubMIP(st *state, ws []int, keep []int, limit float64) *subMIP {
	return s.subMIPOf(st, ws, keep, limit, false, subMIPOpts)
}

// subMIPOf is newSubMIP; with leftOut, every candidate column costs 0
// and each workload also gets a column that leaves it out, costing 1
// (colJ -1), so the sub-MIP minimises the count left out (leastOutMIP).
// Each workload gets at most opts of its options that fit (and its kept
// one).
func (s *solver) subMIPOf(st *state, ws []int, keep []int, limit float64, leftOut bool, opts int) *subMIP {
	return s.subMIPCut(st, ws, keep, limit, leftOut, opts, subMIPCutPlan)
}

// subMIPCut is subMIPOf with the root cut as plan says.
func (s *solver) subMIPCut(st *state, ws []int, keep []int, limit float64, leftOut bool, opts int, plan cutPlan) *subMIP {
	m := &subMIP{ws: ws, cuts: plan}
	rowIdx := make(map[int32]int)
	var b []float64
	var eq []bool
	for range ws {
		b = append(b, 1)
		eq = append(eq, true)
	}
	row := func(r int32) int {
		i, ok := rowIdx[r]
		if !ok {
			i = len(b)
			rowIdx[r] = i
			b = append(b, max(0, st.rem[r]))
			eq = append(eq, false)
		}
		return i
	}
	var cost []float64
	var cols [][]lpCol
	jss := make([][]int, len(ws))
	for i, w := range ws {
		e := st.evals[w]
		for j := range e.cands {
			if len(jss[i]) >= opts && j != keep[i] {
				continue
			}
			if j != keep[i] && !st.fits(e, &e.cands[j]) {
				continue
			}
			jss[i] = append(jss[i], j)
		}
	}
	if !leftOut && plan == strongCuts {
		pruneByLeastUse(st, ws, jss, keep)
	}
	for i, w := range ws {
		e := st.evals[w]
		js := jss[i]
		minC := math.Inf(1)
		for _, j := range js {
			minC = min(minC, e.cands[j].cost)
		}
		if len(js) == 0 && !leftOut {
			return nil
		}
		if leftOut {
			minC = 0
		}
		m.shift += minC
		for _, j := range js {
			o := &e.cands[j]
			c := o.cost - minC
			if leftOut {
				c = 0
			}
			if c > limit && j != keep[i] {
				continue
			}
			col := []lpCol{{row: i, coef: 1}}
			for _, u := range o.uses {
				col = append(col, lpCol{row: row(u.row), coef: u.amt})
			}
			for _, r := range e.budgetRows {
				col = append(col, lpCol{row: row(r), coef: o.budgetUse})
			}
			cost = append(cost, c)
			cols = append(cols, col)
			m.colW = append(m.colW, i)
			m.colJ = append(m.colJ, j)
		}
		if leftOut {
			cost = append(cost, 1)
			cols = append(cols, []lpCol{{row: i, coef: 1}})
			m.colW = append(m.colW, i)
			m.colJ = append(m.colJ, -1)
		}
	}
	m.amts = tightenRows(cols, m.colW, b, eq)
	m.p = newLP(cost, cols, b, eq, plan.rows)
	return m
}

// rowAmts lists, per inequality row whose coefficients are all whole
// numbers (GPUs), its columns and their amounts, by workload; nil for
// other rows.
type rowAmt struct{ w, col, a int }

func wholeRows(cols [][]lpCol, colW []int, b []float64, eq []bool) [][]rowAmt {
	amts := make([][]rowAmt, len(b))
	whole := make([]bool, len(b))
	for i := range whole {
		whole[i] = !eq[i] && b[i] <= 1e5
	}
	for j, col := range cols {
		for _, e := range col {
			if !whole[e.row] {
				continue
			}
			if e.coef != math.Trunc(e.coef) || e.coef < 0 || e.coef > 1e5 {
				whole[e.row] = false
				continue
			}
			amts[e.row] = append(amts[e.row], rowAmt{colW[j], j, int(e.coef)})
		}
	}
	for r := range amts {
		if !whole[r] {
			amts[r] = nil
			continue
		}
		as := amts[r]
		sort.Slice(as, func(x, y int) bool {
			if as[x].w != as[y].w {
				return as[x].w < as[y].w
			}
			return as[x].a < as[y].a
		})
	}
	return amts
}

// reachMax is the largest total at most cap that the columns of as can
// reach with at most one column per workload, the columns allowed by ok.
// A workload of the row with a column that ok rejects... contributes 0 or
// one of its allowed amounts; fixed[w] ≥ 0 forces workload w's amount.
func reachMax(as []rowAmt, cap int, ok func(col int) bool, reach, next []bool) int {
	reach = reach[:cap+1]
	next = next[:cap+1]
	clear(reach)
	reach[0] = true
	for k := 0; k < len(as); {
		w := as[k].w
		copy(next, reach)
		for ; k < len(as) && as[k].w == w; k++ {
			a := as[k].a
			if a == 0 || a > cap || !ok(as[k].col) {
				continue
			}
			for v := cap - a; v >= 0; v-- {
				if reach[v] {
					next[v+a] = true
				}
			}
		}
		reach, next = next, reach
	}
	for v := cap; v > 0; v-- {
		if reach[v] {
			return v
		}
	}
	return 0
}

// tightenRows lowers each whole-number inequality row's right-hand side
// to the largest total its columns can reach with one column per
// workload: a quota with 12 GPUs left that only 8-GPU options use holds
// 8. Every integer solution meets the lowered rows, and the LP
// relaxation gets tighter: it can no longer fill the 4 GPUs no option can
// use with half a job (hardgen 99 / seed 4: the whole fleet's LP rose
// from 57,222 to 57,880, the optimum being 58,358).
func tightenRows(cols [][]lpCol, colW []int, b []float64, eq []bool) [][]rowAmt {
	amts := wholeRows(cols, colW, b, eq)
	for r, as := range amts {
		if as == nil {
			continue
		}
		cap := int(math.Floor(b[r] + 1e-9))
		buf := make([]bool, 2*(cap+1))
		b[r] = float64(reachMax(as, cap, func(int) bool { return true }, buf[:cap+1], buf[cap+1:]))
	}
	return amts
}

// bb is the depth-first branch and bound: the best integer solution found
// below cutoff (shifted cost) within the node limit, as a candidate per
// workload; nil when none.
func (m *subMIP) bb(cutoff float64, nodes int) ([]int, float64, int) {
	var best []int
	bestCost := math.Inf(1)
	gain := 1e-4
	count := 0
	var rec func(p *lp)
	rec = func(p *lp) {
		if count >= nodes {
			return
		}
		count++
		m.tighten(p)
		if p.solve(subMIPIters, cutoff-gain) != lpOptimal {
			return
		}
		obj := p.objective()
		if obj >= cutoff-gain {
			return
		}
		// Branch on the fractional column with the largest value, up
		// first: dives reach integer plans quickly.
		q := branchColumn(p)
		if q < 0 {
			best, bestCost, cutoff = m.pickOf(p), obj, m.nextCutoff(obj)
			return
		}
		child := p.clone()
		child.setBounds(q, 1, 1)
		rec(child)
		p.setBounds(q, 0, 0)
		rec(p)
	}
	root := m.p.clone()
	m.root = math.Inf(1)
	if root.solve(subMIPIters, math.Inf(1)) == lpOptimal {
		if !m.noCuts {
			m.cutRounds(root)
		}
		m.root = root.objective()
	}
	rec(root)
	return best, bestCost, count
}

// bbTwice is bb with half the nodes, then, when that found nothing, bb
// again without the root's cuts with the rest. The depth-first search
// follows the root relaxation's dive, and a dive that went wrong near
// the top is never left: on differential seed 7054 (the 68 workloads a
// plan that leaves two out must place) the root with cuts found nothing
// in 20,000 nodes, without them the optimum in 1,663, and CBC's own
// dive in 9.
func (m *subMIP) bbTwice(cutoff float64, nodes int) ([]int, float64, int) {
	pick, cost, used := m.bb(cutoff, nodes/2)
	if pick != nil {
		return pick, cost, used
	}
	m.noCuts = true
	defer func() { m.noCuts = false }()
	pick, cost, more := m.bb(cutoff, nodes-used)
	return pick, cost, used + more
}

// bbBest is bb searching best bound first with plunging: from each node
// taken off the queue (the least LP bound) it dives as bb does, up on the
// largest fractional column, and leaves each down branch in the queue, to
// be re-solved from the root's tableau with its fixings. bb's depth-first
// search never leaves a dive that went wrong near the top; on a grown
// RINS set (the set and the rows' other users) the first dives mostly do.
func (m *subMIP) bbBest(cutoff float64, nodes int) ([]int, float64, int) {
	return m.bestFirst(cutoff, nodes, false)
}

// bestFirst is the best-bound-first search of bbBest and, with strong,
// bbStrongBest: they differ only in how a node picks its branching
// column and which child it dives into.
func (m *subMIP) bestFirst(cutoff float64, nodes int, strong bool) ([]int, float64, int) {
	var best []int
	bestCost := math.Inf(1)
	gain := 1e-4
	count := 0
	root := m.p.clone()
	m.root = math.Inf(1)
	if root.solve(subMIPIters, math.Inf(1)) != lpOptimal {
		return nil, bestCost, 0
	}
	if !m.noCuts {
		m.cutRounds(root)
	}
	m.root = root.objective()
	queue := &bbQueue{{bound: m.root}}
	for queue.Len() > 0 && count < nodes {
		nd := heap.Pop(queue).(bbNode)
		if nd.bound >= cutoff-gain {
			break // (every node left is bounded as high)
		}
		p := root.clone()
		for _, f := range nd.fix {
			p.setBounds(f.col, f.val, f.val)
		}
		fix := nd.fix
		for count < nodes {
			count++
			m.tighten(p)
			if p.solve(subMIPIters, cutoff-gain) != lpOptimal {
				break
			}
			obj := p.objective()
			if obj >= cutoff-gain {
				break
			}
			// Plain: the largest fractional column, diving up and
			// queueing the down branch at the node's bound. Strong: the
			// strongly branched column, diving into the child with the
			// lower bound and queueing the other at its own.
			q, dive, other, otherBound := -1, 1.0, 0.0, obj
			if strong {
				var up, down float64
				var fixed bool
				q, up, down, fixed = m.strongBranch(p, obj, cutoff-gain)
				if fixed {
					fix = append(slices.Clip(fix), bbFix{q, p.lo[q]})
					continue
				}
				if q >= 0 && math.IsInf(up, 1) && math.IsInf(down, 1) {
					break
				}
				otherBound = down
				if down < up {
					dive, other, otherBound = 0, 1, up
				}
			} else {
				q = branchColumn(p)
			}
			if q < 0 {
				best, bestCost, cutoff = m.pickOf(p), obj, m.nextCutoff(obj)
				break
			}
			heap.Push(queue, bbNode{bound: otherBound, fix: append(slices.Clip(fix), bbFix{q, other})})
			fix = append(slices.Clip(fix), bbFix{q, dive})
			p.setBounds(q, dive, dive)
		}
	}
	return best, bestCost, count
}

// branchColumn is the fractional column of p's solution with the largest
// value (-1: the solution is whole).
func branchColumn(p *lp) int {
	q, qv := -1, 0.0
	for j := 0; j < p.n; j++ {
		v := p.value(j)
		if v > 1e-6 && v < 1-1e-6 && v > qv {
			q, qv = j, v
		}
	}
	return q
}

// pickOf is the candidate per workload of p's whole solution.
func (m *subMIP) pickOf(p *lp) []int {
	pick := make([]int, len(m.ws))
	for j := 0; j < p.n; j++ {
		if p.value(j) > 0.5 {
			pick[m.colW[j]] = m.colJ[j]
		}
	}
	return pick
}

// bbFix holds a column of a bbBest node at a value; bbNode is a node left
// for later, with its parent's LP bound.
type (
	bbFix struct {
		col int
		val float64
	}
	bbNode struct {
		bound float64
		fix   []bbFix
	}
	bbQueue []bbNode
)

func (q bbQueue) Len() int           { return len(q) }
func (q bbQueue) Less(i, j int) bool { return q[i].bound < q[j].bound }
func (q bbQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *bbQueue) Push(x any)        { *q = append(*q, x.(bbNode)) }
func (q *bbQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// placeMIPCells bounds the dense tableau (rows × columns) placeByMIP
// solves: each pivot touches all of it, and a few thousand nodes of tens
// of pivots each must stay within seconds (seed 7054's 68 workloads:
// 104 × 1,042, 0.9-1.9 s for 4,000 nodes).
const placeMIPCells = 1 << 19

// placeByMIP places every workload of ws (released from st) by the
// sub-MIP of ws when it finds a plan within nodes; false (st unchanged)
// otherwise, also when its tableau would exceed placeMIPCells. used is
// the nodes it took (0 when the root LP has no solution).
func (s *solver) placeByMIP(st *state, ws []int, nodes int) (ok bool, used int) {
	keep := noneKept(len(ws))
	m := s.newSubMIP(st, ws, keep, math.Inf(1))
	if m == nil || m.p.m*(m.p.n+m.p.m) > placeMIPCells {
		return false, 0
	}
	// The root LP solved in place: bb's root starts from its optimal
	// basis, so the screen costs no second solve.
	if m.p.solve(subMIPIters, math.Inf(1)) != lpOptimal {
		return false, 0 // no LP solution: no plan, and no nodes spent
	}
	pick, _, used := m.bbTwice(math.Inf(1), nodes)
	if pick == nil {
		return false, used
	}
	for i, w := range ws {
		e := st.evals[w]
		if !st.fits(e, &e.cands[pick[i]]) {
			for _, v := range ws[:i] {
				st.set(v, -1)
			}
			return false, used
		}
		st.set(w, pick[i])
	}
	return true, used
}

// lpCoreSize is the largest set lpCore examines, lpCoreCells the largest
// LP tableau (rows × columns): a core is up to one LP per member.
const (
	lpCoreSize  = 150
	lpCoreCells = 1 << 20
)

// lpCore returns a subset of set, with set's workloads placed nowhere
// (released from st), whose LP relaxation over every candidate that fits
// has no solution, shrunk (when shrink is set) by dropping members while
// the others' LP still has none; nil when set's own LP has a solution or
// is too large to solve. Such a set cannot be placed whole, so it serves
// fewestOut as a core where the depth-first feasibility search ran out of
// nodes before it could give one (differential seed 7371 at MAXN=150:
// every search over the 73-workload group ran out, so the hitting sets
// never started; its LP shows {w46, w67, w74, w111} cannot all be
// placed). Each LP solved takes its tableau's cells (rows × columns)
// from *cells; with none left it solves no more (a shrink stops where it
// is, still a core). The dual simplex decides
// infeasibility within a tolerance, so a core from here steers the search
// but proves nothing.
func (s *solver) lpCore(st *state, set []int, shrink bool, cells *int) []int {
	if len(set) == 0 || len(set) > lpCoreSize || *cells <= 0 {
		return nil
	}
	restore := releaseExact(st, set)
	defer restore()
	keep := noneKept(len(set))
	// infeasible reports whether ws's LP has no solution, and then the
	// members whose rows (each workload's first) its proof uses (usedRow).
	infeasible := func(ws []int) (bool, map[int]bool) {
		m := s.subMIPOf(st, ws, keep[:len(ws)], math.Inf(1), false, math.MaxInt)
		if m == nil {
			// A workload with no option that fits: it alone cannot be
			// placed (no proof to reuse).
			return true, nil
		}
		size := m.p.m * (m.p.n + m.p.m)
		if size > lpCoreCells || size > *cells {
			return false, nil
		}
		*cells -= size
		if m.p.solve(subMIPIters, math.Inf(1)) != lpInfeasible {
			return false, nil
		}
		used := map[int]bool{}
		for i, w := range ws {
			if m.p.usedRow(i) {
				used[w] = true
			}
		}
		return true, used
	}
	ok, used := infeasible(set)
	if !ok {
		return nil
	}
	core := slices.Clone(set)
	if !shrink {
		return core
	}
	for i := 0; i < len(core) && *cells > 0; {
		w := core[i]
		sub := slices.Delete(slices.Clone(core), i, i+1)
		if len(sub) == 0 {
			i++
			continue
		}
		// A member the last proof does not use goes without an LP: the
		// same proof holds for the rest. Only the members it uses take
		// an LP each (differential seed 33236 at MAXN=200: LPs for every
		// member of 100-workload groups took a quarter of its plan's
		// CPU). The core is the one an LP per member gives.
		if used != nil && !used[w] {
			core = sub
			continue
		}
		if ok, u := infeasible(sub); ok {
			core, used = sub, u
			continue
		}
		i++
	}
	return core
}

// lpOutShares solves the LP relaxation of leastOutMIP's model over ws
// (released from st, every option that fits) and returns, in ws's order,
// how much of each workload it leaves out; nil when it has no solution
// or is too large.
func (s *solver) lpOutShares(st *state, ws []int) []float64 {
	if len(ws) > lpCoreSize {
		return nil
	}
	restore := releaseExact(st, ws)
	defer restore()
	keep := noneKept(len(ws))
	m := s.subMIPOf(st, ws, keep, math.Inf(1), true, math.MaxInt)
	if m == nil || m.p.m*(m.p.n+m.p.m) > lpCoreCells || m.p.solve(subMIPIters, math.Inf(1)) != lpOptimal {
		return nil
	}
	out := make([]float64, len(ws))
	for j, w := range m.colW {
		if m.colJ[j] < 0 {
			out[w] = m.p.value(j)
		}
	}
	return out
}

// placeWhole places the whole group ws by its sub-MIP (placeByMIP, at
// most nodes nodes, groups of at most fewestMIPSize) and returns the
// choices, in ws's order; nil, with st's plan of ws untouched, when it
// finds none.
func (s *solver) placeWhole(st *state, ws []int, nodes int) []int {
	if len(ws) > fewestMIPSize {
		return nil
	}
	restore := releaseExact(st, ws)
	if ok, _ := s.placeByMIP(st, ws, nodes); !ok {
		restore()
		return nil
	}
	pick := make([]int, len(ws))
	for i, w := range ws {
		pick[i] = st.choice[w]
	}
	return pick
}

// cutRounds adds Gomory mixed-integer cuts at the root, a few per round
// from the most fractional rows, while they raise the bound.
func (m *subMIP) cutRounds(p *lp) {
	for round := 0; round < m.cuts.rounds; round++ {
		type frac struct {
			i int
			f float64
		}
		var fr []frac
		for i, j := range p.basis {
			if j >= p.n {
				continue
			}
			v := p.xb[i]
			f := v - math.Floor(v)
			if f > 0.01 && f < 0.99 {
				fr = append(fr, frac{i, math.Min(f, 1-f)})
			}
		}
		if len(fr) == 0 {
			return
		}
		sort.SliceStable(fr, func(a, b int) bool { return fr[a].f > fr[b].f })
		added := 0
		for _, x := range fr {
			if added >= m.cuts.perRound {
				break
			}
			if p.addCut(x.i) {
				added++
			}
		}
		if added == 0 {
			return
		}
		if p.solve(subMIPIters, math.Inf(1)) != lpOptimal {
			return
		}
	}
}

// tighten lowers the whole-number rows to what the columns still
// allowed at node p can reach (tightenRows), with each workload fixed to
// a column held to it.
func (m *subMIP) tighten(p *lp) {
	fixed := make([]int, len(m.ws))
	for i := range fixed {
		fixed[i] = -1
	}
	for j := 0; j < p.n; j++ {
		if p.lo[j] > 0.5 {
			fixed[m.colW[j]] = j
		}
	}
	ok := func(col int) bool {
		if f := fixed[m.colW[col]]; f >= 0 {
			return f == col
		}
		return p.up[col] > 0.5
	}
	var buf []bool
	for r, as := range m.amts {
		if as == nil {
			continue
		}
		c := p.capRow(r)
		cap := int(math.Floor(c + 1e-9))
		if cap < 0 {
			continue
		}
		if len(buf) < 2*(cap+1) {
			buf = make([]bool, 2*(cap+1))
		}
		if v := float64(reachMax(as, cap, ok, buf[:cap+1], buf[cap+1:2*(cap+1)])); v < c-1e-9 {
			p.tightenRow(r, v)
		}
	}
}

// solveSet re-solves the workloads of set exactly (within the node
// limit) and applies the result to st when the plan's own check accepts
// it and it is cheaper; ok when it did. gain is how far below the set's
// cost its root LP relaxation (after cuts) lies: what a longer search of
// the set might still find (0 when nothing).
func (s *solver) solveSet(st *state, set []int, nodes int) (ok bool, used int, gain float64) {
	return s.solveSetBy(st, set, nodes, false)
}

// solveSetBy is solveSet, searching best bound first (bbBest) when best.
func (s *solver) solveSetBy(st *state, set []int, nodes int, best bool) (ok bool, used int, gain float64) {
	return s.solveSetCut(st, set, nodes, best, subMIPCutPlan)
}

// solveSetCut is solveSetBy with the set's root cut as plan says.
func (s *solver) solveSetCut(st *state, set []int, nodes int, best bool, plan cutPlan) (ok bool, used int, gain float64) {
	if len(set) < 2 {
		return false, 0, 0
	}
	ws := slices.Clone(set)
	orig := make([]int, len(ws))
	old := 0.0
	for i, w := range ws {
		orig[i] = st.choice[w]
		old += st.evals[w].cands[orig[i]].cost
	}
	restore := release(st, ws)
	// No column whose cost above its workload's cheapest exceeds the
	// whole set's (old less the cheapest options') can be in a cheaper
	// plan.
	m := s.subMIPCut(st, ws, orig, old-s.cheapestFits(st, ws, orig), false, subMIPOpts, plan)
	if m == nil {
		restore()
		return false, 0, 0
	}
	search := m.bb
	if best {
		search = m.bbBest
	}
	if best && plan == strongCuts && nodes > 1 {
		search = m.bbStrongBest
	}
	pick, _, used := search(old-m.shift, nodes)
	gain = max(0, old-m.shift-m.root)
	if pick == nil {
		restore()
		return false, used, gain
	}
	newCost := 0.0
	for i, w := range ws {
		e := st.evals[w]
		if !st.fits(e, &e.cands[pick[i]]) {
			restore()
			return false, used, gain
		}
		st.set(w, pick[i])
		newCost += e.cands[pick[i]].cost
	}
	if newCost >= old-eps*max(1, old) {
		restore()
		return false, used, gain
	}
	return true, used, gain
}

// cheapestFits is the sum over ws of each one's cheapest candidate among
// those newSubMIP would take (keep[i] always).
func (s *solver) cheapestFits(st *state, ws, keep []int) float64 {
	sum := 0.0
	for i, w := range ws {
		e := st.evals[w]
		minC, n := math.Inf(1), 0
		for j := range e.cands {
			if n >= subMIPOpts && j != keep[i] {
				continue
			}
			if j != keep[i] && !st.fits(e, &e.cands[j]) {
				continue
			}
			n++
			minC = min(minC, e.cands[j].cost)
		}
		sum += minC
	}
	return sum
}

// rinsSet is the RINS neighbourhood of the plan: the LP relaxation of
// the whole fleet, then the workloads whose option differs from it, most
// different first, at most size; nil when the LP does not solve.
func (s *solver) rinsSet(st *state, size int) []int {
	m, orig, restore := s.fleetRelaxation(st)
	defer restore()
	if m == nil {
		return nil
	}
	ws := m.offPlan(m.p, orig, -1)
	return ws[:min(size, len(ws))]
}

// fleetRelaxation is the LP relaxation of the whole fleet with every
// workload released from st (each keeping its option as a column), after
// the root's cut rounds; nil when it does not solve. orig is st's plan,
// which restore puts back.
func (s *solver) fleetRelaxation(st *state) (m *subMIP, orig []int, restore func()) {
	return s.fleetRelaxationCut(st, subMIPCutPlan)
}

// fleetRelaxationCut is fleetRelaxation with the root cut as plan says.
func (s *solver) fleetRelaxationCut(st *state, plan cutPlan) (m *subMIP, orig []int, restore func()) {
	all := allIdx(len(st.evals))
	orig = slices.Clone(st.choice)
	for _, w := range all {
		st.set(w, -1)
	}
	restore = func() {
		for w, c := range orig {
			st.set(w, c)
		}
	}
	m = s.subMIPCut(st, all, orig, math.Inf(1), false, subMIPOpts, plan)
	if m == nil {
		return nil, orig, restore
	}
	if m.p.solve(50*m.p.m+1000, math.Inf(1)) != lpOptimal {
		return nil, orig, restore
	}
	m.cutRounds(m.p)
	return m, orig, restore
}

// offPlan lists the workloads whose option in p, a solved LP of m (a
// fleetRelaxation), differs from the plan orig, most different first;
// first (≥ 0) leads the list.
func (m *subMIP) offPlan(p *lp, orig []int, first int) []int {
	off := make([]float64, len(orig))
	for j := 0; j < p.n; j++ {
		if m.colJ[j] == orig[m.colW[j]] {
			off[m.colW[j]] += 1 - p.value(j)
		}
	}
	var ws []int
	if first >= 0 {
		ws = append(ws, first)
	}
	for w, v := range off {
		if v > 1e-6 && w != first {
			ws = append(ws, w)
		}
	}
	rest := ws[min(1, len(ws)):]
	if first < 0 {
		rest = ws
	}
	sort.SliceStable(rest, func(a, b int) bool { return off[rest[a]] > off[rest[b]] })
	return ws
}

// rowSets are the tight-row neighbourhoods: for each row with less room
// left than the smallest amount a cheaper option of some workload would
// take from it, tightest first, the workloads on it and those with a
// cheaper option on it, cheapest-to-gain first, at most size.
func (s *solver) rowSets(st *state, size int) [][]int {
	users, wants := st.rowUsers(), st.rowWants(true)
	type rowGap struct {
		r     int
		slack float64
	}
	var rows []rowGap
	for r := range st.rem {
		if len(wants[r]) == 0 || len(users[r]) == 0 {
			continue
		}
		rows = append(rows, rowGap{r, st.rem[r] / max(1e-9, s.caps[r])})
	}
	sort.SliceStable(rows, func(a, b int) bool { return rows[a].slack < rows[b].slack })
	var sets [][]int
	for _, rg := range rows {
		in := make(map[int]bool)
		var set []int
		add := func(w int) {
			if !in[w] && len(set) < size {
				in[w] = true
				set = append(set, w)
			}
		}
		// Wanters and users alternately, so both sides are in.
		us, ws := users[rg.r], wants[rg.r]
		for k := 0; k < max(len(us), len(ws)); k++ {
			if k < len(ws) {
				add(ws[k])
			}
			if k < len(us) {
				add(us[k])
			}
		}
		sets = append(sets, set)
	}
	return sets
}

// subMIPLNS improves choice with exact sub-MIPs (see above): the RINS
// neighbourhood, then the tight rows' (rowSets), each alone and each pair
// of the subMIPPairRows tightest, then (anchored: the first run) the RINS
// set joined with each pair; after every improvement the neighbourhoods
// are rebuilt, until a pass improves nothing or the node budgets are
// spent. Deterministic.
func (s *solver) subMIPLNS(evals []*eval, choice []int, budget int, anchored bool) []int {
	st := newState(s, evals, slices.Clone(choice))
	spent, spentA := 0, 0
	budgetA := budget / subMIPWork * subMIPAnchorWork
	// cut are the round's sets whose search ran out of nodes while their
	// root LP still left room for a cheaper plan (deeper).
	type cutShort struct {
		set  []int
		gain float64
	}
	var cut []cutShort
	try := func(set []int, spent *int, budget int) bool {
		nodes := min(subMIPNodes, budget-*spent)
		if nodes <= 0 {
			return false
		}
		ok, used, gain := s.solveSet(st, set, nodes)
		*spent += used
		if !ok && used >= nodes && gain > 1e-3 {
			cut = append(cut, cutShort{set, gain})
		}
		return ok
	}
	for round := 0; round < subMIPRounds && spent < budget; round++ {
		cut = cut[:0]
		rins := s.rinsSet(st, subMIPRINS)
		if try(rins, &spent, budget) {
			continue
		}
		rs := s.rowSets(st, subMIPRowSize)
		sets := slices.Clone(rs)
		for a := 0; a < len(rs) && a < subMIPPairRows; a++ {
			for b := a + 1; b < len(rs) && b < subMIPPairRows; b++ {
				u := slices.Clone(rs[a])
				for _, w := range rs[b] {
					if !slices.Contains(u, w) && len(u) < subMIPPairSize {
						u = append(u, w)
					}
				}
				sets = append(sets, u)
			}
		}
		improved := false
		for _, set := range sets {
			if try(set, &spent, budget) {
				improved = true
				break
			}
		}
		if !improved && anchored && len(rins) > 0 {
			improved = s.anchoredPairs(rins, rs, func(set []int) bool { return try(set, &spentA, budgetA) })
		}
		if !improved {
			// Last, the regret sets (regretSets).
			for _, set := range s.regretSets(st, subMIPRowSize, subMIPRegrets) {
				if try(set, &spent, budget) {
					improved = true
					break
				}
			}
		}
		if !improved {
			// Then the forced sets (forcedSets).
			for _, set := range s.forcedSets(st, subMIPRowSize, subMIPRegrets) {
				if try(set, &spent, budget) {
					improved = true
					break
				}
			}
		}
		if !improved {
			// Last, the sets whose search the node limit cut short,
			// deeper (subMIPDeepSets).
			sort.SliceStable(cut, func(a, b int) bool { return cut[a].gain > cut[b].gain })
			for _, c := range cut[:min(len(cut), subMIPDeepSets)] {
				nodes := min(subMIPDeepNodes, budget-spent)
				if nodes <= 0 {
					break
				}
				ok, used, _ := s.solveSet(st, c.set, nodes)
				spent += used
				if ok {
					improved = true
					break
				}
			}
		}
		if !improved && len(evals) <= grownRINSFleet && len(rins) > 1 && len(rins) <= grownRINSMax {
			// Last of all, the RINS set grown (grownRINS).
			improved = s.grownRINS(st, rins)
		}
		if !improved {
			break
		}
	}
	// Last, RINS from the whole-fleet LP cut much harder (strongrins.go):
	// it points at moves this search's LP does not.
	s.strongRINS(st)
	return st.choice
}

// grownRINS searches the RINS set rins grown by the workloads whose
// release alone lowers its root LP most: a cheaper plan the LP points to
// often needs moves the LP makes fractionally, or not at all, to free
// the rows (the grownRINS constants say why). The first improvement is
// applied; true when there was one.
func (s *solver) grownRINS(st *state, rins []int) bool {
	type scored struct {
		w    int
		gain float64
	}
	in := make([]bool, len(st.evals))
	for _, w := range rins {
		in[w] = true
	}
	var cs []scored
	set := slices.Clone(rins)
	for w := range st.evals {
		if in[w] || st.choice[w] < 0 {
			continue
		}
		// One node: the root LP (after its cuts) is the score.
		_, _, g := s.solveSet(st, append(set[:len(rins)], w), 1)
		if g > 1e-3 {
			cs = append(cs, scored{w, g})
		}
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].gain > cs[b].gain })
	last := 0
	for _, k := range grownRINSSizes {
		k = min(k, len(cs))
		if k == last {
			break
		}
		last = k
		set = set[:len(rins)]
		for _, c := range cs[:k] {
			set = append(set, c.w)
		}
		if ok, _, _ := s.solveSetBy(st, set, grownRINSNodes, true); ok {
			return true
		}
	}
	return false
}

// anchoredPairs tries the RINS set rins joined with each pair of the
// subMIPPairRows tightest row sets of rs, at most subMIPPairSize
// workloads each, then, when none improves, the same pairs joined with
// rins's first subMIPAnchorCore workloads only (the most different from
// the LP), until try improves the plan; true when it did.
func (s *solver) anchoredPairs(rins []int, rs [][]int, try func([]int) bool) bool {
	if s.anchorPairs(rins, rs, try) {
		return true
	}
	return len(rins) > subMIPAnchorCore && s.anchorPairs(rins[:subMIPAnchorCore], rs, try)
}

// anchorPairs tries anchor joined with each pair of the row sets (see
// anchoredPairs).
func (s *solver) anchorPairs(anchor []int, rs [][]int, try func([]int) bool) bool {
	for a := 0; a < len(rs) && a < subMIPPairRows; a++ {
		for b := a + 1; b < len(rs) && b < subMIPPairRows; b++ {
			u := slices.Clone(anchor)
			for _, w := range slices.Concat(rs[a], rs[b]) {
				if !slices.Contains(u, w) && len(u) < subMIPPairSize {
					u = append(u, w)
				}
			}
			if try(u) {
				return true
			}
		}
	}
	return false
}

// leastOutNodes is the node limit of leastOutMIP's branch and bound.
const leastOutNodes = 200

// leastOutMIP looks for a plan of the group ws that leaves out fewer of
// its workloads than st does, as a sub-MIP: each workload's candidates
// that fit alone (at most subMIPOpts, the cheapest) plus a column that
// leaves it out, costing 1 where every candidate costs 0, so the branch
// and bound minimises the count left out. It applies the plan it finds
// when st's own check accepts it and reports whether it did. The plan
// is blind to cost: the repair runs it last, and the placed part is
// solved again after it (polishPlaced). Ranked by cost as well, its
// 200 nodes found nothing on seed 5740; run before tradeIn, its plan
// started hardgen 99 / seed 4 at tightness 0.4 5% above the optimum
// (TestPricedChains).
//
// The feasibility searches work from who is left out (fewestOut,
// leaveOneOut): each tries to place every other workload of the group by
// depth-first search, and on a group of 50 with many candidates each
// that search runs out of nodes before it finds a plan, so a hitting set
// that is the answer is skipped. The LP relaxation sees the whole group
// at once (differential seed 5740 at GPUBROKER_DIFF_MAXN=60: a 64-GPU
// and a 16-GPU job left out where leaving one service out suffices;
// TestRepairAfterPolish).
//
// With strong, the search prunes by the whole count and ends at a cut
// root that proves no fewer, when both dives find nothing it searches
// best bound first with strong branching, and its services hold the
// exact model's layouts while it runs. Only the repairs after the
// placed part was polished (polishPlaced) run it so: run in every repair,
// its earlier count-better plans started hardgen 99 / seed 4 at 0.4 from
// a cost-blind plan that ended 20.8% above the optimum (TestPricedChains).
func (s *solver) leastOutMIP(st *state, ws []int, strong bool) bool {
	left := 0
	keep := make([]int, len(ws))
	for i, w := range ws {
		keep[i] = -1
		if st.choice[w] < 0 {
			left++
		}
	}
	if left == 0 {
		return false
	}
	var undo func()
	if strong {
		// The services get the exact model's layouts (modelColumns), as
		// the repair's search does before its proof, and lose them again
		// when no plan leaves fewer out: the repair has taken its own out
		// by now. Differential seed 32106 at MAXN=150 left 5 of a
		// 95-workload group out where 4 suffice; over the repair's lists
		// best first proved 5 the fewest in 98 nodes, over the model's it
		// found CBC's 4 at node 64 (TestRepairAfterPolish).
		if undo = s.modelColumns(st, ws); undo != nil {
			s.resort(st.evals, st.choice)
		}
	}
	back := release(st, ws)
	restore := func() {
		back()
		if undo != nil {
			undo()
		}
	}
	m := s.subMIPOf(st, ws, keep, math.Inf(1), true, subMIPOpts)
	// Plans that leave out left-1 or fewer cost less than left. When
	// the dive from the root's cuts finds none, one from the plain LP
	// (as bbTwice): differential seed 20183 at MAXN=150 left 6 of a
	// 41-workload group out where 5 suffice, which 20,000 nodes with the
	// cuts never found and 100 without them did (TestRepairAfterPolish).
	cutoff := float64(left)
	if strong {
		// Whole counts: only plans of left-1 or fewer, and after a plan
		// of k only plans of k-1 or fewer.
		m.integral = true
		cutoff = m.nextCutoff(cutoff)
	}
	pick, _, _ := m.bb(cutoff, leastOutNodes)
	if pick == nil && strong && m.root >= cutoff-1e-4 {
		// The cut root proves no plan leaves out fewer.
		restore()
		return false
	}
	if pick == nil {
		m.noCuts = true
		pick, _, _ = m.bb(cutoff, leastOutNodes)
		m.noCuts = false
	}
	if pick == nil && strong {
		// Both dives found nothing: best bound first with strong
		// branching. Differential seed 30008 at MAXN=150 left 5 of a
		// 75-workload group out where 4 suffice (CBC over the same
		// columns); the dives found no plan of 4 in 20,000 nodes, best
		// first found one at node 397 and with strong branching at
		// node 79 (TestRepairAfterPolish).
		pick, _, _ = m.bbStrongBest(cutoff, leastOutNodes)
	}
	if pick == nil {
		restore()
		return false
	}
	out := 0
	for i, w := range ws {
		e := st.evals[w]
		if pick[i] < 0 {
			out++
			continue
		}
		if !st.fits(e, &e.cands[pick[i]]) {
			restore()
			return false
		}
		st.set(w, pick[i])
	}
	if out >= left {
		restore()
		return false
	}
	return true
}

// oneMoreIn looks for a plan of the group ws that places one more of its
// workloads than st, when st leaves two or more out: for each workload
// left out, the least demanding first (its cheapest option), the
// group's sub-MIP places it with every workload st places (placeWhole);
// the first plan found is taken, and the step repeats while two or more
// are left out, at most fewestMIPs sub-MIPs in all. The searches leave
// out whole hitting sets and run out of nodes on large groups, and the
// count sub-MIP (leastOutMIP) may dive past the plan: differential seed
// 18046 at MAXN=150 left out a 32-GPU and a 64-GPU job of a 90-workload
// group where the 64-GPU one alone suffices, and the sub-MIP over the
// other 89 places them (TestRepairAfterPolish). True when it placed one.
func (s *solver) oneMoreIn(st *state, ws []int) bool {
	placedOne := false
	for tries := 0; tries < fewestMIPs; {
		var out, placed []int
		for _, w := range ws {
			if st.choice[w] < 0 {
				out = append(out, w)
			} else {
				placed = append(placed, w)
			}
		}
		if len(out) < 2 {
			return placedOne
		}
		sort.SliceStable(out, func(a, b int) bool { return st.evals[out[a]].cands[0].cost < st.evals[out[b]].cands[0].cost })
		found := false
		for _, v := range out {
			if tries >= fewestMIPs {
				break
			}
			rest := append(slices.Clone(placed), v)
			key := oneInKey(st.evals, rest)
			if s.oneInTried[key] {
				continue
			}
			tries++
			if s.placeWhole(st, rest, oneMoreInNodes) != nil {
				found = true
				break
			}
			if s.oneInTried == nil {
				s.oneInTried = map[string]bool{}
			}
			s.oneInTried[key] = true
		}
		if !found {
			return placedOne
		}
		placedOne = true
	}
	return placedOne
}

// oneMoreInNodes is the node limit of each of oneMoreIn's sub-MIPs: a
// plan, not the cheapest (the placed part is solved again after the
// repair); seed 18046's is found within 200.
const oneMoreInNodes = 400

// oneInKey names a set oneMoreIn tried: its workloads and how many
// candidates they hold (a later repair, with service layouts added, may
// place what an earlier one could not).
func oneInKey(evals []*eval, ws []int) string {
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, "%s/%d ", evals[w].w.Name, len(evals[w].cands))
	}
	return b.String()
}

// noneKept is a sub-MIP's keep for n workloads that keep no option.
func noneKept(n int) []int {
	keep := make([]int, n)
	for i := range keep {
		keep[i] = -1
	}
	return keep
}

// releaseExact is release whose restore also puts back st's remaining
// capacities bit for bit: taking budget amounts out and back in rounds,
// and on hard fleets a budget row one ulp off turns a later fit the
// other way (a look at the LP that changed nothing moved hardgen 148 /
// seed 1 from 98,005.54 to 102,137.68; TestPricedChains).
func releaseExact(st *state, ws []int) (restore func()) {
	rem := slices.Clone(st.rem)
	back := release(st, ws)
	return func() {
		back()
		copy(st.rem, rem)
	}
}

// release takes the workloads ws out of st's plan; restore puts their
// options back.
func release(st *state, ws []int) (restore func()) {
	orig := make([]int, len(ws))
	for i, w := range ws {
		orig[i] = st.choice[w]
		st.set(w, -1)
	}
	return func() {
		for _, w := range ws {
			st.set(w, -1)
		}
		for i, w := range ws {
			st.set(w, orig[i])
		}
	}
}

// subMIPRegrets is how many regret sets a round tries.
const subMIPRegrets = 10

// regretSets are neighbourhoods around the workloads furthest above their
// cheapest option (largest regret first, at most count): the workload,
// then the holders of each row its cheaper options lack room in, the
// largest holder first, at most size in all. The row sets start from the
// tightest rows and the RINS set from the LP; neither need hold a
// workload far above its cheapest option together with what holds its
// room: on the 200-workload hardgen fleet of docs/BENCHMARKS.md (session
// 14) a service ran on a $2,251 A100 layout while its L4 layout costs
// $806, and CBC's optimum moved it with 41 others. Tried only when no
// other set of the round improves, so the fleets those reach keep their
// plans (hardgen 100 / seed 9 at 0.5 unchanged).
func (s *solver) regretSets(st *state, size, count int) [][]int {
	users := st.rowUsers()
	var sets [][]int
	for _, w := range regrets(st, count) {
		e := st.evals[w]
		c := st.choice[w]
		set := []int{w}
		in := map[int]bool{w: true}
		st.set(w, -1)
		for j := 0; j < c && len(set) < size; j++ {
			o := &e.cands[j]
			short := func(row int32, amt float64) bool { return st.rem[row] < amt-eps }
			for _, u := range o.uses {
				if !short(u.row, u.amt) {
					continue
				}
				var hs []int
				for _, h := range users[u.row] {
					if !in[h] && st.choice[h] >= 0 {
						hs = append(hs, h)
					}
				}
				amt := func(h int) float64 {
					for _, v := range st.evals[h].cands[st.choice[h]].uses {
						if v.row == u.row {
							return v.amt
						}
					}
					return 0
				}
				sort.SliceStable(hs, func(a, b int) bool { return amt(hs[a]) > amt(hs[b]) })
				for _, h := range hs {
					if !in[h] && len(set) < size {
						in[h] = true
						set = append(set, h)
					}
				}
			}
		}
		st.set(w, c)
		sets = append(sets, set)
	}
	return sets
}

// forcedSets are RINS neighbourhoods around single moves: for each of the
// count workloads furthest above their cheapest option (largest regret
// first), the fleet's LP relaxation with that workload held to its
// cheapest column below its option that leaves the LP feasible, then the
// workloads whose option differs from that LP, most different first, at
// most size, the workload first. The LP shows the chain of moves that
// makes room for it: regretSets hold only the workload and what holds
// its room, the RINS set what the free LP changes. On differential seed
// 17002 at MAXN=150 a spot-only batch job without checkpoints sat on an
// option $28,162 dearer than one in us-east-1; reaching it moves 13
// workloads over four full rows, and neither the RINS nor a row or
// regret set held them together (the 81 placed 10.65% above CBC's
// optimum; TestPolishPlaced). Tried last in a round.
func (s *solver) forcedSets(st *state, size, count int) [][]int {
	rs := regrets(st, count)
	if len(rs) == 0 {
		return nil
	}
	m, orig, restore := s.fleetRelaxation(st)
	defer restore()
	if m == nil {
		return nil
	}
	var sets [][]int
	for _, w := range rs {
		for j := 0; j < m.p.n; j++ {
			if m.colW[j] != w || m.colJ[j] >= orig[w] {
				continue
			}
			q := m.p.clone()
			for k := 0; k < q.n; k++ {
				if m.colW[k] == w && k != j {
					q.setBounds(k, 0, 0)
				}
			}
			q.setBounds(j, 1, 1)
			if q.solve(50*q.m+1000, math.Inf(1)) != lpOptimal {
				continue
			}
			ws := m.offPlan(q, orig, w)
			sets = append(sets, ws[:min(size, len(ws))])
			break
		}
	}
	return sets
}

// regrets are the count workloads of st's plan furthest above their
// cheapest option (its cost less the cheapest's), largest first.
func regrets(st *state, count int) []int {
	type regret struct {
		w int
		d float64
	}
	var rs []regret
	for w, c := range st.choice {
		if c > 0 {
			e := st.evals[w]
			rs = append(rs, regret{w, e.cands[c].cost - e.cands[0].cost})
		}
	}
	sort.SliceStable(rs, func(a, b int) bool { return rs[a].d > rs[b].d })
	ws := make([]int, 0, min(count, len(rs)))
	for _, r := range rs[:min(count, len(rs))] {
		ws = append(ws, r.w)
	}
	return ws
}

// rowUse is one row an option takes from and how much.
type rowUse struct {
	r int32
	a float64
}

// optionRowUses lists the rows option o of e takes from (quota rows in
// GPUs, budget rows in dollars), summed per row.
func optionRowUses(e *eval, o *option) []rowUse {
	var us []rowUse
	add := func(r int32, a float64) {
		for k := range us {
			if us[k].r == r {
				us[k].a += a
				return
			}
		}
		us = append(us, rowUse{r, a})
	}
	for _, u := range o.uses {
		add(u.row, u.amt)
	}
	for _, r := range e.budgetRows {
		add(r, o.budgetUse)
	}
	return us
}

// pruneByLeastUse drops from jss[i] (the candidates of ws[i]) each one
// that no plan of the set can hold: on some row, what it takes plus the
// least every other workload of the set must take from that row (each
// takes one of its candidates, and some take from the row whichever they
// take) exceeds what the rest of the plan leaves there. A drop can raise
// a workload's least, so it repeats until nothing drops. keep[i] stays.
// On hardgen 100 / 9 the whole fleet's budget rows rule out 768 of 2,997
// columns that way, and its plain LP rises from 78,237 to 79,163; after
// strongCuts' cuts strongRINS's whole-fleet LP rises from 79,148 to
// 80,036 (CBC's root after its preprocessing and cuts: 79,953). Only
// strongRINS's sub-MIPs are pruned so.
func pruneByLeastUse(st *state, ws []int, jss [][]int, keep []int) {
	uses := make([][][]rowUse, len(ws))
	for i, w := range ws {
		e := st.evals[w]
		uses[i] = make([][]rowUse, len(jss[i]))
		for k, j := range jss[i] {
			uses[i][k] = optionRowUses(e, &e.cands[j])
		}
	}
	least := make([][]rowUse, len(ws))
	for round := 0; round < 20; round++ {
		tot := map[int32]float64{}
		for i := range ws {
			least[i] = least[i][:0]
			for k := range jss[i] {
				if k == 0 {
					least[i] = append(least[i], uses[i][0]...)
					continue
				}
				least[i] = slices.DeleteFunc(least[i], func(l rowUse) bool {
					for _, u := range uses[i][k] {
						if u.r == l.r {
							return false
						}
					}
					return true
				})
				for x := range least[i] {
					for _, u := range uses[i][k] {
						if u.r == least[i][x].r {
							least[i][x].a = min(least[i][x].a, u.a)
						}
					}
				}
			}
			for _, l := range least[i] {
				tot[l.r] += l.a
			}
		}
		if len(tot) == 0 {
			return
		}
		dropped := false
		for i := range ws {
			own := func(r int32) float64 {
				for _, l := range least[i] {
					if l.r == r {
						return l.a
					}
				}
				return 0
			}
			n := 0
			for k, j := range jss[i] {
				out := false
				if j != keep[i] {
					for _, u := range uses[i][k] {
						t, ok := tot[u.r]
						if !ok {
							continue
						}
						room := max(0, st.rem[u.r])
						if u.a+t-own(u.r) > room+1e-9*max(1, room) {
							out = true
							break
						}
					}
				}
				if out {
					dropped = true
					continue
				}
				jss[i][n], uses[i][n] = j, uses[i][k]
				n++
			}
			jss[i], uses[i] = jss[i][:n], uses[i][:n]
		}
		if !dropped {
			return
		}
	}
}
