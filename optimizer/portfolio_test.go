package optimizer_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
)

// TestPortfolio: a one-off plan of a small fleet runs both trajectories
// (the quick and the patient first bound, portfolio.go) and keeps the
// cheaper plan with the higher of the two bounds. Each trajectory's
// bound gets the bound polish once its search is done (solveFleet): on
// hardgen 60 / 4 at 0.5 the quick trajectory reported 38,888.14 for a
// plan of 45,503.44 without it.
func TestPortfolio(t *testing.T) {
	if testing.Short() {
		t.Skip("solves a hard 60-workload fleet three times")
	}
	for _, tc := range []struct {
		n    int
		seed uint64
		// minQuick is the least bound the quick trajectory may report.
		minQuick float64
	}{{60, 4, 42500}} {
		t.Run(fmt.Sprintf("n%d-seed%d", tc.n, tc.seed), func(t *testing.T) {
			cat, p, err := generateHard(tc.n, tc.seed, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			in := optimizer.Input{Catalog: cat, Policy: p, Now: cat.GeneratedAt.Add(time.Hour)}
			quick, patient, err := optimizer.SolveTrajectories(in)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := optimizer.Solve(in)
			if err != nil {
				t.Fatal(err)
			}
			wantCost := math.Min(quick.Totals.ExpectedCost, patient.Totals.ExpectedCost)
			wantBound := math.Max(quick.Bound.LowerBound, patient.Bound.LowerBound)
			t.Logf("quick %.2f (bound %.2f), patient %.2f (bound %.2f); Solve %.2f (bound %.2f)",
				quick.Totals.ExpectedCost, quick.Bound.LowerBound, patient.Totals.ExpectedCost, patient.Bound.LowerBound,
				plan.Totals.ExpectedCost, plan.Bound.LowerBound)
			if math.Abs(plan.Totals.ExpectedCost-wantCost) > 0.01 {
				t.Errorf("plan %.2f, want the cheaper trajectory's %.2f", plan.Totals.ExpectedCost, wantCost)
			}
			if math.Abs(plan.Bound.LowerBound-wantBound) > 0.01 {
				t.Errorf("bound %.2f, want the higher trajectory's %.2f", plan.Bound.LowerBound, wantBound)
			}
			if quick.Bound.LowerBound < tc.minQuick {
				t.Errorf("quick trajectory's bound %.2f, want at least %.2f (the bound polish)", quick.Bound.LowerBound, tc.minQuick)
			}
			if plan.Bound.LowerBound > plan.Totals.ExpectedCost+0.01 {
				t.Errorf("bound %.2f above the plan's cost %.2f", plan.Bound.LowerBound, plan.Totals.ExpectedCost)
			}
			if want := 100 * (plan.Totals.ExpectedCost - plan.Bound.LowerBound) / plan.Bound.LowerBound; math.Abs(plan.Bound.GapPercent-want) > 0.01 {
				t.Errorf("gap %.3f%%, want %.3f%% (plan against its bound)", plan.Bound.GapPercent, want)
			}
		})
	}
}
