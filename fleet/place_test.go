package fleet

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// place hands out a job's last groups when the new ones are equal (the
// plans share them), and new groups, equal to those built afresh, when
// anything changed: the pool, the capacity, the move, the planned groups.
func TestPlaceHandsOutEqualGroupsOnce(t *testing.T) {
	spotA := pricing.Offer{Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p3.2xlarge", GPU: pricing.V100, GPUCount: 1,
		SpotPrice: 0.9, OnDemandPrice: 3.06}
	spotB := spotA
	spotB.Zone, spotB.SpotPrice = "us-east-1b", 0.8
	od := spotA
	pools := []livePool{{offer: &spotA, key: "a"}, {offer: &spotB, key: "b"}}
	plan := optimizer.Placement{Workload: "job", Instances: 2, Groups: []optimizer.Group{
		{Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p3.2xlarge", GPU: pricing.V100, GPUsPerInstance: 1, Instances: 2,
			Capacity: pricing.OnDemand, PricePerHour: 6.12}}}
	onB := spotpolicy.Action{Capacity: spotpolicy.Spot, Pool: 1}
	steps := []struct {
		a, cur spotpolicy.Action
		p      optimizer.Placement
		same   bool // the last step's groups handed out again
	}{
		{a: spotpolicy.RunOnDemand, cur: spotpolicy.Idle, p: plan},
		{a: spotpolicy.RunOnDemand, cur: spotpolicy.Idle, p: plan, same: true},
		{a: onB, cur: spotpolicy.RunOnDemand, p: plan},
		{a: onB, cur: onB, p: plan},
		{a: onB, cur: onB, p: plan, same: true},
		{a: spotpolicy.Action{Capacity: spotpolicy.Spot}, cur: onB, p: plan},
		{a: spotpolicy.Idle, cur: onB, p: plan},
		{a: spotpolicy.Idle, cur: onB, p: plan, same: true},
	}
	var m groupMemo
	var last []optimizer.Group
	for i, st := range steps {
		got := place(st.p, pools, od, st.a, st.cur, &m)
		want := place(st.p, pools, od, st.a, st.cur, &groupMemo{})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: placed %+v, want %+v", i, got.Groups, want.Groups)
		}
		if same := len(last) > 0 && &got.Groups[0] == &last[0]; same != st.same {
			t.Fatalf("step %d: the last groups handed out again: %v, want %v", i, same, st.same)
		}
		last = got.Groups
	}
}

// The training stage's slots by workload, kept between fleet reads, are
// each read's slots of the workload in the read's order, whatever the
// reads before held.
func TestTrainingReadSlotsByWorkload(t *testing.T) {
	var ts TrainingSource
	rng := rand.New(rand.NewPCG(13, 6))
	names := []string{"a", "b", "c", "d"}
	for step := range 300 {
		var all []store.SlotRecord
		for i := range rng.IntN(12) {
			all = append(all, store.SlotRecord{ID: fmt.Sprint(i), Workload: names[rng.IntN(len(names))]})
		}
		ts.readSlots(all)
		for _, w := range append(names, "zz") {
			var want []*store.SlotRecord
			for i := range all {
				if all[i].Workload == w {
					want = append(want, &all[i])
				}
			}
			if got := ts.slotsOf(w); !slices.Equal(got, want) {
				t.Fatalf("step %d, %s: %d slots, want %d", step, w, len(got), len(want))
			}
		}
	}
}

// A job's spot pool name is spotPoolOf's, action after action, made anew
// only when the pool changes.
func TestSetPoolAsSpotPoolOf(t *testing.T) {
	a := pricing.Offer{Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p3.2xlarge"}
	b := a
	b.Zone = "us-east-1b"
	c := a
	c.Zone = "" // a regional pool
	d := a
	d.InstanceType = "p3.8xlarge"
	pools := []livePool{{offer: &a}, {offer: &b}, {offer: &c}, {offer: &d}}
	var j liveJob
	rng := rand.New(rand.NewPCG(13, 8))
	for i := range 500 {
		act := spotpolicy.Action{Capacity: spotpolicy.Capacity(rng.IntN(3)), Pool: rng.IntN(5)}
		if act.Capacity != spotpolicy.Spot {
			act.Pool = 0
		}
		j.setPool(pools, act)
		if want := spotPoolOf(pools, act); j.pool != want {
			t.Fatalf("step %d, %+v: pool %q, want %q", i, act, j.pool, want)
		}
	}
}

// A service resized plan after plan gets the groups a fresh resize makes,
// the last ones handed out again when equal.
func TestScaledResizeHandsOutEqualGroupsOnce(t *testing.T) {
	g := optimizer.Group{Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "g5.xlarge", Capacity: pricing.Spot}
	h := g
	h.Zone, h.Capacity = "us-east-1b", pricing.OnDemand
	p := optimizer.Placement{Workload: "svc", Groups: []optimizer.Group{g, h}}
	p.Groups[0].Instances, p.Groups[1].Instances = 2, 1
	var sv scaledService
	var last []optimizer.Group
	for i, n := range []int{3, 3, 5, 5, 1, 1, 0, 2, 2} {
		got := sv.resize(p, n)
		want := resizeIn(nil, p, n)
		if !reflect.DeepEqual(got.Groups, want.Groups) && (len(got.Groups) > 0 || len(want.Groups) > 0) || got.Instances != n {
			t.Fatalf("step %d, %d replicas: %+v, want %+v", i, n, got.Groups, want.Groups)
		}
		again := i > 0 && n == []int{3, 3, 5, 5, 1, 1, 0, 2, 2}[i-1] && len(got.Groups) > 0
		if same := len(got.Groups) > 0 && len(last) > 0 && &got.Groups[0] == &last[0]; same != again {
			t.Fatalf("step %d: the last groups handed out again: %v, want %v", i, same, again)
		}
		last = got.Groups
	}
}
