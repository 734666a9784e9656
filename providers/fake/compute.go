package fake

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	stdmaps "maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// This file is the simulated compute cloud: providers.Compute with spot
// capacity driven by real availability traces, launch latency, preemption
// notices, injected errors and a controlled clock. It behaves like a real
// cloud in the ways the fleet depends on: client-token idempotency,
// terminated instances staying listed for a while, List paginated per
// region, capacity errors carrying their pool.

// Trace is one spot pool's availability over time: Avail[i] instances can
// be had during tick i, which lasts Gap. It is the plain data of
// fleet/sim.Trace (the spot-traces data set), passed in so this package
// reads no files.
type Trace struct {
	Name  string
	Gap   time.Duration
	Avail []int
}

// APIKind names a compute call, for counters and injected errors.
type APIKind string

// API kinds. ListPage counts pages: one per region and page of PageSize.
const (
	APILaunch    APIKind = "launch"
	APITerminate APIKind = "terminate"
	APIListPage  APIKind = "list_page"
)

// ErrLostResponse is what a launch whose response was lost looks like to
// the caller: the instance was created, the answer never came back.
var ErrLostResponse = errors.New("launch response lost (connection reset)")

// ComputeConfig configures a simulated compute cloud.
type ComputeConfig struct {
	// Cloud is the cloud the fake pretends to be; default aws.
	Cloud pricing.Cloud
	// Offers are the pools the cloud sells: each offer's zone and instance
	// type, on-demand always, spot when the offer has a spot price.
	Offers []pricing.Offer
	// Traces drive spot capacity. Each spot pool gets one trace and a start
	// offset into it, drawn from Seed (sorted pool order, so the mapping is
	// the same for the same offers and seed). Without traces spot capacity
	// is SpotScale per pool, constant.
	Traces []Trace
	Seed   uint64
	// SpotScale multiplies a trace's count (the traces count 1–16
	// instances; a benchmark needs thousands). Default 1.
	SpotScale int
	// OnDemandCapacity caps on-demand instances per pool; 0 is unlimited.
	OnDemandCapacity int
	// Start is trace time zero; default the first Now().
	Start time.Time
	// Now is the controlled clock; default time.Now.
	Now func() time.Time
	// LaunchLatency is how long an instance stays pending; default 30s.
	LaunchLatency time.Duration
	// NoticeLead is the time between a preemption notice and the
	// termination (AWS gives 2 minutes, GCP 30 s); default 2m.
	NoticeLead time.Duration
	// TerminatedTTL is how long terminated instances stay listed (EC2: about
	// an hour); default 1h.
	TerminatedTTL time.Duration
	// PageSize is instances per List page; default 1000 (EC2's maximum).
	PageSize int
	// Quota caps live instances in the cloud (0: none): a launch beyond it
	// fails with ErrQuotaExceeded.
	Quota int
	// TimeScale speeds the traces up: trace time runs TimeScale times as
	// fast as the clock (default 1), so an end-to-end test replays hours
	// of a real trace in seconds.
	TimeScale float64
	// ShareTags makes List return instances whose Tags are the fake's own
	// maps, shared by every caller, instead of a copy each: callers must
	// only read them. The fleet simulator sets it (its reconciler lists
	// thousands of instances every pass and reads two tags of each); the
	// fake never changes an instance's tags after its launch.
	ShareTags bool
	// ReuseList makes List write its answer over its previous answer's
	// memory: a caller must be done with an answer when List is called
	// again. The fleet simulator sets it (its reconciler, the only caller,
	// reads a listing within its pass and lists again only at the next).
	ReuseList bool
}

// Lifecycle hooks, called without the lock: OnRunning when an instance
// leaves pending (with the user data it was launched with, e.g. to run it),
// OnGone when it terminates.
type Lifecycle struct {
	OnRunning func(inst providers.Instance, userData string)
	OnGone    func(inst providers.Instance)
}

// Notice is a preemption notice the fake delivered.
type Notice struct {
	Instance providers.Instance
	// Action is "terminate" (spot interruption).
	Action string
	// At is when the instance goes away.
	At time.Time
}

// Compute is a simulated compute cloud. It is safe for concurrent use.
type Compute struct {
	cloud    pricing.Cloud
	now      func() time.Time
	start    time.Time
	latency  time.Duration
	lead     time.Duration
	ttl      time.Duration
	pageSize int
	scale    int
	odCap    int
	quota    int
	tscale   float64
	share    bool                 // ShareTags
	reuse    bool                 // ReuseList
	listed   []providers.Instance // the last List's answer (ReuseList)
	base     time.Duration        // trace time at start
	calm     bool

	mu      sync.Mutex
	life    Lifecycle
	pools   map[providers.PoolKey]*pool
	regions []string
	zoneReg map[string]string
	insts   map[string]*simInstance
	// The indexes below let a sync touch only what changes at the current
	// time instead of walking every instance (the fleet simulator syncs on
	// every call, thousands of instances, hundreds of thousands of times):
	// order is every listed instance in id order (nil where deleted,
	// compacted now and then), active each pool's live, un-noticed
	// instances (what its capacity counts), due the pending transitions
	// (running, terminated after a notice, gone from the listing) by time.
	order    []*simInstance
	holes    int
	active   map[providers.PoolKey]map[string]*simInstance
	due      transitions
	byToken  map[string]string
	seq      int
	calls    map[APIKind]int
	failNext map[APIKind][]error
	poolErrs map[providers.PoolKey]error
	loseNext int
	notices  []Notice
	queue    []func()
	// OnNotice, when set, is called (without the lock) for every notice,
	// e.g. to feed a fake metadata service or a fake agent.
	onNotice func(Notice)
}

type pool struct {
	key    providers.PoolKey
	region string
	trace  *Trace
	offset int
}

type simInstance struct {
	inst     providers.Instance
	noticeAt time.Time // zero: no notice
	goneAt   time.Time // when terminated
	userData string
	token    string
	seq      int  // creation order: ids sort in it
	deleted  bool // left the listing
	// region is the instance's region's index in Compute.regions (-1:
	// none of them): a List of all regions counts it without a map.
	region int
	// The last one-tag List filter checked against the instance's tags
	// (which never change) and its answer: the reconciler lists with the
	// same filter every pass.
	filter  [2]string
	matches bool
	checked bool
}

// hasTag says whether the instance's tags hold kv, remembering the answer
// for the next List with the same filter.
func (s *simInstance) hasTag(kv [2]string) bool {
	if !s.checked || s.filter != kv {
		s.filter, s.matches, s.checked = kv, s.inst.Tags[kv[0]] == kv[1], true
	}
	return s.matches
}

// transition kinds, in the order a sync applies them to one instance.
const (
	toGone    = iota // a terminated instance leaves the listing
	toEnd            // a noticed instance terminates
	toRunning        // a pending instance runs
)

// transition is one instance's pending state change, due at at.
type transition struct {
	at   time.Time
	kind int
	s    *simInstance
}

// transitions is a min-heap of transitions by time, then creation order,
// so a sync applies them in the same order every run.
type transitions []transition

func (h transitions) Len() int { return len(h) }
func (h transitions) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	if h[i].s.seq != h[j].s.seq {
		return h[i].s.seq < h[j].s.seq
	}
	return h[i].kind < h[j].kind
}
func (h transitions) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *transitions) Push(x any)   { *h = append(*h, x.(transition)) }
func (h *transitions) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = transition{}
	*h = old[:len(old)-1]
	return x
}

// NewCompute returns a simulated compute cloud selling cfg.Offers.
func NewCompute(cfg ComputeConfig) *Compute {
	if cfg.Cloud == "" {
		cfg.Cloud = pricing.AWS
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Start.IsZero() {
		cfg.Start = cfg.Now()
	}
	if cfg.LaunchLatency <= 0 {
		cfg.LaunchLatency = 30 * time.Second
	}
	if cfg.NoticeLead <= 0 {
		cfg.NoticeLead = 2 * time.Minute
	}
	if cfg.TerminatedTTL <= 0 {
		cfg.TerminatedTTL = time.Hour
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 1000
	}
	if cfg.SpotScale <= 0 {
		cfg.SpotScale = 1
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	c := &Compute{cloud: cfg.Cloud, now: cfg.Now, start: cfg.Start, latency: cfg.LaunchLatency, lead: cfg.NoticeLead,
		ttl: cfg.TerminatedTTL, pageSize: cfg.PageSize, scale: cfg.SpotScale, tscale: cfg.TimeScale, odCap: cfg.OnDemandCapacity, quota: cfg.Quota, share: cfg.ShareTags, reuse: cfg.ReuseList,
		pools: map[providers.PoolKey]*pool{}, zoneReg: map[string]string{}, insts: map[string]*simInstance{},
		byToken: map[string]string{}, calls: map[APIKind]int{}, failNext: map[APIKind][]error{},
		poolErrs: map[providers.PoolKey]error{}, active: map[providers.PoolKey]map[string]*simInstance{}}
	for _, o := range cfg.Offers {
		if o.Cloud != "" && o.Cloud != cfg.Cloud {
			continue
		}
		zone := o.Zone
		if zone == "" {
			zone = o.Region
		}
		c.zoneReg[zone] = o.Region
		if !slices.Contains(c.regions, o.Region) {
			c.regions = append(c.regions, o.Region)
		}
		caps := []pricing.CapacityType{pricing.OnDemand}
		if o.SpotPrice > 0 {
			caps = append(caps, pricing.Spot)
		}
		for _, ct := range caps {
			k := providers.PoolKey{Cloud: cfg.Cloud, Zone: zone, InstanceType: o.InstanceType, Capacity: ct}
			c.pools[k] = &pool{key: k, region: o.Region}
		}
	}
	sort.Strings(c.regions)
	c.assignTraces(cfg.Traces, cfg.Seed)
	return c
}

// assignTraces gives each spot pool, in sorted order, a trace and a start
// offset drawn from seed.
func (c *Compute) assignTraces(traces []Trace, seed uint64) {
	if len(traces) == 0 {
		return
	}
	keys := make([]providers.PoolKey, 0, len(c.pools))
	for k := range c.pools {
		if k.Capacity == pricing.Spot {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return poolString(keys[i]) < poolString(keys[j]) })
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	for _, k := range keys {
		t := &traces[rng.IntN(len(traces))]
		p := c.pools[k]
		p.trace = t
		if len(t.Avail) > 0 {
			p.offset = rng.IntN(len(t.Avail))
		}
	}
}

func poolString(k providers.PoolKey) string {
	return string(k.Cloud) + "/" + k.Zone + "/" + k.InstanceType + "/" + string(k.Capacity)
}

var _ providers.Compute = (*Compute)(nil)

// Cloud is the cloud the fake pretends to be.
func (c *Compute) Cloud() pricing.Cloud { return c.cloud }

// Regions are the regions the fake sells in, sorted.
func (c *Compute) Regions() []string { return slices.Clone(c.regions) }

// SetLifecycle sets the lifecycle hooks.
func (c *Compute) SetLifecycle(l Lifecycle) {
	c.mu.Lock()
	c.life = l
	c.mu.Unlock()
}

// OnNotice sets a function called for every preemption notice.
func (c *Compute) OnNotice(fn func(Notice)) {
	c.mu.Lock()
	c.onNotice = fn
	c.mu.Unlock()
}

// TraceOf names the trace and offset that drive a spot pool ("" when none).
func (c *Compute) TraceOf(k providers.PoolKey) (name string, offset int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pools[k]; p != nil && p.trace != nil {
		return p.trace.Name, p.offset
	}
	return "", 0
}

// capacity is how many instances pool p can hold now; -1 is unlimited.
func (c *Compute) capacity(p *pool, now time.Time) int {
	if p.key.Capacity == pricing.OnDemand {
		if c.odCap > 0 {
			return c.odCap
		}
		return -1
	}
	if c.calm {
		return -1
	}
	if p.trace == nil || len(p.trace.Avail) == 0 || p.trace.Gap <= 0 {
		return c.scale
	}
	tick := int((float64(c.base) + float64(now.Sub(c.start))*c.tscale) / float64(p.trace.Gap))
	if tick < 0 {
		tick = 0
	}
	return p.trace.Avail[(p.offset+tick)%len(p.trace.Avail)] * c.scale
}

// Capacity is how many instances the pool can hold now (-1: unlimited).
func (c *Compute) Capacity(k providers.PoolKey) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pools[k]
	if p == nil {
		return 0
	}
	return c.capacity(p, c.now())
}

func alive(s *simInstance) bool { return s.inst.State != providers.StateTerminated }

// Sync applies the clock to the simulation: pending instances whose launch
// latency passed run, spot pools over their traced capacity get preemption
// notices (newest instances first), noticed instances whose lead passed
// terminate, and long-terminated instances leave the listing. Every API call
// syncs first; tests call it after moving the clock.
func (c *Compute) Sync() {
	c.mu.Lock()
	c.syncLocked()
	c.fire()
}

// fire runs the callbacks queued under the lock, after unlocking it (the
// callbacks may call back into the fake).
func (c *Compute) fire() {
	q := c.queue
	c.queue = nil
	c.mu.Unlock()
	for _, f := range q {
		f()
	}
}

func (c *Compute) syncLocked() {
	now := c.now()
	for len(c.due) > 0 && !c.due[0].at.After(now) {
		t := heap.Pop(&c.due).(transition)
		s := t.s
		switch t.kind {
		case toGone:
			if !s.deleted && s.inst.State == providers.StateTerminated && now.Sub(s.goneAt) > c.ttl {
				c.deleteLocked(s)
			}
		case toEnd:
			if alive(s) && !s.noticeAt.IsZero() && !now.Before(s.noticeAt.Add(c.lead)) {
				c.terminateLocked(s, now)
			}
		case toRunning:
			if s.inst.State != providers.StatePending {
				continue
			}
			if !s.noticeAt.IsZero() && !now.Before(s.noticeAt.Add(c.lead)) {
				// Its notice ran out too: it ends without running.
				c.terminateLocked(s, now)
				continue
			}
			s.inst.State = providers.StateRunning
			if fn := c.life.OnRunning; fn != nil {
				in, ud := cloneInstance(s.inst), s.userData
				c.queue = append(c.queue, func() { fn(in, ud) })
			}
		}
	}
	var fired []Notice
	for k, set := range c.active {
		if k.Capacity != pricing.Spot || len(set) == 0 {
			continue
		}
		p := c.pools[k]
		if p == nil {
			continue
		}
		capN := c.capacity(p, now)
		if capN < 0 || len(set) <= capN {
			continue
		}
		list := make([]*simInstance, 0, len(set))
		for _, s := range set {
			list = append(list, s)
		}
		// The newest instances go first, and ties by id, so a replay is
		// deterministic.
		sort.Slice(list, func(i, j int) bool {
			if !list[i].inst.LaunchedAt.Equal(list[j].inst.LaunchedAt) {
				return list[i].inst.LaunchedAt.After(list[j].inst.LaunchedAt)
			}
			return list[i].inst.ID > list[j].inst.ID
		})
		for _, s := range list[:len(list)-capN] {
			c.noticeLocked(s, now)
			fired = append(fired, Notice{Instance: cloneInstance(s.inst), Action: "terminate", At: now.Add(c.lead)})
		}
	}
	sort.Slice(fired, func(i, j int) bool { return fired[i].Instance.ID < fired[j].Instance.ID })
	c.notices = append(c.notices, fired...)
	if fn := c.onNotice; fn != nil {
		for _, n := range fired {
			c.queue = append(c.queue, func() { fn(n) })
		}
	}
}

// addLocked lists a new instance and indexes it.
func (c *Compute) addLocked(s *simInstance) {
	s.seq = c.seq
	s.region = slices.Index(c.regions, s.inst.Region) // (regions are fixed at New)
	c.insts[s.inst.ID] = s
	c.order = append(c.order, s)
	c.activate(s)
	if s.inst.State == providers.StatePending {
		heap.Push(&c.due, transition{at: s.inst.LaunchedAt.Add(c.latency), kind: toRunning, s: s})
	}
}

// activate counts s against its pool's capacity.
func (c *Compute) activate(s *simInstance) {
	k := poolOf(s.inst)
	set := c.active[k]
	if set == nil {
		set = map[string]*simInstance{}
		c.active[k] = set
	}
	set[s.inst.ID] = s
}

// deactivate stops counting s against its pool's capacity (noticed or
// terminated).
func (c *Compute) deactivate(s *simInstance) {
	delete(c.active[poolOf(s.inst)], s.inst.ID)
}

// noticeLocked gives s its preemption notice now; it terminates NoticeLead
// later.
func (c *Compute) noticeLocked(s *simInstance, now time.Time) {
	s.noticeAt = now
	c.deactivate(s)
	heap.Push(&c.due, transition{at: now.Add(c.lead), kind: toEnd, s: s})
}

// deleteLocked takes a long-terminated instance out of the listing.
func (c *Compute) deleteLocked(s *simInstance) {
	delete(c.insts, s.inst.ID)
	s.deleted = true
	c.holes++
	if c.holes > 64 && c.holes > len(c.order)/2 {
		kept := c.order[:0]
		for _, x := range c.order {
			if !x.deleted {
				kept = append(kept, x)
			}
		}
		clear(c.order[len(kept):])
		c.order, c.holes = kept, 0
	}
}

func (c *Compute) terminateLocked(s *simInstance, now time.Time) {
	s.inst.State = providers.StateTerminated
	s.goneAt = now
	c.deactivate(s)
	// Listed while now - goneAt <= TerminatedTTL: it leaves a nanosecond
	// after that.
	heap.Push(&c.due, transition{at: now.Add(c.ttl + 1), kind: toGone, s: s})
	if fn := c.life.OnGone; fn != nil {
		in := cloneInstance(s.inst)
		c.queue = append(c.queue, func() { fn(in) })
	}
}

func poolOf(i providers.Instance) providers.PoolKey {
	return providers.PoolKey{Cloud: i.Cloud, Zone: i.Zone, InstanceType: i.InstanceType, Capacity: i.Capacity}
}

func cloneInstance(i providers.Instance) providers.Instance {
	i.Tags = maps(i.Tags)
	return i
}

// maps copies a tag map; never nil.
func maps(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return stdmaps.Clone(m)
}

// call counts one API call and returns an injected error for it, if any.
func (c *Compute) call(k APIKind) error {
	c.calls[k]++
	if q := c.failNext[k]; len(q) > 0 {
		c.failNext[k] = q[1:]
		return q[0]
	}
	return nil
}

// Launch starts an instance in the first candidate pool with capacity, or
// returns the instance an earlier launch with the same client token
// started. A candidate without capacity is skipped as EC2 CreateFleet skips
// an override; when none has capacity, the error is a *providers.LaunchError
// for the first candidate wrapping ErrInsufficientCapacity.
func (c *Compute) Launch(ctx context.Context, req providers.LaunchRequest) (providers.Instance, error) {
	if err := ctx.Err(); err != nil {
		return providers.Instance{}, err
	}
	c.mu.Lock()
	c.syncLocked()
	inst, err := c.launchLocked(req)
	c.fire()
	return inst, err
}

func (c *Compute) launchLocked(req providers.LaunchRequest) (providers.Instance, error) {
	if err := c.call(APILaunch); err != nil {
		return providers.Instance{}, fmt.Errorf("fake %s launch: %w", c.cloud, err)
	}
	if req.ClientToken == "" {
		return providers.Instance{}, fmt.Errorf("fake %s launch: %w: a client token is required", c.cloud, providers.ErrBadConfig)
	}
	if id, ok := c.byToken[req.ClientToken]; ok {
		if s := c.insts[id]; s != nil {
			return cloneInstance(s.inst), nil
		}
	}
	if len(req.Candidates) == 0 {
		return providers.Instance{}, fmt.Errorf("fake %s launch: %w: no candidate offers", c.cloud, providers.ErrBadConfig)
	}
	now := c.now()
	if c.quota > 0 {
		n := 0
		for _, s := range c.insts {
			if alive(s) {
				n++
			}
		}
		if n >= c.quota {
			o := req.Candidates[0]
			return providers.Instance{}, &providers.LaunchError{Pool: c.keyOf(o, req.Capacity), Code: "VcpuLimitExceeded",
				Err: fmt.Errorf("%w: %d instances running, quota %d", providers.ErrQuotaExceeded, n, c.quota)}
		}
	}
	var firstErr error
	for _, o := range req.Candidates {
		k := c.keyOf(o, req.Capacity)
		p := c.pools[k]
		if p == nil {
			if firstErr == nil {
				firstErr = &providers.LaunchError{Pool: k, Code: "InvalidParameterValue",
					Err: fmt.Errorf("%w: %s is not sold in %s", providers.ErrBadConfig, o.InstanceType, k.Zone)}
			}
			continue
		}
		if err := c.poolErrs[k]; err != nil {
			if firstErr == nil {
				firstErr = &providers.LaunchError{Pool: k, Code: codeOf(err), Err: err}
			}
			continue
		}
		if capN := c.capacity(p, now); capN >= 0 && c.usedLocked(k) >= capN {
			if firstErr == nil {
				firstErr = &providers.LaunchError{Pool: k, Code: "InsufficientInstanceCapacity",
					Err: fmt.Errorf("%w: no %s capacity for %s in %s", providers.ErrInsufficientCapacity, k.Capacity, k.InstanceType, k.Zone)}
			}
			continue
		}
		c.seq++
		id := fmt.Sprintf("%s-%08x", idPrefix(c.cloud), c.seq)
		s := &simInstance{token: req.ClientToken, userData: req.UserData, inst: providers.Instance{
			InstanceRef:  providers.InstanceRef{Cloud: c.cloud, Region: p.region, Zone: k.Zone, ID: id},
			InstanceType: k.InstanceType, Capacity: k.Capacity, State: providers.StatePending,
			Tags: maps(req.Tags), LaunchedAt: now, PrivateIP: fmt.Sprintf("10.%d.%d.%d", (c.seq>>16)&255, (c.seq>>8)&255, c.seq&255)}}
		c.addLocked(s)
		c.byToken[req.ClientToken] = id
		if c.loseNext > 0 {
			c.loseNext--
			return providers.Instance{}, fmt.Errorf("fake %s launch: %w", c.cloud, ErrLostResponse)
		}
		return cloneInstance(s.inst), nil
	}
	return providers.Instance{}, firstErr
}

func codeOf(err error) string {
	switch {
	case errors.Is(err, providers.ErrInsufficientCapacity):
		return "InsufficientInstanceCapacity"
	case errors.Is(err, providers.ErrQuotaExceeded):
		return "MaxSpotInstanceCountExceeded"
	case errors.Is(err, providers.ErrThrottled):
		return "RequestLimitExceeded"
	case errors.Is(err, providers.ErrUnauthorized):
		return "UnauthorizedOperation"
	}
	return "InternalError"
}

func idPrefix(c pricing.Cloud) string {
	switch c {
	case pricing.GCP:
		return "gpb-vm"
	case pricing.Azure:
		return "gpb-azvm"
	}
	return "i"
}

func (c *Compute) keyOf(o pricing.Offer, ct pricing.CapacityType) providers.PoolKey {
	zone := o.Zone
	if zone == "" {
		zone = o.Region
	}
	return providers.PoolKey{Cloud: c.cloud, Zone: zone, InstanceType: o.InstanceType, Capacity: ct}
}

func (c *Compute) usedLocked(k providers.PoolKey) int { return len(c.active[k]) }

// Terminate terminates an instance; one already gone is not an error, one
// never known is ErrNotFound (wrapped), as the clouds answer.
func (c *Compute) Terminate(ctx context.Context, ref providers.InstanceRef) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.syncLocked()
	err := c.call(APITerminate)
	if err == nil {
		s := c.insts[ref.ID]
		switch {
		case s == nil:
			err = fmt.Errorf("fake %s terminate %s: %w", c.cloud, ref.ID, providers.ErrNotFound)
		case alive(s):
			c.terminateLocked(s, c.now())
		}
	} else {
		err = fmt.Errorf("fake %s terminate %s: %w", c.cloud, ref.ID, err)
	}
	c.fire()
	return err
}

// List returns the instances carrying every tag of f in f.Regions (all
// regions when empty), terminated ones included while they stay listed. It
// costs one call per region and page of PageSize instances, as
// DescribeInstances does; an injected list error fails the whole call.
func (c *Compute) List(ctx context.Context, f providers.Filter) ([]providers.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.syncLocked()
	out, err := c.listLocked(f)
	c.fire()
	return out, err
}

func (c *Compute) listLocked(f providers.Filter) ([]providers.Instance, error) {
	regions := f.Regions
	// matched counts the listed instances per region (regions[i]): by the
	// instances' region index when every region is listed (the fleet's
	// listing, every pass), through a map of the filter's otherwise.
	all := len(regions) == 0
	if all {
		regions = c.regions
	}
	matched := make([]int, len(regions))
	var at map[string]int
	if !all {
		at = make(map[string]int, len(regions))
		for i, r := range regions {
			if _, dup := at[r]; !dup {
				at[r] = i
			}
		}
	}
	// The filter's tags as pairs: looked up in every instance's tags.
	want := make([][2]string, 0, len(f.Tags))
	for k, v := range f.Tags {
		want = append(want, [2]string{k, v})
	}
	var out []providers.Instance
	if c.reuse && cap(c.listed) >= len(c.insts) {
		out = c.listed[:0]
	} else {
		out = make([]providers.Instance, 0, len(c.insts))
	}
	// c.order is in creation order, which is id order (ids number the
	// instances in fixed-width hex), so out comes sorted by id.
	for _, s := range c.order {
		if s.deleted {
			continue
		}
		r := s.region
		if !all {
			var ok bool
			if r, ok = at[s.inst.Region]; !ok {
				continue
			}
		} else if r < 0 {
			continue
		}
		if len(want) == 1 {
			if !s.hasTag(want[0]) {
				continue
			}
		} else if !hasPairs(s.inst.Tags, want) {
			continue
		}
		if c.share {
			out = append(out, s.inst)
		} else {
			out = append(out, cloneInstance(s.inst))
		}
		matched[r]++
	}
	for i, r := range regions {
		n := matched[i]
		if !all {
			n = matched[at[r]] // (a region named twice: counted once, paged twice)
		}
		pages := max(1, (n+c.pageSize-1)/c.pageSize)
		for range pages {
			if err := c.call(APIListPage); err != nil {
				return nil, fmt.Errorf("fake %s list %s: %w", c.cloud, r, err)
			}
		}
	}
	if !sort.SliceIsSorted(out, func(i, j int) bool { return out[i].ID < out[j].ID }) {
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	}
	if c.reuse {
		c.listed = out
	}
	return out, nil
}

// hasPairs says whether have carries every key and value of want.
func hasPairs(have map[string]string, want [][2]string) bool {
	for _, kv := range want {
		if have[kv[0]] != kv[1] {
			return false
		}
	}
	return true
}

// --- knobs ---

// FailNext makes the next calls of kind fail with errs, one each, in order
// (e.g. providers.ErrThrottled, or a *providers.LaunchError).
func (c *Compute) FailNext(kind APIKind, errs ...error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext[kind] = append(c.failNext[kind], errs...)
}

// FailPool makes launches into pool k fail with err (ErrInsufficientCapacity,
// ErrQuotaExceeded, ...) until FailPool(k, nil).
func (c *Compute) FailPool(k providers.PoolKey, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		delete(c.poolErrs, k)
		return
	}
	c.poolErrs[k] = err
}

// LoseNextLaunchResponses makes the next n successful launches create their
// instance but return ErrLostResponse, as a launch does whose answer a
// connection reset ate.
func (c *Compute) LoseNextLaunchResponses(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loseNext += n
}

// SetTimeScale changes how fast trace time runs from now on; 0 freezes
// the traces at the current tick (capacity stops changing).
func (c *Compute) SetTimeScale(x float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.base += time.Duration(float64(now.Sub(c.start)) * c.tscale)
	c.start, c.tscale = now, max(x, 0)
}

// Calm ends a storm: spot capacity becomes unlimited and the traces stop
// driving it (a test's "the weather cleared").
func (c *Compute) Calm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calm = true
}

// SetQuota caps live instances (0: none).
func (c *Compute) SetQuota(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quota = n
}

// Preempt delivers a preemption notice to a running instance now, as the
// traces would; it terminates NoticeLead later. Unknown or terminated ids
// are ignored.
func (c *Compute) Preempt(id string) {
	c.mu.Lock()
	if s := c.insts[id]; s != nil && alive(s) && s.noticeAt.IsZero() {
		now := c.now()
		c.noticeLocked(s, now)
		x := Notice{Instance: cloneInstance(s.inst), Action: "terminate", At: now.Add(c.lead)}
		c.notices = append(c.notices, x)
		if fn := c.onNotice; fn != nil {
			c.queue = append(c.queue, func() { fn(x) })
		}
	}
	c.fire()
}

// Stop moves an instance to stopped (as a user or the cloud's maintenance
// would).
func (c *Compute) Stop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.insts[id]; s != nil && alive(s) {
		s.inst.State = providers.StateStopped
	}
}

// AddUntagged starts an instance the broker did not launch (no tags, or
// foreign ones), to check the fleet never touches it.
func (c *Compute) AddUntagged(region, zone, instanceType string, tags map[string]string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	id := fmt.Sprintf("%s-%08x", idPrefix(c.cloud), c.seq)
	c.addLocked(&simInstance{inst: providers.Instance{InstanceRef: providers.InstanceRef{Cloud: c.cloud, Region: region, Zone: zone, ID: id},
		InstanceType: instanceType, Capacity: pricing.OnDemand, State: providers.StateRunning, Tags: maps(tags), LaunchedAt: c.now()}})
	return id
}

// --- inspection ---

// Calls returns the API calls made so far, per kind.
func (c *Compute) Calls() map[APIKind]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[APIKind]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// ResetCalls zeroes the call counters.
func (c *Compute) ResetCalls() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.calls)
}

// Instances returns every listed instance (any tags, terminated included
// while listed), by id.
func (c *Compute) Instances() []providers.Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]providers.Instance, 0, len(c.insts))
	for _, s := range c.insts {
		out = append(out, cloneInstance(s.inst))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Noticed reports whether the instance has had a preemption notice.
func (c *Compute) Noticed(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.insts[id]
	return s != nil && !s.noticeAt.IsZero()
}

// Notices returns every notice delivered so far, oldest first.
func (c *Compute) Notices() []Notice {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.notices)
}

// UserData returns the user data an instance was launched with.
func (c *Compute) UserData(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.insts[id]; s != nil {
		return s.userData
	}
	return ""
}

// Token returns the client token an instance was launched with.
func (c *Compute) Token(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.insts[id]; s != nil {
		return s.token
	}
	return ""
}

// Describe is a one-line summary for test failures.
func (c *Compute) Describe() string {
	var b strings.Builder
	for _, i := range c.Instances() {
		fmt.Fprintf(&b, "%s %s %s %s %v\n", i.ID, i.Zone, i.Capacity, i.State, i.Tags)
	}
	return b.String()
}
