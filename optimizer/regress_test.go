package optimizer

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

func offer(c pricing.Cloud, region, zone, it string, g pricing.GPUModel, n int, od, spot, rate float64) pricing.Offer {
	s, _ := pricing.Spec(g)
	return pricing.Offer{Cloud: c, Region: region, Zone: zone, InstanceType: it, GPU: g, GPUCount: n, GPUMemoryGiB: s.MemoryGiB,
		OnDemandPrice: od, SpotPrice: spot, Spot: pricing.SpotSignal{InterruptionsPerHour: rate}}
}

// TestFourH100JobsOverlappingQuotas is the first minimal case: the
// cheapest H100s (Azure, in a US region) count against both the Azure and
// the *us* quota. Greedy puts two jobs there and fills both quotas; every
// other option then breaks one of them, and since every option also
// counts against the (non-binding) H100 quota, eject-and-reinsert found no
// move. A plan exists: two jobs on AWS us-east-1, two on Azure japaneast.
func TestFourH100JobsOverlappingQuotas(t *testing.T) {
	cat := pricing.NewCatalog([]pricing.Offer{
		offer(pricing.Azure, "eastus", "", "Standard_ND96isr_H100_v5", pricing.H100, 8, 90, 0, 0),
		offer(pricing.AWS, "us-east-1", "use1-az1", "p5.48xlarge", pricing.H100, 8, 98, 0, 0),
		offer(pricing.Azure, "japaneast", "", "Standard_ND96isr_H100_v5", pricing.H100, 8, 104, 0, 0),
	}, testNow.Add(-time.Hour), "four-h100")
	p := &policy.Policy{File: "four.yaml", Horizon: 720 * time.Hour,
		Quotas: []policy.Quota{{Cloud: pricing.Azure, MaxGPUs: 16}, {Family: "H100", MaxGPUs: 32}, {Region: "*us*", MaxGPUs: 16}}}
	for i := 0; i < 4; i++ {
		p.Workloads = append(p.Workloads, policy.Workload{Name: fmt.Sprintf("pretrain-%d", i), Kind: policy.Training, Spot: policy.SpotNever,
			GPU: policy.GPUNeed{Count: 8, Models: []pricing.GPUModel{pricing.H100}}, WorkGPUHours: float64(400 + 50*i), ReferenceGPU: pricing.H100})
	}
	plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
	if err != nil {
		t.Fatalf("a plan exists (2× aws us-east-1, 2× azure japaneast), got %v", err)
	}
	where := map[string]int{}
	for _, pl := range plan.Placements {
		where[string(pl.Cloud)+" "+pl.Region]++
	}
	if where["aws us-east-1"] != 2 || where["azure japaneast"] != 2 {
		t.Errorf("placements %v, want 2 on aws us-east-1 and 2 on azure japaneast (the only feasible plan)", where)
	}
	if plan.Bound.LowerBound > plan.Totals.ExpectedCost+0.01 {
		t.Errorf("bound %.2f above the plan's cost %.2f", plan.Bound.LowerBound, plan.Totals.ExpectedCost)
	}
	if len(plan.Blocked) != 0 {
		t.Errorf("blocked %v", plan.Blocked)
	}
}

// TestT4ServiceUnderCloudQuota is the second minimal case: the
// cheapest T4 layout puts all four replicas in one AWS zone, which alone
// breaks "aws ≤ 2"; keeping only that layout per GPU model removed T4
// altogether, although four Azure T4 replicas fit.
func TestT4ServiceUnderCloudQuota(t *testing.T) {
	cat := pricing.NewCatalog([]pricing.Offer{
		offer(pricing.AWS, "us-east-1", "use1-az1", "g4dn.xlarge", pricing.T4, 1, 0.40, 0, 0),
		offer(pricing.AWS, "us-east-1", "use1-az2", "g4dn.xlarge", pricing.T4, 1, 0.41, 0, 0),
		offer(pricing.Azure, "eastus", "", "Standard_NC4as_T4_v3", pricing.T4, 1, 0.53, 0, 0),
		offer(pricing.GCP, "us-central1", "us-central1-a", "g2-standard-4", pricing.L4, 1, 0.90, 0, 0),
	}, testNow.Add(-time.Hour), "t4")
	p := &policy.Policy{File: "t4.yaml", Horizon: 720 * time.Hour,
		Quotas: []policy.Quota{{Cloud: pricing.AWS, MaxGPUs: 2}},
		Workloads: []policy.Workload{{Name: "chat", Kind: policy.Inference, Spot: policy.SpotNever,
			GPU: policy.GPUNeed{Count: 1, Models: []pricing.GPUModel{pricing.T4}}, Replicas: policy.Replicas{Min: 4, Max: 4}}}}
	plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
	if err != nil {
		t.Fatalf("four Azure T4 replicas fit, got %v", err)
	}
	pl := plan.Placements[0]
	if pl.Cloud != pricing.Azure || pl.Instances != 4 || pl.GPU != pricing.T4 {
		t.Errorf("got %d×%s on %s, want 4×T4 on azure", pl.Instances, pl.GPU, pl.Cloud)
	}
	if want := 4 * 0.53 * 720; plan.Bound.LowerBound > want+0.01 {
		t.Errorf("bound %.2f above the only feasible plan's cost %.2f", plan.Bound.LowerBound, want)
	}
}

// TestInfeasibleKeepsTheRest: one workload that cannot fit never hides the
// feasible rest; the plan lists it as blocked with a proof.
func TestInfeasibleKeepsTheRest(t *testing.T) {
	p := &policy.Policy{File: "t.yaml", Horizon: 720 * time.Hour,
		Workloads: []policy.Workload{job("fits", 200, 0, policy.SpotNever), job("too-big", 200, 0, policy.SpotNever), job("no-model", 10, 0, policy.SpotNever)},
		Quotas:    []policy.Quota{{MaxGPUs: 8}}}
	p.Workloads[2].GPU.Models = []pricing.GPUModel{pricing.V100}
	plan, err := Solve(Input{Catalog: tinyCatalog(), Policy: p, Now: testNow})
	var ie *InfeasibleError
	if !errors.As(err, &ie) || plan == nil {
		t.Fatalf("want a plan and an *InfeasibleError, got %v, %v", plan, err)
	}
	if len(plan.Placements) != 1 || len(plan.Blocked) != 2 {
		t.Fatalf("placements %d, blocked %+v; want 1 placed and 2 blocked", len(plan.Placements), plan.Blocked)
	}
	got := map[string]Blocked{}
	for _, b := range plan.Blocked {
		got[b.Workload] = b
	}
	// Which of the two 8-GPU jobs is left out is the solver's choice.
	var q Blocked
	for _, n := range []string{"fits", "too-big"} {
		if b, ok := got[n]; ok {
			q = b
		}
	}
	if q.Constraint != "quota" || q.Proof != proofSearch {
		t.Errorf("quota-blocked job: %+v, want constraint quota with an exhaustive-search proof", q)
	}
	if b := got["no-model"]; b.Constraint != "gpu_model" || b.Proof != proofOwn {
		t.Errorf("no-model: %+v", b)
	}
}
