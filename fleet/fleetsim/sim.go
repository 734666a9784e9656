package fleetsim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/fleet/ledger"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/fake"
	"github.com/gpubroker/gpubroker/store"
)

// DefaultStart is the simulation's time zero unless Config.Start is set: a
// fixed Monday 00:00 UTC, so a run never depends on when it is made.
var DefaultStart = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// Config is one fleet simulation.
type Config struct {
	Policy  *policy.Policy
	Catalog *pricing.Catalog
	// Traces drive the spot pools (see the package doc for the mapping);
	// Seed draws each pool's trace and offset. Without traces spot capacity
	// is SpotScale per pool, constant.
	Traces []fake.Trace
	Seed   uint64
	// Start is time zero (default DefaultStart); Duration the simulated
	// time (default 30 days).
	Start    time.Time
	Duration time.Duration
	// ReadyDelay is from an instance running to its agent registering
	// (default 5m; must stay under Options.BootTimeout).
	ReadyDelay time.Duration
	// LaunchLatency is how long an instance stays pending (default 30s).
	LaunchLatency time.Duration
	// Tick is the longest time between two passes (default 10m): the policy
	// tick on which time-driven stages (autoscaling, live policies) act.
	Tick time.Duration
	// SpotScale multiplies the traces' counts (default 1).
	SpotScale int
	// SampleEvery is the chart's resolution (default 1h).
	SampleEvery time.Duration
	// Options are the reconciler's; Mode is always Apply. MaxInstances and
	// LaunchesPerMinute default to 100,000 here (a simulation measures
	// the policy, not the launch caps).
	Options fleet.Options
	// Log receives the reconciler's log (default: discarded).
	Log *slog.Logger

	// sequential plans the chain's stages one after the other, as the
	// broker does (no fleet.ChainConfig.SplitStages): tests compare.
	sequential bool
}

func (c *Config) defaults() error {
	if c.Policy == nil || c.Catalog == nil {
		return errors.New("fleet simulation: a policy and a catalog are needed")
	}
	if c.Start.IsZero() {
		c.Start = DefaultStart
	}
	if c.Duration <= 0 {
		c.Duration = 30 * 24 * time.Hour
	}
	if c.ReadyDelay <= 0 {
		c.ReadyDelay = 5 * time.Minute
	}
	if c.LaunchLatency <= 0 {
		c.LaunchLatency = 30 * time.Second
	}
	if c.Tick <= 0 {
		c.Tick = 10 * time.Minute
	}
	if c.SpotScale <= 0 {
		c.SpotScale = 1
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = time.Hour
	}
	c.Options.Mode = fleet.Apply
	if c.Options.MaxInstances <= 0 {
		c.Options.MaxInstances = 100000
	}
	if c.Options.LaunchesPerMinute <= 0 {
		c.Options.LaunchesPerMinute = 100000
	}
	boot := c.Options.BootTimeout
	if boot <= 0 {
		boot = 15 * time.Minute
	}
	if c.ReadyDelay+c.LaunchLatency >= boot {
		return fmt.Errorf("fleet simulation: ready delay %s plus launch latency %s must be under the boot timeout %s", c.ReadyDelay, c.LaunchLatency, boot)
	}
	return nil
}

// clock is the virtual clock every component reads.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

type poolPrice struct{ onDemand, spot float64 }

type instInfo struct {
	id, workload, slot string
	pool               providers.PoolKey
	launched, gone     time.Time
	readyAt            time.Time
	noticed            bool
	price, od          float64
}

// job is a training or batch job's progress.
type job struct {
	w        policy.Workload
	work     float64 // reference GPU-hours
	done     float64
	saved    float64
	rate     float64 // reference GPU-hours per hour while all slots run
	desired  int
	running  bool
	since    time.Time // when it last started running
	finished time.Time
	planOD   float64 // the first plan's on-demand baseline
}

type service struct {
	w        policy.Workload
	target   int
	atTarget time.Duration
	observed time.Duration
	replicas int
	profile  []int
	tu       float64
	baseline int
	// odPrice is a replica-hour on demand where the first plan put the
	// service; odNeeded the replicas its load needed, at that price, so
	// far: the all-on-demand cost of the same work (hedge and spare
	// replicas are not work).
	odPrice  float64
	odNeeded float64
}

// Sim is one fleet simulation; Run runs it once.
type Sim struct {
	cfg      Config
	clk      *clock
	pol      *policy.Policy
	polMu    sync.Mutex
	store    *MemStore
	agents   *agents
	computes map[pricing.Cloud]*fake.Compute
	rec      *fleet.Reconciler
	tap      *planTap
	// plPos is placement's index of plIndexOf (the last plan): each
	// workload's last placement's position, for the placements' workloads
	// plNames.
	plPos     map[string]int
	plNames   []string
	plIndexOf *optimizer.Plan
	// sampleBuf (sample's ledger entries of one instance) is scratch of
	// the simulation's goroutine.
	sampleBuf []ledger.Entry
	traces    map[string]*traceIndex
	timers    timeHeap
	insts     map[string]*instInfo
	live      map[string]*instInfo // not gone
	liveSpot  map[providers.PoolKey]int
	prices    map[providers.PoolKey]poolPrice
	jobs      map[string]*job
	// active are the jobs not finished (or not yet taken out of the
	// policy), in policy order: the loops over jobs every instant skip the
	// finished ones for good.
	active   []*job
	svcs     map[string]*service
	stats    map[string]*WorkloadReport
	slotPool map[string]providers.PoolKey
	spent    int64 // settled spend of gone instances, micro-USD
	acc      map[string]*acc
	budgets  *budgets // nil: the policy has none
	series   []Point
	passes   int
	minted   int
	tokens   map[string]string
	// readying are the live instances running but whose agent has not
	// registered yet (register): it walked every live instance each
	// instant.
	readying []*instInfo
}

// New prepares a simulation.
func New(cfg Config) (*Sim, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Sim{cfg: cfg, clk: &clock{t: cfg.Start}, pol: cfg.Policy, store: NewMemStore(), computes: map[pricing.Cloud]*fake.Compute{},
		traces: map[string]*traceIndex{}, insts: map[string]*instInfo{}, live: map[string]*instInfo{}, liveSpot: map[providers.PoolKey]int{},
		prices: map[providers.PoolKey]poolPrice{}, jobs: map[string]*job{}, svcs: map[string]*service{}, stats: map[string]*WorkloadReport{},
		slotPool: map[string]providers.PoolKey{}, tokens: map[string]string{}, acc: map[string]*acc{}}
	// The reconciler is the store's one Load reader, pass after pass, and
	// the plan stages read its View within a plan: they may share memory.
	s.store.Recycle = true
	s.agents = newAgents(s.clk.Now)
	for i := range cfg.Traces {
		t := &cfg.Traces[i]
		if _, dup := s.traces[t.Name]; dup {
			return nil, fmt.Errorf("fleet simulation: two traces are named %q", t.Name)
		}
		s.traces[t.Name] = newTraceIndex(t)
	}
	byCloud := map[pricing.Cloud][]pricing.Offer{}
	for _, o := range cfg.Catalog.Offers() {
		byCloud[o.Cloud] = append(byCloud[o.Cloud], o)
		zone := o.Zone
		if zone == "" {
			zone = o.Region
		}
		k := providers.PoolKey{Cloud: o.Cloud, Zone: zone, InstanceType: o.InstanceType}
		k.Capacity = pricing.OnDemand
		s.prices[k] = poolPrice{onDemand: o.OnDemandPrice, spot: o.SpotPrice}
		k.Capacity = pricing.Spot
		s.prices[k] = poolPrice{onDemand: o.OnDemandPrice, spot: o.SpotPrice}
	}
	computes := map[pricing.Cloud]providers.Compute{}
	clouds := make([]pricing.Cloud, 0, len(byCloud))
	for c := range byCloud {
		clouds = append(clouds, c)
	}
	sort.Slice(clouds, func(i, j int) bool { return clouds[i] < clouds[j] })
	for i, c := range clouds {
		fc := fake.NewCompute(fake.ComputeConfig{Cloud: c, Offers: byCloud[c], Traces: cfg.Traces, Seed: cfg.Seed + uint64(i)*0x9e37,
			SpotScale: cfg.SpotScale, Start: cfg.Start, Now: s.clk.Now, LaunchLatency: cfg.LaunchLatency,
			// The reconciler, the only caller of List, reads the listing's
			// tags and copies what it needs, one pass at a time.
			ShareTags: true, ReuseList: true})
		fc.SetLifecycle(fake.Lifecycle{OnRunning: s.onRunning, OnGone: s.onGone})
		fc.OnNotice(s.onNotice)
		s.computes[c] = fc
		computes[c] = &tracked{Compute: fc, s: s}
	}
	chain := fleet.ChainConfig{
		Catalog: func() *pricing.Catalog { return cfg.Catalog },
		Policy:  s.policy,
		Now:     s.clk.Now,
		Log:     cfg.Log,
		Load:    agentLoad{s.agents}, // (fleet.AgentLoad's samples)
		// The clock stands still during a pass: the load can be sampled
		// while the solver and the training stage plan.
		PrefetchLoad: true,
		// The training stage plans beside the autoscaling and hedging
		// stages (fleet/split.go).
		SplitStages: !cfg.sequential,
		// A full solve per pool block does not scale to a thousand
		// workloads over a month (see fleet.SolverSource.Incremental).
		IncrementalReplan: true,
		// Nothing keeps a plan beyond the next: the plan tap keeps the
		// latest, and the simulator runs no Diff.
		ReusePlanMemory: true,
		// The live training stage reads the fleet's slots and the jobs'
		// reported progress: s.store.View() reads the fleet without a copy, and
		// Sim.JobProgress is what the simulated agents report.
		Fleet:    s.store.View(),
		Progress: simProgress{s},
		// A restart here costs the launch latency and ready delay before
		// the workload's restart_overhead; the policies must count them.
		// Passes come at events and at least every Tick: a decision may
		// wait that long to be acted on, so the deadline reserve covers it.
		Training: fleet.TrainingConfig{Boot: cfg.LaunchLatency + cfg.ReadyDelay, Reserve: cfg.Tick + fleet.DefaultTrainingReserve},
		// Inference services hedge their spot replicas live, as in the
		// broker; a replica is ready when its simulated agent registers,
		// LaunchLatency + ReadyDelay after its launch.
		Hedge:  &fleet.HedgeOptions{ReadyDelay: cfg.LaunchLatency + cfg.ReadyDelay},
		Agents: s.agents,
	}
	// Budgets act as in the broker: stop-scaling holds services at their
	// minimum, spot-only moves spot-prefer workloads to spot, until the
	// month ends.
	if s.budgets = newBudgets(s, cfg.Policy); s.budgets != nil {
		chain.StopScaling = s.budgets.spentAction(policy.BudgetStopScaling)
		chain.SpotOnly = s.budgets.spentAction(policy.BudgetSpotOnly)
	}
	s.tap = &planTap{inner: fleet.NewPlanChain(chain)}
	s.rec = &fleet.Reconciler{Store: s.store, Computes: computes, Agents: s.agents, Plans: s.tap, Tokens: minter{s},
		Now: s.clk.Now, Log: cfg.Log, Options: cfg.Options}
	for _, w := range cfg.Policy.Workloads {
		s.stats[w.Name] = &WorkloadReport{Name: w.Name, Kind: string(w.Kind)}
		switch w.Kind {
		case policy.Inference:
			sv := &service{w: w, tu: w.Replicas.TargetUtilization, baseline: max(1, w.Replicas.Min)}
			if sv.tu <= 0 || sv.tu > 1 {
				sv.tu = policy.DefaultTargetUtilization
			}
			if w.Load != nil {
				sv.profile, _ = w.Load.Replicas(w.Replicas)
			}
			s.svcs[w.Name] = sv
		default:
			j := &job{w: w, work: w.WorkGPUHours}
			s.jobs[w.Name] = j
			s.active = append(s.active, j)
		}
	}
	return s, nil
}

func (s *Sim) policy() *policy.Policy {
	s.polMu.Lock()
	defer s.polMu.Unlock()
	return s.pol
}

// removeWorkload takes a finished job out of the policy: its slots leave
// the plan and the reconciler drains them.
func (s *Sim) removeWorkload(name string) {
	s.polMu.Lock()
	defer s.polMu.Unlock()
	np := *s.pol
	np.Workloads = make([]policy.Workload, 0, len(s.pol.Workloads))
	for _, w := range s.pol.Workloads {
		if w.Name != name {
			np.Workloads = append(np.Workloads, w)
		}
	}
	s.pol = &np
}

// planTap passes the chain's plan through and keeps the latest, so the
// simulated jobs know how many slots they run on.
type planTap struct {
	inner fleet.PlanSource
	last  *optimizer.Plan
}

func (p *planTap) Plan(ctx context.Context, u *fleet.Unavailable) (*optimizer.Plan, error) {
	plan, err := p.inner.Plan(ctx, u)
	if err == nil {
		p.last = plan
	}
	return plan, err
}

type minter struct{ s *Sim }

func (m minter) Mint(_ context.Context, r fleet.MintRequest) (string, error) {
	if tok, ok := m.s.tokens[r.ClientToken]; ok {
		return tok, nil
	}
	m.s.minted++
	tok := fmt.Sprintf("gpbb_sim_%d", m.s.minted)
	m.s.tokens[r.ClientToken] = tok
	return tok, nil
}

// tracked is a cloud as the reconciler sees it; it tells the simulation
// about launches and counts each workload's calls.
type tracked struct {
	*fake.Compute
	s *Sim
}

func (t *tracked) Launch(ctx context.Context, req providers.LaunchRequest) (providers.Instance, error) {
	w := req.Tags[fleet.TagWorkload]
	if st := t.s.stats[w]; st != nil {
		st.APICalls++
	}
	inst, err := t.Compute.Launch(ctx, req)
	if err == nil {
		t.s.onLaunch(inst)
	}
	return inst, err
}

func (t *tracked) Terminate(ctx context.Context, ref providers.InstanceRef) error {
	if in := t.s.insts[ref.ID]; in != nil {
		if st := t.s.stats[in.workload]; st != nil {
			st.APICalls++
		}
	}
	return t.Compute.Terminate(ctx, ref)
}

func poolOf(in providers.Instance) providers.PoolKey {
	return providers.PoolKey{Cloud: in.Cloud, Zone: in.Zone, InstanceType: in.InstanceType, Capacity: in.Capacity}
}

func (s *Sim) onLaunch(inst providers.Instance) {
	if _, seen := s.insts[inst.ID]; seen {
		return // a retry with the same token answered the same instance
	}
	k := poolOf(inst)
	pr := s.prices[k]
	price := pr.onDemand
	if k.Capacity == pricing.Spot {
		price = pr.spot
	}
	in := &instInfo{id: inst.ID, workload: inst.Tags[fleet.TagWorkload], slot: inst.Tags[fleet.TagSlot], pool: k,
		launched: inst.LaunchedAt, price: price, od: pr.onDemand}
	s.insts[inst.ID] = in
	s.live[inst.ID] = in
	if k.Capacity == pricing.Spot {
		s.liveSpot[k]++
	}
	if st := s.stats[in.workload]; st != nil {
		st.Launches++
		if prev, ok := s.slotPool[in.slot]; ok && prev != k {
			st.Migrations++
		}
	}
	s.slotPool[in.slot] = k
	s.timers.push(inst.LaunchedAt.Add(s.cfg.LaunchLatency))
}

func (s *Sim) onRunning(inst providers.Instance, _ string) {
	in := s.insts[inst.ID]
	if in == nil {
		return
	}
	in.readyAt = s.clk.Now().Add(s.cfg.ReadyDelay)
	s.timers.push(in.readyAt)
	s.readying = append(s.readying, in)
}

func (s *Sim) onNotice(n fake.Notice) {
	in := s.insts[n.Instance.ID]
	if in == nil || in.noticed {
		return
	}
	in.noticed = true
	if st := s.stats[in.workload]; st != nil {
		st.Preemptions++
	}
	s.agents.preempting(in.id, n.At)
	s.timers.push(n.At)
}

func (s *Sim) onGone(inst providers.Instance) {
	in := s.insts[inst.ID]
	if in == nil || !in.gone.IsZero() {
		return
	}
	in.gone = s.clk.Now()
	delete(s.live, in.id)
	s.agents.remove(in.id)
	if in.pool.Capacity == pricing.Spot {
		s.liveSpot[in.pool]--
		if s.liveSpot[in.pool] <= 0 {
			delete(s.liveSpot, in.pool)
		}
	}
	s.account(in, in.gone)
}

// acc sums a workload's spend in micro-USD and whole nanoseconds: integer
// sums do not depend on the order instances end in, so a replay gives the
// same figures to the last digit.
type acc struct {
	cost, od int64
	life     time.Duration
}

func micro(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

func (s *Sim) account(in *instInfo, until time.Time) {
	entries := s.entries(in, until)
	if s.budgets != nil {
		s.budgets.settle(entries)
	}
	c, od := sumCost(entries)
	s.spent += micro(c)
	a := s.acc[in.workload]
	if a == nil {
		a = &acc{}
		s.acc[in.workload] = a
	}
	a.cost += micro(c)
	a.od += micro(od)
	a.life += until.Sub(in.launched)
}

// sumCost is the entries' cost and on-demand cost.
func sumCost(entries []ledger.Entry) (cost, od float64) {
	for _, e := range entries {
		cost += e.Cost
		od += e.OnDemand
	}
	return cost, od
}

// entries are an instance's ledger entries (cost and on-demand cost by
// day) up to until, by the ledger's billing rules.
func (s *Sim) entries(in *instInfo, until time.Time) []ledger.Entry {
	return s.appendEntries(nil, in, until)
}

// appendEntries appends entries(in, until) to dst.
func (s *Sim) appendEntries(dst []ledger.Entry, in *instInfo, until time.Time) []ledger.Entry {
	return ledger.AppendEntries(dst, ledger.Usage{Instance: in.id, Workload: in.workload, Cloud: string(in.pool.Cloud),
		Zone: in.pool.Zone, InstanceType: in.pool.InstanceType, Capacity: string(in.pool.Capacity),
		Start: in.launched, End: in.gone, Price: in.price, OnDemand: in.od}, until)
}

// Run runs the simulation to its end and reports.
func (s *Sim) Run(ctx context.Context) (*Report, error) {
	end := s.cfg.Start.Add(s.cfg.Duration)
	now := s.cfg.Start
	prev := now
	nextTick := now
	nextSample := now
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.clk.set(now)
		s.advance(prev, now)
		for _, c := range s.sortedClouds() {
			s.computes[c].Sync()
		}
		s.register(now)
		s.updateJobs(now)
		s.updateServices(now)
		if now.Equal(end) {
			break
		}
		if err := s.pass(ctx, now); err != nil {
			return nil, err
		}
		s.updateJobs(now)
		for !nextSample.After(now) {
			s.sample(nextSample)
			nextSample = nextSample.Add(s.cfg.SampleEvery)
		}
		if !nextTick.After(now) {
			nextTick = now.Add(s.cfg.Tick)
		}
		next := minTime(end, nextTick, nextSample)
		next = s.nextEvent(now, next)
		prev, now = now, next
	}
	s.sample(end)
	return s.report(end), nil
}

func minTime(ts ...time.Time) time.Time {
	m := ts[0]
	for _, t := range ts[1:] {
		if t.Before(m) {
			m = t
		}
	}
	return m
}

func (s *Sim) sortedClouds() []pricing.Cloud {
	out := make([]pricing.Cloud, 0, len(s.computes))
	for c := range s.computes {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (s *Sim) pass(ctx context.Context, now time.Time) error {
	if len(s.policy().Workloads) == 0 && len(s.live) == 0 {
		return nil // nothing left to run or to drain
	}
	s.passes++
	if s.budgets != nil {
		s.budgets.update(now) // alert-only budgets are recorded too
	}
	_, err := s.rec.Reconcile(ctx, store.Fence{Now: now})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fleet.ErrNoPlan) && s.tap.last != nil:
		return nil // as live: the pass waits for a plan (a block to run out)
	case errors.Is(err, fleet.ErrNoPlan):
		return fmt.Errorf("the policy cannot be planned on the catalog: %w", err)
	default:
		return fmt.Errorf("reconcile pass at %s: %w", now.Format(time.RFC3339), err)
	}
}

// nextEvent is the earliest time after now something happens, at most
// limit: a timer (pending → running, agent ready, notice ends), a used spot
// pool's capacity change, a pool block running out, a job finishing, a
// service's load hour.
func (s *Sim) nextEvent(now, limit time.Time) time.Time {
	next := limit
	for s.timers.Len() > 0 {
		t := s.timers[0]
		if !t.After(now) {
			heap.Pop(&s.timers)
			continue
		}
		if t.Before(next) {
			next = t
		}
		break
	}
	for k := range s.liveSpot {
		c := s.computes[k.Cloud]
		name, off := c.TraceOf(k)
		ti := s.traces[name]
		if ti == nil {
			continue
		}
		if t, ok := ti.nextChange(s.cfg.Start, now, off); ok && t.Before(next) {
			next = t
		}
	}
	if u := s.rec.Unavailable; u != nil { // nil until the first pass
		for _, e := range u.Entries(now) {
			if e.Until.After(now) && e.Until.Before(next) {
				next = e.Until
			}
		}
	}
	for _, j := range s.active {
		if t, ok := j.finishAt(s.cfg.Start, now); ok && t.After(now) && t.Before(next) {
			next = t
		}
	}
	if len(s.svcs) > 0 {
		h := now.Truncate(time.Hour).Add(time.Hour)
		if h.Before(next) {
			next = h
		}
	}
	if !next.After(now) {
		next = now.Add(time.Second)
	}
	return next
}

// register lets the agents of instances whose ready delay passed register.
func (s *Sim) register(now time.Time) {
	// (An agent registers once and leaves only with its instance: the
	// order agents register in within an instant changes nothing, they
	// are kept by id.)
	keep := s.readying[:0]
	for _, in := range s.readying {
		if !in.gone.IsZero() || s.agents.recs[in.id] != nil {
			continue // gone, or registered (an instance running twice)
		}
		if in.readyAt.After(now) {
			keep = append(keep, in)
			continue
		}
		st := store.StateRunning
		rec := &store.InstanceRecord{ID: in.id, Cloud: string(in.pool.Cloud), Zone: in.pool.Zone, InstanceType: in.pool.InstanceType,
			Capacity: string(in.pool.Capacity), Workload: in.workload, State: st, RegisteredAt: now}
		if in.noticed {
			rec.State = store.StatePreempting
		}
		s.agents.add(rec)
	}
	clear(s.readying[len(keep):])
	s.readying = keep
}

// placement is the last plan's placement of the workload (its last one;
// nil: none). The index of positions is rebuilt only when a plan places
// other workloads, or in another order, than the plan it was built for
// (every pass plans anew, most over the same workloads: a map of a
// thousand placements per plan was a hundredth of a month's CPU).
func (s *Sim) placement(name string) *optimizer.Placement {
	last := s.tap.last
	if last == nil {
		return nil
	}
	if s.plPos == nil || s.plIndexOf != last {
		if !s.samePlacements(last) {
			s.plNames = s.plNames[:0]
			if s.plPos == nil {
				s.plPos = make(map[string]int, len(last.Placements))
			}
			clear(s.plPos)
			for i := range last.Placements {
				w := last.Placements[i].Workload
				s.plNames = append(s.plNames, w)
				s.plPos[w] = i
			}
		}
		s.plIndexOf = last
	}
	if i, ok := s.plPos[name]; ok {
		return &last.Placements[i]
	}
	return nil
}

// samePlacements says whether plan places the workloads plNames, in order.
func (s *Sim) samePlacements(plan *optimizer.Plan) bool {
	if s.plPos == nil || len(plan.Placements) != len(s.plNames) {
		return false
	}
	for i := range plan.Placements {
		if plan.Placements[i].Workload != s.plNames[i] {
			return false
		}
	}
	return true
}

// advance moves the jobs' work and the services' time at target from prev
// to now, with the state they had since prev.
func (s *Sim) advance(prev, now time.Time) {
	d := now.Sub(prev)
	if d <= 0 {
		return
	}
	for _, j := range s.active {
		if !j.running || !j.finished.IsZero() {
			continue
		}
		from := j.since.Add(j.w.RestartOverhead)
		if from.Before(prev) {
			from = prev
		}
		if !now.After(from) {
			continue
		}
		gain := j.rate * now.Sub(from).Hours()
		if j.done+gain >= j.work-1e-9 {
			j.finished = from.Add(time.Duration((j.work - j.done) / j.rate * float64(time.Hour)))
			j.done = j.work
			continue
		}
		j.done += gain
		if ck := j.w.CheckpointInterval; ck > 0 {
			per := j.rate * ck.Hours()
			j.saved = math.Floor(j.done/per+1e-9) * per
		}
	}
	for _, sv := range s.svcs {
		sv.observed += d
		sv.odNeeded += float64(sv.target) * d.Hours() * sv.odPrice
		if sv.target > 0 && sv.replicas >= sv.target {
			sv.atTarget += d
		}
	}
}

// JobProgress is the progress a training job's simulated agents report:
// the fraction of its work done (saved by a checkpoint or not) at the
// virtual now; ok is false for a workload that is not a job or has not run.
func (s *Sim) JobProgress(workload string) (done float64, at time.Time, ok bool) {
	j := s.jobs[workload]
	if j == nil || j.work <= 0 || (j.since.IsZero() && j.finished.IsZero()) {
		return 0, time.Time{}, false
	}
	return j.done / j.work, s.clk.Now(), true
}

// simProgress is the simulated agents' progress reports as the live
// training stage reads them.
type simProgress struct{ s *Sim }

func (p simProgress) JobProgress(_ context.Context, workload string) (fleet.JobProgress, bool, error) {
	done, at, ok := p.s.JobProgress(workload)
	return fleet.JobProgress{Done: done, At: at}, ok, nil
}

// updateJobs starts and stops the jobs' progress with their slots, and
// takes finished jobs out of the policy.
func (s *Sim) updateJobs(now time.Time) {
	keep := s.active[:0]
	for _, j := range s.active {
		name := j.w.Name
		if !j.finished.IsZero() {
			if j.running {
				j.running = false
				s.removeWorkload(name)
			}
			continue // (out of the policy: dropped from active)
		}
		keep = append(keep, j)
		if p := s.placement(name); p != nil {
			j.desired = p.Instances
			j.rate = float64(p.GPUs) * nonZero(p.RelativeSpeed) * nonZero(p.ScalingEfficiency)
			if j.planOD == 0 {
				j.planOD = p.OnDemandBaseline
			}
		}
		// (Its registered, un-noticed agents: nothing here changes them.)
		run := j.desired > 0 && j.rate > 0 && s.agents.runningOf(name) >= j.desired
		switch {
		case run && !j.running:
			j.running, j.since = true, now
		case !run && j.running:
			// An interruption: the work since the last checkpoint is lost
			// (no checkpoints: all of it, as the policy's key says).
			j.running = false
			j.done = j.saved
		}
	}
	clear(s.active[len(keep):])
	s.active = keep
}

func nonZero(f float64) float64 {
	if f <= 0 {
		return 1
	}
	return f
}

func (j *job) finishAt(start, now time.Time) (time.Time, bool) {
	if !j.running || !j.finished.IsZero() || j.rate <= 0 {
		return time.Time{}, false
	}
	from := j.since.Add(j.w.RestartOverhead)
	if from.Before(now) {
		from = now
	}
	t := from.Add(time.Duration((j.work - j.done) / j.rate * float64(time.Hour)))
	// Whole seconds, rounded up, so the pass at that time sees it done.
	if r := t.Truncate(time.Second); !r.Equal(t) {
		t = r.Add(time.Second)
	}
	return t, true
}

// updateServices sets each service's target (its load now) and the
// utilisation its agents report.
func (s *Sim) updateServices(now time.Time) {
	for name, sv := range s.svcs {
		if sv.odPrice == 0 {
			sv.odPrice = s.onDemandPrice(s.placement(name))
		}
		sv.target = sv.baseline
		if n := len(sv.profile); n > 0 {
			h := now.Hour()
			if n == 168 {
				h = (int(now.Weekday())+6)%7*24 + now.Hour()
			}
			sv.target = sv.profile[h%n]
		}
		sv.replicas = s.agents.runningOf(name)
		util := 1.0
		if sv.replicas > 0 {
			util = math.Min(1, float64(sv.target)*sv.tu/float64(sv.replicas))
		}
		s.agents.setUtil(name, util)
	}
}

// onDemandPrice is the cheapest on-demand hourly price of the instance
// types p places replicas on, in the places it puts them (0 without p).
func (s *Sim) onDemandPrice(p *optimizer.Placement) float64 {
	if p == nil {
		return 0
	}
	best := 0.0
	for _, g := range p.Groups {
		zone := g.Zone
		if zone == "" {
			zone = g.Region
		}
		pr, ok := s.prices[providers.PoolKey{Cloud: g.Cloud, Zone: zone, InstanceType: g.InstanceType, Capacity: pricing.OnDemand}]
		if ok && pr.onDemand > 0 && (best == 0 || pr.onDemand < best) {
			best = pr.onDemand
		}
	}
	return best
}

// sample records the chart's point at t.
func (s *Sim) sample(t time.Time) {
	spend := s.spent
	replicas := 0
	for _, in := range s.live {
		s.sampleBuf = s.appendEntries(s.sampleBuf[:0], in, t)
		c, _ := sumCost(s.sampleBuf)
		spend += micro(c)
		if s.agents.recs[in.id] != nil && !in.noticed {
			replicas++
		}
	}
	s.series = append(s.series, Point{At: t, SpendUSD: float64(spend) / 1e6, Replicas: replicas, Instances: len(s.live)})
}
