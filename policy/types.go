// Package policy is gpubroker's policy file: the YAML a platform team writes
// to say which clouds and regions it allows, which workloads it runs, and its
// quotas and budgets. The package parses and validates the file (every error
// carries file:line:col), applies defaults, and exposes plain data structs.
// It never reads prices.
package policy

import (
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

// Kind is what sort of workload it is.
type Kind string

// Workload kinds.
const (
	Training  Kind = "training"
	Inference Kind = "inference"
	Batch     Kind = "batch"
)

// SpotPolicy says whether a workload may run on spot capacity.
type SpotPolicy string

// Spot policies.
const (
	SpotNever  SpotPolicy = "never"
	SpotPrefer SpotPolicy = "prefer"
	SpotOnly   SpotPolicy = "only"
)

// Pos is a position in a policy file, for error messages.
type Pos struct {
	File string
	Line int
	Col  int
}

// Policy is a whole policy file after defaults are applied.
type Policy struct {
	// File is the path the policy was read from.
	File string
	// parsed: Parse built it, with its defaults applied to the fields the
	// file left out; SetDefaults leaves it alone, so a written zero stays.
	parsed bool
	// Clouds allowed for every workload; defaults to all.
	Clouds []pricing.Cloud
	// Regions are glob patterns allowed for every workload; defaults to "*".
	Regions []string
	// Residency limits every workload to regions in these geographies
	// ("us", "eu", "apac"); empty means anywhere.
	Residency []string
	// Horizon is the period inference costs and monthly budgets are planned
	// over; default 720h (30 days).
	Horizon time.Duration
	// SpotDefaults overrides the built-in expected interruptions per hour per
	// cloud, used where the catalog has no spot signal.
	SpotDefaults map[pricing.Cloud]float64
	// SpotPoolGPUs is the most spot GPUs the planner puts in one pool (an
	// instance type in one zone, or Azure region) for one workload: spot
	// capacity is finite, and large asks are where preemptions cluster.
	SpotPoolGPUs int
	// SpotCapacity is the spot GPUs one pool (a GPU model in one zone;
	// Azure: region) gives the whole fleet: a capacity row shared by every
	// workload, like a quota.
	SpotCapacity SpotCapacity
	// Scaling is how much of the linear speed-up multi-GPU jobs keep;
	// workloads may override it.
	Scaling   Scaling
	Workloads []Workload
	Quotas    []Quota
	Budgets   []Budget
}

// GPUNeed is what GPUs a workload needs.
type GPUNeed struct {
	// Models allowed; empty means "any that fits".
	Models []pricing.GPUModel
	// Count is the job's total GPUs (training and batch: they may span
	// several identical instances in one zone), or GPUs per replica
	// (inference).
	Count int
	// Interconnect, when InterconnectRequired, limits a job spanning
	// several instances to instance types with a high-speed GPU network
	// (AWS EFA, GCP GPUDirect-TCPX/TCPXO/RDMA, Azure InfiniBand).
	Interconnect string
	// MinMemoryGiB is the least memory per GPU.
	MinMemoryGiB float64
}

// Replicas is an inference service's serving need.
type Replicas struct {
	Min int
	Max int
	// TargetUtilization is the GPU utilisation the autoscaler aims for (0..1).
	TargetUtilization float64
}

// Autoscale says how an inference service scales between replicas.min and
// replicas.max: on the GPU utilisation its agents report (against
// replicas.target_utilization) and, when Prometheus is set, on a load metric
// per replica; the larger recommendation wins, as in Kubernetes' HPA.
type Autoscale struct {
	Prometheus *PrometheusMetric
	// ScaleUpWindow and ScaleDownWindow are stabilisation windows: a scale
	// down takes the highest recommendation of the last ScaleDownWindow
	// (default 5m), a scale up the lowest of the last ScaleUpWindow
	// (default 0: at once).
	ScaleUpWindow   time.Duration
	ScaleDownWindow time.Duration
}

// Availability is an inference service's availability goal: the share of
// time it should hold its replicas at target, over a rolling window. The
// live spot policy hedges harder as the goal's error budget (the time
// below target it still allows) runs low.
type Availability struct {
	Goal   float64       // share of time at target, in (0, 1)
	Window time.Duration // the rolling period it is measured over, 1h to MaxAvailabilityWindow
}

// MaxAvailabilityWindow is the longest availability.window: the store
// keeps services' time below target this long (store.ShortfallKeep).
const MaxAvailabilityWindow = 90 * 24 * time.Hour

// PrometheusMetric is a load metric read from Prometheus.
type PrometheusMetric struct {
	// URL is the Prometheus server (http://prometheus:9090).
	URL string
	// Query is a PromQL expression giving the service's total load, e.g.
	// sum(rate(http_requests_total{service="chat"}[2m])).
	Query string
	// TargetPerReplica is the load one replica should carry.
	TargetPerReplica float64
}

// Interconnect needs (GPUNeed.Interconnect).
const (
	InterconnectAny      = "any"
	InterconnectRequired = "required"
)

// Scaling is the share of linear speed-up synchronous data-parallel
// training keeps: IntraNode per doubling of GPUs inside one instance
// (NVLink/PCIe), InterNode per doubling of instances (network). Zero
// fields mean "inherit" (workload from policy, policy from the defaults).
type Scaling struct {
	IntraNode float64
	InterNode float64
}

// Spread says how widely inference replicas must be spread.
type Spread struct {
	// MinZones is the least number of distinct zones replicas run in.
	MinZones int
	// MinClouds is the least number of distinct clouds.
	MinClouds int
}

// Limits restrict where a single workload may run, on top of the policy-wide
// limits.
type Limits struct {
	Clouds    []pricing.Cloud
	Regions   []string // globs
	Zones     []string // globs
	Residency []string
}

// Workload is one training job, batch job or inference service.
type Workload struct {
	Name string
	Team string
	Kind Kind
	GPU  GPUNeed
	// WorkGPUHours is the work size in GPU-hours on ReferenceGPU (training
	// and batch).
	WorkGPUHours float64
	ReferenceGPU pricing.GPUModel
	// Deadline is how long after start the work must be done; 0 = none.
	Deadline time.Duration
	// CheckpointInterval is how often progress is saved; 0 means a
	// preemption loses everything since start.
	CheckpointInterval time.Duration
	// RestartOverhead is the time lost to each restart (provisioning, loading
	// the checkpoint).
	RestartOverhead time.Duration
	Spot            SpotPolicy
	// SpotDecider names the live spot policy (fleet/spotpolicy) that runs
	// the workload while it is up: a training policy (adaptive by default)
	// for training and batch jobs, an inference policy (adaptive by
	// default) for services. Empty means the default. Policy key
	// spot_policy.
	SpotDecider string
	Replicas    Replicas
	// Autoscale tunes how an inference service's replicas follow load.
	Autoscale Autoscale
	// Availability is an inference service's availability goal.
	Availability Availability
	Spread       Spread
	Limits       Limits
	// Scaling overrides the policy's scaling efficiency for this job.
	Scaling Scaling
	// Schedule, for a training or batch job, is a cron expression (UTC):
	// the job runs on it, and is costed per run × runs per budget period.
	// Empty means it runs once.
	Schedule string
	// Load, for an inference service, is its replicas by hour; nil means
	// min replicas around the clock.
	Load *LoadProfile
	// Pos is where the workload is defined in the file.
	Pos Pos
}

// LoadProfile is an inference service's load over a day (24 entries) or a
// week (168 entries, hour 0 being Monday 00:00 UTC). Either ReplicasByHour,
// or RequestsPerSecond with RequestsPerReplica (the requests per second one
// replica serves at full utilisation; the service runs
// ceil(rate ÷ (RequestsPerReplica × replicas.target_utilization)) replicas).
// Replica counts are kept within replicas.min and replicas.max.
type LoadProfile struct {
	ReplicasByHour     []int
	RequestsPerSecond  []float64
	RequestsPerReplica float64
}

// Replicas is the replicas the service runs in each hour of the profile,
// within min and max, and whether some hour wanted more than max.
func (l *LoadProfile) Replicas(r Replicas) (out []int, capped bool) {
	minR := max(1, r.Min)
	maxR := max(minR, r.Max)
	clamp := func(n int) int {
		if n > maxR {
			capped = true
			return maxR
		}
		return max(n, minR)
	}
	if len(l.ReplicasByHour) > 0 {
		for _, n := range l.ReplicasByHour {
			out = append(out, clamp(n))
		}
		return out, capped
	}
	util := r.TargetUtilization
	if util <= 0 || util > 1 {
		util = DefaultTargetUtilization
	}
	per := l.RequestsPerReplica * util
	for _, rate := range l.RequestsPerSecond {
		n := 0
		if per > 0 && rate > 0 {
			x := rate / per
			if x > float64(MaxProfileReplicas) {
				x = float64(MaxProfileReplicas)
			}
			n = int(x)
			if float64(n) < x-1e-9 {
				n++
			}
		}
		out = append(out, clamp(n))
	}
	return out, capped
}

// MaxProfileReplicas bounds a replica count in a load profile.
const MaxProfileReplicas = 100_000

// SpotCapacity is the fleet-wide spot capacity assumed per pool.
type SpotCapacity struct {
	// DefaultGPUsPerPool is the spot GPUs a pool gives the fleet when
	// neither Pools nor a placement score says otherwise.
	DefaultGPUsPerPool int
	// Pools override the default for pools they match, first match wins.
	Pools []SpotPool
}

// SpotPool is the spot capacity of the pools matching Cloud, Zone (a glob
// over the zone, or the region where offers are regional) and GPU ("" for
// any model).
type SpotPool struct {
	// Key is the pool as written, "cloud/zone/gpu".
	Key   string
	Cloud pricing.Cloud
	Zone  string
	GPU   pricing.GPUModel
	// GPUs is the capacity; 0 means no spot there.
	GPUs int
	Pos  Pos
}

// Quota caps the GPUs in use across all workloads. Empty fields match
// everything.
type Quota struct {
	Cloud  pricing.Cloud
	Region string // glob
	Family string // GPU family, e.g. "A100"
	// MaxGPUs is the cap.
	MaxGPUs int
	Pos     Pos
}

// Budget caps spending per month for a team or a workload (or everything when
// both are empty).
type Budget struct {
	Name       string
	Team       string
	Workload   string
	MonthlyUSD float64
	// Action is what happens when spending reaches 100%: BudgetAlert
	// (default), BudgetStopScaling or BudgetSpotOnly.
	Action string
	Pos    Pos
}

// Budget actions at 100% (docs/policy.md).
const (
	// BudgetAlert records and reports the crossing; nothing else changes.
	BudgetAlert = "alert"
	// BudgetStopScaling keeps inference services at their minimum replicas
	// until the month ends.
	BudgetStopScaling = "stop-scaling"
	// BudgetSpotOnly moves the budget's workloads to spot capacity where
	// their spot policy allows it.
	BudgetSpotOnly = "spot-only"
)
