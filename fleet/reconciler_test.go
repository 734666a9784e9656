package fleet

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/fake"
	"github.com/gpubroker/gpubroker/store"
)

func spotPool(zone string) providers.PoolKey {
	return providers.PoolKey{Cloud: pricing.AWS, Zone: zone, InstanceType: "p3.2xlarge", Capacity: pricing.Spot}
}

func TestDesiredSlotsAreStable(t *testing.T) {
	plan := planOf(t, testPolicy)
	a, b := Desired(plan), Desired(plan)
	if len(a) != 2 {
		t.Fatalf("%d slots, want 2 (a 2-GPU job on 1-GPU instances): %+v", len(a), a)
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].ID != SlotID("train", i) {
			t.Fatalf("slot ids %s / %s", a[i].ID, b[i].ID)
		}
		if a[i].Offer.Zone != "us-east-1a" || a[i].Capacity != pricing.Spot {
			t.Fatalf("slot %s planned in %s %s", a[i].ID, a[i].Offer.Zone, a[i].Capacity)
		}
	}
	// Golden: a token must never change between releases (a new leader
	// running a newer version must finish the old one's intents).
	if got := ClientToken("f", "train/0", 1); got != goldenToken {
		t.Fatalf("ClientToken = %s, want %s", got, goldenToken)
	}
	if ClientToken("f", "train/0", 1) == ClientToken("f", "train/0", 2) || ClientToken("f", "train/0", 1) == ClientToken("g", "train/0", 1) {
		t.Fatal("client tokens must differ per generation and fleet")
	}
	if tok := ClientToken("f", "train/0", 1); len(tok) != 36 || tok[14] != '5' {
		t.Fatalf("token %q is not UUID-shaped", tok)
	}
}

func TestLaunchBootRun(t *testing.T) {
	e := newEnv(t, testPolicy)
	rep := e.pass()
	if got := len(liveTagged(e.cloud)); got != 2 {
		t.Fatalf("%d instances after the first pass, want 2; report %+v", got, rep)
	}
	for id, s := range e.slots() {
		if State(s.State) != Booting || s.Generation != 1 || s.Zone != "us-east-1a" {
			t.Fatalf("slot %s: %+v", id, s)
		}
	}
	// The user data carries the minted token and the broker URL.
	ud := e.cloud.UserData(liveTagged(e.cloud)[0].ID)
	if !strings.Contains(ud, "gpbb_") || !strings.Contains(ud, "https://broker.test") {
		t.Fatalf("user data:\n%s", ud)
	}
	e.step(time.Minute)
	for id, s := range e.slots() {
		if State(s.State) != Running {
			t.Fatalf("slot %s is %s after its agent registered", id, s.State)
		}
	}
	// Steady state: no further launches, nothing to do.
	e.cloud.ResetCalls()
	rep = e.step(10 * time.Second)
	if len(rep.Actions) != 0 || e.cloud.Calls()[fake.APILaunch] != 0 {
		t.Fatalf("steady state did something: %+v", rep.Actions)
	}
	// Every transition is an event.
	evs := e.events("fleet.slot")
	if len(evs) != 8 { // (new)→pending, pending→launching, launching→booting, booting→running, per slot
		for _, ev := range evs {
			t.Log(ev.Message)
		}
		t.Fatalf("%d slot events, want 8", len(evs))
	}
	e.checkNoDuplicates()
}

func TestDryRunLaunchesNothing(t *testing.T) {
	e := newEnv(t, testPolicy, func(_ *fake.ComputeConfig, o *Options) { o.Mode = "" })
	rep := e.pass()
	if rep.Mode != DryRun {
		t.Fatalf("mode %s; the default must be dry-run", rep.Mode)
	}
	if n := e.cloud.Calls()[fake.APILaunch]; n != 0 {
		t.Fatalf("dry-run called launch %d times", n)
	}
	launches := 0
	for _, a := range rep.Actions {
		if a.Kind == "launch" {
			launches++
			if a.Done {
				t.Fatalf("dry-run action marked done: %+v", a)
			}
		}
	}
	if launches != 2 {
		t.Fatalf("dry-run reported %d launches, want 2: %+v", launches, rep.Actions)
	}
	e.pass()
	if n := len(e.events("fleet.dry_run")); n != 2 {
		t.Fatalf("%d dry-run events after two passes, want 2 (recorded once)", n)
	}
}

func TestPauseStopsLaunches(t *testing.T) {
	e := newEnv(t, testPolicy)
	if err := e.fleet.SetPaused(context.Background(), true, "test", e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	rep := e.pass()
	if !rep.Paused || e.cloud.Calls()[fake.APILaunch] != 0 {
		t.Fatalf("paused pass launched: %+v", rep)
	}
	if err := e.fleet.SetPaused(context.Background(), false, "test", e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	e.pass()
	if len(liveTagged(e.cloud)) != 2 {
		t.Fatal("resume did not launch")
	}
	if len(e.events("fleet.paused")) != 1 || len(e.events("fleet.resumed")) != 1 {
		t.Fatal("pause and resume are events")
	}
}

func TestPreemptionReplacesInNextPoolAndBlocksThePool(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.pass()
	e.step(time.Minute)
	victim := e.slots()["train/0"].InstanceID
	e.cloud.Preempt(victim)
	rep := e.step(5 * time.Second)
	s := e.slots()["train/0"]
	if s.InstanceID == victim || s.Generation != 2 || State(s.State) != Booting {
		t.Fatalf("slot after preemption: %+v\nactions %+v", s, rep.Actions)
	}
	if s.Zone == "us-east-1a" {
		t.Fatalf("replacement went back to the preempted pool")
	}
	if !e.r.Unavailable.Blocked(spotPool("us-east-1a"), e.clk.Now()) {
		t.Fatal("the preempted pool is not blocked")
	}
	// The preempted instance is left to drain, then the cloud takes it.
	if e.cloud.Instances()[0].State == providers.StateTerminated {
		t.Fatal("terminated before its drain window")
	}
	e.checkNoDuplicates()
	e.step(2 * time.Minute)
	e.step(10 * time.Second)
	if got := e.slots()["train/0"]; State(got.State) != Running {
		t.Fatalf("replacement not running: %+v", got)
	}
	e.checkNoDuplicates()
	if n := len(liveTagged(e.cloud)); n != 2 {
		t.Fatalf("%d live instances, want 2:\n%s", n, e.cloud.Describe())
	}
}

func TestCapacityErrorFallsBackToNextPool(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.cloud.FailPool(spotPool("us-east-1a"), providers.ErrInsufficientCapacity)
	rep := e.pass()
	for id, s := range e.slots() {
		if State(s.State) != Booting || s.Zone == "us-east-1a" {
			t.Fatalf("slot %s: %+v\n%+v", id, s, rep.Actions)
		}
	}
	if !e.r.Unavailable.Blocked(spotPool("us-east-1a"), e.clk.Now()) {
		t.Fatal("the pool without capacity is not blocked")
	}
	// The re-plan moved the slots off the blocked pool.
	for _, sp := range Desired(mustPlan(t, e)) {
		if sp.Offer.Zone == "us-east-1a" {
			t.Fatalf("re-plan still uses the blocked pool: %s", sp)
		}
	}
	if n := len(e.events("fleet.launch_failed")); n == 0 {
		t.Fatal("launch failures are events")
	}
	e.checkNoDuplicates()
}

func mustPlan(t *testing.T, e *env) *planT {
	p, err := e.r.Plans.Plan(context.Background(), e.r.Unavailable)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestQuotaErrorWaitsAndLaunchesNothingExtra(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.cloud.SetQuota(1)
	e.pass()
	if n := len(liveTagged(e.cloud)); n != 1 {
		t.Fatalf("%d instances under a quota of 1", n)
	}
	e.step(time.Minute)
	e.step(time.Minute)
	if n := len(liveTagged(e.cloud)); n != 1 {
		t.Fatalf("%d instances under a quota of 1", n)
	}
	var pending int
	for _, s := range e.slots() {
		if State(s.State) == Pending {
			pending++
		}
	}
	if pending != 1 {
		t.Fatalf("%d slots pending, want the one the quota holds back", pending)
	}
	// Quota raised: the slot fills after the back-off.
	e.cloud.SetQuota(0)
	e.step(time.Hour)
	e.step(time.Minute)
	if n := len(liveTagged(e.cloud)); n != 2 {
		t.Fatalf("%d instances after the quota was raised:\n%s", n, e.cloud.Describe())
	}
	e.checkNoDuplicates()
}

// crashingCompute simulates a broker crash around the cloud call.
type crashingCompute struct {
	providers.Compute
	before, after bool
}

var errCrash = errors.New("crash")

func (c *crashingCompute) Launch(ctx context.Context, req providers.LaunchRequest) (providers.Instance, error) {
	if c.before {
		return providers.Instance{}, errCrash
	}
	if _, err := c.Compute.Launch(ctx, req); err != nil {
		return providers.Instance{}, err
	}
	return providers.Instance{}, errCrash
}

// restart is a fresh reconciler on the same store and cloud (memory lost).
func (e *env) restart() {
	old := e.r
	e.r = &Reconciler{Store: old.Store, Computes: map[pricing.Cloud]providers.Compute{pricing.AWS: e.cloud}, Agents: old.Agents,
		Plans: old.Plans, Tokens: old.Tokens, Unavailable: &Unavailable{}, Now: old.Now, Options: old.Options}
}

func TestCrashBetweenIntentAndLaunch(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.r.Computes[pricing.AWS] = &crashingCompute{Compute: e.cloud, before: true}
	e.pass()
	if n := len(e.cloud.Instances()); n != 0 {
		t.Fatalf("%d instances", n)
	}
	st, _ := e.fleet.Load(context.Background())
	if len(st.Intents) != 2 || st.Intents[0].State != store.IntentOpen {
		t.Fatalf("intents after the crash: %+v", st.Intents)
	}
	e.restart()
	rep := e.pass()
	if n := len(liveTagged(e.cloud)); n != 2 {
		t.Fatalf("%d instances after recovery: %+v", n, rep.Actions)
	}
	for _, a := range rep.Actions {
		if a.Kind == "launch" {
			t.Fatalf("recovery started a new generation instead of finishing the intent: %+v", a)
		}
	}
	for _, s := range e.slots() {
		if s.Generation != 1 || State(s.State) != Booting {
			t.Fatalf("slot %+v", s)
		}
	}
	e.checkNoDuplicates()
}

func TestCrashAfterLaunchBeforeRecord(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.r.Computes[pricing.AWS] = &crashingCompute{Compute: e.cloud, after: true}
	e.pass()
	if n := len(e.cloud.Instances()); n != 2 {
		t.Fatalf("%d instances", n)
	}
	e.restart()
	e.cloud.ResetCalls()
	rep := e.pass()
	if e.cloud.Calls()[fake.APILaunch] != 0 {
		t.Fatalf("recovery called launch; it should adopt by token: %+v", rep.Actions)
	}
	adopted := 0
	for _, a := range rep.Actions {
		if a.Kind == "adopt" {
			adopted++
		}
	}
	if adopted != 2 || len(liveTagged(e.cloud)) != 2 {
		t.Fatalf("adopted %d, instances %d", adopted, len(liveTagged(e.cloud)))
	}
	e.step(time.Minute)
	for _, s := range e.slots() {
		if State(s.State) != Running {
			t.Fatalf("slot %+v", s)
		}
	}
	e.checkNoDuplicates()
}

func TestLostLaunchResponseIsRetriedWithTheSameToken(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.cloud.LoseNextLaunchResponses(1)
	e.pass()
	e.pass()
	if n := len(liveTagged(e.cloud)); n != 2 {
		t.Fatalf("%d instances:\n%s", n, e.cloud.Describe())
	}
	e.checkNoDuplicates()
}

func TestLeaderChangeMidLaunch(t *testing.T) {
	e := newEnv(t, testPolicy)
	// Leader a records its intents and launches, then loses the lease
	// before it can record the instances: its writes are fenced.
	var switched bool
	e.r.Computes[pricing.AWS] = &hookCompute{Compute: e.cloud, after: func() {
		if !switched {
			switched = true
			e.clk.Add(2 * time.Hour) // a's lease expires
			e.lead("b")
		}
	}}
	_, err := e.r.Reconcile(context.Background(), store.Fence{Lease: lease, Holder: "a", Epoch: 1, Now: t0})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed leader's write: %v", err)
	}
	// b finishes: it adopts a's instance and launches the other slot once.
	e.r.Computes[pricing.AWS] = e.cloud
	e.restart()
	e.pass()
	if n := len(liveTagged(e.cloud)); n != 2 {
		t.Fatalf("%d instances after the leader change:\n%s", n, e.cloud.Describe())
	}
	e.step(time.Minute)
	for _, s := range e.slots() {
		if State(s.State) != Running {
			t.Fatalf("slot %+v", s)
		}
	}
	e.checkNoDuplicates()
}

type hookCompute struct {
	providers.Compute
	after func()
}

func (c *hookCompute) Launch(ctx context.Context, req providers.LaunchRequest) (providers.Instance, error) {
	in, err := c.Compute.Launch(ctx, req)
	c.after()
	return in, err
}

func TestOrphansAreTerminatedAfterGraceUntaggedNever(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.pass()
	foreign := e.cloud.AddUntagged("us-east-1", "us-east-1a", "p3.2xlarge", map[string]string{"team": "other"})
	orphan := e.cloud.AddUntagged("us-east-1", "us-east-1b", "p3.2xlarge", map[string]string{TagFleet: "gpubroker", TagToken: "unknown"})
	rep := e.step(time.Minute)
	found := false
	for _, a := range rep.Actions {
		if a.Kind == "orphan" && a.Instance == orphan {
			found = true
		}
		if a.Instance == foreign {
			t.Fatalf("untagged instance touched: %+v", a)
		}
	}
	if !found || len(e.events("fleet.orphan")) != 1 {
		t.Fatalf("orphan not reported: %+v", rep.Actions)
	}
	e.step(5 * time.Minute)
	if e.state(orphan) == providers.StateTerminated {
		t.Fatal("orphan terminated before the grace period")
	}
	e.step(6 * time.Minute)
	if e.state(orphan) != providers.StateTerminated {
		t.Fatal("orphan not terminated after the grace period")
	}
	if e.state(foreign) != providers.StateRunning {
		t.Fatal("untagged instance touched")
	}
}

func (e *env) state(id string) providers.InstanceState {
	for _, in := range e.cloud.Instances() {
		if in.ID == id {
			return in.State
		}
	}
	return ""
}

func TestMissedHeartbeatAndBootTimeoutReplace(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.pass()
	e.step(time.Minute)
	first := e.slots()["train/0"].InstanceID
	e.deadAgents[first] = true
	e.step(3 * time.Minute)
	s := e.slots()["train/0"]
	if s.InstanceID == first || s.Generation != 2 {
		t.Fatalf("silent instance not replaced: %+v", s)
	}
	if e.state(first) != providers.StateTerminated {
		t.Fatal("the silent instance must be terminated")
	}
	// Its replacement never registers: replaced after the boot timeout.
	second := s.InstanceID
	e.deadAgents[second] = true
	e.step(16 * time.Minute)
	if s := e.slots()["train/0"]; s.InstanceID == second || s.Generation != 3 {
		t.Fatalf("boot timeout did not replace: %+v", s)
	}
	e.checkNoDuplicates()
}

func TestRemovedWorkloadDrainsToGone(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.pass()
	e.step(time.Minute)
	e.r.Plans = staticPlan{plan: nil}
	e.step(10 * time.Second)
	for _, s := range e.slots() {
		if State(s.State) != Draining {
			t.Fatalf("slot %+v", s)
		}
	}
	if n := len(liveTagged(e.cloud)); n != 0 {
		t.Fatalf("%d instances left", n)
	}
	e.step(10 * time.Second)
	e.step(10 * time.Second)
	if n := len(e.slots()); n != 0 {
		t.Fatalf("%d slots left", n)
	}
}

func TestCaps(t *testing.T) {
	e := newEnv(t, testPolicy, func(_ *fake.ComputeConfig, o *Options) { o.MaxInstances = 1 })
	rep := e.pass()
	if n := len(liveTagged(e.cloud)); n != 1 {
		t.Fatalf("%d instances under a cap of 1", n)
	}
	held := false
	for _, a := range rep.Actions {
		held = held || strings.Contains(a.Reason, "cap")
	}
	if !held {
		t.Fatalf("no action says the cap held it back: %+v", rep.Actions)
	}
	e2 := newEnv(t, testPolicy, func(_ *fake.ComputeConfig, o *Options) { o.LaunchesPerMinute = 1 })
	e2.pass()
	if n := len(liveTagged(e2.cloud)); n != 1 {
		t.Fatalf("%d launches under 1/min", n)
	}
	e2.step(61 * time.Second)
	if n := len(liveTagged(e2.cloud)); n != 2 {
		t.Fatalf("%d instances a minute later", n)
	}
}

func TestListFailureLeavesTheCloudAlone(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.pass()
	e.step(time.Minute)
	e.cloud.FailNext(fake.APIListPage, providers.ErrThrottled)
	rep := e.step(10 * time.Minute) // heartbeats would be stale if read wrongly
	if len(rep.Errors) == 0 {
		t.Fatal("the list failure is not reported")
	}
	for _, a := range rep.Actions {
		t.Fatalf("acted without a listing: %+v", a)
	}
}

func TestThrottledLaunchKeepsIntentOpen(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.cloud.FailNext(fake.APILaunch, providers.ErrThrottled)
	e.pass()
	st, _ := e.fleet.Load(context.Background())
	open := 0
	for _, in := range st.Intents {
		if in.State == store.IntentOpen {
			open++
		}
	}
	if open != 1 {
		t.Fatalf("%d open intents after a throttled launch: %+v", open, st.Intents)
	}
	e.pass()
	if n := len(liveTagged(e.cloud)); n != 2 {
		t.Fatalf("%d instances", n)
	}
	for _, s := range e.slots() {
		if s.Generation != 1 {
			t.Fatalf("throttling cost a generation: %+v", s)
		}
	}
}

func TestDiffWritesNothing(t *testing.T) {
	e := newEnv(t, testPolicy)
	rep, err := e.r.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	launches := 0
	for _, a := range rep.Actions {
		if a.Kind == "launch" && !a.Done {
			launches++
		}
	}
	if launches != 2 {
		t.Fatalf("diff: %+v", rep.Actions)
	}
	if n := len(e.slots()); n != 0 || e.cloud.Calls()[fake.APILaunch] != 0 || len(e.events("")) != 0 {
		t.Fatalf("diff wrote or launched: %d slots", n)
	}
	e.pass()
	e.step(time.Minute)
	rep, _ = e.r.Diff(context.Background())
	if len(rep.Actions) != 0 {
		t.Fatalf("diff of a settled fleet: %+v", rep.Actions)
	}
}

const goldenToken = "013d8814-7da8-5ccb-94ab-d143592e9d54"

// TestSlotBackInThePlanGetsANewToken scales a workload down and up again:
// the slot that left loses its row, but its launch intents stay, so the
// fresh row's launch continues at the next generation with a new client
// token; starting again at generation 1 would resend the first launch's
// token and the cloud would answer with that terminated instance.
func TestSlotBackInThePlanGetsANewToken(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.pass()
	e.step(time.Minute)
	first := map[string]string{}
	for _, in := range liveTagged(e.cloud) {
		first[in.ID] = e.cloud.Token(in.ID)
	}
	if len(first) != 2 {
		t.Fatalf("%d instances, want 2", len(first))
	}
	full := planOf(t, testPolicy)
	one := *full
	one.Placements = append([]optimizer.Placement(nil), full.Placements...)
	pl := one.Placements[0]
	pl.Groups = append([]optimizer.Group(nil), pl.Groups...)
	pl.Groups[0].Instances--
	pl.Instances--
	one.Placements[0] = pl
	e.r.Plans = staticPlan{plan: &one}
	for range 4 {
		e.step(10 * time.Second)
	}
	if s, ok := e.slots()[SlotID("train", 1)]; ok {
		t.Fatalf("slot train/1 after scaling down: %+v, want its row deleted", s)
	}
	e.r.Plans = staticPlan{plan: full}
	e.step(10 * time.Second)
	s := e.slots()[SlotID("train", 1)]
	if s.Generation != 2 || s.InstanceID == "" {
		t.Fatalf("slot train/1 back in the plan: %+v, want a launch at generation 2", s)
	}
	if _, old := first[s.InstanceID]; old {
		t.Fatalf("slot train/1 got its first instance %s back", s.InstanceID)
	}
	for id, tok := range first {
		if e.cloud.Token(s.InstanceID) == tok {
			t.Fatalf("the new launch reused the token of %s", id)
		}
	}
	e.checkNoDuplicates()
	// The workload leaving the plan takes the records with it.
	e.r.Plans = staticPlan{plan: nil}
	for range 4 {
		e.step(10 * time.Second)
	}
	if n := len(e.slots()); n != 0 {
		t.Fatalf("%d slots left after the workload left the plan", n)
	}
}

// TestReplaceRequested: a user asks for a running instance to be replaced:
// in dry-run and while paused the request waits; the next acting pass
// launches a replacement for its slot, terminates the instance and forgets
// the request; a request for an instance no slot holds is refused by the
// service and, stored anyway, dropped by the next acting pass.
func TestReplaceRequested(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, testPolicy)
	e.pass()
	e.step(time.Minute)
	first := e.slots()["train/0"].InstanceID
	svc := &Service{Store: e.fleet, Reconciler: e.r, Now: e.clk.Now}
	if _, err := svc.Replace(ctx, "i-nope", "", "api:test"); !errors.Is(err, ErrNotInFleet) {
		t.Fatalf("replacing an unknown instance: %v, want ErrNotInFleet", err)
	}
	q, err := svc.Replace(ctx, first, "slow host", "api:test")
	if err != nil || q.Instance != first {
		t.Fatalf("replace: %+v, %v", q, err)
	}
	// Dry-run: the action is reported, nothing happens, the request waits.
	e.r.Options.Mode = DryRun
	rep := e.step(10 * time.Second)
	if e.slots()["train/0"].InstanceID != first || e.state(first) != providers.StateRunning {
		t.Fatal("dry-run replaced the instance")
	}
	if !hasAction(rep, "terminate", first) {
		t.Fatalf("dry-run report does not show the termination of %s: %+v", first, rep.Actions)
	}
	if reqs, _ := e.fleet.ReplaceRequests(ctx); len(reqs) != 1 {
		t.Fatalf("dry-run consumed the request: %+v", reqs)
	}
	if st, err := svc.Status(ctx); err != nil || len(st.Replacing) != 1 || st.Replacing[0].Instance != first || st.Replacing[0].Reason != "slow host" {
		t.Fatalf("status while the request waits: %+v, %v", st.Replacing, err)
	}
	e.r.Options.Mode = Apply
	e.step(10 * time.Second)
	s := e.slots()["train/0"]
	if s.InstanceID == first || s.Generation != 2 {
		t.Fatalf("requested replacement did not happen: %+v", s)
	}
	if e.state(first) != providers.StateTerminated {
		t.Fatalf("the replaced instance is %s, want terminated", e.state(first))
	}
	if reqs, _ := e.fleet.ReplaceRequests(ctx); len(reqs) != 0 {
		t.Fatalf("requests left after the replacement: %+v", reqs)
	}
	if st, err := svc.Status(ctx); err != nil || st.Replacing == nil || len(st.Replacing) != 0 {
		t.Fatalf("status after the replacement: %+v, %v (want an empty list)", st.Replacing, err)
	}
	if evs := e.events("fleet.replace_requested"); len(evs) != 1 || evs[0].Instance != first {
		t.Fatalf("replace_requested events: %+v", evs)
	}
	// A stale request (its instance is gone) is dropped, nothing replaced.
	second := e.slots()["train/1"].InstanceID
	if err := e.fleet.RequestReplace(ctx, store.ReplaceRequest{Instance: first, Reason: "late", By: "test", At: e.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	e.step(10 * time.Second)
	if reqs, _ := e.fleet.ReplaceRequests(ctx); len(reqs) != 0 {
		t.Fatalf("stale request kept: %+v", reqs)
	}
	if e.slots()["train/1"].InstanceID != second {
		t.Fatal("a stale request replaced another instance")
	}
	e.checkNoDuplicates()
}

func hasAction(rep Report, kind, instance string) bool {
	for _, a := range rep.Actions {
		if a.Kind == kind && a.Instance == instance {
			return true
		}
	}
	return false
}

// countingPlans counts the plans asked of it.
type countingPlans struct {
	PlanSource
	calls int
}

func (c *countingPlans) Plan(ctx context.Context, u *Unavailable) (*optimizer.Plan, error) {
	c.calls++
	return c.PlanSource.Plan(ctx, u)
}

// TestDiffDoesNotStepTheChain: once this term has run a pass, diff uses
// that pass's plan, so a preview never advances the live stages of the
// plan chain (their policies decide once per call); a new term asks the
// chain again.
func TestDiffDoesNotStepTheChain(t *testing.T) {
	e := newEnv(t, testPolicy)
	plans := &countingPlans{PlanSource: e.r.Plans}
	e.r.Plans = plans
	if _, err := e.r.Diff(context.Background()); err != nil || plans.calls != 1 {
		t.Fatalf("diff before any pass: %d plans asked, %v; want 1 (nothing else to show)", plans.calls, err)
	}
	e.pass()
	calls := plans.calls
	for range 3 {
		if _, err := e.r.Diff(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if plans.calls != calls {
		t.Fatalf("diff asked the plan chain %d times after a pass; want 0", plans.calls-calls)
	}
	e.r.NewTerm()
	if _, err := e.r.Diff(context.Background()); err != nil || plans.calls != calls+1 {
		t.Fatalf("diff in a new term: %d plans asked, %v; want one more", plans.calls-calls, err)
	}
}

// A pass keeps its maps for the next one, emptied; a Diff beside a pass
// takes maps of its own (the race detector checks they share nothing).
func TestPassMapsAreKeptEmptyAndNeverShared(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.pass()
	m := e.r.spare
	if m == nil || m.slots == nil || m.specs == nil || m.cloud == nil || m.records == nil {
		t.Fatalf("no maps kept after a pass: %+v", m)
	}
	if n := len(m.specs) + len(m.slots) + len(m.intents) + len(m.bySlot) + len(m.records) + len(m.cloud) + len(m.agents); n != 0 {
		t.Fatalf("kept maps hold %d entries; want them empty", n)
	}
	e.step(time.Minute)
	if e.r.spare == nil || reflect.ValueOf(e.r.spare.slots).UnsafePointer() != reflect.ValueOf(m.slots).UnsafePointer() {
		t.Fatal("the next pass did not reuse the kept maps")
	}
	if len(e.slots()) == 0 {
		t.Fatal("no slots after two passes")
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := e.r.Diff(t.Context()); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := e.r.Reconcile(t.Context(), e.fence()); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
	}
}

// A pass builds its slots in memory an earlier pass used: over any earlier
// answer (another plan, fewer or more slots, pinned slot numbers) the
// slots must be Desired's.
func TestDesiredOverAnEarlierAnswerIsDesired(t *testing.T) {
	base := planOf(t, testPolicy)
	pinned := *base
	pinned.Placements = slices.Clone(base.Placements)
	pinned.Placements[0].Groups = slices.Clone(base.Placements[0].Groups)
	pinned.Placements[0].Groups[0].Slots = []int{3, 1}
	renamed := *base
	renamed.Placements = slices.Clone(base.Placements)
	renamed.Placements[0].Workload = "other"
	grown := *base
	grown.Placements = append(slices.Clone(base.Placements), renamed.Placements[0])
	plans := []*optimizer.Plan{base, &pinned, &renamed, &grown, {}}
	ids := slotIDs{}
	for i, before := range plans {
		for j, plan := range plans {
			got := desiredIn(Desired(before), plan, nil)
			if want := Desired(plan); !reflect.DeepEqual(got, want) {
				t.Errorf("plan %d over plan %d's slots:\n%+v\nwant\n%+v", j, i, got, want)
			}
			// and with the ids kept (by a pass's maps) over the plans
			if got := desiredIn(Desired(before), plan, ids); !reflect.DeepEqual(got, Desired(plan)) {
				t.Errorf("plan %d over plan %d's slots, ids kept:\n%+v\nwant\n%+v", j, i, got, Desired(plan))
			}
		}
	}
}

// eventCounting is a store that counts the events written to it and may
// say it keeps none.
type eventCounting struct {
	Store
	discards bool
	events   int
	slots    int
}

func (s *eventCounting) DiscardsEvents() bool { return s.discards }

func (s *eventCounting) Apply(ctx context.Context, f store.Fence, c store.FleetChanges) error {
	s.events += len(c.Events)
	s.slots += len(c.Slots)
	return s.Store.Apply(ctx, f, c)
}

// A pass builds no events for a store that keeps none, when it writes
// without a lease fence (with one, an events-only write is still checked
// against the lease, so the events stay); everything else it writes is
// the same.
func TestNoEventsForAStoreThatKeepsNone(t *testing.T) {
	slotsWritten := map[string]int{}
	for _, c := range []struct {
		name            string
		discards, fence bool
		wantEvents      bool
	}{
		{"keeps events", false, false, true},
		{"keeps none", true, false, false},
		{"keeps none, fenced pass", true, true, true},
	} {
		e := newEnv(t, testPolicy)
		st := &eventCounting{Store: e.r.Store, discards: c.discards}
		e.r.Store = st
		for range 3 {
			f := store.Fence{Now: e.clk.Now()}
			if c.fence {
				e.lead(e.holder)
				f = e.fence()
			}
			if _, err := e.r.Reconcile(t.Context(), f); err != nil {
				t.Fatal(err)
			}
			e.clk.Add(time.Minute)
		}
		if got := st.events > 0; got != c.wantEvents {
			t.Errorf("%s: %d events written; want some: %v", c.name, st.events, c.wantEvents)
		}
		slotsWritten[c.name] = st.slots
	}
	if slotsWritten["keeps none"] != slotsWritten["keeps events"] || slotsWritten["keeps none"] == 0 {
		t.Errorf("slot records written: %v; want the same, with or without events", slotsWritten)
	}
}

// TestPassSlotIDsForgetLeftWorkloads: the slot ids a reconciler keeps
// between passes do not grow without end as workloads come and go over
// the months a broker runs.
func TestPassSlotIDsForgetLeftWorkloads(t *testing.T) {
	base := planOf(t, testPolicy)
	p := &passState{maps: &passMaps{}}
	for i := 0; i < 5000; i++ {
		plan := *base
		plan.Placements = slices.Clone(base.Placements)
		plan.Placements[0].Workload = fmt.Sprintf("gone-%d", i)
		if got, want := p.desired(&plan), Desired(&plan); !reflect.DeepEqual(got, want) {
			t.Fatalf("pass %d: %+v, want %+v", i, got, want)
		}
	}
	if n := len(p.maps.ids); n > 2*len(base.Placements)+1024+1 {
		t.Errorf("%d workloads' slot ids kept after 5,000 plans of a few workloads each", n)
	}
}
