package broker

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/store"
)

func TestMeasuredSpeedsAndSlowHosts(t *testing.T) {
	b := openBroker(t, filepath.Join(t.TempDir(), "b.db"))
	ctx := context.Background()
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	for i, id := range []string{"i-a", "i-b", "i-c", "i-d"} {
		inst := store.InstanceRecord{ID: id, Cloud: "aws", Region: "us-east-1", InstanceType: "p5.48xlarge", GPU: "H100", State: store.StateRunning}
		if _, err := b.RegisterAgent(ctx, inst, "h-token-speeds-"+id+"-000000", now.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		tf := []float64{700, 720, 710, 300}[i] // i-d is a throttled host
		if _, err := b.AddBenchmark(ctx, store.BenchmarkRecord{Instance: id, InstanceType: "p5.48xlarge", GPU: "H100", TFLOPS: tf, MemBandwidthGB: 3000, At: now.Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	// An old run outside the window and one on a type with too few runs.
	_, _ = b.AddBenchmark(ctx, store.BenchmarkRecord{Instance: "i-a", InstanceType: "p5.48xlarge", TFLOPS: 1, At: now.AddDate(0, -2, 0)})
	_, _ = b.AddBenchmark(ctx, store.BenchmarkRecord{Instance: "i-a", InstanceType: "g5.xlarge", TFLOPS: 50, At: now})
	tab, err := MeasuredSpeeds(ctx, b, now)
	if err != nil {
		t.Fatal(err)
	}
	th, ok := tab.ByInstance[optimizer.InstanceKey("aws", "p5.48xlarge")]
	// median of 300, 700, 710, 720 = 705
	if !ok || th.TFLOPS != 705 || th.MemoryBandwidthGBs != 3000 || !strings.Contains(th.Source, "median of 4 runs") {
		t.Errorf("p5 throughput %+v %v", th, ok)
	}
	if _, ok := tab.ByInstance[optimizer.InstanceKey("aws", "g5.xlarge")]; ok {
		t.Error("one run overrode the spec sheet")
	}
	if len(tab.ByGPU) == 0 {
		t.Error("spec sheets dropped")
	}
	for range 2 {
		if err := flagSlowHosts(ctx, b, now); err != nil {
			t.Fatal(err)
		}
	}
	evs, _ := b.ListEvents(ctx, store.EventFilter{Kind: "slow_host"})
	if len(evs) != 1 || evs[0].Instance != "i-d" || !strings.Contains(evs[0].Message, "43% of the p5.48xlarge median") {
		t.Errorf("slow hosts %+v", evs)
	}
}
