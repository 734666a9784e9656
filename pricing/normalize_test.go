package pricing

import (
	"testing"
	"time"
)

func TestCatalogNormalisesGPUMemory(t *testing.T) {
	c := NewCatalog([]Offer{
		{Cloud: AWS, Region: "us-east-1", InstanceType: "g6.xlarge", GPU: L4, GPUCount: 1, GPUMemoryGiB: 22.35, OnDemandPrice: 0.8},
		{Cloud: GCP, Region: "us-central1", Zone: "us-central1-a", InstanceType: "g2-standard-4", GPU: L4, GPUCount: 1, GPUMemoryGiB: 24, OnDemandPrice: 0.7},
		{Cloud: AWS, Region: "us-east-1", InstanceType: "x.odd", GPU: GPUModel("Z9"), GPUCount: 1, GPUMemoryGiB: 12.5, OnDemandPrice: 1},
	}, time.Now(), "test")
	got := c.Query(Query{MinGPUMemoryGiB: 24})
	n := 0
	for _, o := range got {
		if o.GPU == L4 {
			n++
			if o.GPUMemoryGiB != 24 {
				t.Errorf("%s L4 memory %v, want the spec's 24", o.Cloud, o.GPUMemoryGiB)
			}
		}
	}
	if n != 2 {
		t.Errorf("min 24 GiB kept %d L4 offers, want both clouds'", n)
	}
	for _, o := range c.Offers() {
		if o.GPU == "Z9" && o.GPUMemoryGiB != 12.5 {
			t.Errorf("a model without a spec lost its reported memory: %v", o.GPUMemoryGiB)
		}
	}
}
