package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/store"
)

// TrainingConfig are the live training stage's settings (config keys
// fleet.training.*, docs/fleet.md).
type TrainingConfig struct {
	// Tick is how often a job's policy decides (default 1 minute): the
	// tick of the simulator the policies were tuned in.
	Tick time.Duration
	// MoveMargin is the hysteresis of a move between spot pools (default
	// 0.2): a running job moves to a cheaper pool only when the saving over
	// its remaining work beats the changeover plus the work lost since its
	// last checkpoint by this fraction.
	MoveMargin float64
	// PriceHalfLife smooths the spot prices a move is judged on (default
	// 6 hours): a price that flips back and forth averages out, a lasting
	// drop comes through within a few half-lives.
	PriceHalfLife time.Duration
	// Boot is the time from a launch to the job starting to load its
	// checkpoint: pending, booting, the agent registering. A restart costs
	// Boot + the workload's restart_overhead. Default 0: restart_overhead
	// counts all of it (docs/policy.md). The fleet simulator sets it to
	// its launch latency plus ready delay.
	Boot time.Duration
	// Reserve is held back from each deadline for the controller's own
	// reaction time (default 5 minutes): a decision is taken at a tick, acted
	// on at the next pass, and a lost spot instance is seen a pass late, so
	// the safety net switches to on-demand while the policy's own slack
	// still covers those minutes.
	Reserve time.Duration
}

func (c TrainingConfig) reserve() time.Duration {
	if c.Reserve <= 0 {
		return DefaultTrainingReserve
	}
	return c.Reserve
}

// DefaultTrainingReserve is TrainingConfig.Reserve's default.
const DefaultTrainingReserve = 5 * time.Minute

// DefaultMoveMargin is TrainingConfig.MoveMargin's default.
const DefaultMoveMargin = 0.2

func (c TrainingConfig) tick() time.Duration {
	if c.Tick <= 0 {
		return time.Minute
	}
	return c.Tick
}

func (c TrainingConfig) halfLife() time.Duration {
	if c.PriceHalfLife <= 0 {
		return 6 * time.Hour
	}
	return c.PriceHalfLife
}

func (c TrainingConfig) margin() float64 {
	if c.MoveMargin <= 0 {
		return DefaultMoveMargin
	}
	return c.MoveMargin
}

// JobProgress is the progress a job reported through its agent
// (docs/agent.md): Done is the fraction of the work done, At when the
// workload reported it.
type JobProgress struct {
	Done float64
	At   time.Time
}

// ProgressSource reads the latest progress a job reported; ok is false
// when it never reported any.
type ProgressSource interface {
	JobProgress(ctx context.Context, workload string) (p JobProgress, ok bool, err error)
}

// FleetReader reads the fleet's slots; *store.Fleet implements it.
type FleetReader interface {
	Load(ctx context.Context) (store.FleetState, error)
}

// TrainingSource is the plan stage that runs each deadline job's live spot
// policy (fleet/spotpolicy: adaptive unless the workload's spot_policy
// names another). For each training or batch placement with a deadline
// whose workload may run on spot, it builds the policy's State from live
// signals once per tick — progress reported by the job or estimated from
// its running time, time left to the deadline counted from the job's first
// slot, the spot pools of the planned instance type seen through a
// LiveTracker, the catalog's prices — applies spotpolicy.Guard (no missed
// deadline while on-demand exists), and rewrites the placement to the
// decision: on-demand, or spot in one pool. A move between two spot pools
// is taken only when it pays (TrainingConfig.MoveMargin). Group.Move asks
// the reconciler to replace a running instance that is elsewhere; without
// it a running instance stays where it is.
type TrainingSource struct {
	Inner    PlanSource
	Policy   func() *policy.Policy
	Catalog  func() *pricing.Catalog
	Fleet    FleetReader
	Progress ProgressSource // nil: progress is always estimated
	// SpeedRatio is an instance type's measured speed against the speed
	// the plan assumed for it (agents' benchmarks); nil or 0 means 1.
	SpeedRatio func(cloud pricing.Cloud, instanceType string) float64
	Tracker    *spotpolicy.LiveTracker
	Now        func() time.Time
	Log        *slog.Logger
	Config     TrainingConfig
	// Workers is how many jobs' decisions are taken at once (default
	// GOMAXPROCS). The shared tracker hears of the jobs' pools in job
	// order; the rest of a decision reads only the job's own state and
	// what its pools looked like then, so the plan is the same whatever
	// the number. Progress and SpeedRatio are called from these
	// goroutines.
	Workers int

	mu     sync.Mutex
	jobs   map[string]*liveJob
	prices map[string]*smoothed
	// byShape caches the catalog's pools per cloud, region and instance
	// type for poolCat: every job's decision reads them every pass.
	poolCat *pricing.Catalog
	byShape map[shapeKey]*shapePools
	// The last plan in and out, and when: a re-plan inside a pass (InPass)
	// at the same instant on the same inner plan re-decides only the jobs
	// placed in a pool blocked since.
	lastIn, lastOut *optimizer.Plan
	lastAt          time.Time
	// inner is the inner plan of the current Plan call, innerUse the
	// GPUs it holds per quota (netQuotas) and innerSpend its monthly cost
	// per budget (netBudgets), each summed when first needed; innerBy is
	// the policy's workloads by name (a budget may cover a team).
	inner      *optimizer.Plan
	innerUse   []int
	innerSpend []float64
	innerBy    workloadIndex
	// polGen changes when the policy changes in more than its workloads
	// (clouds, regions, quotas, budgets): the jobs' on-demand alternatives
	// are found again. lastPol is the policy it was counted for.
	polGen  int
	lastPol *policy.Policy
	// reuse and bufs: ChainConfig.ReusePlanMemory.
	reuse bool
	bufs  placementBufs
	// slots are the workloads' slots in the last fleet read (readSlots),
	// kept between plans: a map of a thousand new lists per plan was a
	// twentieth of the fleet simulator's allocated bytes.
	slots map[string]*svcSlots
	loads int // fleet reads so far (svcSlots.load)
	index indexCache
	// work is Plan's scratch: the plan's jobs (under mu); plans counts
	// the plans (liveJob.plan).
	work  []trainJob
	plans int
	// changed are the indices of the placements the last plan (out)
	// set: a split chain's join takes these (changedOf).
	changed []int
	out     *optimizer.Plan
}

// trainJob is one job's decision in a plan: what prepare reads in job
// order from the stage's shared state, and what finish decides from it.
type trainJob struct {
	i    int // the placement's index in the plan
	w    *policy.Workload
	p    optimizer.Placement
	mine []*store.SlotRecord
	err  error
	out  optimizer.Placement

	j             *liveJob
	first         *store.SlotRecord
	start         time.Time
	running       bool
	cur           spotpolicy.Action
	pools         []livePool // the job's scratch (liveJob.pools)
	known         []bool     // whether the tracker knew each pool after the job's signals
	od            pricing.Offer
	odTotal, work float64
	cat           *pricing.Catalog
	pol           *policy.Policy
	quotas        []policy.Quota  // netQuotas, when an on-demand alternative is looked for
	budgets       []policy.Budget // netBudgets, likewise
	altCandidate  bool            // an on-demand alternative is looked for
}

// shapeKey is a cloud, region and instance type.
type shapeKey struct {
	cloud        pricing.Cloud
	region, kind string
}

// shapePools are a shape's spot pools sorted by name and its on-demand
// offers in catalog order; blk are the spot pools' blocks (blockMemo).
type shapePools struct {
	spot []livePool
	blk  []blockMemo
	od   []pricing.Offer
}

// smoothed is a pool's exponentially weighted spot price.
type smoothed struct {
	price float64
	at    time.Time
}

// smooth folds the pool's current price into its weighted mean and returns
// the mean.
func (t *TrainingSource) smooth(key string, price float64, now time.Time) float64 {
	if t.prices == nil {
		t.prices = map[string]*smoothed{}
	}
	p := t.prices[key]
	if p == nil {
		t.prices[key] = &smoothed{price: price, at: now}
		return price
	}
	if dt := now.Sub(p.at); dt > 0 {
		alpha := 1 - math.Exp2(-dt.Seconds()/t.Config.halfLife().Seconds())
		p.price += alpha * (price - p.price)
		p.at = now
	}
	return p.price
}

// liveJob is what the stage keeps of one job between passes. All of it
// can be rebuilt from the store after a leader change: the start from the
// job's oldest slot, progress from the job's reports (an estimate restarts
// from what the job reported last, or from zero: the safe direction).
type liveJob struct {
	policy   spotpolicy.Training
	name     string
	anyKey   string    // the tracker's "any pool" name of the job (made once)
	poolFor  [3]string // the cloud, zone and instance type pool was made for
	groups   groupMemo // place's
	start    time.Time
	tick     int // last tick decided, -1 before the first
	decision spotpolicy.Action
	reason   string
	// Progress estimate: base is the progress at the current instance's
	// start, inst the instance it was taken for.
	inst           string
	base, estimate float64
	spent          float64
	lastAt         time.Time
	lastPrice      float64
	reported       bool
	// A move from on-demand to spot under way (leaving), and how long to
	// stay on on-demand after one failed (leaveWait, doubling) and until
	// when (nextLeave).
	leaving   bool
	leaveWait time.Duration
	nextLeave time.Time
	// leftInst is the on-demand instance a move to spot left from.
	leftInst string
	// A move between spot pools under way (to the pool moveTo, from the
	// instance moveFrom), and the pools a refused one holds back
	// (priceMoveOutcome): until when, and the wait, doubling.
	moveTo, moveFrom string
	moveHeld         map[string]time.Time
	moveWait         map[string]time.Duration
	// alt is the job's on-demand alternative (onDemandAlt).
	alt altCache
	// plan is the TrainingSource plan that last decided the job.
	plan int
	// The job's scratch for a plan's decision (decisions of several jobs
	// are taken at once): its pools, whether the tracker knew them, and
	// its policy's state (the policies keep nothing of it).
	pools []livePool
	known []bool
	state spotpolicy.State
	// For status: the job's work (seconds on the planned shape), its
	// deadline, and the spot pool of its decision ("" off spot).
	work     float64
	deadline time.Time
	pool     string
}

// TrainingDecision is a job's latest decision, for status
// (DecisionBoard). Done and Work are seconds of work on the planned shape;
// Pool is "cloud/zone/instance type" when Action is spot; Deadline is the
// job's start plus its deadline.
type TrainingDecision struct {
	Policy   string    `json:"policy"`
	Tick     int       `json:"tick"`
	Action   string    `json:"action"`
	Pool     string    `json:"pool,omitempty"`
	Done     float64   `json:"done"`
	Work     float64   `json:"work"`
	Reported bool      `json:"reported"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
	Deadline time.Time `json:"deadline"`
}

// livePool is one spot pool a job can use.
type livePool struct {
	offer *pricing.Offer // the stage's cached copy: read only
	key   string
	// price is the smoothed spot price moves are judged on.
	price float64
}

// Plan returns the inner plan with each live training placement set to its
// policy's decision.
func (t *TrainingSource) Plan(ctx context.Context, u *Unavailable) (*optimizer.Plan, error) {
	plan, _, byName, now, ok, err := stageInput(ctx, t.Inner, u, t.Policy, t.Now, &t.index)
	if !ok {
		return plan, err
	}
	// The jobs' slots, by workload in the fleet's order: read once per
	// plan, not scanned whole for every job (t.slots, kept; t.mu held).
	loaded := false
	t.mu.Lock()
	defer t.mu.Unlock()
	out := *plan
	out.Placements = t.bufs.copyOf(plan.Placements, t.reuse)
	if t.jobs == nil {
		t.jobs = map[string]*liveJob{}
	}
	// Asked again in the pass after a refused launch (same instant, same
	// inner plan): the jobs whose decision stands in a pool that is not
	// blocked keep it; those placed in a blocked pool decide again.
	// For the on-demand alternatives' quotas and budgets (netQuotas,
	// netBudgets).
	t.inner, t.innerUse, t.innerSpend, t.innerBy = plan, nil, nil, byName
	again := inPass(ctx) && plan == t.lastIn && now.Equal(t.lastAt) && t.lastOut != nil && len(t.lastOut.Placements) == len(out.Placements)
	if pol := t.Policy(); pol != t.lastPol {
		if t.lastPol == nil || pol == nil || !sameSettings(t.lastPol, pol) {
			t.polGen++
		}
		t.lastPol = pol
	}
	jobs := t.work[:0]
	t.changed = t.changed[:0]
	t.plans++
	twice := false
	for i := range out.Placements {
		// (The placement and the workload are copied only for the jobs:
		// a plan holds a thousand placements.)
		wp := byName[out.Placements[i].Workload]
		if wp == nil || !liveTraining(wp) || len(out.Placements[i].Groups) == 0 {
			continue
		}
		if again {
			if last := t.lastOut.Placements[i]; last.Workload == out.Placements[i].Workload && !placedInBlocked(last, u, now) {
				out.Placements[i] = last
				t.changed = append(t.changed, i)
				continue
			}
		}
		if !loaded {
			st, err := t.Fleet.Load(ctx)
			if err != nil {
				t.work = jobs
				return nil, fmt.Errorf("training stage: reading the fleet: %w", err)
			}
			t.readSlots(st.Slots)
			loaded = true
		}
		jobs = append(jobs, trainJob{i: i, w: wp, p: out.Placements[i], mine: t.slotsOf(wp.Name)})
		jb := &jobs[len(jobs)-1]
		jb.j, jb.err = t.job(wp)
		if jb.j != nil {
			// Two placements of one job share its state: decided one
			// after the other.
			twice = twice || jb.j.plan == t.plans
			jb.j.plan = t.plans
		}
	}
	t.work = jobs
	// The shared tracker, prices and shape caches are read and fed in job
	// order (prepare: the tracker's state depends on who heard of a pool
	// first, and a job's hysteresis on what was heard before it); the
	// rest of each decision reads only the job's own state and what
	// prepare copied into its trainJob (finish), so it is taken on another
	// goroutine while the jobs after it are prepared.
	gen := 0
	if u != nil {
		gen = u.Gen() // (nothing blocks or clears a pool while the pass plans)
	}
	prepare := func(k int) {
		if jb := &jobs[k]; jb.err == nil {
			t.prepare(jb, u, gen, now)
		}
	}
	finish := func(k int) {
		if jb := &jobs[k]; jb.err == nil {
			jb.out, jb.err = t.finish(ctx, jb, u, now)
		}
	}
	if twice {
		for k := range jobs {
			prepare(k)
			finish(k)
		}
	} else {
		pipelineFor(len(jobs), t.Workers, prepare, finish)
	}
	for k := range jobs {
		jb := &jobs[k]
		if jb.err != nil {
			t.log().Warn("training stage: keeping the solver's placement", "workload", jb.w.Name, "err", jb.err)
			continue
		}
		out.Placements[jb.i] = jb.out
		t.changed = append(t.changed, jb.i)
	}
	clear(jobs) // (the scratch keeps no pointers into this plan)
	// A job that left the policy (or no longer runs on spot with a
	// deadline) takes its state and its decision with it.
	for name := range t.jobs {
		if w := byName[name]; w == nil || !liveTraining(w) {
			delete(t.jobs, name)
		}
	}
	t.lastIn, t.lastOut, t.lastAt = plan, &out, now
	t.out = &out
	return &out, nil
}

// changedOf is the indices of the placements Plan set in plan, its last
// answer; nil for any other plan (the inner plan it handed back as it was).
// Read after Plan returned, before the next call.
func (t *TrainingSource) changedOf(plan *optimizer.Plan) []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if plan == nil || plan != t.out {
		return nil
	}
	return t.changed
}

// sameSettings says whether two policies differ at most in their
// workloads.
func sameSettings(a, b *policy.Policy) bool {
	x, y := *a, *b
	x.Workloads, y.Workloads = nil, nil
	return reflect.DeepEqual(&x, &y)
}

// placedInBlocked says whether a placement has a group in a pool blocked at
// now.
func placedInBlocked(p optimizer.Placement, u *Unavailable, now time.Time) bool {
	if u == nil {
		return false
	}
	for _, g := range p.Groups {
		if u.Blocked(PoolOf(pricing.Offer{Cloud: g.Cloud, Region: g.Region, Zone: g.Zone, InstanceType: g.InstanceType}, g.Capacity), now) {
			return true
		}
	}
	return false
}

// Decisions returns each live job's latest decision.
func (t *TrainingSource) Decisions() map[string]TrainingDecision {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]TrainingDecision{}
	for k, j := range t.jobs {
		out[k] = TrainingDecision{Policy: j.policy.Name(), Tick: j.tick, Action: j.decision.Capacity.String(), Pool: j.pool, Done: j.estimate,
			Work: j.work, Reported: j.reported, Reason: j.reason, At: j.lastAt, Deadline: j.deadline}
	}
	return out
}

func (t *TrainingSource) log() *slog.Logger {
	if t.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.Log
}

// liveTraining says whether a workload's placement is the stage's: a job
// with a deadline that may run on spot.
func liveTraining(w *policy.Workload) bool {
	return (w.Kind == policy.Training || w.Kind == policy.Batch) && w.Deadline > 0 && w.Spot != policy.SpotNever
}

// jobWork is the job's work in seconds of compute on the planned shape.
func jobWork(w policy.Workload, p optimizer.Placement) float64 {
	speed := float64(p.GPUs)
	if p.RelativeSpeed > 0 {
		speed *= p.RelativeSpeed
	}
	if p.ScalingEfficiency > 0 {
		speed *= p.ScalingEfficiency
	}
	if speed <= 0 {
		speed = 1
	}
	return w.WorkGPUHours * 3600 / speed
}

// pools lists the spot pools of the placement's instance type in its
// cloud and region, by zone, and its on-demand offer: in the planned zone
// if sold there, else the first. The pools are copied into buf (the
// caller's to change); blk are their blocks' memos, the stage's. t.mu is
// held.
func (t *TrainingSource) pools(p optimizer.Placement, buf []livePool) ([]livePool, []blockMemo, pricing.Offer, bool) {
	g := p.Groups[0]
	cat := t.Catalog()
	if cat == nil {
		return nil, nil, pricing.Offer{}, false
	}
	if cat != t.poolCat || t.byShape == nil {
		t.poolCat, t.byShape = cat, map[shapeKey]*shapePools{}
	}
	k := shapeKey{cloud: g.Cloud, region: g.Region, kind: g.InstanceType}
	sp := t.byShape[k]
	if sp == nil {
		sp = &shapePools{}
		for o := range cat.All() {
			if o.Cloud != g.Cloud || o.Region != g.Region || o.InstanceType != g.InstanceType {
				continue
			}
			if o.SpotPrice > 0 {
				sp.spot = append(sp.spot, livePool{offer: &o, key: poolName(PoolOf(o, pricing.Spot))})
			}
			if o.OnDemandPrice > 0 {
				sp.od = append(sp.od, o)
			}
		}
		sort.Slice(sp.spot, func(a, b int) bool { return sp.spot[a].key < sp.spot[b].key })
		sp.blk = make([]blockMemo, len(sp.spot))
		t.byShape[k] = sp
	}
	var od pricing.Offer
	haveOD := false
	for _, o := range sp.od {
		if !haveOD || o.Zone == g.Zone {
			od, haveOD = o, true
		}
	}
	return append(buf[:0], sp.spot...), sp.blk, od, haveOD
}

// job is w's live state, made anew when w is new or names another policy.
// t.mu is held.
func (t *TrainingSource) job(w *policy.Workload) (*liveJob, error) {
	name := w.SpotDecider
	if name == "" {
		name = spotpolicy.DefaultTraining
	}
	j := t.jobs[w.Name]
	if j == nil || j.name != name {
		pol, err := spotpolicy.NewTraining(name)
		if err != nil {
			return nil, err
		}
		j = &liveJob{policy: pol, name: name, tick: -1}
		t.jobs[w.Name] = j
	}
	return j, nil
}

// prepare starts a job's decision for this tick with what it reads of the
// stage's shared state, in job order: its liveJob, its pools (the shape
// cache, the smoothed prices) and their live signals into the tracker and
// back out as its policy's pool views (a job's signals change what the
// jobs after it see). finish takes the decision from there. t.mu is held.
func (t *TrainingSource) prepare(jb *trainJob, u *Unavailable, gen int, now time.Time) {
	w, mine, j := jb.w, jb.mine, jb.j
	// The job's slots: its start is its oldest slot's creation, its
	// current capacity that of its first slot.
	var first *store.SlotRecord
	start := time.Time{}
	for _, s := range mine {
		if start.IsZero() || s.CreatedAt.Before(start) {
			start = s.CreatedAt
		}
		if first == nil || s.Index < first.Index {
			first = s
		}
	}
	// A slot replaced or re-created later must not move the deadline:
	// keep the earliest start this leader has seen.
	if start.IsZero() || (!j.start.IsZero() && j.start.Before(start)) {
		if j.start.IsZero() {
			j.start = now
		}
		start = j.start
	}
	j.start = start
	p := jb.p
	if first != nil && first.Capacity == string(pricing.Spot) && (State(first.State) == Running || State(first.State) == Booting) {
		p = inRunningRegion(p, first)
	}
	pools, blk, od, haveOD := t.pools(p, j.pools)
	j.pools = pools
	if !haveOD {
		jb.err = fmt.Errorf("no on-demand price for %s in %s/%s: the safety net needs one", p.Groups[0].InstanceType, p.Cloud, p.Region)
		return
	}
	if len(pools) == 0 {
		jb.err = fmt.Errorf("no spot pool sells %s in %s/%s", p.Groups[0].InstanceType, p.Cloud, p.Region)
		return
	}
	gap := t.Config.tick()
	work := jobWork(*w, p)
	// The on-demand alternative is found in finish; what it reads of the
	// stage (the catalog, the policy, the quotas the rest of the plan
	// leaves) is taken here.
	jb.cat, jb.pol = t.Catalog(), t.Policy()
	jb.altCandidate = jb.cat != nil && jb.pol != nil && w.Spot != policy.SpotOnly
	jb.quotas, jb.budgets = nil, nil
	if jb.altCandidate {
		jb.quotas, jb.budgets = t.netQuotas(jb.pol.Quotas, &p), t.netBudgets(jb.pol.Budgets, &p)
	}
	// The state in the job's scratch: the policies keep nothing of it.
	s := &j.state
	*s = spotpolicy.State{Gap: gap.Seconds(), Work: work, Deadline: (w.Deadline - t.Config.reserve()).Seconds(), Changeover: (t.Config.Boot + w.RestartOverhead).Seconds(),
		Checkpoint: ckptWork(*w, work), Pools: resized(j.state.Pools, len(pools))}
	s.Tick = int(now.Sub(start) / gap)

	// Live signals into the trackers: a blocked pool has no capacity, a
	// pool the job runs on spot in has.
	running := first != nil && (State(first.State) == Running || State(first.State) == Booting)
	cur := spotpolicy.Idle
	known := resized(j.known, len(pools))
	j.known = known
	for k, lp := range pools {
		// The job's own running instance proves capacity even where
		// another launch was just refused.
		known[k] = true
		if running && first.Capacity == string(pricing.Spot) && first.Zone == lp.offer.Zone && first.InstanceType == lp.offer.InstanceType {
			t.Tracker.Observe(lp.key, now, true)
			cur = spotpolicy.RunSpot(k)
		} else if u.offerBlocked(lp.offer, pricing.Spot, &blk[k], gen, now) {
			t.Tracker.Observe(lp.key, now, false)
		} else if t.Tracker.Known(lp.key) {
			// The block ran out: the pool is worth a launch again, as the
			// reconciler sees it. Without this a pool that lost capacity
			// once would look lost for good.
			t.Tracker.Observe(lp.key, now, true)
		} else {
			known[k] = false // (Pool below does not make it known)
		}
	}
	if running && first.Capacity == string(pricing.OnDemand) {
		cur = spotpolicy.RunOnDemand
	}
	anyUp := false
	for k, lp := range pools {
		pools[k].price = t.smooth(lp.key, lp.offer.SpotPrice, now)
		s.Pools[k] = t.Tracker.Pool(lp.key, now)
		anyUp = anyUp || s.Pools[k].Available
	}
	if j.anyKey == "" {
		j.anyKey = "any:" + w.Name // (j is the workload's: t.jobs by name)
	}
	anyKey := j.anyKey
	t.Tracker.Observe(anyKey, now, anyUp)
	s.Any = t.Tracker.Pool(anyKey, now)
	cheapest := 0
	for k, lp := range pools {
		if lp.offer.SpotPrice < pools[cheapest].offer.SpotPrice {
			cheapest = k
		}
	}
	s.SpotPrice = pools[cheapest].offer.SpotPrice * float64(p.Instances)
	jb.p, jb.first, jb.start, jb.running, jb.cur = p, first, start, running, cur
	jb.pools, jb.known, jb.od, jb.work = pools, known, od, work
	jb.odTotal = od.OnDemandPrice * float64(p.Instances)
}

// finish runs the job's policy for this tick on what prepare read and
// returns its placement. It touches only the job's own state (and reads
// the progress source, the speed ratios and the blocked pools), so Plan
// runs it for several jobs at once.
func (t *TrainingSource) finish(ctx context.Context, jb *trainJob, u *Unavailable, now time.Time) (optimizer.Placement, error) {
	w, p, mine, j := *jb.w, jb.p, jb.mine, jb.j
	first, start, running, cur := jb.first, jb.start, jb.running, jb.cur
	pools, od, work := jb.pools, jb.od, jb.work
	// On demand, the job runs on the cheapest on-demand placement the
	// solver finds for it, when that is cheaper than the planned instance
	// type on demand and no slower (the safety net counts time on the
	// planned shape).
	odTotal := jb.odTotal
	var alt *optimizer.Placement
	if jb.altCandidate {
		alt = onDemandAlt(j, jb.w, p, jb.cat, jb.pol, jb.quotas, jb.budgets, t.polGen, odTotal, work, u, now)
	}
	if alt != nil {
		odTotal = alt.PricePerHour
	}
	s := &j.state
	s.OnDemandPrice = odTotal

	// Progress: reported by the job, else estimated from its running time.
	var rep JobProgress
	reported := false
	if t.Progress != nil {
		var err error
		if rep, reported, err = t.Progress.JobProgress(ctx, w.Name); err != nil {
			return p, fmt.Errorf("reading progress: %w", err)
		}
		// A report from before this run of the job (an earlier job of the
		// same name) says nothing about it.
		reported = reported && !rep.At.Before(start)
	}
	upAt := gangUpAt(mine, p.Instances)
	t.account(j, first, running, upAt, s, p.Instances, now)
	if reported {
		s.Done = math.Min(1, math.Max(0, rep.Done)) * work
		if !running && s.Checkpoint > 0 && s.Done < work {
			s.Done = math.Floor(s.Done/s.Checkpoint) * s.Checkpoint // the job restarts from its checkpoint
		}
		j.estimate = s.Done
	} else {
		s.Done = j.estimate
	}
	s.Current = cur
	s.Overhead = s.Changeover
	if running && !upAt.IsZero() {
		s.Overhead = math.Max(0, s.Changeover-now.Sub(upAt).Seconds())
	}
	s.Saved = s.Done
	if s.Checkpoint > 0 {
		s.Saved = math.Floor(s.Done/s.Checkpoint) * s.Checkpoint
	}
	s.Spent = j.spent

	a := j.decision
	if s.Tick != j.tick {
		a = j.policy.Decide(s)
		j.tick, j.reason = s.Tick, ""
	}
	if a.Capacity == spotpolicy.Spot && cur.Capacity != spotpolicy.Spot && a.Pool < len(pools) {
		// A new spot instance pays a changeover wherever it starts: take
		// the cheapest pool that looks as good to the policy.
		for k, lp := range pools {
			if s.Pools[k].Available && s.Pools[k].Frac >= s.Pools[a.Pool].Frac && lp.price < pools[a.Pool].price {
				a = spotpolicy.RunSpot(k)
			}
		}
	}
	if a.Capacity == spotpolicy.Spot && a.Pool < len(pools) && pools[a.Pool].offer.SpotPrice*float64(p.Instances) >= odTotal {
		// Spot at or above the on-demand price (it happens for some
		// types and zones): on demand costs no more and is not preempted.
		a, j.reason = spotpolicy.RunOnDemand, fmt.Sprintf("spot in %s costs $%.2f/h, not less than on demand ($%.2f/h)",
			pools[a.Pool].offer.Zone, pools[a.Pool].offer.SpotPrice*float64(p.Instances), odTotal)
	}
	a = spotpolicy.Guard(s, a)
	inst := ""
	if running {
		inst = first.InstanceID
	}
	j.priceMoveOutcome(cur, inst, pools, now)
	a, j.reason = t.hysteresis(s, pools, jb.known, a, j.reason, func(k int) bool { return now.Before(j.moveHeld[pools[k].key]) })
	a, j.reason = keepUnsaved(s, cur, a, j.reason)
	a, j.reason = j.leaveBackoff(cur, inst, a, now, j.reason)
	if cur == spotpolicy.RunOnDemand && State(first.State) != Running && a != spotpolicy.RunOnDemand {
		// An on-demand instance still booting has its changeover under
		// way. Leaving it for a spot pool that may only look available
		// because its block ran out can cost a second changeover (the
		// launch refused, back to on-demand) that the safety net does
		// not count; take that chance only for a pool that has looked
		// available for a changeover's time, and while the slack covers it.
		twice := *s
		twice.Deadline -= s.Changeover
		fresh := a.Capacity == spotpolicy.Spot && a.Pool < len(s.Pools) && float64(s.Pools[a.Pool].Run)*s.Gap < s.Changeover
		if fresh || !twice.Safe(a) {
			a, j.reason = spotpolicy.RunOnDemand, "on-demand still booting; the spot pool only just looks available"
		}
	}
	if w.Spot == policy.SpotOnly && a.Capacity == spotpolicy.OnDemand {
		// The safety net asks for on demand, which spot_policy only
		// forbids: the job stays on spot and may miss its deadline, as
		// its owner chose.
		a, j.reason = spotOnlyAction(s, pools, cur), "spot only: no on-demand fallback ("+j.reason+")"
	}
	if cur.Capacity == spotpolicy.Spot && a.Capacity == spotpolicy.Spot && a != cur && a.Pool < len(pools) {
		j.moveTo, j.moveFrom = pools[a.Pool].key, inst
	}
	j.reported = reported
	j.decision = a
	j.lastAt = now
	j.work, j.deadline = work, start.Add(w.Deadline)
	j.setPool(pools, a)
	np := place(p, pools, od, a, cur, &j.groups)
	if alt != nil && a.Capacity == spotpolicy.OnDemand && w.Spot != policy.SpotOnly {
		np = placeAlt(*alt, cur)
		if j.reason == "" {
			j.reason = "on demand"
		}
		j.reason += fmt.Sprintf(" on %s %s %s ($%.2f/h; the planned %s on demand: $%.2f/h)", alt.Cloud, alt.Region, alt.InstanceType,
			alt.PricePerHour, p.Groups[0].InstanceType, od.OnDemandPrice*float64(p.Instances))
	}
	if w.Spot == policy.SpotOnly {
		// A spot-only job has no safety net for a blind spot to mislead:
		// any pool the solver offers as a fallback is capacity it may need.
		np.RunnerUp = p.RunnerUp
	}
	return np, nil
}

// altCache is a job's on-demand alternative (onDemandAlt) and what it was
// found for.
type altCache struct {
	cat *pricing.Catalog
	pol *policy.Policy // the workload is w in it
	w   policy.Workload
	gen int // TrainingSource.polGen
	// quotas and budgets are the policy's net of the other workloads'
	// use when the alternative was found (netQuotas, netBudgets).
	quotas  []policy.Quota
	budgets []policy.Budget
	alt     *optimizer.Placement
	ok      bool // computed
}

// netQuotas are the policy's quotas less the GPUs the inner plan's other
// placements (all but p, the job's) hold in each: a quota caps the GPUs
// in use across all workloads, so an alternative found for one job alone
// may use only what the rest of the plan leaves. The plan's use is summed
// once per Plan call, and only when an alternative is looked for. nil when
// the policy has none.
func (t *TrainingSource) netQuotas(quotas []policy.Quota, p *optimizer.Placement) []policy.Quota {
	if len(quotas) == 0 {
		return nil
	}
	if t.innerUse == nil && t.inner != nil {
		t.innerUse = make([]int, len(quotas))
		for i := range t.inner.Placements {
			addQuotaUse(t.innerUse, quotas, &t.inner.Placements[i], 1)
		}
	}
	use := make([]int, len(quotas))
	copy(use, t.innerUse)
	addQuotaUse(use, quotas, p, -1)
	out := slices.Clone(quotas)
	for q := range out {
		out[q].MaxGPUs = max(0, out[q].MaxGPUs-use[q])
	}
	return out
}

// netBudgets are the policy's budgets less the monthly cost
// (Placement.MonthlyCost, what the solver checks budgets against: runs per
// month of a recurring job, a service's load profile) of the inner plan's
// other placements each covers, as netQuotas does for GPUs: an alternative
// found for the job alone may spend only what the rest of the plan leaves
// of a budget. nil when the policy has none.
func (t *TrainingSource) netBudgets(budgets []policy.Budget, p *optimizer.Placement) []policy.Budget {
	if len(budgets) == 0 {
		return nil
	}
	if t.innerSpend == nil && t.inner != nil {
		t.innerSpend = make([]float64, len(budgets))
		for i := range t.inner.Placements {
			addBudgetSpend(t.innerSpend, budgets, &t.inner.Placements[i], t.innerBy, 1)
		}
	}
	spend := make([]float64, len(budgets))
	copy(spend, t.innerSpend)
	addBudgetSpend(spend, budgets, p, t.innerBy, -1)
	out := slices.Clone(budgets)
	for b := range out {
		// (Rounded to the cent, as MonthlyCost is: a sum of a thousand
		// rounded figures less one of them must not differ in the last bit
		// from one run to the next of the same plan, or the cached
		// alternative would be found again.)
		out[b].MonthlyUSD = max(0, math.Round((out[b].MonthlyUSD-spend[b])*100)/100)
	}
	return out
}

// addBudgetSpend adds sign × a placement's monthly cost to each budget
// that covers its workload (by name or team; a budget naming neither
// covers every workload).
func addBudgetSpend(spend []float64, budgets []policy.Budget, pl *optimizer.Placement, byName workloadIndex, sign float64) {
	w := byName[pl.Workload]
	for b := range budgets {
		if budgets[b].Workload != "" && budgets[b].Workload != pl.Workload {
			continue
		}
		if budgets[b].Team != "" && (w == nil || w.Team != budgets[b].Team) {
			continue
		}
		spend[b] += sign * pl.MonthlyCost
	}
}

// addQuotaUse adds sign × the GPUs each quota counts in a placement.
func addQuotaUse(use []int, quotas []policy.Quota, pl *optimizer.Placement, sign int) {
	for _, g := range pl.Groups {
		for q := range quotas {
			if quotas[q].Matches(g.Cloud, g.Region, g.GPU) {
				use[q] += sign * g.Instances * g.GPUsPerInstance
			}
		}
	}
}

// onDemandAlt is the cheapest on-demand placement of the job, as the
// solver places it: the workload alone with spot: never, under the
// policy's clouds, regions, residency, quotas and budgets, with the
// blocked pools ruled out. Quotas count what the inner plan's other
// placements hold (netQuotas), budgets what they spend a month
// (netBudgets). It is used only when it costs
// less than the planned instance type on demand for the job's work (by 1%
// or more), runs it no slower and on as many instances; nil otherwise.
// Kept per job until the catalog, the workload or the policy's other
// settings change, or its pool is blocked (a launch refused for quota or
// capacity). The live stage's on-demand used to be the planned instance
// type in the planned region: the three-cloud 2 x 8 H100 gang planned on
// AWS p5 spot ran p5 on demand ($118/h an instance in ap-south-1) where
// GCP a3-highgpu-8g is $43/h.
func onDemandAlt(j *liveJob, w *policy.Workload, p optimizer.Placement, cat *pricing.Catalog, pol *policy.Policy, quotas []policy.Quota,
	budgets []policy.Budget, polGen int, sameType, work float64, u *Unavailable, now time.Time) *optimizer.Placement {
	if cat == nil || pol == nil || w.Spot == policy.SpotOnly {
		return nil
	}
	c := &j.alt
	if c.ok && c.cat == cat && c.gen == polGen && (c.pol == pol || reflect.DeepEqual(&c.w, w)) && (c.alt == nil || !placedInBlocked(*c.alt, u, now)) &&
		slices.Equal(c.quotas, quotas) && slices.Equal(c.budgets, budgets) {
		c.pol = pol // the same workload in a new policy (another one left)
	} else {
		*c = altCache{cat: cat, pol: pol, w: *w, gen: polGen, quotas: quotas, budgets: budgets, ok: true}
		sub := *pol
		sub.Quotas, sub.Budgets = quotas, budgets
		od := *w
		od.Spot = policy.SpotNever
		sub.Workloads = []policy.Workload{od}
		in := optimizer.Input{Catalog: cat, Policy: &sub, Now: now, Replan: true}
		if u != nil {
			in.Unavailable, in.PoolLimit = u.Func(now), u.LimitFunc(now)
		}
		if plan, err := optimizer.Solve(in); err == nil && len(plan.Placements) == 1 && len(plan.Placements[0].Groups) > 0 {
			a := plan.Placements[0]
			a.RunnerUp = nil
			c.alt = &a
		}
		// (None feasible: the planned type on demand, as before.)
	}
	a := c.alt
	if a == nil {
		return nil
	}
	for _, g := range a.Groups {
		if g.Capacity != pricing.OnDemand {
			return nil
		}
	}
	// Against the planned placement of now (the solver may have moved it
	// since): the same number of instances (the stage counts a job's
	// progress and cost by its planned instances: gangUpAt, account), no
	// slower, and cheaper for the work.
	altWork := jobWork(*w, *a)
	if a.Instances != p.Instances || altWork > work*(1+1e-9) || a.PricePerHour*altWork >= 0.99*sameType*work {
		return nil
	}
	return a
}

// placeAlt is the job's on-demand alternative as its placement: Move when
// the job runs on spot now. An on-demand instance of the planned type (one
// started before the alternative was known) stays where it runs, as a
// running on-demand job always did: moving it would cost a changeover for
// a lower price per hour, which the policy has not weighed.
func placeAlt(alt optimizer.Placement, cur spotpolicy.Action) optimizer.Placement {
	groups := make([]optimizer.Group, len(alt.Groups))
	for i, g := range alt.Groups {
		g.Move = cur.Capacity == spotpolicy.Spot
		groups[i] = g
	}
	alt.Groups = groups
	return alt
}

// inRunningRegion moves a job's placement to the region its first slot runs
// spot in when the solver has since put the same instance type of the same
// cloud in another region (it re-solves a job whose pool was blocked, and
// the cheapest pool may be anywhere). The stage watches the spot pools of
// the placement's region: following the solver there would leave the
// running spot instance out of its sight (a group without Move is not
// replaced), the job counted as idle with its unsaved work as safe, and the
// safety net late. The policy decides moves from there. (An on-demand
// instance is seen wherever it runs; another instance type is left to the
// solver.)
func inRunningRegion(p optimizer.Placement, first *store.SlotRecord) optimizer.Placement {
	g := p.Groups[0]
	if string(g.Cloud) != first.Cloud || g.InstanceType != first.InstanceType || g.Region == first.Region || first.Region == "" {
		return p
	}
	groups := make([]optimizer.Group, len(p.Groups))
	for i, g := range p.Groups {
		g.Region = first.Region
		groups[i] = g
	}
	p.Groups, p.Region = groups, first.Region
	return p
}

// gangUpAt is when all of a job's instances were last running together:
// the latest RunningAt of its running slots, or zero while fewer than
// instances of them run. A multi-instance job makes no progress until the
// last of its instances is up; estimating from the first one's running time
// made the stage count a job whose second instance a one-instance pool
// refused as finished, and the safety net never fired (fleet simulation,
// 2 × p5.48xlarge on the one-instance traces).
func gangUpAt(mine []*store.SlotRecord, instances int) time.Time {
	var at time.Time
	up := 0
	for _, sl := range mine {
		if State(sl.State) != Running || sl.RunningAt.IsZero() {
			continue
		}
		up++
		if sl.RunningAt.After(at) {
			at = sl.RunningAt
		}
	}
	if up < max(1, instances) {
		return time.Time{}
	}
	return at
}

// leaveBackoff holds a job on demand for a while after a move to spot
// failed. A spot pool looks available again when its block runs out, with
// nothing known of its capacity; a move there stops the on-demand
// instance first (the reconciler replaces the slot), so a refused launch
// costs the job a new on-demand instance, its changeover and the work
// since its last checkpoint. Without spot capacity anywhere, a job went
// back and forth every hour and cost 1.3-3.7 × on demand in the fleet
// simulation. The wait starts at an hour and doubles up to eight; a move
// that reaches spot resets it.
func (j *liveJob) leaveBackoff(cur spotpolicy.Action, inst string, a spotpolicy.Action, now time.Time, reason string) (spotpolicy.Action, string) {
	if j.leaving && cur == spotpolicy.RunOnDemand && inst != "" && inst == j.leftInst {
		// The move was refused and the on-demand instance kept: the
		// reconciler launches a one-instance job's replacement before it
		// stops what runs (launch first), so the refusal cost nothing but
		// the pool's block, which paces the next try.
		j.leaving = false
	} else if j.leaving && cur.Capacity != spotpolicy.Spot {
		// The move did not reach spot: the launch was refused, or the
		// instance lost before it ran.
		j.leaveWait = min(max(2*j.leaveWait, time.Hour), 8*time.Hour)
		j.nextLeave = now.Add(j.leaveWait)
		j.leaving = false
	} else if cur.Capacity == spotpolicy.Spot {
		j.leaving, j.leaveWait = false, 0
	}
	if cur != spotpolicy.RunOnDemand || a.Capacity != spotpolicy.Spot {
		return a, reason
	}
	if now.Before(j.nextLeave) {
		return cur, fmt.Sprintf("staying on on-demand until %s: the last move to spot did not get capacity", j.nextLeave.Format(time.RFC3339))
	}
	j.leaving, j.leftInst = true, inst
	return a, reason
}

// priceMoveOutcome learns how the job's last move between spot pools went:
// still on the instance it was to leave, the launch in the target pool was
// refused (the reconciler launches first and keeps the job where it runs),
// and the hysteresis leaves that pool alone for an hour, then two, four, up
// to eight; a move that reached the pool clears its wait. A pool whose
// block ran out looks available with nothing known of its capacity, and
// retrying a price move there at every block made no money (the job keeps
// its instance) but made a refused launch, a blocked pool and a re-plan
// each time: in the fleet simulation's 100-workload benchmark, 106 refused
// price moves over 30 days.
func (j *liveJob) priceMoveOutcome(cur spotpolicy.Action, inst string, pools []livePool, now time.Time) {
	if j.moveTo == "" {
		return
	}
	to := j.moveTo
	j.moveTo = ""
	if j.moveHeld == nil {
		j.moveHeld, j.moveWait = map[string]time.Time{}, map[string]time.Duration{}
	}
	if cur.Capacity == spotpolicy.Spot && inst != "" && inst == j.moveFrom {
		w := min(max(2*j.moveWait[to], time.Hour), 8*time.Hour)
		j.moveWait[to], j.moveHeld[to] = w, now.Add(w)
		return
	}
	if cur.Capacity == spotpolicy.Spot && cur.Pool < len(pools) && pools[cur.Pool].key == to {
		delete(j.moveWait, to)
		delete(j.moveHeld, to)
	}
}

// keepUnsaved holds a running job where it is when leaving would throw
// away work the deadline still needs, or more work than a changeover when
// it leaves on demand. spotpolicy assumes a voluntary stop checkpoints
// first; a live job only keeps what its last checkpoint saved (none without
// checkpoint_interval), so a stop or a move is judged from the saved
// progress. Leaving spot for on demand is held back only while staying is
// safe for the deadline and the move would lose more than a changeover: the
// safety net takes it while that loss is still affordable.
func keepUnsaved(s *spotpolicy.State, cur, a spotpolicy.Action, reason string) (spotpolicy.Action, string) {
	if cur.Capacity == spotpolicy.None || a == cur || s.Done <= s.Saved {
		return a, reason
	}
	if cur.Capacity == spotpolicy.Spot && a.Capacity == spotpolicy.OnDemand {
		// The most a preemption can take near the end: what runs since the
		// last checkpoint (everything, without checkpoints).
		lossAtEnd := math.Min(s.Work-s.Saved, s.Checkpoint)
		finishes := s.RemainingTime()-s.RemainingWork()-s.Gap >= lossAtEnd+s.Changeover
		if s.Done-s.Saved > s.Changeover && finishes && spotpolicy.Guard(s, cur) == cur {
			// Not for the deadline (staying is safe, and the instance can
			// finish before the safety net would need on demand) but for
			// the cost cap, whose worst case counts the unsaved work as
			// lost either way: moving now would make that loss certain.
			// Stay until the next checkpoint, or the end.
			return cur, fmt.Sprintf("staying on spot: on-demand now would lose %.0f s of work since its last checkpoint, and the deadline does not need it", s.Done-s.Saved)
		}
		return a, reason // the safety net takes it while the loss is affordable
	}
	if cur.Capacity == spotpolicy.OnDemand && s.Done-s.Saved > s.Changeover {
		// Leaving on demand is never needed for the deadline, and what it
		// would throw away is more than the changeover the policy weighed
		// (it assumes the stop saves everything): wait for the next
		// checkpoint. A job without checkpoints stays to the end.
		return cur, fmt.Sprintf("staying on on-demand: leaving now would lose %.0f s of work since its last checkpoint", s.Done-s.Saved)
	}
	lost := *s
	lost.Done = s.Saved
	if lost.Safe(a) {
		return a, reason
	}
	keep := spotpolicy.Guard(s, cur)
	return keep, fmt.Sprintf("staying on %s: leaving would lose %.0f s of unsaved work the deadline needs", keep.Capacity, s.Done-s.Saved)
}

// spotOnlyAction is what a spot-only job does instead of on demand: stay
// on the spot pool it runs in, else take the available pool with the best
// recent availability (then the cheapest), else wait for one.
func spotOnlyAction(s *spotpolicy.State, pools []livePool, cur spotpolicy.Action) spotpolicy.Action {
	if cur.Capacity == spotpolicy.Spot {
		return cur
	}
	best := -1
	for k, p := range s.Pools {
		if !p.Available {
			continue
		}
		if best < 0 || p.Frac > s.Pools[best].Frac || (p.Frac == s.Pools[best].Frac && pools[k].price < pools[best].price) {
			best = k
		}
	}
	if best < 0 {
		return spotpolicy.Idle
	}
	return spotpolicy.RunSpot(best)
}

// poolName names a pool in the tracker and in status.
func poolName(k providers.PoolKey) string {
	return string(k.Cloud) + "/" + k.Zone + "/" + k.InstanceType + "/" + string(k.Capacity)
}

// ckptWork is the work between two checkpoints. A job without
// checkpoint_interval saves nothing until it is done (docs/policy.md: a
// preemption loses all work since the start), so its only "checkpoint" is
// the whole work; spotpolicy's 0 would mean progress saved continuously,
// and the safety net would not count the loss of everything on a
// preemption near the deadline.
func ckptWork(w policy.Workload, work float64) float64 {
	if w.CheckpointInterval <= 0 {
		return work
	}
	return math.Min(work, w.CheckpointInterval.Seconds())
}

// account advances the job's cost (for the adaptive policy's cost cap)
// and progress estimate to now: the
// current instance makes progress from its start plus the changeover, at
// its measured speed; a new instance starts from the last checkpoint.
func (t *TrainingSource) account(j *liveJob, first *store.SlotRecord, running bool, upAt time.Time, s *spotpolicy.State, instances int, now time.Time) {
	if !j.lastAt.IsZero() && j.lastPrice > 0 {
		j.spent += j.lastPrice * now.Sub(j.lastAt).Hours()
	}
	j.lastPrice = 0
	if !running {
		// The instance is gone (preempted, or never up): what it did since
		// its last checkpoint is lost.
		j.inst = ""
		if s.Checkpoint > 0 && j.estimate < s.Work {
			j.estimate = math.Floor(j.estimate/s.Checkpoint) * s.Checkpoint
		}
		return
	}
	j.lastPrice = first.PricePerHour * float64(max(1, instances)) // the job's instances run alike
	if first.InstanceID != j.inst {
		j.base = j.estimate
		if s.Checkpoint > 0 {
			j.base = math.Floor(j.base/s.Checkpoint) * s.Checkpoint
		}
		j.inst = first.InstanceID
	}
	if upAt.IsZero() {
		j.estimate = j.base
		return
	}
	ratio := 1.0
	if t.SpeedRatio != nil {
		if r := t.SpeedRatio(pricing.Cloud(first.Cloud), first.InstanceType); r > 0 {
			ratio = r
		}
	}
	ran := math.Max(0, now.Sub(upAt).Seconds()-s.Changeover)
	j.estimate = math.Min(s.Work, j.base+ran*ratio)
}

// hysteresis keeps a job running on spot where it is unless moving to the
// cheapest available pool (by smoothed price) pays: the saving over the remaining work must
// beat the changeover plus the work lost since the last checkpoint by the
// margin. Moves the policy or the safety net make for capacity (the current
// pool lost it, or on-demand is needed) are not held back.
func (t *TrainingSource) hysteresis(s *spotpolicy.State, pools []livePool, known []bool, a spotpolicy.Action, reason string, held func(k int) bool) (spotpolicy.Action, string) {
	c := s.Current
	if c.Capacity != spotpolicy.Spot || a.Capacity != spotpolicy.Spot || !s.Pools[c.Pool].Available {
		return a, reason
	}
	// Only a pool that has looked available for a changeover's time is
	// worth leaving a working instance for: one that looks available just
	// because its block ran out may refuse the launch, and the job would
	// pay the changeover for nothing (and hop back and forth).
	// It must also have held capacity at least as steadily as the pool the
	// job is in (Frac), and for an hour or a changeover, whichever is
	// longer: spot pools that flap make every move a gamble.
	hold := math.Max(s.Changeover, 3600)
	// A pool nothing was ever heard of (no launch refused there, no
	// preemption) has no record against it and counts as settled.
	settled := func(k int) bool {
		if !s.Pools[k].Available || (held != nil && held(k)) {
			return false
		}
		if !known[k] {
			return true
		}
		return float64(s.Pools[k].Run)*s.Gap >= hold && s.Pools[k].Frac >= s.Pools[c.Pool].Frac
	}
	target := a.Pool
	if target != c.Pool && !settled(target) {
		target = c.Pool
	}
	for k, lp := range pools {
		if settled(k) && lp.price < pools[target].price {
			target = k
		}
	}
	if target == c.Pool {
		return c, reason
	}
	// A move spends a changeover and the unsaved work out of the job's
	// slack; it must leave enough for one more changeover, or the first
	// preemption in the new pool sends the job to on-demand for the rest
	// of its work (tight-v100 on aws-10-26-2022 moved with 0.4 h of slack,
	// lost the pool minutes later and paid 0.81 of on-demand, not 0.18).
	if lost := s.Done - s.Saved; s.Slack()-s.Changeover-lost < s.Changeover {
		return c, "staying: a move would leave too little slack for another preemption"
	}
	if t.movePays(s, target, pools[c.Pool].price, pools[target].price) {
		moved := spotpolicy.RunSpot(target)
		if spotpolicy.Guard(s, moved) == moved {
			return moved, fmt.Sprintf("moving to %s: saving beats changeover and lost work by more than %.0f%%", pools[target].key, 100*t.Config.margin())
		}
	}
	return c, "staying: a move would not pay"
}

// movePays compares the saving of running the remaining work at price to
// instead of from with what a move costs: the changeover and the lost work
// redone at the new price.
func (t *TrainingSource) movePays(s *spotpolicy.State, target int, from, to float64) bool {
	remaining := s.RemainingWork() / 3600
	// The move may fail (the launch refused, the new pool lost soon): count
	// the saving only with the chance the target pool holds, its recent
	// share of time with capacity.
	saving := (from - to) * remaining * math.Min(1, math.Max(0, s.Pools[target].Frac))
	lost := s.Done - s.Saved
	cost := (s.Changeover + lost) / 3600 * to
	return saving > cost*(1+t.Config.margin()) && saving > 0
}

// place rewrites the placement's groups to the decision, instance counts
// and group order kept so slot identities stay the same. Idle keeps the
// job pending on its best spot pool: the reconciler launches when the pool
// is unblocked, which is what waiting for spot means.
// readSlots files the fleet's slots by workload, the lists of the last
// read emptied as their workloads come (slotsOf ignores the others). A
// workload's slots come together (the fleet lists them by slot id): one
// map lookup per run of them. t.mu is held.
func (t *TrainingSource) readSlots(all []store.SlotRecord) {
	if t.slots == nil {
		t.slots = map[string]*svcSlots{}
	}
	t.loads++
	var cur *svcSlots
	for i := range all {
		s := &all[i]
		if cur == nil || cur.name != s.Workload {
			if cur = t.slots[s.Workload]; cur == nil {
				cur = &svcSlots{name: s.Workload}
				t.slots[s.Workload] = cur
			}
			if cur.load != t.loads {
				clear(cur.slots)
				cur.slots, cur.load = cur.slots[:0], t.loads
			}
		}
		cur.slots = append(cur.slots, s)
	}
}

// slotsOf are the workload's slots in the last fleet read (nil: none).
func (t *TrainingSource) slotsOf(name string) []*store.SlotRecord {
	if v := t.slots[name]; v != nil && v.load == t.loads && len(v.slots) > 0 {
		return v.slots
	}
	return nil
}

// groupMemo is a job's placement groups as place last handed them out
// (never changed after: the plans share them) and the scratch the next are
// built in, with the spot pool name last made (for spotFor: cloud, zone,
// GPU).
type groupMemo struct {
	out, scratch []optimizer.Group
	spotPool     string
	spotFor      [3]string
}

func place(p optimizer.Placement, pools []livePool, od pricing.Offer, a, cur spotpolicy.Action, m *groupMemo) optimizer.Placement {
	ct, o := pricing.OnDemand, od
	switch a.Capacity {
	case spotpolicy.Spot:
		ct, o = pricing.Spot, *pools[a.Pool].offer
	case spotpolicy.None:
		ct, o = pricing.Spot, *pools[0].offer
		if cur.Capacity == spotpolicy.Spot {
			o = *pools[cur.Pool].offer
		}
	}
	price, _ := o.Price(ct)
	move := cur.Capacity != spotpolicy.None && cur != a
	// The groups are built in the job's scratch and handed out as the
	// last ones when equal (m: every job, every plan, mostly unchanged).
	groups := resized(m.scratch, len(p.Groups))
	m.scratch = groups
	total := 0.0
	for i, g := range p.Groups {
		g.Zone, g.Capacity, g.PricePerHour, g.Move = o.Zone, ct, price*float64(g.Instances), move
		g.SpotPool = ""
		if ct == pricing.Spot {
			if k := [3]string{string(o.Cloud), zoneOf(o), string(o.GPU)}; m.spotPool == "" || m.spotFor != k {
				m.spotPool, m.spotFor = k[0]+"/"+k[1]+"/"+k[2], k // the optimizer's naming
			}
			g.SpotPool = m.spotPool
		}
		total += g.PricePerHour
		groups[i] = g
	}
	if !equalGroups(groups, m.out) {
		m.out = cloneGroups(groups)
	}
	p.Groups = m.out
	p.Zone, p.Capacity, p.PricePerHour = o.Zone, ct, total
	if r := p.RunnerUp; r != nil && (r.Cloud != o.Cloud || r.Region != o.Region || r.InstanceType != o.InstanceType) {
		// The solver's runner-up becomes the slot's fallback pool when a
		// launch is refused (Desired). Outside the pools the policy watches
		// it would run the job where the stage cannot see it: the job
		// would count as not running, its unsaved work as safe, and the
		// safety net would fire too late (a job without checkpoints missed
		// its deadline by hours this way). A refused launch makes the
		// stage decide again within the pass instead. (Keeping one of the
		// same type in another region, which the stage could follow, made
		// jobs without checkpoints start over there: up to 1.33 × on
		// demand instead of 1.08.)
		p.RunnerUp = nil
	}
	return p
}
