package httpapi

import (
	"encoding/json"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// This file converts domain and store values into the apiv1 wire types:
// what the API serves is apiv1, never a store or pricing struct, so the
// store can change without changing the contract.

func apiOffer(o pricing.Offer) apiv1.Offer {
	return apiv1.Offer{Cloud: string(o.Cloud), Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
		GPU: string(o.GPU), GPUCount: o.GPUCount, GPUMemoryGiB: o.GPUMemoryGiB, VCPUs: o.VCPUs, MemoryGiB: o.MemoryGiB,
		OnDemandPrice: o.OnDemandPrice, SpotPrice: o.SpotPrice,
		Spot: apiv1.SpotSignal{Bucket: o.Spot.Bucket, InterruptionsPerHour: o.Spot.InterruptionsPerHour,
			PlacementScore: o.Spot.PlacementScore, Availability: o.Spot.Availability, Default: o.Spot.Default},
		ObservedAt: o.ObservedAt.UTC(), Source: o.Source}
}

func apiWorkload(w store.WorkloadRecord) apiv1.Workload {
	return apiv1.Workload{Name: w.Name, Team: w.Team, Kind: w.Kind, Spec: w.Spec, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
}

func apiInstance(r store.InstanceRecord) apiv1.Instance {
	in := apiv1.Instance{ID: r.ID, Hostname: r.Hostname, AgentVersion: r.AgentVersion, Cloud: r.Cloud, Region: r.Region,
		Zone: r.Zone, InstanceType: r.InstanceType, GPU: r.GPU, GPUCount: r.GPUCount, Capacity: r.Capacity,
		Workload: r.Workload, State: r.State, RegisteredAt: r.RegisteredAt, LastHeartbeat: r.LastHeartbeat,
		Load1: r.Load1, Utilization: r.Utilization, DrainState: r.DrainState, PreemptAt: r.PreemptAt}
	if len(r.Telemetry) > 0 {
		// Stored by the heartbeat handler from validated []apiv1.GPUStat.
		_ = json.Unmarshal(r.Telemetry, &in.Telemetry)
	}
	return in
}

func apiEvent(e store.EventRecord) apiv1.Event {
	return apiv1.Event{ID: e.ID, At: e.At, Kind: e.Kind, Instance: e.Instance, Workload: e.Workload,
		Message: e.Message, Data: e.Data, IdempotencyKey: e.IdempotencyKey}
}

func apiBenchmark(b store.BenchmarkRecord) apiv1.Benchmark {
	return apiv1.Benchmark{ID: b.ID, Instance: b.Instance, InstanceType: b.InstanceType, GPU: b.GPU,
		TFLOPS: b.TFLOPS, MemBandwidthGB: b.MemBandwidthGB, At: b.At}
}

// mapList converts a list for an apiv1.List answer ([] rather than null).
func mapList[S, T any](in []S, f func(S) T) apiv1.List[T] {
	out := make([]T, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return apiv1.List[T]{Items: out}
}
