package fleet

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// hedgeWorld is a fake fleet for HedgedSource: it applies each plan the
// way the reconciler does (a desired slot with nothing live launches in its
// pool, a live slot stays where its instance is, a slot that left the plan
// goes), spot pools fail and return on command (a failure preempts the
// pool's slots and blocks it, as the reconciler does), and replicas become
// ready ReadyDelay after they start running (no agents heartbeat).
type hedgeWorld struct {
	t     *testing.T
	now   time.Time
	u     *Unavailable
	slots map[string]*store.SlotRecord
	down  map[string]bool // spot pools without capacity, by zone
	// limit caps the spot replicas a zone holds (absent: no cap); a launch
	// beyond it is refused for capacity.
	limit map[string]int
	// dropped counts running spot replicas the plan took away.
	dropped int
	// relabelled counts live slots whose desired pool differed from the
	// pool their instance runs in (identities not kept).
	relabelled int
}

func (w *hedgeWorld) Load(context.Context) (store.FleetState, error) {
	var st store.FleetState
	for _, s := range w.slots {
		st.Slots = append(st.Slots, *s)
	}
	sort.Slice(st.Slots, func(i, j int) bool { return st.Slots[i].ID < st.Slots[j].ID })
	return st, nil
}

func (w *hedgeWorld) apply(plan *optimizer.Plan) {
	want := map[string]Spec{}
	for _, s := range Desired(plan) {
		if _, dup := want[s.ID]; dup {
			w.t.Fatalf("slot %s twice in the plan", s.ID)
		}
		want[s.ID] = s
	}
	for id, s := range w.slots {
		if _, ok := want[id]; !ok {
			if State(s.State) == Running && s.Capacity == string(pricing.Spot) {
				w.dropped++
			}
			delete(w.slots, id)
		}
	}
	for id, spec := range want {
		s := w.slots[id]
		if s != nil && live(s) {
			if slotPool(s) != PoolOf(spec.Offer, spec.Capacity) {
				w.relabelled++
			}
			continue
		}
		if spec.Capacity == pricing.Spot && (w.down[spec.Offer.Zone] || w.full(spec.Offer.Zone)) {
			// Refused for capacity: the reconciler blocks the pool.
			w.u.Block(PoolOf(spec.Offer, spec.Capacity), "capacity", w.now)
			w.slots[id] = &store.SlotRecord{ID: id, Workload: spec.Workload, Index: spec.Index, State: string(Pending)}
			continue
		}
		w.slots[id] = &store.SlotRecord{ID: id, Workload: spec.Workload, Index: spec.Index, Cloud: string(spec.Offer.Cloud),
			Region: spec.Offer.Region, Zone: spec.Offer.Zone, InstanceType: spec.Offer.InstanceType, Capacity: string(spec.Capacity),
			State: string(Running), InstanceID: "i-" + id + "-" + w.now.Format("150405"), LaunchedAt: w.now, RunningAt: w.now}
	}
}

// full says whether zone holds as many live spot replicas as its limit.
func (w *hedgeWorld) full(zone string) bool {
	n, ok := w.limit[zone]
	if !ok {
		return false
	}
	for _, s := range w.slots {
		if s.Zone == zone && s.Capacity == string(pricing.Spot) && live(s) {
			n--
		}
	}
	return n <= 0
}

// fail takes a spot zone's capacity away: its replicas are preempted and
// the pool blocked.
func (w *hedgeWorld) fail(zone string) {
	w.down[zone] = true
	for _, s := range w.slots {
		if s.Zone == zone && s.Capacity == string(pricing.Spot) && live(s) {
			w.u.Block(slotPool(s), "preempted", w.now)
			s.State = string(Pending)
		}
	}
}

// count is the live and ready replicas by capacity.
func (w *hedgeWorld) count(ready time.Duration) (spot, spotReady, od, odReady int) {
	for _, s := range w.slots {
		if !live(s) {
			continue
		}
		r := w.now.Sub(s.RunningAt) >= ready
		if s.Capacity == string(pricing.Spot) {
			spot++
			if r {
				spotReady++
			}
		} else {
			od++
			if r {
				odReady++
			}
		}
	}
	return
}

func hedgeCatalog() *pricing.Catalog {
	var offers []pricing.Offer
	for i, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		offers = append(offers, pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: z, InstanceType: "g4dn.xlarge", GPU: pricing.T4,
			GPUCount: 1, VCPUs: 4, MemoryGiB: 16, OnDemandPrice: 0.526, SpotPrice: 0.16 + 0.01*float64(i)})
	}
	// Another region the workload's limits rule out, and another GPU.
	offers = append(offers,
		pricing.Offer{Cloud: pricing.AWS, Region: "eu-west-1", Zone: "eu-west-1a", InstanceType: "g4dn.xlarge", GPU: pricing.T4,
			GPUCount: 1, VCPUs: 4, MemoryGiB: 16, OnDemandPrice: 0.587, SpotPrice: 0.10},
		pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "g5.xlarge", GPU: pricing.A10G,
			GPUCount: 1, VCPUs: 4, MemoryGiB: 16, OnDemandPrice: 1.006, SpotPrice: 0.30})
	return pricing.NewCatalog(offers, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "test")
}

func hedgePolicy(spot policy.SpotPolicy) *policy.Policy {
	return &policy.Policy{Workloads: []policy.Workload{
		{Name: "chat", Kind: policy.Inference, Spot: spot, GPU: policy.GPUNeed{Models: []pricing.GPUModel{pricing.T4}, Count: 1},
			Replicas: policy.Replicas{Min: 4, Max: 8}, Limits: policy.Limits{Regions: []string{"us-east-1"}}},
		{Name: "train", Kind: policy.Training, Spot: spot},
	}}
}

func hedgePlan(target int) *optimizer.Plan {
	return &optimizer.Plan{Placements: []optimizer.Placement{
		{Workload: "chat", Kind: "inference", Instances: target, Capacity: pricing.Spot, Groups: []optimizer.Group{{Cloud: pricing.AWS,
			Region: "us-east-1", Zone: "us-east-1a", InstanceType: "g4dn.xlarge", GPU: pricing.T4, GPUsPerInstance: 1, Instances: target,
			Capacity: pricing.Spot, PricePerHour: 0.16}}},
		{Workload: "train", Kind: "training", Instances: 1, Groups: []optimizer.Group{{Cloud: pricing.AWS, Region: "us-east-1",
			Zone: "us-east-1b", InstanceType: "p3.2xlarge", Instances: 1, Capacity: pricing.Spot}}},
	}}
}

func newHedgeWorld(t *testing.T, spot policy.SpotPolicy) (*hedgeWorld, *HedgedSource) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	w := &hedgeWorld{t: t, now: start, u: &Unavailable{Backoff: 3 * time.Minute}, slots: map[string]*store.SlotRecord{}, down: map[string]bool{}}
	pol := hedgePolicy(spot)
	cat := hedgeCatalog()
	h := &HedgedSource{Inner: fixedPlan{hedgePlan(4)}, Catalog: func() *pricing.Catalog { return cat }, Policy: func() *policy.Policy { return pol },
		Fleet: w, Now: func() time.Time { return w.now }, Tick: time.Minute, ReadyDelay: 10 * time.Minute}
	return w, h
}

// step runs one pass a minute for n minutes and returns the last plan.
func (w *hedgeWorld) step(h *HedgedSource, n int, each func(p optimizer.Placement)) optimizer.Placement {
	var last optimizer.Placement
	for range n {
		w.now = w.now.Add(time.Minute)
		plan, err := h.Plan(context.Background(), w.u)
		if err != nil {
			w.t.Fatal(err)
		}
		w.apply(plan)
		last = plan.Placements[0]
		if each != nil {
			each(last)
		}
	}
	return last
}

func capacities(p optimizer.Placement) (spot, od int, zones map[string]int) {
	zones = map[string]int{}
	for _, g := range p.Groups {
		if g.Capacity == pricing.Spot {
			spot += g.Instances
			zones[g.Zone] += g.Instances
		} else {
			od += g.Instances
		}
	}
	return
}

// TestHedgedSourceFallbackAndReturn: a service spreads over the three
// zones its limits allow; all three fail at once and on-demand covers the
// target; when they return, spot comes back and on-demand is released only
// once spot is ready (make before break); no live replica ever changes
// pool under its slot. A fresh service starts on demand: the policy trusts
// a pool only once it has held for a while (about 2.3 hours of unblocked
// ticks with these settings), as in the simulator.
func TestHedgedSourceFallbackAndReturn(t *testing.T) {
	w, h := newHedgeWorld(t, policy.SpotPrefer)
	p := w.step(h, 240, nil)
	spot, od, zones := capacities(p)
	if len(zones) != 3 || spot < 4 {
		t.Fatalf("calm: want spot over the 3 us-east-1 zones covering 4, got %+v od %d", zones, od)
	}
	if _, bad := zones["eu-west-1a"]; bad {
		t.Fatal("spread into a region the limits rule out")
	}
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		w.fail(z)
	}
	// The pass right after the storm asks on-demand for the whole target.
	p = w.step(h, 1, nil)
	if spot, od, _ := capacities(p); od < 4 {
		t.Fatalf("storm: on-demand %d (spot %d); want the target on demand", od, spot)
	}
	// While the pools stay down (they refuse every launch), on-demand
	// carries the service once ready.
	w.step(h, 30, nil)
	if _, _, _, odReady := w.count(h.ReadyDelay); odReady < 4 {
		t.Fatalf("30 min into the storm only %d on-demand ready", odReady)
	}
	// Weather clears: blocks run out, launches succeed again. Having seen
	// the three zones go together, the policy waits until they have held a
	// while (about 2.5 hours here) before it trusts spot again.
	clear(w.down)
	p = w.step(h, 240, func(p optimizer.Placement) {
		_, spotReady, _, odReady := w.count(h.ReadyDelay)
		if spotReady+odReady < 4 {
			t.Fatalf("%s: only %d spot + %d on-demand ready after the pools returned", w.now, spotReady, odReady)
		}
	})
	spot, od, zones = capacities(p)
	if spot < 4 || len(zones) < 2 || od > 1 {
		t.Fatalf("back to spot: spot %d over %v, on-demand %d", spot, zones, od)
	}
	if w.relabelled != 0 {
		t.Fatalf("%d live slots were given another pool", w.relabelled)
	}
	if d := h.Decisions()["chat"]; d.Policy != "adaptive" || d.Target != 4 {
		t.Fatalf("decision %+v", d)
	}
}

// TestHedgedSourceEarlyFallback: zones fail one after another, each a
// ready delay apart; the on-demand fallback starts at the first loss, so
// by the time the last zone goes it has been running a ready delay.
func TestHedgedSourceEarlyFallback(t *testing.T) {
	w, h := newHedgeWorld(t, policy.SpotPrefer)
	w.step(h, 240, nil)
	var firstOD time.Time
	watch := func(p optimizer.Placement) {
		if _, od, _ := capacities(p); od > 0 && firstOD.IsZero() {
			firstOD = w.now
		}
	}
	w.step(h, 1, watch)
	if !firstOD.IsZero() {
		t.Fatalf("calm spot pools, yet on demand at %s", firstOD)
	}
	first := w.now
	w.fail("us-east-1a")
	w.step(h, 10, watch)
	w.fail("us-east-1b")
	w.step(h, 10, watch)
	w.fail("us-east-1c")
	last := w.now
	if firstOD.IsZero() || last.Sub(firstOD) < h.ReadyDelay {
		t.Fatalf("first on-demand at %v, first loss %v, last loss %v: not started a ready delay before spot ran out", firstOD, first, last)
	}
	_, _, _, odReady := w.count(h.ReadyDelay)
	if odReady == 0 {
		t.Fatal("no on-demand replica ready when the last zone went")
	}
}

// TestHedgedSourceLeavesOthers: spot never and training are untouched;
// spot only never falls back to on-demand.
func TestHedgedSourceLeavesOthers(t *testing.T) {
	w, h := newHedgeWorld(t, policy.SpotNever)
	inner := hedgePlan(4)
	h.Inner = fixedPlan{inner}
	plan, err := h.Plan(context.Background(), w.u)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plan, inner) {
		t.Fatalf("spot never: plan changed\n%+v", plan.Placements[0])
	}
	w, h = newHedgeWorld(t, policy.SpotOnly)
	w.step(h, 30, nil)
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		w.fail(z)
	}
	w.step(h, 5, func(p optimizer.Placement) {
		if _, od, _ := capacities(p); od > 0 {
			t.Fatalf("spot only: %d on-demand", od)
		}
	})
	// A fresh spot-only service, whose policy would still hedge on
	// demand, is spread over the spot pools instead.
	w, h = newHedgeWorld(t, policy.SpotOnly)
	p := w.step(h, 1, nil)
	if spot, od, zones := capacities(p); od != 0 || spot < 4 || len(zones) != 3 {
		t.Fatalf("fresh spot only: spot %d over %v, on-demand %d", spot, zones, od)
	}
	if plan, _ := h.Plan(context.Background(), w.u); !reflect.DeepEqual(plan.Placements[1], inner.Placements[1]) {
		t.Fatalf("training placement changed: %+v", plan.Placements[1])
	}
}

// TestPinSlots: replicas keep their slot while they stay in their pool;
// new ones take free numbers; a slot with nothing live is reused.
func TestPinSlots(t *testing.T) {
	spotA := optimizer.Group{Cloud: pricing.AWS, Zone: "a", InstanceType: "t", Capacity: pricing.Spot}
	spotB := optimizer.Group{Cloud: pricing.AWS, Zone: "b", InstanceType: "t", Capacity: pricing.Spot}
	od := optimizer.Group{Cloud: pricing.AWS, Zone: "a", InstanceType: "t", Capacity: pricing.OnDemand}
	slot := func(i int, zone string, ct pricing.CapacityType, st State) *store.SlotRecord {
		return &store.SlotRecord{ID: SlotID("w", i), Index: i, Cloud: "aws", Zone: zone, InstanceType: "t", Capacity: string(ct), State: string(st)}
	}
	with := func(g optimizer.Group, n int) optimizer.Group { g.Instances = n; return g }
	cases := []struct {
		name   string
		groups []optimizer.Group
		slots  []*store.SlotRecord
		want   [][]int
	}{
		{"fresh", []optimizer.Group{with(spotA, 2), with(od, 1)}, nil, [][]int{{0, 1}, {2}}},
		{"on-demand goes, spot stays",
			[]optimizer.Group{with(spotB, 2)},
			[]*store.SlotRecord{slot(0, "a", pricing.OnDemand, Running), slot(1, "b", pricing.Spot, Running), slot(2, "b", pricing.Spot, Booting)},
			[][]int{{1, 2}}},
		{"fallback added beside running spot",
			[]optimizer.Group{with(spotA, 1), with(od, 2)},
			[]*store.SlotRecord{slot(0, "a", pricing.Spot, Running), slot(1, "b", pricing.Spot, Draining), slot(2, "b", pricing.Spot, Running)},
			[][]int{{0}, {1, 3}}},
		{"gone slot number reused", []optimizer.Group{with(spotA, 2)},
			[]*store.SlotRecord{slot(0, "a", pricing.Spot, Running), slot(1, "b", pricing.Spot, Gone)}, [][]int{{0, 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Told each slot's group (as hedgePlacement does, from the
			// zone observePools found it in), the same numbers.
			told := cloneGroups(c.groups)
			mine := slices.Clone(c.slots)
			slices.SortFunc(mine, bySlotIndex)
			match := make([]int, len(mine))
			for i, s := range mine {
				match[i] = slices.IndexFunc(told, func(g optimizer.Group) bool { return live(s) && sameGroupPool(g, slotPool(s)) })
			}
			for g := range told {
				told[g].Slots = nil
			}
			pinSlotsIn(told, mine, match, new(pinScratch))
			pinSlots(c.groups, c.slots)
			var got, gotTold [][]int
			for g := range c.groups {
				got, gotTold = append(got, c.groups[g].Slots), append(gotTold, told[g].Slots)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			if !reflect.DeepEqual(gotTold, c.want) {
				t.Fatalf("told the slots' groups: got %v, want %v", gotTold, c.want)
			}
			// Desired numbers the slots as pinned.
			plan := &optimizer.Plan{Placements: []optimizer.Placement{{Workload: "w", Groups: c.groups}}}
			var ids, want []string
			for _, s := range Desired(plan) {
				ids = append(ids, s.ID)
			}
			for _, g := range c.want {
				for _, i := range g {
					want = append(want, SlotID("w", i))
				}
			}
			if !reflect.DeepEqual(ids, want) {
				t.Fatalf("Desired: %v, want %v", ids, want)
			}
		})
	}
}

var _ FleetReader = (*hedgeWorld)(nil)

// BenchmarkHedgedPlan is one pass of the hedging stage over 50 services
// of 20 replicas each (1,000 slots, all running) on three spot pools: the
// stage's own cost per reconcile pass, the fleet state read from memory.
func BenchmarkHedgedPlan(b *testing.B) {
	const services, replicas = 50, 20
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	w := &hedgeWorld{now: start, u: &Unavailable{}, slots: map[string]*store.SlotRecord{}, down: map[string]bool{}}
	pol := &policy.Policy{}
	plan := &optimizer.Plan{}
	for i := range services {
		name := fmt.Sprintf("svc%02d", i)
		wl := hedgePolicy(policy.SpotPrefer).Workloads[0]
		wl.Name = name
		pol.Workloads = append(pol.Workloads, wl)
		p := hedgePlan(replicas).Placements[0]
		p.Workload = name
		plan.Placements = append(plan.Placements, p)
	}
	cat := hedgeCatalog()
	h := &HedgedSource{Inner: fixedPlan{plan}, Catalog: func() *pricing.Catalog { return cat }, Policy: func() *policy.Policy { return pol },
		Fleet: w, Now: func() time.Time { return w.now }}
	ctx := context.Background()
	out, err := h.Plan(ctx, w.u)
	if err != nil {
		b.Fatal(err)
	}
	w.apply(out)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.now = w.now.Add(time.Minute) // every pass a tick boundary
		if _, err := h.Plan(ctx, w.u); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSpotPoolsSpread: the cheapest pools within the limits, running ones
// first, and as many clouds as spread.min_clouds asks even when dearer.
func TestSpotPoolsSpread(t *testing.T) {
	offers := hedgeCatalog().Offers()
	offers = append(offers, pricing.Offer{Cloud: pricing.GCP, Region: "us-east4", Zone: "us-east4-a", InstanceType: "n1-standard-4+t4",
		GPU: pricing.T4, GPUCount: 1, OnDemandPrice: 0.54, SpotPrice: 0.25})
	cat := pricing.NewCatalog(offers, time.Now(), "test")
	pol := hedgePolicy(policy.SpotPrefer)
	w := pol.Workloads[0]
	w.Limits = policy.Limits{Regions: []string{"us-east*"}}
	p := hedgePlan(4).Placements[0]
	zones := func(os []pricing.Offer) []string {
		var z []string
		for _, o := range os {
			z = append(z, o.Zone)
		}
		return z
	}
	cases := []struct {
		name      string
		minClouds int
		running   string
		want      []string
	}{
		{"cheapest", 0, "", []string{"us-east-1a", "us-east-1b"}},
		{"running first", 0, "us-east-1c", []string{"us-east-1c", "us-east-1a"}},
		{"two clouds", 2, "", []string{"us-east-1a", "us-east4-a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w.Spread.MinClouds = c.minClouds
			var mine []*store.SlotRecord
			if c.running != "" {
				mine = append(mine, &store.SlotRecord{Workload: "chat", Cloud: "aws", Zone: c.running, InstanceType: "g4dn.xlarge",
					GPU: "T4", Capacity: "spot", State: string(Running)})
			}
			if got := zones(spotPools(pol, cat, w, p, mine, 2)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestHedgedSourceForgetsRemovedServices: a service that leaves the policy
// takes its hedge and its decision with it; one that stays keeps them.
func TestHedgedSourceForgetsRemovedServices(t *testing.T) {
	w, h := newHedgeWorld(t, policy.SpotPrefer)
	w.step(h, 2, nil)
	if _, ok := h.Decisions()["chat"]; !ok {
		t.Fatal("no decision for chat while it is in the policy")
	}
	pol := hedgePolicy(policy.SpotPrefer)
	pol.Workloads = pol.Workloads[1:] // chat leaves
	h.Policy = func() *policy.Policy { return pol }
	w.now = w.now.Add(time.Minute)
	if _, err := h.Plan(context.Background(), w.u); err != nil {
		t.Fatal(err)
	}
	if d, ok := h.Decisions()["chat"]; ok {
		t.Fatalf("chat left the policy but its decision stays: %+v", d)
	}
}

// TestHedgedSourceNewLeaderKeepsSpot: a new leader starts with empty stage
// state over a fleet whose spot replicas have run for a day. The pools they
// run in vouch for themselves (LiveTracker.Seed), so the service stays on
// spot; without that the new leader distrusted every pool and ran the
// target on-demand for two hours, dropping five of six spot replicas.
func TestHedgedSourceNewLeaderKeepsSpot(t *testing.T) {
	w, h := newHedgeWorld(t, policy.SpotPrefer)
	p := w.step(h, 30*60, nil)
	if spot, od, _ := capacities(p); spot < 4 || od != 0 {
		t.Fatalf("after 30 h: spot %d, on-demand %d; want the service on spot", spot, od)
	}
	next := &HedgedSource{Inner: h.Inner, Catalog: h.Catalog, Policy: h.Policy, Fleet: w, Now: h.Now, Tick: h.Tick, ReadyDelay: h.ReadyDelay}
	w.step(next, 180, func(p optimizer.Placement) {
		if spot, od, zones := capacities(p); spot < 4 || od != 0 || len(zones) != 3 {
			t.Fatalf("%s, new leader: spot %d over %v, on-demand %d; want the spot replicas kept", w.now, spot, zones, od)
		}
	})
}

// TestHedgedSourceKeepsReplicasInFullPools: pools that hold two replicas
// each refuse the third launch and get blocked; the replicas already running
// there must stay (a blocked pool still holds what runs in it). Before, a
// blocked pool counted as holding nothing: the plan dropped its running
// replicas, went on-demand, and tried spot again hours later, over and over.
func TestHedgedSourceKeepsReplicasInFullPools(t *testing.T) {
	w, h := newHedgeWorld(t, policy.SpotPrefer)
	w.limit = map[string]int{"us-east-1a": 2, "us-east-1b": 2, "us-east-1c": 2}
	w.step(h, 12*60, nil)
	spot, spotReady, od, _ := w.count(h.ReadyDelay)
	if spot != 6 || spotReady != 6 || od != 0 {
		t.Errorf("after 12 h: spot %d (%d ready), on-demand %d; want the 6 spot replicas the pools hold and no on-demand", spot, spotReady, od)
	}
	if w.dropped > 0 {
		t.Errorf("%d running spot replicas were dropped from the plan in 12 h", w.dropped)
	}
}

// The hedging stage hands out a service's last groups again when the
// groups it builds are equal to them: equalGroups must tell apart groups
// that differ in any field of optimizer.Group, slots included.
func TestEqualGroupsComparesEveryField(t *testing.T) {
	base := optimizer.Group{Slots: []int{0, 1}}
	typ := reflect.TypeFor[optimizer.Group]()
	for i := range typ.NumField() {
		g := base
		g.Slots = slices.Clone(base.Slots)
		f := reflect.ValueOf(&g).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Int:
			f.SetInt(7)
		case reflect.Float64:
			f.SetFloat(1.5)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]int{0, 2}))
		default:
			t.Fatalf("optimizer.Group.%s is a %s: teach equalGroups and this test to compare it", typ.Field(i).Name, f.Kind())
		}
		if equalGroups([]optimizer.Group{base}, []optimizer.Group{g}) {
			t.Errorf("groups differing in %s compare equal", typ.Field(i).Name)
		}
	}
	same := cloneGroups([]optimizer.Group{base})
	if !equalGroups([]optimizer.Group{base}, same) || equalGroups([]optimizer.Group{base}, nil) {
		t.Error("equal groups compare unequal, or groups compare equal to none")
	}
	if &same[0].Slots[0] == &base.Slots[0] {
		t.Error("cloneGroups shares the slots")
	}
}
