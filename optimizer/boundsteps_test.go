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
