package aws

import (
	"context"
	"testing"

	"github.com/gpubroker/gpubroker/providers"
)

// BenchmarkComputeList lists 10,000 tagged instances (among 12,000) in two
// regions through the EC2 fake: the calls per List grow with pages, not
// with instances.
func BenchmarkComputeList(b *testing.B) {
	f := newFakeEC2(b)
	mine := map[string]string{"gpubroker/managed": "true"}
	for i := range 12000 {
		region, zone := "us-east-1", "us-east-1a"
		if i%2 == 1 {
			region, zone = "us-west-2", "us-west-2a"
		}
		tags := mine
		if i%6 == 5 {
			tags = map[string]string{"team": "other"}
		}
		f.add(region, zone, "g5.xlarge", "spot", "running", tags)
	}
	c := newTestCompute(b, f, nil)
	before := f.count("DescribeInstances")
	for b.Loop() {
		got, err := c.List(context.Background(), providers.Filter{Tags: mine})
		if err != nil || len(got) != 10000 {
			b.Fatalf("%d, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(f.count("DescribeInstances")-before)/float64(b.N), "calls/op")
}
