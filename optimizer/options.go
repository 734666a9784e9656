package optimizer

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// Tunables of the cost model. They are constants, not knobs, so a plan is a
// function of catalog, policy and speeds alone; docs/plan.md explains each.
const (
	// SpotDeadlineMargin: under spot "prefer" a spot option must finish
	// within the deadline with this much time to spare (its expected finish
	// × 1.10 ≤ deadline); spot "only" needs just the expected finish.
	SpotDeadlineMargin = 0.10
	// monthHours is the month budgets are defined over.
	monthHours = 720.0
	// maxSpreadZones bounds the zones a hedged spot service is spread over.
	maxSpreadZones = 8
)

// DefaultReferenceGPU is the reference GPU when a workload names none.
const DefaultReferenceGPU = pricing.A100_80

// reason is why an option was ruled out.
type reason uint8

const (
	ok reason = iota
	rMemory
	rSpotPolicy
	rDeadline
	rNoFinish
	rQuota
	rBudget
	rSpotCapacity
	nReasons
)

func (r reason) String() string {
	return [...]string{"ok", "memory", "spot_policy", "deadline", "no_finish", "quota", "budget", "spot_capacity"}[r]
}

// use is a quantity an option takes from one constraint row.
type use struct {
	row int32
	amt float64
}

// group is one set of identical instances of an option.
type group struct {
	offer int32
	cap   pricing.CapacityType
	n     int // instances (jobs) or replicas (inference)
}

// option is one way to place one workload: the ranker's output.
type option struct {
	groups []group // nil for jobs: see offer/cap/inst
	offer  int32
	cap    pricing.CapacityType
	inst   int
	gpus   int
	model  pricing.GPUModel
	why    reason
	rel    float64 // relative speed per GPU (jobs)
	eff    float64 // scaling efficiency against the reference shape (jobs)
	rate   float64 // interruptions per hour of the whole placement
	price  float64 // USD per hour of the whole placement
	est    runEstimate
	cost   float64
	// budgetUse is the monthly spend counted against budgets.
	budgetUse float64
	hedge     float64
	// restartCost is the billed replacement time of inference replicas, USD.
	restartCost float64
	replicas    int // inference: replicas placed, including hedge
	// uses are the quota rows taken from (GPUs), for candidates.
	uses []use
	// unit is the index of the option in eval.units (jobs) or eval.svc.
	unit int32
	// full marks a service layout fullLayouts added (BuildModel's
	// enumeration), which hideFull can take out again.
	full bool
}

func (o *option) valid() bool { return o.cost > 0 || o.price > 0 }

// less orders options by expected cost with stable tie-breaks (catalog order
// of the first offer, then capacity type).
func (o *option) less(p *option) bool {
	if o.cost != p.cost {
		return o.cost < p.cost
	}
	if o.offer != p.offer {
		return o.offer < p.offer
	}
	if o.cap != p.cap {
		return o.cap < p.cap
	}
	return o.inst < p.inst
}

// unit is an offer × capacity type that passed the static checks for one
// workload class, with the soft reason (memory, spot policy) that still rules
// it out but keeps it around to explain decisions.
type unit struct {
	offer int32
	cap   pricing.CapacityType
	inst  int32
	why   reason
}

// funnel counts how many offers survive each static check, to say which
// constraint blocks a workload that has no option.
type funnel struct {
	model, place, memory, count, capacity int
	// noInterconnect counts offers dropped only for lacking the GPU
	// network a multi-instance job asked for.
	noInterconnect int
	// spotTooBig counts spot offers dropped only because one pool gives
	// fewer spot GPUs than the workload needs (spot_pool_gpus, or the
	// pool's fleet-wide capacity).
	spotTooBig int
	maxMemory  float64
	counts     map[int]bool
}

// class is the static-check result shared by workloads with the same GPU
// need, limits and spot policy.
type class struct {
	units []unit
	f     funnel
}

func classKey(p *policy.Policy, w *policy.Workload) string {
	b := make([]byte, 0, 96)
	if w.Kind == policy.Inference {
		b = append(b, 'i')
	} else {
		b = append(b, 'j')
	}
	for _, m := range w.GPU.Models {
		b = append(b, '|')
		b = append(b, m...)
	}
	b = append(b, '#')
	b = strconv.AppendInt(b, int64(gpuCount(w)), 10)
	b = append(b, '#')
	b = strconv.AppendFloat(b, w.GPU.MinMemoryGiB, 'g', -1, 64)
	b = append(b, '#')
	b = append(b, w.GPU.Interconnect...)
	b = append(b, '#')
	b = append(b, w.Spot...)
	for _, l := range [][]string{w.Limits.Regions, w.Limits.Zones, w.Limits.Residency} {
		b = append(b, '#')
		for _, x := range l {
			b = append(b, x...)
			b = append(b, ',')
		}
	}
	b = append(b, '#')
	for _, c := range w.Limits.Clouds {
		b = append(b, c...)
		b = append(b, ',')
	}
	return string(b)
}

func gpuCount(w *policy.Workload) int { return max(1, w.GPU.Count) }

// staticClass runs the static feasibility checks of every offer for w.
func (s *solver) staticClass(w *policy.Workload) *class {
	key := classKey(s.pol, w)
	if c, ok := s.classes[key]; ok {
		return c
	}
	c := &class{f: funnel{counts: map[int]bool{}}}
	count := gpuCount(w)
	allowed := s.allowedOffers(w)
	for i := range s.offers {
		o := &s.offers[i]
		if len(w.GPU.Models) > 0 && !containsModel(w.GPU.Models, o.GPU) {
			continue
		}
		c.f.model++
		if !allowed[i] {
			continue
		}
		c.f.place++
		c.f.maxMemory = max(c.f.maxMemory, o.GPUMemoryGiB)
		soft := ok
		if o.GPUMemoryGiB < w.GPU.MinMemoryGiB {
			soft = rMemory
		} else {
			c.f.memory++
		}
		var inst int
		if w.Kind == policy.Inference {
			if o.GPUCount != count {
				c.f.counts[o.GPUCount] = true
				continue
			}
			inst = 1
		} else {
			if o.GPUCount > count || count%o.GPUCount != 0 {
				c.f.counts[o.GPUCount] = true
				continue
			}
			inst = count / o.GPUCount
			if inst > 1 && w.GPU.Interconnect == policy.InterconnectRequired && Interconnect(o.Cloud, o.InstanceType) == "" {
				c.f.noInterconnect++
				continue
			}
		}
		if soft == ok {
			c.f.count++
		}
		for _, ct := range []pricing.CapacityType{pricing.OnDemand, pricing.Spot} {
			if _, sold := o.Price(ct); !sold || (s.unavail != nil && s.unavail(o, ct)) {
				continue
			}
			if s.poolLimit != nil && inst > 1 {
				if lim := s.poolLimit(o, ct); lim > 0 && inst > lim {
					continue // the pool was seen to hold fewer
				}
			}
			if ct == pricing.Spot && inst*o.GPUCount > s.spotLimit(int32(i)) {
				if soft == ok && spotAllows(w.Spot, ct) {
					c.f.spotTooBig++
				}
				continue // more spot GPUs than one pool gives
			}
			why := soft
			if why == ok && !spotAllows(w.Spot, ct) {
				why = rSpotPolicy
			}
			if why == ok {
				c.f.capacity++
			}
			c.units = append(c.units, unit{offer: int32(i), cap: ct, inst: int32(inst), why: why})
		}
	}
	s.classes[key] = c
	return c
}

// allowedOffers says per offer whether w's placement limits admit it;
// workloads with the same limits share the answer.
func (s *solver) allowedOffers(w *policy.Workload) []bool {
	key := fmt.Sprint(w.Limits.Clouds, w.Limits.Regions, w.Limits.Zones, w.Limits.Residency)
	if a, ok := s.allowed[key]; ok {
		return a
	}
	a := make([]bool, len(s.offers))
	for i := range s.offers {
		o := &s.offers[i]
		a[i] = policy.RegionAllowed(s.pol, w, o.Cloud, o.Region, o.Zone)
	}
	s.allowed[key] = a
	return a
}

func spotAllows(p policy.SpotPolicy, ct pricing.CapacityType) bool {
	switch p {
	case policy.SpotNever:
		return ct == pricing.OnDemand
	case policy.SpotOnly:
		return ct == pricing.Spot
	}
	return true
}

func containsModel(ms []pricing.GPUModel, m pricing.GPUModel) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// eval is one workload's ranked options and what explains them.
type eval struct {
	w     *policy.Workload
	cands []option // feasible, pruned, sorted by less
	// best, rej and rejWhy are compact references to the best feasible
	// and the cheapest ruled-out option per GPU model (index into
	// s.models), and the cheapest ruled-out option per reason. They point
	// into units (jobs, rebuilt by jobOption) or svc (services), so a
	// workload keeps a few hundred bytes of pointer-free data instead of
	// thirty full options; expand rebuilds the options for explanations.
	best, rej []ref
	rejWhy    [nReasons]ref
	units     []jobUnit
	svc       []option
	count     int
	work      float64
	ckpt      float64
	restart   float64
	// bestByModel, rejByModel and cheapestRej are filled by expand.
	bestByModel []option
	rejByModel  []option
	cheapestRej []option
	baseline    float64
	budgetRows  []int32
	blocked     *Blocked
	// svcBound is a service's zones per GPU model and capacity type, for
	// the exact Lagrangian subproblem (svcPriced); shape identifies
	// services with the same subproblem.
	svcBound []svcBoundGroup
	shape    int
	// runs scales a job's per-run cost (its schedule); deadline is the
	// deadline a run meets, hours (0: none).
	runs     jobRuns
	deadline float64
}

// ref is a compact reference to an option, with what orders it.
type ref struct {
	set   bool
	why   reason
	spot  bool
	idx   int32 // into eval.units or eval.svc
	offer int32
	inst  int32
	cost  float64
}

// less is option.less on references.
func (r *ref) less(q *ref) bool {
	if r.cost != q.cost {
		return r.cost < q.cost
	}
	if r.offer != q.offer {
		return r.offer < q.offer
	}
	if r.spot != q.spot {
		return !r.spot
	}
	return r.inst < q.inst
}

func refOf(o *option) ref {
	return ref{set: true, why: o.why, spot: o.cap == pricing.Spot, idx: o.unit, offer: o.offer, inst: int32(o.inst), cost: o.cost}
}

// keep stores r in slot when it beats what the slot holds.
func keep(slot, r *ref) {
	if !slot.set || r.cost < slot.cost || (r.cost == slot.cost && r.less(slot)) {
		*slot = *r
	}
}

// option rebuilds the option a reference points to.
func (s *solver) option(e *eval, r *ref) option {
	var o option
	if e.units != nil {
		o = s.jobOption(&e.units[r.idx], e.count, e.work, e.ckpt, e.restart, e.runs)
	} else {
		o = e.svc[r.idx]
	}
	o.why = r.why
	return o
}

// expand rebuilds the explaining options of e into the solver's scratch
// space; they stay valid until the next expand.
func (s *solver) expand(e *eval) {
	n := len(s.models)
	if cap(s.scratch) < 2*n+int(nReasons) {
		s.scratch = make([]option, 2*n+int(nReasons))
	}
	sc := s.scratch[:2*n+int(nReasons)]
	for i := range sc {
		sc[i] = option{}
	}
	e.bestByModel, e.rejByModel, e.cheapestRej = sc[:n], sc[n:2*n], sc[2*n:]
	for i := 0; i < n; i++ {
		if e.best[i].set {
			e.bestByModel[i] = s.option(e, &e.best[i])
		}
		if e.rej[i].set {
			e.rejByModel[i] = s.option(e, &e.rej[i])
		}
	}
	for i := range e.rejWhy {
		if e.rejWhy[i].set {
			e.cheapestRej[i] = s.option(e, &e.rejWhy[i])
		}
	}
}

func hours(d interface{ Hours() float64 }) float64 { return d.Hours() }

// jobUnit is a unit with the figures that do not depend on the work size,
// so the per-workload loop is a few multiplications.
type jobUnit struct {
	unit
	hoursPerWork float64 // compute hours per reference GPU-hour of work
	price        float64 // USD per hour, all instances
	rate         float64 // interruptions per hour, all instances
	rel          float64
	eff          float64 // scaling efficiency relative to the reference shape
	model        uint8
	qclass       int32
	idx          int32 // position in the class's unit list
	spot         bool
}

type jobKey struct {
	c   *class
	ref pricing.GPUModel
	sc  Scaling
}

// workloadScaling is the workload's scaling efficiency, defaults filled in
// for policies built in code.
func workloadScaling(p *policy.Policy, w *policy.Workload) Scaling {
	sc := Scaling{w.Scaling.IntraNode, w.Scaling.InterNode}
	if sc.Intra <= 0 || sc.Intra > 1 {
		sc.Intra = p.Scaling.IntraNode
	}
	if sc.Inter <= 0 || sc.Inter > 1 {
		sc.Inter = p.Scaling.InterNode
	}
	if sc.Intra <= 0 || sc.Intra > 1 {
		sc.Intra = policy.DefaultIntraNodeScaling
	}
	if sc.Inter <= 0 || sc.Inter > 1 {
		sc.Inter = policy.DefaultInterNodeScaling
	}
	return sc
}

func (s *solver) jobUnits(c *class, ref pricing.GPUModel, refScore float64, count int, sc Scaling) []jobUnit {
	k := jobKey{c, ref, sc}
	if us, ok := s.jobClasses[k]; ok {
		return us
	}
	us := make([]jobUnit, len(c.units))
	for i, u := range c.units {
		o := &s.offers[u.offer]
		inst := int(u.inst)
		rel := s.score[u.offer] / refScore
		p, _ := o.Price(u.cap)
		ju := jobUnit{unit: u, idx: int32(i), spot: u.cap == pricing.Spot, rel: rel, price: p * float64(inst), model: uint8(s.modelIdx[o.GPU]), qclass: s.offerQClass[u.offer]}
		if ju.spot && s.spotQClass != nil {
			ju.qclass = s.spotQClass[u.offer]
		}
		ju.eff = sc.RelativeEfficiency(o.GPUCount, inst)
		ju.hoursPerWork = 1 / (float64(count) * rel * ju.eff)
		if u.cap == pricing.Spot {
			ju.rate = s.rate[u.offer] * float64(inst)
		}
		us[i] = ju
	}
	s.jobClasses[k] = us
	return us
}

// jobOption builds the full option of one unit for a work size.
func (s *solver) jobOption(u *jobUnit, count int, work, ckpt, restart float64, runs jobRuns) option {
	o := &s.offers[u.offer]
	opt := option{unit: u.idx, offer: u.offer, cap: u.cap, inst: int(u.inst), gpus: count, model: o.GPU, why: u.why, rel: u.rel, eff: u.eff, price: u.price, rate: u.rate}
	compute := work * u.hoursPerWork
	if u.cap == pricing.Spot {
		opt.est = estimateRun(compute, u.rate, ckpt, restart)
	} else {
		opt.est = runEstimate{Compute: compute, Total: compute, Finishes: true}
	}
	if !opt.est.Finishes {
		if opt.why == ok {
			opt.why = rNoFinish
		}
		opt.cost = math.Inf(1)
		return opt
	}
	perRun := opt.price * opt.est.Total
	opt.cost = perRun * runs.horizon
	opt.budgetUse = perRun * runs.month
	return opt
}

// evalJob ranks the options of a training or batch job. The loop over
// units only computes expected hours and cost; a full option is built only
// when it beats what a slot (per quota class, per GPU model, per reason)
// holds.
func (s *solver) evalJob(w *policy.Workload) *eval {
	e := s.newEval(w)
	c := s.staticClass(w)
	count := gpuCount(w)
	refGPU := w.ReferenceGPU
	if refGPU == "" {
		refGPU = DefaultReferenceGPU
	}
	refScore, known := s.refScore(refGPU)
	if !known {
		e.blocked = &Blocked{Workload: w.Name, Constraint: "gpu_model", Reason: fmt.Sprintf("reference GPU %q has no speed figure", refGPU)}
		return e
	}
	work := w.WorkGPUHours
	runs := s.runsOf(w)
	deadline, _ := s.jobDeadline(w)
	e.runs, e.deadline = runs, deadline
	ckpt := hours(w.CheckpointInterval)
	restart := hours(w.RestartOverhead)
	perLoss := ckpt/2 + restart
	spotLimit := deadline
	if w.Spot != policy.SpotOnly {
		spotLimit = deadline / (1 + SpotDeadlineMargin)
	}
	units := s.jobUnits(c, refGPU, refScore, count, workloadScaling(s.pol, w))
	e.units, e.count, e.work, e.ckpt, e.restart = units, count, work, ckpt, restart
	baseline := math.Inf(1)
	var fastest option
	fastestTotal := math.Inf(1)
	var touched []int32
	for i := range units {
		u := &units[i]
		compute := work * u.hoursPerWork
		total := compute
		if u.spot {
			if ckpt > 0 && ckpt < compute {
				x := u.rate * perLoss
				if x >= 0.95 {
					total = math.Inf(1)
				} else {
					total = compute / (1 - x)
				}
			} else {
				total = estimateRun(compute, u.rate, ckpt, restart).Total
			}
		}
		cost := u.price * total * runs.horizon
		why := u.why
		switch {
		case math.IsInf(total, 1):
			if why == ok {
				why = rNoFinish
			}
		case why == ok && deadline > 0:
			limit := deadline
			if u.spot {
				limit = spotLimit
			}
			if total > limit {
				why = rDeadline
				if total < fastestTotal {
					fastestTotal = total
					fastest = s.jobOption(u, count, work, ckpt, restart, runs)
					fastest.why = rDeadline
				}
			}
		}
		if !u.spot && (u.why == ok || u.why == rSpotPolicy) && (deadline == 0 || total <= deadline) {
			baseline = min(baseline, cost)
		}
		r := ref{set: true, why: why, spot: u.spot, idx: u.idx, offer: u.offer, inst: u.inst, cost: cost}
		if why != ok {
			keep(&e.rejWhy[why], &r)
			keep(&e.rej[u.model], &r)
			continue
		}
		keep(&e.best[u.model], &r)
		slot := s.qcSlot[u.qclass]
		if slot >= 0 && cost > e.cands[slot].cost {
			continue
		}
		opt := s.jobOption(u, count, work, ckpt, restart, runs)
		if slot >= 0 {
			if opt.less(&e.cands[slot]) {
				e.cands[slot] = opt
			}
			continue
		}
		s.qcSlot[u.qclass] = int32(len(e.cands))
		touched = append(touched, u.qclass)
		e.cands = append(e.cands, opt)
	}
	for _, q := range touched {
		s.qcSlot[q] = -1
	}
	sortOptions(e.cands)
	// The solver's hot loops read quota use from option.uses; give every
	// candidate its rows from one backing array.
	n := 0
	for i := range e.cands {
		n += len(s.rowsOf(e.cands[i].offer, e.cands[i].cap))
	}
	buf := make([]use, 0, n)
	for i := range e.cands {
		c := &e.cands[i]
		start := len(buf)
		for _, r := range s.rowsOf(c.offer, c.cap) {
			buf = append(buf, use{r, float64(c.gpus)})
		}
		c.uses = buf[start:len(buf):len(buf)]
	}
	e.baseline = baseline
	if len(e.cands) == 0 {
		e.blocked = s.jobBlocked(w, c, &fastest, deadline)
	}
	return e
}

func sortOptions(xs []option) {
	sort.Slice(xs, func(i, j int) bool { return xs[i].less(&xs[j]) })
}

func (s *solver) newEval(w *policy.Workload) *eval {
	refs := make([]ref, 2*len(s.models))
	e := &eval{w: w, best: refs[:len(s.models)], rej: refs[len(s.models):]}
	for i := range s.budgets {
		if s.budgets[i].matches(w) {
			e.budgetRows = append(e.budgetRows, int32(len(s.quotas)+i))
		}
	}
	return e
}

func (e *eval) reject(s *solver, o *option) {
	r := refOf(o)
	keep(&e.rejWhy[o.why], &r)
	keep(&e.rej[s.modelIdx[o.model]], &r)
}

func (e *eval) keepByModel(s *solver, o *option) {
	r := refOf(o)
	keep(&e.best[s.modelIdx[o.model]], &r)
}

// jobBlocked names the first check no offer passes.
func (s *solver) jobBlocked(w *policy.Workload, c *class, fastest *option, deadline float64) *Blocked {
	b := &Blocked{Workload: w.Name}
	switch {
	case c.f.model == 0:
		b.Constraint, b.Reason = "gpu_model", fmt.Sprintf("no offer of GPU %v in the catalog", w.GPU.Models)
	case c.f.place == 0:
		b.Constraint, b.Reason = "placement", "no offer of an allowed GPU in the allowed clouds, regions, zones and residency"
	case c.f.memory == 0:
		b.Constraint, b.Reason = "memory", fmt.Sprintf("needs %s GiB per GPU; the largest allowed GPU has %s GiB", gib(w.GPU.MinMemoryGiB), gib(c.f.maxMemory))
	case c.f.count == 0 && c.f.noInterconnect > 0:
		b.Constraint, b.Reason = "interconnect", fmt.Sprintf("%d GPUs span several instances, and no allowed instance type with a divisor of %d GPUs has the GPU network asked for (AWS EFA, GCP GPUDirect, Azure InfiniBand)", gpuCount(w), gpuCount(w))
	case c.f.count == 0:
		b.Constraint, b.Reason = "gpu_count", fmt.Sprintf("no instance type with %d GPUs (or a divisor of %d) meets the GPU need; instances have %s GPUs", gpuCount(w), gpuCount(w), countList(c.f.counts))
	case c.f.capacity == 0 && c.f.spotTooBig > 0:
		b.Constraint, b.Reason = "spot_capacity", fmt.Sprintf("spot policy %q, and no allowed spot pool gives %d spot GPUs (spot_pool_gpus %d per workload; spot_capacity per pool, the fleet together)", w.Spot, gpuCount(w), s.spotPool)
	case c.f.capacity == 0:
		b.Constraint, b.Reason = "spot_policy", fmt.Sprintf("spot policy %q but no matching offer is sold that way", w.Spot)
	case fastest.valid():
		needs := restartWhy(w, fastest, deadline)
		if needs == "" {
			needs = fmt.Sprintf("needs %.1fh > deadline %.0fh", fastest.est.Total, deadline)
		}
		b.Constraint, b.Reason = "deadline", fmt.Sprintf("fastest option %s %s", s.describe(fastest), needs)
	default:
		b.Constraint, b.Reason = "no_finish", "spot preemptions arrive faster than progress is saved; use on-demand or checkpoint more often"
	}
	return b
}

func countList(m map[int]bool) string {
	var ns []int
	for n := range m {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	var parts []string
	for _, n := range ns {
		parts = append(parts, fmt.Sprint(n))
	}
	if len(parts) == 0 {
		return "no"
	}
	return strings.Join(parts, ", ")
}

// zoneKey is where a replica group lands; regional offers count as one zone.
func zoneKey(o *pricing.Offer) string {
	if o.Zone != "" {
		return string(o.Cloud) + "/" + o.Zone
	}
	return string(o.Cloud) + "/" + o.Region
}

// zoneUnit is the cheapest offer of one GPU model and capacity in one zone.
type zoneUnit struct {
	offer int32
	cloud pricing.Cloud
	// perHour is the expected USD per replica-hour: price × (1 + λ·restart),
	// restarts being billed while a replacement comes up.
	perHour float64
	price   float64
	rate    float64
}

// svcGroup is the zones where one GPU model can be had one way (capacity
// type, and the soft reason that may rule it out), cheapest zone first.
type svcGroup struct {
	model pricing.GPUModel
	cap   pricing.CapacityType
	why   reason
	units []zoneUnit
}

// serviceGroups groups a class's units by GPU model and capacity type, with
// the cheapest offer per zone (by price, then interruption rate), zones
// ordered by price. It depends only on the class, so services share it;
// withRestart adds each service's restart overhead.
func (s *solver) serviceGroups(c *class) []svcGroup {
	k := c
	if gs, ok := s.svcClasses[k]; ok {
		return gs
	}
	const restart = 0.0
	type mk struct {
		model pricing.GPUModel
		cap   pricing.CapacityType
		why   reason
	}
	zones := map[mk]map[string]zoneUnit{}
	var keys []mk
	for _, u := range c.units {
		o := &s.offers[u.offer]
		p, _ := o.Price(u.cap)
		zu := zoneUnit{offer: u.offer, cloud: o.Cloud, price: p, perHour: p}
		if u.cap == pricing.Spot {
			zu.rate = s.rate[u.offer]
			zu.perHour = p * (1 + zu.rate*restart)
		}
		k := mk{o.GPU, u.cap, u.why}
		m, seen := zones[k]
		if !seen {
			m = map[string]zoneUnit{}
			zones[k] = m
			keys = append(keys, k)
		}
		zk := zoneKey(o)
		if old, seen := m[zk]; !seen || zu.perHour < old.perHour || (zu.perHour == old.perHour && (zu.rate < old.rate || zu.rate == old.rate && zu.offer < old.offer)) {
			m[zk] = zu
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.model != b.model {
			return s.modelIdx[a.model] < s.modelIdx[b.model]
		}
		if a.cap != b.cap {
			return a.cap < b.cap
		}
		return a.why < b.why
	})
	gs := make([]svcGroup, 0, len(keys))
	for _, k := range keys {
		m := zones[k]
		zs := make([]string, 0, len(m))
		for z := range m {
			zs = append(zs, z)
		}
		sort.Slice(zs, func(i, j int) bool {
			a, b := m[zs[i]], m[zs[j]]
			if a.perHour != b.perHour {
				return a.perHour < b.perHour
			}
			return zs[i] < zs[j]
		})
		units := make([]zoneUnit, len(zs))
		for i, z := range zs {
			units[i] = m[z]
		}
		gs = append(gs, svcGroup{k.model, k.cap, k.why, units})
	}
	s.svcClasses[k] = gs
	return gs
}

// withRestart prices spot replicas with their billed replacement time,
// price × (1 + λ·restart), and restores the cheapest-first order (an
// insertion sort: the order rarely changes).
func withRestart(dst, units []zoneUnit, restart float64) []zoneUnit {
	dst = append(dst, units...)
	for i := range dst {
		dst[i].perHour = dst[i].price * (1 + dst[i].rate*restart)
		for j := i; j > 0 && dst[j].perHour < dst[j-1].perHour; j-- {
			dst[j], dst[j-1] = dst[j-1], dst[j]
		}
	}
	return dst
}

// eval ranks the options of one workload: a service's or a job's.
func (s *solver) eval(w *policy.Workload) *eval {
	if w.Kind == policy.Inference {
		return s.evalService(w)
	}
	return s.evalJob(w)
}

// evalService ranks the options of an inference service: per GPU model and
// capacity type, the cheapest spread of replicas over zones and clouds.
func (s *solver) evalService(w *policy.Workload) *eval {
	e := s.newEval(w)
	c := s.staticClass(w)
	baseline := math.Inf(1)
	var spreadWhy string
	restart := hours(w.RestartOverhead)
	var scratch []zoneUnit
	groups := s.serviceGroups(c)
	e.svc = make([]option, 0, len(groups))
	for _, g := range groups {
		units := g.units
		if g.cap == pricing.Spot && restart > 0 {
			scratch = withRestart(scratch[:0], units, restart)
			units = scratch
		}
		if g.why == ok {
			if shapes := s.replicaShapes(w, len(units), g.cap); len(shapes) > 0 {
				e.svcBound = append(e.svcBound, svcBoundGroup{model: g.model, cap: g.cap, units: append([]zoneUnit(nil), units...), shapes: shapes})
			}
		}
		opt, why := s.spread(w, units, g.cap)
		if !opt.valid() {
			if g.why == ok && spreadWhy == "" {
				spreadWhy = why
			}
			continue
		}
		opt.model, opt.why = g.model, g.why
		opt.unit = int32(len(e.svc))
		e.svc = append(e.svc, opt)
		if g.cap == pricing.OnDemand && (g.why == ok || g.why == rSpotPolicy) {
			baseline = min(baseline, opt.cost)
		}
		if opt.why != ok {
			e.reject(s, &opt)
			continue
		}
		e.keepByModel(s, &opt)
		e.cands = append(e.cands, opt)
		if len(s.quotas) > 0 || len(s.poolRows) > 0 {
			s.enumerateLayouts(w, units, g, e, &opt)
		}
	}
	if (len(s.quotas) > 0 || len(s.poolRows) > 0) && len(s.pol.Workloads) <= frontierFleet {
		s.addFrontierLayouts(e)
	}
	sortOptions(e.cands)
	e.baseline = baseline
	if len(e.svcBound) > 0 {
		need, scale := s.serviceNeed(w)
		k := fmt.Sprintf("%p|%g|%d|%d|%d|%d|%v|%d|%g", c, restart, w.Replicas.Min, w.Replicas.Max, w.Spread.MinZones, w.Spread.MinClouds, e.budgetRows, need, scale)
		if e.shape = s.shapes[k]; e.shape == 0 {
			s.nShapes++
			e.shape = s.nShapes
			s.shapes[k] = e.shape
		}
	}
	if len(e.cands) == 0 {
		b := s.jobBlocked(w, c, &option{}, 0)
		if b.Constraint == "no_finish" {
			b.Constraint, b.Reason = "spread", spreadWhy
		}
		e.blocked = b
	}
	return e
}

// spread builds the cheapest replica layout over zones sorted by price.
// On-demand: max(min replicas, min zones) replicas spread evenly over
// max(min zones, min clouds) zones. Spot: replicas spread over z ≥ 2 zones
// with enough extra that losing every spot replica of the fullest zone
// still leaves min replicas; the z with the cheapest total wins.
func (s *solver) spread(w *policy.Workload, units []zoneUnit, ct pricing.CapacityType) (option, string) {
	minR := max(1, w.Replicas.Min)
	maxR := w.Replicas.Max
	if maxR < minR {
		maxR = minR
	}
	// need is the replicas the layout holds: min, or a load profile's peak.
	need, _ := s.serviceNeed(w)
	minZones := max(1, w.Spread.MinZones, w.Spread.MinClouds)
	if ct == pricing.OnDemand {
		total := max(need, minZones)
		if total > maxR {
			return option{}, fmt.Sprintf("spreading over %d zones needs %d replicas > max %d", minZones, total, maxR)
		}
		return s.layout(w, units, minZones, total, need, ct)
	}
	var best option
	why := fmt.Sprintf("fewer than %d zones offer it", max(2, minZones))
	for z := max(2, minZones); z <= min(len(units), need+1, maxSpreadZones); z++ {
		total := max(need, z)
		for total-ceilDiv(total, z) < minR {
			total++
		}
		if total > maxR {
			why = fmt.Sprintf("spot needs %d replicas over %d zones to survive a zone's spot loss but max replicas is %d", total, z, maxR)
			continue
		}
		if ceilDiv(total, z)*gpuCount(w) > s.spotPool {
			why = fmt.Sprintf("spot needs %d replicas in one zone, more than the %d spot GPUs a pool gives (spot_pool_gpus)", ceilDiv(total, z), s.spotPool)
			continue
		}
		opt, w2 := s.layout(w, units, z, total, need, ct)
		if !opt.valid() {
			why = w2
			continue
		}
		if !best.valid() || opt.cost < best.cost {
			best = opt
		}
	}
	return best, why
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// replicaCounts splits total replicas over z zones as evenly as possible,
// larger counts first.
func replicaCounts(total, z int) []int {
	counts := make([]int, z)
	for i := range counts {
		counts[i] = total / z
		if i < total%z {
			counts[i]++
		}
	}
	return counts
}

// pickZones chooses z of the units so that at least minClouds clouds are
// covered and Σ counts[i]·val[sel[i]] is least, with the larger counts on
// the cheaper units. order lists the units by val, cheapest first. For a
// fixed set of clouds the best choice is each cloud's cheapest unit and
// then the cheapest remaining ones (an exchange argument), so trying every
// set of clouds makes the choice exact: the Lagrangian bound relies on it.
func pickZones(units []zoneUnit, val []float64, order []int, counts []int, minClouds int, sel []int) ([]int, float64) {
	z := len(counts)
	if len(units) < z {
		return nil, math.Inf(1)
	}
	if minClouds <= 1 {
		sel = append(sel[:0], order[:z]...)
		cost := 0.0
		for i, ui := range sel {
			cost += float64(counts[i]) * val[ui]
		}
		return sel, cost
	}
	clouds := pricing.Clouds()
	var best []int
	bestCost := math.Inf(1)
	cur := make([]int, 0, z)
	for mask := 1; mask < 1<<len(clouds); mask++ {
		if popcount(mask) < minClouds || popcount(mask) > z {
			continue
		}
		in := func(c pricing.Cloud) bool {
			for i, x := range clouds {
				if x == c {
					return mask&(1<<i) != 0
				}
			}
			return false
		}
		cur = cur[:0]
		covered := 0
		for ci, c := range clouds { // the cheapest unit of each chosen cloud
			if mask&(1<<ci) == 0 {
				continue
			}
			for _, ui := range order {
				if units[ui].cloud == c {
					cur = append(cur, ui)
					covered++
					break
				}
			}
		}
		if covered < popcount(mask) {
			continue
		}
		for _, ui := range order {
			if len(cur) == z {
				break
			}
			if in(units[ui].cloud) && !containsInt(cur, ui) {
				cur = append(cur, ui)
			}
		}
		if len(cur) < z {
			continue
		}
		sort.Slice(cur, func(a, b int) bool { return val[cur[a]] < val[cur[b]] || val[cur[a]] == val[cur[b]] && cur[a] < cur[b] })
		cost := 0.0
		for i, ui := range cur {
			cost += float64(counts[i]) * val[ui]
		}
		if cost < bestCost {
			bestCost, best = cost, append(best[:0], cur...)
		}
	}
	if best == nil {
		return nil, math.Inf(1)
	}
	return append(sel[:0], best...), bestCost
}

// layout places total replicas evenly over z zones (counts differ by at most
// one, the larger counts in the cheaper zones), choosing the zones so that
// at least MinClouds clouds are covered at the least cost.
func (s *solver) layout(w *policy.Workload, units []zoneUnit, z, total, minR int, ct pricing.CapacityType) (option, string) {
	minClouds := max(1, w.Spread.MinClouds)
	if len(units) < z {
		return option{}, fmt.Sprintf("needs %d zones, only %d offer it", z, len(units))
	}
	counts := replicaCounts(total, z)
	val := make([]float64, len(units))
	order := make([]int, len(units))
	for i := range units {
		val[i], order[i] = units[i].perHour, i
	}
	sort.SliceStable(order, func(a, b int) bool { return val[order[a]] < val[order[b]] })
	bestSel, _ := pickZones(units, val, order, counts, minClouds, nil)
	if bestSel == nil {
		return option{}, fmt.Sprintf("cannot cover %d clouds with %d zones", minClouds, z)
	}
	_, scale := s.serviceNeed(w)
	return s.layoutOption(units, bestSel, counts, total, minR, ct, scale), ""
}

// layoutOption is the option of replicas counts[i] in units[sel[i]].
//
// need is the replicas the service needs (min replicas, or its load
// profile's peak): the rest are hedge. scale is the share of the layout's
// cost it runs on average (a load profile's mean ÷ peak, else 1); quota and
// spot pool use stay at the full layout.
func (s *solver) layoutOption(units []zoneUnit, sel, counts []int, total, need int, ct pricing.CapacityType, scale float64) option {
	h := s.horizon
	opt := option{cap: ct, replicas: total}
	base, restart := 0.0, 0.0
	for i, ui := range sel {
		u := units[ui]
		o := &s.offers[u.offer]
		n := counts[i]
		opt.groups = append(opt.groups, group{offer: u.offer, cap: ct, n: n})
		opt.price += float64(n) * u.price
		opt.rate += float64(n) * u.rate
		base += float64(n) * u.price * h
		restart += float64(n) * (u.perHour - u.price) * h
		opt.gpus += n * o.GPUCount
		for _, r := range s.rowsOf(u.offer, ct) {
			opt.uses = addUse(opt.uses, r, float64(n*o.GPUCount))
		}
	}
	opt.offer = opt.groups[0].offer
	opt.inst = total
	base, restart = base*scale, restart*scale
	opt.hedge = base * float64(max(0, total-need)) / float64(total)
	opt.est = runEstimate{Compute: h, Total: h, Preemptions: opt.rate * h * scale, Finishes: true}
	opt.cost = base + restart
	opt.restartCost = restart
	opt.budgetUse = opt.cost * monthHours / h
	return opt
}

func addUse(us []use, row int32, amt float64) []use {
	for i := range us {
		if us[i].row == row {
			us[i].amt += amt
			return us
		}
	}
	return append(us, use{row, amt})
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
