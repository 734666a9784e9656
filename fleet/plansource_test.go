package fleet

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

const twoJobs = `
clouds: [aws]
workloads:
  - name: a
    kind: training
    gpu: {models: [V100], count: 1}
    work: {gpu_hours: 10, reference_gpu: V100}
    spot: only
  - name: b
    kind: training
    gpu: {models: [V100], count: 1}
    work: {gpu_hours: 10, reference_gpu: V100}
    spot: only
`

func TestSolverSourceIncremental(t *testing.T) {
	pol, err := policy.Parse("test.yaml", []byte(twoJobs))
	if err != nil {
		t.Fatal(err)
	}
	cat := pricing.NewCatalog(testOffers(), t0, "test")
	ctx := context.Background()
	for _, incremental := range []bool{false, true} {
		cur := pol
		clk := &clock{t: t0}
		s := &SolverSource{Catalog: func() *pricing.Catalog { return cat }, Policy: func() *policy.Policy { return cur }, Now: clk.Now, Incremental: incremental}
		u := &Unavailable{}
		first, err := s.Plan(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if first.Placements[0].Zone != "us-east-1a" || first.Placements[1].Zone != "us-east-1a" {
			t.Fatalf("both jobs should start in the cheapest zone: %+v", first.Placements)
		}
		// Blocking the zone moves both jobs, incrementally or not, to the
		// next cheapest.
		u.Block(providers.PoolKey{Cloud: pricing.AWS, Zone: "us-east-1a", InstanceType: "p3.2xlarge", Capacity: pricing.Spot}, "preempted", clk.Now())
		second, err := s.Plan(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range second.Placements {
			if p.Zone != "us-east-1b" {
				t.Fatalf("incremental=%v: %s in %s after the block, want us-east-1b", incremental, p.Workload, p.Zone)
			}
		}
		// The block runs out: back to the cheapest zone.
		clk.Add(time.Hour)
		third, err := s.Plan(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(zones(third), zones(first)) {
			t.Fatalf("incremental=%v: after the block %v, want %v", incremental, zones(third), zones(first))
		}
		// A finished job leaves the policy: the other keeps its placement.
		next := *pol
		next.Workloads = pol.Workloads[1:]
		cur = &next
		fourth, err := s.Plan(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if len(fourth.Placements) != 1 || fourth.Placements[0].Workload != "b" || fourth.Placements[0].Zone != "us-east-1a" {
			t.Fatalf("incremental=%v: after removing a: %+v", incremental, zones(fourth))
		}
	}
}

func zones(p *planT) []string {
	var out []string
	for _, x := range p.Placements {
		out = append(out, x.Workload+"@"+x.Zone)
	}
	return out
}

func TestOnlyRemoved(t *testing.T) {
	pol, err := policy.Parse("test.yaml", []byte(twoJobs))
	if err != nil {
		t.Fatal(err)
	}
	drop := *pol
	drop.Workloads = pol.Workloads[:1]
	changed := *pol
	changed.Workloads = append([]policy.Workload(nil), pol.Workloads...)
	changed.Workloads[1].WorkGPUHours = 11
	other := *pol
	other.Regions = []string{"eu-*"}
	for _, tc := range []struct {
		name string
		next *policy.Policy
		want bool
	}{
		{"same", pol, true},
		{"one removed", &drop, true},
		{"a workload changed", &changed, false},
		{"a top-level key changed", &other, false},
	} {
		if got := onlyRemoved(pol, tc.next); got != tc.want {
			t.Errorf("%s: onlyRemoved = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSolverSourceKeepInPass: a re-plan inside a pass keeps the last solve
// (the live stages re-decide on it); the next plan outside the pass solves
// for the blocks the pass added. Without KeepInPass the re-plan in the pass
// solves at once.
func TestSolverSourceKeepInPass(t *testing.T) {
	pol, err := policy.Parse("test.yaml", []byte(twoJobs))
	if err != nil {
		t.Fatal(err)
	}
	cat := pricing.NewCatalog(testOffers(), t0, "test")
	for _, tc := range []struct {
		keep   bool
		inPass []string // zones after the block, asked inside the pass
	}{
		{keep: true, inPass: []string{"a@us-east-1a", "b@us-east-1a"}},
		{keep: false, inPass: []string{"a@us-east-1b", "b@us-east-1b"}},
	} {
		clk := &clock{t: t0}
		s := &SolverSource{Catalog: func() *pricing.Catalog { return cat }, Policy: func() *policy.Policy { return pol }, Now: clk.Now,
			Incremental: true, KeepInPass: tc.keep}
		u := &Unavailable{}
		if _, err := s.Plan(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		u.Block(providers.PoolKey{Cloud: pricing.AWS, Zone: "us-east-1a", InstanceType: "p3.2xlarge", Capacity: pricing.Spot}, "capacity", clk.Now())
		got, err := s.Plan(InPass(t.Context()), u)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(zones(got), tc.inPass) {
			t.Fatalf("keep=%v: in the pass %v, want %v", tc.keep, zones(got), tc.inPass)
		}
		clk.Add(30 * time.Second) // the next pass
		next, err := s.Plan(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"a@us-east-1b", "b@us-east-1b"}; !reflect.DeepEqual(zones(next), want) {
			t.Fatalf("keep=%v: next pass %v, want %v", tc.keep, zones(next), want)
		}
	}
}
