package gcp

import (
	"context"
	"fmt"
	"testing"

	"github.com/gpubroker/gpubroker/providers"
)

// BenchmarkComputeList lists 10,000 labelled instances (among 12,000)
// through one aggregatedList on the Compute fake.
func BenchmarkComputeList(b *testing.B) {
	f := newFakeCompute(b)
	for i := range 12000 {
		labels := map[string]string{"gpubroker_managed": "true"}
		if i%6 == 5 {
			labels = map[string]string{"team": "other"}
		}
		f.add([]string{"us-central1-a", "europe-west4-b"}[i%2], fmt.Sprintf("w-%05d", i), "g2-standard-8", "SPOT", "RUNNING", labels)
	}
	c := newTestGCPCompute(b, f, nil)
	before := f.count("list")
	for b.Loop() {
		got, err := c.List(context.Background(), providers.Filter{Tags: map[string]string{"gpubroker/managed": "true"}})
		if err != nil || len(got) != 10000 {
			b.Fatalf("%d, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(f.count("list")-before)/float64(b.N), "calls/op")
}
