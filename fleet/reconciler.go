package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/store"
)

// Reconciler compares the plan's slots with the clouds' instances and
// acts. One pass is Reconcile; the leader runs passes in a loop (Loop).
// Fields are set before the first pass and not changed after.
type Reconciler struct {
	Store       Store
	Computes    map[pricing.Cloud]providers.Compute
	Agents      Agents
	Plans       PlanSource
	Tokens      TokenMinter
	Unavailable *Unavailable
	Metrics     *Metrics
	Log         *slog.Logger
	Now         func() time.Time
	Options     Options

	// inOrder: launches are in time order (capHeld).
	inOrder  bool
	once     sync.Once
	mu       sync.Mutex
	launches []launchMark // recent launch calls, for the per-minute caps
	last     Report
	// lastPlan is the plan of the latest acting pass of this term: Diff
	// uses it rather than asking the plan chain, whose live stages would
	// take a decision step for a preview.
	lastPlan *optimizer.Plan
	seen     map[string]bool // dry-run actions already recorded this term
	tokens   tokenMemo
	// spare are a finished pass's maps, emptied, for the next pass (nil
	// while a pass holds them): a pass indexes every slot, record, listed
	// instance and agent, and allocating those maps anew each pass was a
	// good part of the fleet simulator's garbage.
	spare *passMaps
	// acts is the last pass's number of actions: the next pass's list
	// starts that large (grown by doubling, a pass's actions were a
	// twentieth of the fleet simulator's allocated bytes).
	acts atomic.Int64
}

// passMaps are the maps a pass indexes the fleet in.
type passMaps struct {
	specs   map[string]*Spec
	slots   map[string]*store.SlotRecord
	intents map[string]*store.IntentRecord
	bySlot  map[string]*store.IntentRecord
	records map[string]*store.FleetInstanceRecord
	cloud   map[string]*providers.Instance
	agents  map[string]*store.InstanceRecord
	// gangSlots with each job's slice emptied (incompleteGangs).
	gangSlots map[string][]string
	// order is a pass's slot order, emptied.
	order []string
	// ids are the slot ids desired made (kept: the same every pass).
	ids slotIDs
	// specs of the pass's plans (Desired), their memory for the next
	// pass's: free holds the kept ones, used those the pass took.
	free, used [][]Spec
}

// desired is Desired(plan) in memory a finished pass used.
func (p *passState) desired(plan *optimizer.Plan) []Spec {
	m := p.maps
	var buf []Spec
	if n := len(m.free); n > 0 {
		buf, m.free = m.free[n-1], m.free[:n-1]
	}
	if m.ids == nil || (plan != nil && len(m.ids) > 2*len(plan.Placements)+1024) {
		// (Started afresh when most of its workloads have left the
		// plans: a broker runs for months while policies change.)
		m.ids = slotIDs{}
	}
	specs := desiredIn(buf, plan, m.ids)
	if specs != nil {
		m.used = append(m.used, specs)
	}
	return specs
}

// takeMaps returns the spare maps, empty, or nil maps when a pass holds
// them (Diff beside a pass) or none were kept yet.
func (r *Reconciler) takeMaps() *passMaps {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.spare
	r.spare = nil
	if m == nil {
		m = &passMaps{}
	}
	return m
}

// keepMaps empties a finished pass's maps and keeps them for the next
// pass. Nothing the pass hands out (its report, the plan) refers to them.
func (r *Reconciler) keepMaps(p *passState) {
	m := &passMaps{specs: p.specs, slots: p.slots, intents: p.intents, bySlot: p.bySlot, records: p.records, cloud: p.cloud, agents: p.agents,
		free: append(p.maps.free, p.maps.used...)}
	clear(p.order)
	m.order, m.ids = p.order[:0], p.maps.ids
	clear(m.specs)
	clear(m.slots)
	clear(m.intents)
	clear(m.bySlot)
	clear(m.records)
	clear(m.cloud)
	clear(m.agents)
	if p.gangSlots != nil {
		for w, ids := range p.gangSlots {
			if len(ids) == 0 {
				delete(p.gangSlots, w) // a job gone since the last pass
				continue
			}
			clear(ids)
			p.gangSlots[w] = ids[:0]
		}
		m.gangSlots = p.gangSlots
	}
	r.mu.Lock()
	r.spare = m
	r.mu.Unlock()
}

// emptyMap is m (emptied by keepMaps) or, when nil, a new map for n
// entries.
func emptyMap[K comparable, V any](m map[K]V, n int) map[K]V {
	if m == nil {
		return make(map[K]V, n)
	}
	return m
}

type launchMark struct {
	at    time.Time
	cloud pricing.Cloud
}

// Action is one thing a pass does or, in dry-run, would do.
type Action struct {
	// Kind is launch, retry (an open intent, same token), adopt,
	// terminate, block or wait.
	Kind         string `json:"kind"`
	Slot         string `json:"slot,omitempty"`
	Workload     string `json:"workload,omitempty"`
	Instance     string `json:"instance,omitempty"`
	Cloud        string `json:"cloud,omitempty"`
	Zone         string `json:"zone,omitempty"`
	InstanceType string `json:"instance_type,omitempty"`
	Capacity     string `json:"capacity,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Done is true when the action was carried out (false in dry-run, while
	// paused, when a cap held it back, or when it failed: see Error).
	Done  bool   `json:"done"`
	Error string `json:"error,omitempty"`
}

// Report is the outcome of one pass.
type Report struct {
	At      time.Time     `json:"at"`
	Mode    Mode          `json:"mode"`
	Paused  bool          `json:"paused"`
	Epoch   int64         `json:"epoch,omitempty"`
	Took    time.Duration `json:"took_ns"`
	Slots   int           `json:"slots"`
	ByState map[State]int `json:"by_state"`
	// Instances counts the broker-tagged instances listed, alive.
	Instances int      `json:"instances"`
	Actions   []Action `json:"actions"`
	// Errors are problems that did not stop the pass (a cloud whose
	// listing failed is left alone this pass).
	Errors []string `json:"errors,omitempty"`
}

// ErrNoPlan is returned when there is no plan to reconcile against.
var ErrNoPlan = errors.New("no plan to reconcile")

func (r *Reconciler) init() {
	r.once.Do(func() {
		r.Options.defaults()
		if r.Log == nil {
			r.Log = slog.New(slog.DiscardHandler)
		}
		if r.Now == nil {
			r.Now = time.Now
		}
		if r.Unavailable == nil {
			r.Unavailable = &Unavailable{Backoff: r.Options.UnavailableBackoff}
		}
		r.seen = map[string]bool{}
	})
}

// Last returns the report of the latest pass.
func (r *Reconciler) Last() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// NewTerm forgets what belongs to one leader term (the dry-run actions
// already recorded); the loop calls it when leadership changes.
func (r *Reconciler) NewTerm() {
	r.init()
	r.mu.Lock()
	r.seen = map[string]bool{}
	r.lastPlan = nil
	r.mu.Unlock()
}

// Reconcile runs one pass under the lease term f: observe, decide, and
// (in Apply mode, not paused) act. Every write is fenced by f, so a pass of
// a deposed leader stops at its first write with store.ErrFenced.
func (r *Reconciler) Reconcile(ctx context.Context, f store.Fence) (Report, error) {
	return r.pass(ctx, f, true)
}

// Diff computes what the next pass would do and writes nothing (like
// terraform plan). On a replica that has run a pass this term (the
// leader) it diffs the fleet against that pass's plan: the plan chain's
// live stages (training policies, hedging, autoscaling) step their state
// on every call, and a preview must not advance them.
func (r *Reconciler) Diff(ctx context.Context) (Report, error) {
	return r.pass(ctx, store.Fence{}, false)
}

// pass is one reconcile pass; write=false is Diff.
func (r *Reconciler) pass(ctx context.Context, f store.Fence, write bool) (Report, error) {
	r.init()
	start := time.Now()
	p, err := r.observe(ctx, write, f)
	if err != nil {
		return Report{}, err
	}
	p.write, p.fence = write, f
	p.rep.Epoch = f.Epoch
	p.decide()
	if write {
		if err := p.flush(ctx); err != nil {
			return p.rep, err
		}
		if err := p.execute(ctx); err != nil {
			return p.rep, err
		}
		if r.Metrics != nil {
			r.Metrics.observe(p)
		}
	} else {
		p.describe()
	}
	p.rep.Took = time.Since(start)
	slices.SortStableFunc(p.rep.Actions, func(a, b Action) int { return strings.Compare(a.Slot, b.Slot) })
	r.acts.Store(int64(len(p.rep.Actions)))
	if write {
		r.mu.Lock()
		r.last = p.rep
		r.mu.Unlock()
	}
	r.keepMaps(p)
	return p.rep, nil
}

// passState is one pass's view and its pending writes.
type passState struct {
	r     *Reconciler
	now   time.Time
	write bool
	fence store.Fence
	acts  bool // Apply mode and not paused
	// noEvents: the store keeps no events and the pass has no lease
	// fence, so events are not built (EventDiscarder).
	noEvents bool
	// maps are the spare maps the pass indexes in (Reconciler.keepMaps);
	// nil ones are made sized.
	maps *passMaps

	specs map[string]*Spec
	order []string // slot ids: desired first (plan order), then the rest
	// orderSpecs are order's first ids' specs (the plan's, in order),
	// nil when an id came twice (decide then reads specs).
	orderSpecs []Spec
	slots      map[string]*store.SlotRecord
	loaded     []store.SlotRecord             // the slots as loaded (slots' records), by id
	intents    map[string]*store.IntentRecord // by token
	bySlot     map[string]*store.IntentRecord // open intent of the slot's current generation
	records    map[string]*store.FleetInstanceRecord
	cloud      map[string]*providers.Instance // listed, by id: into the listings, which the pass does not change
	cloudIDs   []string                       // cloud's ids, in the order listed
	// cloudIns are cloud's instances by cloudIDs' order, unless an id was
	// listed twice (cloudDup: then cloud has the last listing's).
	cloudIns []*providers.Instance
	cloudDup bool
	listed   map[pricing.Cloud]bool // clouds whose listing succeeded
	agents   map[string]*store.InstanceRecord
	alive    map[pricing.Cloud]int
	launches []*launchPlan
	terms    []terminatePlan

	planVersion int

	// lastListed is isListed's last answer; byState decide's counts.
	lastListed struct {
		cloud  pricing.Cloud
		listed bool
		ok     bool
	}
	byState []stateCount

	// replaceReq are the pending replacement requests by instance id;
	// replacedReq the ones this pass acted on.
	replaceReq  map[string]store.ReplaceRequest
	replacedReq map[string]bool

	// gathering are the multi-instance jobs (gangs) not yet all up in one
	// pool, with their instances up per pool (incompleteGangs).
	gathering map[string]map[providers.PoolKey]int
	// gangSlots are the slot ids of each training and batch job
	// (incompleteGangs builds them at decide).
	gangSlots map[string][]string

	changes store.FleetChanges
	dirtyS  map[string]bool
	dirtyI  map[string]bool
	dirtyN  map[string]bool
	rep     Report
}

type launchPlan struct {
	slot   *store.SlotRecord
	spec   *Spec
	intent *store.IntentRecord // non-nil: retry this open intent
	reason string
	// keep is the slot's running instance of a launch-first move
	// (launchFirst): stopped once the launch succeeds, kept otherwise.
	keep *store.FleetInstanceRecord
}

type terminatePlan struct {
	rec    *store.FleetInstanceRecord
	reason string
}

func (r *Reconciler) observe(ctx context.Context, write bool, f store.Fence) (*passState, error) {
	now := r.Now().UTC()
	pm := r.takeMaps()
	p := &passState{r: r, now: now, write: write, maps: pm, specs: emptyMap(pm.specs, 0), cloud: emptyMap(pm.cloud, 0), order: pm.order,
		listed: map[pricing.Cloud]bool{}, agents: emptyMap(pm.agents, 0), alive: map[pricing.Cloud]int{},
		dirtyS: map[string]bool{}, dirtyI: map[string]bool{}, dirtyN: map[string]bool{},
		rep: Report{At: now, Mode: r.Options.Mode, ByState: map[State]int{}, Actions: make([]Action, 0, r.acts.Load())}}
	if d, ok := r.Store.(EventDiscarder); ok && f.Lease == "" {
		p.noEvents = d.DiscardsEvents()
	}
	pause, err := r.Store.Paused(ctx)
	if err != nil {
		return nil, err
	}
	p.rep.Paused = pause.Paused
	p.acts = r.Options.Mode == Apply && !pause.Paused
	reqs, err := r.Store.ReplaceRequests(ctx)
	if err != nil {
		return nil, err
	}
	if len(reqs) > 0 {
		p.replaceReq = make(map[string]store.ReplaceRequest, len(reqs))
		for _, q := range reqs {
			p.replaceReq[q.Instance] = q
		}
	}
	// The plan is computed while the fleet and the clouds are read: the
	// plan chain reads neither this pass's records nor the listings (its
	// stages read the fleet themselves), and the blocked pools do not
	// change until the pass acts. In the fleet simulator this takes the
	// listing off the plan's critical path on a second core.
	p.planVersion = r.Unavailable.Version()
	r.mu.Lock()
	plan := r.lastPlan
	r.mu.Unlock()
	var (
		read    sync.WaitGroup
		readErr error
		planErr error
	)
	read.Add(1)
	go func() {
		defer read.Done()
		if readErr = p.read(ctx); readErr == nil {
			// Matching the listings to the records needs no plan either.
			p.decideInstances()
		}
	}()
	if write || plan == nil {
		plan, planErr = r.Plans.Plan(ctx, r.Unavailable)
	}
	read.Wait()
	if readErr != nil {
		return nil, readErr
	}
	if planErr != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoPlan, planErr)
	}
	if write {
		r.mu.Lock()
		r.lastPlan = plan
		r.mu.Unlock()
	}
	specs := p.desired(plan)
	if pm.specs == nil {
		p.specs = make(map[string]*Spec, len(specs))
	}
	unique := true
	for i := range specs {
		s := &specs[i]
		n := len(p.specs)
		p.specs[s.ID] = s
		unique = unique && len(p.specs) > n
		p.order = append(p.order, s.ID)
	}
	if unique {
		// decide reads the first ids' specs here, not in the map.
		p.orderSpecs = specs
	}
	// The slots the plan has left, by id (the loaded slots, not the map:
	// the same ids, no map walk).
	var rest []string
	for i := range p.loaded {
		if id := p.loaded[i].ID; p.specs[id] == nil {
			rest = append(rest, id)
		}
	}
	sort.Strings(rest)
	p.order = append(p.order, rest...)
	return p, nil
}

// read loads the fleet's records, lists the clouds' instances and the
// agents into the pass's maps.
func (p *passState) read(ctx context.Context) error {
	r := p.r
	st, err := r.Store.Load(ctx)
	if err != nil {
		return err
	}
	// Sized from the state: a pass builds these every time.
	pm := p.maps
	p.slots = emptyMap(pm.slots, len(st.Slots))
	p.loaded = st.Slots
	p.bySlot = emptyMap(pm.bySlot, len(st.Slots))
	p.intents = emptyMap(pm.intents, len(st.Intents))
	p.records = emptyMap(pm.records, len(st.Instances))
	for i := range st.Slots {
		s := &st.Slots[i]
		p.slots[s.ID] = s
	}
	for i := range st.Intents {
		in := &st.Intents[i]
		p.intents[in.Token] = in
	}
	for i := range st.Instances {
		x := &st.Instances[i]
		p.records[x.ID] = x
	}
	// A slot's intent is the one of its current generation's token: found
	// from the intents (the open and failed ones: a few), not by a token
	// per slot. (One intent per token, so at most one per slot.)
	r.tokens.mu.Lock()
	for tok, in := range p.intents {
		if s := p.slots[in.SlotID]; s != nil && tok == r.tokens.tokenLocked(r.Options.Name, s.ID, s.Generation) {
			p.bySlot[s.ID] = in
		}
	}
	r.tokens.mu.Unlock()
	// One listing per cloud, all regions: the calls grow with regions
	// (and pages), never with the number of slots.
	clouds := make([]pricing.Cloud, 0, len(r.Computes))
	for c := range r.Computes {
		clouds = append(clouds, c)
	}
	slices.Sort(clouds)
	for _, c := range clouds {
		list, err := r.Computes[c].List(ctx, providers.Filter{Tags: map[string]string{TagFleet: r.Options.Name}})
		if err != nil {
			p.rep.Errors = append(p.rep.Errors, fmt.Sprintf("listing %s instances: %v (leaving %s alone this pass)", c, err, c))
			r.Log.Warn("listing instances failed; leaving the cloud alone this pass", "cloud", c, "err", err)
			continue
		}
		p.listed[c] = true
		if len(p.cloud) == 0 {
			if pm.cloud == nil {
				p.cloud = make(map[string]*providers.Instance, len(list)) // sized: built every pass
			}
			p.cloudIDs = make([]string, 0, len(list))
			p.cloudIns = make([]*providers.Instance, 0, len(list))
		}
		for i := range list {
			in := &list[i]
			// (One map operation per instance: an id listed before does
			// not grow the map.)
			n := len(p.cloud)
			p.cloud[in.ID] = in
			if len(p.cloud) > n {
				p.cloudIDs, p.cloudIns = append(p.cloudIDs, in.ID), append(p.cloudIns, in)
			} else {
				p.cloudDup = true
			}
			if in.State != providers.StateTerminated {
				p.alive[c]++
				p.rep.Instances++
			}
		}
	}
	if r.Agents != nil {
		recs, err := r.Agents.ListInstances(ctx, "", "")
		if err != nil {
			return fmt.Errorf("reading agent registrations: %w", err)
		}
		// By pointer into the listing: a pass reads a few fields of some.
		if pm.agents == nil {
			p.agents = make(map[string]*store.InstanceRecord, len(recs))
		}
		for i := range recs {
			p.agents[recs[i].ID] = &recs[i]
		}
	}
	return nil
}

// --- bookkeeping ---

// EventDiscarder is a Store that keeps no events (the fleet simulator's
// MemStore without OnEvent). A pass writing without a lease fence (whose
// events-only writes the store would check against the lease) then does
// not build its events: a message and a JSON document per slot move.
type EventDiscarder interface {
	DiscardsEvents() bool
}

func (p *passState) event(kind, instance, workload, msg string, data any) {
	if p.noEvents {
		return
	}
	ev := store.EventRecord{At: p.now, Kind: kind, Instance: instance, Workload: workload, Message: msg}
	if data != nil {
		ev.Data, _ = json.Marshal(data)
	}
	p.changes.Events = append(p.changes.Events, ev)
}

// move changes a slot's state and records the transition as an event.
func (p *passState) move(s *store.SlotRecord, to State, reason string) {
	from := State(s.State)
	if from == to && s.Reason == reason {
		return
	}
	p.dirtyS[s.ID] = true
	s.Reason = reason
	if from == to {
		return
	}
	if from != "" && !CanMove(from, to) {
		p.rep.Errors = append(p.rep.Errors, fmt.Sprintf("slot %s: refused move %s → %s (%s)", s.ID, from, to, reason))
		return
	}
	s.State = string(to)
	s.StateSince = p.now
	if to == Running {
		s.RunningAt = p.now
		if p.write && p.r.Metrics != nil && !s.LaunchedAt.IsZero() {
			p.r.Metrics.timeToRunning.Observe(p.now.Sub(s.LaunchedAt).Seconds())
		}
	}
	if p.noEvents {
		return
	}
	p.event("fleet.slot", s.InstanceID, s.Workload, fmt.Sprintf("slot %s: %s → %s: %s", s.ID, orNone(string(from)), to, reason),
		slotMove{Slot: s.ID, From: from, To: to, Reason: reason, Generation: s.Generation, Cloud: s.Cloud,
			Zone: s.Zone, InstanceType: s.InstanceType, Capacity: s.Capacity})
}

// slotMove is a fleet.slot event's data. Its fields are in the order of
// their JSON names so that it encodes to the bytes the map it replaced
// did (encoding/json sorts map keys); a struct encodes without the map's
// allocations and sorting, and every pass moves slots.
type slotMove struct {
	Capacity     string `json:"capacity"`
	Cloud        string `json:"cloud"`
	From         State  `json:"from"`
	Generation   int    `json:"generation"`
	InstanceType string `json:"instance_type"`
	Reason       string `json:"reason"`
	Slot         string `json:"slot"`
	To           State  `json:"to"`
	Zone         string `json:"zone"`
}

func orNone(s string) string {
	if s == "" {
		return "(new)"
	}
	return s
}

func (p *passState) act(a Action) *Action {
	p.rep.Actions = append(p.rep.Actions, a)
	return &p.rep.Actions[len(p.rep.Actions)-1]
}

func (p *passState) retire(rec *store.FleetInstanceRecord, reason string) {
	if rec == nil || rec.Retired {
		return
	}
	rec.Retired, rec.RetiredAt, rec.RetireReason = true, p.now, reason
	p.dirtyN[rec.ID] = true
}

// --- decide ---

func (p *passState) decide() {
	// observe has matched the listed instances to the records
	// (decideInstances) while the plan was made.
	p.gathering = p.incompleteGangs()
	for i, id := range p.order {
		// The plan's specs in order (each its id's: no id twice), then
		// the slots the plan left (no spec).
		var spec *Spec
		switch {
		case i < len(p.orderSpecs):
			spec = &p.orderSpecs[i]
		case p.orderSpecs == nil:
			spec = p.specs[id]
		}
		p.decideSlot(id, spec)
	}
	for _, c := range p.byState {
		p.rep.ByState[c.state] += c.n
	}
	p.forgetIntents()
	p.settleReplaceRequests()
}

// decideInstances matches listed instances to intents and slots: adopts
// launches whose answer was lost, records new and changed instances,
// reports orphans and plans their termination after the grace period.
func (p *passState) decideInstances() {
	// In id order: the listings' order, unless it is not sorted already.
	ids, ins := p.cloudIDs, p.cloudIns
	if !slices.IsSorted(ids) {
		ids = slices.Clone(ids)
		slices.Sort(ids)
		ins = nil
	}
	if p.cloudDup {
		ins = nil // (the map has the last listing of an id listed twice)
	}
	// The slots' tokens are looked up under one lock (nothing else in the
	// pass asks for one until it acts).
	p.r.tokens.mu.Lock()
	defer p.r.tokens.mu.Unlock()
	for i, id := range ids {
		var in *providers.Instance
		if ins != nil {
			in = ins[i]
		} else {
			in = p.cloud[id]
		}
		rec := p.records[id]
		if rec == nil {
			rec = &store.FleetInstanceRecord{ID: id, FirstSeen: p.now}
			p.records[id] = rec
			p.dirtyN[id] = true
		}
		if rec.State != string(in.State) || rec.Zone != in.Zone || rec.Cloud != string(in.Cloud) {
			p.dirtyN[id] = true
		}
		rec.Cloud, rec.Region, rec.Zone, rec.InstanceType = string(in.Cloud), in.Region, in.Zone, in.InstanceType
		rec.Capacity, rec.State, rec.LaunchedAt = string(in.Capacity), string(in.State), in.LaunchedAt.UTC()
		// The launch token is a tag set at launch and never changed: read
		// once per instance (a tag map per listed instance per pass was
		// 3% of a fleet simulation's CPU, cache misses).
		token := rec.Token
		if token == "" {
			if token = in.Tags[TagToken]; token != "" {
				rec.Token = token
				p.dirtyN[id] = true
			}
		}
		intent := p.intents[token]
		var slot *store.SlotRecord
		if intent != nil {
			slot = p.slots[intent.SlotID]
			if intent.State == store.IntentOpen || (intent.State == store.IntentFailed && intent.InstanceID == "") {
				// The launch happened but its answer never reached us (crash,
				// lost response, leader change): adopt the instance.
				intent.State, intent.InstanceID, intent.Region, intent.Zone, intent.Error = store.IntentLaunched, id, in.Region, in.Zone, ""
				intent.UpdatedAt = p.now
				p.dirtyI[token] = true
				p.act(Action{Kind: "adopt", Slot: intent.SlotID, Instance: id, Cloud: string(in.Cloud), Zone: in.Zone,
					InstanceType: in.InstanceType, Capacity: string(in.Capacity), Reason: "instance found by its launch token", Done: p.write})
				if slot != nil && slot.Generation == intent.Generation && State(slot.State) == Launching {
					slot.InstanceID, slot.LaunchedAt = id, in.LaunchedAt.UTC()
					slot.Cloud, slot.Region, slot.Zone, slot.InstanceType, slot.Capacity = string(in.Cloud), in.Region, in.Zone, in.InstanceType, string(in.Capacity)
					p.move(slot, Booting, "adopted "+id+" (launched before the answer was recorded)")
				}
			}
		}
		if slot == nil && rec.SlotID != "" {
			slot = p.slots[rec.SlotID]
		}
		// Owned: the slot's current instance, launched with the token of the
		// slot's current generation.
		owned := slot != nil && slot.InstanceID == id && token == p.r.tokens.tokenLocked(p.r.Options.Name, slot.ID, slot.Generation) && !rec.Retired
		if owned {
			if rec.SlotID != slot.ID || !rec.OrphanSince.IsZero() {
				rec.SlotID, rec.OrphanSince = slot.ID, time.Time{}
				p.dirtyN[id] = true
			}
			continue
		}
		if in.State == providers.StateTerminated {
			continue
		}
		if rec.Retired {
			// Retired: terminate, except that a preempted instance is left to
			// its agent's drain for DrainGrace (the cloud takes it anyway).
			if rec.RetireReason != reasonPreempted || p.now.Sub(rec.RetiredAt) >= p.r.Options.DrainGrace {
				p.terms = append(p.terms, terminatePlan{rec: rec, reason: "retired: " + rec.RetireReason})
			}
			continue
		}
		// No slot owns it: an orphan (a slot that left the plan, a
		// superseded generation, an instance of a lost store). Report it
		// once, terminate it after the grace period.
		if rec.OrphanSince.IsZero() {
			rec.OrphanSince = p.now
			rec.SlotID = ""
			p.dirtyN[id] = true
			p.event("fleet.orphan", id, in.Tags[TagWorkload], fmt.Sprintf("instance %s carries the fleet's tags but no slot owns it; terminating it after %s", id, p.r.Options.OrphanGrace),
				map[string]any{"cloud": in.Cloud, "zone": in.Zone, "instance_type": in.InstanceType, "token": token})
			p.act(Action{Kind: "orphan", Instance: id, Cloud: string(in.Cloud), Zone: in.Zone, InstanceType: in.InstanceType,
				Reason: "no slot owns it", Done: p.write})
		}
		if p.now.Sub(rec.OrphanSince) >= p.r.Options.OrphanGrace {
			p.terms = append(p.terms, terminatePlan{rec: rec, reason: "orphan for " + p.now.Sub(rec.OrphanSince).Round(time.Second).String()})
		}
	}
	// Records of instances no longer listed (the listing worked): forget
	// them; their intents retire.
	for id, rec := range p.records {
		if _, ok := p.cloud[id]; ok || !p.listed[pricing.Cloud(rec.Cloud)] {
			continue
		}
		if p.now.Sub(rec.FirstSeen) < p.r.Options.ListGrace && rec.State != string(providers.StateTerminated) {
			continue
		}
		// Its launched intent retires with it (store.Fleet.Apply).
		p.changes.DeleteInstances = append(p.changes.DeleteInstances, id)
		delete(p.records, id)
	}
	slices.Sort(p.changes.DeleteInstances)
}

const (
	reasonPreempted = "preempted"
	reasonRemoved   = "removed from the plan"
)

// decideSlot moves one slot along its state machine.
func (p *passState) decideSlot(id string, spec *Spec) {
	s := p.slots[id]
	if s == nil {
		s = &store.SlotRecord{ID: id, Workload: spec.Workload, Kind: spec.Kind, Index: spec.Index, CreatedAt: p.now}
		p.slots[id] = s
		p.applySpec(s, spec)
		p.move(s, Pending, "new in the plan")
	}
	listed := p.isListed(pricing.Cloud(s.Cloud))
	var inst *providers.Instance
	if s.InstanceID != "" {
		inst = p.cloud[s.InstanceID]
	}
	rec := p.records[s.InstanceID]
	if spec == nil {
		p.removeSlot(s, inst, rec, listed)
		return
	}
	p.rep.Slots++
	switch State(s.State) {
	case Gone:
		p.applySpec(s, spec)
		p.move(s, Pending, "back in the plan")
		p.launch(s, spec, "back in the plan")
	case Pending:
		p.applySpec(s, spec)
		p.launch(s, spec, "")
	case Draining:
		p.applySpec(s, spec)
		p.launch(s, spec, "replacement")
	case Launching:
		in := p.bySlot[s.ID]
		switch {
		case in == nil || in.State == store.IntentFailed:
			p.applySpec(s, spec)
			p.move(s, Pending, "launch did not happen")
			p.launch(s, spec, "")
		case in.State == store.IntentOpen && p.listed[pricing.Cloud(in.Cloud)]:
			p.launches = append(p.launches, &launchPlan{slot: s, spec: spec, intent: in, reason: "finishing a launch recorded before a crash or leader change"})
		}
	case Booting, Running:
		p.watch(s, spec, inst, rec, listed)
	}
	p.countState(State(s.State))
}

// isListed is p.listed[c], the last cloud's answer kept: decideSlot asks
// for every slot, and a fleet has a cloud or three.
func (p *passState) isListed(c pricing.Cloud) bool {
	if !p.lastListed.ok || p.lastListed.cloud != c {
		p.lastListed.cloud, p.lastListed.listed, p.lastListed.ok = c, p.listed[c], true
	}
	return p.lastListed.listed
}

// countState counts a slot in its state; decide adds the counts to
// rep.ByState (a map assignment per slot, before).
func (p *passState) countState(st State) {
	for i := range p.byState {
		if p.byState[i].state == st {
			p.byState[i].n++
			return
		}
	}
	p.byState = append(p.byState, stateCount{state: st, n: 1})
}

// stateCount is a number of slots in a state.
type stateCount struct {
	state State
	n     int
}

// watch checks a booting or running slot's instance and replaces it when
// it is preempted, stopped, gone, silent or never came up.
func (p *passState) watch(s *store.SlotRecord, spec *Spec, inst *providers.Instance, rec *store.FleetInstanceRecord, listed bool) {
	o := &p.r.Options
	// By pointer (read only): a record is large and this runs for every
	// live slot every pass.
	agent, registered := p.agents[s.InstanceID]
	switch {
	case !listed:
		return // the cloud did not answer: leave the slot alone
	case inst == nil:
		if p.now.Sub(s.LaunchedAt) < o.ListGrace {
			return // not listed yet (eventual consistency)
		}
		p.replace(s, spec, rec, "instance missing from the cloud's listing", false, false)
	case inst.State == providers.StateTerminated || inst.State == providers.StateStopped || inst.State == providers.StateStopping:
		p.replace(s, spec, rec, "cloud state "+string(inst.State), inst.Capacity == pricing.Spot, inst.State != providers.StateTerminated)
	case registered && (agent.State == store.StatePreempting || agent.State == store.StateDraining || agent.State == store.StateDrained || !agent.PreemptAt.IsZero()):
		p.replace(s, spec, rec, reasonPreempted, inst.Capacity == pricing.Spot, true)
	case p.replaceReq[s.InstanceID].Instance != "":
		q := p.replaceReq[s.InstanceID]
		p.replace(s, spec, rec, fmt.Sprintf("replacement requested by %s: %s", q.By, q.Reason), false, true)
		if p.replacedReq == nil {
			p.replacedReq = map[string]bool{}
		}
		p.replacedReq[q.Instance] = true
	case spec.Move && elsewhere(s, spec):
		reason := fmt.Sprintf("moved by the training policy to %s %s", zoneOf(spec.Offer), spec.Capacity)
		if p.launchFirst(s, spec, rec, reason) {
			return
		}
		p.replace(s, spec, rec, reason, false, true)
	case p.gangJoins(s, spec):
		// A job's instances work together (one zone, one offer; docs/plan.md):
		// one left behind in a pool the plan has left only costs money.
		p.replace(s, spec, rec, fmt.Sprintf("the job's other instances are planned in %s %s %s: a multi-instance job runs in one pool",
			zoneOf(spec.Offer), spec.Offer.InstanceType, spec.Capacity), false, true)
	case State(s.State) == Booting:
		if registered || (!*o.RequireAgent && inst.State == providers.StateRunning) {
			p.move(s, Running, "agent registered")
			return
		}
		if p.now.Sub(s.LaunchedAt) >= o.BootTimeout {
			p.replace(s, spec, rec, fmt.Sprintf("no agent registration within %s of launch", o.BootTimeout), false, true)
		}
	case State(s.State) == Running && *o.RequireAgent:
		var last time.Time
		if registered {
			if last = agent.LastHeartbeat; last.IsZero() {
				last = agent.RegisteredAt
			}
		}
		if !registered || p.now.Sub(last) >= o.HeartbeatTimeout {
			p.replace(s, spec, rec, fmt.Sprintf("no heartbeat for %s", p.now.Sub(last).Round(time.Second)), false, true)
		}
	}
}

// incompleteGangs are the training and batch jobs planned on more than one
// instance whose slots are not all booting or running in one pool, with
// how many are up in each pool. A complete gang stays where it runs even
// when the plan has moved on (as a single instance does: only the training
// stage's Move moves it); an incomplete one makes no progress, so its
// instances outside the plan's pool follow the ones that came up there.
// It also indexes the jobs' slots (gangSlots) for gangUp.
func (p *passState) incompleteGangs() map[string]map[providers.PoolKey]int {
	// The index is kept between passes with its slices emptied (keepMaps):
	// a thousand-workload fleet built it anew, with a pool map per job,
	// every pass.
	if p.gangSlots = p.maps.gangSlots; p.gangSlots == nil {
		p.gangSlots = map[string][]string{}
	}
	for id, spec := range p.specs {
		if spec.Kind != string(policy.Training) && spec.Kind != string(policy.Batch) {
			continue
		}
		p.gangSlots[spec.Workload] = append(p.gangSlots[spec.Workload], id)
	}
	var out map[string]map[providers.PoolKey]int
	for w, ids := range p.gangSlots {
		n := len(ids)
		if n <= 1 {
			continue // (an emptied slice of an earlier pass, or one instance)
		}
		// Its instances up, and whether in more than one pool.
		up, split := 0, false
		var first providers.PoolKey
		for _, id := range ids {
			s := p.slots[id]
			if s == nil || (State(s.State) != Booting && State(s.State) != Running) {
				continue
			}
			if k := slotPool(s); up == 0 {
				first = k
			} else if k != first {
				split = true
			}
			up++
		}
		if up > 0 && (up < n || split) {
			pools := map[providers.PoolKey]int{}
			for _, id := range ids {
				if s := p.slots[id]; s != nil && (State(s.State) == Booting || State(s.State) == Running) {
					pools[slotPool(s)]++
				}
			}
			if out == nil {
				out = map[string]map[providers.PoolKey]int{}
			}
			out[w] = pools
		}
	}
	return out
}

// gangUp is how many of s's job's other instances are booting or running
// in pool k now (this pass's launches included); 0 for a service, whose
// slots are not in gangSlots.
func (p *passState) gangUp(s *store.SlotRecord, k providers.PoolKey) int {
	n := 0
	for _, id := range p.gangSlots[s.Workload] {
		o := p.slots[id]
		if o != nil && o.ID != s.ID && (State(o.State) == Booting || State(o.State) == Running) && slotPool(o) == k {
			n++
		}
	}
	return n
}

// gangJoins says the slot belongs to an incomplete gang, runs outside its
// planned pool, and should go there: another of the gang is up in that
// pool, or its own pool is blocked for capacity or a preemption (it cannot
// complete the gang where it is). A pool blocked for a quota error is not
// a reason: the account's quota is as short in the plan's pool, and leaving
// would only give up the instance the quota allows.
func (p *passState) gangJoins(s *store.SlotRecord, spec *Spec) bool {
	ups := p.gathering[s.Workload]
	if ups == nil || !elsewhere(s, spec) {
		return false
	}
	if ups[PoolOf(spec.Offer, spec.Capacity)] > 0 {
		return true
	}
	why, _, blocked := p.r.Unavailable.Reason(slotPool(s), p.now)
	return blocked && why != "quota"
}

// elsewhere says the slot's instance is not in the spec's pool.
func elsewhere(s *store.SlotRecord, spec *Spec) bool {
	o := spec.Offer
	return s.Cloud != string(o.Cloud) || s.Zone != o.Zone || s.InstanceType != o.InstanceType || s.Capacity != string(spec.Capacity)
}

// replace retires a slot's instance and launches a replacement in the next
// best pool; block puts the instance's pool in the unavailable cache.
func (p *passState) replace(s *store.SlotRecord, spec *Spec, rec *store.FleetInstanceRecord, reason string, block, terminate bool) {
	why := reason
	if reason == reasonPreempted {
		why = reasonPreempted
	} else if !terminate {
		why = "gone: " + reason
	}
	p.retire(rec, why)
	if rec != nil && terminate && reason != reasonPreempted {
		p.terms = append(p.terms, terminatePlan{rec: rec, reason: reason})
	}
	if block && rec != nil {
		p.act(Action{Kind: "block", Slot: s.ID, Instance: rec.ID, Cloud: rec.Cloud, Zone: rec.Zone, InstanceType: rec.InstanceType,
			Capacity: rec.Capacity, Reason: reason, Done: p.write})
		if p.write {
			k := providers.PoolKey{Cloud: pricing.Cloud(rec.Cloud), Zone: rec.Zone, InstanceType: rec.InstanceType, Capacity: pricing.CapacityType(rec.Capacity)}
			p.r.Unavailable.Block(k, reason, p.now)
		}
	}
	p.move(s, Draining, reason)
	p.applySpec(s, spec)
	p.launch(s, spec, "replacing: "+reason)
}

// launchFirst plans a training move of a one-instance job as launch, then
// stop: the replacement is launched while the slot's instance keeps
// running, and that instance is stopped only once the launch succeeded
// (doLaunch, launchPlan.keep). A refused launch leaves the job where it
// runs. Stopping first, a job whose move to a spot pool was refused (a
// pool whose block ran out only looks available) lost its on-demand
// instance, a changeover and its unsaved work, and the live training stage
// learnt that at that price again and again (docs/fleet.md "Training
// jobs, live"). False when the move is not taken this way: a job of
// several instances (its instances move as a gang), no launch this pass
// (dry-run, paused), or no instance record.
func (p *passState) launchFirst(s *store.SlotRecord, spec *Spec, rec *store.FleetInstanceRecord, reason string) bool {
	if !p.acts || !p.write || rec == nil || rec.Retired || len(p.gangSlots[s.Workload]) > 1 {
		return false
	}
	if _, ok := p.r.Computes[spec.Offer.Cloud]; !ok || !p.listed[spec.Offer.Cloud] {
		return false
	}
	p.launches = append(p.launches, &launchPlan{slot: s, spec: spec, reason: reason, keep: rec})
	return true
}

// removeSlot drains a slot that left the plan and forgets it once its
// instance is gone.
func (p *passState) removeSlot(s *store.SlotRecord, inst *providers.Instance, rec *store.FleetInstanceRecord, listed bool) {
	if inst != nil && inst.State != providers.StateTerminated {
		p.retire(rec, reasonRemoved)
		if rec != nil {
			p.terms = append(p.terms, terminatePlan{rec: rec, reason: reasonRemoved})
		}
		p.move(s, Draining, reasonRemoved)
		return
	}
	if in := p.bySlot[s.ID]; in != nil && in.State == store.IntentOpen {
		// A launch may still surface; its instance will be an orphan.
		in.State, in.Error, in.UpdatedAt = store.IntentFailed, "slot removed from the plan before the launch was confirmed", p.now
		p.dirtyI[in.Token] = true
	}
	if inst == nil && s.InstanceID != "" && !listed {
		return // cannot tell yet
	}
	if State(s.State) != Gone {
		p.move(s, Gone, reasonRemoved)
		return
	}
	p.changes.DeleteSlots = append(p.changes.DeleteSlots, s.ID)
	delete(p.dirtyS, s.ID)
}

func (p *passState) applySpec(s *store.SlotRecord, spec *Spec) {
	o := spec.Offer
	if s.Cloud == string(o.Cloud) && s.Region == o.Region && s.Zone == o.Zone && s.InstanceType == o.InstanceType &&
		s.Capacity == string(spec.Capacity) && s.PricePerHour == spec.PricePerHour && s.GPU == string(o.GPU) && s.Kind == spec.Kind {
		return
	}
	s.Cloud, s.Region, s.Zone, s.InstanceType, s.GPU = string(o.Cloud), o.Region, o.Zone, o.InstanceType, string(o.GPU)
	s.Capacity, s.PricePerHour, s.Kind = string(spec.Capacity), spec.PricePerHour, spec.Kind
	p.dirtyS[s.ID] = true
}

func (p *passState) launch(s *store.SlotRecord, spec *Spec, reason string) {
	if !p.listed[spec.Offer.Cloud] {
		if _, ok := p.r.Computes[spec.Offer.Cloud]; !ok {
			p.move(s, State(s.State), fmt.Sprintf("no compute adapter configured for %s", spec.Offer.Cloud))
		}
		return
	}
	p.launches = append(p.launches, &launchPlan{slot: s, spec: spec, reason: reason})
}

// settleReplaceRequests forgets the requests this pass acted on and those
// of instances that are no longer a slot's (gone, replaced for another
// reason, never the fleet's), when the pass acts: in dry-run or paused a
// request waits.
func (p *passState) settleReplaceRequests() {
	if len(p.replaceReq) == 0 || !p.acts {
		return
	}
	current := make(map[string]bool, len(p.slots))
	for _, s := range p.slots {
		switch State(s.State) {
		case Launching, Booting, Running:
			if s.InstanceID != "" {
				current[s.InstanceID] = true
			}
		}
	}
	for id := range p.replaceReq {
		if p.replacedReq[id] || !current[id] {
			p.changes.DoneReplacements = append(p.changes.DoneReplacements, id)
		}
	}
	sort.Strings(p.changes.DoneReplacements)
}

// forgetIntents retires intents nothing needs any more: failed ones, and
// open ones of a generation the slot has moved past with no instance.
func (p *passState) forgetIntents() {
	for _, in := range p.intents {
		s := p.slots[in.SlotID]
		switch {
		case in.State == store.IntentFailed && !p.dirtyI[in.Token]:
			in.State, in.UpdatedAt = store.IntentRetired, p.now
			p.dirtyI[in.Token] = true
		case in.State == store.IntentOpen && (s == nil || s.Generation > in.Generation) && p.listed[pricing.Cloud(in.Cloud)] && p.now.Sub(in.CreatedAt) > p.r.Options.ListGrace:
			in.State, in.Error, in.UpdatedAt = store.IntentRetired, "superseded; no instance carries its token", p.now
			p.dirtyI[in.Token] = true
		}
	}
}

// flush writes the bookkeeping of decide in one fenced transaction.
// reuseChanges empties c for the next write of the pass, keeping its
// slices' room (a pass that launches many writes before each launch; the
// copies were a twentieth of the fleet simulation's allocations).
func reuseChanges(c store.FleetChanges) store.FleetChanges {
	clear(c.Slots)
	clear(c.Intents)
	clear(c.Instances)
	clear(c.Events)
	return store.FleetChanges{Slots: c.Slots[:0], DeleteSlots: c.DeleteSlots[:0], Intents: c.Intents[:0], Instances: c.Instances[:0],
		DeleteInstances: c.DeleteInstances[:0], DoneReplacements: c.DoneReplacements[:0], Events: c.Events[:0]}
}

func (p *passState) flush(ctx context.Context) error {
	for id := range p.dirtyS {
		p.changes.Slots = append(p.changes.Slots, *p.slots[id])
	}
	for t := range p.dirtyI {
		p.changes.Intents = append(p.changes.Intents, *p.intents[t])
	}
	for id := range p.dirtyN {
		if rec := p.records[id]; rec != nil {
			p.changes.Instances = append(p.changes.Instances, *rec)
		}
	}
	// (Keys are unique: any sort gives this order. slices' sorts do not
	// allocate as sort.Slice does, and a pass flushes once per launch.)
	slices.SortFunc(p.changes.Slots, func(a, b store.SlotRecord) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(p.changes.Intents, func(a, b store.IntentRecord) int { return strings.Compare(a.Token, b.Token) })
	slices.SortFunc(p.changes.Instances, func(a, b store.FleetInstanceRecord) int { return strings.Compare(a.ID, b.ID) })
	err := p.r.Store.Apply(ctx, p.fence, p.changes)
	p.r.tokens.forget(p.changes.DeleteSlots)
	p.changes = reuseChanges(p.changes)
	clear(p.dirtyS)
	clear(p.dirtyI)
	clear(p.dirtyN)
	return err
}
