package optimizer

import (
	"math"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// Throughput is how fast one GPU is, either from its spec sheet or measured
// by the agent's benchmark.
type Throughput struct {
	// TFLOPS is dense BF16/FP16 tensor throughput per GPU.
	TFLOPS float64 `json:"tflops"`
	// MemoryBandwidthGBs is memory bandwidth per GPU in GB/s.
	MemoryBandwidthGBs float64 `json:"memory_bandwidth_gbs"`
	// Source says where the figures come from ("spec sheet", "benchmark ...").
	Source string `json:"source"`
}

// SpeedTable gives the optimizer each GPU's throughput. Today it is filled
// from the spec table (DefaultSpeeds); the broker overlays measured figures
// per instance type as agents report benchmarks, without changing the
// optimizer.
type SpeedTable struct {
	// ByGPU is the throughput of each GPU model.
	ByGPU map[pricing.GPUModel]Throughput
	// ByInstance overrides ByGPU for one instance type, keyed by
	// InstanceKey(cloud, instance type): measured figures differ between
	// clouds' variants of one GPU (PCIe vs SXM, power caps, clocks).
	ByInstance map[string]Throughput
	// BandwidthWeight is the weight of memory bandwidth in the blended
	// training speed (0 = tensor TFLOPS only, 1 = bandwidth only). Default 0.3.
	BandwidthWeight float64
}

// DefaultBandwidthWeight is the share of memory bandwidth in the blended
// training speed. Dense matmuls are compute bound, but attention, norms,
// optimizer steps and all-reduce are memory bound; measured large-model
// training reaches 35-50% of peak TFLOPS, and the shortfall tracks memory
// bandwidth. 0.3 keeps TFLOPS dominant while not letting a GPU with high peak
// TFLOPS and slow memory (L4, L40S) look as fast as an H100 per TFLOP.
const DefaultBandwidthWeight = 0.3

// InstanceKey is the ByInstance key of an offer's instance type.
func InstanceKey(c pricing.Cloud, instanceType string) string {
	return string(c) + "/" + instanceType
}

// DefaultSpeeds is the speed table from the GPU spec sheets.
func DefaultSpeeds() SpeedTable {
	t := SpeedTable{ByGPU: map[pricing.GPUModel]Throughput{}, BandwidthWeight: DefaultBandwidthWeight}
	for _, s := range pricing.Specs() {
		t.ByGPU[s.Model] = Throughput{TFLOPS: s.TensorTFLOPS, MemoryBandwidthGBs: s.MemoryBandwidthGBs, Source: "spec sheet: " + s.Source}
	}
	return t
}

// throughput returns the figures for one offer: the instance's measured
// figures when known, else the GPU's.
func (t SpeedTable) throughput(o *pricing.Offer) (Throughput, bool) {
	if th, ok := t.ByInstance[InstanceKey(o.Cloud, o.InstanceType)]; ok && th.TFLOPS > 0 {
		return th, true
	}
	th, ok := t.ByGPU[o.GPU]
	if !ok || th.TFLOPS <= 0 {
		if s, known := pricing.Spec(o.GPU); known {
			return Throughput{TFLOPS: s.TensorTFLOPS, MemoryBandwidthGBs: s.MemoryBandwidthGBs, Source: "spec sheet"}, true
		}
		return Throughput{}, false
	}
	return th, true
}

// gpuThroughput is throughput for a model without an instance.
func (t SpeedTable) gpuThroughput(m pricing.GPUModel) (Throughput, bool) {
	o := pricing.Offer{GPU: m}
	return t.throughput(&o)
}

// blend is the weighted geometric mean of TFLOPS and bandwidth, the speed
// score relative speeds are ratios of. A missing bandwidth falls back to
// TFLOPS alone.
func (t SpeedTable) blend(th Throughput) float64 {
	w := t.BandwidthWeight
	if w < 0 || w > 1 || math.IsNaN(w) {
		w = DefaultBandwidthWeight
	}
	if th.MemoryBandwidthGBs <= 0 {
		w = 0
	}
	if w == 0 {
		return th.TFLOPS
	}
	return math.Pow(th.TFLOPS, 1-w) * math.Pow(th.MemoryBandwidthGBs, w)
}

// RelativeSpeed is how much faster one GPU of the offer trains than one
// reference GPU (2 = twice the work per hour).
func (t SpeedTable) RelativeSpeed(o *pricing.Offer, ref pricing.GPUModel) (float64, bool) {
	th, ok := t.throughput(o)
	if !ok {
		return 0, false
	}
	rt, ok := t.gpuThroughput(ref)
	if !ok {
		return 0, false
	}
	r := t.blend(rt)
	if r <= 0 {
		return 0, false
	}
	return t.blend(th) / r, true
}

// Scaling efficiency: synchronous data-parallel training loses a little to
// gradient all-reduce each time the GPU count doubles, more when the GPUs sit
// in different instances (network instead of NVLink/PCIe). The default
// figures (policy.DefaultIntraNodeScaling, policy.DefaultInterNodeScaling)
// are the rule of thumb from published scaling studies; a policy's
// scaling: field overrides them.

// ScalingEfficiency is the share of linear speed-up kept by gpusPerInstance
// GPUs in each of instances instances, at the default figures.
func ScalingEfficiency(gpusPerInstance, instances int) float64 {
	return Scaling{policy.DefaultIntraNodeScaling, policy.DefaultInterNodeScaling}.Efficiency(gpusPerInstance, instances)
}

// Scaling is the share of linear speed-up kept per doubling of GPUs inside
// an instance (Intra) and per doubling of instances (Inter).
type Scaling struct{ Intra, Inter float64 }

// Efficiency is the share of linear speed-up kept by gpusPerInstance GPUs
// in each of instances instances.
func (sc Scaling) Efficiency(gpusPerInstance, instances int) float64 {
	e := 1.0
	if gpusPerInstance > 1 {
		e *= math.Pow(sc.Intra, math.Log2(float64(gpusPerInstance)))
	}
	if instances > 1 {
		e *= math.Pow(sc.Inter, math.Log2(float64(instances)))
	}
	return e
}

// ReferenceShape is the layout a job's work size is measured on: its GPUs
// in one instance up to 8, else in 8-GPU instances. "8 GPUs × 48 h = 384
// GPU-hours" means 48 h on one 8-GPU reference instance, so that shape
// runs the job in exactly work ÷ GPUs hours; other shapes are scaled by
// their efficiency relative to it (docs/plan.md "Multi-GPU jobs").
func ReferenceShape(gpus int) (gpusPerInstance, instances int) {
	if gpus <= 8 {
		return gpus, 1
	}
	return 8, (gpus + 7) / 8
}

// RelativeEfficiency is a shape's efficiency over the reference shape's
// for the same total GPUs.
func (sc Scaling) RelativeEfficiency(gpusPerInstance, instances int) float64 {
	rg, ri := ReferenceShape(gpusPerInstance * instances)
	return sc.Efficiency(gpusPerInstance, instances) / sc.Efficiency(rg, ri)
}
