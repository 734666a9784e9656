// Package hardgen generates hard fleet-placement instances for tests and
// benchmarks: a mix of multi-GPU training with deadlines, batch jobs,
// spot-only jobs without checkpoints and spread inference services, under
// overlapping quotas (cloud × GPU family, region globs, GPU families) and
// team budgets scaled to the edge of feasibility.
package hardgen

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// Options tune how tight the instance is.
type Options struct {
	// Tightness scales every quota and budget against what the
	// unconstrained plan uses (default 0.6: 40% of the capacity the
	// cheapest plan wants is taken away). Up to 300 workloads, caps are
	// loosened by 10% steps until Solve finds a plan, so the instance
	// ends at the feasibility edge; larger fleets raise each cap (and
	// each overfilled spot pool) to what one optimizer.QuickPlan takes
	// under the tightest caps.
	Tightness float64
	// Services is the share of inference services (default 0.15).
	Services float64
	// SpotPools, when above 0, sets the fleet-wide spot capacity per pool
	// (spot_capacity.default_gpus_per_pool) to this share of the most spot
	// GPUs the unconstrained plan puts in one pool, loosened with the
	// quotas, so spot pool rows bind too.
	SpotPools float64
}

// Plan generates the instance (n, seed, opt) and plans it as `gpubroker
// plan` would, an hour after the catalog's snapshot (the time Generate
// checks feasibility at): the one-off solve the hard-fleet tests bound.
func Plan(cat *pricing.Catalog, n int, seed uint64, opt Options) (*optimizer.Plan, error) {
	p, err := Generate(cat, n, seed, opt)
	if err != nil {
		return nil, err
	}
	return optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: cat.GeneratedAt.Add(time.Hour)})
}

// Generate returns a policy of n workloads over cat, deterministic for a
// seed. It errors when no loosening makes the instance feasible.
func Generate(cat *pricing.Catalog, n int, seed uint64, opt Options) (*policy.Policy, error) {
	if opt.Tightness <= 0 {
		opt.Tightness = 0.6
	}
	if opt.Services <= 0 {
		opt.Services = 0.15
	}
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	p := &policy.Policy{File: fmt.Sprintf("hard-%d-%d.yaml", n, seed), Horizon: 720 * time.Hour}
	for i := 0; i < n; i++ {
		p.Workloads = append(p.Workloads, workload(r, i, opt.Services))
	}
	now := cat.GeneratedAt.Add(time.Hour)
	// Replan: the generator needs a good plan and feasibility answers,
	// not the one-off plan's extra chain searches (and instances stay
	// what they were before those existed).
	free, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: now, Replan: true})
	if err != nil {
		// Workloads nothing can place are dropped: the instance is about
		// the fleet constraints.
		var ie *optimizer.InfeasibleError
		if !errors.As(err, &ie) || free == nil {
			return nil, err
		}
		bad := map[string]bool{}
		for _, b := range ie.Blocked {
			bad[b.Workload] = true
		}
		kept := p.Workloads[:0]
		for _, w := range p.Workloads {
			if !bad[w.Name] {
				kept = append(kept, w)
			}
		}
		p.Workloads = kept
	}
	type cf struct {
		cloud  pricing.Cloud
		family string
	}
	byCF, byFamily, byGlob := map[cf]int{}, map[string]int{}, map[string]int{}
	globs := []string{"us-*", "europe-*", "*east*", "*west*"}
	teamCost := map[string]float64{}
	for _, pl := range free.Placements {
		for _, g := range pl.Groups {
			s, _ := pricing.Spec(g.GPU)
			n := g.Instances * g.GPUsPerInstance
			byCF[cf{g.Cloud, s.Family}] += n
			byFamily[s.Family] += n
			for _, gl := range globs {
				if pricing.MatchAnyGlob([]string{gl}, g.Region) {
					byGlob[gl] += n
				}
			}
		}
		cost := pl.ExpectedCost
		if pl.Kind == string(policy.Inference) {
			cost = cost * 720 / p.Horizon.Hours()
		}
		teamCost[pl.Team] += cost
	}
	maxPool := 0
	for _, sp := range free.SpotPools {
		maxPool = max(maxPool, sp.UsedGPUs)
	}
	base := func(scale float64) ([]policy.Quota, []policy.Budget) {
		if opt.SpotPools > 0 && maxPool > 0 {
			p.SpotCapacity.DefaultGPUsPerPool = max(8, int(float64(maxPool)*opt.SpotPools*scale))
		}
		var qs []policy.Quota
		for _, c := range pricing.Clouds() {
			for _, s := range pricing.Specs() {
				if u := byCF[cf{c, s.Family}]; u >= 4 && !hasQuota(qs, c, s.Family) {
					qs = append(qs, policy.Quota{Cloud: c, Family: s.Family, MaxGPUs: max(1, int(float64(u)*opt.Tightness*scale))})
				}
			}
		}
		for _, gl := range globs {
			if u := byGlob[gl]; u >= 8 {
				qs = append(qs, policy.Quota{Region: gl, MaxGPUs: max(1, int(float64(u)*(opt.Tightness+0.25)*scale))})
			}
		}
		for _, s := range pricing.Specs() {
			if u := byFamily[s.Family]; u >= 8 && !hasFamily(qs, s.Family) {
				qs = append(qs, policy.Quota{Family: s.Family, MaxGPUs: max(1, int(float64(u)*(opt.Tightness+0.3)*scale))})
			}
		}
		var bs []policy.Budget
		for t := 0; t < 10; t++ {
			team := fmt.Sprintf("team%d", t)
			if c := teamCost[team]; c > 0 && t%2 == 0 {
				// Quotas push work onto dearer capacity: a budget a little
				// above the unconstrained spend binds.
				bs = append(bs, policy.Budget{Team: team, MonthlyUSD: float64(int(c * (1 + 0.15*opt.Tightness*scale)))})
			}
		}
		return qs, bs
	}
	// The scale of a step is multiplied up as the generator always did,
	// so that the instances of small fleets stay what they were.
	scaleAt := func(step int) float64 {
		scale := 1.0
		for range step {
			scale *= 1.1
		}
		return scale
	}
	if len(p.Workloads) <= fullSolveEdge {
		// Small fleets: the first step at which Solve itself finds a plan.
		for step := 0; step < maxSteps; step++ {
			p.Quotas, p.Budgets = base(scaleAt(step))
			if _, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: now, Replan: true}); err == nil {
				return p, nil
			}
		}
		return nil, fmt.Errorf("hardgen: no feasible instance for n=%d seed=%d", n, seed)
	}
	// Large fleets: a full Solve at a too-tight step spends minutes
	// proving little. Instead, one quick heuristic plan under the tightest
	// caps, and every quota, budget and spot pool raised to what that plan
	// takes: the plan proves the instance feasible, the rows it filled are
	// at the edge, and the rest stay at the tightest step.
	p.Quotas, p.Budgets = base(1)
	load, err := optimizer.QuickPlan(optimizer.Input{Catalog: cat, Policy: p, Now: now})
	if err != nil {
		return nil, fmt.Errorf("hardgen: n=%d seed=%d: %w", n, seed, err)
	}
	for i := range p.Quotas {
		p.Quotas[i].MaxGPUs = max(p.Quotas[i].MaxGPUs, int(math.Ceil(load.QuotaGPUs[i]-1e-6)))
	}
	for i := range p.Budgets {
		if load.BudgetUSD[i] > p.Budgets[i].MonthlyUSD {
			p.Budgets[i].MonthlyUSD = math.Ceil(load.BudgetUSD[i]) + 1
		}
	}
	// Pools the plan overfills get their own capacity entry (first match
	// wins, so ahead of any other).
	p.SpotCapacity.Pools = append(load.Overfull, p.SpotCapacity.Pools...)
	return p, nil
}

// fullSolveEdge is the largest fleet whose feasibility edge is found with
// full Solve calls (the instances the MILP comparison tests use); larger
// fleets raise the tightest caps to what one optimizer.QuickPlan takes.
const fullSolveEdge = 300

// maxSteps is how many 10% loosening steps the generator tries.
const maxSteps = 30

func workload(r *rand.Rand, i int, services float64) policy.Workload {
	spots := []policy.SpotPolicy{policy.SpotNever, policy.SpotPrefer, policy.SpotPrefer, policy.SpotOnly}
	w := policy.Workload{Name: fmt.Sprintf("w%05d", i), Team: fmt.Sprintf("team%d", r.IntN(10)),
		Spot: spots[r.IntN(len(spots))], RestartOverhead: time.Duration(5+r.IntN(25)) * time.Minute}
	switch k := r.Float64(); {
	case k < services:
		w.Kind = policy.Inference
		w.GPU = policy.GPUNeed{Count: 1, MinMemoryGiB: []float64{16, 20, 40}[r.IntN(3)]}
		w.Replicas = policy.Replicas{Min: 1 + r.IntN(4)}
		w.Replicas.Max = w.Replicas.Min * (2 + r.IntN(2))
		w.Spread = policy.Spread{MinZones: r.IntN(3), MinClouds: r.IntN(2)}
	case k < services+(1-services)*0.45:
		w.Kind = policy.Training
		w.GPU = policy.GPUNeed{Count: []int{1, 2, 4, 8, 8}[r.IntN(5)], MinMemoryGiB: []float64{24, 40, 80}[r.IntN(3)]}
		w.WorkGPUHours = float64(20 + r.IntN(2000))
		w.ReferenceGPU = pricing.A100_80
		w.CheckpointInterval = time.Duration(15+r.IntN(60)) * time.Minute
		if r.IntN(2) == 0 {
			w.Deadline = time.Duration(w.WorkGPUHours/float64(w.GPU.Count)*(1+r.Float64())) * time.Hour
		}
	case k < services+(1-services)*0.55:
		// Spot-only without checkpoints: long ones are pathological on
		// busy pools, which makes the choice between pools matter.
		w.Kind = policy.Batch
		w.Spot = policy.SpotOnly
		w.GPU = policy.GPUNeed{Count: []int{1, 2}[r.IntN(2)]}
		w.WorkGPUHours = float64(2 + r.IntN(60))
		w.ReferenceGPU = pricing.T4
	default:
		w.Kind = policy.Batch
		w.GPU = policy.GPUNeed{Count: []int{1, 1, 2, 4}[r.IntN(4)], MinMemoryGiB: []float64{0, 16, 24}[r.IntN(3)]}
		w.WorkGPUHours = float64(5 + r.IntN(500))
		w.ReferenceGPU = pricing.T4
		w.CheckpointInterval = time.Duration(5+r.IntN(30)) * time.Minute
	}
	if r.IntN(5) == 0 && w.Deadline == 0 {
		w.Limits.Residency = []string{[]string{"us", "eu"}[r.IntN(2)]}
	}
	return w
}

func hasQuota(qs []policy.Quota, c pricing.Cloud, f string) bool {
	for _, q := range qs {
		if q.Cloud == c && q.Family == f {
			return true
		}
	}
	return false
}

func hasFamily(qs []policy.Quota, f string) bool {
	for _, q := range qs {
		if q.Cloud == "" && q.Region == "" && q.Family == f {
			return true
		}
	}
	return false
}
