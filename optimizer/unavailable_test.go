package optimizer

import (
	"fmt"
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

// TestPoolLimitKeepsJobsOutOfSmallPools: a pool seen to hold one instance
// takes no 4-instance job; the job goes to the 4-GPU shape (one instance,
// which fits) or to another pool, and a limit of 4 changes nothing.
func TestPoolLimitKeepsJobsOutOfSmallPools(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	mk := func(zone, typ string, gpus int, spot float64) pricing.Offer {
		return pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: zone, InstanceType: typ, GPU: pricing.T4,
			GPUCount: gpus, GPUMemoryGiB: 16, OnDemandPrice: 0.526 * float64(gpus) * 1.5, SpotPrice: spot * float64(gpus), Spot: pricing.SpotSignal{InterruptionsPerHour: 0.001}, ObservedAt: now, Source: "test"}
	}
	cat := pricing.NewCatalog([]pricing.Offer{mk("us-east-1a", "g4dn.xlarge", 1, 0.16), mk("us-east-1a", "g4dn.12xlarge", 4, 0.30),
		mk("us-east-1b", "g4dn.xlarge", 1, 0.17)}, now, "test")
	pol, err := policy.Parse("p.yaml", []byte("workloads:\n  - name: j\n    kind: batch\n    gpu: {models: [T4], count: 4}\n    work: {gpu_hours: 40, reference_gpu: T4}\n    spot: only\n"))
	if err != nil {
		t.Fatal(err)
	}
	where := func(lim func(*pricing.Offer, pricing.CapacityType) int) string {
		t.Helper()
		plan, err := Solve(Input{Catalog: cat, Policy: pol, Now: now, PoolLimit: lim})
		if err != nil {
			t.Fatal(err)
		}
		p := plan.Placements[0]
		return fmt.Sprintf("%s %s ×%d", p.Zone, p.Groups[0].InstanceType, p.Groups[0].Instances)
	}
	limit := func(zone, typ string, n int) func(*pricing.Offer, pricing.CapacityType) int {
		return func(o *pricing.Offer, ct pricing.CapacityType) int {
			if o.Zone == zone && o.InstanceType == typ && ct == pricing.Spot {
				return n
			}
			return 0
		}
	}
	for _, tc := range []struct {
		name string
		lim  func(*pricing.Offer, pricing.CapacityType) int
		want string
	}{
		{"no limit", nil, "us-east-1a g4dn.xlarge ×4"},
		{"1a holds 4", limit("us-east-1a", "g4dn.xlarge", 4), "us-east-1a g4dn.xlarge ×4"},
		{"1a holds 1", limit("us-east-1a", "g4dn.xlarge", 1), "us-east-1b g4dn.xlarge ×4"},
		{"1a and 1b hold 1", func(o *pricing.Offer, ct pricing.CapacityType) int {
			if o.InstanceType == "g4dn.xlarge" {
				return 1
			}
			return 0
		}, "us-east-1a g4dn.12xlarge ×1"},
		{"everything holds 1 (a one-instance job still fits)", func(*pricing.Offer, pricing.CapacityType) int { return 1 }, "us-east-1a g4dn.12xlarge ×1"},
	} {
		if got := where(tc.lim); got != tc.want {
			t.Errorf("%s: placed on %s, want %s", tc.name, got, tc.want)
		}
	}
}
