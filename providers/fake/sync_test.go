package fake

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// TestSyncKeepsTheCloudsRules drives the fake with random launches,
// terminations, preemptions, stops and clock moves over flapping traces,
// and after every step checks what the incremental sync must keep true,
// recomputed from scratch: pending instances run once their latency
// passed, noticed ones end once their lead passed, terminated ones stay
// listed exactly TerminatedTTL, no spot pool holds more un-noticed live
// instances than its traced capacity, each lifecycle hook fires once per
// instance, and List answers every listed instance in id order.
func TestSyncKeepsTheCloudsRules(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		clk := newClock()
		offers := []pricing.Offer{p3In("us-east-1", "us-east-1a"), p3In("us-east-1", "us-east-1b"), p3In("us-west-2", "us-west-2a")}
		traces := []Trace{
			{Name: "flap", Gap: 90 * time.Second, Avail: []int{3, 0, 2, 5, 1, 0, 4}},
			{Name: "steady", Gap: 5 * time.Minute, Avail: []int{2, 2, 3}},
		}
		const latency, lead, ttl = 30 * time.Second, 2 * time.Minute, 10 * time.Minute
		c := NewCompute(ComputeConfig{Offers: offers, Now: clk.Now, Traces: traces, Seed: seed, SpotScale: 2,
			LaunchLatency: latency, NoticeLead: lead, TerminatedTTL: ttl, PageSize: 3})
		running, gone := map[string]int{}, map[string]time.Time{}
		c.SetLifecycle(Lifecycle{
			OnRunning: func(in providers.Instance, _ string) { running[in.ID]++ },
			OnGone: func(in providers.Instance) {
				if _, dup := gone[in.ID]; dup {
					t.Errorf("seed %d: %s gone twice", seed, in.ID)
				}
				gone[in.ID] = clk.Now()
			},
		})
		rng := rand.New(rand.NewPCG(seed, 2))
		var ids []string
		for step := 0; step < 600; step++ {
			switch r := rng.IntN(10); {
			case r < 4:
				ct := pricing.Spot
				if rng.IntN(4) == 0 {
					ct = pricing.OnDemand
				}
				o := offers[rng.IntN(len(offers))]
				in, err := c.Launch(t.Context(), launchReq("tok-"+time.Duration(step).String(), ct, o))
				if err == nil {
					ids = append(ids, in.ID)
				}
			case r < 5 && len(ids) > 0:
				id := ids[rng.IntN(len(ids))]
				_ = c.Terminate(t.Context(), providers.InstanceRef{Cloud: pricing.AWS, ID: id})
			case r < 6 && len(ids) > 0:
				c.Preempt(ids[rng.IntN(len(ids))])
			case r < 7 && len(ids) > 0:
				c.Stop(ids[rng.IntN(len(ids))])
			default:
				clk.Add(time.Duration(rng.IntN(150)) * time.Second)
			}
			c.Sync()
			checkSynced(t, seed, step, c, clk.Now(), latency, ttl, running, gone)
		}
	}
}

func checkSynced(t *testing.T, seed uint64, step int, c *Compute, now time.Time, latency, ttl time.Duration,
	running map[string]int, gone map[string]time.Time) {
	t.Helper()
	listed := c.Instances()
	isListed := map[string]providers.Instance{}
	live := map[providers.PoolKey]int{}
	for _, in := range listed {
		isListed[in.ID] = in
		switch in.State {
		case providers.StatePending:
			if !now.Before(in.LaunchedAt.Add(latency)) {
				t.Fatalf("seed %d step %d: %s still pending %s after its launch", seed, step, in.ID, now.Sub(in.LaunchedAt))
			}
		case providers.StateTerminated:
			if g, ok := gone[in.ID]; !ok || now.Sub(g) > ttl {
				t.Fatalf("seed %d step %d: %s terminated at %v still listed at %v", seed, step, in.ID, g, now)
			}
		}
		if in.State == providers.StateRunning && running[in.ID] != 1 {
			// Every running instance here ran from pending, and said so
			// once.
			t.Fatalf("seed %d step %d: %s running, OnRunning called %d times", seed, step, in.ID, running[in.ID])
		}
		if in.State != providers.StateTerminated && !c.Noticed(in.ID) && in.Capacity == pricing.Spot {
			live[poolOf(in)]++
		}
	}
	for id, g := range gone {
		if _, ok := isListed[id]; !ok && now.Sub(g) <= ttl {
			t.Fatalf("seed %d step %d: %s terminated %s ago is no longer listed", seed, step, id, now.Sub(g))
		}
	}
	for _, n := range c.Notices() {
		if in, ok := isListed[n.Instance.ID]; ok && in.State != providers.StateTerminated && !now.Before(n.At) {
			t.Fatalf("seed %d step %d: %s noticed to end at %v still %s at %v", seed, step, in.ID, n.At, in.State, now)
		}
	}
	for k, n := range live {
		if capN := c.Capacity(k); capN >= 0 && n > capN {
			t.Fatalf("seed %d step %d: pool %v holds %d un-noticed instances, capacity %d", seed, step, k, n, capN)
		}
	}
	got, err := c.List(t.Context(), providers.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(listed) {
		t.Fatalf("seed %d step %d: List gave %d instances, %d listed", seed, step, len(got), len(listed))
	}
	for i := range got {
		if got[i].ID != listed[i].ID || got[i].State != listed[i].State {
			t.Fatalf("seed %d step %d: List[%d] = %s %s, want %s %s", seed, step, i, got[i].ID, got[i].State, listed[i].ID, listed[i].State)
		}
	}
}
