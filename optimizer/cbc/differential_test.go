package cbc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// The differential test is the independent checker of issue 10: random
// policies that use every feature of the policy language (multi-node jobs
// with interconnect, zone and region pins, residency, recurring jobs,
// load-profiled and spread services, spot-only jobs with and without
// checkpoints, spot pool capacity with per-pool entries, spot defaults,
// scaling overrides, overlapping quotas with globs, budgets per team,
// workload and fleet), over the embedded catalog, with quotas and budgets
// cut from the unconstrained plan at random tightness. For each fleet the
// heuristic's plan is checked from its public fields alone against the
// policy, and compared with CBC's exact answer on the model Solve builds
// (optimizer.BuildModel).

// diffFleet is one generated fleet: its policy as YAML (what a user
// writes; a failing case is kept as testdata) and the parsed policy.
type diffFleet struct {
	name string
	yaml string
	pol  *policy.Policy
}

// genWorkloadYAML writes one random workload.
func genWorkloadYAML(r *rand.Rand, i int) string {
	var b strings.Builder
	team := []string{"research", "product", "infra"}[r.IntN(3)]
	spot := []string{"never", "prefer", "prefer", "only"}[r.IntN(4)]
	fmt.Fprintf(&b, "  - name: w%02d\n    team: %s\n    spot: %s\n", i, team, spot)
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	models := func(choices ...string) string {
		if r.IntN(3) == 0 {
			return "any"
		}
		n := 1 + r.IntN(3)
		var out []string
		for _, k := range r.Perm(len(choices))[:min(n, len(choices))] {
			out = append(out, choices[k])
		}
		if len(out) == 1 {
			return out[0]
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	switch k := r.IntN(10); {
	case k < 3: // inference
		minR := 1 + r.IntN(4)
		maxR := minR + r.IntN(6)
		mod := models("T4", "L4", "A10G", "A10", "L40S", "A100-40GB")
		fmt.Fprintf(&b, "    kind: inference\n    gpu: {models: %s, count: %d, min_memory_gib: %s}\n",
			mod, []int{1, 1, 1, 2}[r.IntN(4)], memFor(r, mod, "0", "16", "20", "24", "40"))
		fmt.Fprintf(&b, "    restart_overhead: %dm\n", r.IntN(20))
		fmt.Fprintf(&b, "    replicas: {min: %d, max: %d, target_utilization: %s}\n", minR, maxR, pick("0.5", "0.6", "0.7", "0.9"))
		if z, c := r.IntN(minR+1), r.IntN(min(minR, 3)+1); z > 0 || c > 0 {
			fmt.Fprintf(&b, "    spread: {min_zones: %d, min_clouds: %d}\n", max(1, z), max(1, c))
		}
		switch r.IntN(3) {
		case 0:
			hours := make([]string, 24)
			for h := range hours {
				hours[h] = strconv.Itoa(r.IntN(maxR + 1))
			}
			fmt.Fprintf(&b, "    load: {replicas_by_hour: [%s]}\n", strings.Join(hours, ", "))
		case 1:
			hours := make([]string, 24)
			for h := range hours {
				hours[h] = strconv.Itoa(r.IntN(200))
			}
			fmt.Fprintf(&b, "    load: {requests_per_second: [%s], requests_per_replica: %d}\n", strings.Join(hours, ", "), 20+r.IntN(60))
		}
	default: // training or batch
		kind := pick("training", "batch")
		count := []int{1, 1, 2, 4, 8, 8, 16, 16, 32, 64}[r.IntN(10)]
		if kind == "batch" && count > 8 {
			count = []int{1, 2, 4}[r.IntN(3)]
		}
		var mod string
		if count >= 8 {
			mod = models("A100-40GB", "A100-80GB", "H100", "H200", "V100", "L40S")
		} else {
			mod = models("T4", "L4", "A10G", "A100-40GB", "A100-80GB", "H100", "V100", "L40S")
		}
		fmt.Fprintf(&b, "    kind: %s\n    gpu: {models: %s, count: %d, min_memory_gib: %s", kind, mod, count, memFor(r, mod, "0", "0", "16", "24", "40", "80"))
		if count > 8 && r.IntN(2) == 0 || count > 1 && r.IntN(5) == 0 {
			b.WriteString(", interconnect: required")
		}
		b.WriteString("}\n")
		ref := pick("A100-80GB", "H100", "T4", "A100-40GB")
		perGPU := float64(5 + r.IntN(120))
		work := perGPU * float64(count)
		fmt.Fprintf(&b, "    work: {gpu_hours: %g, reference_gpu: %s}\n", work, ref)
		sched := ""
		if r.IntN(5) == 0 {
			sched = pick("0 2 * * *", "@weekly", "0 */12 * * *", "30 3 * * mon-fri", "@daily")
			fmt.Fprintf(&b, "    schedule: %q\n", sched)
		}
		// A deadline a little above or below the reference time.
		refHours := perGPU
		if count > 8 {
			refHours = work / float64(count)
		}
		var deadline float64
		if r.IntN(2) == 0 || sched != "" && r.IntN(2) == 0 {
			deadline = math.Max(1, math.Round(refHours*(0.3+1.5*r.Float64())))
			if sched == "0 */12 * * *" {
				deadline = math.Min(deadline, 12)
			} else if sched != "" {
				deadline = math.Min(deadline, 24)
			}
			fmt.Fprintf(&b, "    deadline: %gh\n", deadline)
		}
		if r.IntN(3) > 0 {
			ci := 10 + r.IntN(120)
			if deadline > 0 {
				ci = min(ci, int(deadline*60))
			}
			fmt.Fprintf(&b, "    checkpoint_interval: %dm\n", ci)
		}
		ro := r.IntN(30)
		if deadline > 0 {
			ro = min(ro, int(deadline*60)-1)
		}
		if ro > 0 {
			fmt.Fprintf(&b, "    restart_overhead: %dm\n", ro)
		}
		if r.IntN(4) == 0 {
			fmt.Fprintf(&b, "    scaling: {intra_node: %s, inter_node: %s}\n", pick("0.9", "0.95", "1"), pick("0.8", "0.9", "0.97"))
		}
	}
	if r.IntN(3) == 0 {
		var parts []string
		if r.IntN(2) == 0 {
			parts = append(parts, "clouds: ["+pick("aws", "gcp", "azure", "aws, gcp", "gcp, azure", "aws, azure")+"]")
		}
		if r.IntN(3) == 0 {
			parts = append(parts, "regions: ["+pick(`"us-*"`, `"europe-*", "eu-*"`, `"*east*"`, `"us-east-1", "us-central1", "eastus"`, `"*west*"`)+"]")
		}
		if r.IntN(4) == 0 {
			parts = append(parts, "zones: ["+pick(`"use1-az*"`, `"us-central1-*"`, `"use1-az4", "use1-az6"`, `"*-a"`, `"euw1-az*", "europe-west4-*"`)+"]")
		}
		if r.IntN(4) == 0 {
			parts = append(parts, "residency: ["+pick("us", "eu", "europe", "us, eu")+"]")
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "    placement: {%s}\n", strings.Join(parts, ", "))
		}
	}
	return b.String()
}

// memFor picks a min_memory_gib that some of the models has.
func memFor(r *rand.Rand, models string, choices ...string) string {
	most := 0.0
	for _, m := range strings.Split(strings.Trim(models, "[]"), ", ") {
		if m == "any" {
			return choices[r.IntN(len(choices))]
		}
		if s, ok := pricing.Spec(pricing.GPUModel(m)); ok {
			most = max(most, s.MemoryGiB)
		}
	}
	var fit []string
	for _, c := range choices {
		if v, _ := strconv.ParseFloat(c, 64); v <= most {
			fit = append(fit, c)
		}
	}
	return fit[r.IntN(len(fit))]
}

// genHeaderYAML writes the top-level keys of a random fleet.
func genHeaderYAML(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("version: 1\n")
	if r.IntN(6) == 0 {
		b.WriteString([]string{"clouds: [aws, gcp]\n", "clouds: [gcp, azure]\n", "clouds: [aws, azure]\n"}[r.IntN(3)])
	}
	if r.IntN(8) == 0 {
		b.WriteString("residency: [us, europe]\n")
	}
	fmt.Fprintf(&b, "horizon: %s\n", []string{"720h", "720h", "360h", "168h"}[r.IntN(4)])
	if r.IntN(3) == 0 {
		fmt.Fprintf(&b, "spot_defaults: {aws: %g, gcp: %g}\n", []float64{0.02, 0.1, 0.3}[r.IntN(3)], []float64{0.05, 0.2}[r.IntN(2)])
	}
	if r.IntN(3) == 0 {
		fmt.Fprintf(&b, "spot_pool_gpus: %d\n", []int{4, 8, 16, 32}[r.IntN(4)])
	}
	if r.IntN(2) == 0 {
		fmt.Fprintf(&b, "spot_capacity:\n  default_gpus_per_pool: %d\n", []int{4, 8, 16, 24, 64}[r.IntN(5)])
		if r.IntN(2) == 0 {
			b.WriteString([]string{
				"  pools: {\"aws/use1-az*/*\": 8, \"gcp/us-central1-*/T4\": 2}\n",
				"  pools: {\"azure/eastus/*\": 0, \"aws/*/H100\": 16}\n",
				"  pools: {\"gcp/*/L4\": 3, \"aws/*/*\": 12}\n",
			}[r.IntN(3)])
		}
	}
	if r.IntN(4) == 0 {
		fmt.Fprintf(&b, "scaling: {intra_node: %g, inter_node: %g}\n", []float64{0.9, 0.95, 1}[r.IntN(3)], []float64{0.85, 0.9, 0.95}[r.IntN(3)])
	}
	return b.String()
}

// quotaCandidates are the quota shapes the generator may cap: cloud,
// region glob, GPU family and their combinations, so quotas overlap.
var quotaCandidates = []policy.Quota{
	{Cloud: pricing.AWS}, {Cloud: pricing.GCP}, {Cloud: pricing.Azure},
	{Region: "us-*"}, {Region: "*east*"}, {Region: "europe-*"}, {Region: "*west*"},
	{Family: "H100"}, {Family: "A100"}, {Family: "T4"}, {Family: "L4"}, {Family: "V100"},
	{Cloud: pricing.AWS, Family: "H100"}, {Cloud: pricing.GCP, Family: "A100"}, {Cloud: pricing.Azure, Family: "T4"},
	{Cloud: pricing.AWS, Region: "us-*"}, {Cloud: pricing.GCP, Region: "us-*", Family: "L4"},
}

// genFleet builds a random fleet of n workloads, then caps quotas and
// budgets at a random share of what the unconstrained plan uses, so some
// bind, some overlap, and some fleets are partly infeasible.
func genFleet(cat *pricing.Catalog, now time.Time, seed uint64, n int) (*diffFleet, error) {
	name := fmt.Sprintf("diff-%d.yaml", seed)
	var (
		r    *rand.Rand
		head string
		ws   strings.Builder
		p    *policy.Policy
		err  error
	)
	// Random combinations the parser rejects (a spread over more clouds
	// than the placement allows, a pinned cloud the top level leaves out)
	// are drawn again.
	for attempt := uint64(0); ; attempt++ {
		r = rand.New(rand.NewPCG(seed, 0x10d1ff+attempt))
		head = genHeaderYAML(r)
		ws.Reset()
		ws.WriteString("workloads:\n")
		for i := 0; i < n; i++ {
			ws.WriteString(genWorkloadYAML(r, i))
		}
		if p, err = policy.Parse(name, []byte(head+ws.String())); err == nil {
			break
		}
		if attempt == 100 {
			return nil, fmt.Errorf("no generated policy parses: %w\n%s", err, head+ws.String())
		}
	}
	free, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: now})
	if free == nil {
		return nil, fmt.Errorf("unconstrained solve: %w", err)
	}
	// What the free plan takes from each candidate quota, per team and in all.
	use := make([]int, len(quotaCandidates))
	teamCost := map[string]float64{}
	total := 0.0
	for _, pl := range free.Placements {
		for _, g := range pl.Groups {
			for qi := range quotaCandidates {
				if quotaCandidates[qi].Matches(g.Cloud, g.Region, g.GPU) {
					use[qi] += g.Instances * g.GPUsPerInstance
				}
			}
		}
		teamCost[pl.Team] += pl.MonthlyCost
		total += pl.MonthlyCost
	}
	var qb strings.Builder
	nq := 0
	for _, qi := range r.Perm(len(quotaCandidates)) {
		if use[qi] == 0 || nq >= 1+r.IntN(5) {
			continue
		}
		q := quotaCandidates[qi]
		capGPUs := max(1, int(float64(use[qi])*(0.35+0.8*r.Float64())))
		if nq == 0 {
			qb.WriteString("quotas:\n")
		}
		nq++
		var parts []string
		if q.Cloud != "" {
			parts = append(parts, "cloud: "+string(q.Cloud))
		}
		if q.Region != "" {
			parts = append(parts, "region: \""+q.Region+"\"")
		}
		if q.Family != "" {
			parts = append(parts, "family: "+q.Family)
		}
		parts = append(parts, "max_gpus: "+strconv.Itoa(capGPUs))
		fmt.Fprintf(&qb, "  - {%s}\n", strings.Join(parts, ", "))
	}
	var bb strings.Builder
	var budgets []string
	for _, team := range []string{"research", "product", "infra"} {
		if c := teamCost[team]; c > 0 && r.IntN(2) == 0 {
			budgets = append(budgets, fmt.Sprintf("  - {team: %s, monthly_usd: %d}\n", team, int(math.Ceil(c*(0.9+0.4*r.Float64())))))
		}
	}
	if total > 0 && r.IntN(3) == 0 {
		budgets = append(budgets, fmt.Sprintf("  - {monthly_usd: %d}\n", int(math.Ceil(total*(0.97+0.3*r.Float64())))))
	}
	if len(free.Placements) > 0 && r.IntN(3) == 0 {
		pl := free.Placements[r.IntN(len(free.Placements))]
		budgets = append(budgets, fmt.Sprintf("  - {workload: %s, monthly_usd: %d}\n", pl.Workload, int(math.Ceil(pl.MonthlyCost*(0.8+0.6*r.Float64())))))
	}
	if len(budgets) > 0 {
		bb.WriteString("budgets:\n")
		for _, s := range budgets {
			bb.WriteString(s)
		}
	}
	src := head + ws.String() + qb.String() + bb.String()
	p, err = policy.Parse(name, []byte(src))
	if err != nil {
		return nil, fmt.Errorf("generated policy does not parse: %w\n%s", err, src)
	}
	return &diffFleet{name: name, yaml: src, pol: p}, nil
}

// catalogOffers indexes the offers a plan's groups name.
func catalogOffers(cat *pricing.Catalog) map[string]pricing.Offer {
	m := map[string]pricing.Offer{}
	for _, o := range cat.Offers() {
		m[string(o.Cloud)+"/"+o.InstanceType+"/"+o.Region+"/"+o.Zone] = o
	}
	return m
}

// poolCapacity is a spot pool's capacity from the policy alone (the
// embedded catalog has no placement scores): the first matching
// spot_capacity.pools entry, else the default.
func poolCapacity(p *policy.Policy, o *pricing.Offer) int {
	def := p.SpotCapacity.DefaultGPUsPerPool
	if def <= 0 {
		// A policy built in code (hardgen) has no defaults applied.
		def = policy.DefaultSpotCapacityGPUs
	}
	where := o.Zone
	if where == "" {
		where = o.Region
	}
	for _, e := range p.SpotCapacity.Pools {
		if ok, _ := filepath.Match(e.Zone, where); ok && e.Cloud == o.Cloud && (e.GPU == "" || e.GPU == o.GPU) {
			return e.GPUs
		}
	}
	if o.Spot.PlacementScore > 0 {
		return def * min(o.Spot.PlacementScore, 10) / 10
	}
	return def
}

// checkPlanAgainstPolicy checks every hard rule of the policy on the plan's
// public fields, with its own accounting: GPU model, memory, count,
// placement limits, interconnect, one zone per multi-node job, spot
// policy, deadlines (with the spot margin), replicas and spreading, spot
// pools (per workload and fleet-wide), quotas and budgets.
func checkPlanAgainstPolicy(p *policy.Policy, offers map[string]pricing.Offer, plan *optimizer.Plan) []string {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	quota := make([]int, len(p.Quotas))
	budget := make([]float64, len(p.Budgets))
	pools := map[string]int{}
	poolCap := map[string]int{}
	placed := map[string]bool{}
	spotPoolGPUs := p.SpotPoolGPUs
	if spotPoolGPUs <= 0 {
		spotPoolGPUs = policy.DefaultSpotPoolGPUs
	}
	for _, pl := range plan.Placements {
		w := p.Workload(pl.Workload)
		if w == nil {
			bad("placement of unknown workload %q", pl.Workload)
			continue
		}
		placed[w.Name] = true
		gpus, replicas := 0, 0
		zones, clouds := map[string]int{}, map[pricing.Cloud]bool{}
		spotZone := map[string]int{}
		wPool := map[string]int{}
		for _, g := range pl.Groups {
			o, ok := offers[string(g.Cloud)+"/"+g.InstanceType+"/"+g.Region+"/"+g.Zone]
			if !ok {
				bad("%s: group %s %s %s is no catalog offer", w.Name, g.Cloud, g.InstanceType, g.Zone)
				continue
			}
			if !w.AllowsGPU(o.GPU, o.GPUMemoryGiB) {
				bad("%s: %s (%g GiB) not allowed", w.Name, o.GPU, o.GPUMemoryGiB)
			}
			if !policy.RegionAllowed(p, w, o.Cloud, o.Region, o.Zone) {
				bad("%s: %s %s %s not allowed", w.Name, o.Cloud, o.Region, o.Zone)
			}
			if (w.Spot == policy.SpotNever && g.Capacity == pricing.Spot) || (w.Spot == policy.SpotOnly && g.Capacity != pricing.Spot) {
				bad("%s: %s breaks spot %s", w.Name, g.Capacity, w.Spot)
			}
			if _, sold := o.Price(g.Capacity); !sold {
				bad("%s: %s not sold as %s", w.Name, o.InstanceType, g.Capacity)
			}
			if g.GPUsPerInstance != o.GPUCount {
				bad("%s: group says %d GPUs per instance, offer has %d", w.Name, g.GPUsPerInstance, o.GPUCount)
			}
			n := g.Instances * o.GPUCount
			gpus += n
			replicas += g.Instances
			for qi := range p.Quotas {
				if p.Quotas[qi].Matches(o.Cloud, o.Region, o.GPU) {
					quota[qi] += n
				}
			}
			zk := string(o.Cloud) + "/" + o.Region + "/" + o.Zone
			zones[zk] += g.Instances
			clouds[o.Cloud] = true
			if g.Capacity == pricing.Spot {
				spotZone[zk] += g.Instances
				where := o.Zone
				if where == "" {
					where = o.Region
				}
				pk := string(o.Cloud) + "/" + where + "/" + string(o.GPU)
				pools[pk] += n
				wPool[pk] += n
				poolCap[pk] = poolCapacity(p, &o)
			}
		}
		for pk, n := range wPool {
			if n > spotPoolGPUs {
				bad("%s: %d spot GPUs in pool %s, spot_pool_gpus %d", w.Name, n, pk, spotPoolGPUs)
			}
		}
		if pl.GPUs != gpus {
			bad("%s: gpus %d, groups sum to %d", w.Name, pl.GPUs, gpus)
		}
		if w.Kind == policy.Inference {
			minR := max(1, w.Replicas.Min)
			peak := minR
			if w.Load != nil {
				hrs, _ := w.Load.Replicas(w.Replicas)
				peak = max(peak, slices.Max(hrs))
			}
			if replicas < peak {
				bad("%s: %d replicas below the peak %d", w.Name, replicas, peak)
			}
			if len(zones) < w.Spread.MinZones || len(clouds) < w.Spread.MinClouds {
				bad("%s: %d zones / %d clouds, want ≥ %d / %d", w.Name, len(zones), len(clouds), w.Spread.MinZones, w.Spread.MinClouds)
			}
			worst := 0
			for _, n := range spotZone {
				worst = max(worst, n)
			}
			if replicas-worst < minR {
				bad("%s: losing one zone's spot replicas leaves %d < min %d", w.Name, replicas-worst, minR)
			}
		} else {
			if gpus != w.GPU.Count {
				bad("%s: %d GPUs, want %d", w.Name, gpus, w.GPU.Count)
			}
			if len(pl.Groups) != 1 {
				bad("%s: a job in %d groups (want one offer, one zone)", w.Name, len(pl.Groups))
			} else if g := pl.Groups[0]; g.Instances > 1 && w.GPU.Interconnect == policy.InterconnectRequired && optimizer.Interconnect(g.Cloud, g.InstanceType) == "" {
				bad("%s: %d instances of %s without a GPU network", w.Name, g.Instances, g.InstanceType)
			}
			d := w.Deadline.Hours()
			if pl.DeadlineHours > 0 && (d == 0 || pl.DeadlineHours < d) {
				d = pl.DeadlineHours
			}
			if w.Schedule != "" && pl.DeadlineHours == 0 {
				bad("%s: scheduled job without a run deadline", w.Name)
			}
			if d > 0 {
				limit := d
				if pl.Capacity == pricing.Spot && w.Spot == policy.SpotPrefer {
					limit = d / (1 + optimizer.SpotDeadlineMargin)
				}
				// ExpectedHours is rounded to hundredths (differential
				// seed 20090 at MAXN=150: 10.9087h, within 12h / 1.1 =
				// 10.9091h, reads 10.91).
				if pl.ExpectedHours > limit*(1+1e-9)+0.005+1e-6 {
					bad("%s: expected %.3fh > limit %.3fh (deadline %.1fh, %s)", w.Name, pl.ExpectedHours, limit, d, pl.Capacity)
				}
			}
		}
		for bi := range p.Budgets {
			if p.Budgets[bi].Covers(w) {
				budget[bi] += pl.MonthlyCost
			}
		}
	}
	for _, b := range plan.Blocked {
		if placed[b.Workload] {
			bad("%s is both placed and blocked", b.Workload)
		}
		placed[b.Workload] = true
		if b.Constraint == "" || b.Reason == "" || b.Proof == "" {
			bad("%s blocked without constraint, reason or proof: %+v", b.Workload, b)
		}
	}
	for i := range p.Workloads {
		if !placed[p.Workloads[i].Name] {
			bad("%s neither placed nor blocked", p.Workloads[i].Name)
		}
	}
	for qi, q := range p.Quotas {
		if quota[qi] > q.MaxGPUs {
			bad("quota %d (%s/%s/%s): %d GPUs of %d", qi, q.Cloud, q.Region, q.Family, quota[qi], q.MaxGPUs)
		}
	}
	for bi, b := range p.Budgets {
		if budget[bi] > b.MonthlyUSD*(1+1e-9)+1e-6 {
			bad("budget %s: $%.4f of $%.2f", b.Name, budget[bi], b.MonthlyUSD)
		}
	}
	for pk, n := range pools {
		if n > poolCap[pk] {
			bad("spot pool %s: %d GPUs of %d", pk, n, poolCap[pk])
		}
	}
	return errs
}

// withSkips is the model with one more option per workload, "not placed",
// costing 1 and using nothing, every other option costing 0: its optimum
// is the fewest workloads that must be left out.
func withSkips(m *optimizer.Model) *optimizer.Model {
	out := &optimizer.Model{Workloads: m.Workloads, Rows: m.Rows, Costs: make([][]float64, len(m.Costs))}
	for w, cs := range m.Costs {
		out.Costs[w] = make([]float64, len(cs)+1)
		out.Costs[w][len(cs)] = 1
	}
	return out
}

// withLeftOut is the model with the workloads in out left out (their one
// option: "not placed", costing nothing and using nothing), every other
// workload keeping its options: its optimum is the cheapest plan of the
// rest, to compare a partly infeasible plan's cost with.
func withLeftOut(m *optimizer.Model, out map[string]bool) *optimizer.Model {
	r := &optimizer.Model{Workloads: m.Workloads, Rows: make([]optimizer.ModelRow, len(m.Rows)), Costs: make([][]float64, len(m.Costs))}
	for i, row := range m.Rows {
		r.Rows[i] = optimizer.ModelRow{Name: row.Name, Cap: row.Cap}
		for _, t := range row.Terms {
			if !out[m.Workloads[t.W]] {
				r.Rows[i].Terms = append(r.Rows[i].Terms, t)
			}
		}
	}
	for w, cs := range m.Costs {
		if out[m.Workloads[w]] {
			r.Costs[w] = []float64{0}
			continue
		}
		r.Costs[w] = cs
	}
	return r
}

// diffResult is what one fleet's comparison found.
type diffResult struct {
	errs                []string
	feasible, compared  bool
	partly, services    bool
	gap                 float64
	heuristicBelowModel bool
	// partlyCompared: partly infeasible, the heuristic leaving CBC's
	// fewest out; partlyGap its cost above CBC's cheapest such plan (%).
	partlyCompared bool
	partlyGap      float64
	// ownBound: CBC without a proof, the plan proven by its own bound.
	ownBound bool
	// undecided: partly infeasible, and CBC proved within its limit
	// neither how few must be left out (its plan leaving no fewer than
	// ours) nor its optimum for the placed part (its plan not 0.1% below
	// ours, its bound not proving ours within 0.1%).
	undecided bool
}

// compareFleet runs the heuristic and CBC on one fleet and checks (a)-(e)
// of issue 10's differential test.
// With exact, the plan is `--solver exact`'s (CBC through s) and the
// model is built without it, as in heuristic mode.
func compareFleet(ctx context.Context, s *Solver, cat *pricing.Catalog, offers map[string]pricing.Offer, now time.Time, f *diffFleet, exact bool) diffResult {
	var res diffResult
	bad := func(format string, a ...any) { res.errs = append(res.errs, fmt.Sprintf(format, a...)) }
	in := optimizer.Input{Catalog: cat, Policy: f.pol, Now: now}
	solveIn := in
	if exact {
		solveIn.Solver, solveIn.Exact = optimizer.SolverExact, s
	}
	plan, herr := optimizer.Solve(solveIn)
	var ie *optimizer.InfeasibleError
	if herr != nil && !errors.As(herr, &ie) {
		bad("heuristic: %v", herr)
		return res
	}
	if plan == nil {
		bad("heuristic returned no plan: %v", herr)
		return res
	}
	for _, w := range f.pol.Workloads {
		if w.Kind == policy.Inference {
			res.services = true
		}
	}
	// (c) the plan meets every rule, by our own accounting.
	for _, e := range checkPlanAgainstPolicy(f.pol, offers, plan) {
		bad("plan breaks the policy: %s", e)
	}
	m, err := optimizer.BuildModel(in)
	if err != nil {
		bad("BuildModel: %v", err)
		return res
	}
	inModel := map[string]bool{}
	for _, n := range m.Workloads {
		inModel[n] = true
	}
	blocked := map[string]optimizer.Blocked{}
	for _, b := range plan.Blocked {
		blocked[b.Workload] = b
	}
	// A workload with no option of its own is not in the model; the plan
	// must block it (on its own grounds, or by a search under fewer spot
	// pool rows than the model has, a relaxation: both are proofs).
	for _, w := range f.pol.Workloads {
		if !inModel[w.Name] {
			if _, ok := blocked[w.Name]; !ok {
				bad("%s has no candidate in the model but the plan places it", w.Name)
			}
		}
	}
	dynamic := 0
	for _, b := range plan.Blocked {
		if inModel[b.Workload] {
			dynamic++
		}
	}
	if len(m.Workloads) == 0 {
		return res
	}
	x, err := s.SolveModel(ctx, m, nil)
	if err != nil {
		bad("cbc: %v", err)
		return res
	}
	switch x.Status {
	case optimizer.ExactOptimal:
		res.feasible = true
		// (a) never blocked when CBC places the model.
		if dynamic > 0 {
			bad("CBC places every workload (optimum %.2f), the heuristic blocks %d: %v", x.Objective, dynamic, herr)
			return res
		}
		opt := m.Cost(x.Choice)
		res.compared = true
		h := plan.Totals.ExpectedCost
		res.gap = 100 * (h - opt) / opt
		if math.Abs(h-opt) <= 0.005*float64(len(plan.Placements))+1e-9 {
			// Within the placements' rounding to the cent: a one-job
			// fleet of $0.3171 is planned at $0.32 (seed 4809), 0.9%.
			res.gap = 0
		}
		// (d) the bound is a bound: no plan of the model costs less.
		if plan.Bound.LowerBound > opt*(1+1e-6)+1e-6 {
			bad("lower bound %.4f above CBC's optimum %.4f (%s)", plan.Bound.LowerBound, opt, plan.Bound.Method)
		}
		// (e) near-optimal. A plan below the model's optimum means the
		// model lacks a candidate the heuristic used (or the plan breaks a
		// row the check above missed).
		// Each placement's cost is rounded to the cent before the sum.
		// CBC's "optimal" is within its own tolerances: on seed 7036 at
		// MAXN=100 (a spot-only job without checkpoints makes the total
		// $18.2 billion) its cold run stopped $139 (7.6·10⁻⁹) above the
		// heuristic's plan, and warm-started from that plan (`plan
		// --solver exact`) it calls that plan optimal.
		if h < opt*(1-1e-8)-0.005*float64(len(plan.Placements))-1e-6 {
			res.heuristicBelowModel = true
			bad("heuristic %.4f below CBC's optimum %.4f over the model", h, opt)
		}
		if res.gap > 0.1 {
			bad("heuristic %.4f is %.3f%% above CBC's optimum %.4f", h, res.gap, opt)
		}
	case optimizer.ExactInfeasible:
		res.partly = true
		// (b) CBC proves not all fit: the heuristic must block some, with a
		// constraint and proof, and place as many as can be placed.
		y, err := s.SolveModel(ctx, withSkips(m), nil)
		var least int
		switch {
		case err == nil && y.Status == optimizer.ExactOptimal:
			least = int(math.Round(y.Objective))
		case err == nil && y.Status == optimizer.ExactFeasible:
			// CBC has a count but no proof within its limit (seed 20127
			// at MAXN=150, 150 workloads). CBC's plan leaving fewer out
			// than ours still fails; its bound proving ours the fewest
			// is a verdict too; neither is none, counted apart.
			n := int(math.Round(y.Objective))
			if dynamic > n {
				bad("the plan leaves %d out where CBC's plan (not proven optimal) leaves %d (services: %v)", dynamic, n, res.services)
				return res
			}
			if int(math.Ceil(y.BestBound-1e-6)) < dynamic {
				res.undecided = true
				return res
			}
			least = dynamic
		default:
			bad("cbc on the model with skips: %v %s", err, y.Status)
			return res
		}
		if dynamic == 0 {
			bad("CBC proves the model infeasible (≥ %d must be left out), the heuristic blocks none", least)
		} else if dynamic > least {
			bad("the plan leaves %d out where %d suffice (services: %v)", dynamic, least, res.services)
		} else {
			// (e) for the part placed: CBC's optimum with the same
			// workloads left out (which to leave out is the plan's
			// choice; leaving out a dearer one is not a saving).
			out := map[string]bool{}
			for _, b := range plan.Blocked {
				out[b.Workload] = true
			}
			z, err := s.SolveModel(ctx, withLeftOut(m, out), nil)
			h := plan.Totals.ExpectedCost
			round := 0.005*float64(len(plan.Placements)) + 1e-6
			if err == nil && z.Status == optimizer.ExactFeasible {
				// CBC has a plan of the placed part but no proof within
				// its limit (seed 22009 at MAXN=250, 188 workloads). A
				// plan of CBC's more than 0.1% below ours fails; CBC's
				// bound proving ours within 0.1% is a verdict; neither
				// is none, counted apart.
				switch {
				case h > z.Objective*1.001+round:
					bad("partly infeasible: the heuristic's %d placed cost %.4f, more than 0.1%% above CBC's plan (not proven optimal) for the same %d left out, %.4f", len(plan.Placements), h, least, z.Objective)
				case h <= z.BestBound*1.001+round:
					res.partlyCompared = true
					if z.BestBound > 0 {
						res.partlyGap = math.Max(0, 100*(h-z.BestBound)/z.BestBound)
					}
				default:
					res.undecided = true
				}
				return res
			}
			if err != nil || z.Status != optimizer.ExactOptimal {
				bad("cbc on the model without the left out: %v %s", err, z.Status)
				return res
			}
			opt := z.Objective
			res.partlyCompared = true
			if opt > 0 {
				res.partlyGap = math.Max(0, 100*(h-opt)/opt)
			}
			if math.Abs(h-opt) <= round {
				res.partlyGap = 0
			}
			if res.partlyGap > 0.1 {
				bad("partly infeasible: the heuristic's %d placed cost %.4f, %.3f%% above CBC's optimum for the same %d left out, %.4f", len(plan.Placements), h, res.partlyGap, least, opt)
			}
		}
	case optimizer.ExactFeasible:
		// CBC has a plan but no proof within its limit. Differential seed
		// 20018 at MAXN=150: a $5.6·10¹³ fleet (a spot-only job without
		// checkpoints), where CBC's tolerances never close the last
		// $2,722 (5·10⁻¹¹). The plan is checked against CBC's plan, and
		// it counts only where its own bound proves it within 10⁻⁸.
		inc := m.Cost(x.Choice)
		h := plan.Totals.ExpectedCost
		round := 0.005*float64(len(plan.Placements)) + 1e-6
		switch {
		case dynamic > 0:
			bad("CBC places every workload (%.2f, optimality not proven), the heuristic blocks %d: %v", inc, dynamic, herr)
		case plan.Bound.LowerBound > inc*(1+1e-6)+1e-6:
			bad("lower bound %.4f above a plan CBC found, %.4f (%s)", plan.Bound.LowerBound, inc, plan.Bound.Method)
		case h > inc*(1+1e-8)+round:
			bad("heuristic %.4f above CBC's plan %.4f (CBC without a proof within its time limit)", h, inc)
		case h-plan.Bound.LowerBound > 1e-8*h+round:
			bad("cbc status %s within its time limit, and the plan's own bound %.4f leaves %.4f (%.6f%%)", x.Status, plan.Bound.LowerBound, h-plan.Bound.LowerBound, 100*(h-plan.Bound.LowerBound)/h)
		default:
			res.feasible, res.ownBound = true, true
		}
	default:
		bad("cbc status %s within its time limit", x.Status)
	}
	return res
}

// TestDifferentialCBC is issue 10's independent check: 200 random fleets of
// 3-25 workloads mixing every policy feature, heuristic vs CBC (see the
// comment at the top of the file). Set GPUBROKER_DIFF_FLEETS to run more
// (GPUBROKER_DIFF_FIRST the first seed), GPUBROKER_DIFF_MAXN for larger
// fleets, GPUBROKER_DIFF_DUMP to a directory to write each failing fleet's
// policy there, GPUBROKER_DIFF_SOLVER=exact to check exact mode's plans.
func TestDifferentialCBC(t *testing.T) {
	exact := false
	switch v := os.Getenv("GPUBROKER_DIFF_SOLVER"); v {
	case "", optimizer.SolverHeuristic:
	case optimizer.SolverExact:
		exact = true
	default:
		t.Fatalf("GPUBROKER_DIFF_SOLVER %q: want heuristic or exact", v)
	}
	differential(t, exact, 1, 200)
}

// TestDifferentialCBCExact runs the same checks on `--solver exact`'s
// plans (CBC warm started from the heuristic, the fewest left out asked of
// CBC), on 60 other fleets: what exact mode adds must keep every rule and
// never leave out more, or pay more, than CBC's own answers.
func TestDifferentialCBCExact(t *testing.T) {
	// A run that chooses its fleets (`-run TestDifferentialCBC` matches
	// this test too) is TestDifferentialCBC's, in the mode it names.
	for _, v := range []string{"GPUBROKER_DIFF_SOLVER", "GPUBROKER_DIFF_FLEETS", "GPUBROKER_DIFF_FIRST", "GPUBROKER_DIFF_MAXN"} {
		if os.Getenv(v) != "" {
			t.Skipf("%s is set: TestDifferentialCBC runs the fleets it chooses (GPUBROKER_DIFF_SOLVER=exact for exact mode)", v)
		}
	}
	differential(t, true, 1001, 60)
}

// differential checks fleets seeds first.. (fleets of them) in heuristic
// or exact mode; the GPUBROKER_DIFF_* variables override the seeds.
func differential(t *testing.T, exact bool, first uint64, fleets int) {
	s := requireCBC(t)
	s.TimeLimit = 20 * time.Second
	base, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	cat := base.ForPlanning()
	now := base.GeneratedAt.Add(time.Hour)
	offers := catalogOffers(cat)
	if v := os.Getenv("GPUBROKER_DIFF_FLEETS"); v != "" {
		if fleets, err = strconv.Atoi(v); err != nil {
			t.Fatalf("GPUBROKER_DIFF_FLEETS: %v", err)
		}
	}
	if v := os.Getenv("GPUBROKER_DIFF_FIRST"); v != "" {
		if first, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("GPUBROKER_DIFF_FIRST: %v", err)
		}
	}
	// GPUBROKER_DIFF_MAXN widens the fleets: 3 to that many workloads.
	maxN := 25
	if v := os.Getenv("GPUBROKER_DIFF_MAXN"); v != "" {
		if maxN, err = strconv.Atoi(v); err != nil || maxN < 3 {
			t.Fatalf("GPUBROKER_DIFF_MAXN %q: want a number ≥ 3", v)
		}
	}
	var compared, ownBound, partly, partlyCompared, undecided, withSvc, below, failed int
	maxGap, maxPartlyGap := 0.0, 0.0
	for seed := first; seed < first+uint64(fleets); seed++ {
		n := 3 + int(seed%uint64(maxN-2))
		f, err := genFleet(cat, now, seed, n)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		res := compareFleet(context.Background(), s, cat, offers, now, f, exact)
		if res.compared {
			compared++
			maxGap = math.Max(maxGap, res.gap)
		}
		if res.ownBound {
			ownBound++
		}
		if res.undecided {
			undecided++
		}
		if res.partly {
			partly++
		}
		if res.partlyCompared {
			partlyCompared++
			maxPartlyGap = math.Max(maxPartlyGap, res.partlyGap)
		}
		if res.services && res.compared {
			withSvc++
		}
		if res.heuristicBelowModel {
			below++
		}
		if len(res.errs) > 0 {
			failed++
			t.Errorf("seed %d (%d workloads):\n  %s", seed, n, strings.Join(res.errs, "\n  "))
			if dir := os.Getenv("GPUBROKER_DIFF_DUMP"); dir != "" {
				_ = os.WriteFile(filepath.Join(dir, f.name), []byte(f.yaml), 0o644)
			}
		}
		// A long run (-v) says how far it got, should it be stopped.
		if done := seed - first + 1; testing.Verbose() && done%10 == 0 {
			t.Logf("%d of %d fleets checked (through seed %d), %d failed", done, fleets, seed, failed)
		}
	}
	t.Logf("%d fleets: %d compared at CBC's optimum (%d with services, %d where the heuristic beat the static model), %d proven by the plan's own bound (CBC without a proof), %d partly infeasible (%d of them compared with CBC's optimum for the same left out, max gap %.4f%%; %d undecided: CBC proved neither how few must be left out nor its optimum for the placed part), %d failed; max gap %.4f%%",
		fleets, compared, withSvc, below, ownBound, partly, partlyCompared, maxPartlyGap, undecided, failed, maxGap)
	if compared < fleets/3 || partly < fleets/20 {
		t.Errorf("the generator is off: only %d of %d fleets feasible, %d partly infeasible", compared, fleets, partly)
	}
}
