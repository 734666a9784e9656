package fleetsim

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpubroker/gpubroker/optimizer"
)

// The simulator's placement index answers as a map of the last plan's
// placements by workload (the last one of a workload placed twice), plan
// after plan, whether a plan places the same workloads in the same order
// (the index is kept) or not.
func TestPlacementIndexFollowsThePlans(t *testing.T) {
	s := &Sim{tap: &planTap{}}
	rng := rand.New(rand.NewPCG(13, 4))
	names := []string{"a", "b", "c", "d", "e"}
	var last []string
	for step := range 500 {
		if s.placement("a") != nil && s.tap.last == nil {
			t.Fatal("a placement without a plan")
		}
		order := last
		if last == nil || rng.IntN(3) == 0 {
			order = nil
			for range rng.IntN(7) {
				order = append(order, names[rng.IntN(len(names))])
			}
		}
		last = order
		plan := &optimizer.Plan{}
		for i, w := range order {
			plan.Placements = append(plan.Placements, optimizer.Placement{Workload: w, Instances: step*10 + i})
		}
		s.tap.last = plan
		want := map[string]*optimizer.Placement{}
		for i := range plan.Placements {
			want[plan.Placements[i].Workload] = &plan.Placements[i]
		}
		for _, w := range append(names, "zz") {
			if got := s.placement(w); got != want[w] {
				t.Fatalf("step %d, plan %v: placement of %s = %v, want %v", step, order, w, describe(got), describe(want[w]))
			}
		}
	}
}

func describe(p *optimizer.Placement) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%s#%d", p.Workload, p.Instances)
}
