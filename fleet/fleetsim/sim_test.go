package fleetsim

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// sharedTraces is a folder of ../shared/data/spot-traces; it skips the test
// when the data set is absent, and fails under CI.
func sharedTraces(t testing.TB, folder string) string {
	t.Helper()
	dir := "../../../shared/data/spot-traces/" + folder
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: %v; CI must not skip", dir, err)
		}
		t.Skipf("%s absent: %v", dir, err)
	}
	return dir
}

func p3(zone string, spot float64) pricing.Offer {
	return pricing.Offer{Cloud: pricing.AWS, Region: zone[:len(zone)-1], Zone: zone, InstanceType: "p3.2xlarge", GPU: pricing.V100,
		GPUCount: 1, GPUMemoryGiB: 16, VCPUs: 8, MemoryGiB: 61, OnDemandPrice: 3.06, SpotPrice: spot,
		Spot: pricing.SpotSignal{InterruptionsPerHour: 0.05}, ObservedAt: DefaultStart, Source: "test"}
}

func testCatalog() *pricing.Catalog {
	return pricing.NewCatalog([]pricing.Offer{p3("us-east-1a", 0.97), p3("us-east-1c", 0.99), p3("us-east-1d", 1.01)}, DefaultStart, "test")
}

func mustPolicy(t testing.TB, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const smokePolicy = `
clouds: [aws]
workloads:
  - name: train
    kind: training
    gpu: {models: [V100], count: 1}
    work: {gpu_hours: 24, reference_gpu: V100}
    deadline: 72h
    checkpoint_interval: 10m
    restart_overhead: 5m
    spot: prefer
  - name: serve
    kind: inference
    gpu: {models: [V100], count: 1}
    replicas: {min: 2, max: 4}
    spot: prefer
`

func TestSmoke(t *testing.T) {
	traces, err := LoadTraceDir(sharedTraces(t, "availability/1-node/aws-02-15-2023"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Policy: mustPolicy(t, smokePolicy), Catalog: testCatalog(), Traces: traces, Seed: 1, Duration: 5 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		t.Fatal(err)
	}
}
