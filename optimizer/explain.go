package optimizer

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// describe names an option in words: "gcp us-central1-a a2-highgpu-8g
// 8×A100-40GB spot" or, for a service, "4×L4 spot replicas in gcp
// us-central1-a +2 zones".
func (s *solver) describe(o *option) string {
	f := &s.offers[o.offer]
	where := string(f.Cloud) + " " + f.Region
	if f.Zone != "" {
		where = string(f.Cloud) + " " + f.Zone
	}
	if o.groups != nil {
		more := ""
		if len(o.groups) > 1 {
			more = fmt.Sprintf(" +%d zone(s)", len(o.groups)-1)
		}
		return fmt.Sprintf("%d×%s %s replicas (%s) in %s%s", o.replicas, f.GPU, o.cap, f.InstanceType, where, more)
	}
	inst := f.InstanceType
	if o.inst > 1 {
		inst = fmt.Sprintf("%d× %s", o.inst, f.InstanceType)
	}
	return fmt.Sprintf("%s %s %d×%s %s", where, inst, o.gpus, f.GPU, o.cap)
}

// whyNot says in words, with figures, why alt lost to chosen.
func (s *solver) whyNot(w *policy.Workload, alt, chosen *option) string {
	desc := s.describe(alt)
	cheaper := ""
	if chosen.cost > 0 && alt.cost < chosen.cost {
		cheaper = fmt.Sprintf("%.0f%% cheaper", 100*(chosen.cost-alt.cost)/chosen.cost)
	} else if alt.price < chosen.price {
		cheaper = "cheaper per hour"
	} else {
		cheaper = "an alternative"
	}
	f := &s.offers[alt.offer]
	deadline, _ := s.jobDeadline(w)
	switch alt.why {
	case rDeadline:
		if alt.est.Total <= deadline {
			return fmt.Sprintf("%s: %s but expected finish %.1fh leaves less than the %.0f%% spot margin before deadline %.0fh",
				desc, cheaper, alt.est.Total, 100*SpotDeadlineMargin, deadline)
		}
		if why := restartWhy(w, alt, deadline); why != "" {
			return fmt.Sprintf("%s: %s but %s", desc, cheaper, why)
		}
		return fmt.Sprintf("%s: %s but expected finish %.1fh > deadline %.0fh", desc, cheaper, alt.est.Total, deadline)
	case rMemory:
		return fmt.Sprintf("%s: %s but needs %d×%s with %s GiB < min %s GiB", desc, cheaper, alt.gpus, f.GPU, gib(f.GPUMemoryGiB), gib(w.GPU.MinMemoryGiB))
	case rSpotPolicy:
		return fmt.Sprintf("%s: %s but spot policy is %q", desc, cheaper, w.Spot)
	case rQuota, rSpotCapacity:
		var q string
		s.quotaUses(alt, func(r int32, amt float64) {
			if q == "" && amt > s.caps[r]+eps {
				q = fmt.Sprintf("needs %g GPUs, more than %s allows", amt, s.rowName(r))
			}
		})
		return fmt.Sprintf("%s: %s but %s", desc, cheaper, q)
	case rBudget:
		return fmt.Sprintf("%s: %s but costs %s a month, over its budget", desc, cheaper, usd(alt.budgetUse))
	case rNoFinish:
		return fmt.Sprintf("%s: spot preemptions (%.3f/h) undo progress faster than it is saved", desc, alt.rate)
	}
	more := "more expected cost"
	pct := 0.0
	if chosen.cost > 0 {
		pct = 100 * (alt.cost - chosen.cost) / chosen.cost
	}
	text := fmt.Sprintf("%s: %.1f%% %s (%s vs %s)", desc, pct, more, usd(alt.cost), usd(chosen.cost))
	if alt.groups == nil && alt.est.Total > 0 && chosen.est.Total > 0 {
		text += fmt.Sprintf(", expected %.1fh vs %.1fh", alt.est.Total, chosen.est.Total)
	}
	return text
}

// plan turns the solver's choice into a Plan.
func (s *solver) plan(in Input, evals []*eval, choice []int, lb float64) *Plan {
	p := &Plan{
		GeneratedAt:  in.Now.UTC(),
		Policy:       s.pol.File,
		HorizonHours: s.horizon,
		Placements:   make([]Placement, 0, len(evals)),
		Warnings:     []string{},
		Blocked:      []Blocked{},
		Catalog: CatalogInfo{
			Source:      in.Catalog.Source,
			GeneratedAt: in.Catalog.GeneratedAt.UTC(),
			Offers:      in.Catalog.Len(),
		},
	}
	for _, o := range in.Catalog.Offers() {
		if pricing.DateUnknown(o) {
			p.Catalog.UndatedOffers++
		}
	}
	if !in.Now.IsZero() && !in.Catalog.GeneratedAt.IsZero() {
		p.Catalog.AgeHours = round(in.Now.Sub(in.Catalog.GeneratedAt).Hours(), 1)
		if p.Catalog.AgeHours > 7*24 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("prices are %.0f days old (%s); refresh the catalog for current prices", p.Catalog.AgeHours/24, in.Catalog.Source))
		}
	}
	st := &state{s: s, evals: evals, choice: choice, rem: append([]float64(nil), s.caps...)}
	for w, e := range evals {
		if choice[w] >= 0 {
			st.apply(e, &e.cands[choice[w]], 1)
		}
	}
	usedDefault := map[pricing.Cloud]bool{}
	at := make([]int, len(evals)) // placement index of each workload, -1 if blocked
	for w, e := range evals {
		at[w] = -1
		if choice[w] < 0 {
			continue
		}
		at[w] = len(p.Placements)
		pl := s.placement(st, e, choice[w])
		p.Placements = append(p.Placements, pl)
		p.Totals.ExpectedCost += pl.ExpectedCost
		p.Totals.OnDemandBaseline += pl.OnDemandBaseline
		p.Totals.GPUs += pl.GPUs
		if pl.SpotSignalDefault {
			usedDefault[pl.Cloud] = true
		}
	}
	for _, c := range pricing.Clouds() {
		if usedDefault[c] {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s spot interruption rates are the configured default (%.3f/h), not an observation", c, s.defaultRate(c)))
		}
	}
	for i, b := range s.budgets {
		r := len(s.quotas) + i
		worst := 0.0
		for w, e := range evals {
			if b.matches(e.w) && at[w] >= 0 {
				pl := &p.Placements[at[w]]
				if pl.WorstCaseCost > 0 {
					worst += pl.WorstCaseCost * monthHours / s.horizon
				} else {
					worst += pl.MonthlyCost
				}
			}
		}
		if worst > b.MonthlyUSD {
			p.Warnings = append(p.Warnings, fmt.Sprintf("budget %s: expected $%.0f/month fits $%.0f, but at max replicas spend could reach $%.0f",
				budgetName(b.Budget), s.caps[r]-st.rem[r], b.MonthlyUSD, worst))
		}
	}
	t := &p.Totals
	t.ExpectedCost, t.OnDemandBaseline = round(t.ExpectedCost, 2), round(t.OnDemandBaseline, 2)
	t.Savings = round(t.OnDemandBaseline-t.ExpectedCost, 2)
	if t.OnDemandBaseline > 0 {
		t.SavingsPercent = round(100*t.Savings/t.OnDemandBaseline, 1)
	}
	p.Bound = Bound{LowerBound: roundDown(lb, 2), Method: "lagrangian dual over quota and budget rows (subgradient)"}
	if len(s.caps) == 0 {
		p.Bound.Method = "sum of each workload's cheapest feasible option (no quotas or budgets)"
	}
	if s.boundNote != "" {
		p.Bound.Method = s.boundNote
	}
	p.Solver = s.solverName
	p.SpotPools = s.spotPoolUses(evals, choice)
	p.Warnings = append(p.Warnings, s.warnings...)
	if lb > 0 {
		sum := 0.0
		for w, e := range evals {
			if choice[w] >= 0 {
				sum += e.cands[choice[w]].cost
			}
		}
		p.Bound.GapPercent = round(max(0, 100*(sum-lb)/lb), 3)
	}
	return p
}

func (s *solver) defaultRate(c pricing.Cloud) float64 {
	if v, ok := s.pol.SpotDefaults[c]; ok {
		return v
	}
	return DefaultInterruptionRate(c, "")
}

// roundDown rounds a lower bound down, so that the figure shown is still a
// bound: rounded to the nearest cent, a bound equal to the optimum (no
// binding rows) could read up to half a cent above the optimal plan's
// cost. The 1e-6 of a unit absorbs float noise (34.15 stored as
// 34.1499999…), far below the precision shown.
func roundDown(x float64, digits int) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return 0
	}
	p := math.Pow(10, float64(digits))
	return math.Floor(x*p+1e-6) / p
}

func round(x float64, digits int) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return 0
	}
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

func (s *solver) placement(st *state, e *eval, j int) Placement {
	s.expand(e)
	w := e.w
	o := &e.cands[j]
	f := &s.offers[o.offer]
	pl := Placement{
		Workload: w.Name, Team: w.Team, Kind: string(w.Kind),
		Cloud: f.Cloud, Region: f.Region, Zone: f.Zone, InstanceType: f.InstanceType, GPU: f.GPU,
		Capacity: o.cap, GPUs: o.gpus, Instances: o.inst,
		PricePerHour:         round(o.price, 4),
		ExpectedHours:        round(o.est.Total, 2),
		DeadlineHours:        e.deadline,
		ExpectedPreemptions:  round(o.est.Preemptions, 2),
		InterruptionsPerHour: round(o.rate, 4),
		ExpectedCost:         round(o.cost, 2),
	}
	if o.cap == pricing.Spot {
		pl.SpotSignalDefault = s.rateDefault[o.offer]
	}
	if o.groups == nil {
		pl.RelativeSpeed = round(o.rel, 3)
		pl.ScalingEfficiency = round(o.eff, 4)
		pl.Breakdown = CostBreakdown{
			Compute:        round(o.price*o.est.Compute, 2),
			PreemptionLoss: round(o.price*o.est.PreemptionLoss, 2),
			Restart:        round(o.price*o.est.Restart, 2),
		}
		pl.Groups = []Group{{Cloud: f.Cloud, Region: f.Region, Zone: f.Zone, InstanceType: f.InstanceType, GPU: f.GPU,
			GPUsPerInstance: f.GPUCount, Instances: o.inst, Capacity: o.cap, PricePerHour: round(o.price/float64(o.inst), 4),
			Interconnect: Interconnect(f.Cloud, f.InstanceType)}}
		// The breakdown is of the whole cost: all runs of a scheduled job.
		r := e.runs.horizon
		pl.Breakdown.Compute, pl.Breakdown.PreemptionLoss, pl.Breakdown.Restart = round(o.price*o.est.Compute*r, 2), round(o.price*o.est.PreemptionLoss*r, 2), round(o.price*o.est.Restart*r, 2)
		pl.MonthlyCost = round(o.budgetUse, 2)
		if e.runs.cron != nil {
			pl.Schedule = w.Schedule
			pl.RunsPerMonth, pl.RunsInHorizon = round(e.runs.month, 2), round(e.runs.horizon, 2)
			pl.CostPerRun = round(o.price*o.est.Total, 2)
		}
	} else {
		pl.MinReplicas, pl.MaxReplicas = max(1, w.Replicas.Min), max(w.Replicas.Max, w.Replicas.Min, 1)
		pl.Breakdown = CostBreakdown{
			Compute: round(o.cost-o.restartCost-o.hedge, 2),
			Restart: round(o.restartCost, 2),
			Hedge:   round(o.hedge, 2),
		}
		maxPrice := 0.0
		for _, g := range o.groups {
			gf := &s.offers[g.offer]
			pl.Groups = append(pl.Groups, Group{Cloud: gf.Cloud, Region: gf.Region, Zone: gf.Zone, InstanceType: gf.InstanceType,
				GPU: gf.GPU, GPUsPerInstance: gf.GPUCount, Instances: g.n, Capacity: g.cap, PricePerHour: round(gf.OnDemandPrice, 4)})
			p, _ := gf.Price(g.cap)
			pl.Groups[len(pl.Groups)-1].PricePerHour = round(p, 4)
			if g.cap == pricing.Spot {
				if pi := s.offerPool[g.offer]; pi >= 0 {
					pl.Groups[len(pl.Groups)-1].SpotPool = s.pools[pi].key
					pl.Groups[len(pl.Groups)-1].PlacementScore = s.pools[pi].score
				}
			}
			maxPrice = max(maxPrice, p)
		}
		pl.WorstCaseCost = round(float64(pl.MaxReplicas)*maxPrice*s.horizon*(o.cost/(o.cost-o.restartCost)), 2)
		pl.MonthlyCost = round(o.budgetUse, 2)
		if lp, ok := s.profileOf(w); ok {
			pl.Load = &LoadSummary{Hours: lp.hours, MinReplicas: lp.min, PeakReplicas: lp.peak, MeanReplicas: round(lp.mean, 2), Capped: lp.capped}
		}
	}
	if o.groups == nil && o.cap == pricing.Spot {
		if pi := s.offerPool[o.offer]; pi >= 0 {
			pl.Groups[0].SpotPool, pl.Groups[0].PlacementScore = s.pools[pi].key, s.pools[pi].score
		}
	}
	base := e.baseline
	if math.IsInf(base, 1) {
		base = o.cost
	}
	pl.OnDemandBaseline = round(base, 2)
	pl.Savings = round(base-o.cost, 2)
	if base > 0 {
		pl.SavingsPercent = round(100*(base-o.cost)/base, 1)
	}
	pl.RunnerUp = s.runnerUp(st, e, j)
	pl.ByGPU = s.byGPU(e)
	pl.Explanation = s.explain(e, o, &pl)
	return pl
}

// runnerUp picks the alternative that best explains the choice: a cheaper
// option the fleet constraints took away, else the cheapest option ruled
// out by a workload constraint that would have been cheaper, else the best
// feasible option on another GPU, cloud or capacity type.
func (s *solver) runnerUp(st *state, e *eval, j int) *RunnerUp {
	chosen := &e.cands[j]
	mk := func(o *option, constraint, reason string) *RunnerUp {
		f := &s.offers[o.offer]
		r := &RunnerUp{Cloud: f.Cloud, Region: f.Region, Zone: f.Zone, InstanceType: f.InstanceType, GPU: f.GPU,
			Capacity: o.cap, ExpectedCost: round(o.cost, 2), ExpectedHours: round(o.est.Total, 2), Constraint: constraint, Reason: reason}
		if math.IsInf(o.cost, 1) {
			r.ExpectedCost, r.ExpectedHours = 0, 0
		}
		return r
	}
	if j > 0 {
		alt := &e.cands[0]
		constraint, why := s.fleetWhy(st, e, alt, chosen)
		return mk(alt, constraint, why)
	}
	// Options that meet the GPU need but lose to a deadline, the spot
	// policy, a quota or a budget say more than a GPU too small for the
	// job, so they come first.
	var best *option
	for _, rs := range [][]reason{{rSpotPolicy, rDeadline, rQuota, rBudget, rSpotCapacity}, {rMemory}} {
		for _, r := range rs {
			c := &e.cheapestRej[r]
			if c.valid() && c.cost < chosen.cost && (best == nil || c.less(best)) {
				best = c
			}
		}
		if best != nil {
			break
		}
	}
	if best != nil {
		return mk(best, best.why.String(), s.whyNot(e.w, best, chosen))
	}
	for k := 1; k < len(e.cands); k++ {
		c := &e.cands[k]
		if c.model != chosen.model || c.cap != chosen.cap || s.offers[c.offer].Cloud != s.offers[chosen.offer].Cloud {
			best = c
			break
		}
	}
	if best == nil {
		for i := range e.bestByModel {
			c := &e.bestByModel[i]
			if c.valid() && c.model != chosen.model && (best == nil || c.less(best)) {
				best = c
			}
		}
	}
	if best == nil && len(e.cands) > 1 {
		best = &e.cands[1]
	}
	if best == nil {
		return nil
	}
	return mk(best, "cost", s.whyNot(e.w, best, chosen))
}

// fleetWhy says which quota or budget kept w off its cheapest option.
func (s *solver) fleetWhy(st *state, e *eval, alt, chosen *option) (string, string) {
	st.apply(e, chosen, -1)
	defer st.apply(e, chosen, 1)
	pct := 100 * (chosen.cost - alt.cost) / chosen.cost
	desc := s.describe(alt)
	constraint, why := "quota", ""
	s.quotaUses(alt, func(r int32, amt float64) {
		if why == "" && st.rem[r] < amt-eps {
			constraint = s.rowConstraint(r)
			why = fmt.Sprintf("%s: %.0f%% cheaper but %s, needs %g", desc, pct, s.rowLeft(r, st.rem[r]), amt)
		}
	})
	if why == "" {
		for _, r := range e.budgetRows {
			if st.rem[r] < alt.budgetUse {
				bu := s.budgets[int(r)-len(s.quotas)]
				constraint = "budget"
				why = fmt.Sprintf("%s: %.0f%% cheaper but budget %s has $%.0f a month left, needs $%.0f", desc, pct, budgetName(bu.Budget), math.Max(0, st.rem[r]), alt.budgetUse)
				break
			}
		}
	}
	if why == "" {
		why = fmt.Sprintf("%s: %.0f%% cheaper but giving it the capacity would cost other workloads more", desc, pct)
	}
	return constraint, why
}

// byGPU is the ranker's score per GPU model: the best option's cost per
// unit, or why the model is out.
func (s *solver) byGPU(e *eval) []GPUChoice {
	feasible := make([]GPUChoice, 0, len(s.models))
	var out []GPUChoice
	for i, m := range s.models {
		b := &e.bestByModel[i]
		if b.valid() {
			where := s.where[b.offer]
			feasible = append(feasible, GPUChoice{GPU: m, Feasible: true, Capacity: b.cap, Where: where,
				ExpectedCost: round(b.cost, 2), CostPerUnit: round(s.perUnit(e.w, b), 4)})
			continue
		}
		r := &e.rejByModel[i]
		if !r.valid() {
			continue
		}
		out = append(out, GPUChoice{GPU: m, Reason: s.shortWhy(e.w, r)})
	}
	// Every model the workload allows is either ranked or given its reason:
	// those without a single offer where the workload may run say so.
	seen := map[pricing.GPUModel]bool{}
	for _, c := range feasible {
		seen[c.GPU] = true
	}
	for _, c := range out {
		seen[c.GPU] = true
	}
	allowed := e.w.GPU.Models
	if len(allowed) == 0 {
		for _, sp := range pricing.Specs() {
			allowed = append(allowed, sp.Model)
		}
	}
	for _, m := range allowed {
		if !seen[m] {
			seen[m] = true
			out = append(out, GPUChoice{GPU: m, Reason: "no offer with a fitting GPU count in the allowed clouds, regions and zones"})
		}
	}
	sort.SliceStable(feasible, func(i, j int) bool { return feasible[i].ExpectedCost < feasible[j].ExpectedCost })
	if len(feasible) == 0 {
		return out
	}
	return append(feasible, out...)
}

// perUnit is USD per reference GPU-hour of work (jobs) or per needed
// replica-hour (services, hedge included).
func (s *solver) perUnit(w *policy.Workload, o *option) float64 {
	if o.groups != nil {
		need, scale := s.serviceNeed(w)
		return o.cost / (s.horizon * float64(need) * scale)
	}
	if w.WorkGPUHours <= 0 {
		return 0
	}
	return o.cost / s.runsOf(w).horizon / w.WorkGPUHours
}

func (s *solver) shortWhy(w *policy.Workload, o *option) string {
	f := &s.offers[o.offer]
	switch o.why {
	case rMemory:
		return fmt.Sprintf("%s GiB < min %s GiB", gib(f.GPUMemoryGiB), gib(w.GPU.MinMemoryGiB))
	case rSpotPolicy:
		return fmt.Sprintf("only %s offers, spot policy %q", o.cap, w.Spot)
	case rDeadline:
		d, _ := s.jobDeadline(w)
		if o.est.Total <= d {
			return fmt.Sprintf("expected finish %.1fh on spot leaves less than the %.0f%% margin before deadline %.0fh", o.est.Total, 100*SpotDeadlineMargin, d)
		}
		if why := restartWhy(w, o, d); why != "" {
			return why
		}
		return fmt.Sprintf("expected finish %.1fh > deadline %.0fh", o.est.Total, d)
	case rNoFinish:
		return "preempted faster than it checkpoints"
	case rQuota:
		return fmt.Sprintf("%d GPUs exceed a quota", o.gpus)
	case rSpotCapacity:
		return fmt.Sprintf("%d spot GPUs exceed the pool's spot capacity", o.gpus)
	case rBudget:
		return fmt.Sprintf("%s a month exceeds a budget", usd(o.budgetUse))
	}
	return o.why.String()
}

func (s *solver) explain(e *eval, o *option, pl *Placement) []string {
	var lines []string
	if o.groups == nil {
		lines = append(lines, fmt.Sprintf("%s: $%.2f/h; expected %.1fh = compute %.1fh (%.2f× reference speed per GPU) + preemption loss %.1fh + restart %.1fh; %s vs on-demand baseline %s",
			s.describe(o), o.price, o.est.Total, o.est.Compute, o.rel, o.est.PreemptionLoss, o.est.Restart, usd(o.cost), usd(pl.OnDemandBaseline)))
	} else {
		lines = append(lines, fmt.Sprintf("%s: %d replicas (min %d, %d hedge) at $%.2f/h over %.0fh; %s vs on-demand baseline %s; worst case at max %d replicas %s",
			s.describe(o), o.replicas, pl.MinReplicas, o.replicas-pl.MinReplicas, o.price, s.horizon, usd(o.cost), usd(pl.OnDemandBaseline), pl.MaxReplicas, usd(pl.WorstCaseCost)))
	}
	if o.groups == nil {
		lines = append(lines, s.sizing(e, o))
		if l := s.scheduleLine(e.w, o.price*o.est.Total); l != "" {
			lines = append(lines, l)
		}
	} else if l := s.profileLine(e.w); l != "" {
		lines = append(lines, l)
	}
	lines = append(lines, s.poolLines(o)...)
	unit := "per reference GPU-hour of work"
	if o.groups != nil {
		unit = "per replica-hour"
	}
	// Built with appends, not Sprintf: this line is written for every
	// placement of a large fleet.
	buf := make([]byte, 0, 256)
	buf = append(buf, "best "...)
	buf = append(buf, unit...)
	buf = append(buf, ": "...)
	first := true
	for _, c := range pl.ByGPU {
		if c.Feasible {
			if !first {
				buf = append(buf, " < "...)
			}
			first = false
			buf = append(buf, c.GPU...)
			buf = append(buf, " $"...)
			buf = strconv.AppendFloat(buf, c.CostPerUnit, 'f', 3, 64)
		}
	}
	first = true
	for _, c := range pl.ByGPU {
		if !c.Feasible {
			if first {
				buf = append(buf, "; ruled out: "...)
			} else {
				buf = append(buf, ", "...)
			}
			first = false
			buf = append(buf, c.GPU...)
			buf = append(buf, " ("...)
			buf = append(buf, c.Reason...)
			buf = append(buf, ')')
		}
	}
	line := string(buf)
	lines = append(lines, line)
	if rule := s.ruleOfThumb(e, o); rule != "" {
		lines = append(lines, rule)
	}
	if pl.SpotSignalDefault {
		lines = append(lines, fmt.Sprintf("spot interruption rate %.3f/h is the %s default, not an observation", s.rate[o.offer], s.offers[o.offer].Cloud))
	}
	if pl.RunnerUp != nil {
		lines = append(lines, "runner-up: "+pl.RunnerUp.Reason)
	}
	return lines
}

// ruleOfThumb checks the field's rule (A100/H100-class for training, T4/L4
// for inference) against the numbers and says plainly when they disagree.
func (s *solver) ruleOfThumb(e *eval, o *option) string {
	var classNames string
	var members []pricing.GPUModel
	switch e.w.Kind {
	case policy.Training:
		classNames, members = "A100/H100-class", []pricing.GPUModel{pricing.A100_40, pricing.A100_80, pricing.H100, pricing.H200}
	case policy.Inference:
		classNames, members = "T4/L4-class", []pricing.GPUModel{pricing.T4, pricing.L4}
	default:
		return ""
	}
	if containsModel(members, o.model) {
		return fmt.Sprintf("%s wins, as the rule of thumb for %s expects", o.model, e.w.Kind)
	}
	var best, rej *option
	for _, m := range members {
		i := s.modelIdx[m]
		if b := &e.bestByModel[i]; b.valid() && (best == nil || b.less(best)) {
			best = b
		}
		if r := &e.rejByModel[i]; r.valid() && (rej == nil || r.less(rej)) {
			rej = r
		}
	}
	switch {
	case best != nil:
		return fmt.Sprintf("unlike the rule of thumb, %s beats the best %s option (%s, %s) by %.0f%% on expected cost",
			o.model, classNames, s.describe(best), usd(best.cost), 100*(best.cost-o.cost)/best.cost)
	case rej != nil:
		return fmt.Sprintf("no %s option qualifies: %s %s", classNames, rej.model, s.shortWhy(e.w, rej))
	}
	return fmt.Sprintf("no %s GPU is offered where this workload may run", classNames)
}

// gib formats a memory size with at most one decimal.
func gib(x float64) string { return strconv.FormatFloat(round(x, 1), 'f', -1, 64) }

// sizing explains the compute hours: the work, the GPUs, their speed and
// the scaling efficiency against the reference shape, with the policy
// figures it comes from.
func (s *solver) sizing(e *eval, o *option) string {
	f := &s.offers[o.offer]
	sc := workloadScaling(s.pol, e.w)
	rg, ri := ReferenceShape(o.gpus)
	ref := e.w.ReferenceGPU
	if ref == "" {
		ref = DefaultReferenceGPU
	}
	shape := fmt.Sprintf("%d×%d GPUs", o.inst, f.GPUCount)
	refShape := fmt.Sprintf("%d×%d", ri, rg)
	text := fmt.Sprintf("sizing: %s reference GPU-hours (%s) ÷ (%d GPUs × %.2f relative speed × %.3f scaling) = %.1fh compute; scaling is %s against the reference shape %s (%.2f per doubling of GPUs in an instance, %.2f per doubling of instances: %.3f vs %.3f)",
		gib(e.work), ref, o.gpus, o.rel, o.eff, o.est.Compute, shape, refShape, sc.Intra, sc.Inter, sc.Efficiency(f.GPUCount, o.inst), sc.Efficiency(rg, ri))
	if ic := Interconnect(f.Cloud, f.InstanceType); o.inst > 1 && ic != "" {
		text += "; instances in one zone over " + ic
	} else if o.inst > 1 {
		text += "; instances in one zone, no GPU network (gpu.interconnect: required would exclude it)"
	}
	return text
}

// hugeRun is how many times its deadline an option's expected run time
// may be before the explanations stop quoting the figure (restartWhy).
const hugeRun = 10

// restartWhy says why spot option o of job w misses deadline d when its
// expected run time is past hugeRun times the deadline because the job
// does not checkpoint within the run: each interruption restarts it from
// the start, and the expected time grows exponentially with the run's
// length times the interruption rate (estimateRun). Quoting that figure
// ("needs 101741841145.6h > deadline 71h", differential seed 4806) says
// neither what drives it nor what would fix it. It returns "" for any
// other option.
func restartWhy(w *policy.Workload, o *option, d float64) string {
	ckpt := hours(w.CheckpointInterval)
	if o.cap != pricing.Spot || o.rate <= 0 || d <= 0 || !(o.est.Total > hugeRun*d) || ckpt > 0 && ckpt < o.est.Compute {
		return ""
	}
	times := "more than 1000×"
	if r := o.est.Total / d; r < 1000 {
		times = fmt.Sprintf("%.0f×", r)
	}
	saves := "without checkpoints"
	if ckpt > 0 {
		saves = fmt.Sprintf("checkpointing every %.1fh, no sooner than it ends,", ckpt)
	}
	restarts := fmt.Sprintf("%s each spot interruption (%.2f an hour) restarts it: expected run time %s the deadline", saves, o.rate, times)
	if o.est.Compute > d {
		// Even uninterrupted it is late: checkpoints alone cannot help.
		return fmt.Sprintf("needs %.1fh of compute > deadline %.0fh even without interruptions, and %s", o.est.Compute, d, restarts)
	}
	fix := "checkpoint_interval well under the run"
	if w.Spot == policy.SpotOnly {
		fix += ", or on-demand capacity (spot: prefer or never),"
	}
	return fmt.Sprintf("needs %.1fh of compute, but %s %.0fh; %s would fix it", o.est.Compute, restarts, d, fix)
}
