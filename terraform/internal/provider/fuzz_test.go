package provider

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/policy"
)

// FuzzWorkloadFromBroker feeds the provider what a broker (or anyone who
// wrote the workload through the API) may hold as a spec: reading it must
// never panic, what it reads must make a policy document the policy
// package can judge, and a spec the broker accepts must read back into the
// same workload.
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
	// Forms the policy accepts besides those the provider writes: models as
	// one string, durations that may be 0 as the number 0.
	f.Add(`{"gpu":{"models":"ANY","count":2},"work":{"gpu_hours":10},"checkpoint_interval":0,"restart_overhead":0}`, "training")
	f.Add(`{"gpu":{"models":"nvidia-h100-80gb"},"work":{"gpu_hours":10,"reference_gpu":"h100"}}`, "batch")
	f.Add(`{"replicas":{"min":1},"autoscale":{"scale_up_window":0,"scale_down_window":0},"availability":{"window":"1h"}}`, "inference")
	f.Add(`{"gpu":{"models":null},"work":{"gpu_hours":1},"deadline":null,"placement":null,"load":null}`, "training")
	// ...and near misses it refuses.
	f.Add(`{"work":{"gpu_hours":1},"deadline":0,"checkpoint_interval":0.0,"restart_overhead":-0}`, "training")
	f.Add(`{"work":{"gpu_hours":1},"checkpoint_interval":3600,"gpu":{"models":["any"],"count":"2"}}`, "training")
	f.Add(`{"work":{"gpu_hours":1},"restart_overhead":true,"gpu":{"models":7},"placement":{"clouds":"aws"}}`, "training")
	f.Fuzz(func(t *testing.T, spec, kind string) {
		// What the broker would accept (it checks with the policy package).
		want, werr := policy.WorkloadFromJSON("spec", "w", "", kind, []byte(spec))
		var m workloadModel
		rec := apiv1.Workload{Name: "w", Kind: kind, Spec: []byte(spec), CreatedAt: time.Unix(0, 0)}
		if err := m.fromRecord(rec, nil); err != nil {
			if werr == nil {
				t.Fatalf("the broker accepts %s, the provider cannot read it: %v", spec, err)
			}
			return
		}
		p, diags := m.parsePolicy(types.StringNull())
		_, _ = m.record()
		if werr != nil {
			return
		}
		// An accepted spec reads back into the same workload.
		if diags.HasError() {
			t.Fatalf("the broker accepts %s, what the provider read is refused: %v", spec, diags)
		}
		got := p.Workloads[0]
		got.Pos, want.Pos = policy.Pos{}, policy.Pos{}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s reads back as another workload:\n%+v\nwant\n%+v", spec, got, want)
		}
	})
}
