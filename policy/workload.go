package policy

import (
	"slices"

	"github.com/gpubroker/gpubroker/pricing"
)

// AllowsGPU reports whether a workload may run on a GPU model with the given
// memory per GPU: the model is in its list (or the list is empty, "any that
// fits") and has at least MinMemoryGiB. Pass the offer's own memory figure:
// clouds report usable memory, a little under the datasheet's (AWS lists the
// 24 GB A10G as 22.35 GiB).
func (w *Workload) AllowsGPU(m pricing.GPUModel, memoryGiB float64) bool {
	if len(w.GPU.Models) > 0 && !slices.Contains(w.GPU.Models, m) {
		return false
	}
	return memoryGiB >= w.GPU.MinMemoryGiB
}

// Workload returns the workload with the given name, or nil.
func (p *Policy) Workload(name string) *Workload {
	for i := range p.Workloads {
		if p.Workloads[i].Name == name {
			return &p.Workloads[i]
		}
	}
	return nil
}

// Covers reports whether a budget applies to a workload: it names the
// workload, or its team, or neither (a budget for everything).
func (b *Budget) Covers(w *Workload) bool {
	switch {
	case b.Workload != "":
		return b.Workload == w.Name
	case b.Team != "":
		return b.Team == w.Team
	}
	return true
}

// Matches reports whether a quota counts GPUs of a model in a cloud region.
// Empty quota fields match everything.
func (q *Quota) Matches(cloud pricing.Cloud, region string, m pricing.GPUModel) bool {
	if q.Cloud != "" && q.Cloud != cloud {
		return false
	}
	if q.Region != "" && !matchAny([]string{q.Region}, region) {
		return false
	}
	if q.Family != "" {
		s, ok := pricing.Spec(m)
		if !ok || s.Family != q.Family {
			return false
		}
	}
	return true
}

// SpotSignalDefaults returns the per-cloud spot signals to assume where the
// catalog has none: pricing's built-in defaults, overridden by the policy's
// spot_defaults. Every entry is marked Default. Note that
// pricing.EmbeddedCatalog already fills in the built-in defaults; to apply a
// policy override, replace the signal of offers whose Spot.Default is true.
func (p *Policy) SpotSignalDefaults() pricing.SpotDefaults {
	out := pricing.DefaultSpotDefaults()
	for c, v := range p.SpotDefaults {
		out[c] = pricing.SpotSignal{InterruptionsPerHour: v, Default: true}
	}
	return out
}
