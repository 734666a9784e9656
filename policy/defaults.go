package policy

import (
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

// Defaults applied to fields a policy leaves out. docs/policy.md lists them.
const (
	// Version is the policy file format this package reads.
	Version = 1
	// DefaultHorizon is a month of 30 days: monthly budgets and inference
	// costs are planned over it.
	DefaultHorizon = 720 * time.Hour
	// DefaultGPUCount is one GPU per instance (per replica).
	DefaultGPUCount = 1
	// DefaultReferenceGPU is the GPU that work sizes are measured on when
	// the workload allows several models: A100-80GB hours are what most
	// training estimates are quoted in. A workload that allows exactly one
	// model is measured on that model instead.
	DefaultReferenceGPU = pricing.A100_80
	// DefaultRestartOverhead is the time a restart after preemption costs:
	// provisioning a new VM, pulling the image, loading a checkpoint.
	DefaultRestartOverhead = 10 * time.Minute
	// DefaultSpot lets the optimizer use spot capacity where it is cheaper
	// after expected preemption losses, for every kind of workload.
	DefaultSpot = SpotPrefer
	// DefaultTargetUtilization is the GPU utilisation inference autoscaling
	// aims for, leaving headroom for bursts.
	DefaultTargetUtilization = 0.7
	// DefaultAvailabilityGoal and DefaultAvailabilityWindow: an inference
	// service is held at target 99% of any 30 days.
	DefaultAvailabilityGoal   = 0.99
	DefaultAvailabilityWindow = 30 * 24 * time.Hour
	// DefaultMinZones and DefaultMinClouds: no spreading required.
	DefaultMinZones  = 1
	DefaultMinClouds = 1
	// MaxGPUsPerInstance is the most GPUs any cloud puts in one instance
	// (GCP a2-megagpu-16g): the limit of an inference replica.
	MaxGPUsPerInstance = 16
	// MaxJobGPUs is the most GPUs one training or batch job may ask for
	// (spread over identical instances).
	MaxJobGPUs = 16384
	// DefaultIntraNodeScaling and DefaultInterNodeScaling: the share of
	// linear speed-up kept per doubling of GPUs inside an instance and
	// per doubling of instances, the rule of thumb from published
	// data-parallel scaling studies (≈90-95% inside, ≈85-90% across).
	DefaultIntraNodeScaling = 0.95
	DefaultInterNodeScaling = 0.90
	// DefaultSpotPoolGPUs is the spot GPUs assumed available per pool when
	// no placement score says otherwise: four 8-GPU instances.
	DefaultSpotPoolGPUs = 32
	// DefaultSpotCapacityGPUs is the spot GPUs one pool (a GPU model in
	// one zone; Azure: region) is assumed to give the whole fleet when no
	// placement score or spot_capacity entry says otherwise: eight 8-GPU
	// instances, the size of the large spot asks that clouds report
	// failing with insufficient capacity.
	DefaultSpotCapacityGPUs = 64
)

// SetDefaults fills in every field left at its zero value with its default,
// for policies built in code. A zero that is meant (no restart overhead) must
// be set after calling it. Parse applies the same defaults, but only to the
// fields the file leaves out, so a written zero is kept and validated; on a
// policy Parse or Load returned, SetDefaults does nothing (it would turn a
// written `restart_overhead: 0` into the default and plan another fleet).
func (p *Policy) SetDefaults() {
	if p.parsed {
		return
	}
	p.applyDefaults(func(scope, int, string) bool { return false })
}

type scope int

const (
	scopeTop scope = iota
	scopeWorkload
	scopeQuota
	scopeBudget
)

// applyDefaults fills in unset fields. isSet says whether the file wrote a
// field (always false for policies built in code, where zero means unset).
func (p *Policy) applyDefaults(isSet func(s scope, i int, field string) bool) {
	if len(p.Clouds) == 0 && !isSet(scopeTop, 0, "clouds") {
		p.Clouds = pricing.Clouds()
	}
	if len(p.Regions) == 0 && !isSet(scopeTop, 0, "regions") {
		p.Regions = []string{"*"} // every region
	}
	if p.Horizon == 0 && !isSet(scopeTop, 0, "horizon") {
		p.Horizon = DefaultHorizon
	}
	if p.SpotPoolGPUs == 0 && !isSet(scopeTop, 0, "spot_pool_gpus") {
		p.SpotPoolGPUs = DefaultSpotPoolGPUs
	}
	if p.SpotCapacity.DefaultGPUsPerPool == 0 && !isSet(scopeTop, 0, "spot_capacity.default_gpus_per_pool") {
		p.SpotCapacity.DefaultGPUsPerPool = DefaultSpotCapacityGPUs
	}
	if p.Scaling.IntraNode == 0 && !isSet(scopeTop, 0, "scaling.intra_node") {
		p.Scaling.IntraNode = DefaultIntraNodeScaling
	}
	if p.Scaling.InterNode == 0 && !isSet(scopeTop, 0, "scaling.inter_node") {
		p.Scaling.InterNode = DefaultInterNodeScaling
	}
	for i := range p.Workloads {
		w := &p.Workloads[i]
		set := func(f string) bool { return isSet(scopeWorkload, i, f) }
		if w.GPU.Count == 0 && !set("gpu.count") {
			w.GPU.Count = DefaultGPUCount
		}
		if w.Spot == "" && !set("spot") {
			w.Spot = DefaultSpot
		}
		if w.GPU.Interconnect == "" && !set("gpu.interconnect") {
			w.GPU.Interconnect = InterconnectAny
		}
		if w.Scaling.IntraNode == 0 && !set("scaling.intra_node") {
			w.Scaling.IntraNode = p.Scaling.IntraNode
		}
		if w.Scaling.InterNode == 0 && !set("scaling.inter_node") {
			w.Scaling.InterNode = p.Scaling.InterNode
		}
		switch w.Kind {
		case Training, Batch:
			if w.ReferenceGPU == "" && !set("work.reference_gpu") {
				w.ReferenceGPU = DefaultReferenceGPU
				if len(w.GPU.Models) == 1 && knownGPU(w.GPU.Models[0]) {
					w.ReferenceGPU = w.GPU.Models[0]
				}
			}
			// A written zero means "restarts are free"; only the file can
			// say that, since in code zero is indistinguishable from unset.
			if w.RestartOverhead == 0 && !set("restart_overhead") {
				w.RestartOverhead = DefaultRestartOverhead
			}
		case Inference:
			if w.RestartOverhead == 0 && !set("restart_overhead") {
				w.RestartOverhead = DefaultRestartOverhead
			}
			if w.Replicas.Max == 0 && !set("replicas.max") {
				w.Replicas.Max = w.Replicas.Min
			}
			if w.Replicas.TargetUtilization == 0 && !set("replicas.target_utilization") {
				w.Replicas.TargetUtilization = DefaultTargetUtilization
			}
			if w.Availability.Goal == 0 && !set("availability.goal") {
				w.Availability.Goal = DefaultAvailabilityGoal
			}
			if w.Availability.Window == 0 {
				w.Availability.Window = DefaultAvailabilityWindow
			}
			if w.Spread.MinZones == 0 && !set("spread.min_zones") {
				w.Spread.MinZones = DefaultMinZones
			}
			if w.Spread.MinClouds == 0 && !set("spread.min_clouds") {
				w.Spread.MinClouds = DefaultMinClouds
			}
		}
	}
	for i := range p.Budgets {
		b := &p.Budgets[i]
		if b.Name == "" && !isSet(scopeBudget, i, "name") {
			b.Name = defaultBudgetName(b)
		}
	}
}

// defaultBudgetName names a budget after what it covers.
func defaultBudgetName(b *Budget) string {
	switch {
	case b.Workload != "":
		return "workload:" + b.Workload
	case b.Team != "":
		return "team:" + b.Team
	}
	return "all"
}

func knownGPU(m pricing.GPUModel) bool {
	_, ok := pricing.Spec(m)
	return ok
}
