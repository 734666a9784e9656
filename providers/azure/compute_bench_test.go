package azure

import (
	"context"
	"fmt"
	"testing"

	"github.com/gpubroker/gpubroker/providers"
)

// BenchmarkComputeList lists 10,000 tagged VMs (among 12,000) of one
// resource group through the ARM fake, 1,000 a page.
func BenchmarkComputeList(b *testing.B) {
	f := newFakeARM(b)
	f.pageSize = 1000
	for i := range 12000 {
		tags := map[string]any{"gpubroker_managed": "true", TagsKey: `{"gpubroker/managed":"true"}`}
		if i%6 == 5 {
			tags = map[string]any{"team": "other"}
		}
		name := fmt.Sprintf("w-%05d", i)
		f.vms[name] = map[string]any{"name": name, "id": resID("Microsoft.Compute/virtualMachines", name), "location": "eastus", "zones": []any{"1"}, "tags": tags,
			"properties": map[string]any{"provisioningState": "Succeeded", "priority": "Spot", "hardwareProfile": map[string]any{"vmSize": "Standard_NC4as_T4_v3"},
				"timeCreated": "2026-12-02T10:00:00Z"}}
	}
	c := newTestCompute(b, f, nil)
	before := f.count("vm-list")
	for b.Loop() {
		got, err := c.List(context.Background(), providers.Filter{Tags: map[string]string{"gpubroker/managed": "true"}})
		if err != nil || len(got) != 10000 {
			b.Fatalf("%d, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(f.count("vm-list")-before)/float64(b.N), "calls/op")
}
