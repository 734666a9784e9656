package optimizer

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpubroker/gpubroker/internal/shareddata"
)

// TestSpotRatesFromTraces recomputes the trace-derived default rate from
// the shared preemption traces: per trace, preemptions are drops in the
// number of running instances between ticks, and exposure is the
// instance-hours run; the GPU rate pools every V100 (GPU) trace. Run with
// go test ./optimizer -run TestSpotRatesFromTraces -v to print the
// per-trace figures docs/plan.md quotes.
func TestSpotRatesFromTraces(t *testing.T) {
	dir := shareddata.Dir(t, "spot-traces", "preemption")
	files, err := filepath.Glob(filepath.Join(dir, "*", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces under %s: %v", dir, err)
	}
	type sum struct{ pre, hours float64 }
	byClass := map[string]*sum{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tr struct {
			Metadata struct {
				Gap float64 `json:"gap_seconds"`
			} `json:"metadata"`
			Data []float64 `json:"data"`
		}
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		pre, run := 0.0, 0.0
		for i, x := range tr.Data {
			run += x * tr.Metadata.Gap / 3600
			if i > 0 && x < tr.Data[i-1] {
				pre += tr.Data[i-1] - x
			}
		}
		rel, _ := filepath.Rel(dir, f)
		class := "cpu " + strings.SplitN(filepath.Base(filepath.Dir(f)), "-", 2)[0]
		if strings.Contains(f, "v100") {
			class = "gpu"
		}
		if byClass[class] == nil {
			byClass[class] = &sum{}
		}
		byClass[class].pre += pre
		byClass[class].hours += run
		t.Logf("%-50s %5.0f preemptions / %7.1f instance-h = %.3f/h", rel, pre, run, pre/run)
	}
	for c, s := range byClass {
		t.Logf("%s: %.0f / %.1f = %.3f/h", c, s.pre, s.hours, s.pre/s.hours)
	}
	gpu := byClass["gpu"]
	if gpu == nil {
		t.Fatal("no GPU trace")
	}
	if got := gpu.pre / gpu.hours; math.Abs(got-TraceGPUInterruptionsPerHour) > 0.0005 {
		t.Errorf("GPU rate from the traces %.4f/h, the default is %.3f/h: update TraceGPUInterruptionsPerHour", got, TraceGPUInterruptionsPerHour)
	}
}
