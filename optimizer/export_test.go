package optimizer

import "fmt"

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
func CompareChainSeeds(in Input, budget int) (chainSeedRun, error) {
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
	if len(evals) <= chainWeightedFleet {
		return chainSeedRun{}, fmt.Errorf("%d placeable workloads, want more than %d", len(evals), chainWeightedFleet)
	}
	ub := 0.0
	for _, e := range evals {
		ub += e.cands[0].cost
	}
	s.ubGuess = true
	lb, mu := s.lowerBound(evals, ub*1.02, nil, 440)
	s.ubGuess = false
	start := s.lagrangeAssign(evals, mu)
	if start == nil {
		return chainSeedRun{}, fmt.Errorf("no complete Lagrangian plan to start from")
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
