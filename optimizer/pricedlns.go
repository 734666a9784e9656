package optimizer

import (
	"math"
	"slices"
	"sort"
)

// The chain search (chains.go) samples sets of 8-16 workloads. On the
// hardest mid-size hardgen fleets it stops well above the proven optimum
// (148 / seed 1: 0.49%), although a set it could search in 500 nodes
// holds most of the difference: there an 8-GPU A100 job moves to an option
// $334 cheaper whose */*/A100 row is full, the one 8-GPU holder of that row
// that can leave it moves to Europe at $244 less, and five holders of the
// full *west* row it needs shift one or two GPUs elsewhere ($370 in all).
// A uniform draw takes that holder out of 57 and those five out of 18.
//
// pricedLNS enumerates such chains instead of sampling them: for each
// workload whose priced cost (under the bound's multipliers) is above its
// cheapest priced option, largest gap first, each cheaper option a, the
// holders h of the first row a lacks room in (those that free the
// shortfall alone first, then the cheapest to leave the row), and each of
// h's cheapest options t off that row that costs h less than a saves, it
// searches the set chainSet grows from the two: breadth first, the holders
// of every row a member's target options lack room in, until they hold the
// shortfall, with their own cheapest options off that row as targets, and
// for each member the workload that would save most by moving into a row
// it holds (the one that takes the room it leaves). Each set is searched
// with multipliers fitted to its own subproblem (setMultipliers),
// candidates in the order of their priced cost and cuts against the
// incumbent from the first node (searchBy), which finds a set's optimum
// early so that the bound cuts the rest: on a 21-workload set of 148 /
// seed 1 the fitted multipliers bound it within $2 of its optimum (the
// fleet's gave nothing over the plain bound) and the search takes 20,000
// nodes instead of 1.8 million.

// pricedSetSize is the most workloads one priced neighbourhood frees.
const pricedSetSize = 16

// pricedWork is each pricedRun's budget of candidate scans per workload
// (about 2.5 CPU-s at 148 workloads on the loaded 2-core box; at a third
// of it 148 / seed 1 stops at 98,230.51 instead of 98,005.54).
const pricedWork = 10_000_000

// pricedNodes is the node limit of one priced neighbourhood's search.
const pricedNodes = 5_000

// pricedSteps is the subgradient steps of a set's own multipliers.
const pricedSteps = 200

// pricedLNS runs pricedRun three times from choice — holders ranked by
// leavePenalty, by leaveFit, and by leaveFit with sets filled (chainSet's
// fill) — and keeps the cheapest plan (the earliest on a tie). Each run
// takes the first improving set it meets, so they end in different
// places: on hardgen 148 / seed 1 the first reaches 98,005.54 and the
// second 98,221.25; on 98 / seed 6 the first stops at 51,613.86 and the
// second reaches CBC's optimum, 51,489.02; on 99 / seed 4 at tightness
// 0.4 only the third gets within 0.1% of CBC's optimum (59,474.83, the
// others 59,563.37; docs/BENCHMARKS.md, branch hard01).
func (s *solver) pricedLNS(evals []*eval, choice []int, mu []float64, budget int) []int {
	best := s.pricedRun(evals, choice, mu, budget, false, false)
	for _, fill := range []bool{false, true} {
		alt := s.pricedRun(evals, choice, mu, budget, true, fill)
		if planCost(evals, alt) < planCost(evals, best)-eps*max(1, planCost(evals, best)) {
			best = alt
		}
	}
	return best
}

// pricedRun improves choice with the priced neighbourhoods above, within
// about budget candidate scans: seeds in order of reduced cost (largest
// first), the list rebuilt after every improvement, until a pass over it
// brings nothing. Deterministic.
func (s *solver) pricedRun(evals []*eval, choice []int, mu []float64, budget int, byFit, fill bool) []int {
	st := newState(s, evals, append([]int(nil), choice...))
	spent := 0
	tried := make(map[string]bool)
	// try searches one set; true when it made the plan cheaper.
	try := func(set []int) bool {
		if len(set) < 2 {
			return false
		}
		key := setKey(st, set)
		if tried[key] {
			return false
		}
		tried[key] = true
		old, work := 0.0, 0
		for _, v := range set {
			old += evals[v].cands[st.choice[v]].cost
			work += len(evals[v].cands)
		}
		lmu := s.setMultipliers(st, set, mu, old)
		r := s.searchBy(st, set, old, pricedNodes*work, false, lmu, true)
		spent += r.nodes*work + pricedSteps*work
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
	rank := st.leavePenalty
	if byFit {
		rank = st.leaveFit
	}
	for spent < budget {
		users, wants := st.rowUsers(), st.rowWants(false)
		rc := s.reducedCosts(st, mu)
		var seeds []int
		for w := range evals {
			if rc[w] > eps*max(1, evals[w].cands[st.choice[w]].cost) {
				seeds = append(seeds, w)
			}
		}
		sort.SliceStable(seeds, func(a, b int) bool { return rc[seeds[a]] > rc[seeds[b]] })
		improved := false
	seeds:
		for _, w := range seeds {
			e := evals[w]
			cur := st.choice[w]
			for a := 0; a < cur; a++ {
				save := e.cands[cur].cost - e.cands[a].cost
				short := st.shortRows(e, a)
				if len(short) == 0 {
					continue
				}
				for _, h := range st.firstHolders(w, a, users) {
					r := short[0]
					for _, t := range st.leaveRowAll(h, r) {
						he := evals[h]
						if he.cands[t].cost-he.cands[st.choice[h]].cost >= save {
							break
						}
						if spent >= budget {
							break seeds
						}
						if try(s.chainSet(st, w, a, h, t, users, wants, rank, fill)) {
							improved = true
							break seeds
						}
					}
				}
			}
		}
		if !improved {
			break
		}
	}
	return st.choice
}

// setKey identifies a set together with the options its workloads are on,
// so a set is searched again only once the plan around it has changed.
func setKey(st *state, set []int) string {
	ws := slices.Clone(set)
	slices.Sort(ws)
	b := make([]byte, 0, 8*len(ws))
	for _, w := range ws {
		b = append(b, byte(w), byte(w>>8), byte(w>>16), byte(st.choice[w]), byte(st.choice[w]>>8))
	}
	return string(b)
}

// pricedValue is option j of w at the multipliers mu.
func pricedValue(e *eval, j int, mu []float64) float64 {
	o := &e.cands[j]
	v := o.cost
	for _, r := range e.budgetRows {
		v += mu[r] * o.budgetUse
	}
	for _, u := range o.uses {
		v += mu[u.row] * u.amt
	}
	return v
}

// reducedCosts is, per placed workload, its option's priced cost less its
// cheapest priced option's.
func (s *solver) reducedCosts(st *state, mu []float64) []float64 {
	rc := make([]float64, len(st.evals))
	for w, e := range st.evals {
		c := st.choice[w]
		if c < 0 {
			continue
		}
		best := math.Inf(1)
		for j := range e.cands {
			best = min(best, pricedValue(e, j, mu))
		}
		rc[w] = pricedValue(e, c, mu) - best
	}
	return rc
}

// pricedAlts is how many options off a row pricedLNS tries for a holder.
const pricedAlts = 3

// leaveRowAll is w's pricedAlts cheapest other options that do not use
// row r (any others for a budget row).
func (st *state) leaveRowAll(w int, r int32) []int {
	e := st.evals[w]
	cur := st.choice[w]
	budget := slices.Contains(e.budgetRows, r)
	var js []int
	for j := range e.cands {
		if j == cur {
			continue
		}
		if !budget && slices.ContainsFunc(e.cands[j].uses, func(u use) bool { return u.row == r }) {
			continue
		}
		if js = append(js, j); len(js) == pricedAlts {
			break
		}
	}
	return js
}

// leaveRow is w's cheapest other option that does not use row r (any other
// for a budget row) and what it costs over w's current one; -1 when none.
func (st *state) leaveRow(w int, r int32) (float64, int) {
	e := st.evals[w]
	cur := st.choice[w]
	budget := slices.Contains(e.budgetRows, r)
	for j := range e.cands {
		if j == cur {
			continue
		}
		if !budget && slices.ContainsFunc(e.cands[j].uses, func(u use) bool { return u.row == r }) {
			continue
		}
		// Candidates are sorted by cost: the first one is the cheapest.
		return e.cands[j].cost - e.cands[cur].cost, j
	}
	return math.Inf(1), -1
}

// holds is what w's current option takes from row r.
func (st *state) holds(w int, r int32) float64 {
	e := st.evals[w]
	o := &e.cands[st.choice[w]]
	if slices.Contains(e.budgetRows, r) {
		return o.budgetUse
	}
	for _, u := range o.uses {
		if u.row == r {
			return u.amt
		}
	}
	return 0
}

// setMultipliers fits multipliers to the subproblem of set: its workloads'
// candidates at the room the rest of st leaves, over the rows they touch,
// by subgradient steps aimed at incumbent from mu; the best found (other
// rows 0).
func (s *solver) setMultipliers(base *state, set []int, mu []float64, incumbent float64) []float64 {
	st, orig, _ := s.detach(base, set)
	defer restore(base, set, orig)
	evals := st.evals
	rows := setRows(evals, set, len(mu), func(int32) bool { return true })
	cur := make([]float64, len(mu))
	for _, r := range rows {
		cur[r] = mu[r]
	}
	best := slices.Clone(cur)
	bestVal := math.Inf(-1)
	g := make([]float64, len(mu))
	lam := 2.0
	for it := 0; it < pricedSteps; it++ {
		val := 0.0
		for _, r := range rows {
			g[r] = -max(0, st.rem[r])
			val -= cur[r] * max(0, st.rem[r])
		}
		for _, w := range set {
			e := evals[w]
			bj, bv := -1, math.Inf(1)
			for j := range e.cands {
				if !st.fits(e, &e.cands[j]) {
					continue
				}
				if v := pricedValue(e, j, cur); v < bv {
					bj, bv = j, v
				}
			}
			if bj < 0 {
				return best
			}
			val += bv
			o := &e.cands[bj]
			for _, u := range o.uses {
				g[u.row] += u.amt
			}
			for _, r := range e.budgetRows {
				g[r] += o.budgetUse
			}
		}
		if val > bestVal {
			bestVal = val
			copy(best, cur)
		}
		if val >= incumbent-eps*max(1, incumbent) {
			break
		}
		norm := 0.0
		for _, r := range rows {
			if cur[r] > 0 || g[r] > 0 {
				norm += g[r] * g[r]
			}
		}
		if norm == 0 {
			break
		}
		step := lam * (incumbent - val) / norm
		for _, r := range rows {
			cur[r] = max(0, cur[r]+step*g[r])
		}
		if it%20 == 19 {
			lam /= 2
		}
	}
	return best
}

// shortRows lists the rows option a of e lacks room in.
func (st *state) shortRows(e *eval, a int) []int32 {
	o := &e.cands[a]
	var short []int32
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
	return short
}

// firstHolders are the holders pricedLNS tries for seed w moving to a: on
// the first row a lacks room in, the holders that alone free the
// shortfall, cheapest to leave first, and the cheapest to leave of the
// others.
func (st *state) firstHolders(w, a int, users [][]int) []int {
	short := st.shortRows(st.evals[w], a)
	if len(short) == 0 {
		return nil
	}
	r := short[0]
	o := &st.evals[w].cands[a]
	need := o.budgetUse - st.rem[r]
	for _, u := range o.uses {
		if u.row == r {
			need = u.amt - st.rem[r]
		}
	}
	type cand struct {
		h   int
		pen float64
		big bool
	}
	var cs []cand
	for _, h := range users[r] {
		if h == w {
			continue
		}
		if p, j := st.leaveRow(h, r); j >= 0 {
			cs = append(cs, cand{h, p, st.holds(h, r) >= need-eps})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].pen < cs[j].pen })
	var out []int
	nb, ns := 0, 0
	for _, c := range cs {
		switch {
		case c.big && nb < pricedFirstBig:
			nb++
			out = append(out, c.h)
		case !c.big && ns < pricedFirstSmall:
			ns++
			out = append(out, c.h)
		}
	}
	return out
}

// pricedFirstBig and pricedFirstSmall are how many holders firstHolders
// gives that free a short row alone, and that do not.
const (
	pricedFirstBig   = 8
	pricedFirstSmall = 3
)

// chainSet is the set of seed w moving to a and holder h of a's first
// short row moving to t, grown breadth first: for each member's target
// options, the holders of every row they lack room in (counting what the
// members hold there as free), lowest rank (what leaving the row costs
// them) first, until they hold the shortfall, each with its pricedAlts cheapest options
// off that row as targets; and for each member, the workload that would
// save most by moving into a row it holds.
//
// With fill, that last step instead adds, for each row a member holds,
// the workloads whose cheapest option on that row is cheaper than their
// own (most saving first) while what those options take fits in what the
// member holds there, each with that option as its target. A holder
// leaving a full row at a loss can pay when several others take the room
// it frees: on hardgen 99 / seed 4 at tightness 0.4 an 8-GPU job leaves
// the *west* row for $174 more so that a V100 job, two L4 jobs and a T4
// job move into it, and the team budget the 8-GPU job's move fills gets
// room from two T4 jobs trading places (nine workloads, $88.55 less); one
// room-taker per member never held them together.
func (s *solver) chainSet(st *state, w, a, h, t int, users, wants [][]int, rank func(int, int32) float64, fill bool) []int {
	set := []int{w, h}
	targets := [][]int{{a}, {t}}
	in := map[int]bool{w: true, h: true}
	type cand struct {
		v   int
		amt float64
		pen float64
	}
	var cs []cand
	freed := func(r int32) float64 {
		f := 0.0
		for _, v := range set {
			f += st.holds(v, r)
		}
		return f
	}
	for k := 0; k < len(set) && len(set) < pricedSetSize; k++ {
		v := set[k]
		e := st.evals[v]
		for _, j := range targets[k] {
			o := &e.cands[j]
			for _, r := range st.shortRows(e, j) {
				need := o.budgetUse
				for _, u := range o.uses {
					if u.row == r {
						need = u.amt
					}
				}
				need -= st.rem[r] + freed(r)
				if need <= eps {
					continue
				}
				cs = cs[:0]
				for _, x := range users[r] {
					if !in[x] {
						if p := rank(x, r); !math.IsInf(p, 1) {
							cs = append(cs, cand{x, st.holds(x, r), p})
						}
					}
				}
				sort.SliceStable(cs, func(i, j int) bool { return cs[i].pen < cs[j].pen })
				for _, c := range cs {
					if need <= eps || len(set) >= pricedSetSize {
						break
					}
					in[c.v] = true
					set = append(set, c.v)
					targets = append(targets, st.leaveRowAll(c.v, r))
					need -= c.amt
				}
			}
		}
		if fill {
			// Those who would take the room v leaves, most saving
			// first, until they fill it.
			if c := st.choice[v]; c >= 0 {
				for _, u := range e.cands[c].uses {
					type want struct {
						x   int
						j   int
						amt float64
						sv  float64
					}
					var ws []want
					for _, x := range wants[u.row] {
						if in[x] {
							continue
						}
						xe, xc := st.evals[x], st.choice[x]
						if j, amt := optionOnRow(xe, xc, u.row); j >= 0 {
							ws = append(ws, want{x, j, amt, xe.cands[xc].cost - xe.cands[j].cost})
						}
					}
					sort.SliceStable(ws, func(i, j int) bool { return ws[i].sv > ws[j].sv })
					room := u.amt
					for _, x := range ws {
						if room <= eps || len(set) >= pricedSetSize {
							break
						}
						if x.amt > room+eps {
							continue
						}
						room -= x.amt
						in[x.x] = true
						set = append(set, x.x)
						targets = append(targets, []int{x.j})
					}
				}
			}
			continue
		}
		// Someone who would take the room v leaves.
		if c := st.choice[v]; c >= 0 && len(set) < pricedSetSize {
			best, bestSave := -1, 0.0
			for _, u := range e.cands[c].uses {
				for _, x := range wants[u.row] {
					if in[x] {
						continue
					}
					xe, xc := st.evals[x], st.choice[x]
					if j, _ := optionOnRow(xe, xc, u.row); j >= 0 {
						if sv := xe.cands[xc].cost - xe.cands[j].cost; sv > bestSave {
							best, bestSave = x, sv
						}
					}
				}
			}
			if best >= 0 {
				in[best] = true
				set = append(set, best)
				xc := st.choice[best]
				var ts []int
				for j := 0; j < xc && len(ts) < pricedAlts; j++ {
					ts = append(ts, j)
				}
				targets = append(targets, ts)
			}
		}
	}
	return set
}

// leaveFit is what moving w off row r costs when it has to go to an option
// that fits the room left now (the cheapest such); an option that does
// not fit counts its cost plus leaveUnfit, so holders that can leave at
// once come first. +Inf when w has no option off r.
func (st *state) leaveFit(w int, r int32) float64 {
	e := st.evals[w]
	cur := st.choice[w]
	budget := slices.Contains(e.budgetRows, r)
	best := math.Inf(1)
	for j := range e.cands {
		if j == cur {
			continue
		}
		if !budget && slices.ContainsFunc(e.cands[j].uses, func(u use) bool { return u.row == r }) {
			continue
		}
		d := e.cands[j].cost - e.cands[cur].cost
		if st.fits(e, &e.cands[j]) {
			return min(best, d)
		}
		best = min(best, d+leaveUnfit*max(1, e.cands[cur].cost))
	}
	return best
}

// leaveUnfit is leaveFit's surcharge, per unit of the current cost, on an
// option that does not fit.
const leaveUnfit = 1.0

// optionOnRow is the first of e's options before below that takes from
// row, and what it takes there; -1 when none does.
func optionOnRow(e *eval, below int, row int32) (int, float64) {
	for j := 0; j < below; j++ {
		if i := slices.IndexFunc(e.cands[j].uses, func(y use) bool { return y.row == row }); i >= 0 {
			return j, e.cands[j].uses[i].amt
		}
	}
	return -1, 0
}
