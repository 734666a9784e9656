package optimizer

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// h100Catalog is two AWS zones selling 8×H100 spot (zone a cheaper) and on
// demand.
func h100Catalog(scoreA int) *pricing.Catalog {
	var offers []pricing.Offer
	for _, z := range []struct {
		zone  string
		spot  float64
		score int
	}{{"us-east-1a", 30, scoreA}, {"us-east-1b", 35, 0}} {
		o := pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: z.zone, InstanceType: "p5.48xlarge", GPU: pricing.H100, GPUCount: 8,
			GPUMemoryGiB: 80, OnDemandPrice: 98.32, SpotPrice: z.spot}
		o.Spot.InterruptionsPerHour = 0.005
		o.Spot.PlacementScore = z.score
		offers = append(offers, o)
	}
	return pricing.NewCatalog(offers, testNow.Add(-time.Hour), "test")
}

func spotJobs(n int, zones ...string) *policy.Policy {
	p := &policy.Policy{File: "pools.yaml", Horizon: 720 * time.Hour}
	for i := 0; i < n; i++ {
		p.Workloads = append(p.Workloads, policy.Workload{
			Name: fmt.Sprintf("train-%02d", i), Kind: policy.Training, Spot: policy.SpotOnly,
			GPU:          policy.GPUNeed{Count: 8, Models: []pricing.GPUModel{pricing.H100}},
			WorkGPUHours: 80, ReferenceGPU: pricing.H100, CheckpointInterval: 30 * time.Minute, RestartOverhead: 10 * time.Minute,
			Limits: policy.Limits{Zones: zones},
		})
	}
	p.SetDefaults()
	return p
}

func zonesOf(plan *Plan) map[string]int {
	m := map[string]int{}
	for _, pl := range plan.Placements {
		m[pl.Zone]++
	}
	return m
}

// TestSpotPoolSharedByFleet: ten 8-GPU spot jobs prefer the cheaper zone,
// but its pool gives the whole fleet 64 GPUs: eight fit, two spread to the
// next zone, and the explanation says why.
func TestSpotPoolSharedByFleet(t *testing.T) {
	cat := h100Catalog(0)
	plan, err := Solve(Input{Catalog: cat, Policy: spotJobs(10), Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if z := zonesOf(plan); z["us-east-1a"] != 8 || z["us-east-1b"] != 2 {
		t.Fatalf("zones %v, want 8 in us-east-1a (64 GPUs) and 2 in us-east-1b", z)
	}
	var pa *SpotPoolUse
	for i := range plan.SpotPools {
		if plan.SpotPools[i].Pool == "aws/us-east-1a/H100" {
			pa = &plan.SpotPools[i]
		}
	}
	if pa == nil || pa.UsedGPUs != 64 || pa.CapacityGPUs != 64 || !pa.Constrained || pa.Source != "default" {
		t.Fatalf("spot pools %+v", plan.SpotPools)
	}
	found := false
	for _, pl := range plan.Placements {
		if pl.Zone != "us-east-1b" {
			continue
		}
		if pl.RunnerUp == nil || pl.RunnerUp.Constraint != "spot_capacity" || !strings.Contains(pl.RunnerUp.Reason, "spot pool aws/us-east-1a/H100 full: 64 of 64 GPUs taken") {
			t.Errorf("%s runner-up %+v", pl.Workload, pl.RunnerUp)
		}
		if pl.Groups[0].SpotPool != "aws/us-east-1b/H100" {
			t.Errorf("group %+v", pl.Groups[0])
		}
		found = true
	}
	if !found {
		t.Fatal("no placement in us-east-1b")
	}
	// The bound counts the pool: without the row the ten jobs would cost
	// 10 × the zone-a price.
	alla := 0.0
	for _, pl := range plan.Placements {
		if pl.Zone == "us-east-1a" {
			alla = pl.ExpectedCost
		}
	}
	if plan.Bound.LowerBound <= 10*alla+0.01 || plan.Bound.LowerBound > plan.Totals.ExpectedCost+0.01 {
		t.Errorf("lower bound %.2f: want above %.2f (all in zone a) and at most the plan's %.2f", plan.Bound.LowerBound, 10*alla, plan.Totals.ExpectedCost)
	}
}

// TestSpotPoolFullBlocks: limited to one zone, the ninth spot-only job
// finds the pool full and is blocked with the pool named, while the other
// eight are placed.
func TestSpotPoolFullBlocks(t *testing.T) {
	plan, err := Solve(Input{Catalog: h100Catalog(0), Policy: spotJobs(9, "us-east-1a"), Now: testNow})
	var ie *InfeasibleError
	if !errors.As(err, &ie) || plan == nil {
		t.Fatalf("err %v, want infeasible with a partial plan", err)
	}
	if len(plan.Placements) != 8 || len(plan.Blocked) != 1 {
		t.Fatalf("%d placed, blocked %+v", len(plan.Placements), plan.Blocked)
	}
	b := plan.Blocked[0]
	if b.Constraint != "spot_capacity" || !strings.Contains(b.Reason, "spot pool aws/us-east-1a/H100 full: 64 of 64 GPUs taken") || b.Proof == proofLimit {
		t.Errorf("blocked %+v", b)
	}
}

// TestSpotPoolPlacementScore: a placement score scales the default (5/10
// of 64 = 32 GPUs); a policy entry overrides both; both show in JSON.
func TestSpotPoolPlacementScore(t *testing.T) {
	plan, err := Solve(Input{Catalog: h100Catalog(5), Policy: spotJobs(6), Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if z := zonesOf(plan); z["us-east-1a"] != 4 || z["us-east-1b"] != 2 {
		t.Fatalf("zones %v, want 4 in us-east-1a (placement score 5 → 32 GPUs)", z)
	}
	var buf bytes.Buffer
	if err := plan.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"pool": "aws/us-east-1a/H100"`, `"source": "placement score"`, `"placement_score": 5`, `"capacity_gpus": 32`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	explained := false
	for _, pl := range plan.Placements {
		for _, l := range pl.Explanation {
			explained = explained || strings.Contains(l, "aws/us-east-1a/H100 8 of its 32 GPUs (placement score 5/10")
		}
	}
	if !explained {
		t.Error("no explanation shows the placement score")
	}

	p := spotJobs(6)
	p.SpotCapacity.Pools = []policy.SpotPool{{Key: "aws/us-east-1a/H100", Cloud: pricing.AWS, Zone: "us-east-1a", GPU: pricing.H100, GPUs: 16},
		{Key: "aws/*/*", Cloud: pricing.AWS, Zone: "*", GPUs: 0}}
	plan, err = Solve(Input{Catalog: h100Catalog(5), Policy: p, Now: testNow})
	if !errors.Is(err, ErrInfeasible) || plan == nil {
		t.Fatalf("err %v: zone b has no spot by policy, want 4 of 6 blocked", err)
	}
	if z := zonesOf(plan); z["us-east-1a"] != 2 || len(plan.Blocked) != 4 {
		t.Fatalf("zones %v blocked %d, want 2 in us-east-1a (policy: 16 GPUs) and 4 blocked", z, len(plan.Blocked))
	}
	if plan.SpotPools[0].Source != "policy" || plan.SpotPools[0].CapacityGPUs != 16 {
		t.Errorf("pools %+v", plan.SpotPools)
	}
}

// TestSpotPoolRowsInModel: the model an exact solver gets carries the
// pool rows, named, with the pool capacity.
func TestSpotPoolRowsInModel(t *testing.T) {
	m, err := BuildModel(Input{Catalog: h100Catalog(0), Policy: spotJobs(10), Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, r := range m.Rows {
		if strings.HasPrefix(r.Name, "spot pool aws/us-east-1") {
			rows++
			if r.Cap != 64 || len(r.Terms) != 10 {
				t.Errorf("row %s cap %g with %d terms", r.Name, r.Cap, len(r.Terms))
			}
		}
	}
	if rows != 2 {
		t.Errorf("%d spot pool rows, want 2: %+v", rows, m.Rows)
	}
}

// TestModelPlansOnTheSameOffers: the model an exact solver gets has the
// options Solve plans on, no more: a spot price equal to on-demand is not a
// spot option in either (a spot-only job then has none), and a real
// discount is.
func TestModelPlansOnTheSameOffers(t *testing.T) {
	for _, tc := range []struct {
		spot    float64
		options int
	}{{98.32, 0}, {120, 0}, {30, 1}} {
		cat := pricing.NewCatalog([]pricing.Offer{{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge",
			GPU: pricing.H100, GPUCount: 8, GPUMemoryGiB: 80, OnDemandPrice: 98.32, SpotPrice: tc.spot}}, testNow.Add(-time.Hour), "test")
		p := spotJobs(1)
		m, err := BuildModel(Input{Catalog: cat, Policy: p, Now: testNow})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, c := range m.Costs {
			got += len(c)
		}
		if got != tc.options {
			t.Errorf("spot $%g, on-demand $98.32: model has %d options, want %d", tc.spot, got, tc.options)
		}
		_, err = Solve(Input{Catalog: cat, Policy: p, Now: testNow})
		if (tc.options == 0) != errors.Is(err, ErrInfeasible) {
			t.Errorf("spot $%g: Solve says %v, the model has %d options", tc.spot, err, got)
		}
	}
}

// TestScheduledJobCostedPerPeriod: a nightly job costs 30 runs a month;
// budgets see the monthly figure; a run must end before the next.
func TestScheduledJobCostedPerPeriod(t *testing.T) {
	cat := h100Catalog(0)
	mk := func(work float64) *policy.Policy {
		p := &policy.Policy{File: "nightly.yaml", Horizon: 720 * time.Hour, Workloads: []policy.Workload{{
			Name: "nightly-finetune", Team: "ml", Kind: policy.Training, Spot: policy.SpotNever, Schedule: "0 2 * * *",
			GPU: policy.GPUNeed{Count: 8}, WorkGPUHours: work, ReferenceGPU: pricing.H100,
		}}}
		p.SetDefaults()
		return p
	}
	plan, err := Solve(Input{Catalog: cat, Policy: mk(40), Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	pl := plan.Placements[0]
	perRun := 98.32 * 5 // 40 GPU-hours on 8 H100s: 5h
	if pl.RunsPerMonth != 30 || pl.RunsInHorizon != 30 || math.Abs(pl.CostPerRun-perRun) > 0.01 || math.Abs(pl.ExpectedCost-30*perRun) > 0.05 || math.Abs(pl.MonthlyCost-30*perRun) > 0.05 {
		t.Fatalf("runs %v/%v, per run %.2f, cost %.2f, monthly %.2f; want 30 × %.2f", pl.RunsPerMonth, pl.RunsInHorizon, pl.CostPerRun, pl.ExpectedCost, pl.MonthlyCost, perRun)
	}
	if pl.DeadlineHours != 24 || pl.Schedule != "0 2 * * *" {
		t.Errorf("deadline %v schedule %q", pl.DeadlineHours, pl.Schedule)
	}
	if b := pl.Breakdown; math.Abs(b.Compute+b.PreemptionLoss+b.Restart-pl.ExpectedCost) > 0.05 {
		t.Errorf("breakdown %+v does not add up to %.2f", b, pl.ExpectedCost)
	}
	joined := strings.Join(pl.Explanation, "\n")
	if !strings.Contains(joined, `schedule "0 2 * * *" (daily at 02:00 UTC): 30 runs/month × $492 a run = $14,748/month`) {
		t.Errorf("explanation:\n%s", joined)
	}

	// A budget of 20 runs a month cannot hold 30.
	p := mk(40)
	p.Budgets = []policy.Budget{{Name: "ml", Team: "ml", MonthlyUSD: 20 * perRun}}
	if _, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow}); !errors.Is(err, ErrInfeasible) || !strings.Contains(err.Error(), "budget") {
		t.Errorf("budget of 20 runs: err %v, want infeasible on the budget", err)
	}
	// Twice the horizon: the plan's cost doubles, the budget figure not.
	p = mk(40)
	p.Horizon = 1440 * time.Hour
	plan, err = Solve(Input{Catalog: cat, Policy: p, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if pl := plan.Placements[0]; pl.RunsInHorizon != 60 || math.Abs(pl.MonthlyCost-30*perRun) > 0.05 {
		t.Errorf("horizon 1440h: %v runs, monthly %.2f", pl.RunsInHorizon, pl.MonthlyCost)
	}
	// 240 GPU-hours is a 30h run: it cannot end before the next night's.
	_, err = Solve(Input{Catalog: cat, Policy: mk(240), Now: testNow})
	var ie *InfeasibleError
	if !errors.As(err, &ie) || ie.Blocked[0].Constraint != "deadline" || !strings.Contains(ie.Blocked[0].Reason, "deadline 24h") {
		t.Errorf("30h nightly run: %v", err)
	}
}

// TestLoadProfileCosting: a service is laid out for its profile's peak and
// costed at its mean; the request-rate form gives the same replicas.
func TestLoadProfileCosting(t *testing.T) {
	t4 := pricing.Offer{Cloud: pricing.GCP, Region: "us-central1", Zone: "us-central1-a", InstanceType: "n1-t4", GPU: pricing.T4, GPUCount: 1, GPUMemoryGiB: 16, OnDemandPrice: 0.5}
	cat := pricing.NewCatalog([]pricing.Offer{t4}, testNow.Add(-time.Hour), "test")
	byHour := make([]int, 24)
	rates := make([]float64, 24)
	for h := range byHour {
		byHour[h], rates[h] = 2, 40
		if h >= 9 && h < 17 {
			byHour[h], rates[h] = 10, 200
		}
	}
	for _, tc := range []struct {
		name string
		load *policy.LoadProfile
	}{
		{"replicas", &policy.LoadProfile{ReplicasByHour: byHour}},
		{"requests", &policy.LoadProfile{RequestsPerSecond: rates, RequestsPerReplica: 40}}, // 40 rps × 0.5 utilisation = 20 per replica
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &policy.Policy{File: "svc.yaml", Horizon: 720 * time.Hour, Workloads: []policy.Workload{{
				Name: "chat", Kind: policy.Inference, Spot: policy.SpotNever, GPU: policy.GPUNeed{Count: 1},
				Replicas: policy.Replicas{Min: 2, Max: 10, TargetUtilization: 0.5}, Load: tc.load,
			}}}
			p.SetDefaults()
			plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			pl := plan.Placements[0]
			mean := (8*10 + 16*2) / 24.0
			if want := mean * 0.5 * 720; math.Abs(pl.ExpectedCost-want) > 0.05 {
				t.Errorf("cost %.2f, want mean %.3f replicas × $0.5 × 720h = %.2f", pl.ExpectedCost, mean, want)
			}
			if pl.Instances != 10 || pl.GPUs != 10 || pl.Load == nil || pl.Load.PeakReplicas != 10 || pl.Load.MinReplicas != 2 || math.Abs(pl.Load.MeanReplicas-4.67) > 0.01 {
				t.Errorf("instances %d gpus %d load %+v", pl.Instances, pl.GPUs, pl.Load)
			}
			if !strings.Contains(strings.Join(pl.Explanation, "\n"), "2–10 replicas, mean 4.7") {
				t.Errorf("explanation: %q", pl.Explanation)
			}
			// A quota under the peak keeps the layout out, although the mean fits.
			p.Quotas = []policy.Quota{{Cloud: pricing.GCP, MaxGPUs: 8}}
			if _, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow}); !errors.Is(err, ErrInfeasible) {
				t.Errorf("quota 8 < peak 10: %v", err)
			}
		})
	}
}

// TestSpotPoolForbiddenByPolicy: with spot_capacity 0 in every pool a
// spot-only job is blocked on spot capacity, not on its spot policy.
func TestSpotPoolForbiddenByPolicy(t *testing.T) {
	p := spotJobs(1)
	p.SpotCapacity.Pools = []policy.SpotPool{{Key: "aws/*/*", Cloud: pricing.AWS, Zone: "*", GPUs: 0}}
	_, err := Solve(Input{Catalog: h100Catalog(0), Policy: p, Now: testNow})
	var ie *InfeasibleError
	if !errors.As(err, &ie) || ie.Blocked[0].Constraint != "spot_capacity" || !strings.Contains(ie.Blocked[0].Reason, "no allowed spot pool gives 8 spot GPUs") {
		t.Fatalf("err %v", err)
	}
}
