package fleet

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/store"
)

// HedgedSource is the live spot hedging stage: for each inference service
// that may run on spot, it runs the service's inference policy
// (fleet/spotpolicy, the code the simulator proves on traces) on the live
// fleet and turns its decision into the placement's groups: spot replicas
// spread over the service's spot pools (zones, regions and clouds its
// limits allow) plus on-demand replicas. The target is the replicas the
// inner (autoscaled) plan asks for. Decisions are taken at tick
// boundaries of Tick, one policy instance per service kept across passes;
// between boundaries the last decision stands.
//
// Replicas keep their slots: a replica running or booting in a pool the
// decision keeps stays in its slot (Group.Slots), new replicas take free
// slot numbers, and replicas of pools the decision drops leave the plan and
// are drained by the reconciler.
type HedgedSource struct {
	Inner   PlanSource
	Catalog func() *pricing.Catalog
	Policy  func() *policy.Policy
	Fleet   FleetReader
	// Agents, when set, tells ready replicas by their heartbeats.
	Agents Agents
	Now    func() time.Time
	Log    *slog.Logger
	// Tick is the decision period (default 1 minute).
	Tick time.Duration
	// ReadyDelay is how long a new replica takes to serve (default 10
	// minutes): a replica without a fresh heartbeat counts as ready once it
	// has run this long.
	ReadyDelay time.Duration
	// Fresh is how recent a heartbeat must be (default 2 minutes).
	Fresh time.Duration
	// MaxZones bounds the spot pools one service spreads over (default 6):
	// the cheapest, pools it already runs in first.
	MaxZones int
	// Workers is how many services' decisions are taken at once (default
	// GOMAXPROCS). The shared pool tracker hears of the services' pools in
	// service order; a service's decision reads only what the tracker told
	// it of its own pools, so it is taken as soon as that is done, and the
	// plan is the same whatever the number.
	Workers int
	// Prefetch reads the fleet's slots and the agents' heartbeats on
	// another goroutine while the inner stages plan (the fleet simulator
	// sets it: ChainConfig.PrefetchLoad). Live, the broker reads them after
	// the inner plan, as late as it can.
	Prefetch bool
	// Shortfall, when set, keeps the services' time below target in the
	// store, so that each availability goal's error budget outlives the
	// leader (and a service's hedge rebuilt for new pools): a new one
	// starts from what the window already spent, not from a whole budget.
	// The broker sets it; without it the budget lives in this memory.
	Shortfall ShortfallStore

	mu      sync.Mutex
	tracker spotpolicy.LiveTracker
	hedges  map[string]*hedge
	// Scratch of Plan, kept between plans (under mu) so that each plan
	// does not allocate them anew: a thousand-workload fleet plans tens of
	// thousands of times in a simulated month.
	beats    map[string]time.Time
	bySvc    map[string]*svcSlots
	svcOrder []*svcSlots // bySvc's services in the last read's order
	// lastSlots[j] is the list of the j-th placement hedged in the last
	// plan (slotsFor).
	lastSlots []*svcSlots
	loads     int // fleet reads so far (svcSlots.load)
	// poolUse counts the fleet's live spot instances per pool, every
	// workload's (readFleet).
	poolUse map[providers.PoolKey]int
	free    map[providers.PoolKey]int // admit's
	jobs    []hedgeJob
	todo    []int
	todoW   []*policy.Workload
	// The spot pools observed in this plan: heard[id] when heardAt[id]
	// is this plan (plans), id the pool's number in poolIDs (hedge.ids).
	// (A map of names cleared each plan was a string hash per zone per
	// service on the calling goroutine.)
	poolIDs map[string]int
	heard   []heardPool
	heardAt []int
	// use[id] is poolUse of the numbered pool poolKeys[id] when useAt[id]
	// is this plan: looked up once per plan, not once per zone per service
	// (a map hash of four strings each, on the calling goroutine).
	poolKeys []providers.PoolKey
	use      []int
	useAt    []int
	// blk are the numbered pools' blocks (poolCapacity): each looked up
	// once per plan, not once per service.
	blk   []blockMemo
	seen  map[*policy.Workload]struct{} // the services in this plan
	plans int                           // plans so far (hedge.plan)
	ugen  int                           // the plan's Unavailable.Gen (blockMemo)
	// preMu: one plan at a time reads the fleet beside the inner stages
	// (Prefetch).
	preMu sync.Mutex
	// reuse and bufs: ChainConfig.ReusePlanMemory.
	reuse bool
	bufs  placementBufs
	index indexCache
}

// ShortfallStore keeps inference services' time below target;
// *store.Fleet implements it. RecordShortfall keeps the first record of a
// (workload, tick): the ticks are on the wall clock's grid, so two
// replicas charging the same tick charge it once.
type ShortfallStore interface {
	RecordShortfall(ctx context.Context, recs []store.ShortfallRecord) error
	Shortfall(ctx context.Context, workload string, since time.Time) ([]store.ShortfallRecord, error)
}

// maxPendingShortfall bounds a service's shortfall records waiting for a
// store that keeps failing (a day of one-minute ticks): the oldest go
// first, and the budget in memory still counts them.
const maxPendingShortfall = 1440

// hedge is one service's live policy and what it was built for.
type hedge struct {
	key    hedgeKey // what it was built for
	policy spotpolicy.Inference
	zones  []pricing.Offer     // spot pools, in the policy's zone order
	keys   []providers.PoolKey // zones' spot pools
	names  []string            // and their tracker names
	ids    []int               // and their numbers (HedgedSource.poolIDs)
	start  time.Time
	tick   int // last tick decided; -1 none
	plan   int // the HedgedSource plan that last hedged it
	// admitted is the plan whose admit counted the service's new spot
	// replicas, trimmed whether it cut them.
	admitted int
	trimmed  bool
	fleet    spotpolicy.Fleet
	last     HedgeDecision
	// lastSpot is the spot replicas per zone last.Spot was made from.
	lastSpot []int
	// caps are the spot pools' capacities learned from refusals (by
	// zone, capAt[k] the first zone with zone k's pool): a pool that
	// refused a launch for capacity while it ran replicas of the service
	// holds about that many now. (A map by pool key hashed four strings
	// per zone per plan once the service had learned one.)
	caps  []learnedCap
	capAt []int
	// spotPool and inter are the zones' group fields that are not the offer's own
	// (the spot pool's name, the interconnect), made once per hedge.
	spotPool, inter []string
	// odInter is the interconnect of odInterFor (cloud/instance type).
	odInter    string
	odInterFor [2]string

	// What the service's plans reuse (a service is hedged by one goroutine
	// at a time): every service is hedged every plan, tens of thousands
	// of plans in a simulated month, and its placement rarely changes.
	scratch hedgeScratch
	// out are the groups last handed out, clipped and never changed
	// after: the next plan that builds equal groups hands out these.
	out []optimizer.Group
	// expl is the explanation last handed out and what it was built from.
	expl struct {
		in   []string // the inner placement's explanation
		line hedgeLine
		out  []string
		buf  []byte
	}
	// odOffers are the catalog's on-demand offers the service may use
	// (onDemandOffer's candidates), for odCat and odPol.
	od       pricing.Offer // onDemandOffer's answer from a plan group
	odCat    *pricing.Catalog
	odPol    *policy.Policy
	odGPU    pricing.GPUModel
	odCount  int
	odOffers []pricing.Offer
	odBlk    []blockMemo // odOffers' on-demand pools' blocks
	odBest   odBest
	// odGroupKey is the pool of the plan's last on-demand group looked
	// up, odGroupBlk its block.
	odGroupKey providers.PoolKey
	odGroupBlk blockMemo

	// budget is the service's availability goal's error budget, in
	// ticks, for the goal budgetFor (policy.Workload.Availability). Its
	// ticks are the wall clock's (Unix time over the tick), the grid the
	// store's records are on; budgetAt is the last one charged or asked.
	// budgetSince is the tick this hedge started charging the budget
	// itself: what the store holds from before it (another leader's, an
	// earlier hedge's) is read into it once (budgetLoaded), and pending
	// are its own records not yet written.
	budget       spotpolicy.ErrorBudget
	budgetFor    policy.Availability
	budgetAt     int
	budgetSince  int
	budgetLoaded bool
	loadFailed   bool // (logged once per failing streak)
	pending      []store.ShortfallRecord
	// rampFrom is the target before the autoscaler last raised it, held
	// to until rampEnd (a tick): new replicas take a ready delay, and a
	// scale up is not a shortfall of the replicas already asked for.
	rampFrom, rampEnd int

	// nominal are the zones' spot capacities in instances under the
	// policy nomPol (optimizer.SpotPoolCapacity, a policy glob match per
	// zone: every service, every plan).
	nominal []int
	nomPol  *policy.Policy
}

// Where a slot is (hedgeJob.at), besides a zone's number.
const (
	slotElsewhere = -1
	slotNotSpot   = -2
)

// bySlotIndex orders a service's slots by index.
func bySlotIndex(a, b *store.SlotRecord) int { return cmp.Compare(a.Index, b.Index) }

// hedgeScratch is a hedge's working memory, overwritten by each plan.
type hedgeScratch struct {
	state  spotpolicy.InferenceState
	zones  []spotpolicy.Zone
	spot   []int
	at     []int
	group  []int // the group of each zone (-1: none), of each slot's pool
	groups []optimizer.Group
	slots  [][]int
	pin    pinScratch
}

// odBest is onDemandOffer's answer from the catalog (the cheapest offer
// not blocked, i; -1: none) as the unavailable cache u of generation gen-1
// had it at from, and until when it holds: the first end of a block that
// counted (ends; none: for good).
type odBest struct {
	gen         int
	u           *Unavailable
	i           int
	from, until time.Time
	ends        bool
}

// hedgeLine is what a placement's hedging explanation line says.
type hedgeLine struct {
	policy                        string
	tick, spot, pools, od, target int
}

// learnedCap is what a spot pool held for the service when it last refused
// one more replica for capacity.
type learnedCap struct {
	known bool // (the zero value: nothing learned)
	n     int
	// until is when the refusal's block ends: then the pool is probed
	// with one replica more than it held, and an hour (capacityMemory)
	// after it, without a further refusal, the limit is forgotten.
	until time.Time
}

// capacityMemory is how long after its last refusal's block a pool's
// learned capacity is kept: the unavailable cache's longest back-off, so a
// pool that refuses at every probe keeps its limit for good.
const capacityMemory = time.Hour

// hedgeKey is what a hedge is built for: the policy, GPU model and count.
type hedgeKey struct {
	policy string
	gpu    pricing.GPUModel
	count  int
}

// HedgeDecision is a service's latest hedging decision, for status and
// logs.
type HedgeDecision struct {
	Workload string    `json:"workload"`
	At       time.Time `json:"at"`
	Tick     int       `json:"tick"`
	Policy   string    `json:"policy"`
	Target   int       `json:"target"`
	Ready    int       `json:"ready"`
	// Spot replicas per pool ("cloud/zone/instance type") and on-demand
	// replicas asked for.
	Spot     map[string]int `json:"spot"`
	OnDemand int            `json:"on_demand"`
	// The availability goal's error budget (zero Goal: none): the time
	// below target the goal allows over its window, and what is left of
	// it (negative once spent).
	Goal              float64       `json:"goal,omitempty"`
	Window            time.Duration `json:"window,omitempty"`
	BudgetSeconds     float64       `json:"budget_seconds,omitempty"`
	BudgetLeftSeconds float64       `json:"budget_left_seconds,omitempty"`
}

func (h *HedgedSource) defaults() (tick, ready, fresh time.Duration, zones int) {
	tick, ready, fresh, zones = h.Tick, h.ReadyDelay, h.Fresh, h.MaxZones
	if tick <= 0 {
		tick = time.Minute
	}
	if ready <= 0 {
		ready = 10 * time.Minute
	}
	if fresh <= 0 {
		fresh = 2 * time.Minute
	}
	if zones <= 0 {
		zones = 6
	}
	return
}

// Plan returns the inner plan with the hedged services' groups replaced.
func (h *HedgedSource) Plan(ctx context.Context, u *Unavailable) (*optimizer.Plan, error) {
	var pre chan struct{}
	var preErr error
	if h.Prefetch {
		// The fleet and the agents are read while the inner stages plan:
		// they write neither, and nothing else does until the pass acts.
		h.preMu.Lock()
		defer h.preMu.Unlock()
		pre = make(chan struct{})
		go func() {
			defer close(pre)
			preErr = h.readFleet(ctx)
		}()
		defer func() { <-pre }() // (the scratch is the next plan's once this one returns)
	}
	plan, pol, byName, now, ok, err := stageInput(ctx, h.Inner, u, h.Policy, h.Now, &h.index)
	if !ok {
		return plan, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	todo, todoW := h.todo[:0], h.todoW[:0] // the placements to hedge and their workloads
	defer func() { clear(h.todoW) }()
	// twice: a service with two placements in the plan (they share its
	// hedge, so they are hedged one after the other).
	twice := false
	if h.seen == nil {
		h.seen = map[*policy.Workload]struct{}{}
	}
	clear(h.seen)
	for i := range plan.Placements {
		w := byName[plan.Placements[i].Workload] // (neither copied: a plan holds a thousand)
		if w != nil && w.Kind == policy.Inference && w.Spot != policy.SpotNever && len(plan.Placements[i].Groups) > 0 {
			todo, todoW = append(todo, i), append(todoW, w)
			if _, ok := h.seen[w]; ok {
				twice = true
			}
			h.seen[w] = struct{}{}
		}
	}
	h.todo, h.todoW = todo, todoW
	h.forgetLocked(byName)
	if len(todo) == 0 {
		return plan, nil
	}
	// Without the fleet's state the pass stops: falling back to the inner
	// plan would renumber the services' slots and move live replicas.
	if pre != nil {
		<-pre
		err = preErr
	} else {
		err = h.readFleet(ctx)
	}
	if err != nil {
		return nil, err
	}
	beats := h.beats
	var cat *pricing.Catalog
	if h.Catalog != nil {
		cat = h.Catalog()
	}
	if h.hedges == nil {
		h.hedges = map[string]*hedge{}
	}
	tick, _, _, _ := h.defaults()
	h.tracker.Gap = tick
	if u != nil {
		h.ugen = u.Gen() // (nothing blocks or clears a pool while the pass plans)
	}
	out := *plan
	out.Placements = h.bufs.copyOf(plan.Placements, h.reuse)
	// The pool tracker is shared by the services: it hears of their pools
	// in service order, then each service decides on its own.
	if cap(h.jobs) < len(todo) {
		h.jobs = make([]hedgeJob, len(todo))
	}
	jobs := h.jobs[:len(todo)]
	h.plans++
	observe := func(j int) {
		p := &out.Placements[todo[j]] // (hedgePlacement writes it: its own)
		w := todoW[j]                 // read only: a pointer into the policy
		mine := h.slotsFor(j, w.Name)
		if twice {
			// observePools sorts its slots by index: the service's other
			// placement sees them in the fleet's order, as it did when
			// the decisions sorted them (spotPools reads that order).
			mine = slices.Clone(mine)
		}
		h.observePools(&jobs[j], pol, cat, w, p, mine, u, now)
		if hg := jobs[j].hg; hg != nil {
			hg.plan = h.plans
		}
	}
	decide := func(j int) {
		jb := &jobs[j]
		if jb.err == nil && jb.hg != nil {
			jb.err = h.hedgePlacement(ctx, pol, cat, jb, beats, u, now)
		}
	}
	if twice {
		// Two placements of one service share its hedge: in order.
		for j := range jobs {
			observe(j)
		}
		for j := range jobs {
			decide(j)
		}
	} else {
		// A service's decision reads its own hedge and the pool views
		// observePools copied into its job, never the tracker: it can be
		// taken while the services after it are still being observed.
		pipelineFor(len(jobs), h.Workers, observe, decide)
	}
	h.admit(jobs)
	h.flushShortfall(ctx, jobs)
	// (Each hedged placement of out was changed in place: jobs[j].p.)
	for j := range todo {
		jb := &jobs[j]
		if jb.err != nil {
			h.log().Warn("hedging: leaving the service as planned", "workload", jb.w.Name, "err", jb.err)
			continue
		}
		if jb.hg == nil {
			continue // nothing to hedge
		}
		if jb.changed {
			d := jb.hg.last
			h.log().Info("hedging decision", "workload", jb.w.Name, "policy", d.Policy, "target", jb.target, "ready", d.Ready,
				"spot", d.Spot, "on_demand", d.OnDemand)
		}
	}
	return &out, nil
}

// hedgeJob is one service's hedging in a plan: what observePools prepares
// in service order, and what hedgePlacement decides.
type hedgeJob struct {
	w *policy.Workload
	// p is the placement in the plan being made: hedgePlacement changes
	// it only when it hedges it (not copied in and out: a placement is
	// large, and a thousand-workload fleet hedges hundreds every plan).
	p      *optimizer.Placement
	mine   []*store.SlotRecord
	hg     *hedge // nil: nothing to hedge (p stands)
	target int
	// The live state of hg's spot pools.
	zones []spotpolicy.Zone
	od    *pricing.Offer // the on-demand offer (nil: none)
	// expl is the inner placement's explanation (the hedging line is
	// appended to it).
	expl []string
	// at says where each of mine (sorted by index) is: the number of the
	// zone of hg its live spot instance is in, slotNotSpot (a live
	// instance not on spot) or slotElsewhere (nothing live, or in none of
	// the zones).
	at []int

	err     error
	changed bool // the decision changed (logged in service order)
}

// admit hands each spot pool's free capacity (its nominal capacity less
// the fleet's live spot instances there) to the services' new spot
// replicas, in service order; the services decide in parallel, each on
// the pool's capacity as the plan began. A service whose new replicas do
// not all fit keeps what it runs there, gets what is free, and runs its
// target on demand until its next decision. Without it every service
// moved into a pool that came back at once, most were refused, the pool
// was blocked, and they all fell back to on-demand, again and again: most
// of a simulated fleet's launches (docs/BENCHMARKS.md).
func (h *HedgedSource) admit(jobs []hedgeJob) {
	if h.free == nil {
		h.free = map[providers.PoolKey]int{}
	}
	free := h.free
	clear(free)
	for j := range jobs {
		jb := &jobs[j]
		hg := jb.hg
		if jb.err != nil || hg == nil {
			continue
		}
		if hg.admitted == h.plans {
			// A second placement of the service (Plan hedged the two in
			// order): its replicas were counted with the first.
			if hg.trimmed {
				_ = hg.placement(jb)
			}
			continue
		}
		hg.admitted = h.plans
		trimmed := false
		for k, n := range hg.fleet.Spot {
			z := &jb.zones[k]
			add := min(n, z.Capacity+z.Spot) - z.Spot
			if add <= 0 {
				continue
			}
			key := hg.keys[k]
			f, ok := free[key]
			if !ok {
				f = max(0, hg.nominal[k]-h.poolUse[key])
			}
			if add > f {
				hg.fleet.Spot[k], add, trimmed = z.Spot+f, f, true
			}
			free[key] = f - add
		}
		hg.trimmed = trimmed
		if trimmed {
			if jb.od != nil {
				hg.fleet.OnDemand = max(hg.fleet.OnDemand, jb.target)
			}
			// The decision the log and the API show is the one that runs.
			d := hg.last
			d.OnDemand = hg.fleet.OnDemand
			jb.changed = hg.record(d, hg.fleet.Spot) || jb.changed
			_ = hg.placement(jb) // (no group left: the decision's groups stand)
		}
	}
}

// readFleet reads the fleet's slots by service (h.bySvc) and the running
// agents' heartbeats (h.beats): Plan's scratch, which only one plan at a
// time writes (h.mu, or h.preMu while prefetching).
func (h *HedgedSource) readFleet(ctx context.Context) error {
	st, err := h.Fleet.Load(ctx)
	if err != nil {
		return fmt.Errorf("hedging: reading the fleet: %w", err)
	}
	if h.beats == nil {
		h.beats = map[string]time.Time{}
	}
	beats := h.beats
	clear(beats)
	if h.Agents != nil {
		recs, err := h.Agents.ListInstances(ctx, "", "")
		if err != nil {
			return fmt.Errorf("hedging: reading agents: %w", err)
		}
		for _, a := range recs {
			if a.State == store.StateRunning {
				beats[a.ID] = a.LastHeartbeat
			}
		}
	}
	if h.bySvc == nil {
		h.bySvc = map[string]*svcSlots{}
	}
	// A service's list is emptied when the read first finds one of its
	// slots (slotsOf ignores the lists of earlier reads), and one map
	// lookup serves a run of its slots (the fleet lists them by slot ID:
	// a service's together). Assigning every service's emptied list back
	// into the map, and a lookup per slot, were a string hash per service
	// and per slot every plan.
	// The services come in the order of the last read, mostly: the r-th
	// run of slots is tried as the last read's r-th service (a string
	// comparison) before the map.
	h.loads++
	if h.poolUse == nil {
		h.poolUse = map[providers.PoolKey]int{}
	}
	clear(h.poolUse)
	var cur *svcSlots
	runs := 0
	for i := range st.Slots {
		s := &st.Slots[i]
		if cur == nil || cur.name != s.Workload {
			if runs < len(h.svcOrder) && h.svcOrder[runs].name == s.Workload {
				cur = h.svcOrder[runs]
			} else if cur = h.bySvc[s.Workload]; cur == nil {
				cur = &svcSlots{name: s.Workload}
				h.bySvc[s.Workload] = cur
			}
			if runs < len(h.svcOrder) {
				h.svcOrder[runs] = cur
			} else {
				h.svcOrder = append(h.svcOrder, cur)
			}
			runs++
			if cur.load != h.loads {
				clear(cur.slots)
				cur.slots, cur.load = cur.slots[:0], h.loads
			}
		}
		cur.slots = append(cur.slots, s)
		if s.Capacity == string(pricing.Spot) && live(s) {
			h.poolUse[slotPool(s)]++
		}
	}
	clear(h.svcOrder[runs:])
	h.svcOrder = h.svcOrder[:runs]
	return nil
}

// svcSlots are a service's slots in the fleet read load.
type svcSlots struct {
	name  string
	load  int
	slots []*store.SlotRecord
}

// slotsOf are the service's slots in the last fleet read.
func (h *HedgedSource) slotsOf(name string) []*store.SlotRecord {
	if v := h.bySvc[name]; v != nil && v.load == h.loads {
		return v.slots
	}
	return nil
}

// slotsFor is slotsOf for the j-th placement hedged, which is mostly the
// same service plan after plan: its list (bySvc's entry for a name never
// changes) is tried before the map, a string hash per service per plan
// on the calling goroutine.
func (h *HedgedSource) slotsFor(j int, name string) []*store.SlotRecord {
	for len(h.lastSlots) <= j {
		h.lastSlots = append(h.lastSlots, nil)
	}
	v := h.lastSlots[j]
	if v == nil || v.name != name {
		v = h.bySvc[name]
		h.lastSlots[j] = v
	}
	if v != nil && v.load == h.loads {
		return v.slots
	}
	return nil
}

// forgetLocked drops the hedges of services that left the policy or no
// longer run on spot: their state and their decision go with them. h.mu is
// held.
func (h *HedgedSource) forgetLocked(byName workloadIndex) {
	for name := range h.hedges {
		if w := byName[name]; w == nil || w.Kind != policy.Inference || w.Spot == policy.SpotNever {
			delete(h.hedges, name)
		}
	}
}

func (h *HedgedSource) log() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
}

// Decisions returns each hedged service's latest decision.
func (h *HedgedSource) Decisions() map[string]HedgeDecision {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]HedgeDecision, len(h.hedges))
	for k, v := range h.hedges {
		out[k] = v.last
	}
	return out
}

// runningSince is the earliest time a slot of mine has been running in
// pool (zero if none runs there).
func runningSince(mine []*store.SlotRecord, pool providers.PoolKey) time.Time {
	var since time.Time
	for _, s := range mine {
		if State(s.State) == Running && !s.RunningAt.IsZero() && slotPool(s) == pool && (since.IsZero() || s.RunningAt.Before(since)) {
			since = s.RunningAt
		}
	}
	return since
}

func slotPool(s *store.SlotRecord) providers.PoolKey {
	zone := s.Zone
	if zone == "" {
		zone = s.Region
	}
	return providers.PoolKey{Cloud: pricing.Cloud(s.Cloud), Zone: zone, InstanceType: s.InstanceType, Capacity: pricing.CapacityType(s.Capacity)}
}

// live says whether a slot holds (or is getting) an instance.
func live(s *store.SlotRecord) bool {
	switch State(s.State) {
	case Launching, Booting, Running:
		return true
	}
	return false
}

func sameGroupPool(g optimizer.Group, k providers.PoolKey) bool {
	zone := g.Zone
	if zone == "" {
		zone = g.Region
	}
	return pricing.Cloud(k.Cloud) == g.Cloud && k.Zone == zone && k.InstanceType == g.InstanceType && k.Capacity == g.Capacity
}

// observePools finds or builds w's hedge and feeds the shared pool
// tracker the live signal of each of its spot pools. Plan calls it for the
// services in order (the tracker's state depends on who heard of a pool
// first); the rest of the decision is the service's own (hedgePlacement).
func (h *HedgedSource) observePools(j *hedgeJob, pol *policy.Policy, cat *pricing.Catalog, w *policy.Workload, p *optimizer.Placement,
	mine []*store.SlotRecord, u *Unavailable, now time.Time) {
	_, _, _, maxZones := h.defaults()
	*j = hedgeJob{w: w, p: p, mine: mine}
	ref := &p.Groups[0]
	for _, g := range p.Groups {
		j.target += g.Instances
	}
	if j.target == 0 {
		return // nothing to hedge
	}
	name := w.SpotDecider
	if name == "" {
		name = spotpolicy.DefaultInference
	}
	key := hedgeKey{policy: name, gpu: ref.GPU, count: ref.GPUsPerInstance}
	hg := h.hedges[w.Name]
	if hg == nil || hg.key != key {
		dec, err := spotpolicy.NewInference(name)
		if err != nil {
			j.err = err
			return
		}
		hg = &hedge{key: key, policy: dec, start: now, tick: -1}
		hg.zones = spotPools(pol, cat, *w, *p, mine, maxZones)
		h.hedges[w.Name] = hg
	}
	if len(hg.names) != len(hg.zones) {
		// The zones' pool keys, tracker names and group fields, once per
		// hedge (its zones are chosen once).
		hg.keys, hg.names = make([]providers.PoolKey, len(hg.zones)), make([]string, len(hg.zones))
		hg.ids = make([]int, len(hg.zones))
		hg.caps, hg.capAt = make([]learnedCap, len(hg.zones)), make([]int, len(hg.zones))
		hg.spotPool, hg.inter = make([]string, len(hg.zones)), make([]string, len(hg.zones))
		if h.poolIDs == nil {
			h.poolIDs = map[string]int{}
		}
		for k, o := range hg.zones {
			hg.keys[k] = PoolOf(o, pricing.Spot)
			hg.names[k] = poolName(hg.keys[k])
			hg.capAt[k] = slices.Index(hg.keys, hg.keys[k]) // (one pool per zone: k itself)
			hg.spotPool[k] = string(o.Cloud) + "/" + zoneOf(o) + "/" + string(o.GPU)
			hg.inter[k] = optimizer.Interconnect(o.Cloud, o.InstanceType)
			id, ok := h.poolIDs[hg.names[k]]
			if !ok {
				id = len(h.poolIDs)
				h.poolIDs[hg.names[k]] = id
				h.heard, h.heardAt, h.blk = append(h.heard, heardPool{}), append(h.heardAt, 0), append(h.blk, blockMemo{})
				h.poolKeys, h.use, h.useAt = append(h.poolKeys, hg.keys[k]), append(h.use, 0), append(h.useAt, 0)
			}
			hg.ids[k] = id
		}
	}
	j.hg = hg
	// The live state, as the simulator builds it per tick, in the hedge's
	// memory unless an earlier placement of the service in this plan
	// holds it (Plan then hedges the two in order).
	var zones []spotpolicy.Zone
	var spot, at []int
	if hg.plan == h.plans {
		zones, spot, at = make([]spotpolicy.Zone, len(hg.zones)), make([]int, len(hg.zones)), make([]int, len(mine))
	} else {
		zones, spot = resized(hg.scratch.zones, len(hg.zones)), resized(hg.scratch.spot, len(hg.zones))
		at = resized(hg.scratch.at, len(mine))
		hg.scratch.zones, hg.scratch.spot, hg.scratch.at = zones, spot, at
	}
	keys := hg.keys
	// The slots in pinSlotsIn's order (by index), each slot's pool found
	// once for the plan (slotAt): the decision and the slots' pinning
	// read it.
	slices.SortFunc(mine, bySlotIndex)
	// The service's live spot replicas per pool: a refusal beside them is
	// the pool's capacity, not its loss (poolCapacity).
	for i, s := range mine {
		at[i] = slotElsewhere
		if !live(s) {
			continue
		}
		if k := slotPool(s); k.Capacity == pricing.Spot {
			for z := range keys {
				if keys[z] == k {
					spot[z]++
					at[i] = z
				}
			}
		} else {
			at[i] = slotNotSpot
		}
	}
	j.at = at
	if hg.nomPol != pol || len(hg.nominal) != len(hg.zones) {
		// (A policy is not changed once loaded: a new one is a new
		// pointer, as SolverSource assumes too.)
		hg.nominal = resized(hg.nominal, len(hg.zones))
		for k := range hg.zones {
			o := &hg.zones[k] // (an offer is large: not copied per pool per plan)
			hg.nominal[k] = optimizer.SpotPoolCapacity(pol, o) / max(1, o.GPUCount)
		}
		hg.nomPol = pol
	}
	for k := range hg.zones {
		// The live signal of a spot pool is the unavailable cache: the
		// reconciler blocks a pool that refused a launch for capacity or
		// whose spot instance was preempted, and clears it when a launch
		// there succeeds. Unblocked, the cloud sells it: available, as a
		// trace's tick with capacity is in the simulator.
		id := hg.ids[k]
		// The pool's nominal capacity is the fleet's, as in the planner's
		// spot capacity rows: what the other workloads hold there is not
		// this service's to take (admit hands out what is left). It keeps
		// what it runs.
		nominal := hg.nominal[k]
		others := max(0, h.poolUseOf(id, keys[k])-spot[k])
		if others > 0 {
			nominal = max(spot[k], nominal-others)
		}
		c, limited, avail := hg.poolCapacity(k, &h.blk[id], h.ugen, nominal, spot[k], others, u, now)
		x := h.heard[id]
		if h.heardAt[id] != h.plans || x.avail != avail {
			x = h.observePool(hg.names[k], id, keys[k], mine, avail, now)
		}
		zones[k].Pool = x.pool
		zones[k].Capacity, zones[k].Limited = c, limited
	}
	j.zones = zones
}

// poolUseOf is h.poolUse[key], key the pool numbered id.
func (h *HedgedSource) poolUseOf(id int, key providers.PoolKey) int {
	if h.poolKeys[id] != key {
		return h.poolUse[key] // (another key of the same name: not cached)
	}
	if h.useAt[id] != h.plans {
		h.use[id], h.useAt[id] = h.poolUse[key], h.plans
	}
	return h.use[id]
}

// heardPool is a spot pool's signal and tracker view in one plan.
type heardPool struct {
	avail bool
	pool  spotpolicy.Pool
}

// observePool feeds the shared tracker a spot pool's live signal as a
// service sees it (mine: its slots) and records what it heard in h.heard[id].
// A later service of the same plan that sees the same signal reuses it:
// the tracker, told the same again at the same instant, would not change.
// One that sees another (a pool that refused a replica beside its own is
// available to it, blocked to the others) tells the tracker, as the
// services did one after the other before the decisions ran in parallel.
func (h *HedgedSource) observePool(name string, id int, key providers.PoolKey, mine []*store.SlotRecord, avail bool, now time.Time) heardPool {
	if !h.tracker.Known(name) {
		// First heard of here (a new service, or a new leader whose
		// stage state starts empty): a spot replica of the service
		// running in the pool since T is evidence the pool has held
		// since T. Without it a new leader would distrust every pool
		// and move the whole service to on-demand for hours.
		if since := runningSince(mine, key); !since.IsZero() {
			h.tracker.Seed(name, since, now)
		}
	}
	h.tracker.Observe(name, now, avail)
	x := heardPool{avail: avail, pool: h.tracker.Pool(name, now)}
	h.heard[id], h.heardAt[id] = x, h.plans
	return x
}

// hedgePlacement runs the service's policy (at a tick boundary) on the
// live state observePools prepared and returns its placement with the
// decision's groups. It touches only the service's own hedge, so Plan
// runs it for several services at once.
func (h *HedgedSource) hedgePlacement(ctx context.Context, pol *policy.Policy, cat *pricing.Catalog, j *hedgeJob, beats map[string]time.Time,
	u *Unavailable, now time.Time) error {
	tick, readyDelay, fresh, _ := h.defaults()
	w, p, mine, hg, target := j.w, j.p, j.mine, j.hg, j.target
	zones := j.zones
	ref := &p.Groups[0]
	od := hg.onDemandOffer(pol, cat, w, p, u, h.ugen, now)
	j.od, j.expl = od, p.Explanation
	if len(hg.zones) == 0 && od == nil {
		return fmt.Errorf("no spot pool and no on-demand offer for %s×%d", ref.GPU, ref.GPUsPerInstance)
	}
	ready := func(s *store.SlotRecord) bool {
		if State(s.State) != Running {
			return false
		}
		// Running for the ready delay, or a fresh heartbeat: the first
		// asks no map lookup, and most replicas have run that long.
		if !s.RunningAt.IsZero() && now.Sub(s.RunningAt) >= readyDelay {
			return true
		}
		b, ok := beats[s.InstanceID]
		return ok && !b.IsZero() && now.Sub(b) <= fresh
	}
	state := &hg.scratch.state // (the policies keep nothing of it)
	*state = spotpolicy.InferenceState{Gap: tick.Seconds(), Target: target, ReadyDelay: readyDelay.Seconds(), Zones: zones,
		OnDemandReadyIn: state.OnDemandReadyIn[:0]}
	for i, s := range mine {
		z := j.at[i]
		if z == slotElsewhere {
			continue
		}
		if z >= 0 {
			zones[z].Spot++
			if ready(s) {
				zones[z].SpotReady++
			}
			continue
		}
		state.OnDemand++
		if ready(s) {
			state.OnDemandReady++
			continue
		}
		since := s.LaunchedAt
		if since.IsZero() {
			since = now
		}
		state.OnDemandReadyIn = append(state.OnDemandReadyIn, max(0, (readyDelay-now.Sub(since)).Seconds()))
	}
	if len(hg.zones) > 0 {
		state.SpotPrice = hg.zones[0].SpotPrice
	}
	if od != nil {
		state.OnDemandPrice = od.OnDemandPrice
	}
	t := int(now.Sub(hg.start) / tick)
	if t > hg.tick {
		state.Tick = t
		h.spendBudget(ctx, hg, w, state, t, now)
		f := hg.policy.Decide(state)
		probing := false
		for k := range f.Spot {
			f.Spot[k] = min(f.Spot[k], zones[k].Capacity)
			probing = probing || zones[k].Limited && f.Spot[k] > zones[k].Spot
		}
		if probing && od != nil {
			// A pool that refused is asked for more than it holds (a
			// probe): it may refuse again, so the on-demand replicas the
			// policy would release for it stay until it has launched.
			f.OnDemand = max(f.OnDemand, state.OnDemand)
		}
		if od == nil && f.OnDemand > 0 {
			// Spot only (the policy's, or a spent spot-only budget's), or
			// no on-demand offer: the replicas the policy wanted on demand
			// go to spot pools with room, round robin in pool order.
			spreadRest(f.Spot, zones, f.OnDemand)
			f.OnDemand = 0
		}
		hg.tick, hg.fleet = t, f
		d := HedgeDecision{Workload: w.Name, At: now, Tick: t, Policy: hg.policy.Name(), Target: target,
			Ready: state.Ready(), OnDemand: f.OnDemand}
		if state.Budgeted {
			d.Goal, d.Window = hg.budgetFor.Goal, hg.budgetFor.Window
			d.BudgetSeconds = (1 - d.Goal) * d.Window.Seconds()
			d.BudgetLeftSeconds = state.BudgetLeft * tick.Seconds()
		}
		j.changed = hg.record(d, f.Spot)
	}
	return hg.placement(j)
}

// spendBudget charges the service's error budget with the ticks since its
// last decision when it is below target now (what it was in between is
// not seen: the state now stands for it) and tells state what is left.
// For a ready delay after the autoscaler raises the target the service is
// held to the target before: the new replicas cannot be ready sooner, and
// a service that scales up every hour would otherwise spend its month's
// budget in two days and hedge as one that keeps failing. A changed goal
// starts a new budget, from what the store holds of its window.
func (h *HedgedSource) spendBudget(ctx context.Context, hg *hedge, w *policy.Workload, state *spotpolicy.InferenceState, t int, now time.Time) {
	tick, readyDelay, _, _ := h.defaults()
	a := w.Availability
	at := int(now.UnixNano() / int64(tick))
	if a != hg.budgetFor {
		hg.budgetFor = a
		hg.budget = spotpolicy.NewErrorBudget(a.Goal, int(a.Window/tick))
		hg.budgetSince, hg.budgetLoaded = at, false
	}
	if !hg.budget.Valid() {
		return
	}
	if !hg.budgetLoaded && h.Shortfall != nil {
		h.loadBudget(ctx, hg, w.Name, now, tick)
	}
	if hg.tick >= 0 && state.Target > hg.last.Target {
		if t >= hg.rampEnd {
			hg.rampFrom = hg.last.Target
		}
		hg.rampEnd = t + int((readyDelay+tick-1)/tick) + 1
	}
	want := state.Target
	if t < hg.rampEnd {
		want = min(want, hg.rampFrom)
	}
	if state.Ready() < want {
		short := t - max(hg.tick, t-1)
		hg.budget.Record(at, float64(short))
		if h.Shortfall != nil {
			if len(hg.pending) >= maxPendingShortfall {
				hg.pending = append(hg.pending[:0], hg.pending[1:]...)
			}
			hg.pending = append(hg.pending, store.ShortfallRecord{Workload: w.Name, At: time.Unix(0, int64(at)*int64(tick)).UTC(),
				Seconds: float64(short) * tick.Seconds()})
		}
	}
	hg.budgetAt = at
	state.Budgeted, state.BudgetLeft = true, hg.budget.Left(at)
}

// loadBudget reads into hg's budget what the store holds of its window
// from before the hedge charged it itself. A failed read is tried again
// at the next decision; meanwhile the budget counts only this hedge's.
func (h *HedgedSource) loadBudget(ctx context.Context, hg *hedge, name string, now time.Time, tick time.Duration) {
	recs, err := h.Shortfall.Shortfall(ctx, name, now.Add(-hg.budgetFor.Window))
	if err != nil {
		if !hg.loadFailed {
			h.log().Warn("hedging: reading the service's time below target; its error budget counts only this leader's until a read succeeds",
				"workload", name, "err", err)
		}
		hg.loadFailed = true
		return
	}
	hg.budgetLoaded, hg.loadFailed = true, false
	for _, r := range recs {
		if at := int(r.At.UnixNano() / int64(tick)); at < hg.budgetSince {
			hg.budget.Record(at, r.Seconds/tick.Seconds())
		}
	}
}

// flushShortfall writes the services' new shortfall records, all in one
// call. On an error they wait for the next plan: the plan itself stands
// (the budget in memory counts them), only a new leader would not see
// them.
func (h *HedgedSource) flushShortfall(ctx context.Context, jobs []hedgeJob) {
	if h.Shortfall == nil {
		return
	}
	var recs []store.ShortfallRecord
	var seen map[*hedge]bool // (a service with two placements has one hedge)
	for j := range jobs {
		if hg := jobs[j].hg; hg != nil && len(hg.pending) > 0 && !seen[hg] {
			if seen == nil {
				seen = map[*hedge]bool{}
			}
			seen[hg] = true
			recs = append(recs, hg.pending...)
		}
	}
	if len(recs) == 0 {
		return
	}
	if err := h.Shortfall.RecordShortfall(ctx, recs); err != nil {
		h.log().Warn("hedging: storing the services' time below target; kept for the next plan", "records", len(recs), "err", err)
		return
	}
	for j := range jobs {
		if hg := jobs[j].hg; hg != nil {
			hg.pending = hg.pending[:0]
		}
	}
}

// record makes d, with spot replicas per zone spot, the service's last
// decision (hg.last: the log and the API's decisions) and reports whether
// it differs from the one before.
func (hg *hedge) record(d HedgeDecision, spot []int) (changed bool) {
	// The same spot replicas per zone as the last decision: its map
	// (never changed once made) says the same, without a key string and a
	// map per service per tick.
	same := hg.last.Spot != nil && slices.Equal(hg.lastSpot, spot)
	if same {
		d.Spot = hg.last.Spot
	} else {
		d.Spot = map[string]int{}
		for k, n := range spot {
			if n > 0 {
				d.Spot[string(hg.keys[k].Cloud)+"/"+hg.keys[k].Zone+"/"+hg.keys[k].InstanceType] = n
			}
		}
		hg.lastSpot = append(hg.lastSpot[:0], spot...)
	}
	changed = hg.last.OnDemand != d.OnDemand || !same && !mapsEqual(hg.last.Spot, d.Spot)
	hg.last = d
	return changed
}

// placement is the service's placement with the groups of its decision
// (hg.fleet), each pinned to the slots it keeps, built in the hedge's
// memory and handed out as the last plan's when equal.
func (hg *hedge) placement(j *hedgeJob) error {
	p, zones, mine, od, target := j.p, j.zones, j.mine, j.od, j.target
	groups := hg.scratch.groups[:0]
	zoneGroup := resized(hg.scratch.group, len(zones))
	hg.scratch.group = zoneGroup
	for k := range zoneGroup {
		zoneGroup[k] = -1
	}
	for k, n := range hg.fleet.Spot {
		if n = min(n, zones[k].Capacity+zones[k].Spot); n <= 0 {
			continue // a pool blocked since the tick keeps only what runs there
		}
		zoneGroup[k] = len(groups)
		o := &hg.zones[k] // (an offer is large: not copied per pool per plan)
		groups = append(groups, optimizer.Group{Cloud: o.Cloud, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType, GPU: o.GPU,
			GPUsPerInstance: o.GPUCount, Instances: n, Capacity: pricing.Spot, PricePerHour: o.SpotPrice,
			SpotPool: hg.spotPool[k], PlacementScore: o.Spot.PlacementScore, Interconnect: hg.inter[k]})
	}
	if hg.fleet.OnDemand > 0 && od != nil {
		if hg.odInterFor != [2]string{string(od.Cloud), od.InstanceType} {
			hg.odInterFor, hg.odInter = [2]string{string(od.Cloud), od.InstanceType}, optimizer.Interconnect(od.Cloud, od.InstanceType)
		}
		groups = append(groups, optimizer.Group{Cloud: od.Cloud, Region: od.Region, Zone: od.Zone, InstanceType: od.InstanceType, GPU: od.GPU,
			GPUsPerInstance: od.GPUCount, Instances: hg.fleet.OnDemand, Capacity: pricing.OnDemand, PricePerHour: od.OnDemandPrice,
			Interconnect: hg.odInter})
	}
	if len(groups) == 0 {
		return fmt.Errorf("the policy placed no replica (target %d, %d spot pools with capacity 0)", target, len(zones))
	}
	hg.scratch.groups = groups
	for len(hg.scratch.slots) < len(groups) {
		hg.scratch.slots = append(hg.scratch.slots, nil)
	}
	for g := range groups {
		groups[g].Slots = hg.scratch.slots[g][:0]
	}
	// Each live slot's group (if its pool has one), from the zone it is
	// in: a spot group's pool is its zone's (one zone per pool).
	odGroup := -1
	if len(groups) > 0 && groups[len(groups)-1].Capacity == pricing.OnDemand {
		odGroup = len(groups) - 1
	}
	match := resized(hg.scratch.pin.match, len(mine))
	hg.scratch.pin.match = match
	for i, s := range mine {
		switch z := j.at[i]; {
		case z >= 0 && z < len(zoneGroup):
			match[i] = zoneGroup[z]
		case z == slotNotSpot && odGroup >= 0 && sameGroupPool(groups[odGroup], slotPool(s)):
			match[i] = odGroup
		default:
			match[i] = -1
		}
	}
	pinSlotsIn(groups, mine, match, &hg.scratch.pin)
	for g := range groups {
		hg.scratch.slots[g] = groups[g].Slots
	}
	if !equalGroups(groups, hg.out) {
		hg.out = cloneGroups(groups)
	}
	n := 0
	for _, g := range hg.out {
		n += g.Instances
	}
	p.Groups, p.Instances = hg.out, n
	p.Explanation = hg.explain(j.expl, hedgeLine{policy: hg.policy.Name(), tick: hg.tick, spot: n - hg.fleet.OnDemand,
		pools: len(hg.last.Spot), od: hg.fleet.OnDemand, target: target})
	return nil
}

// explain is the inner placement's explanation in with the hedging line
// appended: the one handed out last when neither changed.
func (hg *hedge) explain(in []string, l hedgeLine) []string {
	e := &hg.expl
	if e.out != nil && e.line == l && len(e.in) == len(in) && (len(in) == 0 || &e.in[0] == &in[0]) {
		return e.out
	}
	// (fmt.Sprintf's "live hedging (%s, tick %d): %d spot over %d pools + %d
	// on-demand for a target of %d", built without fmt in a buffer kept
	// by the hedge: every service, every plan.)
	e.in, e.line = in, l
	b := append(e.buf[:0], "live hedging ("...)
	b = append(b, l.policy...)
	b = append(strconv.AppendInt(append(b, ", tick "...), int64(l.tick), 10), "): "...)
	b = append(strconv.AppendInt(b, int64(l.spot), 10), " spot over "...)
	b = append(strconv.AppendInt(b, int64(l.pools), 10), " pools + "...)
	b = append(strconv.AppendInt(b, int64(l.od), 10), " on-demand for a target of "...)
	b = strconv.AppendInt(b, int64(l.target), 10)
	e.buf = b
	out := make([]string, len(in)+1)
	copy(out, in)
	out[len(in)] = string(b)
	e.out = out
	return e.out
}

// resized is buf with n zero elements, reallocated only when too small.
func resized[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	buf = buf[:n]
	clear(buf)
	return buf
}

// equalGroups says whether a and b are the same groups, slots included.
func equalGroups(a, b []optimizer.Group) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		// Every field of optimizer.Group (TestEqualGroupsComparesEveryField
		// fails when one is added and not compared here).
		x, y := &a[i], &b[i]
		if x.Cloud != y.Cloud || x.Region != y.Region || x.Zone != y.Zone || x.InstanceType != y.InstanceType || x.GPU != y.GPU ||
			x.GPUsPerInstance != y.GPUsPerInstance || x.Instances != y.Instances || x.Capacity != y.Capacity ||
			x.PricePerHour != y.PricePerHour || x.SpotPool != y.SpotPool || x.PlacementScore != y.PlacementScore ||
			x.Interconnect != y.Interconnect || x.Move != y.Move || !slices.Equal(x.Slots, y.Slots) {
			return false
		}
	}
	return true
}

// cloneGroups copies groups and their slots into new, clipped slices.
func cloneGroups(groups []optimizer.Group) []optimizer.Group {
	out := slices.Clone(groups)
	for g := range out {
		out[g].Slots = slices.Clone(out[g].Slots)
	}
	return out
}

// poolCapacity is how many spot replicas the service may hold in pool k at
// now, given the pool's nominal capacity (spot_capacity), the unavailable
// cache, the service's live replicas there (mine) and the fleet's other
// workloads' instances there (others). limited says c is a limit learned
// from a refusal, which the risk model must not count as a loss; avail is
// the pool's signal for the tracker.
//
//   - Refused for capacity while it ran mine > 0 of the service's replicas,
//     or while other workloads of the fleet ran others > 0 instances there:
//     the pool holds about that many now (a pool of one instance refuses
//     the second). The service's capacity there is mine; the pool lost
//     nothing, so it stays available and its replicas trusted. A pool full
//     of the fleet's own instances used to read as lost: the tracker and
//     the risk model then counted every such refusal as an outage, and on
//     one-instance pools a service that shared them with two training jobs
//     for their first 40 hours held on-demand for the rest of the month
//     (1.015 × on-demand against 0.870 alone; docs/BENCHMARKS.md).
//   - Past that block: probed with one replica more than it held, and the
//     limit grows with each probe that holds; an hour (capacityMemory)
//     after the last refusal's block it is forgotten, so capacity that
//     returns is used.
//   - Blocked otherwise (a preemption, or a refusal while the fleet held
//     nothing there): unavailable, keeping only what still runs there.
func (hg *hedge) poolCapacity(z int, m *blockMemo, gen, nominal, mine, others int, u *Unavailable, now time.Time) (c int, limited, avail bool) {
	reason, until, blocked := u.blockedMemo(hg.keys[z], m, gen, now)
	lc := &hg.caps[hg.capAt[z]]
	switch {
	case blocked && reason == "capacity" && mine+others > 0:
		if !lc.known || lc.until != until {
			*lc = learnedCap{known: true, n: mine, until: until} // a new refusal
		}
		return mine, true, true
	case blocked:
		*lc = learnedCap{}
		return mine, false, false
	case lc.known && now.Sub(lc.until) < capacityMemory:
		lc.n = max(lc.n, mine)
		return min(nominal, lc.n+1), true, true
	}
	*lc = learnedCap{}
	return nominal, false, true
}

// spreadRest adds n replicas to sp, one per pool with capacity left per
// round.
func spreadRest(sp []int, zones []spotpolicy.Zone, n int) {
	for n > 0 {
		placed := false
		for k := range sp {
			if n > 0 && sp[k] < zones[k].Capacity {
				sp[k]++
				n--
				placed = true
			}
		}
		if !placed {
			return
		}
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// pinSlots gives each group's instances their slot numbers: a slot whose
// instance launches, boots or runs in the group's pool keeps its number
// (lowest first); a slot with nothing live (pending, draining) is reused
// for any group; the rest take the lowest numbers no slot holds, so no
// live instance is ever re-labelled to another pool.
func pinSlots(groups []optimizer.Group, mine []*store.SlotRecord) {
	for g := range groups {
		groups[g].Slots = nil
	}
	pinSlotsIn(groups, mine, nil, new(pinScratch))
}

// pinScratch is pinSlotsIn's working memory.
type pinScratch struct {
	used, taken intSet
	match       []int
}

// pinSlotsIn is pinSlots appending to the groups' Slots, which the caller
// has emptied, in x's memory. match, when not nil, is the group whose
// pool each of mine (sorted by index) is live in (-1: none), which the
// caller knows.
func pinSlotsIn(groups []optimizer.Group, mine []*store.SlotRecord, match []int, x *pinScratch) {
	if match == nil {
		// (Slot indexes of one workload are unique: any sort gives this order.)
		slices.SortFunc(mine, bySlotIndex)
	}
	n := len(mine)
	for _, g := range groups {
		n += max(0, g.Instances)
	}
	used, taken := &x.used, &x.taken
	used.reset(n + 1)
	taken.reset(n + 1)
	for _, s := range mine {
		if State(s.State) != Gone {
			used.add(s.Index)
		}
	}
	for g := range groups {
		for i, s := range mine {
			if len(groups[g].Slots) == groups[g].Instances {
				break
			}
			if (match != nil && match[i] == g || match == nil && live(s) && sameGroupPool(groups[g], slotPool(s))) && !taken.has(s.Index) {
				groups[g].Slots = append(groups[g].Slots, s.Index)
				taken.add(s.Index)
			}
		}
	}
	for g := range groups {
		for _, s := range mine {
			if len(groups[g].Slots) == groups[g].Instances {
				break
			}
			if st := State(s.State); (st == Pending || st == Draining) && !taken.has(s.Index) {
				groups[g].Slots = append(groups[g].Slots, s.Index)
				taken.add(s.Index)
			}
		}
	}
	next := 0
	for g := range groups {
		for len(groups[g].Slots) < groups[g].Instances {
			for used.has(next) || taken.has(next) {
				next++
			}
			groups[g].Slots = append(groups[g].Slots, next)
			taken.add(next)
		}
		slices.Sort(groups[g].Slots)
	}
}

// intSet is a set of ints: those in [0, reset's n) as flags, any others
// in a map.
type intSet struct {
	small []bool
	big   map[int]bool
}

// reset empties the set for members mostly below n.
func (s *intSet) reset(n int) {
	s.small = resized(s.small, n)
	clear(s.big)
}

func (s *intSet) has(i int) bool {
	if i >= 0 && i < len(s.small) {
		return s.small[i]
	}
	return s.big[i]
}

func (s *intSet) add(i int) {
	if i >= 0 && i < len(s.small) {
		s.small[i] = true
		return
	}
	if s.big == nil {
		s.big = map[int]bool{}
	}
	s.big[i] = true
}

// spotPools chooses the spot pools a service spreads over: offers of the
// planned GPU model and count that its limits admit, one (the cheapest)
// per cloud/zone/GPU pool (the instance type it runs there, if it does);
// pools the service already runs spot replicas in first, then the
// cheapest, at most maxZones (or spread.min_zones, if more), taking in
// further clouds as spread.min_clouds asks.
func spotPools(pol *policy.Policy, cat *pricing.Catalog, w policy.Workload, p optimizer.Placement, mine []*store.SlotRecord, maxZones int) []pricing.Offer {
	ref := p.Groups[0]
	// Pools the service runs spot replicas in, with the instance type they
	// run, so they stay candidates as they are.
	running := map[string]string{}
	for _, s := range mine {
		if live(s) && s.Capacity == string(pricing.Spot) {
			running[s.Cloud+"/"+slotPool(s).Zone+"/"+s.GPU] = s.InstanceType
		}
	}
	best := map[string]pricing.Offer{}
	add := func(o pricing.Offer) {
		if o.SpotPrice <= 0 || o.GPU != ref.GPU || o.GPUCount != ref.GPUsPerInstance ||
			!policy.RegionAllowed(pol, &w, o.Cloud, o.Region, o.Zone) {
			return
		}
		k := string(o.Cloud) + "/" + zoneOf(o) + "/" + string(o.GPU)
		b, ok := best[k]
		switch {
		case !ok, o.InstanceType == running[k] && b.InstanceType != running[k]:
			best[k] = o
		case b.InstanceType == running[k]:
		case o.SpotPrice < b.SpotPrice || (o.SpotPrice == b.SpotPrice && o.InstanceType < b.InstanceType):
			best[k] = o
		}
	}
	if cat != nil {
		for o := range cat.GPUOffers(ref.GPU) {
			add(o)
		}
	}
	// Planned spot groups are candidates even when the catalog no longer
	// lists them (a live stage must not drop what the solver chose).
	for _, g := range p.Groups {
		if g.Capacity == pricing.Spot {
			if _, ok := best[string(g.Cloud)+"/"+zoneOrRegion(g.Zone, g.Region)+"/"+string(g.GPU)]; !ok {
				add(pricing.Offer{Cloud: g.Cloud, Region: g.Region, Zone: g.Zone, InstanceType: g.InstanceType, GPU: g.GPU,
					GPUCount: g.GPUsPerInstance, SpotPrice: g.PricePerHour, Spot: pricing.SpotSignal{PlacementScore: g.PlacementScore}})
			}
		}
	}
	out := make([]pricing.Offer, 0, len(best))
	for _, o := range best {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		_, ri := running[string(out[i].Cloud)+"/"+zoneOf(out[i])+"/"+string(out[i].GPU)]
		_, rj := running[string(out[j].Cloud)+"/"+zoneOf(out[j])+"/"+string(out[j].GPU)]
		if ri != rj {
			return ri
		}
		if out[i].SpotPrice != out[j].SpotPrice {
			return out[i].SpotPrice < out[j].SpotPrice
		}
		return out[i].Key() < out[j].Key()
	})
	// The policy's spread limits: at least spread.min_zones pools, and
	// the cheapest pool of further clouds until spread.min_clouds clouds
	// are in the set.
	limit := max(maxZones, w.Spread.MinZones)
	if len(out) <= limit {
		return out
	}
	picked := make([]bool, len(out))
	clouds := map[pricing.Cloud]bool{}
	n := 0
	for i := 0; i < len(out) && n < limit; i++ {
		_, run := running[string(out[i].Cloud)+"/"+zoneOf(out[i])+"/"+string(out[i].GPU)]
		if run {
			picked[i], clouds[out[i].Cloud] = true, true
			n++
		}
	}
	for i := 0; i < len(out) && n < limit && len(clouds) < w.Spread.MinClouds; i++ {
		if !picked[i] && !clouds[out[i].Cloud] {
			picked[i], clouds[out[i].Cloud] = true, true
			n++
		}
	}
	for i := 0; i < len(out) && n < limit; i++ {
		if !picked[i] {
			picked[i] = true
			n++
		}
	}
	sel := out[:0]
	for i, o := range out {
		if picked[i] {
			sel = append(sel, o)
		}
	}
	return sel
}

func zoneOrRegion(zone, region string) string {
	if zone != "" {
		return zone
	}
	return region
}

// onDemandOffer is where the service's on-demand replicas go: the plan's
// on-demand group when it has one not blocked, else the cheapest on-demand offer of
// the planned GPU model and count that its limits admit and that is not
// blocked. The catalog's candidates are kept in the hedge until the
// catalog or the policy changes (a service without an on-demand group in
// its plan looked through every offer of its GPU model every plan), and
// the answer is the hedge's memory: its caller reads it before the
// hedge's next plan and never changes it.
func (hg *hedge) onDemandOffer(pol *policy.Policy, cat *pricing.Catalog, w *policy.Workload, p *optimizer.Placement, u *Unavailable, gen int, now time.Time) *pricing.Offer {
	if w.Spot == policy.SpotOnly {
		return nil
	}
	for _, g := range p.Groups {
		if g.Capacity != pricing.OnDemand {
			continue
		}
		// (PoolOf of the offer below, without copying it.)
		k := providers.PoolKey{Cloud: g.Cloud, Zone: zoneOrRegion(g.Zone, g.Region), InstanceType: g.InstanceType, Capacity: pricing.OnDemand}
		if k != hg.odGroupKey {
			hg.odGroupKey, hg.odGroupBlk = k, blockMemo{}
		}
		if _, _, blocked := u.blockedMemo(k, &hg.odGroupBlk, gen, now); !blocked {
			o := &hg.od // the hedge's: the offer is read before the next call
			*o = pricing.Offer{Cloud: g.Cloud, Region: g.Region, Zone: g.Zone, InstanceType: g.InstanceType, GPU: g.GPU,
				GPUCount: g.GPUsPerInstance, OnDemandPrice: g.PricePerHour}
			return o
		}
	}
	if cat == nil {
		return nil
	}
	ref := &p.Groups[0]
	if hg.odOffers == nil || hg.odCat != cat || hg.odPol != pol || hg.odGPU != ref.GPU || hg.odCount != ref.GPUsPerInstance {
		// (The hedge is the workload's; the policy holds the workload.)
		hg.odOffers = hg.odOffers[:0]
		for o := range cat.GPUOffers(ref.GPU) { // in key order
			if o.OnDemandPrice > 0 && o.GPUCount == ref.GPUsPerInstance && policy.RegionAllowed(pol, w, o.Cloud, o.Region, o.Zone) {
				hg.odOffers = append(hg.odOffers, o)
			}
		}
		if hg.odOffers == nil {
			hg.odOffers = []pricing.Offer{} // known to have none
		}
		hg.odCat, hg.odPol, hg.odGPU, hg.odCount = cat, pol, ref.GPU, ref.GPUsPerInstance
		hg.odBlk = make([]blockMemo, len(hg.odOffers))
		hg.odBest = odBest{}
	}
	c := &hg.odBest
	best := c.i
	if u == nil || c.gen != gen+1 || c.u != u || now.Before(c.from) || c.ends && !now.Before(c.until) {
		// Looked up again only when the unavailable cache changed, or a
		// block that counted ends: the same blocks at a later time block
		// the same offers until the first of them ends.
		best = -1
		*c = odBest{}
		// In key order: of equal prices the first is the least key.
		for i := range hg.odOffers {
			o := &hg.odOffers[i]
			if u.offerBlocked(o, pricing.OnDemand, &hg.odBlk[i], gen, now) {
				if m := &hg.odBlk[i]; !c.ends || m.until.Before(c.until) {
					c.ends, c.until = true, m.until
				}
				continue
			}
			if best < 0 || o.OnDemandPrice < hg.odOffers[best].OnDemandPrice {
				best = i
			}
		}
		if u != nil {
			c.gen, c.u, c.i, c.from = gen+1, u, best, now
		}
	}
	if best < 0 {
		return nil
	}
	return &hg.odOffers[best] // read only, like the plan group's below
}
