package optimizer

import (
	"context"
	"math"
	"sync"
)

// portfolioFleet is the most workloads whose one-off plan runs
// a second trajectory beside the first (solvePortfolio). The search of a
// small hard fleet is a trajectory: its first multipliers steer every
// heuristic after them, and a start that is better on one fleet is worse
// on the next (hardgen 150 / 42 at 0.5 with a patient first bound:
// 0.244% above CBC's optimum → 0.061%; 150 / 44: 0.146% → 1.07%;
// docs/BENCHMARKS.md, "Session 26"). Running both and keeping the
// cheaper plan keeps each fleet's better one, on a second core.
const portfolioFleet = 300

// trajectory is one of the portfolio's searches.
type trajectory int

const (
	// portfolioRun (the zero value) runs both where portfolio allows.
	portfolioRun trajectory = iota
	// quickStart alone: the first bound's steps as every other round's
	// (quickSteps).
	quickStart
	// patientStart alone: the first bound takes patientSteps.
	patientStart
)

// portfolio says whether in's plan runs both trajectories: a one-off
// plan of a fleet of at most portfolioFleet workloads. Not the live
// fleet's re-plans (a reconcile pass stays short), and not with
// caller-supplied callbacks, which the two trajectories would call at
// once. Exact mode runs both too, each trajectory handing its own
// candidates to the exact solver: with one trajectory, CBC's plan over
// that trajectory's service layouts was dearer than the heuristic's over
// the other's (MILP comparison seed 8: 34,032.54 against 33,223.11;
// spot-pool seed 4: 27,284.82 against 25,439.49), so exact mode would
// have been worse than the default.
func portfolio(in Input) bool {
	if in.Replan || in.trajectory != portfolioRun || in.Unavailable != nil || in.PoolLimit != nil {
		return false
	}
	n := len(in.Policy.Workloads)
	return n > 1 && n <= portfolioFleet
}

// serialExact runs one exact solve at a time: the two trajectories share
// the caller's solver, which may keep its files in one directory
// (cbc.Solver.Dir), and each run already has the cores it asks for.
type serialExact struct {
	mu sync.Mutex
	ex ExactSolver
}

func (x *serialExact) SolveModel(ctx context.Context, m *Model, start []int) (ExactResult, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.ex.SolveModel(ctx, m, start)
}

// solvePortfolio runs Solve's pipeline on in and, where portfolio
// allows, a second trajectory at once (a patient first bound,
// patientStart) on its own solver. It keeps the plan that places
// more workloads, then the cheaper one (the first on a tie, so the plan
// is the same whichever finishes first). Where both place every
// workload, each bound is a bound of the same problem, so the higher is
// kept.
func solvePortfolio(ctx context.Context, in Input) (*solver, []*eval, []int, []Blocked, float64) {
	if portfolio(in) && in.Exact != nil {
		in.Exact = &serialExact{ex: in.Exact}
	}
	s := newSolver(in)
	s.ctx, s.in = ctx, in
	if !portfolio(in) {
		evals, choice, blocked, lb := s.run()
		return s, evals, choice, blocked, lb
	}
	alt := in
	alt.trajectory = patientStart
	s2 := newSolver(alt)
	s2.ctx, s2.in = ctx, alt
	type result struct {
		evals   []*eval
		choice  []int
		blocked []Blocked
		lb      float64
		panic   any
	}
	var r2 result
	done := make(chan struct{})
	go func() {
		// A panic surfaces in the caller's goroutine, as it would
		// without the second trajectory, not as a crash of the process.
		defer func() {
			r2.panic = recover()
			close(done)
		}()
		r2.evals, r2.choice, r2.blocked, r2.lb = s2.run()
	}()
	evals, choice, blocked, lb := s.run()
	<-done
	if r2.panic != nil {
		panic(r2.panic)
	}
	c1, c2 := placedCost(evals, choice), placedCost(r2.evals, r2.choice)
	if len(r2.blocked) < len(blocked) || len(r2.blocked) == len(blocked) && c2 < c1-eps*math.Abs(c1) {
		if len(blocked) == 0 {
			r2.lb = max(r2.lb, lb)
		}
		return s2, r2.evals, r2.choice, r2.blocked, r2.lb
	}
	if len(blocked) == 0 && len(r2.blocked) == 0 {
		lb = max(lb, r2.lb)
	}
	return s, evals, choice, blocked, lb
}

// placedCost is the cost of the workloads choice places.
func placedCost(evals []*eval, choice []int) float64 {
	sum := 0.0
	for w, e := range evals {
		if c := choice[w]; c >= 0 && c < len(e.cands) {
			sum += e.cands[c].cost
		}
	}
	return sum
}
