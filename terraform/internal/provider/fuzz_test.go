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
	// Every key of a recurring job and of an autoscaled, load-profiled service.
	f.Add(`{"gpu":{"models":["H100"],"count":16,"interconnect":"required"},"work":{"gpu_hours":64},"schedule":"0 2 * * mon",`+
		`"spot_policy":"uniform-progress","scaling":{"intra_node":0.97,"inter_node":0.85}}`, "training")
	f.Add(`{"replicas":{"min":2,"max":10},"spot_policy":"spot-hedge","autoscale":{"prometheus":{"url":"http://u:p@prom:9090",`+
		`"query":"sum(up)","target_per_replica":50},"scale_up_window":"0","scale_down_window":"10m"},`+
		`"availability":{"goal":0.995,"window":"30d"},"load":{"replicas_by_hour":[2,2,2,2,2,2,3,4,6,8,9,10,10,10,9,8,8,7,6,5,4,3,2,2]}}`, "inference")
	f.Add(`{"replicas":{"min":1,"max":4},"load":{"requests_per_second":[1e308,0,-1,0.5],"requests_per_replica":0}}`, "inference")
	f.Add(`{"load":{"replicas_by_hour":[1.5,null]},"autoscale":{"prometheus":null},"availability":{"window":0}}`, "inference")
	f.Add(`{"schedule":"* * * *","scaling":{"intra_node":"x"},"gpu":{"interconnect":7}}`, "batch")
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
