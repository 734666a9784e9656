package optimizer

import (
	"errors"
	"math"
	"testing"

	"github.com/gpubroker/gpubroker/policy"
)

// TestQuickPlan checks QuickPlan's contract with the instance generator:
// Fits only when every row holds the plan, the load of a row it overfills
// is reported, and caps raised to the reported load make the policy
// feasible for Solve.
func TestQuickPlan(t *testing.T) {
	cat := embedded(t)
	for _, tc := range []struct {
		name  string
		quota int
		fits  bool
	}{
		{"loose quota", 1000, true},
		{"quota below the 8-GPU job", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fleetPolicy()
			p.Quotas = []policy.Quota{{Cloud: "", Region: "*", MaxGPUs: tc.quota}}
			p.Budgets = []policy.Budget{{Team: "research", MonthlyUSD: 1e7}}
			load, err := QuickPlan(Input{Catalog: cat, Policy: p, Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			if load.Fits != tc.fits || !load.PoolsFit || len(load.Overfull) > 0 {
				t.Fatalf("fits %v (want %v), pools fit %v, overfull %v", load.Fits, tc.fits, load.PoolsFit, load.Overfull)
			}
			if len(load.QuotaGPUs) != 1 || len(load.BudgetUSD) != 1 || load.QuotaGPUs[0] < 10 || load.BudgetUSD[0] <= 0 || load.Cost <= 0 {
				t.Fatalf("load %+v", load)
			}
			if got := load.QuotaGPUs[0] <= float64(tc.quota); got != tc.fits {
				t.Fatalf("quota load %g against cap %d, fits %v", load.QuotaGPUs[0], tc.quota, tc.fits)
			}
			p.Quotas[0].MaxGPUs = max(tc.quota, int(math.Ceil(load.QuotaGPUs[0])))
			if _, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow}); err != nil {
				t.Fatalf("caps raised to the quick plan's load: %v", err)
			}
		})
	}
	if _, err := QuickPlan(Input{Catalog: cat}); !errors.Is(err, ErrInput) {
		t.Fatalf("no policy: %v", err)
	}
}
