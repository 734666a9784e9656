package fleet

import (
	"context"
	"log/slog"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// ChainConfig is what the reconciler's plan sources need. The broker
// (`gpubroker serve`) and the fleet simulator (`gpubroker simulate fleet`)
// both build their chain with NewPlanChain, so the simulator runs the
// controller users run.
type ChainConfig struct {
	Catalog func() *pricing.Catalog
	Policy  func() *policy.Policy
	Now     func() time.Time
	Log     *slog.Logger
	// Load is the inference services' live load (agents' utilisation,
	// Prometheus); nil leaves services at the plan's replicas.
	Load LoadSource
	// StopScaling says a stop-scaling budget over the workload is spent.
	StopScaling func(ctx context.Context, w policy.Workload, now time.Time) bool
	// Fleet is the fleet's stored slots; with it the live training stage
	// runs each deadline job's spot policy (TrainingSource). Progress is
	// what the jobs reported (nil: estimated), SpeedRatio their measured
	// speed against the planned one, Training the stage's settings.
	Fleet      FleetReader
	Progress   ProgressSource
	SpeedRatio func(cloud pricing.Cloud, instanceType string) float64
	Training   TrainingConfig
	// IncrementalReplan makes the solver re-plan only the workloads a pool
	// block or a removed workload touches (SolverSource.Incremental); the
	// fleet simulator sets it, the broker does not.
	IncrementalReplan bool
}

// NewPlanChain returns the plan source the reconciler reads. Each stage
// wraps the one before it:
//
//	SolverSource   the optimizer's plan of the policy on the catalog,
//	               blocked pools ruled out
//	TrainingSource deadline jobs on the capacity their live spot policy
//	               decides (fleet/spotpolicy), when Fleet is set
//	ScaledSource   inference replicas sized to live load (fleet/autoscale)
func NewPlanChain(c ChainConfig) PlanSource {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var src PlanSource = &SolverSource{Catalog: c.Catalog, Policy: c.Policy, Now: c.Now, Incremental: c.IncrementalReplan}
	if c.Fleet != nil {
		src = &TrainingSource{Inner: src, Policy: c.Policy, Catalog: c.Catalog, Fleet: c.Fleet, Progress: c.Progress,
			SpeedRatio: c.SpeedRatio, Tracker: &spotpolicy.LiveTracker{Gap: c.Training.tick()}, Now: c.Now, Log: log,
			Config: c.Training}
	}
	if c.Load == nil {
		return src
	}
	src = &ScaledSource{Inner: src, Policy: c.Policy, Load: c.Load, Now: c.Now, Log: log, StopScaling: c.StopScaling}
	return src
}
