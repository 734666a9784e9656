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

// tinyCatalog has one A100 and one H100 shape per cloud, with spot prices,
// and a T4 box: small enough to reason about by hand.
func tinyCatalog() *pricing.Catalog {
	mk := func(c pricing.Cloud, region, zone, it string, g pricing.GPUModel, n int, od, spot, rate float64) pricing.Offer {
		s, _ := pricing.Spec(g)
		return pricing.Offer{Cloud: c, Region: region, Zone: zone, InstanceType: it, GPU: g, GPUCount: n, GPUMemoryGiB: s.MemoryGiB,
			OnDemandPrice: od, SpotPrice: spot, Spot: pricing.SpotSignal{InterruptionsPerHour: rate}}
	}
	return pricing.NewCatalog([]pricing.Offer{
		mk(pricing.AWS, "us-east-1", "use1-az1", "p4d.24xlarge", pricing.A100_40, 8, 32.77, 12.0, 0.05),
		mk(pricing.AWS, "us-east-1", "use1-az1", "p5.48xlarge", pricing.H100, 8, 98.32, 40.0, 0.05),
		mk(pricing.GCP, "us-central1", "us-central1-a", "a2-highgpu-8g", pricing.A100_40, 8, 29.39, 8.0, 0.03),
		mk(pricing.GCP, "us-central1", "us-central1-b", "g2-standard-4", pricing.L4, 1, 0.71, 0.28, 0.03),
		mk(pricing.Azure, "eastus", "", "Standard_NC4as_T4_v3", pricing.T4, 1, 0.53, 0.06, 0.025),
		mk(pricing.AWS, "us-east-1", "use1-az2", "g4dn.xlarge", pricing.T4, 1, 0.526, 0.2, 0.02),
		mk(pricing.AWS, "us-east-1", "use1-az3", "g4dn.xlarge", pricing.T4, 1, 0.526, 0.21, 0.02),
		mk(pricing.GCP, "us-central1", "us-central1-a", "n1-standard-4+1xt4", pricing.T4, 1, 0.54, 0.16, 0.03),
	}, testNow.Add(-time.Hour), "tiny")
}

func job(name string, gpuHours float64, deadline time.Duration, spot policy.SpotPolicy) policy.Workload {
	return policy.Workload{Name: name, Team: "t", Kind: policy.Training, GPU: policy.GPUNeed{Count: 8, MinMemoryGiB: 40},
		WorkGPUHours: gpuHours, ReferenceGPU: pricing.A100_40, Deadline: deadline,
		CheckpointInterval: time.Hour, RestartOverhead: 15 * time.Minute, Spot: spot}
}

func a100Only(w policy.Workload) policy.Workload {
	w.GPU.Models = []pricing.GPUModel{pricing.A100_40}
	return w
}

func TestSolveDecisions(t *testing.T) {
	tests := []struct {
		name       string
		w          policy.Workload
		quotas     []policy.Quota
		budgets    []policy.Budget
		wantIT     string
		wantCap    pricing.CapacityType
		wantRunner string // substring of the runner-up's constraint
		wantReason string // substring of the runner-up's reason
	}{
		{name: "spot prefer, no deadline: cheapest spot A100",
			w: job("a", 800, 0, policy.SpotPrefer), wantIT: "a2-highgpu-8g", wantCap: pricing.Spot,
			wantRunner: "memory", wantReason: "needs 8×T4 with 16 GiB < min 40 GiB"},
		{name: "deadline leaves no spot margin: on-demand wins, spot is the runner-up",
			// 800 A100-h on one 8×A100 instance (the reference shape) = 100h;
			// spot adds ~2%: 102.3h > 110/1.1 = 100h
			w: a100Only(job("a", 800, 110*time.Hour, policy.SpotPrefer)), wantIT: "a2-highgpu-8g", wantCap: pricing.OnDemand,
			wantRunner: "deadline", wantReason: "spot margin"},
		{name: "tight deadline: only H100 is fast enough",
			w: job("a", 800, 60*time.Hour, policy.SpotPrefer), wantIT: "p5.48xlarge", wantCap: pricing.Spot,
			wantRunner: "deadline", wantReason: "> deadline 60h"},
		{name: "no deadline but the spot policy: spot is the runner-up",
			w: job("a", 800, 0, policy.SpotNever), wantIT: "a2-highgpu-8g", wantCap: pricing.OnDemand, wantRunner: "spot_policy"},
		{name: "spot never",
			w: job("a", 800, 0, policy.SpotNever), wantIT: "a2-highgpu-8g", wantCap: pricing.OnDemand,
			wantRunner: "spot_policy", wantReason: `spot policy is "never"`},
		{name: "quota on gcp A100 pushes to aws",
			w: job("a", 800, 0, policy.SpotPrefer), quotas: []policy.Quota{{Cloud: pricing.GCP, Family: "A100", MaxGPUs: 4}},
			wantIT: "p4d.24xlarge", wantCap: pricing.Spot, wantRunner: "quota", wantReason: "more than quota gcp/*/A100 (max 4 GPUs)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &policy.Policy{File: "t.yaml", Horizon: 720 * time.Hour, Workloads: []policy.Workload{tt.w}, Quotas: tt.quotas, Budgets: tt.budgets}
			plan, err := Solve(Input{Catalog: tinyCatalog(), Policy: p, Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			pl := plan.Placements[0]
			if pl.InstanceType != tt.wantIT || pl.Capacity != tt.wantCap {
				t.Fatalf("placed on %s %s, want %s %s\n%s", pl.InstanceType, pl.Capacity, tt.wantIT, tt.wantCap, strings.Join(pl.Explanation, "\n"))
			}
			if pl.RunnerUp == nil {
				t.Fatal("no runner-up")
			}
			if pl.RunnerUp.Constraint != tt.wantRunner || !strings.Contains(pl.RunnerUp.Reason, tt.wantReason) {
				t.Errorf("runner-up %s: %q, want %s containing %q", pl.RunnerUp.Constraint, pl.RunnerUp.Reason, tt.wantRunner, tt.wantReason)
			}
			checkPlan(t, tinyCatalog(), p, plan)
		})
	}
}

func TestSolveInfeasible(t *testing.T) {
	big := job("big", 800, 0, policy.SpotPrefer)
	big.GPU.MinMemoryGiB = 200
	slow := job("slow", 8000, 10*time.Hour, policy.SpotPrefer)
	tests := []struct {
		name    string
		ws      []policy.Workload
		quotas  []policy.Quota
		budgets []policy.Budget
		want    []Blocked // Workload and Constraint compared, Reason substring
	}{
		{name: "memory", ws: []policy.Workload{big}, want: []Blocked{{Workload: "big", Constraint: "memory", Reason: "largest allowed GPU has 80 GiB"}}},
		{name: "deadline", ws: []policy.Workload{slow}, want: []Blocked{{Workload: "slow", Constraint: "deadline", Reason: "> deadline 10h"}}},
		{name: "quota too small for anything", ws: []policy.Workload{job("a", 100, 0, policy.SpotPrefer)},
			quotas: []policy.Quota{{MaxGPUs: 4}}, want: []Blocked{{Workload: "a", Constraint: "quota", Reason: "needs 8 GPUs"}}},
		{name: "two jobs, room for one", ws: []policy.Workload{job("a", 100, 0, policy.SpotPrefer), job("b", 200, 0, policy.SpotPrefer)},
			quotas: []policy.Quota{{MaxGPUs: 8}}, want: []Blocked{{Workload: "", Constraint: "quota", Reason: "has 0 of 8 left (taken by "}}},
		{name: "budget", ws: []policy.Workload{job("a", 800, 0, policy.SpotPrefer)},
			budgets: []policy.Budget{{Team: "t", MonthlyUSD: 100}}, want: []Blocked{{Workload: "a", Constraint: "budget", Reason: "budget of team t is $100"}}},
		{name: "spot only on a cloud without spot", ws: []policy.Workload{func() policy.Workload {
			w := job("a", 10, 0, policy.SpotOnly)
			w.GPU.Models = []pricing.GPUModel{pricing.H200}
			return w
		}()}, want: []Blocked{{Workload: "a", Constraint: "gpu_model", Reason: "no offer of GPU [H200]"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &policy.Policy{File: "t.yaml", Horizon: 720 * time.Hour, Workloads: tt.ws, Quotas: tt.quotas, Budgets: tt.budgets}
			_, err := Solve(Input{Catalog: tinyCatalog(), Policy: p, Now: testNow})
			var ie *InfeasibleError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInfeasible) {
				t.Fatalf("err = %v, want an InfeasibleError", err)
			}
			if len(ie.Blocked) != len(tt.want) {
				t.Fatalf("blocked %+v, want %+v", ie.Blocked, tt.want)
			}
			for i, b := range ie.Blocked {
				w := tt.want[i]
				if (w.Workload != "" && b.Workload != w.Workload) || b.Constraint != w.Constraint || !strings.Contains(b.Reason, w.Reason) {
					t.Errorf("blocked %+v, want %+v", b, w)
				}
			}
		})
	}
}

func TestSolveBadInput(t *testing.T) {
	if _, err := Solve(Input{}); !errors.Is(err, ErrInput) {
		t.Errorf("err = %v, want ErrInput", err)
	}
}

// TestMeasuredSpeedChangesChoice shows the speed table is an input: a
// benchmark that finds the aws H100 box slow moves a deadline job away.
func TestMeasuredSpeedChangesChoice(t *testing.T) {
	p := &policy.Policy{File: "t.yaml", Horizon: 720 * time.Hour, Workloads: []policy.Workload{job("a", 800, 60*time.Hour, policy.SpotPrefer)}}
	sp := DefaultSpeeds()
	plan, err := Solve(Input{Catalog: tinyCatalog(), Policy: p, Speeds: sp, Now: testNow})
	if err != nil || plan.Placements[0].GPU != pricing.H100 {
		t.Fatalf("with spec speeds: %v, %+v", err, plan)
	}
	sp.ByInstance = map[string]Throughput{InstanceKey(pricing.AWS, "p5.48xlarge"): {TFLOPS: 400, MemoryBandwidthGBs: 2000, Source: "benchmark"}}
	_, err = Solve(Input{Catalog: tinyCatalog(), Policy: p, Speeds: sp, Now: testNow})
	if !errors.Is(err, ErrInfeasible) {
		t.Fatalf("a slow measured H100 should miss the 60h deadline; got %v", err)
	}
}

func TestInferenceSpreadAndHedge(t *testing.T) {
	svc := policy.Workload{Name: "svc", Kind: policy.Inference, GPU: policy.GPUNeed{Count: 1, MinMemoryGiB: 16},
		Replicas: policy.Replicas{Min: 3, Max: 6}, Spread: policy.Spread{MinZones: 2, MinClouds: 2}, Spot: policy.SpotPrefer}
	tests := []struct {
		name     string
		max      int
		spot     policy.SpotPolicy
		wantCap  pricing.CapacityType
		wantReps int
	}{
		{"hedged spot: 3 needed + 1 so one zone's loss leaves 3", 6, policy.SpotPrefer, pricing.Spot, 4},
		{"max = min leaves no room to hedge: on-demand", 3, policy.SpotPrefer, pricing.OnDemand, 3},
		{"never", 6, policy.SpotNever, pricing.OnDemand, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := svc
			w.Replicas.Max, w.Spot = tt.max, tt.spot
			p := &policy.Policy{File: "t.yaml", Horizon: 720 * time.Hour, Workloads: []policy.Workload{w}}
			plan, err := Solve(Input{Catalog: tinyCatalog(), Policy: p, Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			pl := plan.Placements[0]
			if pl.Capacity != tt.wantCap || pl.Instances != tt.wantReps {
				t.Errorf("%s × %d, want %s × %d\n%s", pl.Capacity, pl.Instances, tt.wantCap, tt.wantReps, strings.Join(pl.Explanation, "\n"))
			}
			checkPlan(t, tinyCatalog(), p, plan)
		})
	}
}

// TestFleetRuleOfThumb runs the Go-built fleet on the embedded snapshot:
// big tensor GPUs should win training, small ones inference, and every
// placement must explain itself.
func TestFleetRuleOfThumb(t *testing.T) {
	cat := embedded(t)
	p := fleetPolicy()
	plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, cat, p, plan)
	want := map[string][]pricing.GPUModel{
		// Big-memory tensor GPUs; the snapshot's p6-b200 spot rows make
		// B200 the cheapest of them per unit of work.
		"llm-finetune": {pricing.A100_40, pricing.A100_80, pricing.H100, pricing.H200, pricing.B200, pricing.B300, pricing.GB200},
		"chat-api":     {pricing.T4, pricing.L4},
	}
	for _, pl := range plan.Placements {
		if ms, ok := want[pl.Workload]; ok && !containsModel(ms, pl.GPU) {
			t.Errorf("%s on %s, want one of %v; explanation:\n%s", pl.Workload, pl.GPU, ms, strings.Join(pl.Explanation, "\n"))
		}
		if pl.RunnerUp == nil || pl.RunnerUp.Reason == "" {
			t.Errorf("%s: no runner-up", pl.Workload)
		}
		if pl.Savings < 0 {
			t.Errorf("%s: negative savings %v", pl.Workload, pl.Savings)
		}
	}
	if plan.Totals.SavingsPercent <= 0 || plan.Bound.GapPercent != 0 {
		t.Errorf("totals %+v bound %+v", plan.Totals, plan.Bound)
	}
}

func TestSolveDeterministic(t *testing.T) {
	cat := embedded(t)
	var first string
	for i := 0; i < 3; i++ {
		plan, err := Solve(Input{Catalog: cat, Policy: fleetPolicy(), Now: testNow})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := plan.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b.String()
		} else if b.String() != first {
			t.Fatal("two runs gave different plans")
		}
	}
}

func TestSolveEmptyPolicy(t *testing.T) {
	plan, err := Solve(Input{Catalog: tinyCatalog(), Policy: &policy.Policy{File: "empty.yaml"}, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Placements) != 0 || plan.Totals.ExpectedCost != 0 || plan.HorizonHours != 720 {
		t.Errorf("empty policy: %+v", plan)
	}
}

// TestPolicySpotDefaults: a policy's per-cloud spot default replaces the
// built-in one where the catalog has no observation, and only there.
func TestPolicySpotDefaults(t *testing.T) {
	offers := tinyCatalog().Offers()
	for i := range offers {
		if offers[i].Cloud == pricing.GCP {
			offers[i].Spot = pricing.SpotSignal{} // no observation
		}
	}
	cat := pricing.NewCatalog(offers, testNow, "tiny")
	w := a100Only(job("a", 800, 0, policy.SpotOnly))
	w.Limits.Clouds = []pricing.Cloud{pricing.GCP}
	for _, tt := range []struct {
		defaults map[pricing.Cloud]float64
		want     float64
	}{
		{nil, TraceGPUInterruptionsPerHour}, // the trace-derived default
		{map[pricing.Cloud]float64{pricing.GCP: 0.1}, 0.1},
	} {
		p := &policy.Policy{File: "t.yaml", Horizon: 720 * time.Hour, SpotDefaults: tt.defaults, Workloads: []policy.Workload{w}}
		plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
		if err != nil {
			t.Fatal(err)
		}
		pl := plan.Placements[0]
		if pl.InterruptionsPerHour != tt.want || !pl.SpotSignalDefault {
			t.Errorf("defaults %v: rate %v (default %v), want %v", tt.defaults, pl.InterruptionsPerHour, pl.SpotSignalDefault, tt.want)
		}
	}
}

func TestBucketInterruptionRate(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"<5%", 0.229 * 2.5 / 25, true}, {"5-10%", 0.229 * 7.5 / 25, true}, {">20%", 0.229, true},
		{"0-5", 0.229 * 2.5 / 25, true}, {"20+", 0.229, true}, {"15-20", 0.229 * 17.5 / 25, true},
		{"", 0, false}, {"high", 0, false}, {"10-5", 0, false}, {"<0%", 0, false},
	} {
		got, ok := BucketInterruptionRate(tt.in)
		if ok != tt.ok || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("BucketInterruptionRate(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
