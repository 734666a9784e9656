package optimizer

import (
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// TestUnavailableRulesPoolsOut checks the fleet's hook: a pool it blocks
// (after a capacity error or a preemption) is not placed on, and the plan
// moves to the next best pool.
func TestUnavailableRulesPoolsOut(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	mk := func(zone string, spot float64) pricing.Offer {
		return pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: zone, InstanceType: "p3.2xlarge", GPU: pricing.V100,
			GPUCount: 1, GPUMemoryGiB: 16, OnDemandPrice: 3.06, SpotPrice: spot, ObservedAt: now, Source: "test"}
	}
	cat := pricing.NewCatalog([]pricing.Offer{mk("us-east-1a", 0.9), mk("us-east-1b", 0.95)}, now, "test")
	pol, err := policy.Parse("p.yaml", []byte("workloads:\n  - name: j\n    kind: training\n    gpu: {models: [V100], count: 1}\n    work: {gpu_hours: 10, reference_gpu: V100}\n    spot: only\n"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Solve(Input{Catalog: cat, Policy: pol, Now: now})
	if err != nil || plan.Placements[0].Zone != "us-east-1a" {
		t.Fatalf("unblocked: %v %+v", err, plan)
	}
	blocked := func(o *pricing.Offer, ct pricing.CapacityType) bool {
		return o.Zone == "us-east-1a" && ct == pricing.Spot
	}
	plan, err = Solve(Input{Catalog: cat, Policy: pol, Now: now, Unavailable: blocked})
	if err != nil || plan.Placements[0].Zone != "us-east-1b" {
		t.Fatalf("blocked: %v %+v", err, plan)
	}
	all := func(*pricing.Offer, pricing.CapacityType) bool { return true }
	if _, err := Solve(Input{Catalog: cat, Policy: pol, Now: now, Unavailable: all}); err == nil {
		t.Fatal("every pool blocked must be infeasible")
	}
}
