package fleet

import (
	"context"
	"github.com/gpubroker/gpubroker/optimizer"
	"reflect"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// TestNewPlanChainStages: the stages wrap each other in the documented
// order, later stages read the spot-only stage's policy, and optional ones
// stay out when not configured.
func TestNewPlanChainStages(t *testing.T) {
	pol := hedgePolicy(policy.SpotPrefer)
	cat := hedgeCatalog()
	c := ChainConfig{Catalog: func() *pricing.Catalog { return cat }, Policy: func() *policy.Policy { return pol }, Now: time.Now}
	if _, ok := NewPlanChain(c).(*SolverSource); !ok {
		t.Fatal("bare chain is not the solver")
	}
	// Fleet without Hedge: training stage, no hedging.
	c.Fleet = &hedgeWorld{}
	if _, ok := NewPlanChain(c).(*TrainingSource); !ok {
		t.Fatal("fleet without hedge options: hedging on")
	}
	c.Load = AgentLoad{Agents: agentsList{}}
	c.SpotOnly = func(context.Context, policy.Workload, time.Time) bool { return false }
	c.Hedge = &HedgeOptions{Tick: 30 * time.Second, ReadyDelay: 5 * time.Minute, MaxZones: 2}
	h, ok := NewPlanChain(c).(*HedgedSource)
	if !ok || h.Tick != 30*time.Second || h.ReadyDelay != 5*time.Minute || h.MaxZones != 2 {
		t.Fatalf("outer stage %T %+v", h, h)
	}
	sc, ok := h.Inner.(*ScaledSource)
	if !ok {
		t.Fatalf("under hedging: %T", h.Inner)
	}
	tr, ok := sc.Inner.(*TrainingSource)
	if !ok {
		t.Fatalf("under scaling: %T", sc.Inner)
	}
	so, ok := tr.Inner.(*SpotOnlySource)
	if !ok {
		t.Fatalf("under training: %T", tr.Inner)
	}
	if _, ok := so.Inner.(*SolverSource); !ok {
		t.Fatalf("under spot-only: %T", so.Inner)
	}
	if sc.Policy() != pol || h.Policy() != pol || tr.Policy() != pol {
		t.Fatal("stages do not read the spot-only stage's policy")
	}
	// Split: the join over hedging, the fork under scaling, the training
	// stage beside them on the fork's plan of the spot-only stage's.
	c.SplitStages = true
	j, ok := NewPlanChain(c).(*joinSource)
	if !ok {
		t.Fatal("split chain: no join on top")
	}
	h, ok = j.inner.(*HedgedSource)
	if !ok {
		t.Fatalf("under the join: %T", j.inner)
	}
	if sc, ok = h.Inner.(*ScaledSource); !ok {
		t.Fatalf("split chain, under hedging: %T", h.Inner)
	}
	f, ok := sc.Inner.(*forkSource)
	if !ok || f != j.fork {
		t.Fatalf("split chain, under scaling: %T", sc.Inner)
	}
	if _, ok := f.inner.(*SpotOnlySource); !ok || f.training.Inner != &f.fixed {
		t.Fatalf("split chain: fork over %T, training over %T", f.inner, f.training.Inner)
	}
}

// A stage that reuses plan memory builds each plan over the plan before
// the last: the last plan (which the stage and its readers may still
// read) is never written over; without reuse every plan is new memory.
func TestPlacementBufsNeverWriteOverTheLastPlan(t *testing.T) {
	src := []optimizer.Placement{{Workload: "a"}, {Workload: "b"}}
	for _, reuse := range []bool{false, true} {
		var b placementBufs
		var last []optimizer.Placement
		seen := map[*optimizer.Placement]int{}
		for i := range 6 {
			got := b.copyOf(src, reuse)
			if len(got) != 2 || got[1].Workload != "b" {
				t.Fatalf("reuse %v: copy %d is %v", reuse, i, got)
			}
			if last != nil && &got[0] == &last[0] {
				t.Fatalf("reuse %v: copy %d written over the last one", reuse, i)
			}
			got[0].Workload = "changed"
			if src[0].Workload != "a" {
				t.Fatal("the copy shares the source")
			}
			seen[&got[0]]++
			last = got
		}
		if want := map[bool]int{false: 6, true: 2}[reuse]; len(seen) != want {
			t.Errorf("reuse %v: %d distinct buffers over 6 plans; want %d", reuse, len(seen), want)
		}
	}
	if var0 := new(placementBufs).copyOf(nil, true); var0 != nil {
		t.Errorf("a copy of no placements is %v; want nil, as without reuse", var0)
	}
}

// A stage indexes the policy's workloads once per policy: again for a new
// policy, or for one whose workload list was replaced.
func TestIndexCacheFollowsThePolicy(t *testing.T) {
	var c indexCache
	a := &policy.Policy{Workloads: []policy.Workload{{Name: "x"}, {Name: "y"}}}
	first := c.of(a)
	if first["y"] != &a.Workloads[1] || len(first) != 2 {
		t.Fatalf("index %v", first)
	}
	if again := c.of(a); reflect.ValueOf(again).UnsafePointer() != reflect.ValueOf(first).UnsafePointer() {
		t.Error("the same policy was indexed again")
	}
	b := &policy.Policy{Workloads: []policy.Workload{{Name: "z"}}}
	if idx := c.of(b); len(idx) != 1 || idx["z"] != &b.Workloads[0] {
		t.Errorf("a new policy's index %v", idx)
	}
	b.Workloads = append(b.Workloads, policy.Workload{Name: "w"})
	if idx := c.of(b); len(idx) != 2 || idx["w"] != &b.Workloads[1] || idx["z"] != &b.Workloads[0] {
		t.Errorf("index after the workloads were replaced: %v", idx)
	}
}
