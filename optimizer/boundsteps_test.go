package optimizer_test

import (
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
)

// TestPatientBoundSteps: the bound polish's step schedule (patientSteps)
// keeps raising the Lagrangian bound where the quick rounds' schedule has
// already shrunk its steps to nothing: on a 400-workload hard fleet,
// from zero multipliers with the same steps, it ends well above, and
// below the cost of the plan Solve finds (a bound, not a guess).
func TestPatientBoundSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("400-workload hard fleet")
	}
	cat, p, err := generateHard(400, 1, 0.6)
	if err != nil {
		t.Fatal(err)
	}
	in := optimizer.Input{Catalog: cat, Policy: p, Now: cat.GeneratedAt.Add(time.Hour)}
	quick, patient := optimizer.BoundSchedules(in, 2000)
	plan, err := optimizer.Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bound after 2,000 steps: quick %.2f, patient %.2f; plan %.2f (its bound %.2f)", quick, patient, plan.Totals.ExpectedCost, plan.Bound.LowerBound)
	if patient < quick*1.005 {
		t.Errorf("patient schedule's bound %.2f, want at least 0.5%% above the quick one's %.2f", patient, quick)
	}
	if patient > plan.Totals.ExpectedCost {
		t.Errorf("bound %.2f above the plan's cost %.2f", patient, plan.Totals.ExpectedCost)
	}
}

// TestSmallFleetBoundPolish: a one-off plan of a small hard fleet gets
// the bound polish once its search is done (solveFleet). On hardgen
// 60 / 4 at 0.5 the bound was 38,888.14 for a plan of 45,503.44 without
// it (gap 17.0%), 42,686.12 with it; the plan is the same.
func TestSmallFleetBoundPolish(t *testing.T) {
	if testing.Short() {
		t.Skip("solves a hard 60-workload fleet")
	}
	cat, p, err := generateHard(60, 4, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: cat.GeneratedAt.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	const plain, minBound = 38888.14, 42500.0
	cost, lb := plan.Totals.ExpectedCost, plan.Bound.LowerBound
	t.Logf("plan %.2f, bound %.2f (gap %.3f%%)", cost, lb, plan.Bound.GapPercent)
	if lb < minBound {
		t.Errorf("bound %.2f, want at least %.2f (%.2f without the polish)", lb, minBound, plain)
	}
	if lb > cost+0.01 {
		t.Errorf("bound %.2f above the plan's cost %.2f", lb, cost)
	}
}
