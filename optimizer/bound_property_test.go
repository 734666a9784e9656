package optimizer

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// bfOption is one way to place a workload in the brute force: its expected
// cost, the GPUs it takes from each quota and its monthly spend.
type bfOption struct {
	cost   float64
	quota  []int
	budget float64
	// pools are the spot GPUs taken from each spot pool (cloud/zone/gpu).
	pools map[string]int
}

// bfPool names an offer's spot pool, written independently of poolKey:
// its GPU model in its zone, or in its region where offers are regional.
func bfPool(o *pricing.Offer) string {
	where := o.Zone
	if where == "" {
		where = o.Region
	}
	return string(o.Cloud) + "/" + where + "/" + string(o.GPU)
}

// bfPoolCap is the fleet-wide spot capacity of every pool of a random
// catalog (no placement scores, no per-pool entries).
func bfPoolCap(p *policy.Policy) int {
	if p.SpotCapacity.DefaultGPUsPerPool > 0 {
		return p.SpotCapacity.DefaultGPUsPerPool
	}
	return policy.DefaultSpotCapacityGPUs
}

// bruteServiceOptions lists every layout docs/plan.md allows for a
// service, written independently of the solver: per GPU model and capacity
// type, the cheapest offer per zone; every set of z zones covering
// min_clouds clouds; replicas as even as possible, larger counts in the
// cheaper zones.
func bruteServiceOptions(p *policy.Policy, cat *pricing.Catalog, w *policy.Workload) []bfOption {
	h := p.Horizon.Hours()
	count := max(1, w.GPU.Count)
	minR := max(1, w.Replicas.Min)
	maxR := max(minR, w.Replicas.Max)
	minZones := max(1, w.Spread.MinZones, w.Spread.MinClouds)
	minClouds := max(1, w.Spread.MinClouds)
	type zu struct {
		o       pricing.Offer
		perHour float64
	}
	var out []bfOption
	for _, m := range pricing.Specs() {
		for _, ct := range []pricing.CapacityType{pricing.OnDemand, pricing.Spot} {
			if !spotAllows(w.Spot, ct) || (len(w.GPU.Models) > 0 && !slices.Contains(w.GPU.Models, m.Model)) {
				continue
			}
			zones := map[string]zu{}
			for _, o := range cat.Offers() {
				price, sold := o.Price(ct)
				if o.GPU != m.Model || !sold || o.GPUCount != count || o.GPUMemoryGiB < w.GPU.MinMemoryGiB || !policy.RegionAllowed(p, w, o.Cloud, o.Region, o.Zone) {
					continue
				}
				ph := price
				if ct == pricing.Spot {
					rate := o.Spot.InterruptionsPerHour
					if rate == 0 {
						rate = DefaultInterruptionRate(o.Cloud, o.GPU)
					}
					ph = price * (1 + rate*w.RestartOverhead.Hours())
				}
				k := string(o.Cloud) + "/" + o.Region + "/" + o.Zone
				if o.Zone != "" {
					k = string(o.Cloud) + "/" + o.Zone
				}
				if old, seen := zones[k]; !seen || ph < old.perHour {
					zones[k] = zu{o, ph}
				}
			}
			var us []zu
			for _, u := range zones {
				us = append(us, u)
			}
			sort.Slice(us, func(i, j int) bool { return us[i].perHour < us[j].perHour })
			type shape struct{ z, total int }
			var shapes []shape
			if ct == pricing.OnDemand {
				if t := max(minR, minZones); t <= maxR {
					shapes = append(shapes, shape{minZones, t})
				}
			} else {
				for z := max(2, minZones); z <= min(len(us), minR+1, 8); z++ {
					t := max(minR, z)
					for t-(t+z-1)/z < minR {
						t++
					}
					if t <= maxR {
						shapes = append(shapes, shape{z, t})
					}
				}
			}
			for _, sh := range shapes {
				// every subset of sh.z zones (us is sorted, so a subset in
				// index order is cheapest first)
				var rec func(start int, sel []int)
				rec = func(start int, sel []int) {
					if len(sel) == sh.z {
						clouds := map[pricing.Cloud]bool{}
						for _, i := range sel {
							clouds[us[i].o.Cloud] = true
						}
						if len(clouds) < minClouds {
							return
						}
						opt := bfOption{quota: make([]int, len(p.Quotas))}
						for k, i := range sel {
							n := sh.total / sh.z
							if k < sh.total%sh.z {
								n++
							}
							opt.cost += float64(n) * us[i].perHour * h
							for qi, q := range p.Quotas {
								if quotaMatches(q, &us[i].o) {
									opt.quota[qi] += n * count
								}
							}
							if ct == pricing.Spot {
								if opt.pools == nil {
									opt.pools = map[string]int{}
								}
								opt.pools[bfPool(&us[i].o)] += n * count
							}
						}
						opt.budget = opt.cost * 720 / h
						out = append(out, opt)
						return
					}
					for i := start; i < len(us); i++ {
						rec(i+1, append(sel, i))
					}
				}
				rec(0, nil)
			}
		}
	}
	return out
}

func bruteJobOptions(p *policy.Policy, cat *pricing.Catalog, w *policy.Workload) []bfOption {
	var out []bfOption
	for _, b := range bruteOptions(p, cat, w) {
		opt := bfOption{cost: b.cost, budget: b.cost, quota: make([]int, len(p.Quotas))}
		if b.cap == pricing.Spot {
			opt.pools = map[string]int{bfPool(&b.offer): max(1, w.GPU.Count)}
		}
		for qi, q := range p.Quotas {
			if quotaMatches(q, &b.offer) {
				opt.quota[qi] += max(1, w.GPU.Count)
			}
		}
		out = append(out, opt)
	}
	return out
}

// bfUse is what a partial combination takes from each quota, budget and
// spot pool, for the exhaustive searches.
type bfUse struct {
	p       *policy.Policy
	q       []int
	b       []float64
	pools   map[string]int
	poolCap int
}

func newBFUse(p *policy.Policy) *bfUse {
	return &bfUse{p: p, q: make([]int, len(p.Quotas)), b: make([]float64, len(p.Budgets)), pools: map[string]int{}, poolCap: bfPoolCap(p)}
}

// fits says whether o, for workload w, fits in what is left.
func (u *bfUse) fits(w *policy.Workload, o bfOption) bool {
	for k := range u.q {
		if u.q[k]+o.quota[k] > u.p.Quotas[k].MaxGPUs {
			return false
		}
	}
	for k, bu := range u.p.Budgets {
		if (budgetRow{bu}).matches(w) && u.b[k]+o.budget > bu.MonthlyUSD*(1+1e-9) {
			return false
		}
	}
	for k, n := range o.pools {
		if u.pools[k]+n > u.poolCap {
			return false
		}
	}
	return true
}

// add takes o (sign 1) or gives it back (sign -1).
func (u *bfUse) add(w *policy.Workload, o bfOption, sign int) {
	for k, n := range o.pools {
		u.pools[k] += sign * n
	}
	for k := range u.q {
		u.q[k] += sign * o.quota[k]
	}
	for k, bu := range u.p.Budgets {
		if (budgetRow{bu}).matches(w) {
			u.b[k] += float64(sign) * o.budget
		}
	}
}

// bruteOptimum is the least cost over every combination, +Inf if none fits.
func bruteOptimum(p *policy.Policy, opts [][]bfOption) float64 {
	best := math.Inf(1)
	u := newBFUse(p)
	var rec func(i int, cost float64)
	rec = func(i int, cost float64) {
		if cost >= best {
			return
		}
		if i == len(opts) {
			best = cost
			return
		}
		w := &p.Workloads[i]
		for _, o := range opts[i] {
			if !u.fits(w, o) {
				continue
			}
			u.add(w, o, 1)
			rec(i+1, cost+o.cost)
			u.add(w, o, -1)
		}
	}
	rec(0, 0)
	return best
}

// TestBoundBelowBruteForceWithInference: on tiny random fleets mixing jobs
// and inference services under quotas and budgets, the plan's lower bound
// never exceeds the optimum found by exhaustive search over every layout
// the rules allow, the solver never calls a fleet infeasible that the
// search places, and its plan is never cheaper than the optimum (which
// would mean it broke a rule).
func TestBoundBelowBruteForceWithInference(t *testing.T) {
	compared, services, missed := 0, 0, 0
	for seed := uint64(0); seed < 3000; seed++ {
		r := rand.New(rand.NewPCG(seed, 77))
		cat := randCatalog(r, 5+r.IntN(7))
		p := randPolicy(r, 1+r.IntN(3), false)
		opts := make([][]bfOption, len(p.Workloads))
		hasSvc := false
		for i := range p.Workloads {
			w := &p.Workloads[i]
			if w.Kind == policy.Inference {
				opts[i] = bruteServiceOptions(p, cat, w)
				hasSvc = true
			} else {
				opts[i] = bruteJobOptions(p, cat, w)
			}
		}
		best := bruteOptimum(p, opts)
		plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
		if math.IsInf(best, 1) {
			if !errors.Is(err, ErrInfeasible) {
				t.Errorf("seed %d: exhaustive search finds no plan, solver returned %v", seed, err)
			}
			continue
		}
		if err != nil {
			// A service's candidates are a subset of its layouts: count
			// misses, which must stay rare, but never on jobs alone.
			if !hasSvc {
				t.Errorf("seed %d: optimum $%.2f exists, solver: %v", seed, best, err)
			}
			missed++
			continue
		}
		compared++
		if hasSvc {
			services++
		}
		tol := 0.01 * float64(len(p.Workloads))
		if plan.Bound.LowerBound > best+tol {
			t.Errorf("seed %d: lower bound %.2f > optimum %.2f (services: %v)", seed, plan.Bound.LowerBound, best, hasSvc)
		}
		if plan.Totals.ExpectedCost < best-tol {
			t.Errorf("seed %d: plan %.2f cheaper than the optimum %.2f", seed, plan.Totals.ExpectedCost, best)
		}
	}
	t.Logf("compared %d feasible fleets (%d with services); solver missed %d", compared, services, missed)
	if services < 100 {
		t.Errorf("only %d fleets with services compared", services)
	}
	if missed > 0 {
		t.Errorf("solver claimed infeasible on %d feasible fleets", missed)
	}
}

// TestBoundBelowBruteForceWithSpotPools: on tiny random fleets whose spot
// pools are small enough to bind (1 to 12 GPUs each, fleet-wide), the
// plan's lower bound never exceeds the optimum of an exhaustive search that
// enforces the pool capacities, the plan is never cheaper than that optimum
// and never overfills a pool, and a fleet of jobs the search places is
// never called infeasible.
func TestBoundBelowBruteForceWithSpotPools(t *testing.T) {
	compared, bound, missed, svcMissed := 0, 0, 0, 0
	for seed := uint64(0); seed < 4000; seed++ {
		r := rand.New(rand.NewPCG(seed, 4242))
		cat := randCatalog(r, 5+r.IntN(7))
		p := randPolicy(r, 2+r.IntN(3), r.IntN(3) > 0)
		p.SpotCapacity.DefaultGPUsPerPool = 1 + r.IntN(12)
		opts := make([][]bfOption, len(p.Workloads))
		hasSvc := false
		for i := range p.Workloads {
			w := &p.Workloads[i]
			if w.Kind == policy.Inference {
				opts[i] = bruteServiceOptions(p, cat, w)
				hasSvc = true
			} else {
				opts[i] = bruteJobOptions(p, cat, w)
			}
		}
		best := bruteOptimum(p, opts)
		plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
		if math.IsInf(best, 1) {
			if !errors.Is(err, ErrInfeasible) {
				t.Errorf("seed %d: exhaustive search finds no plan, solver returned %v", seed, err)
			}
			continue
		}
		if err != nil {
			if !hasSvc {
				t.Errorf("seed %d: optimum $%.2f exists, solver: %v", seed, best, err)
				missed++
			} else {
				svcMissed++
			}
			continue
		}
		compared++
		used := map[string]int{}
		for _, pu := range plan.SpotPools {
			used[pu.Pool] = pu.UsedGPUs
			if pu.UsedGPUs > pu.CapacityGPUs || pu.CapacityGPUs != p.SpotCapacity.DefaultGPUsPerPool {
				t.Errorf("seed %d: pool %s holds %d of %d GPUs (capacity %d)", seed, pu.Pool, pu.UsedGPUs, pu.CapacityGPUs, p.SpotCapacity.DefaultGPUsPerPool)
			}
			if pu.Constrained {
				bound++
			}
		}
		tol := 0.01 * float64(len(p.Workloads))
		if plan.Bound.LowerBound > best+tol {
			t.Errorf("seed %d: lower bound %.2f > optimum %.2f (services: %v)", seed, plan.Bound.LowerBound, best, hasSvc)
		}
		if plan.Totals.ExpectedCost < best-tol {
			t.Errorf("seed %d: plan %.2f cheaper than the optimum %.2f", seed, plan.Totals.ExpectedCost, best)
		}
	}
	t.Logf("compared %d feasible fleets, %d held to a pool's capacity by a row; services the solver could not place: %d", compared, bound, svcMissed)
	if compared < 500 || bound < 50 {
		t.Errorf("only %d fleets compared, %d with a binding pool row", compared, bound)
	}
	if svcMissed > compared/50 {
		t.Errorf("solver missed %d fleets with services of %d", svcMissed, compared)
	}
}

// bruteMostPlaced is the most workloads any combination places (each may
// be left out), by exhaustive search.
func bruteMostPlaced(p *policy.Policy, opts [][]bfOption) int {
	most := 0
	u := newBFUse(p)
	var rec func(i, placed int)
	rec = func(i, placed int) {
		if placed+len(opts)-i <= most {
			return
		}
		if i == len(opts) {
			most = placed
			return
		}
		w := &p.Workloads[i]
		for _, o := range opts[i] {
			if !u.fits(w, o) {
				continue
			}
			u.add(w, o, 1)
			rec(i+1, placed+1)
			u.add(w, o, -1)
		}
		rec(i+1, placed)
	}
	rec(0, 0)
	return most
}

// TestFewestLeftOutBruteForce: on tiny random fleets that cannot be placed
// whole (tight quotas, budgets and spot pools), the plan places as many
// workloads as the exhaustive search can, and every one it leaves out is
// blocked with a constraint and a proof. Before, the heuristic kept its
// partial plan, which often left two out where one sufficed (found by
// the differential test against CBC, optimizer/cbc).
func TestFewestLeftOutBruteForce(t *testing.T) {
	partly, svcShort := 0, 0
	for seed := uint64(0); seed < 3000; seed++ {
		r := rand.New(rand.NewPCG(seed, 1010))
		cat := randCatalog(r, 5+r.IntN(7))
		p := randPolicy(r, 3+r.IntN(3), r.IntN(3) > 0)
		p.SpotCapacity.DefaultGPUsPerPool = 1 + r.IntN(12)
		for i := range p.Quotas {
			p.Quotas[i].MaxGPUs = max(1, p.Quotas[i].MaxGPUs/2)
		}
		opts := make([][]bfOption, len(p.Workloads))
		hasSvc := false
		for i := range p.Workloads {
			w := &p.Workloads[i]
			if w.Kind == policy.Inference {
				opts[i] = bruteServiceOptions(p, cat, w)
				hasSvc = true
			} else {
				opts[i] = bruteJobOptions(p, cat, w)
			}
		}
		most := bruteMostPlaced(p, opts)
		if most == len(p.Workloads) {
			continue
		}
		plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
		if !errors.Is(err, ErrInfeasible) || plan == nil {
			t.Errorf("seed %d: at most %d of %d fit, solver returned %v", seed, most, len(p.Workloads), err)
			continue
		}
		partly++
		for _, b := range plan.Blocked {
			if b.Constraint == "" || b.Proof == "" {
				t.Errorf("seed %d: %s blocked without a constraint or proof: %+v", seed, b.Workload, b)
			}
		}
		switch got := len(plan.Placements); {
		case got > most:
			t.Errorf("seed %d: plan places %d, the exhaustive search at most %d", seed, got, most)
		case got < most && hasSvc:
			// A service's candidates are a subset of its layouts.
			svcShort++
		case got < most:
			t.Errorf("seed %d: plan places %d of %d, %d fit", seed, got, len(p.Workloads), most)
		}
	}
	t.Logf("%d partly infeasible fleets; %d with services where the plan placed fewer than could be", partly, svcShort)
	if partly < 300 {
		t.Errorf("only %d partly infeasible fleets", partly)
	}
	if svcShort > partly/50 {
		t.Errorf("the plan placed fewer than could be on %d of %d fleets with services", svcShort, partly)
	}
}
