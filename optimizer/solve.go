package optimizer

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// Input is everything a plan depends on.
type Input struct {
	Catalog *pricing.Catalog
	Policy  *policy.Policy
	// Speeds gives each GPU's throughput; the zero value means
	// DefaultSpeeds() (the spec sheets).
	Speeds SpeedTable
	// Now is when the plan is made: catalog age is measured against it.
	Now time.Time
}

// budgetRow is a policy budget and the workloads it covers.
type budgetRow struct{ policy.Budget }

func (b budgetRow) matches(w *policy.Workload) bool {
	if b.Workload != "" && b.Workload != w.Name {
		return false
	}
	if b.Team != "" && b.Team != w.Team {
		return false
	}
	return true
}

// solver holds the precomputed, per-offer data of one Solve call.
type solver struct {
	pol     *policy.Policy
	offers  []pricing.Offer
	speeds  SpeedTable
	horizon float64
	// score is each offer's blended speed score; rate its spot
	// interruptions per hour (0 for offers without spot), rateDefault
	// whether that rate is a default.
	score       []float64
	rate        []float64
	rateDefault []bool
	quotas      []policy.Quota
	budgets     []budgetRow
	// caps holds the constraint rows: quotas first (GPUs), then budgets
	// (USD per month).
	caps        []float64
	offerQuota  [][]int32
	offerQClass []int32
	models      []pricing.GPUModel
	modelIdx    map[pricing.GPUModel]int
	classes     map[string]*class
	placeCache  map[placeKey]bool
	refScores   map[pricing.GPUModel]float64
}

// Solve places every workload of the policy on the catalog's offers at the
// least expected cost that meets all constraints. It returns an error
// wrapping ErrInfeasible (an *InfeasibleError) when some workload cannot be
// placed, and one wrapping ErrInput when the input is unusable.
func Solve(in Input) (*Plan, error) {
	if in.Catalog == nil || in.Policy == nil {
		return nil, fmt.Errorf("%w: catalog and policy are required", ErrInput)
	}
	s := newSolver(in)
	evals := make([]*eval, len(s.pol.Workloads))
	var blocked []Blocked
	for i := range s.pol.Workloads {
		w := &s.pol.Workloads[i]
		if w.Kind == policy.Inference {
			evals[i] = s.evalService(w)
		} else {
			evals[i] = s.evalJob(w)
		}
		if evals[i].blocked != nil {
			blocked = append(blocked, *evals[i].blocked)
		}
	}
	choice, fleetBlocked := s.assign(evals)
	blocked = append(blocked, fleetBlocked...)
	if len(blocked) > 0 {
		return nil, &InfeasibleError{Blocked: blocked}
	}
	lb := s.lowerBound(evals, choice)
	return s.plan(in, evals, choice, lb), nil
}

func newSolver(in Input) *solver {
	p := in.Policy
	s := &solver{
		pol:        p,
		offers:     in.Catalog.Offers(),
		speeds:     in.Speeds,
		horizon:    p.Horizon.Hours(),
		quotas:     p.Quotas,
		modelIdx:   map[pricing.GPUModel]int{},
		classes:    map[string]*class{},
		placeCache: map[placeKey]bool{},
		refScores:  map[pricing.GPUModel]float64{},
	}
	if s.speeds.ByGPU == nil && s.speeds.ByInstance == nil {
		s.speeds = DefaultSpeeds()
	}
	if s.horizon <= 0 {
		s.horizon = monthHours
	}
	for _, b := range p.Budgets {
		s.budgets = append(s.budgets, budgetRow{b})
	}
	for _, q := range p.Quotas {
		s.caps = append(s.caps, float64(q.MaxGPUs))
	}
	for _, b := range p.Budgets {
		s.caps = append(s.caps, b.MonthlyUSD)
	}
	for _, spec := range pricing.Specs() {
		s.modelIdx[spec.Model] = len(s.models)
		s.models = append(s.models, spec.Model)
	}
	defaults := pricing.DefaultSpotDefaults()
	n := len(s.offers)
	s.score, s.rate, s.rateDefault = make([]float64, n), make([]float64, n), make([]bool, n)
	s.offerQuota, s.offerQClass = make([][]int32, n), make([]int32, n)
	qclass := map[string]int32{}
	for i := range s.offers {
		o := &s.offers[i]
		if th, ok := s.speeds.throughput(o); ok {
			s.score[i] = s.speeds.blend(th)
		}
		if o.SpotPrice > 0 {
			r, def := o.Spot.InterruptionsPerHour, o.Spot.Default || o.Spot.InterruptionsPerHour <= 0
			if def {
				if v, ok := p.SpotDefaults[o.Cloud]; ok {
					r = v
				} else if r <= 0 {
					r = defaults[o.Cloud].InterruptionsPerHour
				}
			}
			s.rate[i], s.rateDefault[i] = r, def
		}
		var key strings.Builder
		for qi, q := range p.Quotas {
			if quotaMatches(q, o) {
				s.offerQuota[i] = append(s.offerQuota[i], int32(qi))
				fmt.Fprintf(&key, "%d,", qi)
			}
		}
		id, seen := qclass[key.String()]
		if !seen {
			id = int32(len(qclass))
			qclass[key.String()] = id
		}
		s.offerQClass[i] = id
	}
	return s
}

func quotaMatches(q policy.Quota, o *pricing.Offer) bool {
	if q.Cloud != "" && q.Cloud != o.Cloud {
		return false
	}
	if q.Region != "" && !pricing.MatchAnyGlob([]string{q.Region}, o.Region) {
		return false
	}
	if q.Family != "" {
		spec, _ := pricing.Spec(o.GPU)
		if !strings.EqualFold(spec.Family, q.Family) && !strings.EqualFold(string(o.GPU), q.Family) {
			return false
		}
	}
	return true
}

func (s *solver) refScore(m pricing.GPUModel) (float64, bool) {
	if v, ok := s.refScores[m]; ok {
		return v, v > 0
	}
	var v float64
	if th, ok := s.speeds.gpuThroughput(m); ok {
		v = s.speeds.blend(th)
	}
	s.refScores[m] = v
	return v, v > 0
}

// quotaUses returns the constraint rows an option takes from, budget rows
// excluded.
func (s *solver) quotaUses(o *option, fn func(row int32, amt float64)) {
	if o.groups != nil {
		for _, u := range o.uses {
			fn(u.row, u.amt)
		}
		return
	}
	for _, r := range s.offerQuota[o.offer] {
		fn(r, float64(o.gpus))
	}
}

const eps = 1e-9

// state is a partial assignment and the capacity it leaves.
type state struct {
	s      *solver
	evals  []*eval
	choice []int
	rem    []float64
}

func (st *state) fits(e *eval, o *option) bool {
	okay := true
	st.s.quotaUses(o, func(r int32, amt float64) {
		if st.rem[r] < amt-eps {
			okay = false
		}
	})
	if !okay {
		return false
	}
	for _, r := range e.budgetRows {
		if st.rem[r] < o.budgetUse-eps*max(1, o.budgetUse) {
			return false
		}
	}
	return true
}

func (st *state) apply(e *eval, o *option, sign float64) {
	st.s.quotaUses(o, func(r int32, amt float64) { st.rem[r] -= sign * amt })
	for _, r := range e.budgetRows {
		st.rem[r] -= sign * o.budgetUse
	}
}

func (st *state) set(w, j int) {
	e := st.evals[w]
	if c := st.choice[w]; c >= 0 {
		st.apply(e, &e.cands[c], -1)
	}
	st.choice[w] = j
	if j >= 0 {
		st.apply(e, &e.cands[j], 1)
	}
}

// bestFit is the cheapest option of w that fits what is left (w's own
// current option released first).
func (st *state) bestFit(w int) int {
	cur := st.choice[w]
	st.set(w, -1)
	best := -1
	e := st.evals[w]
	for j := range e.cands {
		if st.fits(e, &e.cands[j]) {
			best = j
			break
		}
	}
	st.set(w, cur)
	return best
}

// assign solves the fleet-level problem, a generalized assignment: each
// workload takes one option; quota rows cap GPUs and budget rows cap monthly
// spend. Greedy by regret (workloads that lose most by not getting their
// best option go first), then local improvement: move single workloads to
// cheaper options that fit, and eject-and-reinsert for workloads left out.
func (s *solver) assign(evals []*eval) ([]int, []Blocked) {
	st := &state{s: s, evals: evals, choice: make([]int, len(evals)), rem: append([]float64(nil), s.caps...)}
	order := make([]int, 0, len(evals))
	regret := make([]float64, len(evals))
	for w, e := range evals {
		st.choice[w] = -1
		if e.blocked != nil {
			continue
		}
		order = append(order, w)
		regret[w] = math.Inf(1)
		if len(e.cands) > 1 {
			regret[w] = e.cands[1].cost - e.cands[0].cost
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return regret[order[i]] > regret[order[j]] })
	constrained := len(s.caps) > 0
	for _, w := range order {
		if !constrained {
			st.choice[w] = 0
			continue
		}
		if j := st.bestFit(w); j >= 0 {
			st.set(w, j)
		}
	}
	if constrained {
		st.improve(order)
	}
	var blocked []Blocked
	for _, w := range order {
		if st.choice[w] < 0 {
			blocked = append(blocked, s.fleetBlocked(st, w))
		}
	}
	return st.choice, blocked
}

func (st *state) improve(order []int) {
	for pass := 0; pass < 8; pass++ {
		changed := false
		for _, w := range order {
			if st.choice[w] < 0 {
				if st.eject(w) {
					changed = true
				}
				continue
			}
			if j := st.bestFit(w); j >= 0 && j < st.choice[w] {
				st.set(w, j)
				changed = true
			}
		}
		if st.swapPass(order) {
			changed = true
		}
		if !changed {
			return
		}
	}
}

// swapPass tries, for each workload not on its best option, to take its
// best option's capacity from one other workload that can move elsewhere
// for less than w saves.
func (st *state) swapPass(order []int) bool {
	changed := false
	users := st.rowUsers()
	for _, w := range order {
		cur := st.choice[w]
		if cur <= 0 {
			continue
		}
		e := st.evals[w]
		for j := 0; j < cur; j++ {
			if st.trySwap(w, j, users) {
				changed = true
				users = st.rowUsers()
				break
			}
			_ = e
		}
	}
	return changed
}

// rowUsers lists, per constraint row, the workloads whose option uses it.
func (st *state) rowUsers() [][]int {
	users := make([][]int, len(st.rem))
	for w, c := range st.choice {
		if c < 0 {
			continue
		}
		e := st.evals[w]
		st.s.quotaUses(&e.cands[c], func(r int32, _ float64) { users[r] = append(users[r], w) })
		for _, r := range e.budgetRows {
			users[r] = append(users[r], w)
		}
	}
	return users
}

func (st *state) trySwap(w, j int, users [][]int) bool {
	e := st.evals[w]
	gain := e.cands[st.choice[w]].cost - e.cands[j].cost
	var rows []int32
	st.s.quotaUses(&e.cands[j], func(r int32, _ float64) { rows = append(rows, r) })
	rows = append(rows, e.budgetRows...)
	seen := map[int]bool{w: true}
	for _, r := range rows {
		for _, v := range users[r] {
			if seen[v] {
				continue
			}
			seen[v] = true
			ev := st.evals[v]
			vc := st.choice[v]
			wc := st.choice[w]
			st.set(w, -1)
			st.set(v, -1)
			if !st.fits(e, &e.cands[j]) {
				st.set(v, vc)
				st.set(w, wc)
				continue
			}
			st.set(w, j)
			if k := st.bestFit(v); k >= 0 && ev.cands[k].cost-ev.cands[vc].cost < gain-eps {
				st.set(v, k)
				return true
			}
			st.set(w, -1)
			st.set(v, vc)
			st.set(w, wc)
		}
	}
	return false
}

// eject tries to make room for an unplaced workload by moving the
// workloads in its way to their next options that fit.
func (st *state) eject(w int) bool {
	e := st.evals[w]
	users := st.rowUsers()
	for j := range e.cands {
		saved := append([]int(nil), st.choice...)
		var rows []int32
		st.s.quotaUses(&e.cands[j], func(r int32, _ float64) { rows = append(rows, r) })
		rows = append(rows, e.budgetRows...)
		for _, r := range rows {
			for _, v := range users[r] {
				if st.fits(e, &e.cands[j]) {
					break
				}
				if v == w || st.choice[v] < 0 {
					continue
				}
				vc := st.choice[v]
				st.set(v, -1)
				moved := false
				for k := range st.evals[v].cands {
					if k == vc {
						continue
					}
					if st.usesAny(v, k, rows) {
						continue
					}
					if st.fits(st.evals[v], &st.evals[v].cands[k]) {
						st.set(v, k)
						moved = true
						break
					}
				}
				if !moved {
					st.set(v, vc)
				}
			}
		}
		if st.fits(e, &e.cands[j]) {
			st.set(w, j)
			return true
		}
		for v := range saved {
			if st.choice[v] != saved[v] {
				st.set(v, saved[v])
			}
		}
	}
	return false
}

func (st *state) usesAny(v, k int, rows []int32) bool {
	found := false
	st.s.quotaUses(&st.evals[v].cands[k], func(r int32, _ float64) {
		for _, x := range rows {
			if x == r {
				found = true
			}
		}
	})
	return found
}

// fleetBlocked says which quota or budget keeps w out.
func (s *solver) fleetBlocked(st *state, w int) Blocked {
	e := st.evals[w]
	o := &e.cands[0]
	b := Blocked{Workload: e.w.Name}
	users := st.rowUsers()
	s.quotaUses(o, func(r int32, amt float64) {
		if b.Constraint == "" && st.rem[r] < amt-eps {
			q := s.quotas[r]
			b.Constraint = "quota"
			b.Reason = fmt.Sprintf("its cheapest option %s needs %g GPUs but %s has %g of %d left (taken by %s)",
				s.describe(o), amt, quotaName(q), st.rem[r], q.MaxGPUs, names(st.evals, users[r]))
		}
	})
	if b.Constraint == "" {
		for _, r := range e.budgetRows {
			if st.rem[r] < o.budgetUse {
				bu := s.budgets[int(r)-len(s.quotas)]
				b.Constraint = "budget"
				b.Reason = fmt.Sprintf("its cheapest option costs $%.0f a month but budget %s has $%.0f of $%.0f left (spent by %s)",
					o.budgetUse, budgetName(bu.Budget), max(0, st.rem[r]), bu.MonthlyUSD, names(st.evals, users[r]))
				break
			}
		}
	}
	if b.Constraint == "" {
		b.Constraint, b.Reason = "quota", "quotas and budgets leave no combination that fits"
	}
	return b
}

func names(evals []*eval, ws []int) string {
	var out []string
	for i, w := range ws {
		if i == 4 {
			out = append(out, fmt.Sprintf("%d more", len(ws)-4))
			break
		}
		out = append(out, evals[w].w.Name)
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}

func quotaName(q policy.Quota) string {
	parts := []string{orAll(string(q.Cloud)), orAll(q.Region), orAll(q.Family)}
	return fmt.Sprintf("quota %s (max %d GPUs)", strings.Join(parts, "/"), q.MaxGPUs)
}

func budgetName(b policy.Budget) string {
	switch {
	case b.Name != "":
		return fmt.Sprintf("%q", b.Name)
	case b.Workload != "":
		return "of workload " + b.Workload
	case b.Team != "":
		return "of team " + b.Team
	}
	return "for everything"
}

func orAll(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

// lowerBound is the Lagrangian dual bound over the quota and budget rows,
// maximised by subgradient ascent: for multipliers μ ≥ 0,
// L(μ) = Σ_w min_j (c_wj + Σ_k μ_k a_wjk) − Σ_k μ_k cap_k ≤ OPT.
// Without rows it is the sum of each workload's cheapest option, which the
// greedy then meets exactly.
func (s *solver) lowerBound(evals []*eval, choice []int) float64 {
	fixed := 0.0
	var free []int // workloads whose options touch a row
	for w, e := range evals {
		touches := len(e.budgetRows) > 0
		for j := range e.cands {
			if touches {
				break
			}
			s.quotaUses(&e.cands[j], func(int32, float64) { touches = true })
		}
		if touches {
			free = append(free, w)
		} else {
			fixed += e.cands[0].cost
		}
	}
	ub := 0.0
	for w, e := range evals {
		ub += e.cands[choice[w]].cost
	}
	if len(free) == 0 {
		return fixed
	}
	mu := make([]float64, len(s.caps))
	g := make([]float64, len(s.caps))
	best := math.Inf(-1)
	theta := 1.0
	stall := 0
	for it := 0; it < 300; it++ {
		val := fixed
		for k := range g {
			g[k] = -s.caps[k]
			val -= mu[k] * s.caps[k]
		}
		for _, w := range free {
			e := evals[w]
			bj, bv := 0, math.Inf(1)
			for j := range e.cands {
				o := &e.cands[j]
				v := o.cost
				s.quotaUses(o, func(r int32, amt float64) { v += mu[r] * amt })
				for _, r := range e.budgetRows {
					v += mu[r] * o.budgetUse
				}
				if v < bv {
					bj, bv = j, v
				}
			}
			val += bv
			o := &e.cands[bj]
			s.quotaUses(o, func(r int32, amt float64) { g[r] += amt })
			for _, r := range e.budgetRows {
				g[r] += o.budgetUse
			}
		}
		if val > best+1e-9*math.Abs(best) {
			best, stall = val, 0
		} else if stall++; stall >= 5 {
			theta, stall = theta/2, 0
		}
		norm := 0.0
		for k := range g {
			if mu[k] == 0 && g[k] < 0 {
				g[k] = 0
			}
			norm += g[k] * g[k]
		}
		if norm == 0 || ub-best <= 1e-7*ub || theta < 1e-6 {
			break
		}
		step := theta * (ub - val) / norm
		for k := range mu {
			mu[k] = max(0, mu[k]+step*g[k])
		}
	}
	return min(best, ub)
}
