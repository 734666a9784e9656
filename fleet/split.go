package fleet

import (
	"context"
	"fmt"

	"github.com/gpubroker/gpubroker/optimizer"
)

// The training stage rewrites only deadline jobs' placements, the
// autoscaling and hedging stages only inference services': with
// ChainConfig.SplitStages the chain plans the two sides at once from the
// solver's plan (forkSource starts the training stage on another
// goroutine and hands the solver's plan on to the autoscaling stage;
// joinSource, the chain's top, takes the hedging stage's plan with the
// training stage's placements in it). Each side reads only its own
// stage's state and what was fixed before the fork (the solver's plan, the
// blocked pools, the fleet's snapshot), so the plan is the one the stages
// make one after the other. The fleet simulator sets it: there the
// training stage was a fifth of the pass's work on the calling goroutine.

// forkSource is the split chain's fork: above the solver (and the
// spot-only stage), below the autoscaling stage.
type forkSource struct {
	inner    PlanSource
	training *TrainingSource // its Inner is fixed, set per plan
	fixed    givenPlan
	pending  *trainingRun // started by the last Plan, taken by joinSource
}

// trainingRun is one training-stage plan under way.
type trainingRun struct {
	done chan struct{}
	plan *optimizer.Plan
	err  error
}

// givenPlan is a plan source that answers the plan it was given: the
// training stage's inner stage in a split chain.
type givenPlan struct{ plan *optimizer.Plan }

func (f *givenPlan) Plan(context.Context, *Unavailable) (*optimizer.Plan, error) { return f.plan, nil }

// Plan plans the inner stages, starts the training stage on their plan and
// returns the plan for the autoscaling stage: a new Plan value each call,
// its placements shared (the training stage, which it stands for,
// returned its own plan each call, and the autoscaling stage tells a
// re-plan inside a pass by the plan it is given).
func (f *forkSource) Plan(ctx context.Context, u *Unavailable) (*optimizer.Plan, error) {
	f.pending = nil
	plan, err := f.inner.Plan(ctx, u)
	if err != nil || plan == nil {
		return plan, err // (as the training stage would have)
	}
	f.fixed.plan = plan
	run := &trainingRun{done: make(chan struct{})}
	f.pending = run
	go func() {
		defer close(run.done)
		run.plan, run.err = f.training.Plan(ctx, u)
	}()
	cp := *plan
	return &cp, nil
}

// joinSource is the split chain's top: the hedging (or autoscaling)
// stage's plan with the training stage's placements.
type joinSource struct {
	inner PlanSource
	fork  *forkSource
	reuse bool
	bufs  placementBufs
}

// Plan returns the inner plan with the placements the training stage
// changed. An error of the training stage is the chain's, as when it ran
// below the others (they plan anyway in a split chain).
func (j *joinSource) Plan(ctx context.Context, u *Unavailable) (*optimizer.Plan, error) {
	plan, err := j.inner.Plan(ctx, u)
	run := j.fork.pending
	j.fork.pending = nil
	if run == nil {
		return plan, err
	}
	<-run.done
	if run.err != nil {
		return nil, run.err
	}
	if err != nil || plan == nil || run.plan == nil {
		return plan, err
	}
	changed := j.fork.training.changedOf(run.plan)
	if len(changed) == 0 {
		return plan, nil
	}
	if len(run.plan.Placements) != len(plan.Placements) {
		return nil, fmt.Errorf("split plan chain: the training stage planned %d placements, the hedging stage %d", len(run.plan.Placements), len(plan.Placements))
	}
	out := *plan
	out.Placements = j.bufs.copyOf(plan.Placements, j.reuse)
	for _, i := range changed {
		out.Placements[i] = run.plan.Placements[i]
	}
	return &out, nil
}
