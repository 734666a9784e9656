package fleet

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// TestDecisionBoardThroughChain: NewPlanChain wires the live stages it
// builds to the board, and the board turns their decisions into status
// rows: a training job's pool, done fraction and deadline, a service's
// replicas per pool; workloads not decided yet and chains without the
// stages give none.
func TestDecisionBoardThroughChain(t *testing.T) {
	cat := hedgeCatalog()
	pol := hedgePolicy(policy.SpotPrefer)
	c := ChainConfig{Catalog: func() *pricing.Catalog { return cat }, Policy: func() *policy.Policy { return pol }, Now: time.Now}

	var nilBoard *DecisionBoard
	if got := nilBoard.List(); got != nil {
		t.Fatalf("nil board: %+v", got)
	}
	bare := &DecisionBoard{}
	c.Decisions = bare
	NewPlanChain(c)
	if got := bare.List(); got != nil {
		t.Fatalf("chain without live stages: %+v", got)
	}

	board := &DecisionBoard{}
	c.Decisions, c.Fleet, c.Hedge = board, &hedgeWorld{}, &HedgeOptions{}
	h, ok := NewPlanChain(c).(*HedgedSource)
	if !ok {
		t.Fatal("no hedging stage")
	}
	tr, ok := h.Inner.(*TrainingSource)
	if !ok {
		t.Fatalf("under hedging: %T", h.Inner)
	}
	if got := board.List(); got != nil {
		t.Fatalf("before any pass: %+v", got)
	}

	// The stages' data, as their passes leave it.
	at := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	adaptive, err := spotpolicy.NewTraining(spotpolicy.DefaultTraining)
	if err != nil {
		t.Fatal(err)
	}
	inf, err := spotpolicy.NewInference("adaptive")
	if err != nil {
		t.Fatal(err)
	}
	tr.jobs = map[string]*liveJob{
		"train": {policy: adaptive, tick: 360, decision: spotpolicy.RunSpot(1), pool: "aws/us-east-1b/p3.2xlarge", estimate: 9000,
			work: 36000, reported: true, lastAt: at, deadline: at.Add(10 * time.Hour)},
		"batch": {policy: adaptive, tick: 12, decision: spotpolicy.Idle, reason: "waiting for spot", estimate: 0, work: 3600,
			lastAt: at, deadline: at.Add(time.Hour)},
		"late": {policy: adaptive, tick: 90, decision: spotpolicy.RunOnDemand, reason: "safety net", estimate: 5000, work: 3600,
			lastAt: at, deadline: at.Add(-time.Minute)},
		"fresh": {policy: adaptive, tick: -1}, // known, never decided
	}
	h.hedges = map[string]*hedge{
		"chat": {policy: inf, last: HedgeDecision{Workload: "chat", At: at, Tick: 360, Policy: "adaptive", Target: 4, Ready: 3,
			Spot: map[string]int{"aws/us-east-1b/g4dn.xlarge": 1, "aws/us-east-1a/g4dn.xlarge": 2, "aws/us-east-1c/g4dn.xlarge": 0}, OnDemand: 1,
			Goal: 0.999, Window: 30 * 24 * time.Hour, BudgetSeconds: 2592, BudgetLeftSeconds: 612.4}},
		"api":  {policy: inf, last: HedgeDecision{Workload: "api", At: at, Policy: "adaptive", Target: 2, Ready: 2, Spot: map[string]int{}}},
		"cold": {policy: inf}, // built, not decided
	}
	got := board.List()
	want := []Decision{
		{Workload: "batch", Stage: StageTraining, Policy: adaptive.Name(), Action: "wait", Reason: "waiting for spot", At: at, Tick: 12,
			Done: 0, Deadline: at.Add(time.Hour)},
		{Workload: "late", Stage: StageTraining, Policy: adaptive.Name(), Action: "on-demand", Reason: "safety net", At: at, Tick: 90,
			Done: 1, Deadline: at.Add(-time.Minute)},
		{Workload: "train", Stage: StageTraining, Policy: adaptive.Name(), Action: "spot aws/us-east-1b/p3.2xlarge", At: at, Tick: 360,
			Done: 0.25, Reported: true, Deadline: at.Add(10 * time.Hour)},
		{Workload: "api", Stage: StageInference, Policy: "adaptive", Action: "on-demand×0", Reason: "2 replicas needed, 2 ready", At: at,
			Spot: map[string]int{}, Target: 2, Ready: 2},
		{Workload: "chat", Stage: StageInference, Policy: "adaptive", At: at, Tick: 360,
			Reason: "4 replicas needed, 3 ready; error budget 10m12s of 43m12s left (99.9% over 30d)",
			Goal:   0.999, Window: 30 * 24 * time.Hour, Budget: 2592 * time.Second, BudgetLeft: 612 * time.Second,
			Action:   "spot aws/us-east-1a/g4dn.xlarge×2 + spot aws/us-east-1b/g4dn.xlarge×1 + on-demand×1",
			Spot:     map[string]int{"aws/us-east-1b/g4dn.xlarge": 1, "aws/us-east-1a/g4dn.xlarge": 2, "aws/us-east-1c/g4dn.xlarge": 0},
			OnDemand: 1, Target: 4, Ready: 3},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d decisions, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("decision %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if left := got[2].TimeLeft(at.Add(4 * time.Hour)); left != 6*time.Hour {
		t.Errorf("time left %s, want 6h", left)
	}
	if left := got[3].TimeLeft(at); left != 0 {
		t.Errorf("a service's time left %s, want 0", left)
	}
	// The board reads a copy: changing a row leaves the stage's data alone.
	got[4].Spot["aws/us-east-1a/g4dn.xlarge"] = 9
	if h.hedges["chat"].last.Spot["aws/us-east-1a/g4dn.xlarge"] != 2 {
		t.Error("the board handed out the stage's own map")
	}
}

// TestDecisionBoardLivePass: one real pass of a chain with a deadline job
// leaves its decision on the board with the job's pool, progress and
// deadline.
func TestDecisionBoardLivePass(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	// Checkpoints every minute: the reported progress stands, to its last
	// checkpoint, although the job is not running (without checkpoints it
	// would fall back to 0).
	w := trainWorkload("", 4*time.Hour, 20*time.Hour, 6*time.Minute, time.Minute)
	w.GPU = policy.GPUNeed{Models: []pricing.GPUModel{pricing.V100}, Count: 1}
	pol := &policy.Policy{Workloads: []policy.Workload{w}}
	cat := pricing.NewCatalog(p3Offers(0.9, 0.95), t0, "test")
	board := &DecisionBoard{}
	chain := NewPlanChain(ChainConfig{Catalog: func() *pricing.Catalog { return cat }, Policy: func() *policy.Policy { return pol },
		Now: func() time.Time { return now }, Decisions: board,
		Fleet:    &fakeFleet{slots: []store.SlotRecord{{ID: "train/0", Workload: "train", State: string(Pending), CreatedAt: t0}}},
		Progress: fakeProgress{"train": {Done: 0.3, At: now.Add(-time.Minute)}}})
	plan, err := chain.Plan(context.Background(), &Unavailable{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Placements) != 1 {
		t.Fatalf("plan: %+v", plan.Placements)
	}
	got := board.List()
	if len(got) != 1 {
		t.Fatalf("decisions: %+v", got)
	}
	d := got[0]
	if d.Workload != "train" || d.Stage != StageTraining || d.Policy != spotpolicy.DefaultTraining || !d.At.Equal(now) || d.Tick != 120 {
		t.Errorf("decision %+v", d)
	}
	if !d.Reported || d.Done > 0.3+1e-9 || d.Done < 0.29 { // down to its last checkpoint
		t.Errorf("done %.3f reported %v, want 0.3 reported", d.Done, d.Reported)
	}
	if !d.Deadline.Equal(t0.Add(20*time.Hour)) || d.TimeLeft(now) != 18*time.Hour {
		t.Errorf("deadline %s (left %s), want %s", d.Deadline, d.TimeLeft(now), t0.Add(20*time.Hour))
	}
	g := plan.Placements[0].Groups[0]
	want := "on-demand"
	if g.Capacity == pricing.Spot {
		want = "spot aws/" + g.Zone + "/p3.2xlarge"
	}
	if d.Action != want {
		t.Errorf("action %q, plan says %q", d.Action, want)
	}
	if !slices.Contains([]string{"spot aws/us-east-1a/p3.2xlarge", "spot aws/us-east-1b/p3.2xlarge", "on-demand"}, d.Action) {
		t.Errorf("action %q", d.Action)
	}
}
