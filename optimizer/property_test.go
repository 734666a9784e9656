package optimizer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// randCatalog is a small synthetic catalog: a few offers of random GPUs in
// random places, with random prices and interruption rates.
func randCatalog(r *rand.Rand, n int) *pricing.Catalog {
	models := []pricing.GPUModel{pricing.T4, pricing.L4, pricing.A10G, pricing.A100_40, pricing.A100_80, pricing.H100}
	regions := map[pricing.Cloud][]string{
		pricing.AWS:   {"us-east-1", "eu-west-1"},
		pricing.GCP:   {"us-central1", "europe-west4"},
		pricing.Azure: {"eastus", "westeurope"},
	}
	var offers []pricing.Offer
	for i := 0; i < n; i++ {
		c := pricing.Clouds()[r.IntN(3)]
		reg := regions[c][r.IntN(2)]
		zone := ""
		if c != pricing.Azure {
			zone = fmt.Sprintf("%s-%c", reg, 'a'+r.IntN(2))
		}
		m := models[r.IntN(len(models))]
		spec, _ := pricing.Spec(m)
		count := []int{1, 2, 4, 8}[r.IntN(4)]
		perGPU := spec.TensorTFLOPS / 100 * (0.5 + r.Float64())
		o := pricing.Offer{Cloud: c, Region: reg, Zone: zone, InstanceType: fmt.Sprintf("t%d", i), GPU: m, GPUCount: count,
			GPUMemoryGiB: spec.MemoryGiB, OnDemandPrice: round(perGPU*float64(count), 3)}
		if r.IntN(3) > 0 {
			o.SpotPrice = round(o.OnDemandPrice*(0.2+0.5*r.Float64()), 3)
			o.Spot.InterruptionsPerHour = []float64{0.005, 0.02, 0.1}[r.IntN(3)]
		}
		if r.IntN(8) == 0 {
			o.OnDemandPrice = 0
			if o.SpotPrice == 0 {
				o.SpotPrice = 1
			}
		}
		offers = append(offers, o)
	}
	// Solve plans on the sanity-filtered catalog; the properties are
	// checked against the same offers.
	return pricing.NewCatalog(offers, testNow.Add(-24*time.Hour), "random").ForPlanning()
}

// randPolicy is a random policy over randCatalog's places.
func randPolicy(r *rand.Rand, nw int, jobsOnly bool) *policy.Policy {
	p := &policy.Policy{File: "random.yaml", Horizon: 720 * time.Hour}
	if r.IntN(3) == 0 {
		p.Residency = []string{"us"}
	}
	spots := []policy.SpotPolicy{policy.SpotNever, policy.SpotPrefer, policy.SpotOnly}
	for i := 0; i < nw; i++ {
		w := policy.Workload{Name: fmt.Sprintf("w%d", i), Team: []string{"a", "b"}[r.IntN(2)], Spot: spots[r.IntN(3)],
			RestartOverhead: time.Duration(r.IntN(30)) * time.Minute}
		w.GPU.Count = []int{1, 2, 4, 8}[r.IntN(4)]
		w.GPU.MinMemoryGiB = []float64{0, 16, 24, 40, 80}[r.IntN(5)]
		if r.IntN(4) == 0 {
			w.GPU.Models = []pricing.GPUModel{pricing.A100_80, pricing.H100}
		}
		if jobsOnly || r.IntN(3) > 0 {
			w.Kind = []policy.Kind{policy.Training, policy.Batch}[r.IntN(2)]
			w.WorkGPUHours = float64(10 + r.IntN(500))
			w.ReferenceGPU = pricing.A100_80
			if r.IntN(2) == 0 {
				w.Deadline = time.Duration(5+r.IntN(200)) * time.Hour
			}
			if r.IntN(3) > 0 {
				w.CheckpointInterval = time.Duration(10+r.IntN(120)) * time.Minute
			}
		} else {
			w.Kind = policy.Inference
			w.GPU.Count = 1
			w.Replicas.Min = 1 + r.IntN(4)
			w.Replicas.Max = w.Replicas.Min + r.IntN(5)
			w.Spread = policy.Spread{MinZones: r.IntN(3), MinClouds: r.IntN(3)}
		}
		p.Workloads = append(p.Workloads, w)
	}
	for i, n := 0, r.IntN(3); i < n; i++ {
		q := policy.Quota{MaxGPUs: 4 + r.IntN(16)}
		switch r.IntN(3) {
		case 0:
			q.Cloud = pricing.Clouds()[r.IntN(3)]
		case 1:
			q.Family = []string{"A100", "H100", "T4"}[r.IntN(3)]
		default:
			q.Region = "us-*"
		}
		p.Quotas = append(p.Quotas, q)
	}
	if r.IntN(2) == 0 {
		p.Budgets = append(p.Budgets, policy.Budget{Team: "a", MonthlyUSD: float64(200 + r.IntN(3000))})
	}
	return p
}

// checkPlan verifies every hard constraint on a plan from its public
// fields alone, independently of the solver's internals.
func checkPlan(t *testing.T, cat *pricing.Catalog, p *policy.Policy, plan *Plan) {
	t.Helper()
	offers := map[string]pricing.Offer{}
	for _, o := range cat.Offers() {
		offers[string(o.Cloud)+"/"+o.InstanceType+"/"+o.Region+"/"+o.Zone] = o
	}
	if len(plan.Placements) != len(p.Workloads) {
		t.Fatalf("%d placements for %d workloads", len(plan.Placements), len(p.Workloads))
	}
	quotaUse := make([]int, len(p.Quotas))
	budgetUse := make([]float64, len(p.Budgets))
	total := 0.0
	for i, pl := range plan.Placements {
		w := &p.Workloads[i]
		if pl.Workload != w.Name {
			t.Fatalf("placement %d is %q, want %q", i, pl.Workload, w.Name)
		}
		gpus, replicas := 0, 0
		zones, clouds := map[string]int{}, map[pricing.Cloud]bool{}
		spotByZone := map[string]int{}
		for _, g := range pl.Groups {
			o, ok := offers[string(g.Cloud)+"/"+g.InstanceType+"/"+g.Region+"/"+g.Zone]
			if !ok {
				t.Fatalf("%s: group %+v is no catalog offer", w.Name, g)
			}
			if len(w.GPU.Models) > 0 && !slices.Contains(w.GPU.Models, o.GPU) {
				t.Errorf("%s: GPU %s not allowed", w.Name, o.GPU)
			}
			if o.GPUMemoryGiB < w.GPU.MinMemoryGiB {
				t.Errorf("%s: %s has %g GiB < %g", w.Name, o.GPU, o.GPUMemoryGiB, w.GPU.MinMemoryGiB)
			}
			if !policy.RegionAllowed(p, w, o.Cloud, o.Region, o.Zone) {
				t.Errorf("%s: %s %s not allowed", w.Name, o.Cloud, o.Region)
			}
			if (w.Spot == policy.SpotNever && g.Capacity == pricing.Spot) || (w.Spot == policy.SpotOnly && g.Capacity == pricing.OnDemand) {
				t.Errorf("%s: capacity %s breaks spot policy %s", w.Name, g.Capacity, w.Spot)
			}
			if _, sold := o.Price(g.Capacity); !sold {
				t.Errorf("%s: %s not sold as %s", w.Name, o.InstanceType, g.Capacity)
			}
			n := g.Instances * o.GPUCount
			gpus += n
			replicas += g.Instances
			for qi, q := range p.Quotas {
				if quotaMatches(q, &o) {
					quotaUse[qi] += n
				}
			}
			zk := zoneKey(&o)
			zones[zk] += g.Instances
			clouds[o.Cloud] = true
			if g.Capacity == pricing.Spot {
				spotByZone[zk] += g.Instances
			}
		}
		if pl.GPUs != gpus {
			t.Errorf("%s: gpus %d, groups sum to %d", w.Name, pl.GPUs, gpus)
		}
		monthly := pl.ExpectedCost
		if w.Kind == policy.Inference {
			monthly = pl.ExpectedCost * monthHours / p.Horizon.Hours()
			minR := max(1, w.Replicas.Min)
			if replicas < minR || replicas > max(minR, w.Replicas.Max) {
				t.Errorf("%s: %d replicas outside [%d, %d]", w.Name, replicas, minR, w.Replicas.Max)
			}
			if len(zones) < w.Spread.MinZones || len(clouds) < w.Spread.MinClouds {
				t.Errorf("%s: %d zones / %d clouds, want ≥ %d / %d", w.Name, len(zones), len(clouds), w.Spread.MinZones, w.Spread.MinClouds)
			}
			worst := 0
			for _, n := range spotByZone {
				worst = max(worst, n)
			}
			if replicas-worst < minR {
				t.Errorf("%s: losing the spot replicas of one zone leaves %d < min %d", w.Name, replicas-worst, minR)
			}
		} else {
			if gpus != max(1, w.GPU.Count) {
				t.Errorf("%s: %d GPUs, want %d", w.Name, gpus, w.GPU.Count)
			}
			if d := w.Deadline.Hours(); d > 0 {
				limit := d
				if pl.Capacity == pricing.Spot && w.Spot == policy.SpotPrefer {
					limit = d / (1 + SpotDeadlineMargin)
				}
				if pl.ExpectedHours > limit+0.01 {
					t.Errorf("%s: expected %.2fh > limit %.2fh (deadline %.0fh, %s)", w.Name, pl.ExpectedHours, limit, d, pl.Capacity)
				}
			}
		}
		for bi, b := range p.Budgets {
			if (budgetRow{b}).matches(w) {
				budgetUse[bi] += monthly
			}
		}
		total += pl.ExpectedCost
		if pl.RunnerUp != nil && pl.RunnerUp.Reason == "" {
			t.Errorf("%s: runner-up without a reason", w.Name)
		}
		if len(pl.Explanation) == 0 {
			t.Errorf("%s: no explanation", w.Name)
		}
	}
	for qi, q := range p.Quotas {
		if quotaUse[qi] > q.MaxGPUs {
			t.Errorf("%s: %d GPUs used", quotaName(q), quotaUse[qi])
		}
	}
	for bi, b := range p.Budgets {
		if budgetUse[bi] > b.MonthlyUSD*(1+1e-6)+0.05*float64(len(p.Workloads)) {
			t.Errorf("budget %s: $%.2f spent of $%.2f", budgetName(b), budgetUse[bi], b.MonthlyUSD)
		}
	}
	if math.Abs(total-plan.Totals.ExpectedCost) > 0.01*float64(len(p.Workloads))+1e-9 {
		t.Errorf("placements sum to %.2f, totals say %.2f", total, plan.Totals.ExpectedCost)
	}
	// The Lagrangian (LP) bound can be far below the integer optimum on
	// small fleets, but it must be a positive bound, not a placeholder.
	if plan.Totals.ExpectedCost > 1 && plan.Bound.LowerBound <= 0 {
		t.Errorf("lower bound %.2f for a plan costing %.2f", plan.Bound.LowerBound, plan.Totals.ExpectedCost)
	}
	if plan.Bound.LowerBound > plan.Totals.ExpectedCost+0.01*float64(len(p.Workloads)) {
		t.Errorf("lower bound %.2f above the plan's cost %.2f", plan.Bound.LowerBound, plan.Totals.ExpectedCost)
	}
}

// TestPropertyConstraintsHold solves many random instances (jobs and
// services) and checks every plan against the constraints.
func TestPropertyConstraintsHold(t *testing.T) {
	feasible, infeasible := 0, 0
	for seed := uint64(0); seed < 400; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		cat := randCatalog(r, 6+r.IntN(30))
		p := randPolicy(r, 1+r.IntN(8), false)
		plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
		var ie *InfeasibleError
		switch {
		case errors.As(err, &ie):
			infeasible++
			if len(ie.Blocked) == 0 {
				t.Fatalf("seed %d: infeasible without a blocked workload", seed)
			}
			for _, b := range ie.Blocked {
				if b.Reason == "" || b.Constraint == "" {
					t.Errorf("seed %d: blocked %+v lacks a reason", seed, b)
				}
			}
			continue
		case err != nil:
			t.Fatalf("seed %d: %v", seed, err)
		}
		feasible++
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkPlan(t, cat, p, plan) })
	}
	t.Logf("%d feasible, %d infeasible instances", feasible, infeasible)
	if feasible < 50 || infeasible < 10 {
		t.Errorf("generator is lopsided: %d feasible, %d infeasible", feasible, infeasible)
	}
}

// bruteOption is one (offer, capacity) way to run a job, costed
// independently of the solver's ranker.
type bruteOption struct {
	offer pricing.Offer
	cost  float64
	cap   pricing.CapacityType
}

func bruteOptions(p *policy.Policy, cat *pricing.Catalog, w *policy.Workload) []bruteOption {
	var out []bruteOption
	sp := DefaultSpeeds()
	count := max(1, w.GPU.Count)
	for _, o := range cat.Offers() {
		if len(w.GPU.Models) > 0 && !slices.Contains(w.GPU.Models, o.GPU) {
			continue
		}
		if o.GPUMemoryGiB < w.GPU.MinMemoryGiB || count%o.GPUCount != 0 || o.GPUCount > count {
			continue
		}
		if !policy.RegionAllowed(p, w, o.Cloud, o.Region, o.Zone) {
			continue
		}
		inst := count / o.GPUCount
		rel, _ := sp.RelativeSpeed(&o, w.ReferenceGPU)
		// Work is measured on the reference shape (docs/plan.md).
		rg, ri := ReferenceShape(count)
		h := w.WorkGPUHours / (float64(count) * rel * ScalingEfficiency(o.GPUCount, inst) / ScalingEfficiency(rg, ri))
		for _, ct := range []pricing.CapacityType{pricing.OnDemand, pricing.Spot} {
			price, sold := o.Price(ct)
			if !sold || !spotAllows(w.Spot, ct) {
				continue
			}
			total := h
			if ct == pricing.Spot {
				rate := o.Spot.InterruptionsPerHour
				if rate == 0 {
					rate = DefaultInterruptionRate(o.Cloud, o.GPU)
				}
				e := estimateRun(h, rate*float64(inst), w.CheckpointInterval.Hours(), w.RestartOverhead.Hours())
				if !e.Finishes {
					continue
				}
				total = e.Total
			}
			if d := w.Deadline.Hours(); d > 0 {
				limit := d
				if ct == pricing.Spot && w.Spot == policy.SpotPrefer {
					limit = d / (1 + SpotDeadlineMargin)
				}
				if total > limit {
					continue
				}
			}
			out = append(out, bruteOption{o, price * float64(inst) * total, ct})
		}
	}
	return out
}

// TestBruteForceOptimum compares the solver with exhaustive search on small
// job-only instances with quotas and budgets.
func TestBruteForceOptimum(t *testing.T) {
	compared := 0
	for seed := uint64(0); seed < 1000; seed++ {
		r := rand.New(rand.NewPCG(seed, 2))
		cat := randCatalog(r, 5+r.IntN(8))
		p := randPolicy(r, 1+r.IntN(6), true)
		opts := make([][]bruteOption, len(p.Workloads))
		for i := range p.Workloads {
			opts[i] = bruteOptions(p, cat, &p.Workloads[i])
		}
		best := math.Inf(1)
		pick := make([]int, len(opts))
		var rec func(i int, cost float64)
		rec = func(i int, cost float64) {
			if cost >= best {
				return
			}
			if i == len(opts) {
				if bruteFits(p, opts, pick) {
					best = cost
				}
				return
			}
			for j := range opts[i] {
				pick[i] = j
				rec(i+1, cost+opts[i][j].cost)
			}
		}
		rec(0, 0)
		plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
		if math.IsInf(best, 1) {
			if !errors.Is(err, ErrInfeasible) {
				t.Errorf("seed %d: brute force finds no plan, solver returned %v", seed, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("seed %d: brute force optimum $%.2f, solver: %v", seed, best, err)
			continue
		}
		compared++
		got := plan.Totals.ExpectedCost
		if math.Abs(got-best) > 0.006*float64(len(p.Workloads)) {
			t.Errorf("seed %d: solver $%.2f, optimum $%.2f (lower bound %.2f)", seed, got, best, plan.Bound.LowerBound)
		}
		if plan.Bound.LowerBound > best+0.01 {
			t.Errorf("seed %d: lower bound %.2f > optimum %.2f", seed, plan.Bound.LowerBound, best)
		}
	}
	t.Logf("compared %d feasible instances with the brute-force optimum", compared)
	if compared < 50 {
		t.Errorf("only %d feasible instances compared", compared)
	}
}

func bruteFits(p *policy.Policy, opts [][]bruteOption, pick []int) bool {
	for _, q := range p.Quotas {
		n := 0
		for i, j := range pick {
			o := opts[i][j].offer
			if (q.Cloud == "" || q.Cloud == o.Cloud) && (q.Region == "" || globOK(q.Region, o.Region)) && (q.Family == "" || family(o.GPU) == q.Family) {
				n += max(1, p.Workloads[i].GPU.Count)
			}
		}
		if n > q.MaxGPUs {
			return false
		}
	}
	for _, b := range p.Budgets {
		sum := 0.0
		for i, j := range pick {
			if b.Team == "" || b.Team == p.Workloads[i].Team {
				sum += opts[i][j].cost
			}
		}
		if sum > b.MonthlyUSD {
			return false
		}
	}
	return true
}

func globOK(pattern, s string) bool { ok, _ := path.Match(pattern, s); return ok }

func family(m pricing.GPUModel) string { s, _ := pricing.Spec(m); return s.Family }

// FuzzSolve feeds random instances to Solve: it must never panic, and any
// plan it returns must meet every constraint. Run with
// go test ./optimizer -run '^$' -fuzz FuzzSolve -fuzztime 20s.
func FuzzSolve(f *testing.F) {
	for _, s := range []uint64{0, 7, 112, 4242} {
		f.Add(s, uint8(5), uint8(20), false)
	}
	f.Fuzz(func(t *testing.T, seed uint64, nw, no uint8, jobsOnly bool) {
		r := rand.New(rand.NewPCG(seed, uint64(nw)))
		cat := randCatalog(r, 1+int(no%64))
		p := randPolicy(r, 1+int(nw%16), jobsOnly)
		plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
		if err != nil {
			if !errors.Is(err, ErrInfeasible) {
				t.Fatal(err)
			}
			return
		}
		checkPlan(t, cat, p, plan)
	})
}
