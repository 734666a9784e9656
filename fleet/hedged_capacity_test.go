package fleet

import (
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// TestHedgePoolCapacity: what a spot pool may hold for a service, step by
// step. A refusal for capacity while the pool runs k of the service's
// replicas, or while it runs none but the fleet's other workloads fill it,
// is its capacity (k, limited: no loss, still available); a refusal while
// the fleet runs nothing there, a preemption or a quota refusal make it
// unavailable as before; once the block is over the pool is probed with one
// replica more than it held, the limit grows with a probe that holds, and
// an hour after the last refusal's block it is forgotten.
func TestHedgePoolCapacity(t *testing.T) {
	const nominal = 64
	type step struct {
		at    time.Duration // from the start
		block string        // a block at this step: "capacity", "quota", "preempted"
		mine  int           // the service's live replicas in the pool
		other int           // the fleet's other instances in the pool
		c     int
		lim   bool
		avail bool
	}
	cases := []struct {
		name    string
		nominal int
		steps   []step
	}{
		{"never refused", nominal, []step{{0, "", 0, 0, nominal, false, true}, {time.Minute, "", 3, 0, nominal, false, true}}},
		{"refused holding two", nominal, []step{{0, "", 2, 0, nominal, false, true}, {time.Minute, "capacity", 2, 0, 2, true, true}, {2 * time.Minute, "", 2, 0, 2, true, true}}},
		{"refused holding one", nominal, []step{{0, "capacity", 1, 0, 1, true, true}}},
		{"refused holding nothing", nominal, []step{{0, "capacity", 0, 0, 0, false, false}, {3 * time.Minute, "", 0, 0, nominal, false, true}}},
		{"preempted, one left", nominal, []step{{0, "preempted", 1, 0, 1, false, false}, {3 * time.Minute, "", 1, 0, nominal, false, true}}},
		{"quota", nominal, []step{{0, "quota", 1, 0, 1, false, false}}},
		{"probed after the back-off", nominal, []step{
			{0, "capacity", 1, 0, 1, true, true},
			{3*time.Minute - time.Second, "", 1, 0, 1, true, true}, // still blocked
			{3 * time.Minute, "", 1, 0, 2, true, true},             // the probe: one more
			{4 * time.Minute, "", 2, 0, 3, true, true},             // it held: the limit grows
			{5 * time.Minute, "", 3, 0, 4, true, true},
		}},
		{"refused again at the probe", nominal, []step{
			{0, "capacity", 1, 0, 1, true, true},
			{3 * time.Minute, "", 1, 0, 2, true, true},
			{4 * time.Minute, "capacity", 1, 0, 1, true, true},
			{10 * time.Minute, "", 1, 0, 2, true, true}, // the doubled back-off (6 minutes) is over
		}},
		{"forgotten an hour after", nominal, []step{
			{0, "capacity", 1, 0, 1, true, true},
			{3*time.Minute + capacityMemory - time.Second, "", 1, 0, 2, true, true},
			{3*time.Minute + capacityMemory, "", 1, 0, nominal, false, true},
		}},
		{"preempted after a refusal", nominal, []step{
			{0, "capacity", 2, 0, 2, true, true},
			{time.Minute, "preempted", 1, 0, 1, false, false},
			{10 * time.Minute, "", 1, 0, nominal, false, true}, // the limit went with the loss
		}},
		{"the probe within the nominal capacity", 1, []step{{0, "capacity", 1, 0, 1, true, true}, {3 * time.Minute, "", 1, 0, 1, true, true}}},
		{"refused full of other workloads", nominal, []step{
			{0, "capacity", 0, 1, 0, true, true},       // no loss: the fleet's own instance fills it
			{3 * time.Minute, "", 0, 1, 1, true, true}, // the probe: one
			{4 * time.Minute, "capacity", 0, 1, 0, true, true},
		}},
		{"preempted beside other workloads", nominal, []step{{0, "preempted", 0, 2, 0, false, false}}},
	}
	k := providers.PoolKey{Cloud: pricing.AWS, Zone: "us-east-1a", InstanceType: "g4dn.xlarge", Capacity: pricing.Spot}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := &Unavailable{Backoff: 3 * time.Minute}
			hg := &hedge{keys: []providers.PoolKey{k}, caps: make([]learnedCap, 1), capAt: []int{0}}
			var m blockMemo // (one memo across the steps: it follows the blocks)
			for i, s := range c.steps {
				now := start.Add(s.at)
				if s.block != "" {
					u.Block(k, s.block, now)
				}
				got, lim, avail := hg.poolCapacity(0, &m, u.Gen(), c.nominal, s.mine, s.other, u, now)
				if got != s.c || lim != s.lim || avail != s.avail {
					t.Fatalf("step %d (+%s, block %q, %d held, %d of other workloads): capacity %d, limited %v, available %v; want %d, %v, %v",
						i, s.at, s.block, s.mine, s.other, got, lim, avail, s.c, s.lim, s.avail)
				}
			}
		})
	}
}

// TestHedgedSourceLearnsPoolCapacity: pools that hold few replicas refuse
// the next launch; the service keeps what runs there, trusts those pools
// (a refusal while it holds replicas there is no loss: before, each one
// was counted as the pool going away, and the policy distrusted pools
// that never lost a replica), covers the rest on demand, and uses capacity
// that returns. A pool that refuses while it holds nothing is unavailable.
func TestHedgedSourceLearnsPoolCapacity(t *testing.T) {
	// us-east-1b also runs the training job's spot instance, which the
	// fake world counts against the zone's limit.
	cases := []struct {
		name  string
		limit map[string]int
		down  []string
		raise map[string]int // new limits half way through
		spot  int            // spot replicas at the end
		od    int            // on-demand replicas at the end, at most
		avail map[string]bool
	}{
		{name: "one each", limit: map[string]int{"us-east-1a": 1, "us-east-1b": 2, "us-east-1c": 1}, spot: 3, od: 3,
			avail: map[string]bool{"us-east-1a": true, "us-east-1b": true, "us-east-1c": true}},
		{name: "two each", limit: map[string]int{"us-east-1a": 2, "us-east-1b": 3, "us-east-1c": 2}, spot: 6, od: 0,
			avail: map[string]bool{"us-east-1a": true, "us-east-1b": true, "us-east-1c": true}},
		{name: "one each and a zone without capacity", limit: map[string]int{"us-east-1b": 2, "us-east-1c": 1}, down: []string{"us-east-1a"},
			spot: 2, od: 4, avail: map[string]bool{"us-east-1a": false, "us-east-1b": true, "us-east-1c": true}},
		{name: "capacity returns", limit: map[string]int{"us-east-1a": 1, "us-east-1b": 2, "us-east-1c": 1},
			raise: map[string]int{"us-east-1a": 2, "us-east-1b": 3, "us-east-1c": 2}, spot: 6, od: 0,
			avail: map[string]bool{"us-east-1a": true, "us-east-1b": true, "us-east-1c": true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, h := newHedgeWorld(t, policy.SpotPrefer)
			w.limit = c.limit
			for _, z := range c.down {
				w.down[z] = true
			}
			w.step(h, 6*60, nil)
			if c.raise != nil {
				w.limit = c.raise
			}
			w.step(h, 6*60, nil)
			spot, spotReady, od, _ := w.count(h.ReadyDelay)
			chatSpot := spot - 1 // the training job's
			if chatSpot != c.spot || spotReady-1 != c.spot || od > c.od {
				t.Errorf("after 12 h: spot %d (%d ready), on-demand %d; want %d spot, all ready, at most %d on-demand",
					chatSpot, spotReady-1, od, c.spot, c.od)
			}
			if w.dropped > 0 {
				t.Errorf("%d running spot replicas were taken from the plan", w.dropped)
			}
			for z, want := range c.avail {
				p := h.tracker.Pool(poolName(providers.PoolKey{Cloud: pricing.AWS, Zone: z, InstanceType: "g4dn.xlarge", Capacity: pricing.Spot}), w.now)
				// Available: never seen lost in 12 h. Not: seen without
				// capacity most of the time.
				if want && (!p.Available || p.Run < 12*60) || !want && p.Frac >= 0.5 {
					t.Errorf("%s as the policy sees it: %+v; want available %v", z, p, want)
				}
			}
		})
	}
}

// TestOnDemandOfferFollowsBlocks: the on-demand offer from the catalog
// (no on-demand group in the plan) is the cheapest not blocked at each
// step, kept between steps while the unavailable cache is unchanged: the
// same as a hedge that looks every offer up again, when a block ends
// without any change to the cache, when a pool is blocked or cleared.
func TestOnDemandOfferFollowsBlocks(t *testing.T) {
	var offers []pricing.Offer
	for i, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		offers = append(offers, pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: z, InstanceType: "g4dn.xlarge", GPU: pricing.T4,
			GPUCount: 1, OnDemandPrice: 0.50 + 0.02*float64(i), SpotPrice: 0.16})
	}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cat := pricing.NewCatalog(offers, start, "test")
	pol := hedgePolicy(policy.SpotPrefer)
	w := &pol.Workloads[0]
	p := hedgePlan(4).Placements[0] // spot only: the catalog decides
	pool := func(z string) providers.PoolKey {
		return providers.PoolKey{Cloud: pricing.AWS, Zone: z, InstanceType: "g4dn.xlarge", Capacity: pricing.OnDemand}
	}
	u := &Unavailable{Backoff: 3 * time.Minute}
	steps := []struct {
		at           time.Duration
		block, clear string
		want         string // the offer's zone; "": none
	}{
		{0, "", "", "us-east-1a"},
		{time.Minute, "us-east-1a", "", "us-east-1b"},
		{2 * time.Minute, "", "", "us-east-1b"},
		{3*time.Minute + 59*time.Second, "", "", "us-east-1b"},
		{4 * time.Minute, "", "", "us-east-1a"}, // the block ended, the cache unchanged
		{5 * time.Minute, "us-east-1a", "", "us-east-1b"},
		{5 * time.Minute, "us-east-1b", "", "us-east-1c"},
		{5 * time.Minute, "us-east-1c", "", ""},
		{6 * time.Minute, "", "us-east-1b", "us-east-1b"},
		{20 * time.Minute, "", "", "us-east-1a"},
	}
	hg := &hedge{}
	for i, s := range steps {
		now := start.Add(s.at)
		if s.block != "" {
			u.Block(pool(s.block), "capacity", now)
		}
		if s.clear != "" {
			u.Clear(pool(s.clear), now)
		}
		got := hg.onDemandOffer(pol, cat, w, &p, u, u.Gen(), now)
		fresh := new(hedge).onDemandOffer(pol, cat, w, &p, u, u.Gen(), now)
		zone := func(o *pricing.Offer) string {
			if o == nil {
				return ""
			}
			return o.Zone
		}
		if zone(got) != s.want || zone(fresh) != s.want {
			t.Fatalf("step %d (+%s): offer in %q, looked up afresh %q; want %q", i, s.at, zone(got), zone(fresh), s.want)
		}
	}
}
