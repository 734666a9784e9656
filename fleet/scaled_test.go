package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/store"
)

type fixedPlan struct{ p *optimizer.Plan }

func (f fixedPlan) Plan(context.Context, *Unavailable) (*optimizer.Plan, error) { return f.p, nil }

type agentsList []store.InstanceRecord

func (a agentsList) ListInstances(_ context.Context, workload, state string) ([]store.InstanceRecord, error) {
	var out []store.InstanceRecord
	for _, r := range a {
		if r.Workload == workload && r.State == state {
			out = append(out, r)
		}
	}
	return out, nil
}

// TestScaledSourceFollowsUtilisation: hot agents grow the service in its
// first group, an idle one shrinks it from the last groups (after the
// scale-down window), a stop-scaling budget holds it at min, and training
// placements are left alone.
func TestScaledSourceFollowsUtilisation(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pol := &policy.Policy{Workloads: []policy.Workload{
		{Name: "chat", Kind: policy.Inference, Replicas: policy.Replicas{Min: 2, Max: 10, TargetUtilization: 0.5},
			Autoscale: policy.Autoscale{ScaleDownWindow: time.Minute}},
		{Name: "train", Kind: policy.Training},
	}}
	plan := &optimizer.Plan{Placements: []optimizer.Placement{
		{Workload: "chat", Kind: "inference", Instances: 4, Groups: []optimizer.Group{{Zone: "a", Instances: 2}, {Zone: "b", Instances: 2}}},
		{Workload: "train", Kind: "training", Instances: 1, Groups: []optimizer.Group{{Zone: "a", Instances: 1}}},
	}}
	hot := agentsList{}
	for i, u := range []float64{0.9, 0.9, 0.9, 0.9} {
		hot = append(hot, store.InstanceRecord{ID: string(rune('a' + i)), Workload: "chat", State: store.StateRunning, Utilization: u, LastHeartbeat: now})
	}
	clock := now
	hold := false
	src := &ScaledSource{Inner: fixedPlan{plan}, Policy: func() *policy.Policy { return pol }, Load: AgentLoad{Agents: hot},
		Now: func() time.Time { return clock }, StopScaling: func(context.Context, policy.Workload, time.Time) bool { return hold }}
	got, err := src.Plan(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// 4 × 0.9/0.5 = 7.2 → 8, step-limited to 4 + 4 = 8.
	if c := got.Placements[0]; c.Instances != 8 || c.Groups[0].Instances != 6 || c.Groups[1].Instances != 2 {
		t.Fatalf("hot: %+v (%s)", c, src.Decisions()["chat"].Reason)
	}
	if got.Placements[1].Instances != 1 || plan.Placements[0].Instances != 4 {
		t.Error("training touched or the inner plan mutated")
	}
	// Idle for longer than the scale-down window: down to min, from the
	// last group first.
	idle := agentsList{}
	for i := range 8 {
		idle = append(idle, store.InstanceRecord{ID: string(rune('a' + i)), Workload: "chat", State: store.StateRunning, Utilization: 0.05, LastHeartbeat: now})
	}
	src.Load = AgentLoad{Agents: idle}
	for s := 0; s <= 120; s += 30 {
		clock = now.Add(time.Duration(s) * time.Second)
		for i := range idle {
			idle[i].LastHeartbeat = clock
		}
		got, _ = src.Plan(context.Background(), nil)
	}
	if c := got.Placements[0]; c.Instances != 2 || len(c.Groups) != 1 || c.Groups[0].Zone != "a" {
		t.Fatalf("idle: %+v (%s)", c, src.Decisions()["chat"].Reason)
	}
	// A stop-scaling budget at 100% holds the service at min under load.
	hold = true
	clock = clock.Add(30 * time.Second)
	for i := range hot {
		hot[i].LastHeartbeat = clock
	}
	src.Load = AgentLoad{Agents: hot[:2]}
	got, _ = src.Plan(context.Background(), nil)
	if d := src.Decisions()["chat"]; got.Placements[0].Instances != 2 || !strings.Contains(d.Reason, "stop-scaling") {
		t.Fatalf("held: %d (%s)", got.Placements[0].Instances, d.Reason)
	}
}

// TestScaledSourceFollowsPolicyEdits: editing a running service's bounds
// takes effect on the next plan (the scaler is not frozen at the rule it
// was built with), and a service that leaves the policy loses its scaler
// and decision.
func TestScaledSourceFollowsPolicyEdits(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	chat := policy.Workload{Name: "chat", Kind: policy.Inference, Replicas: policy.Replicas{Min: 2, Max: 10, TargetUtilization: 0.5}}
	pol := &policy.Policy{Workloads: []policy.Workload{chat}}
	plan := &optimizer.Plan{Placements: []optimizer.Placement{
		{Workload: "chat", Kind: "inference", Instances: 4, Groups: []optimizer.Group{{Zone: "a", Instances: 4}}},
	}}
	hot := agentsList{}
	for i := range 4 {
		hot = append(hot, store.InstanceRecord{ID: string(rune('a' + i)), Workload: "chat", State: store.StateRunning, Utilization: 0.9, LastHeartbeat: now})
	}
	src := &ScaledSource{Inner: fixedPlan{plan}, Policy: func() *policy.Policy { return pol }, Load: AgentLoad{Agents: hot},
		Now: func() time.Time { return now }}
	got, err := src.Plan(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := got.Placements[0].Instances; n != 8 {
		t.Fatalf("hot under max 10: %d replicas, want 8", n)
	}
	// The user lowers max to 5: the next plan obeys at once.
	edited := chat
	edited.Replicas.Max = 5
	pol = &policy.Policy{Workloads: []policy.Workload{edited}}
	now = now.Add(30 * time.Second)
	got, _ = src.Plan(context.Background(), nil)
	if n := got.Placements[0].Instances; n != 5 {
		t.Fatalf("after max 10 → 5: %d replicas (%s), want 5", n, src.Decisions()["chat"].Reason)
	}
	// chat leaves the policy: its decision goes.
	pol = &policy.Policy{}
	now = now.Add(30 * time.Second)
	if _, err := src.Plan(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if d, ok := src.Decisions()["chat"]; ok {
		t.Fatalf("chat left the policy but its decision stays: %+v", d)
	}
}
