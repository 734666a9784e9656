package optimizer

import (
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

// Plan is the optimizer's answer: where each workload runs, what it is
// expected to cost, and why. Its JSON form is documented in docs/plan.md and
// docs/plan.schema.json; field names and order are stable.
type Plan struct {
	// GeneratedAt is Input.Now.
	GeneratedAt time.Time `json:"generated_at"`
	// Policy is the policy file the plan was made for.
	Policy       string      `json:"policy"`
	Catalog      CatalogInfo `json:"catalog"`
	HorizonHours float64     `json:"horizon_hours"`
	// Solver says what made the plan: "heuristic", or "exact (cbc 2.10.8:
	// optimal)" when the exact solver ran.
	Solver     string      `json:"solver"`
	Placements []Placement `json:"placements"`
	Totals     Totals      `json:"totals"`
	Bound      Bound       `json:"bound"`
	Warnings   []string    `json:"warnings"`
	// Blocked lists the workloads that could not be placed, each with the
	// constraint that blocks it and how that is known; empty when every
	// workload is placed.
	Blocked []Blocked `json:"blocked"`
	// SpotPools lists the spot pools the plan uses, with their capacity
	// and where it comes from (docs/plan.md, "Spot pool capacity").
	SpotPools []SpotPoolUse `json:"spot_pools"`
}

// SpotPoolUse is one spot pool (a GPU model in one zone; Azure: region)
// the plan puts spot GPUs in.
type SpotPoolUse struct {
	// Pool is "cloud/zone/gpu".
	Pool string `json:"pool"`
	// CapacityGPUs is the spot GPUs the pool is taken to give the fleet.
	CapacityGPUs int `json:"capacity_gpus"`
	// UsedGPUs is what the plan puts there.
	UsedGPUs int `json:"used_gpus"`
	// Source is where the capacity comes from: "policy"
	// (spot_capacity.pools), "placement score" or "default"
	// (spot_capacity.default_gpus_per_pool).
	Source string `json:"source"`
	// PlacementScore is the best spot placement score (1-10) of the pool's
	// offers in the catalog, 0 when unknown.
	PlacementScore int `json:"placement_score,omitempty"`
	// Constrained is true when the fleet solver held the pool to its
	// capacity with a constraint row (pools the fleet cannot fill get none).
	Constrained bool `json:"constrained"`
}

// CatalogInfo says which prices the plan used and how old they are.
type CatalogInfo struct {
	Source      string    `json:"source"`
	GeneratedAt time.Time `json:"generated_at"`
	AgeHours    float64   `json:"age_hours"`
	Offers      int       `json:"offers"`
	// UndatedOffers counts offers whose prices have no known date (the
	// embedded snapshot's rows): for those AgeHours says nothing.
	UndatedOffers int `json:"undated_offers,omitempty"`
}

// Placement is one workload's placement.
type Placement struct {
	Workload string `json:"workload"`
	Team     string `json:"team,omitempty"`
	Kind     string `json:"kind"`
	// Cloud, Region, Zone, InstanceType and GPU are those of the first
	// group; Groups lists all of them (inference replicas spread over
	// several places).
	Cloud        pricing.Cloud        `json:"cloud"`
	Region       string               `json:"region"`
	Zone         string               `json:"zone"`
	InstanceType string               `json:"instance_type"`
	GPU          pricing.GPUModel     `json:"gpu"`
	Capacity     pricing.CapacityType `json:"capacity"`
	// GPUs is the total GPU count of the placement (all instances).
	GPUs int `json:"gpus"`
	// Instances is the instance count (training/batch) or replica count
	// (inference, including hedge replicas).
	Instances int `json:"instances"`
	// Replicas is min/max replicas for inference; zero for jobs.
	MinReplicas int `json:"min_replicas,omitempty"`
	MaxReplicas int `json:"max_replicas,omitempty"`
	// PricePerHour is the whole placement's price, USD per hour.
	PricePerHour float64 `json:"price_per_hour"`
	// RelativeSpeed is per GPU against the reference GPU (jobs only).
	RelativeSpeed float64 `json:"relative_speed,omitempty"`
	// ScalingEfficiency is the job's scaling efficiency against its
	// reference shape (1 = the shape the work was measured on; jobs only).
	ScalingEfficiency float64 `json:"scaling_efficiency,omitempty"`
	// ExpectedHours is the expected finish (jobs) or the horizon (inference).
	ExpectedHours float64 `json:"expected_hours"`
	// DeadlineHours is the workload's deadline, 0 when none.
	DeadlineHours float64 `json:"deadline_hours,omitempty"`
	// ExpectedPreemptions over the run (jobs) or the horizon (inference).
	ExpectedPreemptions  float64 `json:"expected_preemptions"`
	InterruptionsPerHour float64 `json:"interruptions_per_hour"`
	// SpotSignalDefault is true when the interruption rate is a default, not
	// an observation.
	SpotSignalDefault bool          `json:"spot_signal_default"`
	ExpectedCost      float64       `json:"expected_cost"`
	Breakdown         CostBreakdown `json:"breakdown"`
	// WorstCaseCost is inference at max replicas over the horizon.
	WorstCaseCost float64 `json:"worst_case_cost,omitempty"`
	// OnDemandBaseline is the cheapest all-on-demand placement of the same
	// workload meeting the same limits, ignoring quotas and budgets.
	OnDemandBaseline float64 `json:"on_demand_baseline"`
	Savings          float64 `json:"savings"`
	SavingsPercent   float64 `json:"savings_percent"`
	Groups           []Group `json:"groups"`
	// RunnerUp is the best alternative that was not chosen, nil when there
	// was none.
	RunnerUp *RunnerUp `json:"runner_up"`
	// ByGPU is the best option per GPU model, or why the model was excluded:
	// the ranker's per-model scores.
	ByGPU       []GPUChoice `json:"by_gpu"`
	Explanation []string    `json:"explanation"`
	// Schedule is a recurring job's cron expression; RunsPerMonth its
	// runs per 30-day month (budgets), RunsInHorizon over the horizon
	// (ExpectedCost), CostPerRun one run's expected cost.
	Schedule      string  `json:"schedule,omitempty"`
	RunsPerMonth  float64 `json:"runs_per_month,omitempty"`
	RunsInHorizon float64 `json:"runs_in_horizon,omitempty"`
	CostPerRun    float64 `json:"cost_per_run,omitempty"`
	// Load summarises an inference service's load profile, nil without one.
	Load *LoadSummary `json:"load,omitempty"`
	// MonthlyCost is what budgets are checked against: the expected cost
	// per 30-day month.
	MonthlyCost float64 `json:"monthly_cost"`
}

// LoadSummary is an inference service's replicas by hour, within min and
// max replicas: the layout holds PeakReplicas and costs MeanReplicas ÷
// PeakReplicas of running it around the clock.
type LoadSummary struct {
	Hours        int     `json:"hours"`
	MinReplicas  int     `json:"min_replicas"`
	PeakReplicas int     `json:"peak_replicas"`
	MeanReplicas float64 `json:"mean_replicas"`
	// Capped is true when some hour wanted more than max replicas.
	Capped bool `json:"capped,omitempty"`
}

// CostBreakdown splits the expected cost, USD.
type CostBreakdown struct {
	Compute        float64 `json:"compute"`
	PreemptionLoss float64 `json:"preemption_loss"`
	Restart        float64 `json:"restart"`
	// Hedge is the cost of extra spot replicas kept so a zone's spot loss
	// does not drop an inference service below min replicas.
	Hedge float64 `json:"hedge"`
}

// Group is a set of identical instances in one place.
type Group struct {
	Cloud           pricing.Cloud        `json:"cloud"`
	Region          string               `json:"region"`
	Zone            string               `json:"zone"`
	InstanceType    string               `json:"instance_type"`
	GPU             pricing.GPUModel     `json:"gpu"`
	GPUsPerInstance int                  `json:"gpus_per_instance"`
	Instances       int                  `json:"instances"`
	Capacity        pricing.CapacityType `json:"capacity"`
	PricePerHour    float64              `json:"price_per_hour"`
	// SpotPool is the spot pool of a spot group ("cloud/zone/gpu") and
	// PlacementScore its best spot placement score (1-10), 0 when unknown.
	SpotPool       string `json:"spot_pool,omitempty"`
	PlacementScore int    `json:"placement_score,omitempty"`
	// Interconnect is the instance type's GPU network ("efa",
	// "gpudirect-tcpx", "gpudirect-tcpxo", "gpudirect-rdma",
	// "infiniband"), empty when it has none.
	Interconnect string `json:"interconnect,omitempty"`
	// Slots, when a live stage pinned them (fleet.HedgedSource), are the
	// fleet slot indexes of the group's instances, one per instance, so a
	// replica keeps its slot while others move between pools; empty, the
	// slots are numbered in group order.
	Slots []int `json:"slots,omitempty"`
	// Move is set by the fleet's live training stage when its policy moves
	// a running job here: the reconciler replaces a running instance that
	// is elsewhere. Without it a running instance stays where it runs
	// when the plan changes (fleet/training.go).
	Move bool `json:"move,omitempty"`
}

// RunnerUp is the alternative that came closest, and why it lost.
type RunnerUp struct {
	Cloud         pricing.Cloud        `json:"cloud"`
	Region        string               `json:"region"`
	Zone          string               `json:"zone"`
	InstanceType  string               `json:"instance_type"`
	GPU           pricing.GPUModel     `json:"gpu"`
	Capacity      pricing.CapacityType `json:"capacity"`
	ExpectedCost  float64              `json:"expected_cost"`
	ExpectedHours float64              `json:"expected_hours"`
	// Constraint names what ruled it out ("deadline", "memory",
	// "spot_policy", "quota", "budget", "no_finish", "cost").
	Constraint string `json:"constraint"`
	Reason     string `json:"reason"`
}

// GPUChoice is one GPU model's best option for a workload.
type GPUChoice struct {
	GPU pricing.GPUModel `json:"gpu"`
	// Feasible is false when no offer of the model meets the workload.
	Feasible     bool                 `json:"feasible"`
	Capacity     pricing.CapacityType `json:"capacity,omitempty"`
	Where        string               `json:"where,omitempty"`
	ExpectedCost float64              `json:"expected_cost,omitempty"`
	// CostPerUnit is USD per reference GPU-hour of work (jobs) or per
	// replica-hour (inference).
	CostPerUnit float64 `json:"cost_per_unit,omitempty"`
	Reason      string  `json:"reason,omitempty"`
}

// Totals sum the placements.
type Totals struct {
	ExpectedCost     float64 `json:"expected_cost"`
	OnDemandBaseline float64 `json:"on_demand_baseline"`
	Savings          float64 `json:"savings"`
	SavingsPercent   float64 `json:"savings_percent"`
	GPUs             int     `json:"gpus"`
}

// Bound is the proof of how close the plan is to optimal.
type Bound struct {
	// LowerBound is a Lagrangian lower bound on the cost of any plan that
	// meets the quotas and budgets: no plan can cost less.
	LowerBound float64 `json:"lower_bound"`
	// Gap is (expected cost − lower bound) ÷ lower bound, as a percentage.
	GapPercent float64 `json:"gap_percent"`
	Method     string  `json:"method"`
}
