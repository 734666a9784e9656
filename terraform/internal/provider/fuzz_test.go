package provider

import (
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gpubroker/gpubroker/apiv1"
)

// FuzzWorkloadFromBroker feeds the provider what a broker (or anyone who
// wrote the workload through the API) may hold as a spec: reading it must
// never panic, and what it reads must make a policy document the policy
// package can judge.
func FuzzWorkloadFromBroker(f *testing.F) {
	f.Add(`{"gpu":{"models":["A100-80GB"],"count":8},"work":{"gpu_hours":1200},"deadline":"3d"}`, "training")
	f.Add(`{"replicas":{"min":2,"max":4,"target_utilization":0.7},"spread":{"min_zones":2},"placement":{"residency":["eu"]}}`, "inference")
	f.Add(`{"gpu":{"models":"any"}}`, "batch")
	f.Add(`{"gpu":{"count":1e400}}`, "training")
	f.Add(`[]`, "")
	f.Add(`null`, "x")
	f.Add(`{"deadline":"\u0000"}`, "training")
	f.Fuzz(func(t *testing.T, spec, kind string) {
		var m workloadModel
		rec := apiv1.Workload{Name: "w", Kind: kind, Spec: []byte(spec), CreatedAt: time.Unix(0, 0)}
		if err := m.fromRecord(rec, nil); err != nil {
			return
		}
		_, _ = m.parsePolicy(types.StringNull())
		_, _ = m.record()
	})
}
