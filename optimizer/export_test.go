package optimizer

import (
	"fmt"
	"slices"
)

// chainSeedRun is what compareChainSeeds measured.
type chainSeedRun struct {
	Bound, Start, Saving, Priced float64
}

// CompareChainSeeds runs the chain search of very large fleets from the
// same plan with the same budget (candidate scans), with seeds drawn as
// before priced seeds (savingSeeds: half by saving, half uniformly) and as
// Solve draws them,
// each with a few generators, and returns the mean costs. The plan is the
// Lagrangian heuristic's at 440 subgradient steps, then lns, with a row
// for every spot pool the fleet could overfill. It errors when a plan
// breaks a row. For the external test, which can import hardgen.
// fullRowSolver is a solver on in with a row for every spot pool the
// fleet could overfill, and the evals of the workloads with an option.
func fullRowSolver(in Input) (*solver, []*eval) {
	in.Catalog = in.Catalog.ForPlanning()
	s := newSolver(in)
	s.in = in
	s.addPoolRows(s.potentialPools())
	var evals []*eval
	for i := range in.Policy.Workloads {
		e := s.eval(&in.Policy.Workloads[i])
		s.dropOversized(e)
		if e.blocked == nil {
			evals = append(evals, e)
		}
	}
	return s, evals
}

// lagrangeStart is the bound after steps subgradient steps aimed 2% above
// the sum of the cheapest options, its multipliers, and the Lagrangian
// heuristic's plan at them.
func lagrangeStart(s *solver, evals []*eval, steps int) (float64, []float64, []int, error) {
	ub := 0.0
	for _, e := range evals {
		ub += e.cands[0].cost
	}
	s.ubGuess = true
	lb, mu := s.lowerBound(evals, ub*1.02, nil, steps)
	s.ubGuess = false
	start := s.lagrangeAssign(evals, mu)
	if start == nil {
		return 0, nil, nil, fmt.Errorf("no complete Lagrangian plan to start from")
	}
	return lb, mu, start, nil
}

func CompareChainSeeds(in Input, budget int) (chainSeedRun, error) {
	s, evals := fullRowSolver(in)
	if len(evals) <= chainWeightedFleet {
		return chainSeedRun{}, fmt.Errorf("%d placeable workloads, want more than %d", len(evals), chainWeightedFleet)
	}
	lb, mu, start, err := lagrangeStart(s, evals, 440)
	if err != nil {
		return chainSeedRun{}, err
	}
	start = s.lns(evals, start, mu, lnsMaxWork)
	res := chainSeedRun{Bound: lb, Start: planCost(evals, start)}
	// One sampled search is a trajectory: the sums over a few generators
	// compare the seeds, not the luck of one draw.
	for v := uint64(0); v < variants; v++ {
		for _, saving := range []bool{true, false} {
			s.savingSeeds = saving
			ch := s.chainRun(evals, start, mu, budget, budget, v)
			st := newState(s, evals, ch)
			for r, rem := range st.rem {
				if rem < -eps*max(1, s.caps[r]) {
					return chainSeedRun{}, fmt.Errorf("seeds by saving %v: row %d over its cap by %g", saving, r, -rem)
				}
			}
			if saving {
				res.Saving += planCost(evals, ch) / variants
			} else {
				res.Priced += planCost(evals, ch) / variants
			}
		}
	}
	s.savingSeeds = false
	return res, nil
}

// variants is how many chain generators CompareChainSeeds averages over.
const variants = 3

// CompareSubSearches re-solves sets sets of a plan of a large fleet the
// way the chain search does (chain-sized sets: a workload off its
// cheapest option and holders of the rows it uses, the plan's own state,
// the multipliers), once with each workload's rows listed up front
// (s.wrows, as chainRun sets them) and once without, and errors at the
// first set whose result differs (pick, cost or nodes). The plan is the
// Lagrangian heuristic's at 40 subgradient steps with a row for every spot
// pool the fleet could overfill. It returns how many sets found a
// cheaper assignment. For the external test, which can import hardgen.
func CompareSubSearches(in Input, sets int) (int, error) {
	s, evals := fullRowSolver(in)
	_, mu, start, err := lagrangeStart(s, evals, 40)
	if err != nil {
		return 0, err
	}
	st := newState(s, evals, start)
	users := st.rowUsers()
	better := 0
	for k := 0; k < sets; k++ {
		// A deterministic walk over the fleet: workload w, then holders
		// of the rows its option uses until the set has chainSize.
		w := (k * 7919) % len(evals)
		set := []int{w}
		for _, u := range evals[w].cands[st.choice[w]].uses {
			for _, h := range users[u.row] {
				if len(set) < chainSize && !slices.Contains(set, h) {
					set = append(set, h)
				}
			}
		}
		old := 0.0
		for _, v := range set {
			old += evals[v].cands[st.choice[v]].cost
		}
		s.wrows = workloadRows(evals)
		a, b := setRows(evals, set, len(mu), func(r int32) bool { return mu[r] > 0 }), s.unionRows(set, mu)
		s.wrows = nil
		if !slices.Equal(a, b) {
			return better, fmt.Errorf("set %d: rows %v, listed per workload %v", k, a, b)
		}
		var rs [2]searchResult
		for i, cached := range []bool{false, true} {
			if cached {
				s.wrows = workloadRows(evals)
			}
			rs[i] = s.search(st, set, old, chainNodes*20*len(set), false, mu)
			s.wrows = nil
		}
		if rs[0].nodes != rs[1].nodes || rs[0].cost != rs[1].cost || !slices.Equal(rs[0].pick, rs[1].pick) {
			return better, fmt.Errorf("set %d (%v): without row lists %d nodes, cost %.6f, pick %v; with them %d, %.6f, %v",
				k, set, rs[0].nodes, rs[0].cost, rs[0].pick, rs[1].nodes, rs[1].cost, rs[1].pick)
		}
		if rs[0].pick != nil && rs[0].cost < old-eps*max(1, old) {
			better++
		}
	}
	return better, nil
}

// BoundSchedules is the Lagrangian bound of in's fleet (a row for every
// spot pool it could overfill) after steps subgradient steps from zero
// multipliers, aimed 2% above the sum of the cheapest options, with the
// quick and with the patient step schedule.
func BoundSchedules(in Input, steps int) (quick, patient float64) {
	s, evals := fullRowSolver(in)
	ub := 0.0
	for _, e := range evals {
		ub += e.cands[0].cost
	}
	s.ubGuess = true
	quick, _ = s.lowerBound(evals, ub*1.02, nil, steps)
	s.patient = true
	patient, _ = s.lowerBound(evals, ub*1.02, nil, steps)
	return quick, patient
}

// SolveTrajectories is Solve with each of the portfolio's trajectories
// alone: the quick first bound, then the patient one.
func SolveTrajectories(in Input) (quick, patient *Plan, err error) {
	in.trajectory = quickStart
	if quick, err = Solve(in); err != nil {
		return nil, nil, err
	}
	in.trajectory = patientStart
	patient, err = Solve(in)
	return quick, patient, err
}
