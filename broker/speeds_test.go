package broker

import (
	"context"
	"errors"
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
	// With fleet.replace_slow_hosts a replacement is asked for once; a
	// request that failed is asked again at the next check.
	var asked []string
	fail := true
	replace := func(_ context.Context, id, reason string) error {
		asked = append(asked, id+": "+reason)
		if fail {
			fail = false
			return errors.New("store unavailable")
		}
		return nil
	}
	if err := flagSlowHosts(ctx, b, now, replace); err == nil {
		t.Fatal("a failed replacement request was not reported")
	}
	for range 2 {
		if err := flagSlowHosts(ctx, b, now, replace); err != nil {
			t.Fatal(err)
		}
	}
	evs, _ := b.ListEvents(ctx, store.EventFilter{Kind: "slow_host"})
	if len(evs) != 1 || evs[0].Instance != "i-d" || !strings.Contains(evs[0].Message, "43% of the p5.48xlarge median") ||
		!strings.Contains(evs[0].Message, "replacing it") {
		t.Errorf("slow hosts %+v", evs)
	}
	if len(asked) != 2 || !strings.HasPrefix(asked[1], "i-d: slow host: benchmark 300 TFLOPS") {
		t.Errorf("replacements asked %q; want i-d twice (once failed)", asked)
	}
}

// TestSlowHostAdvice: without fleet.replace_slow_hosts the event tells the
// user how to replace the host.
func TestSlowHostAdvice(t *testing.T) {
	ctx := t.Context()
	b := openBroker(t, filepath.Join(t.TempDir(), "b.db"))
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for i, id := range []string{"i-a", "i-b", "i-c", "i-d"} {
		inst := store.InstanceRecord{ID: id, Cloud: "aws", Region: "us-east-1", InstanceType: "p5.48xlarge", GPU: "H100", State: store.StateRunning}
		if _, err := b.RegisterAgent(ctx, inst, "h-token-advice-"+id+"-0000000", now.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		tf := []float64{700, 720, 710, 300}[i]
		if _, err := b.AddBenchmark(ctx, store.BenchmarkRecord{Instance: id, InstanceType: "p5.48xlarge", GPU: "H100", TFLOPS: tf, At: now.Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := flagSlowHosts(ctx, b, now, nil); err != nil {
		t.Fatal(err)
	}
	evs, _ := b.ListEvents(ctx, store.EventFilter{Kind: "slow_host"})
	if len(evs) != 1 || !strings.Contains(evs[0].Message, "gpubroker fleet replace i-d") {
		t.Errorf("slow host advice %+v", evs)
	}
}
