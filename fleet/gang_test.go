package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/fake"
)

// movedTo is the plan with every group of the job in zone (a re-plan after
// a pool block moves a whole job).
func movedTo(t *testing.T, plan *optimizer.Plan, zone string) *optimizer.Plan {
	t.Helper()
	out := *plan
	out.Placements = append([]optimizer.Placement(nil), plan.Placements...)
	for i := range out.Placements {
		p := &out.Placements[i]
		p.Groups = append([]optimizer.Group(nil), p.Groups...)
		for j := range p.Groups {
			p.Groups[j].Zone = zone
		}
		p.Zone = zone
	}
	return &out
}

// A job on several instances works only with all of them up in one pool
// (docs/plan.md). testPolicy's job runs on two 1-GPU instances.
func TestGangFollowsItsPlan(t *testing.T) {
	e := newEnv(t, testPolicy)
	for range 3 {
		e.step(40 * time.Second)
	}
	up := func() map[string]string {
		zones := map[string]string{}
		for id, s := range e.slots() {
			if State(s.State) == Running || State(s.State) == Booting {
				zones[id] = s.Zone
			}
		}
		return zones
	}
	if z := up(); len(z) != 2 || z["train/0"] != "us-east-1a" || z["train/1"] != "us-east-1a" {
		t.Fatalf("the job's slots at the start: %v, want both in us-east-1a", z)
	}

	// A complete gang stays where it runs when the plan moves on: only
	// the training stage's Move moves a running job.
	e.r.Plans = staticPlan{plan: movedTo(t, planOf(t, testPolicy), "us-east-1b")}
	for range 3 {
		e.step(40 * time.Second)
	}
	if z := up(); z["train/0"] != "us-east-1a" || z["train/1"] != "us-east-1a" {
		t.Fatalf("a complete job moved without a Move: %v", z)
	}

	// One instance lost: its replacement goes where the plan says, and the
	// one left behind follows instead of idling in the old pool.
	if err := e.cloud.Terminate(context.Background(), providers.InstanceRef{ID: e.slots()["train/1"].InstanceID, Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		e.step(40 * time.Second)
		e.checkNoDuplicates()
	}
	if z := up(); z["train/0"] != "us-east-1b" || z["train/1"] != "us-east-1b" {
		t.Fatalf("after losing one instance the job runs in %v, want both in us-east-1b", z)
	}
	found := false
	for _, ev := range e.events("fleet.slot") {
		found = found || strings.Contains(ev.Message, "a multi-instance job runs in one pool")
	}
	if !found {
		t.Error("no slot event says why train/0 moved")
	}
}

// A multi-instance job's slots get no runner-up pool of their own: one
// launched there would split the job. A single-instance job keeps it.
func TestDesiredGangHasNoAlternatives(t *testing.T) {
	plan := planOf(t, testPolicy)
	rp := optimizer.RunnerUp{Cloud: plan.Placements[0].Cloud, Capacity: plan.Placements[0].Capacity, Region: "us-east-1", Zone: "us-east-1b",
		InstanceType: "p3.2xlarge", GPU: plan.Placements[0].Groups[0].GPU}
	plan.Placements[0].RunnerUp = &rp
	for _, s := range Desired(plan) {
		if len(s.Alternatives) != 0 {
			t.Errorf("gang slot %s has alternatives %+v", s.ID, s.Alternatives)
		}
	}
	single := *plan
	single.Placements = append([]optimizer.Placement(nil), plan.Placements...)
	p := &single.Placements[0]
	p.Groups = append([]optimizer.Group(nil), p.Groups...)
	p.Groups[0].Instances, p.Instances = 1, 1
	specs := Desired(&single)
	if len(specs) != 1 || len(specs[0].Alternatives) != 1 || specs[0].Alternatives[0].Zone != "us-east-1b" {
		t.Errorf("single-instance job: %+v, want the runner-up as its alternative", specs)
	}
}

// A pool that refuses a job's second instance beside its first holds one:
// the job is not planned there again for a while, even once the block
// runs out (it went from pool to pool each time before).
func TestGangRefusalLimitsThePool(t *testing.T) {
	e := newEnv(t, testPolicy, func(cc *fake.ComputeConfig, _ *Options) { cc.SpotScale = 1 })
	e.pass()
	k := providers.PoolKey{Cloud: pricing.AWS, Zone: "us-east-1a", InstanceType: "p3.2xlarge", Capacity: pricing.Spot}
	if got := e.r.Unavailable.LimitOf(k, e.clk.Now()); got != 1 {
		t.Fatalf("us-east-1a held one of the job's two instances and refused the second: limit %d, want 1", got)
	}
	st, err := (&Service{Store: e.fleet, Reconciler: e.r, Now: e.clk.Now}).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Limited) == 0 || st.Limited[0].Pool != k || st.Limited[0].Instances != 1 || !st.Limited[0].Until.After(e.clk.Now()) {
		t.Errorf("fleet status limited pools: %+v, want us-east-1a at 1", st.Limited)
	}
	// Past the block, not the limit: no plan puts the job in 1a.
	for range 4 {
		e.step(5 * time.Minute)
	}
	if e.r.Unavailable.Blocked(k, e.clk.Now()) {
		t.Fatal("us-east-1a still blocked: the test needs its block run out")
	}
	plan, err := e.r.Plans.Plan(context.Background(), e.r.Unavailable)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plan.Placements {
		if p.Zone == "us-east-1a" {
			t.Errorf("the job planned back in us-east-1a, which holds one of its two instances: %+v", p.Groups)
		}
	}
	e.checkNoDuplicates()
}
