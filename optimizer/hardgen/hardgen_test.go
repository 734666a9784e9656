package hardgen

import (
	"reflect"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
)

// TestLargeFleetFeasibleAtTheEdge checks the large-fleet path (one quick
// plan instead of full Solve trials): the instance is deterministic, hard
// (a quick plan on it fills most quotas to more than 90%) and feasible
// (Solve places every workload).
func TestLargeFleetFeasibleAtTheEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("solves a 400-workload hard fleet")
	}
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	const n = fullSolveEdge + 100
	p, err := Generate(cat, n, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Generate(cat, n, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Quotas, again.Quotas) || !reflect.DeepEqual(p.Budgets, again.Budgets) || !reflect.DeepEqual(p.SpotCapacity, again.SpotCapacity) {
		t.Fatal("two generations of the same seed differ")
	}
	if len(p.Quotas) < 5 || len(p.Budgets) == 0 {
		t.Fatalf("%d quotas, %d budgets: not a hard instance", len(p.Quotas), len(p.Budgets))
	}
	now := cat.GeneratedAt.Add(time.Hour)
	load, err := optimizer.QuickPlan(optimizer.Input{Catalog: cat, Policy: p, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	full := 0
	for i, q := range p.Quotas {
		if load.QuotaGPUs[i] > 0.9*float64(q.MaxGPUs) {
			full++
		}
	}
	if full < len(p.Quotas)/2 {
		t.Fatalf("only %d of %d quotas more than 90%% full in the quick plan", full, len(p.Quotas))
	}
	plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: now})
	if err != nil {
		t.Fatalf("Solve on the generated instance: %v", err)
	}
	if len(plan.Placements) != len(p.Workloads) {
		t.Fatalf("%d placements for %d workloads", len(plan.Placements), len(p.Workloads))
	}
}
