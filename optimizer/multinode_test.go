package optimizer

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// TestSizingAsDocumented: "8 GPUs × 48 h = 384 reference GPU-hours" runs
// in 48 h on one 8-GPU instance of the reference GPU, so a 50 h deadline
// holds, and the explanation shows the scaling factor applied.
func TestSizingAsDocumented(t *testing.T) {
	cat := pricing.NewCatalog([]pricing.Offer{
		offer(pricing.AWS, "us-east-1", "use1-az1", "p5.48xlarge", pricing.H100, 8, 98.32, 0, 0),
	}, testNow.Add(-time.Hour), "sizing")
	p := &policy.Policy{File: "s.yaml", Horizon: 720 * time.Hour, Workloads: []policy.Workload{{
		Name: "ft", Kind: policy.Training, Spot: policy.SpotNever, GPU: policy.GPUNeed{Count: 8, Models: []pricing.GPUModel{pricing.H100}},
		WorkGPUHours: 384, ReferenceGPU: pricing.H100, Deadline: 50 * time.Hour}}}
	plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	pl := plan.Placements[0]
	if pl.ExpectedHours != 48 || pl.ScalingEfficiency != 1 {
		t.Errorf("expected %.2fh at scaling %.4f, want 48h at 1", pl.ExpectedHours, pl.ScalingEfficiency)
	}
	if !strings.Contains(strings.Join(pl.Explanation, "\n"), "sizing: 384 reference GPU-hours (H100) ÷ (8 GPUs × 1.00 relative speed × 1.000 scaling) = 48.0h compute") {
		t.Errorf("explanation lacks the sizing:\n%s", strings.Join(pl.Explanation, "\n"))
	}
}

// TestMultiNodeJob: 64 GPUs span eight 8-GPU instances in one zone; with
// gpu.interconnect: required only types with a GPU network qualify, and
// the explanation shows the scaling across instances.
func TestMultiNodeJob(t *testing.T) {
	cat := embedded(t)
	w := policy.Workload{Name: "pretrain", Kind: policy.Training, Spot: policy.SpotNever,
		GPU: policy.GPUNeed{Count: 64, MinMemoryGiB: 80, Interconnect: policy.InterconnectRequired}, WorkGPUHours: 64 * 100, ReferenceGPU: pricing.H100}
	p := &policy.Policy{File: "m.yaml", Horizon: 720 * time.Hour, Workloads: []policy.Workload{w}}
	plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	pl := plan.Placements[0]
	g := pl.Groups[0]
	if pl.GPUs != 64 || g.Instances*g.GPUsPerInstance != 64 || len(pl.Groups) != 1 || g.Interconnect == "" {
		t.Fatalf("got %+v, want 64 GPUs in one group of an interconnect type", pl.Groups)
	}
	// 8 nodes of 8 against the reference shape of 8 nodes of 8: 1.
	if math.Abs(pl.ScalingEfficiency-1) > 1e-9 {
		t.Errorf("scaling %.4f, want 1 on the reference shape", pl.ScalingEfficiency)
	}
	if !strings.Contains(strings.Join(pl.Explanation, "\n"), "instances in one zone over "+g.Interconnect) {
		t.Errorf("explanation lacks the interconnect:\n%s", strings.Join(pl.Explanation, "\n"))
	}

	// A user-set scaling changes the figures: 0.8 per doubling of nodes on
	// a shape of 16 nodes × 4 GPUs against 8 × 8.
	sc := Scaling{0.95, 0.8}
	if got, want := sc.RelativeEfficiency(4, 16), math.Pow(0.95, 2)*math.Pow(0.8, 4)/(math.Pow(0.95, 3)*math.Pow(0.8, 3)); math.Abs(got-want) > 1e-12 {
		t.Errorf("relative efficiency %.4f, want %.4f", got, want)
	}

	// No interconnect offer of a GPU model: the job is blocked by it.
	w.GPU.Models = []pricing.GPUModel{pricing.L40S}
	w.GPU.MinMemoryGiB = 0
	p.Workloads = []policy.Workload{w}
	plan, err = Solve(Input{Catalog: cat, Policy: p, Now: testNow})
	var ie *InfeasibleError
	if !errors.As(err, &ie) || ie.Blocked[0].Constraint != "interconnect" || len(plan.Blocked) != 1 {
		t.Fatalf("want an interconnect block, got %v", err)
	}
}

func TestInterconnect(t *testing.T) {
	tests := []struct {
		c    pricing.Cloud
		it   string
		want string
	}{
		{pricing.AWS, "p5.48xlarge", "efa"}, {pricing.AWS, "p4d.24xlarge", "efa"}, {pricing.AWS, "g6e.48xlarge", ""},
		{pricing.GCP, "a3-highgpu-8g", "gpudirect-tcpx"}, {pricing.GCP, "a3-megagpu-8g", "gpudirect-tcpxo"}, {pricing.GCP, "a2-highgpu-8g", ""},
		{pricing.Azure, "Standard_ND96isr_H100_v5", "infiniband"}, {pricing.Azure, "Standard_ND96asr_v4", "infiniband"},
		{pricing.Azure, "Standard_NC96ads_A100_v4", ""}, {pricing.Azure, "Standard_ND40rs_v2", "infiniband"},
	}
	for _, tt := range tests {
		if got := Interconnect(tt.c, tt.it); got != tt.want {
			t.Errorf("Interconnect(%s, %s) = %q, want %q", tt.c, tt.it, got, tt.want)
		}
	}
}

// TestSpotPoolCapacity: a 64-GPU job cannot take 64 spot GPUs from one
// pool (default 32), so it runs on demand; raising spot_pool_gpus lets it
// use spot.
func TestSpotPoolCapacity(t *testing.T) {
	cat := pricing.NewCatalog([]pricing.Offer{
		offer(pricing.AWS, "us-east-1", "use1-az1", "p5.48xlarge", pricing.H100, 8, 98.32, 30, 0.005),
	}, testNow.Add(-time.Hour), "pool")
	w := policy.Workload{Name: "big", Kind: policy.Training, Spot: policy.SpotPrefer, GPU: policy.GPUNeed{Count: 64},
		WorkGPUHours: 640, ReferenceGPU: pricing.H100, CheckpointInterval: time.Hour}
	for _, tt := range []struct {
		pool int
		want pricing.CapacityType
	}{{0, pricing.OnDemand}, {64, pricing.Spot}} {
		p := &policy.Policy{File: "p.yaml", Horizon: 720 * time.Hour, SpotPoolGPUs: tt.pool, Workloads: []policy.Workload{w}}
		plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
		if err != nil {
			t.Fatal(err)
		}
		if got := plan.Placements[0].Capacity; got != tt.want {
			t.Errorf("spot_pool_gpus %d: %s, want %s", tt.pool, got, tt.want)
		}
	}
}
