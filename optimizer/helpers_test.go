package optimizer

import (
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

var testNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func embedded(t testing.TB) *pricing.Catalog {
	t.Helper()
	c, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	// What Solve plans on: tests that derive deadlines or quotas from the
	// catalog see the same offers.
	return c.ForPlanning()
}

// fleetPolicy is a realistic fleet built in Go: a multi-GPU training job
// with a deadline, an inference service and a batch job.
func fleetPolicy() *policy.Policy {
	return &policy.Policy{
		File:    "fleet.go",
		Clouds:  []pricing.Cloud{pricing.AWS, pricing.GCP, pricing.Azure},
		Regions: []string{"*"},
		Horizon: 720 * time.Hour,
		Workloads: []policy.Workload{
			{
				Name: "llm-finetune", Team: "research", Kind: policy.Training,
				GPU:          policy.GPUNeed{Count: 8, MinMemoryGiB: 40},
				WorkGPUHours: 450, ReferenceGPU: pricing.A100_80,
				Deadline: 72 * time.Hour, CheckpointInterval: time.Hour, RestartOverhead: 15 * time.Minute,
				Spot: policy.SpotPrefer,
			},
			{
				Name: "chat-api", Team: "product", Kind: policy.Inference,
				GPU:             policy.GPUNeed{Count: 1, MinMemoryGiB: 16},
				RestartOverhead: 5 * time.Minute,
				Spot:            policy.SpotPrefer,
				Replicas:        policy.Replicas{Min: 4, Max: 12, TargetUtilization: 0.6},
				Spread:          policy.Spread{MinZones: 2, MinClouds: 2},
			},
			{
				Name: "embeddings-backfill", Team: "research", Kind: policy.Batch,
				GPU:          policy.GPUNeed{Count: 1, MinMemoryGiB: 16},
				WorkGPUHours: 300, ReferenceGPU: pricing.T4,
				CheckpointInterval: 30 * time.Minute, RestartOverhead: 5 * time.Minute,
				Spot: policy.SpotOnly,
			},
		},
	}
}
