package optimizer

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/gpubroker/gpubroker/policy"
)

// QuickLoad is what a quick heuristic plan takes from each constraint row
// of a policy (QuickPlan).
type QuickLoad struct {
	// Fits is true when the plan meets every quota, budget and spot pool
	// capacity: a proof that the policy is feasible.
	Fits bool
	// QuotaGPUs is the GPUs the plan takes per policy quota (in order of
	// Policy.Quotas), BudgetUSD the monthly spend per policy budget; both
	// may exceed their caps when Fits is false.
	QuotaGPUs []float64
	BudgetUSD []float64
	// PoolsFit is true when the plan stays within every spot pool's
	// capacity (the fleet-wide spot_capacity rows); Overfull lists the
	// pools it overfills, each with the spot GPUs the plan puts there.
	PoolsFit bool
	Overfull []policy.SpotPool
	// Cost is the plan's expected cost.
	Cost float64
}

// QuickPlan places every workload with a fast heuristic and reports what
// the plan takes from each row: a short Lagrangian bound, the regret
// greedy on the priced costs (as Solve's Lagrangian heuristic) with a few
// multiplier scalings, local repair of the last few workloads left out,
// and, for any still left out, its cheapest option that fits the spot
// pools, whatever it takes from the quotas and budgets. Its cost is a few
// of Solve's option rankings, with no exhaustive search: a generator of
// instances at the feasibility edge (optimizer/hardgen) sets each cap,
// and each overfilled pool's capacity, to at least what this plan takes,
// which makes the plan a proof that the instance is feasible.
func QuickPlan(in Input) (QuickLoad, error) {
	if in.Catalog == nil || in.Policy == nil {
		return QuickLoad{}, fmt.Errorf("%w: catalog and policy are required", ErrInput)
	}
	in.Catalog = in.Catalog.ForPlanning()
	s := newSolver(in)
	s.ctx, s.in = context.Background(), in
	// Every pool the fleet could overfill has its row from the start (as
	// in BuildModel), so the plan is checked against all of them.
	s.addPoolRows(s.potentialPools())
	evals := make([]*eval, len(s.pol.Workloads))
	for i := range s.pol.Workloads {
		evals[i] = s.eval(&s.pol.Workloads[i])
		// No dropOversized: an option that alone exceeds a cap is what
		// the fallback may have to take.
		if b := evals[i].blocked; b != nil {
			return QuickLoad{}, fmt.Errorf("workload %s has no option: %s", b.Workload, b.Reason)
		}
	}
	st := s.quickAssign(evals)
	out := QuickLoad{Fits: true, PoolsFit: true, QuotaGPUs: make([]float64, len(s.quotas)), BudgetUSD: make([]float64, len(s.budgets))}
	for r := range s.caps {
		used := s.caps[r] - st.rem[r]
		switch {
		case r < len(s.quotas):
			out.QuotaGPUs[r] = used
		case r < len(s.quotas)+len(s.budgets):
			out.BudgetUSD[r-len(s.quotas)] = used
		}
		if st.rem[r] < -eps*max(1, s.caps[r]) {
			out.Fits = false
			if s.isPoolRow(int32(r)) {
				out.PoolsFit = false
				out.Overfull = append(out.Overfull, s.poolEntry(s.poolOfRow(int32(r)), int(math.Ceil(used-eps))))
			}
		}
	}
	out.Cost = planCost(evals, st.choice)
	return out, nil
}

// quickAssign is QuickPlan's heuristic: a complete assignment, which may
// overfill quota and budget rows (and pool rows when nothing else fits).
func (s *solver) quickAssign(evals []*eval) *state {
	if len(s.caps) == 0 {
		return newState(s, evals, make([]int, len(evals)))
	}
	ub := 0.0
	for _, e := range evals {
		ub += e.cands[0].cost
	}
	_, mu := s.lowerBound(evals, 1.02*ub, nil, 40)
	if s.addPricedColumns(evals, mu) {
		s.resort(evals, nil)
	}
	count := func(st *state) int {
		n := 0
		for _, c := range st.choice {
			if c < 0 {
				n++
			}
		}
		return n
	}
	// Pure cost first, then the multipliers at a few strengths: stronger
	// prices keep more workloads off the congested rows. The start that
	// leaves fewest out (then cheapest) is kept.
	var best *state
	bestLeft := 0
	for _, scale := range []float64{0, 1, 2} {
		scaled := make([]float64, len(mu))
		for k := range mu {
			scaled[k] = mu[k] * scale
		}
		st, _ := s.lagrangeGreedy(evals, scaled)
		// Only the last few left out are worth local repair; beyond
		// that the rows are simply too tight.
		if left := count(st); left > 0 && left <= max(4, len(evals)/50) {
			s.localRepair(st, scaled)
		}
		left := count(st)
		if best == nil || left < bestLeft || left == bestLeft && planCost(evals, st.choice) < planCost(evals, best.choice) {
			best, bestLeft = st, left
		}
		if left == 0 {
			break
		}
	}
	st := best
	// The rest take their cheapest option that fits the spot pools (a
	// pool's capacity is not one of the caps hardgen scales), else their
	// cheapest.
	for w, c := range st.choice {
		if c >= 0 {
			continue
		}
		e := evals[w]
		pick := 0
		for j := range e.cands {
			fits := true
			s.quotaUses(&e.cands[j], func(r int32, amt float64) {
				if s.isPoolRow(r) && st.rem[r] < amt-eps {
					fits = false
				}
			})
			if fits {
				pick = j
				break
			}
		}
		st.set(w, pick)
	}
	return st
}

// poolEntry is the spot_capacity.pools entry that gives pool p gpus.
func (s *solver) poolEntry(p *spotPool, gpus int) policy.SpotPool {
	for i := range s.offers {
		if pi := s.offerPool[i]; pi >= 0 && &s.pools[pi] == p {
			o := &s.offers[i]
			zone := o.Zone
			if zone == "" {
				zone = o.Region
			}
			return policy.SpotPool{Key: p.key, Cloud: o.Cloud, Zone: zone, GPU: o.GPU, GPUs: gpus}
		}
	}
	parts := strings.SplitN(p.key, "/", 3)
	return policy.SpotPool{Key: p.key, Zone: parts[1], GPUs: gpus}
}
