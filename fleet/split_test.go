package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// serviceStage stands for the autoscaling and hedging stages of a split
// chain: it sets the service's placement to n replicas and leaves the rest.
type serviceStage struct {
	inner PlanSource
	n     int
}

func (s serviceStage) Plan(ctx context.Context, u *Unavailable) (*optimizer.Plan, error) {
	plan, err := s.inner.Plan(ctx, u)
	if err != nil || plan == nil {
		return plan, err
	}
	out := *plan
	out.Placements = append([]optimizer.Placement(nil), plan.Placements...)
	for i := range out.Placements {
		if out.Placements[i].Workload == "chat" {
			out.Placements[i].Instances = s.n
		}
	}
	return &out, nil
}

type failingFleet struct{}

func (failingFleet) Load(context.Context) (store.FleetState, error) {
	return store.FleetState{}, errors.New("store down")
}

// TestSplitChainJoinsTheTwoSides: the join hands out the service side's
// placements with the training stage's in place, the same plan the
// stages make one after the other; a training-stage error is the chain's.
func TestSplitChainJoinsTheTwoSides(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	w := trainWorkload("", 20*time.Hour, 40*time.Hour, 5*time.Minute, 30*time.Minute)
	pol := &policy.Policy{Workloads: []policy.Workload{w, {Name: "chat", Kind: policy.Inference, Spot: policy.SpotPrefer}}}
	cat := pricing.NewCatalog(p3Offers(0.9, 0.5, 1.2), now, "test")
	solver := trainPlacement(1)
	solver.Placements = append(solver.Placements, optimizer.Placement{Workload: "chat", Kind: "inference", Instances: 2,
		Groups: []optimizer.Group{{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "g4dn.xlarge", Instances: 2}}})
	training := func(fleet FleetReader) *TrainingSource {
		return &TrainingSource{Policy: func() *policy.Policy { return pol }, Catalog: func() *pricing.Catalog { return cat }, Fleet: fleet,
			Tracker: &spotpolicy.LiveTracker{Gap: time.Minute}, Now: func() time.Time { return now }}
	}
	// One after the other.
	seq := training(&fakeFleet{})
	seq.Inner = fixedPlan{solver}
	want, err := serviceStage{inner: seq, n: 3}.Plan(context.Background(), &Unavailable{})
	if err != nil {
		t.Fatal(err)
	}
	if want.Placements[0].Zone == solver.Placements[0].Zone {
		t.Fatalf("the training stage kept the solver's zone %s: the test shows nothing", want.Placements[0].Zone)
	}
	// Split.
	fork := &forkSource{inner: fixedPlan{solver}, training: training(&fakeFleet{})}
	fork.training.Inner = &fork.fixed
	join := &joinSource{inner: serviceStage{inner: fork, n: 3}, fork: fork}
	got, err := join.Plan(context.Background(), &Unavailable{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Placements) != 2 || got.Placements[0].Zone != want.Placements[0].Zone || got.Placements[0].Capacity != want.Placements[0].Capacity ||
		got.Placements[1].Instances != 3 {
		t.Fatalf("split chain's plan %+v, the sequential one's %+v", got.Placements, want.Placements)
	}
	if solver.Placements[0].Zone != "us-east-1a" || solver.Placements[1].Instances != 2 {
		t.Fatal("the split chain wrote into the solver's plan")
	}
	// The training stage's error.
	fork = &forkSource{inner: fixedPlan{solver}, training: training(failingFleet{})}
	fork.training.Inner = &fork.fixed
	join = &joinSource{inner: serviceStage{inner: fork, n: 3}, fork: fork}
	if _, err := join.Plan(context.Background(), &Unavailable{}); err == nil || !strings.Contains(err.Error(), "training stage: reading the fleet") {
		t.Fatalf("training stage error: %v", err)
	}
}
